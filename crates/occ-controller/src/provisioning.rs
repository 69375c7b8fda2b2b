//! Agent provisioning (`provisionAgent`, `getAgentProvisioning`, `retryAgentProvisioning`):
//! admission checks everything it can now — the caller's authority for every step, the document,
//! the references, the name — records the request with the ids planned for what the job will
//! create, and queues it; the worker ([`crate::worker`]) runs the steps. Only the actor who
//! admitted a job may read or retry it.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::provisioning::{
    ProvisionSpec, Provisioning, ProvisioningError, ProvisioningPhase, ProvisioningStatus,
};
use occ_core::work::{NewWork, WorkKey, WorkState};
use occ_core::{
    AgentId, ConfigurationId, Error, NamespaceId, ProvisioningId, ReasonCode, RequestId, Timestamp,
};
use std::borrow::BorrowMut;

use occ_store::{Authorized, StoreError, Tx};

use crate::namespaces::{live_namespace, require_accepting, require_ready};
use crate::{Controller, Request};

const PROVISION: &str = "openclaw.agents.provision";
const READ: &str = "openclaw.agents.provision.read";
const RETRY: &str = "openclaw.agents.provision.retry";

/// The validated body of `provisionAgent`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisionInput {
    /// The caller's idempotency key: the same key and request return the same job.
    pub request_id: RequestId,
    /// What to create.
    pub spec: ProvisionSpec,
}

impl Controller {
    /// The Namespace-wide grants every provisioning operation needs first: Installation
    /// `administer` (the job hands out Secret grants), Agent and Configuration `create`.
    async fn provisioning_authority(
        &self,
        req: &Request,
        ns: &NamespaceId,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        // The job's own record and work item are the Agent collection's `create`.
        let tx = self
            .write_authorized(
                req,
                Action::Create,
                &ResourceRef::collection(ResourceKind::Agent, ns),
                audit_action,
            )
            .await?;
        self.provisioning_authority_in(tx, req, ns, audit_action)
            .await
    }

