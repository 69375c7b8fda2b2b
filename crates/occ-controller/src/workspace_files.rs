//! Live workspace files (`GET|PUT …/agents/{agt}/workspace/files/{name}`): read and write the
//! four profile files of an Agent through its running gateway.
//!
//! Admission (authorization, the Agent's state, an active revision) happens before any native
//! I/O and holds no database transaction across it. A write's outcome is recorded afterwards in
//! its own transaction (`openclaw.agents.workspace.files.write`, with the file name and a reason
//! code, never the content):
//!
//! | native outcome | audit | answer |
//! |---|---|---|
//! | ok | success | 200 `{name, size}`; if the audit cannot be written, 503 `UNKNOWN_OUTCOME` |
//! | missing | failure `FILE_MISSING` | 404 (503 `DEPENDENCY_UNAVAILABLE` if the audit fails) |
//! | unavailable | failure `DEPENDENCY_UNAVAILABLE` | 503 `DEPENDENCY_UNAVAILABLE` |
//! | unknown (sent, no answer) | failure `UNKNOWN_OUTCOME`, best effort | 503 `UNKNOWN_OUTCOME` |
//!
//! Nothing is ever retried after a write was sent: the caller reads the file and decides.

use std::sync::Arc;

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{Action, ReadEvidence, ResourceKind, ResourceRef};
use occ_core::resource::{Agent, AgentStatus, DesiredRuntimeState, WorkspaceFileName};
use occ_core::{AgentId, Error, ErrorCode, NamespaceId};
use occ_drivers::compute::{AgentTarget, Compute};
use occ_gateway::{Endpoint, FileClient, ReadOutcome, WriteOutcome};
use occ_store::Store;
use tokio::time::Instant;

use crate::authorization::{audit_in_own_transaction, found};
use crate::namespaces::live_namespace;
use crate::{Controller, Request};

/// The outcome of a native read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRead {
    /// The content (already checked: ≤ 16 KiB UTF-8, no NUL).
    Ok(String),
    /// The file does not exist.
    Missing,
    /// The gateway could not be reached or answered something invalid (reason for logs).
    Unavailable(String),
}

/// The outcome of a native write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileWrite {
    /// Written.
    Ok,
    /// The gateway says the file cannot be written because it is missing.
    Missing,
    /// Definitely not written (reason for logs).
    Unavailable(String),
    /// Sent, but no answer: it may or may not have been written.
    Unknown(String),
}

/// How the controller reaches an Agent's workspace (the running gateway, in production).
#[async_trait::async_trait]
pub trait WorkspaceAccess: Send + Sync {
    /// Reads one file before `deadline`.
    async fn read(
        &self,
        agent: &AgentTarget,
        name: WorkspaceFileName,
        deadline: Instant,
    ) -> FileRead;
    /// Writes one file before `deadline`.
    async fn write(
        &self,
        agent: &AgentTarget,
        name: WorkspaceFileName,
        content: &str,
        deadline: Instant,
    ) -> FileWrite;
}

const WRITE_ACTION: &str = "openclaw.agents.workspace.files.write";
const READ_ACTION: &str = "openclaw.agents.workspace.files.read";

fn no_active_revision() -> Error {
    Error::new(
        ErrorCode::DependencyUnavailable,
        "The Agent has no active revision; deploy it first",
    )
}

fn admission_deadline() -> Error {
    Error::unavailable("The request deadline passed before the file operation was admitted")
}

/// The audit record of a write whose caller went away while it was in flight (armed while the
/// native write runs): appended from a spawned task when the future is dropped.
struct AbandonedWrite {
    store: Store,
    event: Option<AuditEvent>,
}

impl Drop for AbandonedWrite {
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
                tracing::warn!(error = %e, "abandoned workspace file write not audited");
            }
        });
    }
}

fn unknown_outcome() -> Error {
    Error::new(
        ErrorCode::UnknownOutcome,
        "The write may or may not have been applied; read the file before trying again",
    )
}

fn target_of(agent: &Agent) -> AgentTarget {
    AgentTarget {
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.id.clone(),
        service_principal_id: agent.service_principal_id.clone(),
    }
}

impl Controller {
    fn workspace(&self) -> Result<&Arc<dyn WorkspaceAccess>, Error> {
        self.workspace
            .as_ref()
            .ok_or_else(|| Error::unavailable("workspace file access is not configured"))
    }

