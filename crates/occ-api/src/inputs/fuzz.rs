//! Property tests: every body parser, fed arbitrary JSON built from the vocabulary of the API
//! (so deep paths are reached, not just top-level type errors), returns either a value or a
//! 400 whose details are bounded JSON pointers, and never echoes a secret (a parser that
//! produced no value without recording a problem would answer 500 and fail here).
//! `PROPTEST_CASES=50000 cargo test -p occ-api fuzz` runs a longer campaign.

use super::*;
use occ_core::{Error, ErrorCode, NamespaceId};
use proptest::prelude::*;
use serde_json::{Map, json};

const KEYS: &[&str] = &[
    "name",
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
        assert_well_formed(NamespaceCreateBody::parse(&b))?;
    }

    #[test]
    fn configuration_bodies(b in body(json!({"kind": "agent", "values": {}, "secretBindings": {}}))) {
        assert_well_formed(ConfigurationCreateBody::parse(&b, &ns()))?;
        assert_well_formed(ConfigurationUpdateBody::parse(&b, &ns()))?;
    }

    #[test]
    fn configuration_documents(values in json_value()) {
        let b = json!({"kind": "agent", "values": values});
        assert_well_formed(ConfigurationCreateBody::parse(&b, &ns()))?;
    }

    #[test]
    fn secret_bodies(b in body(json!({"name": "n", "value": CANARY}))) {
        assert_well_formed(SecretCreateBody::parse(&b))?;
        assert_well_formed(SecretUpdateBody::parse(&b))?;
    }

    #[test]
    fn service_account_bodies(b in body(json!({"name": "n"}))) {
        assert_well_formed(ServiceAccountCreateBody::parse(&b))?;
    }

    #[test]
    fn agent_bodies(b in body(json!({
        "name": "a",
        "configurationId": "cfg_00000000-0000-4000-8000-000000000000",
        "harnessAuth": {"method": "api_key", "source": {"kind": "secret", "namespaceId": "ns_00000000-0000-4000-8000-000000000000", "id": "sec_00000000-0000-4000-8000-000000000000"}},
        "initialWorkspaceFiles": {"USER.md": "hi"},
    }))) {
        assert_well_formed(AgentCreateBody::parse(&b, &ns()))?;
        assert_well_formed(AgentUpdateBody::parse(&b, &ns()))?;
    }

    #[test]
    fn iam_bodies(b in body(json!({
        "permissions": [{"action": "read", "resourceKind": "agent"}],
        "subjectId": "sp_x", "roleId": "role_x",
    }))) {
        assert_well_formed(RoleCreateBody::parse(&b))?;
        assert_well_formed(BindingCreateBody::parse(&b))?;
    }

    #[test]
    fn auth_bodies(b in body(json!({
        "email": "a@b.test", "password": CANARY, "name": "k",
        "servicePrincipalId": "sp_x", "expiresIn": 3600,
    }))) {
        assert_well_formed(SignInBody::parse(&b))?;
        assert_well_formed(AccountCreateBody::parse(&b))?;
        assert_well_formed(ServiceKeyCreateBody::parse(&b))?;
    }
}
