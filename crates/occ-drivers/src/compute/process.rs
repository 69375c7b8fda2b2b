//! The process Compute Driver: each Agent's OpenClaw gateway runs as a supervised local process
//! from the pinned runtime, on loopback, with token authentication.
//!
//! Layout under the root (directories 0700, files 0600, ids are occ's validated ids):
//!
//! ```text
//! namespaces/<nsId>/namespace.json                 ownership marker
//! namespaces/<nsId>/agents/<agentId>/agent.json    ownership marker + the Agent's port (fixed for its lifetime)
//!   gateway-token                                  the Agent's operator token (64 hex)
//!   home/  state/  state/workspace/                HOME, OPENCLAW_STATE_DIR, the persistent workspace
//!   state/workspace/.oce-workspace-setup.json      marker of an applied staged workspace setup
//!   workspace-seeded                               the workspace holds its initial files (stock or staged)
//!   revisions/<revId>/openclaw.json                immutable snapshot: the admitted document + driver-owned settings
//!   revisions/<revId>/revision.json                marker: revision number and snapshot hash
//!   current -> revisions/<revId>                   the installed revision (switched on activation)
//!   gateway.json                                   the running gateway: pid, process start time, revision, port
//!   served.json                                    the revision that answered the native handshake
//!   logs/gateway.log                               the gateway's log (stdout, stderr and logging.file)
//! ```
//!
//! Gateways run detached in their own process group, so a worker restart does not stop them; a
//! restarted worker re-adopts a running gateway after checking its pid, its process start time
//! (so a recycled pid is never mistaken for it), its command line and the native handshake.
//! Readiness is a native `hello-ok` with the operator role and scopes. Stopping signals only the
//! gateway's own process group (SIGTERM, then SIGKILL after a bound) and waits for it to exit;
//! stop keeps the workspace and state, delete removes them.
//!
//! Only embedded execution: the gateway runs OpenClaw itself.
//!
//! The SSH Compute Driver runs this same code on its hosts ([`ProcessCompute::for_host`], through
//! `occ compute-host`): with per-Agent Unix accounts, `home/`, `state/`, `logs/` and `tmp/` belong
//! to the Agent's own user and group, the Agent's directory and `revisions/` stay root's with
//! mode 0750 for the Agent's group (markers, token and snapshots cannot be changed by the Agent),
//! the directories above are 0711, and native setup, workspace setup (`occ workspace-setup`) and
//! the gateway run with the Agent's uid and gid.

use std::ops::RangeInclusive;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use occ_core::resource::HarnessAuth;
use occ_core::{AgentId, NamespaceId, RevisionId};
use occ_gateway::{Endpoint, GatewayError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Digest as _;
use tokio::sync::Mutex;

use super::account::{self, Account};
use super::systemd::{self, SetupCheck, SystemdSupervision, UnitSpec};
use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, GatewayAccess,
    NamespaceTarget, Readiness, RevisionContext, RevisionTarget, RuntimeState, SecretText,
};
use crate::fsutil;
use crate::runtime::{OpenclawRuntime, RuntimeError};
use crate::workspace_setup::{self, SetupEnv, SetupError, SetupInput};
use occ_core::resource::WorkspaceSetup;

/// Settings of the process Driver.
#[derive(Debug, Clone)]
pub struct ProcessSettings {
    /// Root of the layout above.
    pub root: PathBuf,
    /// The installed runtime (`occ runtime install --dir`).
    pub runtime_root: PathBuf,
    /// Loopback ports handed to Agents.
    pub port_range: RangeInclusive<u16>,
    /// How long a starting gateway may take to answer `hello-ok`.
    pub ready_timeout: Duration,
    /// How long a stopping gateway may take before it is killed.
    pub stop_timeout: Duration,
    /// Maintenance passes (crash detection and restart).
    pub maintenance_interval: Option<Duration>,
}

/// Where a gateway listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayBind {
    /// 127.0.0.1 only (occ runs on the same machine).
    Loopback,
    /// Every interface (`0.0.0.0`; occ reaches the gateway over the network, token auth).
    Lan,
}

impl GatewayBind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Lan => "lan",
        }
    }
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

/// The variables every gateway gets besides its paths and token, under either supervisor.
pub const GATEWAY_FIXED_ENV: [(&str, &str); 7] = [
    ("OPENCLAW_DISABLE_BONJOUR", "1"),
    ("OPENCLAW_EXEC_SHELL_SNAPSHOT", "0"),
    ("OPENCLAW_NO_RESPAWN", "1"),
    ("OPENCLAW_SKIP_CHANNELS", "1"),
    ("OPENCLAW_NO_AUTO_UPDATE", "1"),
    ("DO_NOT_TRACK", "1"),
    // Gateways never install packages at run time: a plugin the configuration implies but
    // the pinned runtime lacks fails fast instead of stalling startup on npm.
    ("npm_config_offline", "true"),
];

/// How the layout is run beyond [`ProcessSettings`]: the identity recorded in markers, where
/// gateways listen and whether Agents get their own accounts. The process Driver uses
/// [`HostOptions::process`]; `occ compute-host` (the SSH Driver's host side) runs the same code
/// with the SSH identity and per-Agent accounts.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Identity (recorded in markers) and what admission may hand this Driver.
    pub selection: ComputeSelection,
    /// Where gateways listen.
    pub bind: GatewayBind,
    /// Per-Agent accounts (needs root), or none: every gateway runs as occ's own user.
    pub accounts: Option<AccountSettings>,
    /// How gateways are supervised.
    pub supervision: Supervision,
}

impl HostOptions {
    /// The process Driver: loopback, gateways as occ's own user.
    pub fn process() -> Self {
        Self {
            selection: ComputeSelection::process(),
            bind: GatewayBind::Loopback,
            accounts: None,
            supervision: Supervision::Detached,
        }
    }
}

/// The process Compute Driver.
pub struct ProcessCompute {
    selection: ComputeSelection,
    options: HostOptions,
    settings: ProcessSettings,
    /// Serializes port allocation within this process (a file lock covers other processes).
    allocation: Mutex<()>,
}

/// `namespace.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NamespaceMarker {
    driver_id: String,
    namespace_id: String,
    namespace_name: String,
}

/// `agent.json`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentMarker {
    driver_id: String,
    namespace_id: String,
    agent_id: String,
    service_principal_id: String,
    port: u16,
}

/// `revision.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RevisionMarker {
    revision_id: String,
    revision: u64,
    configuration_hash: String,
}

/// `gateway.json`: enough to find the exact process again after a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GatewayRecord {
    pid: u32,
    start_time: u64,
    revision_id: String,
    port: u16,
}

/// `served.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServedMarker {
    revision_id: String,
}

