//! `occ credential-source …`: saved provider connections. A key given from a file becomes a
//! Secret of the Namespace first (`<name>-api-key`; on update `<name>-api-key-<unix time>`),
//! removed again if the source request is refused.

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use super::client::Client;
use super::secret::{make_secret, remove_made_secrets};

/// Where a source's API key comes from.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct KeySource {
    /// An existing Secret of the Namespace (`sec_…`) that holds the key.
    #[arg(long)]
    secret: Option<String>,
    /// A file holding the key: it is stored as a new Secret `<name>-api-key` (never printed).
    #[arg(long)]
    key_file: Option<PathBuf>,
}

/// `occ credential-source …`
#[derive(Debug, Subcommand)]
pub enum CredentialSourceCmd {
    /// List the Namespace's credential sources.
    List,
    /// Register a connection to a model provider.
    Create {
        #[arg(long)]
        name: String,
        /// `openai` (any OpenAI-compatible endpoint) or `anthropic`.
        #[arg(long = "type")]
        source_type: String,
        /// The provider's base URL (its public endpoint when absent).
        #[arg(long)]
        base_url: Option<String>,
        #[command(flatten)]
        key: KeySource,
    },
    /// Show one credential source (the Secrets it names, never a value).
    Get { id: String },
    /// Point the source at another key (the next deploy of an Agent that uses it reads it).
    Update {
        id: String,
        #[command(flatten)]
        key: KeySource,
    },
    /// The models the provider lists for the source's key (asked by occ; the key stays there).
    Models { id: String },
    /// Delete a credential source (its Secrets stay).
    Delete { id: String },
}

const COLUMNS: &[&str] = &["id", "name", "type", "state"];

/// `occ credential-source …`
pub async fn credential_source(c: &Client, cmd: CredentialSourceCmd) -> anyhow::Result<()> {
    let ns = c.ns()?.to_owned();
    let base = format!("/namespaces/{ns}/credential-sources");
    let v = match cmd {
        CredentialSourceCmd::List => c.call(Method::GET, &base, None).await?,
        CredentialSourceCmd::Get { id } => {
            c.call(Method::GET, &format!("{base}/{id}"), None).await?
        }
        CredentialSourceCmd::Create {
            name,
            source_type,
            base_url,
            key,
        } => {
            let (secret, made) = key_secret(c, &ns, &format!("{name}-api-key"), key).await?;
            let mut body = json!({"name": name, "type": source_type,
                "secrets": {"api_key": {"kind": "secret", "namespaceId": ns, "id": secret}}});
            if let Some(url) = base_url {
                body["config"] = json!({ "base_url": url });
            }
            sent_or_undone(c, &ns, made, c.call(Method::POST, &base, Some(body)).await).await?
        }
        CredentialSourceCmd::Update { id, key } => {
            let path = format!("{base}/{id}");
            let current = c.call(Method::GET, &path, None).await?;
            let name = current["name"]
                .as_str()
                .ok_or_else(|| anyhow!("the credential source has no name"))?
                .to_owned();
            // A new Secret beside the old one, which revisions already running may still name.
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let secret_name = format!("{name}-api-key-{stamp}");
            let (secret, made) = key_secret(c, &ns, &secret_name, key).await?;
            let body = json!({"secrets": {"api_key": {"kind": "secret", "namespaceId": ns, "id": secret}}});
            sent_or_undone(c, &ns, made, c.call(Method::PATCH, &path, Some(body)).await).await?
        }
        CredentialSourceCmd::Models { id } => {
            let v = c
                .call(Method::GET, &format!("{base}/{id}/models"), None)
                .await?;
            return c.print(&v, &["id", "name"]);
        }
        CredentialSourceCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Credential source", &id);
        }
    };
    c.print(&v, COLUMNS)
}

/// The Secret holding the key: the one named, or a new one made from the file (returned as
/// made, so a refusal can remove it again).
async fn key_secret(
    c: &Client,
    ns: &str,
    secret_name: &str,
    key: KeySource,
) -> anyhow::Result<(String, Option<String>)> {
    if let Some(id) = key.secret {
        return Ok((id, None));
    }
    let file = key
        .key_file
        .ok_or_else(|| anyhow!("give --secret or --key-file"))?;
    let value = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let value = value.trim_end_matches(['\n', '\r']);
    let id = make_secret(c, ns, secret_name, value).await?;
    Ok((id.clone(), Some(id)))
}

/// The answer to the source request; when it was refused, the Secret made for it goes again.
async fn sent_or_undone(
    c: &Client,
    ns: &str,
    made: Option<String>,
    sent: anyhow::Result<Value>,
) -> anyhow::Result<Value> {
    if sent.is_err()
        && let Some(id) = made
    {
        remove_made_secrets(c, ns, &[id]).await;
    }
    sent
}
