//! One machine's Agents, laid out under a root (`layout`) and run from the pinned
//! runtime: the Compute verbs as the host carries them out. The process Compute Driver calls
//! them in process; the SSH Compute Driver sends them to `occ compute-host` on its hosts
//! ([`crate::serve`]), which calls them there.
//!
//! Gateways run on the host's ports with token authentication, as occ's own user or, with
//! per-Agent accounts ([`HostOptions::accounts`]), each as its Agent's own user and group;
//! they are supervised detached (`detached`) or by systemd units ([`crate::systemd`]).
//! Readiness is a native `hello-ok` with the operator role and scopes. Stop keeps the
//! workspace and state, delete removes them.
//!
//! Dedicated execution ([`HostOptions::dedicated`], detached supervision without accounts: the
//! process Driver) runs a second workload per Agent, the Codex harness (`occ harness-launch`,
//! [`crate::harness`]): it starts before the gateway (the gateway's Codex plugin reads the
//! app-server's model catalog when it loads), gets the credential in a private file, and its
//! node host is enrolled into the gateway, which then serves the workspace from it. The gateway
//! gets no model credential. Stop is gateway, then harness.

use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::compute::{
    AgentTarget, ComputeError, Convergence, GatewayExit, LogChunk, LogQuery, LogWorkload,
    NamespaceTarget, Readiness, RevisionContext, RevisionTarget, RuntimeState, SecretText,
};
use occ_core::resource::ExecutionMode;
use occ_core::runtime_report::RuntimeReport;
use occ_core::{ReasonCode, RevisionId};
use serde_json::Value;
use sha2::Digest as _;

use crate::account::{self, Account, Accounts};
use crate::credential_proxy::{self as proxy, CredentialProxy};
use crate::detached::{self, DedicatedGateway, Launch};
use crate::failure::{io_error, ownership, unavailable};
use crate::fsutil;
use crate::harness::dedicated::{
    HarnessDirs, LaunchFiles, app_server_token, enroll, reports_running, wait_running,
    write_launch_files, write_runtime_config,
};
use crate::harness::render::{DedicatedWiring, render_dedicated};
use crate::harness::workload::{self, HarnessLaunch};
use crate::layout::{
    self, Layout, NamespaceMarker, RevisionMarker, create_dir, current, ensure_revision_log_dir,
    is_current, read_dir, read_json, remove_dir, remove_file, revision_dir, share_with_group,
    switch_current, write_json, write_new,
};
use crate::logs::{GatewayLog, LOG_ROTATE_BYTES, prune_revision_logs};
use crate::report;
use crate::runtime::{OpenclawRuntime, RuntimeError};
use crate::sandbox::SandboxSettings;
use crate::seed::{self, SetupIdentity, SetupProcess};
use crate::snapshot::{GatewayBind, render_snapshot, same_but_driver_rendering};
use crate::systemd::{self, SystemdSupervision, UnitAccount};

mod activation;
mod dedicated;
mod observation;
mod units;

use dedicated::harness_serving;

/// How a host runs its gateways.
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// Root of the layout.
    pub root: PathBuf,
    /// The installed runtime (`occ runtime install --dir`).
    pub runtime_root: PathBuf,
    /// Ports handed to Agents.
    pub port_range: RangeInclusive<u16>,
    /// How long a starting gateway may take to answer `hello-ok`.
    pub ready_timeout: Duration,
    /// How long a stopping gateway may take before it is killed.
    pub stop_timeout: Duration,
    /// The `PATH` the host's programs search (after the runtime's Node directory for OpenClaw
    /// processes): occ's own, passed in (this crate reads no environment).
    pub path: OsString,
}

/// Per-Agent Unix accounts: each Agent's directory is owned by its own user and group, and its
/// gateway, native setup and workspace setup run as that user.
#[derive(Debug, Clone)]
pub struct AccountSettings {
    /// Account name prefix (`[a-z_][a-z0-9_-]*`, not `root`).
    pub prefix: String,
    /// The `occ` binary whose `workspace-setup` subcommand applies staged workspace files as the
    /// Agent's user.
    pub setup_program: PathBuf,
}

/// How gateways are supervised.
#[derive(Debug, Clone)]
pub enum Supervision {
    /// Detached in their own process group, recorded in `gateway.json`; the worker's
    /// maintenance pass restarts a crashed one.
    Detached,
    /// One systemd unit per Agent (needs per-Agent accounts and root).
    Systemd(SystemdSupervision),
}

