//! Property tests: every body parser, fed arbitrary JSON built from the vocabulary of the API
//! (so deep paths are reached, not just top-level type errors), returns either a value or a
//! 400 whose details are bounded JSON pointers, and never echoes a secret (a parser that
//! produced no value without recording a problem would answer 500 and fail here). Every body a
//! parser accepts must also satisfy the OpenAPI schema the same declaration generates, so the
//! served document never refuses what the API takes.
//! `PROPTEST_CASES=50000 cargo test -p occ-api fuzz` runs a longer campaign.

use super::*;
use crate::body::Field;
use occ_core::{Error, ErrorCode, NamespaceId};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: &[&str] = &[
    "name",
    "requestId",
    "configuration",
    "value",
    "values",
    "kind",
    "secretBindings",
    "source",
    "namespaceId",
    "id",
    "configurationId",
    "executionMode",
    "backendId",
    "harnessAuth",
    "method",
    "serviceAccountId",
    "initialWorkspaceFiles",
    "AGENTS.md",
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "content",
    "workspaceDefaultsId",
    "permissions",
    "action",
    "resourceKind",
    "roleId",
    "principalId",
    "subjectId",
    "resource",
    "resourceId",
    "email",
    "password",
    "expiresIn",
    "servicePrincipalId",
    "existingNamespace",
    "models",
    "providers",
    "baseUrl",
    "api",
    "apiKey",
    "headers",
    "env",
    "agents",
    "defaults",
    "__proto__",
    "constructor",
    "prototype",
    "OPENAI_API_KEY",
    "",
];

const CANARY: &str = "canary-9f3c-secret-value";

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            "secret",
            "agent",
            "embedded",
            "dedicated",
            "api_key",
            "runtime",
            "chatgpt_service_account",
            "read",
            "administer",
            "namespace",
            "https://x.test/v1",
            "ftp://x",
            "${VAR}",
            "ns_00000000-0000-4000-8000-000000000000",
            "cfg_00000000-0000-4000-8000-000000000000",
            "sec_00000000-0000-4000-8000-000000000000",
            "sa_00000000-0000-4000-8000-000000000000",
            "openai-responses",
            "a@b.test",
            CANARY,
        ])
        .prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
        "[\\x00-\\x1f\u{7f}\u{200b}a-z]{0,8}".prop_map(Value::from),
        (0usize..70_000).prop_map(|n| Value::from("x".repeat(n))),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "\\PC{0,12}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A body that is mostly right: a valid one with some fields replaced or added.
fn mutated(valid: Value) -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), json_value()), 0..4).prop_map(move |edits| {
        let mut body = valid.clone();
        if let Value::Object(map) = &mut body {
            for (k, v) in edits {
                map.insert(k, v);
            }
        }
        body
    })
}

fn body(valid: Value) -> impl Strategy<Value = Value> {
    prop_oneof![json_value(), mutated(valid)]
}

/// Parses `body` as a `T`, checking the outcome: accepted bodies satisfy `T`'s schema, refusals
/// are well-formed 400s.
fn parsed<Cx, T: Field<Cx>>(body: &Value, cx: &Cx) -> Result<(), TestCaseError> {
    let result = crate::body::parse::<Cx, T>(body, cx);
    if result.is_ok() {
        prop_assert!(
            schema_admits::<Cx, T>(body),
            "{} accepts a body its schema refuses: {body}",
            std::any::type_name::<T>()
        );
    }
    assert_well_formed(result)
}

fn schema_admits<Cx, T: Field<Cx>>(body: &Value) -> bool {
    let schema = serde_json::to_value(T::schema()).unwrap();
    jsonschema::validator_for(&schema).unwrap().is_valid(body)
}

fn assert_well_formed<T>(result: Result<T, Error>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        prop_assert_eq!(e.code(), ErrorCode::InvalidRequest);
        prop_assert!(e.details().len() <= 32);
        prop_assert!(e.message().chars().count() <= 256);
        prop_assert!(
            !e.message().contains(CANARY),
            "message echoes a value: {}",
            e.message()
        );
        for d in e.details() {
            prop_assert!(
                d.path.is_empty() || d.path.starts_with('/'),
                "bad pointer {:?}",
                d.path
            );
            prop_assert!(!d.path.contains(CANARY));
        }
    }
    Ok(())
}

/// 512 cases per property unless `PROPTEST_CASES` asks for a longer campaign.
#[expect(
    clippy::disallowed_methods,
    reason = "proptest's own knob for the number of cases"
)]
fn campaign_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

