//! Agent provisioning jobs (`agent_provisioning`, [`occ_core::provisioning`]). Admission inserts
//! a job together with its first work item; the worker records each step's result under its
//! claim's fence; a retry re-queues a failed job under a new work item.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::provisioning::{
    Provisioning, ProvisioningError, ProvisioningPhase, ProvisioningStatus,
};
use occ_core::{IamId, NamespaceId, ProvisioningId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! provisioning_cols {
    () => {
        "id, namespace_id, actor_id, request_id, fingerprint, spec, status, phase, attempt_count, run, \
         planned_configuration_id, planned_agent_id, configuration_id, agent_id, revision_id, \
         error_code, error_message, created_at, updated_at"
    };
}

fn count(r: &Row, col: &str) -> Result<u32, StoreError> {
    u32::try_from(r.int(col)?)
        .map_err(|_| StoreError::Corrupt(format!("column {col}: out of range")))
}

fn from_row(r: &Row) -> Result<Provisioning, StoreError> {
    let error = match (r.opt_text("error_code")?, r.opt_text("error_message")?) {
        (Some(code), Some(message)) => Some(ProvisioningError { code, message }),
        _ => None,
    };
    Ok(Provisioning {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        actor_id: r.parse("actor_id")?,
        request_id: r.text("request_id")?,
        fingerprint: r.text("fingerprint")?,
        spec: r.json_as("spec")?,
        status: r.enum_of("status", ProvisioningStatus::parse)?,
        phase: r.enum_of("phase", ProvisioningPhase::parse)?,
        attempt_count: count(r, "attempt_count")?,
        run: count(r, "run")?,
        planned_configuration_id: r.parse("planned_configuration_id")?,
        planned_agent_id: r.parse("planned_agent_id")?,
        configuration_id: r.opt_parse("configuration_id")?,
        agent_id: r.opt_parse("agent_id")?,
        revision_id: r.opt_parse("revision_id")?,
        error,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
    })
}

impl Tx {
    /// A job of exactly this Namespace.
    pub async fn provisioning_get(
        &mut self,
        ns: &NamespaceId,
        id: &ProvisioningId,
    ) -> Result<Option<Provisioning>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                provisioning_cols!(),
                " FROM agent_provisioning WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The job `actor` admitted in this Namespace under `request_id`, if any.
    pub async fn provisioning_find(
        &mut self,
        ns: &NamespaceId,
        actor: &IamId,
        request_id: &str,
    ) -> Result<Option<Provisioning>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                provisioning_cols!(),
                " FROM agent_provisioning WHERE namespace_id = $1 AND actor_id = $2 AND request_id = $3"
            )))
            .bind(ns.as_str())
            .bind(actor.as_str())
            .bind(request_id)
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Whether the Namespace has a job that is not finished (Namespace deletion waits for it).
    pub async fn provisioning_unfinished(&mut self, ns: &NamespaceId) -> Result<bool, StoreError> {
        let row = self
            .q(sql!(
                "SELECT COUNT(*) AS n FROM agent_provisioning WHERE namespace_id = $1 \
                 AND status IN ('queued', 'running')"
            ))
            .bind(ns.as_str())
            .fetch_one()
            .await?;
        Ok(row.count("n")? > 0)
    }

    /// Records a job's progress: status, phase, counters, what exists, and its error. The
    /// worker calls it under its claim's fence; a retry under the retry's decision.
    pub async fn provisioning_record(&mut self, job: &Provisioning) -> Result<(), StoreError> {
        let n = self
            .q(sql!(
                "UPDATE agent_provisioning SET status = $3, phase = $4, attempt_count = $5, run = $6, \
                 configuration_id = $7, agent_id = $8, revision_id = $9, error_code = $10, \
                 error_message = $11, updated_at = {{now}} WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(job.namespace_id.as_str())
            .bind(job.id.as_str())
            .bind(job.status.as_str())
            .bind(job.phase.as_str())
            .bind(i64::from(job.attempt_count))
            .bind(i64::from(job.run))
            .bind(job.configuration_id.as_ref().map(|c| c.to_string()))
            .bind(job.agent_id.as_ref().map(|a| a.to_string()))
            .bind(job.revision_id.as_ref().map(|r| r.to_string()))
            .bind(job.error.as_ref().map(|e| e.code.clone()))
            .bind(job.error.as_ref().map(|e| e.message.clone()))
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts an admitted job; the same actor's `requestId` twice in a Namespace is a
    /// [`StoreError::Conflict`].
    pub async fn provisioning_insert(&mut self, job: &Provisioning) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Agent, &job.namespace_id),
        )?;
        let spec = serde_json::to_value(&job.spec)
            .map_err(|e| StoreError::Corrupt(format!("provisioning spec: {e}")))?;
        self.q(sql!(concat!(
            "INSERT INTO agent_provisioning (",
            provisioning_cols!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)"
        )))
        .bind(job.id.as_str())
        .bind(job.namespace_id.as_str())
        .bind(job.actor_id.as_str())
        .bind(job.request_id.as_str())
        .bind(job.fingerprint.as_str())
        .bind(spec)
        .bind(job.status.as_str())
        .bind(job.phase.as_str())
        .bind(i64::from(job.attempt_count))
        .bind(i64::from(job.run))
        .bind(job.planned_configuration_id.as_str())
        .bind(job.planned_agent_id.as_str())
        .bind(job.configuration_id.as_ref().map(|c| c.to_string()))
        .bind(job.agent_id.as_ref().map(|a| a.to_string()))
        .bind(job.revision_id.as_ref().map(|r| r.to_string()))
        .bind(job.error.as_ref().map(|e| e.code.clone()))
        .bind(job.error.as_ref().map(|e| e.message.clone()))
        .bind(job.created_at)
        .execute()
        .await?;
        Ok(())
    }
}
