//! One WebSocket connection to a gateway, driven by its own task.
//!
//! [`Conn::open`] opens the WebSocket and runs the handshake inline (bounded by the caller's
//! deadline), then hands the socket to a task that owns it for the rest of its life:
//!
//! - it reads continuously, so pings are answered (by the WebSocket layer, while reading) and a
//!   closed, reset or silent connection (no frame for 2 × `tickIntervalMs`) is noticed while the
//!   connection is idle;
//! - requests reach it through a channel and responses go back through one-shot channels,
//!   matched by id (responses may arrive out of order; several requests may be in flight);
//! - each request carries a small state machine (queued → writing → written, or abandoned), so
//!   the caller always knows whether its frame may have reached the gateway: a request
//!   abandoned while still queued is never written; one abandoned after it was written
//!   (deadline, or the caller's future dropped — the caller's guard notices in `Drop`) is
//!   followed by a `{"type":"cancel","id":…}` frame;
//! - with an idle timeout (pooled connections), it closes the connection after that long
//!   without a request in flight.
//!
//! When the task ends, every request still in flight fails as "written, no answer" and every
//! request still queued as "not written".

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::error::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER, from_error_shape, scrub};
use crate::{Auth, Endpoint, GatewayError, Hello};

/// The only protocol version this client speaks.
pub const PROTOCOL_VERSION: u32 = 4;
/// `connect.params.client.id`: the one id that keeps its scopes without a device identity.
pub const CLIENT_ID: &str = "gateway-client";
/// `connect.params.client.mode`.
pub const CLIENT_MODE: &str = "backend";
/// Scopes requested (`agents.files.set` needs `operator.admin`, `list`/`get` need
/// `operator.read`; `operator.admin` alone also allows `get`).
pub const REQUIRED_SCOPES: [&str; 2] = ["operator.admin", "operator.read"];
/// Largest message (and frame) accepted from a gateway: 32 MiB. The gateway's own
/// `policy.maxPayload` is 25 MiB.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Longest time one frame may take to be written before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a polite close waits for the gateway's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// `policy.tickIntervalMs` when `hello-ok` does not say.
const DEFAULT_TICK_INTERVAL: Duration = Duration::from_secs(30);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const QUEUED: u8 = 0;
const WRITING: u8 = 1;
const WRITTEN: u8 = 2;
const ABANDONED: u8 = 3;

/// Counters shared by the connections of one client (for [`crate::FileClientStats`]).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub connections_opened: AtomicU64,
    pub requests_written: AtomicU64,
    pub cancels_sent: AtomicU64,
    pub stale_retries: AtomicU64,
}

/// Per-connection settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnOptions {
    /// Close the connection after this long without a request in flight.
    pub idle_timeout: Option<Duration>,
    pub counters: Option<Arc<Counters>>,
}

/// How a call failed, by what the gateway may have seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallFailure {
    /// The gateway answered with an error: a definite failure. `missing` when the error says
    /// the file does not exist (`NOT_FOUND`/`ENOENT`, `details.missing`/`details.fileMissing`).
    Refused { error: GatewayError, missing: bool },
    /// The request frame was never (completely) written: the gateway cannot have acted on it.
    NotSent(GatewayError),
    /// The request frame was (or may have been) written, and no answer came: deadline, or the
    /// connection failed. The gateway may or may not have acted on it.
    NoAnswer(GatewayError),
}

impl CallFailure {
    pub fn into_error(self) -> GatewayError {
        match self {
            CallFailure::Refused { error, .. }
            | CallFailure::NotSent(error)
            | CallFailure::NoAnswer(error) => error,
        }
    }
}

enum Reply {
    /// A `res` frame.
    Answer(Result<Value, CallFailure>),
    /// The connection failed with the request in flight (`written`) or still queued.
    Failed { error: GatewayError, written: bool },
}

struct Outgoing {
    id: String,
    text: String,
    state: Arc<AtomicU8>,
    reply: oneshot::Sender<Reply>,
}

enum Command {
    Call(Outgoing),
    /// The caller gave up on this request: forget it and, if it is still awaiting its answer,
    /// send a cancel frame.
    Abandon(String),
    /// Close politely, then acknowledge.
    Close(Option<oneshot::Sender<()>>),
}

