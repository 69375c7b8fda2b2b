//! Parsers for the structured inputs several requests share: Secret bindings, harness auth,
//! initial workspace files and Secret values. Each reports problems with JSON pointers.

use serde_json::Value;

use crate::env_name::{BindingNameRefusal, binding_name_refusal};
use crate::error::DetailCode;
use crate::id::{NamespaceId, SecretId, ServiceAccountId};
use crate::resource::{
    HarnessAuth, SecretBinding, SecretBindings, SecretDelivery, SecretRef,
    WORKSPACE_FILE_MAX_BYTES, WorkspaceFileName, WorkspaceFiles,
};
use crate::validate::{Fields, Problems, child, expect_id, expect_str, type_name};

/// Most Secret bindings per Configuration.
pub const SECRET_BINDINGS_MAX: usize = 64;
/// Longest binding key.
pub const SECRET_BINDING_KEY_MAX: usize = crate::env_name::BINDING_NAME_MAX;
/// Largest Secret value, in UTF-8 bytes.
pub const SECRET_VALUE_MAX_BYTES: usize = 65_536;

/// Whether a binding destination breaks the binding-name rule ([`crate::env_name`]).
pub fn is_reserved_binding(key: &str) -> bool {
    binding_name_refusal(key).is_some()
}

/// Parses a Secret reference object `{kind:"secret", namespaceId, id}`.
pub fn parse_secret_ref(v: &Value, path: &str, problems: &mut Problems) -> Option<SecretRef> {
    let mut f = Fields::new(v, path, problems);
    let kind = f.required_str("kind", problems);
    let ns = f
        .required("namespaceId", problems)
        .and_then(|v| expect_id::<NamespaceId>(v, &child(path, "namespaceId"), "ns", problems));
    let id = f
        .required("id", problems)
        .and_then(|v| expect_id::<SecretId>(v, &child(path, "id"), "sec", problems));
    f.finish(problems);
    if let Some(k) = kind
        && k != "secret"
    {
        problems.push(
            child(path, "kind"),
            DetailCode::InvalidValue,
            "must be \"secret\"",
        );
        return None;
    }
    Some(SecretRef::new(ns?, id?)).filter(|_| kind.is_some())
}

/// The validation detail code of a refused binding name.
pub fn refusal_code(refusal: BindingNameRefusal) -> DetailCode {
    match refusal {
        BindingNameRefusal::TooLong => DetailCode::TooLong,
        BindingNameRefusal::Format => DetailCode::InvalidFormat,
        BindingNameRefusal::Reserved => DetailCode::InvalidValue,
    }
}

/// Refuses, at `/secretBindings/<NAME>` under `path`, every binding whose name breaks the rule
/// of [`crate::env_name`]: deploy admission re-checks a stored Configuration with it, so a
/// document stored before the rule cannot reach a gateway.
pub fn check_binding_names(bindings: &SecretBindings, path: &str, problems: &mut Problems) {
    for key in bindings.keys() {
        if let Some(refusal) = binding_name_refusal(key) {
            problems.push(child(path, key), refusal_code(refusal), refusal.message());
        }
    }
}

/// Walks a `secretBindings` object: at most 64 entries whose keys follow the binding-name rule of
/// [`crate::env_name`]; `entry` reads each entry's `source` (with its pointer) and returns what it
/// keeps of it, and a `delivery` must be `{type:"env"}`. The kept sources by binding name when
/// nothing was wrong.
pub fn walk_secret_bindings<T>(
    v: &Value,
    path: &str,
    problems: &mut Problems,
    mut source: impl FnMut(&Value, &str, &mut Problems) -> Option<T>,
) -> Option<Vec<(String, T)>> {
    let Value::Object(map) = v else {
        problems.push(
            path,
            DetailCode::InvalidType,
            format!("must be an object, not {}", type_name(v)),
        );
        return None;
    };
    if map.len() > SECRET_BINDINGS_MAX {
        problems.push(
            path,
            DetailCode::InvalidValue,
            "has too many entries (expected at most 64)",
        );
        return None;
    }
    let mut out = Vec::new();
    let before = problems.items().len();
    for (key, entry) in map {
        let kp = child(path, key);
        if let Some(refusal) = binding_name_refusal(key) {
            problems.push(&kp, refusal_code(refusal), refusal.message());
            continue;
        }
        let mut f = Fields::new(entry, &kp, problems);
        let kept = f
            .required("source", problems)
            .and_then(|s| source(s, &child(&kp, "source"), problems));
        if let Some(d) = f.optional("delivery") {
            let dp = child(&kp, "delivery");
            let mut df = Fields::new(d, &dp, problems);
            if df
                .required_str("type", problems)
                .is_some_and(|t| t != "env")
            {
                problems.push(
                    child(&dp, "type"),
                    DetailCode::InvalidValue,
                    "must be \"env\"",
                );
            }
            df.finish(problems);
        }
        f.finish(problems);
        if let Some(kept) = kept {
            out.push((key.clone(), kept));
        }
    }
    (problems.items().len() == before).then_some(out)
}

