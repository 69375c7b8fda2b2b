//! One chat turn with an Agent through its gateway's native `agent` method.
//!
//! A turn has a connection of its own (the gateway sends run events to every operator
//! connection, so a pooled connection would carry other turns' events). The request
//! `agent {agentId, sessionKey, message, deliver: false, timeout, idempotencyKey}` is answered
//! twice on its id: first `{status: "accepted", runId}` (the run id is the idempotency key),
//! then the result: `ok: true` with `status` `ok` (the reply's payloads and the run's meta:
//! provider, model, usage, duration) or `timeout`, or `ok: false` (`UNAVAILABLE`) when the model
//! failed. While it runs, `chat` events of the run — sent to every operator connection, so they
//! are filtered by `runId` — give the reply as it is produced: `delta` and `final` carry the
//! text so far in `message` (their `deltaText` increments may repeat or merge, so they are not
//! used), `error` the failure (`errorMessage`, `errorKind` — `timeout` for a deadline —
//! `errorDetail`), `aborted` a stopped run.
//!
//! One deadline bounds the turn. A turn abandoned after it started — deadline, or the caller
//! dropping the future (a client that went away) — is aborted on the gateway (`chat.abort`);
//! closing the connection alone would not stop it.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::conn::{CallFailure, Conn, ConnOptions, GatewayEvent};
use crate::endpoint::Endpoint;
use crate::error::GatewayError;
use crate::handshake::{REQUIRED_SCOPES, require_scopes};

/// Longest chat message, in bytes of UTF-8.
pub const MAX_CHAT_MESSAGE_BYTES: usize = 16 * 1024;
/// Longest session key.
pub const MAX_SESSION_KEY_BYTES: usize = 128;
/// How long the abort of an abandoned turn may take.
const ABORT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to send.
#[derive(Clone)]
pub struct ChatTurn<'a> {
    /// The native agent (`main` for occ's gateways).
    pub agent_id: &'a str,
    /// The conversation; the gateway keeps its history.
    pub session_key: &'a str,
    /// The user's message.
    pub message: &'a str,
}

impl fmt::Debug for ChatTurn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message is the user's: never in logs.
        f.debug_struct("ChatTurn")
            .field("agent_id", &self.agent_id)
            .field("session_key", &self.session_key)
            .field("message_bytes", &self.message.len())
            .finish()
    }
}

/// The Agent's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The gateway's run id.
    pub run_id: String,
    /// The reply's text (its payloads, in order).
    pub text: String,
    /// The provider that answered, as the gateway reports it.
    pub provider: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// Token usage as the gateway reports it (`input`, `output`, …).
    pub usage: Option<Value>,
    /// The run's duration as the gateway measured it.
    pub duration_ms: Option<u64>,
}

/// A model's failure, as the gateway reports it (never carrying credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFailure {
    /// The gateway's error message (scrubbed of the connection's credential).
    pub message: String,
    /// The kind of error (`errorKind`, e.g. `auth`, `rate_limit`), when reported.
    pub kind: Option<String>,
    /// The provider's HTTP status, when reported.
    pub http_status: Option<u16>,
    /// The provider's error type or code, when reported.
    pub provider_code: Option<String>,
}

/// Why a turn has no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatError {
    /// The gateway could not be reached or refused the request before running it.
    Unavailable(GatewayError),
    /// The turn ran and the model failed.
    Model(ModelFailure),
    /// The deadline passed (the turn was aborted on the gateway).
    Timeout,
    /// The turn was started and the connection failed before its result came.
    Interrupted(GatewayError),
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatError::Unavailable(e) => write!(f, "gateway unavailable: {e}"),
            ChatError::Model(m) => write!(f, "model failed: {}", m.message),
            ChatError::Timeout => f.write_str("the turn did not finish before its deadline"),
            ChatError::Interrupted(e) => write!(f, "the turn was interrupted: {e}"),
        }
    }
}

impl std::error::Error for ChatError {}

