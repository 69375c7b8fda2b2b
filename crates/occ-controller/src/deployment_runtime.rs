//! What runs for a deployment (`GET …/deployments/{rev}/runtime`) and why it failed or is
//! stuck (`POST …/deployments/{rev}/diagnostics`).
//!
//! Both need, as the reference does, Agent `operate` and `read` and AgentRevision `read` on the
//! exact targets (a denial is audited by the choke point; a granted read is not, as in the
//! reference, which audits only log views). The revision must belong to the Agent (404
//! otherwise). The database session ends before the Compute Driver is asked, within
//! [`DRIVER_DEADLINE`]; its report gets what occ recorded about the gateway (restarts, last
//! exit) and is sanitized (`RuntimeReport::sanitized`) before it leaves.

use std::sync::Arc;
use std::time::Duration;

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::compute::ComputeError;
use occ_core::redact::Redactor;
use occ_core::resource::{AgentRuntime, ObservedRuntimeState};
use occ_core::runtime_report::{ContainerState, RuntimeReport};
use occ_core::{AgentId, Error, NamespaceId, RevisionId, Timestamp};
use occ_drivers::compute::Compute;

use crate::authorization::found;
use crate::deployments::{DeploymentState, DeploymentStatus, deployment_status_in};
use crate::runtime_logs::handed_secret_metas;
use crate::worker::revision_target;
use crate::{Controller, Request};

/// How long the Compute Driver may take to describe a revision.
pub const DRIVER_DEADLINE: Duration = Duration::from_secs(10);

/// The runtime of one deployment, sanitized.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRuntime {
    /// The revision.
    pub revision_id: RevisionId,
    /// When the Driver was asked.
    pub observed_at: Timestamp,
    /// Its workloads.
    pub report: RuntimeReport,
}

/// The outcome of one diagnostic check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    /// Fine.
    Succeeded,
    /// Not fine; `code` says what to act on.
    Failed,
    /// Could not be told (yet).
    Unknown,
}

impl CheckState {
    /// Wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

/// One diagnostic check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was looked at: `deployment`, `runtime`, `gateway`.
    pub component: &'static str,
    /// Which aspect of it.
    pub check: &'static str,
    /// The outcome.
    pub state: CheckState,
    /// A code the operator can act on (a reason code of occ, or the workload's own reason).
    pub code: Option<String>,
    /// When the fact was established.
    pub checked_at: Option<Timestamp>,
}

/// The diagnostics of one deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostics {
    /// The revision.
    pub revision_id: RevisionId,
    /// When they were made.
    pub observed_at: Timestamp,
    /// The checks, in the order a deployment goes through them.
    pub checks: Vec<Check>,
}

/// What the reads of both routes gather before the Driver is asked.
struct Gathered {
    target: occ_core::compute::RevisionTarget,
    status: DeploymentStatus,
    recorded: Option<AgentRuntime>,
    /// The Secrets the revision hands its runtime: their exact values are redacted too.
    secrets: Vec<occ_core::resource::SecretMeta>,
}

impl Controller {
    /// Gives the controller the Compute Driver whose workloads the runtime routes describe and
    /// whose output the logs route reads.
    pub fn with_runtime_access(mut self, compute: Arc<dyn Compute>) -> Self {
        self.runtime = Some(compute);
        self
    }

