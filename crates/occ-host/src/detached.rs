//! The detached supervisor: each gateway runs in its own process group, detached from whoever
//! started it, recorded in `gateway.json` (pid, process start time, revision, port) right after
//! the spawn. A restarted worker (or the next `occ compute-host`) finds the exact process again
//! by pid *and* start time, so a recycled pid is never signalled; it adopts a serving (or still
//! starting) gateway instead of starting a second one. Stop signals the group (SIGTERM, SIGKILL
//! after the bound) and waits for it. A crashed gateway is restarted by the next activation
//! (the worker's maintenance pass).
//!
//! The process that spawned a gateway reaps it, so it learns of its exit at once: an exit that
//! nobody asked for (no `stopping.json` naming that exact process, which [`stop`] writes before
//! it signals) after startup is sent to the host's exit channel ([`GatewayExit`]), for the worker
//! to record and to restart it without waiting for the next maintenance pass. A gateway
//! adopted from an earlier process is not its child: its exit is found by that pass.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, GatewayExit, RevisionContext, RevisionTarget};
use occ_core::native::control_ui;
use occ_core::{RevisionId, Timestamp};
use occ_gateway::{Endpoint, GatewayError};
use serde::{Deserialize, Serialize};

use crate::account::Account;
use crate::failure::unavailable;
use crate::layout::{
    self, answers, installed_and_served, is_current, mark_served, open_output, read_dir, read_json,
    remove_file, revision_dir, write_json,
};
use crate::logs::GatewayLog;
use crate::process::{
    held_until_recorded, is_same_process, port_is_free, process_start_time, release,
    startup_output, stop_group, workload_alive,
};
use crate::runtime::OpenclawRuntime;
use crate::sandbox::{PrivateNetwork, SandboxSettings, View};
use crate::snapshot::{GATEWAY_FIXED_ENV, GatewayBind, harness_key_variable};

/// How long a starting gateway waits for its port to be released by a predecessor.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// `gateway.json`: enough to find the exact process again after a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GatewayRecord {
    pub pid: u32,
    pub start_time: u64,
    pub revision_id: String,
    pub port: u16,
}

/// A stop request file: the exact process occ is stopping, so its exit is not reported as a
/// crash. Left in place (the next stop overwrites it; another process never matches it). The
/// gateway's is `stopping.json`; the harness launcher's has its own (`harness::workload`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StopRequest {
    pid: u32,
    start_time: u64,
}

impl StopRequest {
    /// Records at `path` that occ is stopping the process `(pid, start_time)`.
    pub(crate) fn write(path: &Path, pid: u32, start_time: u64) -> Result<(), ComputeError> {
        write_json(path, &StopRequest { pid, start_time })
    }

    /// Whether the request at `path` names the process `(pid, start_time)`.
    pub(crate) fn names(path: &Path, pid: u32, start_time: u64) -> bool {
        matches!(
            read_json::<StopRequest>(path),
            Ok(Some(request)) if request == StopRequest { pid, start_time }
        )
    }
}

const STOP_REQUEST: &str = "stopping.json";

/// Whether [`stop`] asked the process `(pid, start_time)` to exit.
fn stop_requested(agent_dir: &Path, pid: u32, start_time: u64) -> bool {
    StopRequest::names(&agent_dir.join(STOP_REQUEST), pid, start_time)
}

/// The gateway process recorded for the Agent, if it is still that exact process.
pub(crate) fn live(agent_dir: &Path) -> Result<Option<GatewayRecord>, ComputeError> {
    let Some(record) = read_json::<GatewayRecord>(&agent_dir.join("gateway.json"))? else {
        return Ok(None);
    };
    Ok(is_same_process(record.pid, record.start_time).then_some(record))
}

/// The gateway process recorded for a revision, live or not (the runtime report).
pub(crate) struct RecordedGateway {
    pub pid: u32,
    pub start_time: u64,
    /// Still that exact process.
    pub live: bool,
    /// occ asked it to stop.
    pub stop_requested: bool,
    /// When occ recorded its start.
    pub started_at: Option<Timestamp>,
}

