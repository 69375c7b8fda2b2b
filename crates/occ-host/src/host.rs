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
use crate::seed::{self, AsAgent};
use crate::snapshot::{GatewayBind, render_snapshot, same_but_driver_rendering};
use crate::systemd::{self, SystemdSupervision, UnitAccount};

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

    /// The snapshot the revision runs with (see [`render_snapshot`]).
    fn render(
        &self,
        rev: &RevisionTarget,
        agent_dir: &Path,
        port: u16,
    ) -> serde_json::Map<String, Value> {
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
        render_snapshot(
            rev,
            port,
            self.options.bind.as_str(),
            &workspace,
            Some(&log),
        )
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

    /// Makes the revision activatable: the Agent's directory (and account), its workspace
    /// seeded or set up, and the revision's immutable snapshot. A revision older than the
    /// installed one is never prepared (`REVISION_SUPERSEDED`, pending).
    pub async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        let dedicated = self.dedicated_for(rev)?;
        let runtime = self.runtime()?;
        let account = self.account(&rev.agent).await?;
        let marker = self.layout.ensure_agent(&rev.agent, account).await?;
        let agent_dir = self.agent_dir(&rev.agent);
        match &ctx.workspace_setup {
            // The harness initialises a dedicated Agent's workspace itself.
            _ if dedicated.is_some() => {}
            Some(setup) => {
                let as_agent = match (account, &self.options.accounts) {
                    (Some(account), Some(accounts)) => Some(AsAgent {
                        account,
                        program: &accounts.setup_program,
                        path: &self.settings.path,
                    }),
                    _ => None,
                };
                seed::apply_setup(&runtime, &agent_dir, setup, as_agent).await?;
            }
            None => seed::seed(&runtime, &agent_dir, account).await?,
        }
        // Never prepare over a newer installed revision.
        if let Some(current) = current(&agent_dir)?
            && current != rev.revision_id.as_str()
            && let Some(installed) = read_json::<RevisionMarker>(
                &agent_dir
                    .join("revisions")
                    .join(&current)
                    .join("revision.json"),
            )?
            && installed.revision > rev.revision
        {
            return Ok(Readiness::Pending {
                code: ReasonCode::RevisionSuperseded,
            });
        }
        let mut rendered = self.render(rev, &agent_dir, marker.port);
        if dedicated.is_some() {
            let harness_port = self.layout.ensure_harness_port(&rev.agent).await?;
            render_dedicated(
                &mut rendered,
                &DedicatedWiring {
                    app_server_url: &format!("ws://127.0.0.1:{harness_port}"),
                    node: None,
                },
            );
            crate::harness::trust_codex_plugin(&runtime, &agent_dir.join("state"))
                .map_err(|e| unavailable(format!("cannot trust the Codex plugin: {e}")))?;
        }
        let bytes = serde_json::to_vec_pretty(&rendered).map_err(|e| unavailable(e.to_string()))?;
        let hash = hex::encode(sha2::Sha256::digest(&bytes));
        let dir = revision_dir(&agent_dir, &rev.revision_id);
        let expected = RevisionMarker {
            revision_id: rev.revision_id.to_string(),
            revision: rev.revision,
            configuration_hash: hash,
        };
        match read_json::<RevisionMarker>(&dir.join("revision.json"))? {
            Some(existing) if existing == expected => return Ok(Readiness::Ready),
            // Rendered by an older occ (before per-revision capture or proxy keys): rendered again.
            Some(existing)
                if existing.revision_id == expected.revision_id
                    && existing.revision == expected.revision
                    && stored_snapshot(&dir)?
                        .is_some_and(|stored| same_but_driver_rendering(&stored, &rendered)) => {}
            Some(_) => {
                return Err(ComputeError::permanent(
                    ReasonCode::SnapshotMismatch,
                    format!(
                        "{} holds a different snapshot of this revision",
                        dir.display()
                    ),
                ));
            }
            None => {}
        }
        // Build the snapshot beside its final place and rename it in: a revision directory
        // either is complete or does not exist.
        let staging = agent_dir.join("revisions").join(format!(
            ".{}-{}",
            rev.revision_id,
            std::process::id()
        ));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io_error("remove", &staging, e))?;
        }
        create_dir(&staging)?;
        write_new(&staging.join("openclaw.json"), &bytes)?;
        write_json(&staging.join("revision.json"), &expected)?;
        if let Some(account) = account {
            // The gateway reads its snapshot; only root writes it.
            share_with_group(&staging, account.gid, 0o750)?;
            share_with_group(&staging.join("openclaw.json"), account.gid, 0o640)?;
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
        }
        std::fs::rename(&staging, &dir).map_err(|e| io_error("install", &dir, e))?;
        fsutil::sync_dir(&agent_dir.join("revisions")).map_err(|e| io_error("sync", &dir, e))?;
        Ok(Readiness::Ready)
    }

    /// Makes the revision the one that serves and waits until its gateway answers the native
    /// handshake. An already serving revision is left alone; a crashed one is restarted.
    pub async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        self.prepare_revision(rev, ctx).await?.activatable()?;
        let marker = self
            .layout
            .agent_marker(&rev.agent)?
            .ok_or_else(|| unavailable("the Agent directory vanished"))?;
        let agent_dir = self.agent_dir(&rev.agent);
        self.prepare_revision_log(rev, &agent_dir).await?;
        if let Some(settings) = self.dedicated_for(rev)? {
            return self
                .activate_dedicated(settings, rev, ctx, &agent_dir, &marker)
                .await;
        }
        if let Some(sd) = self.systemd() {
            return self
                .activate_unit(sd, rev, ctx, &agent_dir, marker.port)
                .await;
        }
        if self.serving(&rev.agent, &agent_dir, rev).await? {
            return Ok(());
        }
        if detached::adopt(&agent_dir, &rev.revision_id, self.settings.ready_timeout).await? {
            return Ok(());
        }
        // Whatever runs now (another revision, or this one unhealthy) makes way.
        detached::stop(&agent_dir, self.settings.stop_timeout).await?;
        switch_current(&agent_dir, &rev.revision_id)?;
        let account = self.account(&rev.agent).await?;
        let runtime = self.runtime()?;
        detached::start(
            self.launch(&runtime, rev, ctx, &agent_dir, marker.port),
            account,
        )
        .await
    }

    /// The revision's log directory before its gateway starts: created (the Agent's, with an
    /// account), its log rotated when it reached its cap, and the logs of all but the last few
    /// revisions removed. The installed revision's log stays: a failed activation puts it back.
    async fn prepare_revision_log(
        &self,
        rev: &RevisionTarget,
        agent_dir: &Path,
    ) -> Result<(), ComputeError> {
        let account = self.account(&rev.agent).await?;
        ensure_revision_log_dir(agent_dir, &rev.revision_id, account)?;
        rotate_log(agent_dir, &rev.revision_id).await?;
        let installed = current(agent_dir)?.and_then(|id| id.parse::<RevisionId>().ok());
        let mut keep = vec![&rev.revision_id];
        if let Some(installed) = installed.as_ref().filter(|id| **id != rev.revision_id) {
            keep.push(installed);
        }
        prune_revision_logs(agent_dir, &keep)
    }

    /// What the revision's gateway is started with.
    fn launch<'a>(
        &'a self,
        runtime: &'a OpenclawRuntime,
        rev: &'a RevisionTarget,
        ctx: &'a RevisionContext,
        agent_dir: &'a Path,
        port: u16,
    ) -> Launch<'a> {
        Launch {
            runtime,
            rev,
            ctx,
            agent_dir,
            port,
            bind: self.options.bind,
            ready_timeout: self.settings.ready_timeout,
            stop_timeout: self.settings.stop_timeout,
            exits: &self.exits,
            dedicated: None,
        }
    }

    /// Activation of a dedicated revision: the harness (launch input and credential written,
    /// `occ harness-launch` started, its app-server up), then the gateway with the runtime copy
    /// of the snapshot, then the node enrollment. An installed revision whose gateway, harness
    /// and node all serve is left alone; anything else of the Agent is stopped and started over.
    async fn activate_dedicated(
        &self,
        settings: &DedicatedSettings,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        marker: &layout::AgentMarker,
    ) -> Result<(), ComputeError> {
        if self.serving(&rev.agent, agent_dir, rev).await? {
            return Ok(());
        }
        let harness_port = marker
            .harness_port
            .ok_or_else(|| unavailable("the Agent has no harness port"))?;
        let dirs = HarnessDirs::of(agent_dir);
        remove_file(&enrolled_marker(&dirs, &rev.revision_id))?;
        detached::stop(agent_dir, self.settings.stop_timeout).await?;
        workload::stop(agent_dir, self.settings.stop_timeout).await?;
        switch_current(agent_dir, &rev.revision_id)?;
        let runtime = self.runtime()?;
        let app_server = app_server_token(agent_dir)?;
        let gateway_token = layout::token(agent_dir)?;
        let input = write_launch_files(
            &dirs,
            rev,
            ctx,
            &LaunchFiles {
                runtime_dir: &runtime.root,
                model_base_url: settings.model_base_url.as_deref(),
                app_server_port: harness_port,
                app_server_token: &app_server,
                gateway_port: marker.port,
            },
        )?;
        let snapshot = revision_dir(agent_dir, &rev.revision_id).join("openclaw.json");
        let paired = write_runtime_config(&dirs, &snapshot, rev)?;
        let home = dirs.home();
        let record = workload::start(HarnessLaunch {
            program: &settings.launcher,
            input: &input,
            path: &self.settings.path,
            output: &dirs.log(&rev.revision_id),
            cwd: &home,
            agent_dir,
            rev,
            exits: &self.exits,
        })?;
        let started = async {
            wait_running(
                &dirs,
                rev,
                ctx,
                gateway_token.expose(),
                harness_port,
                || crate::process::is_same_process(record.pid, record.start_time),
                settings.ready_timeout,
            )
            .await?;
            let config = dirs.runtime_config(&rev.revision_id);
            let mut launch = self.launch(&runtime, rev, ctx, agent_dir, marker.port);
            launch.dedicated = Some(DedicatedGateway {
                config: &config,
                app_server_token: &app_server,
            });
            detached::start(launch, None).await?;
            let endpoint = occ_gateway::Endpoint::loopback(marker.port, gateway_token.expose());
            enroll(&dirs, rev, &snapshot, &endpoint, paired).await
        };
        if let Err(e) = started.await {
            // Nothing half-started stays: the next attempt starts both again.
            detached::stop(agent_dir, self.settings.stop_timeout).await?;
            workload::stop(agent_dir, self.settings.stop_timeout).await?;
            return Err(e);
        }
        write_json(&enrolled_marker(&dirs, &rev.revision_id), &rev.revision_id)
    }

    /// Activation under systemd ([`systemd::activate`]).
    async fn activate_unit(
        &self,
        sd: &SystemdSupervision,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        port: u16,
    ) -> Result<(), ComputeError> {
        systemd::refuse_secrets(ctx)?;
        let (Some(settings), Some(accounts)) = (&self.options.accounts, &self.accounts) else {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                "systemd supervision needs per-Agent accounts",
            ));
        };
        let account = self.account(&rev.agent).await?.ok_or_else(|| {
            ComputeError::permanent(ReasonCode::InvalidHostSettings, "no per-Agent account")
        })?;
        let runtime = self.runtime()?;
        let unit_account = UnitAccount {
            account,
            name: accounts.name(rev.agent.namespace_id.as_str(), rev.agent.agent_id.as_str()),
            setup_program: &settings.setup_program,
        };
        let launch = self.launch(&runtime, rev, ctx, agent_dir, port);
        systemd::activate(sd, launch, unit_account).await
    }

    /// Serves `previous` again after `failed` (newer) could not be activated: the failed
    /// candidate's gateway stops first (two gateways never share the workspace), then the
    /// previous revision is activated. Any third installed revision is left alone and refused.
    pub async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        let agent_dir = self.agent_dir(&previous.agent);
        if let Some(installed) = current(&agent_dir)?
            && installed != previous.revision_id.as_str()
        {
            if installed != failed.revision_id.as_str() {
                return Err(ComputeError::permanent(
                    ReasonCode::ActiveRevisionChanged,
                    format!(
                        "revision {installed} is installed: neither the failed {} nor {}",
                        failed.revision_id, previous.revision_id
                    ),
                ));
            }
            // With nothing installed, the previous revision is no longer "older than the
            // installed one".
            self.stop_revision(failed).await?;
        }
        self.activate_revision(previous, ctx).await
    }

    /// Stops the revision's gateway if it is the installed one; keeps workspace, state and
    /// snapshots.
    pub async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let Some(_) = self.layout.agent_marker(&rev.agent)? else {
            return Ok(());
        };
        let agent_dir = self.agent_dir(&rev.agent);
        if !is_current(&agent_dir, &rev.revision_id)? {
            // Not installed: a gateway of another revision is not ours to stop, but a gateway
            // recorded for this revision (an interrupted switch) is.
            if detached::runs(&agent_dir, &rev.revision_id)? {
                detached::stop(&agent_dir, self.settings.stop_timeout).await?;
            }
            if workload::live_of(&agent_dir, &rev.revision_id)?.is_some() {
                workload::stop(&agent_dir, self.settings.stop_timeout).await?;
            }
            return Ok(());
        }
        if let Some(sd) = self.systemd() {
            sd.stop(rev.agent.namespace_id.as_str(), rev.agent.agent_id.as_str())
                .await?;
        }
        detached::stop(&agent_dir, self.settings.stop_timeout).await?;
        // The harness after its gateway: the gateway never runs without its app-server.
        workload::stop(&agent_dir, self.settings.stop_timeout).await?;
        remove_file(&agent_dir.join("current"))
    }

    /// Stops the revision if installed; its snapshot stays as the record of what ran until the
    /// Agent is deleted.
    pub async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        // A retired revision never runs again: its harness's credential and setup code go.
        self.stop_revision(rev).await?;
        if self.layout.agent_marker(&rev.agent)?.is_some() {
            HarnessDirs::of(&self.agent_dir(&rev.agent)).retire(&rev.revision_id)?;
        }
        Ok(())
    }

    /// Removes everything the Agent has here (gateway, workspace, state, account).
    pub async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
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

    /// What runs for the revision right now. Also caps the revision's log (observing is the
    /// worker's regular look at a running Agent).
    pub async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        let agent_dir = self.agent_dir(&rev.agent);
        if !agent_dir.exists() {
            return Ok(RuntimeState::NotRunning);
        }
        rotate_log(&agent_dir, &rev.revision_id).await?;
        if rev.execution_mode() == ExecutionMode::Dedicated {
            rotate(GatewayLog::of_harness(&agent_dir, &rev.revision_id)).await?;
        }
        if !is_current(&agent_dir, &rev.revision_id)? {
            return Ok(RuntimeState::NotCurrent);
        }
        Ok(if self.serving(&rev.agent, &agent_dir, rev).await? {
            RuntimeState::Serving
        } else {
            RuntimeState::NotRunning
        })
    }

    /// The revision's gateway as it runs now (nothing while another revision is installed):
    /// the process occ recorded for it, or its systemd unit's state.
    pub async fn runtime_report(
        &self,
        rev: &RevisionTarget,
    ) -> Result<RuntimeReport, ComputeError> {
        let agent_dir = self.agent_dir(&rev.agent);
        if !agent_dir.exists() || !is_current(&agent_dir, &rev.revision_id)? {
            return Ok(RuntimeReport::default());
        }
        let observed = match self.systemd() {
            Some(sd) => {
                let agent_id = rev.agent.agent_id.as_str();
                let path = sd.unit_path(agent_id);
                if !path.exists() {
                    return Ok(RuntimeReport::default());
                }
                report::Observed::Unit {
                    name: systemd::unit_name(agent_id),
                    state: sd.systemctl.state(&systemd::unit_name(agent_id)).await?,
                    installed_at: layout::modified_at(&path)?,
                }
            }
            None => match detached::recorded_for(&agent_dir, &rev.revision_id)? {
                Some(gateway) => report::Observed::Process(gateway),
                None => return Ok(RuntimeReport::default()),
            },
        };
        let ready = self.serving(&rev.agent, &agent_dir, rev).await?;
        let mut pods = vec![report::gateway_pod(&rev.revision_id, observed, ready)];
        if rev.execution_mode() == ExecutionMode::Dedicated
            && let Some(harness) = workload::recorded_for(&agent_dir, &rev.revision_id)?
        {
            let running = harness.live && harness_serving(&agent_dir, &rev.revision_id)?;
            pods.push(report::harness_pod(&rev.revision_id, harness, running));
        }
        Ok(RuntimeReport {
            pods,
            history_from_driver: false,
        })
    }
    /// One bounded read of the revision's captured gateway output (rotated first when it
    /// reached its cap): only what the revision's own gateways wrote; nothing for a revision
    /// that never ran here (or whose log was pruned).
    pub async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        if self.layout.agent_marker(&rev.agent)?.is_none() {
            return Ok(LogChunk {
                entries: Vec::new(),
                position: None,
                truncated: false,
            });
        }
        let agent_dir = self.agent_dir(&rev.agent);
        let log = match query.workload {
            LogWorkload::Gateway => {
                rotate_log(&agent_dir, &rev.revision_id).await?;
                GatewayLog::of_revision(&agent_dir, &rev.revision_id)
            }
            LogWorkload::Harness if rev.execution_mode() == ExecutionMode::Dedicated => {
                rotate(GatewayLog::of_harness(&agent_dir, &rev.revision_id)).await?;
                GatewayLog::of_harness(&agent_dir, &rev.revision_id)
            }
            LogWorkload::Harness => {
                return Err(ComputeError::permanent(
                    ReasonCode::RuntimeLogsSourceUnavailable,
                    "an embedded revision has no harness",
                ));
            }
        };
        let query = query.clone();
        let chunk = tokio::task::spawn_blocking(move || log.read(&query))
            .await
            .map_err(|e| unavailable(format!("the log read stopped: {e}")))??;
        // The gateway token (and the proxy key derived from it) never leaves the host, even
        // inside the lines.
        let token = layout::token(&agent_dir)?;
        let chunk = chunk.without_value(token.expose());
        Ok(match crate::snapshot::proxy_key(rev, token.expose()) {
            Some(key) => chunk.without_value(&key),
            None => chunk,
        })
    }
}

