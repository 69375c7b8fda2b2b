//! occ platform state: one store API over PostgreSQL (production, schema `occ`) and SQLite (the
//! embedded default, one file).
//!
//! SQL lives only in this crate. Mutations run in a transaction opened with [`Store::begin`]; the
//! caller appends its audit event and enqueues its work in the same transaction and commits once,
//! so a change never exists without its evidence and its work.
//!
//! **Admission needs proof.** The mutators a client operation reaches (creating, changing and
//! deleting resources and IAM policy, admitting revisions, enqueuing work) are methods of
//! [`Authorized`] — a transaction together with the [`Evidence`] of the authorization decision
//! that allowed its operation — not of the bare [`Tx`], so code that has not been allowed cannot
//! call them. The bare `Tx` reads, appends audit records, records sign-in sessions, runs the work
//! queue and settles claimed work (transitions of state that was admitted with evidence). The database enforces the
//! platform invariants itself (see the migrations); violations come back as typed
//! [`StoreError`]s.
//!
//! Modules follow the tables: [`namespaces`], [`configurations`], [`secrets`],
//! [`service_accounts`], [`agents`], [`revisions`], [`workspace_setups`], [`iam`], [`accounts`],
//! [`queue`] and [`audit`].

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, Postgres, Sqlite, SqlitePool};

mod db;
pub mod error;
pub mod migrate;

pub mod accounts;
pub mod agent_runtime;
pub mod agents;
pub mod audit;
pub mod configurations;
pub mod credential_sources;
pub mod iam;
pub mod installation;
pub mod metrics;
pub mod namespaces;
pub mod presets;
pub mod provisioning;
pub mod queue;
pub mod revisions;
pub mod secrets;
pub mod service_accounts;
pub mod service_principals;
pub mod workspace_setups;

pub use db::Backend;
pub use error::StoreError;
pub use migrate::MigrationReport;

use db::{Conn, Query, Sql};
use occ_core::authz::{Action, Evidence, ResourceKind, ResourceRef};

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
    /// Writes, and a second pool whose sessions the server holds read-only for
    /// [`Store::begin_read`].
    Pg(PgPool, PgPool),
    /// The pool, and a fair in-process queue of writers: SQLite admits one writer, and a
    /// writer that finds the lock taken waits in SQLite's busy handler, which sleeps in steps
    /// of up to 100 ms. Queuing here first keeps that handler for other processes only.
    Sqlite(SqlitePool, Arc<WriterQueue>),
}

/// See [`Pool::Sqlite`]. Waiting is bounded like SQLite's own busy timeout, so a writer that
/// never finishes turns into "database busy", not a hang.
struct WriterQueue {
    turn: Arc<tokio::sync::Mutex<()>>,
    timeout: Duration,
}

/// The platform state store. Cheap to clone (a pool handle).
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    backend: Backend,
    signal: Arc<WorkSignal>,
}

/// The PostgreSQL channel that announces new work.
pub const WORK_CHANNEL: &str = "occ_controller_work";

/// Announces committed work: to waiters in this process at once, and (PostgreSQL) to other
/// processes with a `NOTIFY` sent by a background task after the commit. Sending it outside the
/// admission transaction keeps PostgreSQL's commit-time notify lock off the admission path, and
/// the one-slot channel coalesces bursts (at most one NOTIFY per 20 ms) without losing a wake-up.
struct WorkSignal {
    local: watch::Sender<u64>,
    remote: Option<mpsc::Sender<()>>,
}

impl WorkSignal {
    fn raise(&self) {
        self.local.send_modify(|v| *v = v.wrapping_add(1));
        if let Some(remote) = &self.remote {
            let _ = remote.try_send(());
        }
    }
}