/// Largest marker file read.
const MARKER_LIMIT: u64 = 64 * 1024;
/// OpenClaw's exit status for an invalid configuration (EX_CONFIG).
const EXIT_CONFIG: i32 = 78;
/// How long a starting gateway waits for its port to be released by a predecessor.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(10);
/// How long the native workspace seeding may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How many log lines a startup failure reports.
const LOG_TAIL_LINES: usize = 12;

fn unavailable(message: impl Into<String>) -> ComputeError {
    ComputeError::transient("DEPENDENCY_UNAVAILABLE", message)
}

fn ownership(message: impl Into<String>) -> ComputeError {
    ComputeError::permanent("OWNERSHIP_CONFLICT", message)
}

fn io_error(context: &str, path: &Path, err: std::io::Error) -> ComputeError {
    unavailable(format!("{context} {}: {err}", path.display()))
}

impl ProcessCompute {
    /// The Driver over `settings`; creates the root (0700).
    pub fn new(settings: ProcessSettings) -> Result<Self, ComputeError> {
        Self::for_host(settings, HostOptions::process())
    }

    /// The same layout and operations with `options` (the host side of the SSH Driver). With
    /// accounts, the root and the Namespace directories are traversable (0711) so each Agent's
    /// user reaches its own 0700 directory, and nothing else.
    pub fn for_host(settings: ProcessSettings, options: HostOptions) -> Result<Self, ComputeError> {
        create_dir(&settings.root)?;
        if matches!(options.supervision, Supervision::Systemd(_)) && options.accounts.is_none() {
            return Err(ComputeError::permanent(
                "INVALID_HOST_SETTINGS",
                "systemd supervision needs per-Agent accounts",
            ));
        }
        if let Some(accounts) = &options.accounts
            && !account::valid_prefix(&accounts.prefix)
        {
            return Err(ComputeError::permanent(
                "INVALID_HOST_SETTINGS",
                format!(
                    "account prefix {:?} is not [a-z_][a-z0-9_-]* (or is root)",
                    accounts.prefix
                ),
            ));
        }
        let compute = Self {
            selection: options.selection.clone(),
            options,
            settings,
            allocation: Mutex::new(()),
        };
        compute.traversable(&compute.settings.root)?;
        Ok(compute)
    }

