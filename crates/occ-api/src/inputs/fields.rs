//! The value types of request-body fields, each with its rule and its schema side by side
//! (names, ids, enums, patterns, lengths, the closed objects shared by several bodies).

use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::inputs::{
    SECRET_BINDING_KEY_MAX, SECRET_BINDINGS_MAX, SECRET_VALUE_MAX_BYTES, check_secret_value,
    check_workspace_content, parse_harness_auth, parse_initial_workspace_files,
    parse_secret_bindings,
};
use occ_core::resource::{
    ExecutionMode, HarnessAuth, SecretBindings, ServiceAccountCredentialKind,
    WORKSPACE_FILE_MAX_BYTES, WorkspaceFileName, WorkspaceFiles,
};
use occ_core::validate::{Problems, expect_id, expect_name, expect_str, index, type_name};
use occ_core::{ConfigurationId, DetailCode, IamId, Name, NamespaceId, RequestId};
use serde_json::{Map, Value};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};

use super::PermissionGrant;
use crate::body::{
    Field, Presence, Property, array_schema, enum_schema, object_schema, string_schema,
};

/// Names: no outer whitespace, no control characters (C0, DEL, C1).
pub(super) const NAME_PATTERN: &str =
    r"^(?!\s)(?![\s\S]*\s$)(?![\s\S]*[\u0000-\u001f\u007f-\u009f])[\s\S]+$";
/// No whitespace and no control characters.
const NO_SPACE_PATTERN: &str = r"^[^\s\u0000-\u001f\u007f-\u009f]+$";
/// No NUL.
const NO_NUL_PATTERN: &str = r"^[^\u0000]*$";

impl<Cx> Field<Cx> for Name {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        expect_name(value, path, problems)
    }
    fn schema() -> Schema {
        string_schema(
            Some(1),
            Some(occ_core::name::NAME_MAX_CHARS),
            Some(NAME_PATTERN),
        )
    }
}

fn id_pattern(prefix: &str) -> String {
    format!(
        "^{prefix}_[0-9a-f]{{8}}-[0-9a-f]{{4}}-4[0-9a-f]{{3}}-[89ab][0-9a-f]{{3}}-[0-9a-f]{{12}}$"
    )
}

macro_rules! id_fields {
    ($($id:ty),+) => {$(
        impl<Cx> Field<Cx> for $id {
            fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
                expect_id(value, path, <$id>::PREFIX, problems)
            }
            fn schema() -> Schema {
                string_schema(None, None, Some(&id_pattern(<$id>::PREFIX)))
            }
        }
    )+};
}

id_fields!(ConfigurationId, NamespaceId, RequestId);

/// IAM ids (identities, Roles, keys): 1..200 characters without whitespace.
impl<Cx> Field<Cx> for IamId {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        match s.parse() {
            Ok(id) => Some(id),
            Err(_) => {
                let code = if s.chars().count() > occ_core::id::IAM_ID_MAX_CHARS {
                    DetailCode::TooLong
                } else {
                    DetailCode::InvalidFormat
                };
                problems.push(
                    path,
                    code,
                    "must have 1 to 200 characters without whitespace",
                );
                None
            }
        }
    }
    fn schema() -> Schema {
        string_schema(
            Some(1),
            Some(occ_core::id::IAM_ID_MAX_CHARS),
            Some(NO_SPACE_PATTERN),
        )
    }
}

impl<Cx> Field<Cx> for ExecutionMode {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let mode = ExecutionMode::parse(expect_str(value, path, problems)?);
        if mode.is_none() {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must be \"embedded\" or \"dedicated\"",
            );
        }
        mode
    }
    fn schema() -> Schema {
        enum_schema([ExecutionMode::Embedded, ExecutionMode::Dedicated].map(ExecutionMode::as_str))
    }
}

