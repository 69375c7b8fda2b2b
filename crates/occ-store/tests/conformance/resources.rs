//! Store operations round-trip every resource exactly, and the compare-and-swap rules hold under
//! concurrency.

use std::collections::BTreeSet;
use std::sync::Arc;

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{Action, Permission, ResourceKind, ResourceRef, administrator_permissions};
use occ_core::iam::{
    AccessBinding, BoundResource, Identity, IdentityKind, Restriction, Role, ServiceKey, Session,
    UserAccount,
};
use occ_core::resource::{
    DesiredRuntimeState, Generation, HarnessAuth, SecretBinding, SecretDelivery, SecretMeta,
    SecretRef, ServiceAccount, ServiceAccountCredentialKind, WorkspaceFileName, WorkspaceSetup,
};
use occ_core::work::NewWork;
use occ_core::{IamId, InstallationId, Name, SecretId, ServiceAccountId, Timestamp};
use occ_store::StoreError;
use occ_store::agents::AgentDraft;
use occ_testkit::TestDb;

use crate::fixtures::{add_revision, namespace, world};

pub async fn resources_round_trip(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let (ns, now) = (w.ns.id.clone(), Timestamp::now());
    let installation = occ_core::resource::Installation {
        id: InstallationId::generate(),
        name: Name::parse("Local").unwrap(),
        created_at: now,
    };
    let secret = SecretMeta {
        id: SecretId::generate(),
        namespace_id: ns.clone(),
        name: Name::parse("openai").unwrap(),
        driver_id: "secret-local".into(),
        locator: "local:abc".into(),
        created_at: now,
    };
    let sa = ServiceAccount {
        id: ServiceAccountId::generate(),
        namespace_id: ns.clone(),
        name: Name::parse("chatgpt").unwrap(),
        credential_kind: Some(ServiceAccountCredentialKind::ApiKey),
        binding: Some(occ_core::resource::ServiceAccountBinding::Native {
            secret_name: "provider-key".into(),
            secret_key: "api-key".into(),
        }),
        created_at: now,
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.installation_get().await.unwrap().is_none());
    tx.installation_insert(&installation).await.unwrap();
    tx.secret_insert(&secret).await.unwrap();
    tx.service_account_insert(&sa).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(tx.installation_get().await.unwrap().unwrap(), installation);
    assert_eq!(tx.namespace_get(&ns).await.unwrap().unwrap(), w.ns);
    assert_eq!(
        tx.namespace_get_by_name(w.ns.name.as_str())
            .await
            .unwrap()
            .unwrap(),
        w.ns
    );
    assert!(tx.namespace_list().await.unwrap().contains(&w.ns));
    assert_eq!(
        tx.configuration_get(&ns, &w.cfg.id).await.unwrap().unwrap(),
        w.cfg
    );
    assert_eq!(
        tx.agent_get(&ns, &w.agent.id).await.unwrap().unwrap(),
        w.agent
    );
    assert_eq!(tx.agent_list(&ns).await.unwrap(), vec![w.agent.clone()]);
    assert_eq!(
        tx.secret_get(&ns, &secret.id).await.unwrap().unwrap(),
        secret
    );
    assert_eq!(tx.secret_list(&ns).await.unwrap(), vec![secret.clone()]);
    assert_eq!(
        tx.service_account_get(&ns, &sa.id).await.unwrap().unwrap(),
        sa
    );
    assert_eq!(
        tx.service_account_list(&ns).await.unwrap(),
        vec![sa.clone()]
    );

    // Configuration bindings and generation CAS.
    let mut bindings = occ_core::resource::SecretBindings::new();
    bindings.insert(
        "OPENAI_KEY_REF".into(),
        SecretBinding {
            source: SecretRef::new(ns.clone(), secret.id.clone()),
            delivery: SecretDelivery::Env,
        },
    );
    let next = tx
        .configuration_advance(&ns, &w.cfg.id, Generation::FIRST, &bindings)
        .await
        .unwrap();
    assert_eq!(next.get(), 2);
    let cfg = tx.configuration_get(&ns, &w.cfg.id).await.unwrap().unwrap();
    assert_eq!((cfg.generation, &cfg.secret_bindings), (next, &bindings));
    assert!(matches!(
        tx.configuration_advance(&ns, &w.cfg.id, Generation::FIRST, &bindings)
            .await,
        Err(StoreError::Stale)
    ));
    assert!(matches!(
        tx.configuration_advance(
            &ns,
            &occ_core::ConfigurationId::generate(),
            Generation::FIRST,
            &bindings
        )
        .await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        tx.secret_referencing_configurations(&ns, &secret.id)
            .await
            .unwrap(),
        vec![w.cfg.id.to_string()]
    );

    // Agent draft with Secret-backed harness auth; the Secret is then referenced.
    let draft = AgentDraft {
        configuration_id: w.cfg.id.clone(),
        backend_id: Some("chatgpt".into()),
        execution_mode: occ_core::resource::ExecutionMode::Dedicated,
        harness_auth: Some(HarnessAuth::ApiKey {
            source: SecretRef::new(ns.clone(), secret.id.clone()),
        }),
    };
    assert!(
        tx.agent_update_draft(&ns, &w.agent.id, &draft)
            .await
            .unwrap()
    );
    let agent = tx.agent_get(&ns, &w.agent.id).await.unwrap().unwrap();
    assert_eq!(agent.harness_auth, draft.harness_auth);
    assert_eq!(agent.backend_id.as_deref(), Some("chatgpt"));
    assert!(matches!(
        tx.secret_delete(&ns, &secret.id).await,
        Err(StoreError::Reference { .. })
    ));
    tx.rollback().await.unwrap();

    // A Codex access token in a Secret is stored and referenced the same way (migration 5).
    let mut tx = occ_testkit::begin_setup(&store).await;
    let pat = AgentDraft {
        harness_auth: Some(HarnessAuth::CodexPat {
            source: SecretRef::new(ns.clone(), secret.id.clone()),
        }),
        ..draft.clone()
    };
    assert!(tx.agent_update_draft(&ns, &w.agent.id, &pat).await.unwrap());
    let agent = tx.agent_get(&ns, &w.agent.id).await.unwrap().unwrap();
    assert_eq!(agent.harness_auth, pat.harness_auth);
    assert!(matches!(
        tx.secret_delete(&ns, &secret.id).await,
        Err(StoreError::Reference { .. })
    ));
    tx.rollback().await.unwrap();

    let mut tx = occ_testkit::begin_setup(&store).await;
    let auth = HarnessAuth::ChatgptServiceAccount {
        service_account_id: sa.id.clone(),
    };
    assert!(
        tx.agent_update_draft(
            &ns,
            &w.agent.id,
            &AgentDraft {
                harness_auth: Some(auth.clone()),
                ..draft.clone()
            }
        )
        .await
        .unwrap()
    );
    assert!(matches!(
        tx.service_account_delete(&ns, &sa.id).await,
        Err(StoreError::Reference { .. })
    ));
    tx.rollback().await.unwrap();

    // Revisions.
    let rev = add_revision(&store, &w, 1).await;
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(tx.revision_next_number(&ns, &w.agent.id).await.unwrap(), 2);
    assert_eq!(
        tx.revision_get(&ns, &w.agent.id, &rev.id)
            .await
            .unwrap()
            .unwrap(),
        rev
    );
    assert_eq!(
        tx.revision_list(&ns, &w.agent.id).await.unwrap(),
        vec![rev.clone()]
    );
    assert!(
        tx.agent_swap_active_revision(&ns, &w.agent.id, None, Some(&rev.id))
            .await
            .unwrap()
    );
    assert!(
        !tx.agent_swap_active_revision(&ns, &w.agent.id, None, Some(&rev.id))
            .await
            .unwrap()
    );
    assert!(
        tx.agent_set_desired_state(&ns, &w.agent.id, DesiredRuntimeState::Running)
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let agent = tx.agent_get(&ns, &w.agent.id).await.unwrap().unwrap();
    assert_eq!(agent.active_revision_id.as_ref(), Some(&rev.id));
    assert_eq!(agent.desired_runtime_state, DesiredRuntimeState::Running);

    // Workspace setup.
    drop(tx);
    let mut files = occ_core::resource::WorkspaceFiles::new();
    files.insert(
        WorkspaceFileName::Agents,
        "line one\r\nline two\u{1F600}".into(),
    );
    let setup = WorkspaceSetup {
        id: "ws-1".into(),
        namespace_id: ns.clone(),
        agent_id: w.agent.id.clone(),
        defaults_id: None,
        files: Some(files),
        completed: false,
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.workspace_setup_insert(&setup).await.unwrap();
    assert_eq!(
        tx.workspace_setup_get(&ns, &w.agent.id)
            .await
            .unwrap()
            .unwrap(),
        setup
    );

    // Audit round trip.
    let event = AuditEvent::new(
        AuditKind::AuthorizationDenial,
        "prn_x",
        "openclaw.agents.deploy",
        &ResourceRef::exact(ResourceKind::Agent, &ns, &w.agent.id),
        AuditOutcome::Denied,
    )
    .reason_code("AUTHORIZATION_DENIED")
    .metadata("requestId", "req_1");
    tx.audit_append(&event).await.unwrap();
    let listed = tx
        .audit_list(&occ_store::audit::AuditFilter {
            action: Some("openclaw.agents.deploy".into()),
            resource_id: None,
        })
        .await
        .unwrap();
    assert_eq!(listed, vec![event]);
    tx.commit().await.unwrap();

    // Namespace contents, for NAMESPACE_NOT_EMPTY.
    let mut tx = store.begin_read().await.unwrap();
    let contents = tx.namespace_contents(&ns).await.unwrap();
    assert_eq!(contents.agents, vec![w.agent.id.to_string()]);
    assert_eq!(contents.configurations, vec![w.cfg.id.to_string()]);
    assert_eq!(contents.secrets, vec![secret.id.to_string()]);
    assert_eq!(contents.service_accounts, vec![sa.id.to_string()]);
    assert!(!contents.is_empty());
}

pub async fn generation_compare_and_swap_has_one_winner_per_generation(db: TestDb) {
    let store = Arc::new(
        db.store_with(&occ_store::StoreOptions {
            max_connections: 20,
            ..Default::default()
        })
        .await,
    );
    let w = world(&store).await;
    let (ns, cfg) = (w.ns.id.clone(), w.cfg.id.clone());
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (store, ns, cfg) = (store.clone(), ns.clone(), cfg.clone());
        tasks.push(tokio::spawn(async move {
            // Read the current generation in one transaction, then try to advance it in another,
            // until this task has won exactly once. Returns the generation it won from.
            loop {
                let mut tx = store.begin_read().await.unwrap();
                let current = tx
                    .configuration_get(&ns, &cfg)
                    .await
                    .unwrap()
                    .unwrap()
                    .generation;
                tx.rollback().await.unwrap();
                tokio::task::yield_now().await;
                let mut tx = occ_testkit::begin_setup(&store).await;
                match tx
                    .configuration_advance(&ns, &cfg, current, &Default::default())
                    .await
                {
                    Ok(next) => {
                        tx.commit().await.unwrap();
                        assert_eq!(next.get(), current.get() + 1);
                        return current.get();
                    }
                    Err(StoreError::Stale) => {
                        tx.rollback().await.unwrap();
                    }
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
        }));
    }
    let mut winners = BTreeSet::new();
    for t in tasks {
        let won_from = t.await.unwrap();
        assert!(
            winners.insert(won_from),
            "generation {won_from} had two winners"
        );
    }
    assert_eq!(
        winners,
        (1..=50).collect::<BTreeSet<u64>>(),
        "exactly one winner per generation"
    );
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.configuration_get(&ns, &cfg)
            .await
            .unwrap()
            .unwrap()
            .generation
            .get(),
        51
    );
}

pub async fn agent_deletion_finalizer_removes_everything(db: TestDb) {
    let store = db.store().await;
    let w = world(&store).await;
    let (ns, agt) = (w.ns.id.clone(), w.agent.id.clone());
    let r1 = add_revision(&store, &w, 1).await;
    let r2 = add_revision(&store, &w, 2).await;
    let now = Timestamp::now();
    let human = Identity {
        id: IamId::generate_principal(),
        kind: IdentityKind::Principal,
        namespace_id: None,
        agent_id: None,
        issuer: Some("occ:test".into()),
        subject: Some("alice".into()),
        created_at: now,
    };
    let role = Role {
        id: IamId::generate_role(false),
        namespace_id: Some(ns.clone()),
        name: Some("reader".into()),
        permissions: vec![
            Permission::new(Action::Read, ResourceKind::Agent),
            Permission::new(Action::Read, ResourceKind::AgentRevision),
        ],
        created_at: now,
    };
    let on_agent = AccessBinding {
        id: IamId::generate_binding(""),
        namespace_id: Some(ns.clone()),
        subject_id: human.id.clone(),
        role_id: role.id.clone(),
        resource: Some(BoundResource {
            kind: ResourceKind::Agent,
            id: agt.to_string(),
        }),
        runtime_role: None,
        created_at: now,
    };
    let on_revision = AccessBinding {
        id: IamId::generate_binding(""),
        resource: Some(BoundResource {
            kind: ResourceKind::AgentRevision,
            id: r2.id.to_string(),
        }),
        ..on_agent.clone()
    };
    let of_agent_sp = AccessBinding {
        id: IamId::generate_binding(""),
        subject_id: w.agent.service_principal_id.clone(),
        resource: None,
        ..on_agent.clone()
    };
    let unrelated = AccessBinding {
        id: IamId::generate_binding(""),
        resource: None,
        ..on_agent.clone()
    };
    let restriction = Restriction {
        id: IamId::generate_restriction(),
        namespace_id: Some(ns.clone()),
        action: Action::Deploy,
        resource_kind: ResourceKind::Agent,
        resource_id: Some(agt.to_string()),
        created_at: now,
    };
    let key = ServiceKey {
        id: IamId::generate_service_key(),
        service_principal_id: w.agent.service_principal_id.clone(),
        namespace_id: Some(ns.clone()),
        name: "agent-key".into(),
        expires_at: now.plus(std::time::Duration::from_secs(3600)),
        created_at: now,
    };
    let mut files = occ_core::resource::WorkspaceFiles::new();
    files.insert(WorkspaceFileName::User, "u".into());
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.identity_insert(&human).await.unwrap();
    tx.role_insert(&role).await.unwrap();
    for b in [&on_agent, &on_revision, &of_agent_sp, &unrelated] {
        tx.binding_insert(b).await.unwrap();
    }
    tx.restriction_insert(&restriction).await.unwrap();
    tx.service_key_insert(&key, &"a".repeat(64)).await.unwrap();
    tx.workspace_setup_insert(&WorkspaceSetup {
        id: "ws".into(),
        namespace_id: ns.clone(),
        agent_id: agt.clone(),
        defaults_id: None,
        files: Some(files),
        completed: false,
    })
    .await
    .unwrap();
    assert!(
        tx.agent_swap_active_revision(&ns, &agt, None, Some(&r2.id))
            .await
            .unwrap()
    );
    tx.work_enqueue(&NewWork::revision_reconcile(&ns, &agt, &r1.id, &human.id))
        .await
        .unwrap();
    tx.work_enqueue(&NewWork::agent_deleted(&ns, &agt, &human.id))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // Only a deleting Agent can be finalized.
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.agent_finalize_deletion(&ns, &agt).await,
        Err(StoreError::Invariant { .. })
    ));
    drop(tx);

    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.agent_mark_deleting(&ns, &agt).await.unwrap());
    assert!(
        !tx.agent_mark_deleting(&ns, &agt).await.unwrap(),
        "marking twice changes nothing"
    );
    let removed: BTreeSet<String> = tx
        .agent_finalize_deletion(&ns, &agt)
        .await
        .unwrap()
        .into_iter()
        .collect();
    tx.commit().await.unwrap();
    let expected: BTreeSet<String> = [&on_agent, &on_revision, &of_agent_sp]
        .iter()
        .map(|b| b.id.to_string())
        .collect();
    assert_eq!(removed, expected);

    let mut raw = db.raw().await;
    for (table, filter) in [
        ("agents", format!("id = '{agt}'")),
        ("agent_revisions", format!("agent_id = '{agt}'")),
        ("workspace_setups", format!("agent_id = '{agt}'")),
        ("controller_work", format!("agent_id = '{agt}'")),
        ("iam_identities", format!("agent_id = '{agt}'")),
        ("service_keys", format!("id = '{}'", key.id)),
        ("iam_restrictions", format!("id = '{}'", restriction.id)),
    ] {
        assert_eq!(
            raw.count(&format!("SELECT count(*) FROM {table} WHERE {filter}"))
                .await,
            0,
            "{table}"
        );
    }
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM iam_access_bindings WHERE id = '{}'",
            unrelated.id
        ))
        .await,
        1
    );
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM configurations WHERE id = '{}'",
            w.cfg.id
        ))
        .await,
        1
    );
}

