//! Agents: list (filtered per item), create (stopped, no revision, no work; optional initial
//! workspace files staged privately), get, update (omitted keeps, `null` clears), delete
//! (`deleting`, desired `stopped`, deletion work queued).

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{
    Agent, AgentRuntime, AgentStatus, DesiredRuntimeState, ExecutionMode, HarnessAuth,
    WorkspaceFiles, WorkspaceSetup,
};
use occ_core::work::NewWork;
use occ_core::{AgentId, ConfigurationId, Error, ErrorCode, IamId, Name, NamespaceId, Timestamp};
use occ_store::agents::AgentDraft;
use occ_store::{Authorized, StoreError};

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_accepting};
use crate::{Controller, Request};

/// A field of a partial update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Patch<T> {
    /// Omitted: keep the current value.
    #[default]
    Keep,
    /// `null`: clear it.
    Clear,
    /// A new value.
    Set(T),
}

impl<T: Clone> Patch<T> {
    fn apply(&self, current: Option<T>) -> Option<T> {
        match self {
            Patch::Keep => current,
            Patch::Clear => None,
            Patch::Set(v) => Some(v.clone()),
        }
    }
}

/// The validated body of Agent creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInput {
    /// Unique per Namespace.
    pub name: Name,
    /// Same-Namespace Configuration.
    pub configuration_id: ConfigurationId,
    /// Default `embedded`.
    pub execution_mode: ExecutionMode,
    /// Optional Backend.
    pub backend_id: Option<String>,
    /// Harness authentication.
    pub harness_auth: Option<HarnessAuth>,
    /// Initial workspace files (non-empty), staged privately.
    pub initial_workspace_files: Option<WorkspaceFiles>,
    /// The defaults identity the form was rendered with.
    pub workspace_defaults_id: Option<String>,
}

/// The validated body of an Agent update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUpdate {
    /// The Configuration (required).
    pub configuration_id: ConfigurationId,
    /// Execution mode (omitted keeps).
    pub execution_mode: Option<ExecutionMode>,
    /// Backend.
    pub backend_id: Patch<String>,
    /// Harness authentication.
    pub harness_auth: Patch<HarnessAuth>,
}

/// What an Agent draft points at, checked on create and update.
struct DraftReferences<'a> {
    configuration_id: &'a ConfigurationId,
    harness_auth: Option<&'a HarnessAuth>,
    backend_id: Option<&'a str>,
}

