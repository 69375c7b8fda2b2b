//! Native `openclaw setup --baseline` on a workspace, in a throwaway home, bounded and silent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::error::{SetupError, io_step};
use super::files::{prepare_workspace, remove_path};
use crate::fsutil;
use crate::runtime::OpenclawRuntime;

/// Bound on one native setup run.
pub const NATIVE_SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Where and how native setup runs.
#[derive(Debug, Clone)]
pub struct SetupEnv {
    /// The pinned runtime.
    pub runtime: OpenclawRuntime,
    /// A private directory for the throwaway HOME, state and config of each native setup run;
    /// recreated for every run and removed after it. Must not contain the workspace or lie in it,
    /// and only one setup may use it at a time.
    pub scratch: PathBuf,
    /// `TMPDIR` of native setup (created 0700 if missing).
    pub tmpdir: PathBuf,
    /// Bound on each native setup run ([`NATIVE_SETUP_TIMEOUT`] by default).
    pub timeout: Duration,
}

impl SetupEnv {
    /// An environment with the default timeout.
    pub fn new(runtime: OpenclawRuntime, scratch: PathBuf, tmpdir: PathBuf) -> Self {
        SetupEnv {
            runtime,
            scratch,
            tmpdir,
            timeout: NATIVE_SETUP_TIMEOUT,
        }
    }
}

/// [`native_setup`], except on an empty workspace, where the runtime's copy of native setup's
/// output on an empty workspace (made once at install) is copied in instead: the same files
/// without a CLI run of some 6 s of CPU. A runtime without that copy, or a workspace with
/// anything in it, gets the native run.
pub async fn seed_workspace(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let workspace = prepare_workspace(workspace)?;
    let seeded = env
        .runtime
        .seed_from_baseline(&workspace)
        .map_err(io_step(format!(
            "copy the runtime's stock workspace into {}",
            workspace.display()
        )))?;
    if seeded {
        return Ok(());
    }
    native_setup(&workspace, env).await
}

/// The scratch directory is removed after each run, so it must be absolute and must neither
/// contain nor lie inside the workspace.
pub(super) fn check_scratch(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let scratch = &env.scratch;
    if !scratch.is_absolute() || scratch.parent().is_none() {
        return Err(SetupError::Workspace(format!(
            "the setup scratch directory {} must be absolute and not /",
            scratch.display()
        )));
    }
    if scratch.starts_with(workspace) || workspace.starts_with(scratch) {
        return Err(SetupError::Workspace(format!(
            "the setup scratch directory {} overlaps the workspace {}",
            scratch.display(),
            workspace.display()
        )));
    }
    Ok(())
}

/// Native `openclaw setup --baseline --workspace <workspace>` against a throwaway HOME, state
/// and config (`{agents: {defaults: {workspace}, entries: {main: {}}}, gateway: {mode:
/// "local"}}`, written first so that setup does not run first-agent onboarding, which would
/// write the agent name into an existing IDENTITY.md) in `env.scratch`, with a clean
/// environment (with `OPENCLAW_NO_RESPAWN=1`, so it stays one process tree), in its own process
/// group, bounded by `env.timeout` (the group is killed on expiry). Its output is drained and
/// dropped, never logged or returned: it may echo file content. The workspace is checked and
/// created as in [`run`]; the scratch directory is removed after.
pub async fn native_setup(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let workspace = prepare_workspace(workspace)?;
    check_scratch(&workspace, env)?;
    let scratch = &env.scratch;
    reset_scratch(scratch)?;
    let result = native_setup_in(&workspace, env).await;
    if let Err(e) = remove_path(scratch) {
        tracing::warn!(
            scratch = %scratch.display(),
            error = %e,
            "cannot remove the workspace setup scratch directory"
        );
    }
    result
}

fn reset_scratch(scratch: &Path) -> Result<(), SetupError> {
    remove_path(scratch).map_err(io_step(format!("remove {}", scratch.display())))?;
    for dir in [
        scratch.to_path_buf(),
        scratch.join("home"),
        scratch.join("state"),
    ] {
        fsutil::ensure_private_dir(&dir).map_err(io_step(format!("create {}", dir.display())))?;
    }
    Ok(())
}

async fn native_setup_in(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let scratch = &env.scratch;
    let config_path = scratch.join("openclaw.json");
    let workspace_text = workspace
        .to_str()
        .ok_or_else(|| SetupError::Workspace("the workspace path is not UTF-8".into()))?;
    let config = serde_json::json!({
        "agents": {"defaults": {"workspace": workspace_text}, "entries": {"main": {}}},
        "gateway": {"mode": "local"},
    });
    fsutil::write_atomic(&config_path, config.to_string().as_bytes(), true)
        .map_err(io_step(format!("write {}", config_path.display())))?;
    fsutil::ensure_private_dir(&env.tmpdir)
        .map_err(io_step(format!("create {}", env.tmpdir.display())))?;

    let mut cmd = env.runtime.command();
    cmd.args(["setup", "--baseline", "--workspace"])
        .arg(workspace)
        .current_dir(scratch)
        .env("HOME", scratch.join("home"))
        .env("TMPDIR", &env.tmpdir)
        .env("OPENCLAW_STATE_DIR", scratch.join("state"))
        .env("OPENCLAW_CONFIG_PATH", &config_path)
        // Without it the CLI re-executes itself as a detached child in its own process group,
        // which a timeout could not stop.
        .env("OPENCLAW_NO_RESPAWN", "1")
        .env("OPENCLAW_NO_AUTO_UPDATE", "1")
        .env("DO_NOT_TRACK", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = std::time::Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| SetupError::NativeSetup(format!("cannot start openclaw: {e}")))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let (out, err, status) = tokio::join!(drain(stdout), drain(stderr), child.wait());
        (out + err, status)
    };
    let (captured, status) = match tokio::time::timeout(env.timeout, work).await {
        Ok(done) => done,
        Err(_) => {
            kill_group(pid);
            let _ = child.wait().await;
            return Err(SetupError::NativeSetup(format!(
                "did not finish within {} ms (stopped)",
                env.timeout.as_millis()
            )));
        }
    };
    let status = status.map_err(|e| SetupError::NativeSetup(format!("cannot wait: {e}")))?;
    tracing::debug!(
        workspace = %workspace.display(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        output_bytes = captured,
        %status,
        "native openclaw setup finished"
    );
    if status.success() {
        Ok(())
    } else {
        Err(SetupError::NativeSetup(format!(
            "exited with {status} ({captured} bytes of output withheld)"
        )))
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Drains a stream and returns how many bytes it carried; the bytes are dropped (native setup
/// may echo file content).
async fn drain<R: AsyncRead + Unpin>(stream: Option<R>) -> usize {
    let Some(mut stream) = stream else {
        return 0;
    };
    let mut total = 0;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}