    /// Reads a live workspace file.
    pub async fn workspace_file_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        name: WorkspaceFileName,
        deadline: Instant,
    ) -> Result<String, Error> {
        let (agent, _) = self
            .admit_file_operation(req, (ns, id), Action::Read, READ_ACTION, deadline)
            .await?;
        let access = self.workspace()?;
        match access.read(&target_of(&agent), name, deadline).await {
            FileRead::Ok(content) => Ok(content),
            FileRead::Missing => Err(Error::not_found()),
            FileRead::Unavailable(reason) => {
                tracing::info!(agent_id = %id, file = name.as_str(), reason = %reason, "workspace file read unavailable");
                Err(Error::unavailable("The Agent's gateway is unavailable"))
            }
        }
    }

    /// Authorizes a file operation and checks that the Agent serves an active revision (no
    /// active revision → 503; for writes also deleting → 409 `AGENT_DELETING`, stopping → 409),
    /// all before `deadline` (503 after it).
    async fn admit_file_operation(
        &self,
        req: &Request,
        (ns, id): (&NamespaceId, &AgentId),
        action: Action,
        audit_action: &str,
        deadline: Instant,
    ) -> Result<(Agent, ReadEvidence), Error> {
        tokio::time::timeout_at(
            deadline,
            self.admit_now(req, (ns, id), action, audit_action),
        )
        .await
        .map_err(|_| admission_deadline())?
    }

    async fn admit_now(
        &self,
        req: &Request,
        (ns, id): (&NamespaceId, &AgentId),
        action: Action,
        audit_action: &str,
    ) -> Result<(Agent, ReadEvidence), Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (mut tx, evidence) = self
            .read_authorized(req, action, &target, audit_action)
            .await?;
        let agent = found(tx.agent_get(ns, id).await?)?;
        drop(tx);
        // Reads need a readable active revision; writes an operable one (not being deleted,
        // not stopping).
        let write = action == Action::Operate;
        if write && agent.status == AgentStatus::Deleting {
            return Err(Error::new(
                ErrorCode::AgentDeleting,
                "The Agent is being deleted",
            ));
        }
        if agent.active_revision_id.is_none() {
            return Err(no_active_revision());
        }
        if write && agent.desired_runtime_state != DesiredRuntimeState::Running {
            return Err(Error::conflict("The Agent is stopping"));
        }
        Ok((agent, evidence))
    }

    /// Writes a live workspace file (`content` already validated) and records the outcome.
    pub async fn workspace_file_put(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        name: WorkspaceFileName,
        content: &str,
        deadline: Instant,
    ) -> Result<u64, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (agent, evidence) = self
            .admit_file_operation(req, (ns, id), Action::Operate, WRITE_ACTION, deadline)
            .await?;
        let access = self.workspace()?;
        // If the caller goes away while the write is in flight, this future is dropped: the
        // guard still records the write as UNKNOWN_OUTCOME.
        let mut abandoned = AbandonedWrite {
            store: self.store.clone(),
            event: Some(self.write_event(
                req,
                &target,
                &evidence,
                name,
                AuditOutcome::Failure,
                Some("UNKNOWN_OUTCOME"),
            )),
        };
        let outcome = access
            .write(&target_of(&agent), name, content, deadline)
            .await;
        abandoned.event = None;
        let (audit_outcome, code) = match &outcome {
            FileWrite::Ok => (AuditOutcome::Success, None),
            FileWrite::Missing => (AuditOutcome::Failure, Some("FILE_MISSING")),
            FileWrite::Unavailable(_) => (AuditOutcome::Failure, Some("DEPENDENCY_UNAVAILABLE")),
            FileWrite::Unknown(_) => (AuditOutcome::Failure, Some("UNKNOWN_OUTCOME")),
        };
        let recorded = self
            .record_write(req, &target, &evidence, name, audit_outcome, code)
            .await;
        match outcome {
            FileWrite::Ok => match recorded {
                Ok(()) => Ok(content.len() as u64),
                Err(e) => {
                    tracing::warn!(error = %e, "workspace file written but not audited");
                    Err(unknown_outcome())
                }
            },
            FileWrite::Missing => match recorded {
                Ok(()) => Err(Error::not_found()),
                Err(e) => Err(Error::unavailable(format!("audit: {e}"))),
            },
            FileWrite::Unavailable(reason) => {
                tracing::info!(agent_id = %id, file = name.as_str(), reason = %reason, "workspace file write unavailable");
                Err(Error::unavailable("The Agent's gateway is unavailable"))
            }
            FileWrite::Unknown(reason) => {
                tracing::warn!(agent_id = %id, file = name.as_str(), reason = %reason, "workspace file write outcome unknown");
                Err(unknown_outcome())
            }
        }
    }

    fn write_event(
        &self,
        req: &Request,
        target: &ResourceRef,
        evidence: &ReadEvidence,
        name: WorkspaceFileName,
        outcome: AuditOutcome,
        code: Option<&str>,
    ) -> AuditEvent {
        let mut event = self
            .event(req, AuditKind::Mutation, WRITE_ACTION, target, outcome)
            .detail("workspaceFileName", name.as_str())
            .detail(
                "iamEvidence",
                serde_json::to_value(evidence).unwrap_or_default(),
            );
        if let Some(code) = code {
            event = event.reason_code(code);
        }
        event
    }

    async fn record_write(
        &self,
        req: &Request,
        target: &ResourceRef,
        evidence: &ReadEvidence,
        name: WorkspaceFileName,
        outcome: AuditOutcome,
        code: Option<&str>,
    ) -> Result<(), Error> {
        let event = self.write_event(req, target, evidence, name, outcome, code);
        Ok(audit_in_own_transaction(&self.store, &event).await?)
    }

    /// The stock workspace files of the pinned OpenClaw and their digest, for forms that offer
    /// them as the starting point of `initialWorkspaceFiles` (Agent-creation permission in the
    /// Namespace required).
    pub async fn workspace_defaults(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<crate::WorkspaceDefaults, Error> {
        let collection = ResourceRef::collection(ResourceKind::Agent, ns);
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Create,
                &collection,
                "openclaw.agents.workspace.defaults.read",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        self.settings.workspace_defaults.clone().ok_or_else(|| {
            Error::unavailable("the OpenClaw runtime (and its templates) is not installed")
        })
    }
}

