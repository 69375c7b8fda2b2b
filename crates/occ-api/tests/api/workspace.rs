//! Live workspace files through the API, with the workspace test double in place of a gateway
//! (the real-gateway path is proven end to end in the `occ` crate): every rule of the routes,
//! every native outcome and its audit record, and the stock defaults.

use std::sync::Arc;

use http::{Method, StatusCode};
use occ_core::resource::WorkspaceFileName;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::workspace::{FakeWorkspace, Next};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect};

struct F {
    app: TestApp,
    files: Arc<FakeWorkspace>,
    agt: String,
    base: String,
}

async fn fixture(deployed: bool) -> F {
    let files = Arc::new(FakeWorkspace::default());
    let app = TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            workspace: Some(files.clone()),
            ..TestAppOptions::default()
        },
    )
    .await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "files", &admin).await;
    if deployed {
        let rev = expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/deploy"),
                &admin,
                None,
            )
            .await,
            StatusCode::ACCEPTED,
        )
        .data()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        app.activate(&agt.parse().unwrap(), &rev.parse().unwrap())
            .await;
    }
    let base = format!("/namespaces/{ns}/agents/{agt}/workspace/files");
    F {
        app,
        files,
        agt,
        base,
    }
}

async fn writes(app: &TestApp) -> Vec<(String, Option<String>, Value)> {
    let mut tx = app.store.begin_read().await.unwrap();
    tx.audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.agents.workspace.files.write")
        .map(|e| {
            let code = e
                .details
                .get("reasonCode")
                .and_then(Value::as_str)
                .map(str::to_owned);
            (
                e.outcome.as_str().to_owned(),
                code,
                Value::Object(e.details),
            )
        })
        .collect()
}