/// Aborts the run on the gateway if the turn is abandoned before its result (deadline or the
/// caller's future dropped).
struct AbortGuard {
    conn: Conn,
    session_key: String,
    run_id: Option<String>,
    armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        let conn = self.conn.clone();
        if !self.armed {
            conn.close_now();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            conn.close_now();
            return;
        };
        let mut params = json!({"sessionKey": self.session_key});
        if let Some(run_id) = &self.run_id {
            params["runId"] = run_id.clone().into();
        }
        runtime.spawn(async move {
            let deadline = Instant::now() + ABORT_TIMEOUT;
            if let Err(e) = conn.call("chat.abort", params, deadline).await {
                tracing::info!(error = %e.into_error(), "aborting an abandoned chat turn failed");
            }
            conn.close().await;
        });
    }
}

/// Runs one turn before `deadline`; each piece of the reply is sent to `deltas` as it is
/// produced (in order; their concatenation is the reply's text).
pub async fn chat_turn(
    endpoint: &Endpoint,
    turn: ChatTurn<'_>,
    deadline: Instant,
    deltas: Option<mpsc::UnboundedSender<String>>,
) -> Result<ChatReply, ChatError> {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let options = ConnOptions {
        events: Some(events_tx),
        ..ConnOptions::default()
    };
    let (conn, hello) = Conn::open(endpoint, deadline, options)
        .await
        .map_err(|e| match e {
            GatewayError::Timeout => ChatError::Timeout,
            e => ChatError::Unavailable(e),
        })?;
    if let Err(e) = require_scopes(&hello, &REQUIRED_SCOPES) {
        conn.close_now();
        return Err(ChatError::Unavailable(e));
    }
    let idempotency_key = uuid::Uuid::new_v4().to_string();
    let timeout_s = deadline
        .saturating_duration_since(Instant::now())
        .as_secs()
        .max(1);
    let params = json!({
        "agentId": turn.agent_id,
        "sessionKey": turn.session_key,
        "message": turn.message,
        "deliver": false,
        "timeout": timeout_s,
        "idempotencyKey": idempotency_key,
    });
    let mut guard = AbortGuard {
        conn: conn.clone(),
        session_key: turn.session_key.to_owned(),
        run_id: Some(idempotency_key.clone()),
        armed: true,
    };
    let call = conn.call_final("agent", params, deadline);
    tokio::pin!(call);
    let mut run = RunEvents::new(idempotency_key);
    let outcome = loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => {
                run.on_event(&event, deltas.as_ref());
                if let Some(run_id) = &run.run_id {
                    guard.run_id = Some(run_id.clone());
                }
            }
            result = &mut call => break result,
        }
    };
    // Events that arrived before the final answer still count (their order is the socket's).
    while let Ok(event) = events.try_recv() {
        run.on_event(&event, deltas.as_ref());
    }
    let result = match outcome {
        Ok(payload) => {
            guard.armed = false;
            run.finish(&payload, deltas.as_ref(), endpoint.auth.secret())
        }
        Err(CallFailure::Refused { error, .. }) => {
            guard.armed = false;
            // Refused after the run was accepted: the run failed (the model, as the gateway
            // reports it). Refused before: the gateway would not run it.
            Err(match (run.error.take(), &run.run_id) {
                (Some(failure), _) => ChatError::Model(failure),
                (None, Some(_)) => ChatError::Model(ModelFailure {
                    message: match error {
                        GatewayError::Unavailable { message, .. } => message,
                        other => other.to_string(),
                    },
                    kind: None,
                    http_status: None,
                    provider_code: None,
                }),
                (None, None) => ChatError::Unavailable(error),
            })
        }
        Err(CallFailure::NotSent(error)) => {
            guard.armed = false;
            Err(match error {
                GatewayError::Timeout => ChatError::Timeout,
                e => ChatError::Unavailable(e),
            })
        }
        // Deadline with the run started: the guard aborts it.
        Err(CallFailure::NoAnswer(GatewayError::Timeout)) => Err(ChatError::Timeout),
        Err(CallFailure::NoAnswer(error)) => {
            guard.armed = false;
            Err(ChatError::Interrupted(error))
        }
    };
    drop(guard);
    result
}

