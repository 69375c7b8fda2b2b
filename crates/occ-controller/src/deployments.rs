//! Deploy (admit an immutable revision), stop, revisions and deployment status.
//!
//! Deploy is one transaction: lock the Agent, authorize the read of its Configuration, lock the
//! Configuration metadata, authorize everything else the revision will consume (the one policy
//! of `occ_core::revision`, which the worker applies again: each Secret for the caller *and* for
//! the Agent's service principal), have the Secret Driver verify each reference (identity
//! only), check the Compute Driver can run the Agent, read the Driver's document, freeze it with
//! its generation and the harness, compute, principal and Secret Driver identities, and commit the
//! revision, desired state `running`, the reconcile work item and the audit event together.
//!
//! Redeploy (a rollback on purpose) is the same admission with an earlier revision of the Agent
//! in place of its Configuration: its frozen document, generation, bindings and harness auth are
//! checked and authorized again exactly as a deploy's, and the new revision names its source.

use std::borrow::BorrowMut;
use std::collections::BTreeMap;

use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::reason::deployment_message;
use occ_core::resource::{Agent, AgentRevision, AgentStatus, DesiredRuntimeState};
use occ_core::revision::{Consumed, consumed_inputs};
use occ_core::work::{NewWork, WorkKey, WorkState};
use occ_core::{AgentId, Error, NamespaceId, ReasonCode, RevisionId, Timestamp};
use occ_drivers::configuration::DocumentKey;
use occ_store::Tx;
use occ_store::revisions::NewRevision;
use serde_json::Value;

use crate::admission::{self, AdmissionFacts, Basis, DriverAnswers, Installation, Refusal};
use crate::authorization::{audit_in_own_transaction, found};
use crate::namespaces::live_namespace;
use crate::{Controller, Request};

/// The audit action of a deploy, also of a redeploy (which adds `sourceRevisionId`).
const DEPLOY_AUDIT: &str = "openclaw.agents.deploy";

/// Where a deployment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentState {
    /// Waiting for a worker.
    Queued,
    /// A worker holds it under a live lease.
    Running,
    /// The revision was activated.
    Succeeded,
    /// It ended without activating the revision.
    Failed,
}

impl DeploymentState {
    /// Wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Queued => "queued",
            DeploymentState::Running => "running",
            DeploymentState::Succeeded => "succeeded",
            DeploymentState::Failed => "failed",
        }
    }
}

/// A terminal deployment error.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentError {
    /// Reason code, as stored (a code of another build is shown as it is).
    pub code: String,
    /// Fixed message for the code.
    pub message: String,
    /// Closed-shape data (`timeoutMs`, `runtimeFailure`).
    pub data: Option<Value>,
}

/// The latest attempt of a pending deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// When.
    pub at: Timestamp,
    /// Progress code ([`ReasonCode::is_progress`], else `RECONCILIATION_PENDING`).
    pub code: ReasonCode,
    /// Fixed message.
    pub message: String,
}

/// Progress of a non-terminal deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Latest attempt, if any.
    pub last_attempt: Option<Attempt>,
    /// When it will next be tried (queued only).
    pub next_attempt_at: Option<Timestamp>,
}

/// Deployment status (derived from the work item `agent_revision:<rev>:reconcile`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentStatus {
    /// The revision.
    pub deployment_id: RevisionId,
    /// Namespace.
    pub namespace_id: NamespaceId,
    /// Agent.
    pub agent_id: AgentId,
    /// State.
    pub status: DeploymentState,
    /// Terminal error.
    pub error: Option<DeploymentError>,
    /// Progress while not terminal.
    pub progress: Option<Progress>,
}

/// The message of a terminal deployment error: the code's fixed message, and what became of
/// the previous revision when the failure was rolled back.
fn error_message(code: &str, data: Option<&Value>) -> String {
    let mut message = deployment_message(code).to_owned();
    let previous = data
        .and_then(|d| d.get("previousRevision"))
        .and_then(Value::as_u64);
    match (
        data.and_then(|d| d.get("rolledBack"))
            .and_then(Value::as_bool),
        previous,
    ) {
        (Some(true), Some(n)) => message.push_str(&format!(
            " Revision {n}, which served before, was restored and keeps serving."
        )),
        (Some(false), Some(n)) => message.push_str(&format!(
            " Restoring revision {n}, which served before, failed too; the Agent is not serving."
        )),
        _ => {}
    }
    message
}

