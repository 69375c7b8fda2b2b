//! `occ service-principal …` and `occ service-key …`: identities and keys for automation.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use super::client::Client;

const PRINCIPALS: &str = "/api/auth/service-principals";
const COLUMNS: &[&str] = &["id", "name", "namespaceId", "disabled"];

/// `occ service-principal …`
#[derive(Debug, Subcommand)]
pub enum ServicePrincipalCmd {
    /// List non-Agent service principals.
    List {
        /// Only those limited to the --namespace.
        #[arg(long)]
        in_namespace: bool,
    },
    /// Create one; give it access with `occ iam grant` and a key with `occ service-key create`.
    Create {
        /// 1..64 characters, unique in the Installation.
        name: String,
        /// Limit it (and every key issued to it) to the --namespace.
        #[arg(long)]
        in_namespace: bool,
    },
    /// Show one.
    Get { id: String },
    /// Disable one: its keys are refused from their next request on.
    Disable { id: String },
    /// Enable a disabled one.
    Enable { id: String },
    /// Delete one with its keys and bindings.
    Delete { id: String },
}

/// `occ service-principal …`
pub async fn service_principal(c: &Client, cmd: ServicePrincipalCmd) -> anyhow::Result<()> {
    let v = match cmd {
        ServicePrincipalCmd::List { in_namespace } => {
            let path = if in_namespace {
                format!("{PRINCIPALS}?namespaceId={}", c.ns()?)
            } else {
                PRINCIPALS.to_owned()
            };
            c.call(Method::GET, &path, None).await?
        }
        ServicePrincipalCmd::Create { name, in_namespace } => {
            let mut body = json!({ "name": name });
            if in_namespace {
                body["namespaceId"] = json!(c.ns()?);
            }
            c.call(Method::POST, PRINCIPALS, Some(body)).await?
        }
        ServicePrincipalCmd::Get { id } => {
            c.call(Method::GET, &format!("{PRINCIPALS}/{id}"), None)
                .await?
        }
        ServicePrincipalCmd::Disable { id } => {
            c.call(Method::POST, &format!("{PRINCIPALS}/{id}/disable"), None)
                .await?
        }
        ServicePrincipalCmd::Enable { id } => {
            c.call(Method::POST, &format!("{PRINCIPALS}/{id}/enable"), None)
                .await?
        }
        ServicePrincipalCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{PRINCIPALS}/{id}"), None)
                .await?;
            return c.deleted("Service principal", &id);
        }
    };
    c.print(&v, COLUMNS)
}

/// `occ service-key …`
#[derive(Debug, Subcommand)]
pub enum ServiceKeyCmd {
    /// Issue a key to a service principal and write it (owner-only, never printed) to a new
    /// file that `--service-key-file` reads.
    Create {
        /// The service principal.
        #[arg(long)]
        principal: String,
        /// 1..32 characters.
        #[arg(long)]
        name: String,
        /// The file to create (it must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Lifetime in days, 1..365 (default 30).
        #[arg(long)]
        expires_in_days: Option<u32>,
        /// Limit the key to the --namespace (required for a Namespace's principal).
        #[arg(long)]
        in_namespace: bool,
    },
    /// Revoke a key by its id.
    Revoke { id: String },
}

/// `occ service-key …`
pub async fn service_key(c: &Client, cmd: ServiceKeyCmd) -> anyhow::Result<()> {
    match cmd {
        ServiceKeyCmd::Create {
            principal,
            name,
            out,
            expires_in_days,
            in_namespace,
        } => {
            let mut body = json!({"servicePrincipalId": principal, "name": name});
            if let Some(days) = expires_in_days {
                body["expiresIn"] = json!(u64::from(days) * 86_400);
            }
            if in_namespace {
                body["namespaceId"] = json!(c.ns()?);
            }
            // Made first, so a key is never issued that cannot be kept.
            let mut file = create_private(&out)?;
            let issued = match c
                .call(Method::POST, "/api/auth/service-keys", Some(body))
                .await
            {
                Ok(issued) => issued,
                Err(e) => {
                    drop(file);
                    let _ = std::fs::remove_file(&out);
                    return Err(e);
                }
            };
            let mut bytes = serde_json::to_vec_pretty(&json!({ "data": issued }))?;
            bytes.push(b'\n');
            file.write_all(&bytes)
                .and_then(|()| file.sync_all())
                .with_context(|| format!("writing {}", out.display()))?;
            let mut shown = issued;
            if let Some(fields) = shown.as_object_mut() {
                fields.remove("key");
                fields.insert("file".into(), Value::String(out.display().to_string()));
            }
            c.print(
                &shown,
                &["id", "servicePrincipalId", "name", "expiresAt", "file"],
            )
        }
        ServiceKeyCmd::Revoke { id } => {
            c.call(
                Method::DELETE,
                &format!("/api/auth/service-keys/{id}"),
                None,
            )
            .await?;
            c.print(&json!({"id": id, "revoked": true}), &["id", "revoked"])
        }
    }
}

/// A new file only its owner can read, refusing to replace anything (or follow a link).
fn create_private(path: &Path) -> anyhow::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("--out {}: creating a new owner-only file", path.display()))
}
