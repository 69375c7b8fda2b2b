//! Namespaces, Secrets, ServiceAccounts, Agents and IAM: success, validation and conflicts.

use http::{Method, StatusCode};
use occ_core::resource::NamespaceStatus;
use occ_store::audit::AuditFilter;
use occ_testkit::app::TestApp;
use serde_json::json;

use crate::common::{agent, configuration, expect, secret};

#[tokio::test]
async fn namespace_lifecycle() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let r = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-a"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let ns = r.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(r.data()["status"], "provisioning");
    assert!(
        r.data().get("existingNamespace").is_none(),
        "optional fields are omitted"
    );
    // its ensure work was queued in the same transaction
    let mut tx = app.store.begin_read().await.unwrap();
    let nsid: occ_core::NamespaceId = ns.parse().unwrap();
    assert!(
        tx.work_get(&occ_core::work::WorkKey::namespace_ready(&nsid))
            .await
            .unwrap()
            .is_some()
    );
    drop(tx);
    let r = app
        .call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-a"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    for bad in [
        json!({"name": ""}),
        json!({"name": " x"}),
        json!({"name": "x".repeat(201)}),
        json!({}),
        json!({"name": "ok", "existingNamespace": "Bad_Name"}),
    ] {
        let r = app
            .call(Method::POST, "/namespaces", &admin, Some(bad.clone()))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let r = app
        .call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "k8s", "existingNamespace": "tenant-a"})),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "only the Kubernetes Compute Driver adopts an existing namespace"
    );
    let list = expect(
        app.call(Method::GET, "/namespaces", &admin, None).await,
        StatusCode::OK,
    );
    assert_eq!(list.data().as_array().unwrap().len(), 2);
    expect(
        app.call(Method::GET, &format!("/namespaces/{ns}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    // not empty → 409 naming what remains
    app.set_namespace_status(&nsid, NamespaceStatus::Ready)
        .await;
    let cfg = configuration(&app, &ns, &admin).await;
    let r = app
        .call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_EMPTY")
    );
    assert!(r.body["error"]["message"].as_str().unwrap().contains(&cfg));
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    let r = expect(
        app.call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    assert_eq!(r.data()["status"], "deleting");
    // repeating is a no-op 202; creating inside a deleting Namespace is refused
    expect(
        app.call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {}})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    // after the worker's tombstone: 404, and the name stays reserved
    let mut tx = occ_testkit::begin_setup(&app.store).await;
    tx.namespace_tombstone(&nsid, occ_core::Timestamp::now())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        app.call(Method::GET, &format!("/namespaces/{ns}"), &admin, None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = app
        .call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-a"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deleted")
    );
    assert_eq!(
        app.call(
            Method::GET,
            "/namespaces/ns_0f8fad5b-d9cb-469f-a165-70867728950e",
            &admin,
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    // every mutation was audited
    let mut tx = app.store.begin_read().await.unwrap();
    let created = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.namespaces.create".into()),
            resource_id: Some(ns.clone()),
        })
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].actor_id, app.admin_principal.as_str());
}