/// The snapshot in the revision directory `dir`, if it holds one (written by occ: root's, in a
/// directory only root writes).
fn stored_snapshot(dir: &Path) -> Result<Option<serde_json::Map<String, Value>>, ComputeError> {
    let path = dir.join("openclaw.json");
    let Some(bytes) =
        fsutil::read_bounded(&path, SNAPSHOT_LIMIT).map_err(|e| io_error("read", &path, e))?
    else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|doc| doc.as_object().cloned()))
}

/// `harness/run/<revId>/enrolled`: the revision's node was enrolled and bound (written last by
/// an activation, removed first by the next).
fn enrolled_marker(dirs: &HarnessDirs, rev: &RevisionId) -> PathBuf {
    dirs.run(rev).join("enrolled")
}

/// Whether the dedicated revision's harness runs (live launcher, app-server and node running)
/// and its node was enrolled.
fn harness_serving(agent_dir: &Path, rev: &RevisionId) -> Result<bool, ComputeError> {
    let dirs = HarnessDirs::of(agent_dir);
    Ok(workload::live_of(agent_dir, rev)?.is_some()
        && reports_running(&dirs, rev)
        && enrolled_marker(&dirs, rev).is_file())
}

/// Largest snapshot read back (far above any admitted document).
const SNAPSHOT_LIMIT: u64 = 16 * 1024 * 1024;

/// Rotates the revision's gateway log when it reached [`LOG_ROTATE_BYTES`] (off the async
/// threads: it copies up to that much).
async fn rotate_log(agent_dir: &Path, rev: &RevisionId) -> Result<(), ComputeError> {
    rotate(GatewayLog::of_revision(agent_dir, rev)).await
}

/// Rotates `log` when it reached [`LOG_ROTATE_BYTES`], off the async threads.
async fn rotate(log: GatewayLog) -> Result<(), ComputeError> {
    tokio::task::spawn_blocking(move || log.rotate_if_over(LOG_ROTATE_BYTES))
        .await
        .map_err(|e| unavailable(format!("the log rotation stopped: {e}")))??;
    Ok(())
}
