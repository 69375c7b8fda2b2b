//! What runs for a revision, as operators read it: its state, its runtime report and its
//! captured output.

use super::dedicated::harness_serving;
use super::*;

impl Host {
    /// What runs for the revision right now. Also caps the revision's log (observing is the
    /// worker's regular look at a running Agent).
    pub async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        let agent_dir = self.agent_dir(&rev.agent);
        if !agent_dir.exists() {
            return Ok(RuntimeState::NotRunning);
        }
        rotate_log(&agent_dir, &rev.revision_id).await?;
        if rev.execution_mode() == ExecutionMode::Dedicated {
            rotate(GatewayLog::of_harness(&agent_dir, &rev.revision_id)).await?;
        }
        if !is_current(&agent_dir, &rev.revision_id)? {
            return Ok(RuntimeState::NotCurrent);
        }
        Ok(if self.serving(&rev.agent, &agent_dir, rev).await? {
            RuntimeState::Serving
        } else {
            RuntimeState::NotRunning
        })
    }

    /// The revision's gateway as it runs now (nothing while another revision is installed):
    /// the process occ recorded for it, or its systemd unit's state.
    pub async fn runtime_report(
        &self,
        rev: &RevisionTarget,
    ) -> Result<RuntimeReport, ComputeError> {
        let agent_dir = self.agent_dir(&rev.agent);
        if !agent_dir.exists() || !is_current(&agent_dir, &rev.revision_id)? {
            return Ok(RuntimeReport::default());
        }
        let observed = match self.systemd() {
            Some(sd) => {
                let agent_id = rev.agent.agent_id.as_str();
                let path = sd.unit_path(agent_id);
                if !path.exists() {
                    return Ok(RuntimeReport::default());
                }
                report::Observed::Unit {
                    name: systemd::unit_name(agent_id),
                    state: sd.systemctl.state(&systemd::unit_name(agent_id)).await?,
                    installed_at: layout::modified_at(&path)?,
                }
            }
            None => match detached::recorded_for(&agent_dir, &rev.revision_id)? {
                Some(gateway) => report::Observed::Process(gateway),
                None => return Ok(RuntimeReport::default()),
            },
        };
        let ready = self.serving(&rev.agent, &agent_dir, rev).await?;
        let mut gateway = report::gateway_pod(&rev.revision_id, observed, ready);
        let containment = match (&self.options.sandbox, &self.options.accounts) {
            (Some(sandbox), _) => report::Containment::Sandbox {
                limits: &sandbox.limits,
                private_network: crate::detached::has_private_network(sandbox, self.options.bind),
            },
            (None, Some(_)) => report::Containment::Account,
            (None, None) => report::Containment::None,
        };
        gateway.events.extend(report::delivery_events(
            containment,
            &crate::credential_proxy::bound_variables(rev),
            &self.proxied(rev),
            gateway.created_at,
        ));
        let mut pods = vec![gateway];
        if rev.execution_mode() == ExecutionMode::Dedicated
            && let Some(harness) = workload::recorded_for(&agent_dir, &rev.revision_id)?
        {
            let running = harness.live && harness_serving(&agent_dir, &rev.revision_id)?;
            let mut pod = report::harness_pod(&rev.revision_id, harness, running);
            pod.events.push(report::harness_key_event(
                self.harness_key_proxied(rev),
                pod.created_at,
            ));
            pods.push(pod);
        }
        Ok(RuntimeReport {
            pods,
            history_from_driver: false,
        })
    }

    /// One bounded read of the revision's captured gateway output (rotated first when it
    /// reached its cap): only what the revision's own gateways wrote; nothing for a revision
    /// that never ran here (or whose log was pruned).
    pub async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        if self.layout.agent_marker(&rev.agent)?.is_none() {
            return Ok(LogChunk {
                entries: Vec::new(),
                position: None,
                truncated: false,
            });
        }
        let agent_dir = self.agent_dir(&rev.agent);
        let log = match query.workload {
            LogWorkload::Gateway => {
                rotate_log(&agent_dir, &rev.revision_id).await?;
                GatewayLog::of_revision(&agent_dir, &rev.revision_id)
            }
            LogWorkload::Harness if rev.execution_mode() == ExecutionMode::Dedicated => {
                rotate(GatewayLog::of_harness(&agent_dir, &rev.revision_id)).await?;
                GatewayLog::of_harness(&agent_dir, &rev.revision_id)
            }
            LogWorkload::Harness => {
                return Err(ComputeError::permanent(
                    ReasonCode::RuntimeLogsSourceUnavailable,
                    "an embedded revision has no harness",
                ));
            }
        };
        let query = query.clone();
        let chunk = tokio::task::spawn_blocking(move || log.read(&query))
            .await
            .map_err(|e| unavailable(format!("the log read stopped: {e}")))??;
        // The gateway token (and the proxy key derived from it) never leaves the host, even
        // inside the lines.
        let token = layout::token(&agent_dir)?;
        let chunk = chunk.without_value(token.expose());
        Ok(match crate::snapshot::proxy_key(rev, token.expose()) {
            Some(key) => chunk.without_value(&key),
            None => chunk,
        })
    }
}

/// Rotates the revision's gateway log when it reached [`LOG_ROTATE_BYTES`] (off the async
/// threads: it copies up to that much).
pub(super) async fn rotate_log(agent_dir: &Path, rev: &RevisionId) -> Result<(), ComputeError> {
    rotate(GatewayLog::of_revision(agent_dir, rev)).await
}

/// Rotates `log` when it reached [`LOG_ROTATE_BYTES`], off the async threads.
pub(super) async fn rotate(log: GatewayLog) -> Result<(), ComputeError> {
    tokio::task::spawn_blocking(move || log.rotate_if_over(LOG_ROTATE_BYTES))
        .await
        .map_err(|e| unavailable(format!("the log rotation stopped: {e}")))??;
    Ok(())
}
