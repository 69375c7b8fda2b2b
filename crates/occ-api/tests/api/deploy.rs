//! Deploy admission, stop, revisions and deployment status.

use http::{Method, StatusCode};
use occ_core::ConfigurationId;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::resource::NamespaceStatus;
use occ_core::work::{WorkKey, WorkState};
use occ_drivers::configuration::{ConfigurationDriver, DocumentKey, FilesystemConfigurationDriver};
use occ_store::Backend;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use serde_json::json;

use crate::common::{agent, configuration, document, expect, secret};

#[tokio::test]
async fn deploy_freezes_an_immutable_snapshot() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::on(backend).await;
        let admin = app.admin();
        let ns = app.default_ns.to_string();
        let cfg = configuration(&app, &ns, &admin).await;
        let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
        let r = expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/deploy"),
                &admin,
                None,
            )
            .await,
            StatusCode::ACCEPTED,
        );
        let rev = r.data().clone();
        let rev_id = rev["id"].as_str().unwrap().to_owned();
        assert_eq!(rev["revision"], 1);
        assert_eq!(rev["configurationGeneration"], 1);
        assert_eq!(rev["configuration"], document());
        assert_eq!(
            rev["harness"],
            json!({"id": "openclaw", "version": "2026.9.6", "mode": "embedded"})
        );
        assert_eq!(
            rev["compute"],
            json!({"id": "compute-process", "implementation": "process"})
        );
        assert_eq!(rev["harnessAuth"], json!({"method": "runtime"}));
        assert_eq!(rev["backendId"], serde_json::Value::Null);
        // desired running, work queued for the caller, admission audited — together
        let a = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{agt}"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(a.data()["desiredRuntimeState"], "running");
        assert!(
            a.data().get("activeRevisionId").is_none(),
            "only the worker sets the pointer"
        );
        let rid: occ_core::RevisionId = rev_id.parse().unwrap();
        let mut tx = app.store.begin_read().await.unwrap();
        let work = tx
            .work_get(&WorkKey::revision_reconcile(&rid))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (work.state, work.actor_id.clone()),
            (WorkState::Queued, app.admin_principal.clone())
        );
        let audit = tx
            .audit_list(&AuditFilter {
                action: Some("openclaw.agents.deploy".into()),
                resource_id: Some(rev_id.clone()),
            })
            .await
            .unwrap();
        assert_eq!(audit.len(), 1);
        drop(tx);
        // a later PATCH changes the Configuration, never the admitted revision
        expect(
            app.call(
                Method::PATCH,
                &format!("/namespaces/{ns}/configurations/{cfg}"),
                &admin,
                Some(json!({"values": {"gateway": {"mode": "local"}}})),
            )
            .await,
            StatusCode::OK,
        );
        let again = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{agt}/revisions/{rev_id}"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(again.data()["configuration"], document(), "{backend:?}");
        assert_eq!(again.data()["configurationGeneration"], 1);
        // the next deploy freezes generation 2 as revision 2; every call admits a new revision
        let r2 = expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/deploy"),
                &admin,
                None,
            )
            .await,
            StatusCode::ACCEPTED,
        );
        assert_eq!(
            (
                r2.data()["revision"].as_u64(),
                r2.data()["configurationGeneration"].as_u64()
            ),
            (Some(2), Some(2))
        );
        assert_eq!(
            r2.data()["configuration"],
            json!({"gateway": {"mode": "local"}})
        );
        let list = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{agt}/revisions"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(list.data().as_array().unwrap().len(), 2);
        // deployment status from the work item
        let st = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{agt}/deployments/{rev_id}"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(st.data()["status"], "queued");
        assert_eq!(st.data()["error"], serde_json::Value::Null);
        assert_eq!(st.data()["warnings"], json!([]));
        assert!(st.data()["progress"]["nextAttemptAt"].is_string());
        // a revision of another Agent is 404 under this Agent
        let other = agent(&app, &ns, &cfg, "beta", &admin).await;
        assert_eq!(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{other}/revisions/{rev_id}"),
                &admin,
                None
            )
            .await
            .status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{other}/deployments/{rev_id}"),
                &admin,
                None
            )
            .await
            .status,
            StatusCode::NOT_FOUND
        );
    }
}