fn spawn_notifier(pool: PgPool) -> mpsc::Sender<()> {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            if let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
                .bind(WORK_CHANNEL)
                .execute(&pool)
                .await
            {
                tracing::debug!(error = %e, "work notification not sent; workers fall back to polling");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    tx
}

/// Wakes a worker when work is committed (see [`Store::work_listener`]).
pub struct WorkListener {
    local: watch::Receiver<u64>,
    remote: Option<sqlx::postgres::PgListener>,
}

impl WorkListener {
    /// Waits until work is announced or `max` elapses. Returns whether it was woken.
    pub async fn wait(&mut self, max: Duration) -> bool {
        let sleep = tokio::time::sleep(max);
        tokio::pin!(sleep);
        tokio::select! {
            changed = self.local.changed() => {
                if changed.is_err() {
                    // every sender is gone: only the timer is left
                    (&mut sleep).await;
                }
                changed.is_ok()
            }
            notified = async {
                match self.remote.as_mut() {
                    Some(l) => l.recv().await.map(|_| ()),
                    None => std::future::pending().await,
                }
            } => {
                if let Err(e) = notified {
                    // The next recv reconnects (and re-listens); wait out this period rather
                    // than spin against a database that is down.
                    tracing::debug!(error = %e, "work listener connection lost; polling until it is back");
                    (&mut sleep).await;
                    return false;
                }
                true
            }
            () = &mut sleep => false,
        }
    }
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
        Err(StoreError::InvalidUrl(
            "it must start with postgres://, postgresql:// or sqlite://".into(),
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
                    .map_err(|e| StoreError::InvalidUrl(e.to_string()))?
                    .application_name("occ");
                let mut params = vec![("search_path".to_owned(), "occ".to_owned())];
                if !options.statement_timeout.is_zero() {
                    params.push((
                        "statement_timeout".to_owned(),
                        options.statement_timeout.as_millis().to_string(),
                    ));
                }
                let read_connect = connect.clone().options(
                    params
                        .iter()
                        .cloned()
                        .chain([("default_transaction_read_only".to_owned(), "on".to_owned())]),
                );
                connect = connect.options(params);
                let pool = PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(connect)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                let read_pool = PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_lazy_with(read_connect);
                let signal = WorkSignal {
                    local: watch::channel(0).0,
                    remote: Some(spawn_notifier(pool.clone())),
                };
                Ok(Self {
                    pool: Pool::Pg(pool, read_pool),
                    backend: Backend::Postgres,
                    signal: Arc::new(signal),
                })
            }
            Backend::Sqlite => {
                let connect = SqliteConnectOptions::from_str(url)
                    .map_err(|e| StoreError::InvalidUrl(e.to_string()))?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(options.sqlite_busy_timeout);
                // Switching a fresh file to WAL takes an exclusive lock and SQLite does not
                // always consult the busy handler for it, so processes opening the same new
                // database at once (e.g. `migrate` and `serve`) retry until the busy timeout.
                let deadline = tokio::time::Instant::now() + options.sqlite_busy_timeout;
                let pool = loop {
                    let attempt = SqlitePoolOptions::new()
                        .max_connections(options.max_connections)
                        .acquire_timeout(options.acquire_timeout)
                        .connect_with(connect.clone())
                        .await
                        .map_err(StoreError::from_sqlx);
                    match attempt {
                        Err(e) if e.is_busy() && tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        other => break other?,
                    }
                };
                let signal = WorkSignal {
                    local: watch::channel(0).0,
                    remote: None,
                };
                Ok(Self {
                    pool: Pool::Sqlite(
                        pool,
                        Arc::new(WriterQueue {
                            turn: Arc::new(tokio::sync::Mutex::new(())),
                            timeout: options.sqlite_busy_timeout,
                        }),
                    ),
                    backend: Backend::Sqlite,
                    signal: Arc::new(signal),
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
    ///
    /// Outside this crate only the controller's authorization helper and a few named places
    /// (denial audit, bootstrap, sign-in, the worker's settlement) call it: `clippy.toml`
    /// disallows it elsewhere.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        self.begin_write().await
    }

    /// [`Store::begin`], for the store's own transactions (work claims and recovery).
    pub(crate) async fn begin_write(&self) -> Result<Tx, StoreError> {
        let (inner, writer) = match &self.pool {
            Pool::Pg(p, _) => (
                TxInner::Pg(p.begin().await.map_err(StoreError::from_sqlx)?),
                None,
            ),
            Pool::Sqlite(p, writers) => {
                let turn = tokio::time::timeout(writers.timeout, writers.turn.clone().lock_owned())
                    .await
                    .map_err(|_| {
                        StoreError::busy(
                            "another writer of this process held the database too long",
                        )
                    })?;
                let tx = p
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::from_sqlx)?;
                (TxInner::Sqlite(tx), Some(turn))
            }
        };
        Ok(Tx {
            inner,
            signal: self.signal.clone(),
            enqueued: false,
            read_only: false,
            _writer_turn: writer,
        })
    }

    /// Opens a read-only session. On SQLite it is a deferred transaction (one snapshot). On
    /// PostgreSQL every statement runs on its own (autocommit) on a connection the server holds
    /// read-only (`default_transaction_read_only`), so writes are refused as before; under READ
    /// COMMITTED a BEGIN…ROLLBACK pair would give no common snapshot anyway, only two more
    /// round trips on every read request.
    pub async fn begin_read(&self) -> Result<Tx, StoreError> {
        let inner = match &self.pool {
            Pool::Pg(_, read) => {
                TxInner::PgRead(read.acquire().await.map_err(StoreError::from_sqlx)?)
            }
            Pool::Sqlite(p, _) => TxInner::Sqlite(
                p.begin_with("BEGIN DEFERRED")
                    .await
                    .map_err(StoreError::from_sqlx)?,
            ),
        };
        Ok(Tx {
            inner,
            signal: self.signal.clone(),
            enqueued: false,
            read_only: true,
            _writer_turn: None,
        })
    }

    /// A listener that wakes when work is committed: by any store of this process, and on
    /// PostgreSQL by any process (`LISTEN occ_controller_work`).
    pub async fn work_listener(&self) -> Result<WorkListener, StoreError> {
        let remote = match &self.pool {
            Pool::Pg(pool, _) => {
                let mut listener = sqlx::postgres::PgListener::connect_with(pool)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                listener
                    .listen(WORK_CHANNEL)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                Some(listener)
            }
            Pool::Sqlite(..) => None,
        };
        Ok(WorkListener {
            local: self.signal.local.subscribe(),
            remote,
        })
    }

    /// Closes the pool and waits for connections to finish.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Pg(p, read) => {
                read.close().await;
                p.close().await;
            }
            Pool::Sqlite(p, _) => p.close().await,
        }
    }

    /// The PostgreSQL pool, for LISTEN/NOTIFY wake-ups; `None` on SQLite.
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.pool {
            Pool::Pg(p, _) => Some(p),
            Pool::Sqlite(..) => None,
        }
    }
}

