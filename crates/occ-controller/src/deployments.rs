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

use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::reason::deployment_message;
use occ_core::resource::{
    AdmittedSpec, Agent, AgentRevision, AgentStatus, ConfigurationMeta, DesiredRuntimeState,
    FrozenAccountCredential, Generation, SecretBindings, ServiceAccount, ServiceAccountBinding,
    ServiceAccountCredentialKind,
};
use occ_core::revision::{Consumed, consumed_inputs};
use occ_core::work::{NewWork, WorkKey, WorkState};
use occ_core::{AgentId, Error, NamespaceId, ReasonCode, RevisionId, SecretId, Timestamp};
use occ_drivers::configuration::DocumentKey;
use occ_store::revisions::NewRevision;
use occ_store::{Authorized, Tx};
use serde_json::Value;

use crate::agents::agent_deleting;
use crate::authorization::{audit_in_own_transaction, found};
use crate::namespaces::{live_namespace, require_ready};
use crate::{Controller, Request};

/// The audit action of a deploy, also of a redeploy (which adds `sourceRevisionId`).
const DEPLOY_AUDIT: &str = "openclaw.agents.deploy";

/// What a new revision is made from.
enum Basis {
    /// The Agent's Configuration at its current generation (a deploy), locked.
    Configuration(ConfigurationMeta),
    /// An earlier revision of the Agent (a redeploy).
    Revision(Box<AgentRevision>),
}

impl Basis {
    fn generation(&self) -> Generation {
        match self {
            Basis::Configuration(cfg) => cfg.generation,
            Basis::Revision(rev) => rev.spec.configuration_generation,
        }
    }

