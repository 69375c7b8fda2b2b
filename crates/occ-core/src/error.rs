//! The one error type that crosses the public boundary.
//!
//! Each [`Error`] carries an API [`ErrorCode`] (the closed set of spec/api.md §3.2), an external
//! message safe to show any caller, optional JSON-pointer [`ErrorDetail`]s, and an internal
//! context that is logged but never returned. The HTTP layer maps the code to a status in one
//! place ([`ErrorCode::http_status`]).

use std::fmt;

use serde::Serialize;

/// Longest external message, in characters.
pub const MESSAGE_MAX_CHARS: usize = 256;
/// Most details carried by one error.
pub const DETAILS_MAX: usize = 32;
/// Longest JSON pointer in a detail, in characters.
pub const DETAIL_PATH_MAX_CHARS: usize = 512;

/// API error codes (closed enum of the reference OpenAPI, restricted to what occ emits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// 400: malformed or invalid input.
    InvalidRequest,
    /// 401: missing or invalid credential.
    Unauthenticated,
    /// 403: authenticated but not allowed.
    Forbidden,
    /// 404: absent, or outside the caller's scope.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 409: the Installation is already bootstrapped.
    InstallationExists,
    /// 409: a state or uniqueness conflict.
    ResourceConflict,
    /// 409: the Agent is being deleted.
    AgentDeleting,
    /// 409: the Namespace is not `ready`.
    NamespaceNotReady,
    /// 409: the Namespace still holds resources.
    NamespaceNotEmpty,
    /// 413: the body is larger than the route allows.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 429: too many attempts.
    RateLimited,
    /// 500: an unmapped failure.
    InternalError,
    /// 501: not available in this deployment.
    NotImplemented,
    /// 503: the database, a Driver, IAM or audit is unavailable.
    DependencyUnavailable,
    /// 503: a write was dispatched and its outcome cannot be confirmed.
    UnknownOutcome,
    /// 400: a runtime log cursor that is not this caller's, view's or source's, or was altered.
    RuntimeLogsCursorInvalid,
    /// 400: a Pod that is not a current Pod of the revision and source.
    RuntimeLogsPodInvalid,
    /// 400: the revision has no such runtime log source.
    RuntimeLogsSourceUnavailable,
    /// 429: too many runtime log reads by this caller.
    RuntimeLogsRateLimited,
    /// 503: the cluster denied occ the log read.
    RuntimeLogsClusterRbac,
    /// 503: the runtime or cluster cannot be reached for its logs.
    RuntimeLogsUnavailable,
    /// 503: the view could not be audited, so nothing was read.
    RuntimeLogsAuditUnavailable,
    /// 504: the log read did not finish in time.
    RuntimeLogsTimeout,
    /// The Agent's model failed a chat turn (occ extension).
    ModelError,
    /// A chat turn did not finish before its deadline (occ extension).
    ChatTimeout,
    /// 400: the model provider refused the key given for model discovery.
    ModelDiscoveryCredentialsRejected,
    /// 429: the model provider is rate limiting discovery.
    ModelDiscoveryRateLimited,
    /// 503: the model provider could not be reached or failed.
    ModelDiscoveryUnavailable,
    /// 503: the model provider's answer was not a model list.
    ModelDiscoveryInvalidResponse,
}

