//! Agent work: stop (`agent:<id>:reconcile:stopped:<op>`, one per request) and delete
//! (`agent:<id>:reconcile:deleted`).
//!
//! Stop shuts down the active revision and every other revision admitted before the stop
//! request; revisions admitted after it belong to a later deploy and are left alone. It clears
//! the pointer only if it still names the revision it stopped, and a deploy admitted after the
//! stop makes the stop `STOP_SUPERSEDED`. Delete retires every revision, removes the Agent's
//! runtime storage through Compute, then runs the deletion finalizer in the fenced transaction.
//!
//! Each pass reads its facts in one read session, decides in [`plan`] (pure), and runs its
//! Compute calls under the work item's lease with no row locked; only the settling transaction
//! locks the Agent row, and it calls no Driver.

use occ_core::ReasonCode;
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{Agent, AgentRevision, DesiredRuntimeState, RuntimeObservation};
use occ_drivers::compute::{AgentTarget, ComputeError};
use occ_store::queue::Claim;
use serde_json::json;

use super::revisions::{revision_target, store_to_compute};
use super::{Outcome, PassError, PassOutcome, Settled, Worker, no_extra};

mod plan;

use plan::{
    DeleteFacts, DeleteProgress, DeleteStep, StopFacts, StopPlan, plan_delete, plan_stop,
    stop_outcome,
};

