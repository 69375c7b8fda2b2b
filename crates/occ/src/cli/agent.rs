//! `occ agent …`: the Agent resource, its deployments (followed with `--wait`), revisions,
//! runtime and workspace files.

use anyhow::Context as _;
use clap::Subcommand;
use reqwest::Method;
use std::path::PathBuf;

use super::chat::agent_chat;
use super::client::{Client, Output, with_grant_hint, with_use_hint};
use super::diagnose::{agent_diagnose, runtime_table};
use super::follow::{FollowArgs, admitted};
use super::grants::{grant_control_ui, grant_use};
use super::logs::{LogsArgs, agent_logs};
use super::provision::{ProvisionArgs, agent_provision, agent_provisioning};
use super::render::{AGENT_COLUMNS, REVISION_COLUMNS, read_json};
use super::revisions::default_runtime_revision;

/// `occ agent …`
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// List Agents.
    List,
    /// Show one Agent.
    Get { id: String },
    /// Create from a JSON file.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Update the draft from a JSON file.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Create a Configuration and an Agent and deploy them in one step, from one of the
    /// Namespace's Presets (`--preset`, `--name`, `--var`) or a `provisionAgent` body file;
    /// `--wait` follows each step and then the deployment.
    Provision(ProvisionArgs),
    /// Show a provisioning job (`prv_…`): its status, the step it is at, what it created.
    Provisioning {
        work_id: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Retry a failed provisioning job from the step that failed.
    ProvisionRetry {
        work_id: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Admit a new revision from the Agent's Configuration and deploy it.
    Deploy {
        id: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Roll back on purpose: admit a new revision made from an earlier revision's frozen
    /// document and identities, and deploy it.
    Rollback {
        id: String,
        /// The earlier revision to return to (its `rev_…` id; `occ agent revisions` lists them).
        #[arg(long = "to", value_name = "REVISION")]
        to: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Show a deployment's status.
    DeploymentStatus { id: String, deployment_id: String },
    /// List the Agent's revisions.
    Revisions { id: String },
    /// Show one revision (the frozen document and identities).
    Revision { id: String, revision_id: String },
    /// Stop the Agent.
    Stop { id: String },
    /// Delete the Agent.
    Delete { id: String },
    /// The Agent's live workspace files (AGENTS.md, SOUL.md, IDENTITY.md, USER.md).
    #[command(subcommand)]
    Files(FilesCmd),
    /// What runs for a revision: its workloads (Pods; the gateway process or unit on the
    /// process and SSH Drivers), their containers, restarts, last exit and events.
    Runtime {
        id: String,
        /// The revision (`rev_…`); default: a newer revision than the active one while it has
        /// workloads, else the active revision, else the latest.
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
    },
    /// Print a revision's runtime output (redacted by occ).
    Logs(LogsArgs),
    /// Let a principal talk to this Agent (`occ agent chat`; service keys need this grant):
    /// binds a Role with exactly `use` on Agents on this one Agent, creating the Role
    /// `agent-user` if the Namespace has none. Idempotent.
    GrantUse {
        id: String,
        /// The identity to allow (default: the service principal of the CLI's key).
        #[arg(long, value_name = "ID")]
        principal: Option<String>,
    },
    /// Let a person open the Agent's native Control UI: their `use` binding on this Agent (as
    /// grant-use makes it) carrying a runtime role. Idempotent; Installation administrators.
    GrantControlUi {
        id: String,
        /// The person's IAM principal (`prn_…`, as account creation answers it).
        #[arg(long, value_name = "ID")]
        principal: String,
        /// The runtime role (the only one occ's runtime enforces is the default).
        #[arg(long, default_value = "platform-administrator")]
        runtime_role: String,
    },
    /// Send the Agent a message and print its reply as it is produced. Without MESSAGE, an
    /// interactive conversation: one message per line, Ctrl-D ends it.
    Chat {
        id: String,
        message: Option<String>,
        /// Continue this conversation (1-64 lowercase letters, digits, '-' or '_'; default
        /// `occ-chat`).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
    },
    /// Why a deployment failed or is stuck: its checks, its error and the gateway's last
    /// output lines (redacted by occ).
    Diagnose {
        id: String,
        /// The deployment's revision (`rev_…`); default: the latest revision.
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
    },
}

/// `occ agent files …`
#[derive(Debug, Subcommand)]
pub enum FilesCmd {
    /// Print a file (its content as is; `-o json|yaml` for `{name, content}`).
    Get { id: String, name: String },
    /// Replace a file with the content of a local file (UTF-8, at most 16 KiB).
    Put {
        id: String,
        name: String,
        #[arg(long)]
        file: PathBuf,
    },
}

/// `occ agent …`
pub async fn agent(c: &Client, cmd: AgentCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/agents", c.ns()?);
    match cmd {
        AgentCmd::Files(FilesCmd::Get { id, name }) => {
            let file = c
                .call(
                    Method::GET,
                    &format!("{base}/{id}/workspace/files/{name}"),
                    None,
                )
                .await?;
            match c.output {
                Output::Table => {
                    print!("{}", file["content"].as_str().unwrap_or_default());
                    Ok(())
                }
                _ => c.print(&file, &[]),
            }
        }
        AgentCmd::Files(FilesCmd::Put { id, name, file }) => {
            let content = std::fs::read_to_string(&file)
                .with_context(|| format!("--file {} (UTF-8 text)", file.display()))?;
            c.print(
                &c.call(
                    Method::PUT,
                    &format!("{base}/{id}/workspace/files/{name}"),
                    Some(serde_json::json!({"content": content})),
                )
                .await?,
                &[],
            )
        }
        AgentCmd::Logs(args) => agent_logs(c, &base, args).await,
        AgentCmd::Provision(args) => agent_provision(c, args).await,
        AgentCmd::Provisioning { work_id, follow } => {
            agent_provisioning(c, &work_id, false, &follow).await
        }
        AgentCmd::ProvisionRetry { work_id, follow } => {
            agent_provisioning(c, &work_id, true, &follow).await
        }
        AgentCmd::GrantUse { id, principal } => {
            let binding = grant_use(c, &id, principal).await?;
            c.print(
                &binding,
                &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
            )
        }
        AgentCmd::GrantControlUi {
            id,
            principal,
            runtime_role,
        } => {
            let binding = grant_control_ui(c, &id, principal, &runtime_role).await?;
            c.print(&binding, &["id", "subjectId", "resourceId", "runtimeRole"])
        }
        AgentCmd::Chat {
            id,
            message,
            session,
        } => agent_chat(c, &format!("{base}/{id}/chat"), message, session)
            .await
            .map_err(|e| with_use_hint(e, &id)),
        AgentCmd::Diagnose { id, revision } => agent_diagnose(c, &base, &id, revision).await,
        AgentCmd::List => c.print(&c.call(Method::GET, &base, None).await?, AGENT_COLUMNS),
        AgentCmd::Get { id } => c.print(
            &c.call(Method::GET, &format!("{base}/{id}"), None).await?,
            &[],
        ),
        AgentCmd::Create { file } => c.print(
            &c.call(Method::POST, &base, Some(read_json(&file)?)).await?,
            &[],
        ),
        AgentCmd::Update { id, file } => c.print(
            &c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?,
            &[],
        ),
        AgentCmd::Revisions { id } => c.print(
            &c.call(Method::GET, &format!("{base}/{id}/revisions"), None)
                .await?,
            REVISION_COLUMNS,
        ),
        AgentCmd::Revision { id, revision_id } => c.print(
            &c.call(
                Method::GET,
                &format!("{base}/{id}/revisions/{revision_id}"),
                None,
            )
            .await?,
            REVISION_COLUMNS,
        ),
        AgentCmd::DeploymentStatus { id, deployment_id } => c.print(
            &c.call(
                Method::GET,
                &format!("{base}/{id}/deployments/{deployment_id}"),
                None,
            )
            .await?,
            &[],
        ),
        AgentCmd::Stop { id } => c.print(
            &c.call(Method::POST, &format!("{base}/{id}/stop"), None)
                .await?,
            &[],
        ),
        AgentCmd::Delete { id } => c.print(
            &c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?,
            &[],
        ),
        AgentCmd::Runtime { id, revision } => {
            let agent = format!("{base}/{id}");
            let revision = match revision {
                Some(revision) => revision,
                None => default_runtime_revision(c, &agent).await?,
            };
            let runtime = c
                .call(
                    Method::GET,
                    &format!("{agent}/deployments/{revision}/runtime"),
                    None,
                )
                .await?;
            match c.output {
                Output::Table => {
                    println!("{}", runtime_table(&runtime).trim_end());
                    Ok(())
                }
                _ => c.print(&runtime, &[]),
            }
        }
        AgentCmd::Deploy { id, follow } => {
            let rev = c
                .call(Method::POST, &format!("{base}/{id}/deploy"), None)
                .await
                .map_err(|e| with_grant_hint(e, &id))?;
            admitted(c, &format!("{base}/{id}"), &rev, &follow).await
        }
        AgentCmd::Rollback { id, to, follow } => {
            let rev = c
                .call(
                    Method::POST,
                    &format!("{base}/{id}/revisions/{to}/redeploy"),
                    None,
                )
                .await?;
            admitted(c, &format!("{base}/{id}"), &rev, &follow).await
        }
    }
}
