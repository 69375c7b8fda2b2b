//! A local model provider for tests: a real HTTP server on 127.0.0.1 speaking the parts of the
//! OpenAI API that OpenClaw gateways and the Codex CLI call — chat completions (plain and
//! streamed as server-sent events) and the Responses API (plain and streamed with the events a
//! Codex turn needs: `response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.output_item.done`, `response.completed` with usage)
//! — and `GET /v1/models`. It records every request (method, path, headers, JSON body), so a
//! test can prove which credential reached the provider and which history a turn carried.
//!
//! The reply is [`FakeModel::reply`] (default `Hello from the fake model.`), streamed in a few
//! deltas. [`FakeModel::call_tool`] makes the next turn's first chat completion a tool call
//! instead (OpenClaw runs the tool, sends its result back, and the fake then replies), so a test
//! can drive an Agent's own tools (`read`, `exec`, `write`…) as a prompt-injected model would,
//! and read what the tool returned ([`FakeModel::tool_results`]). It can be made to fail with an OpenAI-style error ([`FakeModel::fail_with`]) or to
//! stall ([`FakeModel::stall`]). It proves what occ and the runtimes send and how they handle
//! answers; it is not a model.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, `GET`.
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Request headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when there was none or it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization: Bearer` credential, if any.
    pub fn bearer(&self) -> Option<&str> {
        self.header("authorization")?.strip_prefix("Bearer ")
    }
}

/// A scripted failure: the HTTP status and the error `code`/`type` of the OpenAI error body.
#[derive(Debug, Clone)]
pub struct Failure {
    /// HTTP status.
    pub status: u16,
    /// `error.code`.
    pub code: String,
    /// `error.message`.
    pub message: String,
}

#[derive(Default)]
struct Shared {
    requests: Vec<RecordedRequest>,
    reply: Option<String>,
    /// Tool calls to make, one per turn, in order: `(name, arguments)`.
    tool_calls: std::collections::VecDeque<(String, Value)>,
    failure: Option<Failure>,
    stall: Option<Duration>,
}

/// The running fake provider. Stops when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

const DEFAULT_REPLY: &str = "Hello from the fake model.";
/// The model id it lists and answers as.
pub const MODEL_ID: &str = "fake-model";

impl FakeModel {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> FakeModel {
        Self::start_on(0).await
    }

    /// Starts on loopback port `port` (0: any), e.g. again where a stopped one listened.
    pub async fn start_on(port: u16) -> FakeModel {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind fake model");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel {
            addr,
            shared,
            server,
        }
    }

    /// `http://127.0.0.1:<port>/v1`, the base URL providers are configured with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// An Agent's document whose model is this one (provider `fake`, OpenAI chat completions),
    /// with `api_key` as the provider's `apiKey` (a literal, or `${VAR}` for a bound Secret);
    /// plugins and cron off.
    pub fn agent_document(&self, api_key: &str) -> Value {
        serde_json::json!({
            "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}},
            "models": {"providers": {"fake": {
                "baseUrl": self.base_url(),
                "api": "openai-completions",
                "apiKey": api_key,
                "models": [{"id": "fake-model", "name": "Fake model"}],
            }}},
            "plugins": {"enabled": false},
            "cron": {"enabled": false},
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Answers every later turn with `text`.
    pub fn reply(&self, text: &str) {
        self.shared.lock().expect("lock").reply = Some(text.to_owned());
    }

    /// Answers the next turn (the next chat completion whose last message is not a tool result)
    /// with a call of tool `name` with `arguments`; the completion after the tool's result gets
    /// the reply. Calls queue up, one per turn.
    pub fn call_tool(&self, name: &str, arguments: Value) {
        self.shared
            .lock()
            .expect("lock")
            .tool_calls
            .push_back((name.to_owned(), arguments));
    }

    /// The content of every tool result the model was sent so far, in order (each as the
    /// JSON text of the message's `content`, or the string itself).
    pub fn tool_results(&self) -> Vec<String> {
        let mut out = Vec::new();
        for request in self.requests_to("/v1/chat/completions") {
            let Some(messages) = request.body["messages"].as_array() else {
                continue;
            };
            for m in messages.iter().filter(|m| m["role"] == "tool") {
                let text = match &m["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                if !out.contains(&text) {
                    out.push(text);
                }
            }
        }
        out
    }

    /// Fails every later request with this error (`None`: answer again).
    pub fn fail_with(&self, failure: Option<Failure>) {
        self.shared.lock().expect("lock").failure = failure;
    }

    /// Waits this long before answering every later request (`None`: answer at once).
    pub fn stall(&self, delay: Option<Duration>) {
        self.shared.lock().expect("lock").stall = delay;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().expect("lock").requests.clone()
    }

    /// The requests to one path (e.g. `/v1/responses`).
    pub fn requests_to(&self, path: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

async fn handle(State(shared): State<Arc<Mutex<Shared>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: headers(&parts.headers),
        body: body.clone(),
    };
    let answers_a_tool_result = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let (reply, tool_call, failure, stall) = {
        let mut s = shared.lock().expect("lock");
        s.requests.push(recorded.clone());
        let tool_call = if recorded.path.trim_end_matches('/') == "/v1/chat/completions"
            && !answers_a_tool_result
        {
            s.tool_calls.pop_front()
        } else {
            None
        };
        (
            s.reply.clone().unwrap_or_else(|| DEFAULT_REPLY.to_owned()),
            tool_call,
            s.failure.clone(),
            s.stall,
        )
    };
    if let Some(delay) = stall {
        tokio::time::sleep(delay).await;
    }
    if let Some(f) = failure {
        let status = StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (
            status,
            Json(json!({"error": {"message": f.message, "type": f.code, "code": f.code, "param": null}})),
        )
            .into_response();
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if let Some((name, arguments)) = tool_call {
        return if stream {
            sse(tool_call_events(&body, &name, &arguments))
        } else {
            Json(tool_call_completion(&body, &name, &arguments)).into_response()
        };
    }
    match (parts.method.as_str(), recorded.path.trim_end_matches('/')) {
        ("GET", "/v1/models") => Json(json!({
            "object": "list",
            "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "occ-tests"}],
        }))
        .into_response(),
        ("POST", "/v1/chat/completions") if stream => sse(chat_events(&body, &reply)),
        ("POST", "/v1/chat/completions") => Json(chat_completion(&body, &reply)).into_response(),
        ("POST", "/v1/responses") if stream => sse(response_events(&body, &reply)),
        ("POST", "/v1/responses") => Json(response_object(&body, &reply, "completed")).into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": {"message": "unknown route", "type": "not_found", "code": "not_found"}})),
        )
            .into_response(),
    }
}

fn headers(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The reply in three deltas (streaming clients must assemble them in order).
fn deltas(reply: &str) -> Vec<String> {
    let words: Vec<&str> = reply.split_inclusive(' ').collect();
    let third = words.len().div_ceil(3).max(1);
    words.chunks(third).map(|c| c.concat()).collect()
}

fn usage_tokens(body: &Value, reply: &str) -> (u64, u64) {
    let prompt = body.to_string().len() as u64 / 4 + 1;
    let completion = reply.split_whitespace().count() as u64;
    (prompt, completion)
}

fn model_of(body: &Value) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or(MODEL_ID)
        .to_owned()
}

fn chat_completion(body: &Value, reply: &str) -> Value {
    let (prompt, completion) = usage_tokens(body, reply);
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model_of(body),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })
}

fn chat_events(body: &Value, reply: &str) -> Vec<(Option<&'static str>, Value)> {
    let model = model_of(body);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
               "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    for d in deltas(reply) {
        events.push((None, chunk(json!({"content": d}), Value::Null)));
    }
    let (prompt, completion) = usage_tokens(body, reply);
    let mut last = chunk(json!({}), json!("stop"));
    last["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion});
    events.push((None, last));
    events
}

const TOOL_CALL_ID: &str = "call_fake_1";

fn tool_call_completion(body: &Value, name: &str, arguments: &Value) -> Value {
    let (prompt, completion) = usage_tokens(body, "");
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model_of(body),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                     "tool_calls": [{"id": TOOL_CALL_ID, "type": "function",
                                     "function": {"name": name, "arguments": arguments.to_string()}}]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })
}