impl Controller {
    /// Authorizes one resource a revision consumes ([`occ_core::revision`]) for the caller and,
    /// where the policy says so, for the Agent's service principal. `explain_agent_denial` names
    /// the principal and the resource in the 403 (deploy admission; the worker's re-authorization
    /// only records the denial).
    pub(crate) async fn authorize_consumed<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        agent: &Agent,
        consumed: Consumed<'_>,
        explain_agent_denial: bool,
    ) -> Result<T, Error> {
        let target = consumed.resource(&agent.namespace_id);
        let tx = self
            .authorize_in(tx, req, consumed.action(), &target, DEPLOY_AUDIT)
            .await?;
        if !consumed.agent_principal_too() {
            return Ok(tx);
        }
        let message = explain_agent_denial.then(|| {
            format!(
                "The Agent service principal {} is not allowed to {} {} {}",
                agent.service_principal_id,
                consumed.action().as_str(),
                target.kind.as_str(),
                target.id
            )
        });
        self.authorize_in_as(
            tx,
            req,
            &agent.service_principal_id,
            consumed.action(),
            &target,
            DEPLOY_AUDIT,
            message,
        )
        .await
    }

    /// What the store says about the Agent and everything its new revision would consume
    /// (see [`crate::admission`]): read in `tx` — a read session, or the deploy's transaction
    /// with the Agent's and the Configuration's rows locked (`lock`) — deciding the caller's
    /// (and, for Secrets, the Agent's service principal's) use of each consumed resource before
    /// it is read.
    async fn admission_facts<T: BorrowMut<Tx>>(
        &self,
        mut tx: T,
        req: &Request,
        (ns, id): (&NamespaceId, &AgentId),
        source: Option<&RevisionId>,
        lock: bool,
        installation: &Installation<'_>,
    ) -> Result<(T, AdmissionFacts), Refusal> {
        let agent = if lock {
            tx.borrow_mut().agent_lock(ns, id).await?
        } else {
            tx.borrow_mut().agent_get(ns, id).await?
        };
        let agent = found(agent)?;
        let namespace = live_namespace(tx.borrow_mut(), ns).await?;
        let source = match source {
            Some(rev) => Some(found(tx.borrow_mut().revision_get(ns, id, rev).await?)?),
            None => None,
        };
        // A deploy runs the Agent's draft; a redeploy what the source revision froze.
        let harness_auth = match &source {
            None => agent.harness_auth.clone(),
            Some(rev) => rev.spec.harness_auth.clone(),
        };
        admission::check_target(
            &agent,
            &namespace,
            source.as_ref(),
            harness_auth.as_ref(),
            installation,
        )?;
        let configuration_id = source
            .as_ref()
            .map_or(&agent.configuration_id, |rev| &rev.spec.configuration_id)
            .clone();
        let mut tx = self
            .authorize_consumed(
                tx,
                req,
                &agent,
                Consumed::Configuration(&configuration_id),
                true,
            )
            .await?;
        let basis = match source {
            Some(rev) => Basis::Revision(Box::new(rev)),
            None => {
                let cfg = if lock {
                    tx.borrow_mut()
                        .configuration_lock(ns, &configuration_id)
                        .await?
                } else {
                    tx.borrow_mut()
                        .configuration_get(ns, &configuration_id)
                        .await?
                };
                Basis::Configuration(found(cfg)?)
            }
        };
        admission::check_basis(&basis, installation)?;
        let bindings = basis.secret_bindings();
        let mut secrets = BTreeMap::new();
        let mut account = None;
        for consumed in consumed_inputs(Some(&bindings), harness_auth.as_ref()) {
            tx = self
                .authorize_consumed(tx, req, &agent, consumed, true)
                .await?;
            match consumed {
                Consumed::Secret(secret) => {
                    let meta = tx.borrow_mut().secret_get(ns, secret).await?;
                    secrets.insert(secret.clone(), meta);
                }
                Consumed::ServiceAccount(sa) => {
                    account = Some(found(tx.borrow_mut().service_account_get(ns, sa).await?)?);
                }
                Consumed::Configuration(_) => {}
            }
        }
        Ok((
            tx,
            AdmissionFacts {
                agent,
                namespace,
                basis,
                harness_auth,
                secrets,
                account,
            },
        ))
    }

    /// The Driver I/O of an admission, for `facts` (see [`crate::admission`]; never under a row
    /// lock): the basis document and, identity only, each consumed Secret this installation's
    /// Secret Driver holds.
    async fn driver_answers(
        &self,
        ns: &NamespaceId,
        facts: &AdmissionFacts,
    ) -> Result<DriverAnswers, Error> {
        let document = self.basis_document(ns, &facts.basis).await?;
        let ours = self.secrets.identity().id;
        let mut verified = BTreeMap::new();
        for (secret, meta) in &facts.secrets {
            let Some(meta) = meta.as_ref().filter(|m| m.driver_id == ours) else {
                continue;
            };
            self.secrets
                .verify(ns, secret, &meta.locator)
                .await
                .map_err(|e| match e {
                    occ_drivers::DriverError::NotFound | occ_drivers::DriverError::Corrupt(_) => {
                        Error::conflict(
                            "A bound Secret's value is missing or unreadable; set it again",
                        )
                    }
                    other => Error::from(other),
                })?;
            verified.insert(secret.clone(), meta.locator.clone());
        }
        Ok(DriverAnswers {
            basis: (
                facts.basis.configuration_id().clone(),
                facts.basis.generation(),
            ),
            document,
            verified,
        })
    }

    /// Admits a new immutable revision of the Agent from its current Configuration and queues
    /// its reconcile work (202).
    pub async fn agent_deploy(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<AgentRevision, Error> {
        self.admit_revision(req, ns, id, None).await
    }

    /// Admits a new immutable revision made from an earlier revision's frozen document and
    /// identities — a deliberate rollback — and queues its reconcile work (202). Authorized,
    /// checked and audited like a deploy; the source must be a revision of this Agent (404).
    pub async fn agent_redeploy(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        source: &RevisionId,
    ) -> Result<AgentRevision, Error> {
        self.admit_revision(req, ns, id, Some(source)).await
    }

    /// Deploy admission, from the Agent's Configuration (`source` `None`) or from an earlier
    /// revision of the Agent, as facts → plan → effects ([`crate::admission`]): the facts and
    /// the Driver's answers for them before any lock, then in one transaction the facts again
    /// under the Agent's and the Configuration's row locks, the pure plan, and the revision
    /// with its desired state, work and audit event. No Driver call happens under the locks.
    async fn admit_revision(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        source: Option<&RevisionId>,
    ) -> Result<AgentRevision, Error> {
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (session, _) = self
            .read_authorized(req, Action::Deploy, &agent_ref, DEPLOY_AUDIT)
            .await?;
        let harness = |mode| self.settings.harness(mode);
        let secret_driver_id = self.secrets.identity().id;
        let installation = Installation {
            compute: &self.compute,
            harness: &harness,
            secret_driver_id: &secret_driver_id,
        };
        let seen = match self
            .admission_facts(session, req, (ns, id), source, false, &installation)
            .await
            .and_then(|(session, seen)| {
                drop(session);
                admission::check_facts(&seen, &installation).map(|()| seen)
            }) {
            Ok(seen) => seen,
            Err(refusal) => return Err(self.refused(req, &agent_ref, refusal).await),
        };
        let answers = self.driver_answers(ns, &seen).await?;

        let tx = self
            .write_authorized(req, Action::Deploy, &agent_ref, DEPLOY_AUDIT)
            .await?;
        let (mut tx, facts) = match self
            .admission_facts(tx, req, (ns, id), source, true, &installation)
            .await
        {
            Ok(read) => read,
            Err(refusal) => return Err(self.refused(req, &agent_ref, refusal).await),
        };
        let planned = match admission::plan(&facts, &answers, &installation) {
            Ok(planned) => planned,
            Err(refusal) => {
                drop(tx);
                return Err(self.refused(req, &agent_ref, refusal).await);
            }
        };

        let configuration_id = planned.spec.configuration_id.clone();
        let generation = planned.spec.configuration_generation;
        let new = NewRevision {
            id: RevisionId::generate(),
            namespace_id: ns.clone(),
            agent_id: id.clone(),
            backend_id: planned.backend_id,
            spec: planned.spec,
            source_revision_id: planned.source_revision_id,
            admitted_at: Timestamp::now(),
        };
        let rev_ref = ResourceRef::exact(ResourceKind::AgentRevision, ns, &new.id);
        let mut event = self
            .mutation(req, DEPLOY_AUDIT, &rev_ref, tx.evidence())
            .detail("agentId", id.as_str())
            .detail("configurationId", configuration_id.as_str())
            .detail("configurationGeneration", generation.get());
        if let Some(source) = &new.source_revision_id {
            event = event.detail("sourceRevisionId", source.as_str());
        }
        let revision = tx
            .revision_admit(&new, &req.caller.principal_id, &event)
            .await
            .map_err(|e| match e {
                occ_store::StoreError::Stale => {
                    Error::conflict("The Agent changed concurrently; retry")
                }
                other => other.into(),
            })?;
        tx.commit().await?;
        Ok(revision)
    }

    /// A refused deploy's error, after its audit record when the refusal is audited (a failed
    /// audit answers 503: fail closed).
    async fn refused(&self, req: &Request, agent: &ResourceRef, refusal: Refusal) -> Error {
        if let Some(reason) = refusal.audited
            && let Err(e) = self.audit_failure(req, DEPLOY_AUDIT, agent, reason).await
        {
            return e;
        }
        refusal.error
    }

    /// The document a new revision freezes: the Configuration's locked generation, read from
    /// its Driver, or the source revision's frozen copy.
    async fn basis_document(
        &self,
        ns: &NamespaceId,
        basis: &Basis,
    ) -> Result<serde_json::Map<String, Value>, Error> {
        let cfg = match basis {
            Basis::Revision(rev) => return Ok(rev.spec.configuration.clone()),
            Basis::Configuration(cfg) => cfg,
        };
        self.configurations
            .read(DocumentKey {
                namespace_id: ns,
                configuration_id: &cfg.id,
                generation: cfg.generation,
                created_at: cfg.created_at,
            })
            .await
            .map_err(|e| match e {
                occ_drivers::DriverError::NotFound => {
                    Error::unavailable("the configuration document is missing from its Driver")
                }
                other => Error::from(other),
            })
    }

    /// Sets the Agent's desired state to `stopped` and queues stop work (a new item per call). A
    /// deleting Agent is returned unchanged.
    pub async fn agent_stop(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Agent, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Operate, &target, "openclaw.agents.stop")
            .await?;
        let agent = found(tx.agent_lock(ns, id).await?)?;
        if agent.status == AgentStatus::Deleting {
            return Ok(agent);
        }
        tx.agent_set_desired_state(ns, id, DesiredRuntimeState::Stopped)
            .await?;
        let work = tx
            .work_enqueue(&NewWork::agent_stop(ns, id, &req.caller.principal_id))
            .await?;
        // `workId` is reserved for queue evidence; the stop request's work is `stopWorkId`
        let event = self
            .mutation(req, "openclaw.agents.stop", &target, tx.evidence())
            .detail("stopWorkId", work.key.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(Agent {
            desired_runtime_state: DesiredRuntimeState::Stopped,
            ..agent
        })
    }

    /// Revisions of an Agent, each filtered by the caller's `agent_revision:read`.
    pub async fn revision_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<Vec<AgentRevision>, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, agent);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.agent_revisions.list")
            .await?;
        found(tx.agent_get(ns, agent).await?)?;
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        let all = tx.revision_list(ns, agent).await?;
        Ok(all
            .into_iter()
            .filter(|r| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::exact(ResourceKind::AgentRevision, ns, &r.id),
                )
            })
            .collect())
    }

    /// One revision (needs `agent_revision:read` on it; `agent:read` is not needed).
    pub async fn revision_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent: &AgentId,
        id: &RevisionId,
    ) -> Result<AgentRevision, Error> {
        let target = ResourceRef::exact(ResourceKind::AgentRevision, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.agent_revisions.read")
            .await?;
        found(tx.revision_get(ns, agent, id).await?)
    }

    /// The deployment status of a revision, derived from its reconcile work item. A failed
    /// deployment's `error.data.output` (the gateway's last lines) is runtime output: only a
    /// caller allowed `read_logs` (or `administer`) on the Agent sees it, and that read is
    /// audited like a logs view; others get the deployment without it.
    pub async fn deployment_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent: &AgentId,
        id: &RevisionId,
    ) -> Result<DeploymentStatus, Error> {
        let target = ResourceRef::exact(ResourceKind::AgentRevision, ns, id);
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &target,
                "openclaw.agent_deployments.read",
            )
            .await?;
        found(tx.revision_get(ns, agent, id).await?)?;
        let mut status = deployment_status_in(&mut tx, ns, agent, id).await?;
        let has_output = status
            .error
            .as_ref()
            .and_then(|e| e.data.as_ref())
            .is_some_and(|data| data.get("output").is_some());
        if !has_output {
            return Ok(status);
        }
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, agent);
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        drop(tx);
        let may_read_logs = [Action::ReadLogs, Action::Administer]
            .into_iter()
            .any(|action| Self::allowed(&snapshot, &req.caller, action, &agent_ref));
        let shown = may_read_logs && {
            let event = self
                .event(
                    req,
                    AuditKind::Access,
                    crate::runtime_logs::VIEW_AUDIT,
                    &agent_ref,
                    AuditOutcome::Success,
                )
                .detail("revisionId", id.as_str())
                .detail("source", "deployment_output");
            match audit_in_own_transaction(&self.store, &event).await {
                Ok(()) => true,
                Err(e) => {
                    // Fail closed: output that cannot be audited is not shown.
                    tracing::warn!(error = %e, "deployment output withheld: not audited");
                    false
                }
            }
        };
        if !shown && let Some(error) = status.error.as_mut() {
            if let Some(map) = error.data.as_mut().and_then(Value::as_object_mut) {
                map.remove("output");
            }
            if error
                .data
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(serde_json::Map::is_empty)
            {
                error.data = None;
            }
        }
        Ok(status)
    }
}

