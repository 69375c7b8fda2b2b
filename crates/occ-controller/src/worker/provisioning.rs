//! Agent provisioning work (`agent_provisioning:<prv>:attempt:<n>`): the steps of a job admitted
//! by `provisionAgent` ([`crate::provisioning`]).
//!
//! Each step goes through the same controller operation a client would call, with the original
//! requester's authority checked on fresh policy and audited there: the Configuration
//! (`configuration`), the Agent and its identity's Secret grants (`transport`), the first deploy
//! (`handoff`). Each resource is created under the id admission planned and recorded once it
//! exists, so a run that lost its claim or crashed after a create committed is resumed by the
//! next run without creating anything twice: an existing planned Configuration or Agent is
//! adopted, and an Agent that already has a revision is handed off with its first one.
//!
//! A failure that a retry cannot fix by itself (refused, conflicting, invalid, missing) fails the
//! job at its step with the error's code and message; `retryAgentProvisioning` resumes it there.
//! An unavailable dependency is retried with backoff like any work item.

use occ_core::provisioning::{
    Provisioning, ProvisioningError, ProvisioningPhase, ProvisioningStatus,
};
use occ_core::{Error, ErrorCode, IamId, Name, ProvisioningId, ReasonCode};
use occ_store::queue::Claim;
use occ_store::{StoreError, Tx};
use serde_json::json;

use super::lease::ClaimLost;
use super::{Outcome, PassError, PassOutcome, Settled, Worker, fence_error, no_extra};
use crate::Request;
use crate::agents::AgentInput;
use crate::configurations::ConfigurationInput;

/// Why a run stopped before the end.
enum Stop {
    /// The claim is gone: publish nothing.
    ClaimLost,
    /// Platform state could not be read or written: retried.
    Store(StoreError),
    /// A step failed with the controller's error.
    Step(Error),
}

impl From<ClaimLost> for Stop {
    fn from(_: ClaimLost) -> Self {
        Stop::ClaimLost
    }
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e)
    }
}

impl From<PassError> for Stop {
    fn from(e: PassError) -> Self {
        match e {
            PassError::ClaimLost(_) => Stop::ClaimLost,
            PassError::Store(e) => Stop::Store(e),
        }
    }
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Step(e)
    }
}

/// The job a work key names (`agent_provisioning:<prv>:attempt:<n>`) and the run it is.
fn job_of(key: &str) -> Option<(ProvisioningId, u32)> {
    let rest = key.strip_prefix("agent_provisioning:")?;
    let (job, run) = rest.split_once(":attempt:")?;
    Some((job.parse().ok()?, run.parse().ok()?))
}

/// Whether a step's error may clear up by itself (a dependency was unavailable).
fn is_transient(e: &Error) -> bool {
    matches!(
        e.code(),
        ErrorCode::DependencyUnavailable | ErrorCode::UnknownOutcome | ErrorCode::InternalError
    )
}

impl Worker {
    pub(crate) async fn agent_provisioning(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let ns = &item.namespace_id;
        let job = match job_of(item.key.as_str()) {
            Some((id, run)) => {
                let mut tx = self.store().begin_read().await?;
                tx.provisioning_get(ns, &id).await?.map(|job| (job, run))
            }
            None => None,
        };
        let Some((mut job, run)) = job else {
            return self
                .settle(
                    claim,
                    Outcome::permanent(ReasonCode::InvalidTarget),
                    no_extra,
                )
                .await;
        };
        // A run a retry superseded, or a job that already finished, has nothing left to do.
        if run != job.run || job.status == ProvisioningStatus::Succeeded {
            return self
                .settle(claim, Outcome::done(ReasonCode::SupersededTarget), no_extra)
                .await;
        }
        job.status = ProvisioningStatus::Running;
        job.attempt_count += 1;
        self.record(claim, &job).await?;
        let req = self.request_for(item);
        let run = self
            .effect(claim, self.provision(claim, &req, &mut job))
            .await;
        let stop = match run {
            Err(ClaimLost) | Ok(Err(Stop::ClaimLost)) => {
                return Err(PassError::ClaimLost(ClaimLost));
            }
            Ok(Ok(())) => None,
            Ok(Err(Stop::Store(e))) => {
                tracing::warn!(work = %claim.key(), error = %e, "platform state unavailable during provisioning");
                Some(Error::unavailable(e.to_string()))
            }
            Ok(Err(Stop::Step(e))) => Some(e),
        };
        let outcome = match &stop {
            None => Outcome::Done(
                ReasonCode::AgentProvisioned,
                Some(json!({
                    "agentId": job.agent_id.as_ref().map(|a| a.as_str()),
                    "revisionId": job.revision_id.as_ref().map(|r| r.as_str()),
                })),
            ),
            Some(e) if is_transient(e) => Outcome::retry(ReasonCode::DependencyUnavailable),
            Some(e) => Outcome::Permanent(
                ReasonCode::AgentProvisioningFailed,
                Some(json!({"phase": job.phase.as_str(), "code": e.code().as_str()})),
            ),
        };
        self.settle(claim, outcome, async |tx: &mut Tx, settled, _: &Outcome| {
            match settled {
                Settled::Succeeded => {
                    job.status = ProvisioningStatus::Succeeded;
                    job.error = None;
                }
                Settled::Requeued => job.status = ProvisioningStatus::Queued,
                Settled::Failed => {
                    job.status = ProvisioningStatus::Failed;
                    let error = match &stop {
                        Some(e) if is_transient(e) => ProvisioningError::new(
                            ReasonCode::MaxAttemptsExhausted.as_str(),
                            "A dependency stayed unavailable; retry the provisioning job",
                        ),
                        Some(e) => ProvisioningError::new(e.code().as_str(), e.message()),
                        None => ProvisioningError::new(
                            ReasonCode::ConvergenceDeadlineExceeded.as_str(),
                            "The job did not finish in time; retry it",
                        ),
                    };
                    job.error = Some(error);
                }
            }
            tx.provisioning_record(&job).await
        })
        .await
    }

