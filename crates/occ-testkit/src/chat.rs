//! A test double of [`AgentChat`]: answers each turn with a scripted reply, streamed in pieces,
//! or with a queued outcome instead (a model failure, an unreachable gateway, a deadline, a
//! turn that never ends). It records the turns it saw. It proves what the controller and API do
//! with each outcome (status, code, events, audit), nothing about a gateway: the real-gateway
//! test in the `occ` crate does that.

use std::collections::VecDeque;
use std::sync::Mutex;

use occ_controller::chat::{AgentChat, ChatInput};
use occ_drivers::compute::AgentTarget;
use occ_gateway::{ChatError, ChatReply, GatewayError, ModelFailure};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What the next turn does instead of answering.
#[derive(Debug, Clone)]
pub enum Next {
    /// The model fails with this HTTP status and provider code.
    ModelFails(u16, &'static str),
    /// The gateway cannot be reached.
    Unavailable,
    /// The turn runs into its deadline.
    Timeout,
    /// The turn never ends (the caller gives up or goes away).
    Hang,
}

/// One turn the double saw.
#[derive(Debug, Clone)]
pub struct SeenTurn {
    /// The Agent.
    pub agent: String,
    /// The session key.
    pub session_key: String,
    /// The message.
    pub message: String,
}

/// The double. Its reply is `pieces` concatenated.
pub struct FakeChat {
    pieces: Vec<String>,
    next: Mutex<VecDeque<Next>>,
    seen: Mutex<Vec<SeenTurn>>,
}

impl Default for FakeChat {
    fn default() -> Self {
        Self {
            pieces: ["Hello", ", ", "world."].map(str::to_owned).to_vec(),
            next: Mutex::default(),
            seen: Mutex::default(),
        }
    }
}

impl FakeChat {
    /// The reply every answered turn gets.
    pub fn reply(&self) -> String {
        self.pieces.concat()
    }

    /// The pieces the reply streams in.
    pub fn pieces(&self) -> &[String] {
        &self.pieces
    }

    /// Queues what the next turn does.
    pub fn next(&self, next: Next) {
        self.next.lock().expect("lock").push_back(next);
    }

    /// The turns seen so far.
    pub fn seen(&self) -> Vec<SeenTurn> {
        self.seen.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl AgentChat for FakeChat {
    async fn turn(
        &self,
        agent: &AgentTarget,
        input: &ChatInput,
        deadline: Instant,
        deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatReply, ChatError> {
        self.seen.lock().expect("lock").push(SeenTurn {
            agent: agent.agent_id.to_string(),
            session_key: input.session_key.clone(),
            message: input.message.clone(),
        });
        let next = self.next.lock().expect("lock").pop_front();
        match next {
            Some(Next::ModelFails(status, code)) => {
                return Err(ChatError::Model(ModelFailure {
                    message: format!("provider said no ({code})"),
                    kind: Some("auth".into()),
                    http_status: Some(status),
                    provider_code: Some(code.into()),
                }));
            }
            Some(Next::Unavailable) => {
                return Err(ChatError::Unavailable(GatewayError::Unreachable(
                    "connection refused".into(),
                )));
            }
            Some(Next::Timeout) => return Err(ChatError::Timeout),
            Some(Next::Hang) => {
                tokio::time::sleep_until(deadline).await;
                return Err(ChatError::Timeout);
            }
            None => {}
        }
        if let Some(deltas) = deltas {
            for piece in &self.pieces {
                let _ = deltas.send(piece.clone());
                tokio::task::yield_now().await;
            }
        }
        Ok(ChatReply {
            run_id: "run-1".into(),
            text: self.reply(),
            provider: Some("fake".into()),
            model: Some("fake-model".into()),
            usage: Some(serde_json::json!({"input": 7, "output": 3})),
            duration_ms: Some(5),
        })
    }
}
