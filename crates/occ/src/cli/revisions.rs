//! Which revision a command means when it is not told: shared by `occ agent runtime`, `occ agent
//! logs` and `occ agent diagnose`.

use anyhow::anyhow;
use reqwest::Method;

use super::client::Client;

/// The revision `occ agent runtime` describes without `--revision`, as the reference's CLI
/// chooses it: the latest revision while it is newer than the active one and has workloads
/// (a deployment in progress or failing), else the active revision, else the latest.
pub(super) async fn default_runtime_revision(c: &Client, agent: &str) -> anyhow::Result<String> {
    let active = c.call(Method::GET, agent, None).await?["activeRevisionId"]
        .as_str()
        .map(str::to_owned);
    let latest = latest_revision(c, agent).await?;
    match active {
        Some(active) if latest != active => {
            let runtime = c
                .call(
                    Method::GET,
                    &format!("{agent}/deployments/{latest}/runtime"),
                    None,
                )
                .await?;
            let has_workloads = runtime["pods"].as_array().is_some_and(|p| !p.is_empty());
            Ok(if has_workloads { latest } else { active })
        }
        Some(active) => Ok(active),
        None => Ok(latest),
    }
}

/// The Agent's latest revision (the newest deployment).
pub(super) async fn latest_revision(c: &Client, agent: &str) -> anyhow::Result<String> {
    let revisions = c
        .call(Method::GET, &format!("{agent}/revisions"), None)
        .await?;
    revisions
        .as_array()
        .into_iter()
        .flatten()
        .max_by_key(|r| r["revision"].as_u64().unwrap_or(0))
        .and_then(|r| r["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the Agent has no revision; deploy it first"))
}