    async fn gather(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent_id: &AgentId,
        id: &RevisionId,
        audit_action: &str,
    ) -> Result<Gathered, Error> {
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, agent_id);
        let (tx, _) = self
            .read_authorized(req, Action::Operate, &agent_ref, audit_action)
            .await?;
        let tx = self
            .authorize_in(tx, req, Action::Read, &agent_ref, audit_action)
            .await?;
        let revision_ref = ResourceRef::exact(ResourceKind::AgentRevision, ns, id);
        let mut tx = self
            .authorize_in(tx, req, Action::Read, &revision_ref, audit_action)
            .await?;
        let agent = found(tx.agent_get(ns, agent_id).await?)?;
        let revision = found(tx.revision_get(ns, agent_id, id).await?)?;
        let status = deployment_status_in(&mut tx, ns, agent_id, id).await?;
        let recorded = tx.agent_runtime_get(ns, agent_id).await?;
        let secrets = handed_secret_metas(&mut tx, ns, &revision).await?;
        drop(tx);
        Ok(Gathered {
            target: revision_target(&agent, &revision),
            status,
            recorded,
            secrets,
        })
    }

    /// The Driver's report of the gathered revision, with what occ recorded, sanitized.
    async fn report(
        &self,
        gathered: &Gathered,
        redactor: &Redactor,
    ) -> Result<RuntimeReport, ComputeError> {
        let compute = self.runtime.as_ref().ok_or_else(|| {
            ComputeError::transient(
                occ_core::ReasonCode::DependencyUnavailable,
                "runtime access is not configured",
            )
        })?;
        let report =
            tokio::time::timeout(DRIVER_DEADLINE, compute.runtime_report(&gathered.target))
                .await
                .map_err(|_| {
                    ComputeError::transient(
                        occ_core::ReasonCode::DependencyUnavailable,
                        "the Compute Driver did not describe the revision in time",
                    )
                })??;
        Ok(report
            .with_recorded(
                gathered.recorded.as_ref(),
                gathered.target.revision_id.as_str(),
            )
            .sanitized(redactor))
    }

    /// The revision's workloads as its Compute Driver reports them now (503 when the Driver
    /// cannot be reached).
    pub async fn deployment_runtime(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent: &AgentId,
        id: &RevisionId,
    ) -> Result<DeploymentRuntime, Error> {
        let gathered = self
            .gather(
                req,
                ns,
                agent,
                id,
                "openclaw.agent_deployments.runtime.read",
            )
            .await?;
        let observed_at = Timestamp::now();
        // Fail closed: without the values the report could show one.
        let redactor = Redactor::new(self.handed_values(ns, agent, id, &gathered.secrets).await?);
        let report = self
            .report(&gathered, &redactor)
            .await
            .map_err(|e| Error::unavailable(format!("runtime report: {e}")))?;
        Ok(DeploymentRuntime {
            revision_id: id.clone(),
            observed_at,
            report,
        })
    }

    /// Checks of the deployment: how its reconciliation ended (the failing reason code), and
    /// whether its workload exists, runs, is ready and has exited since it started. A Driver
    /// that cannot be reached makes the runtime checks `unknown`, not the request fail.
    pub async fn deployment_diagnostics(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent: &AgentId,
        id: &RevisionId,
    ) -> Result<Diagnostics, Error> {
        let gathered = self
            .gather(req, ns, agent, id, "openclaw.agent_deployments.diagnose")
            .await?;
        let observed_at = Timestamp::now();
        // The checks carry codes only, never output: patterns are enough.
        let report = self.report(&gathered, &Redactor::default()).await;
        let mut checks = vec![reconcile_check(&gathered.status, observed_at)];
        checks.extend(runtime_checks(report, observed_at));
        checks.push(exits_check(
            gathered.recorded.as_ref().filter(|r| &r.revision_id == id),
            observed_at,
        ));
        Ok(Diagnostics {
            revision_id: id.clone(),
            observed_at,
            checks,
        })
    }
}

fn check(
    component: &'static str,
    check: &'static str,
    state: CheckState,
    code: Option<String>,
    checked_at: Timestamp,
) -> Check {
    Check {
        component,
        check,
        state,
        code,
        checked_at: Some(checked_at),
    }
}

/// The deployment's reconciliation: its terminal reason code when it failed, its latest
/// progress code while it is pending.
fn reconcile_check(status: &DeploymentStatus, now: Timestamp) -> Check {
    let (state, code) = match status.status {
        DeploymentState::Succeeded => (CheckState::Succeeded, None),
        DeploymentState::Failed => (
            CheckState::Failed,
            status.error.as_ref().map(|e| e.code.clone()),
        ),
        DeploymentState::Queued | DeploymentState::Running => (
            CheckState::Unknown,
            status
                .progress
                .as_ref()
                .and_then(|p| p.last_attempt.as_ref())
                .map(|a| a.code.as_str().to_owned()),
        ),
    };
    let at = status
        .progress
        .as_ref()
        .and_then(|p| p.last_attempt.as_ref())
        .map_or(now, |a| a.at);
    check(
        "deployment",
        "reconcile",
        state,
        code.filter(|c| code_like(c)),
        at,
    )
}

