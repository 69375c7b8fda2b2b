//! Revision work: deploy (`agent_revision:<rev>:reconcile`) and maintenance
//! (`agent_revision:<rev>:maintenance:<bucket>`).
//!
//! A pass reads everything it decides on in one read session ([`Worker::read_revision`]), then
//! asks the pure [`plan::plan`] for the next step, runs that step's effect and records what it
//! reported, until the plan says how the pass ends. The decisions (stop wins, superseded,
//! already active, prepare, activate, publish, retire, roll back) are all in `plan.rs`; the
//! effects are all in [`Worker::run_step`].
//!
//! Deploy: the new revision is prepared and activated while the pointer still names the
//! revision before it; the pointer moves (compare-and-set in a fenced transaction) only once
//! the new revision serves, then the predecessors are retired. If the activation fails and a
//! predecessor was serving, the pass restores it (under the authority of the predecessor's own
//! deployment) and fails the new revision with the activation's reason and the gateway's last
//! output lines, so a bad Configuration never leaves the Agent down.
//!
//! Maintenance keeps the active revision running: it re-prepares and re-activates (which
//! restarts a crashed gateway, recorded as a restart) and schedules the next pass. It ends when
//! another revision becomes active or the Agent is stopped, and it never retires anything.

mod plan;

use std::collections::BTreeMap;

use occ_core::ReasonCode;
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{
    Agent, AgentRevision, DesiredRuntimeState, ExecutionMode, FrozenAccountCredential, HarnessAuth,
    NamespaceStatus, ObservedRuntimeState, RuntimeObservation, SecretMeta, ServiceAccount,
    ServiceAccountBinding, WorkspaceSetup,
};
use occ_core::work::{NewWork, WorkKey, WorkTarget};
use occ_core::{Error, IamId, SecretId, ServiceAccountId};
use occ_drivers::DriverError;
use occ_drivers::compute::{
    AgentTarget, ComputeError, RevisionContext, RevisionTarget, SecretText,
};
use occ_store::StoreError;
use occ_store::queue::Claim;

use super::{Outcome, PassError, PassOutcome, Settled, Worker, fence_error, no_extra};
use crate::Request;
use plan::{Facts, Finish, PassKind, Progress, Publish, Step, plan};

/// What a revision pass read at its start, besides the facts the plan decides on.
struct RevisionRead {
    facts: Facts,
    /// Every revision of the Agent (the predecessors to retire are among them).
    revisions: Vec<AgentRevision>,
    /// Metadata of every Secret the revision and its predecessor consume.
    secrets: BTreeMap<SecretId, SecretMeta>,
    /// The ServiceAccounts whose credentials the revision and its predecessor run with.
    accounts: BTreeMap<ServiceAccountId, ServiceAccount>,
    /// The Agent's staged workspace setup, if it was created with initial files.
    workspace_setup: Option<WorkspaceSetup>,
    /// Who deployed the predecessor (its restoration runs under that deployment's authority).
    predecessor_requester: Option<IamId>,
}

impl Worker {
    pub(crate) async fn revision_reconcile(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        let read = match self.read_revision(claim).await? {
            Ok(read) => read,
            Err(outcome) => return self.settle(claim, outcome, no_extra).await,
        };
        let target = revision_target(&read.facts.agent, &read.facts.revision);
        let mut ctx = RevisionContext::default();
        let mut progress = Progress::default();
        loop {
            match plan(&read.facts, &progress) {
                Step::Finish(finish) => {
                    let failed_to_serve = matches!(progress.prepared, Some(Err(_)))
                        || matches!(progress.activated, Some(Err(_)));
                    return self
                        .finish_revision(claim, &read, finish, failed_to_serve)
                        .await;
                }
                step => {
                    self.run_step(claim, &read, &target, &mut ctx, &mut progress, step)
                        .await?
                }
            }
        }
    }

