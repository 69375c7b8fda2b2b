//! Every invariant the database must enforce, attempted by direct SQL on a separate connection
//! and refused — whatever the application does.

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::ResourceRef;
use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_core::work::NewWork;
use occ_core::{AgentId, IamId, NamespaceId, RevisionId, Timestamp};
use occ_store::StoreError;
use occ_testkit::{RawDb, TestDb};
use serde_json::json;

use crate::fixtures::{add_revision, agent, configuration, namespace, world};

const TS: &str = "2026-11-29T16:00:00.000Z";

/// Runs `sql` and asserts the database refused it, naming `constraint` when given.
async fn refused(raw: &mut RawDb, sql: &str, constraint: Option<&str>) -> StoreError {
    let err = raw
        .execute(sql)
        .await
        .expect_err(&format!("the database accepted: {sql}"));
    assert!(
        matches!(
            err,
            StoreError::Invariant { .. }
                | StoreError::Reference { .. }
                | StoreError::Conflict { .. }
        ),
        "unexpected error kind for {sql}: {err:?}"
    );
    if let Some(name) = constraint {
        assert_eq!(err.constraint(), Some(name), "for {sql}");
    }
    err
}

async fn accepted(raw: &mut RawDb, sql: &str) {
    raw.execute(sql)
        .await
        .unwrap_or_else(|e| panic!("the database refused {sql}: {e:?}"));
}

pub async fn ids_names_and_timestamps_are_checked(db: TestDb) {
    let mut raw = db.raw().await;
    let good = NamespaceId::generate();
    let upper = good.as_str().to_uppercase().replacen("NS_", "ns_", 1);
    let v1 = "ns_0f8fad5b-d9cb-169f-a165-70867728950e";
    for (id, name) in [
        ("ns_bad", "ok"),
        (upper.as_str(), "ok"),
        (v1, "ok"),
        (good.as_str(), ""),
        (good.as_str(), " leading"),
        (good.as_str(), "trailing "),
        (good.as_str(), "tab\there"),
    ] {
        refused(
            &mut raw,
            &format!(
                "INSERT INTO namespaces (id, name, created_at) VALUES ('{id}', '{name}', '{TS}')"
            ),
            None,
        )
        .await;
    }
    let long = "x".repeat(201);
    refused(
        &mut raw,
        &format!(
            "INSERT INTO namespaces (id, name, created_at) VALUES ('{good}', '{long}', '{TS}')"
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &format!(
            "INSERT INTO namespaces (id, name, created_at) VALUES ('{good}', 'ok', 'not a time')"
        ),
        None,
    )
    .await;
    accepted(
        &mut raw,
        &format!(
            "INSERT INTO namespaces (id, name, created_at) VALUES ('{good}', '{}', '{TS}')",
            "é".repeat(200)
        ),
    )
    .await;
    // names are unique, tombstones included
    let other = NamespaceId::generate();
    refused(
        &mut raw,
        &format!(
            "INSERT INTO namespaces (id, name, created_at) VALUES ('{other}', '{}', '{TS}')",
            "é".repeat(200)
        ),
        None,
    )
    .await;
    // the Installation is a singleton
    accepted(
        &mut raw,
        &format!(
            "INSERT INTO installation (id, name, created_at) VALUES ('{}', 'one', '{TS}')",
            occ_core::InstallationId::generate()
        ),
    )
    .await;
    let err = refused(
        &mut raw,
        &format!(
            "INSERT INTO installation (id, name, created_at) VALUES ('{}', 'two', '{TS}')",
            occ_core::InstallationId::generate()
        ),
        None,
    )
    .await;
    assert!(matches!(err, StoreError::Conflict { .. }));
}

pub async fn configuration_kind_and_generation_are_bounded(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let mut raw = db.raw().await;
    let ns = &w.ns.id;
    for (kind, generation) in [
        ("other", "1"),
        ("agent", "0"),
        ("agent", "-1"),
        ("agent", "9007199254740992"),
    ] {
        let id = occ_core::ConfigurationId::generate();
        refused(
            &mut raw,
            &format!("INSERT INTO configurations (id, namespace_id, kind, generation, created_at) VALUES ('{id}', '{ns}', '{kind}', {generation}, '{TS}')"),
            None,
        )
        .await;
    }
    let id = occ_core::ConfigurationId::generate();
    accepted(
        &mut raw,
        &format!("INSERT INTO configurations (id, namespace_id, kind, generation, created_at) VALUES ('{id}', '{ns}', 'agent', 9007199254740991, '{TS}')"),
    )
    .await;
    let cfg = &w.cfg.id;
    refused(
        &mut raw,
        &format!("UPDATE configurations SET generation = 0 WHERE id = '{cfg}'"),
        None,
    )
    .await;
    // The generation only moves forward, and the content changes only with it.
    accepted(
        &mut raw,
        &format!("UPDATE configurations SET generation = 51 WHERE id = '{cfg}'"),
    )
    .await;
    for lower in ["2", "50"] {
        refused(
            &mut raw,
            &format!("UPDATE configurations SET generation = {lower} WHERE id = '{cfg}'"),
            Some("configuration_generation_increases"),
        )
        .await;
    }
    refused(
        &mut raw,
        &format!("UPDATE configurations SET secret_bindings = '{{\"X\": 1}}' WHERE id = '{cfg}'"),
        Some("configuration_generation_increases"),
    )
    .await;
    accepted(
        &mut raw,
        &format!(
            "UPDATE configurations SET generation = 52, secret_bindings = '{{}}' WHERE id = '{cfg}'"
        ),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE configurations SET kind = 'tool' WHERE id = '{cfg}'"),
        None,
    )
    .await;
    let other = namespace("elsewhere");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&other).await.unwrap();
    tx.commit().await.unwrap();
    refused(
        &mut raw,
        &format!(
            "UPDATE configurations SET namespace_id = '{}' WHERE id = '{id}'",
            other.id
        ),
        Some("configuration_ownership_is_immutable"),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE configurations SET secret_bindings = '[]' WHERE id = '{cfg}'"),
        None,
    )
    .await;
}

