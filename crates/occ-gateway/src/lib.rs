//! Client of the native OpenClaw gateway WebSocket protocol, version 4.
//!
//! occ talks to each Agent's gateway as a device-less backend operator over loopback: it opens
//! the WebSocket, waits for `connect.challenge`, sends `connect` with the shared gateway token
//! (`client {id: "gateway-client", mode: "backend"}`, role `operator`, scopes
//! `operator.admin` + `operator.read`, **no** `device` field) and requires `hello-ok` with
//! protocol 4 and both scopes granted — a gateway silently clears the scopes of clients it does
//! not trust, so the grant is always checked. Then it issues requests (`req`/`res` frames
//! matched by id; events are skipped; pings are answered by the WebSocket layer).
//!
//! - [`Session`]: one connection; [`Session::connect`] is one attempt, [`Session::call`] one
//!   request, [`Session::file_get`] / [`Session::file_set`] the `agents.files.*` methods.
//! - [`wait_ready`]: readiness — retries [`Session::connect`] on transient errors.
//! - [`GatewayError`]: every failure, classified; [`GatewayError::is_transient`] tells retry
//!   from give-up.
//!
//! Bounds: every read is capped ([`MAX_MESSAGE_BYTES`]) and every operation takes a timeout.
//! The token is never logged and never put into an error (gateway messages are scrubbed of
//! it), and [`Endpoint`]'s `Debug` redacts it.

mod error;
mod ready;
mod session;

#[cfg(test)]
mod fake;

pub use error::{DEFAULT_RETRY_AFTER, GatewayError, MAX_RETRY_AFTER};
pub use ready::wait_ready;
pub use session::{
    CLIENT_ID, CLIENT_MODE, MAX_MESSAGE_BYTES, PROTOCOL_VERSION, REQUIRED_SCOPES, Session,
};

use std::fmt;

/// Where a gateway listens and the shared secret it expects.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `ws://127.0.0.1:PORT` (or `wss://…`).
    pub url: String,
    /// The gateway's shared token (`gateway.auth.token`).
    pub token: String,
}

impl Endpoint {
    /// An endpoint from its parts.
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> Endpoint {
        Endpoint {
            url: url.into(),
            token: token.into(),
        }
    }

    /// `ws://127.0.0.1:{port}` with `token`.
    pub fn loopback(port: u16, token: impl Into<String>) -> Endpoint {
        Endpoint::new(format!("ws://127.0.0.1:{port}"), token)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// What the gateway granted in `hello-ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Negotiated protocol version (always [`PROTOCOL_VERSION`] once accepted).
    pub protocol: u32,
    /// `server.version`, e.g. `2026.9.6`.
    pub server_version: String,
    /// `auth.role` (always `operator` once accepted).
    pub role: String,
    /// `auth.scopes` as granted.
    pub scopes: Vec<String>,
    /// `auth.method`, e.g. `token`.
    pub auth_method: String,
}

/// One of the Agent's workspace files as `agents.files.get`/`set` return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceFile {
    /// File name, e.g. `AGENTS.md`.
    pub name: String,
    /// UTF-8 content.
    pub content: String,
    /// Lowercase hex SHA-256 of the content's bytes.
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
}

/// Lowercase hex SHA-256 of `content`'s UTF-8 bytes: the hash the gateway reports and expects
/// in `expectedHash`.
pub fn content_hash(content: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(content.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_debug_redacts_the_token() {
        let e = Endpoint::loopback(28789, "very-secret-token");
        let shown = format!("{e:?}");
        assert!(!shown.contains("very-secret-token"), "{shown}");
        assert!(shown.contains("ws://127.0.0.1:28789"), "{shown}");
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash("hi\n"),
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"
        );
    }
}