    /// Runs one step's effect and records what it reported.
    async fn run_step(
        &self,
        claim: &Claim,
        read: &RevisionRead,
        target: &RevisionTarget,
        ctx: &mut RevisionContext,
        progress: &mut Progress,
        step: Step,
    ) -> Result<(), PassError> {
        let facts = &read.facts;
        match step {
            Step::Authorize => {
                let req = self.request_for(&claim.item);
                progress.authorized = Some(
                    match self
                        .authorize_revision(&req, &facts.revision, &facts.agent)
                        .await
                    {
                        Ok(()) => Ok(()),
                        Err(e) => Err(self.authorization_outcome(&claim.item, &e).await?),
                    },
                );
            }
            Step::ResolveContext => {
                progress.context = Some(match self.revision_context(read, &facts.revision).await {
                    Ok(resolved) => {
                        *ctx = resolved;
                        Ok(())
                    }
                    Err(outcome) => Err(outcome),
                });
            }
            Step::StopCandidate { retire_earlier } => {
                let stopped = self
                    .effect(claim, async {
                        self.compute.stop_revision(target).await?;
                        if retire_earlier {
                            self.retire_earlier(read).await?;
                        }
                        Ok::<_, ComputeError>(())
                    })
                    .await?;
                progress.stopped = Some(stopped);
            }
            Step::StopPredecessors => {
                let stopped = self.effect(claim, self.stop_earlier(read)).await?;
                progress.predecessors_stopped = Some(stopped);
            }
            Step::Prepare => {
                let prepared = self
                    .effect(claim, self.compute.prepare_revision(target, ctx))
                    .await?;
                progress.prepared = Some(prepared);
            }
            Step::Recheck => {
                // A stop admitted after the pass read its facts must not be undone by starting
                // the candidate.
                let mut tx = self.store().begin_read().await?;
                let now = tx
                    .agent_get(&facts.agent.namespace_id, &facts.agent.id)
                    .await?;
                progress.still_wanted = Some(
                    now.is_some_and(|a| a.desired_runtime_state == DesiredRuntimeState::Running),
                );
            }
            Step::Activate => {
                let activated = self
                    .effect(claim, async {
                        let before = self.compute.observe(target).await?;
                        self.compute.activate_revision(target, ctx).await?;
                        Ok::<_, ComputeError>(before)
                    })
                    .await?;
                if let Err(e) = &activated {
                    tracing::warn!(
                        work = %claim.key(),
                        agent_id = %facts.agent.id,
                        code = %e.code,
                        message = %e.message,
                        output = ?e.output,
                        "activation failed"
                    );
                }
                progress.activated = Some(activated);
            }
            Step::Publish => {
                progress.published = Some(self.publish_pointer(claim, facts).await?);
            }
            Step::Retire => {
                let retired = self.effect(claim, self.retire_earlier(read)).await?;
                progress.retired = Some(retired);
            }
            Step::RollBack => {
                progress.restored = Some(self.roll_back(claim, read, target).await?);
            }
            Step::Finish(_) => unreachable!("the caller settles finished passes"),
        }
        Ok(())
    }

    /// Restores the predecessor after a failed activation, under the authority of the
    /// predecessor's own deployment (its requester is re-authorized for what it consumes, as
    /// its maintenance passes are), then retires the failed candidate's leftovers.
    async fn roll_back(
        &self,
        claim: &Claim,
        read: &RevisionRead,
        failed: &RevisionTarget,
    ) -> Result<Result<(), ComputeError>, PassError> {
        let facts = &read.facts;
        let Some(previous) = facts.predecessor() else {
            return Ok(Err(ComputeError::permanent(
                ReasonCode::InvalidActiveRevision,
                "no predecessor to restore",
            )));
        };
        let Some(requester) = &read.predecessor_requester else {
            return Ok(Err(ComputeError::permanent(
                ReasonCode::InvalidActiveRevision,
                "the predecessor's deployment is not recorded",
            )));
        };
        let req = self.request_for_actor(requester);
        if let Err(e) = self.authorize_revision(&req, previous, &facts.agent).await {
            let code = if e.code() == occ_core::ErrorCode::Forbidden {
                ReasonCode::AuthorizationDenied
            } else {
                ReasonCode::DependencyUnavailable
            };
            return Ok(Err(ComputeError::transient(code, e.to_string())));
        }
        let previous_ctx = match self.revision_context(read, previous).await {
            Ok(ctx) => ctx,
            Err(outcome) => {
                return Ok(Err(ComputeError::transient(
                    outcome.code(),
                    "the previous revision's context cannot be resolved",
                )));
            }
        };
        let previous_target = revision_target(&facts.agent, previous);
        let restored = self
            .effect(claim, async {
                self.compute
                    .restore_revision(&previous_target, &previous_ctx, failed)
                    .await?;
                // What the candidate left behind (its snapshot, its revision Secrets).
                self.compute.retire_revision(failed).await
            })
            .await?;
        match &restored {
            Ok(()) => tracing::warn!(
                work = %claim.key(),
                agent_id = %facts.agent.id,
                revision_id = %previous.id,
                "rolled back to the previous revision after a failed activation"
            ),
            Err(e) => tracing::error!(
                work = %claim.key(),
                agent_id = %facts.agent.id,
                code = %e.code,
                message = %e.message,
                "restoring the previous revision failed"
            ),
        }
        Ok(restored)
    }

