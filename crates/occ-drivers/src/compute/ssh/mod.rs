//! The SSH Compute Driver: each Agent's OpenClaw gateway runs on an operator-provisioned Linux
//! host, laid out and operated by the host layer the process Driver runs in process
//! ([`occ_host::Host`]), which `occ compute-host` runs on the host ([`occ_host::serve`]). Only
//! the transport differs: the request ([`occ_host::wire`]) travels through `ssh`.
//!
//! Each verb is one `ssh` run of the system client with strict host-key checking against the
//! operator's `known_hosts` file, key authentication only and no user configuration:
//!
//! ```text
//! ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=<file>
//!     -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o IdentityAgent=none
//!     -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o ConnectTimeout=<n>
//!     -o LogLevel=ERROR -i <key> -p <port> -l <user> -- <address> <remote occ> compute-host
//! ```
//!
//! The request (settings, targets, staged workspace files) goes on stdin, never argv; the reply
//! is the last stdout line. A host that cannot be reached, a lost session, an unparsable reply or
//! a timeout is transient (the worker retries); an unknown or changed host key, refused
//! authentication and the host's own permanent failures (ownership, configuration) are
//! permanent. Secrets are never delivered to a host: a revision that needs one is refused.

mod settings;
mod transport;

use std::time::Duration;

use occ_core::NamespaceId;
use occ_core::ReasonCode;
use occ_core::resource::{ComputeIdentity, ExecutionMode};
use occ_host::wire::{HostOp, HostRequest, HostValue, WireSetup, WireVersion};

pub use settings::{SshHost, SshSettings, valid_address};
use settings::{check, invalid};
use transport::{Transport, interpret, target};

use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, GatewayAccess, GatewayExit,
    LogChunk, LogQuery, NamespaceTarget, Readiness, RevisionContext, RevisionTarget, RuntimeReport,
    RuntimeState, SecretText,
};

/// What the SSH Driver runs: embedded execution with the runtime's own credentials only (no
/// Secret is delivered to a host).
pub fn selection() -> ComputeSelection {
    ComputeSelection {
        identity: ComputeIdentity {
            id: "compute-ssh".into(),
            implementation: "ssh".into(),
        },
        execution_modes: vec![ExecutionMode::Embedded],
        harness_auth_methods: vec!["runtime"],
        dedicated_auth_methods: Vec::new(),
        delivers_secrets: false,
        adopts_existing_namespaces: false,
    }
}

/// The SSH Compute Driver.
pub struct SshCompute {
    selection: ComputeSelection,
    settings: SshSettings,
    transport: Transport,
}

impl SshCompute {
    /// The Driver over `settings`, checked (nothing is contacted yet).
    pub fn new(settings: SshSettings) -> Result<Self, ComputeError> {
        check(&settings.host)?;
        for (ns, host) in &settings.namespace_hosts {
            check(host).map_err(|e| invalid(format!("the host of {ns}: {}", e.message)))?;
        }
        Ok(Self {
            selection: selection(),
            transport: Transport::new(settings.connect_timeout),
            settings,
        })
    }

    /// The host of Namespace `ns`.
    pub fn host_of(&self, ns: &NamespaceId) -> &SshHost {
        self.settings
            .namespace_hosts
            .get(ns)
            .unwrap_or(&self.settings.host)
    }

    /// The settings.
    pub fn settings(&self) -> &SshSettings {
        &self.settings
    }

    /// Runs one operation on the host.
    async fn call(&self, operation: HostOp) -> Result<HostValue, ComputeError> {
        let name = operation.name();
        let host = self.host_of(operation.namespace_id());
        let request = HostRequest {
            version: WireVersion::current(),
            deadline_ms: host_deadline_ms(self.settings.operation_timeout),
            settings: host.host.clone(),
            driver_id: self.selection.identity.id.clone(),
            operation,
        };
        let body = serde_json::to_vec(&request)
            .map_err(|e| ComputeError::permanent(ReasonCode::InvalidHostRequest, e.to_string()))?;
        let outcome = tokio::time::timeout(
            self.settings.operation_timeout,
            self.transport.exchange(host, &body),
        )
        .await
        .map_err(|_| {
            ComputeError::transient(
                ReasonCode::HostOperationTimeout,
                format!(
                    "{name} on {} did not finish in {:?}",
                    target(host),
                    self.settings.operation_timeout
                ),
            )
        })?;
        let (status, stdout, stderr) = outcome?;
        interpret(host, name, status.code(), &stdout, &stderr)
    }

    /// Runs an operation whose reply carries no value.
    async fn call_done(&self, operation: HostOp) -> Result<(), ComputeError> {
        let name = operation.name();
        match self.call(operation).await? {
            HostValue::Done => Ok(()),
            other => Err(unexpected(name, &other)),
        }
    }

    /// A revision that needs something delivered to the host that this Driver never delivers.
    fn refuse_secrets(rev: &RevisionTarget, ctx: &RevisionContext) -> Result<(), ComputeError> {
        if !ctx.environment.is_empty()
            || ctx.harness_credential.is_some()
            || rev.spec.secret_bindings.is_some()
        {
            return Err(ComputeError::permanent(
                ReasonCode::SecretDeliveryUnsupported,
                "the SSH Compute Driver does not deliver Secrets to hosts: remove the \
                 Configuration's Secret bindings and use harnessAuth runtime with credentials \
                 provisioned on the host",
            ));
        }
        Ok(())
    }
}

