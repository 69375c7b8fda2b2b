//! Validation of native OpenClaw configuration documents (`openclaw.json`), before any
//! Configuration Driver sees them (spec/api.md §1.4):
//!
//! - the document is a JSON object nested at most 24 levels deep;
//! - no key anywhere is `__proto__`, `constructor` or `prototype`;
//! - no key or string anywhere contains NUL (PostgreSQL's jsonb cannot hold it, and SQLite would
//!   accept what PostgreSQL refuses at deploy);
//! - each model provider's `baseUrl` (and each of its models' `baseUrl`) is an absolute http(s)
//!   URL — a blank provider value or a `${VAR}` reference is left to the runtime;
//! - each provider's and model's `api` names a model API the pinned runtime supports;
//! - credential fields hold references, never literal credentials: provider `apiKey`, provider
//!   headers `authorization`/`api-key`/`x-api-key`, and `env`/`env.vars` entries for the model
//!   keys must be `${NAME}`, `Bearer ${NAME}` (authorization only) or an inline SecretRef
//!   `{source, provider, id}`.
//!
//! - no setting reaches outside the Agent's runtime ([`outside`]): host paths the gateway would
//!   load code from, serve, read or write, programs it would run, `$include`, `env` variables
//!   that configure the runtime, and references to the Driver's own credentials.
//!
//! On top of these, the document must validate against the pinned runtime's own JSON Schema
//! ([`schema`]); where occ's rules and the schema both find a problem at one pointer, occ's is
//! kept.
//!
//! Problems are reported at JSON pointers under `base` (e.g. `/values`), never with values.

pub mod control_ui;
mod env_ref;
pub mod harness;
mod outside;
pub mod schema;

use serde_json::{Map, Value};

use crate::error::DetailCode;
use crate::resource::Generation;
use crate::validate::{Problems, child, has_nul, index};
use crate::{ConfigurationId, Error};
use env_ref::contains_env_reference;

/// Deepest allowed nesting of the document (the document object itself is level 1).
pub const MAX_DEPTH: usize = 24;

/// Model APIs the pinned OpenClaw runtime accepts (a test keeps this equal to its schema).
pub const MODEL_APIS: [&str; 11] = [
    "openai-completions",
    "openai-responses",
    "openai-chatgpt-responses",
    "anthropic-messages",
    "google-generative-ai",
    "google-vertex",
    "github-copilot",
    "bedrock-converse-stream",
    "ollama",
    "pi-messages",
    "azure-openai-responses",
];

const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "api-key", "x-api-key"];
const CREDENTIAL_ENV: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CODEX_ACCESS_TOKEN",
];
const FORBIDDEN_KEYS: [&str; 3] = ["__proto__", "constructor", "prototype"];

/// Validates `values` (reported under `base`); returns the document object when it is valid.
pub fn validate_document<'a>(
    values: &'a Value,
    base: &str,
    problems: &mut Problems,
) -> Option<&'a Map<String, Value>> {
    let Value::Object(doc) = values else {
        problems.push(base, DetailCode::InvalidType, "must be a JSON object");
        return None;
    };
    let before = problems.items().len();
    walk(values, base, 1, problems);
    if problems.items().len() != before {
        // structural problems first: do not interpret a malformed tree further
        return None;
    }
    check_providers(doc, base, problems);
    check_env(doc, base, problems);
    outside::check(values, base, problems);
    let own = problems.items().get(before..).unwrap_or_default();
    for found in schema::check(values, base, own) {
        problems.push(found.path, found.code, found.expectation);
    }
    (problems.items().len() == before).then_some(doc)
}

/// Re-validates a stored document at deploy admission and hands it back. A document stored
/// before a rule or the pinned runtime changed may no longer validate; it is refused with the
/// details its Configuration's own update would report (400 `INVALID_REQUEST`, pointers under
/// `/values`), so the runtime is never handed a document it would refuse.
pub fn check_stored_document(
    document: Map<String, Value>,
    configuration: &ConfigurationId,
    generation: Generation,
) -> Result<Map<String, Value>, Error> {
    let document = Value::Object(document);
    let mut problems = Problems::new();
    validate_document(&document, "/values", &mut problems);
    if !problems.is_empty() {
        return Err(problems.into_error_saying(&format!(
            "Configuration {configuration} (generation {generation}) is not valid for the pinned \
             OpenClaw runtime; update it and deploy again"
        )));
    }
    let Value::Object(document) = document else {
        unreachable!("wrapped above")
    };
    Ok(document)
}