fn ns() -> NamespaceId {
    "ns_00000000-0000-4000-8000-000000000000".parse().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: campaign_cases(), ..ProptestConfig::default() })]

    #[test]
    fn namespace_bodies(b in body(json!({"name": "n"}))) {
        parsed::<_, NamespaceCreateBody>(&b, &())?;
    }

    #[test]
    fn configuration_bodies(b in body(json!({"kind": "agent", "values": {}, "secretBindings": {}}))) {
        parsed::<_, ConfigurationCreateBody>(&b, &ns())?;
        parsed::<_, ConfigurationUpdateBody>(&b, &ns())?;
    }

    #[test]
    fn configuration_documents(values in json_value()) {
        let b = json!({"kind": "agent", "values": values});
        parsed::<_, ConfigurationCreateBody>(&b, &ns())?;
    }

    #[test]
    fn secret_bodies(b in body(json!({"name": "n", "value": CANARY}))) {
        parsed::<_, SecretCreateBody>(&b, &())?;
        parsed::<_, SecretUpdateBody>(&b, &())?;
    }

    #[test]
    fn preset_bodies(b in body(json!({"name": "n", "template": {
        "variables": {"m": {"type": "string", "default": CANARY}},
        "agent": {"name": "{{ vars.m }}"},
        "configuration": {"values": {}, "secretBindings": {}}
    }}))) {
        parsed::<_, PresetCreateBody>(&b, &ns())?;
        parsed::<_, PresetUpdateBody>(&b, &ns())?;
    }

    #[test]
    fn preset_templates(values in json_value()) {
        let b = json!({"name": "n", "template": {"configuration": {"values": values}}});
        parsed::<_, PresetCreateBody>(&b, &ns())?;
    }

    #[test]
    fn provision_bodies(b in body(json!({
        "requestId": "req_00000000-0000-4000-8000-000000000000",
        "name": "n",
        "configuration": {"kind": "agent", "values": {}, "secretBindings": {}},
        "executionMode": "embedded",
        "harnessAuth": {"method": "runtime"},
        "initialWorkspaceFiles": {"SOUL.md": CANARY}
    }))) {
        parsed::<_, AgentProvisionBody>(&b, &ns())?;
    }

    #[test]
    fn workspace_file_bodies(b in body(json!({"content": CANARY}))) {
        parsed::<_, WorkspaceFileBody>(&b, &())?;
    }

    #[test]
    fn service_account_bodies(b in body(json!({"name": "n"}))) {
        parsed::<_, ServiceAccountCreateBody>(&b, &())?;
    }

    #[test]
    fn agent_bodies(b in body(json!({
        "name": "a",
        "configurationId": "cfg_00000000-0000-4000-8000-000000000000",
        "harnessAuth": {"method": "api_key", "source": {"kind": "secret", "namespaceId": "ns_00000000-0000-4000-8000-000000000000", "id": "sec_00000000-0000-4000-8000-000000000000"}},
        "initialWorkspaceFiles": {"USER.md": "hi"},
    }))) {
        parsed::<_, AgentCreateBody>(&b, &ns())?;
        parsed::<_, AgentUpdateBody>(&b, &ns())?;
    }

    #[test]
    fn iam_bodies(b in body(json!({
        "permissions": [{"action": "read", "resourceKind": "agent"}],
        "subjectId": "sp_x", "roleId": "role_x",
    }))) {
        parsed::<_, RoleCreateBody>(&b, &())?;
        parsed::<_, BindingCreateBody>(&b, &())?;
    }

    #[test]
    fn auth_bodies(b in body(json!({
        "email": "a@b.test", "password": CANARY, "name": "k",
        "servicePrincipalId": "sp_x", "expiresIn": 3600,
    }))) {
        parsed::<_, SignInBody>(&b, &())?;
        parsed::<_, AccountCreateBody>(&b, &())?;
        parsed::<_, ServiceKeyCreateBody>(&b, &())?;
    }
}

