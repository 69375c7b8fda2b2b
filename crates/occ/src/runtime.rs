//! `occ runtime install`: installs the pinned OpenClaw runtime (Node.js and openclaw from the
//! npm registry) that the process Compute Driver runs gateways with.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "progress goes to the terminal, the result to stdout"
)]

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use occ_host::runtime::{self, NODE_VERSION, OPENCLAW_VERSION};

/// `occ runtime …`.
#[derive(Debug, Subcommand)]
pub enum RuntimeCmd {
    /// Install the pinned OpenClaw runtime (idempotent; safe to run concurrently).
    Install(InstallArgs),
}

/// Arguments of `occ runtime install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Install directory [default: <data dir>/runtime].
    #[arg(long, env = "OCC_OPENCLAW_RUNTIME", value_name = "DIR")]
    dir: Option<PathBuf>,
    /// occ's data directory.
    #[arg(long, env = "OCC_DATA_DIR", default_value = ".occ", value_name = "DIR")]
    data_dir: PathBuf,
}

impl InstallArgs {
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
    }
}

async fn install(args: InstallArgs) -> anyhow::Result<()> {
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
    println!("openclaw {OPENCLAW_VERSION}");
    println!("node     {NODE_VERSION}");
    println!("root     {}", rt.root.display());
    println!("node bin {}", rt.node.display());
    println!("entry    {}", rt.entry.display());
    Ok(())
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
        let RuntimeCmd::Install(args) = cli.cmd;
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
    }
}
