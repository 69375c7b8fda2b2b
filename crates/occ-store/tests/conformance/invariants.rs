//! Every invariant the database must enforce, attempted by direct SQL on a separate connection
//! and refused — whatever the application does.
//!
//! Each test sets up the rows its invariants are about, then runs a table of [`Case`]s in order:
//! a write and what the database must answer (later rows see what accepted rows wrote). A new
//! invariant is one row; a failing row names itself.

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::ResourceRef;
use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_core::work::NewWork;
use occ_core::{AgentId, IamId, NamespaceId, RevisionId};
use occ_store::{Authorized, Store, StoreError};
use occ_testkit::{RawDb, TestDb};
use serde_json::json;

use crate::fixtures::{add_revision, agent, configuration, namespace, world};
use Expect::{Accepted, As, Naming, Refused};

const TS: &str = "2026-11-29T16:00:00.000Z";

/// What the database must answer to one write.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Accepted,
    /// Refused as a constraint violation (uniqueness, reference or invariant).
    Refused,
    /// Refused, naming this constraint (the same name on both backends).
    Naming(&'static str),
    /// Refused as this kind of violation.
    As(Violation),
}

#[derive(Debug, Clone, Copy)]
enum Violation {
    Conflict,
    Reference,
    Invariant,
}

impl Violation {
    fn is(self, err: &StoreError) -> bool {
        match self {
            Violation::Conflict => matches!(err, StoreError::Conflict { .. }),
            Violation::Reference => matches!(err, StoreError::Reference { .. }),
            Violation::Invariant => matches!(err, StoreError::Invariant { .. }),
        }
    }
}

/// One row: what it attempts (named in any failure), the SQL, and the expected answer.
struct Case {
    what: String,
    sql: String,
    expect: Expect,
}

fn case(what: impl Into<String>, expect: Expect, sql: impl Into<String>) -> Case {
    Case {
        what: what.into(),
        sql: sql.into(),
        expect,
    }
}

/// Runs the cases in order on the raw connection.
async fn check(raw: &mut RawDb, cases: impl IntoIterator<Item = Case>) {
    for Case { what, sql, expect } in cases {
        match (raw.execute(&sql).await, expect) {
            (Ok(_), Accepted) => {}
            (Err(err), Accepted) => panic!("{what}: the database refused {sql}: {err:?}"),
            (Ok(_), _) => panic!("{what}: the database accepted {sql}"),
            (Err(err), expect) => {
                assert!(
                    matches!(
                        err,
                        StoreError::Invariant { .. }
                            | StoreError::Reference { .. }
                            | StoreError::Conflict { .. }
                    ),
                    "{what}: unexpected error kind for {sql}: {err:?}"
                );
                match expect {
                    Naming(name) => assert_eq!(err.constraint(), Some(name), "{what}: {sql}"),
                    As(kind) => assert!(kind.is(&err), "{what}: {kind:?} expected: {err:?}"),
                    Accepted | Refused => {}
                }
            }
        }
    }
}

/// Asserts that a write through the store's own API on a set-up transaction is refused as
/// `kind`: by the statement, or — when `at_commit_too`, for checks a backend defers — by the
/// commit.
async fn store_refuses<T>(
    store: &Store,
    what: &str,
    kind: Violation,
    at_commit_too: bool,
    write: impl AsyncFnOnce(&mut Authorized) -> Result<T, StoreError>,
) {
    let mut tx = occ_testkit::begin_setup(store).await;
    let err = match write(&mut tx).await {
        Err(err) => err,
        Ok(_) if at_commit_too => tx
            .commit()
            .await
            .expect_err(&format!("{what}: the commit was accepted")),
        Ok(_) => panic!("{what}: the store accepted the write"),
    };
    assert!(kind.is(&err), "{what}: {kind:?} expected: {err:?}");
}

/// `INSERT INTO namespaces` with these values.
fn namespace_row(id: &str, name: &str, created_at: &str) -> String {
    format!(
        "INSERT INTO namespaces (id, name, created_at) VALUES ('{id}', '{name}', '{created_at}')"
    )
}

