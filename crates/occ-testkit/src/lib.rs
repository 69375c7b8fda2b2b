//! Test harness for occ: real databases, started and cleaned up by the tests themselves.
//!
//! - [`pg_cluster`] starts one throwaway PostgreSQL cluster per test process (`initdb` +
//!   `pg_ctl`, run as the unprivileged `postgres` OS user when the tests run as root, because
//!   PostgreSQL refuses uid 0). A detached reaper watches the test process by PID and, once it
//!   exits for any reason, stops the cluster through its own PID file and removes its directory.
//! - [`TestDb::postgres`] clones a fresh database from a template migrated once per process;
//!   [`TestDb::sqlite`] copies a migrated template file into a fresh temporary directory.
//! - [`TestDb::raw`] opens a separate connection for direct SQL, to prove the database itself
//!   refuses what the application would never send.
//! - [`begin_setup`] opens a store transaction that may write test state directly (see
//!   [`setup`]).

pub mod app;
pub mod chat;
pub mod compute;
pub mod compute_conformance;
pub mod configuration_conformance;
pub mod fake_chatgpt;
pub mod fake_model;
pub mod gateway;
pub mod golden;
pub mod harness;
pub mod kube;
pub mod kubelet;
pub mod occ_process;
mod pg;
pub mod runtime;
pub mod setup;
pub mod workspace;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};

use occ_store::{Backend, Store, StoreError, StoreOptions};
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection as _, PgConnection, SqliteConnection};
use tokio::sync::OnceCell;

pub use pg::{PgCluster, pg_cluster};
pub use setup::{begin_setup, setup_evidence};

/// A fresh, migrated database for one test.
pub struct TestDb {
    /// URL for [`Store::connect`].
    pub url: String,
    /// Which backend.
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

static PG_TEMPLATE: OnceCell<()> = OnceCell::const_new();
static SQLITE_TEMPLATE: OnceCell<PathBuf> = OnceCell::const_new();
static SEQ: AtomicU32 = AtomicU32::new(0);
const TEMPLATE_DB: &str = "occ_template";

impl TestDb {
    /// A fresh PostgreSQL database cloned from the migrated template.
    pub async fn postgres() -> TestDb {
        let cluster = pg_cluster();
        PG_TEMPLATE
            .get_or_init(|| async {
                let mut admin = admin_connection(cluster).await;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "CREATE DATABASE {TEMPLATE_DB}"
                )))
                .execute(&mut admin)
                .await
                .expect("create template");
                admin.close().await.ok();
                let store = Store::connect(
                    &cluster.url(TEMPLATE_DB),
                    &StoreOptions {
                        max_connections: 1,
                        ..Default::default()
                    },
                )
                .await
                .expect("connect template");
                store.migrate().await.expect("migrate template");
                store.close().await;
            })
            .await;
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = admin_connection(cluster).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"
        )))
        .execute(&mut admin)
        .await
        .expect("clone template database");
        admin.close().await.ok();
        TestDb {
            url: cluster.url(&name),
            backend: Backend::Postgres,
            _dir: None,
        }
    }

    /// A fresh SQLite database file in its own temporary directory.
    pub async fn sqlite() -> TestDb {
        let template = SQLITE_TEMPLATE
            .get_or_init(|| async {
                let dir = tempfile::Builder::new()
                    .prefix("occ-sqlite-template")
                    .tempdir()
                    .expect("tempdir")
                    .keep();
                let path = dir.join("template.db");
                let store = Store::connect(&sqlite_url(&path), &StoreOptions::default())
                    .await
                    .expect("open template");
                store.migrate().await.expect("migrate template");
                store.close().await;
                register_removal(dir);
                path
            })
            .await;
        let dir = tempfile::Builder::new()
            .prefix("occ-sqlite")
            .tempdir()
            .expect("tempdir");
        let path = dir.path().join("occ.db");
        std::fs::copy(template, &path).expect("copy template");
        TestDb {
            url: sqlite_url(&path),
            backend: Backend::Sqlite,
            _dir: Some(dir),
        }
    }

    /// An empty, unmigrated database of the given backend.
    pub async fn empty(backend: Backend) -> TestDb {
        match backend {
            Backend::Postgres => {
                let cluster = pg_cluster();
                let name = format!(
                    "e_{}_{}",
                    std::process::id(),
                    SEQ.fetch_add(1, Ordering::Relaxed)
                );
                let mut admin = admin_connection(cluster).await;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut admin)
                    .await
                    .expect("create empty database");
                admin.close().await.ok();
                TestDb {
                    url: cluster.url(&name),
                    backend,
                    _dir: None,
                }
            }
            Backend::Sqlite => {
                let dir = tempfile::Builder::new()
                    .prefix("occ-sqlite")
                    .tempdir()
                    .expect("tempdir");
                let url = sqlite_url(&dir.path().join("occ.db"));
                TestDb {
                    url,
                    backend,
                    _dir: Some(dir),
                }
            }
        }
    }

    /// A fresh database of the given backend.
    pub async fn new(backend: Backend) -> TestDb {
        match backend {
            Backend::Postgres => Self::postgres().await,
            Backend::Sqlite => Self::sqlite().await,
        }
    }

    /// A store on this database.
    pub async fn store(&self) -> Store {
        self.store_with(&StoreOptions::default()).await
    }

    /// A store on this database with explicit options.
    pub async fn store_with(&self, options: &StoreOptions) -> Store {
        Store::connect(&self.url, options)
            .await
            .expect("connect test store")
    }

    /// A separate raw connection for direct SQL.
    pub async fn raw(&self) -> RawDb {
        match self.backend {
            Backend::Postgres => {
                let opts = PgConnectOptions::from_str(&self.url)
                    .expect("pg url")
                    .options([("search_path", "occ")]);
                RawDb::Pg(
                    PgConnection::connect_with(&opts)
                        .await
                        .expect("raw pg connection"),
                )
            }
            Backend::Sqlite => {
                let opts = SqliteConnectOptions::from_str(&self.url)
                    .expect("sqlite url")
                    .foreign_keys(true);
                RawDb::Sqlite(
                    SqliteConnection::connect_with(&opts)
                        .await
                        .expect("raw sqlite connection"),
                )
            }
        }
    }
}