    /// The rest of [`Self::provisioning_authority`] after the Agent collection's `create`.
    async fn provisioning_authority_in<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        ns: &NamespaceId,
        audit_action: &str,
    ) -> Result<T, Error> {
        let tx = self
            .authorize_in(
                tx,
                req,
                Action::Create,
                &ResourceRef::collection(ResourceKind::Configuration, ns),
                audit_action,
            )
            .await?;
        self.authorize_administer_in(tx, req, audit_action).await
    }

    /// Admits a provisioning job (202). The same caller's `requestId` with the same request
    /// returns the job it admitted (nothing new is queued); with another request it is a 409.
    pub async fn agent_provision(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: ProvisionInput,
    ) -> Result<Provisioning, Error> {
        let mut tx = self.provisioning_authority(req, ns, PROVISION).await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_accepting(&namespace)?;
        if namespace.existing_namespace.is_some() {
            require_ready(&namespace)?;
        }
        let actor = req.caller().principal_id.clone();
        let request_id = input.request_id.to_string();
        let spec = input.spec;
        let fingerprint = spec.fingerprint();
        if let Some(job) = tx.provisioning_find(ns, &actor, &request_id).await? {
            if job.fingerprint == fingerprint {
                return Ok(job);
            }
            return Err(Error::conflict(
                "This requestId was used for a different provisioning request; send a new requestId",
            ));
        }
        self.configurations
            .validate(&spec.configuration_values)
            .map_err(Error::from)?;
        let tx = self
            .authorize_bindings(tx, req, ns, &spec.secret_bindings, PROVISION)
            .await?;
        let mut tx = self
            .authorize_agent_credentials(
                tx,
                req,
                ns,
                spec.harness_auth.as_ref(),
                spec.backend_id.as_deref(),
                PROVISION,
            )
            .await?;
        self.require_new_agent(&mut tx, ns, &spec.name, spec.workspace_defaults_id.as_ref())
            .await?;
        // What the first deploy would refuse is refused now, before anything is made.
        let auth = spec.harness_auth.as_ref().ok_or_else(|| {
            Error::conflict(
                "The Agent needs a harnessAuth to be deployed; give one (e.g. {\"method\": \"runtime\"})",
            )
        })?;
        if let Some(refusal) = self
            .compute
            .refusal(spec.execution_mode, Some(auth))
            .or_else(|| {
                self.compute
                    .secret_refusal(!spec.secret_bindings.is_empty())
            })
        {
            return Err(Error::conflict(refusal));
        }
        let planned_agent_id = AgentId::generate();
        // The job deploys the Agent it creates with the caller's authority: a caller who could
        // create it but not deploy it would get a job bound to fail at its last step.
        let mut tx = self
            .authorize_in(
                tx,
                req,
                Action::Deploy,
                &ResourceRef::exact(ResourceKind::Agent, ns, &planned_agent_id),
                PROVISION,
            )
            .await?;
        let now = Timestamp::now();
        let job = Provisioning {
            id: ProvisioningId::generate(),
            namespace_id: ns.clone(),
            actor_id: actor.clone(),
            request_id,
            fingerprint,
            spec,
            status: ProvisioningStatus::Queued,
            phase: ProvisioningPhase::Admitted,
            attempt_count: 0,
            run: 1,
            planned_configuration_id: ConfigurationId::generate(),
            planned_agent_id,
            configuration_id: None,
            agent_id: None,
            revision_id: None,
            error: None,
            created_at: now,
            updated_at: now,
        };
        tx.provisioning_insert(&job).await.map_err(|e| match e {
            // The same requestId admitted concurrently: the caller resends and gets that job.
            StoreError::Conflict { .. } => Error::conflict(
                "A provisioning request with this requestId is being admitted; send it again",
            ),
            other => other.into(),
        })?;
        tx.work_enqueue(&NewWork::agent_provisioning(ns, &job.id, &actor, job.run))
            .await?;
        let event = self
            .mutation(
                req,
                PROVISION,
                &ResourceRef::exact(ResourceKind::Agent, ns, &job.planned_agent_id),
                tx.evidence(),
            )
            .detail("workId", job.id.as_str())
            .detail("configurationId", job.planned_configuration_id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(job)
    }

    /// A job the caller admitted (404 for anyone else's).
    pub async fn agent_provisioning_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ProvisioningId,
    ) -> Result<Provisioning, Error> {
        let (tx, _) = self
            .read_authorized(
                req,
                Action::Create,
                &ResourceRef::collection(ResourceKind::Agent, ns),
                READ,
            )
            .await?;
        let mut tx = self.provisioning_authority_in(tx, req, ns, READ).await?;
        live_namespace(&mut tx, ns).await?;
        let job = own_job(tx.provisioning_get(ns, id).await?, req)?;
        abandoned_as_failed(&mut tx, job).await
    }

    /// Re-queues a failed job (202): it resumes at the step that failed, reusing what earlier
    /// runs created. Only a failed job can be retried (409 otherwise).
    pub async fn agent_provisioning_retry(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ProvisioningId,
    ) -> Result<Provisioning, Error> {
        let mut tx = self.provisioning_authority(req, ns, RETRY).await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_accepting(&namespace)?;
        let job = own_job(tx.provisioning_get(ns, id).await?, req)?;
        let mut job = abandoned_as_failed(&mut tx, job).await?;
        if job.status != ProvisioningStatus::Failed {
            return Err(Error::conflict(format!(
                "Only a failed provisioning job can be retried; this one is {}",
                job.status.as_str()
            )));
        }
        job.status = ProvisioningStatus::Queued;
        job.error = None;
        job.run += 1;
        tx.provisioning_record(&job).await?;
        tx.work_enqueue(&NewWork::agent_provisioning(
            ns,
            &job.id,
            &job.actor_id,
            job.run,
        ))
        .await?;
        let event = self
            .mutation(
                req,
                RETRY,
                &ResourceRef::exact(ResourceKind::Agent, ns, &job.planned_agent_id),
                tx.evidence(),
            )
            .detail("workId", job.id.as_str())
            .detail("phase", job.phase.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        job.updated_at = Timestamp::now();
        Ok(job)
    }
}

