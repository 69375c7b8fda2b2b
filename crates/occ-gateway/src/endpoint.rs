//! Where a gateway listens and how occ proves itself to it. `Debug` never shows a credential.

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
}