/// A streamed tool call: the call's id and name first, then its arguments, then
/// `finish_reason: tool_calls`.
fn tool_call_events(
    body: &Value,
    name: &str,
    arguments: &Value,
) -> Vec<(Option<&'static str>, Value)> {
    let model = model_of(body);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
               "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let (prompt, completion) = usage_tokens(body, "");
    let mut last = chunk(json!({}), json!("tool_calls"));
    last["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion});
    vec![
        (
            None,
            chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                       "id": TOOL_CALL_ID, "type": "function",
                       "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ),
        ),
        (
            None,
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments.to_string()}}]}),
                Value::Null,
            ),
        ),
        (None, last),
    ]
}

fn message_item(reply: &str, status: &str) -> Value {
    json!({"id": "msg_fake", "type": "message", "status": status, "role": "assistant",
           "content": [{"type": "output_text", "text": reply, "annotations": []}]})
}

fn response_object(body: &Value, reply: &str, status: &str) -> Value {
    let (prompt, completion) = usage_tokens(body, reply);
    let output = if status == "completed" {
        json!([message_item(reply, "completed")])
    } else {
        json!([])
    };
    json!({
        "id": "resp_fake", "object": "response", "created_at": 0, "status": status,
        "model": model_of(body), "output": output,
        "usage": {"input_tokens": prompt, "output_tokens": completion,
                  "total_tokens": prompt + completion,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    })
}

fn response_events(body: &Value, reply: &str) -> Vec<(Option<&'static str>, Value)> {
    let mut events = vec![
        (
            Some("response.created"),
            json!({"type": "response.created", "sequence_number": 0,
                   "response": response_object(body, "", "in_progress")}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                   "item": {"id": "msg_fake", "type": "message", "status": "in_progress",
                            "role": "assistant", "content": []}}),
        ),
    ];
    for (i, d) in deltas(reply).into_iter().enumerate() {
        events.push((
            Some("response.output_text.delta"),
            json!({"type": "response.output_text.delta", "sequence_number": 2 + i,
                   "item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": d}),
        ));
    }
    let n = events.len();
    events.push((
        Some("response.output_item.done"),
        json!({"type": "response.output_item.done", "sequence_number": n, "output_index": 0,
               "item": message_item(reply, "completed")}),
    ));
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "sequence_number": n + 1,
               "response": response_object(body, reply, "completed")}),
    ));
    events
}

