//! `occ runtime install`: installs the pinned OpenClaw runtime (Node.js, openclaw and the Codex
//! harness from the npm registry) that the process Compute Driver runs gateways with, and checks that it prints
//! the configuration schema this build validates Configurations with.
//! `occ runtime schema`: prints that schema as the installed runtime prints it.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "progress goes to the terminal, the result to stdout"
)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use occ_core::native::schema::PINNED_SCHEMA;
use occ_host::runtime::{
    self, CODEX_PLUGIN_VERSION, CODEX_VERSION, NODE_VERSION, OPENCLAW_VERSION, OpenclawRuntime,
};

/// How long `openclaw config schema` may take (a few seconds on an idle machine).
const SCHEMA_TIMEOUT: Duration = Duration::from_secs(180);

/// `occ runtime …`.
#[derive(Debug, Subcommand)]
pub enum RuntimeCmd {
    /// Install the pinned OpenClaw runtime (idempotent; safe to run concurrently) and check that
    /// it prints the configuration schema this build validates Configurations with.
    Install(RuntimeDir),
    /// Print the JSON Schema of openclaw.json as the installed runtime prints it
    /// (`openclaw config schema`).
    Schema(RuntimeDir),
}

/// Where the runtime is.
#[derive(Debug, Args)]
pub struct RuntimeDir {
    /// Install directory [default: <data dir>/runtime].
    #[arg(long, env = "OCC_OPENCLAW_RUNTIME", value_name = "DIR")]
    dir: Option<PathBuf>,
    /// occ's data directory.
    #[arg(long, env = "OCC_DATA_DIR", default_value = ".occ", value_name = "DIR")]
    data_dir: PathBuf,
}

impl RuntimeDir {
    fn target(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("runtime"))
    }
}

/// Runs a `runtime` subcommand.
pub async fn run(cmd: RuntimeCmd) -> anyhow::Result<()> {
    match cmd {
        RuntimeCmd::Install(args) => install(args).await,
        RuntimeCmd::Schema(args) => {
            let rt = OpenclawRuntime::locate(&args.target(), &crate::settings::program_path())?;
            let schema = config_schema(&rt).await?;
            std::io::stdout()
                .write_all(schema.as_bytes())
                .context("write the schema to stdout")
        }
    }
}

async fn install(args: RuntimeDir) -> anyhow::Result<()> {
    let target = args.target();
    let started = std::time::Instant::now();
    let progress = move |line: &str| {
        eprintln!("[{:>4}s] {line}", started.elapsed().as_secs());
    };
    let rt = runtime::install(&target, &crate::settings::program_path(), &progress)
        .await
        .with_context(|| {
            format!(
                "cannot install the OpenClaw runtime into {}",
                target.display()
            )
        })?;
    // One CLI start (seconds, against a minute of install): a binary whose embedded schema is
    // not its runtime's would admit documents the gateways refuse, or refuse valid ones.
    progress("openclaw config schema: checking it against the schema this build embeds");
    let printed = config_schema(&rt).await?;
    if printed != PINNED_SCHEMA {
        anyhow::bail!(
            "the OpenClaw runtime at {} prints a configuration schema that differs from the one \
             this occ build validates Configurations with; this build's \
             runtime/gateway/openclaw.schema.json does not belong to its lockfiles (regenerate it \
             with scripts/pin-runtime-schema.sh)",
            rt.root.display()
        );
    }
    println!("openclaw {OPENCLAW_VERSION}");
    println!("node     {NODE_VERSION}");
    println!("root     {}", rt.root.display());
    println!("node bin {}", rt.node.display());
    println!("entry    {}", rt.entry.display());
    println!("codex    {CODEX_VERSION} {}", rt.codex_bin().display());
    println!(
        "plugin   @openclaw/codex {CODEX_PLUGIN_VERSION} {}",
        rt.codex_plugin_dir().display()
    );
    println!("schema   the embedded configuration schema");
    Ok(())
}

/// What `openclaw config schema` prints, verbatim. It runs in a throwaway home and state
/// directory, so nothing of this machine's OpenClaw state is read or written.
async fn config_schema(rt: &OpenclawRuntime) -> anyhow::Result<String> {
    let step = "openclaw config schema";
    let scratch = tempfile::Builder::new()
        .prefix("occ-openclaw-schema-")
        .tempdir()
        .with_context(|| format!("{step}: create a scratch directory"))?;
    let mut cmd = rt.scratch_command(scratch.path());
    cmd.args(["config", "schema"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(SCHEMA_TIMEOUT, cmd.output())
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "{step} did not finish within {} s",
                SCHEMA_TIMEOUT.as_secs()
            )
        })?
        .with_context(|| format!("{step}: start {}", rt.node.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        anyhow::bail!("{step} exited with {}: {}", output.status, tail.trim());
    }
    String::from_utf8(output.stdout).with_context(|| format!("{step}: output is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: RuntimeCmd,
    }

    fn target(args: &[&str]) -> PathBuf {
        let cli = Cli::try_parse_from(args).expect("parse");
        let (RuntimeCmd::Install(args) | RuntimeCmd::Schema(args)) = cli.cmd;
        args.target()
    }

    #[test]
    fn directory_defaults() {
        // Only meaningful when the variables are not set in the test environment.
        if std::env::var_os("OCC_OPENCLAW_RUNTIME").is_some()
            || std::env::var_os("OCC_DATA_DIR").is_some()
        {
            return;
        }
        assert_eq!(target(&["t", "install"]), PathBuf::from(".occ/runtime"));
        assert_eq!(
            target(&["t", "install", "--data-dir", "/var/lib/occ"]),
            PathBuf::from("/var/lib/occ/runtime")
        );
        assert_eq!(
            target(&["t", "install", "--dir", "/opt/oc", "--data-dir", "/x"]),
            PathBuf::from("/opt/oc")
        );
        assert_eq!(
            target(&["t", "schema", "--dir", "/opt/oc"]),
            PathBuf::from("/opt/oc")
        );
    }
}