impl<Cx> Field<Cx> for Action {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let action = expect_str(value, path, problems)?.parse().ok();
        if action.is_none() {
            problems.push(path, DetailCode::InvalidValue, "is not a known action");
        }
        action
    }
    fn schema() -> Schema {
        enum_schema(Action::ALL.map(Action::as_str))
    }
}

impl<Cx> Field<Cx> for ResourceKind {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let kind = expect_str(value, path, problems)?.parse().ok();
        if kind.is_none() {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "is not a known resource kind",
            );
        }
        kind
    }
    fn schema() -> Schema {
        enum_schema(ResourceKind::ALL.map(ResourceKind::as_str))
    }
}

/// A property of one of the closed objects below.
fn property(name: &'static str, presence: Presence, schema: Schema) -> Property {
    Property {
        name,
        doc: "",
        presence,
        schema,
    }
}

/// `{kind:"secret", namespaceId, id}`.
fn secret_ref_schema() -> Schema {
    object_schema(
        "SecretRef",
        "A Secret of this Namespace.",
        vec![
            property("kind", Presence::Required, enum_schema(["secret"])),
            property(
                "namespaceId",
                Presence::Required,
                <NamespaceId as Field>::schema(),
            ),
            property(
                "id",
                Presence::Required,
                string_schema(None, None, Some(&id_pattern(occ_core::SecretId::PREFIX))),
            ),
        ],
    )
}

/// `ENV_NAME → {source:{kind:"secret", namespaceId, id}, delivery?:{type:"env"}}`; sources are
/// Secrets of the path's Namespace.
impl Field<NamespaceId> for SecretBindings {
    fn parse(value: &Value, path: &str, ns: &NamespaceId, problems: &mut Problems) -> Option<Self> {
        parse_secret_bindings(value, path, ns, problems)
    }
    fn schema() -> Schema {
        let delivery = object_schema(
            "SecretDelivery",
            "",
            vec![property("type", Presence::Required, enum_schema(["env"]))],
        );
        let binding = object_schema(
            "SecretBinding",
            "",
            vec![
                property("source", Presence::Required, secret_ref_schema()),
                property("delivery", Presence::Optional, delivery),
            ],
        );
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .max_properties(Some(SECRET_BINDINGS_MAX))
                .property_names(Some(string_schema(
                    None,
                    Some(SECRET_BINDING_KEY_MAX),
                    Some("^[A-Z][A-Z0-9_]{0,127}$"),
                )))
                .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(binding))))
                .build(),
        )
    }
}

/// `{method:"runtime"}` | `{method:"api_key"|"codex_pat", source}` |
/// `{method:"chatgpt_service_account", serviceAccountId}`.
impl Field<NamespaceId> for HarnessAuth {
    fn parse(value: &Value, path: &str, ns: &NamespaceId, problems: &mut Problems) -> Option<Self> {
        // `null` never gets here (the body's presence rule owns it), so this is never `Some(None)`
        parse_harness_auth(value, path, ns, problems).flatten()
    }
    fn schema() -> Schema {
        let method = |name: &str| property("method", Presence::Required, enum_schema([name]));
        let service_account = string_schema(
            None,
            None,
            Some(&id_pattern(occ_core::ServiceAccountId::PREFIX)),
        );
        Schema::AnyOf(
            utoipa::openapi::schema::AnyOfBuilder::new()
                .item(object_schema(
                    "HarnessAuthRuntime",
                    "",
                    vec![method("runtime")],
                ))
                .item(object_schema(
                    "HarnessAuthApiKey",
                    "",
                    vec![
                        method("api_key"),
                        property("source", Presence::Required, secret_ref_schema()),
                    ],
                ))
                .item(object_schema(
                    "HarnessAuthCodexPat",
                    "",
                    vec![
                        method("codex_pat"),
                        property("source", Presence::Required, secret_ref_schema()),
                    ],
                ))
                .item(object_schema(
                    "HarnessAuthChatgptServiceAccount",
                    "",
                    vec![
                        method("chatgpt_service_account"),
                        property("serviceAccountId", Presence::Required, service_account),
                    ],
                ))
                .build(),
        )
    }
}