impl ErrorCode {
    /// The wire form, e.g. `RESOURCE_CONFLICT`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::InstallationExists => "INSTALLATION_EXISTS",
            ErrorCode::ResourceConflict => "RESOURCE_CONFLICT",
            ErrorCode::AgentDeleting => "AGENT_DELETING",
            ErrorCode::NamespaceNotReady => "NAMESPACE_NOT_READY",
            ErrorCode::NamespaceNotEmpty => "NAMESPACE_NOT_EMPTY",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::NotImplemented => "NOT_IMPLEMENTED",
            ErrorCode::DependencyUnavailable => "DEPENDENCY_UNAVAILABLE",
            ErrorCode::UnknownOutcome => "UNKNOWN_OUTCOME",
            ErrorCode::RuntimeLogsCursorInvalid => "RUNTIME_LOGS_CURSOR_INVALID",
            ErrorCode::RuntimeLogsPodInvalid => "RUNTIME_LOGS_POD_INVALID",
            ErrorCode::RuntimeLogsSourceUnavailable => "RUNTIME_LOGS_SOURCE_UNAVAILABLE",
            ErrorCode::RuntimeLogsRateLimited => "RUNTIME_LOGS_RATE_LIMITED",
            ErrorCode::RuntimeLogsClusterRbac => "RUNTIME_LOGS_CLUSTER_RBAC",
            ErrorCode::RuntimeLogsUnavailable => "RUNTIME_LOGS_UNAVAILABLE",
            ErrorCode::RuntimeLogsAuditUnavailable => "RUNTIME_LOGS_AUDIT_UNAVAILABLE",
            ErrorCode::RuntimeLogsTimeout => "RUNTIME_LOGS_TIMEOUT",
            ErrorCode::ModelError => "MODEL_ERROR",
            ErrorCode::ChatTimeout => "CHAT_TIMEOUT",
            ErrorCode::ModelDiscoveryCredentialsRejected => "MODEL_DISCOVERY_CREDENTIALS_REJECTED",
            ErrorCode::ModelDiscoveryRateLimited => "MODEL_DISCOVERY_RATE_LIMITED",
            ErrorCode::ModelDiscoveryUnavailable => "MODEL_DISCOVERY_UNAVAILABLE",
            ErrorCode::ModelDiscoveryInvalidResponse => "MODEL_DISCOVERY_INVALID_RESPONSE",
        }
    }

    /// The HTTP status this code is answered with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::RuntimeLogsCursorInvalid
            | ErrorCode::RuntimeLogsPodInvalid
            | ErrorCode::RuntimeLogsSourceUnavailable
            | ErrorCode::ModelDiscoveryCredentialsRejected => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::InstallationExists
            | ErrorCode::ResourceConflict
            | ErrorCode::AgentDeleting
            | ErrorCode::NamespaceNotReady
            | ErrorCode::NamespaceNotEmpty => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::RateLimited
            | ErrorCode::RuntimeLogsRateLimited
            | ErrorCode::ModelDiscoveryRateLimited => 429,
            ErrorCode::InternalError => 500,
            ErrorCode::NotImplemented => 501,
            ErrorCode::DependencyUnavailable
            | ErrorCode::UnknownOutcome
            | ErrorCode::RuntimeLogsClusterRbac
            | ErrorCode::RuntimeLogsUnavailable
            | ErrorCode::RuntimeLogsAuditUnavailable
            | ErrorCode::ModelDiscoveryUnavailable
            | ErrorCode::ModelDiscoveryInvalidResponse => 503,
            ErrorCode::ModelError => 502,
            ErrorCode::RuntimeLogsTimeout | ErrorCode::ChatTimeout => 504,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-field detail codes (spec/api.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DetailCode {
    /// A required field is missing.
    Required,
    /// A field the schema does not know.
    UnknownField,
    /// The JSON type is wrong.
    InvalidType,
    /// A format or pattern does not match.
    InvalidFormat,
    /// Any other invalid value.
    InvalidValue,
    /// Longer than allowed.
    TooLong,
    /// Nested deeper than allowed.
    TooDeep,
}

/// One offending location in a request, as an RFC 6901 JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail {
    /// JSON pointer into the request (body, or `/<param>` for path parameters).
    pub path: String,
    /// What is wrong there.
    pub code: DetailCode,
}

/// The public error.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
    details: Vec<ErrorDetail>,
    internal: Option<String>,
    retry_after_secs: Option<u64>,
}

