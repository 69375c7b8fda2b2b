//! `occ iam …`.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use occ_core::NamespaceId;
use occ_core::iam::BuiltinRole;
use reqwest::Method;
use serde_json::json;

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
    /// Grant a Role on the whole Namespace: `viewer`, `operator`, `admin` (the built-in
    /// Roles) or a Role id. Your own grants must cover what the Role grants.
    Grant {
        /// The person's or service principal's identity id.
        #[arg(long)]
        subject: String,
        /// `viewer`, `operator`, `admin` or a Role id.
        #[arg(long)]
        role: String,
    },
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
        IamCmd::Grant { subject, role } => return grant(c, ns, subject, role).await,
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

/// `occ iam grant`: a Namespace-wide binding of a built-in Role (by name) or any Role (by id).
async fn grant(c: &Client, ns: &str, subject: String, role: String) -> anyhow::Result<()> {
    let role = match BuiltinRole::from_name(&role) {
        Some(builtin) => {
            let ns: NamespaceId = ns
                .parse()
                .map_err(|_| anyhow!("--namespace must be a Namespace id (ns_<uuid>)"))?;
            builtin.id(&ns).to_string()
        }
        None => role,
    };
    let v = c
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/namespace-bindings"),
            Some(json!({"subjectKind": "identity", "subjectId": subject, "roleId": role})),
        )
        .await?;
    c.print(&v, &["id", "subjectId", "roleId"])
}