/// What the run's events said so far.
struct RunEvents {
    /// The id the run's events carry (the idempotency key until the gateway says otherwise).
    run_id: Option<String>,
    expected_run_id: String,
    /// The text passed on so far.
    streamed: String,
    error: Option<ModelFailure>,
}

impl RunEvents {
    fn new(idempotency_key: String) -> Self {
        Self {
            run_id: None,
            expected_run_id: idempotency_key,
            streamed: String::new(),
            error: None,
        }
    }

    fn is_ours(&self, payload: &Value) -> bool {
        let id = payload.get("runId").and_then(Value::as_str);
        id.is_some_and(|id| {
            id == self.expected_run_id || self.run_id.as_deref().is_some_and(|r| r == id)
        })
    }

    fn on_event(&mut self, event: &GatewayEvent, deltas: Option<&mpsc::UnboundedSender<String>>) {
        if event.event == GatewayEvent::ACCEPTED {
            if let Some(id) = event.payload.get("runId").and_then(Value::as_str) {
                self.run_id = Some(id.to_owned());
            }
            return;
        }
        if event.event != "chat" || !self.is_ours(&event.payload) {
            return;
        }
        let payload = &event.payload;
        match payload.get("state").and_then(Value::as_str) {
            Some("delta" | "final") => {
                if let Some(text) = message_text(payload.get("message")) {
                    self.stream_to(&text, deltas);
                }
            }
            Some("error") => self.error = Some(model_failure(payload)),
            _ => {}
        }
    }

    /// Passes on what `text` (the reply so far) adds to what was streamed. A text that does
    /// not extend it (the gateway rewrote the reply) is not streamed; the final answer carries
    /// the whole reply.
    fn stream_to(&mut self, text: &str, deltas: Option<&mpsc::UnboundedSender<String>>) {
        let Some(added) = text.strip_prefix(self.streamed.as_str()) else {
            return;
        };
        if added.is_empty() {
            return;
        }
        if let Some(deltas) = deltas {
            let _ = deltas.send(added.to_owned());
        }
        self.streamed.push_str(added);
    }