/// Result alias used across occ.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with a code and an external message (sanitized and capped at 256 characters).
    pub fn new(code: ErrorCode, message: impl AsRef<str>) -> Self {
        Self {
            code,
            message: sanitize_message(message.as_ref()),
            details: Vec::new(),
            internal: None,
            retry_after_secs: None,
        }
    }

    /// 400 `INVALID_REQUEST`.
    pub fn invalid_request(message: impl AsRef<str>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// 400 with one detail.
    pub fn invalid_field(
        path: impl Into<String>,
        code: DetailCode,
        message: impl AsRef<str>,
    ) -> Self {
        Self::invalid_request(message).with_detail(path, code)
    }

    /// 401 `UNAUTHENTICATED`.
    pub fn unauthenticated() -> Self {
        Self::new(ErrorCode::Unauthenticated, "Authentication is required")
    }

    /// 403 `FORBIDDEN` with the generic message.
    pub fn forbidden() -> Self {
        Self::new(
            ErrorCode::Forbidden,
            "The caller is not allowed to perform this operation",
        )
    }

    /// 404 `NOT_FOUND` with the one generic message, so scope is never leaked.
    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "The requested resource was not found")
    }

    /// 409 `RESOURCE_CONFLICT`.
    pub fn conflict(message: impl AsRef<str>) -> Self {
        Self::new(ErrorCode::ResourceConflict, message)
    }

    /// 503 `DEPENDENCY_UNAVAILABLE`; the internal context is logged, never shown.
    pub fn unavailable(internal: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::DependencyUnavailable,
            "A required dependency is unavailable; try again later",
        )
        .with_internal(internal)
    }

    /// 503 `DEPENDENCY_UNAVAILABLE` for an unknown commit outcome: the caller must inspect
    /// state rather than retry.
    pub fn commit_outcome_unknown(internal: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::DependencyUnavailable,
            "The outcome of this request is unknown; inspect the current state before retrying",
        )
        .with_internal(internal)
    }

    /// 500 `INTERNAL_ERROR`; the internal context is logged, never shown.
    pub fn internal(internal: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, "An internal error occurred").with_internal(internal)
    }

    /// Adds a detail (at most [`DETAILS_MAX`]; paths capped at [`DETAIL_PATH_MAX_CHARS`]).
    pub fn with_detail(mut self, path: impl Into<String>, code: DetailCode) -> Self {
        if self.details.len() < DETAILS_MAX {
            let path: String = path.into().chars().take(DETAIL_PATH_MAX_CHARS).collect();
            self.details.push(ErrorDetail { path, code });
        }
        self
    }

    /// Attaches internal context (never returned to callers).
    pub fn with_internal(mut self, internal: impl Into<String>) -> Self {
        self.internal = Some(internal.into());
        self
    }

    /// Sets a `Retry-After` hint in seconds.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_secs = Some(seconds);
        self
    }

    /// The API code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }
    /// The external message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The details.
    pub fn details(&self) -> &[ErrorDetail] {
        &self.details
    }
    /// The internal context, for logs.
    pub fn internal_context(&self) -> Option<&str> {
        self.internal.as_deref()
    }
    /// The `Retry-After` hint.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("details", &self.details)
            .field("internal", &self.internal)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// Replaces control and format characters with a space and caps the message at 256 characters,
/// ending a cut message with "…".
pub fn sanitize_message(message: &str) -> String {
    let cleaned: Vec<char> = message
        .chars()
        .map(|c| {
            if c.is_control() || is_format_char(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    if cleaned.len() <= MESSAGE_MAX_CHARS {
        cleaned.into_iter().collect()
    } else {
        let mut out: String = cleaned[..MESSAGE_MAX_CHARS - 1].iter().collect();
        out.push('…');
        out
    }
}

/// Unicode "format" characters (bidi controls, zero-width joiners…) that can disguise text.
fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Escapes one JSON-pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn pointer_token(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_capped_and_cleaned() {
        let e = Error::conflict("a\u{0}b\u{202e}c");
        assert_eq!(e.message(), "a b c");
        let long = "x".repeat(300);
        let e = Error::conflict(&long);
        assert_eq!(e.message().chars().count(), 256);
        assert!(e.message().ends_with('…'));
    }

    #[test]
    fn details_are_bounded() {
        let mut e = Error::invalid_request("bad");
        for i in 0..40 {
            e = e.with_detail(format!("/{i}"), DetailCode::InvalidValue);
        }
        assert_eq!(e.details().len(), DETAILS_MAX);
    }

    #[test]
    fn internal_context_is_not_displayed() {
        let e = Error::unavailable("password=hunter2 connection refused");
        assert!(!e.to_string().contains("hunter2"));
        assert_eq!(e.code().http_status(), 503);
    }

    #[test]
    fn pointer_tokens_escape() {
        assert_eq!(pointer_token("a/b~c"), "a~1b~0c");
    }
}