/// A job whose current work item the queue gave up on (a worker kept crashing or losing its
/// lease until the attempts were spent) is failed, though no run was left to record it.
async fn abandoned_as_failed(tx: &mut Tx, mut job: Provisioning) -> Result<Provisioning, Error> {
    if matches!(
        job.status,
        ProvisioningStatus::Queued | ProvisioningStatus::Running
    ) {
        let key = WorkKey::agent_provisioning(&job.id, job.run);
        if let Some(work) = tx.work_get(&key).await?
            && work.state == WorkState::FailedPermanent
        {
            job.status = ProvisioningStatus::Failed;
            job.error = Some(ProvisioningError::new(
                work.reason_code
                    .as_deref()
                    .unwrap_or(ReasonCode::MaxAttemptsExhausted.as_str()),
                "The worker gave up on this job; retry it",
            ));
        }
    }
    Ok(job)
}

/// The job when the caller admitted it; 404 otherwise (another actor's job is not theirs to see).
fn own_job(job: Option<Provisioning>, req: &Request) -> Result<Provisioning, Error> {
    match job {
        Some(job) if job.actor_id == req.caller().principal_id => Ok(job),
        _ => Err(Error::not_found()),
    }
}

/// The Role an Agent's identity is granted its Secrets with: exactly `secret:operate` (the
/// console's Secret access uses the same one).
const SECRET_USER_ROLE: &str = "secret-user";

impl Controller {
    /// Lets an Agent's identity use each of `secrets` (an exact binding of the Namespace's
    /// `secret:operate` Role, created once): what was granted before is left as it is, so a
    /// retried job grants nothing twice. Each binding is created and audited like
    /// `POST …/iam/access-bindings` under the caller's authority.
    pub(crate) async fn grant_agent_secrets(
        &self,
        req: &Request,
        ns: &NamespaceId,
        principal: &occ_core::IamId,
        secrets: &[occ_core::SecretId],
    ) -> Result<(), Error> {
        use crate::iam::{BindingInput, BindingTarget, RoleInput};
        use occ_core::authz::Permission;
        use occ_core::iam::BoundResource;

        if secrets.is_empty() {
            return Ok(());
        }
        let operate = vec![Permission::new(Action::Operate, ResourceKind::Secret)];
        let mut tx = self.store.begin_read().await?;
        let role = tx
            .role_list(ns)
            .await?
            .into_iter()
            .find(|r| r.permissions == operate);
        let bindings = tx.binding_list(ns).await?;
        drop(tx);
        let role_id = match role {
            Some(role) => role.id,
            None => {
                let input = RoleInput {
                    name: Some(SECRET_USER_ROLE.to_owned()),
                    permissions: operate,
                };
                self.role_create(req, ns, input).await?.id
            }
        };
        for secret in secrets {
            let target = BoundResource {
                kind: ResourceKind::Secret,
                id: secret.to_string(),
            };
            let held = bindings.iter().any(|b| {
                &b.subject_id == principal
                    && b.role_id == role_id
                    && b.resource.as_ref() == Some(&target)
            });
            if held {
                continue;
            }
            let input = BindingInput {
                subject_id: principal.clone(),
                role_id: role_id.clone(),
                target: BindingTarget::Resource {
                    kind: ResourceKind::Secret,
                    id: secret.to_string(),
                },
                runtime_role: None,
            };
            self.binding_create(req, ns, input).await?;
        }
        Ok(())
    }
}