/// Marks the Agent deleting and finalizes its deletion, as the worker does.
async fn delete_agent(store: &Store, ns: &NamespaceId, agent: &AgentId) {
    let mut tx = occ_testkit::begin_setup(store).await;
    assert!(tx.agent_mark_deleting(ns, agent).await.unwrap());
    tx.agent_finalize_deletion(ns, agent).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn ids_names_and_timestamps_are_checked(db: TestDb) {
    let mut raw = db.raw().await;
    let good = NamespaceId::generate();
    let upper = good.as_str().to_uppercase().replacen("NS_", "ns_", 1);
    let v1 = "ns_0f8fad5b-d9cb-169f-a165-70867728950e";
    let other = NamespaceId::generate();
    let long_name = "é".repeat(200);
    let installation = |name: &str| {
        format!(
            "INSERT INTO installation (id, name, created_at) VALUES ('{}', '{name}', '{TS}')",
            occ_core::InstallationId::generate()
        )
    };
    let good = good.as_str();
    check(
        &mut raw,
        [
            case("a malformed id", Refused, namespace_row("ns_bad", "ok", TS)),
            case("an upper-case id", Refused, namespace_row(&upper, "ok", TS)),
            case("a version-1 UUID", Refused, namespace_row(v1, "ok", TS)),
            case("an empty name", Refused, namespace_row(good, "", TS)),
            case(
                "a leading space",
                Refused,
                namespace_row(good, " leading", TS),
            ),
            case(
                "a trailing space",
                Refused,
                namespace_row(good, "trailing ", TS),
            ),
            case(
                "a tab in a name",
                Refused,
                namespace_row(good, "tab\there", TS),
            ),
            case(
                "a 201-character name",
                Refused,
                namespace_row(good, &"x".repeat(201), TS),
            ),
            case(
                "a malformed time",
                Refused,
                namespace_row(good, "ok", "not a time"),
            ),
            case(
                "a 200-character name",
                Accepted,
                namespace_row(good, &long_name, TS),
            ),
            // names are unique, tombstones included
            case(
                "a name taken",
                Refused,
                namespace_row(other.as_str(), &long_name, TS),
            ),
            // the Installation is a singleton
            case("the Installation", Accepted, installation("one")),
            case(
                "a second Installation",
                As(Violation::Conflict),
                installation("two"),
            ),
        ],
    )
    .await;
}

pub async fn configuration_kind_and_generation_are_bounded(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let other = namespace("elsewhere");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&other).await.unwrap();
    tx.commit().await.unwrap();
    let mut raw = db.raw().await;
    let ns = &w.ns.id;
    let insert = |id: &occ_core::ConfigurationId, kind: &str, generation: &str| {
        format!(
            "INSERT INTO configurations (id, namespace_id, kind, generation, created_at) \
             VALUES ('{id}', '{ns}', '{kind}', {generation}, '{TS}')"
        )
    };
    let fresh = || occ_core::ConfigurationId::generate();
    let id = fresh();
    let cfg = &w.cfg.id;
    let update = |set: &str| format!("UPDATE configurations SET {set} WHERE id = '{cfg}'");
    check(
        &mut raw,
        [
            case("an unknown kind", Refused, insert(&fresh(), "other", "1")),
            case("generation 0", Refused, insert(&fresh(), "agent", "0")),
            case(
                "a negative generation",
                Refused,
                insert(&fresh(), "agent", "-1"),
            ),
            case(
                "a generation past 2^53 - 1",
                Refused,
                insert(&fresh(), "agent", "9007199254740992"),
            ),
            case(
                "generation 2^53 - 1",
                Accepted,
                insert(&id, "agent", "9007199254740991"),
            ),
            case(
                "an update to generation 0",
                Refused,
                update("generation = 0"),
            ),
            // The generation only moves forward, and the content changes only with it.
            case("a later generation", Accepted, update("generation = 51")),
            case(
                "an older generation",
                Naming("configuration_generation_increases"),
                update("generation = 2"),
            ),
            case(
                "a generation just below",
                Naming("configuration_generation_increases"),
                update("generation = 50"),
            ),
            case(
                "new bindings in the same generation",
                Naming("configuration_generation_increases"),
                update("secret_bindings = '{\"X\": 1}'"),
            ),
            case(
                "new bindings in a new generation",
                Accepted,
                update("generation = 52, secret_bindings = '{}'"),
            ),
            case("a changed kind", Refused, update("kind = 'tool'")),
            case(
                "a move to another Namespace",
                Naming("configuration_ownership_is_immutable"),
                format!(
                    "UPDATE configurations SET namespace_id = '{}' WHERE id = '{id}'",
                    other.id
                ),
            ),
            case(
                "bindings that are not an object",
                Refused,
                update("secret_bindings = '[]'"),
            ),
        ],
    )
    .await;
}

