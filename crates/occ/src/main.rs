//! `occ`: one binary for every role. This file is composition only: it reads the command line
//! (settings come from [`settings`]), builds the selected parts and runs them.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bootstrap;
mod cli;
mod compose;
mod compute_host;
mod dev;
mod harness_launch;
mod metrics;
mod migrate;
mod runtime;
mod sandbox_relay;
mod serve;
mod settings;
mod worker;
mod workspace_setup;

/// occ — a control plane for OpenClaw agents.
#[derive(Debug, Parser)]
#[command(name = "occ", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    client: cli::ClientOptions,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the embedded schema migrations (idempotent; safe to run concurrently).
    Migrate(migrate::MigrateArgs),
    /// Create the Installation, its administrator and the bootstrap service key (idempotent).
    Bootstrap(bootstrap::BootstrapArgs),
    /// Run the HTTP API (settings from OCC_* variables and OCC_CONFIG_PATH).
    Serve,
    /// Run the controller worker (settings from OCC_* variables and OCC_CONFIG_PATH).
    Worker,
    /// API + worker in one process with embedded defaults and real OpenClaw gateways.
    Dev(dev::DevArgs),
    /// The pinned OpenClaw runtime that gateways run on.
    #[command(subcommand)]
    Runtime(runtime::RuntimeCmd),
    /// Apply (or verify) an Agent's initial workspace files where its workspace lives.
    WorkspaceSetup(workspace_setup::WorkspaceSetupArgs),
    /// The host side of the SSH Compute Driver: one JSON operation on stdin, one reply line.
    #[command(hide = true)]
    ComputeHost,
    /// A dedicated Agent's harness: workspace, Codex login and probe, then the Codex
    /// app-server and the OpenClaw node host, supervised until SIGTERM.
    #[command(hide = true)]
    HarnessLaunch(harness_launch::HarnessLaunchArgs),
    /// A dedicated gateway's state directory trusts the runtime's Codex plugin (an init step).
    #[command(hide = true)]
    CodexPluginTrust(harness_launch::CodexPluginTrustArgs),
    /// The relay on either side of a contained gateway's private network.
    #[command(hide = true)]
    SandboxRelay(sandbox_relay::SandboxRelayArgs),
    /// The Installation.
    #[command(subcommand)]
    Installation(cli::InstallationCmd),
    /// Namespaces.
    #[command(subcommand)]
    Namespace(cli::NamespaceCmd),
    /// Configurations (needs --namespace).
    #[command(subcommand)]
    Configuration(cli::ConfigurationCmd),
    /// Secrets (needs --namespace).
    #[command(subcommand)]
    Secret(cli::SecretCmd),
    /// ServiceAccounts (needs --namespace).
    #[command(subcommand)]
    ServiceAccount(cli::ServiceAccountCmd),
    /// Presets, templates for new Agents (needs --namespace).
    #[command(subcommand)]
    Preset(cli::PresetCmd),
    /// Credential sources, saved connections to model providers (needs --namespace).
    #[command(subcommand)]
    CredentialSource(cli::CredentialSourceCmd),
    /// Agents, deployments and revisions (needs --namespace).
    #[command(subcommand)]
    Agent(cli::AgentCmd),
    /// Namespace IAM: Roles and AccessBindings (needs --namespace).
    #[command(subcommand)]
    Iam(cli::IamCmd),
    /// Sign in with email and password; later commands without a service key use the session.
    Login(cli::LoginArgs),
    /// End the saved session and forget it.
    Logout,
    /// People's accounts (an Installation administrator signed in with `occ login`).
    #[command(subcommand)]
    Account(cli::AccountCmd),
    /// Service principals for automation (Installation administrators).
    #[command(subcommand)]
    ServicePrincipal(cli::ServicePrincipalCmd),
    /// Service keys of service principals (Installation administrators).
    #[command(subcommand)]
    ServiceKey(cli::ServiceKeyCmd),
}

fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("OCC_LOG").unwrap_or_else(|_| "info".into());
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let client = || cli::Client::new(&cli.client);
    match cli.command {
        Command::Migrate(args) => migrate::run(args).await,
        Command::Bootstrap(args) => bootstrap::run(args).await,
        Command::Serve => serve::run().await,
        Command::Worker => worker::run().await,
        Command::Dev(args) => dev::run(args).await,
        Command::Runtime(cmd) => runtime::run(cmd).await,
        Command::WorkspaceSetup(args) => workspace_setup::run(args).await,
        Command::ComputeHost => compute_host::run().await,
        Command::HarnessLaunch(args) => harness_launch::run(args).await,
        Command::CodexPluginTrust(args) => harness_launch::trust_plugin(args).await,
        Command::SandboxRelay(args) => sandbox_relay::run(args).await,
        Command::Installation(cmd) => cli::installation(&client()?, cmd).await,
        Command::Namespace(cmd) => cli::namespace(&client()?, cmd).await,
        Command::Configuration(cmd) => cli::configuration(&client()?, cmd).await,
        Command::Secret(cmd) => cli::secret(&client()?, cmd).await,
        Command::ServiceAccount(cmd) => cli::service_account(&client()?, cmd).await,
        Command::Preset(cmd) => cli::preset(&client()?, cmd).await,
        Command::CredentialSource(cmd) => cli::credential_source(&client()?, cmd).await,
        Command::Agent(cmd) => cli::agent(&client()?, cmd).await,
        Command::Iam(cmd) => cli::iam(&client()?, cmd).await,
        Command::Login(args) => cli::login(&client()?, args).await,
        Command::Logout => cli::logout(&client()?).await,
        Command::Account(cmd) => cli::account(&client()?, cmd).await,
        Command::ServicePrincipal(cmd) => cli::service_principal(&client()?, cmd).await,
        Command::ServiceKey(cmd) => cli::service_key(&client()?, cmd).await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A sandbox's relays run beside every contained gateway: one thread each is plenty, and
    // keeps what each Agent costs small.
    let runtime = if matches!(cli.command, Command::SandboxRelay(_)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    match runtime {
        Ok(runtime) => runtime.block_on(main_async(cli)),
        Err(e) => {
            #[allow(clippy::print_stderr, reason = "no logging without a runtime")]
            {
                eprintln!("error: cannot start the async runtime: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn main_async(cli: Cli) -> ExitCode {
    // One TLS provider for every client in the process (rustls with ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server_side = matches!(
        cli.command,
        Command::Migrate(_)
            | Command::Bootstrap(_)
            | Command::Serve
            | Command::Worker
            | Command::Dev(_)
            | Command::WorkspaceSetup(_)
            | Command::ComputeHost
            | Command::HarnessLaunch(_)
            | Command::CodexPluginTrust(_)
    );
    if server_side {
        init_logging();
    }
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if server_side {
                tracing::error!("{err:#}");
            } else {
                #[allow(clippy::print_stderr, reason = "CLI errors are for the terminal")]
                {
                    eprintln!("error: {err:#}");
                }
            }
            ExitCode::FAILURE
        }
    }
}