/// The gateway last started for `rev`, if the record names `rev`.
pub(crate) fn recorded_for(
    agent_dir: &Path,
    rev: &RevisionId,
) -> Result<Option<RecordedGateway>, ComputeError> {
    let path = agent_dir.join("gateway.json");
    let Some(record) = read_json::<GatewayRecord>(&path)? else {
        return Ok(None);
    };
    if record.revision_id != rev.as_str() {
        return Ok(None);
    }
    Ok(Some(RecordedGateway {
        pid: record.pid,
        start_time: record.start_time,
        live: is_same_process(record.pid, record.start_time),
        stop_requested: stop_requested(agent_dir, record.pid, record.start_time),
        started_at: crate::layout::modified_at(&path)?,
    }))
}

/// The live gateway recorded for `rev`, if there is one.
fn live_of(agent_dir: &Path, rev: &RevisionId) -> Result<Option<GatewayRecord>, ComputeError> {
    Ok(live(agent_dir)?.filter(|record| record.revision_id == rev.as_str()))
}

/// Whether a live gateway is recorded for `rev`.
pub(crate) fn runs(agent_dir: &Path, rev: &RevisionId) -> Result<bool, ComputeError> {
    Ok(live_of(agent_dir, rev)?.is_some())
}

/// Whether `rev`'s gateway runs, is installed, was served and answers the handshake now.
pub(crate) async fn serving(agent_dir: &Path, rev: &RevisionId) -> Result<bool, ComputeError> {
    let Some(record) = live_of(agent_dir, rev)? else {
        return Ok(false);
    };
    Ok(installed_and_served(agent_dir, rev)?
        && answers(agent_dir, record.port, Duration::from_secs(5)).await?)
}

/// Adopts a gateway of the installed `rev` that an earlier pass started (and whose worker died
/// while it was starting) once it answers the handshake, instead of starting it twice.
/// Whether it did.
pub(crate) async fn adopt(
    agent_dir: &Path,
    rev: &RevisionId,
    ready_timeout: Duration,
) -> Result<bool, ComputeError> {
    let Some(record) = live_of(agent_dir, rev)? else {
        return Ok(false);
    };
    if !is_current(agent_dir, rev)? || !answers(agent_dir, record.port, ready_timeout).await? {
        return Ok(false);
    }
    tracing::info!(pid = record.pid, "adopted a running gateway");
    mark_served(agent_dir, rev)?;
    Ok(true)
}

/// Stops the recorded gateway (its own process group): SIGTERM, wait, SIGKILL after
/// `stop_timeout`, wait. Removes the record.
pub(crate) async fn stop(agent_dir: &Path, stop_timeout: Duration) -> Result<(), ComputeError> {
    // The group too when its leader is gone: what a contained gateway's outer `bwrap` ran
    // outlives that process if it alone was killed.
    if let Some(record) = read_json::<GatewayRecord>(&agent_dir.join("gateway.json"))?
        && workload_alive(record.pid, record.start_time)
    {
        tracing::info!(pid = record.pid, revision = %record.revision_id, "stopping gateway");
        StopRequest::write(&agent_dir.join(STOP_REQUEST), record.pid, record.start_time)?;
        stop_group(record.pid, record.start_time, stop_timeout, "gateway").await?;
    }
    remove_file(&agent_dir.join("gateway.json"))?;
    remove_file(&agent_dir.join("served.json"))?;
    Ok(())
}

/// What a gateway is started with, under either supervisor (who it runs as is the
/// supervisor's to say).
pub(crate) struct Launch<'a> {
    /// The pinned runtime.
    pub runtime: &'a OpenclawRuntime,
    /// The revision (its snapshot is `revisions/<revId>/openclaw.json`).
    pub rev: &'a RevisionTarget,
    /// Its Secret bindings and harness credential, delivered as environment.
    pub ctx: &'a RevisionContext,
    /// The Agent's directory.
    pub agent_dir: &'a Path,
    /// The Agent's port.
    pub port: u16,
    /// Where the gateway listens.
    pub bind: GatewayBind,
    /// How long it may take to answer `hello-ok`.
    pub ready_timeout: Duration,
    /// How long it may take to stop when it never became ready.
    pub stop_timeout: Duration,
    /// Where an exit nobody asked for is reported, once the gateway served.
    pub exits: &'a tokio::sync::broadcast::Sender<GatewayExit>,
    /// Set for a dedicated revision: the gateway reads its mutable runtime config and gets the
    /// app-server token, never the harness credential.
    pub dedicated: Option<DedicatedGateway<'a>>,
    /// Containment, when the host contains its workloads.
    pub sandbox: Option<&'a SandboxSettings>,
    /// Bound variables whose value the credential proxy puts on the wire: the gateway gets
    /// [`crate::credential_proxy::PLACEHOLDER`] in them.
    pub placeholders: std::collections::BTreeSet<String>,
}

