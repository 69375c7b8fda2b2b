//! The one error type of the gateway client, and the mapping of the gateway's error shapes
//! (`{code, message, details?, retryable?, retryAfterMs?}`) into it.
//!
//! The mapping branches on `code`, `details.code` and `details.type`, never on `message`
//! (the message is only carried along, bounded, for humans).

use std::time::Duration;

use serde_json::Value;

/// Delay before retrying an `UNAVAILABLE` answer that carries no `retryAfterMs`.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(250);
/// Longest `retryAfterMs` honoured; a larger value is clamped.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Longest gateway message kept in an error.
const MAX_MESSAGE_CHARS: usize = 512;

/// Everything that can go wrong talking to a gateway.
///
/// No variant ever carries the gateway token: messages that come from the gateway are
/// scrubbed of it before they are stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The gateway is up but not serving yet (`UNAVAILABLE`, `retryable: true`, e.g.
    /// `startup-sidecars`), or it closed the connection with 1013 (try again later) or 1012
    /// (restart/shutdown). Retry after `retry_after`.
    #[error("gateway unavailable: {message} (retry after {} ms)", retry_after.as_millis())]
    Unavailable {
        /// How long to wait before the next attempt.
        retry_after: Duration,
        /// What the gateway said.
        message: String,
    },
    /// No usable connection: TCP connect refused or reset, WebSocket handshake failure, or the
    /// connection closed unexpectedly.
    #[error("gateway unreachable: {0}")]
    Unreachable(String),
    /// The deadline passed before the gateway answered.
    #[error("gateway did not answer before the deadline")]
    Timeout,
    /// The gateway refused the credentials (token mismatch, `NOT_PAIRED`, `AUTH_*`), or granted
    /// another role than `operator`.
    #[error("gateway refused the credentials: {0}")]
    Unauthorized(String),
    /// `hello-ok` granted fewer scopes than required, or a call was refused with
    /// `FORBIDDEN`/`MISSING_SCOPE`.
    #[error("gateway did not grant a required scope: {0}")]
    MissingScope(String),
    /// `agents.files.set` with an `expectedHash` that no longer matches the file
    /// (`details.type: "agent_file_conflict"`). `current_hash` is the file's hash now (empty when
    /// the gateway did not say, e.g. the file is missing).
    #[error("workspace file changed since it was read (current hash {current_hash:?})")]
    Conflict {
        /// The file's current hash (lowercase hex SHA-256), as the gateway reported it.
        current_hash: String,
    },
    /// The gateway refused the request itself (`INVALID_REQUEST`): bad params, unknown agent,
    /// unsupported file name, unknown method.
    #[error("gateway refused the request: {0}")]
    InvalidRequest(String),
    /// Malformed frames, protocol version mismatch, unexpected shapes or error codes.
    #[error("gateway protocol error: {0}")]
    Protocol(String),
}

impl GatewayError {
    /// Whether retrying the same operation later may succeed: [`Unavailable`],
    /// [`Unreachable`] and [`Timeout`].
    ///
    /// [`Unavailable`]: GatewayError::Unavailable
    /// [`Unreachable`]: GatewayError::Unreachable
    /// [`Timeout`]: GatewayError::Timeout
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            GatewayError::Unavailable { .. } | GatewayError::Unreachable(_) | GatewayError::Timeout
        )
    }

    /// The delay the gateway asked for ([`GatewayError::Unavailable`] only).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GatewayError::Unavailable { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// Replaces every occurrence of `secret` in `text` and bounds the length.
