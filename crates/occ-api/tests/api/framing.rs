//! What every response shares: envelopes, headers, request ids, strict bodies and paths.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use occ_store::Backend;
use occ_testkit::app::{TestApp, TestAppOptions};
use serde_json::json;

use crate::common::{Who, expect};

fn is_request_id(v: &str) -> bool {
    occ_core::id::is_valid_prefixed_uuid("req", v)
}

#[tokio::test]
async fn envelopes_and_headers() {
    let app = TestApp::new().await;
    let r = expect(
        app.call(Method::GET, "/installation", &app.admin(), None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(r.headers["cache-control"], "no-store");
    assert_eq!(r.headers["x-content-type-options"], "nosniff");
    assert_eq!(r.headers["content-type"], "application/json; charset=utf-8");
    let rid = r.headers["x-request-id"].to_str().unwrap();
    assert!(is_request_id(rid));
    assert_eq!(r.body["meta"]["requestId"], rid);
    assert_eq!(r.data()["id"], app.installation.id.as_str());
    assert!(occ_core::Timestamp::parse_canonical(r.data()["createdAt"].as_str().unwrap()).is_ok());
    // errors carry the same
    let r = app.call(Method::GET, "/nowhere", &app.admin(), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.code(), "NOT_FOUND");
    assert_eq!(
        r.body["meta"]["requestId"],
        r.headers["x-request-id"].to_str().unwrap()
    );
    assert_eq!(r.headers["cache-control"], "no-store");
    // a client-sent request id is ignored
    let req = Request::get("/installation")
        .header("x-api-key", &app.admin_key)
        .header("x-request-id", "req_mine")
        .body(Body::empty())
        .unwrap();
    let r = app.send(req).await;
    assert_ne!(r.headers["x-request-id"], "req_mine");
}

#[tokio::test]
async fn method_not_allowed_lists_allowed_methods() {
    let app = TestApp::new().await;
    let r = app
        .call(Method::PUT, "/namespaces", &app.admin(), Some(json!({})))
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.code(), "METHOD_NOT_ALLOWED");
    let allow = r.headers["allow"].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
}

#[tokio::test]
async fn query_strings_bodies_and_media_types() {
    let app = TestApp::new().await;
    let r = app
        .call(Method::GET, "/namespaces?limit=5", &app.admin(), None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    // wrong content type: 415, except where the reference documents none (createServiceKey),
    // where the same body is a 400
    for (path, expected) in [
        (
            "/namespaces",
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UNSUPPORTED_MEDIA_TYPE"),
        ),
        (
            "/api/auth/service-keys",
            (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
        ),
    ] {
        let req = Request::post(path)
            .header("x-api-key", &app.admin_key)
            .header("content-type", "text/plain")
            .body(Body::from("{}"))
            .unwrap();
        let r = app.send(req).await;
        assert_eq!((r.status, r.code()), expected, "{path}: {}", r.body);
    }
    // malformed and empty JSON
    for body in ["{", "", "[1,"] {
        let req = Request::post("/namespaces")
            .header("x-api-key", &app.admin_key)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let r = app.send(req).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
            "{body:?}"
        );
    }
    // a body on a bodyless route
    let ns = app.default_ns.to_string();
    let r = app
        .call(
            Method::DELETE,
            &format!("/namespaces/{ns}"),
            &app.admin(),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    // any body on a bodyless route is 400 whatever its size (those routes document no 413),
    // and a GET carrying a body is refused too
    let r = app
        .call(
            Method::DELETE,
            &format!("/namespaces/{ns}"),
            &app.admin(),
            Some(json!({"pad": "x".repeat(70 * 1024)})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    let r = app
        .call(Method::GET, "/namespaces", &app.admin(), Some(json!({})))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    // 413 before parsing: default 64 KiB, by content-length and by actual size
    let big = format!("{{\"name\":\"{}\"}}", "x".repeat(70 * 1024));
    let req = Request::post("/namespaces")
        .header("x-api-key", &app.admin_key)
        .header("content-type", "application/json")
        .body(Body::from(big.clone()))
        .unwrap();
    let r = app.send(req).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    // the unread body leaves the connection unusable: the client is told not to reuse it
    assert_eq!(r.headers["connection"], "close");
    let req = Request::post("/namespaces")
        .header("x-api-key", &app.admin_key)
        .header("content-type", "application/json")
        .header("content-length", "999999999")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Agent creation accepts up to 448 KiB (a 70 KiB body is parsed and validated), not more
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &app.admin(),
            Some(json!({"name": "x".repeat(70 * 1024)})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &app.admin(),
            Some(json!({"name": "x".repeat(460 * 1024)})),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn path_ids_are_validated_before_anything_else() {
    let app = TestApp::new().await;
    for (path, param) in [
        ("/namespaces/ns_x", "/namespaceId"),
        ("/namespaces/ns_x/agents", "/namespaceId"),
        (
            &format!(
                "/namespaces/{}/agents/cfg_0f8fad5b-d9cb-469f-a165-70867728950e",
                app.default_ns
            ),
            "/agentId",
        ),
        (
            &format!("/namespaces/{}/configurations/CFG", app.default_ns),
            "/configurationId",
        ),
    ] {
        // even anonymous callers get the 400 first
        let r = app.call(Method::GET, path, &Who::Anonymous, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
        assert_eq!(r.body["error"]["details"][0]["path"], param);
        assert_eq!(r.body["error"]["details"][0]["code"], "INVALID_FORMAT");
    }
}

#[tokio::test]
async fn credentials_are_strict() {
    let app = TestApp::new().await;
    let anon = app
        .call(Method::GET, "/namespaces", &Who::Anonymous, None)
        .await;
    assert_eq!(
        (anon.status, anon.code()),
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
    );
    let bad = app
        .call(
            Method::GET,
            "/namespaces",
            &Who::Key("occ_nope".into()),
            None,
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    // Bearer is always refused, even with a valid key next to it
    let req = Request::get("/namespaces")
        .header("x-api-key", &app.admin_key)
        .header("authorization", "Bearer x")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::UNAUTHORIZED);
    // an invalid key never falls back to a valid cookie
    let session = app.admin_session().await;
    let Who::Session(token) = session else {
        unreachable!()
    };
    let req = Request::get("/namespaces")
        .header("x-api-key", "occ_invalid")
        .header("cookie", format!("openclaw_occ.session_token={token}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::UNAUTHORIZED);
    // two session cookies are ambiguous
    let req = Request::get("/namespaces")
        .header(
            "cookie",
            format!("openclaw_occ.session_token={token}; openclaw_occ.session_token={token}"),
        )
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::UNAUTHORIZED);
    // an expired key
    let mut tx = occ_testkit::begin_setup(&app.store).await;
    let plaintext = occ_controller::auth::new_service_key();
    let now = occ_core::Timestamp::now();
    tx.service_key_insert(
        &occ_core::iam::ServiceKey {
            id: occ_core::IamId::generate_service_key(),
            service_principal_id: app.admin_principal.clone(),
            namespace_id: None,
            name: "old".into(),
            expires_at: now.plus(std::time::Duration::from_millis(1)),
            created_at: now,
        },
        &occ_controller::auth::credential_hash(&plaintext),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    assert_eq!(
        app.call(Method::GET, "/namespaces", &Who::Key(plaintext), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn before_bootstrap_resource_routes_answer_404() {
    let mut app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            unbootstrapped: true,
            ..Default::default()
        },
    )
    .await;
    for path in [
        "/installation",
        "/namespaces",
        "/namespaces/ns_0f8fad5b-d9cb-469f-a165-70867728950e",
    ] {
        let r = app.call(Method::GET, path, &Who::Anonymous, None).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::NOT_FOUND, "NOT_FOUND"),
            "{path}"
        );
    }
    let r = app
        .call(Method::GET, "/api/auth/session", &Who::Anonymous, None)
        .await;
    assert_eq!(
        (r.status, &r.body["data"]),
        (StatusCode::OK, &serde_json::Value::Null)
    );
    app.bootstrap().await;
    assert_eq!(
        app.call(Method::GET, "/installation", &app.admin(), None)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn openapi_is_served_and_lists_every_route() {
    let app = TestApp::new().await;
    let r = expect(
        app.call(Method::GET, "/openapi.json", &Who::Anonymous, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        r.body["openapi"].as_str().map(|v| v.starts_with("3.1")),
        Some(true)
    );
    let ops: Vec<&str> = r.body["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    for id in [
        "createNamespace",
        "deployAgent",
        "getAgentDeployment",
        "createIAMAccessBinding",
        "createServiceKey",
        "signInEmail",
    ] {
        assert!(ops.contains(&id), "{id} missing");
    }
}

/// `/api/auth/*` answers like the reference's auth library: errors are `{code, message}`
/// without details, and a missing, foreign or oversized body is a plain 400.
#[tokio::test]
async fn auth_routes_use_the_reference_error_shape() {
    let app = TestApp::new().await;
    let no_body = Request::post("/api/auth/service-keys")
        .header("x-api-key", &app.admin_key)
        .body(Body::empty())
        .unwrap();
    let big = Request::post("/api/auth/service-keys")
        .header("x-api-key", &app.admin_key)
        .header("content-type", "application/json")
        .body(Body::from(format!(
            "{{\"name\":\"{}\"}}",
            "x".repeat(70 * 1024)
        )))
        .unwrap();
    for req in [no_body, big] {
        let r = app.send(req).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
            "{}",
            r.body
        );
        assert!(r.body["error"].get("details").is_none(), "{}", r.body);
    }
    let r = app
        .call(
            Method::POST,
            "/api/auth/service-keys",
            &app.admin(),
            Some(json!({"nme": 1})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["error"].get("details").is_none(), "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nme"),
        "the message still names the field: {}",
        r.body
    );
    let r = app
        .call(
            Method::DELETE,
            &format!("/api/auth/service-keys/{}", "k".repeat(201)),
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["error"].get("details").is_none(), "{}", r.body);
    // resource routes keep their details
    let r = app
        .call(
            Method::POST,
            "/namespaces",
            &app.admin(),
            Some(json!({"nme": 1})),
        )
        .await;
    assert_eq!(r.body["error"]["details"][0]["path"], "/name");
}
