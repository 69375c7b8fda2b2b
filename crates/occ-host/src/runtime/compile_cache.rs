//! The runtime's warm V8 compile cache (`<root>/compile-cache`).
//!
//! A gateway compiles several MB of JavaScript at every start. Node keeps that work in a compile
//! cache (`NODE_COMPILE_CACHE`); OpenClaw puts it under `TMPDIR` by default, which is per Agent
//! revision (and a fresh tmpfs in a contained gateway), so every new revision started cold.
//! The install starts one throwaway gateway against a scratch state with the cache pointed here,
//! stops it (Node writes the cache at exit) and keeps the directory. Gateways then read it: it
//! sits inside the runtime, which every contained gateway sees read-only, so no Agent can plant
//! code for another (Node only reads a cache it may not write, measured). Node names the
//! cache's subdirectories after the uid that wrote them (`v<node>-<arch>-<flags>-<uid>`); each
//! gets an alias for the uid contained workloads have inside their user namespace.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use occ_gateway::Endpoint;

use super::locate::{COMPILE_CACHE_REL, OpenclawRuntime, RuntimeError, io_err, remove_dir_all};
/// The install step that makes it.
pub(super) const STEP: &str = "warm the compile cache";
/// How long the throwaway gateway may take to answer (a cold start takes 8–15 s).
const READY_DEADLINE: Duration = Duration::from_secs(180);
/// How long it may take to stop after SIGTERM (it writes the cache as it exits).
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// Runs the throwaway gateway and moves its cache into `<root>/compile-cache` (through a
/// partial directory renamed into place, so the directory exists only complete).
pub(super) async fn make(runtime: &OpenclawRuntime) -> Result<(), RuntimeError> {
    let partial = runtime.root.join(".compile-cache.partial");
    let scratch = runtime.root.join(".compile-cache-scratch");
    for dir in [&partial, &scratch] {
        remove_dir_all(dir.clone()).await?;
    }
    let result = warm(runtime, &scratch, &partial).await;
    let _ = remove_dir_all(scratch).await;
    let finished = result.and_then(|()| {
        if !has_entries(&partial) {
            return Err(RuntimeError::Step {
                step: STEP.into(),
                message: "the gateway wrote no cache".into(),
            });
        }
        alias_for_contained_uid(&partial).map_err(io_err(STEP))?;
        readable_by_all(&partial).map_err(io_err(STEP))?;
        fs::rename(&partial, runtime.root.join(COMPILE_CACHE_REL)).map_err(io_err(STEP))
    });
    if finished.is_err() {
        let _ = remove_dir_all(partial).await;
    }
    finished
}

async fn warm(runtime: &OpenclawRuntime, scratch: &Path, cache: &Path) -> Result<(), RuntimeError> {
    let workspace = scratch.join("workspace");
    for dir in [
        scratch.join("state"),
        workspace.clone(),
        cache.to_path_buf(),
    ] {
        fs::create_dir_all(&dir).map_err(io_err(STEP))?;
    }
    runtime
        .seed_from_baseline(&workspace)
        .map_err(io_err(STEP))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(io_err(STEP))?
        .port();
    let config = serde_json::json!({
        "gateway": {
            "mode": "local",
            "auth": {"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"},
        },
        "agents": {"defaults": {"workspace": workspace, "heartbeat": {"every": "0m"}}},
        "logging": {"file": scratch.join("state").join("gateway.log")},
        "update": {"checkOnStart": false},
        "models": {"catalogRefresh": {"enabled": false}},
        "cron": {"enabled": false},
    });
    fs::write(scratch.join("openclaw.json"), config.to_string()).map_err(io_err(STEP))?;
    let token = format!("{:032x}", rand::random::<u128>());
    let output = fs::File::create(scratch.join("gateway.out")).map_err(io_err(STEP))?;
    let mut cmd = runtime.scratch_command(scratch);
    cmd.args(["gateway", "run", "--bind", "loopback", "--port"])
        .arg(port.to_string())
        .envs(crate::snapshot::GATEWAY_FIXED_ENV)
        .env("OPENCLAW_GATEWAY_TOKEN", &token)
        .env("NODE_COMPILE_CACHE", cache)
        .stdin(Stdio::null())
        .stdout(output.try_clone().map_err(io_err(STEP))?)
        .stderr(output)
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(io_err(STEP))?;
    let pid = child.id().unwrap_or_default();
    let endpoint = Endpoint::new(format!("ws://127.0.0.1:{port}"), token);
    let ready = tokio::select! {
        ready = occ_gateway::wait_ready(&endpoint, READY_DEADLINE) => ready
            .map(|_| ())
            .map_err(|e| format!("the gateway did not get ready: {e}")),
        status = child.wait() => Err(format!("the gateway exited early ({status:?})")),
    };
    // Node writes the cache as the process exits: stop it gracefully, whatever happened.
    crate::process::signal_group(pid, crate::process::Signal::Term);
    let stopped = tokio::time::timeout(STOP_DEADLINE, child.wait()).await;
    if !matches!(stopped, Ok(Ok(_))) {
        crate::process::signal_group(pid, crate::process::Signal::Kill);
        let _ = child.wait().await;
    }
    let output = crate::process::log_tail(&scratch.join("gateway.out"));
    ready.map_err(|message| RuntimeError::Step {
        step: STEP.into(),
        message: format!("{message}: {output}"),
    })?;
    match stopped {
        Ok(Ok(_)) => Ok(()),
        _ => Err(RuntimeError::Step {
            step: STEP.into(),
            message: format!("the gateway did not stop in time: {output}"),
        }),
    }
}