/// `sqlite://` URL of a path.
pub fn sqlite_url(path: &std::path::Path) -> String {
    format!("sqlite://{}", path.display())
}

/// The SQLite template directory lives for the whole process; remove it when the process ends.
fn register_removal(dir: PathBuf) {
    pg::spawn_reaper(&[], &dir);
}

async fn admin_connection(cluster: &PgCluster) -> PgConnection {
    PgConnection::connect(&cluster.url("postgres"))
        .await
        .expect("admin connection")
}

/// A direct connection that bypasses the store, for proving database-level invariants.
pub enum RawDb {
    /// PostgreSQL (search path `occ`).
    Pg(PgConnection),
    /// SQLite (foreign keys on).
    Sqlite(SqliteConnection),
}

impl RawDb {
    /// Runs one or more statements; the error is classified like the store's.
    pub async fn execute(&mut self, sql: &str) -> Result<u64, StoreError> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        let result = match self {
            RawDb::Pg(c) => sqlx::raw_sql(sql)
                .execute(&mut *c)
                .await
                .map(|r| r.rows_affected()),
            RawDb::Sqlite(c) => sqlx::raw_sql(sql)
                .execute(&mut *c)
                .await
                .map(|r| r.rows_affected()),
        };
        result.map_err(StoreError::from_driver)
    }

    /// Runs a query returning one text column; each row's value.
    pub async fn strings(&mut self, sql: &str) -> Vec<String> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self {
            RawDb::Pg(c) => sqlx::query_scalar::<_, String>(sql)
                .fetch_all(&mut *c)
                .await
                .expect("text query"),
            RawDb::Sqlite(c) => sqlx::query_scalar::<_, String>(sql)
                .fetch_all(&mut *c)
                .await
                .expect("text query"),
        }
    }

    /// Runs a query returning one integer (e.g. `SELECT count(*) …`).
    pub async fn count(&mut self, sql: &str) -> i64 {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self {
            RawDb::Pg(c) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&mut *c)
                .await
                .expect("count query"),
            RawDb::Sqlite(c) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&mut *c)
                .await
                .expect("count query"),
        }
    }
}