/// How the layout is run beyond [`LocalSettings`]: the identity recorded in markers, where
/// gateways listen, whether Agents get their own accounts and how gateways are supervised.
/// The process Driver uses [`HostOptions::local`]; `occ compute-host` (the SSH Driver's host
/// side) runs the same code with the SSH identity and per-Agent accounts.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// The Driver's identity, recorded in (and checked against) every marker.
    pub driver_id: String,
    /// Where gateways listen.
    pub bind: GatewayBind,
    /// Per-Agent accounts (needs root), or none: every gateway runs as occ's own user.
    pub accounts: Option<AccountSettings>,
    /// How gateways are supervised.
    pub supervision: Supervision,
    /// Dedicated execution (the Codex harness next to the gateway), when this host offers it.
    pub dedicated: Option<DedicatedSettings>,
    /// Containment of gateways ([`crate::sandbox`]), or none: they see what the user
    /// they run as can see.
    pub sandbox: Option<SandboxSettings>,
    /// The credential proxy of embedded revisions' model keys ([`crate::credential_proxy`]),
    /// or none: bound keys are delivered in the gateway's environment.
    pub credential_proxy: Option<CredentialProxy>,
}

/// How a host runs the Codex harness of dedicated Agents.
#[derive(Debug, Clone)]
pub struct DedicatedSettings {
    /// The `occ` binary whose hidden `harness-launch` subcommand runs each harness.
    pub launcher: PathBuf,
    /// The OpenAI-compatible endpoint Codex sends model calls to (`OCC_CODEX_BASE_URL`), or
    /// Codex's default.
    pub model_base_url: Option<String>,
    /// How long a harness may take from its start to a running app-server (workspace
    /// initialisation, login and the probe turn).
    pub ready_timeout: Duration,
}

impl HostOptions {
    /// Gateways of Driver `driver_id` on loopback, as occ's own user, detached.
    pub fn local(driver_id: impl Into<String>) -> Self {
        Self {
            driver_id: driver_id.into(),
            bind: GatewayBind::Loopback,
            accounts: None,
            supervision: Supervision::Detached,
            dedicated: None,
            sandbox: None,
            credential_proxy: None,
        }
    }
}

/// One machine's Agents and their gateways.
pub struct Host {
    settings: LocalSettings,
    options: HostOptions,
    layout: Layout,
    /// The per-Agent accounts, when Agents get their own.
    accounts: Option<Accounts>,
    /// Exits of the gateways this process started, as they happen.
    exits: tokio::sync::broadcast::Sender<GatewayExit>,
}

/// Exit reports kept for a slow subscriber; one that falls further behind misses some, which
/// the worker's maintenance pass still finds.
const EXIT_BACKLOG: usize = 256;