/// State shared between the handles and the task.
struct Shared {
    hello: Hello,
    /// Why the connection ended; set by the task as its last act.
    dead: Mutex<Option<GatewayError>>,
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A handle to a live (or ended) connection; clones share it. The connection closes when the
/// last handle is dropped, when [`Conn::close`] is called, on idle timeout, or when it fails.
#[derive(Clone)]
pub(crate) struct Conn {
    cmd: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl Conn {
    /// Opens the WebSocket, runs the handshake (challenge, `connect`, `hello-ok` with protocol
    /// 4 and role `operator`; the scopes are the caller's to check) and starts the task. Every
    /// step is bounded by `deadline` ([`GatewayError::Timeout`]).
    pub async fn open(
        endpoint: &Endpoint,
        deadline: Instant,
        options: ConnOptions,
    ) -> Result<(Conn, Hello), GatewayError> {
        let request = upgrade_request(endpoint)?;
        let tls = endpoint.url.starts_with("wss://");
        let mut ws = match tokio::time::timeout_at(deadline, connect_ws(request, tls)).await {
            Ok(result) => result?,
            Err(_) => return Err(GatewayError::Timeout),
        };
        let secret = endpoint.auth.secret().to_owned();
        let handshake =
            tokio::time::timeout_at(deadline, handshake(&mut ws, &endpoint.auth, &secret)).await;
        let (hello, tick) = match handshake {
            Ok(Ok(accepted)) => accepted,
            Ok(Err(err)) => {
                abort(ws);
                return Err(err);
            }
            Err(_) => {
                abort(ws);
                return Err(GatewayError::Timeout);
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            hello: hello.clone(),
            dead: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        let driver = Driver {
            ws,
            rx,
            shared: shared.clone(),
            pending: HashMap::new(),
            idle_timeout: options.idle_timeout,
            silence_limit: tick.saturating_mul(2),
            counters: options.counters,
            secret,
            url: endpoint.url.clone(),
            restart_expected: None,
        };
        tokio::spawn(driver.run());
        Ok((Conn { cmd: tx, shared }, hello))
    }

    /// What the gateway granted.
    pub fn hello(&self) -> &Hello {
        &self.shared.hello
    }

    /// Why the connection ended, once it has.
    pub fn dead(&self) -> Option<GatewayError> {
        lock(&self.shared.dead).clone()
    }

    /// Whether the connection may still carry requests (as far as the client knows).
    pub fn is_alive(&self) -> bool {
        !self.cmd.is_closed() && lock(&self.shared.dead).is_none()
    }

    /// Requests currently in flight through this connection.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Acquire)
    }

    /// When a request last started on this connection.
    pub fn last_used(&self) -> Instant {
        *lock(&self.shared.last_used)
    }

    /// Whether two handles share one connection.
    pub fn same(&self, other: &Conn) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Asks the task to close the connection politely, without waiting.
    pub fn close_now(&self) {
        let _ = self.cmd.send(Command::Close(None));
    }

    /// Closes the connection politely (close frame, bounded wait for the gateway's answer).
    pub async fn close(&self) {
        let (ack, done) = oneshot::channel();
        if self.cmd.send(Command::Close(Some(ack))).is_ok() {
            let _ = tokio::time::timeout(CLOSE_WAIT + Duration::from_millis(200), done).await;
        }
    }

    /// Sends one request and waits for its answer until `deadline`. See [`CallFailure`] for
    /// what a failure says about the request.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, CallFailure> {
        if let Some(err) = self.dead() {
            return Err(CallFailure::NotSent(err));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        let text = serde_json::to_string(&frame).map_err(|e| {
            CallFailure::NotSent(GatewayError::Protocol(format!(
                "cannot encode request: {e}"
            )))
        })?;
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(CallFailure::NotSent(GatewayError::InvalidRequest(format!(
                "{method} request of {} bytes exceeds {} MiB",
                text.len(),
                MAX_MESSAGE_BYTES >> 20
            ))));
        }
        let _in_flight = InFlight::start(&self.shared);
        let state = Arc::new(AtomicU8::new(QUEUED));
        let (reply, answer) = oneshot::channel();
        // From here on, leaving this function in any way (including the caller dropping the
        // future) abandons the request: the guard marks it so the task never writes it if it
        // is still queued, and tells the task to cancel it if it was written.
        let mut guard = AbandonGuard {
            cmd: self.cmd.clone(),
            id: id.clone(),
            state: state.clone(),
            armed: true,
        };
        let queued = self.cmd.send(Command::Call(Outgoing {
            id,
            text,
            state: state.clone(),
            reply,
        }));
        if queued.is_err() {
            guard.armed = false;
            return Err(CallFailure::NotSent(self.dead().unwrap_or_else(|| {
                GatewayError::Unreachable("connection closed".into())
            })));
        }
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(Reply::Answer(result))) => {
                guard.armed = false;
                result
            }
            Ok(Ok(Reply::Failed { error, written })) => {
                guard.armed = false;
                Err(if written {
                    CallFailure::NoAnswer(error)
                } else {
                    CallFailure::NotSent(error)
                })
            }
            Ok(Err(_)) => {
                // The task ended without answering (it always answers; defensive).
                guard.armed = false;
                let error = self
                    .dead()
                    .unwrap_or_else(|| GatewayError::Unreachable("connection task ended".into()));
                Err(match state.load(Ordering::Acquire) {
                    QUEUED | ABANDONED => CallFailure::NotSent(error),
                    _ => CallFailure::NoAnswer(error),
                })
            }
            Err(_) => {
                // Deadline. Still queued → it will never be written; otherwise it may have
                // reached the gateway, and the guard has the task send a cancel frame.
                let never_sent = state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                Err(if never_sent {
                    CallFailure::NotSent(GatewayError::Timeout)
                } else {
                    CallFailure::NoAnswer(GatewayError::Timeout)
                })
            }
        }
    }
}

struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn start(shared: &'a Shared) -> InFlight<'a> {
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        *lock(&shared.last_used) = Instant::now();
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

struct AbandonGuard {
    cmd: mpsc::UnboundedSender<Command>,
    id: String,
    state: Arc<AtomicU8>,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ =
                self.state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
            let _ = self
                .cmd
                .send(Command::Abandon(std::mem::take(&mut self.id)));
        }
    }
}

/// The task that owns one connection.
struct Driver {
    ws: Ws,
    rx: mpsc::UnboundedReceiver<Command>,
    shared: Arc<Shared>,
    /// Requests written (or being written) and awaiting their answer.
    pending: HashMap<String, oneshot::Sender<Reply>>,
    idle_timeout: Option<Duration>,
    silence_limit: Duration,
    counters: Option<Arc<Counters>>,
    secret: String,
    url: String,
    /// `restartExpectedMs` of a `shutdown` event, if one arrived.
    restart_expected: Option<Duration>,
}

impl Driver {
    async fn run(mut self) {
        let mut last_rx = Instant::now();
        let mut last_activity = Instant::now();
        let error = loop {
            let idle_at = match self.idle_timeout {
                Some(idle) if self.pending.is_empty() => Some(last_activity + idle),
                _ => None,
            };
            let silent_at = last_rx + self.silence_limit;
            let wake = idle_at.map_or(silent_at, |idle| idle.min(silent_at));
            tokio::select! {
                biased;
                command = self.rx.recv() => match command {
                    // Every handle is gone.
                    None => {
                        self.close_politely().await;
                        break GatewayError::Unreachable("session closed".into());
                    }
                    Some(Command::Call(out)) => {
                        last_activity = Instant::now();
                        if let Err(err) = self.write_request(out).await {
                            break err;
                        }
                    }
                    Some(Command::Abandon(id)) => {
                        if self.pending.remove(&id).is_some()
                            && let Err(err) = self.send_cancel(&id).await
                        {
                            break err;
                        }
                    }
                    Some(Command::Close(ack)) => {
                        self.close_politely().await;
                        if let Some(ack) = ack {
                            let _ = ack.send(());
                        }
                        break GatewayError::Unreachable("session closed".into());
                    }
                },
                message = self.ws.next() => {
                    last_rx = Instant::now();
                    match self.on_message(message) {
                        Ok(true) => last_activity = Instant::now(),
                        Ok(false) => {}
                        Err(err) => break err,
                    }
                }
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if now >= silent_at {
                        let _ = tokio::time::timeout(
                            Duration::from_millis(200),
                            self.ws.close(Some(CloseFrame {
                                code: CloseCode::from(4000),
                                reason: "tick timeout".into(),
                            })),
                        )
                        .await;
                        break GatewayError::Unreachable(format!(
                            "no frame from the gateway for {} s",
                            self.silence_limit.as_secs()
                        ));
                    }
                    if idle_at.is_some_and(|idle| now >= idle) {
                        tracing::debug!(url = %self.url, "closing an idle gateway connection");
                        self.close_politely().await;
                        break GatewayError::Unreachable("idle session closed".into());
                    }
                }
            }
        };
        self.finish(error);
    }

    async fn write_request(&mut self, out: Outgoing) -> Result<(), GatewayError> {
        let Outgoing {
            id,
            text,
            state,
            reply,
        } = out;
        if state
            .compare_exchange(QUEUED, WRITING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Abandoned before it was sent: never written.
            return Ok(());
        }
        self.pending.insert(id.clone(), reply);
        match tokio::time::timeout(WRITE_TIMEOUT, self.ws.send(Message::text(text))).await {
            Ok(Ok(())) => {
                state.store(WRITTEN, Ordering::Release);
                if let Some(c) = &self.counters {
                    c.requests_written.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            Ok(Err(e)) => {
                // The frame did not completely reach the socket, so the gateway cannot have
                // read it; the connection is unusable anyway.
                let err = map_ws_error(e);
                if let Some(reply) = self.pending.remove(&id) {
                    let _ = reply.send(Reply::Failed {
                        error: err.clone(),
                        written: false,
                    });
                }
                Err(err)
            }
            // Part of it may be out: it stays pending and fails as written.
            Err(_) => Err(GatewayError::Unreachable(
                "writing a request timed out".into(),
            )),
        }
    }

    async fn send_cancel(&mut self, id: &str) -> Result<(), GatewayError> {
        let frame = json!({"type": "cancel", "id": id}).to_string();
        match tokio::time::timeout(WRITE_TIMEOUT, self.ws.send(Message::text(frame))).await {
            Ok(Ok(())) => {
                if let Some(c) = &self.counters {
                    c.cancels_sent.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(url = %self.url, %id, "cancelled an abandoned request");
                Ok(())
            }
            Ok(Err(e)) => Err(map_ws_error(e)),
            Err(_) => Err(GatewayError::Unreachable(
                "writing a cancel frame timed out".into(),
            )),
        }
    }

    /// Handles one incoming message; `Ok(true)` when it answered a request.
    fn on_message(
        &mut self,
        message: Option<Result<Message, tungstenite::Error>>,
    ) -> Result<bool, GatewayError> {
        let message = match message {
            None => {
                return Err(GatewayError::Unreachable(
                    "connection closed by the gateway".into(),
                ));
            }
            Some(Err(e)) => return Err(map_ws_error(e)),
            Some(Ok(m)) => m,
        };
        match decode(message)? {
            Decoded::Res {
                id,
                ok,
                payload,
                error,
            } => {
                let Some(reply) = self.pending.remove(&id) else {
                    tracing::debug!(url = %self.url, %id, "skipping a response to an abandoned or unknown request");
                    return Ok(false);
                };
                let answer = if ok {
                    Ok(payload)
                } else {
                    Err(CallFailure::Refused {
                        missing: says_missing(&error),
                        error: from_error_shape(&error, &self.secret),
                    })
                };
                let _ = reply.send(Reply::Answer(answer));
                Ok(true)
            }
            Decoded::Event { event, payload } => {
                if event == "shutdown" {
                    self.restart_expected = payload
                        .get("restartExpectedMs")
                        .and_then(Value::as_u64)
                        .map(Duration::from_millis);
                }
                tracing::trace!(url = %self.url, %event, "skipping an event");
                Ok(false)
            }
            Decoded::Skip => Ok(false),
            Decoded::Close(frame) => Err(close_error(frame, &self.secret, self.restart_expected)),
        }
    }

    async fn close_politely(&mut self) {
        let ws = &mut self.ws;
        let polite = async {
            if ws.close(None).await.is_ok() {
                while let Some(Ok(_)) = ws.next().await {}
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, polite).await;
    }

    fn finish(mut self, error: GatewayError) {
        *lock(&self.shared.dead) = Some(error.clone());
        for (_, reply) in self.pending.drain() {
            let _ = reply.send(Reply::Failed {
                error: error.clone(),
                written: true,
            });
        }
        self.rx.close();
        while let Ok(command) = self.rx.try_recv() {
            match command {
                Command::Call(out) => {
                    let _ = out.state.compare_exchange(
                        QUEUED,
                        ABANDONED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    let _ = out.reply.send(Reply::Failed {
                        error: error.clone(),
                        written: false,
                    });
                }
                Command::Close(Some(ack)) => {
                    let _ = ack.send(());
                }
                Command::Close(None) | Command::Abandon(_) => {}
            }
        }
        tracing::debug!(url = %self.url, reason = %error, "gateway connection ended");
    }
}

/// Whether an error answer says the file does not exist.
fn says_missing(error: &Value) -> bool {
    let code = error.get("code").and_then(Value::as_str).unwrap_or("");
    code == "NOT_FOUND"
        || code == "ENOENT"
        || error.pointer("/details/missing").and_then(Value::as_bool) == Some(true)
        || error
            .pointer("/details/fileMissing")
            .and_then(Value::as_bool)
            == Some(true)
}

/// Drops a connection whose handshake failed, sending a close frame in the background.
fn abort(mut ws: Ws) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(None)).await;
    });
}

