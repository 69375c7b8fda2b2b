//! `occ secret …`.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use super::client::Client;
use super::grants::grant_secret;
use super::render::read_json;

/// `occ secret …`
#[derive(Debug, Subcommand)]
pub enum SecretCmd {
    /// List Secrets (metadata only).
    List,
    /// Create from a JSON file `{name, value}`.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Replace the value from a JSON file `{value}`.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Show one Secret's metadata.
    Get { id: String },
    /// Delete a Secret.
    Delete { id: String },
    /// Let an Agent use this Secret (what its deploy needs when its Configuration binds the
    /// Secret or its harness logs in with it): binds a Role with `operate` on Secrets to the
    /// Agent's service principal on this one Secret, creating the Role `secret-user` if the
    /// Namespace has none. Idempotent.
    Grant {
        /// The Secret (`sec_…`).
        id: String,
        /// The Agent (`agt_…`).
        #[arg(long)]
        agent: String,
    },
}

/// `occ secret …`
pub async fn secret(c: &Client, cmd: SecretCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/secrets", c.ns()?);
    let v = match cmd {
        SecretCmd::List => c.call(Method::GET, &base, None).await?,
        SecretCmd::Create { file } => c.call(Method::POST, &base, Some(read_json(&file)?)).await?,
        SecretCmd::Update { id, file } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?
        }
        SecretCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        SecretCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Secret", &id);
        }
        SecretCmd::Grant { id, agent } => {
            let binding = grant_secret(c, &id, &agent).await?;
            return c.print(
                &binding,
                &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
            );
        }
    };
    c.print(&v, &["id", "name"])
}

/// Stores `value` as a new Secret `name` of Namespace `ns` for a request about to name it; its
/// id (see [`remove_made_secrets`] for when that request is refused).
pub(super) async fn make_secret(
    c: &Client,
    ns: &str,
    name: &str,
    value: &str,
) -> anyhow::Result<String> {
    let made = c
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": name, "value": value})),
        )
        .await?;
    made["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the Secret response has no id"))
}

/// Deletes the Secrets made for a request the API refused, so nothing is left behind; one that
/// cannot be deleted is reported, not fatal (the refusal is what the caller needs to see).
pub(super) async fn remove_made_secrets(c: &Client, ns: &str, made: &[String]) {
    for id in made {
        if let Err(e) = c
            .call(
                Method::DELETE,
                &format!("/namespaces/{ns}/secrets/{id}"),
                None,
            )
            .await
        {
            eprintln!("the Secret {id} made for this request was not removed: {e}");
        }
    }
}