/// The native agent occ's gateways run (`agents.entries.main`).
const NATIVE_AGENT: &str = "main";

/// Workspace access through each Agent's gateway: the endpoint and credential come from the
/// Compute Driver at every operation (never from the caller), so a rotated credential applies
/// to the next operation; verified connections are pooled per endpoint and credential.
pub struct GatewayWorkspace {
    compute: Arc<dyn Compute>,
    client: FileClient,
}

impl GatewayWorkspace {
    /// Access through `compute`'s gateway endpoints with a fresh connection pool.
    pub fn new(compute: Arc<dyn Compute>) -> Self {
        Self::with_client(compute, FileClient::new())
    }

    /// Access through `compute`'s gateway endpoints with the given client (its pool settings).
    pub fn with_client(compute: Arc<dyn Compute>, client: FileClient) -> Self {
        Self { compute, client }
    }

    async fn endpoint(&self, agent: &AgentTarget, deadline: Instant) -> Result<Endpoint, String> {
        gateway_endpoint(self.compute.as_ref(), agent, deadline).await
    }
}

/// The Agent's gateway endpoint as the Compute Driver reports it now (the reason for logs when
/// there is none).
pub(crate) async fn gateway_endpoint(
    compute: &dyn Compute,
    agent: &AgentTarget,
    deadline: Instant,
) -> Result<Endpoint, String> {
    match tokio::time::timeout_at(deadline, compute.gateway_access(agent)).await {
        Err(_) => Err("the deadline passed while locating the gateway".into()),
        Ok(Err(e)) => Err(format!("locating the gateway: {e}")),
        Ok(Ok(None)) => Err("the Compute Driver exposes no gateway for this Agent".into()),
        Ok(Ok(Some(access))) => Ok(Endpoint::new(access.url, access.token.expose())),
    }
}

#[async_trait::async_trait]
impl WorkspaceAccess for GatewayWorkspace {
    async fn read(
        &self,
        agent: &AgentTarget,
        name: WorkspaceFileName,
        deadline: Instant,
    ) -> FileRead {
        let endpoint = match self.endpoint(agent, deadline).await {
            Ok(endpoint) => endpoint,
            Err(reason) => return FileRead::Unavailable(reason),
        };
        match self
            .client
            .read(&endpoint, NATIVE_AGENT, name.as_str(), deadline)
            .await
        {
            ReadOutcome::Ok(file) => FileRead::Ok(file.content),
            ReadOutcome::Missing => FileRead::Missing,
            ReadOutcome::Unavailable(reason) => FileRead::Unavailable(reason),
        }
    }

    async fn write(
        &self,
        agent: &AgentTarget,
        name: WorkspaceFileName,
        content: &str,
        deadline: Instant,
    ) -> FileWrite {
        let endpoint = match self.endpoint(agent, deadline).await {
            Ok(endpoint) => endpoint,
            Err(reason) => return FileWrite::Unavailable(reason),
        };
        match self
            .client
            .write(&endpoint, NATIVE_AGENT, name.as_str(), content, deadline)
            .await
        {
            WriteOutcome::Ok { .. } => FileWrite::Ok,
            WriteOutcome::Missing => FileWrite::Missing,
            WriteOutcome::Unavailable(reason) => FileWrite::Unavailable(reason),
            WriteOutcome::Unknown(reason) => FileWrite::Unknown(reason),
        }
    }
}
