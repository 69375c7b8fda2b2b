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
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::endpoint::Endpoint;
use crate::error::{GatewayError, from_error_shape};
use crate::frames::{
    Decoded, MAX_MESSAGE_BYTES, Ws, abort, close_error, connect_ws, decode, map_ws_error, received,
    upgrade_request,
};
use crate::handshake::{Hello, handshake};

/// Longest time one frame may take to be written before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a polite close waits for the gateway's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
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
    /// Where the gateway's events go (skipped when `None`), and the interim `accepted`
    /// answers of two-stage requests ([`Conn::call_final`]) as [`GatewayEvent::ACCEPTED`].
    pub events: Option<mpsc::UnboundedSender<GatewayEvent>>,
}

/// One `event` frame from the gateway.
#[derive(Debug, Clone)]
pub(crate) struct GatewayEvent {
    pub event: String,
    pub payload: Value,
}

impl GatewayEvent {
    /// The name under which an interim `{"status":"accepted"}` answer is passed on.
    pub const ACCEPTED: &'static str = "occ.accepted";
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
    /// A two-stage request: an answer with `status: "accepted"` is interim, and the request
    /// stays pending until its final answer.
    expect_final: bool,
}

struct Pending {
    reply: oneshot::Sender<Reply>,
    expect_final: bool,
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
            events: options.events,
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
        self.request(method, params, deadline, false).await
    }

    /// Like [`Conn::call`] for a two-stage method (`agent`): the gateway first answers
    /// `{"status": "accepted", …}` (passed to the events channel, if any) and later answers the
    /// same id with the result, which is what this returns.
    pub async fn call_final(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, CallFailure> {
        self.request(method, params, deadline, true).await
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        expect_final: bool,
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
            expect_final,
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
    pending: HashMap<String, Pending>,
    events: Option<mpsc::UnboundedSender<GatewayEvent>>,
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
            expect_final,
        } = out;
        if state
            .compare_exchange(QUEUED, WRITING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Abandoned before it was sent: never written.
            return Ok(());
        }
        self.pending.insert(
            id.clone(),
            Pending {
                reply,
                expect_final,
            },
        );
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
                if let Some(pending) = self.pending.remove(&id) {
                    let _ = pending.reply.send(Reply::Failed {
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
        match decode(received(message)?)? {
            Decoded::Res {
                id,
                ok,
                payload,
                error,
            } => {
                let Some(pending) = self.pending.remove(&id) else {
                    tracing::debug!(url = %self.url, %id, "skipping a response to an abandoned or unknown request");
                    return Ok(false);
                };
                if ok
                    && pending.expect_final
                    && payload.get("status").and_then(Value::as_str) == Some("accepted")
                {
                    if let Some(events) = &self.events {
                        let _ = events.send(GatewayEvent {
                            event: GatewayEvent::ACCEPTED.into(),
                            payload,
                        });
                    }
                    self.pending.insert(id, pending);
                    return Ok(true);
                }
                let reply = pending.reply;
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
                match &self.events {
                    Some(events) => {
                        let _ = events.send(GatewayEvent { event, payload });
                    }
                    None => tracing::trace!(url = %self.url, %event, "skipping an event"),
                }
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
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Reply::Failed {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
