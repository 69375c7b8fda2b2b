//! The harness launcher of a dedicated Agent as a detached process group on this host, the
//! gateway's twin in `detached`: `occ harness-launch --input <launch.json>` started in its own
//! process group with a clean environment, recorded in `harness.json` (pid, process start time,
//! revision) right after the spawn, so a restarted worker finds (and stops, or keeps) the exact
//! process again. Its children (`codex app-server`, the node host) die with it (`setpriv
//! --pdeathsig`), and it stops them itself on SIGTERM.
//!
//! The process that started it reaps it: an exit nobody asked for is reported on the host's exit
//! channel like a gateway's, so the worker's maintenance pass restarts it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use occ_core::compute::{ComputeError, GatewayExit, RevisionTarget};
use occ_core::{RevisionId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::detached::StopRequest;
use crate::failure::unavailable;
use crate::layout::{open_output, read_json, remove_file, write_json};
use crate::process::{
    held_until_recorded, is_same_process, process_start_time, release, stop_group, workload_alive,
};
use crate::sandbox::{SandboxSettings, View};

/// `harness.json`: enough to find the exact launcher again after a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HarnessRecord {
    pub pid: u32,
    pub start_time: u64,
    pub revision_id: String,
}

const RECORD: &str = "harness.json";
/// `harness-stopping.json`: the exact launcher [`stop`] is stopping (its exit is no crash).
const STOP_REQUEST: &str = "harness-stopping.json";

fn stop_requested(agent_dir: &Path, pid: u32, start_time: u64) -> bool {
    StopRequest::names(&agent_dir.join(STOP_REQUEST), pid, start_time)
}

/// The launcher recorded for the Agent, if it is still that exact process.
pub(crate) fn live(agent_dir: &Path) -> Result<Option<HarnessRecord>, ComputeError> {
    let Some(record) = read_json::<HarnessRecord>(&agent_dir.join(RECORD))? else {
        return Ok(None);
    };
    Ok(is_same_process(record.pid, record.start_time).then_some(record))
}

/// The launcher last started for `rev`, live or not (the runtime report).
pub(crate) fn recorded_for(
    agent_dir: &Path,
    rev: &RevisionId,
) -> Result<Option<crate::detached::RecordedGateway>, ComputeError> {
    let path = agent_dir.join(RECORD);
    let Some(record) = read_json::<HarnessRecord>(&path)? else {
        return Ok(None);
    };
    if record.revision_id != rev.as_str() {
        return Ok(None);
    }
    Ok(Some(crate::detached::RecordedGateway {
        pid: record.pid,
        start_time: record.start_time,
        live: is_same_process(record.pid, record.start_time),
        stop_requested: stop_requested(agent_dir, record.pid, record.start_time),
        started_at: crate::layout::modified_at(&path)?,
    }))
}

/// The live launcher recorded for `rev`, if there is one.
pub(crate) fn live_of(
    agent_dir: &Path,
    rev: &RevisionId,
) -> Result<Option<HarnessRecord>, ComputeError> {
    Ok(live(agent_dir)?.filter(|record| record.revision_id == rev.as_str()))
}

/// Stops the recorded launcher (SIGTERM to its group, SIGKILL after `stop_timeout`) and removes
/// the record.
pub(crate) async fn stop(agent_dir: &Path, stop_timeout: Duration) -> Result<(), ComputeError> {
    if let Some(record) = read_json::<HarnessRecord>(&agent_dir.join(RECORD))?
        && workload_alive(record.pid, record.start_time)
    {
        tracing::info!(pid = record.pid, revision = %record.revision_id, "stopping harness");
        StopRequest::write(&agent_dir.join(STOP_REQUEST), record.pid, record.start_time)?;
        stop_group(record.pid, record.start_time, stop_timeout, "harness").await?;
    }
    remove_file(&agent_dir.join(RECORD))
}

