//! OpenAPI document pieces: envelopes, a few views and the response descriptions (request
//! bodies are declared with their parsers in [`crate::inputs`]). Routes are registered through
//! `utoipa_axum`, so the served document lists exactly the routes the router serves.

use serde::Serialize;
use utoipa::openapi::RefOr;
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

/// The Agent's answer to a chat turn.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatView {
    /// The conversation (send it again to continue).
    pub session_key: String,
    /// The reply's text.
    pub reply: String,
    /// `provider/model` that answered, when the gateway says.
    pub model: Option<String>,
    /// Token usage as the gateway reports it.
    #[schema(value_type = Option<Object>)]
    pub usage: Option<serde_json::Value>,
    /// How long the turn took, in milliseconds.
    pub duration_ms: u64,
}

/// The stock workspace files of the pinned OpenClaw.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceDefaultsView {
    /// `workspaceDefaultsId`: lowercase hex SHA-256 of `[[name, text], …]`.
    pub id: String,
    /// File name → stock text.
    pub files: std::collections::BTreeMap<String, String>,
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
                crate::state::SESSION_COOKIE,
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

/// What a status means on this API, for responses that do not say more themselves.
fn status_description(status: &str) -> &'static str {
    match status {
        "200" => "OK: `data` holds the result",
        "201" => "Created: `data` holds the new resource",
        "202" => "Accepted: the change is recorded and its work queued; `data` holds the resource",
        "204" => "Done; no body",
        "400" => {
            "Invalid request: a malformed path parameter, header or body; `details` name each \
             offending JSON pointer"
        }
        "401" => "No valid credential",
        "403" => "The caller may not do this, or the browser origin is not trusted",
        "404" => "Not found, or not visible to the caller",
        "409" => "Conflicts with the current state of the resource",
        "413" => "The request body is larger than this route accepts",
        "415" => "The request body is not application/json (UTF-8)",
        "429" => "Too many attempts; retry after `Retry-After` seconds",
        "503" => {
            "A dependency is unavailable, or the outcome is unknown (read the current state \
             before retrying)"
        }
        _ => "Response",
    }
}

/// Gives every response a description (OpenAPI 3.1 requires one; utoipa leaves it empty unless
/// the operation wrote one, and those are kept).
pub fn describe_responses(api: &mut utoipa::openapi::OpenApi) {
    for item in api.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in &mut operation.responses.responses {
                if let RefOr::T(response) = response
                    && response.description.is_empty()
                {
                    response.description = status_description(status).to_owned();
                }
            }
        }
    }
}