impl Controller {
    /// Checks what an Agent draft references: the Configuration (exact read; 404 when not in
    /// this Namespace), the harness auth source (exists; the caller may operate the Secret or
    /// read the ServiceAccount) and the Backend (configured).
    async fn authorize_draft_references(
        &self,
        tx: Authorized,
        req: &Request,
        ns: &NamespaceId,
        draft: DraftReferences<'_>,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        let DraftReferences {
            configuration_id,
            harness_auth,
            backend_id,
        } = draft;
        let cfg_ref = ResourceRef::exact(ResourceKind::Configuration, ns, configuration_id);
        let mut tx = self
            .authorize_in(tx, req, Action::Read, &cfg_ref, audit_action)
            .await?;
        let cfg = found(tx.configuration_get(ns, configuration_id).await?)?;
        let tx = self
            .authorize_bindings(tx, req, ns, &cfg.secret_bindings, audit_action)
            .await?;
        self.authorize_agent_credentials(tx, req, ns, harness_auth, backend_id, audit_action)
            .await
    }

    /// What a new Agent needs besides its references (409 otherwise): a name no Agent of the
    /// Namespace has, and the workspace file defaults the form was rendered with still current.
    pub(crate) async fn require_new_agent(
        &self,
        tx: &mut Authorized,
        ns: &NamespaceId,
        name: &str,
        workspace_defaults_id: Option<&String>,
    ) -> Result<(), Error> {
        if let (Some(given), Some(current)) = (
            workspace_defaults_id,
            self.settings.workspace_defaults.as_ref().map(|d| &d.id),
        ) && given != current
        {
            return Err(Error::conflict(
                "The workspace file defaults changed since the form was loaded; reload it and submit again",
            ));
        }
        if tx
            .agent_list(ns)
            .await?
            .iter()
            .any(|a| a.name.as_str() == name)
        {
            return Err(Error::conflict("An Agent with this name already exists"));
        }
        Ok(())
    }

    /// Checks an Agent's harness auth source (exists; the caller may operate the Secret or
    /// read the ServiceAccount) and its Backend (configured).
    pub(crate) async fn authorize_agent_credentials(
        &self,
        mut tx: Authorized,
        req: &Request,
        ns: &NamespaceId,
        harness_auth: Option<&HarnessAuth>,
        backend_id: Option<&str>,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        match harness_auth {
            Some(HarnessAuth::ApiKey { source } | HarnessAuth::CodexPat { source }) => {
                let target = ResourceRef::exact(ResourceKind::Secret, ns, &source.id);
                tx = self
                    .authorize_in(tx, req, Action::Operate, &target, audit_action)
                    .await?;
                found(tx.secret_get(ns, &source.id).await?)?;
            }
            Some(HarnessAuth::ChatgptServiceAccount { service_account_id }) => {
                let target =
                    ResourceRef::exact(ResourceKind::ServiceAccount, ns, service_account_id);
                tx = self
                    .authorize_in(tx, req, Action::Read, &target, audit_action)
                    .await?;
                found(tx.service_account_get(ns, service_account_id).await?)?;
            }
            Some(HarnessAuth::Runtime {}) | None => {}
        }
        if let Some(backend) = backend_id
            && !self.settings.backends.iter().any(|b| b.id == backend)
        {
            return Err(Error::not_found());
        }
        Ok(tx)
    }

    /// Agents of a Namespace the caller may read.
    pub async fn agent_list(&self, req: &Request, ns: &NamespaceId) -> Result<Vec<Agent>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.agents.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let all = tx.agent_list(ns).await?;
        Self::readable(&mut tx, req, ns, ResourceKind::Agent, all, |a| &a.id).await
    }

    /// Creates an Agent: `stopped`, no revision, no work. Initial workspace files are staged
    /// privately and never echoed or audited.
    pub async fn agent_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: AgentInput,
    ) -> Result<Agent, Error> {
        self.agent_create_as(req, ns, AgentId::generate(), input)
            .await
    }

    /// Creates an Agent under a given id (a provisioning job's planned id).
    pub(crate) async fn agent_create_as(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: AgentId,
        input: AgentInput,
    ) -> Result<Agent, Error> {
        let collection = ResourceRef::collection(ResourceKind::Agent, ns);
        let mut tx = self
            .write_authorized(req, Action::Create, &collection, "openclaw.agents.create")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_accepting(&namespace)?;
        let mut tx = self
            .authorize_draft_references(
                tx,
                req,
                ns,
                DraftReferences {
                    configuration_id: &input.configuration_id,
                    harness_auth: input.harness_auth.as_ref(),
                    backend_id: input.backend_id.as_deref(),
                },
                "openclaw.agents.create",
            )
            .await?;
        self.require_new_agent(
            &mut tx,
            ns,
            input.name.as_str(),
            input.workspace_defaults_id.as_ref(),
        )
        .await?;
        let agent = Agent {
            service_principal_id: IamId::agent_service_principal(&id),
            id,
            namespace_id: ns.clone(),
            name: input.name,
            configuration_id: input.configuration_id,
            backend_id: input.backend_id,
            execution_mode: input.execution_mode,
            harness_auth: input.harness_auth,
            active_revision_id: None,
            desired_runtime_state: DesiredRuntimeState::Stopped,
            status: AgentStatus::Active,
            created_at: Timestamp::now(),
        };
        tx.agent_insert(&agent).await.map_err(|e| match e {
            StoreError::Conflict { .. } => {
                Error::conflict("An Agent with this name already exists")
            }
            StoreError::Reference { .. } => Error::not_found(),
            other => other.into(),
        })?;
        if let Some(files) = input.initial_workspace_files {
            let setup = WorkspaceSetup {
                id: format!("wss_{}", uuid::Uuid::new_v4()),
                namespace_id: ns.clone(),
                agent_id: agent.id.clone(),
                defaults_id: input.workspace_defaults_id.clone(),
                files: Some(files),
                completed: false,
            };
            tx.workspace_setup_insert(&setup).await?;
        }
        let target = ResourceRef::exact(ResourceKind::Agent, ns, &agent.id);
        let event = self
            .mutation(req, "openclaw.agents.create", &target, tx.evidence())
            .detail("configurationId", agent.configuration_id.as_str())
            .detail("servicePrincipalId", agent.service_principal_id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(agent)
    }

    /// One Agent.
    pub async fn agent_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Agent, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.agents.read")
            .await?;
        found(tx.agent_get(ns, id).await?)
    }

    /// The Agent with what the worker last observed of its gateway (`None` before any
    /// observation). Read from platform state only: the Compute Driver is not asked.
    pub async fn agent_runtime(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<(Agent, Option<AgentRuntime>), Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.agents.read")
            .await?;
        let agent = found(tx.agent_get(ns, id).await?)?;
        let runtime = tx.agent_runtime_get(ns, id).await?;
        Ok((agent, runtime))
    }

    /// Updates the draft. Never creates a revision or queues work.
    pub async fn agent_update(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        update: AgentUpdate,
    ) -> Result<Agent, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Update, &target, "openclaw.agents.update")
            .await?;
        let agent = found(tx.agent_lock(ns, id).await?)?;
        if agent.status == AgentStatus::Deleting {
            return Err(agent_deleting());
        }
        let draft = AgentDraft {
            configuration_id: update.configuration_id,
            backend_id: update.backend_id.apply(agent.backend_id.clone()),
            execution_mode: update.execution_mode.unwrap_or(agent.execution_mode),
            harness_auth: update.harness_auth.apply(agent.harness_auth.clone()),
        };
        let mut tx = self
            .authorize_draft_references(
                tx,
                req,
                ns,
                DraftReferences {
                    configuration_id: &draft.configuration_id,
                    harness_auth: draft.harness_auth.as_ref(),
                    backend_id: draft.backend_id.as_deref(),
                },
                "openclaw.agents.update",
            )
            .await?;
        if !tx
            .agent_update_draft(ns, id, &draft)
            .await
            .map_err(|e| match e {
                StoreError::Reference { .. } => Error::not_found(),
                other => other.into(),
            })?
        {
            return Err(Error::conflict("The Agent changed concurrently; retry"));
        }
        let event = self
            .mutation(req, "openclaw.agents.update", &target, tx.evidence())
            .detail("configurationId", draft.configuration_id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(Agent {
            configuration_id: draft.configuration_id,
            backend_id: draft.backend_id,
            execution_mode: draft.execution_mode,
            harness_auth: draft.harness_auth,
            ..agent
        })
    }

    /// Starts deleting an Agent: `deleting`, desired `stopped`, its staged setup removed and its
    /// deletion work queued. Repeating it changes nothing.
    pub async fn agent_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Agent, Error> {
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Delete, &target, "openclaw.agents.delete")
            .await?;
        let agent = found(tx.agent_lock(ns, id).await?)?;
        if agent.status == AgentStatus::Deleting {
            return Ok(agent);
        }
        tx.agent_mark_deleting(ns, id).await?;
        tx.workspace_setup_delete(ns, id).await?;
        tx.work_enqueue(&NewWork::agent_deleted(ns, id, &req.caller.principal_id))
            .await?;
        let event = self.mutation(req, "openclaw.agents.delete", &target, tx.evidence());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(Agent {
            status: AgentStatus::Deleting,
            desired_runtime_state: DesiredRuntimeState::Stopped,
            ..agent
        })
    }
}

/// 409 `AGENT_DELETING`.
pub(crate) fn agent_deleting() -> Error {
    Error::new(ErrorCode::AgentDeleting, "The Agent is being deleted")
}
