//! Audit events (lifecycle.md §C): attributable, sanitized evidence appended in the same
//! transaction as the change it records.
//!
//! [`AuditEvent`] details pass through [`sanitize_details`] when they are attached, so a caller
//! cannot put a secret into the ledger by accident: credential-looking keys and token-looking
//! string values are replaced with `[REDACTED]`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::authz::{ResourceKind, ResourceRef};
use crate::id::{AuditEventId, NamespaceId};
use crate::time::Timestamp;

/// The placeholder that replaces redacted values.
pub const REDACTED: &str = "[REDACTED]";
/// The reserved details key holding request metadata.
pub const METADATA_KEY: &str = "__occAuditMetadata";
/// Deepest nesting kept in details.
const MAX_DEPTH: usize = 16;

/// What kind of evidence an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// Installation bootstrap.
    Bootstrap,
    /// A state change (or its failure).
    Mutation,
    /// An audited read.
    Access,
    /// An authorization denial.
    AuthorizationDenial,
}

impl AuditKind {
    /// Stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Bootstrap => "bootstrap",
            AuditKind::Mutation => "mutation",
            AuditKind::Access => "access",
            AuditKind::AuthorizationDenial => "authorization_denial",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        [
            Self::Bootstrap,
            Self::Mutation,
            Self::Access,
            Self::AuthorizationDenial,
        ]
        .into_iter()
        .find(|k| k.as_str() == value)
    }
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// Done.
    Success,
    /// Refused by authorization.
    Denied,
    /// Attempted and failed (including unknown outcomes, named by the reason code).
    Failure,
}

impl AuditOutcome {
    /// Stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Success => "success",
            AuditOutcome::Denied => "denied",
            AuditOutcome::Failure => "failure",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::Success, Self::Denied, Self::Failure]
            .into_iter()
            .find(|o| o.as_str() == value)
    }
}

/// One audit event.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// `aud_…`
    pub id: AuditEventId,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// Kind of evidence.
    pub kind: AuditKind,
    /// The acting principal id (or `unresolved`).
    pub actor_id: String,
    /// Action name, e.g. `openclaw.agents.deploy` or `reconcile`.
    pub action: String,
    /// Namespace of the resource, if namespaced.
    pub namespace_id: Option<NamespaceId>,
    /// Resource kind.
    pub resource_kind: ResourceKind,
    /// Resource id.
    pub resource_id: String,
    /// Outcome.
    pub outcome: AuditOutcome,
    /// Sanitized details, including the reserved metadata object.
    pub details: Map<String, Value>,
}

impl AuditEvent {
    /// A new event about `resource`. Details start empty.
    pub fn new(
        kind: AuditKind,
        actor_id: impl Into<String>,
        action: impl Into<String>,
        resource: &ResourceRef,
        outcome: AuditOutcome,
    ) -> Self {
        Self {
            id: AuditEventId::generate(),
            occurred_at: Timestamp::now(),
            kind,
            actor_id: actor_id.into(),
            action: action.into(),
            namespace_id: resource.namespace_id.clone(),
            resource_kind: resource.kind,
            resource_id: resource.id.clone(),
            outcome,
            details: Map::new(),
        }
    }

    /// Adds one sanitized detail. The reserved metadata key cannot be set this way.
    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        if key != METADATA_KEY && !is_forbidden_key(key) {
            let value = value.into();
            let clean = if is_sensitive_key(key) {
                Value::String(REDACTED.into())
            } else {
                sanitize_value(&value, 1)
            };
            self.details.insert(key.to_owned(), clean);
        }
        self
    }

    /// Sets one field of the reserved metadata object (requestId, reasonCode, actor…).
    pub fn metadata(mut self, key: &str, value: impl Into<Value>) -> Self {
        let entry = self
            .details
            .entry(METADATA_KEY)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = entry {
            map.insert(key.to_owned(), sanitize_value(&value.into(), 1));
        }
        self
    }

    /// Sets `reasonCode` both as an ordinary detail and in the metadata.
    pub fn reason_code(self, code: &str) -> Self {
        let code = crate::work::sanitize_reason_code(code);
        self.detail("reasonCode", code.clone())
            .metadata("reasonCode", code)
    }
}

/// Keys dropped outright.
fn is_forbidden_key(key: &str) -> bool {
    matches!(key, "__proto__" | "constructor" | "prototype")
}