/// The deadline `occ compute-host` gets: below the Driver's own bound, so the host abandons the
/// operation (and says so) before the client gives up on it.
fn host_deadline_ms(operation_timeout: Duration) -> u64 {
    let margin = (operation_timeout / 10).min(Duration::from_secs(10));
    u64::try_from(operation_timeout.saturating_sub(margin).as_millis())
        .unwrap_or(u64::MAX)
        .max(1_000)
}

fn unexpected(op: &str, value: &HostValue) -> ComputeError {
    ComputeError::transient(
        ReasonCode::HostReplyInvalid,
        format!("{op}: unexpected reply {value:?}"),
    )
}

fn convergence(value: HostValue) -> Result<Convergence, ComputeError> {
    match value {
        HostValue::Convergence { pending: false } => Ok(Convergence::Done),
        HostValue::Convergence { pending: true } => Ok(Convergence::Pending),
        other => Err(unexpected("namespace", &other)),
    }
}

#[async_trait::async_trait]
impl Compute for SshCompute {
    fn selection(&self) -> &ComputeSelection {
        &self.selection
    }

    fn supports_workspace_setup(&self) -> bool {
        true
    }

    fn maintenance_interval(&self) -> Option<Duration> {
        self.settings.maintenance_interval
    }

    fn gateway_exits(&self) -> Option<tokio::sync::broadcast::Receiver<GatewayExit>> {
        // The gateways are children of a host process that has long ended: the maintenance
        // pass finds an exit.
        None
    }

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        convergence(
            self.call(HostOp::EnsureNamespace {
                namespace: ns.clone(),
            })
            .await?,
        )
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        convergence(
            self.call(HostOp::DeleteNamespace {
                namespace: ns.clone(),
            })
            .await?,
        )
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        Self::refuse_secrets(rev, ctx)?;
        match self
            .call(HostOp::PrepareRevision {
                revision: Box::new(rev.clone()),
                workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
            })
            .await?
        {
            HostValue::Readiness { ready: true, .. } => Ok(Readiness::Ready),
            HostValue::Readiness { ready: false, code } => Ok(Readiness::Pending {
                code: code.unwrap_or(ReasonCode::RevisionIncomplete),
            }),
            other => Err(unexpected("prepare-revision", &other)),
        }
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        Self::refuse_secrets(rev, ctx)?;
        self.call_done(HostOp::ActivateRevision {
            revision: Box::new(rev.clone()),
            workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
        })
        .await
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        Self::refuse_secrets(previous, ctx)?;
        self.call_done(HostOp::RestoreRevision {
            previous: Box::new(previous.clone()),
            failed: Box::new(failed.clone()),
            workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
        })
        .await
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let revision = Box::new(rev.clone());
        self.call_done(HostOp::StopRevision { revision }).await
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let revision = Box::new(rev.clone());
        self.call_done(HostOp::RetireRevision { revision }).await
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        let agent = agent.clone();
        self.call_done(HostOp::DeleteAgent { agent }).await
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        match self
            .call(HostOp::Observe {
                revision: Box::new(rev.clone()),
            })
            .await?
        {
            HostValue::Runtime { state } => match state.as_str() {
                "serving" => Ok(RuntimeState::Serving),
                "not-running" => Ok(RuntimeState::NotRunning),
                "not-current" => Ok(RuntimeState::NotCurrent),
                _ => Err(ComputeError::transient(
                    ReasonCode::HostReplyInvalid,
                    format!("observe: unknown state {state:?}"),
                )),
            },
            other => Err(unexpected("observe", &other)),
        }
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        match self
            .call(HostOp::GatewayAccess {
                agent: agent.clone(),
            })
            .await?
        {
            HostValue::Gateway { port, token } => {
                let local = self
                    .transport
                    .tunnel(self.host_of(&agent.namespace_id), port)
                    .await?;
                Ok(Some(GatewayAccess {
                    url: format!("ws://127.0.0.1:{local}"),
                    token: SecretText::new(token),
                }))
            }
            HostValue::NoGateway => Ok(None),
            other => Err(unexpected("gateway-access", &other)),
        }
    }

    async fn runtime_report(&self, rev: &RevisionTarget) -> Result<RuntimeReport, ComputeError> {
        match self
            .call(HostOp::RuntimeReport {
                revision: Box::new(rev.clone()),
            })
            .await?
        {
            HostValue::Report { report } => Ok(report),
            other => Err(unexpected("runtime-report", &other)),
        }
    }

    async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        match self
            .call(HostOp::ReadLogs {
                revision: Box::new(rev.clone()),
                query: query.clone(),
            })
            .await?
        {
            HostValue::Logs { chunk } => Ok(chunk),
            other => Err(unexpected("read-logs", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_deadline_is_below_the_client_bound() {
        assert_eq!(host_deadline_ms(Duration::from_secs(600)), 590_000);
        assert_eq!(host_deadline_ms(Duration::from_secs(60)), 54_000);
        assert_eq!(host_deadline_ms(Duration::from_millis(10)), 1_000);
    }
}
