//! Immutable AgentRevisions. The database refuses every UPDATE and any DELETE that is not the
//! cascade of deleting the owning Agent; `revision_number` is unique per Agent.

use occ_core::audit::AuditEvent;
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{AdmittedSpec, AgentRevision, DesiredRuntimeState};
use occ_core::work::NewWork;
use occ_core::{AgentId, IamId, NamespaceId, RevisionId, Timestamp};
use serde_json::Value;

use crate::db::{Backend, Row, sql};
use crate::{Authorized, StoreError, Tx};

/// A revision to admit; its number is assigned by [`Authorized::revision_admit`](crate::Authorized::revision_admit).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRevision {
    /// `rev_…`
    pub id: RevisionId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// The owning Agent.
    pub agent_id: AgentId,
    /// Backend at admission.
    pub backend_id: Option<String>,
    /// The frozen snapshot.
    pub spec: AdmittedSpec,
    /// The earlier revision of the same Agent the snapshot was taken from (a redeploy).
    pub source_revision_id: Option<RevisionId>,
    /// Admission time.
    pub admitted_at: Timestamp,
}

macro_rules! rev_cols {
    () => {
        "id, namespace_id, agent_id, revision_number, backend_id, admitted_spec, source_revision_id, admitted_at"
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
        source_revision_id: r.opt_parse("source_revision_id")?,
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

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts an admitted revision.
    pub async fn revision_insert(&mut self, rev: &AgentRevision) -> Result<(), StoreError> {
        self.require(
            &[Action::Deploy],
            &ResourceRef::exact(ResourceKind::Agent, &rev.namespace_id, &rev.agent_id),
        )?;
        let spec =
            serde_json::to_value(&rev.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let number = i64::try_from(rev.revision).map_err(|_| StoreError::Invariant {
            constraint: "agent_revisions_revision_number_check".into(),
        })?;
        self.q(sql!(
            "INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, backend_id, admitted_spec, \
             source_revision_id, admitted_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(rev.id.as_str())
        .bind(rev.namespace_id.as_str())
        .bind(rev.agent_id.as_str())
        .bind(number)
        .bind(rev.backend_id.clone())
        .bind(spec)
        .bind(rev.source_revision_id.as_ref().map(|id| id.to_string()))
        .bind(rev.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Admits a revision inside the caller's transaction: assigns the next revision number,
    /// inserts the immutable revision, sets the Agent's desired state `running`, enqueues
    /// `agent_revision:<rev>:reconcile` for `actor` and appends `event` — on PostgreSQL as one
    /// statement. Call with the Agent row locked ([`Tx::agent_lock`]) so concurrent admissions of
    /// one Agent serialize. [`StoreError::Stale`] when the Agent is not active.
    pub async fn revision_admit(
        &mut self,
        new: &NewRevision,
        actor: &IamId,
        event: &AuditEvent,
    ) -> Result<AgentRevision, StoreError> {
        self.require(
            &[Action::Deploy],
            &ResourceRef::exact(ResourceKind::Agent, &new.namespace_id, &new.agent_id),
        )?;
        let spec =
            serde_json::to_value(&new.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let number = match self.backend() {
            Backend::Postgres => {
                self.note_enqueued();
                let row = self
                    .q(sql!(
                        "WITH next AS (SELECT COALESCE(MAX(revision_number), 0) + 1 AS n FROM agent_revisions \
                           WHERE namespace_id = $2 AND agent_id = $3), \
                         rev AS (INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, backend_id, \
                           admitted_spec, admitted_at, source_revision_id) SELECT $1, $2, $3, n, $4, $5, $6, $18 FROM next \
                           RETURNING revision_number), \
                         agent AS (UPDATE agents SET desired_runtime_state = 'running' \
                           WHERE namespace_id = $2 AND id = $3 AND status = 'active' RETURNING id), \
                         work AS (INSERT INTO controller_work (idempotency_key, namespace_id, agent_id, revision_id, \
                           actor_id, state, available_at, attempt_count, created_at, updated_at) \
                           VALUES ('agent_revision:' || $1 || ':reconcile', $2, $3, $1, $7, 'queued', \
                           clock_timestamp(), 0, clock_timestamp(), clock_timestamp()) RETURNING 1), \
                         audit AS (INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, namespace_id, \
                           resource_kind, resource_id, outcome, details) \
                           VALUES ($8, $9, $10, $11, $12, $13, $14, $15, $16, $17) RETURNING 1) \
                         SELECT (SELECT revision_number FROM rev) AS revision_number, \
                           (SELECT count(*) FROM agent) AS agents, (SELECT count(*) FROM work) AS works"
                    ))
                    .bind(new.id.as_str())
                    .bind(new.namespace_id.as_str())
                    .bind(new.agent_id.as_str())
                    .bind(new.backend_id.clone())
                    .bind(spec)
                    .bind(new.admitted_at)
                    .bind(actor.as_str())
                    .bind(event.id.as_str())
                    .bind(event.occurred_at)
                    .bind(event.kind.as_str())
                    .bind(event.actor_id.as_str())
                    .bind(event.action.as_str())
                    .bind(event.namespace_id.as_ref().map(|n| n.to_string()))
                    .bind(event.resource_kind.as_str())
                    .bind(event.resource_id.as_str())
                    .bind(event.outcome.as_str())
                    .bind(Value::Object(event.details.clone()))
                    .bind(new.source_revision_id.as_ref().map(|id| id.to_string()))
                    .fetch_one()
                    .await?;
                if row.int("agents")? != 1 || row.int("works")? != 1 {
                    return Err(StoreError::Stale);
                }
                row.count("revision_number")?
            }
            Backend::Sqlite => {
                // In-process: separate statements cost no round trips.
                let number = self
                    .revision_next_number(&new.namespace_id, &new.agent_id)
                    .await?;
                let rev = AgentRevision {
                    id: new.id.clone(),
                    namespace_id: new.namespace_id.clone(),
                    agent_id: new.agent_id.clone(),
                    revision: number,
                    backend_id: new.backend_id.clone(),
                    spec: new.spec.clone(),
                    source_revision_id: new.source_revision_id.clone(),
                    created_at: new.admitted_at,
                };
                self.revision_insert(&rev).await?;
                if !self
                    .agent_set_desired_state(
                        &new.namespace_id,
                        &new.agent_id,
                        DesiredRuntimeState::Running,
                    )
                    .await?
                {
                    return Err(StoreError::Stale);
                }
                self.work_enqueue(&NewWork::revision_reconcile(
                    &new.namespace_id,
                    &new.agent_id,
                    &new.id,
                    actor,
                ))
                .await?;
                self.audit_append(event).await?;
                number
            }
        };
        Ok(AgentRevision {
            id: new.id.clone(),
            namespace_id: new.namespace_id.clone(),
            agent_id: new.agent_id.clone(),
            revision: number,
            backend_id: new.backend_id.clone(),
            spec: new.spec.clone(),
            source_revision_id: new.source_revision_id.clone(),
            created_at: new.admitted_at,
        })
    }
}