/// Whether a details key names something that must never be recorded.
pub fn is_sensitive_key(key: &str) -> bool {
    const SENSITIVE: [&str; 21] = [
        "accesstoken",
        "apikey",
        "authorization",
        "bearer",
        "clientsecret",
        "cookie",
        "credential",
        "password",
        "privatekey",
        "providercredential",
        "providertoken",
        "refreshtoken",
        "secret",
        "session",
        "token",
        "body",
        "content",
        "message",
        "prompt",
        "text",
        "transcript",
    ];
    const SAFE_SUFFIXES: [&str; 8] = [
        "id",
        "ids",
        "ref",
        "reference",
        "name",
        "names",
        "kind",
        "count",
    ];
    let normalized: String = key
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if SAFE_SUFFIXES.iter().any(|s| normalized.ends_with(s)) {
        return false;
    }
    SENSITIVE.iter().any(|s| normalized.contains(s))
}

/// Whether a string value looks like a credential.
pub fn looks_like_secret(value: &str) -> bool {
    let trimmed = value.trim_start();
    if trimmed.len() > 7 && trimmed[..7].eq_ignore_ascii_case("bearer ") {
        return true;
    }
    const PREFIXES: [&str; 6] = ["sk-", "ghp_", "gho_", "ghp-", "gho-", "occ_"];
    let token_run = |rest: &str| {
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .count()
            >= 8
    };
    value
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '=' | ':' | ','))
        .any(|word| {
            PREFIXES
                .iter()
                .any(|p| word.starts_with(p) && token_run(&word[p.len()..]))
                || (word.starts_with("xox")
                    && word.len() > 4
                    && word.as_bytes()[4] == b'-'
                    && token_run(&word[5..]))
        })
}

/// Deep-sanitizes a details value: redacts sensitive keys and secret-looking strings, replaces
/// control characters with spaces, drops prototype keys, and cuts nesting at depth 16.
pub fn sanitize_details(value: &Value) -> Value {
    sanitize_value(value, 0)
}

fn sanitize_value(value: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::String(REDACTED.into());
    }
    match value {
        Value::String(s) => {
            if looks_like_secret(s) {
                Value::String(REDACTED.into())
            } else {
                Value::String(
                    s.chars()
                        .map(|c| if c.is_control() { ' ' } else { c })
                        .collect(),
                )
            }
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| sanitize_value(v, depth + 1)).collect())
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if is_forbidden_key(k) || k == METADATA_KEY {
                    continue;
                }
                let clean = if is_sensitive_key(k) {
                    Value::String(REDACTED.into())
                } else {
                    sanitize_value(v, depth + 1)
                };
                out.insert(k.clone(), clean);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{AgentId, NamespaceId};
    use serde_json::json;

    fn event() -> AuditEvent {
        let ns = NamespaceId::generate();
        AuditEvent::new(
            AuditKind::Mutation,
            "prn_x",
            "openclaw.agents.create",
            &ResourceRef::exact(ResourceKind::Agent, &ns, AgentId::generate()),
            AuditOutcome::Success,
        )
    }

    #[test]
    fn sensitive_keys_are_redacted_but_references_kept() {
        let e = event()
            .detail("password", "hunter2hunter2")
            .detail("serviceKeyId", "key_1")
            .detail("workspaceFileName", "USER.md")
            .detail("content", "my soul")
            .detail(
                "nested",
                json!({"apiKey": "x", "secretRef": {"id": "sec_1"}}),
            );
        assert_eq!(e.details["password"], REDACTED);
        assert_eq!(e.details["content"], REDACTED);
        assert_eq!(e.details["serviceKeyId"], "key_1");
        assert_eq!(e.details["workspaceFileName"], "USER.md");
        assert_eq!(e.details["nested"]["apiKey"], REDACTED);
        assert_eq!(e.details["nested"]["secretRef"]["id"], "sec_1");
    }

    #[test]
    fn secret_looking_values_are_redacted() {
        let e = event()
            .detail("note", "Bearer abcdefghijkl")
            .detail("other", "key occ_0123456789abcdef here")
            .detail("plain", "line\nbreak");
        assert_eq!(e.details["note"], REDACTED);
        assert_eq!(e.details["other"], REDACTED);
        assert_eq!(e.details["plain"], "line break");
    }

    #[test]
    fn metadata_key_is_reserved_and_depth_bounded() {
        let e = event()
            .detail(METADATA_KEY, "forged")
            .detail("__proto__", 1);
        assert!(e.details.is_empty());
        let mut deep = json!("leaf");
        for _ in 0..30 {
            deep = json!({ "a": deep });
        }
        let e = event().detail("deep", deep);
        assert!(e.details["deep"].to_string().contains(REDACTED));
        let e = event().reason_code("authorization denied");
        assert_eq!(e.details["reasonCode"], "AUTHORIZATION_DENIED");
        assert_eq!(
            e.details[METADATA_KEY]["reasonCode"],
            "AUTHORIZATION_DENIED"
        );
    }
}
