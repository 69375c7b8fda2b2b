//! Revision work: deploy (`agent_revision:<rev>:reconcile`) and maintenance
//! (`agent_revision:<rev>:maintenance:<bucket>`).
//!
//! Deploy: verify the admitted revision still belongs to its Agent, Namespace, harness and
//! Compute; re-authorize the original requester (and the Agent's principal for consumed
//! Secrets); honour a stop that got there first; never let an older revision replace a newer
//! active one; prepare; publish the `activeRevisionId` pointer by compare-and-set in a fenced
//! transaction; activate after the commit; retire the predecessors; complete with the
//! activation evidence. A pass that fails after the pointer moved leaves the pointer in place,
//! and the next pass takes the already-active path (prepare and activate again, idempotently).
//!
//! Maintenance keeps the active revision running: it re-prepares and re-activates (which
//! restarts a crashed gateway, recorded as a restart) and schedules the next pass. It ends when
//! another revision becomes active or the Agent is stopped, and it never retires anything.

use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{
    Agent, AgentRevision, AgentStatus, DesiredRuntimeState, HarnessAuth, NamespaceStatus,
};
use occ_core::work::{NewWork, WorkTarget};
use occ_core::{Error, SecretId};
use occ_drivers::DriverError;
use occ_drivers::compute::{
    AgentTarget, Readiness, RevisionContext, RevisionTarget, RuntimeState, SecretText,
};
use occ_store::queue::Claim;
use occ_store::{StoreError, Tx};

use super::{Outcome, PassError, PassOutcome, Settled, Worker, fence_error, no_extra};
use crate::Request;

/// Everything a revision pass reads up front.
struct RevisionState {
    agent: Agent,
    revision: AgentRevision,
    /// The Agent's active revision when the pass started.
    active: Option<AgentRevision>,
    /// Whether a later revision of the Agent has been admitted.
    newer_admitted: bool,
}

impl Worker {
    pub(crate) async fn revision_reconcile(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let maintenance = item.target == WorkTarget::RevisionMaintenance;
        let state = match self.load_revision(claim).await? {
            Ok(state) => state,
            Err(outcome) => return self.finish_revision(claim, outcome, None).await,
        };
        let RevisionState {
            agent,
            revision,
            active,
            ..
        } = &state;
        let is_active = agent.active_revision_id.as_ref() == Some(&revision.id);
        if maintenance
            && (!is_active || agent.desired_runtime_state != DesiredRuntimeState::Running)
        {
            return self
                .settle(
                    claim,
                    Outcome::done("REVISION_MAINTENANCE_SUPERSEDED"),
                    no_extra,
                )
                .await;
        }

        let req = self.request_for(item);
        if let Err(e) = self.authorize_revision(&req, revision, agent).await {
            let outcome = self.authorization_outcome(item, &e).await?;
            return self.finish_revision(claim, outcome, None).await;
        }

        let target = revision_target(agent, revision);
        if agent.desired_runtime_state != DesiredRuntimeState::Running
            || agent.status != AgentStatus::Active
        {
            // A stop (or delete) was admitted after this deploy: it wins.
            let retire_earlier = agent.active_revision_id.is_none() || is_active;
            let stopped = self
                .effect(claim, async {
                    self.compute.stop_revision(&target).await?;
                    if retire_earlier {
                        self.retire_earlier(agent, revision.revision).await?;
                    }
                    Ok::<_, occ_drivers::compute::ComputeError>(())
                })
                .await?;
            let outcome = match stopped {
                Ok(()) => Outcome::done("REVISION_STOPPED"),
                Err(e) => Outcome::from_compute(&e),
            };
            return self.finish_revision(claim, outcome, None).await;
        }

        let ctx = match self.revision_context(revision).await? {
            Ok(ctx) => ctx,
            // An active runtime is never failed for this: it keeps serving, the pass waits.
            Err(Outcome::Permanent(code, _)) if is_active => {
                return self
                    .finish_revision(claim, Outcome::Pending(code), None)
                    .await;
            }
            Err(outcome) => return self.finish_revision(claim, outcome, None).await,
        };

        if is_active {
            return self.converge_active(claim, &state, &target, &ctx).await;
        }
        if let Some(active) = active
            && active.revision >= revision.revision
        {
            // Recovered old work never replaces a newer active revision.
            return self
                .finish_revision(claim, Outcome::done("REVISION_SUPERSEDED"), None)
                .await;
        }
        if state.newer_admitted {
            // A later deploy of the same Agent is queued behind this one in its lane: starting
            // this revision would only be replaced at once.
            return self
                .finish_revision(claim, Outcome::done("REVISION_SUPERSEDED"), None)
                .await;
        }

        let prepared = self
            .effect(claim, self.compute.prepare_revision(&target, &ctx))
            .await?;
        match prepared {
            Ok(Readiness::Ready) => {}
            Ok(Readiness::Pending { code }) => {
                return self
                    .finish_revision(claim, Outcome::Pending(code), None)
                    .await;
            }
            Err(e) => {
                return self
                    .finish_revision(claim, Outcome::from_compute(&e), None)
                    .await;
            }
        }

        // Publish the pointer: "last committed to run".
        match self.publish_pointer(claim, &state).await? {
            Publish::Published => {}
            Publish::Changed => {
                return self
                    .finish_revision(claim, Outcome::retry("ACTIVE_REVISION_CHANGED"), None)
                    .await;
            }
            Publish::Stopped => {
                let stopped = self
                    .effect(claim, self.compute.stop_revision(&target))
                    .await?;
                let outcome = match stopped {
                    Ok(()) => Outcome::done("REVISION_STOPPED"),
                    Err(e) => Outcome::from_compute(&e),
                };
                return self.finish_revision(claim, outcome, None).await;
            }
        }
        self.activate_and_complete(claim, &state, &target, &ctx, "REVISION_ACTIVATED")
            .await
    }

