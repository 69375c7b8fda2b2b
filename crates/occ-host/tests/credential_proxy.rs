//! The credential proxy against the test kit's model provider (a real HTTP server): what a
//! gateway sends with the placeholder reaches the provider with the bound key, as Bearer or
//! `x-api-key`, streamed back; an unknown, withdrawn or escaping request is refused and never
//! forwarded; a rotation takes effect at the next registration.

use std::collections::BTreeSet;

use occ_core::compute::{AgentTarget, RevisionContext, RevisionTarget, SecretText};
use occ_core::resource::{
    AdmittedSpec, ComputeIdentity, ExecutionMode, Generation, HarnessAuth, HarnessDescriptor,
};
use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId, RevisionId};
use occ_host::credential_proxy::{
    CredentialProxy, HARNESS_ROUTE, PLACEHOLDER, capability, point_at_proxy, proxied_providers,
};
use occ_testkit::fake_model::FakeModel;
use serde_json::{Map, Value, json};

const TOKEN: &str = "gateway-token-of-the-agent";

fn revision(config: Map<String, Value>) -> RevisionTarget {
    let agent_id = AgentId::generate();
    RevisionTarget {
        agent: AgentTarget {
            namespace_id: NamespaceId::generate(),
            service_principal_id: IamId::agent_service_principal(&agent_id),
            agent_id,
        },
        revision_id: RevisionId::generate(),
        revision: 1,
        spec: AdmittedSpec {
            configuration_id: ConfigurationId::generate(),
            configuration_kind: "agent".into(),
            configuration_generation: Generation::new(1).expect("generation"),
            configuration: config,
            harness: HarnessDescriptor {
                id: "openclaw".into(),
                version: "test".into(),
                mode: ExecutionMode::Embedded,
            },
            compute: ComputeIdentity {
                id: "compute-process".into(),
                implementation: "process".into(),
            },
            service_principal_id: IamId::generate_service_principal(),
            harness_auth: Some(HarnessAuth::Runtime {}),
            secret_driver_id: None,
            secret_bindings: None,
            account_credential: None,
        },
    }
}

fn context(pairs: &[(&str, &str)]) -> RevisionContext {
    RevisionContext {
        environment: pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), SecretText::new((*v).to_owned())))
            .collect(),
        ..RevisionContext::default()
    }
}

/// The Bearer credential of the last request the model received.
fn last_bearer(model: &FakeModel) -> Option<String> {
    model
        .requests()
        .last()
        .and_then(|r| r.bearer().map(str::to_owned))
}