    /// Records the job's progress now, fenced by the claim.
    async fn record(&self, claim: &Claim, job: &Provisioning) -> Result<(), PassError> {
        let mut tx = self.fenced(claim).await?;
        tx.provisioning_record(job).await?;
        tx.commit().await.map_err(fence_error)?;
        Ok(())
    }

    /// Runs the steps that are left, recording each as it starts and what it created.
    async fn provision(
        &self,
        claim: &Claim,
        req: &Request,
        job: &mut Provisioning,
    ) -> Result<(), Stop> {
        let ns = job.namespace_id.clone();
        let spec = job.spec.clone();
        if job.configuration_id.is_none() {
            job.phase = ProvisioningPhase::Configuration;
            self.record(claim, job).await?;
            let id = job.planned_configuration_id.clone();
            let exists = {
                let mut tx = self.store().begin_read().await?;
                tx.configuration_get(&ns, &id).await?.is_some()
            };
            if !exists {
                let input = ConfigurationInput {
                    values: spec.configuration_values.clone(),
                    secret_bindings: Some(spec.secret_bindings.clone()),
                };
                self.controller
                    .configuration_create_as(req, &ns, id.clone(), input, true)
                    .await?;
            }
            job.configuration_id = Some(id);
            self.record(claim, job).await?;
        }
        if job.revision_id.is_some() {
            return Ok(());
        }
        let agent_id = job.planned_agent_id.clone();
        if job.agent_id.is_none() {
            job.phase = ProvisioningPhase::Transport;
            self.record(claim, job).await?;
            let exists = {
                let mut tx = self.store().begin_read().await?;
                tx.agent_get(&ns, &agent_id).await?.is_some()
            };
            if !exists {
                let name = Name::parse(&spec.name).map_err(|_| {
                    Error::invalid_request("The request is invalid: /name is not a valid name")
                })?;
                let input = AgentInput {
                    name,
                    configuration_id: job.planned_configuration_id.clone(),
                    execution_mode: spec.execution_mode,
                    backend_id: spec.backend_id.clone(),
                    harness_auth: spec.harness_auth.clone(),
                    initial_workspace_files: spec.initial_workspace_files.clone(),
                    workspace_defaults_id: spec.workspace_defaults_id.clone(),
                };
                self.controller
                    .agent_create_as(req, &ns, agent_id.clone(), input)
                    .await?;
            }
            job.agent_id = Some(agent_id.clone());
            self.record(claim, job).await?;
        }
        // Granting is idempotent, so a run that resumes here grants what is still missing.
        self.controller
            .grant_agent_secrets(
                req,
                &ns,
                &IamId::agent_service_principal(&agent_id),
                &spec.consumed_secrets(),
            )
            .await?;
        job.phase = ProvisioningPhase::Handoff;
        self.record(claim, job).await?;
        let first = {
            let mut tx = self.store().begin_read().await?;
            tx.revision_list(&ns, &agent_id).await?.into_iter().next()
        };
        let revision = match first {
            // An earlier run admitted it and lost its claim before recording it.
            Some(revision) => revision.id,
            None => self.controller.agent_deploy(req, &ns, &agent_id).await?.id,
        };
        job.revision_id = Some(revision);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_keys_name_their_job_and_run() {
        let id = ProvisioningId::generate();
        let key = occ_core::work::WorkKey::agent_provisioning(&id, 3);
        assert_eq!(job_of(key.as_str()), Some((id, 3)));
        assert_eq!(job_of("agent:agt_x:reconcile:deleted"), None);
        assert_eq!(job_of("agent_provisioning:prv_nope:attempt:1"), None);
    }
}
