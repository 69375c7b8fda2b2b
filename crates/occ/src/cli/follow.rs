//! Following what the API admitted (`--wait`): a deployment until it succeeds or fails.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use clap::Args;
use reqwest::Method;
use serde_json::Value;

use super::client::Client;
use super::render::cell;

/// Following an admitted deployment.
#[derive(Debug, Args)]
pub struct FollowArgs {
    /// Follow the deployment until it succeeds or fails.
    #[arg(long)]
    pub(super) wait: bool,
    /// How long to wait, in seconds.
    #[arg(long, default_value_t = 900)]
    wait_timeout_seconds: u64,
}

impl FollowArgs {
    /// How long `--wait` follows.
    pub(super) fn limit(&self) -> Duration {
        Duration::from_secs(self.wait_timeout_seconds)
    }
}

/// Prints an admitted revision, or follows its deployment with `--wait`.
pub(super) async fn admitted(
    c: &Client,
    agent: &str,
    rev: &Value,
    follow: &FollowArgs,
) -> anyhow::Result<()> {
    if !follow.wait {
        return c.print(rev, &[]);
    }
    let rev_id = rev["id"]
        .as_str()
        .ok_or_else(|| anyhow!("the response has no revision id"))?;
    eprintln!(
        "Deployment {rev_id} (revision {}) admitted.",
        cell(&rev["revision"])
    );
    follow_deployment(c, &format!("{agent}/deployments/{rev_id}"), follow.limit()).await
}

/// Polls a deployment until it ends, printing each change of state or progress.
pub(super) async fn follow_deployment(
    c: &Client,
    path: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let status = c.call(Method::GET, path, None).await?;
        let state = status["status"].as_str().unwrap_or("unknown").to_owned();
        let progress = status["progress"]["lastAttempt"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let line = if progress.is_empty() {
            state.clone()
        } else {
            format!("{state} ({progress})")
        };
        if line != last {
            eprintln!("[{:>4}s] {line}", started.elapsed().as_secs());
            last = line;
        }
        match state.as_str() {
            "succeeded" => return c.print(&status, &[]),
            "failed" => {
                c.print(&status, &[])?;
                bail!(
                    "the deployment failed: {} {}",
                    status["error"]["code"].as_str().unwrap_or("UNKNOWN"),
                    status["error"]["message"].as_str().unwrap_or("")
                );
            }
            _ => {}
        }
        if started.elapsed() > limit {
            bail!(
                "the deployment did not finish within {} seconds (it continues)",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
