//! `occ namespace …`.

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use super::client::Client;
use super::render::NS_COLUMNS;

/// `occ namespace …`
#[derive(Debug, Subcommand)]
pub enum NamespaceCmd {
    /// List Namespaces.
    List,
    /// Show one Namespace.
    Get { id: String },
    /// Create a Namespace.
    Create {
        name: String,
        /// Adopt an existing Kubernetes namespace the operator prepared (Kubernetes Compute).
        #[arg(long)]
        existing_namespace: Option<String>,
    },
    /// Delete an empty Namespace.
    Delete { id: String },
}

/// `occ namespace …`
pub async fn namespace(c: &Client, cmd: NamespaceCmd) -> anyhow::Result<()> {
    let v = match cmd {
        NamespaceCmd::List => c.call(Method::GET, "/namespaces", None).await?,
        NamespaceCmd::Get { id } => {
            c.call(Method::GET, &format!("/namespaces/{id}"), None)
                .await?
        }
        NamespaceCmd::Create {
            name,
            existing_namespace,
        } => {
            let mut body = json!({"name": name});
            if let Some(e) = existing_namespace {
                body["existingNamespace"] = json!(e);
            }
            c.call(Method::POST, "/namespaces", Some(body)).await?
        }
        NamespaceCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("/namespaces/{id}"), None)
                .await?
        }
    };
    c.print(&v, NS_COLUMNS)
}