#[tokio::test]
async fn put_then_get_and_every_outcome_is_audited() {
    let f = fixture(true).await;
    let admin = f.app.admin();
    let r = expect(
        f.app
            .call(
                Method::PUT,
                &format!("{}/USER.md", f.base),
                &admin,
                Some(json!({"content": "# Me\nünïcode\n"})),
            )
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        r.data(),
        &json!({"name": "USER.md", "size": "# Me\nünïcode\n".len()})
    );
    let r = expect(
        f.app
            .call(Method::GET, &format!("{}/USER.md", f.base), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        r.data(),
        &json!({"name": "USER.md", "content": "# Me\nünïcode\n"})
    );
    // missing file
    let r = f
        .app
        .call(Method::GET, &format!("{}/SOUL.md", f.base), &admin, None)
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    // native outcomes of a write
    for (next, status, code, reason) in [
        (
            Next::Missing,
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "FILE_MISSING",
        ),
        (
            Next::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            "DEPENDENCY_UNAVAILABLE",
            "DEPENDENCY_UNAVAILABLE",
        ),
        (
            Next::Unknown,
            StatusCode::SERVICE_UNAVAILABLE,
            "UNKNOWN_OUTCOME",
            "UNKNOWN_OUTCOME",
        ),
    ] {
        f.files.next(next);
        let r = f
            .app
            .call(
                Method::PUT,
                &format!("{}/AGENTS.md", f.base),
                &admin,
                Some(json!({"content": "secret-canary"})),
            )
            .await;
        assert_eq!((r.status, r.code()), (status, code), "{}", r.body);
        let last = writes(&f.app).await.pop().unwrap();
        assert_eq!(
            (last.0.as_str(), last.1.as_deref()),
            ("failure", Some(reason))
        );
    }
    // a read the gateway cannot serve
    f.files.next(Next::Unavailable);
    let r = f
        .app
        .call(Method::GET, &format!("{}/USER.md", f.base), &admin, None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    );
    // every write is audited with the file name, never the content
    let all = writes(&f.app).await;
    assert_eq!(all.len(), 4);
    assert_eq!(all[0].0, "success");
    for (_, _, details) in &all {
        let text = details.to_string();
        assert!(
            !text.contains("secret-canary") && !text.contains("ünïcode"),
            "{text}"
        );
        assert!(details["workspaceFileName"].is_string());
    }
}

#[tokio::test]
async fn a_caller_gone_mid_write_is_audited_as_unknown_outcome() {
    let f = fixture(true).await;
    let admin = f.app.admin();
    f.files.next(Next::Hang);
    let path = format!("{}/SOUL.md", f.base);
    let put = f.app.call(
        Method::PUT,
        &path,
        &admin,
        Some(json!({"content": "in flight"})),
    );
    // The client disconnects: the handler's future is dropped mid-write.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), put)
            .await
            .is_err()
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let all = writes(&f.app).await;
        if let Some(last) = all.last() {
            assert_eq!(
                (last.0.as_str(), last.1.as_deref()),
                ("failure", Some("UNKNOWN_OUTCOME"))
            );
            assert_eq!(last.2["workspaceFileName"], "SOUL.md");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the abandoned write was never audited"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bad_input_is_refused_before_any_native_call() {
    let f = fixture(true).await;
    let admin = f.app.admin();
    let put = |name: &str, body: Value| {
        let path = format!("{}/{name}", f.base);
        let app = &f.app;
        let admin = admin.clone();
        async move { app.call(Method::PUT, &path, &admin, Some(body)).await }
    };
    let r = put("TOOLS.md", json!({"content": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["details"][0]["path"].as_str()),
        (StatusCode::BAD_REQUEST, Some("/name"))
    );
    let r = put("USER.md", json!({"content": "x".repeat(16 * 1024 + 1)})).await;
    assert_eq!(
        r.body["error"]["details"][0],
        json!({"path": "/content", "code": "TOO_LONG"})
    );
    let r = put("USER.md", json!({"content": "a\u{0}b"})).await;
    assert_eq!(
        r.body["error"]["details"][0],
        json!({"path": "/content", "code": "INVALID_VALUE"})
    );
    let r = put("USER.md", json!({"content": "x", "mode": "0600"})).await;
    assert_eq!(
        r.body["error"]["details"][0],
        json!({"path": "/mode", "code": "UNKNOWN_FIELD"})
    );
    let r = put("USER.md", json!({})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // exactly 16 KiB is fine
    let r = put("USER.md", json!({"content": "x".repeat(16 * 1024)})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // a body over 48 KiB never reaches the parser (a 16 KiB file fits even fully escaped)
    let r = put("USER.md", json!({"content": "\u{1}".repeat(9 * 1024)})).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    assert!(
        writes(&f.app).await.len() == 1,
        "only the valid write reached the gateway"
    );
    assert_eq!(
        f.files
            .file(&f.agt.parse().unwrap(), WorkspaceFileName::User)
            .unwrap()
            .len(),
        16 * 1024
    );
}

#[tokio::test]
async fn agent_state_gates_the_routes() {
    // no active revision: 503 for both
    let f = fixture(false).await;
    let admin = f.app.admin();
    for (method, body) in [
        (Method::GET, None),
        (Method::PUT, Some(json!({"content": "x"}))),
    ] {
        let r = f
            .app
            .call(method, &format!("{}/USER.md", f.base), &admin, body)
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
        );
    }
    // stopping: PUT 409, GET still works
    let f = fixture(true).await;
    let admin = f.app.admin();
    let ns = f.app.default_ns.to_string();
    expect(
        f.app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{}/stop", f.agt),
                &admin,
                None,
            )
            .await,
        StatusCode::ACCEPTED,
    );
    let r = f
        .app
        .call(
            Method::PUT,
            &format!("{}/USER.md", f.base),
            &admin,
            Some(json!({"content": "x"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    let r = f
        .app
        .call(Method::GET, &format!("{}/USER.md", f.base), &admin, None)
        .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "read path still reaches the workspace"
    );
    // deleting: 409 AGENT_DELETING
    expect(
        f.app
            .call(
                Method::DELETE,
                &format!("/namespaces/{ns}/agents/{}", f.agt),
                &admin,
                None,
            )
            .await,
        StatusCode::ACCEPTED,
    );
    let r = f
        .app
        .call(
            Method::PUT,
            &format!("{}/USER.md", f.base),
            &admin,
            Some(json!({"content": "x"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "AGENT_DELETING")
    );
    // a missing Agent: 404 (after authorization)
    let r = f
        .app
        .call(Method::GET, &format!("/namespaces/{ns}/agents/agt_00000000-0000-4000-8000-000000000000/workspace/files/USER.md"), &admin, None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn session_writes_need_a_trusted_origin() {
    let f = fixture(true).await;
    let session = f.app.admin_session().await;
    let Credential::Session(token) = &session else {
        unreachable!()
    };
    let req = http::Request::put(format!("{}/USER.md", f.base))
        .header(
            "cookie",
            format!("{}={token}", occ_api::state::SESSION_COOKIE),
        )
        .header("content-type", "application/json")
        .body(axum::body::Body::from(r#"{"content":"x"}"#))
        .unwrap();
    let r = f.app.send(req).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = f
        .app
        .call(
            Method::PUT,
            &format!("{}/USER.md", f.base),
            &session,
            Some(json!({"content": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

#[tokio::test]
async fn stock_defaults_and_a_stale_form() {
    let f = fixture(false).await;
    let admin = f.app.admin();
    let ns = f.app.default_ns.to_string();
    let d = expect(
        f.app
            .call(
                Method::GET,
                &format!("/namespaces/{ns}/workspace-defaults"),
                &admin,
                None,
            )
            .await,
        StatusCode::OK,
    );
    let id = d.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 64);
    let names: Vec<&str> = d.data()["files"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        names,
        vec!["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md"]
    );
    let cfg = configuration(&f.app, &ns, &admin).await;
    let stale = f
        .app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &admin,
            Some(json!({"name": "stale", "configurationId": cfg, "harnessAuth": {"method": "runtime"},
                        "initialWorkspaceFiles": {"USER.md": "me"}, "workspaceDefaultsId": "b".repeat(64)})),
        )
        .await;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );
    let fresh = f
        .app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &admin,
            Some(json!({"name": "fresh", "configurationId": cfg, "harnessAuth": {"method": "runtime"},
                        "initialWorkspaceFiles": {"USER.md": "me"}, "workspaceDefaultsId": id})),
        )
        .await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.body);
}
