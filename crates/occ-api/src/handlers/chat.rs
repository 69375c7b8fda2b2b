//! `POST /namespaces/{namespaceId}/agents/{agentId}/chat` (an occ extension): one turn with the
//! Agent. JSON by default; with `Accept: text/event-stream` the reply streams as server-sent
//! events (`delta` `{text}` as it is produced, then `final` with the whole answer, or `error`
//! `{error: {code, message}}`). Refusals (validation, 401/403/404, no active revision) are
//! ordinary JSON errors answered before any event. A client that goes away stops the turn.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use http::HeaderMap;
use http::header::ACCEPT;
use occ_controller::chat::{ChatAnswer, ChatInput, DEFAULT_SESSION_KEY};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::extract::{CHAT_LIMIT, Ctx, JsonBody, Params};
use crate::inputs::ChatBody;
use crate::openapi::{ChatView, Data, ErrorBody};
use crate::state::AppState;

/// One deadline covers admission and the whole turn.
pub const CHAT_DEADLINE: Duration = Duration::from_secs(120);

fn answer_view(answer: &ChatAnswer) -> Value {
    let mut view = json!({
        "sessionKey": answer.session_key,
        "reply": answer.reply,
        "model": answer.model,
        "durationMs": answer.duration_ms,
    });
    if let Some(usage) = &answer.usage {
        view["usage"] = usage.clone();
    }
    view
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().starts_with("text/event-stream"))
}

/// Send the Agent a message and get its reply (streamed with `Accept: text/event-stream`).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/{agentId}/chat", operation_id = "chatWithAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    request_body = ChatBody,
    responses((status = 200, body = Data<ChatView>, description = "The reply; with Accept: text/event-stream, server-sent events delta {text}, final {sessionKey, reply, model, usage, durationMs} or error {error}"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "RATE_LIMITED: the caller has four turns in flight"),
        (status = 502, body = ErrorBody, description = "The model failed (MODEL_ERROR, naming the provider's status and code)"),
        (status = 503, body = ErrorBody), (status = 504, body = ErrorBody, description = "CHAT_TIMEOUT")))]
pub async fn chat_with_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    headers: HeaderMap,
    JsonBody(body): JsonBody<CHAT_LIMIT>,
) -> Result<Response, ApiError> {
    let deadline = tokio::time::Instant::now() + CHAT_DEADLINE;
    let body = ChatBody::parse(&body)?;
    let input = ChatInput {
        session_key: body
            .session_key
            .map_or_else(|| DEFAULT_SESSION_KEY.to_owned(), |k| k.0),
        message: body.message.0,
    };
    let (ns, agent) = (p.ns()?, p.agent()?);
    let admitted = s
        .controller
        .admit_chat(&ctx.req, ns, agent, deadline)
        .await?;
    if !wants_stream(&headers) {
        let answer = s
            .controller
            .run_chat(&ctx.req, admitted, input, deadline, None)
            .await?;
        return Ok(ok(answer_view(&answer)).into_response());
    }
    // The turn runs in its own task, owned by the response stream: when the client goes away
    // the stream is dropped, the task aborted, and the turn stopped on the gateway.
    let (deltas, delta_rx) = mpsc::unbounded_channel();
    let controller = s.controller.clone();
    let req = ctx.req.clone();
    let turn = tokio::spawn(async move {
        controller
            .run_chat(&req, admitted, input, deadline, Some(deltas))
            .await
    });
    let request_id = ctx.req.id().to_string();
    Ok(Sse::new(events(delta_rx, turn, request_id))
        .keep_alive(KeepAlive::default())
        .into_response())
}

type Turn = tokio::task::JoinHandle<Result<ChatAnswer, occ_core::Error>>;

/// Aborts the turn's task when the response stream is dropped before it ended.
struct TurnTask(Option<Turn>);

impl Drop for TurnTask {
    fn drop(&mut self) {
        if let Some(turn) = self.0.take() {
            turn.abort();
        }
    }
}

fn events(
    deltas: mpsc::UnboundedReceiver<String>,
    turn: Turn,
    request_id: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = (Some(deltas), TurnTask(Some(turn)));
    stream::unfold(state, move |(mut deltas, mut task)| {
        let request_id = request_id.clone();
        async move {
            if let Some(rx) = deltas.as_mut() {
                match rx.recv().await {
                    Some(text) => {
                        let event = Event::default()
                            .event("delta")
                            .data(json!({"text": text}).to_string());
                        return Some((Ok(event), (deltas, task)));
                    }
                    // The turn ended (its sender is gone): its result follows.
                    None => deltas = None,
                }
            }
            let turn = task.0.take()?;
            let event = match turn.await {
                Ok(Ok(answer)) => Event::default()
                    .event("final")
                    .data(answer_view(&answer).to_string()),
                Ok(Err(e)) => error_event(&e, &request_id),
                Err(_) => error_event(
                    &occ_core::Error::new(
                        occ_core::ErrorCode::InternalError,
                        "The turn ended unexpectedly",
                    ),
                    &request_id,
                ),
            };
            Some((Ok(event), (deltas, task)))
        }
    })
}

fn error_event(e: &occ_core::Error, request_id: &str) -> Event {
    if e.code().http_status() >= 500 {
        tracing::warn!(
            code = e.code().as_str(),
            internal = e.internal_context().unwrap_or(""),
            "chat turn failed"
        );
    }
    Event::default().event("error").data(
        json!({"error": {"code": e.code().as_str(), "message": e.message()},
            "meta": {"requestId": request_id}})
        .to_string(),
    )
}
