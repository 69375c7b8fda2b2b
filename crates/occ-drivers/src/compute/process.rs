//! The process Compute Driver: each Agent's OpenClaw gateway runs as a supervised local process
//! from the pinned runtime, on loopback, with token authentication.
//!
//! It is the local transport over the host layer: every verb is [`occ_host::Host`]'s, called in
//! this process (the layout, ports, snapshots, gateway spawn, adoption, readiness and stop live
//! there). The SSH Compute Driver ([`super::ssh`]) is the remote transport over the same code.
//!
//! Gateways run detached in their own process group, so a worker restart does not stop them; a
//! restarted worker re-adopts a running gateway. With [`ProcessSettings::dedicated`] it also
//! runs dedicated execution: each dedicated Agent's Codex harness as a second process group
//! (see [`occ_host::Host`]).

use std::time::Duration;

use occ_core::resource::{ComputeIdentity, ExecutionMode};
use occ_host::credential_proxy::CredentialProxy;
use occ_host::sandbox::SandboxSettings;
use occ_host::{DedicatedSettings, Host, HostOptions, LocalSettings};

use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, DEDICATED_AUTH_METHODS,
    GatewayAccess, GatewayExit, LogChunk, LogQuery, NamespaceTarget, Readiness, RevisionContext,
    RevisionTarget, RuntimeReport, RuntimeState,
};

/// Settings of the process Driver.
#[derive(Debug, Clone)]
pub struct ProcessSettings {
    /// The layout, runtime, ports and timeouts of this machine's gateways.
    pub host: LocalSettings,
    /// Maintenance passes (crash detection and restart).
    pub maintenance_interval: Option<Duration>,
    /// Dedicated execution (the Codex harness), when offered.
    pub dedicated: Option<DedicatedSettings>,
    /// Containment of each Agent's gateway (`None`: only when turned off explicitly).
    pub sandbox: Option<SandboxSettings>,
    /// The loopback port of the credential proxy (`occ_host::credential_proxy`), which puts
    /// bound model keys on the wire so they never enter a gateway; `None`: keys are delivered in
    /// the gateway's environment. Gateways' snapshots name it, so it stays the same across
    /// restarts.
    pub credential_proxy_port: Option<u16>,
}

/// What the process Driver runs: embedded execution, and dedicated execution when it is given
/// [`DedicatedSettings`] (admission in an API process that builds no Driver asks this too).
pub fn selection(dedicated: bool) -> ComputeSelection {
    let mut execution_modes = vec![ExecutionMode::Embedded];
    if dedicated {
        execution_modes.push(ExecutionMode::Dedicated);
    }
    ComputeSelection {
        identity: ComputeIdentity {
            id: "compute-process".into(),
            implementation: "process".into(),
        },
        execution_modes,
        // Credentials on the host, or from a Secret delivered as an environment variable.
        harness_auth_methods: vec!["runtime", "api_key"],
        dedicated_auth_methods: DEDICATED_AUTH_METHODS.to_vec(),
        delivers_secrets: true,
        adopts_existing_namespaces: false,
    }
}

/// The process Compute Driver.
pub struct ProcessCompute {
    selection: ComputeSelection,
    host: Host,
    settings: ProcessSettings,
}

impl ProcessCompute {
    /// The Driver over `settings`; creates the root (0700).
    pub fn new(settings: ProcessSettings) -> Result<Self, ComputeError> {
        let selection = selection(settings.dedicated.is_some());
        let credential_proxy = settings
            .credential_proxy_port
            .map(|port| {
                CredentialProxy::start(port).map_err(|e| {
                    ComputeError::permanent(
                        occ_core::ReasonCode::InvalidHostSettings,
                        format!("the credential proxy cannot listen on 127.0.0.1:{port}: {e}"),
                    )
                })
            })
            .transpose()?;
        let host = Host::new(
            settings.host.clone(),
            HostOptions {
                dedicated: settings.dedicated.clone(),
                sandbox: settings.sandbox.clone(),
                credential_proxy,
                ..HostOptions::local(selection.identity.id.clone())
            },
        )?;
        Ok(Self {
            selection,
            host,
            settings,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &ProcessSettings {
        &self.settings
    }
}

#[async_trait::async_trait]
impl Compute for ProcessCompute {
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
        Some(self.host.gateway_exits())
    }

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        self.host.ensure_namespace(ns).await
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        self.host.delete_namespace(ns).await
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        self.host.prepare_revision(rev, ctx).await
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        self.host.activate_revision(rev, ctx).await
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        self.host.restore_revision(previous, ctx, failed).await
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.host.stop_revision(rev).await
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.host.retire_revision(rev).await
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        self.host.delete_agent(agent).await
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        self.host.observe(rev).await
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        Ok(self
            .host
            .gateway_port(agent)?
            .map(|(port, token)| GatewayAccess {
                url: format!("ws://127.0.0.1:{port}"),
                token,
            }))
    }

    async fn runtime_report(&self, rev: &RevisionTarget) -> Result<RuntimeReport, ComputeError> {
        self.host.runtime_report(rev).await
    }

    async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        self.host.read_logs(rev, query).await
    }
}