fn walk(v: &Value, path: &str, depth: usize, problems: &mut Problems) {
    match v {
        Value::Object(map) => {
            if depth > MAX_DEPTH {
                problems.push(
                    path,
                    DetailCode::TooDeep,
                    "is nested too deeply (expected at most 24 levels)",
                );
                return;
            }
            for (k, child_value) in map {
                let p = child(path, k);
                if FORBIDDEN_KEYS.contains(&k.as_str()) {
                    problems.push(&p, DetailCode::InvalidValue, "uses a forbidden key");
                    continue;
                }
                if has_nul(k) {
                    problems.push(&p, DetailCode::InvalidValue, "has a key containing NUL");
                    continue;
                }
                walk(child_value, &p, depth + 1, problems);
            }
        }
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                problems.push(
                    path,
                    DetailCode::TooDeep,
                    "is nested too deeply (expected at most 24 levels)",
                );
                return;
            }
            for (i, item) in items.iter().enumerate() {
                walk(item, &index(path, i), depth + 1, problems);
            }
        }
        Value::String(s) if has_nul(s) => {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must not contain NUL characters",
            );
        }
        _ => {}
    }
}

pub(crate) fn is_http_url(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let rest = if let Some(r) = lower.strip_prefix("https://") {
        r
    } else if let Some(r) = lower.strip_prefix("http://") {
        r
    } else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit('@').next().unwrap_or_default();
    !host.is_empty()
        && !host.starts_with(':')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn check_base_url(v: &Value, path: &str, allow_blank: bool, problems: &mut Problems) {
    match v {
        Value::String(s) if allow_blank && s.trim().is_empty() => {}
        Value::String(s) if contains_env_reference(s) => {}
        Value::String(s) if is_http_url(s) => {}
        _ => problems.push(
            path,
            DetailCode::InvalidValue,
            "must be an absolute http or https URL",
        ),
    }
}

fn check_api(v: &Value, path: &str, problems: &mut Problems) {
    match v {
        Value::String(s) if contains_env_reference(s) || MODEL_APIS.contains(&s.as_str()) => {}
        _ => problems.push(
            path,
            DetailCode::InvalidValue,
            "must name a model API the runtime supports, such as openai-responses, openai-completions or anthropic-messages",
        ),
    }
}

fn check_providers(doc: &Map<String, Value>, base: &str, problems: &mut Problems) {
    let Some(Value::Object(providers)) = doc.get("models").and_then(|m| m.get("providers")) else {
        return;
    };
    let providers_path = child(&child(base, "models"), "providers");
    for (name, provider) in providers {
        let Value::Object(provider) = provider else {
            continue;
        };
        let pp = child(&providers_path, name);
        if let Some(v) = provider.get("baseUrl") {
            check_base_url(v, &child(&pp, "baseUrl"), true, problems);
        }
        if let Some(v) = provider.get("api") {
            check_api(v, &child(&pp, "api"), problems);
        }
        if let Some(v) = provider.get("apiKey") {
            check_credential(v, &child(&pp, "apiKey"), false, problems);
        }
        if let Some(Value::Object(headers)) = provider.get("headers") {
            for (h, v) in headers {
                if CREDENTIAL_HEADERS.iter().any(|c| c.eq_ignore_ascii_case(h)) {
                    check_credential(
                        v,
                        &child(&child(&pp, "headers"), h),
                        h.eq_ignore_ascii_case("authorization"),
                        problems,
                    );
                }
            }
        }
        if let Some(Value::Array(models)) = provider.get("models") {
            for (i, model) in models.iter().enumerate() {
                let Value::Object(model) = model else {
                    continue;
                };
                let mp = index(&child(&pp, "models"), i);
                if let Some(v) = model.get("baseUrl") {
                    check_base_url(v, &child(&mp, "baseUrl"), false, problems);
                }
                if let Some(v) = model.get("api") {
                    check_api(v, &child(&mp, "api"), problems);
                }
            }
        }
    }
}

fn check_env(doc: &Map<String, Value>, base: &str, problems: &mut Problems) {
    let Some(Value::Object(env)) = doc.get("env") else {
        return;
    };
    let env_path = child(base, "env");
    for name in CREDENTIAL_ENV {
        if let Some(v) = env.get(name) {
            check_credential(v, &child(&env_path, name), false, problems);
        }
    }
    if let Some(Value::Object(vars)) = env.get("vars") {
        let vars_path = child(&env_path, "vars");
        for name in CREDENTIAL_ENV {
            if let Some(v) = vars.get(name) {
                check_credential(v, &child(&vars_path, name), false, problems);
            }
        }
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `${NAME}` exactly.
fn is_env_placeholder(s: &str) -> bool {
    s.strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .is_some_and(is_env_name)
}

/// Whether a credential field holds a reference rather than a literal.
fn is_credential_reference(v: &Value, bearer_allowed: bool) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => {
            is_env_placeholder(s)
                || (bearer_allowed
                    && s.len() > 7
                    && s[..7].eq_ignore_ascii_case("bearer ")
                    && is_env_placeholder(&s[7..]))
        }
        Value::Object(m) => {
            m.len() == 3
                && ["source", "provider", "id"].iter().all(|k| {
                    m.get(*k)
                        .and_then(Value::as_str)
                        .is_some_and(|s| !s.is_empty())
                })
        }
        _ => false,
    }
}

fn check_credential(v: &Value, path: &str, bearer_allowed: bool, problems: &mut Problems) {
    if !is_credential_reference(v, bearer_allowed) {
        problems.push(
            path,
            DetailCode::InvalidValue,
            "holds a credential value inline, where a reference (${NAME} or a SecretRef) is required",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn check(v: Value) -> Vec<(String, DetailCode)> {
        let mut p = Problems::new();
        validate_document(&v, "/values", &mut p);
        p.items().iter().map(|i| (i.path.clone(), i.code)).collect()
    }

    #[test]
    fn accepts_a_realistic_document() {
        let doc = json!({
            "agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
            "models": {"providers": {
                "openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-responses",
                           "apiKey": {"source": "env", "provider": "default", "id": "OPENAI_API_KEY"}},
                "local": {"baseUrl": "${LOCAL_URL}", "api": "ollama", "apiKey": "${LOCAL_KEY}",
                          "headers": {"Authorization": "Bearer ${LOCAL_TOKEN}", "X-Trace": "literal ok"},
                          "models": [{"id": "m", "name": "M", "baseUrl": "http://127.0.0.1:11434"}]},
                "blank": {"baseUrl": "  "}
            }},
            "env": {"vars": {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "OTHER": "anything"}},
            "gateway": {"mode": "local"}
        });
        assert!(check(doc).is_empty());
    }

    #[test]
    fn refuses_structure_problems() {
        assert_eq!(
            check(json!([1])),
            vec![("/values".into(), DetailCode::InvalidType)]
        );
        // an unbundled plugin's configuration is free-form in the schema: 5 levels down
        let nested = |levels: usize| {
            let mut deep = json!(1);
            for _ in 0..levels {
                deep = json!({ "a": deep });
            }
            json!({"plugins": {"entries": {"x": {"config": deep}}}})
        };
        assert!(check(nested(20)).is_empty(), "24 levels are fine");
        assert_eq!(
            check(nested(21)),
            [(
                format!("/values/plugins/entries/x/config{}", "/a".repeat(20)),
                DetailCode::TooDeep
            )]
        );
        let bad = check(json!({"a": {"__proto__": {}}, "constructor": 1}));
        assert!(bad.contains(&("/values/a/__proto__".into(), DetailCode::InvalidValue)));
        assert!(bad.contains(&("/values/constructor".into(), DetailCode::InvalidValue)));
    }

    #[test]
    fn refuses_nul_in_keys_and_strings_at_any_depth() {
        let bad = check(json!({
            "gateway": {"mode": "lo\u{0}cal"},
            "a": [{"b": ["ok", "x\u{0}"]}],
            "k\u{0}ey": 1,
            "deep": {"n\u{0}": {"y": "\u{0}"}},
            "fine": "no nul here"
        }));
        assert_eq!(
            bad,
            vec![
                ("/values/a/0/b/1".into(), DetailCode::InvalidValue),
                ("/values/deep/n\u{0}".into(), DetailCode::InvalidValue),
                ("/values/gateway/mode".into(), DetailCode::InvalidValue),
                ("/values/k\u{0}ey".into(), DetailCode::InvalidValue),
            ]
        );
        // the message names pointers, never the strings themselves
        let mut p = Problems::new();
        validate_document(&json!({"s": "secret\u{0}canary"}), "/values", &mut p);
        assert!(!p.into_error().message().contains("canary"));
    }

    #[test]
    fn refuses_bad_urls_apis_and_literal_credentials() {
        let bad = check(json!({"models": {"providers": {
            "p": {"baseUrl": "ftp://x", "api": "made-up", "apiKey": "sk-live-123",
                  "headers": {"x-api-key": "abc", "authorization": "Bearer sk-123"},
                  "models": [{"id": "m", "baseUrl": "", "api": 5}]},
            "q/r": {"baseUrl": "not a url"}
        }}, "env": {"ANTHROPIC_API_KEY": "sk-ant", "vars": {"CODEX_ACCESS_TOKEN": {"source": "env"}}}}));
        let paths: Vec<&str> = bad.iter().map(|(p, _)| p.as_str()).collect();
        for expected in [
            "/values/models/providers/p/baseUrl",
            "/values/models/providers/p/api",
            "/values/models/providers/p/apiKey",
            "/values/models/providers/p/headers/x-api-key",
            "/values/models/providers/p/headers/authorization",
            "/values/models/providers/p/models/0/baseUrl",
            "/values/models/providers/p/models/0/api",
            "/values/models/providers/q~1r/baseUrl",
            "/values/env/ANTHROPIC_API_KEY",
            "/values/env/vars/CODEX_ACCESS_TOKEN",
        ] {
            assert!(
                paths.contains(&expected),
                "{expected} missing from {paths:?}"
            );
        }
        // messages never echo values
        let mut p = Problems::new();
        validate_document(
            &json!({"models": {"providers": {"p": {"apiKey": "sk-live-123"}}}}),
            "/values",
            &mut p,
        );
        assert!(!p.into_error().message().contains("sk-live"));
    }

    #[test]
    fn stored_documents_are_rechecked() {
        let cfg: ConfigurationId = "cfg_00000000-0000-4000-8000-000000000001"
            .parse()
            .expect("id");
        let generation = Generation::new(3).expect("generation");
        let good = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}});
        let Value::Object(good) = good else { panic!() };
        assert_eq!(
            check_stored_document(good.clone(), &cfg, generation).expect("valid"),
            good
        );
        let Value::Object(stale) = json!({"bogusTopLevelKey": "secret-ish value"}) else {
            panic!()
        };
        let err = check_stored_document(stale, &cfg, generation).unwrap_err();
        assert_eq!(err.code().as_str(), "INVALID_REQUEST");
        assert!(
            err.message().starts_with(&format!(
                "Configuration {cfg} (generation 3) is not valid for the pinned OpenClaw runtime"
            )),
            "{}",
            err.message()
        );
        assert!(
            err.message()
                .contains("/values/bogusTopLevelKey is not a known field")
        );
        assert!(!err.message().contains("secret-ish"));
        assert_eq!(err.details()[0].path, "/values/bogusTopLevelKey");
        assert_eq!(err.details()[0].code, DetailCode::UnknownField);
    }

    /// The documents the runtime's own `openclaw config validate` is asked about in
    /// `crates/occ/tests/runtime_schema.rs`: occ must say what the runtime says.
    #[test]
    fn verdicts_on_the_shared_documents() {
        let cases: Vec<Value> =
            serde_json::from_str(include_str!("../testdata/openclaw-documents.json"))
                .expect("json");
        assert!(cases.len() >= 8);
        for case in cases {
            let problems = check(case["document"].clone());
            assert_eq!(
                problems.is_empty(),
                case["valid"] == true,
                "{}: {problems:?}",
                case["name"]
            );
        }
    }

    #[test]
    fn model_apis_are_the_pinned_runtimes() {
        let pinned: Value = serde_json::from_str(schema::PINNED_SCHEMA).expect("json");
        let provider = "/properties/models/properties/providers/additionalProperties/properties";
        for at in [
            format!("{provider}/api/enum"),
            format!("{provider}/models/items/properties/api/enum"),
        ] {
            let mut expected: Vec<&str> = pinned
                .pointer(&at)
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{at} in the pinned schema"))
                .iter()
                .filter_map(Value::as_str)
                .collect();
            expected.sort_unstable();
            let mut ours = MODEL_APIS.to_vec();
            ours.sort_unstable();
            assert_eq!(ours, expected, "{at}");
        }
    }

    #[test]
    fn env_placeholders() {
        assert!(is_env_placeholder("${a_b}"));
        assert!(!is_env_placeholder("x${A}"));
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_json(s in "\\PC{0,200}") {
            if let Ok(v) = serde_json::from_str::<Value>(&s) {
                let mut p = Problems::new();
                let _ = validate_document(&v, "/values", &mut p);
            }
        }
    }
}