/// Bodies the API accepts, each with an unknown field added: the parser and the schema agree on
/// both (the schema's patterns and closed objects are the parser's rules).
#[test]
fn schemas_admit_valid_bodies_and_refuse_unknown_fields() {
    fn agree<Cx, T: Field<Cx>>(valid: Value, cx: &Cx) {
        let name = std::any::type_name::<T>();
        assert!(
            crate::body::parse::<Cx, T>(&valid, cx).is_ok(),
            "{name}: {valid}"
        );
        assert!(
            schema_admits::<Cx, T>(&valid),
            "{name}'s schema refuses {valid}"
        );
        let mut extra = valid.clone();
        extra["surplus"] = json!(1);
        assert!(
            crate::body::parse::<Cx, T>(&extra, cx).is_err(),
            "{name}: {extra}"
        );
        assert!(
            !schema_admits::<Cx, T>(&extra),
            "{name}'s schema admits {extra}"
        );
    }
    // the schemas carry the rules, not just the shapes
    for refused in [
        json!({"name": " padded"}),
        json!({"name": "tab\tinside"}),
        json!({"name": "x".repeat(201)}),
        json!({"name": "n", "existingNamespace": "-x"}),
        json!({"name": "n", "existingNamespace": null}),
    ] {
        assert!(
            !schema_admits::<(), NamespaceCreateBody>(&refused),
            "{refused}"
        );
        assert!(crate::body::parse::<(), NamespaceCreateBody>(&refused, &()).is_err());
    }
    let ns = ns();
    let sec = "sec_00000000-0000-4000-8000-000000000000";
    let source = json!({"kind": "secret", "namespaceId": ns, "id": sec});
    agree::<_, NamespaceCreateBody>(
        json!({"name": "team a", "existingNamespace": "team-a"}),
        &(),
    );
    agree::<_, ConfigurationCreateBody>(
        json!({"kind": "agent", "values": {"gateway": {"mode": "local"}},
               "secretBindings": {"MY_KEY": {"source": source, "delivery": {"type": "env"}}}}),
        &ns,
    );
    agree::<_, ConfigurationUpdateBody>(json!({"values": {}, "secretBindings": {}}), &ns);
    agree::<_, PresetCreateBody>(
        json!({"name": "p", "template": {"agent": {"harnessAuth": {"method": "api_key", "source": source}}}}),
        &ns,
    );
    agree::<_, PresetUpdateBody>(json!({"template": {}}), &ns);
    agree::<_, AgentProvisionBody>(
        json!({"requestId": "req_00000000-0000-4000-8000-000000000000", "name": "a",
               "configuration": {"kind": "agent", "values": {"gateway": {"mode": "local"}},
                                 "secretBindings": {"MY_KEY": {"source": source}}},
               "executionMode": "dedicated", "backendId": null,
               "harnessAuth": {"method": "api_key", "source": source},
               "initialWorkspaceFiles": {"AGENTS.md": "be brief"}}),
        &ns,
    );
    agree::<_, SecretCreateBody>(json!({"name": "s", "value": "é\u{1}x"}), &());
    agree::<_, SecretUpdateBody>(json!({"value": "v"}), &());
    agree::<_, ServiceAccountCreateBody>(json!({"name": "robot"}), &());
    agree::<_, AgentCreateBody>(
        json!({"name": "a", "configurationId": "cfg_00000000-0000-4000-8000-000000000000",
               "executionMode": "embedded", "backendId": null,
               "harnessAuth": {"method": "api_key", "source": source},
               "initialWorkspaceFiles": {"USER.md": "hi", "SOUL.md": ""},
               "workspaceDefaultsId": "0".repeat(64)}),
        &ns,
    );
    agree::<_, AgentCreateBody>(
        json!({"name": "b", "configurationId": "cfg_00000000-0000-4000-8000-000000000000",
               "harnessAuth": {"method": "chatgpt_service_account",
                               "serviceAccountId": "sa_00000000-0000-4000-8000-000000000000"},
               "initialWorkspaceFiles": {}}),
        &ns,
    );
    agree::<_, AgentUpdateBody>(
        json!({"configurationId": "cfg_00000000-0000-4000-8000-000000000000",
               "executionMode": "dedicated", "backendId": null, "harnessAuth": {"method": "runtime"}}),
        &ns,
    );
    agree::<_, RoleCreateBody>(
        json!({"name": "readers", "permissions": [{"action": "read", "resourceKind": "agent"}]}),
        &(),
    );
    agree::<_, BindingCreateBody>(
        json!({"subjectKind": "identity", "subjectId": "sp_x", "roleId": "role_x",
               "resourceKind": "agent", "resourceId": "agt_x"}),
        &(),
    );
    agree::<_, SignInBody>(
        json!({"email": "a@b.test", "password": "long enough password"}),
        &(),
    );
    agree::<_, AccountCreateBody>(
        json!({"email": "a@b.test", "password": "long enough password", "name": "A", "roleId": "role_x"}),
        &(),
    );
    agree::<_, WorkspaceFileBody>(json!({"content": "# notes\n"}), &());
    agree::<_, ServiceKeyCreateBody>(
        json!({"servicePrincipalId": "sp_x", "namespaceId": ns, "name": " ci ", "expiresIn": 86400}),
        &(),
    );
}