fn workspace_content_schema() -> Schema {
    string_schema(None, Some(WORKSPACE_FILE_MAX_BYTES), Some(NO_NUL_PATTERN))
}

/// Initial workspace files: the four names → content; `{}` is an empty map.
impl<Cx> Field<Cx> for WorkspaceFiles {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        parse_initial_workspace_files(value, path, problems).map(Option::unwrap_or_default)
    }
    fn schema() -> Schema {
        object_schema(
            "WorkspaceFiles",
            "",
            WorkspaceFileName::ALL
                .into_iter()
                .map(|name| {
                    property(
                        name.as_str(),
                        Presence::Optional,
                        workspace_content_schema(),
                    )
                })
                .collect(),
        )
    }
}

/// A native `openclaw.json` document, validated by `occ_core::native`.
pub struct OpenclawDocument(pub Map<String, Value>);

impl<Cx> Field<Cx> for OpenclawDocument {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        occ_core::native::validate_document(value, path, problems)
            .cloned()
            .map(OpenclawDocument)
    }
    fn schema() -> Schema {
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(true)))
                .build(),
        )
    }
}

/// A Kubernetes namespace name (RFC 1123 label).
pub struct KubernetesNamespaceName(pub String);

impl<Cx> Field<Cx> for KubernetesNamespaceName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let ok = (1..=63).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must be a Kubernetes namespace name",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(63), Some("^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$"))
    }
}

/// The name of a Secret a native ServiceAccount credential names (a DNS-1123 subdomain).
pub struct CredentialSecretName(pub String);

impl<Cx> Field<Cx> for CredentialSecretName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        let ok = (1..=253).contains(&s.len()) && s.split('.').all(label_ok);
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must be a Secret name (lowercase DNS subdomain, at most 253 characters)",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(
            None,
            Some(253),
            Some("^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:[.][a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$"),
        )
    }
}

/// A key within a Secret (`[-._a-zA-Z0-9]+`, not `.` or `..`).
pub struct CredentialSecretKey(pub String);

impl<Cx> Field<Cx> for CredentialSecretKey {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let ok = (1..=253).contains(&s.len())
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must be a Secret key ([-._a-zA-Z0-9], at most 253 characters, not . or ..)",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(None, Some(253), Some("^(?![.]{1,2}$)[-._a-zA-Z0-9]+$"))
    }
}

/// The kind of a native ServiceAccount credential reference: `api_key` | `oauth_access_token`
/// (an `access_token` is only ever issued by a Backend).
pub struct ReferenceCredentialKind(pub ServiceAccountCredentialKind);

impl<Cx> Field<Cx> for ReferenceCredentialKind {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        match expect_str(value, path, problems)? {
            "api_key" => Some(Self(ServiceAccountCredentialKind::ApiKey)),
            "oauth_access_token" => Some(Self(ServiceAccountCredentialKind::OauthAccessToken)),
            _ => {
                problems.push(
                    path,
                    DetailCode::InvalidValue,
                    "must be api_key or oauth_access_token",
                );
                None
            }
        }
    }
    fn schema() -> Schema {
        enum_schema(["api_key", "oauth_access_token"])
    }
}

/// A Secret value (write-only; never printed).
pub struct SecretValue(pub String);

impl<Cx> Field<Cx> for SecretValue {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        check_secret_value(s, path, problems).then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(SECRET_VALUE_MAX_BYTES), Some(NO_NUL_PATTERN))
    }
}

/// A live workspace file's content.
pub struct WorkspaceContent(pub String);

impl<Cx> Field<Cx> for WorkspaceContent {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        check_workspace_content(s, path, problems).then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        workspace_content_schema()
    }
}

/// The SHA-256 identity of the stock workspace files.
pub struct WorkspaceDefaultsId(pub String);

