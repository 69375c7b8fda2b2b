//! Migrations and transaction atomicity.

use std::time::Duration;

use occ_store::{Backend, StoreError, StoreOptions};
use occ_testkit::TestDb;

use crate::fixtures::{configuration, namespace};

/// The newest schema version this build knows for `backend`.
fn latest(backend: Backend) -> i64 {
    let known = occ_store::migrate::migrations(backend);
    known.last().expect("at least one migration").version
}

pub async fn migrations_are_idempotent(db: TestDb) {
    let store = db.store().await;
    let again = store.migrate().await.unwrap();
    assert!(again.applied.is_empty(), "re-running applies nothing");
    assert_eq!(again.current, latest(db.backend));
    assert_eq!(store.check_schema().await.unwrap(), latest(db.backend));
}

pub async fn concurrent_migrations_are_safe(db: TestDb) {
    let fresh = TestDb::empty(db.backend).await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let url = fresh.url.clone();
        tasks.push(tokio::spawn(async move {
            let store = occ_store::Store::connect(&url, &StoreOptions::default())
                .await
                .unwrap();
            let report = store.migrate().await;
            store.close().await;
            report
        }));
    }
    let mut applied = Vec::new();
    for t in tasks {
        let report = t
            .await
            .unwrap()
            .expect("every concurrent migrator succeeds");
        assert_eq!(report.current, latest(db.backend));
        applied.extend(report.applied);
    }
    applied.sort_unstable();
    let every: Vec<i64> = occ_store::migrate::migrations(db.backend)
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(
        applied, every,
        "each migration was applied by exactly one migrator"
    );
    let store = fresh.store().await;
    assert_eq!(store.check_schema().await.unwrap(), latest(db.backend));
}

pub async fn failed_transaction_leaves_no_row(db: TestDb) {
    let store = db.store().await;
    let first = namespace("taken");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&first).await.unwrap();
    tx.commit().await.unwrap();

    let ns = namespace("half-written");
    let cfg = configuration(&ns.id);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.configuration_insert(&cfg).await.unwrap();
    let dup = namespace("taken");
    let err = tx.namespace_insert(&dup).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    tx.rollback().await.unwrap();

    let mut raw = db.raw().await;
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM namespaces WHERE id = '{}'",
            ns.id
        ))
        .await,
        0
    );
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM configurations WHERE id = '{}'",
            cfg.id
        ))
        .await,
        0
    );
}

pub async fn dropped_transaction_commits_nothing(db: TestDb) {
    let store = db.store().await;
    let ns = namespace("dropped");
    {
        let mut tx = occ_testkit::begin_setup(&store).await;
        tx.namespace_insert(&ns).await.unwrap();
        // dropped without commit
    }
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.namespace_get(&ns.id).await.unwrap().is_none());
}

/// A read session sees committed data, and never becomes an authorized (mutating)
/// transaction, even with a proof in hand.
#[expect(
    clippy::disallowed_methods,
    reason = "shows that the constructor refuses a read session"
)]
pub async fn read_sessions_are_read_only(db: TestDb) {
    let store = db.store().await;
    let ns = namespace("read-only");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.commit().await.unwrap();
    let mut read = store.begin_read().await.unwrap();
    assert_eq!(
        read.namespace_get(&ns.id).await.unwrap().map(|n| n.id),
        Some(ns.id.clone())
    );
    assert!(matches!(
        occ_store::Authorized::new(read, occ_testkit::setup_evidence()),
        Err(StoreError::NotAuthorized(_))
    ));
}

