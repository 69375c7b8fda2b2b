//! Model discovery (`POST …/agents/models`) through the real HTTP model catalog to the testkit's
//! model server: the provider's list, the key sent only to it in its provider's header, and
//! each failure a clear code that never carries the key.

use std::sync::Arc;

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_drivers::model_catalog::HttpModelCatalog;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::fake_model::{Failure, FakeModel};
use serde_json::json;

use crate::common::{expect, secret_holding};

const KEY: &str = "sk-discovery-key-never-echoed-4242";

async fn app_with(base_url: &str) -> TestApp {
    TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            models: Some(Arc::new(HttpModelCatalog::new(base_url, base_url).unwrap())),
            ..TestAppOptions::default()
        },
    )
    .await
}

async fn discover(
    app: &TestApp,
    who: &Credential,
    body: serde_json::Value,
) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        &format!("/namespaces/{}/agents/models", app.default_ns),
        who,
        Some(body),
    )
    .await
}

/// Asserts that no audit record holds `value`.
async fn assert_audit_free_of(app: &TestApp, value: &str) {
    let mut tx = app.store.begin_read().await.unwrap();
    let audit = format!(
        "{:?}",
        tx.audit_list(&AuditFilter::default()).await.unwrap()
    );
    assert!(!audit.contains(value));
}

