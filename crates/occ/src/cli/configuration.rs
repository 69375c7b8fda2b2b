//! `occ configuration …`.

use std::path::PathBuf;

use clap::Subcommand;
use reqwest::Method;

use super::client::Client;
use super::render::read_json;

/// `occ configuration …`
#[derive(Debug, Subcommand)]
pub enum ConfigurationCmd {
    /// Create from a JSON file `{kind:"agent", values, secretBindings?}`.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Replace from a JSON file `{values, secretBindings?}`.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Show one Configuration with its document.
    Get { id: String },
    /// Delete a Configuration no Agent references.
    Delete { id: String },
}

/// `occ configuration …`
pub async fn configuration(c: &Client, cmd: ConfigurationCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/configurations", c.ns()?);
    let v = match cmd {
        ConfigurationCmd::Create { file } => {
            c.call(Method::POST, &base, Some(read_json(&file)?)).await?
        }
        ConfigurationCmd::Update { id, file } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?
        }
        ConfigurationCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        ConfigurationCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Configuration", &id);
        }
    };
    c.print(&v, &[])
}
