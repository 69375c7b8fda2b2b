//! Sign-in, sessions and CSRF, accounts, service keys and Namespace-scoped keys.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_testkit::app::{ADMIN_EMAIL, ADMIN_PASSWORD, Credential, ORIGIN, TestApp};
use serde_json::json;

use crate::common::expect;

#[tokio::test]
async fn sign_in_session_and_sign_out() {
    let app = TestApp::new().await;
    let r = app
        .call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
        )
        .await;
    let r = expect(r, StatusCode::OK);
    assert_eq!(r.data()["authenticated"], true);
    let cookie = r.headers["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("openclaw_occ.session_token="));
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && cookie.contains("Path=/")
    );
    assert!(!cookie.contains("Secure"), "http base URL: not Secure");
    let session = app.admin_session().await;
    let Credential::Session(token) = &session else {
        unreachable!()
    };
    let req = Request::get("/api/auth/session")
        .header("cookie", format!("openclaw_occ.session_token={token}"))
        .body(Body::empty())
        .unwrap();
    let s = expect(app.send(req).await, StatusCode::OK);
    assert_eq!(s.data()["user"]["email"], ADMIN_EMAIL);
    assert!(s.data()["sessionKey"].as_str().unwrap().len() > 20);
    assert!(
        !s.body.to_string().contains(token.as_str()),
        "the cookie token is never echoed"
    );
    // the session works on resource routes
    expect(
        app.call(Method::GET, "/namespaces", &session, None).await,
        StatusCode::OK,
    );
    // wrong password and unknown email are the same 401
    for (email, pw) in [
        (ADMIN_EMAIL, "wrong password 123"),
        ("nobody@x.io", ADMIN_PASSWORD),
    ] {
        let r = app
            .call(
                Method::POST,
                "/api/auth/sign-in/email",
                &Credential::Anonymous,
                Some(json!({"email": email, "password": pw})),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // a foreign Origin cannot sign in
    let req = Request::post("/api/auth/sign-in/email")
        .header("content-type", "application/json")
        .header("origin", "http://evil.example")
        .body(Body::from(
            json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).to_string(),
        ))
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::FORBIDDEN);
    // sign out needs the exact Origin, then the session is gone
    let req = Request::post("/api/auth/sign-out")
        .header("cookie", format!("openclaw_occ.session_token={token}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(req).await.status, StatusCode::FORBIDDEN);
    expect(
        app.call(Method::POST, "/api/auth/sign-out", &session, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        app.call(Method::GET, "/namespaces", &session, None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    let req = Request::get("/api/auth/session")
        .header("cookie", format!("openclaw_occ.session_token={token}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        expect(app.send(req).await, StatusCode::OK).body["data"],
        serde_json::Value::Null
    );
}

#[tokio::test]
async fn cookie_mutations_need_a_trusted_origin() {
    let app = TestApp::new().await;
    let Credential::Session(token) = app.admin_session().await else {
        unreachable!()
    };
    let post = |origin: Option<&str>, site: Option<&str>| {
        let mut b = Request::post("/namespaces")
            .header("cookie", format!("openclaw_occ.session_token={token}"))
            .header("content-type", "application/json");
        if let Some(o) = origin {
            b = b.header("origin", o);
        }
        if let Some(s) = site {
            b = b.header("sec-fetch-site", s);
        }
        b.body(Body::from(
            json!({"name": format!("n-{}", uuid_like())}).to_string(),
        ))
        .unwrap()
    };
    assert_eq!(
        app.send(post(None, None)).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.send(post(Some("http://evil.example"), None))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.send(post(Some(ORIGIN), Some("cross-site")))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.send(post(Some(ORIGIN), Some("same-origin")))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        app.send(post(Some(ORIGIN), None)).await.status,
        StatusCode::CREATED
    );
}

fn uuid_like() -> String {
    occ_core::AgentId::generate().to_string()[4..12].to_owned()
}

#[tokio::test]
async fn sign_in_is_rate_limited() {
    let app = TestApp::new().await;
    for _ in 0..10 {
        let r = app
            .call(
                Method::POST,
                "/api/auth/sign-in/email",
                &Credential::Anonymous,
                Some(json!({"email": ADMIN_EMAIL, "password": "wrong password 123"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    let r = app
        .call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED")
    );
    let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));
}

/// The reproduction of the parallel-guess finding: 60 wrong passwords for one email sent at
/// once. Each attempt takes its place before its password is verified, so at most the limit
/// (10) of them are ever checked (401) and every other one is refused with 429 and
/// `Retry-After`, whether by the email's limit or by the bound on concurrent checks; the right
/// password afterwards is refused too, until the window passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_guesses_are_counted_before_they_are_verified() {
    let app = TestApp::new().await;
    let guesses = (0..60).map(|_| {
        app.call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": ADMIN_EMAIL, "password": "wrong password 123"})),
        )
    });
    let replies = futures::future::join_all(guesses).await;
    let verified = replies
        .iter()
        .filter(|r| r.status == StatusCode::UNAUTHORIZED)
        .count();
    assert!(verified <= 10, "{verified} passwords were verified");
    assert!(verified >= 1, "no guess was verified at all");
    for r in replies
        .iter()
        .filter(|r| r.status != StatusCode::UNAUTHORIZED)
    {
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED"),
            "{}",
            r.body
        );
        let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait));
    }
    // Top the email up to its limit one at a time, then even the right password is refused.
    for _ in verified..10 {
        let r = app
            .call(
                Method::POST,
                "/api/auth/sign-in/email",
                &Credential::Anonymous,
                Some(json!({"email": ADMIN_EMAIL, "password": "wrong password 123"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    let r = app
        .call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
        )
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
}

/// Distinct emails pass a per-email limit, so a global bound keeps concurrent password
/// checks (each argon2id verification holds ~19 MiB) from exhausting memory: of 40 guesses for
/// 40 different emails sent at once, those beyond the bound are refused with 429 rather than
/// queued, and the bound frees again once they end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_password_checks_are_bounded_over_all_emails() {
    let app = TestApp::new().await;
    let guesses = (0..40).map(|i| {
        app.call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": format!("nobody-{i}@example.com"), "password": "wrong password 123"})),
        )
    });
    let replies = futures::future::join_all(guesses).await;
    let checked = replies
        .iter()
        .filter(|r| r.status == StatusCode::UNAUTHORIZED)
        .count();
    let busy = replies
        .iter()
        .filter(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(checked + busy, 40);
    assert!(
        (1..=occ_controller::sign_in_limit::MAX_CONCURRENT_CHECKS).contains(&checked),
        "{checked} checks ran at once"
    );
    assert!(busy > 0, "every guess was checked: nothing bounds them");
    let r = app
        .call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

#[tokio::test]
async fn accounts() {
    let app = TestApp::new().await;
    let body =
        json!({"email": "Dev@Example.com", "password": "another long password", "name": "Dev"});
    // a service key cannot create accounts
    assert_eq!(
        app.call(
            Method::POST,
            "/api/auth/accounts",
            &app.admin(),
            Some(body.clone())
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    let session = app.admin_session().await;
    let r = expect(
        app.call(
            Method::POST,
            "/api/auth/accounts",
            &session,
            Some(body.clone()),
        )
        .await,
        StatusCode::CREATED,
    );
    assert_eq!(r.data()["email"], "dev@example.com");
    assert!(!r.body.to_string().contains("another long password"));
    assert_eq!(
        app.call(Method::POST, "/api/auth/accounts", &session, Some(body))
            .await
            .status,
        StatusCode::CONFLICT
    );
    let bad_role =
        json!({"email": "x@y.z", "password": "another long password", "roleId": "role_nope"});
    assert_eq!(
        app.call(Method::POST, "/api/auth/accounts", &session, Some(bad_role))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    let short = json!({"email": "x@y.z", "password": "short"});
    assert_eq!(
        app.call(Method::POST, "/api/auth/accounts", &session, Some(short))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    // the new account signs in and has no grants
    let r = expect(
        app.call(
            Method::POST,
            "/api/auth/sign-in/email",
            &Credential::Anonymous,
            Some(json!({"email": "dev@example.com", "password": "another long password"})),
        )
        .await,
        StatusCode::OK,
    );
    let token = r.headers["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    assert_eq!(
        expect(
            app.call(
                Method::GET,
                "/namespaces",
                &Credential::Session(token.clone()),
                None
            )
            .await,
            StatusCode::OK
        )
        .data(),
        &json!([])
    );
    assert_eq!(
        app.call(
            Method::GET,
            "/installation",
            &Credential::Session(token),
            None
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn service_keys_issue_revoke_and_scope() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let (sp, _) = app
        .principal_with(
            &[
                Permission::new(Action::Read, ResourceKind::Namespace),
                Permission::new(Action::Read, ResourceKind::Agent),
            ],
            Some(&app.default_ns),
            None,
            None,
        )
        .await;
    let r = expect(
        app.call(Method::POST, "/api/auth/service-keys", &admin, Some(json!({"servicePrincipalId": sp, "name": "ci", "namespaceId": app.default_ns, "expiresIn": 86400}))).await,
        StatusCode::CREATED,
    );
    let key = r.data()["key"].as_str().unwrap().to_owned();
    let key_id = r.data()["id"].as_str().unwrap().to_owned();
    assert!(key.starts_with("occ_"));
    let scoped = Credential::Key(key);
    // scoped to default: works there; another Namespace and Installation routes are 403
    expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{}", app.default_ns),
            &scoped,
            None,
        )
        .await,
        StatusCode::OK,
    );
    let other = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "other"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let other_ns = other.data()["id"].as_str().unwrap();
    assert_eq!(
        app.call(
            Method::GET,
            &format!("/namespaces/{other_ns}"),
            &scoped,
            None
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.call(Method::GET, "/installation", &scoped, None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // refusals
    for (body, status) in [
        (
            json!({"servicePrincipalId": "spn_unknown", "name": "x"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"servicePrincipalId": sp, "name": ""}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"servicePrincipalId": sp, "name": "x".repeat(33)}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"servicePrincipalId": sp, "name": "x", "expiresIn": 60}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"servicePrincipalId": "service-agent-agt_0f8fad5b-d9cb-469f-a165-70867728950e", "name": "x"}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        assert_eq!(
            app.call(
                Method::POST,
                "/api/auth/service-keys",
                &admin,
                Some(body.clone())
            )
            .await
            .status,
            status,
            "{body}"
        );
    }
    // a caller without every grant of the target cannot issue keys for it (coverage)
    let (_, weak_key) = app
        .principal_with(
            &[Permission::new(
                Action::Administer,
                ResourceKind::Installation,
            )],
            None,
            None,
            None,
        )
        .await;
    let r = app
        .call(
            Method::POST,
            "/api/auth/service-keys",
            &Credential::Key(weak_key),
            Some(json!({"servicePrincipalId": sp, "name": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // revoke
    let r = expect(
        app.call(
            Method::DELETE,
            &format!("/api/auth/service-keys/{key_id}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(r.data(), &json!({"id": key_id, "revoked": true}));
    assert_eq!(
        app.call(
            Method::GET,
            &format!("/namespaces/{}", app.default_ns),
            &scoped,
            None
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/api/auth/service-keys/{key_id}"),
            &admin,
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
}