pub async fn revisions_are_immutable(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let mut raw = db.raw().await;
    for set in [
        "revision_number = 2",
        "backend_id = 'other'",
        "admitted_spec = admitted_spec",
        "admitted_at = admitted_at",
        "id = id",
        "namespace_id = namespace_id",
        "agent_id = agent_id",
        "source_revision_id = NULL",
    ] {
        refused(
            &mut raw,
            &format!("UPDATE agent_revisions SET {set} WHERE id = '{}'", rev.id),
            Some("agent_revisions_are_immutable"),
        )
        .await;
    }
    // revision numbers are positive and unique per Agent
    let mut dup = crate::fixtures::revision(&w.agent, 1);
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = tx.revision_insert(&dup).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    drop(tx);
    dup.revision = 0;
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = tx.revision_insert(&dup).await.unwrap_err();
    assert!(matches!(err, StoreError::Invariant { .. }), "{err:?}");
    drop(tx);
    // the stored revision is unchanged
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.revision_get(&w.ns.id, &w.agent.id, &rev.id)
            .await
            .unwrap()
            .unwrap(),
        rev
    );
}

pub async fn revision_snapshot_shape_is_exact(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let mut raw = db.raw().await;
    let base = serde_json::to_value(&crate::fixtures::revision(&w.agent, 1).spec).unwrap();
    let mut n = 0;
    let mut insert = |spec: serde_json::Value| {
        n += 1;
        format!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, admitted_at) \
             VALUES ('{}', '{}', '{}', {n}, '{}', '{TS}')",
            RevisionId::generate(),
            w.ns.id,
            w.agent.id,
            spec.to_string().replace('\'', "''")
        )
    };
    let mutate = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v = base.clone();
        f(v.as_object_mut().unwrap());
        v
    };
    let bad = [
        mutate(&|m| {
            m.remove("harness");
        }),
        mutate(&|m| {
            m.remove("configuration");
        }),
        mutate(&|m| {
            m.remove("harness_auth");
        }),
        mutate(&|m| {
            m.insert("extra".into(), json!(1));
        }),
        mutate(&|m| {
            m.insert("configuration".into(), json!([1, 2]));
        }),
        mutate(&|m| {
            m.insert("configuration_kind".into(), json!("tool"));
        }),
        mutate(&|m| {
            m.insert("configuration_generation".into(), json!(0));
        }),
        mutate(&|m| {
            m.insert("configuration_id".into(), json!("cfg_nope"));
        }),
        mutate(&|m| {
            m.insert(
                "harness".into(),
                json!({"id": "openclaw", "version": "1", "mode": "sideways"}),
            );
        }),
        mutate(&|m| {
            m.insert("compute".into(), json!({"id": "c"}));
        }),
        mutate(&|m| {
            m.insert("secret_bindings".into(), json!("none"));
        }),
        json!([1]),
    ];
    for spec in bad {
        let sql = insert(spec.clone());
        refused(&mut raw, &sql, None).await;
    }
    let ok = mutate(&|m| {
        m.insert("secret_driver_id".into(), json!("secret-local"));
        m.insert("secret_bindings".into(), json!({}));
    });
    let sql = insert(ok);
    accepted(&mut raw, &sql).await;
}

