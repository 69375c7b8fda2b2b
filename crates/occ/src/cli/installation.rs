//! `occ installation …` and `occ backend list`.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use super::client::Client;

/// `occ installation …`
#[derive(Debug, Subcommand)]
pub enum InstallationCmd {
    /// Show the Installation.
    Get,
    /// Every Namespace with its Agents and their deployment state (one row per Agent).
    DeploymentInventory,
    /// The configured Backends Agents may select.
    Backends,
}

/// `occ installation …`
pub async fn installation(c: &Client, cmd: InstallationCmd) -> anyhow::Result<()> {
    match cmd {
        InstallationCmd::Get => c.print(&c.call(Method::GET, "/installation", None).await?, &[]),
        InstallationCmd::DeploymentInventory => {
            let inventory = c
                .call(Method::GET, "/installation/deployment-inventory", None)
                .await?;
            match c.is_table() {
                // A table reads best flat: one row per Agent, with its Namespace.
                true => c.print(
                    &inventory_rows(&inventory),
                    &[
                        "namespaceId",
                        "namespaceStatus",
                        "id",
                        "desiredRuntimeState",
                        "deploymentInProgress",
                        "activeRevisionId",
                    ],
                ),
                false => c.print(&inventory, &[]),
            }
        }
        InstallationCmd::Backends => c.print(
            &c.call(Method::GET, "/backends", None).await?,
            &["id", "type"],
        ),
    }
}

fn inventory_rows(inventory: &Value) -> Value {
    let empty = Vec::new();
    let rows: Vec<Value> = inventory["namespaces"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .flat_map(|ns| {
            ns["agents"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .map(move |a| {
                    let mut row = a.clone();
                    row["namespaceId"] = ns["id"].clone();
                    row["namespaceStatus"] = ns["status"].clone();
                    row
                })
        })
        .collect();
    json!(rows)
}
