//! Immutable AgentRevisions. The database refuses every UPDATE and any DELETE that is not the
//! cascade of deleting the owning Agent; `revision_number` is unique per Agent.

use occ_core::resource::AgentRevision;
use occ_core::{AgentId, NamespaceId, RevisionId};

use crate::db::{Row, sql};
use crate::{StoreError, Tx};

macro_rules! rev_cols {
    () => {
        "id, namespace_id, agent_id, revision_number, backend_id, admitted_spec, admitted_at"
    };
}

fn from_row(r: &Row) -> Result<AgentRevision, StoreError> {
    Ok(AgentRevision {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        agent_id: r.parse("agent_id")?,
        revision: r.count("revision_number")?,
        backend_id: r.opt_text("backend_id")?,
        spec: r.json_as("admitted_spec")?,
        created_at: r.time("admitted_at")?,
    })
}

impl Tx {
    /// The next revision number of an Agent (1 + the number of earlier revisions). Call with the
    /// Agent row locked so two admissions cannot pick the same number.
    pub async fn revision_next_number(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<u64, StoreError> {
        self.q(sql!(
            "SELECT COALESCE(MAX(revision_number), 0) + 1 AS n FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2"
        ))
        .bind(ns.as_str())
        .bind(agent.as_str())
        .fetch_one()
        .await?
        .count("n")
    }

    /// Inserts an admitted revision.
    pub async fn revision_insert(&mut self, rev: &AgentRevision) -> Result<(), StoreError> {
        let spec =
            serde_json::to_value(&rev.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let number = i64::try_from(rev.revision).map_err(|_| StoreError::Invariant {
            constraint: "agent_revisions_revision_number_check".into(),
        })?;
        self.q(sql!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, backend_id, admitted_spec, admitted_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(rev.id.as_str())
        .bind(rev.namespace_id.as_str())
        .bind(rev.agent_id.as_str())
        .bind(number)
        .bind(rev.backend_id.clone())
        .bind(spec)
        .bind(rev.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// A revision of exactly this Agent in exactly this Namespace.
    pub async fn revision_get(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
        id: &RevisionId,
    ) -> Result<Option<AgentRevision>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                rev_cols!(),
                " FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2 AND id = $3"
            )))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The revisions of an Agent, oldest first.
    pub async fn revision_list(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<Vec<AgentRevision>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                rev_cols!(),
                " FROM agent_revisions WHERE namespace_id = $1 AND agent_id = $2 ORDER BY revision_number"
            )))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }
}