/// Whether Node wrote any cache file under `dir`.
fn has_entries(dir: &Path) -> bool {
    walk(dir)
        .map(|paths| paths.iter().any(|p| p.is_file()))
        .unwrap_or(false)
}

/// Every path under `dir` (not following links), `dir` excluded.
fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.path());
            }
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Node's cache directory for this uid (`v…-<uid>`) gets a sibling link named for the uid a
/// contained workload has ([`crate::sandbox::SANDBOX_ID`]), so contained gateways find it.
fn alias_for_contained_uid(dir: &Path) -> io::Result<()> {
    let own = format!("-{}", nix::unistd::geteuid().as_raw());
    let contained = format!("-{}", crate::sandbox::SANDBOX_ID);
    if own == contained {
        return Ok(());
    }
    for path in walk(dir)? {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(prefix) = name.strip_suffix(&own) else {
            continue;
        };
        if !name.starts_with('v') || !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let alias = path.with_file_name(format!("{prefix}{contained}"));
        if fs::symlink_metadata(&alias).is_err() {
            std::os::unix::fs::symlink(name, alias)?;
        }
    }
    Ok(())
}

/// Node writes its cache files for their owner only; workloads that run as an Agent's own
/// account read them too (the cache holds compiled public code, nothing of an Agent).
fn readable_by_all(dir: &Path) -> io::Result<()> {
    for path in walk(dir)?.into_iter().chain([dir.to_path_buf()]) {
        let meta = fs::symlink_metadata(&path)?;
        let mode = if meta.is_dir() {
            0o755
        } else if meta.is_file() {
            0o644
        } else {
            continue;
        };
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::runtime::{COMPILE_CACHE_SETTLED, DEFAULT_PATH, install};
    use crate::sandbox::{SandboxSettings, View, WorkloadLimits};

    /// A contained workload reads the install's warm cache: under the sandbox's uid, through
    /// the read-only runtime, V8 accepts the cached code of the CLI's entry, and Node neither
    /// skips the cache nor tries to write it.
    #[tokio::test]
    async fn contained_workloads_read_the_warm_cache() {
        let path = std::ffi::OsString::from(DEFAULT_PATH);
        let root = occ_testkit::runtime::runtime_root();
        let runtime = install(&root, &path, &|_| {}).await.expect("runtime");
        let cache = runtime
            .compile_cache()
            .expect("the install warmed a compile cache");
        let sandbox =
            SandboxSettings::locate(&path, WorkloadLimits::default()).expect("bubblewrap");
        let mut cmd = runtime.command();
        cmd.arg("--version")
            .env("HOME", "/tmp")
            .env("NODE_COMPILE_CACHE", &cache)
            .env(COMPILE_CACHE_SETTLED.0, COMPILE_CACHE_SETTLED.1)
            .env("NODE_DEBUG_NATIVE", "COMPILE_CACHE");
        let view = View {
            read_only: vec![runtime.root.clone()],
            read_write: Vec::new(),
            nests_sandboxes: false,
            uid: None,
            network: None,
        };
        let out = sandbox
            .wrap(&cmd, &view)
            .expect("wrapped")
            .output()
            .await
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("was accepted"), "{stderr}");
        for refusal in ["Skipping compile cache", "Cannot create cache directory"] {
            assert!(!stderr.contains(refusal), "{stderr}");
        }
    }
}