pub async fn revisions_are_immutable(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let mut raw = db.raw().await;
    check(
        &mut raw,
        [
            "revision_number = 2",
            "backend_id = 'other'",
            "admitted_spec = admitted_spec",
            "admitted_at = admitted_at",
            "id = id",
            "namespace_id = namespace_id",
            "agent_id = agent_id",
            "source_revision_id = NULL",
        ]
        .map(|set| {
            case(
                format!("SET {set}"),
                Naming("agent_revisions_are_immutable"),
                format!("UPDATE agent_revisions SET {set} WHERE id = '{}'", rev.id),
            )
        }),
    )
    .await;
    // revision numbers are positive and unique per Agent
    let mut dup = crate::fixtures::revision(&w.agent, 1);
    store_refuses(
        &store,
        "a second revision 1",
        Violation::Conflict,
        false,
        async |tx| tx.revision_insert(&dup).await,
    )
    .await;
    dup.revision = 0;
    store_refuses(
        &store,
        "revision 0",
        Violation::Invariant,
        false,
        async |tx| tx.revision_insert(&dup).await,
    )
    .await;
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
    let mut number = 0;
    let mut insert = |spec: serde_json::Value| {
        number += 1;
        format!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, admitted_at) \
             VALUES ('{}', '{}', '{}', {number}, '{}', '{TS}')",
            RevisionId::generate(),
            w.ns.id,
            w.agent.id,
            spec.to_string().replace('\'', "''")
        )
    };
    let without = |field: &str| {
        let mut spec = base.clone();
        spec.as_object_mut().unwrap().remove(field);
        spec
    };
    let with = |fields: &[(&str, serde_json::Value)]| {
        let mut spec = base.clone();
        for (field, value) in fields {
            spec.as_object_mut()
                .unwrap()
                .insert((*field).into(), value.clone());
        }
        spec
    };
    let mut cases: Vec<Case> = ["harness", "configuration", "harness_auth"]
        .into_iter()
        .map(|field| case(format!("no {field}"), Refused, insert(without(field))))
        .collect();
    for (field, value) in [
        ("extra", json!(1)),
        ("configuration", json!([1, 2])),
        ("configuration_kind", json!("tool")),
        ("configuration_generation", json!(0)),
        ("configuration_id", json!("cfg_nope")),
        (
            "harness",
            json!({"id": "openclaw", "version": "1", "mode": "sideways"}),
        ),
        ("compute", json!({"id": "c"})),
        ("secret_bindings", json!("none")),
    ] {
        cases.push(case(
            format!("{field}: {value}"),
            Refused,
            insert(with(&[(field, value)])),
        ));
    }
    cases.push(case("an array", Refused, insert(json!([1]))));
    cases.push(case(
        "a Secret Driver with empty bindings",
        Accepted,
        insert(with(&[
            ("secret_driver_id", json!("secret-local")),
            ("secret_bindings", json!({})),
        ])),
    ));
    // A frozen ServiceAccount credential: only an object, only for the account the
    // revision's chatgpt_service_account auth names.
    let sa = "sa_0f8fad5b-d9cb-469f-a165-70867728950e";
    let frozen = json!({"serviceAccountId": sa, "kind": "access_token", "backendId": "chatgpt",
                        "workspaceId": "7d0a9c1e-3b5f-4e21-9a8c-2f6b4d1e0c3a",
                        "upstreamCredentialId": "cred-1"});
    let account_auth = json!({"method": "chatgpt_service_account", "serviceAccountId": sa});
    cases.push(case(
        "a frozen credential of the account its auth names",
        Accepted,
        insert(with(&[
            ("harness_auth", account_auth.clone()),
            ("account_credential", frozen.clone()),
        ])),
    ));
    cases.push(case(
        "a frozen credential without account auth",
        Refused,
        insert(with(&[("account_credential", frozen.clone())])),
    ));
    let mut other = frozen;
    other["serviceAccountId"] = json!("sa_1f8fad5b-d9cb-469f-a165-70867728950e");
    cases.push(case(
        "a frozen credential of another account",
        Refused,
        insert(with(&[
            ("harness_auth", account_auth.clone()),
            ("account_credential", other),
        ])),
    ));
    cases.push(case(
        "a frozen credential that is not an object",
        Refused,
        insert(with(&[
            ("harness_auth", account_auth),
            ("account_credential", json!("cred-1")),
        ])),
    ));
    check(&mut raw, cases).await;
}

