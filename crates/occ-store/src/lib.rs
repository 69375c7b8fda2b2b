//! occ platform state: one store API over PostgreSQL (production, schema `occ`) and SQLite (the
//! embedded default, one file).
//!
//! SQL lives only in this crate. Mutations run in a [`Tx`] opened with [`Store::begin`]; the
//! caller appends its audit event and enqueues its work in the same transaction and commits once,
//! so a change never exists without its evidence and its work. The database enforces the
//! platform invariants itself (see the migrations); violations come back as typed
//! [`StoreError`]s.
//!
//! Modules follow the tables: [`namespaces`], [`configurations`], [`secrets`],
//! [`service_accounts`], [`agents`], [`revisions`], [`workspace_setups`], [`iam`], [`accounts`],
//! [`queue`] and [`audit`].

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, Postgres, Sqlite, SqlitePool};

mod db;
pub mod error;
pub mod migrate;

pub mod accounts;
pub mod agents;
pub mod audit;
pub mod configurations;
pub mod iam;
pub mod installation;
pub mod namespaces;
pub mod queue;
pub mod revisions;
pub mod secrets;
pub mod service_accounts;
pub mod workspace_setups;

pub use db::Backend;
pub use error::StoreError;
pub use migrate::MigrationReport;

use db::{Conn, Query, Sql};

/// Connection settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Pool size.
    pub max_connections: u32,
    /// How long to wait for a pooled connection before reporting the database unavailable.
    pub acquire_timeout: Duration,
    /// Server-side statement timeout on PostgreSQL (0 = none).
    pub statement_timeout: Duration,
    /// How long an SQLite writer waits for the write lock.
    pub sqlite_busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(60),
            sqlite_busy_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Clone)]
enum Pool {
    Pg(PgPool),
    Sqlite(SqlitePool),
}

/// The platform state store. Cheap to clone (a pool handle).
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    backend: Backend,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Which backend a database URL selects, or why it selects none.
pub fn backend_of(url: &str) -> Result<Backend, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else {
        Err(StoreError::Schema(
            "the database URL must start with postgres://, postgresql:// or sqlite://".into(),
        ))
    }
}

impl Store {
    /// Opens a pool for `url` (`postgres://…` or `sqlite://PATH`). SQLite files are created when
    /// missing. Nothing is migrated here.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        match backend_of(url)? {
            Backend::Postgres => {
                let mut connect = PgConnectOptions::from_str(url)
                    .map_err(|e| StoreError::Schema(format!("invalid PostgreSQL URL: {e}")))?
                    .application_name("occ");
                let mut params = vec![("search_path".to_owned(), "occ".to_owned())];
                if !options.statement_timeout.is_zero() {
                    params.push((
                        "statement_timeout".to_owned(),
                        options.statement_timeout.as_millis().to_string(),
                    ));
                }
                connect = connect.options(params);
                let pool = PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(connect)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                Ok(Self {
                    pool: Pool::Pg(pool),
                    backend: Backend::Postgres,
                })
            }
            Backend::Sqlite => {
                let connect = SqliteConnectOptions::from_str(url)
                    .map_err(|e| StoreError::Schema(format!("invalid SQLite URL: {e}")))?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(options.sqlite_busy_timeout);
                let pool = SqlitePoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(connect)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                Ok(Self {
                    pool: Pool::Sqlite(pool),
                    backend: Backend::Sqlite,
                })
            }
        }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Begins a read-write transaction. On SQLite it takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so a transaction never fails half-way on lock upgrade.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        let inner = match &self.pool {
            Pool::Pg(p) => TxInner::Pg(p.begin().await.map_err(StoreError::from_sqlx)?),
            Pool::Sqlite(p) => TxInner::Sqlite(
                p.begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::from_sqlx)?,
            ),
        };
        Ok(Tx { inner })
    }

    /// Begins a read-only transaction (a consistent snapshot; PostgreSQL refuses writes in it).
    pub async fn begin_read(&self) -> Result<Tx, StoreError> {
        let inner = match &self.pool {
            Pool::Pg(p) => TxInner::Pg(
                p.begin_with("BEGIN TRANSACTION READ ONLY")
                    .await
                    .map_err(StoreError::from_sqlx)?,
            ),
            Pool::Sqlite(p) => TxInner::Sqlite(
                p.begin_with("BEGIN DEFERRED")
                    .await
                    .map_err(StoreError::from_sqlx)?,
            ),
        };
        Ok(Tx { inner })
    }

    /// Closes the pool and waits for connections to finish.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Pg(p) => p.close().await,
            Pool::Sqlite(p) => p.close().await,
        }
    }

    /// The PostgreSQL pool, for LISTEN/NOTIFY wake-ups; `None` on SQLite.
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.pool {
            Pool::Pg(p) => Some(p),
            Pool::Sqlite(_) => None,
        }
    }
}

enum TxInner {
    Pg(sqlx::Transaction<'static, Postgres>),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

/// An open transaction. Dropping it without [`Tx::commit`] rolls it back.
pub struct Tx {
    inner: TxInner,
}

impl Tx {
    pub(crate) fn conn(&mut self) -> Conn<'_> {
        match &mut self.inner {
            TxInner::Pg(t) => Conn::Pg(t),
            TxInner::Sqlite(t) => Conn::Sqlite(t),
        }
    }

    pub(crate) fn q(&mut self, sql: &'static Sql) -> Query<'_> {
        Query::new(self.conn(), sql)
    }

    /// The backend of this transaction.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            TxInner::Pg(_) => Backend::Postgres,
            TxInner::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Commits. A connection failure during COMMIT is [`StoreError::CommitOutcomeUnknown`]: the
    /// caller must not assume either outcome.
    pub async fn commit(self) -> Result<(), StoreError> {
        let result = match self.inner {
            TxInner::Pg(t) => t.commit().await,
            TxInner::Sqlite(t) => t.commit().await,
        };
        result.map_err(|e| match StoreError::from_sqlx(e) {
            StoreError::Unavailable(source) => StoreError::CommitOutcomeUnknown(source),
            other => other,
        })
    }

    /// Rolls back explicitly.
    pub async fn rollback(self) -> Result<(), StoreError> {
        let result = match self.inner {
            TxInner::Pg(t) => t.rollback().await,
            TxInner::Sqlite(t) => t.rollback().await,
        };
        result.map_err(StoreError::from_sqlx)
    }
}