    fn finish(
        &mut self,
        payload: &Value,
        deltas: Option<&mpsc::UnboundedSender<String>>,
        secret: &str,
    ) -> Result<ChatReply, ChatError> {
        let status = payload.get("status").and_then(Value::as_str).unwrap_or("");
        match status {
            "ok" => {}
            "timeout" => return Err(ChatError::Timeout),
            _ => {
                let failure = self.error.take().unwrap_or_else(|| ModelFailure {
                    message: scrub(
                        payload
                            .get("summary")
                            .and_then(Value::as_str)
                            .unwrap_or("the run failed"),
                        secret,
                    ),
                    kind: None,
                    http_status: None,
                    provider_code: None,
                });
                return Err(ChatError::Model(failure));
            }
        }
        let result = payload.get("result").unwrap_or(&Value::Null);
        let text = result
            .get("payloads")
            .and_then(Value::as_array)
            .map(|payloads| {
                payloads
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_default();
        // A run that ended without text answered nothing: with an error event, that error.
        if text.is_empty()
            && let Some(failure) = self.error.take()
        {
            return Err(ChatError::Model(failure));
        }
        self.stream_to(&text, deltas);
        let meta = result.get("meta").unwrap_or(&Value::Null);
        let agent_meta = meta.get("agentMeta").unwrap_or(&Value::Null);
        let string = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Ok(ChatReply {
            run_id: string(payload, "runId")
                .or_else(|| self.run_id.clone())
                .unwrap_or_else(|| self.expected_run_id.clone()),
            text,
            provider: string(agent_meta, "provider"),
            model: string(agent_meta, "model"),
            usage: agent_meta.get("usage").filter(|u| u.is_object()).cloned(),
            duration_ms: meta.get("durationMs").and_then(Value::as_u64),
        })
    }
}

/// The text of a chat message (`content` as a string, or its `text` parts joined).
fn message_text(message: Option<&Value>) -> Option<String> {
    let content = message?.get("content")?;
    if let Some(text) = content.as_str() {
        return Some(text.to_owned());
    }
    let parts = content.as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<String>(),
    )
}

fn model_failure(payload: &Value) -> ModelFailure {
    let detail = payload.get("errorDetail").unwrap_or(&Value::Null);
    let string = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    ModelFailure {
        message: string(payload, "errorMessage").unwrap_or_else(|| "the model failed".into()),
        kind: string(payload, "errorKind"),
        http_status: detail
            .get("httpStatus")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
        provider_code: string(detail, "providerErrorType")
            .or_else(|| string(detail, "providerErrorCode"))
            .or_else(|| string(detail, "code")),
    }
}

fn scrub(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_owned()
    } else {
        text.replace(secret, "[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(run: &str, state: &str, text: &str) -> GatewayEvent {
        GatewayEvent {
            event: "chat".into(),
            payload: json!({"runId": run, "state": state,
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}),
        }
    }

    #[test]
    fn deltas_are_what_each_event_adds_for_this_run_only() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut run = RunEvents::new("r1".into());
        run.on_event(&chat("r1", "delta", "Hel"), Some(&tx));
        run.on_event(&chat("other", "delta", "nope"), Some(&tx));
        run.on_event(&chat("r1", "delta", "Hello"), Some(&tx));
        run.on_event(&chat("r1", "delta", "Hello"), Some(&tx));
        let reply = run
            .finish(
                &json!({"runId": "r1", "status": "ok", "result": {
                    "payloads": [{"text": "Hello, world"}],
                    "meta": {"durationMs": 12, "agentMeta": {"provider": "fake", "model": "m",
                        "usage": {"input": 3, "output": 2}}}}}),
                Some(&tx),
                "",
            )
            .unwrap();
        drop(tx);
        let mut got = Vec::new();
        while let Ok(d) = rx.try_recv() {
            got.push(d);
        }
        assert_eq!(got, ["Hel", "lo", ", world"]);
        assert_eq!(reply.text, "Hello, world");
        assert_eq!(reply.model.as_deref(), Some("m"));
        assert_eq!(reply.duration_ms, Some(12));
        assert_eq!(reply.usage, Some(json!({"input": 3, "output": 2})));
    }

    #[test]
    fn an_error_event_explains_a_failed_run() {
        let mut run = RunEvents::new("r1".into());
        run.on_event(
            &GatewayEvent {
                event: "chat".into(),
                payload: json!({"runId": "r1", "state": "error", "errorMessage": "401 bad key",
                    "errorKind": "auth", "errorDetail": {"httpStatus": 401,
                    "providerErrorType": "invalid_api_key"}}),
            },
            None,
        );
        let err = run
            .finish(&json!({"runId": "r1", "status": "error"}), None, "")
            .unwrap_err();
        assert_eq!(
            err,
            ChatError::Model(ModelFailure {
                message: "401 bad key".into(),
                kind: Some("auth".into()),
                http_status: Some(401),
                provider_code: Some("invalid_api_key".into()),
            })
        );
    }

    #[test]
    fn a_failed_run_without_events_names_its_summary_scrubbed() {
        let mut run = RunEvents::new("r1".into());
        let err = run
            .finish(
                &json!({"status": "error", "summary": "boom tok-123"}),
                None,
                "tok-123",
            )
            .unwrap_err();
        assert!(matches!(err, ChatError::Model(m) if m.message == "boom [redacted]"));
    }

    use crate::fake::FakeGateway;