/// Whether the workload exists, runs and is ready.
fn runtime_checks(report: Result<RuntimeReport, ComputeError>, now: Timestamp) -> Vec<Check> {
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            let code = Some(e.code.as_str().to_owned());
            return ["workload", "running", "ready"]
                .into_iter()
                .map(|name| check("runtime", name, CheckState::Unknown, code.clone(), now))
                .collect();
        }
    };
    if report.pods.is_empty() {
        return vec![check(
            "runtime",
            "workload",
            CheckState::Failed,
            Some("NO_WORKLOAD".into()),
            now,
        )];
    }
    let containers: Vec<_> = report.pods.iter().flat_map(|p| &p.containers).collect();
    let not_running = containers
        .iter()
        .find(|c| c.state != ContainerState::Running);
    let running = match not_running {
        None if !containers.is_empty() => {
            check("runtime", "running", CheckState::Succeeded, None, now)
        }
        _ => check(
            "runtime",
            "running",
            CheckState::Failed,
            Some(
                not_running
                    .and_then(|c| c.reason.clone())
                    .filter(|r| code_like(r))
                    .unwrap_or_else(|| "WORKLOAD_NOT_RUNNING".into()),
            ),
            now,
        ),
    };
    let ready = if report.pods.iter().all(|p| p.ready) {
        check("runtime", "ready", CheckState::Succeeded, None, now)
    } else {
        check(
            "runtime",
            "ready",
            CheckState::Failed,
            Some("WORKLOAD_NOT_READY".into()),
            now,
        )
    };
    vec![
        check("runtime", "workload", CheckState::Succeeded, None, now),
        running,
        ready,
    ]
}

/// Whether occ saw this revision's gateway exit or being restarted.
fn exits_check(recorded: Option<&AgentRuntime>, now: Timestamp) -> Check {
    match recorded {
        None => check("gateway", "exits", CheckState::Unknown, None, now),
        Some(r) if r.state == ObservedRuntimeState::Restarting => check(
            "gateway",
            "exits",
            CheckState::Failed,
            Some("GATEWAY_RESTARTING".into()),
            r.last_exit_at.unwrap_or(r.observed_at),
        ),
        Some(r) if r.last_exit_at.is_some() || r.restarts > 0 => check(
            "gateway",
            "exits",
            CheckState::Failed,
            Some("GATEWAY_EXITED".into()),
            r.last_exit_at.unwrap_or(r.observed_at),
        ),
        Some(r) => check(
            "gateway",
            "exits",
            CheckState::Succeeded,
            None,
            r.observed_at,
        ),
    }
}

/// `^[A-Za-z0-9._~:@-]{1,64}$`: what a check's code may be.
fn code_like(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._~:@-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_published_pattern() {
        assert!(code_like("RUNTIME_STARTUP_FAILED"));
        assert!(code_like("CrashLoopBackOff"));
        assert!(!code_like(""));
        assert!(!code_like("exit status 1"));
        assert!(!code_like(&"A".repeat(65)));
    }

    #[test]
    fn an_unreachable_driver_makes_the_runtime_checks_unknown() {
        let now = Timestamp::now();
        let checks = runtime_checks(
            Err(ComputeError::transient(
                occ_core::ReasonCode::DependencyUnavailable,
                "down",
            )),
            now,
        );
        assert_eq!(checks.len(), 3);
        assert!(checks.iter().all(|c| c.state == CheckState::Unknown
            && c.code.as_deref() == Some("DEPENDENCY_UNAVAILABLE")));
        let none = runtime_checks(Ok(RuntimeReport::default()), now);
        assert_eq!(
            (none[0].state, none[0].code.as_deref()),
            (CheckState::Failed, Some("NO_WORKLOAD"))
        );
    }
}
