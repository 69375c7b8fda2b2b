//! `occ installation …`.

use super::client::Client;
use clap::Subcommand;
use reqwest::Method;

/// `occ installation …`
#[derive(Debug, Subcommand)]
pub enum InstallationCmd {
    /// Show the Installation.
    Get,
}

/// `occ installation …`
pub async fn installation(c: &Client, cmd: InstallationCmd) -> anyhow::Result<()> {
    match cmd {
        InstallationCmd::Get => c.print(&c.call(Method::GET, "/installation", None).await?, &[]),
    }
}