pub async fn revisions_are_deleted_only_with_their_agent(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let mut raw = db.raw().await;
    check(
        &mut raw,
        [
            case(
                "deleting a revision",
                Naming("agent_revisions_are_immutable"),
                format!("DELETE FROM agent_revisions WHERE id = '{}'", rev.id),
            ),
            case(
                "deleting an Agent that is not deleting",
                Naming("agent_deletion_requires_deleting"),
                format!("DELETE FROM agents WHERE id = '{}'", w.agent.id),
            ),
        ],
    )
    .await;
    delete_agent(&store, &w.ns.id, &w.agent.id).await;
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
    let insert = |id: &RevisionId, source: &RevisionId| {
        format!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, source_revision_id, admitted_at) \
             VALUES ('{id}', '{}', '{}', 2, '{spec}', '{source}', '{TS}')",
            a.ns.id, a.agent.id
        )
    };
    let own = RevisionId::generate();
    let second = RevisionId::generate();
    let mut raw = db.raw().await;
    check(
        &mut raw,
        [
            case(
                "another Agent's revision as the source",
                Naming("agent_revisions_source_revision_fk"),
                insert(&RevisionId::generate(), &foreign.id),
            ),
            case(
                "a source that never existed",
                Naming("agent_revisions_source_revision_fk"),
                insert(&RevisionId::generate(), &RevisionId::generate()),
            ),
            case("the row itself as the source", Refused, insert(&own, &own)),
            // an earlier revision of the same Agent: accepted, read back, removed with the Agent
            case(
                "an earlier revision of the same Agent",
                Accepted,
                insert(&second, &first.id),
            ),
        ],
    )
    .await;
    let mut tx = store.begin_read().await.unwrap();
    let read = tx
        .revision_get(&a.ns.id, &a.agent.id, &second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.source_revision_id, Some(first.id.clone()));
    drop(tx);
    delete_agent(&store, &a.ns.id, &a.agent.id).await;
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
    let stray = agent(&b.ns.id, &a.cfg.id, "stray");
    store_refuses(
        &store,
        "an Agent in B using A's Configuration",
        Violation::Reference,
        false,
        async |tx| tx.agent_insert(&stray).await,
    )
    .await;
    // A revision, setup or work item cannot name another Namespace's Agent.
    let spec = serde_json::to_string(&crate::fixtures::revision(&a.agent, 1).spec).unwrap();
    let mut raw = db.raw().await;
    check(
        &mut raw,
        [
            case(
                "a revision in B of A's Agent",
                Refused,
                format!(
                    "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, admitted_spec, admitted_at) \
                     VALUES ('{}', '{}', '{}', 1, '{spec}', '{TS}')",
                    RevisionId::generate(),
                    b.ns.id,
                    a.agent.id
                ),
            ),
            case(
                "a setup in B of A's Agent",
                Refused,
                format!(
                    "INSERT INTO workspace_setups (id, namespace_id, agent_id, files, completed) \
                     VALUES ('s1', '{}', '{}', '{{\"USER.md\":\"x\"}}', false)",
                    b.ns.id, a.agent.id
                ),
            ),
        ],
    )
    .await;
    let work = NewWork::agent_stop(&b.ns.id, &a.agent.id, &IamId::generate_principal());
    store_refuses(
        &store,
        "work in B for A's Agent",
        Violation::Reference,
        true,
        async |tx| tx.work_enqueue(&work).await,
    )
    .await;
    // The active pointer cannot name another Agent's revision.
    let rev_a = add_revision(&store, &a, 1).await;
    store_refuses(
        &store,
        "B's pointer at A's revision",
        Violation::Reference,
        true,
        async |tx| {
            let moved = tx
                .agent_swap_active_revision(&b.ns.id, &b.agent.id, None, Some(&rev_a.id))
                .await?;
            assert!(moved);
            Ok(())
        },
    )
    .await;
}

