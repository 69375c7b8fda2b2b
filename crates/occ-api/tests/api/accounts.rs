//! Account administration (the reference's account controls): read an account; disable,
//! enable and end the sessions of one, each at the version the administrator read. People
//! only; the caller's grants must cover the account's. Real router, controller and SQLite.

use http::{Method, StatusCode};
use occ_core::IamId;
use occ_core::audit::METADATA_KEY;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::iam::Role;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

use crate::common::expect;

const PASSWORD: &str = "a long enough password";

async fn sign_in(app: &TestApp, email: &str) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        "/api/auth/sign-in/email",
        &Credential::Anonymous,
        Some(json!({"email": email, "password": PASSWORD})),
    )
    .await
}

async fn session_of(app: &TestApp, email: &str) -> Credential {
    let reply = expect(sign_in(app, email).await, StatusCode::OK);
    let cookie = reply.headers["set-cookie"].to_str().unwrap();
    let token = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    Credential::Session(token.to_owned())
}

/// Creates an account (optionally bound to an Installation Role); returns (userId, principalId).
async fn account(
    app: &TestApp,
    admin: &Credential,
    email: &str,
    role: Option<&IamId>,
) -> (String, String) {
    let mut body = json!({"email": email, "password": PASSWORD});
    if let Some(role) = role {
        body["roleId"] = json!(role);
    }
    let made = expect(
        app.call(Method::POST, "/api/auth/accounts", admin, Some(body))
            .await,
        StatusCode::CREATED,
    );
    (
        made.data()["id"].as_str().unwrap().to_owned(),
        made.data()["principalId"].as_str().unwrap().to_owned(),
    )
}

/// An Installation Role with `permissions`, made directly in the store.
async fn installation_role(app: &TestApp, permissions: &[Permission]) -> IamId {
    let role = Role {
        id: IamId::generate_role(false),
        namespace_id: None,
        name: None,
        permissions: permissions.to_vec(),
        created_at: occ_core::Timestamp::now(),
    };
    let mut tx = occ_testkit::begin_setup(&app.store).await;
    tx.role_insert(&role).await.unwrap();
    tx.commit().await.unwrap();
    role.id
}

async fn change(
    app: &TestApp,
    who: &Credential,
    user: &str,
    what: &str,
    version: i64,
) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        &format!("/api/auth/accounts/{user}/{what}"),
        who,
        Some(json!({"expectedVersion": version})),
    )
    .await
}

