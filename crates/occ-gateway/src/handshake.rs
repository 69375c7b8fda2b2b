//! The handshake: wait for `connect.challenge`, send `connect` as the backend operator (with
//! the token unless an edge authenticates), check `hello-ok` (protocol 4, role `operator`) and
//! report the granted scopes for the caller to check.

use std::time::Duration;

use futures_util::SinkExt as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::endpoint::Auth;
use crate::error::{GatewayError, from_error_shape};
use crate::frames::{Decoded, Ws, map_ws_error, next_incoming};

/// The only protocol version this client speaks.
pub const PROTOCOL_VERSION: u32 = 4;
/// `connect.params.client.id`: the one id that keeps its scopes without a device identity.
pub const CLIENT_ID: &str = "gateway-client";
/// `connect.params.client.mode`.
pub const CLIENT_MODE: &str = "backend";
/// Scopes requested (`agents.files.set` needs `operator.admin`, `list`/`get` need
/// `operator.read`; `operator.admin` alone also allows `get`).
pub const REQUIRED_SCOPES: [&str; 2] = ["operator.admin", "operator.read"];
/// `policy.tickIntervalMs` when `hello-ok` does not say.
const DEFAULT_TICK_INTERVAL: Duration = Duration::from_secs(30);

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

/// The `connect` params: the backend operator, and the token unless the edge authenticates.
pub(crate) fn connect_params(auth: &Auth) -> Value {
    let mut params = json!({
        "minProtocol": PROTOCOL_VERSION,
        "maxProtocol": PROTOCOL_VERSION,
        "client": {
            "id": CLIENT_ID,
            "version": env!("CARGO_PKG_VERSION"),
            "platform": "linux",
            "mode": CLIENT_MODE,
        },
        "role": "operator",
        "scopes": REQUIRED_SCOPES,
    });
    if let Auth::Token(token) = auth {
        // One credential answers both gateway modes: a token-mode gateway checks `token`, one
        // in trusted-proxy mode (its Control UI proxied by occ) checks `password`.
        params["auth"] = json!({ "token": token, "password": token });
    }
    params
}

/// Runs the handshake on a freshly opened WebSocket: the granted `hello-ok` and the
/// gateway's tick interval.
pub(crate) async fn handshake(
    ws: &mut Ws,
    auth: &Auth,
    secret: &str,
) -> Result<(Hello, Duration), GatewayError> {
    // The gateway speaks first: connect.challenge (about 15 ms after the upgrade).
    loop {
        match next_incoming(ws, secret).await? {
            Decoded::Event { event, .. } if event == "connect.challenge" => break,
            Decoded::Event { .. } => continue,
            _ => {
                return Err(GatewayError::Protocol(
                    "response before connect.challenge".into(),
                ));
            }
        }
    }
    let id = uuid::Uuid::new_v4().to_string();
    let frame =
        json!({"type": "req", "id": id, "method": "connect", "params": connect_params(auth)});
    ws.send(Message::text(frame.to_string()))
        .await
        .map_err(map_ws_error)?;
    loop {
        match next_incoming(ws, secret).await? {
            Decoded::Res {
                id: got,
                ok,
                payload,
                error,
            } if got == id => {
                return if ok {
                    parse_hello(&payload)
                } else {
                    Err(from_error_shape(&error, secret))
                };
            }
            _ => continue,
        }
    }
}

/// Checks `hello-ok`: protocol 4 and role `operator`. The scopes are returned as granted (the
/// caller checks them for what it needs), with `policy.tickIntervalMs`.
fn parse_hello(payload: &Value) -> Result<(Hello, Duration), GatewayError> {
    let bad = |what: &str| GatewayError::Protocol(format!("hello-ok: {what}"));
    if payload.get("type").and_then(Value::as_str) != Some("hello-ok") {
        return Err(bad("connect answered without type hello-ok"));
    }
    let protocol = payload
        .get("protocol")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no protocol"))?;
    if protocol != u64::from(PROTOCOL_VERSION) {
        return Err(bad(&format!(
            "gateway speaks protocol {protocol}, expected {PROTOCOL_VERSION}"
        )));
    }
    let server_version = payload
        .pointer("/server/version")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no server.version"))?
        .to_owned();
    let auth = payload.get("auth").ok_or_else(|| bad("no auth"))?;
    let role = auth
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no auth.role"))?
        .to_owned();
    let scopes: Vec<String> = auth
        .get("scopes")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no auth.scopes"))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad("non-string scope"))
        })
        .collect::<Result<_, _>>()?;
    let auth_method = auth
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if role != "operator" {
        return Err(GatewayError::Unauthorized(format!(
            "gateway granted role {role:?}, expected operator"
        )));
    }
    let tick = payload
        .pointer("/policy/tickIntervalMs")
        .and_then(Value::as_u64)
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_TICK_INTERVAL, Duration::from_millis);
    Ok((
        Hello {
            protocol: PROTOCOL_VERSION,
            server_version,
            role,
            scopes,
            auth_method,
        },
        tick,
    ))
}

/// Requires every scope in `wanted` to be granted.
pub(crate) fn require_scopes(hello: &Hello, wanted: &[&str]) -> Result<(), GatewayError> {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|want| !hello.scopes.iter().any(|s| s == want))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(GatewayError::MissingScope(format!(
            "hello-ok granted [{}], missing [{}]",
            hello.scopes.join(", "),
            missing.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_params_carry_the_token_only_in_token_mode() {
        let p = connect_params(&Auth::Token("tok".into()));
        assert_eq!(p["auth"], json!({"token": "tok", "password": "tok"}));
        let p = connect_params(&Auth::EdgeHeader {
            name: "x-api-key".into(),
            value: "k".into(),
        });
        assert!(p.get("auth").is_none(), "{p}");
        assert!(!p.to_string().contains("\"k\""));
    }
}
