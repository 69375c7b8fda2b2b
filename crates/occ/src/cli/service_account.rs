//! `occ service-account …`.

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use super::client::Client;

/// `occ service-account …`
#[derive(Debug, Subcommand)]
pub enum ServiceAccountCmd {
    /// List ServiceAccounts.
    List,
    /// Create a ServiceAccount.
    Create { name: String },
    /// Show one ServiceAccount.
    Get { id: String },
    /// Issue the ServiceAccount a credential through the installation's Backend (ChatGPT):
    /// once; its value goes to the Secret Driver and is never shown.
    IssueCredential { id: String },
    /// Set a native ServiceAccount's credential reference (a Secret name and key you keep).
    SetCredential {
        id: String,
        /// `api_key` or `oauth_access_token`.
        #[arg(long)]
        kind: String,
        /// The Secret's name.
        #[arg(long)]
        secret: String,
        /// The key within it.
        #[arg(long)]
        key: String,
    },
    /// Delete a ServiceAccount.
    Delete { id: String },
}

/// `occ service-account …`
pub async fn service_account(c: &Client, cmd: ServiceAccountCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/service-accounts", c.ns()?);
    let v = match cmd {
        ServiceAccountCmd::List => c.call(Method::GET, &base, None).await?,
        ServiceAccountCmd::Create { name } => {
            c.call(Method::POST, &base, Some(json!({"name": name})))
                .await?
        }
        ServiceAccountCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        ServiceAccountCmd::IssueCredential { id } => {
            c.call(
                Method::POST,
                &format!("{base}/{id}/credentials"),
                Some(json!({})),
            )
            .await?
        }
        ServiceAccountCmd::SetCredential {
            id,
            kind,
            secret,
            key,
        } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}/credential"),
                Some(json!({"kind": kind, "secretRef": {"name": secret, "key": key}})),
            )
            .await?
        }
        ServiceAccountCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("ServiceAccount", &id);
        }
    };
    c.print(&v, &["id", "name", "credential"])
}