    fn secret_bindings(&self) -> SecretBindings {
        match self {
            Basis::Configuration(cfg) => cfg.secret_bindings.clone(),
            Basis::Revision(rev) => rev.spec.secret_bindings.clone().unwrap_or_default(),
        }
    }
}

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

    /// Admission of one consumed resource besides the Configuration: authorized
    /// ([`Controller::authorize_consumed`]), then a Secret must exist, be held by this
    /// installation's Secret Driver and be verified by it (identity only), a ServiceAccount must
    /// exist.
    async fn admit_consumed(
        &self,
        tx: Authorized,
        req: &Request,
        agent: &Agent,
        consumed: Consumed<'_>,
    ) -> Result<Authorized, Error> {
        let mut tx = self
            .authorize_consumed(tx, req, agent, consumed, true)
            .await?;
        let ns = &agent.namespace_id;
        match consumed {
            Consumed::Secret(secret) => self.verify_consumed_secret(&mut tx, ns, secret).await?,
            Consumed::ServiceAccount(account) => {
                found(tx.service_account_get(ns, account).await?)?;
            }
            // Locked by the caller before its bindings were read.
            Consumed::Configuration(_) => {}
        }
        Ok(tx)
    }

    /// A consumed Secret exists, is held by this installation's Secret Driver, which verifies
    /// the reference.
    async fn verify_consumed_secret(
        &self,
        tx: &mut Authorized,
        ns: &NamespaceId,
        secret: &SecretId,
    ) -> Result<(), Error> {
        // A Configuration's bound Secrets cannot be deleted, but a Secret an earlier revision
        // froze can be once it is unbound: the revision exists, its Secret does not (409).
        let meta = tx.secret_get(ns, secret).await?.ok_or_else(|| {
            Error::conflict(format!(
                "Secret {secret}, which the revision consumes, no longer exists"
            ))
        })?;
        if meta.driver_id != self.secrets.identity().id {
            return Err(Error::conflict(
                "A bound Secret is held by a Secret Driver this installation does not use",
            ));
        }
        self.secrets
            .verify(ns, secret, &meta.locator)
            .await
            .map_err(|e| match e {
                occ_drivers::DriverError::NotFound | occ_drivers::DriverError::Corrupt(_) => {
                    Error::conflict("A bound Secret's value is missing or unreadable; set it again")
                }
                other => Error::from(other),
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
    /// revision of the Agent: one transaction, every check made on either path.
    async fn admit_revision(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        source: Option<&RevisionId>,
    ) -> Result<AgentRevision, Error> {
        let agent_ref = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Deploy, &agent_ref, DEPLOY_AUDIT)
            .await?;
        let agent = found(tx.agent_lock(ns, id).await?)?;
        if agent.status == AgentStatus::Deleting {
            return Err(agent_deleting());
        }
        let namespace = live_namespace(&mut tx, ns).await?;
        if let Err(not_ready) = require_ready(&namespace) {
            drop(tx);
            self.audit_failure(req, DEPLOY_AUDIT, &agent_ref, "NAMESPACE_NOT_READY")
                .await?;
            return Err(not_ready);
        }
        let source = match source {
            Some(rev) => Some(found(tx.revision_get(ns, id, rev).await?)?),
            None => None,
        };
        // A deploy runs the Agent's draft; a redeploy what the source revision froze.
        let (mode, harness_auth) = match &source {
            None => (agent.execution_mode, agent.harness_auth.clone()),
            Some(rev) => (rev.spec.harness.mode, rev.spec.harness_auth.clone()),
        };
        let Some(harness_auth) = harness_auth else {
            return Err(Error::conflict(
                "The Agent has no harnessAuth; set one before deploying",
            ));
        };
        if let Some(refusal) = self.compute.refusal(mode, Some(&harness_auth)) {
            return Err(Error::conflict(refusal));
        }
        if let Some(rev) = &source {
            self.require_same_runtime(rev)?;
        }
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
                Basis::Configuration(found(tx.configuration_lock(ns, &configuration_id).await?)?)
            }
        };
        let secret_bindings = basis.secret_bindings();
        // A Configuration (or revision) stored before the binding-name rule must not reach a
        // gateway with a name that changes how the runtime starts.
        let mut problems = occ_core::validate::Problems::new();
        occ_core::inputs::check_binding_names(&secret_bindings, "/secretBindings", &mut problems);
        if !problems.is_empty() {
            drop(tx);
            self.audit_failure(req, DEPLOY_AUDIT, &agent_ref, "SECRET_BINDING_NAME_REFUSED")
                .await?;
            return Err(problems.into_error_saying(&format!(
                "Configuration {configuration_id} binds a Secret to an environment variable \
                 that gateways may not receive; rename the binding and deploy again"
            )));
        }
        if let Some(refusal) = self.compute.secret_refusal(!secret_bindings.is_empty()) {
            return Err(Error::conflict(refusal));
        }
        for consumed in consumed_inputs(Some(&secret_bindings), Some(&harness_auth)) {
            tx = self.admit_consumed(tx, req, &agent, consumed).await?;
        }
        let (backend_id, source_revision_id) = match &basis {
            Basis::Revision(rev) => (rev.backend_id.clone(), Some(rev.id.clone())),
            Basis::Configuration(_) => (agent.backend_id.clone(), None),
        };
        let account_credential = match harness_auth.service_account_id() {
            None => None,
            Some(account) => {
                let sa = found(tx.service_account_get(ns, account).await?)?;
                let frozen = freeze_account_credential(&sa, backend_id.as_deref())?;
                if let Basis::Revision(rev) = &basis
                    && rev.spec.account_credential.as_ref() != Some(&frozen)
                {
                    return Err(Error::conflict(format!(
                        "ServiceAccount {account} carries another credential than revision {} \
                         ran with; deploy the Agent's Configuration instead",
                        rev.revision
                    )));
                }
                Some(frozen)
            }
        };
        let generation = basis.generation();
        let document = self.basis_document(ns, &basis).await?;
        let document =
            occ_core::native::check_stored_document(document, &configuration_id, generation)?;
        occ_core::native::harness::require_harness(&document, mode, &configuration_id, generation)?;
        let uses_secrets = !secret_bindings.is_empty() || harness_auth.secret_id().is_some();
        let spec = AdmittedSpec {
            configuration_id: configuration_id.clone(),
            configuration_kind: occ_core::resource::CONFIGURATION_KIND_AGENT.into(),
            configuration_generation: generation,
            configuration: document,
            harness: self.settings.harness(mode),
            compute: self.compute.identity.clone(),
            service_principal_id: agent.service_principal_id.clone(),
            harness_auth: Some(harness_auth),
            secret_driver_id: uses_secrets.then(|| self.secrets.identity().id),
            secret_bindings: (!secret_bindings.is_empty()).then_some(secret_bindings),
            account_credential,
        };
        let new = NewRevision {
            id: RevisionId::generate(),
            namespace_id: ns.clone(),
            agent_id: id.clone(),
            backend_id,
            spec,
            source_revision_id,
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

    /// A redeploy reuses the source revision's harness and Compute identities, so the worker
    /// would refuse it (`HARNESS_DESCRIPTOR_MISMATCH`, `COMPUTE_DRIVER_MISMATCH`) if this
    /// installation no longer runs them: refuse it at admission instead.
    fn require_same_runtime(&self, rev: &AgentRevision) -> Result<(), Error> {
        if rev.spec.compute != self.compute.identity {
            return Err(Error::conflict(format!(
                "Revision {} was admitted for the {} Compute Driver ({}), which this installation \
                 no longer uses; deploy the Agent's Configuration instead",
                rev.revision, rev.spec.compute.implementation, rev.spec.compute.id
            )));
        }
        let approved = self.settings.harness(rev.spec.harness.mode);
        if rev.spec.harness != approved {
            return Err(Error::conflict(format!(
                "Revision {} was admitted for {} {}, but this installation runs {}; deploy the \
                 Agent's Configuration instead",
                rev.revision, rev.spec.harness.id, rev.spec.harness.version, approved.version
            )));
        }
        Ok(())
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

/// What a revision freezes of a `chatgpt_service_account` credential (409 when the account
/// cannot run a harness: no issued credential, a native reference, or an Agent that does not
/// select the Backend that issued it).
fn freeze_account_credential(
    sa: &ServiceAccount,
    backend_id: Option<&str>,
) -> Result<FrozenAccountCredential, Error> {
    match (&sa.binding, sa.credential_kind) {
        (
            Some(ServiceAccountBinding::Managed {
                backend_id: issuer,
                workspace_id,
                credential: Some(credential),
                ..
            }),
            Some(ServiceAccountCredentialKind::AccessToken),
        ) => {
            if backend_id != Some(issuer.as_str()) {
                return Err(Error::conflict(format!(
                    "ServiceAccount {} holds a credential of Backend {issuer:?}; the Agent must \
                     select it (backendId {issuer:?})",
                    sa.id
                )));
            }
            Ok(FrozenAccountCredential {
                service_account_id: sa.id.clone(),
                kind: ServiceAccountCredentialKind::AccessToken,
                backend_id: issuer.clone(),
                workspace_id: workspace_id.clone(),
                upstream_credential_id: credential.upstream_credential_id.clone(),
            })
        }
        (_, None) => Err(Error::conflict(format!(
            "ServiceAccount {} has no credential; issue one with POST \
             /namespaces/{}/service-accounts/{}/credentials",
            sa.id, sa.namespace_id, sa.id
        ))),
        (_, Some(_)) => Err(Error::conflict(format!(
            "ServiceAccount {} carries a native credential reference, which a harness cannot \
             run with: only a credential its Backend issued (access_token) can",
            sa.id
        ))),
    }
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
