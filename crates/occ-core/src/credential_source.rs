//! Credential sources: a Namespace's saved connections to a model provider (its type, its
//! non-secret settings such as the base URL, and the Secrets that hold its key), registered
//! with occ's built-in Credential Gateway. The gateway keeps no copy: a source names Secrets
//! the Secret Driver holds, and occ reads them when a revision that uses the source is
//! delivered, so a rotated key reaches the next delivery and nothing of a value is stored
//! with the source.
//!
//! What a type takes is the [`CATALOG`]: each type's config fields and Secret fields, each
//! required or optional.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{DetailCode, Error, ErrorCode};
use crate::inputs::parse_secret_ref;
use crate::resource::SecretRef;
use crate::validate::{Problems, child, expect_str, type_name};
use crate::{CredentialSourceId, Name, NamespaceId, Timestamp};

/// Most config entries a source may have.
pub const MAX_CONFIG_ENTRIES: usize = 32;
/// Most Secret fields a source may have.
pub const MAX_SECRET_FIELDS: usize = 16;
/// Longest config value, in characters.
pub const MAX_CONFIG_VALUE_CHARS: usize = 2048;

/// The id of occ's built-in Credential Gateway, frozen into what refers to a source.
pub const BUILT_IN_GATEWAY_ID: &str = "occ-secrets";

/// One field of a source type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// Its key (lowercase).
    pub name: &'static str,
    /// Whether a source of the type must give it.
    pub required: bool,
}

/// A type the built-in gateway offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceType {
    /// `type` on the wire.
    pub name: &'static str,
    /// Its non-secret settings (`config`).
    pub config: &'static [FieldSpec],
    /// Its Secret fields (`secrets`).
    pub secrets: &'static [FieldSpec],
}

/// The provider types' endpoint setting (`config.base_url`).
pub const BASE_URL_FIELD: &str = "base_url";
/// The provider types' key (`secrets.api_key`).
pub const API_KEY_FIELD: &str = "api_key";

const PROVIDER_CONFIG: &[FieldSpec] = &[FieldSpec {
    name: BASE_URL_FIELD,
    required: false,
}];
const PROVIDER_SECRETS: &[FieldSpec] = &[FieldSpec {
    name: API_KEY_FIELD,
    required: true,
}];

/// The types occ's built-in gateway offers: an OpenAI-compatible and an Anthropic provider,
/// each an API key and an optional base URL (the provider's public endpoint when absent).
pub const CATALOG: &[SourceType] = &[
    SourceType {
        name: "openai",
        config: PROVIDER_CONFIG,
        secrets: PROVIDER_SECRETS,
    },
    SourceType {
        name: "anthropic",
        config: PROVIDER_CONFIG,
        secrets: PROVIDER_SECRETS,
    },
];

/// The catalog's entry for `name`.
pub fn source_type(name: &str) -> Option<&'static SourceType> {
    CATALOG.iter().find(|t| t.name == name)
}

/// The lifecycle state of a source (`registering` and `deleting` are the reference's states
/// around a gateway that keeps copies; the built-in gateway registers and removes within the
/// request's own transaction, so a stored source is always `ready`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSourceState {
    /// Usable.
    Ready,
}

impl CredentialSourceState {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
        }
    }
}

/// A credential source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSource {
    /// `cs_…`
    pub id: CredentialSourceId,
    /// Its Namespace.
    pub namespace_id: NamespaceId,
    /// Unique in the Namespace.
    pub name: Name,
    /// A [`CATALOG`] type.
    pub source_type: String,
    /// Non-secret settings, by field.
    pub config: BTreeMap<String, String>,
    /// The Secrets holding its credential, by field.
    pub secrets: BTreeMap<String, SecretRef>,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When its Secrets were last replaced (or its registration).
    pub updated_at: Timestamp,
}

impl CredentialSource {
    /// Its state (see [`CredentialSourceState`]).
    pub fn state(&self) -> CredentialSourceState {
        CredentialSourceState::Ready
    }
}

/// Whether `s` is a well-formed type name (`^[a-z][a-z0-9-]{0,63}$`), offered or not.
pub fn is_type_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Checks a source's fields against its type in the [`CATALOG`], before anything is looked
/// up: a type the catalog lacks is a 409; a field the type does not have, or a required one
/// missing, is the reference's 404 (here naming the field); a config value the type cannot use
/// (a base URL that is not an absolute http(s) URL) is a 400 at its pointer.
pub fn check_fields(
    type_name: &str,
    config: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretRef>,
) -> Result<&'static SourceType, Error> {
    let Some(spec) = source_type(type_name) else {
        let offered: Vec<&str> = CATALOG.iter().map(|t| t.name).collect();
        return Err(Error::conflict(format!(
            "The credential source type {type_name} is not offered; the Credential Gateway offers {}",
            offered.join(", ")
        )));
    };
    for (what, given, fields) in [
        ("config", config.keys().collect::<Vec<_>>(), spec.config),
        ("secrets", secrets.keys().collect::<Vec<_>>(), spec.secrets),
    ] {
        if let Some(unknown) = given
            .iter()
            .find(|key| !fields.iter().any(|f| f.name == key.as_str()))
        {
            return Err(field_not_found(format!(
                "The credential source type {type_name} has no {what} field {unknown}"
            )));
        }
        if let Some(missing) = fields
            .iter()
            .find(|f| f.required && !given.iter().any(|key| key.as_str() == f.name))
        {
            return Err(field_not_found(format!(
                "The credential source type {type_name} requires the {what} field {}",
                missing.name
            )));
        }
    }
    if let Some(url) = config.get(BASE_URL_FIELD)
        && !crate::native::is_http_url(url)
    {
        return Err(Error::invalid_field(
            "/config/base_url",
            DetailCode::InvalidValue,
            "The request is invalid: config.base_url must be an absolute http(s) URL",
        ));
    }
    Ok(spec)
}