/// Builds the upgrade request: checks the URL (`wss://`, or `ws://` to a loopback address;
/// no userinfo, query or fragment) and adds the edge header.
fn upgrade_request(endpoint: &Endpoint) -> Result<Request, GatewayError> {
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

async fn connect_ws(request: Request, tls: bool) -> Result<Ws, GatewayError> {
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
enum Decoded {
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

fn decode(message: Message) -> Result<Decoded, GatewayError> {
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

fn close_error(
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

/// Reads until the next response or event, during the handshake.
async fn next_incoming(ws: &mut Ws, secret: &str) -> Result<Decoded, GatewayError> {
    loop {
        let message = match ws.next().await {
            None => {
                return Err(GatewayError::Unreachable(
                    "connection closed by the gateway".into(),
                ));
            }
            Some(Err(e)) => return Err(map_ws_error(e)),
            Some(Ok(m)) => m,
        };
        match decode(message)? {
            Decoded::Skip => continue,
            Decoded::Close(frame) => return Err(close_error(frame, secret, None)),
            other => return Ok(other),
        }
    }
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
        params["auth"] = json!({ "token": token });
    }
    params
}

async fn handshake(
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

    #[test]
    fn connect_params_carry_the_token_only_in_token_mode() {
        let p = connect_params(&Auth::Token("tok".into()));
        assert_eq!(p["auth"], json!({"token": "tok"}));
        let p = connect_params(&Auth::EdgeHeader {
            name: "x-api-key".into(),
            value: "k".into(),
        });
        assert!(p.get("auth").is_none(), "{p}");
        assert!(!p.to_string().contains("\"k\""));
    }

    #[test]
    fn missing_errors() {
        assert!(says_missing(&json!({"code":"NOT_FOUND","message":"x"})));
        assert!(says_missing(&json!({"code":"ENOENT","message":"x"})));
        assert!(says_missing(
            &json!({"code":"INVALID_REQUEST","message":"x","details":{"missing":true}})
        ));
        assert!(says_missing(
            &json!({"code":"INVALID_REQUEST","message":"x","details":{"fileMissing":true}})
        ));
        assert!(!says_missing(
            &json!({"code":"INVALID_REQUEST","message":"agent \"nobody\" not found"})
        ));
    }
}
