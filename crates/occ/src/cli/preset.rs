//! `occ preset …`.

use std::path::PathBuf;

use clap::Subcommand;
use reqwest::Method;

use super::client::Client;
use super::render::read_json;

/// `occ preset …`
#[derive(Debug, Subcommand)]
pub enum PresetCmd {
    /// List the Namespace's Presets (it starts with the built-in ones).
    List,
    /// Create from a JSON file `{name, template}`.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Show one Preset with its template.
    Get { id: String },
    /// Rename and/or replace the template from a JSON file `{name?, template?}`.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Delete a Preset (Agents made from it keep their own copies).
    Delete { id: String },
}

/// `occ preset …`
pub async fn preset(c: &Client, cmd: PresetCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/presets", c.ns()?);
    let v = match cmd {
        PresetCmd::List => c.call(Method::GET, &base, None).await?,
        PresetCmd::Create { file } => c.call(Method::POST, &base, Some(read_json(&file)?)).await?,
        PresetCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        PresetCmd::Update { id, file } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?
        }
        PresetCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Preset", &id);
        }
    };
    c.print(&v, &["id", "name", "createdAt"])
}