impl Host {
    /// The host over `settings`; creates the root (0700). With accounts, the root and the
    /// Namespace directories are traversable (0711) so each Agent's user reaches its own
    /// directory, and nothing else.
    pub fn new(settings: LocalSettings, options: HostOptions) -> Result<Self, ComputeError> {
        if matches!(options.supervision, Supervision::Systemd(_)) && options.accounts.is_none() {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                "systemd supervision needs per-Agent accounts",
            ));
        }
        if options.dedicated.is_some()
            && (options.accounts.is_some() || !matches!(options.supervision, Supervision::Detached))
        {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                "dedicated execution runs detached, without per-Agent accounts",
            ));
        }
        if let Some(accounts) = &options.accounts
            && !account::valid_prefix(&accounts.prefix)
        {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                format!(
                    "account prefix {:?} is not [a-z_][a-z0-9_-]* (or is root)",
                    accounts.prefix
                ),
            ));
        }
        let layout = Layout::new(
            settings.root.clone(),
            options.driver_id.clone(),
            settings.port_range.clone(),
            options.accounts.is_some(),
        )?;
        let accounts = options.accounts.as_ref().map(|a| {
            Accounts::new(
                settings.root.clone(),
                options.driver_id.clone(),
                a.prefix.clone(),
            )
        });
        Ok(Self {
            settings,
            options,
            layout,
            accounts,
            exits: tokio::sync::broadcast::channel(EXIT_BACKLOG).0,
        })
    }

    /// Exits nobody asked for of the gateways this process started (and so reaps), from now
    /// on. A gateway adopted from an earlier process, or run by systemd, is not reported: the
    /// worker's maintenance pass finds it down.
    pub fn gateway_exits(&self) -> tokio::sync::broadcast::Receiver<GatewayExit> {
        self.exits.subscribe()
    }

    /// The Agent's account (created if absent), when Agents get their own.
    async fn account(&self, agent: &AgentTarget) -> Result<Option<Account>, ComputeError> {
        let Some(accounts) = &self.accounts else {
            return Ok(None);
        };
        let home = self.agent_dir(agent).join("home");
        accounts.ensure(agent, &home).await.map(Some)
    }

    fn agent_dir(&self, agent: &AgentTarget) -> PathBuf {
        self.layout.agent_dir(&agent.namespace_id, &agent.agent_id)
    }

    fn runtime(&self) -> Result<OpenclawRuntime, ComputeError> {
        OpenclawRuntime::locate(&self.settings.runtime_root, &self.settings.path).map_err(|e| {
            match e {
                RuntimeError::NotInstalled { .. } => ComputeError::permanent(
                    ReasonCode::RuntimeNotInstalled,
                    format!(
                        "{e}; install it with `occ runtime install --dir {}`",
                        self.settings.runtime_root.display()
                    ),
                ),
                other => unavailable(other.to_string()),
            }
        })
    }

    fn systemd(&self) -> Option<&SystemdSupervision> {
        match &self.options.supervision {
            Supervision::Systemd(sd) => Some(sd),
            Supervision::Detached => None,
        }
    }

    /// Whether `rev`'s gateway runs and answers the handshake right now.
    async fn serving(
        &self,
        agent: &AgentTarget,
        agent_dir: &Path,
        rev: &RevisionTarget,
    ) -> Result<bool, ComputeError> {
        match self.systemd() {
            Some(sd) => systemd::serving(sd, agent, agent_dir, &rev.revision_id).await,
            None if rev.execution_mode() == ExecutionMode::Dedicated => {
                Ok(detached::serving(agent_dir, &rev.revision_id).await?
                    && harness_serving(agent_dir, &rev.revision_id)?)
            }
            None => detached::serving(agent_dir, &rev.revision_id).await,
        }
    }

    /// The dedicated settings when `rev` is dedicated (refused when this host offers only
    /// embedded execution); `None` for an embedded revision.
    fn dedicated_for(
        &self,
        rev: &RevisionTarget,
    ) -> Result<Option<&DedicatedSettings>, ComputeError> {
        if rev.execution_mode() == ExecutionMode::Embedded {
            return Ok(None);
        }
        match &self.options.dedicated {
            Some(settings) => Ok(Some(settings)),
            None => rev.require_embedded(&self.options.driver_id).map(|()| None),
        }
    }

    /// The providers of an embedded `rev` whose keys go through the credential proxy (none
    /// without one).
    fn proxied(&self, rev: &RevisionTarget) -> Vec<proxy::ProxiedProvider> {
        match &self.options.credential_proxy {
            Some(_) if rev.execution_mode() == ExecutionMode::Embedded => {
                proxy::proxied_providers(&rev.spec.configuration, &proxy::bound_variables(rev))
            }
            _ => Vec::new(),
        }
    }

    /// The snapshot the revision runs with (see [`render_snapshot`]; proxied providers point at
    /// their capability URLs).
    fn render(
        &self,
        rev: &RevisionTarget,
        agent_dir: &Path,
        port: u16,
    ) -> Result<serde_json::Map<String, Value>, ComputeError> {
        let log = GatewayLog::of_revision(agent_dir, &rev.revision_id)
            .current_path()
            .display()
            .to_string();
        // A dedicated Agent's workspace is the harness's (Codex's working directory; the
        // gateway's file operations reach it through the node).
        let workspace = match rev.execution_mode() {
            ExecutionMode::Dedicated => HarnessDirs::of(agent_dir).workspace(),
            ExecutionMode::Embedded => agent_dir.join("state/workspace"),
        };
        let workspace = workspace.display().to_string();
        let mut doc = render_snapshot(
            rev,
            port,
            self.options.bind.as_str(),
            &workspace,
            Some(&log),
        );
        if let Some(credential_proxy) = &self.options.credential_proxy {
            let proxied = self.proxied(rev);
            if !proxied.is_empty() {
                let token = layout::token(agent_dir)?;
                proxy::point_at_proxy(
                    &mut doc,
                    &proxied,
                    credential_proxy.base_url(),
                    token.expose(),
                    &rev.revision_id,
                );
            }
        }
        Ok(doc)
    }

    /// Stops and removes everything of one Agent directory (and its account).
    async fn remove_agent_dir(&self, dir: &Path) -> Result<(), ComputeError> {
        let marker = read_json::<layout::AgentMarker>(&dir.join("agent.json"))?;
        if let (Some(sd), Some(marker)) = (self.systemd(), &marker) {
            sd.remove(&marker.namespace_id, &marker.agent_id).await?;
        }
        detached::stop(dir, self.settings.stop_timeout).await?;
        workload::stop(dir, self.settings.stop_timeout).await?;
        remove_dir(dir)?;
        if let (Some(marker), Some(accounts)) = (marker, &self.accounts) {
            accounts
                .remove(&marker.namespace_id, &marker.agent_id)
                .await?;
        }
        Ok(())
    }

    /// The Agent's gateway port and operator token, if the Agent has a directory here.
    pub fn gateway_port(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<(u16, SecretText)>, ComputeError> {
        let Some(marker) = self.layout.agent_marker(agent)? else {
            return Ok(None);
        };
        Ok(Some((marker.port, layout::token(&self.agent_dir(agent))?)))
    }

    /// Prepares the Namespace's directory (and its marker). Idempotent.
    pub async fn ensure_namespace(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError> {
        let dir = self.layout.namespace_dir(&ns.id);
        let expected = NamespaceMarker {
            driver_id: self.layout.driver_id().to_owned(),
            namespace_id: ns.id.to_string(),
            namespace_name: ns.name.clone(),
        };
        match read_json::<NamespaceMarker>(&dir.join("namespace.json"))? {
            Some(marker)
                if marker.driver_id == expected.driver_id
                    && marker.namespace_id == expected.namespace_id =>
            {
                return Ok(Convergence::Done);
            }
            Some(_) => {
                return Err(ownership(format!(
                    "{} belongs to another Namespace",
                    dir.display()
                )));
            }
            None => {}
        }
        create_dir(&self.layout.namespaces_dir())?;
        create_dir(&dir)?;
        create_dir(&dir.join("agents"))?;
        for path in [
            self.layout.namespaces_dir(),
            dir.clone(),
            dir.join("agents"),
        ] {
            self.layout.traversable(&path)?;
        }
        write_json(&dir.join("namespace.json"), &expected)?;
        Ok(Convergence::Done)
    }

    /// Removes the (empty) Namespace's directory, anything a lost pass left in it, and its
    /// Agents' accounts.
    pub async fn delete_namespace(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError> {
        let dir = self.layout.namespace_dir(&ns.id);
        match read_json::<NamespaceMarker>(&dir.join("namespace.json"))? {
            None if !dir.exists() => {
                // A pass that removed the tree may have been lost before the accounts went.
                if let Some(accounts) = &self.accounts {
                    accounts.remove_namespace(ns.id.as_str()).await?;
                }
                return Ok(Convergence::Done);
            }
            Some(marker)
                if marker.namespace_id == ns.id.as_str()
                    && marker.driver_id == self.layout.driver_id() => {}
            _ => {
                return Err(ownership(format!(
                    "{} is not this Namespace's",
                    dir.display()
                )));
            }
        }
        // Only empty Namespaces are deleted, but stop anything left behind by a lost pass.
        for agent in read_dir(&dir.join("agents"))? {
            self.remove_agent_dir(&agent).await?;
        }
        remove_dir(&dir)?;
        if let Some(accounts) = &self.accounts {
            accounts.remove_namespace(ns.id.as_str()).await?;
        }
        Ok(Convergence::Done)
    }

    /// Removes everything the Agent has here (gateway, workspace, state, account).
    pub async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        if let Some(credential_proxy) = &self.options.credential_proxy {
            credential_proxy.withdraw_agent(&agent.agent_id);
        }
        if self.layout.agent_marker(agent)?.is_some() {
            self.remove_agent_dir(&self.agent_dir(agent)).await?;
        }
        // The retry path of a deletion lost after the directory went.
        if let Some(accounts) = &self.accounts {
            accounts
                .remove(agent.namespace_id.as_str(), agent.agent_id.as_str())
                .await?;
        }
        Ok(())
    }
}