#[tokio::test]
async fn deploy_refusals() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    // no harnessAuth
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &admin,
            Some(json!({"name": "no-auth", "configurationId": cfg})),
        )
        .await;
    let no_auth = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{no_auth}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    // dedicated execution is not supported by the process Compute Driver
    let r = app
        .call(Method::POST, &format!("/namespaces/{ns}/agents"), &admin, Some(json!({"name": "ded", "configurationId": cfg, "executionMode": "dedicated", "harnessAuth": {"method": "runtime"}})))
        .await;
    let ded = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{ded}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("embedded")
    );
    // an embedded Agent whose Configuration selects the Codex harness: 400 naming the path,
    // and no revision is admitted
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {
                "agents": {"defaults": {"model": "codex/gpt-5.6-sol",
                    "models": {"codex/gpt-5.6-sol": {"agentRuntime": {"id": "codex"}}}}}}})),
        )
        .await;
    let codex_cfg = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mismatched = agent(&app, &ns, &codex_cfg, "mismatched", &admin).await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{mismatched}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    assert_eq!(
        r.body["error"]["details"][0]["path"],
        "/values/agents/defaults/models/codex~1gpt-5.6-sol/agentRuntime/id"
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("executionMode embedded"),
        "{}",
        r.body
    );
    let r = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{mismatched}/revisions"),
            &admin,
            None,
        )
        .await;
    assert_eq!(
        expect(r, StatusCode::OK).data().as_array().unwrap().len(),
        0
    );
    // a body on deploy is refused
    let ok_agent = agent(&app, &ns, &cfg, "fine", &admin).await;
    assert_eq!(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{ok_agent}/deploy"),
            &admin,
            Some(json!({}))
        )
        .await
        .status,
        StatusCode::BAD_REQUEST
    );
    // a Namespace that is not ready: 409 NAMESPACE_NOT_READY, audited as a failure, nothing admitted
    app.set_namespace_status(&app.default_ns, NamespaceStatus::Deleting)
        .await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{ok_agent}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_READY")
    );
    let mut tx = app.store.begin_read().await.unwrap();
    let failures: Vec<_> = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.agents.deploy".into()),
            resource_id: Some(ok_agent.clone()),
        })
        .await
        .unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].outcome, occ_core::audit::AuditOutcome::Failure);
    assert_eq!(failures[0].details["reasonCode"], "NAMESPACE_NOT_READY");
    let agent_id: occ_core::AgentId = ok_agent.parse().unwrap();
    assert!(
        tx.revision_list(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A Configuration stored before the pinned runtime's schema was enforced (or before the pin
/// moved) may no longer validate: deploy refuses it with the details its update would report,
/// and admits nothing.
#[tokio::test]
async fn a_stored_configuration_that_no_longer_validates_is_not_admitted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("configurations");
    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            configuration_root: Some(root.clone()),
            ..Default::default()
        },
    )
    .await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "stale", &admin).await;
    // what an older occ stored: generation 1 rewritten in place, as its Driver would hold it
    let cfg_id: ConfigurationId = cfg.parse().unwrap();
    let meta = app
        .store
        .begin_read()
        .await
        .unwrap()
        .configuration_get(&app.default_ns, &cfg_id)
        .await
        .unwrap()
        .unwrap();
    let mut stale = document();
    stale["bogusTopLevelKey"] = json!("value-7f3a");
    ConfigurationDriver::Filesystem(FilesystemConfigurationDriver::new(root).unwrap())
        .write(
            DocumentKey {
                namespace_id: &app.default_ns,
                configuration_id: &cfg_id,
                generation: meta.generation,
                created_at: meta.created_at,
            },
            stale.as_object().unwrap(),
            true,
        )
        .await
        .unwrap();

    let deploy = format!("/namespaces/{ns}/agents/{agt}/deploy");
    let r = app.call(Method::POST, &deploy, &admin, None).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["error"]["details"],
        json!([{"path": "/values/bogusTopLevelKey", "code": "UNKNOWN_FIELD"}])
    );
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Configuration {cfg} (generation 1) is not valid for the pinned OpenClaw runtime"
        )),
        "{message}"
    );
    assert!(!message.contains("value-7f3a"), "{message}");
    // nothing admitted: no revision, desired state unchanged
    let agent_id: occ_core::AgentId = agt.parse().unwrap();
    let mut tx = app.store.begin_read().await.unwrap();
    assert!(
        tx.revision_list(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
    drop(tx);
    let a = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{agt}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(a.data()["desiredRuntimeState"], "stopped");

    // once the Configuration is updated to a valid document, deploy admits it
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            &admin,
            Some(json!({"values": document()})),
        )
        .await,
        StatusCode::OK,
    );
    let rev = expect(
        app.call(Method::POST, &deploy, &admin, None).await,
        StatusCode::ACCEPTED,
    );
    assert_eq!(rev.data()["configurationGeneration"], 2);
}

