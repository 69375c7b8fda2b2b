//! A chat turn with an Agent (`POST …/agents/{agt}/chat`, an occ extension): one message to
//! the Agent's running gateway, its reply (streamed as it is produced, when the caller asks).
//!
//! Admission needs Agent `use` on the exact Agent (for people, `administer` on it stands in, so
//! Installation admins may; service keys need `use` granted explicitly) and an
//! active revision (503 `DEPENDENCY_UNAVAILABLE` otherwise), decided before anything reaches
//! the gateway and without holding a transaction across the turn. The turn is audited as
//! `openclaw.agents.chat` (session key, outcome, model, duration; never the message or the
//! reply) after it ends, or — if the caller goes away first — as abandoned.
//!
//! Each caller's conversations are their own: the gateway session of a turn is derived from
//! the caller's principal and the `sessionKey` they name ([`gateway_session_key`]), so callers
//! who may both talk to one Agent never share its context.
//!
//! A caller may have at most [`MAX_TURNS_PER_CALLER`] turns in flight (per API process): model
//! turns cost money and hold a gateway connection each, so a runaway client gets 429
//! `RATE_LIMITED` rather than a queue.
//!
//! One deadline bounds the turn (the gateway aborts the run when it passes or when the caller
//! goes away). A model failure is 502 `MODEL_ERROR` naming the provider's status and error
//! code; a deadline is 504 `CHAT_TIMEOUT`; an unreachable gateway is 503.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{Action, AuthMethod, ResourceKind, ResourceRef};
use occ_core::redact::Redactor;
use occ_core::resource::Agent;
use occ_core::{AgentId, Error, ErrorCode, IamId, NamespaceId};
use occ_drivers::compute::{AgentTarget, Compute};
use occ_gateway::{ChatError, ChatReply, ChatTurn, chat_turn};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::authorization::{audit_in_own_transaction, found};
use crate::workspace_files::gateway_endpoint;
use crate::{Controller, Request};

const CHAT_ACTION: &str = "openclaw.agents.chat";
/// The native agent occ's gateways run.
const NATIVE_AGENT: &str = "main";
/// Turns one caller may have in flight at once (per API process).
pub const MAX_TURNS_PER_CALLER: usize = 4;
/// What a refused caller is told to wait, in seconds.
const TURN_RETRY_AFTER_SECS: u64 = 2;

/// Turns in flight per caller (replica-local).
#[derive(Debug, Default)]
pub struct TurnLimiter {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

impl TurnLimiter {
    /// A slot for one more turn of `caller`, held until the slot is dropped; `None` at the
    /// limit.
    fn take(&self, caller: &str) -> Option<TurnSlot> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = in_flight.entry(caller.to_owned()).or_insert(0);
        if *count >= MAX_TURNS_PER_CALLER {
            return None;
        }
        *count += 1;
        Some(TurnSlot {
            in_flight: self.in_flight.clone(),
            caller: caller.to_owned(),
        })
    }
}

/// One turn's place in its caller's limit; released when dropped (the turn ended or its
/// caller went away).
#[derive(Debug)]
struct TurnSlot {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = in_flight.get_mut(&self.caller) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                in_flight.remove(&self.caller);
            }
        }
    }
}

/// The session a turn joins when the caller names none.
pub const DEFAULT_SESSION_KEY: &str = "occ-chat";

/// The gateway session a caller's conversation `session_key` lives in: `occ-` and 40 hex
/// digits of the SHA-256 of the caller's principal id and key (each length-prefixed, so no two
/// pairs encode alike). Stable for one caller and key, and two principals can never address
/// the same gateway session, whatever keys they choose (the caller-visible key stays theirs).
pub fn gateway_session_key(principal: &IamId, session_key: &str) -> String {
    let mut digest = Sha256::new();
    for part in [principal.as_str(), session_key] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    format!("occ-{}", &hex::encode(digest.finalize())[..40])
}

/// What a caller sends (already validated: 1–16 KiB UTF-8 message, a valid session key).
#[derive(Debug, Clone)]
pub struct ChatInput {
    /// The conversation to continue (or start).
    pub session_key: String,
    /// The user's message.
    pub message: String,
}

/// The Agent's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAnswer {
    /// The conversation the turn belongs to.
    pub session_key: String,
    /// The reply's text.
    pub reply: String,
    /// `provider/model` that answered, when the gateway says.
    pub model: Option<String>,
    /// Token usage as the gateway reports it.
    pub usage: Option<serde_json::Value>,
    /// How long the turn took, measured by occ.
    pub duration_ms: u64,
}

