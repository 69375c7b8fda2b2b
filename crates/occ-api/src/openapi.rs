//! OpenAPI document pieces: envelopes and request bodies. Routes are registered through
//! `utoipa_axum`, so the served document lists exactly the routes the router serves.

use serde::Serialize;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// Response metadata.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `req_<uuid>`, also in the `x-request-id` header.
    pub request_id: String,
}

/// Success envelope.
#[derive(Serialize, ToSchema)]
pub struct Data<T> {
    /// The resource.
    pub data: T,
    /// Metadata.
    pub meta: Meta,
}

/// One offending location.
#[derive(Serialize, ToSchema)]
pub struct ErrorDetailDoc {
    /// RFC 6901 pointer.
    pub path: String,
    /// `REQUIRED` | `UNKNOWN_FIELD` | `INVALID_TYPE` | `INVALID_FORMAT` | `INVALID_VALUE` | `TOO_LONG` | `TOO_DEEP`.
    pub code: String,
}

/// The error object.
#[derive(Serialize, ToSchema)]
pub struct ErrorObject {
    /// API error code.
    pub code: String,
    /// Message (at most 256 characters).
    pub message: String,
    /// At most 32 details.
    pub details: Option<Vec<ErrorDetailDoc>>,
}

/// Error envelope.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
    /// Metadata.
    pub meta: Meta,
}

/// `POST /namespaces`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceCreateBody {
    /// 1..200 characters, no outer whitespace or control characters.
    pub name: String,
    /// An operator-prepared Kubernetes namespace to adopt instead of provisioning one
    /// (Kubernetes Compute only, else 409; needs `installation:administer`, else 403).
    pub existing_namespace: Option<String>,
}

/// `POST /namespaces/{namespaceId}/configurations`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationCreateBody {
    /// Always `agent`.
    pub kind: String,
    /// The native `openclaw.json` document. It must validate against the pinned OpenClaw
    /// runtime's own JSON Schema (what `occ runtime schema` prints) and occ's rules; every
    /// problem is a detail at its pointer under `/values`.
    #[schema(value_type = Object)]
    pub values: serde_json::Value,
    /// `ENV_NAME → {source:{kind:"secret", namespaceId, id}, delivery?:{type:"env"}}`, at most 64.
    #[schema(value_type = Option<Object>)]
    pub secret_bindings: Option<serde_json::Value>,
}

/// `PATCH /namespaces/{namespaceId}/configurations/{configurationId}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationUpdateBody {
    /// The whole new document, validated as on create.
    #[schema(value_type = Object)]
    pub values: serde_json::Value,
    /// Omitted keeps the bindings; `{}` clears them.
    #[schema(value_type = Option<Object>)]
    pub secret_bindings: Option<serde_json::Value>,
}

/// `POST /namespaces/{namespaceId}/secrets`.
#[derive(Serialize, ToSchema)]
pub struct SecretCreateBody {
    /// Unique per Namespace.
    pub name: String,
    /// Write-only value: non-empty UTF-8 without NUL, at most 65 536 bytes.
    pub value: String,
}

/// `PATCH /namespaces/{namespaceId}/secrets/{secretId}`.
#[derive(Serialize, ToSchema)]
pub struct SecretUpdateBody {
    /// The new value.
    pub value: String,
}

/// `POST /namespaces/{namespaceId}/service-accounts`.
#[derive(Serialize, ToSchema)]
pub struct ServiceAccountCreateBody {
    /// Unique per Namespace.
    pub name: String,
}

/// `PUT …/workspace/files/{name}`: exactly `{content}`.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceFileBody {
    /// At most 16 KiB of UTF-8, no NUL.
    pub content: String,
}

/// A workspace file as read.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceFileView {
    /// `AGENTS.md`, `SOUL.md`, `IDENTITY.md` or `USER.md`.
    pub name: String,
    /// The content.
    pub content: String,
}

/// A workspace file as written.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceFileWritten {
    /// The file.
    pub name: String,
    /// Bytes written (UTF-8).
    pub size: u64,
}