impl<Cx> Field<Cx> for WorkspaceDefaultsId {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let ok = s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must be 64 lowercase hexadecimal characters",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(None, None, Some("^[0-9a-f]{64}$"))
    }
}

/// The exact target of an AccessBinding: 1..200 characters without whitespace.
pub struct ResourceId(pub String);

impl<Cx> Field<Cx> for ResourceId {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let ok = (1..=200).contains(&s.chars().count())
            && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must have 1 to 200 characters without whitespace",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(200), Some(NO_SPACE_PATTERN))
    }
}

/// A runtime role's name: 1..128 characters, no control characters, not starting or ending
/// with whitespace (whether the runtime offers it is decided later).
pub struct RuntimeRoleName(pub String);

impl<Cx> Field<Cx> for RuntimeRoleName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let ok = (1..=128).contains(&s.chars().count())
            && !s.chars().any(char::is_control)
            && !s.starts_with(char::is_whitespace)
            && !s.ends_with(char::is_whitespace);
        if !ok {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must have 1 to 128 characters, no control characters and no surrounding whitespace",
            );
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(128), Some(r"^\S(?:.*\S)?$"))
    }
}

/// A Role's permissions: 1..64 `{action, resourceKind}` objects.
pub struct Permissions(pub Vec<Permission>);

const PERMISSIONS_MAX: usize = 64;

impl<Cx> Field<Cx> for Permissions {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        match value {
            Value::Array(items) if (1..=PERMISSIONS_MAX).contains(&items.len()) => {
                // every item is read (and its problems reported) before any is dropped
                let grants: Vec<Option<PermissionGrant>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        <PermissionGrant as Field>::parse(item, &index(path, i), &(), problems)
                    })
                    .collect();
                grants
                    .into_iter()
                    .map(|g| g.map(|g| Permission::new(g.action, g.resource_kind)))
                    .collect::<Option<Vec<_>>>()
                    .map(Self)
            }
            Value::Array(_) => {
                problems.push(
                    path,
                    DetailCode::InvalidValue,
                    "must hold 1 to 64 permissions",
                );
                None
            }
            other => {
                problems.push(
                    path,
                    DetailCode::InvalidType,
                    format!("must be an array, not {}", type_name(other)),
                );
                None
            }
        }
    }
    fn schema() -> Schema {
        array_schema(<PermissionGrant as Field>::schema(), 1, PERMISSIONS_MAX)
    }
}

/// A string field that takes exactly one value.
macro_rules! literal_field {
    ($(#[doc = $doc:literal])* $name:ident = $value:literal) => {
        $(#[doc = $doc])*
        pub struct $name;

        impl<Cx> Field<Cx> for $name {
            fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
                if expect_str(value, path, problems)? == $value {
                    Some($name)
                } else {
                    problems.push(path, DetailCode::InvalidValue, concat!("must be \"", $value, "\""));
                    None
                }
            }
            fn schema() -> Schema {
                enum_schema([$value])
            }
        }
    };
}

literal_field!(
    /// `"agent"`, the only Configuration kind.
    AgentKind = "agent"
);
literal_field!(
    /// `"identity"`, the only AccessBinding subject kind.
    IdentityKind = "identity"
);

/// Longest chat message, in bytes of UTF-8.
pub const CHAT_MESSAGE_MAX_BYTES: usize = 16 * 1024;

/// A chat message: 1..16 KiB of UTF-8, not blank, no NUL.
pub struct ChatMessage(pub String);

impl<Cx> Field<Cx> for ChatMessage {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        if s.len() > CHAT_MESSAGE_MAX_BYTES {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 16384 bytes of UTF-8)",
            );
            None
        } else if s.trim().is_empty() {
            problems.push(path, DetailCode::InvalidFormat, "must not be blank");
            None
        } else if s.contains('\0') {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must not contain NUL characters",
            );
            None
        } else {
            Some(Self(s.to_owned()))
        }
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(16384), None)
    }
}