/// Parses and normalizes `secretBindings` ([`walk_secret_bindings`]): sources are Secrets of
/// `namespace` (another Namespace is a 400 naming the field), delivery normalizes to
/// `{type:"env"}`.
pub fn parse_secret_bindings(
    v: &Value,
    path: &str,
    namespace: &NamespaceId,
    problems: &mut Problems,
) -> Option<SecretBindings> {
    let sources = walk_secret_bindings(v, path, problems, |s, sp, problems| {
        let source = parse_secret_ref(s, sp, problems)?;
        if &source.namespace_id != namespace {
            problems.push(
                child(sp, "namespaceId"),
                DetailCode::InvalidValue,
                "must be this Namespace",
            );
            return None;
        }
        Some(source)
    })?;
    Some(
        sources
            .into_iter()
            .map(|(key, source)| {
                (
                    key,
                    SecretBinding {
                        source,
                        delivery: SecretDelivery::Env,
                    },
                )
            })
            .collect(),
    )
}

/// Parses `harnessAuth` (an object or `null`). Supported methods: `runtime`, `api_key` and
/// `codex_pat` (a Secret of this Namespace) and `chatgpt_service_account`; `oauth` and
/// `credential_source` are a conflict ([`Problems::conflict`]). `Ok(None)` is an explicit `null`.
pub fn parse_harness_auth(
    v: &Value,
    path: &str,
    namespace: &NamespaceId,
    problems: &mut Problems,
) -> Option<Option<HarnessAuth>> {
    if v.is_null() {
        return Some(None);
    }
    let mut f = Fields::new(v, path, problems);
    if !f.is_object() {
        return None;
    }
    let method = f.required_str("method", problems)?;
    let mp = child(path, "method");
    let auth = match method {
        "runtime" => Some(HarnessAuth::Runtime {}),
        "api_key" | "codex_pat" => {
            let sp = child(path, "source");
            let source = f
                .required("source", problems)
                .and_then(|s| parse_secret_ref(s, &sp, problems));
            match source {
                Some(s) if &s.namespace_id != namespace => {
                    problems.push(
                        child(&sp, "namespaceId"),
                        DetailCode::InvalidValue,
                        "must be this Namespace",
                    );
                    None
                }
                Some(source) if method == "api_key" => Some(HarnessAuth::ApiKey { source }),
                Some(source) => Some(HarnessAuth::CodexPat { source }),
                None => None,
            }
        }
        "chatgpt_service_account" => f
            .required("serviceAccountId", problems)
            .and_then(|v| {
                expect_id::<ServiceAccountId>(v, &child(path, "serviceAccountId"), "sa", problems)
            })
            .map(|id| HarnessAuth::ChatgptServiceAccount {
                service_account_id: id,
            }),
        "oauth" | "credential_source" => {
            // Well-formed methods of the reference whose flows (device login, Sandbox credential
            // sources) occ does not have yet: a conflict with this installation, not bad input.
            problems.conflict(format!(
                "harnessAuth method {method} is not available in this installation yet; use \
                 api_key or codex_pat (a Secret), chatgpt_service_account or runtime"
            ));
            return None;
        }
        _ => {
            problems.push(
                &mp,
                DetailCode::InvalidValue,
                "must be one of runtime, api_key, codex_pat, chatgpt_service_account",
            );
            return None;
        }
    };
    f.finish(problems);
    auth.map(Some)
}