    const TURN: ChatTurn<'static> = ChatTurn {
        agent_id: "main",
        session_key: "occ-chat",
        message: "hello",
    };

    fn soon(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    fn event(run: &str, state: &str, text: &str) -> Value {
        json!({"type": "event", "event": "chat", "payload": {"runId": run, "sessionKey": "agent:main:occ-chat",
            "state": state, "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}})
    }

    #[tokio::test]
    async fn a_turn_is_the_agent_method_with_its_run_events() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let (id, method, params) = peer.expect_req().await;
            assert_eq!(method, "agent");
            assert_eq!(params["agentId"], "main");
            assert_eq!(params["sessionKey"], "occ-chat");
            assert_eq!(params["message"], "hello");
            assert_eq!(params["deliver"], false);
            let run = params["idempotencyKey"].as_str().unwrap().to_owned();
            peer.res_ok(&id, json!({"runId": run, "status": "accepted"}))
                .await;
            peer.send(event(&run, "delta", "Hi")).await;
            peer.send(event("someone-else", "delta", "not ours")).await;
            peer.send(event(&run, "delta", "Hi there")).await;
            peer.send(event(&run, "final", "Hi there.")).await;
            peer.res_ok(
                &id,
                json!({"runId": run, "status": "ok", "summary": "completed",
                "result": {"payloads": [{"text": "Hi there."}],
                    "meta": {"durationMs": 7, "agentMeta": {"provider": "p", "model": "m"}}}}),
            )
            .await;
            peer.linger().await;
        })
        .await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let reply = chat_turn(&gw.endpoint(), TURN, soon(10), Some(tx))
            .await
            .unwrap();
        assert_eq!(reply.text, "Hi there.");
        assert_eq!(
            (reply.provider.as_deref(), reply.model.as_deref()),
            (Some("p"), Some("m"))
        );
        let mut got = Vec::new();
        while let Some(d) = rx.recv().await {
            got.push(d);
        }
        assert_eq!(got, ["Hi", " there", "."]);
    }

    #[tokio::test]
    async fn a_failure_after_acceptance_is_the_model_and_before_it_the_gateway() {
        let gw = FakeGateway::start(|n, mut peer| async move {
            peer.handshake().await;
            let (id, _, params) = peer.expect_req().await;
            let error = json!({"code": "UNAVAILABLE", "message": "provider returned HTTP 401"});
            if n == 0 {
                let run = params["idempotencyKey"].as_str().unwrap().to_owned();
                peer.res_ok(&id, json!({"runId": run, "status": "accepted"}))
                    .await;
                peer.res_err(&id, error).await;
            } else {
                peer.res_err(
                    &id,
                    json!({"code": "INVALID_REQUEST", "message": "unknown agent"}),
                )
                .await;
            }
            peer.linger().await;
        })
        .await;
        let err = chat_turn(&gw.endpoint(), TURN, soon(10), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ChatError::Model(m) if m.message.contains("HTTP 401")),
            "{err:?}"
        );
        let err = chat_turn(&gw.endpoint(), TURN, soon(10), None)
            .await
            .unwrap_err();
        assert!(matches!(err, ChatError::Unavailable(_)), "{err:?}");
    }

    #[tokio::test]
    async fn a_turn_past_its_deadline_is_aborted_on_the_gateway() {
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let seen_tx = seen_tx.clone();
            async move {
                peer.handshake().await;
                let (id, _, params) = peer.expect_req().await;
                let run = params["idempotencyKey"].as_str().unwrap().to_owned();
                peer.res_ok(&id, json!({"runId": run, "status": "accepted"}))
                    .await;
                // no result: the client gives up, cancels the request and aborts the run
                peer.expect_cancel(&id).await;
                let (abort_id, method, params) = peer.expect_req().await;
                seen_tx.send((method, params, run)).unwrap();
                peer.res_ok(&abort_id, json!({"ok": true, "aborted": true}))
                    .await;
                peer.linger().await;
            }
        })
        .await;
        let deadline = Instant::now() + Duration::from_millis(500);
        let err = chat_turn(&gw.endpoint(), TURN, deadline, None)
            .await
            .unwrap_err();
        assert_eq!(err, ChatError::Timeout);
        let (method, params, run) = tokio::time::timeout(Duration::from_secs(5), seen.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(method, "chat.abort");
        assert_eq!(params, json!({"sessionKey": "occ-chat", "runId": run}));
    }
}
