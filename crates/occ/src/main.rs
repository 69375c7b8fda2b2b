//! `occ`: one binary for every role. This file is composition only: it reads the command line
//! and the environment (nothing else in occ does), builds the selected parts and runs them.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod migrate;
mod settings;

/// occ — a control plane for OpenClaw agents.
#[derive(Debug, Parser)]
#[command(name = "occ", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the embedded schema migrations (idempotent; safe to run concurrently).
    Migrate(migrate::MigrateArgs),
}

fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("OCC_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Migrate(args) => migrate::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, no backtrace: the message names what to fix.
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}
