//! Private staging of an Agent's initial workspace files. Completion erases the staged bytes
//! (`completed ⇔ files IS NULL`, enforced by the database) and keeps the identity.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::WorkspaceSetup;
use occ_core::{AgentId, NamespaceId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

fn from_row(r: &Row) -> Result<WorkspaceSetup, StoreError> {
    Ok(WorkspaceSetup {
        id: r.text("id")?,
        namespace_id: r.parse("namespace_id")?,
        agent_id: r.parse("agent_id")?,
        defaults_id: r.opt_text("defaults_id")?,
        files: r.opt_json_as("files")?,
        completed: r.boolean("completed")?,
    })
}

impl Tx {
    /// The setup record of an Agent, if it was created with initial files.
    pub async fn workspace_setup_get(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<Option<WorkspaceSetup>, StoreError> {
        let row = self
            .q(sql!(
                "SELECT id, namespace_id, agent_id, defaults_id, files, completed FROM workspace_setups \
                 WHERE namespace_id = $1 AND agent_id = $2"
            ))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Marks the setup completed and erases the staged bytes. Returns whether it was pending.
    pub async fn workspace_setup_complete(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<bool, StoreError> {
        let n = self
            .q(sql!(
                "UPDATE workspace_setups SET completed = true, files = NULL \
                 WHERE namespace_id = $1 AND agent_id = $2 AND completed = false"
            ))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .execute()
            .await?;
        Ok(n == 1)
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Stages the initial files of a new Agent.
    pub async fn workspace_setup_insert(
        &mut self,
        setup: &WorkspaceSetup,
    ) -> Result<(), StoreError> {
        // Staged with the Agent it belongs to.
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Agent, &setup.namespace_id),
        )?;
        let files = setup
            .files
            .as_ref()
            .map(|f| serde_json::to_value(f).map_err(|e| StoreError::Corrupt(e.to_string())))
            .transpose()?;
        self.q(sql!(
            "INSERT INTO workspace_setups (id, namespace_id, agent_id, defaults_id, files, completed) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(setup.id.as_str())
        .bind(setup.namespace_id.as_str())
        .bind(setup.agent_id.as_str())
        .bind(setup.defaults_id.clone())
        .bind(files)
        .bind(setup.completed)
        .execute()
        .await?;
        Ok(())
    }

    /// Deletes the setup record of an Agent (at deletion request). Returns whether one existed.
    pub async fn workspace_setup_delete(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<bool, StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::Agent, ns, agent),
        )?;
        let n = self
            .q(sql!(
                "DELETE FROM workspace_setups WHERE namespace_id = $1 AND agent_id = $2"
            ))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .execute()
            .await?;
        Ok(n == 1)
    }
}