/// A complete server-sent-event body (chat completions end with `data: [DONE]`).
fn sse(events: Vec<(Option<&'static str>, Value)>) -> Response {
    let chat = events.first().is_some_and(|(name, _)| name.is_none());
    let mut text = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            text.push_str(&format!("event: {name}\n"));
        }
        text.push_str(&format!("data: {data}\n\n"));
    }
    if chat {
        text.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(text))
        .expect("sse response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn post(model: &FakeModel, path: &str, body: Value) -> String {
        let mut stream = tokio::net::TcpStream::connect(model.addr).await.unwrap();
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test-key\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn it_streams_chat_completions_and_responses_and_records_the_key() {
        let model = FakeModel::start().await;
        model.reply("one two three four");
        let chat = post(
            &model,
            "/v1/chat/completions",
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        assert!(chat.contains("text/event-stream"), "{chat}");
        assert!(chat.contains("data: [DONE]"), "{chat}");
        let responses = post(
            &model,
            "/v1/responses",
            json!({"model": "m", "stream": true, "input": "hi"}),
        )
        .await;
        for event in [
            "response.created",
            "response.output_item.added",
            "response.output_text.delta",
            "response.output_item.done",
            "response.completed",
        ] {
            assert!(responses.contains(&format!("event: {event}")), "{event}");
        }
        let seen = model.requests();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].bearer(), Some("sk-test-key"));
        assert_eq!(seen[1].body["input"], "hi");
        model.fail_with(Some(Failure {
            status: 429,
            code: "rate_limit_exceeded".into(),
            message: "slow down".into(),
        }));
        let refused = post(&model, "/v1/chat/completions", json!({"model": "m"})).await;
        assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
        assert!(refused.contains("rate_limit_exceeded"));
    }

    #[tokio::test]
    async fn a_queued_tool_call_answers_the_next_turn_and_its_result_is_recorded() {
        let model = FakeModel::start().await;
        model.reply("done");
        model.call_tool("read", json!({"path": "/etc/hostname"}));
        let user = json!({"model": "m", "stream": true,
                          "messages": [{"role": "user", "content": "read it"}]});
        let call = post(&model, "/v1/chat/completions", user.clone()).await;
        assert!(call.contains("\"tool_calls\""), "{call}");
        assert!(call.contains("\"finish_reason\":\"tool_calls\""), "{call}");
        assert!(call.contains(r#"{\"path\":\"/etc/hostname\"}"#), "{call}");
        let after = post(
            &model,
            "/v1/chat/completions",
            json!({"model": "m", "stream": true, "messages": [
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": TOOL_CALL_ID,
                  "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": "the file's text"},
            ]}),
        )
        .await;
        assert!(after.contains("done"), "{after}");
        assert!(!after.contains("tool_calls"), "{after}");
        assert_eq!(model.tool_results(), vec!["the file's text".to_owned()]);
        // One call per queued tool: the next turn is answered with text again.
        let next = post(&model, "/v1/chat/completions", user).await;
        assert!(!next.contains("tool_calls"), "{next}");
    }

    #[test]
    fn a_reply_streams_in_order() {
        assert_eq!(deltas("a b c d e").concat(), "a b c d e");
        assert_eq!(deltas("one").concat(), "one");
        assert!(deltas("Hello from the fake model.").len() >= 2);
    }
}