    /// The pointer already names this revision (a retried pass, recovery, or maintenance):
    /// prepare and activate again, idempotently.
    async fn converge_active(
        &self,
        claim: &Claim,
        state: &RevisionState,
        target: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<PassOutcome, PassError> {
        let prepared = self
            .effect(claim, self.compute.prepare_revision(target, ctx))
            .await?;
        match prepared {
            Ok(Readiness::Ready) => {}
            Ok(Readiness::Pending { code }) => {
                return self
                    .finish_revision(claim, Outcome::Pending(code), None)
                    .await;
            }
            Err(e) => {
                // Never fail an active runtime permanently from an observation; wait instead.
                let outcome = match Outcome::from_compute(&e) {
                    Outcome::Permanent(code, data)
                        if claim.item.target == WorkTarget::RevisionReconcile =>
                    {
                        Outcome::Permanent(code, data)
                    }
                    Outcome::Permanent(code, _) => Outcome::Pending(code),
                    other => other,
                };
                return self.finish_revision(claim, outcome, None).await;
            }
        }
        self.activate_and_complete(claim, state, target, ctx, "REVISION_ALREADY_ACTIVE")
            .await
    }

    /// Activates (restarting a crashed gateway, which is recorded), retires the predecessors
    /// and completes with the activation evidence.
    async fn activate_and_complete(
        &self,
        claim: &Claim,
        state: &RevisionState,
        target: &RevisionTarget,
        ctx: &RevisionContext,
        code: &str,
    ) -> Result<PassOutcome, PassError> {
        let agent = &state.agent;
        let revision = &state.revision;
        // A stop admitted meanwhile wins: shut the candidate down.
        let mut tx = self.store().begin_read().await?;
        let now = tx.agent_get(&agent.namespace_id, &agent.id).await?;
        drop(tx);
        if now.is_none_or(|a| a.desired_runtime_state != DesiredRuntimeState::Running) {
            let stopped = self
                .effect(claim, async {
                    self.compute.stop_revision(target).await?;
                    self.retire_earlier(agent, revision.revision).await
                })
                .await?;
            let outcome = match stopped {
                Ok(()) => Outcome::done("REVISION_STOPPED"),
                Err(e) => Outcome::from_compute(&e),
            };
            return self.finish_revision(claim, outcome, None).await;
        }
        let activated = self
            .effect(claim, async {
                let before = self.compute.observe(target).await?;
                self.compute.activate_revision(target, ctx).await?;
                self.retire_earlier(agent, revision.revision).await?;
                Ok::<_, occ_drivers::compute::ComputeError>(before)
            })
            .await?;
        let before = match activated {
            Ok(before) => before,
            Err(e) => {
                tracing::warn!(work = %claim.key(), code = %e.code, message = %e.message, "activation failed");
                // The pointer is published: a failure to start is retried (bounded by the
                // attempts and the deadline) unless the Driver says it can never work.
                let outcome = Outcome::from_compute(&e);
                return self.finish_revision(claim, outcome, None).await;
            }
        };
        // A maintenance pass that found the gateway down restarted it.
        let restarted = claim.item.target == WorkTarget::RevisionMaintenance
            && before == RuntimeState::NotRunning;
        let finish = Completion {
            code: code.to_owned(),
            restarted,
        };
        self.finish_revision(claim, Outcome::done(code), Some((state, finish)))
            .await
    }

    /// Retires every earlier revision of the Agent pinned to this Compute.
    async fn retire_earlier(
        &self,
        agent: &Agent,
        below: u64,
    ) -> Result<(), occ_drivers::compute::ComputeError> {
        let revisions = {
            let mut tx = self.store().begin_read().await.map_err(store_to_compute)?;
            tx.revision_list(&agent.namespace_id, &agent.id)
                .await
                .map_err(store_to_compute)?
        };
        let ours = &self.compute.selection().identity;
        for earlier in revisions
            .iter()
            .filter(|r| r.revision < below && &r.spec.compute == ours)
        {
            self.compute
                .retire_revision(&revision_target(agent, earlier))
                .await?;
        }
        Ok(())
    }

    /// Reads and checks the revision, its Agent and Namespace; `Err` is the outcome when the
    /// item cannot proceed.
    async fn load_revision(
        &self,
        claim: &Claim,
    ) -> Result<Result<RevisionState, Outcome>, PassError> {
        let item = &claim.item;
        let (Some(agent_id), Some(rev_id)) = (&item.agent_id, &item.revision_id) else {
            return Ok(Err(Outcome::permanent("INVALID_TARGET")));
        };
        let ns_id = &item.namespace_id;
        let mut tx = self.store().begin_read().await?;
        let ns = tx.namespace_get(ns_id).await?;
        let agent = tx.agent_get(ns_id, agent_id).await?;
        let revision = tx.revision_get(ns_id, agent_id, rev_id).await?;
        let (Some(ns), Some(agent), Some(revision)) = (ns, agent, revision) else {
            return Ok(Err(Outcome::permanent("INVALID_REVISION_OWNER")));
        };
        let active = match &agent.active_revision_id {
            None => None,
            Some(id) => match tx.revision_get(ns_id, agent_id, id).await? {
                Some(r) => Some(r),
                None => return Ok(Err(Outcome::permanent("INVALID_ACTIVE_REVISION"))),
            },
        };
        let newer_admitted =
            tx.revision_next_number(ns_id, agent_id).await? > revision.revision + 1;
        drop(tx);
        if ns.status != NamespaceStatus::Ready || ns.deleted_at.is_some() {
            return Ok(Err(Outcome::permanent("NAMESPACE_NOT_READY")));
        }
        if revision.agent_id != agent.id
            || revision.namespace_id != agent.namespace_id
            || revision.spec.service_principal_id != agent.service_principal_id
        {
            return Ok(Err(Outcome::permanent("INVALID_ADMITTED_REVISION")));
        }
        let approved = self.controller.settings.harness(revision.spec.harness.mode);
        if revision.spec.harness != approved {
            return Ok(Err(Outcome::permanent("HARNESS_DESCRIPTOR_MISMATCH")));
        }
        if revision.spec.compute != self.compute.selection().identity {
            return Ok(Err(Outcome::permanent("COMPUTE_DRIVER_MISMATCH")));
        }
        Ok(Ok(RevisionState {
            agent,
            revision,
            active,
            newer_admitted,
        }))
    }

    /// Re-authorizes the original requester for everything the revision consumes, on fresh
    /// policy: deploy on the Agent, read on the Configuration, operate on each consumed Secret
    /// (for the requester and for the Agent's principal), read on a ServiceAccount.
    async fn authorize_revision(
        &self,
        req: &Request,
        rev: &AgentRevision,
        agent: &Agent,
    ) -> Result<(), Error> {
        let ns = &agent.namespace_id;
        let audit = "openclaw.agents.deploy";
        let c = &self.controller;
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, &agent.id);
        let (tx, _) = c
            .read_authorized(req, Action::Deploy, &agent_ref, audit)
            .await?;
        let cfg_ref =
            ResourceRef::exact(ResourceKind::Configuration, ns, &rev.spec.configuration_id);
        let mut tx = c
            .authorize_in(tx, req, Action::Read, &cfg_ref, audit)
            .await?;
        let mut secrets: Vec<&SecretId> = rev
            .spec
            .secret_bindings
            .iter()
            .flat_map(|b| b.values())
            .map(|b| &b.source.id)
            .collect();
        match &rev.spec.harness_auth {
            Some(HarnessAuth::ApiKey { source }) => secrets.push(&source.id),
            Some(HarnessAuth::ChatgptServiceAccount { service_account_id }) => {
                let target =
                    ResourceRef::exact(ResourceKind::ServiceAccount, ns, service_account_id);
                tx = c
                    .authorize_in(tx, req, Action::Read, &target, audit)
                    .await?;
            }
            Some(HarnessAuth::Runtime {}) | None => {}
        }
        for secret in secrets {
            let target = ResourceRef::exact(ResourceKind::Secret, ns, secret);
            tx = c
                .authorize_in(tx, req, Action::Operate, &target, audit)
                .await?;
            tx = c
                .authorize_in_as(
                    tx,
                    req,
                    &agent.service_principal_id,
                    Action::Operate,
                    &target,
                    audit,
                    None,
                )
                .await?;
        }
        drop(tx);
        Ok(())
    }