/// The deployment status of a revision the caller may read (it exists: checked by the caller).
pub(crate) async fn deployment_status_in(
    tx: &mut Tx,
    ns: &NamespaceId,
    agent: &AgentId,
    id: &RevisionId,
) -> Result<DeploymentStatus, Error> {
    let key = WorkKey::revision_reconcile(id);
    let work = tx
        .work_get(&key)
        .await?
        .ok_or_else(|| Error::unavailable("the deployment's work item is missing"))?;
    let now = Timestamp::now();
    let live = work.lease_expires_at.is_some_and(|l| l > now);
    let stored_code = work.reason_code.as_deref().and_then(ReasonCode::parse);
    let state = match (work.state, stored_code) {
        (WorkState::Queued, _) => DeploymentState::Queued,
        (WorkState::Claimed, _) if live => DeploymentState::Running,
        (WorkState::Claimed, _) => DeploymentState::Queued,
        (
            WorkState::Succeeded,
            Some(ReasonCode::RevisionActivated | ReasonCode::RevisionAlreadyActive),
        ) => DeploymentState::Succeeded,
        (WorkState::Succeeded | WorkState::FailedPermanent, _) => DeploymentState::Failed,
    };
    let error = (state == DeploymentState::Failed).then(|| {
        let code = work
            .reason_code
            .clone()
            .unwrap_or_else(|| ReasonCode::LegacyOutcomeUnknown.as_str().into());
        let data = work.result_data.clone().filter(|data| {
            matches!(
                stored_code,
                Some(ReasonCode::ConvergenceDeadlineExceeded | ReasonCode::RuntimeModelProbeFailed)
            ) || data.get("rolledBack").is_some()
                || data.get("output").is_some()
        });
        DeploymentError {
            message: error_message(&code, data.as_ref()),
            code,
            data,
        }
    });
    let progress = match state {
        DeploymentState::Queued | DeploymentState::Running => {
            let last = tx.work_latest_attempt(&key).await?.map(|(_, code, at)| {
                let code = ReasonCode::parse(&code)
                    .filter(|c| c.is_progress())
                    .unwrap_or(ReasonCode::ReconciliationPending);
                Attempt {
                    at,
                    message: code.deployment_message().into(),
                    code,
                }
            });
            Some(Progress {
                last_attempt: last,
                next_attempt_at: (state == DeploymentState::Queued).then_some(work.available_at),
            })
        }
        _ => None,
    };
    Ok(DeploymentStatus {
        deployment_id: id.clone(),
        namespace_id: ns.clone(),
        agent_id: agent.clone(),
        status: state,
        error,
        progress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolled_back_failures_say_what_became_of_the_previous_revision() {
        let restored = serde_json::json!({"rolledBack": true, "previousRevision": 3});
        assert_eq!(
            error_message("RUNTIME_STARTUP_FAILED", Some(&restored)),
            "The Agent's gateway did not start; error.data.output has its last output lines. \
             Revision 3, which served before, was restored and keeps serving."
        );
        // A code of another build keeps the generic message.
        assert_eq!(
            error_message("SOME_FUTURE_CODE", None),
            "The deployment ended without activating the revision."
        );
        assert_eq!(DeploymentState::Running.as_str(), "running");
    }
}
