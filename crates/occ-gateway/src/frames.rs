//! The WebSocket to a gateway and its frames: the checked upgrade request (`wss://`, or `ws://`
//! to loopback only; the edge header), the connection with its size limits, decoding of
//! incoming frames and what a close frame means.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::endpoint::{Auth, Endpoint};
use crate::error::{DEFAULT_RETRY_AFTER, GatewayError, MAX_RETRY_AFTER, scrub};

/// Largest message (and frame) accepted from a gateway: 32 MiB. The gateway's own
/// `policy.maxPayload` is 25 MiB.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// The WebSocket to one gateway.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Drops a connection whose handshake failed, sending a close frame in the background.
pub(crate) fn abort(mut ws: Ws) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(None)).await;
    });
}

/// Builds the upgrade request: checks the URL (`wss://`, or `ws://` to a loopback address;
/// no userinfo, query or fragment) and adds the edge header.
pub(crate) fn upgrade_request(endpoint: &Endpoint) -> Result<Request, GatewayError> {
    let url = endpoint.url.as_str();
    let bad = |what: &str| GatewayError::Protocol(format!("gateway URL {what}: {url}"));
    let tls = if url.starts_with("wss://") {
        true
    } else if url.starts_with("ws://") {
        false
    } else {
        return Err(bad("must start with ws:// or wss://"));
    };
    if url.contains('#') {
        return Err(bad("must not have a fragment"));
    }
    let mut request = url.into_client_request().map_err(map_ws_error)?;
    let uri = request.uri();
    if uri.query().is_some() {
        return Err(bad("must not have a query"));
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(bad("must not carry user information"));
    }
    let host = uri.host().unwrap_or("");
    if !tls && !is_loopback_host(host) {
        return Err(bad(
            "uses plain ws:// to a non-loopback host (credentials travel only over wss:// or loopback)",
        ));
    }
    if let Auth::EdgeHeader { name, value } = &endpoint.auth {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            GatewayError::InvalidRequest(format!("invalid edge header name {name:?}"))
        })?;
        let reserved = ["host", "connection", "upgrade"];
        if reserved.contains(&name.as_str()) || name.as_str().starts_with("sec-websocket-") {
            return Err(GatewayError::InvalidRequest(format!(
                "edge header {name} is reserved for the WebSocket handshake"
            )));
        }
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            GatewayError::InvalidRequest(format!("invalid value for the edge header {name}"))
        })?;
        value.set_sensitive(true);
        request.headers_mut().insert(name, value);
    }
    Ok(request)
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

pub(crate) async fn connect_ws(request: Request, tls: bool) -> Result<Ws, GatewayError> {
    let connector = if tls {
        tls_connector()
    } else {
        Connector::Plain
    };
    let (ws, _response) = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(ws_config()),
        true,
        Some(connector),
    )
    .await
    .map_err(map_ws_error)?;
    Ok(ws)
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
}

fn tls_connector() -> Connector {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    match rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
    {
        Ok(builder) => Connector::Rustls(Arc::new(
            builder.with_root_certificates(roots).with_no_client_auth(),
        )),
        // ring supports the default versions; keep the library's own choice otherwise.
        Err(_) => Connector::Plain,
    }
}

pub(crate) fn map_ws_error(err: tungstenite::Error) -> GatewayError {
    use tungstenite::Error as E;
    match err {
        E::ConnectionClosed | E::AlreadyClosed => {
            GatewayError::Unreachable("connection closed".into())
        }
        E::Io(e) => GatewayError::Unreachable(e.to_string()),
        E::Tls(e) => GatewayError::Unreachable(format!("TLS: {e}")),
        E::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            GatewayError::Unreachable("connection reset without closing handshake".into())
        }
        E::Protocol(ProtocolError::SendAfterClosing) => {
            GatewayError::Unreachable("connection closing".into())
        }
        E::Protocol(p) => GatewayError::Protocol(format!("WebSocket: {p}")),
        E::Capacity(c) => GatewayError::Protocol(format!(
            "message over the {} MiB limit: {c}",
            MAX_MESSAGE_BYTES >> 20
        )),
        E::Utf8(e) => GatewayError::Protocol(format!("invalid UTF-8 in a text frame: {e}")),
        E::Url(u) => GatewayError::Protocol(format!("invalid gateway URL: {u}")),
        E::Http(response) => GatewayError::Unreachable(format!(
            "WebSocket upgrade refused with HTTP {}",
            response.status()
        )),
        E::HttpFormat(e) => GatewayError::Unreachable(format!("WebSocket upgrade failed: {e}")),
        E::WriteBufferFull(_) => GatewayError::Unreachable("write buffer full".into()),
        E::AttackAttempt => GatewayError::Protocol("malformed HTTP from the gateway".into()),
    }
}

/// A decoded incoming message.
pub(crate) enum Decoded {
    Res {
        id: String,
        ok: bool,
        payload: Value,
        error: Value,
    },
    Event {
        event: String,
        payload: Value,
    },
    /// Pings, pongs, frames of unknown type.
    Skip,
    Close(Option<(u16, String)>),
}

