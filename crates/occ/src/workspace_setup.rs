//! `occ workspace-setup`: applies (or, for a completed record, verifies) an Agent's initial
//! workspace files where its workspace lives, for Compute Drivers that cannot call
//! [`occ_host::workspace_setup::run`] in process.
//!
//! The input is a private file named by `OCC_WORKSPACE_SETUP_PATH` (stdin when unset), never
//! argv or an environment value; the workspace is `OCC_WORKSPACE_DIR`; the runtime
//! `OCC_OPENCLAW_RUNTIME`. Success prints `{"completed":true,"id":…}` on stdout. Any failure
//! prints one line starting with `WORKSPACE_SETUP_FAILED` on stderr (then the error kind and a
//! message that never contains file contents) and exits 1.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the result goes to stdout, the failure line to stderr: that is the interface"
)]

use std::io::{Read as _, Write as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use occ_host::runtime::OpenclawRuntime;
use occ_host::workspace_setup::{self, INPUT_MAX_BYTES, SetupEnv, SetupError};

/// Arguments of `occ workspace-setup` (paths only; the input itself is never on the command
/// line).
#[derive(Debug, Args)]
pub struct WorkspaceSetupArgs {
    /// The private setup input file (deleted after a first successful application)
    /// [default: stdin].
    #[arg(long = "input", env = "OCC_WORKSPACE_SETUP_PATH", value_name = "FILE")]
    input: Option<PathBuf>,
    /// The Agent's workspace directory (absolute, normalized).
    #[arg(long, env = "OCC_WORKSPACE_DIR", value_name = "DIR")]
    workspace_dir: Option<PathBuf>,
    /// The OpenClaw runtime [default: <data dir>/runtime].
    #[arg(long, env = "OCC_OPENCLAW_RUNTIME", value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
    /// occ's data directory.
    #[arg(long, env = "OCC_DATA_DIR", default_value = ".occ", value_name = "DIR")]
    data_dir: PathBuf,
    /// Bound on each native `openclaw setup` run, in seconds.
    #[arg(long, default_value_t = 120, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    setup_timeout_seconds: u64,
}

/// Why the command failed: a library error, or something before it.
enum Failure {
    Setup(SetupError),
    Usage(&'static str, String),
}

impl Failure {
    fn line(&self) -> String {
        let (kind, message) = match self {
            Failure::Setup(e) => (e.kind(), e.to_string()),
            Failure::Usage(kind, message) => (*kind, message.clone()),
        };
        // One line, whatever an OS message contains.
        let message = message.replace(['\n', '\r'], " ");
        format!("WORKSPACE_SETUP_FAILED {kind}: {message}")
    }
}

impl From<SetupError> for Failure {
    fn from(e: SetupError) -> Self {
        Failure::Setup(e)
    }
}

/// Runs `occ workspace-setup`; on failure prints the failure line and exits 1.
pub async fn run(args: WorkspaceSetupArgs) -> anyhow::Result<()> {
    match execute(&args).await {
        Ok(id) => {
            println!("{}", serde_json::json!({"completed": true, "id": id}));
            Ok(())
        }
        Err(failure) => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{}", failure.line());
            let _ = stderr.flush();
            std::process::exit(1);
        }
    }
}

async fn execute(args: &WorkspaceSetupArgs) -> Result<String, Failure> {
    let workspace = args.workspace_dir.clone().ok_or(Failure::Usage(
        "WORKSPACE_UNSAFE",
        "OCC_WORKSPACE_DIR (or --workspace-dir) is not set".into(),
    ))?;
    let input = match &args.input {
        Some(path) => workspace_setup::read_input_file(path)?,
        None => workspace_setup::parse_input(&read_stdin()?)?,
    };
    let runtime_root = args
        .runtime_dir
        .clone()
        .unwrap_or_else(|| args.data_dir.join("runtime"));
    let runtime = OpenclawRuntime::locate(&runtime_root, &crate::settings::program_path())
        .map_err(|e| Failure::Usage("RUNTIME_NOT_INSTALLED", e.to_string()))?;
    let scratch_root = private_scratch()?;
    let env = SetupEnv {
        runtime,
        scratch: scratch_root.join("setup"),
        tmpdir: scratch_root.join("tmp"),
        timeout: Duration::from_secs(args.setup_timeout_seconds),
    };
    let result = workspace_setup::apply(&input, &workspace, &env).await;
    let _ = std::fs::remove_dir_all(&scratch_root);
    result?;
    if let Some(path) = &args.input
        && !input.completed
    {
        workspace_setup::remove_input_file(path)?;
    }
    Ok(input.id)
}

/// The input from stdin, bounded like the file.
fn read_stdin() -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(INPUT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::Usage("INPUT_INVALID", format!("cannot read stdin: {e}")))?;
    Ok(bytes)
}

/// A fresh private (0700) directory under the system temp directory for native setup's
/// throwaway HOME, state, config and TMPDIR; removed when the command ends.
fn private_scratch() -> Result<PathBuf, Failure> {
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let dir = base.join(format!(
            "occ-workspace-setup-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(scratch_failure(&base, e)),
        }
    }
    Err(scratch_failure(
        &base,
        std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    ))
}

fn scratch_failure(base: &Path, e: std::io::Error) -> Failure {
    Failure::Usage(
        "IO",
        format!(
            "cannot create a scratch directory in {}: {e}",
            base.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: WorkspaceSetupArgs,
    }

    #[test]
    fn failure_lines_are_one_line_with_the_kind() {
        let line = Failure::from(SetupError::MarkerMissing).line();
        assert!(
            line.starts_with("WORKSPACE_SETUP_FAILED MARKER_MISSING: "),
            "{line}"
        );
        let line = Failure::Usage("IO", "a\nb\rc".into()).line();
        assert_eq!(line, "WORKSPACE_SETUP_FAILED IO: a b c");
    }

    #[tokio::test]
    async fn a_missing_workspace_or_input_fails_before_anything_runs() {
        let dir = std::env::temp_dir().join(format!("occ-ws-cli-test-{}", std::process::id()));
        let args = Cli::try_parse_from(["t", "--workspace-dir", "/nonexistent/ws"])
            .expect("parse")
            .args;
        let args = WorkspaceSetupArgs {
            input: Some(dir.join("missing.json")),
            ..args
        };
        let failure = execute(&args).await.expect_err("fails");
        assert!(
            failure
                .line()
                .starts_with("WORKSPACE_SETUP_FAILED INPUT_INVALID: "),
            "{}",
            failure.line()
        );
        let args = WorkspaceSetupArgs {
            workspace_dir: None,
            ..args
        };
        let failure = execute(&args).await.expect_err("fails");
        assert!(
            failure
                .line()
                .starts_with("WORKSPACE_SETUP_FAILED WORKSPACE_UNSAFE: "),
            "{}",
            failure.line()
        );
        assert!(!dir.exists());
    }
}
