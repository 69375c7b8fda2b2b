//! `occ account …`: people's accounts (an Installation administrator signed in with
//! `occ login`: account routes take a person's session, not a service key).

use std::path::PathBuf;

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use super::client::Client;

const ACCOUNTS: &str = "/api/auth/accounts";

/// `occ account …`
#[derive(Debug, Subcommand)]
pub enum AccountCmd {
    /// Create an account (optionally bound to an Installation Role).
    Create {
        /// Its email.
        #[arg(long)]
        email: String,
        /// A file holding its first password (12..128 characters).
        #[arg(long)]
        password_file: PathBuf,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// An Installation Role to bind to it.
        #[arg(long, conflicts_with = "administrator")]
        role_id: Option<String>,
        /// Make it a full Installation administrator (binds the bootstrap administrator Role).
        #[arg(long)]
        administrator: bool,
    },
    /// Show an account: its principal, version and whether it is disabled.
    Get { user_id: String },
    /// Disable an account: it signs in no more and its sessions end at once.
    Disable { user_id: String },
    /// Enable a disabled account.
    Enable { user_id: String },
    /// End every session of an account (signing in again works).
    Revoke { user_id: String },
}

const COLUMNS: &[&str] = &["userId", "principalId", "version", "disabled"];

/// `occ account …`
pub async fn account(c: &Client, cmd: AccountCmd) -> anyhow::Result<()> {
    let (user_id, action) = match cmd {
        AccountCmd::Create {
            email,
            password_file,
            name,
            role_id,
            administrator,
        } => {
            let role_id = match administrator {
                true => Some(administrator_role(c).await?),
                false => role_id,
            };
            let password = std::fs::read_to_string(&password_file)
                .map_err(|e| anyhow::anyhow!("--password-file {}: {e}", password_file.display()))?;
            let mut body =
                json!({"email": email, "password": password.trim_end_matches(['\n', '\r'])});
            if let Some(name) = name {
                body["name"] = json!(name);
            }
            if let Some(role) = role_id {
                body["roleId"] = json!(role);
            }
            let made = c.call(Method::POST, ACCOUNTS, Some(body)).await?;
            return c.print(&made, &["id", "email", "name", "principalId"]);
        }
        AccountCmd::Get { user_id } => {
            let v = c
                .call(Method::GET, &format!("{ACCOUNTS}/{user_id}"), None)
                .await?;
            return c.print(&v, COLUMNS);
        }
        AccountCmd::Disable { user_id } => (user_id, "disable"),
        AccountCmd::Enable { user_id } => (user_id, "enable"),
        AccountCmd::Revoke { user_id } => (user_id, "revoke"),
    };
    // A change names the version it acts on: the one just read.
    let path = format!("{ACCOUNTS}/{user_id}");
    let current = c.call(Method::GET, &path, None).await?;
    let version = current["version"].as_i64().unwrap_or(0);
    c.call(
        Method::POST,
        &format!("{path}/{action}"),
        Some(json!({ "expectedVersion": version })),
    )
    .await?;
    let after = c.call(Method::GET, &path, None).await?;
    c.print(&after, COLUMNS)
}

/// The id of the Installation's administrator Role (the one bootstrap made).
async fn administrator_role(c: &Client) -> anyhow::Result<String> {
    let roles = c.call(Method::GET, "/iam/roles", None).await?;
    roles
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "Installation administrator")
        .and_then(|r| r["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            anyhow::anyhow!("the Installation has no \"Installation administrator\" Role")
        })
}