pub async fn iam_policy_snapshot(db: TestDb) {
    let store = db.store().await;
    let ns = namespace("iam");
    let now = Timestamp::now();
    let spn = Identity {
        id: IamId::generate_service_principal(),
        kind: IdentityKind::ServicePrincipal,
        namespace_id: None,
        agent_id: None,
        issuer: None,
        subject: None,
        created_at: now,
    };
    let admin = Role {
        id: IamId::generate_role(true),
        namespace_id: None,
        name: Some("Installation administrator".into()),
        permissions: administrator_permissions(),
        created_at: now,
    };
    let binding = AccessBinding {
        id: IamId::generate_binding("admin_"),
        namespace_id: None,
        subject_id: spn.id.clone(),
        role_id: admin.id.clone(),
        resource: None,
        runtime_role: None,
        created_at: now,
    };
    let restriction = Restriction {
        id: IamId::generate_restriction(),
        namespace_id: Some(ns.id.clone()),
        action: Action::Delete,
        resource_kind: ResourceKind::Namespace,
        resource_id: None,
        created_at: now,
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.identity_insert(&spn).await.unwrap();
    tx.role_insert(&admin).await.unwrap();
    tx.binding_insert(&binding).await.unwrap();
    tx.restriction_insert(&restriction).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = occ_testkit::begin_setup(&store).await;
    let snap = tx.policy_snapshot(&spn.id).await.unwrap();
    assert_eq!(snap.identity.as_ref(), Some(&spn));
    assert_eq!(snap.grants.len(), 1);
    assert_eq!(snap.grants[0].binding, binding);
    assert_eq!(snap.grants[0].role, admin);
    assert_eq!(snap.restrictions, vec![restriction]);
    // the key-authentication statement returns the same snapshot for the key's principal
    let key = ServiceKey {
        id: IamId::generate_service_key(),
        service_principal_id: spn.id.clone(),
        namespace_id: None,
        name: "policy".into(),
        expires_at: now.plus(std::time::Duration::from_secs(60)),
        created_at: now,
    };
    tx.service_key_insert(&key, &"d".repeat(64)).await.unwrap();
    let (found, _, via_key) = tx
        .service_key_with_policy(&"d".repeat(64))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((found, via_key), (key, snap.clone()));
    assert_eq!(
        tx.binding_list(&ns.id).await.unwrap(),
        vec![binding.clone()]
    );
    assert!(matches!(
        tx.role_delete(&admin.id).await,
        Err(StoreError::Reference { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.binding_delete(&binding.id).await.unwrap();
    tx.role_delete(&admin.id).await.unwrap();
    assert!(matches!(
        tx.binding_delete(&binding.id).await,
        Err(StoreError::NotFound)
    ));
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    let unknown = tx
        .policy_snapshot(&IamId::generate_principal())
        .await
        .unwrap();
    assert!(unknown.identity.is_none() && unknown.grants.is_empty());
    // roles and bindings are immutable
    let mut raw = db.raw().await;
    let role = Role {
        id: IamId::generate_role(false),
        namespace_id: Some(ns.id.clone()),
        name: None,
        permissions: vec![Permission::new(Action::Read, ResourceKind::Agent)],
        created_at: now,
    };
    tx.role_insert(&role).await.unwrap();
    tx.commit().await.unwrap();
    assert!(
        raw.execute(&format!(
            "UPDATE iam_roles SET name = 'x' WHERE id = '{}'",
            role.id
        ))
        .await
        .is_err()
    );
    assert!(
        raw.execute(&format!(
            "UPDATE iam_roles SET permissions = '[]' WHERE id = '{}'",
            role.id
        ))
        .await
        .is_err()
    );
}

/// A runtime role sits only on an exact Agent binding, at most one per person and Agent; it is
/// the one column of a binding that changes in place, and never back to none.
pub async fn runtime_role_assignments(db: TestDb) {
    let store = db.store().await;
    let ns = namespace("runtime-roles");
    let now = Timestamp::now();
    let person = Identity {
        id: IamId::generate_principal(),
        kind: IdentityKind::Principal,
        namespace_id: None,
        agent_id: None,
        issuer: Some("occ".into()),
        subject: Some("erin".into()),
        created_at: now,
    };
    let role = Role {
        id: IamId::generate_role(false),
        namespace_id: Some(ns.id.clone()),
        name: None,
        permissions: vec![Permission::new(Action::Use, ResourceKind::Agent)],
        created_at: now,
    };
    let agent_id = occ_core::AgentId::generate().to_string();
    let on = |kind: ResourceKind, id: &str, runtime_role: Option<&str>| AccessBinding {
        id: IamId::generate_binding(""),
        namespace_id: Some(ns.id.clone()),
        subject_id: person.id.clone(),
        role_id: role.id.clone(),
        resource: Some(BoundResource {
            kind,
            id: id.to_owned(),
        }),
        runtime_role: runtime_role.map(str::to_owned),
        created_at: now,
    };
    let assigned = on(
        ResourceKind::Agent,
        &agent_id,
        Some("platform-administrator"),
    );
    let plain = on(ResourceKind::Agent, &agent_id, None);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.identity_insert(&person).await.unwrap();
    tx.role_insert(&role).await.unwrap();
    tx.binding_insert(&assigned).await.unwrap();
    tx.binding_insert(&plain).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(
        tx.binding_get(&assigned.id).await.unwrap(),
        Some(assigned.clone())
    );
    assert_eq!(
        tx.runtime_assignment(&ns.id, &person.id, &agent_id)
            .await
            .unwrap(),
        Some(assigned.clone())
    );
    let snap = tx.policy_snapshot(&person.id).await.unwrap();
    assert!(snap.grants.iter().any(|g| g.binding == assigned));
    // A second assignment for the same person and Agent.
    assert!(matches!(
        tx.binding_insert(&on(ResourceKind::Agent, &agent_id, Some("other")))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    // Not on an Agent, or a malformed name.
    assert!(matches!(
        tx.binding_insert(&on(
            ResourceKind::Secret,
            &agent_id,
            Some("platform-administrator")
        ))
        .await,
        Err(StoreError::Invariant { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.binding_insert(&on(ResourceKind::Agent, &agent_id, Some(" padded")))
            .await,
        Err(StoreError::Invariant { .. })
    ));
    drop(tx);
    // A plain binding takes a role in place (once the other assignment is gone).
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.binding_set_runtime_role(&plain.id, "platform-administrator")
            .await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.binding_delete(&assigned.id).await.unwrap();
    tx.binding_set_runtime_role(&plain.id, "platform-administrator")
        .await
        .unwrap();
    assert!(matches!(
        tx.binding_set_runtime_role(&IamId::generate_binding(""), "platform-administrator")
            .await,
        Err(StoreError::NotFound)
    ));
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(
        tx.binding_get(&plain.id)
            .await
            .unwrap()
            .unwrap()
            .runtime_role
            .as_deref(),
        Some("platform-administrator")
    );
    drop(tx);
    // Everything else stays immutable, and the role is never cleared by an update.
    let mut raw = db.raw().await;
    for change in [
        format!("role_id = '{}'", IamId::generate_role(false)),
        "resource_id = 'agt_other'".to_owned(),
        "runtime_role = NULL".to_owned(),
    ] {
        assert!(
            raw.execute(&format!(
                "UPDATE iam_access_bindings SET {change} WHERE id = '{}'",
                plain.id
            ))
            .await
            .is_err(),
            "{change}"
        );
    }
}

/// A launch ticket's nonce is redeemed once across transactions (and so across API processes);
/// redemptions are forgotten once their tickets expired; the stored value is a SHA-256 hex.
pub async fn launch_tickets_are_redeemed_once(db: TestDb) {
    let store = db.store().await;
    let now = Timestamp::now();
    let soon = now.plus(std::time::Duration::from_secs(60));
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.ticket_redeem(&a, soon, now).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(!tx.ticket_redeem(&a, soon, now).await.unwrap(), "a replay");
    assert!(tx.ticket_redeem(&b, now, now).await.unwrap());
    tx.commit().await.unwrap();
    // Once its ticket expired, a redemption is forgotten (a signed ticket past its expiry is
    // refused before it gets here).
    let later = soon.plus(std::time::Duration::from_secs(1));
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(tx.ticket_redeem(&a, later, later).await.unwrap());
    tx.commit().await.unwrap();
    let mut raw = db.raw().await;
    assert_eq!(
        raw.count("SELECT count(*) FROM native_admin_ticket_redemptions")
            .await,
        1,
        "b and the first a were pruned"
    );
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.ticket_redeem("not-a-hash", soon, now).await,
        Err(StoreError::Invariant { .. })
    ));
}

pub async fn accounts_sessions_and_keys(db: TestDb) {
    let store = db.store().await;
    let now = Timestamp::now();
    let principal = Identity {
        id: IamId::generate_principal(),
        kind: IdentityKind::Principal,
        namespace_id: None,
        agent_id: None,
        issuer: Some("occ:installation".into()),
        subject: Some("usr".into()),
        created_at: now,
    };
    let user = UserAccount {
        id: IamId::generate_user(),
        email: "admin@openclaw.local".into(),
        name: "Admin".into(),
        principal_id: principal.id.clone(),
        version: 1,
        disabled_at: None,
        created_at: now,
    };
    let hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.identity_insert(&principal).await.unwrap();
    tx.user_insert(&user, hash).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert_eq!(
        tx.user_by_email("admin@openclaw.local").await.unwrap(),
        Some((user.clone(), hash.to_owned()))
    );
    assert!(
        tx.user_by_email("nobody@openclaw.local")
            .await
            .unwrap()
            .is_none()
    );
    let dup = UserAccount {
        id: IamId::generate_user(),
        ..user.clone()
    };
    assert!(matches!(
        tx.user_insert(&dup, hash).await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    let upper = UserAccount {
        id: IamId::generate_user(),
        email: "Admin@X.io".into(),
        ..user.clone()
    };
    assert!(
        matches!(
            tx.user_insert(&upper, hash).await,
            Err(StoreError::Invariant { .. })
        ),
        "emails are stored lowercased"
    );
    drop(tx);

    let session = Session {
        id: "ses_1".into(),
        user_id: user.id.clone(),
        expires_at: now.plus(std::time::Duration::from_secs(60)),
        created_at: now,
    };
    let expired = Session {
        id: "ses_2".into(),
        expires_at: Timestamp::from_unix_millis(now.unix_millis() - 1).unwrap(),
        ..session.clone()
    };
    let (h1, h2) = ("1".repeat(64), "2".repeat(64));
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.session_insert(&session, &h1).await.unwrap();
    tx.session_insert(&expired, &h2).await.unwrap();
    assert_eq!(
        tx.session_by_token_hash(&h1, now).await.unwrap(),
        Some((session.clone(), user.clone()))
    );
    assert_eq!(
        tx.session_by_token_hash(&h2, now).await.unwrap(),
        None,
        "expired sessions do not authenticate"
    );
    assert_eq!(tx.session_delete_expired(now).await.unwrap(), 1);
    assert!(tx.session_delete("ses_1").await.unwrap());
    assert_eq!(tx.session_by_token_hash(&h1, now).await.unwrap(), None);

    // Account controls: a change applies only at the version read and advances it; disabling
    // ends every session, and a disabled account's principal has no policy.
    tx.session_insert(&session, &h1).await.unwrap();
    assert!(
        tx.account_change(&user.id, 2, None, true)
            .await
            .unwrap()
            .is_none(),
        "stale version"
    );
    let disabled = tx
        .account_change(&user.id, 1, Some(now), true)
        .await
        .unwrap()
        .expect("at version 1");
    assert_eq!((disabled.version, disabled.disabled_at), (2, Some(now)));
    assert_eq!(tx.session_by_token_hash(&h1, now).await.unwrap(), None);
    assert!(
        tx.policy_snapshot(&principal.id)
            .await
            .unwrap()
            .identity
            .is_none()
    );
    assert_eq!(tx.user_get(&user.id).await.unwrap(), Some(disabled));
    // A session stored for a disabled account (a sign-in racing the change) never authenticates.
    tx.session_insert(&session, &h1).await.unwrap();
    assert_eq!(tx.session_by_token_hash(&h1, now).await.unwrap(), None);
    assert_eq!(tx.session_by_id("ses_1", now).await.unwrap(), None);
    let enabled = tx
        .account_change(&user.id, 2, None, false)
        .await
        .unwrap()
        .expect("at 2");
    assert_eq!(enabled.version, 3);
    assert!(tx.session_by_token_hash(&h1, now).await.unwrap().is_some());
    assert!(
        tx.policy_snapshot(&principal.id)
            .await
            .unwrap()
            .identity
            .is_some()
    );
    assert!(tx.session_delete("ses_1").await.unwrap());

    let spn = Identity {
        id: IamId::generate_service_principal(),
        kind: IdentityKind::ServicePrincipal,
        namespace_id: None,
        agent_id: None,
        issuer: None,
        subject: None,
        created_at: now,
    };
    tx.identity_insert(&spn).await.unwrap();
    let key = ServiceKey {
        id: IamId::generate_service_key(),
        service_principal_id: spn.id.clone(),
        namespace_id: None,
        name: "bootstrap-admin".into(),
        expires_at: now.plus(std::time::Duration::from_secs(86400)),
        created_at: now,
    };
    let kh = "f".repeat(64);
    tx.service_key_insert(&key, &kh).await.unwrap();
    let (found, stored, policy) = tx.service_key_with_policy(&kh).await.unwrap().unwrap();
    assert_eq!((found, stored), (key.clone(), kh.clone()));
    assert_eq!(policy, tx.policy_snapshot(&spn.id).await.unwrap());
    assert_eq!(policy.identity, Some(spn.clone()));
    assert!(
        tx.service_key_with_policy(&"e".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        tx.service_key_get(&key.id).await.unwrap(),
        Some(key.clone())
    );
    assert!(tx.service_key_delete(&key.id).await.unwrap());
    assert!(!tx.service_key_delete(&key.id).await.unwrap());
    let bad = ServiceKey {
        id: IamId::generate_service_key(),
        expires_at: now,
        ..key.clone()
    };
    assert!(
        matches!(
            tx.service_key_insert(&bad, &"e".repeat(64)).await,
            Err(StoreError::Invariant { .. })
        ),
        "expiry must follow creation"
    );
}

pub async fn admission_is_one_atomic_step(db: TestDb) {
    use occ_store::revisions::NewRevision;
    let store = db.store().await;
    let w = world(&store).await;
    let who = IamId::generate_principal();
    let spec = crate::fixtures::revision(&w.agent, 1).spec;
    let mut admitted = Vec::new();
    for _ in 0..3 {
        let new = NewRevision {
            id: occ_core::RevisionId::generate(),
            namespace_id: w.ns.id.clone(),
            agent_id: w.agent.id.clone(),
            backend_id: None,
            spec: spec.clone(),
            source_revision_id: None,
            admitted_at: Timestamp::now(),
        };
        let event = AuditEvent::new(
            AuditKind::Mutation,
            who.as_str(),
            "openclaw.agents.deploy",
            &ResourceRef::exact(ResourceKind::AgentRevision, &w.ns.id, &new.id),
            AuditOutcome::Success,
        );
        let mut tx = occ_testkit::begin_setup(&store).await;
        tx.agent_lock(&w.ns.id, &w.agent.id).await.unwrap().unwrap();
        let rev = tx.revision_admit(&new, &who, &event).await.unwrap();
        tx.commit().await.unwrap();
        admitted.push(rev);
    }
    assert_eq!(
        admitted.iter().map(|r| r.revision).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.revision_list(&w.ns.id, &w.agent.id).await.unwrap(),
        admitted
    );
    assert_eq!(
        tx.agent_get(&w.ns.id, &w.agent.id)
            .await
            .unwrap()
            .unwrap()
            .desired_runtime_state,
        DesiredRuntimeState::Running
    );
    for rev in &admitted {
        let work = tx
            .work_get(&occ_core::work::WorkKey::revision_reconcile(&rev.id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(work.actor_id, who);
        let events = tx
            .audit_list(&occ_store::audit::AuditFilter {
                action: Some("openclaw.agents.deploy".into()),
                resource_id: Some(rev.id.to_string()),
            })
            .await
            .unwrap();
        assert_eq!(events.len(), 1);
    }
    drop(tx);
    // A failed admission (here: a deleting Agent) leaves nothing behind.
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.agent_mark_deleting(&w.ns.id, &w.agent.id).await.unwrap();
    tx.commit().await.unwrap();
    let new = NewRevision {
        id: occ_core::RevisionId::generate(),
        namespace_id: w.ns.id.clone(),
        agent_id: w.agent.id.clone(),
        backend_id: None,
        spec,
        source_revision_id: None,
        admitted_at: Timestamp::now(),
    };
    let event = AuditEvent::new(
        AuditKind::Mutation,
        who.as_str(),
        "openclaw.agents.deploy",
        &ResourceRef::exact(ResourceKind::AgentRevision, &w.ns.id, &new.id),
        AuditOutcome::Success,
    );
    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.revision_admit(&new, &who, &event).await,
        Err(StoreError::Stale)
    ));
    tx.rollback().await.unwrap();
    let mut raw = db.raw().await;
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM agent_revisions WHERE id = '{}'",
            new.id
        ))
        .await,
        0
    );
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM audit_events WHERE resource_id = '{}'",
            new.id
        ))
        .await,
        0
    );
}

/// Service principals: a name unique in the Installation; a disabled one has no policy (its
/// keys do not authenticate, its queued work is not authorized) until it is enabled again;
/// deleting one deletes its keys and bindings; a Namespace's teardown deletes the Namespace's
/// own; a new Namespace comes with its built-in Roles.
pub async fn service_principals_disable_delete_and_teardown(db: TestDb) {
    use occ_core::iam::{BuiltinRole, ServicePrincipal};
    use occ_core::resource::Namespace;
    let store = db.store().await;
    let ns = namespace("principals");
    let now = Timestamp::now();
    let principal = |name: &str, ns: Option<&Namespace>| ServicePrincipal {
        id: IamId::generate_service_principal(),
        namespace_id: ns.map(|n| n.id.clone()),
        name: Some(name.into()),
        disabled_at: None,
        created_at: now,
    };
    let ci = principal("ci", None);
    let scoped = principal("scoped", Some(&ns));
    let reader = Role {
        id: IamId::generate_role(false),
        namespace_id: None,
        name: None,
        permissions: vec![Permission::new(Action::Read, ResourceKind::Installation)],
        created_at: now,
    };
    let key = |principal: &ServicePrincipal| ServiceKey {
        id: IamId::generate_service_key(),
        service_principal_id: principal.id.clone(),
        namespace_id: None,
        name: "k".into(),
        expires_at: now.plus(std::time::Duration::from_secs(60)),
        created_at: now,
    };
    let mut tx = occ_testkit::begin_setup(&store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.service_principal_insert(&ci).await.unwrap();
    tx.service_principal_insert(&scoped).await.unwrap();
    tx.role_insert(&reader).await.unwrap();
    tx.binding_insert(&AccessBinding {
        id: IamId::generate_binding(""),
        namespace_id: None,
        subject_id: ci.id.clone(),
        role_id: reader.id.clone(),
        resource: None,
        runtime_role: None,
        created_at: now,
    })
    .await
    .unwrap();
    tx.service_key_insert(&key(&ci), &"a".repeat(64))
        .await
        .unwrap();
    tx.service_key_insert(&key(&scoped), &"b".repeat(64))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = occ_testkit::begin_setup(&store).await;
    assert!(matches!(
        tx.service_principal_insert(&principal("ci", Some(&ns)))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    let mut tx = occ_testkit::begin_setup(&store).await;
    let roles = tx.role_list(&ns.id).await.unwrap();
    for role in BuiltinRole::ALL {
        assert!(
            roles.contains(&role.role(&ns.id, ns.created_at)),
            "{role:?}"
        );
    }
    assert_eq!(
        tx.service_principal_get(&ci.id).await.unwrap(),
        Some(ci.clone())
    );
    assert_eq!(
        tx.service_principal_list(Some(&ns.id)).await.unwrap(),
        vec![scoped.clone()]
    );
    assert_eq!(tx.policy_snapshot(&ci.id).await.unwrap().grants.len(), 1);
    let later = Timestamp::now();
    tx.service_principal_set_disabled(&ci, Some(later))
        .await
        .unwrap();
    let snap = tx.policy_snapshot(&ci.id).await.unwrap();
    assert!(snap.identity.is_none() && snap.grants.is_empty());
    assert!(
        tx.service_key_with_policy(&"a".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        tx.service_principal_get(&ci.id)
            .await
            .unwrap()
            .unwrap()
            .disabled_at,
        Some(later)
    );
    tx.service_principal_set_disabled(&ci, None).await.unwrap();
    assert!(
        tx.service_key_with_policy(&"a".repeat(64))
            .await
            .unwrap()
            .is_some()
    );
    tx.service_principal_delete(&ci.id).await.unwrap();
    assert!(
        tx.service_key_with_policy(&"a".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    assert!(tx.service_principal_get(&ci.id).await.unwrap().is_none());
    assert!(matches!(
        tx.service_principal_delete(&ci.id).await,
        Err(StoreError::NotFound)
    ));
    tx.iam_remove_namespace_policy(&ns.id).await.unwrap();
    assert!(
        tx.service_principal_get(&scoped.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        tx.service_key_with_policy(&"b".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    assert!(tx.role_list(&ns.id).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}