enum TxInner {
    Pg(sqlx::Transaction<'static, Postgres>),
    PgRead(sqlx::pool::PoolConnection<Postgres>),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

/// An open transaction. Dropping it without [`Tx::commit`] rolls it back.
pub struct Tx {
    inner: TxInner,
    signal: Arc<WorkSignal>,
    enqueued: bool,
    read_only: bool,
    /// SQLite: this process's writer slot, released after the transaction ends (declared last
    /// so it drops after `inner`).
    _writer_turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Tx {
    pub(crate) fn conn(&mut self) -> Conn<'_> {
        match &mut self.inner {
            TxInner::Pg(t) => Conn::Pg(t),
            TxInner::PgRead(c) => Conn::Pg(c),
            TxInner::Sqlite(t) => Conn::Sqlite(t),
        }
    }

    pub(crate) fn q(&mut self, sql: &'static Sql) -> Query<'_> {
        Query::new(self.conn(), sql)
    }

    /// Records that this transaction enqueued work, so its commit announces it.
    pub(crate) fn note_enqueued(&mut self) {
        self.enqueued = true;
    }

    /// Whether this is a read session ([`Store::begin_read`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The backend of this transaction.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            TxInner::Pg(_) | TxInner::PgRead(_) => Backend::Postgres,
            TxInner::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Commits. A connection failure during COMMIT is [`StoreError::CommitOutcomeUnknown`]: the
    /// caller must not assume either outcome.
    pub async fn commit(self) -> Result<(), StoreError> {
        let result = match self.inner {
            TxInner::Pg(t) => t.commit().await,
            TxInner::PgRead(_) => Ok(()),
            TxInner::Sqlite(t) => t.commit().await,
        };
        result.map_err(|e| match StoreError::from_sqlx(e) {
            StoreError::Unavailable(source) => StoreError::CommitOutcomeUnknown(source),
            other => other,
        })?;
        if self.enqueued {
            self.signal.raise();
        }
        Ok(())
    }

    /// Rolls back explicitly.
    pub async fn rollback(self) -> Result<(), StoreError> {
        let result = match self.inner {
            TxInner::Pg(t) => t.rollback().await,
            TxInner::PgRead(_) => Ok(()),
            TxInner::Sqlite(t) => t.rollback().await,
        };
        result.map_err(StoreError::from_sqlx)
    }
}

/// A write transaction with the [`Evidence`] of the decision that allowed its operation: the
/// only receiver of the admission mutators. Everything a [`Tx`] does is available through it.
///
/// `Evidence` comes only from an allowing `occ_core::authz::decide` (or bootstrap's own
/// constructor), cannot be cloned and names the action and exact resource it allowed; each
/// mutator checks that it holds the proof of *its* decision (the action and the resource it
/// changes, [`Authorized::require`]) and writes nothing otherwise. A read decision's proof is
/// another type, and [`Authorized::new`] refuses a read transaction; `clippy.toml` keeps
/// `Authorized::new` at the authorization choke point, bootstrap and test set-up.
///
/// A bare transaction has no admission mutators:
///
/// ```compile_fail,E0599
/// # async fn admit(store: &occ_store::Store, ns: &occ_core::resource::Namespace) {
/// let mut tx = store.begin_read().await.unwrap();
/// tx.namespace_insert(ns).await.unwrap();
/// # }
/// ```
///
/// A read decision's proof does not make one:
///
/// ```compile_fail,E0308
/// # fn mutate(tx: occ_store::Tx, read: occ_core::authz::ReadEvidence) {
/// let _ = occ_store::Authorized::new(tx, read);
/// # }
/// ```
///
/// Nor can a proof be forged:
///
/// ```compile_fail,E0451
/// # fn forge(tx: occ_store::Tx, records: occ_core::authz::PolicyRecords) {
/// let _ = occ_store::Authorized::new(tx, occ_core::authz::Evidence { records, grant: todo!() });
/// # }
/// ```
pub struct Authorized {
    tx: Tx,
    evidence: Evidence,
}

impl Authorized {
    /// Joins a write transaction (from [`Store::begin`]) with the evidence that allowed its
    /// operation; a read session is refused ([`StoreError::NotAuthorized`]).
    pub fn new(tx: Tx, evidence: Evidence) -> Result<Self, StoreError> {
        if tx.is_read_only() {
            return Err(StoreError::NotAuthorized(
                "an authorized transaction must be a write transaction".into(),
            ));
        }
        Ok(Self { tx, evidence })
    }

    /// The evidence, for the operation's audit event.
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    /// Refuses unless the evidence is the proof of a decision that allowed `action` on exactly
    /// `resource` (one of `actions`, for mutators several operations share): what every
    /// admission mutator checks before it writes.
    pub fn require(&self, actions: &[Action], resource: &ResourceRef) -> Result<(), StoreError> {
        self.require_where(actions, |r| r == resource)
    }

    /// [`Authorized::require`] for a decision on the Installation itself (a singleton, so its
    /// kind names it exactly): IAM, accounts and keys.
    pub fn require_installation(&self, action: Action) -> Result<(), StoreError> {
        self.require_where(&[action], |r| r.kind == ResourceKind::Installation)
    }

    /// [`Authorized::require`] for creating a `kind` directly under the Installation (a
    /// Namespace), whose collection is named by the Installation's id.
    pub fn require_installation_collection(
        &self,
        action: Action,
        kind: ResourceKind,
    ) -> Result<(), StoreError> {
        self.require_where(&[action], |r| r.kind == kind && r.namespace_id.is_none())
    }

    /// [`Authorized::require`] for removing what targets a resource being deleted: the proof of
    /// deleting exactly that `kind` and `id`.
    pub fn require_deleting(&self, kind: ResourceKind, id: &str) -> Result<(), StoreError> {
        self.require_where(&[Action::Delete], |r| r.kind == kind && r.id == id)
    }

    /// Refuses anything but bootstrap's authority.
    pub fn require_bootstrap(&self) -> Result<(), StoreError> {
        self.require_where(&[], |_| false)
    }

    /// [`Authorized::require`] for queueing `work`: the decision of the operation that asks for
    /// that convergence (create or delete the Namespace, deploy, stop or delete the Agent).
    pub fn require_work(&self, work: &occ_core::work::NewWork) -> Result<(), StoreError> {
        use occ_core::work::WorkTarget;
        let ns = &work.namespace_id;
        let agent = |actions: &[Action]| match &work.agent_id {
            Some(agent) => {
                self.require(actions, &ResourceRef::exact(ResourceKind::Agent, ns, agent))
            }
            None => Err(StoreError::NotAuthorized(
                "Agent work names no Agent".into(),
            )),
        };
        match work.target {
            WorkTarget::NamespaceReady => {
                self.require_installation_collection(Action::Create, ResourceKind::Namespace)
            }
            WorkTarget::NamespaceDeleted => {
                self.require(&[Action::Delete], &ResourceRef::namespace(ns))
            }
            WorkTarget::AgentStopped => agent(&[Action::Operate]),
            WorkTarget::AgentDeleted => agent(&[Action::Delete]),
            WorkTarget::RevisionReconcile | WorkTarget::RevisionMaintenance => {
                agent(&[Action::Deploy])
            }
            WorkTarget::AgentProvisioning => self.require(
                &[Action::Create],
                &ResourceRef::collection(ResourceKind::Agent, ns),
            ),
        }
    }

    /// The check behind every `require…`: bootstrap's authority passes; a decision passes when
    /// it allowed one of `actions` on a resource `fits` accepts.
    fn require_where(
        &self,
        actions: &[Action],
        fits: impl Fn(&ResourceRef) -> bool,
    ) -> Result<(), StoreError> {
        match (self.evidence.action(), self.evidence.resource()) {
            (None, None) => Ok(()),
            (Some(action), Some(resource)) if actions.contains(&action) && fits(resource) => Ok(()),
            (action, resource) => Err(StoreError::NotAuthorized(format!(
                "the mutation needs {} but holds the proof of {} on {:?}",
                if actions.is_empty() {
                    "bootstrap's authority".to_owned()
                } else {
                    actions
                        .iter()
                        .map(|a| a.as_str())
                        .collect::<Vec<_>>()
                        .join(" or ")
                },
                action.map_or("nothing", |a| a.as_str()),
                resource.map(|r| (r.kind, &r.id)),
            ))),
        }
    }

    /// Commits; see [`Tx::commit`].
    pub async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await
    }

    /// Rolls back explicitly; see [`Tx::rollback`].
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.tx.rollback().await
    }
}

impl std::ops::Deref for Authorized {
    type Target = Tx;
    fn deref(&self) -> &Tx {
        &self.tx
    }
}

impl std::ops::DerefMut for Authorized {
    fn deref_mut(&mut self) -> &mut Tx {
        &mut self.tx
    }
}

// So that code working on "a transaction, authorized or not" (further decisions of the same
// operation) can take either.
impl std::borrow::Borrow<Tx> for Authorized {
    fn borrow(&self) -> &Tx {
        &self.tx
    }
}

impl std::borrow::BorrowMut<Tx> for Authorized {
    fn borrow_mut(&mut self) -> &mut Tx {
        &mut self.tx
    }
}
