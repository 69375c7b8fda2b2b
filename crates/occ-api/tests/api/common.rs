//! Fixtures shared by the API tests.

use http::{Method, StatusCode};
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

pub use occ_testkit::app::Credential as Who;

/// A valid native document.
pub fn document() -> Value {
    json!({
        "agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
        "models": {"providers": {"openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-responses",
                                             "apiKey": "${OPENAI_API_KEY}"}}}
    })
}

/// Asserts a status and returns the reply.
#[track_caller]
pub fn expect(reply: occ_testkit::app::Reply, status: StatusCode) -> occ_testkit::app::Reply {
    assert_eq!(reply.status, status, "unexpected reply: {}", reply.body);
    reply
}

/// Creates a Configuration in `ns`; returns its id.
pub async fn configuration(app: &TestApp, ns: &str, who: &Credential) -> String {
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            who,
            Some(json!({"kind": "agent", "values": document()})),
        )
        .await;
    expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Creates an Agent with `{method:"runtime"}` auth; returns its id.
pub async fn agent(app: &TestApp, ns: &str, cfg: &str, name: &str, who: &Credential) -> String {
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            who,
            Some(
                json!({"name": name, "configurationId": cfg, "harnessAuth": {"method": "runtime"}}),
            ),
        )
        .await;
    expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Creates a Secret; returns its id.
pub async fn secret(app: &TestApp, ns: &str, name: &str, who: &Credential) -> String {
    secret_holding(app, ns, name, "sk-test-value-123", who).await
}

/// A Secret `name` of `ns` holding `value`; its id.
pub async fn secret_holding(
    app: &TestApp,
    ns: &str,
    name: &str,
    value: &str,
    who: &Credential,
) -> String {
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            who,
            Some(json!({"name": name, "value": value})),
        )
        .await;
    expect(r, StatusCode::CREATED).data()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