async fn post(url: &str, auth: (&str, &str), body: Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header(auth.0, auth.1)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test]
async fn requests_reach_only_the_admitted_provider_with_the_bound_key() {
    let model = FakeModel::start().await;
    model.reply("proxied answer");
    let config = json!({"models": {"providers": {
        "openai": {"baseUrl": model.base_url(), "api": "openai-completions", "apiKey": "${OPENAI_KEY}"},
        "claude": {"baseUrl": model.base_url(), "api": "anthropic-messages", "apiKey": "${CLAUDE_KEY}"},
    }}})
    .as_object()
    .cloned()
    .expect("object");
    let rev = revision(config.clone());
    let bound: BTreeSet<String> = ["OPENAI_KEY", "CLAUDE_KEY"].map(str::to_owned).into();
    let proxied = proxied_providers(&config, &bound);
    let proxy = CredentialProxy::start(0).expect("proxy");
    proxy.register(
        &rev,
        TOKEN,
        &context(&[
            ("OPENAI_KEY", "sk-real-openai"),
            ("CLAUDE_KEY", "sk-real-claude"),
        ]),
        &proxied,
    );
    assert_eq!(proxy.route_count(), 2);
    let mut rendered = config.clone();
    point_at_proxy(
        &mut rendered,
        &proxied,
        proxy.base_url(),
        TOKEN,
        &rev.revision_id,
    );
    let openai = rendered["models"]["providers"]["openai"]["baseUrl"]
        .as_str()
        .expect("url")
        .to_owned();
    let claude = rendered["models"]["providers"]["claude"]["baseUrl"]
        .as_str()
        .expect("url")
        .to_owned();

    // Streamed through, the placeholder replaced by the key.
    let bearer = format!("Bearer {PLACEHOLDER}");
    let (status, body) = post(
        &format!("{openai}/chat/completions"),
        ("authorization", &bearer),
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data: [DONE]"), "{body}");
    let seen = model.requests_to("/v1/chat/completions");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].bearer(), Some("sk-real-openai"));

    // Anthropic's header, and no Authorization at all.
    let (status, _) = post(
        &format!("{claude}/chat/completions"),
        ("x-api-key", PLACEHOLDER),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let last = model.requests().last().cloned().expect("a request");
    assert_eq!(last.header("x-api-key"), Some("sk-real-claude"));
    assert_eq!(last.header("authorization"), None);

    let before = model.requests().len();
    // An unknown capability, a path that climbs out of the baseUrl: refused, never forwarded.
    let unknown = format!(
        "{}/{}/chat/completions",
        proxy.base_url(),
        capability("another-token", &rev.revision_id, "openai")
    );
    let (status, body) = post(&unknown, ("authorization", &bearer), json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("credential_unavailable"), "{body}");
    let (status, _) = post(
        &format!("{openai}/../../admin"),
        ("authorization", &bearer),
        json!({}),
    )
    .await;
    // (A client may normalise the path first, which leaves no capability: refused either way.)
    assert!(matches!(status, 400 | 403), "{status}");
    assert_eq!(model.requests().len(), before);

    // A rotated Secret: the next registration (an activation, a maintenance pass) serves it.
    proxy.register(
        &rev,
        TOKEN,
        &context(&[
            ("OPENAI_KEY", "sk-rotated"),
            ("CLAUDE_KEY", "sk-real-claude"),
        ]),
        &proxied,
    );
    let (status, _) = post(
        &format!("{openai}/chat/completions"),
        ("authorization", &bearer),
        json!({"model": "m", "messages": [{"role": "user", "content": "again"}]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(last_bearer(&model).as_deref(), Some("sk-rotated"));

    // Withdrawn (the revision stopped, retired or deleted): refused at once.
    proxy.withdraw_revision(&rev.revision_id);
    assert_eq!(proxy.route_count(), 0);
    let before = model.requests().len();
    let (status, _) = post(
        &format!("{openai}/chat/completions"),
        ("authorization", &bearer),
        json!({}),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(model.requests().len(), before);
}

/// A dedicated revision's harness key: Codex, pointed at the capability URL with the
/// placeholder, reaches the model endpoint's Responses API with the real key; a
/// re-registration (rotation) replaces it and the revision's withdrawal refuses it.
#[tokio::test]
async fn a_harness_key_reaches_only_its_endpoint() {
    let model = FakeModel::start().await;
    model.reply("harness answer");
    let mut rev = revision(Map::new());
    rev.spec.harness.mode = ExecutionMode::Dedicated;
    let proxy = CredentialProxy::start(0).expect("proxy");
    let url = proxy.register_harness(
        &rev,
        TOKEN,
        &format!("{}/", model.base_url()),
        &SecretText::new("sk-harness".to_owned()),
    );
    assert_eq!(
        url,
        format!(
            "{}/{}",
            proxy.base_url(),
            capability(TOKEN, &rev.revision_id, HARNESS_ROUTE)
        )
    );
    assert_eq!(proxy.route_count(), 1);
    let bearer = format!("Bearer {PLACEHOLDER}");
    let (status, body) = post(
        &format!("{url}/responses"),
        ("authorization", &bearer),
        json!({"model": "m", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let seen = model.requests_to("/v1/responses");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].bearer(), Some("sk-harness"));

    proxy.register_harness(
        &rev,
        TOKEN,
        &model.base_url(),
        &SecretText::new("sk-rotated".to_owned()),
    );
    assert_eq!(proxy.route_count(), 1, "the revision's route is replaced");
    let (status, _) = post(
        &format!("{url}/responses"),
        ("authorization", &bearer),
        json!({"model": "m", "input": "again"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(last_bearer(&model).as_deref(), Some("sk-rotated"));

    proxy.withdraw_revision(&rev.revision_id);
    let before = model.requests().len();
    let (status, _) = post(
        &format!("{url}/responses"),
        ("authorization", &bearer),
        json!({}),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(model.requests().len(), before);
}