/// How the controller reaches an Agent to talk to it (its running gateway, in production).
#[async_trait::async_trait]
pub trait AgentChat: Send + Sync {
    /// Runs one turn before `deadline`, passing pieces of the reply to `deltas` as they come.
    async fn turn(
        &self,
        agent: &AgentTarget,
        input: &ChatInput,
        deadline: Instant,
        deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatReply, ChatError>;
}

/// Chat through each Agent's gateway; the endpoint and credential come from the Compute Driver
/// at every turn.
pub struct GatewayChat {
    compute: Arc<dyn Compute>,
}

impl GatewayChat {
    /// Chat through `compute`'s gateway endpoints.
    pub fn new(compute: Arc<dyn Compute>) -> Self {
        Self { compute }
    }
}

#[async_trait::async_trait]
impl AgentChat for GatewayChat {
    async fn turn(
        &self,
        agent: &AgentTarget,
        input: &ChatInput,
        deadline: Instant,
        deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatReply, ChatError> {
        let endpoint = gateway_endpoint(self.compute.as_ref(), agent, deadline)
            .await
            .map_err(|reason| {
                ChatError::Unavailable(occ_gateway::GatewayError::Unreachable(reason))
            })?;
        let turn = ChatTurn {
            agent_id: NATIVE_AGENT,
            session_key: &input.session_key,
            message: &input.message,
        };
        chat_turn(&endpoint, turn, deadline, deltas).await
    }
}

/// The audit record of a turn whose caller went away while it ran.
struct AbandonedTurn {
    store: occ_store::Store,
    event: Option<AuditEvent>,
}

impl Drop for AbandonedTurn {
    fn drop(&mut self) {
        let Some(event) = self.event.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        runtime.spawn(async move {
            if let Err(e) = audit_in_own_transaction(&store, &event).await {
                tracing::warn!(error = %e, "abandoned chat turn not audited");
            }
        });
    }
}

pub(crate) fn target_of(agent: &Agent) -> AgentTarget {
    AgentTarget {
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.id.clone(),
        service_principal_id: agent.service_principal_id.clone(),
    }
}

/// The public error of a failed turn and the audit reason code. A model failure quotes the
/// gateway's message with `handed` (every value the Agent's workloads hold) and credential
/// shapes removed; `None` (they could not be read) leaves the message out (fail closed).
fn chat_error(error: &ChatError, handed: Option<&[String]>) -> (Error, &'static str) {
    match error {
        ChatError::Model(failure) => {
            let mut what = String::from("The model failed");
            if let Some(status) = failure.http_status {
                what.push_str(&format!(": the provider answered HTTP {status}"));
            }
            if let Some(code) = failure.provider_code.as_deref().or(failure.kind.as_deref()) {
                what.push_str(&format!(" ({code})"));
            }
            // The gateway's message may quote the provider's: what the Agent holds and
            // credential shapes are removed.
            let message = match handed {
                Some(values) => format!(
                    "{what}: {}",
                    Redactor::new(values.iter().map(String::as_str)).line(&failure.message)
                ),
                None => what,
            };
            (Error::new(ErrorCode::ModelError, message), "MODEL_ERROR")
        }
        ChatError::Timeout => (
            Error::new(
                ErrorCode::ChatTimeout,
                "The Agent did not answer before the deadline; the turn was stopped",
            ),
            "CHAT_TIMEOUT",
        ),
        ChatError::Unavailable(e) => (
            Error::new(
                ErrorCode::DependencyUnavailable,
                "The Agent's gateway is unavailable",
            )
            .with_internal(format!("chat: {e}")),
            "DEPENDENCY_UNAVAILABLE",
        ),
        ChatError::Interrupted(e) => (
            Error::new(
                ErrorCode::DependencyUnavailable,
                "The connection to the Agent's gateway broke during the turn",
            )
            .with_internal(format!("chat interrupted: {e}")),
            "DEPENDENCY_UNAVAILABLE",
        ),
    }
}

impl Controller {
    fn chat(&self) -> Result<&Arc<dyn AgentChat>, Error> {
        self.chat
            .as_ref()
            .ok_or_else(|| Error::unavailable("chat is not configured"))
    }

