//! `occ iam …`.

use std::path::PathBuf;

use clap::Subcommand;
use reqwest::Method;

use super::client::Client;
use super::render::read_json;

/// `occ iam …`
#[derive(Debug, Subcommand)]
pub enum IamCmd {
    /// Roles.
    #[command(subcommand)]
    Role(IamResourceCmd),
    /// AccessBindings.
    #[command(subcommand)]
    AccessBinding(IamResourceCmd),
}

/// `occ iam role|access-binding …`
#[derive(Debug, Subcommand)]
pub enum IamResourceCmd {
    /// List.
    List,
    /// Show one.
    Get { id: String },
    /// Create from a JSON file.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Delete one.
    Delete { id: String },
}

/// `occ iam …`
pub async fn iam(c: &Client, cmd: IamCmd) -> anyhow::Result<()> {
    let ns = c.ns()?;
    let (kind, base, cmd, columns): (&str, String, IamResourceCmd, &[&str]) = match cmd {
        IamCmd::Role(cmd) => (
            "Role",
            format!("/namespaces/{ns}/iam/roles"),
            cmd,
            &["id", "name"],
        ),
        IamCmd::AccessBinding(cmd) => (
            "AccessBinding",
            format!("/namespaces/{ns}/iam/access-bindings"),
            cmd,
            &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
        ),
    };
    let v = match cmd {
        IamResourceCmd::List => c.call(Method::GET, &base, None).await?,
        IamResourceCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        IamResourceCmd::Create { file } => {
            c.call(Method::POST, &base, Some(read_json(&file)?)).await?
        }
        IamResourceCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted(kind, &id);
        }
    };
    c.print(&v, columns)
}
