//! Envelope snapshots: one walk through every route (a success, and the typical refusals),
//! recorded as status, content type and body. Ids, timestamps and keys are replaced by stable
//! placeholders, so the snapshot pins the wire shape — field names, omitted optionals, codes,
//! messages, detail pointers — and any change to it shows up as a reviewed diff.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_testkit::app::{Credential, Reply, TestApp};
use regex::Regex;
use serde_json::{Value, json};
use std::collections::HashMap;

use crate::common::document;

/// Replaces volatile strings with placeholders; the same UUID always maps to the same one.
struct Normalizer {
    uuid: Regex,
    timestamp: Regex,
    key: Regex,
    seen: HashMap<String, usize>,
}

impl Normalizer {
    fn new() -> Self {
        Self {
            uuid: Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .unwrap(),
            timestamp: Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z").unwrap(),
            key: Regex::new("occ_[0-9a-f]{64}").unwrap(),
            seen: HashMap::new(),
        }
    }

    fn text(&mut self, s: &str) -> String {
        let s = self.key.replace_all(s, "<service-key>").into_owned();
        let s = self.timestamp.replace_all(&s, "<timestamp>").into_owned();
        let mut out = String::new();
        let mut last = 0;
        for m in self.uuid.find_iter(&s) {
            let next = self.seen.len() + 1;
            let n = *self.seen.entry(m.as_str().to_owned()).or_insert(next);
            out.push_str(&s[last..m.start()]);
            out.push_str(&format!("<uuid-{n}>"));
            last = m.end();
        }
        out.push_str(&s[last..]);
        out
    }

    fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.value(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| match k.as_str() {
                        // random per sign-in
                        "sessionKey" => (k.clone(), Value::from("<session-key>")),
                        _ => (self.text(k), self.value(v)),
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

struct Tour {
    app: TestApp,
    steps: Vec<Value>,
    normalize: Normalizer,
}

impl Tour {
    async fn step(
        &mut self,
        label: &str,
        method: Method,
        path: &str,
        who: &Credential,
        body: Option<Value>,
    ) -> Reply {
        let reply = self.app.call(method.clone(), path, who, body).await;
        self.record(label, &format!("{method} {path}"), &reply);
        reply
    }

    fn record(&mut self, label: &str, request: &str, reply: &Reply) {
        let content_type = reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let entry = json!({
            "step": label,
            "request": self.normalize.text(request),
            "status": reply.status.as_u16(),
            "contentType": content_type,
            "body": self.normalize.value(&reply.body),
        });
        self.steps.push(entry);
    }
}

fn id(reply: &Reply) -> String {
    match reply.data()["id"].as_str() {
        Some(id) => id.to_owned(),
        None => panic!("expected a resource, got {} {}", reply.status, reply.body),
    }
}

#[tokio::test]
async fn every_route_envelope() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let (reader_principal, reader_key) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            Some(&app.default_ns),
            None,
            None,
        )
        .await;
    let reader = Credential::Key(reader_key);
    let mut t = Tour {
        app,
        steps: Vec::new(),
        normalize: Normalizer::new(),
    };
    let anon = Credential::Anonymous;

    // Installation and Namespaces
    t.step("installation", Method::GET, "/installation", &admin, None)
        .await;
    t.step(
        "installation: anonymous",
        Method::GET,
        "/installation",
        &anon,
        None,
    )
    .await;
    t.step("namespaces: list", Method::GET, "/namespaces", &admin, None)
        .await;
    let team = id(&t
        .step(
            "namespaces: create",
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-a"})),
        )
        .await);
    t.step(
        "namespaces: duplicate",
        Method::POST,
        "/namespaces",
        &admin,
        Some(json!({"name": "team-a"})),
    )
    .await;
    t.step(
        "namespaces: invalid",
        Method::POST,
        "/namespaces",
        &admin,
        Some(json!({"name": "", "nme": 1})),
    )
    .await;
    t.step(
        "namespaces: get",
        Method::GET,
        &format!("/namespaces/{team}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "namespaces: forbidden",
        Method::GET,
        &format!("/namespaces/{team}"),
        &reader,
        None,
    )
    .await;

    // Configurations
    let cfgs = format!("/namespaces/{ns}/configurations");
    let cfg = id(&t
        .step(
            "configurations: create",
            Method::POST,
            &cfgs,
            &admin,
            Some(json!({"kind": "agent", "values": document()})),
        )
        .await);
    t.step(
        "configurations: get",
        Method::GET,
        &format!("{cfgs}/{cfg}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "configurations: patch",
        Method::PATCH,
        &format!("{cfgs}/{cfg}"),
        &admin,
        Some(json!({"values": {"gateway": {"mode": "local"}}})),
    )
    .await;
    t.step(
        "configurations: patch with kind",
        Method::PATCH,
        &format!("{cfgs}/{cfg}"),
        &admin,
        Some(json!({"kind": "agent", "values": {}})),
    )
    .await;
    t.step(
        "configurations: literal credential",
        Method::POST,
        &cfgs,
        &admin,
        Some(json!({"kind": "agent", "values": {"models": {"providers": {"p": {"apiKey": "sk-literal", "baseUrl": "ftp://x"}}}}})),
    )
    .await;

    // Secrets
    let secrets = format!("/namespaces/{ns}/secrets");
    let sec = id(&t
        .step(
            "secrets: create",
            Method::POST,
            &secrets,
            &admin,
            Some(json!({"name": "openai", "value": "sk-snapshot-value"})),
        )
        .await);
    t.step("secrets: list", Method::GET, &secrets, &admin, None)
        .await;
    t.step(
        "secrets: get",
        Method::GET,
        &format!("{secrets}/{sec}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "secrets: patch",
        Method::PATCH,
        &format!("{secrets}/{sec}"),
        &admin,
        Some(json!({"value": "sk-rotated"})),
    )
    .await;
    t.step(
        "secrets: too large",
        Method::POST,
        &secrets,
        &admin,
        // beyond the route's limit, which leaves room for the largest valid value escaped
        Some(json!({"name": "big", "value": "x".repeat(460_000)})),
    )
    .await;

    // ServiceAccounts
    let sas = format!("/namespaces/{ns}/service-accounts");
    let sa = id(&t
        .step(
            "service-accounts: create",
            Method::POST,
            &sas,
            &admin,
            Some(json!({"name": "codex"})),
        )
        .await);
    t.step("service-accounts: list", Method::GET, &sas, &admin, None)
        .await;
    t.step(
        "service-accounts: get",
        Method::GET,
        &format!("{sas}/{sa}"),
        &admin,
        None,
    )
    .await;

    // Agents, deploy, revisions, stop
    let agents = format!("/namespaces/{ns}/agents");
    let agt = id(&t
        .step(
            "agents: create",
            Method::POST,
            &agents,
            &admin,
            Some(json!({"name": "helper", "configurationId": cfg, "harnessAuth": {"method": "runtime"},
                        "initialWorkspaceFiles": {"USER.md": "private"}})),
        )
        .await);
    t.step("agents: list", Method::GET, &agents, &admin, None)
        .await;
    t.step("agents: list (reader)", Method::GET, &agents, &reader, None)
        .await;
    t.step(
        "agents: get",
        Method::GET,
        &format!("{agents}/{agt}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "agents: patch",
        Method::PATCH,
        &format!("{agents}/{agt}"),
        &admin,
        Some(json!({"configurationId": cfg, "backendId": "chatgpt-main"})),
    )
    .await;
    t.step(
        "agents: patch (reader)",
        Method::PATCH,
        &format!("{agents}/{agt}"),
        &reader,
        Some(json!({"configurationId": cfg})),
    )
    .await;
    t.step(
        "agents: missing",
        Method::GET,
        &format!("{agents}/agt_00000000-0000-4000-8000-000000000000"),
        &admin,
        None,
    )
    .await;
    t.step(
        "agents: bad id",
        Method::GET,
        &format!("{agents}/nope"),
        &admin,
        None,
    )
    .await;
    let rev = id(&t
        .step(
            "agents: deploy",
            Method::POST,
            &format!("{agents}/{agt}/deploy"),
            &admin,
            None,
        )
        .await);
    t.step(
        "deployments: get",
        Method::GET,
        &format!("{agents}/{agt}/deployments/{rev}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "agents: runtime (not observed yet)",
        Method::GET,
        &format!("{agents}/{agt}/runtime"),
        &admin,
        None,
    )
    .await;
    t.step(
        "revisions: list",
        Method::GET,
        &format!("{agents}/{agt}/revisions"),
        &admin,
        None,
    )
    .await;
    t.step(
        "revisions: get",
        Method::GET,
        &format!("{agents}/{agt}/revisions/{rev}"),
        &admin,
        None,
    )
    .await;
    let redeployed = id(&t
        .step(
            "revisions: redeploy",
            Method::POST,
            &format!("{agents}/{agt}/revisions/{rev}/redeploy"),
            &admin,
            None,
        )
        .await);
    t.step(
        "revisions: redeploy (reader)",
        Method::POST,
        &format!("{agents}/{agt}/revisions/{rev}/redeploy"),
        &reader,
        None,
    )
    .await;
    t.step(
        "revisions: redeploy missing",
        Method::POST,
        &format!("{agents}/{agt}/revisions/rev_00000000-0000-4000-8000-000000000000/redeploy"),
        &admin,
        None,
    )
    .await;
    t.step(
        "revisions: redeploy with a body",
        Method::POST,
        &format!("{agents}/{agt}/revisions/{rev}/redeploy"),
        &admin,
        Some(json!({"revision": 1})),
    )
    .await;
    t.step(
        "revisions: get redeployed",
        Method::GET,
        &format!("{agents}/{agt}/revisions/{redeployed}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "agents: stop",
        Method::POST,
        &format!("{agents}/{agt}/stop"),
        &admin,
        None,
    )
    .await;

    // IAM
    let roles = format!("/namespaces/{ns}/iam/roles");
    let role = id(&t
        .step(
            "roles: create",
            Method::POST,
            &roles,
            &admin,
            Some(json!({"name": "agent readers", "permissions": [{"action": "read", "resourceKind": "agent"}]})),
        )
        .await);
    t.step("roles: list", Method::GET, &roles, &admin, None)
        .await;
    t.step(
        "roles: get",
        Method::GET,
        &format!("{roles}/{role}"),
        &admin,
        None,
    )
    .await;
    let bindings = format!("/namespaces/{ns}/iam/access-bindings");
    let principal = t.app.admin_principal.to_string();
    let binding = id(&t
        .step(
            "access-bindings: create",
            Method::POST,
            &bindings,
            &admin,
            Some(json!({"subjectKind": "identity", "subjectId": reader_principal.to_string(), "roleId": role,
                        "resourceKind": "agent", "resourceId": agt})),
        )
        .await);
    t.step(
        "access-bindings: list",
        Method::GET,
        &bindings,
        &admin,
        None,
    )
    .await;
    t.step(
        "access-bindings: get",
        Method::GET,
        &format!("{bindings}/{binding}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "access-bindings: delete",
        Method::DELETE,
        &format!("{bindings}/{binding}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "roles: delete",
        Method::DELETE,
        &format!("{roles}/{role}"),
        &admin,
        None,
    )
    .await;

    // Service keys and sessions
    let key = id(&t
        .step(
            "service-keys: create",
            Method::POST,
            "/api/auth/service-keys",
            &admin,
            Some(json!({"servicePrincipalId": principal, "name": "ci"})),
        )
        .await);
    t.step(
        "service-keys: delete",
        Method::DELETE,
        &format!("/api/auth/service-keys/{key}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "sign-in: wrong password",
        Method::POST,
        "/api/auth/sign-in/email",
        &anon,
        Some(json!({"email": occ_testkit::app::ADMIN_EMAIL, "password": "not the password"})),
    )
    .await;
    let session = t.app.admin_session().await;
    t.step("session", Method::GET, "/api/auth/session", &session, None)
        .await;
    t.step(
        "sign-out",
        Method::POST,
        "/api/auth/sign-out",
        &session,
        None,
    )
    .await;

    // Deletions and their refusals
    t.step(
        "configurations: delete referenced",
        Method::DELETE,
        &format!("{cfgs}/{cfg}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "agents: delete",
        Method::DELETE,
        &format!("{agents}/{agt}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "service-accounts: delete",
        Method::DELETE,
        &format!("{sas}/{sa}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "secrets: delete",
        Method::DELETE,
        &format!("{secrets}/{sec}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "namespaces: delete",
        Method::DELETE,
        &format!("/namespaces/{team}"),
        &admin,
        None,
    )
    .await;
    t.step(
        "namespaces: delete non-empty",
        Method::DELETE,
        &format!("/namespaces/{ns}"),
        &admin,
        None,
    )
    .await;

    // What the caller may do (occ's own route)
    t.step(
        "permissions: administrator",
        Method::GET,
        &format!("/namespaces/{ns}/iam/permissions"),
        &admin,
        None,
    )
    .await;
    t.step(
        "permissions: reader",
        Method::GET,
        &format!("/namespaces/{ns}/iam/permissions"),
        &reader,
        None,
    )
    .await;

    // Framing
    t.step("unknown route", Method::GET, "/nowhere", &admin, None)
        .await;
    t.step(
        "method not allowed",
        Method::PUT,
        "/installation",
        &admin,
        Some(json!({})),
    )
    .await;
    t.step(
        "query string",
        Method::GET,
        "/namespaces?limit=5",
        &admin,
        None,
    )
    .await;
    let wrong_type = http::Request::builder()
        .method(Method::POST)
        .uri("/namespaces")
        .header(
            "x-api-key",
            match &admin {
                Credential::Key(k) => k.clone(),
                _ => unreachable!(),
            },
        )
        .header("content-type", "text/plain")
        .body(axum::body::Body::from("name=x"))
        .unwrap();
    let reply = t.app.send(wrong_type).await;
    t.record(
        "unsupported media type",
        "POST /namespaces (text/plain)",
        &reply,
    );

    assert!(
        t.steps.iter().all(
            |s| s["status"].as_u64() != Some(StatusCode::INTERNAL_SERVER_ERROR.as_u16() as u64)
        ),
        "no step may answer 500"
    );
    insta::assert_json_snapshot!("every_route_envelope", t.steps);
}