/// Checks one workspace file's content: at most 16 KiB of UTF-8 and no NUL.
pub fn check_workspace_content(content: &str, path: &str, problems: &mut Problems) -> bool {
    if content.len() > WORKSPACE_FILE_MAX_BYTES {
        problems.push(
            path,
            DetailCode::TooLong,
            "is too long (expected at most 16384 bytes of UTF-8)",
        );
        false
    } else if content.contains('\0') {
        problems.push(
            path,
            DetailCode::InvalidValue,
            "must not contain NUL characters",
        );
        false
    } else {
        true
    }
}

/// Parses `initialWorkspaceFiles`: an object whose keys are the four file names and whose values
/// are strings (≤ 16 KiB UTF-8, no NUL; empty allowed). An empty object is `None` (no setup).
pub fn parse_initial_workspace_files(
    v: &Value,
    path: &str,
    problems: &mut Problems,
) -> Option<Option<WorkspaceFiles>> {
    let Value::Object(map) = v else {
        problems.push(
            path,
            DetailCode::InvalidType,
            format!("must be an object, not {}", type_name(v)),
        );
        return None;
    };
    let before = problems.items().len();
    let mut files = WorkspaceFiles::new();
    for (name, content) in map {
        let p = child(path, name);
        let Some(file) = WorkspaceFileName::parse(name) else {
            problems.push(
                &p,
                DetailCode::UnknownField,
                "is not one of AGENTS.md, SOUL.md, IDENTITY.md, USER.md",
            );
            continue;
        };
        if let Some(s) = expect_str(content, &p, problems)
            && check_workspace_content(s, &p, problems)
        {
            files.insert(file, s.to_owned());
        }
    }
    if problems.items().len() != before {
        return None;
    }
    Some((!files.is_empty()).then_some(files))
}

