//! Credential sources (saved provider connections), beyond the authorization matrix's rows:
//! the reference's view, the catalog's answers (409 for a type it lacks, 404 naming a field the
//! type lacks or needs), the Secret checks (400 across Namespaces, 403 without `secret:operate`
//! with its denial audited, 404 for a Secret the Namespace lacks), replacement of the Secrets,
//! a Secret or Namespace kept while a source uses it, and audit records without values — on
//! SQLite and PostgreSQL.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_store::Backend;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

use crate::common::{expect, secret};

fn key_of(ns: &str, id: &str) -> Value {
    json!({"api_key": {"kind": "secret", "namespaceId": ns, "id": id}})
}

async fn create(app: &TestApp, ns: &str, who: &Credential, body: Value) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        &format!("/namespaces/{ns}/credential-sources"),
        who,
        Some(body),
    )
    .await
}

async fn lifecycle_on(backend: Backend) {
    let app = TestApp::on(backend).await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "openai-key", &admin).await;
    let rotated = secret(&app, &ns, "openai-key-2", &admin).await;

    let created = expect(
        create(
            &app,
            &ns,
            &admin,
            json!({"name": "OpenAI", "type": "openai",
                "config": {"base_url": "http://127.0.0.1:9/v1"}, "secrets": key_of(&ns, &sec)}),
        )
        .await,
        StatusCode::CREATED,
    );
    let view = created.data().clone();
    let id = view["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("cs_"), "{view}");
    assert_eq!(
        view,
        json!({"id": id, "namespaceId": ns, "name": "OpenAI", "type": "openai",
            "config": {"base_url": "http://127.0.0.1:9/v1"}, "secrets": key_of(&ns, &sec),
            "state": "ready", "ref": {"kind": "credential_source", "namespaceId": ns, "id": id},
            "status": {"state": "ready"}})
    );
    let path = format!("/namespaces/{ns}/credential-sources/{id}");
    let got = expect(
        app.call(Method::GET, &path, &admin, None).await,
        StatusCode::OK,
    );
    assert_eq!(got.data(), &view);
    let list = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(list.data(), &json!([view]));

    // Same name: 409.
    let again = create(
        &app,
        &ns,
        &admin,
        json!({"name": "OpenAI", "type": "anthropic", "secrets": key_of(&ns, &sec)}),
    )
    .await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );

    // The Secret it names cannot go; the Namespace cannot either.
    let kept = app
        .call(
            Method::DELETE,
            &format!("/namespaces/{ns}/secrets/{sec}"),
            &admin,
            None,
        )
        .await;
    assert_eq!(kept.status, StatusCode::CONFLICT, "{}", kept.body);
    assert!(
        kept.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&id)
    );
    let not_empty = app
        .call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
        .await;
    assert_eq!(
        not_empty.code(),
        "NAMESPACE_NOT_EMPTY",
        "{}",
        not_empty.body
    );
    assert!(
        not_empty.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("credential sources"),
        "{}",
        not_empty.body
    );

    // Replacing the Secrets: the old one is free again.
    let updated = expect(
        app.call(
            Method::PATCH,
            &path,
            &admin,
            Some(json!({"secrets": key_of(&ns, &rotated)})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(updated.data()["secrets"], key_of(&ns, &rotated));
    assert_eq!(updated.data()["config"], view["config"], "config is kept");
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/secrets/{sec}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    // A PATCH without the required field is the catalog's 404; without `secrets` a 400.
    let missing = app
        .call(Method::PATCH, &path, &admin, Some(json!({"secrets": {}})))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("api_key")
    );
    let empty = app
        .call(Method::PATCH, &path, &admin, Some(json!({})))
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{}", empty.body);
    assert_eq!(empty.body["error"]["details"][0]["path"], "/secrets");

    expect(
        app.call(Method::DELETE, &path, &admin, None).await,
        StatusCode::NO_CONTENT,
    );
    let gone = app.call(Method::GET, &path, &admin, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let gone = app.call(Method::DELETE, &path, &admin, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/secrets/{rotated}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );

    // Audited: create, update, delete, with the type and field names, never a value.
    let mut tx = app.store.begin_read().await.unwrap();
    let events = tx.audit_list(&AuditFilter::default()).await.unwrap();
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e.action.as_str())
        .filter(|a| a.starts_with("openclaw.credential_sources."))
        .collect();
    for action in ["create", "update", "delete"] {
        assert!(
            actions.contains(&format!("openclaw.credential_sources.{action}").as_str()),
            "{actions:?}"
        );
    }
    let created_event = events
        .iter()
        .find(|e| e.action == "openclaw.credential_sources.create")
        .unwrap();
    assert_eq!(created_event.details["type"], "openai");
    assert_eq!(created_event.details["fields"], json!(["api_key"]));
}

#[tokio::test]
async fn a_source_is_registered_read_replaced_and_deleted_on_sqlite() {
    lifecycle_on(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_source_is_registered_read_replaced_and_deleted_on_postgres() {
    lifecycle_on(Backend::Postgres).await;
}

#[tokio::test]
async fn bad_sources_are_refused_with_the_references_codes() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "key", &admin).await;
    let other_ns = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "other"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    let cases: Vec<(Value, StatusCode, &str, &str)> = vec![
        // shape: 400 at the field's pointer
        (
            json!({"type": "openai"}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/name",
        ),
        (
            json!({"name": "x", "type": "Open AI"}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/type",
        ),
        (
            json!({"name": "x", "type": "openai", "config": {"base_url": ""}}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/config/base_url",
        ),
        (
            json!({"name": "x", "type": "openai", "secrets": {"api_key": {"kind": "secret", "namespaceId": other_ns, "id": sec}}}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/secrets/api_key/namespaceId",
        ),
        (
            json!({"name": "x", "type": "openai", "extra": 1}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/extra",
        ),
        (
            json!({"name": "x", "type": "openai", "config": {"base_url": "not a url"}, "secrets": key_of(&ns, &sec)}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "/config/base_url",
        ),
        // the catalog: a type it lacks 409, a field 404
        (
            json!({"name": "x", "type": "vertex", "secrets": key_of(&ns, &sec)}),
            StatusCode::CONFLICT,
            "RESOURCE_CONFLICT",
            "vertex",
        ),
        (
            json!({"name": "x", "type": "openai"}),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "api_key",
        ),
        (
            json!({"name": "x", "type": "openai", "config": {"organization": "o"}, "secrets": key_of(&ns, &sec)}),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "organization",
        ),
        // a Secret the Namespace lacks
        (
            json!({"name": "x", "type": "openai", "secrets": key_of(&ns, "sec_00000000-0000-4000-8000-000000000000")}),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "",
        ),
    ];
    for (body, status, code, names) in cases {
        let r = create(&app, &ns, &admin, body.clone()).await;
        assert_eq!((r.status, r.code()), (status, code), "{body}: {}", r.body);
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(
                r.body["error"]["details"][0]["path"], names,
                "{body}: {}",
                r.body
            );
        } else {
            assert!(
                r.body["error"]["message"].as_str().unwrap().contains(names),
                "{body}: {}",
                r.body
            );
        }
    }
    // Too large: 413.
    let big = "x".repeat(2 * 1024 * 1024);
    let r = create(&app, &ns, &admin, json!({"name": big, "type": "openai"})).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    // A malformed id in the path: 400 naming it.
    let r = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources/cs_nope"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["error"]["details"][0]["path"], "/credentialSourceId");
    // PATCH documents no 415: a body that is not JSON is a 400.
    let request = http::Request::patch(format!(
        "/namespaces/{ns}/credential-sources/cs_00000000-0000-4000-8000-000000000000"
    ))
    .header("x-api-key", &app.admin_key)
    .header("content-type", "text/plain")
    .body(axum::body::Body::from("secrets"))
    .unwrap();
    let r = app.send(request).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
        "{}",
        r.body
    );
    // Nothing was registered.
    let list = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(list.data(), &json!([]));
}

/// May create credential sources but not use the Secret: 403, the denial audited, nothing
/// registered; with `operate` on that one Secret it registers. A reader of one source sees
/// only that one in the list.
#[tokio::test]
async fn registering_needs_the_secret_and_lists_show_what_the_caller_may_read() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let sec = secret(&app, &ns, "key", &admin).await;
    let (principal, key) = app
        .principal_with(
            &[
                Permission::new(Action::Create, ResourceKind::CredentialSource),
                Permission::new(Action::Read, ResourceKind::Namespace),
            ],
            Some(&app.default_ns),
            None,
            None,
        )
        .await;
    let who = Credential::Key(key);
    let body = json!({"name": "mine", "type": "openai", "secrets": key_of(&ns, &sec)});
    let denied = create(&app, &ns, &who, body.clone()).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);
    let mut tx = app.store.begin_read().await.unwrap();
    let events = tx.audit_list(&AuditFilter::default()).await.unwrap();
    drop(tx);
    assert!(
        events
            .iter()
            .any(|e| e.action == "openclaw.credential_sources.create"
                && e.outcome.as_str() == "denied"
                && e.resource_id == sec),
        "the denial is audited"
    );
    app.grant(
        &principal,
        &[Permission::new(Action::Operate, ResourceKind::Secret)],
        &app.default_ns,
        Some((ResourceKind::Secret, sec.clone())),
    )
    .await;
    let mine = expect(create(&app, &ns, &who, body).await, StatusCode::CREATED).created_id();
    let theirs = expect(
        create(
            &app,
            &ns,
            &admin,
            json!({"name": "theirs", "type": "anthropic", "secrets": key_of(&ns, &sec)}),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    app.grant(
        &principal,
        &[Permission::new(
            Action::Read,
            ResourceKind::CredentialSource,
        )],
        &app.default_ns,
        Some((ResourceKind::CredentialSource, mine.clone())),
    )
    .await;
    let list = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources"),
            &who,
            None,
        )
        .await,
        StatusCode::OK,
    );
    let ids: Vec<&str> = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let hidden = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources/{theirs}"),
            &who,
            None,
        )
        .await;
    assert_eq!(hidden.status, StatusCode::FORBIDDEN);
}