#[tokio::test]
async fn disabling_enabling_and_revoking_take_effect_at_once() {
    let app = TestApp::new().await;
    let admin = app.admin_session().await;
    let (user, principal) = account(&app, &admin, "pat@example.com", None).await;
    let pat = session_of(&app, "pat@example.com").await;
    let read = expect(
        app.call(
            Method::GET,
            &format!("/api/auth/accounts/{user}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(read.headers["cache-control"], "no-store");
    assert_eq!(read.data()["userId"], user.as_str());
    assert_eq!(read.data()["principalId"], principal.as_str());
    assert_eq!(read.data()["version"], 1);
    assert_eq!(read.data()["disabled"], false);
    assert_eq!(read.data()["methods"][0]["providerId"], "credential");
    let whoami = |who: Credential| {
        let app = &app;
        async move { app.call(Method::GET, "/api/auth/session", &who, None).await }
    };
    assert!(whoami(pat.clone()).await.data().is_object());
    let listed = expect(
        app.call(Method::GET, "/api/auth/accounts", &admin, None)
            .await,
        StatusCode::OK,
    );
    let emails: Vec<&str> = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["admin@openclaw.local", "pat@example.com"]);
    assert_eq!(listed.data()[1]["principalId"], principal.as_str());

    // Disable: the live session ends on its next request; signing in is refused.
    let done = expect(
        change(&app, &admin, &user, "disable", 1).await,
        StatusCode::OK,
    );
    assert_eq!(done.data(), &json!({"userId": user}));
    assert!(whoami(pat.clone()).await.data().is_null());
    expect(
        app.call(Method::GET, "/namespaces", &pat, None).await,
        StatusCode::UNAUTHORIZED,
    );
    expect(
        sign_in(&app, "pat@example.com").await,
        StatusCode::UNAUTHORIZED,
    );
    // A stale version, and changes that do not apply, are conflicts.
    for (what, version) in [("enable", 1), ("disable", 2), ("revoke", 2)] {
        expect(
            change(&app, &admin, &user, what, version).await,
            StatusCode::CONFLICT,
        );
    }
    // Enable: signing in works again (the old session stays gone).
    expect(
        change(&app, &admin, &user, "enable", 2).await,
        StatusCode::OK,
    );
    assert!(whoami(pat).await.data().is_null());
    let pat = session_of(&app, "pat@example.com").await;
    let second = session_of(&app, "pat@example.com").await;
    expect(
        change(&app, &admin, &user, "enable", 3).await,
        StatusCode::CONFLICT,
    );
    // Revoke: every session ends; a fresh sign-in works.
    expect(
        change(&app, &admin, &user, "revoke", 3).await,
        StatusCode::OK,
    );
    assert!(whoami(pat).await.data().is_null());
    assert!(whoami(second).await.data().is_null());
    let again = session_of(&app, "pat@example.com").await;
    assert!(whoami(again).await.data().is_object());
    let read = expect(
        app.call(
            Method::GET,
            &format!("/api/auth/accounts/{user}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(read.data()["version"], 4);

    // Every change is audited with the account and the version it produced.
    let mut tx = app.store.begin_read().await.unwrap();
    let mut versions: Vec<(String, i64)> = tx
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.action.starts_with("openclaw.auth.accounts.") && e.details.get("version").is_some()
        })
        .map(|e| {
            assert_eq!(e.details["userId"], user.as_str());
            (e.action, e.details["version"].as_i64().unwrap())
        })
        .collect();
    versions.sort_by_key(|(_, v)| *v);
    assert_eq!(
        versions,
        [
            ("openclaw.auth.accounts.disable".to_owned(), 2),
            ("openclaw.auth.accounts.enable".to_owned(), 3),
            ("openclaw.auth.accounts.revoke".to_owned(), 4),
        ]
    );
}

#[tokio::test]
async fn only_people_administering_the_installation_and_covering_the_account_may() {
    let app = TestApp::new().await;
    let admin = app.admin_session().await;
    let (user, principal) = account(&app, &admin, "sam@example.com", None).await;
    app.grant_installation(
        &principal.parse().unwrap(),
        &[Permission::new(Action::Deploy, ResourceKind::Agent)],
    )
    .await;
    let path = format!("/api/auth/accounts/{user}");

    // Service keys, anonymous callers and people without administer are refused.
    for (who, status) in [
        (app.admin(), StatusCode::UNAUTHORIZED),
        (Credential::Anonymous, StatusCode::UNAUTHORIZED),
        (
            session_of(&app, "sam@example.com").await,
            StatusCode::FORBIDDEN,
        ),
    ] {
        expect(app.call(Method::GET, &path, &who, None).await, status);
        expect(
            app.call(Method::GET, "/api/auth/accounts", &who, None)
                .await,
            status,
        );
        expect(change(&app, &who, &user, "revoke", 1).await, status);
    }
    // A service key is refused before its body is read.
    expect(
        app.call(
            Method::POST,
            &format!("{path}/disable"),
            &app.admin(),
            Some(json!({"bad": true})),
        )
        .await,
        StatusCode::UNAUTHORIZED,
    );
    // Bad bodies name the field; unknown accounts are 404.
    for body in [
        json!({}),
        json!({"expectedVersion": 0}),
        json!({"expectedVersion": 1, "x": 1}),
    ] {
        let reply = expect(
            app.call(
                Method::POST,
                &format!("{path}/disable"),
                &admin,
                Some(body.clone()),
            )
            .await,
            StatusCode::BAD_REQUEST,
        );
        assert!(
            reply.body.to_string().contains('/'),
            "{body}: {}",
            reply.body
        );
    }
    expect(
        app.call(Method::GET, "/api/auth/accounts/usr_nobody", &admin, None)
            .await,
        StatusCode::NOT_FOUND,
    );
    expect(
        change(&app, &admin, "usr_nobody", "disable", 1).await,
        StatusCode::NOT_FOUND,
    );

    // An administrator who does not hold the account's grants (agent:deploy) may read it but
    // not change it; the refusal is recorded.
    let lesser = installation_role(
        &app,
        &[
            Permission::new(Action::Administer, ResourceKind::Installation),
            Permission::new(Action::Read, ResourceKind::Installation),
        ],
    )
    .await;
    account(&app, &admin, "lee@example.com", Some(&lesser)).await;
    let lee = session_of(&app, "lee@example.com").await;
    expect(
        app.call(Method::GET, &path, &lee, None).await,
        StatusCode::OK,
    );
    expect(
        change(&app, &lee, &user, "disable", 1).await,
        StatusCode::FORBIDDEN,
    );
    let mut tx = app.store.begin_read().await.unwrap();
    let denials: Vec<Value> = tx
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.auth.accounts.disable")
        .map(|e| Value::Object(e.details))
        .collect();
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert_eq!(denials[0][METADATA_KEY]["decisionReason"], "coverage");
    assert_eq!(denials[0]["userId"], user.as_str());
    drop(tx);

    // Nobody disables their own account.
    let me = expect(
        app.call(Method::GET, "/api/auth/session", &admin, None)
            .await,
        StatusCode::OK,
    );
    let me = me.data()["user"]["id"].as_str().unwrap().to_owned();
    expect(
        change(&app, &admin, &me, "disable", 1).await,
        StatusCode::CONFLICT,
    );
    expect(
        change(&app, &admin, &user, "disable", 1).await,
        StatusCode::OK,
    );
}

#[tokio::test]
async fn the_sign_in_methods_are_public() {
    let app = TestApp::new().await;
    let reply = expect(
        app.call(
            Method::GET,
            "/api/auth/providers",
            &Credential::Anonymous,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        reply.data(),
        &json!({"github": false, "google": false, "oidc": false, "password": true, "sessionBinding": true})
    );
}

#[tokio::test]
async fn an_account_bound_to_the_administrator_role_is_a_full_installation_administrator() {
    let app = TestApp::new().await;
    let admin = app.admin_session().await;
    let roles = expect(
        app.call(Method::GET, "/iam/roles", &admin, None).await,
        StatusCode::OK,
    );
    let administrator = roles
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Installation administrator")
        .unwrap_or_else(|| panic!("{}", roles.body));
    assert!(administrator.get("namespaceId").is_none());
    let role: IamId = administrator["id"].as_str().unwrap().parse().unwrap();
    account(&app, &admin, "second@example.com", Some(&role)).await;
    let second = session_of(&app, "second@example.com").await;
    // Everything the bootstrap administrator does: Namespaces, IAM, accounts, keys.
    expect(
        app.call(
            Method::POST,
            "/namespaces",
            &second,
            Some(json!({"name": "by-second"})),
        )
        .await,
        StatusCode::CREATED,
    );
    expect(
        app.call(Method::GET, "/api/auth/accounts", &second, None)
            .await,
        StatusCode::OK,
    );
    expect(
        app.call(
            Method::POST,
            "/api/auth/service-principals",
            &second,
            Some(json!({"name": "made-by-second"})),
        )
        .await,
        StatusCode::CREATED,
    );
    // Only administrators list the Installation's Roles.
    let (_, reader) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Installation)],
            None,
            None,
            None,
        )
        .await;
    expect(
        app.call(Method::GET, "/iam/roles", &Credential::Key(reader), None)
            .await,
        StatusCode::FORBIDDEN,
    );
}
