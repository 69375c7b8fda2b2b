//! Agents: the editable draft, its service principal, desired state and the active-revision
//! pointer. Only the worker moves the pointer, and only by compare-and-swap.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{Agent, AgentStatus, DesiredRuntimeState, ExecutionMode, HarnessAuth};
use occ_core::{AgentId, ConfigurationId, NamespaceId, RevisionId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! agent_cols {
    () => {
        "id, namespace_id, name, configuration_id, backend_id, execution_mode, service_principal_id, \
         harness_auth, active_revision_id, desired_runtime_state, status, created_at"
    };
}

fn from_row(r: &Row) -> Result<Agent, StoreError> {
    Ok(Agent {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        name: r.parse("name")?,
        service_principal_id: r.parse("service_principal_id")?,
        configuration_id: r.parse("configuration_id")?,
        backend_id: r.opt_text("backend_id")?,
        execution_mode: r.enum_of("execution_mode", ExecutionMode::parse)?,
        harness_auth: r.opt_json_as("harness_auth")?,
        active_revision_id: r.opt_parse("active_revision_id")?,
        desired_runtime_state: r.enum_of("desired_runtime_state", DesiredRuntimeState::parse)?,
        status: r.enum_of("status", AgentStatus::parse)?,
        created_at: r.time("created_at")?,
    })
}

fn harness_auth_json(auth: &Option<HarnessAuth>) -> Result<Option<serde_json::Value>, StoreError> {
    auth.as_ref()
        .map(|a| serde_json::to_value(a).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

/// The editable fields of an Agent draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDraft {
    /// The Configuration the next deploy freezes.
    pub configuration_id: ConfigurationId,
    /// Optional Backend.
    pub backend_id: Option<String>,
    /// Execution mode.
    pub execution_mode: ExecutionMode,
    /// Harness authentication.
    pub harness_auth: Option<HarnessAuth>,
}

impl Tx {
    /// An Agent in exactly this Namespace.
    pub async fn agent_get(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Option<Agent>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Like [`Tx::agent_get`], locking the row until the transaction ends.
    pub async fn agent_lock(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Option<Agent>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents WHERE namespace_id = $1 AND id = $2 {{for_update}}"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The Agents of a Namespace, oldest first.
    pub async fn agent_list(&mut self, ns: &NamespaceId) -> Result<Vec<Agent>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents WHERE namespace_id = $1 ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every Agent of the Installation, by Namespace and age, each with whether a deployment
    /// of it is queued or running (the deployment inventory).
    pub async fn agent_inventory(&mut self) -> Result<Vec<(Agent, bool)>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                agent_cols!(),
                ", EXISTS (SELECT 1 FROM controller_work w WHERE w.agent_id = agents.id \
                 AND w.revision_id IS NOT NULL AND w.state IN ('queued', 'claimed')) AS deployment_in_progress \
                 FROM agents ORDER BY namespace_id, created_at, id"
            )))
            .fetch_all()
            .await?;
        rows.iter()
            .map(|r| Ok((from_row(r)?, r.boolean("deployment_in_progress")?)))
            .collect()
    }

    /// Compare-and-swap of the active-revision pointer: `expected → new`. Returns whether it
    /// moved.
    pub async fn agent_swap_active_revision(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
        expected: Option<&RevisionId>,
        new: Option<&RevisionId>,
    ) -> Result<bool, StoreError> {
        let n = self
            .q(sql!(
                "UPDATE agents SET active_revision_id = $4 WHERE namespace_id = $1 AND id = $2 \
                 AND (active_revision_id = $3 OR (active_revision_id IS NULL AND $3 IS NULL))"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(expected.map(|r| r.to_string()))
            .bind(new.map(|r| r.to_string()))
            .execute()
            .await?;
        Ok(n == 1)
    }

    /// The deletion finalizer: removes a `deleting` Agent and everything it owns — its
    /// revisions, workspace setup, service principal (with its keys and bindings), bindings and
    /// Restrictions that target it or its revisions, and its work rows. The database refuses it
    /// unless the Agent is `deleting`. Returns the ids of the removed AccessBindings.
    pub async fn agent_finalize_deletion(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Vec<String>, StoreError> {
        let agent = self.agent_lock(ns, id).await?.ok_or(StoreError::NotFound)?;
        if agent.status != AgentStatus::Deleting {
            return Err(StoreError::Invariant {
                constraint: "agent_deletion_requires_deleting".into(),
            });
        }
        self.q(sql!(
            "UPDATE agents SET active_revision_id = NULL WHERE namespace_id = $1 AND id = $2"
        ))
        .bind(ns.as_str())
        .bind(id.as_str())
        .execute()
        .await?;
        let removed = self
            .q(sql!(
                "SELECT id FROM iam_access_bindings WHERE subject_id = $3 \
                 OR (resource_kind = 'agent' AND resource_id = $2) \
                 OR (resource_kind = 'agent_revision' AND resource_id IN \
                     (SELECT id FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2)) \
                 ORDER BY id"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(agent.service_principal_id.as_str())
            .fetch_all()
            .await?
            .iter()
            .map(|r| r.text("id"))
            .collect::<Result<Vec<_>, _>>()?;
        self.q(sql!(
            "DELETE FROM iam_access_bindings WHERE subject_id = $3 \
             OR (resource_kind = 'agent' AND resource_id = $2) \
             OR (resource_kind = 'agent_revision' AND resource_id IN \
                 (SELECT id FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2))"
        ))
        .bind(ns.as_str())
        .bind(id.as_str())
        .bind(agent.service_principal_id.as_str())
        .execute()
        .await?;
        self.q(sql!(
            "DELETE FROM iam_restrictions WHERE (resource_kind = 'agent' AND resource_id = $2) \
             OR (resource_kind = 'agent_revision' AND resource_id IN \
                 (SELECT id FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2))"
        ))
        .bind(ns.as_str())
        .bind(id.as_str())
        .execute()
        .await?;
        self.q(sql!(
            "DELETE FROM controller_work WHERE namespace_id = $1 AND agent_id = $2"
        ))
        .bind(ns.as_str())
        .bind(id.as_str())
        .execute()
        .await?;
        self.q(sql!(
            "DELETE FROM service_keys WHERE service_principal_id = $1"
        ))
        .bind(agent.service_principal_id.as_str())
        .execute()
        .await?;
        self.q(sql!(
            "DELETE FROM iam_identities WHERE id = $1 AND agent_id = $2"
        ))
        .bind(agent.service_principal_id.as_str())
        .bind(id.as_str())
        .execute()
        .await?;
        self.q(sql!(
            "DELETE FROM agents WHERE namespace_id = $1 AND id = $2"
        ))
        .bind(ns.as_str())
        .bind(id.as_str())
        .execute()
        .await?;
        Ok(removed)
    }

    /// How many Agents exist (all Namespaces).
    pub async fn agent_count(&mut self) -> Result<u64, StoreError> {
        self.q(sql!("SELECT count(*) AS n FROM agents"))
            .fetch_one()
            .await?
            .count("n")
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts an Agent together with the service principal it owns (`service-agent-<id>`).
    pub async fn agent_insert(&mut self, agent: &Agent) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Agent, &agent.namespace_id),
        )?;
        let auth = harness_auth_json(&agent.harness_auth)?;
        let secret_id = agent
            .harness_auth
            .as_ref()
            .and_then(HarnessAuth::secret_id)
            .map(|s| s.to_string());
        let sa_id = agent
            .harness_auth
            .as_ref()
            .and_then(HarnessAuth::service_account_id)
            .map(|s| s.to_string());
        self.q(sql!(
            "INSERT INTO agents (id, namespace_id, name, configuration_id, backend_id, execution_mode, \
             service_principal_id, harness_auth, harness_auth_secret_id, harness_auth_service_account_id, \
             active_revision_id, desired_runtime_state, status, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(agent.id.as_str())
        .bind(agent.namespace_id.as_str())
        .bind(agent.name.as_str())
        .bind(agent.configuration_id.as_str())
        .bind(agent.backend_id.clone())
        .bind(agent.execution_mode.as_str())
        .bind(agent.service_principal_id.as_str())
        .bind(auth)
        .bind(secret_id)
        .bind(sa_id)
        .bind(agent.active_revision_id.as_ref().map(|r| r.to_string()))
        .bind(agent.desired_runtime_state.as_str())
        .bind(agent.status.as_str())
        .bind(agent.created_at)
        .execute()
        .await?;
        self.q(sql!(
            "INSERT INTO iam_identities (id, kind, namespace_id, agent_id, created_at) \
             VALUES ($1, 'service_principal', $2, $3, $4)"
        ))
        .bind(agent.service_principal_id.as_str())
        .bind(agent.namespace_id.as_str())
        .bind(agent.id.as_str())
        .bind(agent.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Replaces the draft fields of an active Agent. Returns whether a row changed.
    pub async fn agent_update_draft(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
        draft: &AgentDraft,
    ) -> Result<bool, StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(ResourceKind::Agent, ns, id),
        )?;
        let auth = harness_auth_json(&draft.harness_auth)?;
        let secret_id = draft
            .harness_auth
            .as_ref()
            .and_then(HarnessAuth::secret_id)
            .map(|s| s.to_string());
        let sa_id = draft
            .harness_auth
            .as_ref()
            .and_then(HarnessAuth::service_account_id)
            .map(|s| s.to_string());
        let n = self
            .q(sql!(
                "UPDATE agents SET configuration_id = $3, backend_id = $4, execution_mode = $5, harness_auth = $6, \
                 harness_auth_secret_id = $7, harness_auth_service_account_id = $8 \
                 WHERE namespace_id = $1 AND id = $2 AND status = 'active'"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(draft.configuration_id.as_str())
            .bind(draft.backend_id.clone())
            .bind(draft.execution_mode.as_str())
            .bind(auth)
            .bind(secret_id)
            .bind(sa_id)
            .execute()
            .await?;
        Ok(n == 1)
    }

    /// Sets the desired runtime state of an active Agent. Returns whether a row changed.
    pub async fn agent_set_desired_state(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
        state: DesiredRuntimeState,
    ) -> Result<bool, StoreError> {
        // Deploy starts it, stop stops it.
        self.require(
            &[Action::Deploy, Action::Operate],
            &ResourceRef::exact(ResourceKind::Agent, ns, id),
        )?;
        let n = self
            .q(sql!(
                "UPDATE agents SET desired_runtime_state = $3 WHERE namespace_id = $1 AND id = $2 AND status = 'active'"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(state.as_str())
            .execute()
            .await?;
        Ok(n == 1)
    }

    /// Marks an Agent `deleting` (and `stopped`). Returns whether it was active before.
    pub async fn agent_mark_deleting(
        &mut self,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<bool, StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::Agent, ns, id),
        )?;
        let n = self
            .q(sql!(
                "UPDATE agents SET status = 'deleting', desired_runtime_state = 'stopped' \
                 WHERE namespace_id = $1 AND id = $2 AND status = 'active'"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .execute()
            .await?;
        Ok(n == 1)
    }
}
