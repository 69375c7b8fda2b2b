//! One WebSocket connection to a gateway: handshake, requests, `agents.files.*`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::error::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER, from_error_shape, scrub};
use crate::{Endpoint, GatewayError, Hello, WorkspaceFile, content_hash};

/// The only protocol version this client speaks.
pub const PROTOCOL_VERSION: u32 = 4;
/// `connect.params.client.id`: the one id that keeps its scopes without a device identity.
pub const CLIENT_ID: &str = "gateway-client";
/// `connect.params.client.mode`.
pub const CLIENT_MODE: &str = "backend";
/// Scopes requested, and required in `hello-ok` (`agents.files.set` needs `operator.admin`,
/// `list`/`get` need `operator.read`).
pub const REQUIRED_SCOPES: [&str; 2] = ["operator.admin", "operator.read"];
/// Largest message (and frame) accepted from a gateway: 32 MiB. The gateway's own
/// `policy.maxPayload` is 25 MiB.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One authenticated connection to a gateway.
///
/// Requests are sequential (`&mut self`). A response that arrives after its call timed out is
/// recognised by its id and skipped by the next call. The connection answers the gateway's
/// pings only while a call is reading, so a session left idle for longer than the gateway's
/// keepalive (a few ping intervals of 25 s) may be dropped by the gateway; the next call then
/// fails with [`GatewayError::Unreachable`] and the caller reconnects.
pub struct Session {
    ws: Ws,
    url: String,
    token: String,
    /// Set once the connection is unusable; every later call fails with this error.
    broken: Option<GatewayError>,
    /// `restartExpectedMs` of a `shutdown` event, if one arrived.
    restart_expected: Option<Duration>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("url", &self.url)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

/// A decoded incoming text frame that matters to the reader.
enum Incoming {
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

fn map_ws_error(err: tungstenite::Error) -> GatewayError {
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

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Session {
    /// One attempt: opens the WebSocket, waits for `connect.challenge`, sends `connect` and
    /// requires `hello-ok` with protocol 4, role `operator` and both [`REQUIRED_SCOPES`]
    /// granted. The whole handshake is bounded by `timeout`.
    pub async fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<(Session, Hello), GatewayError> {
        let deadline = Instant::now() + timeout;
        let ws = match tokio::time::timeout_at(deadline, open(&endpoint.url)).await {
            Ok(result) => result?,
            Err(_) => return Err(GatewayError::Timeout),
        };
        let mut session = Session {
            ws,
            url: endpoint.url.clone(),
            token: endpoint.token.clone(),
            broken: None,
            restart_expected: None,
        };
        match tokio::time::timeout_at(deadline, session.handshake()).await {
            Ok(Ok(hello)) => Ok((session, hello)),
            Ok(Err(err)) => {
                session.abort().await;
                Err(err)
            }
            Err(_) => {
                session.abort().await;
                Err(GatewayError::Timeout)
            }
        }
    }

    /// The URL this session is connected to.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn handshake(&mut self) -> Result<Hello, GatewayError> {
        // The gateway speaks first: connect.challenge (about 15 ms after the upgrade).
        loop {
            match self.next_frame().await? {
                Incoming::Event { event, .. } if event == "connect.challenge" => break,
                Incoming::Event { .. } => continue,
                Incoming::Res { .. } => {
                    return Err(GatewayError::Protocol(
                        "response before connect.challenge".into(),
                    ));
                }
            }
        }
        let params = json!({
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
            "auth": { "token": self.token },
        });
        let payload = self.request("connect", params).await?;
        parse_hello(&payload)
    }

    /// Sends one request and waits for its response (matched by id) until `timeout`; events
    /// and responses to other ids are skipped. Returns the `payload` (`null` when absent).
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, GatewayError> {
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.request(method, params)).await {
            Ok(result) => result,
            Err(_) => Err(GatewayError::Timeout),
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, GatewayError> {
        if let Some(err) = &self.broken {
            return Err(err.clone());
        }
        let id = uuid::Uuid::new_v4().to_string();
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        let text = serde_json::to_string(&frame)
            .map_err(|e| GatewayError::Protocol(format!("cannot encode request: {e}")))?;
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(GatewayError::InvalidRequest(format!(
                "{method} request of {} bytes exceeds {} MiB",
                text.len(),
                MAX_MESSAGE_BYTES >> 20
            )));
        }
        // A send cut short by a timeout may leave half a frame behind: the session is then
        // unusable. Mark it broken first and clear the mark once the frame is out.
        self.broken = Some(GatewayError::Unreachable(
            "session unusable after an interrupted send".into(),
        ));
        if let Err(e) = self.ws.send(Message::text(text)).await {
            let err = map_ws_error(e);
            self.broken = Some(err.clone());
            return Err(err);
        }
        self.broken = None;
        loop {
            match self.next_frame().await? {
                Incoming::Res {
                    id: got,
                    ok,
                    payload,
                    error,
                } if got == id => {
                    return if ok {
                        Ok(payload)
                    } else {
                        Err(from_error_shape(&error, &self.token))
                    };
                }
                Incoming::Res { id: other, .. } => {
                    tracing::debug!(url = %self.url, id = %other, "skipping a response to another request");
                }
                Incoming::Event { event, payload } => {
                    if event == "shutdown" {
                        self.restart_expected = payload
                            .get("restartExpectedMs")
                            .and_then(Value::as_u64)
                            .map(Duration::from_millis);
                    }
                    tracing::trace!(url = %self.url, %event, "skipping an event");
                }
            }
        }
    }

    /// Reads until the next text frame that is a response or an event. Pings are answered by
    /// the WebSocket layer while reading. A close or read error breaks the session.
    async fn next_frame(&mut self) -> Result<Incoming, GatewayError> {
        loop {
            let message = match self.ws.next().await {
                None => Err(GatewayError::Unreachable(
                    "connection closed by the gateway".into(),
                )),
                Some(Err(e)) => Err(map_ws_error(e)),
                Some(Ok(m)) => Ok(m),
            };
            let message = match message {
                Ok(m) => m,
                Err(err) => {
                    self.broken = Some(err.clone());
                    return Err(err);
                }
            };
            let text = match message {
                Message::Text(text) => text,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Binary(_) => {
                    return Err(self.fail(GatewayError::Protocol("unexpected binary frame".into())));
                }
                Message::Close(frame) => {
                    let err = self.close_error(frame.as_ref().map(|f| (f.code, f.reason.as_str())));
                    return Err(self.fail(err));
                }
            };
            let value: Value = match serde_json::from_str(text.as_str()) {
                Ok(v) => v,
                Err(e) => {
                    return Err(
                        self.fail(GatewayError::Protocol(format!("frame is not JSON: {e}")))
                    );
                }
            };
            match value.get("type").and_then(Value::as_str) {
                Some("res") => {
                    let Some(id) = value.get("id").and_then(Value::as_str) else {
                        return Err(self.fail(GatewayError::Protocol(
                            "response frame without an id".into(),
                        )));
                    };
                    let Some(ok) = value.get("ok").and_then(Value::as_bool) else {
                        return Err(
                            self.fail(GatewayError::Protocol("response frame without ok".into()))
                        );
                    };
                    return Ok(Incoming::Res {
                        id: id.to_owned(),
                        ok,
                        payload: value.get("payload").cloned().unwrap_or(Value::Null),
                        error: value.get("error").cloned().unwrap_or(Value::Null),
                    });
                }
                Some("event") => {
                    let event = value
                        .get("event")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    return Ok(Incoming::Event {
                        event,
                        payload: value.get("payload").cloned().unwrap_or(Value::Null),
                    });
                }
                Some(other) => {
                    tracing::debug!(url = %self.url, frame_type = %other, "skipping a frame of unknown type");
                }
                None => {
                    return Err(self.fail(GatewayError::Protocol("frame without a type".into())));
                }
            }
        }
    }

    fn fail(&mut self, err: GatewayError) -> GatewayError {
        self.broken = Some(err.clone());
        err
    }

    fn close_error(&self, frame: Option<(CloseCode, &str)>) -> GatewayError {
        let Some((code, reason)) = frame else {
            return GatewayError::Unreachable("gateway closed the connection".into());
        };
        let reason = scrub(reason, &self.token);
        let described = format!(
            "gateway closed the connection ({}: {reason})",
            u16::from(code)
        );
        match u16::from(code) {
            // "try again later": the gateway is still starting.
            1013 => GatewayError::Unavailable {
                retry_after: DEFAULT_RETRY_AFTER,
                message: described,
            },
            // restart or shutdown; a preceding shutdown event may say when it is back.
            1012 => GatewayError::Unavailable {
                retry_after: self
                    .restart_expected
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

    /// `agents.files.get`: the file, or `None` when the gateway reports it `missing`.
    pub async fn file_get(
        &mut self,
        agent_id: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<WorkspaceFile>, GatewayError> {
        let payload = self
            .call(
                "agents.files.get",
                json!({"agentId": agent_id, "name": name}),
                timeout,
            )
            .await?;
        let file = payload_file(&payload, "agents.files.get")?;
        if file.get("missing").and_then(Value::as_bool) == Some(true) {
            return Ok(None);
        }
        let content = file
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| GatewayError::Protocol("agents.files.get: file without content".into()))?
            .to_owned();
        workspace_file(file, name, content, "agents.files.get").map(Some)
    }

    /// `agents.files.set`: writes `content`; with `expected_hash`, only if the file's current
    /// hash matches ([`GatewayError::Conflict`] otherwise).
    pub async fn file_set(
        &mut self,
        agent_id: &str,
        name: &str,
        content: &str,
        expected_hash: Option<&str>,
        timeout: Duration,
    ) -> Result<WorkspaceFile, GatewayError> {
        let mut params = Map::new();
        params.insert("agentId".into(), agent_id.into());
        params.insert("name".into(), name.into());
        params.insert("content".into(), content.into());
        if let Some(hash) = expected_hash {
            if !is_hex64(hash) {
                return Err(GatewayError::InvalidRequest(
                    "expectedHash must be 64 hex characters".into(),
                ));
            }
            params.insert("expectedHash".into(), hash.to_ascii_lowercase().into());
        }
        let payload = self
            .call("agents.files.set", Value::Object(params), timeout)
            .await?;
        let file = payload_file(&payload, "agents.files.set")?;
        let echoed = file
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or(content)
            .to_owned();
        workspace_file(file, name, echoed, "agents.files.set")
    }

    /// Closes the connection politely (close frame, bounded wait for the gateway's answer).
    pub async fn close(mut self) {
        let polite = async {
            if self.ws.close(None).await.is_ok() {
                while let Some(Ok(_)) = self.ws.next().await {}
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), polite).await;
    }

    /// Drops the connection after a failed handshake without waiting long.
    async fn abort(&mut self) {
        let _ = tokio::time::timeout(Duration::from_millis(200), self.ws.close(None)).await;
    }
}

async fn open(url: &str) -> Result<Ws, GatewayError> {
    let connector = if url.starts_with("wss://") {
        Some(tls_connector())
    } else if url.starts_with("ws://") {
        Some(Connector::Plain)
    } else {
        return Err(GatewayError::Protocol(format!(
            "gateway URL must start with ws:// or wss://: {url}"
        )));
    };
    let (ws, _response) =
        tokio_tungstenite::connect_async_tls_with_config(url, Some(ws_config()), true, connector)
            .await
            .map_err(map_ws_error)?;
    Ok(ws)
}

fn parse_hello(payload: &Value) -> Result<Hello, GatewayError> {
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
    let missing: Vec<&str> = REQUIRED_SCOPES
        .iter()
        .copied()
        .filter(|want| !scopes.iter().any(|s| s == want))
        .collect();
    if !missing.is_empty() {
        return Err(GatewayError::MissingScope(format!(
            "hello-ok granted [{}], missing [{}]",
            scopes.join(", "),
            missing.join(", ")
        )));
    }
    Ok(Hello {
        protocol: PROTOCOL_VERSION,
        server_version,
        role,
        scopes,
        auth_method,
    })
}

fn payload_file<'a>(payload: &'a Value, method: &str) -> Result<&'a Value, GatewayError> {
    payload
        .get("file")
        .filter(|f| f.is_object())
        .ok_or_else(|| GatewayError::Protocol(format!("{method}: payload without a file object")))
}

fn workspace_file(
    file: &Value,
    requested: &str,
    content: String,
    method: &str,
) -> Result<WorkspaceFile, GatewayError> {
    let hash = match file.get("hash").and_then(Value::as_str) {
        Some(h) if is_hex64(h) => h.to_ascii_lowercase(),
        Some(_) => {
            return Err(GatewayError::Protocol(format!(
                "{method}: hash is not 64 hex characters"
            )));
        }
        // Gateways before 2026.9 do not report hashes.
        None => content_hash(&content),
    };
    let size = file
        .get("size")
        .and_then(Value::as_u64)
        .unwrap_or(content.len() as u64);
    let name = file
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_owned();
    Ok(WorkspaceFile {
        name,
        content,
        hash,
        size,
    })
}
