//! An Agent's workspace on the host before its first gateway: seeded once with the stock files
//! of the pinned OpenClaw (native `openclaw setup --baseline`, or the copy of its output the
//! runtime install keeps), or set up from its staged
//! initial files by the workspace setup runtime — in process, or, with per-Agent accounts, as
//! the Agent's user through `occ workspace-setup` (input on its stdin, never argv or a file).
//! A completed setup is only verified, so a lost workspace blocks startup instead of being
//! silently reseeded.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::ComputeError;
use occ_core::resource::WorkspaceSetup;

use crate::account::Account;
use crate::failure::{io_error, unavailable};
use crate::layout::{create_dir, open_output, write_new};
use crate::process::log_tail;
use crate::runtime::OpenclawRuntime;
use crate::sandbox::{SandboxSettings, View};
use crate::workspace_setup::{self, SetupEnv, SetupError, SetupInput};

/// How long the native workspace seeding may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Seeds a new Agent's workspace with the stock files of the pinned OpenClaw (native
/// `openclaw setup --baseline`, run once, against a throwaway home, state and config so the
/// Agent's own config stays the immutable snapshot).
pub(crate) async fn seed(
    runtime: &OpenclawRuntime,
    agent_dir: &Path,
    account: Option<Account>,
) -> Result<(), ComputeError> {
    let done = agent_dir.join("workspace-seeded");
    if done.exists() {
        return Ok(());
    }
    // The runtime's copy of native setup's output stands in for running it (the same files,
    // without a CLI run of some 6 s of CPU per Agent). With accounts the copy, or the native
    // setup, runs as the Agent's user, so nothing is written into its directory with occ's
    // privileges.
    let workspace = agent_dir.join("state/workspace");
    let seeded = match account {
        None => runtime
            .seed_from_baseline(&workspace)
            .map_err(|e| io_error("seed from the runtime's stock workspace", &workspace, e))?,
        Some(account) => copy_baseline_as(runtime, &workspace, account).await?,
    };
    if seeded {
        return write_new(&done, b"");
    }
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
    let (log, log_err) = open_output(&log_path, account)?;
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
        .stdout(log)
        .stderr(log_err)
        .kill_on_drop(true);
    if let Some(account) = account {
        cmd.uid(account.uid).gid(account.gid);
    }
    let status = bounded("openclaw setup", cmd.status()).await?;
    let _ = std::fs::remove_dir_all(&scratch);
    if !status.success() {
        return Err(ComputeError::transient(
            ReasonCode::WorkspaceSetupFailed,
            format!(
                "openclaw setup failed ({status}); log tail:\n{}",
                log_tail(&log_path)
            ),
        ));
    }
    write_new(&done, b"")
}