/// A header of the last model-list request the provider received.
fn last_header(model: &FakeModel, name: &str) -> Option<String> {
    let seen = model.requests_to("/v1/models");
    let last = seen.last().expect("a model-list request");
    last.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

#[tokio::test]
async fn a_provider_lists_its_models_to_a_key_and_failures_are_clear() {
    let model = FakeModel::start().await;
    let app = app_with(&model.base_url()).await;
    let admin = app.admin();
    let body =
        |provider: &str| json!({"provider": provider, "authMethod": "api_key", "apiKey": KEY});

    let listed = expect(discover(&app, &admin, body("openai")).await, StatusCode::OK);
    let models = listed.data().as_array().unwrap();
    assert!(!models.is_empty());
    assert!(
        models
            .iter()
            .all(|m| m["id"].is_string() && m["name"].is_string()),
        "{}",
        listed.body
    );
    assert_eq!(
        last_header(&model, "authorization"),
        Some(format!("Bearer {KEY}"))
    );
    // Anthropic's header and version, to the same (test) endpoint.
    expect(
        discover(&app, &admin, body("anthropic")).await,
        StatusCode::OK,
    );
    assert_eq!(last_header(&model, "x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        last_header(&model, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(last_header(&model, "authorization"), None);

    // The provider's refusals and failures, each a code of its own; the key is never echoed.
    for (status, code, answer) in [
        (
            401,
            "MODEL_DISCOVERY_CREDENTIALS_REJECTED",
            StatusCode::BAD_REQUEST,
        ),
        (
            403,
            "MODEL_DISCOVERY_CREDENTIALS_REJECTED",
            StatusCode::BAD_REQUEST,
        ),
        (
            429,
            "MODEL_DISCOVERY_RATE_LIMITED",
            StatusCode::TOO_MANY_REQUESTS,
        ),
        (
            500,
            "MODEL_DISCOVERY_UNAVAILABLE",
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    ] {
        model.fail_with(Some(Failure {
            status,
            code: "x".into(),
            message: format!("bad key {KEY}"),
        }));
        let reply = expect(discover(&app, &admin, body("openai")).await, answer);
        assert_eq!(reply.code(), code);
        assert!(!reply.body.to_string().contains(KEY), "{}", reply.body);
        if status == 429 {
            assert!(reply.headers.contains_key("retry-after"));
        }
    }
    model.fail_with(None);

    // A ChatGPT token cannot be listed here; bad bodies name their field.
    let reply = expect(
        discover(
            &app,
            &admin,
            json!({"provider": "openai", "authMethod": "codex_pat", "apiKey": KEY}),
        )
        .await,
        StatusCode::NOT_IMPLEMENTED,
    );
    assert!(!reply.body.to_string().contains(KEY));
    for (bad, path) in [
        (
            json!({"provider": "mistral", "authMethod": "api_key", "apiKey": KEY}),
            "/provider",
        ),
        (
            json!({"provider": "openai", "authMethod": "oauth", "apiKey": KEY}),
            "/authMethod",
        ),
        (
            json!({"provider": "openai", "authMethod": "api_key", "apiKey": "   "}),
            "/apiKey",
        ),
        (
            json!({"provider": "openai", "authMethod": "api_key", "apiKey": "a\nb"}),
            "/apiKey",
        ),
        (
            json!({"provider": "openai", "authMethod": "api_key"}),
            "/apiKey",
        ),
    ] {
        let reply = expect(
            discover(&app, &admin, bad.clone()).await,
            StatusCode::BAD_REQUEST,
        );
        assert!(
            reply.body.to_string().contains(path),
            "{bad}: {}",
            reply.body
        );
    }

    // Only who may create Agents in the Namespace may ask.
    let (_, reader) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            None,
            None,
            None,
        )
        .await;
    expect(
        discover(&app, &Credential::Key(reader), body("openai")).await,
        StatusCode::FORBIDDEN,
    );

    // Nothing recorded anywhere holds the key.
    assert_audit_free_of(&app, KEY).await;
}

#[tokio::test]
async fn an_unreachable_provider_is_unavailable() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = app_with(&format!("http://127.0.0.1:{port}/v1")).await;
    let reply = expect(
        discover(
            &app,
            &app.admin(),
            json!({"provider": "openai", "authMethod": "api_key", "apiKey": KEY}),
        )
        .await,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert_eq!(reply.code(), "MODEL_DISCOVERY_UNAVAILABLE");
}

/// A saved connection's models (`GET …/credential-sources/{cs}/models`, occ extension): asked
/// with the key its Secret holds, at the connection's own base URL (or, without one, at the
/// provider's configured endpoint); the same failures; only who may use the source may ask.
#[tokio::test]
async fn a_saved_connection_lists_its_models_without_the_caller_holding_its_key() {
    let model = FakeModel::start().await;
    // The configured provider endpoints point where nothing listens: a success proves the
    // source's own base URL was used.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = app_with(&format!("http://127.0.0.1:{port}/v1")).await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let value = "sk-saved-connection-key-5151";
    let sec = secret_holding(&app, &ns, "saved-key", value, &admin).await;
    let source = |name: &str, config: serde_json::Value| {
        json!({"name": name, "type": "openai", "config": config,
            "secrets": {"api_key": {"kind": "secret", "namespaceId": ns, "id": sec}}})
    };
    let create = async |body: serde_json::Value| {
        expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/credential-sources"),
                &admin,
                Some(body),
            )
            .await,
            StatusCode::CREATED,
        )
        .data()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let local = create(source("local", json!({"base_url": model.base_url()}))).await;
    let public = create(source("public", json!({}))).await;
    let models_of = async |who: &Credential, cs: &str| {
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources/{cs}/models"),
            who,
            None,
        )
        .await
    };

    let listed = expect(models_of(&admin, &local).await, StatusCode::OK);
    assert!(
        !listed.data().as_array().unwrap().is_empty(),
        "{}",
        listed.body
    );
    assert_eq!(
        last_header(&model, "authorization"),
        Some(format!("Bearer {value}"))
    );
    assert!(!listed.body.to_string().contains(value));
    let unreachable = expect(
        models_of(&admin, &public).await,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert_eq!(unreachable.code(), "MODEL_DISCOVERY_UNAVAILABLE");

    model.fail_with(Some(Failure {
        status: 401,
        code: "x".into(),
        message: format!("bad key {value}"),
    }));
    let refused = expect(models_of(&admin, &local).await, StatusCode::BAD_REQUEST);
    assert_eq!(refused.code(), "MODEL_DISCOVERY_CREDENTIALS_REJECTED");
    assert!(!refused.body.to_string().contains(value));
    model.fail_with(None);

    // Reading a source is not using it.
    let (_, reader) = app
        .principal_with(
            &[Permission::new(
                Action::Read,
                ResourceKind::CredentialSource,
            )],
            None,
            None,
            None,
        )
        .await;
    expect(
        models_of(&Credential::Key(reader), &local).await,
        StatusCode::FORBIDDEN,
    );
    expect(
        models_of(&admin, "cs_00000000-0000-4000-8000-000000000000").await,
        StatusCode::NOT_FOUND,
    );

    assert_audit_free_of(&app, value).await;
}