#[tokio::test]
async fn secrets_are_write_only() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let base = format!("/namespaces/{ns}/secrets");
    let r = expect(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "openai", "value": "sk-live-abcdef123456"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let id = r.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.data()["ref"],
        json!({"kind": "secret", "namespaceId": ns, "id": id})
    );
    assert!(
        !r.body.to_string().contains("sk-live"),
        "the value is never returned"
    );
    let r = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "openai", "value": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    for bad in [
        json!({"name": "n", "value": ""}),
        json!({"name": "n", "value": "a\u{0}"}),
        json!({"name": "n"}),
    ] {
        assert_eq!(
            app.call(Method::POST, &base, &admin, Some(bad.clone()))
                .await
                .status,
            StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
    // A value over 65536 bytes is refused by its own rule (the body limit leaves room for the
    // largest valid value; tests/api/bodies.rs covers the limit itself).
    let r = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "n", "value": "x".repeat(65537)})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["details"][0]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("TOO_LONG"))
    );
    expect(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"value": "sk-rotated-999999"})),
        )
        .await,
        StatusCode::OK,
    );
    let list = expect(
        app.call(Method::GET, &base, &admin, None).await,
        StatusCode::OK,
    );
    assert_eq!(list.data().as_array().unwrap().len(), 1);
    // nothing secret in the audit ledger
    let mut tx = app.store.begin_read().await.unwrap();
    let all = tx.audit_list(&AuditFilter::default()).await.unwrap();
    assert!(
        !serde_json::to_string(&all.iter().map(|e| &e.details).collect::<Vec<_>>())
            .unwrap()
            .contains("sk-")
    );
    drop(tx);
    // bound by a Configuration → 409
    let cfg = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {}, "secretBindings": {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": id}}}})),
        )
        .await;
    let cfg = expect(cfg, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            &admin,
            Some(json!({"values": {}, "secretBindings": {}})),
        )
        .await,
        StatusCode::OK,
    );
    expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::NO_CONTENT,
    );
    assert_eq!(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // a Namespace that is not ready takes no Secrets
    let r = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "fresh"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let fresh = r.data()["id"].as_str().unwrap().to_owned();
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{fresh}/secrets"),
            &admin,
            Some(json!({"name": "a", "value": "b"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_READY")
    );
}

#[tokio::test]
async fn service_accounts() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let base = format!("/namespaces/{}/service-accounts", app.default_ns);
    let r = expect(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "chatgpt"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let id = r.data()["id"].as_str().unwrap().to_owned();
    assert!(r.data().get("credential").is_none());
    assert_eq!(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "chatgpt"}))
        )
        .await
        .status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "x", "credential": "k"}))
        )
        .await
        .status,
        StatusCode::BAD_REQUEST
    );
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &admin,
            Some(json!({"name": "uses-sa", "configurationId": cfg, "harnessAuth": {"method": "chatgpt_service_account", "serviceAccountId": id}})),
        )
        .await;
    let agt = expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await
            .status,
        StatusCode::CONFLICT
    );
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{ns}/agents/{agt}"),
            &admin,
            Some(json!({"configurationId": cfg, "harnessAuth": null})),
        )
        .await,
        StatusCode::OK,
    );
    expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::NO_CONTENT,
    );
    assert_eq!(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn agents_crud() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let base = format!("/namespaces/{ns}/agents");
    let cfg = configuration(&app, &ns, &admin).await;
    let body = json!({
        "name": "alpha", "configurationId": cfg, "backendId": "chatgpt-main",
        "initialWorkspaceFiles": {"USER.md": "my private profile", "SOUL.md": ""},
        "workspaceDefaultsId": "a".repeat(64)
    });
    let r = expect(
        app.call(Method::POST, &base, &admin, Some(body)).await,
        StatusCode::CREATED,
    );
    let a = r.data();
    let id = a["id"].as_str().unwrap().to_owned();
    assert_eq!(a["desiredRuntimeState"], "stopped");
    assert_eq!(a["status"], "active");
    assert_eq!(a["executionMode"], "embedded");
    assert_eq!(
        a["harnessAuth"],
        serde_json::Value::Null,
        "nullable fields are present"
    );
    assert_eq!(a["servicePrincipalId"], format!("service-agent-{id}"));
    assert!(a.get("activeRevisionId").is_none());
    assert!(
        !r.body.to_string().contains("my private profile"),
        "initial files are never echoed"
    );
    // staged privately; no revision, no work
    let mut tx = app.store.begin_read().await.unwrap();
    let agent_id: occ_core::AgentId = id.parse().unwrap();
    let setup = tx
        .workspace_setup_get(&app.default_ns, &agent_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(setup.files.unwrap().len(), 2);
    assert!(
        tx.revision_list(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        tx.work_list_for_agent(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
    let audit = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.agents.create".into()),
            resource_id: Some(id.clone()),
        })
        .await
        .unwrap();
    assert!(
        !serde_json::to_string(&audit[0].details)
            .unwrap()
            .contains("profile")
    );
    drop(tx);
    // conflicts and validation
    assert_eq!(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "alpha", "configurationId": cfg}))
        )
        .await
        .status,
        StatusCode::CONFLICT
    );
    let stale = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(
                json!({"name": "b", "configurationId": cfg, "workspaceDefaultsId": "b".repeat(64)}),
            ),
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert!(
        stale.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reload")
    );
    assert_eq!(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "b", "configurationId": cfg, "backendId": "nope"}))
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    let missing_cfg = "cfg_0f8fad5b-d9cb-469f-a165-70867728950e";
    assert_eq!(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "b", "configurationId": missing_cfg}))
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    for bad in [
        json!({"name": "b"}),
        json!({"name": "b", "configurationId": cfg, "servicePrincipalId": "x"}),
        json!({"name": "b", "configurationId": cfg, "providerId": "x"}),
        json!({"name": "b", "configurationId": cfg, "executionMode": "sideways"}),
        json!({"name": "b", "configurationId": cfg, "initialWorkspaceFiles": {"NOTES.md": "x"}}),
        json!({"name": "b", "configurationId": cfg, "initialWorkspaceFiles": {"USER.md": "x".repeat(16385)}}),
        json!({"name": "b", "configurationId": cfg, "harnessAuth": {"method": "oauth"}}),
    ] {
        let r = app
            .call(Method::POST, &base, &admin, Some(bad.clone()))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let big = app.call(Method::POST, &base, &admin, Some(json!({"name": "b", "configurationId": cfg, "initialWorkspaceFiles": {"USER.md": "x".repeat(16385)}}))).await;
    assert_eq!(
        big.body["error"]["details"][0],
        json!({"path": "/initialWorkspaceFiles/USER.md", "code": "TOO_LONG"})
    );
    // get, list, update
    expect(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        expect(
            app.call(Method::GET, &base, &admin, None).await,
            StatusCode::OK
        )
        .data()
        .as_array()
        .unwrap()
        .len(),
        1
    );
    let r = expect(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(r.data()["harnessAuth"], json!({"method": "runtime"}));
    assert_eq!(r.data()["backendId"], "chatgpt-main", "omitted keeps");
    let r = expect(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"configurationId": cfg, "backendId": null})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        r.data()["backendId"],
        serde_json::Value::Null,
        "null clears"
    );
    assert_eq!(r.data()["harnessAuth"], json!({"method": "runtime"}));
    assert_eq!(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"harnessAuth": null}))
        )
        .await
        .status,
        StatusCode::BAD_REQUEST
    );
    // delete → deleting, repeated → unchanged, mutations → AGENT_DELETING, reads still work
    let r = expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    assert_eq!(
        (
            r.data()["status"].as_str(),
            r.data()["desiredRuntimeState"].as_str()
        ),
        (Some("deleting"), Some("stopped"))
    );
    expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    let r = app
        .call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"configurationId": cfg})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "AGENT_DELETING")
    );
    let r = app
        .call(Method::POST, &format!("{base}/{id}/deploy"), &admin, None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "AGENT_DELETING")
    );
    expect(
        app.call(Method::POST, &format!("{base}/{id}/stop"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    expect(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    let mut tx = app.store.begin_read().await.unwrap();
    assert!(
        tx.workspace_setup_get(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_none(),
        "deleting removes the staged setup"
    );
    assert!(
        tx.work_get(&occ_core::work::WorkKey::agent_deleted(&agent_id))
            .await
            .unwrap()
            .is_some()
    );
    drop(tx);
    // the referenced Configuration cannot be deleted while the Agent exists
    let r = app
        .call(
            Method::DELETE,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let _ = agent;
}

#[tokio::test]
async fn iam_roles_and_bindings() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let roles = format!("/namespaces/{ns}/iam/roles");
    let bindings = format!("/namespaces/{ns}/iam/access-bindings");
    let r = expect(
        app.call(Method::POST, &roles, &admin, Some(json!({"name": "readers", "permissions": [{"action": "read", "resourceKind": "agent"}, {"action": "read", "resourceKind": "agent_revision"}]}))).await,
        StatusCode::CREATED,
    );
    let role = r.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(r.data()["namespaceId"], ns);
    for bad in [
        json!({"permissions": []}),
        json!({"permissions": [{"action": "create", "resourceKind": "agent"}]}),
        json!({"permissions": [{"action": "update", "resourceKind": "namespace"}]}),
        json!({"permissions": [{"action": "read", "resourceKind": "installation"}]}),
        json!({"permissions": [{"action": "update", "resourceKind": "agent_revision"}]}),
        json!({"permissions": [{"action": "read", "resourceKind": "agent"}, {"action": "read", "resourceKind": "agent"}]}),
        json!({"permissions": [{"action": "fly", "resourceKind": "agent"}]}),
    ] {
        assert_eq!(
            app.call(Method::POST, &roles, &admin, Some(bad.clone()))
                .await
                .status,
            StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
    assert_eq!(
        expect(
            app.call(Method::GET, &roles, &admin, None).await,
            StatusCode::OK
        )
        .data()
        .as_array()
        .unwrap()
        .len(),
        1
    );
    expect(
        app.call(Method::GET, &format!("{roles}/{role}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "a1", &admin).await;
    let (reader, reader_key) = app.principal_with(&[], None, None, None).await;
    let r = expect(
        app.call(Method::POST, &bindings, &admin, Some(json!({"subjectKind": "identity", "subjectId": reader, "roleId": role, "resourceKind": "agent", "resourceId": agt}))).await,
        StatusCode::CREATED,
    );
    let binding = r.data()["id"].as_str().unwrap().to_owned();
    // the binding grants exactly what it says
    let who = occ_testkit::app::Credential::Key(reader_key);
    expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{agt}"),
            &who,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/stop"),
            &who,
            None
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    let list = expect(
        app.call(Method::GET, &format!("/namespaces/{ns}/agents"), &who, None)
            .await,
        StatusCode::FORBIDDEN,
    );
    assert_eq!(list.code(), "FORBIDDEN", "listing needs namespace:read");
    for (bad, path) in [
        (
            json!({"subjectKind": "identity", "subjectId": "prn_nobody", "roleId": role, "resourceKind": "agent", "resourceId": agt}),
            "/subjectId",
        ),
        (
            json!({"subjectKind": "identity", "subjectId": reader, "roleId": "role_nope", "resourceKind": "agent", "resourceId": agt}),
            "/roleId",
        ),
        (
            json!({"subjectKind": "identity", "subjectId": reader, "roleId": role, "resourceKind": "agent", "resourceId": "agt_0f8fad5b-d9cb-469f-a165-70867728950e"}),
            "/resourceId",
        ),
        (
            json!({"subjectKind": "identity", "subjectId": reader, "roleId": role, "resourceKind": "secret", "resourceId": "sec_0f8fad5b-d9cb-469f-a165-70867728950e"}),
            "/roleId",
        ),
    ] {
        let r = app
            .call(Method::POST, &bindings, &admin, Some(bad.clone()))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.body["error"]["details"][0]["path"], path, "{}", r.body);
    }
    assert_eq!(
        expect(
            app.call(Method::GET, &bindings, &admin, None).await,
            StatusCode::OK
        )
        .data()
        .as_array()
        .unwrap()
        .len(),
        1
    );
    expect(
        app.call(Method::GET, &format!("{bindings}/{binding}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        app.call(Method::DELETE, &format!("{roles}/{role}"), &admin, None)
            .await
            .status,
        StatusCode::CONFLICT
    );
    expect(
        app.call(
            Method::DELETE,
            &format!("{bindings}/{binding}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    expect(
        app.call(Method::DELETE, &format!("{roles}/{role}"), &admin, None)
            .await,
        StatusCode::NO_CONTENT,
    );
    assert_eq!(
        app.call(Method::GET, &format!("{roles}/{role}"), &admin, None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let _ = secret;
}
