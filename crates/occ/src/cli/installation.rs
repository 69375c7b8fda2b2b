//! `occ installation …`.

use clap::Subcommand;
use reqwest::Method;

use super::client::Client;

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
