//! `provisionAgent`, `getAgentProvisioning` and `retryAgentProvisioning` at the API (no worker
//! runs here, so jobs stay queued; `occ-controller`'s worker tests run them): what admission
//! refuses before anything is queued (400 with the field's pointer, 403 for authority the job
//! would need, 404 for references, 409 for a taken name or a reused requestId, 413), who may read
//! a job (only the actor who admitted it), that a queued job keeps its Namespace from being
//! deleted, and that the evidence never holds the request's values.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind, administrator_permissions};
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, Reply, TestApp};
use serde_json::{Value, json};

use crate::common::{document, expect, secret};

fn body(request: &str, name: &str) -> Value {
    json!({
        "requestId": request,
        "name": name,
        "configuration": {"kind": "agent", "values": document()},
        "harnessAuth": {"method": "runtime"},
        "initialWorkspaceFiles": {"SOUL.md": "You are careful."},
    })
}

fn request_id() -> String {
    format!("req_{}", uuid::Uuid::new_v4())
}

async fn provision(app: &TestApp, who: &Credential, body: Value) -> Reply {
    app.call(
        Method::POST,
        &format!("/namespaces/{}/agents/provision", app.default_ns),
        who,
        Some(body),
    )
    .await
}

fn paths(reply: &Reply) -> Vec<(String, String)> {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    reply.body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn admission_answers_202_with_the_job_and_queues_it() {
    let app = TestApp::new().await;
    let r = expect(
        provision(&app, &app.admin(), body(&request_id(), "one-step")).await,
        StatusCode::ACCEPTED,
    );
    let job = &r.data()["provisioning"];
    let keys: Vec<&str> = job
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "attemptCount",
            "phase",
            "status",
            "updatedAt",
            "url",
            "workId"
        ],
        "nothing exists yet, so no ids: {job}"
    );
    assert_eq!(
        (job["status"].as_str(), job["phase"].as_str()),
        (Some("queued"), Some("admitted"))
    );
    let work = job["workId"].as_str().unwrap();
    assert!(work.starts_with("prv_"), "{work}");
    let read = expect(
        app.call(
            Method::GET,
            job["url"].as_str().unwrap(),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(read.data()["workId"], work);
    // Queued, so not retryable.
    let retry = app
        .call(
            Method::POST,
            &format!("{}/retry", job["url"].as_str().unwrap()),
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(
        (retry.status, retry.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    // The evidence names the job; no document or workspace file content reaches it.
    let mut tx = app.store.begin_read().await.unwrap();
    let events = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.agents.provision".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].details["workId"], work);
    let text = serde_json::to_string(&events[0].details).unwrap();
    assert!(
        !text.contains("careful") && !text.contains("gpt-5"),
        "{text}"
    );
}

#[tokio::test]
async fn bad_bodies_are_400_with_the_pointer_of_each_problem() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let r = provision(&app, &admin, json!({"name": "x"})).await;
    assert_eq!(
        paths(&r),
        [
            ("/requestId".to_owned(), "REQUIRED".to_owned()),
            ("/configuration".to_owned(), "REQUIRED".to_owned())
        ]
    );
    let mut wrong = body("req_not-a-uuid", " padded");
    wrong["configuration"]["kind"] = json!("tool");
    wrong["plugins"] = json!([]);
    wrong["executionMode"] = json!("somewhere");
    let found = paths(&provision(&app, &admin, wrong).await);
    for path in [
        "/requestId",
        "/name",
        "/configuration/kind",
        "/plugins",
        "/executionMode",
    ] {
        assert!(found.iter().any(|(p, _)| p == path), "{path}: {found:?}");
    }
    // The document is checked as on Configuration create, under /configuration/values.
    let mut invalid = body(&request_id(), "invalid");
    invalid["configuration"]["values"] = json!({"gateway": {"port": "eighty"}});
    let found = paths(&provision(&app, &admin, invalid).await);
    assert!(
        found
            .iter()
            .all(|(p, _)| p.starts_with("/configuration/values")),
        "{found:?}"
    );
    // Too large to read.
    let mut huge = body(&request_id(), "huge");
    huge["initialWorkspaceFiles"]["SOUL.md"] = json!("\u{1}".repeat(120_000));
    let r = provision(&app, &admin, huge).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    // A malformed workId.
    let r = app
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/provision/not-a-job", app.default_ns),
            &admin,
            None,
        )
        .await;
    assert_eq!(
        paths(&r),
        [("/workId".to_owned(), "INVALID_FORMAT".to_owned())]
    );
}

#[tokio::test]
async fn references_names_and_request_ids_are_checked_before_anything_is_queued() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    // An unknown Secret in a binding: 404, like Configuration create.
    let mut missing = body(&request_id(), "needs-key");
    missing["configuration"]["secretBindings"] = json!({"MODEL_KEY": {"source": {"kind": "secret",
        "namespaceId": ns, "id": "sec_00000000-0000-4000-8000-000000000000"}}});
    let r = provision(&app, &admin, missing).await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    // A name an Agent already has: 409.
    crate::common::agent(
        &app,
        &ns,
        &crate::common::configuration(&app, &ns, &admin).await,
        "taken",
        &admin,
    )
    .await;
    let r = provision(&app, &admin, body(&request_id(), "taken")).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    // What the first deploy would refuse: no harnessAuth, or an execution mode the Compute
    // Driver does not run (this one runs embedded Agents only).
    let mut unauthenticated = body(&request_id(), "no-auth");
    unauthenticated
        .as_object_mut()
        .unwrap()
        .remove("harnessAuth");
    let mut dedicated = body(&request_id(), "dedicated");
    dedicated["executionMode"] = json!("dedicated");
    for (refused, named) in [(unauthenticated, "harnessAuth"), (dedicated, "dedicated")] {
        let r = provision(&app, &admin, refused).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{named}: {message}");
    }
    // The same requestId: the same job for the same request, 409 for another.
    let request = request_id();
    let first = expect(
        provision(&app, &admin, body(&request, "fresh")).await,
        StatusCode::ACCEPTED,
    );
    let again = expect(
        provision(&app, &admin, body(&request, "fresh")).await,
        StatusCode::ACCEPTED,
    );
    assert_eq!(
        first.data()["provisioning"]["workId"],
        again.data()["provisioning"]["workId"]
    );
    let r = provision(&app, &admin, body(&request, "changed")).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    // A Namespace with a job still to run cannot be deleted.
    let r = app
        .call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_EMPTY")
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("provisioning"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn the_job_needs_every_authority_its_steps_use_and_only_its_actor_sees_it() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "model-key", &admin).await;
    let with_key = |request: &str| {
        let mut b = body(request, "keyed");
        b["configuration"]["secretBindings"] = json!({"MODEL_KEY": {"source": {"kind": "secret",
            "namespaceId": ns, "id": sec}}});
        b
    };
    let base = [
        Permission::new(Action::Administer, ResourceKind::Installation),
        Permission::new(Action::Read, ResourceKind::Namespace),
        Permission::new(Action::Create, ResourceKind::Agent),
        Permission::new(Action::Create, ResourceKind::Configuration),
    ];
    // Without deploy on the Agent it would create, or operate on the Secret it binds: 403.
    let (_, creator) = app.principal_with(&base, None, None, None).await;
    let creator = Credential::Key(creator);
    let r = provision(&app, &creator, body(&request_id(), "undeployable")).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let mut deployer = base.to_vec();
    deployer.push(Permission::new(Action::Deploy, ResourceKind::Agent));
    let (_, deployer) = app.principal_with(&deployer, None, None, None).await;
    let deployer = Credential::Key(deployer);
    let r = provision(&app, &deployer, with_key(&request_id())).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let mut tx = app.store.begin_read().await.unwrap();
    let denials = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.agents.provision".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(denials.len(), 2, "both denials are audited: {denials:?}");
    drop(tx);
    // Another administrator cannot read or retry the administrator's job: 404.
    let work = expect(
        provision(&app, &admin, with_key(&request_id())).await,
        StatusCode::ACCEPTED,
    )
    .data()["provisioning"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, other) = app
        .principal_with(&administrator_permissions(), None, None, None)
        .await;
    let other = Credential::Key(other);
    for (method, path) in [
        (Method::GET, work.clone()),
        (Method::POST, format!("{work}/retry")),
    ] {
        let r = app.call(method, &path, &other, None).await;
        assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    }
    // An unknown job: 404.
    let r = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/provision/prv_00000000-0000-4000-8000-000000000000"),
            &admin,
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "NOT_FOUND"));
}