pub async fn revisions_are_deleted_only_with_their_agent(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let mut raw = db.raw().await;
    refused(
        &mut raw,
        &format!("DELETE FROM agent_revisions WHERE id = '{}'", rev.id),
        Some("agent_revisions_are_immutable"),
    )
    .await;
    refused(
        &mut raw,
        &format!("DELETE FROM agents WHERE id = '{}'", w.agent.id),
        Some("agent_deletion_requires_deleting"),
    )
    .await;
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.agent_mark_deleting(&w.ns.id, &w.agent.id).await.unwrap());
    tx.agent_finalize_deletion(&w.ns.id, &w.agent.id)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM agent_revisions WHERE id = '{}'",
            rev.id
        ))
        .await,
        0
    );
}

pub async fn revision_source_stays_within_its_agent(db: TestDb) {
    let store = db.store().await;
    let a = world(&store).await;
    let b = world(&store).await;
    let first = add_revision(&store, &a, 1).await;
    let foreign = add_revision(&store, &b, 1).await;
    let spec = serde_json::to_string(&crate::fixtures::revision(&a.agent, 2).spec).unwrap();
    let insert = |id: &RevisionId, source: &str| {
        format!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, source_revision_id, admitted_at) \
             VALUES ('{id}', '{}', '{}', 2, '{spec}', '{source}', '{TS}')",
            a.ns.id, a.agent.id
        )
    };
    let mut raw = db.raw().await;
    // another Agent's revision and one that never existed
    for source in [foreign.id.clone(), RevisionId::generate()] {
        refused(
            &mut raw,
            &insert(&RevisionId::generate(), source.as_str()),
            Some("agent_revisions_source_revision_fk"),
        )
        .await;
    }
    // the row itself
    let own = RevisionId::generate();
    refused(&mut raw, &insert(&own, own.as_str()), None).await;
    // an earlier revision of the same Agent: accepted, read back, removed with the Agent
    let second = RevisionId::generate();
    accepted(&mut raw, &insert(&second, first.id.as_str())).await;
    let mut tx = store.begin_read().await.unwrap();
    let read = tx
        .revision_get(&a.ns.id, &a.agent.id, &second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.source_revision_id, Some(first.id.clone()));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.agent_mark_deleting(&a.ns.id, &a.agent.id).await.unwrap());
    tx.agent_finalize_deletion(&a.ns.id, &a.agent.id)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM agent_revisions WHERE agent_id = '{}'",
            a.agent.id
        ))
        .await,
        0
    );
}