impl Worker {
    pub(crate) async fn agent_stop(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let Some(agent_id) = &item.agent_id else {
            return self
                .settle(
                    claim,
                    Outcome::permanent(ReasonCode::InvalidTarget),
                    no_extra,
                )
                .await;
        };
        let ns = &item.namespace_id;
        // Decide on IAM first, so that a concurrent deploy admitted meanwhile is seen below.
        let req = self.request_for(item);
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, agent_id);
        let tx = self.store().begin_read().await?;
        if let Err(e) = self
            .controller
            .authorize_in(
                tx,
                &req,
                Action::Operate,
                &agent_ref,
                "openclaw.agents.stop",
            )
            .await
        {
            let outcome = self.authorization_outcome(item, &e).await?;
            return self.finish_stop(claim, outcome, None).await;
        }
        let mut tx = self.store().begin_read().await?;
        let facts = StopFacts {
            requested_at: item.created_at,
            agent: tx.agent_get(ns, agent_id).await?,
            revisions: tx.revision_list(ns, agent_id).await?,
            compute: self.compute.selection().identity.clone(),
        };
        drop(tx);
        let (agent, active, cleanup) = match plan_stop(&facts) {
            StopPlan::Finish(outcome) => return self.finish_stop(claim, outcome, None).await,
            StopPlan::Stop {
                agent,
                active,
                cleanup,
            } => (agent, active, cleanup),
        };
        let stopped = self
            .effect(claim, async {
                for rev in &cleanup {
                    // A deploy admitted during the stop takes over: stop no further.
                    let still = {
                        let mut tx = self.store().begin_read().await.map_err(store_to_compute)?;
                        tx.agent_get(ns, agent_id).await.map_err(store_to_compute)?
                    };
                    if still.is_none_or(|a| a.desired_runtime_state != DesiredRuntimeState::Stopped)
                    {
                        return Ok(false);
                    }
                    self.compute
                        .stop_revision(&revision_target(agent, rev))
                        .await?;
                }
                Ok::<_, ComputeError>(true)
            })
            .await?;
        if let Err(e) = &stopped {
            tracing::warn!(agent_id = %agent.id, code = %e.code, message = %e.message, "stop failed");
        }
        let outcome = stop_outcome(&stopped, active.is_some());
        self.finish_stop(claim, outcome, Some((agent, active)))
            .await
    }

    /// Settles stop work: on success, clears the pointer if it still names the stopped active
    /// revision and the Agent is still meant to be stopped; records the lifecycle evidence.
    async fn finish_stop(
        &self,
        claim: &Claim,
        outcome: Outcome,
        stopped: Option<(&Agent, Option<&AgentRevision>)>,
    ) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let req = self.request_for(item);
        let compute_id = self.compute.selection().identity.id.clone();
        let mut superseded = false;
        let pass = self
            .settle(claim, outcome, async |tx, settled, outcome| {
                if matches!(
                    outcome.code(),
                    ReasonCode::AuthorizationDenied | ReasonCode::ActorRevoked
                ) {
                    return Ok(());
                }
                if let Some((agent, Some(active))) = stopped
                    && settled == Settled::Succeeded
                    && outcome.code() == ReasonCode::AgentStopped
                {
                    let now = tx.agent_lock(&agent.namespace_id, &agent.id).await?;
                    if now.is_some_and(|a| a.desired_runtime_state == DesiredRuntimeState::Stopped)
                    {
                        tx.agent_swap_active_revision(
                            &agent.namespace_id,
                            &agent.id,
                            Some(&active.id),
                            None,
                        )
                        .await?;
                        tx.agent_runtime_observe(
                            &agent.namespace_id,
                            &agent.id,
                            &active.id,
                            &RuntimeObservation::Stopped,
                        )
                        .await?;
                    } else {
                        superseded = true;
                    }
                }
                if matches!(settled, Settled::Requeued) {
                    return Ok(());
                }
                let Some(agent_id) = &item.agent_id else {
                    return Ok(());
                };
                let resource =
                    ResourceRef::exact(ResourceKind::Agent, &item.namespace_id, agent_id);
                let mut event = self
                    .controller
                    .event(
                        &req,
                        AuditKind::Mutation,
                        "openclaw.agents.lifecycle.stop",
                        &resource,
                        if settled == Settled::Succeeded {
                            AuditOutcome::Success
                        } else {
                            AuditOutcome::Failure
                        },
                    )
                    .reason_code(if superseded {
                        ReasonCode::StopSuperseded.as_str()
                    } else {
                        outcome.code().as_str()
                    })
                    .detail("computeDriverId", compute_id.as_str());
                if let Some((_, Some(active))) = stopped {
                    event = event.detail("revisionId", active.id.as_str());
                }
                tx.audit_append(&event).await
            })
            .await?;
        if pass == PassOutcome::Success
            && !superseded
            && stopped.is_some()
            && let Some(m) = &self.metrics
        {
            let age = occ_core::Timestamp::now().unix_millis() - item.created_at.unix_millis();
            m.record_agent_operation(
                "stop",
                std::time::Duration::from_millis(u64::try_from(age).unwrap_or(0)),
            );
        }
        Ok(pass)
    }

    pub(crate) async fn agent_delete(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let Some(agent_id) = &item.agent_id else {
            return self
                .settle(
                    claim,
                    Outcome::permanent(ReasonCode::InvalidTarget),
                    no_extra,
                )
                .await;
        };
        let ns = &item.namespace_id;
        let mut tx = self.store().begin_read().await?;
        let facts = DeleteFacts {
            agent: tx.agent_get(ns, agent_id).await?,
            revisions: tx.revision_list(ns, agent_id).await?,
            compute: self.compute.selection().identity.clone(),
        };
        drop(tx);
        let mut progress = DeleteProgress::default();
        loop {
            match plan_delete(&facts, &progress) {
                DeleteStep::AlreadyFinalized => {
                    return self
                        .settle(claim, Outcome::done(ReasonCode::AgentDeleted), no_extra)
                        .await;
                }
                DeleteStep::Authorize => {
                    let req = self.request_for(item);
                    let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, agent_id);
                    let tx = self.store().begin_read().await?;
                    let decided = self
                        .controller
                        .authorize_in(
                            tx,
                            &req,
                            Action::Delete,
                            &agent_ref,
                            "openclaw.agents.delete",
                        )
                        .await;
                    progress.authorized = Some(match decided {
                        Ok(_) => Ok(()),
                        Err(e) => Err(self.authorization_outcome(item, &e).await?),
                    });
                }
                DeleteStep::Remove(agent) => {
                    let removed = self
                        .effect(claim, self.remove_agent(agent, &facts.revisions))
                        .await?;
                    if let Err(e) = &removed {
                        tracing::warn!(agent_id = %agent.id, code = %e.code, message = %e.message, "agent deletion failed");
                    }
                    progress.removed = Some(removed);
                }
                DeleteStep::Finish(agent, outcome) => {
                    return self.finish_delete(claim, agent, outcome).await;
                }
            }
        }
    }

    /// Retires every revision, removes the Agent's runtime storage, then the records of what
    /// its revisions were handed (its output is gone with it).
    async fn remove_agent(
        &self,
        agent: &Agent,
        revisions: &[AgentRevision],
    ) -> Result<(), ComputeError> {
        for rev in revisions {
            self.compute
                .retire_revision(&revision_target(agent, rev))
                .await?;
        }
        self.compute
            .delete_agent(&AgentTarget {
                namespace_id: agent.namespace_id.clone(),
                agent_id: agent.id.clone(),
                service_principal_id: agent.service_principal_id.clone(),
            })
            .await?;
        self.controller
            .secrets
            .forget_handed(&agent.namespace_id, &agent.id)
            .await
            .map_err(|e| {
                ComputeError::transient(
                    ReasonCode::DependencyUnavailable,
                    format!("the handed values of the Agent's revisions: {e}"),
                )
            })
    }

    /// Settles delete work. Success runs the deletion finalizer in the same fenced transaction
    /// (which also removes the Agent's work rows, this one included) and records the deletion.
    async fn finish_delete(
        &self,
        claim: &Claim,
        agent: &Agent,
        outcome: Outcome,
    ) -> Result<PassOutcome, PassError> {
        let req = self.request_for(&claim.item);
        let compute_id = self.compute.selection().identity.id.clone();
        let resource = ResourceRef::exact(ResourceKind::Agent, &agent.namespace_id, &agent.id);
        self.settle(claim, outcome, async |tx, settled, outcome| {
            if matches!(
                outcome.code(),
                ReasonCode::AuthorizationDenied | ReasonCode::ActorRevoked
            ) || settled == Settled::Requeued
            {
                return Ok(());
            }
            let succeeded = settled == Settled::Succeeded;
            let mut event = self
                .controller
                .event(
                    &req,
                    AuditKind::Mutation,
                    "openclaw.agents.lifecycle.delete",
                    &resource,
                    if succeeded {
                        AuditOutcome::Success
                    } else {
                        AuditOutcome::Failure
                    },
                )
                .reason_code(outcome.code().as_str())
                .detail("computeDriverId", compute_id.as_str());
            if succeeded {
                let removed = tx
                    .agent_finalize_deletion(&agent.namespace_id, &agent.id)
                    .await?;
                event = event.detail("removedBindingIds", json!(removed));
            }
            tx.audit_append(&event).await
        })
        .await
    }
}
