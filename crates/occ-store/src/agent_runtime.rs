//! What the worker last observed of each Agent's gateway (`agent_runtime`): one row per Agent,
//! for the revision observed last. Written by the worker only (observations, not admission);
//! read by the API's runtime view without asking the Compute Driver.

use occ_core::resource::{AgentRuntime, ObservedRuntimeState, RuntimeObservation};
use occ_core::{AgentId, NamespaceId, RevisionId, Timestamp};

use crate::db::{Row, sql};
use crate::{StoreError, Tx};

macro_rules! runtime_cols {
    () => {
        "namespace_id, agent_id, revision_id, state, restarts, last_exit_at, last_exit_status, observed_at"
    };
}

fn from_row(r: &Row) -> Result<AgentRuntime, StoreError> {
    Ok(AgentRuntime {
        namespace_id: r.parse("namespace_id")?,
        agent_id: r.parse("agent_id")?,
        revision_id: r.parse("revision_id")?,
        state: r.enum_of("state", ObservedRuntimeState::parse)?,
        restarts: u64::try_from(r.int("restarts")?)
            .map_err(|_| StoreError::Corrupt("negative restart count".into()))?,
        last_exit_at: r.opt_time("last_exit_at")?,
        last_exit_status: r.opt_text("last_exit_status")?,
        observed_at: r.time("observed_at")?,
    })
}

impl Tx {
    /// The Agent's last runtime observation, if the worker has made one.
    pub async fn agent_runtime_get(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<Option<AgentRuntime>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                runtime_cols!(),
                " FROM agent_runtime WHERE namespace_id = $1 AND agent_id = $2"
            )))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Records `observation` of the Agent's revision `rev` (see [`AgentRuntime::observe`]) and
    /// returns the record. The previous record is locked first, so concurrent observations of
    /// one Agent apply one after the other.
    pub async fn agent_runtime_observe(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        observation: &RuntimeObservation,
    ) -> Result<AgentRuntime, StoreError> {
        let previous = self
            .q(sql!(concat!(
                "SELECT ",
                runtime_cols!(),
                " FROM agent_runtime WHERE namespace_id = $1 AND agent_id = $2 {{for_update}}"
            )))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .fetch_optional()
            .await?
            .as_ref()
            .map(from_row)
            .transpose()?;
        let next = AgentRuntime::observe(
            previous.as_ref(),
            (ns, agent, rev),
            observation,
            Timestamp::now(),
        );
        self.q(sql!(
            "INSERT INTO agent_runtime (namespace_id, agent_id, revision_id, state, restarts, \
             last_exit_at, last_exit_status, observed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (namespace_id, agent_id) DO UPDATE SET revision_id = excluded.revision_id, \
             state = excluded.state, restarts = excluded.restarts, last_exit_at = excluded.last_exit_at, \
             last_exit_status = excluded.last_exit_status, observed_at = excluded.observed_at"
        ))
        .bind(ns.as_str())
        .bind(agent.as_str())
        .bind(rev.as_str())
        .bind(next.state.as_str())
        .bind(i64::try_from(next.restarts).unwrap_or(i64::MAX))
        .bind(next.last_exit_at)
        .bind(next.last_exit_status.clone())
        .bind(next.observed_at)
        .execute()
        .await?;
        Ok(next)
    }
}