/// Copies the runtime's stock workspace into the Agent's empty `workspace` as the Agent's own
/// user (coreutils `cp`), so the copy can write only what that user could anyway; `Ok(false)`
/// when the runtime has no such copy or the workspace is not an empty directory (native setup
/// runs then).
async fn copy_baseline_as(
    runtime: &OpenclawRuntime,
    workspace: &Path,
    account: Account,
) -> Result<bool, ComputeError> {
    let Some(baseline) = runtime.baseline_workspace() else {
        return Ok(false);
    };
    let empty = std::fs::read_dir(workspace).is_ok_and(|mut entries| entries.next().is_none());
    if !empty {
        return Ok(false);
    }
    let mut cmd = tokio::process::Command::new("cp");
    // -T: the baseline's entries land in the existing workspace, not in a directory inside it.
    cmd.args(["-RT", "--preserve=mode"])
        .arg(&baseline)
        .arg(workspace)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .uid(account.uid)
        .gid(account.gid)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = bounded("copying the stock workspace (cp)", cmd.output()).await?;
    if !out.status.success() {
        return Err(ComputeError::transient(
            ReasonCode::WorkspaceSetupFailed,
            format!(
                "copying the stock workspace as the Agent's user failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(true)
}

/// A seeding process (`what`) awaited within [`SETUP_TIMEOUT`]: expiry is a transient setup
/// failure, a program that cannot be started makes the host unavailable.
async fn bounded<T>(
    what: &str,
    run: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, ComputeError> {
    tokio::time::timeout(SETUP_TIMEOUT, run)
        .await
        .map_err(|_| {
            ComputeError::transient(
                ReasonCode::WorkspaceSetupFailed,
                format!("{what} did not finish in {SETUP_TIMEOUT:?}"),
            )
        })?
        .map_err(|e| unavailable(format!("cannot run {what}: {e}")))
}

/// The `occ workspace-setup` process that applies a setup outside occ's own process.
pub(crate) struct SetupProcess<'a> {
    /// Who it runs as.
    pub identity: SetupIdentity<'a>,
    /// The `occ` binary.
    pub program: &'a Path,
    /// Its `PATH`.
    pub path: &'a OsStr,
}

/// Who `occ workspace-setup` runs as.
pub(crate) enum SetupIdentity<'a> {
    /// The Agent's own account.
    Account(Account),
    /// occ's user inside the Agent's sandbox, which shows it the runtime and the `occ` binary
    /// read-only and the Agent's home, temporary directory and workspace read-write: nothing
    /// the Agent could plant there (a link into occ's data directory) leads anywhere else.
    Sandbox(&'a SandboxSettings),
}

/// Applies the Agent's staged workspace setup (the setup runtime: in process, so the staged text
/// goes straight from the record into the workspace and never lands in a delivery file; or in
/// an `occ workspace-setup` process, as the Agent's user or inside its sandbox, `process`), or,
/// for a completed record, verifies the marker so a lost workspace blocks startup instead of
/// being silently reseeded. Native setup runs inside, so no separate seeding follows.
pub(crate) async fn apply_setup(
    runtime: &OpenclawRuntime,
    agent_dir: &Path,
    setup: &WorkspaceSetup,
    process: Option<SetupProcess<'_>>,
) -> Result<(), ComputeError> {
    match process {
        Some(process) => setup_in_process_of_its_own(runtime, agent_dir, setup, process).await?,
        None => {
            let scratch = agent_dir.join("tmp").join("setup");
            let env = SetupEnv::new(runtime.clone(), scratch.clone(), agent_dir.join("tmp"));
            let input = SetupInput::from(setup);
            let result =
                workspace_setup::apply(&input, &agent_dir.join("state/workspace"), &env).await;
            let _ = std::fs::remove_dir_all(&scratch);
            result.map_err(setup_failure)?;
        }
    }
    let done = agent_dir.join("workspace-seeded");
    if !done.exists() {
        write_new(&done, b"")?;
    }
    Ok(())
}

/// A setup failure as the worker handles it: a native setup run or I/O that may work next time
/// is retried; a refusal (divergent file, foreign or missing marker, unsafe path, bad input)
/// needs an operator and fails the deploy. The message names files and steps, never contents.
fn setup_failure(e: SetupError) -> ComputeError {
    if e.is_retryable() {
        ComputeError::transient(ReasonCode::WorkspaceSetupFailed, e.to_string())
    } else {
        ComputeError::permanent(ReasonCode::WorkspaceSetupFailed, e.to_string())
    }
}

/// The workspace setup runtime (`occ workspace-setup`) as the Agent's user or inside its
/// sandbox: the input goes on its stdin (never argv, never a file), its scratch space is the
/// Agent's `tmp/`.
async fn setup_in_process_of_its_own(
    runtime: &OpenclawRuntime,
    agent_dir: &Path,
    setup: &WorkspaceSetup,
    process: SetupProcess<'_>,
) -> Result<(), ComputeError> {
    use tokio::io::AsyncWriteExt as _;
    let program = process.program;
    let (home, tmp, workspace) = (
        agent_dir.join("home"),
        agent_dir.join("tmp"),
        agent_dir.join("state/workspace"),
    );
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("workspace-setup")
        .env_clear()
        .env("PATH", process.path)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env("OCC_LOG", "warn")
        .env("NO_COLOR", "1")
        .env("OCC_WORKSPACE_DIR", &workspace)
        .env("OCC_OPENCLAW_RUNTIME", &runtime.root)
        .current_dir(&home);
    let mut cmd = match process.identity {
        SetupIdentity::Account(account) => {
            cmd.uid(account.uid).gid(account.gid);
            cmd
        }
        SetupIdentity::Sandbox(sandbox) => {
            for dir in [&home, &tmp, &workspace] {
                create_dir(dir)?;
            }
            let view = View {
                read_only: vec![program.to_path_buf(), runtime.root.clone()],
                read_write: vec![home, tmp, workspace],
                nests_sandboxes: false,
                uid: None,
                network: None,
            };
            sandbox
                .wrap(&cmd, &view)
                .map_err(|e| unavailable(format!("cannot contain workspace-setup: {e}")))?
        }
    };
    cmd.stdin(Stdio::piped())
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
            ReasonCode::WorkspaceSetupFailed,
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
        ComputeError::transient(ReasonCode::WorkspaceSetupFailed, line)
    } else {
        ComputeError::permanent(ReasonCode::WorkspaceSetupFailed, line)
    })
}