    /// The revisions of the Agent admitted before this one and pinned to this Compute.
    fn earlier<'a>(&self, read: &'a RevisionRead) -> impl Iterator<Item = RevisionTarget> + 'a {
        let ours = self.compute.selection().identity.clone();
        let facts = &read.facts;
        read.revisions
            .iter()
            .filter(move |r| r.revision < facts.revision.revision && r.spec.compute == ours)
            .map(|r| revision_target(&facts.agent, r))
    }

    /// Retires every earlier revision ([`Self::earlier`]).
    async fn retire_earlier(&self, read: &RevisionRead) -> Result<(), ComputeError> {
        for earlier in self.earlier(read) {
            self.compute.retire_revision(&earlier).await?;
        }
        Ok(())
    }

    /// Stops every earlier revision ([`Self::earlier`]) and waits for each, before an exclusive
    /// (dedicated) candidate is prepared.
    async fn stop_earlier(&self, read: &RevisionRead) -> Result<(), ComputeError> {
        for earlier in self.earlier(read) {
            self.compute.stop_revision(&earlier).await?;
        }
        Ok(())
    }

    /// Reads the revision, its Agent and Namespace, the Agent's revisions, the Secrets they
    /// consume, the staged workspace setup and the predecessor's requester, in one read
    /// session; `Err` is the outcome when the item cannot proceed.
    async fn read_revision(
        &self,
        claim: &Claim,
    ) -> Result<Result<RevisionRead, Outcome>, PassError> {
        let item = &claim.item;
        let kind = match item.target {
            WorkTarget::RevisionMaintenance => PassKind::Maintenance,
            _ => PassKind::Deploy,
        };
        let (Some(agent_id), Some(rev_id)) = (&item.agent_id, &item.revision_id) else {
            return Ok(Err(Outcome::permanent(ReasonCode::InvalidTarget)));
        };
        let ns_id = &item.namespace_id;
        let mut tx = self.store().begin_read().await?;
        let ns = tx.namespace_get(ns_id).await?;
        let agent = tx.agent_get(ns_id, agent_id).await?;
        let revisions = tx.revision_list(ns_id, agent_id).await?;
        let revision = revisions.iter().find(|r| &r.id == rev_id).cloned();
        let (Some(ns), Some(agent), Some(revision)) = (ns, agent, revision) else {
            return Ok(Err(Outcome::permanent(ReasonCode::InvalidRevisionOwner)));
        };
        let active = match &agent.active_revision_id {
            None => None,
            Some(id) => match revisions.iter().find(|r| &r.id == id) {
                Some(r) => Some(r.clone()),
                None => return Ok(Err(Outcome::permanent(ReasonCode::InvalidActiveRevision))),
            },
        };
        let newer = || revisions.iter().filter(|r| r.revision > revision.revision);
        let newer_admitted = newer().next().is_some();
        let newer_dedicated_admitted =
            newer().any(|r| r.spec.harness.mode == ExecutionMode::Dedicated);
        let down_recorded = tx
            .agent_runtime_get(ns_id, agent_id)
            .await?
            .is_some_and(|r| {
                r.revision_id == revision.id && r.state == ObservedRuntimeState::Restarting
            });
        let facts = Facts {
            kind,
            namespace_ready: ns.status == NamespaceStatus::Ready && ns.deleted_at.is_none(),
            approved_harness: self.controller.settings.harness(revision.spec.harness.mode),
            compute: self.compute.selection().identity.clone(),
            agent,
            revision,
            active,
            newer_admitted,
            newer_dedicated_admitted,
            down_recorded,
        };
        let predecessor = facts.predecessor().cloned();
        let mut secrets = BTreeMap::new();
        for rev in std::iter::once(&facts.revision).chain(predecessor.as_ref()) {
            for id in rev.spec.consumed_secrets() {
                if let Some(meta) = tx.secret_get(ns_id, id).await? {
                    secrets.insert(id.clone(), meta);
                }
            }
        }
        let mut accounts = BTreeMap::new();
        for rev in std::iter::once(&facts.revision).chain(predecessor.as_ref()) {
            if let Some(frozen) = &rev.spec.account_credential
                && let Some(sa) = tx
                    .service_account_get(ns_id, &frozen.service_account_id)
                    .await?
            {
                accounts.insert(sa.id.clone(), sa);
            }
        }
        let workspace_setup = tx.workspace_setup_get(ns_id, agent_id).await?;
        let predecessor_requester = match &predecessor {
            Some(p) => tx
                .work_get(&WorkKey::revision_reconcile(&p.id))
                .await?
                .map(|w| w.actor_id),
            None => None,
        };
        drop(tx);
        Ok(Ok(RevisionRead {
            facts,
            revisions,
            secrets,
            accounts,
            workspace_setup,
            predecessor_requester,
        }))
    }

    /// Re-authorizes the original requester for everything the revision consumes, on fresh
    /// policy: deploy on the Agent, then the grants of [`occ_core::revision`] (the policy deploy
    /// admission applied).
    async fn authorize_revision(
        &self,
        req: &Request,
        rev: &AgentRevision,
        agent: &Agent,
    ) -> Result<(), Error> {
        let c = &self.controller;
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, &agent.namespace_id, &agent.id);
        let (mut tx, _) = c
            .read_authorized(req, Action::Deploy, &agent_ref, "openclaw.agents.deploy")
            .await?;
        for consumed in rev.spec.consumed() {
            tx = c
                .authorize_consumed(tx, req, agent, consumed, false)
                .await?;
        }
        drop(tx);
        Ok(())
    }

    /// Resolves what the runtime needs besides the snapshot, from what the pass read: each
    /// bound Secret's value (through the Secret Driver that holds it), the harness credential
    /// and staged workspace setup. `Err` is the outcome when it cannot be resolved.
    async fn revision_context(
        &self,
        read: &RevisionRead,
        rev: &AgentRevision,
    ) -> Result<RevisionContext, Outcome> {
        let mut ctx = RevisionContext::default();
        if let Some(bindings) = &rev.spec.secret_bindings {
            // A revision admitted before the binding-name rule never delivers such a name.
            if bindings
                .keys()
                .any(|name| occ_core::env_name::binding_name_refusal(name).is_some())
            {
                return Err(Outcome::permanent(ReasonCode::SecretBindingNameRefused));
            }
            for (name, binding) in bindings {
                let value = self
                    .secret_value(read, rev, &binding.source.id)
                    .await
                    .map_err(code_outcome)?;
                ctx.environment.insert(name.clone(), value);
            }
        }
        if let Some(source) = rev
            .spec
            .harness_auth
            .as_ref()
            .and_then(HarnessAuth::secret_source)
        {
            match self.secret_value(read, rev, &source.id).await {
                Ok(value) => ctx.harness_credential = Some(value),
                Err(ReasonCode::SecretBindingUnavailable) => {
                    return Err(Outcome::permanent(ReasonCode::HarnessAuthSourceUnavailable));
                }
                Err(code) => return Err(code_outcome(code)),
            }
        }
        if let Some(frozen) = &rev.spec.account_credential {
            ctx.harness_credential = Some(self.account_credential_value(read, rev, frozen).await?);
        }
        // A completed record (bytes erased) still goes to the Driver, which then only verifies
        // the marker: live edits survive and a lost workspace blocks startup.
        if let Some(setup) = &read.workspace_setup {
            if !self.compute.supports_workspace_setup() {
                return Err(Outcome::permanent(ReasonCode::WorkspaceSetupUnsupported));
            }
            ctx.workspace_setup = Some(setup.clone());
        }
        // Before any workload gets these values, the Secret Driver keeps them for the
        // revision: its output stays redactable with exactly what it was handed, even after
        // the Secrets are rotated or deleted. Without the record nothing is handed (retried).
        let handed: Vec<&str> = ctx
            .environment
            .values()
            .chain(&ctx.harness_credential)
            .map(SecretText::expose)
            .collect();
        if !handed.is_empty()
            && let Err(e) = self
                .controller
                .secrets
                .record_handed(&rev.namespace_id, &rev.agent_id, &rev.id, &handed)
                .await
        {
            tracing::warn!(revision = %rev.id, error = %e, "handed values not recorded");
            return Err(code_outcome(ReasonCode::DependencyUnavailable));
        }
        Ok(ctx)
    }

    /// The access token a `chatgpt_service_account` revision runs with: the credential it froze
    /// must still be the account's (same provider credential, held by this Secret Driver).
    async fn account_credential_value(
        &self,
        read: &RevisionRead,
        rev: &AgentRevision,
        frozen: &FrozenAccountCredential,
    ) -> Result<SecretText, Outcome> {
        let unavailable = || Outcome::permanent(ReasonCode::HarnessAuthSourceUnavailable);
        let Some(ServiceAccountBinding::Managed {
            credential: Some(credential),
            ..
        }) = read
            .accounts
            .get(&frozen.service_account_id)
            .and_then(|sa| sa.binding.as_ref())
        else {
            return Err(unavailable());
        };
        if credential.upstream_credential_id != frozen.upstream_credential_id {
            return Err(unavailable());
        }
        if credential.driver_id != self.controller.secrets.identity().id {
            return Err(code_outcome(ReasonCode::SecretDriverMismatch));
        }
        self.controller
            .secrets
            .with_value(
                &rev.namespace_id,
                &credential.value_id,
                &credential.locator,
                |v| SecretText::new(v.to_owned()),
            )
            .await
            .map_err(|_| unavailable())
    }

    /// One Secret's value, or the reason code why not.
    async fn secret_value(
        &self,
        read: &RevisionRead,
        rev: &AgentRevision,
        id: &SecretId,
    ) -> Result<SecretText, ReasonCode> {
        let Some(meta) = read.secrets.get(id) else {
            return Err(ReasonCode::SecretBindingUnavailable);
        };
        let driver = self.controller.secrets.identity().id;
        if meta.driver_id != driver || rev.spec.secret_driver_id.as_deref() != Some(&driver) {
            return Err(ReasonCode::SecretDriverMismatch);
        }
        let value = self
            .controller
            .secrets
            .with_value(&rev.namespace_id, id, &meta.locator, |v| {
                SecretText::new(v.to_owned())
            })
            .await;
        match value {
            Ok(v) => Ok(v),
            Err(DriverError::NotFound | DriverError::Corrupt(_)) => {
                Err(ReasonCode::SecretBindingUnavailable)
            }
            Err(e) => {
                tracing::warn!(error = %e, "secret driver unavailable");
                Err(ReasonCode::DependencyUnavailable)
            }
        }
    }

    /// Compare-and-set of `activeRevisionId` from what the pass read to this revision, in a
    /// fenced transaction that does not complete the item.
    async fn publish_pointer(&self, claim: &Claim, facts: &Facts) -> Result<Publish, PassError> {
        let agent = &facts.agent;
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
                Some(&facts.revision.id),
            )
            .await?;
        if !moved {
            return Ok(Publish::Changed);
        }
        tx.commit().await.map_err(fence_error)?;
        Ok(Publish::Published)
    }

    /// Settles revision work. A successful activation also erases staged workspace setup
    /// bytes, records the activation (and a restart) and schedules the next maintenance pass; a
    /// rollback is recorded with the reason the new revision failed. A maintenance pass that
    /// failed schedules the next one too: the runtime is never retired by maintenance.
    ///
    /// The runtime observation is recorded with it: serving (a restart counted) after an
    /// activation, and a maintenance pass that could not get the gateway serving leaves it
    /// `restarting` (the next pass tries again).
    ///
    /// The pointer needs no re-check here: only passes in the Agent's lane move it, the lane
    /// has one live claim, and the settlement is fenced by that claim.
    async fn finish_revision(
        &self,
        claim: &Claim,
        read: &RevisionRead,
        finish: Finish,
        failed_to_serve: bool,
    ) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let req = self.request_for(item);
        let facts = &read.facts;
        let compute_id = self.compute.selection().identity.id.clone();
        let interval = self.compute.maintenance_interval();
        let maintenance = facts.kind == PassKind::Maintenance;
        let Finish {
            outcome,
            completion,
            rolled_back,
        } = finish;
        let restarted = completion.as_ref().is_some_and(|c| c.restarted);
        let agent = &facts.agent;
        let rev = &facts.revision;
        let resource = ResourceRef::exact(ResourceKind::AgentRevision, &rev.namespace_id, &rev.id);
        let lifecycle_event = |action: &str, code: ReasonCode| {
            self.controller
                .event(
                    &req,
                    AuditKind::Mutation,
                    action,
                    &resource,
                    AuditOutcome::Success,
                )
                .reason_code(code.as_str())
                .detail("computeDriverId", compute_id.as_str())
                .detail("agentId", agent.id.as_str())
        };
        let pass = self
            .settle(claim, outcome, async |tx, settled, outcome| {
                if let Some(done) = &completion
                    && settled == Settled::Succeeded
                {
                    tx.workspace_setup_complete(&agent.namespace_id, &agent.id)
                        .await?;
                    let mut activation =
                        lifecycle_event("openclaw.agents.lifecycle.activate", done.code);
                    if let Some(prev) = &facts.active
                        && prev.id != rev.id
                    {
                        activation = activation.detail("previousRevisionId", prev.id.as_str());
                    }
                    if !maintenance || done.restarted {
                        tx.audit_append(&activation).await?;
                    }
                    let observation = if done.restarted {
                        RuntimeObservation::Restarted
                    } else {
                        RuntimeObservation::Serving
                    };
                    let runtime = tx
                        .agent_runtime_observe(
                            &agent.namespace_id,
                            &agent.id,
                            &rev.id,
                            &observation,
                        )
                        .await?;
                    if done.restarted {
                        let mut restart = lifecycle_event(
                            "openclaw.agents.lifecycle.restart",
                            ReasonCode::GatewayRestarted,
                        )
                        .detail("restarts", runtime.restarts);
                        if let Some(at) = runtime.last_exit_at {
                            restart = restart.detail("lastExitAt", at.to_string());
                        }
                        if let Some(status) = &runtime.last_exit_status {
                            restart = restart.detail("lastExitStatus", status.as_str());
                        }
                        tx.audit_append(&restart).await?;
                    }
                }
                if maintenance && failed_to_serve && facts.is_active() {
                    tx.agent_runtime_observe(
                        &agent.namespace_id,
                        &agent.id,
                        &rev.id,
                        &RuntimeObservation::RestartFailed,
                    )
                    .await?;
                }
                if rolled_back && let Some(previous) = facts.predecessor() {
                    let rollback =
                        lifecycle_event("openclaw.agents.lifecycle.rollback", outcome.code())
                            .detail("restoredRevisionId", previous.id.as_str());
                    tx.audit_append(&rollback).await?;
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
                Ok(())
            })
            .await?;
        if let Some(m) = &self.metrics {
            if restarted {
                m.record_gateway_restart();
            }
            if rolled_back {
                m.record_rollback();
            }
            if pass == PassOutcome::Success && item.target == WorkTarget::RevisionReconcile {
                let age = occ_core::Timestamp::now().unix_millis() - item.created_at.unix_millis();
                m.record_agent_operation(
                    "deploy",
                    std::time::Duration::from_millis(u64::try_from(age).unwrap_or(0)),
                );
            }
        }
        Ok(pass)
    }
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

fn code_outcome(code: ReasonCode) -> Outcome {
    if code == ReasonCode::DependencyUnavailable {
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
    occ_drivers::compute::ComputeError::transient(ReasonCode::DependencyUnavailable, e.to_string())
}