/// A chat session key: 1..64 characters of lowercase letters, digits, `-` and `_`, starting
/// with a letter or digit; not one of the gateway's reserved names.
pub struct ChatSessionKey(pub String);

/// Session names the gateway gives its own meaning.
const RESERVED_SESSION_KEYS: [&str; 3] = ["main", "global", "unknown"];

impl<Cx> Field<Cx> for ChatSessionKey {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let well_formed = (1..=64).contains(&s.len())
            && s.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !well_formed {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                "must be 1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit",
            );
            None
        } else if RESERVED_SESSION_KEYS.contains(&s) {
            problems.push(path, DetailCode::InvalidValue, "is reserved by the gateway");
            None
        } else {
            Some(Self(s.to_owned()))
        }
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(64), Some("^[a-z0-9][a-z0-9_-]{0,63}$"))
    }
}

/// A Preset's template (`occ_core::preset`): `{variables?, agent?, configuration?}`, admitted
/// for the path's Namespace.
pub struct PresetTemplate(pub Value);

impl Field<NamespaceId> for PresetTemplate {
    fn parse(value: &Value, _: &str, ns: &NamespaceId, problems: &mut Problems) -> Option<Self> {
        occ_core::preset::parse_template(value, ns, problems).map(PresetTemplate)
    }
    fn schema() -> Schema {
        let free_form = || {
            Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(true)))
                    .build(),
            )
        };
        object_schema(
            "PresetTemplate",
            "Variables (`{{ vars.NAME }}` in any string), a new Agent's launch fields and a native Configuration with its Secret bindings.",
            vec![
                property("variables", Presence::Optional, free_form()),
                property("agent", Presence::Optional, free_form()),
                property("configuration", Presence::Optional, free_form()),
            ],
        )
    }
}

/// A credential source's `type`: `^[a-z][a-z0-9-]{0,63}$` (whether the catalog offers it is
/// the operation's 409).
#[derive(Debug, Clone)]
pub struct SourceTypeName(pub String);

impl<Cx> Field<Cx> for SourceTypeName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        if !occ_core::credential_source::is_type_name(s) {
            let code = if s.len() > 64 {
                DetailCode::TooLong
            } else {
                DetailCode::InvalidFormat
            };
            problems.push(
                path,
                code,
                "must be a lowercase letter, then at most 63 lowercase letters, digits or dashes",
            );
            return None;
        }
        Some(Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(64), Some("^[a-z][a-z0-9-]{0,63}$"))
    }
}

/// A credential source's `config`: field → a non-empty string, at most 32.
#[derive(Debug, Clone, Default)]
pub struct SourceConfig(pub std::collections::BTreeMap<String, String>);

impl<Cx> Field<Cx> for SourceConfig {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        occ_core::credential_source::parse_config(value, path, problems).map(Self)
    }
    fn schema() -> Schema {
        use occ_core::credential_source::{MAX_CONFIG_ENTRIES, MAX_CONFIG_VALUE_CHARS};
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .max_properties(Some(MAX_CONFIG_ENTRIES))
                .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(string_schema(
                    Some(1),
                    Some(MAX_CONFIG_VALUE_CHARS),
                    Some(NO_NUL_PATTERN),
                )))))
                .build(),
        )
    }
}

/// A credential source's `secrets`: field → a Secret of this Namespace, at most 16.
#[derive(Debug, Clone, Default)]
pub struct SourceSecrets(pub std::collections::BTreeMap<String, occ_core::resource::SecretRef>);

impl Field<NamespaceId> for SourceSecrets {
    fn parse(value: &Value, path: &str, ns: &NamespaceId, problems: &mut Problems) -> Option<Self> {
        occ_core::credential_source::parse_secrets(value, path, ns, problems).map(Self)
    }
    fn schema() -> Schema {
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .max_properties(Some(occ_core::credential_source::MAX_SECRET_FIELDS))
                .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(
                    secret_ref_schema(),
                ))))
                .build(),
        )
    }
}