    /// With accounts, lets other users pass through `dir` (0711) without listing it.
    fn traversable(&self, dir: &Path) -> Result<(), ComputeError> {
        if self.options.accounts.is_some() {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| io_error("chmod", dir, e))?;
        }
        Ok(())
    }

    /// The Agent's account (created if absent), when Agents get their own.
    async fn account(&self, agent: &AgentTarget) -> Result<Option<Account>, ComputeError> {
        let Some(accounts) = &self.options.accounts else {
            return Ok(None);
        };
        let home = self
            .agent_dir(&agent.namespace_id, &agent.agent_id)
            .join("home");
        account::ensure(
            &self.settings.root,
            &self.selection.identity.id,
            &accounts.prefix,
            agent,
            &home,
        )
        .await
        .map(Some)
    }

    /// The settings.
    pub fn settings(&self) -> &ProcessSettings {
        &self.settings
    }

    fn namespace_dir(&self, ns: &NamespaceId) -> PathBuf {
        self.settings.root.join("namespaces").join(ns.as_str())
    }

    fn agent_dir(&self, ns: &NamespaceId, agent: &AgentId) -> PathBuf {
        self.namespace_dir(ns).join("agents").join(agent.as_str())
    }

    fn revision_dir(&self, agent_dir: &Path, rev: &RevisionId) -> PathBuf {
        agent_dir.join("revisions").join(rev.as_str())
    }

    fn runtime(&self) -> Result<OpenclawRuntime, ComputeError> {
        OpenclawRuntime::locate(&self.settings.runtime_root).map_err(|e| match e {
            RuntimeError::NotInstalled { .. } => ComputeError::permanent(
                "RUNTIME_NOT_INSTALLED",
                format!(
                    "{e}; install it with `occ runtime install --dir {}`",
                    self.settings.runtime_root.display()
                ),
            ),
            other => unavailable(other.to_string()),
        })
    }

    /// The verified marker of an Agent's directory, if the directory exists.
    fn agent_marker(&self, agent: &AgentTarget) -> Result<Option<AgentMarker>, ComputeError> {
        let dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        let Some(marker) = read_json::<AgentMarker>(&dir.join("agent.json"))? else {
            if dir.exists() {
                return Err(ownership(format!(
                    "{} exists without an agent marker",
                    dir.display()
                )));
            }
            return Ok(None);
        };
        if marker.driver_id != self.selection.identity.id
            || marker.namespace_id != agent.namespace_id.as_str()
            || marker.agent_id != agent.agent_id.as_str()
            || marker.service_principal_id != agent.service_principal_id.as_str()
        {
            return Err(ownership(format!(
                "{} belongs to another Agent or Driver",
                dir.display()
            )));
        }
        Ok(Some(marker))
    }

    /// Creates the Agent's directory with a port allocated for its lifetime, if absent.
    async fn ensure_agent(
        &self,
        agent: &AgentTarget,
        account: Option<Account>,
    ) -> Result<AgentMarker, ComputeError> {
        if let Some(marker) = self.agent_marker(agent)? {
            return Ok(marker);
        }
        let ns_dir = self.namespace_dir(&agent.namespace_id);
        if !ns_dir.join("namespace.json").exists() {
            return Err(ComputeError::permanent(
                "NAMESPACE_NOT_READY",
                "the Namespace was never prepared on this Compute",
            ));
        }
        let _turn = self.allocation.lock().await;
        let lock = self.lock_file()?;
        // Another process may have created it while we waited for the lock.
        if let Some(marker) = self.agent_marker(agent)? {
            return Ok(marker);
        }
        let port = self.allocate_port()?;
        let dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        let staging = dir.with_extension(format!("creating-{}", std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io_error("remove", &staging, e))?;
        }
        for sub in [
            "",
            "home",
            "state",
            "state/workspace",
            "revisions",
            "logs",
            "tmp",
        ] {
            create_dir(&staging.join(sub))?;
        }
        let token = hex::encode(rand::random::<[u8; 32]>());
        write_new(&staging.join("gateway-token"), token.as_bytes())?;
        let marker = AgentMarker {
            driver_id: self.selection.identity.id.clone(),
            namespace_id: agent.namespace_id.to_string(),
            agent_id: agent.agent_id.to_string(),
            service_principal_id: agent.service_principal_id.to_string(),
            port,
        };
        write_json(&staging.join("agent.json"), &marker)?;
        hand_over_agent_dir(&staging, account)?;
        std::fs::rename(&staging, &dir).map_err(|e| io_error("install", &dir, e))?;
        fsutil::sync_dir(dir.parent().unwrap_or(&self.settings.root))
            .map_err(|e| io_error("sync", &dir, e))?;
        drop(lock);
        Ok(marker)
    }

    fn lock_file(&self) -> Result<std::fs::File, ComputeError> {
        let path = self.settings.root.join(".allocation.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error("open", &path, e))?;
        file.lock().map_err(|e| io_error("lock", &path, e))?;
        Ok(file)
    }

    /// The lowest port in the range that no Agent owns and nothing listens on now.
    fn allocate_port(&self) -> Result<u16, ComputeError> {
        let mut taken = std::collections::BTreeSet::new();
        let namespaces = self.settings.root.join("namespaces");
        for ns in read_dir(&namespaces)? {
            for agent in read_dir(&ns.join("agents"))? {
                if let Some(marker) = read_json::<AgentMarker>(&agent.join("agent.json"))? {
                    taken.insert(marker.port);
                }
            }
        }
        self.settings
            .port_range
            .clone()
            .find(|p| !taken.contains(p) && port_is_free(*p))
            .ok_or_else(|| {
                ComputeError::permanent(
                    "GATEWAY_PORTS_EXHAUSTED",
                    format!(
                        "no free port left in {}-{}",
                        self.settings.port_range.start(),
                        self.settings.port_range.end()
                    ),
                )
            })
    }

    fn token(&self, agent_dir: &Path) -> Result<SecretText, ComputeError> {
        let path = agent_dir.join("gateway-token");
        let bytes = fsutil::read_bounded(&path, 256)
            .map_err(|e| io_error("read", &path, e))?
            .ok_or_else(|| ownership(format!("{} is missing", path.display())))?;
        let token = String::from_utf8(bytes)
            .ok()
            .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| ownership(format!("{} is malformed", path.display())))?;
        Ok(SecretText::new(token))
    }

    /// The snapshot the revision runs with (see [`render_snapshot`]).
    fn render(&self, rev: &RevisionTarget, agent_dir: &Path, port: u16) -> Map<String, Value> {
        let log = agent_dir.join("logs/gateway.log").display().to_string();
        let workspace = agent_dir.join("state/workspace").display().to_string();
        render_snapshot(
            rev,
            port,
            self.options.bind.as_str(),
            &workspace,
            Some(&log),
        )
    }

    /// The gateway process recorded for the Agent, if it is still that exact process.
    fn live_gateway(&self, agent_dir: &Path) -> Result<Option<GatewayRecord>, ComputeError> {
        let Some(record) = read_json::<GatewayRecord>(&agent_dir.join("gateway.json"))? else {
            return Ok(None);
        };
        Ok(is_same_process(record.pid, record.start_time).then_some(record))
    }

    /// Stops the recorded gateway (its own process group): SIGTERM, wait, SIGKILL after the
    /// bound, wait. Removes the record.
    async fn stop_gateway(&self, agent_dir: &Path) -> Result<(), ComputeError> {
        if let Some(record) = self.live_gateway(agent_dir)? {
            tracing::info!(pid = record.pid, revision = %record.revision_id, "stopping gateway");
            signal_group(record.pid, Signal::Term);
            let deadline = tokio::time::Instant::now() + self.settings.stop_timeout;
            while is_same_process(record.pid, record.start_time) {
                if tokio::time::Instant::now() >= deadline {
                    tracing::warn!(pid = record.pid, "gateway did not stop in time; killing it");
                    signal_group(record.pid, Signal::Kill);
                    let kill_deadline = tokio::time::Instant::now() + Duration::from_secs(5);
                    while is_same_process(record.pid, record.start_time) {
                        if tokio::time::Instant::now() >= kill_deadline {
                            return Err(unavailable(format!(
                                "gateway process {} does not exit",
                                record.pid
                            )));
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        remove_file(&agent_dir.join("gateway.json"))?;
        remove_file(&agent_dir.join("served.json"))?;
        Ok(())
    }

    /// Starts the gateway for `rev` and waits for `hello-ok`.
    async fn start_gateway(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        port: u16,
        account: Option<Account>,
    ) -> Result<(), ComputeError> {
        let runtime = self.runtime()?;
        // The helpers of a gateway that was just killed may hold its socket for a few seconds.
        let deadline = tokio::time::Instant::now() + PORT_RELEASE_WAIT;
        while !port_is_free(port) {
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    "GATEWAY_PORT_IN_USE",
                    format!("port {port} of the Agent is in use by another process"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let token = self.token(agent_dir)?;
        let snapshot = self
            .revision_dir(agent_dir, &rev.revision_id)
            .join("openclaw.json");
        let log_path = agent_dir.join("logs/gateway.log");
        let log = open_log(&log_path, account)?;
        let log_err = log
            .try_clone()
            .map_err(|e| io_error("open", &log_path, e))?;
        let mut cmd = runtime.command();
        cmd.arg("gateway")
            .arg("run")
            .arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg(self.options.bind.as_str())
            .current_dir(agent_dir.join("state"))
            .env("HOME", agent_dir.join("home"))
            .env("TMPDIR", agent_dir.join("tmp"))
            .env("OPENCLAW_STATE_DIR", agent_dir.join("state"))
            .env("OPENCLAW_CONFIG_PATH", &snapshot)
            .env("OPENCLAW_GATEWAY_TOKEN", token.expose())
            .envs(GATEWAY_FIXED_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .process_group(0)
            .kill_on_drop(false);
        if let Some(account) = account {
            cmd.uid(account.uid).gid(account.gid);
        }
        for (name, value) in &ctx.environment {
            cmd.env(name, value.expose());
        }
        if let Some(credential) = &ctx.harness_credential {
            cmd.env(harness_key_variable(rev)?, credential.expose());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| unavailable(format!("cannot start the gateway: {e}")))?;
        let pid = child
            .id()
            .ok_or_else(|| unavailable("the gateway exited at once"))?;
        // Record it before anything else can be interrupted: a worker that dies now still
        // leaves enough to find and stop (or adopt) this exact process.
        let start_time = process_start_time(pid).unwrap_or(0);
        let record = GatewayRecord {
            pid,
            start_time,
            revision_id: rev.revision_id.to_string(),
            port,
        };
        write_json(&agent_dir.join("gateway.json"), &record)?;
        tracing::info!(pid, port, revision = %rev.revision_id, "gateway started");
        let (exit_tx, mut exit_rx) = tokio::sync::oneshot::channel();
        // Reap it whenever it exits, so it never lingers as a zombie of this process.
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let _ = exit_tx.send(status);
        });
        let endpoint = Endpoint::loopback(port, token.expose());
        let ready = tokio::select! {
            ready = occ_gateway::wait_ready(&endpoint, self.settings.ready_timeout) => ready,
            status = &mut exit_rx => {
                let status = status.ok().flatten();
                let code = status.and_then(|s| s.code());
                let tail = log_tail(&log_path);
                remove_file(&agent_dir.join("gateway.json"))?;
                let message = format!(
                    "the gateway exited during startup ({}){}",
                    status.map_or("unknown status".into(), |s| s.to_string()),
                    if tail.is_empty() { String::new() } else { format!("; log tail:\n{tail}") }
                );
                return Err(if code == Some(EXIT_CONFIG) {
                    ComputeError::permanent("RUNTIME_CONFIGURATION_INVALID", message)
                } else {
                    ComputeError::transient("RUNTIME_STARTUP_FAILED", message)
                });
            }
        };
        match ready {
            Ok(hello) => {
                tracing::info!(pid, server = %hello.server_version, "gateway ready");
                write_json(
                    &agent_dir.join("served.json"),
                    &ServedMarker {
                        revision_id: rev.revision_id.to_string(),
                    },
                )
            }
            Err(e) => {
                // Do not leave a gateway that never became ready: the next pass starts over.
                self.stop_gateway(agent_dir).await?;
                Err(match e {
                    GatewayError::Unauthorized(m) | GatewayError::MissingScope(m) => {
                        ComputeError::permanent("AGENT_GATEWAY_UNAUTHORIZED", m)
                    }
                    other => ComputeError::transient(
                        "AGENT_GATEWAY_UNAVAILABLE",
                        format!("the gateway did not become ready: {other}"),
                    ),
                })
            }
        }
    }

    /// Points `current` at `rev` (atomically).
    fn switch_current(&self, agent_dir: &Path, rev: &RevisionId) -> Result<(), ComputeError> {
        let link = agent_dir.join("current");
        let temp = agent_dir.join(format!(".current-{}", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        std::os::unix::fs::symlink(Path::new("revisions").join(rev.as_str()), &temp)
            .map_err(|e| io_error("link", &temp, e))?;
        std::fs::rename(&temp, &link).map_err(|e| io_error("switch", &link, e))?;
        fsutil::sync_dir(agent_dir).map_err(|e| io_error("sync", agent_dir, e))
    }

    /// The revision `current` points at, verified to be one of ours.
    fn current(&self, agent_dir: &Path) -> Result<Option<String>, ComputeError> {
        let link = agent_dir.join("current");
        match std::fs::read_link(&link) {
            Ok(target) => {
                let name = target
                    .strip_prefix("revisions")
                    .ok()
                    .and_then(|p| p.to_str())
                    .filter(|n| n.parse::<RevisionId>().is_ok())
                    .ok_or_else(|| {
                        ownership(format!("{} points outside revisions/", link.display()))
                    })?;
                Ok(Some(name.to_owned()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("read", &link, e)),
        }
    }

    fn served(&self, agent_dir: &Path) -> Result<Option<String>, ComputeError> {
        Ok(read_json::<ServedMarker>(&agent_dir.join("served.json"))?.map(|s| s.revision_id))
    }

    /// Whether `rev`'s gateway runs and answers the handshake right now.
    async fn serving(
        &self,
        agent: &AgentTarget,
        agent_dir: &Path,
        rev: &RevisionId,
    ) -> Result<bool, ComputeError> {
        if let Some(sd) = self.systemd() {
            return self.unit_serving(sd, agent, agent_dir, rev).await;
        }
        let Some(record) = self.live_gateway(agent_dir)? else {
            return Ok(false);
        };
        if record.revision_id != rev.as_str()
            || self.current(agent_dir)?.as_deref() != Some(rev.as_str())
            || self.served(agent_dir)?.as_deref() != Some(rev.as_str())
        {
            return Ok(false);
        }
        let token = self.token(agent_dir)?;
        let endpoint = Endpoint::loopback(record.port, token.expose());
        Ok(occ_gateway::wait_ready(&endpoint, Duration::from_secs(5))
            .await
            .is_ok())
    }

    /// Seeds a new Agent's workspace with the stock files of the pinned OpenClaw (native
    /// `openclaw setup --baseline`, run once, against a throwaway home, state and config so
    /// the Agent's own config stays the immutable snapshot).
    async fn seed_workspace(
        &self,
        agent_dir: &Path,
        account: Option<Account>,
    ) -> Result<(), ComputeError> {
        let done = agent_dir.join("workspace-seeded");
        if done.exists() {
            return Ok(());
        }
        let runtime = self.runtime()?;
        // With accounts the scratch space lives in the root-owned Agent directory (never in a
        // directory the Agent's user could swap for a link) and is handed over bottom-up.
        let scratch = match account {
            Some(_) => agent_dir.join(".setup-scratch"),
            None => agent_dir.join("tmp").join("setup"),
        };
        if scratch.exists() {
            std::fs::remove_dir_all(&scratch).map_err(|e| io_error("remove", &scratch, e))?;
        }
        for sub in ["home", "state"] {
            create_dir(&scratch.join(sub))?;
        }
        if let Some(account) = account {
            for path in [scratch.join("home"), scratch.join("state"), scratch.clone()] {
                std::os::unix::fs::lchown(&path, Some(account.uid), Some(account.gid))
                    .map_err(|e| io_error("chown", &path, e))?;
            }
        }
        let log_path = agent_dir.join("logs/setup.log");
        let log = open_log(&log_path, account)?;
        let log_err = log
            .try_clone()
            .map_err(|e| io_error("open", &log_path, e))?;
        let mut cmd = runtime.command();
        cmd.args(["setup", "--baseline", "--workspace"])
            .arg(agent_dir.join("state/workspace"))
            .env("HOME", scratch.join("home"))
            .env("TMPDIR", agent_dir.join("tmp"))
            .env("OPENCLAW_STATE_DIR", scratch.join("state"))
            .env("OPENCLAW_CONFIG_PATH", scratch.join("openclaw.json"))
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            // Without it the CLI may re-spawn itself detached, outliving the timeout below.
            .env("OPENCLAW_NO_RESPAWN", "1")
            .env("DO_NOT_TRACK", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .kill_on_drop(true);
        if let Some(account) = account {
            cmd.uid(account.uid).gid(account.gid);
        }
        let status = tokio::time::timeout(SETUP_TIMEOUT, cmd.status())
            .await
            .map_err(|_| {
                ComputeError::transient(
                    "WORKSPACE_SETUP_FAILED",
                    format!("openclaw setup did not finish in {SETUP_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| unavailable(format!("cannot run openclaw setup: {e}")))?;
        let _ = std::fs::remove_dir_all(&scratch);
        if !status.success() {
            return Err(ComputeError::transient(
                "WORKSPACE_SETUP_FAILED",
                format!(
                    "openclaw setup failed ({status}); log tail:\n{}",
                    log_tail(&log_path)
                ),
            ));
        }
        write_new(&done, b"")
    }

    /// Applies the Agent's staged workspace setup (the setup runtime, in process: the staged text
    /// goes straight from the record into the workspace and never lands in a delivery file), or,
    /// for a completed record, verifies the marker so a lost workspace blocks startup instead of
    /// being silently reseeded. Native setup runs inside, so no separate seeding follows.
    async fn apply_workspace_setup(
        &self,
        agent_dir: &Path,
        setup: &WorkspaceSetup,
        account: Option<Account>,
    ) -> Result<(), ComputeError> {
        if let (Some(account), Some(accounts)) = (account, &self.options.accounts) {
            self.setup_as_agent(agent_dir, setup, account, &accounts.setup_program)
                .await?;
            let done = agent_dir.join("workspace-seeded");
            if !done.exists() {
                write_new(&done, b"")?;
            }
            return Ok(());
        }
        let runtime = self.runtime()?;
        let scratch = agent_dir.join("tmp").join("setup");
        let env = SetupEnv::new(runtime, scratch.clone(), agent_dir.join("tmp"));
        let input = SetupInput::from(setup);
        let result = workspace_setup::apply(&input, &agent_dir.join("state/workspace"), &env).await;
        let _ = std::fs::remove_dir_all(&scratch);
        result.map_err(setup_failure)?;
        let done = agent_dir.join("workspace-seeded");
        if !done.exists() {
            write_new(&done, b"")?;
        }
        Ok(())
    }

    /// The workspace setup runtime (`occ workspace-setup`) as the Agent's user: the input goes
    /// on its stdin (never argv, never a file), its scratch space is the Agent's `tmp/`.
    async fn setup_as_agent(
        &self,
        agent_dir: &Path,
        setup: &WorkspaceSetup,
        account: Account,
        program: &Path,
    ) -> Result<(), ComputeError> {
        use tokio::io::AsyncWriteExt as _;
        let runtime = self.runtime()?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.arg("workspace-setup")
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", agent_dir.join("home"))
            .env("TMPDIR", agent_dir.join("tmp"))
            .env("OCC_LOG", "warn")
            .env("NO_COLOR", "1")
            .env("OCC_WORKSPACE_DIR", agent_dir.join("state/workspace"))
            .env("OCC_OPENCLAW_RUNTIME", &runtime.root)
            .current_dir(agent_dir.join("home"))
            .uid(account.uid)
            .gid(account.gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            unavailable(format!(
                "cannot run {} workspace-setup: {e}",
                program.display()
            ))
        })?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| unavailable("workspace-setup has no stdin"))?;
        let input = SetupInput::from(setup).to_json();
        stdin
            .write_all(&input)
            .await
            .map_err(|e| unavailable(format!("cannot hand the setup to workspace-setup: {e}")))?;
        drop(stdin);
        let output = tokio::time::timeout(
            SETUP_TIMEOUT * 2 + Duration::from_secs(30),
            child.wait_with_output(),
        )
        .await
        .map_err(|_| {
            ComputeError::transient(
                "WORKSPACE_SETUP_FAILED",
                "workspace-setup did not finish in time",
            )
        })?
        .map_err(|e| unavailable(format!("workspace-setup: {e}")))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix("WORKSPACE_SETUP_FAILED "))
            .unwrap_or("IO: workspace-setup failed without a reason")
            .to_owned();
        let kind = line.split(':').next().unwrap_or("");
        Err(if workspace_setup::kind_is_retryable(kind) {
            ComputeError::transient("WORKSPACE_SETUP_FAILED", line)
        } else {
            ComputeError::permanent("WORKSPACE_SETUP_FAILED", line)
        })
    }

    /// Stops and removes everything of one Agent directory (and its account).
    async fn remove_agent_dir(&self, dir: &Path) -> Result<(), ComputeError> {
        let marker = read_json::<AgentMarker>(&dir.join("agent.json"))?;
        if let (Some(sd), Some(marker)) = (self.systemd(), &marker) {
            sd.remove(&marker.namespace_id, &marker.agent_id).await?;
        }
        self.stop_gateway(dir).await?;
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("remove", dir, e)),
        }
        if let (Some(marker), Some(accounts)) = (marker, &self.options.accounts) {
            account::remove(
                &self.settings.root,
                &self.selection.identity.id,
                &accounts.prefix,
                &marker.namespace_id,
                &marker.agent_id,
            )
            .await?;
        }
        Ok(())
    }
}

/// systemd supervision ([`Supervision::Systemd`]).
impl ProcessCompute {
    fn systemd(&self) -> Option<&SystemdSupervision> {
        match &self.options.supervision {
            Supervision::Systemd(sd) => Some(sd),
            Supervision::Detached => None,
        }
    }

    /// Whether `rev` is installed, was served, its unit is `active` and its gateway answers the
    /// handshake right now.
    async fn unit_serving(
        &self,
        sd: &SystemdSupervision,
        agent: &AgentTarget,
        agent_dir: &Path,
        rev: &RevisionId,
    ) -> Result<bool, ComputeError> {
        if self.current(agent_dir)?.as_deref() != Some(rev.as_str())
            || self.served(agent_dir)?.as_deref() != Some(rev.as_str())
        {
            return Ok(false);
        }
        let unit = sd.unit_path(agent.agent_id.as_str());
        let header = systemd::header(agent.namespace_id.as_str(), agent.agent_id.as_str());
        if systemd::read_unit(&unit, &header)? == systemd::UnitFile::Absent
            || !sd.active(agent.agent_id.as_str()).await?
        {
            return Ok(false);
        }
        let Some(marker) = read_json::<AgentMarker>(&agent_dir.join("agent.json"))? else {
            return Ok(false);
        };
        let token = self.token(agent_dir)?;
        let endpoint = Endpoint::loopback(marker.port, token.expose());
        Ok(occ_gateway::wait_ready(&endpoint, Duration::from_secs(5))
            .await
            .is_ok())
    }

    /// Activation under systemd: the token file systemd reads, the workspace check input, the
    /// unit (written and `daemon-reload`ed only if its text changed, enabled every time); a
    /// serving revision with an unchanged unit is left alone; otherwise `current` is switched,
    /// the unit restarted and the handshake awaited while the unit stays running.
    async fn activate_unit(
        &self,
        sd: &SystemdSupervision,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        port: u16,
    ) -> Result<(), ComputeError> {
        if !ctx.environment.is_empty() || ctx.harness_credential.is_some() {
            return Err(ComputeError::permanent(
                "SECRET_DELIVERY_UNSUPPORTED",
                "systemd supervision delivers no Secrets to gateways",
            ));
        }
        let accounts = self.options.accounts.as_ref().ok_or_else(|| {
            ComputeError::permanent(
                "INVALID_HOST_SETTINGS",
                "systemd supervision needs per-Agent accounts",
            )
        })?;
        let account = self.account(&rev.agent).await?.ok_or_else(|| {
            ComputeError::permanent("INVALID_HOST_SETTINGS", "no per-Agent account")
        })?;
        let runtime = self.runtime()?;
        let ns = rev.agent.namespace_id.as_str();
        let agent_id = rev.agent.agent_id.as_str();
        let token = self.token(agent_dir)?;
        // systemd reads it as root; the unit text never holds it.
        write_if_changed(
            &systemd::token_env_path(agent_dir),
            format!("OPENCLAW_GATEWAY_TOKEN={}\n", token.expose()).as_bytes(),
            None,
        )?;
        let setup_check = match &ctx.workspace_setup {
            Some(setup) => {
                // Identity only: the check verifies the marker and never applies files.
                let mut identity = SetupInput::from(setup);
                identity.files = None;
                identity.completed = true;
                let input = systemd::setup_check_path(agent_dir);
                write_if_changed(&input, &identity.to_json(), Some(account.gid))?;
                Some(SetupCheck {
                    occ: accounts.setup_program.clone(),
                    input,
                    runtime_root: runtime.root.clone(),
                })
            }
            None => None,
        };
        let spec = UnitSpec {
            namespace_id: ns.to_owned(),
            agent_id: agent_id.to_owned(),
            account: account::account_name(&accounts.prefix, ns, agent_id),
            agent_dir: agent_dir.to_path_buf(),
            port,
            bind: self.options.bind.as_str().to_owned(),
            node: runtime.node.clone(),
            entry: runtime.entry.clone(),
            stop_timeout: self.settings.stop_timeout,
            setup_check,
        };
        let changed = sd.install(&spec).await?;
        if !changed
            && self
                .unit_serving(sd, &rev.agent, agent_dir, &rev.revision_id)
                .await?
        {
            return Ok(());
        }
        // A gateway the detached supervisor started (before this host ran systemd) makes way.
        self.stop_gateway(agent_dir).await?;
        self.switch_current(agent_dir, &rev.revision_id)?;
        sd.restart(agent_id).await?;
        let unit = systemd::unit_name(agent_id);
        let endpoint = Endpoint::loopback(port, token.expose());
        let deadline = tokio::time::Instant::now() + self.settings.ready_timeout;
        let failed = |code: &str, message: String| {
            let tail = log_tail(&agent_dir.join("logs/gateway.log"));
            ComputeError::transient(
                code,
                format!(
                    "{message} (journalctl -u {unit}){}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!("; log tail:\n{tail}")
                    }
                ),
            )
        };
        loop {
            if !sd.running(agent_id).await? {
                let _ = sd.systemctl.run(&["stop", &unit]).await;
                return Err(failed(
                    "RUNTIME_STARTUP_FAILED",
                    format!("the unit {unit} stopped during startup"),
                ));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                // Do not leave a gateway that never became ready: the next pass starts over.
                let _ = sd.systemctl.run(&["stop", &unit]).await;
                return Err(failed(
                    "AGENT_GATEWAY_UNAVAILABLE",
                    format!(
                        "the gateway of {unit} did not become ready in {:?}",
                        self.settings.ready_timeout
                    ),
                ));
            }
            match occ_gateway::wait_ready(&endpoint, left.min(Duration::from_secs(2))).await {
                Ok(hello) => {
                    tracing::info!(unit, server = %hello.server_version, "gateway ready");
                    return write_json(
                        &agent_dir.join("served.json"),
                        &ServedMarker {
                            revision_id: rev.revision_id.to_string(),
                        },
                    );
                }
                Err(GatewayError::Unauthorized(m) | GatewayError::MissingScope(m)) => {
                    let _ = sd.systemctl.run(&["stop", &unit]).await;
                    return Err(ComputeError::permanent("AGENT_GATEWAY_UNAUTHORIZED", m));
                }
                Err(_) => {}
            }
        }
    }
}

/// Writes `bytes` to `path` (0600, atomically) unless it holds exactly them; with `group`, the
/// file is then root's with mode 0640 for that group.
fn write_if_changed(path: &Path, bytes: &[u8], group: Option<u32>) -> Result<(), ComputeError> {
    let current =
        fsutil::read_bounded(path, MARKER_LIMIT).map_err(|e| io_error("read", path, e))?;
    if current.as_deref() != Some(bytes) {
        fsutil::write_atomic(path, bytes, false).map_err(|e| io_error("write", path, e))?;
    }
    if let Some(gid) = group {
        share_with_group(path, gid, 0o640)?;
    }
    Ok(())
}

impl ProcessCompute {
    /// The Agent's gateway port and operator token, if the Agent has a directory here.
    pub fn gateway_port(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<(u16, SecretText)>, ComputeError> {
        let Some(marker) = self.agent_marker(agent)? else {
            return Ok(None);
        };
        let agent_dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        Ok(Some((marker.port, self.token(&agent_dir)?)))
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

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let dir = self.namespace_dir(&ns.id);
        let expected = NamespaceMarker {
            driver_id: self.selection.identity.id.clone(),
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
        create_dir(&self.settings.root.join("namespaces"))?;
        create_dir(&dir)?;
        create_dir(&dir.join("agents"))?;
        for path in [
            self.settings.root.join("namespaces"),
            dir.clone(),
            dir.join("agents"),
        ] {
            self.traversable(&path)?;
        }
        write_json(&dir.join("namespace.json"), &expected)?;
        Ok(Convergence::Done)
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let dir = self.namespace_dir(&ns.id);
        match read_json::<NamespaceMarker>(&dir.join("namespace.json"))? {
            None if !dir.exists() => {
                // A pass that removed the tree may have been lost before the accounts went.
                if let Some(accounts) = &self.options.accounts {
                    account::remove_namespace(
                        &self.settings.root,
                        &self.selection.identity.id,
                        &accounts.prefix,
                        ns.id.as_str(),
                    )
                    .await?;
                }
                return Ok(Convergence::Done);
            }
            Some(marker)
                if marker.namespace_id == ns.id.as_str()
                    && marker.driver_id == self.selection.identity.id => {}
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
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("remove", &dir, e)),
        }
        if let Some(accounts) = &self.options.accounts {
            account::remove_namespace(
                &self.settings.root,
                &self.selection.identity.id,
                &accounts.prefix,
                ns.id.as_str(),
            )
            .await?;
        }
        Ok(Convergence::Done)
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        if rev.spec.harness.mode != occ_core::resource::ExecutionMode::Embedded {
            return Err(ComputeError::permanent(
                "COMPUTE_DRIVER_MISMATCH",
                "the process Compute Driver runs embedded execution only",
            ));
        }
        self.runtime()?;
        let account = self.account(&rev.agent).await?;
        let marker = self.ensure_agent(&rev.agent, account).await?;
        let agent_dir = self.agent_dir(&rev.agent.namespace_id, &rev.agent.agent_id);
        match &ctx.workspace_setup {
            Some(setup) => {
                self.apply_workspace_setup(&agent_dir, setup, account)
                    .await?;
            }
            None => self.seed_workspace(&agent_dir, account).await?,
        }
        // Never prepare over a newer installed revision.
        if let Some(current) = self.current(&agent_dir)?
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
                code: "REVISION_SUPERSEDED".into(),
            });
        }
        let rendered = self.render(rev, &agent_dir, marker.port);
        let bytes = serde_json::to_vec_pretty(&Value::Object(rendered))
            .map_err(|e| unavailable(e.to_string()))?;
        let hash = hex::encode(sha2::Sha256::digest(&bytes));
        let dir = self.revision_dir(&agent_dir, &rev.revision_id);
        let expected = RevisionMarker {
            revision_id: rev.revision_id.to_string(),
            revision: rev.revision,
            configuration_hash: hash,
        };
        match read_json::<RevisionMarker>(&dir.join("revision.json"))? {
            Some(existing) if existing == expected => return Ok(Readiness::Ready),
            Some(_) => {
                return Err(ComputeError::permanent(
                    "SNAPSHOT_MISMATCH",
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

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        if let Readiness::Pending { code } = self.prepare_revision(rev, ctx).await? {
            return Err(ComputeError::permanent(
                &code,
                "a newer revision is installed for this Agent",
            ));
        }
        let marker = self
            .agent_marker(&rev.agent)?
            .ok_or_else(|| unavailable("the Agent directory vanished"))?;
        let agent_dir = self.agent_dir(&rev.agent.namespace_id, &rev.agent.agent_id);
        if let Some(sd) = self.systemd() {
            return self
                .activate_unit(sd, rev, ctx, &agent_dir, marker.port)
                .await;
        }
        if self
            .serving(&rev.agent, &agent_dir, &rev.revision_id)
            .await?
        {
            return Ok(());
        }
        // A gateway of this revision started by an earlier pass (whose worker died while it was
        // starting) is adopted, not started twice.
        if let Some(record) = self.live_gateway(&agent_dir)?
            && record.revision_id == rev.revision_id.as_str()
            && self.current(&agent_dir)?.as_deref() == Some(rev.revision_id.as_str())
        {
            let token = self.token(&agent_dir)?;
            let endpoint = Endpoint::loopback(record.port, token.expose());
            if occ_gateway::wait_ready(&endpoint, self.settings.ready_timeout)
                .await
                .is_ok()
            {
                tracing::info!(pid = record.pid, "adopted a running gateway");
                return write_json(
                    &agent_dir.join("served.json"),
                    &ServedMarker {
                        revision_id: rev.revision_id.to_string(),
                    },
                );
            }
        }
        // Whatever runs now (another revision, or this one unhealthy) makes way.
        self.stop_gateway(&agent_dir).await?;
        self.switch_current(&agent_dir, &rev.revision_id)?;
        let account = self.account(&rev.agent).await?;
        self.start_gateway(rev, ctx, &agent_dir, marker.port, account)
            .await
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        let agent_dir = self.agent_dir(&previous.agent.namespace_id, &previous.agent.agent_id);
        if let Some(current) = self.current(&agent_dir)?
            && current != previous.revision_id.as_str()
        {
            if current != failed.revision_id.as_str() {
                return Err(ComputeError::permanent(
                    "ACTIVE_REVISION_CHANGED",
                    format!(
                        "revision {current} is installed: neither the failed {} nor {}",
                        failed.revision_id, previous.revision_id
                    ),
                ));
            }
            // Step back: the failed candidate's gateway goes and nothing is installed, so the
            // previous revision is no longer "older than the installed one".
            self.stop_revision(failed).await?;
        }
        self.activate_revision(previous, ctx).await
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let Some(_) = self.agent_marker(&rev.agent)? else {
            return Ok(());
        };
        let agent_dir = self.agent_dir(&rev.agent.namespace_id, &rev.agent.agent_id);
        if self.current(&agent_dir)?.as_deref() != Some(rev.revision_id.as_str()) {
            // Not installed: a gateway of another revision is not ours to stop, but a gateway
            // recorded for this revision (an interrupted switch) is.
            if let Some(record) = self.live_gateway(&agent_dir)?
                && record.revision_id == rev.revision_id.as_str()
            {
                self.stop_gateway(&agent_dir).await?;
            }
            return Ok(());
        }
        if let Some(sd) = self.systemd() {
            sd.stop(rev.agent.namespace_id.as_str(), rev.agent.agent_id.as_str())
                .await?;
        }
        self.stop_gateway(&agent_dir).await?;
        remove_file(&agent_dir.join("current"))
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        // A retired revision never runs again; its snapshot stays as the record of what ran
        // until the Agent is deleted.
        self.stop_revision(rev).await
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        if self.agent_marker(agent)?.is_some() {
            self.remove_agent_dir(&self.agent_dir(&agent.namespace_id, &agent.agent_id))
                .await?;
        }
        // The retry path of a deletion lost after the directory went.
        if let Some(accounts) = &self.options.accounts {
            account::remove(
                &self.settings.root,
                &self.selection.identity.id,
                &accounts.prefix,
                agent.namespace_id.as_str(),
                agent.agent_id.as_str(),
            )
            .await?;
        }
        Ok(())
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        let agent_dir = self.agent_dir(&rev.agent.namespace_id, &rev.agent.agent_id);
        if !agent_dir.exists() {
            return Ok(RuntimeState::NotRunning);
        }
        if self.current(&agent_dir)?.as_deref() != Some(rev.revision_id.as_str()) {
            return Ok(RuntimeState::NotCurrent);
        }
        Ok(
            if self
                .serving(&rev.agent, &agent_dir, &rev.revision_id)
                .await?
            {
                RuntimeState::Serving
            } else {
                RuntimeState::NotRunning
            },
        )
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        Ok(self
            .gateway_port(agent)?
            .map(|(port, token)| GatewayAccess {
                url: format!("ws://127.0.0.1:{port}"),
                token,
            }))
    }
}

/// A setup failure as the worker handles it: a native setup run or I/O that may work next time
/// is retried; a refusal (divergent file, foreign or missing marker, unsafe path, bad input)
/// needs an operator and fails the deploy. The message names files and steps, never contents.
fn setup_failure(e: SetupError) -> ComputeError {
    if e.is_retryable() {
        ComputeError::transient("WORKSPACE_SETUP_FAILED", e.to_string())
    } else {
        ComputeError::permanent("WORKSPACE_SETUP_FAILED", e.to_string())
    }
}

/// The variable an `api_key` harness credential is delivered in, by the provider of the
/// Agent's primary model (`agents.defaults.model.primary = "<provider>/<model>"`).
pub(crate) fn harness_key_variable(rev: &RevisionTarget) -> Result<&'static str, ComputeError> {
    if !matches!(rev.spec.harness_auth, Some(HarnessAuth::ApiKey { .. })) {
        return Err(ComputeError::permanent(
            "INVALID_HARNESS_AUTH",
            "a harness credential without an api_key harnessAuth",
        ));
    }
    let primary = rev
        .spec
        .configuration
        .get("agents")
        .and_then(|a| a.get("defaults"))
        .and_then(|d| d.get("model"))
        .and_then(|m| m.get("primary").or(Some(m)))
        .and_then(Value::as_str)
        .unwrap_or("");
    match primary.split('/').next().unwrap_or("") {
        "openai" => Ok("OPENAI_API_KEY"),
        "anthropic" => Ok("ANTHROPIC_API_KEY"),
        _ => Err(ComputeError::permanent(
            "INVALID_HARNESS_AUTH",
            "an api_key harnessAuth needs agents.defaults.model.primary with provider openai or anthropic",
        )),
    }
}

/// The snapshot a revision runs with: the admitted document plus the settings a Driver owns
/// (listener, token authentication from `OPENCLAW_GATEWAY_TOKEN`, workspace, log file, no
/// update checks or catalog refreshes).
pub(crate) fn render_snapshot(
    rev: &RevisionTarget,
    port: u16,
    bind: &str,
    workspace: &str,
    log_file: Option<&str>,
) -> Map<String, Value> {
    let mut doc = rev.spec.configuration.clone();
    let gateway = object_at(&mut doc, "gateway");
    gateway.insert("mode".into(), json!("local"));
    gateway.insert("port".into(), json!(port));
    gateway.insert("bind".into(), json!(bind));
    gateway.insert(
        "auth".into(),
        json!({"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"}),
    );
    if let Some(file) = log_file {
        object_at(&mut doc, "logging").insert("file".into(), json!(file));
    }
    object_at(&mut doc, "update").insert("checkOnStart".into(), json!(false));
    object_at(object_at(&mut doc, "models"), "catalogRefresh")
        .insert("enabled".into(), json!(false));
    object_at(object_at(&mut doc, "agents"), "defaults")
        .insert("workspace".into(), json!(workspace));
    doc
}

/// `doc[key]` as an object, replacing anything that is not one.
fn object_at<'a>(doc: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = doc.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

fn create_dir(path: &Path) -> Result<(), ComputeError> {
    fsutil::ensure_private_dir(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => ownership(e.to_string()),
        _ => io_error("create", path, e),
    })
}

fn read_dir(path: &Path) -> Result<Vec<PathBuf>, ComputeError> {
    match std::fs::read_dir(path) {
        Ok(entries) => {
            let mut out = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| io_error("list", path, e))?;
                // occ ids only: staging directories and lock files are not entries.
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || name.contains(".creating-") {
                    continue;
                }
                if entry
                    .file_type()
                    .map_err(|e| io_error("stat", &entry.path(), e))?
                    .is_dir()
                {
                    out.push(entry.path());
                }
            }
            out.sort();
            Ok(out)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_error("list", path, e)),
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, ComputeError> {
    match fsutil::read_bounded(path, MARKER_LIMIT) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ownership(format!("{} is not ours: {e}", path.display()))),
        Ok(None) => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ComputeError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| unavailable(e.to_string()))?;
    fsutil::write_atomic(path, &bytes, false).map_err(|e| io_error("write", path, e))
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ComputeError> {
    fsutil::write_atomic(path, bytes, true).map_err(|e| io_error("create", path, e))
}

fn remove_file(path: &Path) -> Result<(), ComputeError> {
    fsutil::remove_if_exists(path).map_err(|e| io_error("remove", path, e))
}

/// Hands a freshly built Agent directory (in the root-owned `agents/`, nothing in it writable by
/// anyone but root so far) to the Agent's account: `home/`, `state/` (the workspace), `logs/` and
/// `tmp/` become the Agent's, children first, so nothing can be swapped for a link while this
/// runs; the directory itself and `revisions/` stay root's, readable by the Agent's group only
/// (0750), so the markers, the token (0600) and the snapshots cannot be changed by the Agent.
fn hand_over_agent_dir(dir: &Path, account: Option<Account>) -> Result<(), ComputeError> {
    let Some(account) = account else {
        return Ok(());
    };
    for sub in ["state/workspace", "state", "home", "logs", "tmp"] {
        let path = dir.join(sub);
        std::os::unix::fs::lchown(&path, Some(account.uid), Some(account.gid))
            .map_err(|e| io_error("chown", &path, e))?;
    }
    share_with_group(&dir.join("revisions"), account.gid, 0o750)?;
    share_with_group(dir, account.gid, 0o750)
}

/// Gives a root-owned path in a root-owned directory to group `gid` with `mode`.
fn share_with_group(path: &Path, gid: u32, mode: u32) -> Result<(), ComputeError> {
    std::os::unix::fs::lchown(path, None, Some(gid)).map_err(|e| io_error("chown", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_error("chmod", path, e))
}

/// Opens (creating) a log file for appending. With an account the log directory is the Agent's:
/// a link or anything but a plain file with one name, owned by root (just created) or the Agent,
/// is refused before the file is handed to the Agent.
fn open_log(path: &Path, account: Option<Account>) -> Result<std::fs::File, ComputeError> {
    use std::os::unix::fs::MetadataExt as _;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true).mode(0o600);
    if account.is_some() {
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => ownership(format!("{} is a symbolic link", path.display())),
        _ => io_error("open", path, e),
    })?;
    if let Some(account) = account {
        let meta = file.metadata().map_err(|e| io_error("stat", path, e))?;
        if !meta.is_file() || meta.nlink() != 1 || (meta.uid() != 0 && meta.uid() != account.uid) {
            return Err(ownership(format!(
                "{} is not a plain log file of the Agent",
                path.display()
            )));
        }
        std::os::unix::fs::fchown(&file, Some(account.uid), Some(account.gid))
            .map_err(|e| io_error("chown", path, e))?;
    }
    Ok(file)
}

fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The last lines of a log file (bounded; for startup failures).
fn log_tail(path: &Path) -> String {
    let Ok(text) = std::fs::read(path) else {
        return String::new();
    };
    let start = text.len().saturating_sub(16 * 1024);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// The process start time (clock ticks since boot, `/proc/<pid>/stat` field 22) of a live,
/// non-zombie process.
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` may contain spaces and parentheses: the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether `pid` is still the process started at `start_time`.
fn is_same_process(pid: u32, start_time: u64) -> bool {
    process_start_time(pid).is_some_and(|t| start_time == 0 || t == start_time)
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// Signals the process group led by `pid` (the gateway runs as its own group leader).
fn signal_group(pid: u32, signal: Signal) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    let sig = match signal {
        Signal::Term => nix::sys::signal::Signal::SIGTERM,
        Signal::Kill => nix::sys::signal::Signal::SIGKILL,
    };
    if let Err(e) = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), sig) {
        tracing::debug!(pid, error = %e, "signal not delivered (the process may be gone)");
    }
}

/// The gateways the Driver has recorded under `root`: `(pid, start time)` of each live one.
/// Tests and operators use it to account for every process the Driver started.
pub fn recorded_gateways(root: &Path) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for ns in read_dir(&root.join("namespaces")).unwrap_or_default() {
        for agent in read_dir(&ns.join("agents")).unwrap_or_default() {
            if let Ok(Some(record)) = read_json::<GatewayRecord>(&agent.join("gateway.json"))
                && is_same_process(record.pid, record.start_time)
            {
                out.push((record.pid, record.start_time));
            }
        }
    }
    out
}