pub async fn lost_database_is_dependency_unavailable(db: TestDb) {
    let options = StoreOptions {
        max_connections: 2,
        acquire_timeout: Duration::from_secs(2),
        sqlite_busy_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let store = db.store_with(&options).await;
    let mut raw = db.raw().await;
    let ns = namespace("lost");
    match db.backend {
        Backend::Postgres => {
            let mut tx = occ_testkit::begin_setup(&store).await;
            tx.namespace_insert(&ns).await.unwrap();
            // The database goes away under the open transaction.
            raw.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
            .unwrap();
            let err = match tx.namespace_get(&ns.id).await {
                Err(e) => e,
                Ok(_) => tx.commit().await.unwrap_err(),
            };
            assert!(
                err.is_transient() || matches!(err, StoreError::CommitOutcomeUnknown(_)),
                "{err:?}"
            );
            let public: occ_core::Error = err.into();
            assert_eq!(public.code(), occ_core::ErrorCode::DependencyUnavailable);
        }
        Backend::Sqlite => {
            // Another process holds the write lock longer than the busy timeout.
            raw.execute("BEGIN IMMEDIATE").await.unwrap();
            #[expect(
                clippy::disallowed_methods,
                reason = "the store's own test of Store::begin under a held lock"
            )]
            let began = store.begin().await;
            let err = match began {
                Err(e) => e,
                Ok(_) => panic!("a write transaction must not start while the lock is held"),
            };
            assert!(err.is_transient(), "{err:?}");
            let public: occ_core::Error = err.into();
            assert_eq!(public.code(), occ_core::ErrorCode::DependencyUnavailable);
            raw.execute("ROLLBACK").await.unwrap();
        }
    }
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM namespaces WHERE id = '{}'",
            ns.id
        ))
        .await,
        0
    );
    // The store recovers once the database is back.
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.commit().await.unwrap();
}

/// Upgrading a database made before service principals had names and Namespaces had
/// built-in Roles: the bootstrap-era principal gets its row (no name) and every live Namespace
/// gets the built-in Roles the code defines.
pub async fn upgrading_gives_existing_namespaces_the_built_in_roles_and_presets(db: TestDb) {
    use occ_core::iam::{BuiltinRole, Identity, IdentityKind};
    let fresh = TestDb::empty(db.backend).await;
    let store = occ_store::Store::connect(&fresh.url, &StoreOptions::default())
        .await
        .unwrap();
    let before = store.migrate_to(8).await.unwrap();
    assert_eq!(before.current, 8);
    let ns = namespace("older");
    let spn = Identity {
        id: occ_core::IamId::generate_service_principal(),
        kind: IdentityKind::ServicePrincipal,
        namespace_id: None,
        agent_id: None,
        issuer: None,
        subject: None,
        created_at: occ_core::Timestamp::now(),
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    // Namespaces made by older builds have no built-in Roles.
    tx.namespace_insert(&ns).await.unwrap();
    for role in BuiltinRole::ALL {
        tx.role_delete(&role.id(&ns.id)).await.unwrap();
    }
    tx.identity_insert(&spn).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.migrate().await.unwrap().applied, [9, 10, 11, 12, 13]);
    let mut tx = occ_testkit::begin_setup(&store).await;
    let roles = tx.role_list(&ns.id).await.unwrap();
    assert_eq!(roles.len(), BuiltinRole::ALL.len());
    for role in BuiltinRole::ALL {
        let stored = roles
            .iter()
            .find(|r| r.id == role.id(&ns.id))
            .expect("the Role");
        assert_eq!(stored.name.as_deref(), Some(role.name()));
        assert_eq!(stored.permissions, role.permissions());
    }
    let listed = tx.service_principal_list(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((&listed[0].id, listed[0].name.as_deref()), (&spn.id, None));
    // Migration 11 gives them the built-in Presets too, as occ writes them for a new one.
    let presets = tx.preset_list(&ns.id).await.unwrap();
    let names: Vec<_> = presets.iter().map(|p| p.name.clone()).collect();
    let expected: Vec<_> = occ_core::preset::BuiltinPreset::ALL
        .iter()
        .map(|b| b.name())
        .collect();
    assert_eq!(names, expected);
    assert!(presets.iter().all(|p| p.is_unchanged_seed()));
    drop(tx);
    store.close().await;
}