pub async fn references_never_cross_namespaces(db: TestDb) {
    let store = db.store().await;
    let a = world(&store).await;
    let b = world(&store).await;
    // An Agent in B cannot use A's Configuration.
    let stray = agent(&b.ns.id, &a.cfg.id, "stray");
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = tx.agent_insert(&stray).await.unwrap_err();
    assert!(matches!(err, StoreError::Reference { .. }), "{err:?}");
    drop(tx);
    let mut raw = db.raw().await;
    // A revision, setup or work item cannot name another Namespace's Agent.
    let spec = serde_json::to_string(&crate::fixtures::revision(&a.agent, 1).spec).unwrap();
    refused(
        &mut raw,
        &format!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, admitted_at) \
             VALUES ('{}', '{}', '{}', 1, '{spec}', '{TS}')",
            RevisionId::generate(),
            b.ns.id,
            a.agent.id
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &format!(
            "INSERT INTO workspace_setups (id, namespace_id, agent_id, files, completed) VALUES ('s1', '{}', '{}', '{{\"USER.md\":\"x\"}}', false)",
            b.ns.id, a.agent.id
        ),
        None,
    )
    .await;
    let work = NewWork::agent_stop(&b.ns.id, &a.agent.id, &IamId::generate_principal());
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = match tx.work_enqueue(&work).await {
        Err(e) => {
            drop(tx);
            e
        }
        Ok(_) => tx.commit().await.unwrap_err(),
    };
    assert!(matches!(err, StoreError::Reference { .. }), "{err:?}");
    // The active pointer cannot name another Agent's revision.
    let rev_a = add_revision(&store, &a, 1).await;
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = match tx
        .agent_swap_active_revision(&b.ns.id, &b.agent.id, None, Some(&rev_a.id))
        .await
    {
        Err(e) => e,
        Ok(moved) => {
            assert!(moved);
            tx.commit().await.unwrap_err()
        }
    };
    assert!(matches!(err, StoreError::Reference { .. }), "{err:?}");
}

pub async fn referenced_configuration_cannot_be_deleted(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let mut tx = occ_testkit::begin_setup(&store).await;
    let err = tx
        .configuration_delete(&w.ns.id, &w.cfg.id)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Reference { .. }), "{err:?}");
    drop(tx);
    let mut raw = db.raw().await;
    refused(
        &mut raw,
        &format!("DELETE FROM configurations WHERE id = '{}'", w.cfg.id),
        None,
    )
    .await;
    // An unreferenced Configuration deletes; revisions do not hold a reference.
    let spare = configuration(&w.ns.id);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.configuration_insert(&spare).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.configuration_delete(&w.ns.id, &spare.id).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn namespace_lifecycle_is_enforced(db: TestDb) {
    let store = db.store().await;
    let mut raw = db.raw().await;
    let ns = namespace("lifecycle");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.commit().await.unwrap();
    let id = &ns.id;
    let set = |status: &str| format!("UPDATE namespaces SET status = '{status}' WHERE id = '{id}'");
    accepted(&mut raw, &set("ready")).await;
    refused(&mut raw, &set("provisioning"), Some("namespace_lifecycle")).await;
    refused(&mut raw, &set("failed"), Some("namespace_lifecycle")).await;
    refused(
        &mut raw,
        &format!("UPDATE namespaces SET name = 'renamed' WHERE id = '{id}'"),
        Some("namespace_identity_is_immutable"),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE namespaces SET deleted_at = '{TS}' WHERE id = '{id}'"),
        None,
    )
    .await;
    accepted(&mut raw, &set("deleting")).await;
    refused(&mut raw, &set("ready"), Some("namespace_lifecycle")).await;
    // a Namespace that still holds something cannot be tombstoned
    let cfg = configuration(id);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.configuration_insert(&cfg).await.unwrap();
    tx.commit().await.unwrap();
    let tombstone =
        format!("UPDATE namespaces SET deleted_at = '2099-01-01T00:00:00.000Z' WHERE id = '{id}'");
    refused(
        &mut raw,
        &tombstone,
        Some("namespace_tombstone_requires_empty"),
    )
    .await;
    accepted(
        &mut raw,
        &format!("DELETE FROM configurations WHERE id = '{}'", cfg.id),
    )
    .await;
    accepted(&mut raw, &tombstone).await;
    refused(
        &mut raw,
        &set("deleting"),
        Some("namespace_tombstone_is_final"),
    )
    .await;
    refused(
        &mut raw,
        &format!("DELETE FROM namespaces WHERE id = '{id}'"),
        Some("namespaces_are_tombstoned"),
    )
    .await;
    // the tombstone keeps the name reserved
    let again = namespace("lifecycle");
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.namespace_insert(&again).await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    // failed only from provisioning, and then only to deleting
    let f = namespace("failing");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&f).await.unwrap();
    tx.commit().await.unwrap();
    accepted(
        &mut raw,
        &format!(
            "UPDATE namespaces SET status = 'failed' WHERE id = '{}'",
            f.id
        ),
    )
    .await;
    refused(
        &mut raw,
        &format!(
            "UPDATE namespaces SET status = 'ready' WHERE id = '{}'",
            f.id
        ),
        Some("namespace_lifecycle"),
    )
    .await;
    accepted(
        &mut raw,
        &format!(
            "UPDATE namespaces SET status = 'deleting' WHERE id = '{}'",
            f.id
        ),
    )
    .await;
}