    /// Resolves what the runtime needs besides the snapshot, from authoritative state: each
    /// bound Secret's value (through the Secret Driver that holds it), the harness credential
    /// and staged workspace setup. `Err` is the outcome when it cannot be resolved.
    async fn revision_context(
        &self,
        rev: &AgentRevision,
    ) -> Result<Result<RevisionContext, Outcome>, PassError> {
        let ns = &rev.namespace_id;
        let mut ctx = RevisionContext::default();
        let mut tx = self.store().begin_read().await?;
        if let Some(bindings) = &rev.spec.secret_bindings {
            for (name, binding) in bindings {
                match self.secret_value(&mut tx, rev, &binding.source.id).await? {
                    Ok(value) => {
                        ctx.environment.insert(name.clone(), value);
                    }
                    Err(code) => return Ok(Err(code_outcome(code))),
                }
            }
        }
        if let Some(HarnessAuth::ApiKey { source }) = &rev.spec.harness_auth {
            match self.secret_value(&mut tx, rev, &source.id).await? {
                Ok(value) => ctx.harness_credential = Some(value),
                Err("SECRET_BINDING_UNAVAILABLE") => {
                    return Ok(Err(Outcome::permanent("HARNESS_AUTH_SOURCE_UNAVAILABLE")));
                }
                Err(code) => return Ok(Err(code_outcome(code))),
            }
        }
        // A completed record (bytes erased) still goes to the Driver, which then only verifies
        // the marker: live edits survive and a lost workspace blocks startup.
        if let Some(setup) = tx.workspace_setup_get(ns, &rev.agent_id).await? {
            if !self.compute.supports_workspace_setup() {
                return Ok(Err(Outcome::permanent("WORKSPACE_SETUP_UNSUPPORTED")));
            }
            ctx.workspace_setup = Some(setup);
        }
        Ok(Ok(ctx))
    }