pub(crate) fn decode(message: Message) -> Result<Decoded, GatewayError> {
    let text = match message {
        Message::Text(text) => text,
        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return Ok(Decoded::Skip),
        Message::Binary(_) => {
            return Err(GatewayError::Protocol("unexpected binary frame".into()));
        }
        Message::Close(frame) => {
            return Ok(Decoded::Close(
                frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())),
            ));
        }
    };
    let value: Value = serde_json::from_str(text.as_str())
        .map_err(|e| GatewayError::Protocol(format!("frame is not JSON: {e}")))?;
    match value.get("type").and_then(Value::as_str) {
        Some("res") => {
            let id = value
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| GatewayError::Protocol("response frame without an id".into()))?;
            let ok = value
                .get("ok")
                .and_then(Value::as_bool)
                .ok_or_else(|| GatewayError::Protocol("response frame without ok".into()))?;
            Ok(Decoded::Res {
                id: id.to_owned(),
                ok,
                payload: value.get("payload").cloned().unwrap_or(Value::Null),
                error: value.get("error").cloned().unwrap_or(Value::Null),
            })
        }
        Some("event") => Ok(Decoded::Event {
            event: value
                .get("event")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            payload: value.get("payload").cloned().unwrap_or(Value::Null),
        }),
        Some(other) => {
            tracing::debug!(frame_type = %other, "skipping a frame of unknown type");
            Ok(Decoded::Skip)
        }
        None => Err(GatewayError::Protocol("frame without a type".into())),
    }
}

pub(crate) fn close_error(
    frame: Option<(u16, String)>,
    secret: &str,
    restart_expected: Option<Duration>,
) -> GatewayError {
    let Some((code, reason)) = frame else {
        return GatewayError::Unreachable("gateway closed the connection".into());
    };
    let reason = scrub(&reason, secret);
    let described = format!("gateway closed the connection ({code}: {reason})");
    match code {
        // "try again later": the gateway is still starting.
        1013 => GatewayError::Unavailable {
            retry_after: DEFAULT_RETRY_AFTER,
            message: described,
        },
        // restart or shutdown; a preceding shutdown event may say when it is back.
        1012 => GatewayError::Unavailable {
            retry_after: restart_expected
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .clamp(DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER),
            message: described,
        },
        // gateway auth changed
        4001 => GatewayError::Unauthorized(described),
        // policy violation / protocol error without a response: our frames were refused.
        1008 | 1002 | 1003 | 1007 => GatewayError::Protocol(described),
        _ => GatewayError::Unreachable(described),
    }
}

/// What a read from the socket gave: a message, or why there is none (the gateway closed the
/// connection, or it failed).
pub(crate) fn received(
    message: Option<Result<Message, tungstenite::Error>>,
) -> Result<Message, GatewayError> {
    match message {
        None => Err(GatewayError::Unreachable(
            "connection closed by the gateway".into(),
        )),
        Some(Err(e)) => Err(map_ws_error(e)),
        Some(Ok(m)) => Ok(m),
    }
}

/// Reads until the next response or event, during the handshake.
pub(crate) async fn next_incoming(ws: &mut Ws, secret: &str) -> Result<Decoded, GatewayError> {
    loop {
        match decode(received(ws.next().await)?)? {
            Decoded::Skip => continue,
            Decoded::Close(frame) => return Err(close_error(frame, secret, None)),
            other => return Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_connecting() {
        let ok = [
            "ws://127.0.0.1:28789",
            "ws://localhost:1/",
            "ws://[::1]:28789",
            "wss://gw.example:443/namespaces/ns_1/agents/agt_1",
        ];
        for url in ok {
            assert!(upgrade_request(&Endpoint::new(url, "t")).is_ok(), "{url}");
        }
        let refused = [
            "http://127.0.0.1:1",
            "ws://10.0.0.5:28789",
            "ws://gw.example/",
            "wss://user:pw@gw.example/",
            "wss://gw.example/?token=x",
            "wss://gw.example/#x",
        ];
        for url in refused {
            let err = upgrade_request(&Endpoint::new(url, "t")).unwrap_err();
            assert!(matches!(err, GatewayError::Protocol(_)), "{url}: {err:?}");
        }
    }

    #[test]
    fn edge_headers_are_checked_and_sensitive() {
        let request = upgrade_request(&Endpoint::edge("wss://gw.example/", "x-api-key", "k-123"))
            .expect("request");
        let value = request.headers().get("x-api-key").expect("header");
        assert_eq!(value, "k-123");
        assert!(value.is_sensitive());
        for (name, value) in [
            ("bad header", "v"),
            ("x-api-key", "line\nbreak"),
            ("host", "v"),
            ("Sec-WebSocket-Key", "v"),
        ] {
            let err =
                upgrade_request(&Endpoint::edge("wss://gw.example/", name, value)).unwrap_err();
            assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
            assert!(!err.to_string().contains("line\nbreak"));
        }
    }
}