pub async fn workspace_setup_completion_erases_files(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let mut raw = db.raw().await;
    let (ns, agt) = (&w.ns.id, &w.agent.id);
    let insert = |files: &str, completed: &str| {
        format!(
            "INSERT INTO workspace_setups (id, namespace_id, agent_id, files, completed) VALUES ('s', '{ns}', '{agt}', {files}, {completed})"
        )
    };
    refused(&mut raw, &insert("'{\"USER.md\":\"x\"}'", "true"), None).await;
    refused(&mut raw, &insert("NULL", "false"), None).await;
    refused(&mut raw, &insert("'{}'", "false"), None).await;
    refused(&mut raw, &insert("'{\"NOTES.md\":\"x\"}'", "false"), None).await;
    refused(&mut raw, &insert("'{\"USER.md\":5}'", "false"), None).await;
    refused(
        &mut raw,
        &insert(
            &format!("'{{\"USER.md\":\"{}\"}}'", "x".repeat(16 * 1024 + 1)),
            "false",
        ),
        None,
    )
    .await;
    let mut files = occ_core::resource::WorkspaceFiles::new();
    files.insert(WorkspaceFileName::User, "I am the user".into());
    files.insert(WorkspaceFileName::Soul, String::new());
    let setup = WorkspaceSetup {
        id: "setup-1".into(),
        namespace_id: ns.clone(),
        agent_id: agt.clone(),
        defaults_id: Some("a".repeat(64)),
        files: Some(files),
        completed: false,
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.workspace_setup_insert(&setup).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(
        tx.workspace_setup_get(ns, agt).await.unwrap().unwrap(),
        setup
    );
    assert!(tx.workspace_setup_complete(ns, agt).await.unwrap());
    assert!(
        !tx.workspace_setup_complete(ns, agt).await.unwrap(),
        "completion happens once"
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let done = tx.workspace_setup_get(ns, agt).await.unwrap().unwrap();
    assert!(done.completed);
    assert!(done.files.is_none(), "staged bytes are erased");
    assert_eq!(done.defaults_id, setup.defaults_id, "identity is kept");
    drop(tx);
    refused(
        &mut raw,
        "UPDATE workspace_setups SET completed = false",
        None,
    )
    .await;
    refused(
        &mut raw,
        "UPDATE workspace_setups SET files = '{\"USER.md\":\"back\"}'",
        None,
    )
    .await;
}

pub async fn audit_is_append_only(db: TestDb) {
    let store = db.store().await;
    let ns = NamespaceId::generate();
    let event = AuditEvent::new(
        AuditKind::Mutation,
        "prn_actor",
        "openclaw.namespaces.create",
        &ResourceRef::namespace(&ns),
        AuditOutcome::Success,
    )
    .detail("note", "first");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.audit_append(&event).await.unwrap();
    tx.commit().await.unwrap();
    let mut raw = db.raw().await;
    refused(
        &mut raw,
        "UPDATE audit_events SET outcome = 'denied'",
        Some("audit_events_are_append_only"),
    )
    .await;
    refused(
        &mut raw,
        "UPDATE audit_events SET details = '{}'",
        Some("audit_events_are_append_only"),
    )
    .await;
    refused(
        &mut raw,
        "DELETE FROM audit_events",
        Some("audit_events_are_append_only"),
    )
    .await;
    if db.backend == occ_store::Backend::Postgres {
        refused(
            &mut raw,
            "TRUNCATE audit_events",
            Some("audit_events_are_append_only"),
        )
        .await;
    }
    refused(
        &mut raw,
        &format!(
            "INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, resource_kind, resource_id, outcome) \
             VALUES ('{}', '{TS}', 'mutation', 'a', 'x', 'agent', 'y', 'maybe')",
            occ_core::AuditEventId::generate()
        ),
        None,
    )
    .await;
    let mut tx = store.begin_read().await.unwrap();
    let events = tx.audit_list(&Default::default()).await.unwrap();
    assert_eq!(events, vec![event]);
}

pub async fn one_live_claim_per_lane(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let r1 = add_revision(&store, &w, 1).await;
    let r2 = add_revision(&store, &w, 2).await;
    let actor = IamId::generate_principal();
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.work_enqueue(&NewWork::revision_reconcile(
        &w.ns.id,
        &w.agent.id,
        &r1.id,
        &actor,
    ))
    .await
    .unwrap();
    tx.work_enqueue(&NewWork::revision_reconcile(
        &w.ns.id,
        &w.agent.id,
        &r2.id,
        &actor,
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut raw = db.raw().await;
    let claim = |rev: &RevisionId| {
        format!(
            "UPDATE controller_work SET state = 'claimed', claim_token = '{}', lease_expires_at = '2099-01-01T00:00:00.000Z' \
             WHERE idempotency_key = 'agent_revision:{rev}:reconcile'",
            uuid::Uuid::new_v4()
        )
    };
    accepted(&mut raw, &claim(&r1.id)).await;
    let err = refused(&mut raw, &claim(&r2.id), None).await;
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    // claim state shape: claimed needs a token and a lease, and nothing else does
    refused(
        &mut raw,
        &format!("UPDATE controller_work SET claim_token = NULL WHERE idempotency_key = 'agent_revision:{}:reconcile'", r1.id),
        None,
    )
    .await;
    refused(
        &mut raw,
        &format!(
            "UPDATE controller_work SET lease_expires_at = '{TS}' WHERE idempotency_key = 'agent_revision:{}:reconcile'",
            r2.id
        ),
        None,
    )
    .await;
}

pub async fn work_shapes_and_keys_are_checked(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let mut raw = db.raw().await;
    let (ns, agt) = (&w.ns.id, &w.agent.id);
    let insert = |key: &str, agent: &str, revision: &str, nt: &str, at: &str, extra: &str| {
        format!(
            "INSERT INTO controller_work (idempotency_key, namespace_id, agent_id, revision_id, actor_id, namespace_target, \
             agent_target, available_at, created_at, updated_at{}) VALUES ('{key}', '{ns}', {agent}, {revision}, 'prn_a', {nt}, {at}, \
             '{TS}', '{TS}', '{TS}'{})",
            if extra.is_empty() {
                ""
            } else {
                ", state, completed_at"
            },
            extra
        )
    };
    let a = format!("'{agt}'");
    let r = format!("'{}'", rev.id);
    // wrong key format for each shape
    refused(
        &mut raw,
        &insert(
            &format!("namespace:{ns}:reconcile:deleted"),
            "NULL",
            "NULL",
            "'ready'",
            "NULL",
            "",
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &insert(
            &format!("agent:{agt}:reconcile:stopped:"),
            &a,
            "NULL",
            "NULL",
            "'stopped'",
            "",
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &insert(
            &format!("agent:{agt}:reconcile:deleted:x"),
            &a,
            "NULL",
            "NULL",
            "'deleted'",
            "",
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &insert(
            &format!("agent_revision:{}:reconcilex", rev.id),
            &a,
            &r,
            "NULL",
            "NULL",
            "",
        ),
        None,
    )
    .await;
    // mixed shapes
    refused(
        &mut raw,
        &insert(
            &format!("agent_revision:{}:reconcile", rev.id),
            "NULL",
            &r,
            "NULL",
            "NULL",
            "",
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &insert(
            &format!("agent:{agt}:reconcile:deleted"),
            &a,
            &r,
            "NULL",
            "'deleted'",
            "",
        ),
        None,
    )
    .await;
    refused(
        &mut raw,
        &insert(
            &format!("namespace:{ns}:reconcile:ready"),
            &a,
            "NULL",
            "'ready'",
            "NULL",
            "",
        ),
        None,
    )
    .await;
    // terminal rows need a completion time and a reason
    refused(
        &mut raw,
        &insert(
            &format!("namespace:{ns}:reconcile:ready"),
            "NULL",
            "NULL",
            "'ready'",
            "NULL",
            &format!(", 'succeeded', '{TS}'"),
        ),
        None,
    )
    .await;
    accepted(
        &mut raw,
        &insert(
            &format!("namespace:{ns}:reconcile:ready"),
            "NULL",
            "NULL",
            "'ready'",
            "NULL",
            "",
        ),
    )
    .await;
    accepted(
        &mut raw,
        &insert(
            &format!("agent_revision:{}:maintenance:7", rev.id),
            &a,
            &r,
            "NULL",
            "NULL",
            "",
        ),
    )
    .await;
}

pub async fn agent_invariants_hold(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let mut raw = db.raw().await;
    let agt = &w.agent.id;
    accepted(
        &mut raw,
        &format!("UPDATE agents SET desired_runtime_state = 'running' WHERE id = '{agt}'"),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET status = 'deleting' WHERE id = '{agt}'"),
        Some("agents_deleting_is_stopped"),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET service_principal_id = 'spn_x' WHERE id = '{agt}'"),
        None,
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET execution_mode = 'sideways' WHERE id = '{agt}'"),
        None,
    )
    .await;
    accepted(&mut raw, &format!("UPDATE agents SET status = 'deleting', desired_runtime_state = 'stopped' WHERE id = '{agt}'")).await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET status = 'active' WHERE id = '{agt}'"),
        Some("agent_deletion_is_final"),
    )
    .await;
    // An Agent needs its own service principal, committed with it.
    let lonely = AgentId::generate();
    refused(
        &mut raw,
        &format!(
            "INSERT INTO agents (id, namespace_id, name, configuration_id, service_principal_id, created_at) \
             VALUES ('{lonely}', '{}', 'lonely', '{}', 'service-agent-{lonely}', '{TS}')",
            w.ns.id, w.cfg.id
        ),
        None,
    )
    .await;
    let other = AgentId::generate();
    refused(
        &mut raw,
        &format!(
            "INSERT INTO agents (id, namespace_id, name, configuration_id, service_principal_id, created_at) \
             VALUES ('{other}', '{}', 'other', '{}', 'service-agent-{lonely}', '{TS}')",
            w.ns.id, w.cfg.id
        ),
        Some("agents_service_principal_is_own"),
    )
    .await;
    // harness auth referencing a Secret must carry the referencing column
    let auth = json!({"method": "api_key", "source": {"kind": "secret", "namespaceId": w.ns.id, "id": occ_core::SecretId::generate()}});
    refused(
        &mut raw,
        &format!("UPDATE agents SET harness_auth = '{auth}' WHERE id = '{agt}'"),
        Some("agents_harness_auth_references"),
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET harness_auth = '{{\"source\":1}}' WHERE id = '{agt}'"),
        None,
    )
    .await;
    refused(
        &mut raw,
        &format!("UPDATE agents SET harness_auth = '{{\"method\":\"magic\"}}' WHERE id = '{agt}'"),
        None,
    )
    .await;
    let _ = Timestamp::now();
}