/// What the launcher is started with.
pub(crate) struct HarnessLaunch<'a> {
    /// The `occ` binary (its hidden `harness-launch` subcommand).
    pub program: &'a Path,
    /// The launch input file.
    pub input: &'a Path,
    /// occ's `PATH`, passed on.
    pub path: &'a OsStr,
    /// The launcher's own stderr (its children's output goes to the log the input names).
    pub output: &'a Path,
    /// Its working directory (the harness's home).
    pub cwd: &'a Path,
    /// The Agent's directory (the record's place).
    pub agent_dir: &'a Path,
    /// The revision.
    pub rev: &'a RevisionTarget,
    /// Where an exit nobody asked for is reported.
    pub exits: &'a tokio::sync::broadcast::Sender<GatewayExit>,
    /// Containment, with what the launcher and its children see, when the host contains its
    /// workloads.
    pub sandbox: Option<(&'a SandboxSettings, View)>,
}

/// Starts the launcher in its own process group with a clean environment (no secret in it: the
/// credential is a private file the input names) and records it.
pub(crate) fn start(launch: HarnessLaunch<'_>) -> Result<HarnessRecord, ComputeError> {
    let (out, err) = open_output(launch.output, None)?;
    let mut cmd = tokio::process::Command::new(launch.program);
    cmd.arg("harness-launch")
        .arg("--input")
        .arg(launch.input)
        .env_clear()
        .env("PATH", launch.path)
        .env("HOME", launch.cwd)
        .env("OCC_LOG", "info")
        .env("NO_COLOR", "1")
        .current_dir(launch.cwd);
    if let Some((
        _,
        View {
            network: Some(network),
            ..
        },
    )) = &launch.sandbox
    {
        cmd.envs(network.proxy_environment());
    }
    let mut cmd = held_until_recorded(&cmd);
    let mut cmd = match &launch.sandbox {
        Some((sandbox, view)) => sandbox
            .wrap(&cmd, view)
            .map_err(|e| unavailable(format!("cannot contain the harness: {e}")))?,
        // Its own group, so a stop reaches Codex and the node host too.
        None => {
            cmd.process_group(0);
            cmd
        }
    };
    cmd.stdin(Stdio::piped())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(false);
    let mut child = cmd.spawn().map_err(|e| {
        unavailable(format!(
            "cannot start {} harness-launch: {e}",
            launch.program.display()
        ))
    })?;
    let pid = child
        .id()
        .ok_or_else(|| unavailable("the harness exited at once"))?;
    let start_time = process_start_time(pid).unwrap_or(0);
    let record = HarnessRecord {
        pid,
        start_time,
        revision_id: launch.rev.revision_id.to_string(),
    };
    write_json(&launch.agent_dir.join(RECORD), &record)?;
    // Held until now: a worker killed before the record leaves nothing running.
    let _ = release(&mut child);
    tracing::info!(pid, revision = %launch.rev.revision_id, "harness started");
    tokio::spawn({
        let exits = launch.exits.clone();
        let agent = launch.rev.agent.clone();
        let revision_id = launch.rev.revision_id.clone();
        let agent_dir = launch.agent_dir.to_path_buf();
        async move {
            let status = child.wait().await.ok();
            if stop_requested(&agent_dir, pid, start_time) {
                return;
            }
            let status = status.map_or("unknown status".into(), |s| s.to_string());
            tracing::warn!(pid, %status, revision = %revision_id, "harness exited");
            let _ = exits.send(GatewayExit {
                agent,
                revision_id,
                pid,
                status: format!("harness {status}"),
                at: Timestamp::now(),
            });
        }
    });
    Ok(record)
}

/// The harness launchers recorded under `root`: `(pid, start time)` of each live one (its
/// process, or what is left of its group). Tests and operators use it to account for every
/// process a host started.
pub fn recorded_harnesses(root: &Path) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for agent in crate::layout::agent_dirs(root).unwrap_or_default() {
        if let Ok(Some(record)) = read_json::<HarnessRecord>(&agent.join(RECORD))
            && workload_alive(record.pid, record.start_time)
        {
            out.push((record.pid, record.start_time));
        }
    }
    out
}
