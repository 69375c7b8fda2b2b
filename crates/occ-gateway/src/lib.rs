//! Client of the native OpenClaw gateway WebSocket protocol, version 4.
//!
//! occ talks to each Agent's gateway as a device-less backend operator: it opens the
//! WebSocket, waits for `connect.challenge`, sends `connect` (`client {id: "gateway-client",
//! mode: "backend"}`, role `operator`, scopes `operator.admin` + `operator.read`, **no**
//! `device` field) and checks the grant in `hello-ok` — a gateway silently clears the scopes of
//! clients it does not trust, so the grant is always checked. Then it issues requests
//! (`req`/`res` frames matched by id; events are skipped).
//!
//! Two ways to authenticate ([`Auth`]): the gateway's shared token in `connect.params.auth`
//! (loopback gateways of the process Driver), or a header on the WebSocket upgrade with no
//! `auth` in the connect params, for gateways behind an authenticating edge proxy (trusted-proxy
//! gateways; the Kubernetes Driver).
//!
//! Every connection is driven by its own task that reads continuously: pings are answered and a
//! dead or silent gateway is noticed even while nobody is calling, responses are matched to
//! their requests by id, and a request abandoned after it was written (deadline, or the caller
//! dropping its future) is followed by a `{"type":"cancel","id":…}` frame.
//!
//! - [`FileClient`]: the live workspace files (`agents.files.get`/`set` of the four profile
//!   files) with outcome classification ([`ReadOutcome`], [`WriteOutcome`]), one deadline per
//!   operation and pooled, verified connections keyed by URL and credential.
//! - [`Session`]: one connection; [`Session::connect`] is one attempt, [`Session::call`] one
//!   request, [`Session::file_get`] / [`Session::file_set`] the `agents.files.*` methods.
//! - [`wait_ready`]: readiness — retries [`Session::connect`] on transient errors.
//! - [`GatewayError`]: every failure, classified; [`GatewayError::is_transient`] tells retry
//!   from give-up.
//!
//! Bounds: every read is capped ([`MAX_MESSAGE_BYTES`]) and every operation has a deadline.
//! Credentials are never logged and never put into an error (gateway messages are scrubbed of
//! them), and [`Endpoint`]'s `Debug` redacts them. Credentials are sent only over `wss://` or
//! to a loopback address.

mod conn;
mod error;
mod files;
mod ready;
mod session;

#[cfg(test)]
mod fake;

pub use error::{DEFAULT_RETRY_AFTER, GatewayError, MAX_RETRY_AFTER};
pub use files::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, FileClient, FileClientSettings, FileClientStats,
    MAX_FILE_BYTES, ReadOutcome, WORKSPACE_FILE_NAMES, WriteOutcome,
};
pub use ready::wait_ready;
pub use session::{
    CLIENT_ID, CLIENT_MODE, MAX_MESSAGE_BYTES, PROTOCOL_VERSION, REQUIRED_SCOPES, Session,
};

use std::fmt;

/// How occ proves itself to a gateway.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Auth {
    /// The gateway's shared token (`gateway.auth.token`), sent as `connect.params.auth.token`.
    Token(String),
    /// A header on the WebSocket upgrade request (e.g. `x-api-key: <key>`), checked by an edge
    /// proxy in front of a trusted-proxy gateway; the connect params carry no `auth`.
    EdgeHeader {
        /// Header name, e.g. `x-api-key`.
        name: String,
        /// Header value (the secret).
        value: String,
    },
}

impl Auth {
    /// The secret part, scrubbed from every message that comes from the gateway.
    pub(crate) fn secret(&self) -> &str {
        match self {
            Auth::Token(token) => token,
            Auth::EdgeHeader { value, .. } => value,
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Token(_) => f.debug_tuple("Token").field(&"<redacted>").finish(),
            Auth::EdgeHeader { name, .. } => f
                .debug_struct("EdgeHeader")
                .field("name", name)
                .field("value", &"<redacted>")
                .finish(),
        }
    }
}

/// Where a gateway listens and how to authenticate to it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// `ws://127.0.0.1:PORT` or `wss://host[:port][/path]`. Plain `ws://` only to a loopback
    /// address; no userinfo, query or fragment.
    pub url: String,
    /// The credential.
    pub auth: Auth,
}

impl Endpoint {
    /// An endpoint authenticated by the gateway's shared token.
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> Endpoint {
        Endpoint {
            url: url.into(),
            auth: Auth::Token(token.into()),
        }
    }

    /// `ws://127.0.0.1:{port}` with `token`.
    pub fn loopback(port: u16, token: impl Into<String>) -> Endpoint {
        Endpoint::new(format!("ws://127.0.0.1:{port}"), token)
    }

    /// An endpoint behind an authenticating edge: `header: value` on the WebSocket upgrade and
    /// no `auth` in the connect params.
    pub fn edge(
        url: impl Into<String>,
        header: impl Into<String>,
        value: impl Into<String>,
    ) -> Endpoint {
        Endpoint {
            url: url.into(),
            auth: Auth::EdgeHeader {
                name: header.into(),
                value: value.into(),
            },
        }
    }

    /// The shared token, for token endpoints.
    pub fn token(&self) -> Option<&str> {
        match &self.auth {
            Auth::Token(token) => Some(token),
            Auth::EdgeHeader { .. } => None,
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("auth", &self.auth)
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
    /// `auth.method`, e.g. `token` or `trusted-proxy`.
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
    fn endpoint_debug_redacts_the_credentials() {
        let e = Endpoint::loopback(28789, "very-secret-token");
        let shown = format!("{e:?}");
        assert!(!shown.contains("very-secret-token"), "{shown}");
        assert!(shown.contains("ws://127.0.0.1:28789"), "{shown}");
        assert_eq!(e.token(), Some("very-secret-token"));

        let e = Endpoint::edge(
            "wss://gw.example/namespaces/ns/agents/a",
            "x-api-key",
            "the-edge-key",
        );
        let shown = format!("{e:?}");
        assert!(!shown.contains("the-edge-key"), "{shown}");
        assert!(shown.contains("x-api-key"), "{shown}");
        assert_eq!(e.token(), None);
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash("hi\n"),
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"
        );
    }
}