    /// Runs one chat turn with the Agent (see the module documentation).
    pub async fn agent_chat(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        input: ChatInput,
        deadline: Instant,
        deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatAnswer, Error> {
        let admitted = self.admit_chat(req, ns, id, deadline).await?;
        self.run_chat(req, admitted, input, deadline, deltas).await
    }

    /// Decides whether the caller may talk to the Agent now (Agent `use`, an active revision),
    /// before `deadline`; refusals are ordinary errors, answered before any reply streams.
    pub async fn admit_chat(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        deadline: Instant,
    ) -> Result<AdmittedChat, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let admitted = tokio::time::timeout_at(deadline, async {
            // People who administer the Agent may talk to it; a service key needs `use`
            // granted explicitly, so an automation key never talks to Agents by accident.
            let (mut tx, _) = match req.caller.method {
                AuthMethod::Session => {
                    self.read_authorized_either(
                        req,
                        [Action::Use, Action::Administer],
                        &target,
                        CHAT_ACTION,
                    )
                    .await?
                }
                AuthMethod::ApiKey | AuthMethod::Work => {
                    self.read_authorized(req, Action::Use, &target, CHAT_ACTION)
                        .await?
                }
            };
            let agent = found(tx.agent_get(ns, id).await?)?;
            drop(tx);
            if agent.active_revision_id.is_none() {
                return Err(Error::new(
                    ErrorCode::DependencyUnavailable,
                    "The Agent has no active revision; deploy it first",
                ));
            }
            Ok(agent)
        })
        .await
        .map_err(|_| {
            Error::new(
                ErrorCode::ChatTimeout,
                "The deadline passed before the turn started",
            )
        })?;
        let agent = admitted?;
        let slot = self
            .chat_turns
            .take(req.caller.principal_id.as_str())
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::RateLimited,
                    format!(
                        "At most {MAX_TURNS_PER_CALLER} chat turns may run at once per caller; wait for one to finish"
                    ),
                )
                .with_retry_after(TURN_RETRY_AFTER_SECS)
            })?;
        Ok(AdmittedChat {
            agent,
            target,
            _slot: slot,
        })
    }

    /// Runs an admitted turn and audits it (see the module documentation).
    pub async fn run_chat(
        &self,
        req: &Request,
        admitted: AdmittedChat,
        input: ChatInput,
        deadline: Instant,
        deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatAnswer, Error> {
        let chat = self.chat()?;
        // The slot is held until this turn ends (or its future is dropped).
        let AdmittedChat {
            agent,
            target,
            _slot,
        } = admitted;
        let event = |outcome: AuditOutcome| {
            self.event(req, AuditKind::Access, CHAT_ACTION, &target, outcome)
                .detail("conversation", input.session_key.as_str())
        };
        let mut abandoned = AbandonedTurn {
            store: self.store.clone(),
            event: Some(event(AuditOutcome::Failure).reason_code("CLIENT_GONE")),
        };
        // The gateway sees the caller's own session, never a key another caller could name.
        let scoped = ChatInput {
            session_key: gateway_session_key(&req.caller.principal_id, &input.session_key),
            message: input.message.clone(),
        };
        let started = std::time::Instant::now();
        let outcome = chat
            .turn(&target_of(&agent), &scoped, deadline, deltas)
            .await;
        abandoned.event = None;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let recorded = match &outcome {
            Ok(reply) => event(AuditOutcome::Success)
                .detail("durationMs", duration_ms)
                .detail("model", model_name(reply).unwrap_or_default()),
            Err(e) => {
                let (_, code) = chat_error(e, Some(&[]));
                event(AuditOutcome::Failure).reason_code(code)
            }
        };
        let audited = audit_in_own_transaction(&self.store, &recorded).await;
        match outcome {
            Ok(reply) => {
                if let Err(e) = audited {
                    tracing::warn!(error = %e, "chat turn answered but not audited");
                    return Err(Error::unavailable(format!("audit: {e}")));
                }
                Ok(ChatAnswer {
                    session_key: input.session_key,
                    model: model_name(&reply),
                    usage: reply.usage,
                    reply: reply.text,
                    duration_ms,
                })
            }
            Err(e) => {
                // The gateway's message can quote a credential: only the code is logged.
                tracing::info!(agent_id = %agent.id, code = chat_error(&e, None).1, "chat turn failed");
                let handed = match &e {
                    ChatError::Model(_) => self.held_by_agent(&agent).await,
                    _ => Some(Vec::new()),
                };
                Err(chat_error(&e, handed.as_deref()).0)
            }
        }
    }
}

impl Controller {
    /// Every value the Agent's serving workloads hold, for redacting what its gateway says: what
    /// its active revision was handed (and the current values of the Secrets it binds), and the
    /// gateway's own credential. `None` when any of it cannot be read.
    async fn held_by_agent(&self, agent: &Agent) -> Option<Vec<String>> {
        let revision_id = agent.active_revision_id.as_ref()?;
        let mut tx = self.store.begin_read().await.ok()?;
        let revision = tx
            .revision_get(&agent.namespace_id, &agent.id, revision_id)
            .await
            .ok()??;
        let secrets =
            crate::runtime_logs::handed_secret_metas(&mut tx, &agent.namespace_id, &revision)
                .await
                .ok()?;
        drop(tx);
        let mut values = self
            .handed_values(&agent.namespace_id, &agent.id, revision_id, &secrets)
            .await
            .ok()?;
        if let Some(compute) = &self.runtime
            && let Ok(Some(access)) = compute.gateway_access(&target_of(agent)).await
        {
            values.push(access.token.expose().to_owned());
        }
        Some(values)
    }
}

/// A turn the caller was allowed to start, holding its place in the caller's limit.
#[derive(Debug)]
pub struct AdmittedChat {
    agent: Agent,
    target: ResourceRef,
    _slot: TurnSlot,
}

fn model_name(reply: &ChatReply) -> Option<String> {
    match (&reply.provider, &reply.model) {
        (Some(p), Some(m)) if !m.starts_with(&format!("{p}/")) => Some(format!("{p}/{m}")),
        (_, Some(m)) => Some(m.clone()),
        (Some(p), None) => Some(p.clone()),
        (None, None) => None,
    }
}