pub async fn referenced_configuration_cannot_be_deleted(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    store_refuses(
        &store,
        "deleting a Configuration an Agent uses",
        Violation::Reference,
        false,
        async |tx| tx.configuration_delete(&w.ns.id, &w.cfg.id).await,
    )
    .await;
    let mut raw = db.raw().await;
    check(
        &mut raw,
        [case(
            "deleting a Configuration an Agent uses, by SQL",
            Refused,
            format!("DELETE FROM configurations WHERE id = '{}'", w.cfg.id),
        )],
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
    let failing = namespace("failing");
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.namespace_insert(&failing).await.unwrap();
    tx.commit().await.unwrap();
    let set = |ns: &NamespaceId, status: &str| {
        format!("UPDATE namespaces SET status = '{status}' WHERE id = '{ns}'")
    };
    let id = &ns.id;
    check(
        &mut raw,
        [
            case("provisioning → ready", Accepted, set(id, "ready")),
            case(
                "ready → provisioning",
                Naming("namespace_lifecycle"),
                set(id, "provisioning"),
            ),
            case(
                "ready → failed",
                Naming("namespace_lifecycle"),
                set(id, "failed"),
            ),
            case(
                "a rename",
                Naming("namespace_identity_is_immutable"),
                format!("UPDATE namespaces SET name = 'renamed' WHERE id = '{id}'"),
            ),
            case(
                "a tombstone on a ready Namespace",
                Refused,
                format!("UPDATE namespaces SET deleted_at = '{TS}' WHERE id = '{id}'"),
            ),
            case("ready → deleting", Accepted, set(id, "deleting")),
            case(
                "deleting → ready",
                Naming("namespace_lifecycle"),
                set(id, "ready"),
            ),
        ],
    )
    .await;
    // a Namespace that still holds something cannot be tombstoned
    let cfg = configuration(id);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.configuration_insert(&cfg).await.unwrap();
    tx.commit().await.unwrap();
    let tombstone =
        format!("UPDATE namespaces SET deleted_at = '2099-01-01T00:00:00.000Z' WHERE id = '{id}'");
    check(
        &mut raw,
        [
            case(
                "a tombstone on a Namespace holding a Configuration",
                Naming("namespace_tombstone_requires_empty"),
                tombstone.clone(),
            ),
            case(
                "deleting the Configuration",
                Accepted,
                format!("DELETE FROM configurations WHERE id = '{}'", cfg.id),
            ),
            case("a tombstone on an empty Namespace", Accepted, tombstone),
            case(
                "tombstone → deleting",
                Naming("namespace_tombstone_is_final"),
                set(id, "deleting"),
            ),
            case(
                "deleting the row",
                Naming("namespaces_are_tombstoned"),
                format!("DELETE FROM namespaces WHERE id = '{id}'"),
            ),
        ],
    )
    .await;
    // the tombstone keeps the name reserved
    let again = namespace("lifecycle");
    store_refuses(
        &store,
        "a tombstoned Namespace's name",
        Violation::Conflict,
        false,
        async |tx| tx.namespace_insert(&again).await,
    )
    .await;
    // failed only from provisioning, and then only to deleting
    let id = &failing.id;
    check(
        &mut raw,
        [
            case("provisioning → failed", Accepted, set(id, "failed")),
            case(
                "failed → ready",
                Naming("namespace_lifecycle"),
                set(id, "ready"),
            ),
            case("failed → deleting", Accepted, set(id, "deleting")),
        ],
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
    let too_long = format!("'{{\"USER.md\":\"{}\"}}'", "x".repeat(16 * 1024 + 1));
    check(
        &mut raw,
        [
            case(
                "completed with files",
                Refused,
                insert("'{\"USER.md\":\"x\"}'", "true"),
            ),
            case("pending without files", Refused, insert("NULL", "false")),
            case("pending with no file", Refused, insert("'{}'", "false")),
            case(
                "an unknown file name",
                Refused,
                insert("'{\"NOTES.md\":\"x\"}'", "false"),
            ),
            case(
                "a file that is not text",
                Refused,
                insert("'{\"USER.md\":5}'", "false"),
            ),
            case("a file over 16 KiB", Refused, insert(&too_long, "false")),
        ],
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
    check(
        &mut raw,
        [
            case(
                "completed → pending",
                Refused,
                "UPDATE workspace_setups SET completed = false",
            ),
            case(
                "files back after completion",
                Refused,
                "UPDATE workspace_setups SET files = '{\"USER.md\":\"back\"}'",
            ),
        ],
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
    let append_only = Naming("audit_events_are_append_only");
    let mut cases = vec![
        case(
            "an update",
            append_only,
            "UPDATE audit_events SET outcome = 'denied'",
        ),
        case(
            "details rewritten",
            append_only,
            "UPDATE audit_events SET details = '{}'",
        ),
        case("a delete", append_only, "DELETE FROM audit_events"),
    ];
    // SQLite has no TRUNCATE.
    if db.backend == occ_store::Backend::Postgres {
        cases.push(case("TRUNCATE", append_only, "TRUNCATE audit_events"));
    }
    cases.push(case(
        "an unknown outcome",
        Refused,
        format!(
            "INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, resource_kind, resource_id, outcome) \
             VALUES ('{}', '{TS}', 'mutation', 'a', 'x', 'agent', 'y', 'maybe')",
            occ_core::AuditEventId::generate()
        ),
    ));
    check(&mut db.raw().await, cases).await;
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
    for rev in [&r1, &r2] {
        tx.work_enqueue(&NewWork::revision_reconcile(
            &w.ns.id,
            &w.agent.id,
            &rev.id,
            &actor,
        ))
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let update = |rev: &RevisionId, set: &str| {
        format!(
            "UPDATE controller_work SET {set} WHERE idempotency_key = 'agent_revision:{rev}:reconcile'"
        )
    };
    let claim = |rev: &RevisionId| {
        update(
            rev,
            &format!(
                "state = 'claimed', claim_token = '{}', lease_expires_at = '2099-01-01T00:00:00.000Z'",
                uuid::Uuid::new_v4()
            ),
        )
    };
    check(
        &mut db.raw().await,
        [
            case("a claim in the Agent's lane", Accepted, claim(&r1.id)),
            case(
                "a second live claim in that lane",
                As(Violation::Conflict),
                claim(&r2.id),
            ),
            // claim state shape: claimed needs a token and a lease, and nothing else does
            case(
                "a claim without its token",
                Refused,
                update(&r1.id, "claim_token = NULL"),
            ),
            case(
                "a lease on queued work",
                Refused,
                update(&r2.id, &format!("lease_expires_at = '{TS}'")),
            ),
        ],
    )
    .await;
}

pub async fn work_shapes_and_keys_are_checked(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let rev = add_revision(&store, &w, 1).await;
    let (ns, agt) = (&w.ns.id, &w.agent.id);
    let a = format!("'{agt}'");
    let r = format!("'{}'", rev.id);
    let null = "NULL";
    /// The columns that tell the shapes apart: (agent, revision, namespace target, agent target).
    struct Shape<'a>(&'a str, &'a str, &'a str, &'a str);
    let namespace_ready = Shape(null, null, "'ready'", null);
    let insert = |key: String,
                  Shape(agent, revision, nt, at): Shape<'_>,
                  terminal: Option<&str>| {
        let (columns, values) = match terminal {
            Some(state) => (", state, completed_at", format!(", '{state}', '{TS}'")),
            None => ("", String::new()),
        };
        format!(
            "INSERT INTO controller_work (idempotency_key, namespace_id, agent_id, revision_id, actor_id, namespace_target, \
             agent_target, available_at, created_at, updated_at{columns}) VALUES ('{key}', '{ns}', {agent}, {revision}, 'prn_a', {nt}, {at}, \
             '{TS}', '{TS}', '{TS}'{values})"
        )
    };
    let rev = &rev.id;
    check(
        &mut db.raw().await,
        [
            // wrong key format for each shape
            case(
                "a Namespace key naming the wrong target",
                Refused,
                insert(
                    format!("namespace:{ns}:reconcile:deleted"),
                    namespace_ready,
                    None,
                ),
            ),
            case(
                "an Agent key with a trailing separator",
                Refused,
                insert(
                    format!("agent:{agt}:reconcile:stopped:"),
                    Shape(&a, null, null, "'stopped'"),
                    None,
                ),
            ),
            case(
                "an Agent key with a suffix",
                Refused,
                insert(
                    format!("agent:{agt}:reconcile:deleted:x"),
                    Shape(&a, null, null, "'deleted'"),
                    None,
                ),
            ),
            case(
                "a revision key with a misspelt verb",
                Refused,
                insert(
                    format!("agent_revision:{rev}:reconcilex"),
                    Shape(&a, &r, null, null),
                    None,
                ),
            ),
            // mixed shapes
            case(
                "revision work without its Agent",
                Refused,
                insert(
                    format!("agent_revision:{rev}:reconcile"),
                    Shape(null, &r, null, null),
                    None,
                ),
            ),
            case(
                "Agent work naming a revision",
                Refused,
                insert(
                    format!("agent:{agt}:reconcile:deleted"),
                    Shape(&a, &r, null, "'deleted'"),
                    None,
                ),
            ),
            case(
                "Namespace work naming an Agent",
                Refused,
                insert(
                    format!("namespace:{ns}:reconcile:ready"),
                    Shape(&a, null, "'ready'", null),
                    None,
                ),
            ),
            // terminal rows need a completion time and a reason
            case(
                "a terminal row without a reason",
                Refused,
                insert(
                    format!("namespace:{ns}:reconcile:ready"),
                    Shape(null, null, "'ready'", null),
                    Some("succeeded"),
                ),
            ),
            case(
                "Namespace work",
                Accepted,
                insert(
                    format!("namespace:{ns}:reconcile:ready"),
                    Shape(null, null, "'ready'", null),
                    None,
                ),
            ),
            case(
                "a maintenance pass",
                Accepted,
                insert(
                    format!("agent_revision:{rev}:maintenance:7"),
                    Shape(&a, &r, null, null),
                    None,
                ),
            ),
        ],
    )
    .await;
}

pub async fn agent_invariants_hold(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let agt = &w.agent.id;
    let update = |set: &str| format!("UPDATE agents SET {set} WHERE id = '{agt}'");
    let insert = |id: &AgentId, name: &str, principal_of: &AgentId| {
        format!(
            "INSERT INTO agents (id, namespace_id, name, configuration_id, service_principal_id, created_at) \
             VALUES ('{id}', '{}', '{name}', '{}', 'service-agent-{principal_of}', '{TS}')",
            w.ns.id, w.cfg.id
        )
    };
    let lonely = AgentId::generate();
    // harness auth referencing a Secret must carry the referencing column
    let auth = json!({"method": "api_key", "source": {"kind": "secret", "namespaceId": w.ns.id, "id": occ_core::SecretId::generate()}});
    let pat = json!({"method": "codex_pat", "source": {"kind": "secret", "namespaceId": w.ns.id, "id": occ_core::SecretId::generate()}});
    check(
        &mut db.raw().await,
        [
            case(
                "stopped → running",
                Accepted,
                update("desired_runtime_state = 'running'"),
            ),
            case(
                "deleting while running",
                Naming("agents_deleting_is_stopped"),
                update("status = 'deleting'"),
            ),
            case(
                "another service principal",
                Refused,
                update("service_principal_id = 'spn_x'"),
            ),
            case(
                "an unknown execution mode",
                Refused,
                update("execution_mode = 'sideways'"),
            ),
            case(
                "deleting and stopped",
                Accepted,
                update("status = 'deleting', desired_runtime_state = 'stopped'"),
            ),
            case(
                "deleting → active",
                Naming("agent_deletion_is_final"),
                update("status = 'active'"),
            ),
            // An Agent needs its own service principal, committed with it.
            case(
                "an Agent without its principal",
                Refused,
                insert(&lonely, "lonely", &lonely),
            ),
            case(
                "an Agent with another Agent's principal",
                Naming("agents_service_principal_is_own"),
                insert(&AgentId::generate(), "other", &lonely),
            ),
            case(
                "harness auth naming a Secret without its column",
                Naming("agents_harness_auth_references"),
                update(&format!("harness_auth = '{auth}'")),
            ),
            case(
                "a codex_pat naming a Secret without its column",
                Naming("agents_harness_auth_references"),
                update(&format!("harness_auth = '{pat}'")),
            ),
            case(
                "a Secret column without a method that reads one",
                Naming("agents_harness_auth_references"),
                update(&format!(
                    "harness_auth = '{{\"method\":\"runtime\"}}', harness_auth_secret_id = '{}'",
                    pat["source"]["id"].as_str().unwrap()
                )),
            ),
            case(
                "harness auth with a malformed source",
                Refused,
                update("harness_auth = '{\"source\":1}'"),
            ),
            case(
                "an unknown harness auth method",
                Refused,
                update("harness_auth = '{\"method\":\"magic\"}'"),
            ),
        ],
    )
    .await;
}