/// The entries of an object at `path` of at most `max` entries, each value handed to `each`
/// (with its pointer); `None` after any problem. Keys are not checked here: a key the type
/// does not have is the catalog's answer ([`check_fields`]).
fn parse_fields<T>(
    v: &Value,
    path: &str,
    max: usize,
    problems: &mut Problems,
    mut each: impl FnMut(&Value, &str, &mut Problems) -> Option<T>,
) -> Option<BTreeMap<String, T>> {
    let Some(map) = v.as_object() else {
        problems.push(
            path,
            DetailCode::InvalidType,
            format!("must be an object, not {}", type_name(v)),
        );
        return None;
    };
    if map.len() > max {
        problems.push(
            path,
            DetailCode::TooLong,
            format!("must have at most {max} entries"),
        );
        return None;
    }
    let mut failed = false;
    let mut out = BTreeMap::new();
    for (key, value) in map {
        let at = child(path, key);
        match each(value, &at, problems) {
            Some(parsed) => {
                out.insert(key.clone(), parsed);
            }
            None => failed = true,
        }
    }
    (!failed).then_some(out)
}

/// Parses `config`: at most [`MAX_CONFIG_ENTRIES`] string values of 1..[`MAX_CONFIG_VALUE_CHARS`]
/// characters without NUL.
pub fn parse_config(
    v: &Value,
    path: &str,
    problems: &mut Problems,
) -> Option<BTreeMap<String, String>> {
    parse_fields(
        v,
        path,
        MAX_CONFIG_ENTRIES,
        problems,
        |value, at, problems| {
            let s = expect_str(value, at, problems)?;
            let chars = s.chars().count();
            if chars == 0 || chars > MAX_CONFIG_VALUE_CHARS || s.contains('\0') {
                let code = if chars > MAX_CONFIG_VALUE_CHARS {
                    DetailCode::TooLong
                } else {
                    DetailCode::InvalidValue
                };
                problems.push(
                    at,
                    code,
                    format!("must have 1 to {MAX_CONFIG_VALUE_CHARS} characters without NUL"),
                );
                return None;
            }
            Some(s.to_owned())
        },
    )
}

/// Parses `secrets`: at most [`MAX_SECRET_FIELDS`] Secret references, each a Secret of
/// `namespace` (a source's Secrets never cross Namespaces).
pub fn parse_secrets(
    v: &Value,
    path: &str,
    namespace: &NamespaceId,
    problems: &mut Problems,
) -> Option<BTreeMap<String, SecretRef>> {
    parse_fields(
        v,
        path,
        MAX_SECRET_FIELDS,
        problems,
        |value, at, problems| {
            let secret = parse_secret_ref(value, at, problems)?;
            if &secret.namespace_id != namespace {
                problems.push(
                    child(at, "namespaceId"),
                    DetailCode::InvalidValue,
                    "Credential source Secrets cannot cross Namespaces",
                );
                return None;
            }
            Some(secret)
        },
    )
}

fn field_not_found(message: String) -> Error {
    Error::new(ErrorCode::NotFound, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SecretId;

    fn key() -> BTreeMap<String, SecretRef> {
        BTreeMap::from([(
            "api_key".to_owned(),
            SecretRef::new(NamespaceId::generate(), SecretId::generate()),
        )])
    }

    #[test]
    fn the_catalog_decides_types_and_fields() {
        let none = BTreeMap::new();
        assert_eq!(
            check_fields("openai", &none, &key()).unwrap().name,
            "openai"
        );
        let url = BTreeMap::from([("base_url".to_owned(), "http://127.0.0.1:9/v1".to_owned())]);
        assert!(check_fields("anthropic", &url, &key()).is_ok());

        let e = check_fields("vertex", &none, &key()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ResourceConflict);
        assert!(e.message().contains("openai, anthropic"), "{}", e.message());

        let e = check_fields("openai", &none, &BTreeMap::new()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound);
        assert!(
            e.message().contains("secrets field api_key"),
            "{}",
            e.message()
        );

        let extra = BTreeMap::from([("org".to_owned(), "x".to_owned())]);
        let e = check_fields("openai", &extra, &key()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound);
        assert!(e.message().contains("config field org"), "{}", e.message());

        let bad = BTreeMap::from([("base_url".to_owned(), "ftp://x".to_owned())]);
        let e = check_fields("openai", &bad, &key()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidRequest);
    }

    #[test]
    fn type_names_follow_the_pattern() {
        for ok in ["openai", "a", "x-1", &"a".repeat(64)] {
            assert!(is_type_name(ok), "{ok}");
        }
        for bad in ["", "1a", "Open", "a_b", &"a".repeat(65)] {
            assert!(!is_type_name(bad), "{bad}");
        }
    }
}