pub(crate) fn scrub(text: &str, secret: &str) -> String {
    let text = if secret.is_empty() {
        text.to_owned()
    } else {
        text.replace(secret, "<redacted>")
    };
    if text.chars().count() > MAX_MESSAGE_CHARS {
        let mut cut: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        text
    }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// Maps the `error` object of a `res` frame with `ok: false`.
pub(crate) fn from_error_shape(error: &Value, secret: &str) -> GatewayError {
    let code = str_at(error, "/code").unwrap_or("");
    let detail_code = str_at(error, "/details/code").unwrap_or("");
    let detail_type = str_at(error, "/details/type").unwrap_or("");
    let message = scrub(str_at(error, "/message").unwrap_or("(no message)"), secret);
    let described = if detail_code.is_empty() {
        format!("{code}: {message}")
    } else {
        format!("{code}/{detail_code}: {message}")
    };
    let retryable = error
        .get("retryable")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    if code == "UNAVAILABLE" || retryable {
        let retry_after = error
            .get("retryAfterMs")
            .and_then(Value::as_u64)
            .map(|ms| Duration::from_millis(ms).min(MAX_RETRY_AFTER))
            .unwrap_or(DEFAULT_RETRY_AFTER);
        let reason = str_at(error, "/details/reason")
            .map(|r| format!(" ({})", scrub(r, secret)))
            .unwrap_or_default();
        return GatewayError::Unavailable {
            retry_after,
            message: format!("{message}{reason}"),
        };
    }
    if detail_type == "agent_file_conflict" {
        return GatewayError::Conflict {
            current_hash: str_at(error, "/details/currentHash")
                .unwrap_or("")
                .to_owned(),
        };
    }
    if detail_code == "MISSING_SCOPE" {
        let missing = str_at(error, "/details/missingScope").unwrap_or("");
        return GatewayError::MissingScope(if missing.is_empty() {
            described
        } else {
            format!("{missing} ({described})")
        });
    }
    if code == "NOT_PAIRED"
        || code.starts_with("AUTH_")
        || code == "UNAUTHORIZED"
        || code == "FORBIDDEN"
        || detail_code.starts_with("AUTH_")
        || detail_code == "DEVICE_IDENTITY_REQUIRED"
    {
        return GatewayError::Unauthorized(described);
    }
    if detail_code == "PROTOCOL_MISMATCH" {
        return GatewayError::Protocol(described);
    }
    if code == "INVALID_REQUEST" || code == "NOT_FOUND" {
        return GatewayError::InvalidRequest(described);
    }
    GatewayError::Protocol(format!("unexpected gateway error {described}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn maps_the_observed_error_shapes() {
        let startup = json!({"code":"UNAVAILABLE","message":"gateway starting; retry shortly",
            "retryable":true,"retryAfterMs":500,"details":{"reason":"startup-sidecars"}});
        assert_eq!(
            from_error_shape(&startup, "tok"),
            GatewayError::Unavailable {
                retry_after: Duration::from_millis(500),
                message: "gateway starting; retry shortly (startup-sidecars)".into()
            }
        );
        let no_delay = json!({"code":"UNAVAILABLE","message":"busy"});
        assert_eq!(
            from_error_shape(&no_delay, "tok").retry_after(),
            Some(DEFAULT_RETRY_AFTER)
        );
        let huge = json!({"code":"UNAVAILABLE","message":"x","retryAfterMs": 9_000_000u64});
        assert_eq!(
            from_error_shape(&huge, "tok").retry_after(),
            Some(MAX_RETRY_AFTER)
        );

        let mismatch = json!({"code":"INVALID_REQUEST",
            "message":"unauthorized: gateway token mismatch (provide gateway auth token)",
            "details":{"code":"AUTH_TOKEN_MISMATCH","authReason":"token_mismatch"}});
        assert!(matches!(
            from_error_shape(&mismatch, "tok"),
            GatewayError::Unauthorized(m) if m.contains("AUTH_TOKEN_MISMATCH")
        ));
        let not_paired = json!({"code":"NOT_PAIRED","message":"device identity required",
            "details":{"code":"DEVICE_IDENTITY_REQUIRED"}});
        assert!(matches!(
            from_error_shape(&not_paired, "tok"),
            GatewayError::Unauthorized(_)
        ));

        let scope = json!({"code":"FORBIDDEN","message":"missing scope: operator.admin",
            "details":{"code":"MISSING_SCOPE","missingScope":"operator.admin","requiredScopes":["operator.admin"]}});
        assert!(matches!(
            from_error_shape(&scope, "tok"),
            GatewayError::MissingScope(m) if m.starts_with("operator.admin")
        ));

        let conflict = json!({"code":"INVALID_REQUEST","message":"agent file \"USER.md\" changed since it was read",
            "details":{"type":"agent_file_conflict","name":"USER.md","currentHash":"ab".repeat(32)}});
        assert_eq!(
            from_error_shape(&conflict, "tok"),
            GatewayError::Conflict {
                current_hash: "ab".repeat(32)
            }
        );

        let protocol = json!({"code":"INVALID_REQUEST","message":"protocol mismatch",
            "details":{"code":"PROTOCOL_MISMATCH","expectedProtocol":4}});
        assert!(matches!(
            from_error_shape(&protocol, "tok"),
            GatewayError::Protocol(_)
        ));

        let unsupported =
            json!({"code":"INVALID_REQUEST","message":"unsupported file \"notes.txt\""});
        assert_eq!(
            from_error_shape(&unsupported, "tok"),
            GatewayError::InvalidRequest("INVALID_REQUEST: unsupported file \"notes.txt\"".into())
        );
        let odd = json!({"code":"INTERNAL","message":"boom"});
        assert!(matches!(
            from_error_shape(&odd, "tok"),
            GatewayError::Protocol(_)
        ));
    }

    #[test]
    fn scrubs_the_token_and_bounds_messages() {
        let echo = json!({"code":"INVALID_REQUEST","message":"bad token s3cr3t-value given"});
        let err = from_error_shape(&echo, "s3cr3t-value");
        assert!(!err.to_string().contains("s3cr3t-value"), "{err}");
        let long = "x".repeat(10_000);
        assert!(scrub(&long, "tok").chars().count() <= MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn transient_kinds() {
        assert!(GatewayError::Timeout.is_transient());
        assert!(GatewayError::Unreachable("x".into()).is_transient());
        assert!(
            GatewayError::Unavailable {
                retry_after: DEFAULT_RETRY_AFTER,
                message: String::new()
            }
            .is_transient()
        );
        assert!(!GatewayError::Unauthorized("x".into()).is_transient());
        assert!(!GatewayError::MissingScope("x".into()).is_transient());
        assert!(
            !GatewayError::Conflict {
                current_hash: String::new()
            }
            .is_transient()
        );
        assert!(!GatewayError::InvalidRequest("x".into()).is_transient());
        assert!(!GatewayError::Protocol("x".into()).is_transient());
    }
}