    /// One Secret's value, or the reason code why not.
    async fn secret_value(
        &self,
        tx: &mut Tx,
        rev: &AgentRevision,
        id: &SecretId,
    ) -> Result<Result<SecretText, &'static str>, PassError> {
        let Some(meta) = tx.secret_get(&rev.namespace_id, id).await? else {
            return Ok(Err("SECRET_BINDING_UNAVAILABLE"));
        };
        let driver = self.controller.secrets.identity().id;
        if meta.driver_id != driver || rev.spec.secret_driver_id.as_deref() != Some(&driver) {
            return Ok(Err("SECRET_DRIVER_MISMATCH"));
        }
        let value = self
            .controller
            .secrets
            .with_value(&rev.namespace_id, id, &meta.locator, |v| {
                SecretText::new(v.to_owned())
            })
            .await;
        Ok(match value {
            Ok(v) => Ok(v),
            Err(DriverError::NotFound | DriverError::Corrupt(_)) => {
                Err("SECRET_BINDING_UNAVAILABLE")
            }
            Err(e) => {
                tracing::warn!(error = %e, "secret driver unavailable");
                Err("DEPENDENCY_UNAVAILABLE")
            }
        })
    }

    /// Compare-and-set of `activeRevisionId` from what the pass read to this revision, in a
    /// fenced transaction that does not complete the item.
    async fn publish_pointer(
        &self,
        claim: &Claim,
        state: &RevisionState,
    ) -> Result<Publish, PassError> {
        let agent = &state.agent;
        let mut tx = self.fenced(claim).await?;
        let Some(now) = tx.agent_lock(&agent.namespace_id, &agent.id).await? else {
            return Ok(Publish::Changed);
        };
        if now.service_principal_id != agent.service_principal_id
            || now.active_revision_id != agent.active_revision_id
        {
            return Ok(Publish::Changed);
        }
        if now.desired_runtime_state != DesiredRuntimeState::Running {
            return Ok(Publish::Stopped);
        }
        let moved = tx
            .agent_swap_active_revision(
                &agent.namespace_id,
                &agent.id,
                agent.active_revision_id.as_ref(),
                Some(&state.revision.id),
            )
            .await?;
        if !moved {
            return Ok(Publish::Changed);
        }
        tx.commit().await.map_err(fence_error)?;
        Ok(Publish::Published)
    }

    /// Settles revision work. A successful activation also: re-checks the pointer, erases
    /// staged workspace setup bytes, records the activation (and a restart) and schedules the
    /// next maintenance pass. A maintenance pass that failed schedules the next one too: the
    /// runtime is never retired by maintenance.
    async fn finish_revision(
        &self,
        claim: &Claim,
        outcome: Outcome,
        completion: Option<(&RevisionState, Completion)>,
    ) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let req = self.request_for(item);
        let compute_id = self.compute.selection().identity.id.clone();
        let interval = self.compute.maintenance_interval();
        let maintenance = item.target == WorkTarget::RevisionMaintenance;
        // The pointer must still name this revision when an activation completes.
        if let Some((state, _)) = &completion {
            let mut tx = self.store().begin_read().await?;
            let now = tx
                .agent_get(&state.agent.namespace_id, &state.agent.id)
                .await?;
            if now.and_then(|a| a.active_revision_id) != Some(state.revision.id.clone()) {
                return self
                    .settle(claim, Outcome::retry("ACTIVE_REVISION_CHANGED"), no_extra)
                    .await;
            }
        }
        let restarted = completion.as_ref().is_some_and(|(_, c)| c.restarted);
        let pass = self
            .settle(claim, outcome, async |tx, settled, outcome| {
                if let Some((state, done)) = &completion
                    && settled == Settled::Succeeded
                {
                    let agent = &state.agent;
                    let rev = &state.revision;
                    tx.workspace_setup_complete(&agent.namespace_id, &agent.id)
                        .await?;
                    let resource =
                        ResourceRef::exact(ResourceKind::AgentRevision, &rev.namespace_id, &rev.id);
                    let mut activation = self
                        .controller
                        .event(
                            &req,
                            AuditKind::Mutation,
                            "openclaw.agents.lifecycle.activate",
                            &resource,
                            AuditOutcome::Success,
                        )
                        .reason_code(&done.code)
                        .detail("computeDriverId", compute_id.as_str())
                        .detail("agentId", agent.id.as_str());
                    if let Some(prev) = &state.active
                        && prev.id != rev.id
                    {
                        activation = activation.detail("previousRevisionId", prev.id.as_str());
                    }
                    if !maintenance || done.restarted {
                        tx.audit_append(&activation).await?;
                    }
                    if done.restarted {
                        let restart = self
                            .controller
                            .event(
                                &req,
                                AuditKind::Mutation,
                                "openclaw.agents.lifecycle.restart",
                                &resource,
                                AuditOutcome::Success,
                            )
                            .reason_code("GATEWAY_RESTARTED")
                            .detail("computeDriverId", compute_id.as_str())
                            .detail("agentId", agent.id.as_str());
                        tx.audit_append(&restart).await?;
                    }
                }
                let schedule = interval.is_some()
                    && (completion.is_some() && settled == Settled::Succeeded
                        || maintenance && settled == Settled::Failed);
                if schedule
                    && let (Some(interval), Some(agent_id), Some(rev_id)) =
                        (interval, &item.agent_id, &item.revision_id)
                {
                    let now_ms =
                        u64::try_from(occ_core::Timestamp::now().unix_millis()).unwrap_or(0);
                    let step = u64::try_from(interval.as_millis())
                        .unwrap_or(u64::MAX)
                        .max(1);
                    let mut bucket = now_ms / step + 1;
                    if let Some(current) = maintenance_bucket(item.key.as_str()) {
                        bucket = bucket.max(current + 1);
                    }
                    let next = NewWork::revision_maintenance(
                        &item.namespace_id,
                        agent_id,
                        rev_id,
                        &item.actor_id,
                        bucket,
                    );
                    tx.work_enqueue_after(&next, interval).await?;
                }
                let _ = outcome;
                Ok(())
            })
            .await?;
        if restarted && let Some(m) = &self.metrics {
            m.record_gateway_restart();
        }
        if pass == PassOutcome::Success
            && item.target == WorkTarget::RevisionReconcile
            && let Some(m) = &self.metrics
        {
            let age = occ_core::Timestamp::now().unix_millis() - item.created_at.unix_millis();
            m.record_agent_operation(
                "deploy",
                std::time::Duration::from_millis(u64::try_from(age).unwrap_or(0)),
            );
        }
        Ok(pass)
    }
}

/// What publishing the pointer found.
enum Publish {
    Published,
    Changed,
    Stopped,
}

/// What a successful activation records.
struct Completion {
    code: String,
    restarted: bool,
}

/// The Compute view of a revision.
pub(crate) fn revision_target(agent: &Agent, rev: &AgentRevision) -> RevisionTarget {
    RevisionTarget {
        agent: AgentTarget {
            namespace_id: agent.namespace_id.clone(),
            agent_id: agent.id.clone(),
            service_principal_id: agent.service_principal_id.clone(),
        },
        revision_id: rev.id.clone(),
        revision: rev.revision,
        spec: rev.spec.clone(),
    }
}

fn code_outcome(code: &str) -> Outcome {
    if code == "DEPENDENCY_UNAVAILABLE" {
        Outcome::retry(code)
    } else {
        Outcome::permanent(code)
    }
}

fn maintenance_bucket(key: &str) -> Option<u64> {
    key.rsplit_once(":maintenance:")
        .and_then(|(_, b)| b.parse().ok())
}

pub(crate) fn store_to_compute(e: StoreError) -> occ_drivers::compute::ComputeError {
    occ_drivers::compute::ComputeError::transient("DEPENDENCY_UNAVAILABLE", e.to_string())
}
