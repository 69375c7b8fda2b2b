//! The web console's serving (embedded files at `/console/`, deep links, content types, the
//! Content-Security-Policy, query strings, before bootstrap, absent from the OpenAPI document)
//! and the permissions route it asks what the caller may do.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_store::Backend;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::common::{agent, configuration, expect};

struct Raw {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("utf-8")
    }
}

async fn get(app: &TestApp, method: Method, uri: &str) -> Raw {
    let response = app
        .router
        .clone()
        .oneshot(
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Raw {
        status,
        headers,
        body: body.to_vec(),
    }
}

fn assert_console_html(r: &Raw, uri: &str) {
    assert_eq!(r.status, StatusCode::OK, "{uri}");
    assert_eq!(
        r.header("content-type"),
        "text/html; charset=utf-8",
        "{uri}"
    );
    let csp = r.header("content-security-policy");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ] {
        assert!(csp.contains(directive), "{uri}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(r.header("cache-control"), "no-store");
    assert_eq!(r.header("x-content-type-options"), "nosniff");
    assert_eq!(r.header("x-frame-options"), "DENY");
    assert!(occ_core::id::is_valid_prefixed_uuid(
        "req",
        r.header("x-request-id")
    ));
    assert!(
        r.text()
            .contains(r#"<script type="module" src="/console/assets/app.js">"#)
    );
}

#[tokio::test]
async fn the_console_and_its_deep_links_serve_the_application() {
    let app = TestApp::new().await;
    for uri in [
        "/console/",
        "/console/login",
        "/console/agents?namespace=ns_0f8fad5b-d9cb-469f-a165-70867728950e",
        "/console/agents/agt_0f8fad5b-d9cb-469f-a165-70867728950e?namespace=ns_0f8fad5b-d9cb-469f-a165-70867728950e&tab=files",
        "/console/somewhere/unknown",
    ] {
        assert_console_html(&get(&app, Method::GET, uri).await, uri);
    }
    // HEAD too, without a body
    let head = get(&app, Method::HEAD, "/console/agents").await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    // `/console` goes to `/console/`, keeping the query
    let r = get(&app, Method::GET, "/console?namespace=ns_x").await;
    assert_eq!(r.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.header("location"), "/console/?namespace=ns_x");
    // the console is read-only: other methods are the API's 405
    let r = app
        .call(
            Method::POST,
            "/console/agents",
            &Credential::Anonymous,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED")
    );
    // query strings stay refused on the API's own routes
    let r = app
        .call(
            Method::GET,
            "/namespaces?namespace=ns_x",
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn every_asset_the_console_loads_is_served_with_its_type() {
    let app = TestApp::new().await;
    let index = get(&app, Method::GET, "/console/").await.text();
    // what the page references, then every module those import, transitively
    let reference = regex::Regex::new(r#"(?:src|href)="(/console/assets/[^"]+)""#).unwrap();
    let import = regex::Regex::new(r#"from '\./([a-z]+\.js)'"#).unwrap();
    let mut pending: Vec<String> = reference
        .captures_iter(&index)
        .map(|c| c[1].to_owned())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(uri) = pending.pop() {
        if !seen.insert(uri.clone()) {
            continue;
        }
        let r = get(&app, Method::GET, &uri).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}");
        let expected = match uri.rsplit('.').next() {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            other => panic!("unexpected asset type {other:?}"),
        };
        assert_eq!(r.header("content-type"), expected, "{uri}");
        assert!(
            r.header("content-security-policy")
                .contains("default-src 'self'")
        );
        if uri.ends_with(".js") {
            let text = r.text();
            assert!(
                !text.contains("innerHTML") && !text.contains("eval("),
                "{uri} builds the page from text nodes only"
            );
            pending.extend(
                import
                    .captures_iter(&text)
                    .map(|c| format!("/console/assets/{}", &c[1])),
            );
        }
    }
    assert!(
        seen.len() >= 10,
        "the page and its imports: {seen:?} (app.js imports the rest)"
    );
    // an unknown asset is a 404, not the application
    let r = app
        .call(
            Method::GET,
            "/console/assets/nope.js",
            &Credential::Anonymous,
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "NOT_FOUND"));
}

#[tokio::test]
async fn the_console_loads_before_bootstrap() {
    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            unbootstrapped: true,
            ..Default::default()
        },
    )
    .await;
    assert_console_html(
        &get(&app, Method::GET, "/console/login").await,
        "/console/login",
    );
    assert_eq!(
        get(&app, Method::GET, "/console/assets/app.js")
            .await
            .status,
        StatusCode::OK
    );
    // the API it calls answers 404 until then
    let r = app
        .call(Method::GET, "/namespaces", &Credential::Anonymous, None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_console_is_not_an_api_operation() {
    let app = TestApp::new().await;
    let doc = expect(
        app.call(Method::GET, "/openapi.json", &Credential::Anonymous, None)
            .await,
        StatusCode::OK,
    )
    .body;
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths.iter().all(|p| !p.starts_with("/console")),
        "{paths:?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| *p == "/namespaces/{namespaceId}/iam/permissions")
    );
}

fn actions(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

async fn audit_count(app: &TestApp) -> usize {
    let mut tx = app.store.begin_read().await.unwrap();
    tx.audit_list(&AuditFilter::default()).await.unwrap().len()
}

#[tokio::test]
async fn permissions_tell_an_administrator_everything_it_may_do() {
    let app = TestApp::new().await;
    let admin = app.admin_session().await;
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
    let before = audit_count(&app).await;
    let r = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/iam/permissions"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    let p = r.data();
    assert_eq!(p["namespaceId"], ns.as_str());
    assert_eq!(actions(&p["installation"]), ["read", "administer"]);
    assert_eq!(actions(&p["namespace"]), ["read", "delete"]);
    assert_eq!(
        actions(&p["namespaceCollection"]),
        ["create", "read", "delete"]
    );
    assert_eq!(
        actions(&p["collections"]["agent"]),
        [
            "create",
            "read",
            "update",
            "delete",
            "deploy",
            "operate",
            "administer"
        ]
    );
    assert_eq!(
        actions(&p["collections"]["configuration"]),
        ["create", "read", "update", "delete"]
    );
    assert_eq!(actions(&p["collections"]["agent_revision"]), ["read"]);
    // exact resources are never asked about create
    assert_eq!(
        actions(&p["agents"][&agt]),
        [
            "read",
            "update",
            "delete",
            "deploy",
            "operate",
            "administer"
        ]
    );
    assert_eq!(
        actions(&p["configurations"][&cfg]),
        ["read", "update", "delete"]
    );
    assert_eq!(
        audit_count(&app).await,
        before,
        "asking is not auditable activity"
    );
}

#[tokio::test]
async fn permissions_of_a_read_only_user_follow_its_exact_bindings_and_are_not_audited() {
    let app = TestApp::new().await;
    let admin = app.admin_session().await;
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let seen = agent(&app, &ns, &cfg, "seen", &admin).await;
    let unseen = agent(&app, &ns, &cfg, "unseen", &admin).await;
    // a viewer as the Namespace IAM API makes one: an account, a Role, exact bindings
    let account = expect(
        app.call(
            Method::POST,
            "/api/auth/accounts",
            &admin,
            Some(json!({"email": "viewer@example.com", "password": "viewer password 123"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let principal = account.data()["principalId"].as_str().unwrap().to_owned();
    let role = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/roles"),
            &admin,
            Some(json!({"permissions": [
                {"action": "read", "resourceKind": "namespace"},
                {"action": "read", "resourceKind": "agent"},
                {"action": "read", "resourceKind": "configuration"}]})),
        )
        .await,
        StatusCode::CREATED,
    );
    let role = role.data()["id"].as_str().unwrap().to_owned();
    for (kind, id) in [
        ("namespace", ns.as_str()),
        ("agent", seen.as_str()),
        ("configuration", cfg.as_str()),
    ] {
        expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/iam/access-bindings"),
                &admin,
                Some(
                    json!({"subjectKind": "identity", "subjectId": principal, "roleId": role,
                            "resourceKind": kind, "resourceId": id}),
                ),
            )
            .await,
            StatusCode::CREATED,
        );
    }
    let sign_in = app
        .call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": "viewer@example.com", "password": "viewer password 123"})),
        )
        .await;
    let cookie = sign_in.headers["set-cookie"].to_str().unwrap();
    let token = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    let viewer = Credential::Session(token.to_owned());

    let before = audit_count(&app).await;
    let r = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/iam/permissions"),
            &viewer,
            None,
        )
        .await,
        StatusCode::OK,
    );
    let p = r.data();
    assert!(actions(&p["installation"]).is_empty());
    assert_eq!(actions(&p["namespace"]), ["read"]);
    assert!(actions(&p["namespaceCollection"]).is_empty());
    for kind in [
        "agent",
        "agent_revision",
        "configuration",
        "secret",
        "service_account",
    ] {
        assert!(
            actions(&p["collections"][kind]).is_empty(),
            "{kind}: {}",
            p["collections"][kind]
        );
    }
    assert_eq!(
        p["agents"],
        json!({ seen.clone(): ["read"] }),
        "only the Agent it may read"
    );
    assert!(p["agents"].get(&unseen).is_none());
    assert_eq!(p["configurations"], json!({ cfg.clone(): ["read"] }));
    assert_eq!(
        audit_count(&app).await,
        before,
        "the many denied actions it asked about are not denials"
    );
    // what it said holds: the API refuses the viewer a mutation
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{seen}/stop"),
            &viewer,
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
}

#[tokio::test]
async fn permissions_need_read_access_to_the_namespace() {
    let app = TestApp::new().await;
    let ns = app.default_ns.to_string();
    let path = format!("/namespaces/{ns}/iam/permissions");
    let r = app
        .call(Method::GET, &path, &Credential::Anonymous, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // a caller who may read Agents but not this Namespace is refused, and that is audited
    let (_, key) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            None,
            None,
            None,
        )
        .await;
    let r = app
        .call(Method::GET, &path, &Credential::Key(key), None)
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let mut tx = app.store.begin_read().await.unwrap();
    let denials = tx
        .audit_list(&AuditFilter {
            action: Some("openclaw.iam.permissions.read".into()),
            resource_id: Some(ns.clone()),
        })
        .await
        .unwrap();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].outcome, occ_core::audit::AuditOutcome::Denied);
    drop(tx);
    // an unknown Namespace is 404 for a caller who may read every Namespace
    let r = app
        .call(
            Method::GET,
            "/namespaces/ns_0f8fad5b-d9cb-469f-a165-70867728950e/iam/permissions",
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // a malformed id is 400 before anything else
    let r = app
        .call(
            Method::GET,
            "/namespaces/nope/iam/permissions",
            &Credential::Anonymous,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}