/// The stock workspace files of the pinned OpenClaw.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceDefaultsView {
    /// `workspaceDefaultsId`: lowercase hex SHA-256 of `[[name, text], …]`.
    pub id: String,
    /// File name → stock text.
    pub files: std::collections::BTreeMap<String, String>,
}

/// `POST /namespaces/{namespaceId}/agents`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentCreateBody {
    /// Unique per Namespace.
    pub name: String,
    /// A Configuration of this Namespace.
    pub configuration_id: String,
    /// `embedded` (default) | `dedicated`.
    pub execution_mode: Option<String>,
    /// A configured Backend, or null.
    pub backend_id: Option<String>,
    /// `{method:"runtime"}` | `{method:"api_key", source}` | `{method:"chatgpt_service_account", serviceAccountId}` | null.
    #[schema(value_type = Option<Object>)]
    pub harness_auth: Option<serde_json::Value>,
    /// Any of AGENTS.md, SOUL.md, IDENTITY.md, USER.md → content (≤ 16 KiB UTF-8, no NUL).
    #[schema(value_type = Option<Object>)]
    pub initial_workspace_files: Option<serde_json::Value>,
    /// The 64-hex defaults identity the form was rendered with.
    pub workspace_defaults_id: Option<String>,
}

/// `PATCH /namespaces/{namespaceId}/agents/{agentId}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentUpdateBody {
    /// Required.
    pub configuration_id: String,
    /// Omitted keeps.
    pub execution_mode: Option<String>,
    /// Omitted keeps; null clears.
    pub backend_id: Option<String>,
    /// Omitted keeps; null clears.
    #[schema(value_type = Option<Object>)]
    pub harness_auth: Option<serde_json::Value>,
}

/// One Role permission.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionDoc {
    /// create | read | update | delete | deploy | operate | administer | read_logs | use.
    pub action: String,
    /// A resource kind.
    pub resource_kind: String,
}

/// `POST /namespaces/{namespaceId}/iam/roles`.
#[derive(Serialize, ToSchema)]
pub struct RoleCreateBody {
    /// Optional display name.
    pub name: Option<String>,
    /// 1..64 distinct permissions.
    pub permissions: Vec<PermissionDoc>,
}

/// `POST /namespaces/{namespaceId}/iam/access-bindings`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingCreateBody {
    /// Always `identity`.
    pub subject_kind: String,
    /// The identity.
    pub subject_id: String,
    /// The Role.
    pub role_id: String,
    /// The exact target's kind.
    pub resource_kind: String,
    /// The exact target.
    pub resource_id: String,
}

/// `POST /api/auth/sign-in/email`.
#[derive(Serialize, ToSchema)]
pub struct SignInBody {
    /// Account email.
    pub email: String,
    /// 12..128 characters.
    pub password: String,
}

/// `POST /api/auth/accounts`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountCreateBody {
    /// Email.
    pub email: String,
    /// 12..128 characters.
    pub password: String,
    /// Display name.
    pub name: Option<String>,
    /// An Installation-scoped Role to bind.
    pub role_id: Option<String>,
}

/// `POST /api/auth/service-keys`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceKeyCreateBody {
    /// A non-Agent service principal.
    pub service_principal_id: String,
    /// Restrict the key to one Namespace.
    pub namespace_id: Option<String>,
    /// 1..32 characters.
    pub name: String,
    /// Seconds, 86400..31536000 (default 30 days).
    pub expires_in: Option<i64>,
}

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "serviceApiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
        components.add_security_scheme(
            "sessionCookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(
                crate::extract::SESSION_COOKIE,
            ))),
        );
    }
}

/// The document's header.
#[derive(OpenApi)]
#[openapi(
    info(title = "occ API", description = "Control plane for OpenClaw agents"),
    modifiers(&Security),
    security(("serviceApiKey" = []), ("sessionCookie" = []))
)]
pub struct ApiDoc;