/// Checks a Secret value: non-empty, no NUL, at most 65 536 bytes of UTF-8.
pub fn check_secret_value(value: &str, path: &str, problems: &mut Problems) -> bool {
    if value.is_empty() {
        problems.push(path, DetailCode::InvalidValue, "must not be empty");
        false
    } else if value.len() > SECRET_VALUE_MAX_BYTES {
        problems.push(
            path,
            DetailCode::TooLong,
            "is too long (expected at most 65536 bytes of UTF-8)",
        );
        false
    } else if value.contains('\0') {
        problems.push(
            path,
            DetailCode::InvalidValue,
            "must not contain NUL characters",
        );
        false
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bindings_normalize_and_refuse_reserved_and_foreign() {
        let ns = NamespaceId::generate();
        let other = NamespaceId::generate();
        let sec = SecretId::generate();
        let mut p = Problems::new();
        let b = parse_secret_bindings(
            &json!({"MY_KEY": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}}}),
            "/secretBindings",
            &ns,
            &mut p,
        )
        .unwrap();
        assert_eq!(b["MY_KEY"].delivery, SecretDelivery::Env);
        for (key, body) in [
            (
                "OPENAI_API_KEY",
                json!({"source": {"kind": "secret", "namespaceId": ns, "id": sec}}),
            ),
            (
                "PATH",
                json!({"source": {"kind": "secret", "namespaceId": ns, "id": sec}}),
            ),
            (
                "9BAD",
                json!({"source": {"kind": "secret", "namespaceId": ns, "id": sec}}),
            ),
            (
                "OK",
                json!({"source": {"kind": "secret", "namespaceId": other, "id": sec}}),
            ),
            (
                "OK2",
                json!({"source": {"kind": "secret", "namespaceId": ns, "id": sec}, "delivery": {"type": "file"}}),
            ),
        ] {
            let mut p = Problems::new();
            assert!(
                parse_secret_bindings(&json!({ key: body }), "/secretBindings", &ns, &mut p)
                    .is_none(),
                "{key}"
            );
            assert!(!p.is_empty());
        }
        let many: serde_json::Map<String, Value> = (0..65)
            .map(|i| {
                (
                    format!("K{i}"),
                    json!({"source": {"kind": "secret", "namespaceId": ns, "id": sec}}),
                )
            })
            .collect();
        let mut p = Problems::new();
        assert!(
            parse_secret_bindings(&Value::Object(many), "/secretBindings", &ns, &mut p).is_none()
        );
    }

    #[test]
    fn harness_auth_variants() {
        let ns = NamespaceId::generate();
        let mut p = Problems::new();
        assert_eq!(
            parse_harness_auth(&json!(null), "/h", &ns, &mut p),
            Some(None)
        );
        assert_eq!(
            parse_harness_auth(&json!({"method": "runtime"}), "/h", &ns, &mut p),
            Some(Some(HarnessAuth::Runtime {}))
        );
        assert!(p.is_empty());
        let sec = crate::SecretId::generate();
        assert_eq!(
            parse_harness_auth(
                &json!({"method": "codex_pat", "source": {"kind": "secret", "namespaceId": ns, "id": sec}}),
                "/h",
                &ns,
                &mut p
            ),
            Some(Some(HarnessAuth::CodexPat {
                source: SecretRef::new(ns.clone(), sec.clone())
            }))
        );
        assert!(p.is_empty());
        // A Secret of another Namespace is invalid for codex_pat as for api_key.
        let mut p = Problems::new();
        let other = NamespaceId::generate();
        assert!(
            parse_harness_auth(
                &json!({"method": "codex_pat", "source": {"kind": "secret", "namespaceId": other, "id": sec}}),
                "/h",
                &ns,
                &mut p
            )
            .is_none()
        );
        assert_eq!(p.items()[0].path, "/h/source/namespaceId");
        // Methods whose flows occ lacks are a conflict (409) naming the method, not a 400.
        for later in ["oauth", "credential_source"] {
            let mut p = Problems::new();
            assert!(parse_harness_auth(&json!({"method": later}), "/h", &ns, &mut p).is_none());
            let err = p.into_error();
            assert_eq!(
                err.code(),
                crate::error::ErrorCode::ResourceConflict,
                "{later}"
            );
            assert!(err.message().contains(later), "{}", err.message());
        }
        for bad in [
            json!({"method": "device_code"}),
            json!({"method": "runtime", "x": 1}),
            json!({"method": "api_key"}),
            json!(5),
        ] {
            let mut p = Problems::new();
            let r = parse_harness_auth(&bad, "/h", &ns, &mut p);
            assert!(r.is_none() || !p.is_empty(), "{bad}");
            assert!(!p.is_empty(), "{bad}");
        }
    }

    #[test]
    fn workspace_files_rules() {
        let mut p = Problems::new();
        assert_eq!(
            parse_initial_workspace_files(&json!({}), "/f", &mut p),
            Some(None)
        );
        let files =
            parse_initial_workspace_files(&json!({"USER.md": "", "SOUL.md": "soul"}), "/f", &mut p)
                .unwrap()
                .unwrap();
        assert_eq!(files.len(), 2);
        for bad in [
            json!({"NOTES.md": "x"}),
            json!({"USER.md": 1}),
            json!({"USER.md": "a\u{0}b"}),
            json!({"USER.md": "é".repeat(8193)}),
        ] {
            let mut p = Problems::new();
            assert!(
                parse_initial_workspace_files(&bad, "/f", &mut p).is_none(),
                "{bad}"
            );
        }
        let mut p = Problems::new();
        assert!(check_workspace_content(&"x".repeat(16384), "/c", &mut p));
        assert!(!check_workspace_content(&"x".repeat(16385), "/c", &mut p));
    }

    #[test]
    fn secret_values() {
        let mut p = Problems::new();
        assert!(check_secret_value("sk-live", "/value", &mut p));
        assert!(!check_secret_value("", "/value", &mut p));
        assert!(!check_secret_value("a\0", "/value", &mut p));
        assert!(!check_secret_value(&"x".repeat(65537), "/value", &mut p));
    }
}
