//! The value types of model discovery's fields: the provider, how its key authenticates, and
//! the key (write-only).

use occ_core::DetailCode;
use occ_core::validate::{Problems, expect_str};
use serde_json::Value;
use utoipa::openapi::schema::Schema;

use crate::body::{Field, enum_schema, string_schema};

/// A model provider whose models can be listed: `openai` or `anthropic`.
pub struct DiscoveryProvider(pub occ_controller::models::ModelProvider);

impl<Cx> Field<Cx> for DiscoveryProvider {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        use occ_controller::models::ModelProvider;
        let parsed = ModelProvider::parse(expect_str(value, path, problems)?).map(Self);
        if parsed.is_none() {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must be openai or anthropic",
            );
        }
        parsed
    }
    fn schema() -> Schema {
        enum_schema(["openai", "anthropic"])
    }
}

/// How a discovery key authenticates: `api_key` or `codex_pat`.
pub struct DiscoveryAuthMethod(pub occ_controller::models::DiscoveryAuth);

impl<Cx> Field<Cx> for DiscoveryAuthMethod {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        use occ_controller::models::DiscoveryAuth;
        match expect_str(value, path, problems)? {
            "api_key" => Some(Self(DiscoveryAuth::ApiKey)),
            "codex_pat" => Some(Self(DiscoveryAuth::CodexPat)),
            _ => {
                problems.push(
                    path,
                    DetailCode::InvalidValue,
                    "must be api_key or codex_pat",
                );
                None
            }
        }
    }
    fn schema() -> Schema {
        enum_schema(["api_key", "codex_pat"])
    }
}

/// Longest discovery key, in characters.
const DISCOVERY_KEY_MAX_CHARS: usize = 8192;

/// A provider key for model discovery: 1..8192 characters, not blank (write-only).
pub struct DiscoveryKey(pub String);

impl<Cx> Field<Cx> for DiscoveryKey {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        if s.chars().count() > DISCOVERY_KEY_MAX_CHARS {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 8192 characters)",
            );
            None
        } else if s.trim().is_empty() {
            problems.push(path, DetailCode::InvalidFormat, "must not be blank");
            None
        } else if s.chars().any(|c| c.is_control()) {
            // It becomes an HTTP header value.
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must not contain control characters",
            );
            None
        } else {
            Some(Self(s.to_owned()))
        }
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(DISCOVERY_KEY_MAX_CHARS), Some(r"\S"))
    }
}