/// What a dedicated revision's gateway is started with beyond an embedded one's.
#[derive(Clone, Copy)]
pub(crate) struct DedicatedGateway<'a> {
    /// The runtime copy of the snapshot (the node binding is written into it once enrolled).
    pub config: &'a Path,
    /// The app-server token (`APP_SERVER_TOKEN`, referenced by the config).
    pub app_server_token: &'a occ_core::compute::SecretText,
}

/// What a gateway's environment is made of.
pub(crate) struct GatewayEnvironment<'a> {
    /// `PATH` for OpenClaw processes.
    pub path: OsString,
    /// The Agent's directory.
    pub agent_dir: &'a Path,
    /// The snapshot the gateway reads.
    pub snapshot: &'a Path,
    /// The revision.
    pub rev: &'a RevisionTarget,
    /// The gateway credential.
    pub token: &'a str,
    /// The Secret bindings and harness credential.
    pub ctx: &'a RevisionContext,
    /// A dedicated gateway's app-server token (it never gets the harness credential).
    pub app_server_token: Option<&'a str>,
    /// Bound variables that get [`crate::credential_proxy::PLACEHOLDER`] instead of their value.
    pub placeholders: &'a std::collections::BTreeSet<String>,
    /// The runtime's warm compile cache, when the gateway can use it (`NODE_COMPILE_CACHE`).
    pub compile_cache: Option<&'a Path>,
}

/// The gateway's whole environment: the Secret bindings first, then every variable the Driver
/// sets, so no binding can replace one of the Driver's (admission refuses such names too:
/// `occ_core::env_name`).
pub(crate) fn gateway_environment(
    env: GatewayEnvironment<'_>,
) -> Result<BTreeMap<OsString, OsString>, ComputeError> {
    let mut vars: BTreeMap<OsString, OsString> = env
        .ctx
        .environment
        .iter()
        .map(|(name, value)| {
            let value = if env.placeholders.contains(name) {
                crate::credential_proxy::PLACEHOLDER
            } else {
                value.expose()
            };
            (name.into(), value.into())
        })
        .collect();
    let mut set = |name: &str, value: OsString| {
        vars.insert(name.into(), value);
    };
    set("PATH", env.path);
    set("HOME", env.agent_dir.join("home").into());
    set("TMPDIR", env.agent_dir.join("tmp").into());
    set("OPENCLAW_STATE_DIR", env.agent_dir.join("state").into());
    set("OPENCLAW_CONFIG_PATH", env.snapshot.into());
    set(
        crate::snapshot::credential_variable(env.rev),
        env.token.into(),
    );
    if let Some(key) = crate::snapshot::proxy_key(env.rev, env.token) {
        set(control_ui::PROXY_KEY_VARIABLE, key.into());
    }
    for (name, value) in GATEWAY_FIXED_ENV {
        set(name, value.into());
    }
    if let Some(cache) = env.compile_cache {
        set("NODE_COMPILE_CACHE", cache.into());
        let (name, value) = crate::runtime::COMPILE_CACHE_SETTLED;
        set(name, value.into());
    }
    match env.app_server_token {
        // The credential is the harness's alone.
        Some(token) => set("APP_SERVER_TOKEN", token.into()),
        None => {
            if let Some(credential) = &env.ctx.harness_credential {
                set(harness_key_variable(env.rev)?, credential.expose().into());
            }
        }
    }
    Ok(vars)
}