#[tokio::test]
async fn consumed_secrets_need_the_agent_principal_grant() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "token", &admin).await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {}, "secretBindings": {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}}}})),
        )
        .await;
    let cfg = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let agt = agent(&app, &ns, &cfg, "consumer", &admin).await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let sp = format!("service-agent-{agt}");
    assert!(
        r.body["error"]["message"].as_str().unwrap().contains(&sp),
        "the 403 names the Agent's service principal"
    );
    // grant the Agent's principal secret:operate on exactly that Secret
    let sp_id: occ_core::IamId = sp.parse().unwrap();
    app.grant(
        &sp_id,
        &[Permission::new(Action::Operate, ResourceKind::Secret)],
        &app.default_ns,
        Some((ResourceKind::Secret, sec.clone())),
    )
    .await;
    let r = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/deploy"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    assert_eq!(r.data()["secretDriverId"], "secret-local");
    assert!(r.data()["secretBindings"]["MY_TOKEN"].is_object());
    assert!(
        !r.body.to_string().contains("sk-test"),
        "a revision freezes references, never values"
    );
}

/// Refusals come in the order a caller can act on them: a Compute Driver that cannot deliver
/// Secrets refuses the deploy (409) before the Agent's use of the Secret is judged (403).
#[tokio::test]
async fn a_compute_driver_without_secret_delivery_refuses_before_the_grant_is_judged() {
    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            compute: Some(occ_drivers::compute::ssh::selection()),
            ..TestAppOptions::default()
        },
    )
    .await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "token", &admin).await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {}, "secretBindings": {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}}}})),
        )
        .await;
    let cfg = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let agt = agent(&app, &ns, &cfg, "no-delivery", &admin).await;
    // The Agent's principal holds no grant on the Secret: the Driver's refusal still comes first.
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/deploy"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Secrets"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn stop_queues_new_work_each_time() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/deploy"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    for _ in 0..2 {
        let r = expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/stop"),
                &admin,
                None,
            )
            .await,
            StatusCode::ACCEPTED,
        );
        assert_eq!(r.data()["desiredRuntimeState"], "stopped");
    }
    let agent_id: occ_core::AgentId = agt.parse().unwrap();
    let mut tx = app.store.begin_read().await.unwrap();
    let stops = tx
        .work_list_for_agent(&app.default_ns, &agent_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|w| w.target == occ_core::work::WorkTarget::AgentStopped)
        .count();
    assert_eq!(stops, 2);
    // a read-only caller cannot stop
    let (_, key) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            Some(&app.default_ns),
            None,
            None,
        )
        .await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/stop"),
            &Credential::Key(key),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}

/// A Configuration stored before the binding-name rule (its row rewritten here to bind
/// `NODE_OPTIONS` in a new generation, as an older occ accepted) cannot slip through: deploy refuses it with 400 at
/// `/secretBindings/NODE_OPTIONS`, audits the refusal and admits nothing.
#[tokio::test]
async fn a_stored_binding_that_breaks_the_name_rule_is_refused_at_deploy() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::on(backend).await;
        let admin = app.admin();
        let ns = app.default_ns.to_string();
        let sec = secret(&app, &ns, "payload", &admin).await;
        let r = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/configurations"),
                &admin,
                Some(json!({"kind": "agent", "values": {}, "secretBindings": {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}}}})),
            )
            .await;
        let cfg = expect(r, StatusCode::CREATED).data()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let agt = agent(&app, &ns, &cfg, "old-binding", &admin).await;
        // The Agent may use the Secret: what refuses the deploy is the binding's name.
        let sp: occ_core::IamId = format!("service-agent-{agt}").parse().unwrap();
        app.grant(
            &sp,
            &[Permission::new(Action::Operate, ResourceKind::Secret)],
            &app.default_ns,
            Some((ResourceKind::Secret, sec.clone())),
        )
        .await;
        let mut raw = app.db.raw().await;
        let bindings = json!({"NODE_OPTIONS": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}, "delivery": {"type": "env"}}});
        raw.execute(&format!(
            "UPDATE configurations SET generation = generation + 1, secret_bindings = '{bindings}' \
             WHERE id = '{cfg}'"
        ))
        .await
        .unwrap();
        let r = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/deploy"),
                &admin,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(
            r.body["error"]["details"][0]["path"],
            "/secretBindings/NODE_OPTIONS"
        );
        let mut tx = app.store.begin_read().await.unwrap();
        let failures = tx
            .audit_list(&AuditFilter {
                action: Some("openclaw.agents.deploy".into()),
                resource_id: Some(agt.clone()),
            })
            .await
            .unwrap();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].outcome, occ_core::audit::AuditOutcome::Failure);
        assert_eq!(
            failures[0].details["reasonCode"],
            "SECRET_BINDING_NAME_REFUSED"
        );
        let agent_id: occ_core::AgentId = agt.parse().unwrap();
        assert!(
            tx.revision_list(&app.default_ns, &agent_id)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
