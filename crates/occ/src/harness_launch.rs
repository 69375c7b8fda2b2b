//! `occ harness-launch --input <launch.json>` (hidden): a dedicated Agent's harness — workspace
//! initialisation, Codex login and probe, then `codex app-server` and the OpenClaw node host,
//! supervised until SIGTERM or SIGINT (exit 0 once every child has stopped). The work is
//! [`occ_host::harness::launch`]; this is the command line and the signal.

use std::path::PathBuf;

use clap::Args;
use occ_host::harness::{launch, read_launch_input};
use tokio::sync::watch;

/// Arguments of `occ harness-launch` (the input file holds paths and ports, never a secret).
#[derive(Debug, Args)]
pub struct HarnessLaunchArgs {
    /// The launch input (JSON, written by occ's Compute Driver).
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
}

/// Runs the launcher until a stop signal.
pub async fn run(args: HarnessLaunchArgs) -> anyhow::Result<()> {
    let input = read_launch_input(&args.input)?;
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        crate::serve::shutdown_signal().await;
        let _ = stop.send(true);
    });
    // The egress proxy of the harness's private network, if it has one, for its children.
    let proxy: Vec<(std::ffi::OsString, std::ffi::OsString)> = occ_host::sandbox::PROXY_VARIABLES
        .iter()
        .filter_map(|&name| std::env::var_os(name).map(|value| (name.into(), value)))
        .collect();
    launch::run(&input, &crate::settings::program_path(), &proxy, stopped).await?;
    Ok(())
}

/// Arguments of `occ codex-plugin-trust` (hidden): a dedicated gateway's init step where occ
/// cannot lay out the gateway's state directory itself (a Kubernetes init container).
#[derive(Debug, Args)]
pub struct CodexPluginTrustArgs {
    /// The gateway's state directory (`OPENCLAW_STATE_DIR`).
    #[arg(long, env = "OPENCLAW_STATE_DIR", value_name = "DIR")]
    state_dir: PathBuf,
    /// The OpenClaw runtime carrying the Codex plugin.
    #[arg(long, env = "OCC_OPENCLAW_RUNTIME", value_name = "DIR")]
    runtime_dir: PathBuf,
}

/// Makes the gateway using `--state-dir` trust the runtime's Codex plugin (idempotent).
pub async fn trust_plugin(args: CodexPluginTrustArgs) -> anyhow::Result<()> {
    let runtime = occ_host::runtime::OpenclawRuntime::locate(
        &args.runtime_dir,
        &crate::settings::program_path(),
    )?;
    occ_host::harness::trust_codex_plugin(&runtime, &args.state_dir)?;
    tracing::info!(state_dir = %args.state_dir.display(), "the Codex plugin is trusted");
    Ok(())
}