/// How long a failed readiness check waits for the gateway's exit to be reaped.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Starts the gateway for `launch.rev` in its own process group with a clean environment (as
/// the Agent's `account`, when it has one) and waits for `hello-ok`. An early exit with
/// OpenClaw's invalid-configuration status is a permanent `RUNTIME_CONFIGURATION_INVALID`, any
/// other a transient `RUNTIME_STARTUP_FAILED` (both with the log's redacted tail as their
/// output); a gateway that never becomes ready is stopped again (with the same output).
pub(crate) async fn start(
    launch: Launch<'_>,
    account: Option<Account>,
) -> Result<(), ComputeError> {
    let Launch {
        runtime,
        rev,
        ctx,
        agent_dir,
        port,
        bind,
        ready_timeout,
        stop_timeout,
        exits,
        dedicated,
        sandbox,
        placeholders,
    } = launch;
    // The helpers of a gateway that was just killed may hold its socket for a few seconds.
    let deadline = tokio::time::Instant::now() + PORT_RELEASE_WAIT;
    while !port_is_free(port) {
        if tokio::time::Instant::now() >= deadline {
            return Err(ComputeError::transient(
                ReasonCode::GatewayPortInUse,
                format!("port {port} of the Agent is in use by another process"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = layout::token(agent_dir)?;
    let snapshot = match &dedicated {
        Some(dedicated) => dedicated.config.to_path_buf(),
        None => revision_dir(agent_dir, &rev.revision_id).join("openclaw.json"),
    };
    let log_path = GatewayLog::of_revision(agent_dir, &rev.revision_id).current_path();
    let (log, log_err) = open_output(&log_path, account)?;
    // Node uses a cache it may not write only where its uid's directory exists: occ's own uid,
    // or the uid inside a sandbox. An Agent's account outside a sandbox keeps its own cache
    // (under its TMPDIR), as before.
    let compile_cache = runtime
        .compile_cache()
        .filter(|_| sandbox.is_some() || account.is_none());
    let environment = gateway_environment(GatewayEnvironment {
        path: runtime.path_env(),
        agent_dir,
        snapshot: &snapshot,
        rev,
        token: token.expose(),
        ctx,
        app_server_token: dedicated.as_ref().map(|d| d.app_server_token.expose()),
        placeholders: &placeholders,
        compile_cache: compile_cache.as_deref(),
    })?;
    let mut cmd = runtime.command();
    cmd.arg("gateway")
        .arg("run")
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg(bind.as_str())
        .envs(environment)
        .current_dir(agent_dir.join("state"));
    let mut cmd = held_until_recorded(&cmd);
    let mut cmd = match sandbox {
        Some(sandbox) => {
            let mut view = gateway_view(runtime, agent_dir, rev)?;
            view.uid = account.map(|account| account.uid);
            if has_private_network(sandbox, bind) {
                let network = private_network(agent_dir, rev, port, &snapshot, account)?;
                cmd.envs(network.proxy_environment());
                view.network = Some(network);
            }
            if let Some(dedicated) = &dedicated {
                // The runtime config's own directory (enrollment rewrites the file by rename
                // while the gateway runs, which a directory bind shows), nothing of the harness.
                view.read_only
                    .extend(dedicated.config.parent().map(Path::to_path_buf));
            }
            sandbox
                .wrap(&cmd, &view)
                .map_err(|e| unavailable(format!("cannot contain the gateway: {e}")))?
        }
        // Its own group, so a stop reaches every process it starts.
        None => {
            cmd.process_group(0);
            cmd
        }
    };
    cmd.stdin(Stdio::piped())
        .stdout(log)
        .stderr(log_err)
        .kill_on_drop(false);
    if let Some(account) = account {
        cmd.uid(account.uid).gid(account.gid);
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
    // Held until now: a worker killed before the record leaves nothing running.
    let _ = release(&mut child);
    tracing::info!(pid, port, revision = %rev.revision_id, "gateway started");
    let (exit_tx, mut exit_rx) = tokio::sync::oneshot::channel();
    // Reap it whenever it exits, so it never lingers as a zombie of this process. During startup
    // the exit is startup's to report; after it, an exit nobody asked for goes to `exits`.
    tokio::spawn({
        let exits = exits.clone();
        let agent = rev.agent.clone();
        let revision_id = rev.revision_id.clone();
        let agent_dir = agent_dir.to_path_buf();
        async move {
            let status = child.wait().await.ok();
            let Err(status) = exit_tx.send(status) else {
                return;
            };
            if stop_requested(&agent_dir, pid, start_time) {
                return;
            }
            let status = status.map_or("unknown status".into(), |s| s.to_string());
            tracing::debug!(pid, %status, revision = %revision_id, "gateway exited");
            // No receiver: nobody watches (e.g. `occ compute-host`); the maintenance pass finds it.
            let _ = exits.send(GatewayExit {
                agent,
                revision_id,
                pid,
                status,
                at: Timestamp::now(),
            });
        }
    });
    let endpoint = Endpoint::loopback(port, token.expose());
    let exited = |status: Option<std::process::ExitStatus>| -> ComputeError {
        let code = status.and_then(|s| s.code());
        let message = format!(
            "the gateway exited during startup ({})",
            status.map_or("unknown status".into(), |s| s.to_string()),
        );
        if let Err(e) = remove_file(&agent_dir.join("gateway.json")) {
            return e;
        }
        let output = startup_output(&log_path, ctx, token.expose());
        ComputeError::gateway_startup_exit(code, message, output)
    };
    let ready = tokio::select! {
        ready = occ_gateway::wait_ready(&endpoint, ready_timeout) => ready,
        status = &mut exit_rx => return Err(exited(status.ok().flatten())),
    };
    match ready {
        Ok(hello) => {
            tracing::info!(pid, server = %hello.server_version, "gateway ready");
            mark_served(agent_dir, &rev.revision_id)
        }
        Err(e) => {
            // A gateway that exits while a relay holds the readiness connection ends that
            // connection a moment before its exit is reaped: the exit is then the cause.
            if let Ok(status) = tokio::time::timeout(EXIT_GRACE, &mut exit_rx).await {
                return Err(exited(status.ok().flatten()));
            }
            // Do not leave a gateway that never became ready: the next pass starts over.
            stop(agent_dir, stop_timeout).await?;
            Err(match e {
                GatewayError::Unauthorized(m) | GatewayError::MissingScope(m) => {
                    ComputeError::permanent(ReasonCode::AgentGatewayUnauthorized, m)
                }
                other => ComputeError::transient(
                    ReasonCode::AgentGatewayUnavailable,
                    format!("the gateway did not become ready: {other}"),
                )
                .with_output(startup_output(&log_path, ctx, token.expose())),
            })
        }
    }
}

/// What a contained embedded gateway sees: the runtime and its revision's snapshot read-only;
/// its home, state (with the workspace), temporary files and its revision's log directory
/// read-write. Nothing else of the Agent's directory (the token file, the records occ trusts
/// to signal the right process, other revisions) and nothing of occ's or other Agents'.
fn gateway_view(
    runtime: &OpenclawRuntime,
    agent_dir: &Path,
    rev: &RevisionTarget,
) -> Result<View, ComputeError> {
    let log_dir = crate::layout::revision_log_dir(agent_dir, &rev.revision_id);
    let read_write = vec![
        agent_dir.join("home"),
        agent_dir.join("state"),
        agent_dir.join("tmp"),
        log_dir,
    ];
    for dir in &read_write {
        layout::create_dir(dir)?;
    }
    Ok(View {
        read_only: vec![
            runtime.root.clone(),
            revision_dir(agent_dir, &rev.revision_id),
        ],
        read_write,
        nests_sandboxes: false,
        uid: None,
        network: None,
    })
}

/// Whether a contained gateway gets a private network: it is reached on the loopback (a
/// gateway occ reaches over the network shares the host's) and the relays' program is known.
pub(crate) fn has_private_network(sandbox: &SandboxSettings, bind: GatewayBind) -> bool {
    bind == GatewayBind::Loopback && sandbox.occ_program.is_some()
}

/// The private network of a gateway listening on `port` with the configuration at
/// `snapshot`: its relays' socket directory (per revision, emptied first; with an `account`,
/// the account's, in a `net/` that stays root's like `logs/`) and the endpoints the
/// configuration names.
fn private_network(
    agent_dir: &Path,
    rev: &RevisionTarget,
    port: u16,
    snapshot: &Path,
    account: Option<Account>,
) -> Result<PrivateNetwork, ComputeError> {
    let config: serde_json::Value = std::fs::read(snapshot)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| unavailable(format!("cannot read {}: {e}", snapshot.display())))?;
    let net = agent_dir.join("net");
    layout::create_dir(&net)?;
    if let Some(account) = account {
        layout::share_with_group(&net, account.gid, 0o750)?;
    }
    let socket_dir = net.join(rev.revision_id.as_str());
    let _ = std::fs::remove_dir_all(&socket_dir);
    layout::create_dir(&socket_dir)?;
    if let Some(account) = account {
        std::os::unix::fs::lchown(&socket_dir, Some(account.uid), Some(account.gid))
            .map_err(|e| unavailable(format!("cannot hand {} over: {e}", socket_dir.display())))?;
    }
    Ok(PrivateNetwork::for_config(socket_dir, port, &config))
}

/// The gateways recorded under `root`: `(pid, start time)` of each live one — its process, or
/// what is left of its group (a contained gateway outlives its outer `bwrap` while it stops).
/// Tests and operators use it to account for every process a host started.
pub fn recorded_gateways(root: &Path) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for ns in read_dir(&root.join("namespaces")).unwrap_or_default() {
        for agent in read_dir(&ns.join("agents")).unwrap_or_default() {
            if let Ok(Some(record)) = read_json::<GatewayRecord>(&agent.join("gateway.json"))
                && workload_alive(record.pid, record.start_time)
            {
                out.push((record.pid, record.start_time));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::compute::{AgentTarget, SecretText};
    use occ_core::resource::{
        AdmittedSpec, ComputeIdentity, ExecutionMode, Generation, HarnessAuth, HarnessDescriptor,
    };
    use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId};

    fn revision() -> RevisionTarget {
        RevisionTarget {
            agent: AgentTarget {
                namespace_id: NamespaceId::generate(),
                agent_id: AgentId::generate(),
                service_principal_id: IamId::generate_service_principal(),
            },
            revision_id: RevisionId::generate(),
            revision: 1,
            spec: AdmittedSpec {
                configuration_id: ConfigurationId::generate(),
                configuration_kind: "agent".into(),
                configuration_generation: Generation::new(1).expect("generation"),
                configuration: serde_json::Map::new(),
                harness: HarnessDescriptor {
                    id: "openclaw".into(),
                    version: "test".into(),
                    mode: ExecutionMode::Embedded,
                },
                compute: ComputeIdentity {
                    id: "compute-process".into(),
                    implementation: "process".into(),
                },
                service_principal_id: IamId::generate_service_principal(),
                harness_auth: Some(HarnessAuth::Runtime {}),
                secret_driver_id: None,
                secret_bindings: None,
                account_credential: None,
            },
        }
    }

    /// A binding that slipped past admission (a stored revision from before the rule) still
    /// cannot replace anything the Driver sets: the Driver's variables are applied last.
    #[test]
    fn the_drivers_variables_win_over_any_binding() {
        let rev = revision();
        let bound = |name: &str| (name.to_owned(), SecretText::new(format!("bound-{name}")));
        let ctx = RevisionContext {
            environment: [
                bound("MODEL_KEY"),
                bound("PROXIED_KEY"),
                bound("HOME"),
                bound("PATH"),
                bound("TMPDIR"),
                bound("OPENCLAW_CONFIG_PATH"),
                bound("OPENCLAW_GATEWAY_TOKEN"),
                bound("OPENCLAW_NO_RESPAWN"),
                bound("npm_config_offline"),
                bound("NODE_COMPILE_CACHE"),
            ]
            .into(),
            ..RevisionContext::default()
        };
        let agent_dir = Path::new("/srv/agents/a");
        let env = gateway_environment(GatewayEnvironment {
            path: "/runtime/node/bin:/usr/bin".into(),
            agent_dir,
            snapshot: Path::new("/srv/agents/a/revisions/r/openclaw.json"),
            rev: &rev,
            token: "gateway-token",
            ctx: &ctx,
            app_server_token: None,
            placeholders: &["PROXIED_KEY".to_owned()].into(),
            compile_cache: Some(Path::new("/runtime/compile-cache")),
        })
        .expect("environment");
        let get = |name: &str| env.get(&OsString::from(name)).cloned();
        assert_eq!(get("MODEL_KEY"), Some("bound-MODEL_KEY".into()));
        assert_eq!(
            get("PROXIED_KEY"),
            Some(crate::credential_proxy::PLACEHOLDER.into()),
            "a key the credential proxy puts on the wire never enters the gateway"
        );
        assert_eq!(get("HOME"), Some(agent_dir.join("home").into()));
        assert_eq!(get("TMPDIR"), Some(agent_dir.join("tmp").into()));
        assert_eq!(get("PATH"), Some("/runtime/node/bin:/usr/bin".into()));
        assert_eq!(
            get("OPENCLAW_CONFIG_PATH"),
            Some("/srv/agents/a/revisions/r/openclaw.json".into())
        );
        assert_eq!(get("OPENCLAW_GATEWAY_TOKEN"), Some("gateway-token".into()));
        assert_eq!(get("OPENCLAW_NO_RESPAWN"), Some("1".into()));
        assert_eq!(get("npm_config_offline"), Some("true".into()));
        assert_eq!(
            get("NODE_COMPILE_CACHE"),
            Some("/runtime/compile-cache".into())
        );
    }
}
