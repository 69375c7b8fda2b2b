//! The durable work queue (`controller_work`).
//!
//! Admission enqueues inside its own transaction ([`Authorized::work_enqueue`](crate::Authorized::work_enqueue)); re-enqueueing the same
//! idempotency key returns the existing row, and the same key with a different owner or target
//! is a conflict. Workers claim with a lease ([`Store::work_claim`]): PostgreSQL picks with
//! `FOR UPDATE SKIP LOCKED`, SQLite under its single write lock, and the partial unique index
//! `controller_work_one_claim_per_resource` guarantees at most one live claim per Agent (or per
//! Namespace for Namespace work) whatever the race.
//!
//! Every claim-bound transition is fenced: it matches the row only while
//! `state = 'claimed' AND claim_token = <token> AND lease_expires_at > now` on the database
//! clock. A worker whose lease expired, or whose item was recovered by another worker, publishes
//! nothing: it gets [`StoreError::ClaimLost`]. Finalizers that change platform state call
//! [`Tx::work_fence`] first, inside the same transaction, so the state change, its audit and the
//! completion commit together or not at all.
//!
//! Transitions: complete (→ succeeded), defer (→ queued, attempt refunded: convergence pending),
//! retry (→ queued with backoff, attempt kept; → failed_permanent when attempts are exhausted),
//! fail (→ failed_permanent). Each writes a `reconcile` audit row
//! `{reasonCode, attemptCount, workId, final?}` in the same transaction.

use std::time::Duration;

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{ResourceKind, ResourceRef};
use occ_core::work::{
    NewWork, WorkItem, WorkKey, WorkState, WorkTarget, retry_backoff, sanitize_reason_code,
};
use occ_core::{AgentId, NamespaceId, ReasonCode, RevisionId, Timestamp};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::db::{Row, sql};
use crate::{Authorized, Store, StoreError, Tx};

macro_rules! work_cols {
    () => {
        "idempotency_key, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, state, \
         available_at, attempt_count, claim_token, lease_expires_at, completed_at, reason_code, result_data, \
         created_at, updated_at"
    };
}

fn target_of(r: &Row, key: &str) -> Result<WorkTarget, StoreError> {
    let ns = r.opt_text("namespace_target")?;
    let agent = r.opt_text("agent_target")?;
    let revision = r.opt_text("revision_id")?;
    Ok(match (ns.as_deref(), agent.as_deref(), revision) {
        (Some("ready"), None, None) => WorkTarget::NamespaceReady,
        (Some("deleted"), None, None) => WorkTarget::NamespaceDeleted,
        (None, Some("stopped"), None) => WorkTarget::AgentStopped,
        (None, Some("deleted"), None) => WorkTarget::AgentDeleted,
        (None, None, Some(_)) if key.contains(":maintenance:") => WorkTarget::RevisionMaintenance,
        (None, None, Some(_)) => WorkTarget::RevisionReconcile,
        (None, None, None) if key.starts_with("agent_provisioning:") => {
            WorkTarget::AgentProvisioning
        }
        _ => return Err(StoreError::Corrupt(format!("work {key}: unknown shape"))),
    })
}

fn item_from_row(r: &Row) -> Result<WorkItem, StoreError> {
    let key = r.text("idempotency_key")?;
    let attempt_count = u32::try_from(r.int("attempt_count")?)
        .map_err(|_| StoreError::Corrupt("column attempt_count: out of range".into()))?;
    Ok(WorkItem {
        target: target_of(r, &key)?,
        namespace_id: r.parse("namespace_id")?,
        agent_id: r.opt_parse("agent_id")?,
        revision_id: r.opt_parse("revision_id")?,
        actor_id: r.parse("actor_id")?,
        state: r.enum_of("state", WorkState::parse)?,
        available_at: r.time("available_at")?,
        attempt_count,
        claim_token: r.opt_parse("claim_token")?,
        lease_expires_at: r.opt_time("lease_expires_at")?,
        completed_at: r.opt_time("completed_at")?,
        reason_code: r.opt_text("reason_code")?,
        result_data: r.opt_json("result_data")?,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
        key: WorkKey::from_stored(key),
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Queue tuning shared by claim, retry and recovery.
#[derive(Debug, Clone, Copy)]
pub struct QueueOptions {
    /// Lease length; renew at least every third of it.
    pub lease: Duration,
    /// Attempts before a retried or abandoned item fails permanently.
    pub max_attempts: u32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(5),
            max_attempts: 5,
        }
    }
}

/// A live claim on one work item.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The item as it was when claimed.
    pub item: WorkItem,
    /// The fencing token.
    pub token: Uuid,
    /// The database clock at claim time.
    pub claimed_at: Timestamp,
}

impl Claim {
    /// The item's key.
    pub fn key(&self) -> &WorkKey {
        &self.item.key
    }

    /// Time since admission at claim time (deadlines count from admission).
    pub fn age(&self) -> Duration {
        let ms = self.claimed_at.unix_millis() - self.item.created_at.unix_millis();
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

/// What a recovery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Items whose expired claim was released back to the queue.
    pub requeued: Vec<WorkKey>,
    /// Items that failed permanently (`LEASE_EXPIRED` or `MAX_ATTEMPTS_EXHAUSTED`).
    pub failed: Vec<WorkKey>,
}

/// Queue gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    /// Queued plus claimed items (delayed ones included).
    pub pending: u64,
    /// Age of the oldest pending item since admission.
    pub oldest_pending_age: Duration,
}

fn evidence_resource(item: &WorkItem) -> ResourceRef {
    match (&item.revision_id, &item.agent_id) {
        (Some(rev), _) => ResourceRef::exact(ResourceKind::AgentRevision, &item.namespace_id, rev),
        (None, Some(agent)) => ResourceRef::exact(ResourceKind::Agent, &item.namespace_id, agent),
        (None, None) => ResourceRef::namespace(&item.namespace_id),
    }
}

impl Tx {
    /// Like [`Authorized::work_enqueue`], available only after `delay`: the worker schedules the
    /// next maintenance pass of an admitted revision when it settles the current one.
    pub async fn work_enqueue_after(
        &mut self,
        work: &NewWork,
        delay: Duration,
    ) -> Result<WorkItem, StoreError> {
        self.note_enqueued();
        let inserted = self
            .q(sql!(concat!(
                "INSERT INTO controller_work (idempotency_key, namespace_id, agent_id, revision_id, actor_id, \
                 namespace_target, agent_target, state, available_at, attempt_count, created_at, updated_at, work_kind) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', {{now_plus_ms:$8}}, 0, {{now}}, {{now}}, $9) \
                 ON CONFLICT (idempotency_key) DO NOTHING RETURNING ",
                work_cols!()
            )))
            .bind(work.key.as_str())
            .bind(work.namespace_id.as_str())
            .bind(work.agent_id.as_ref().map(|a| a.to_string()))
            .bind(work.revision_id.as_ref().map(|r| r.to_string()))
            .bind(work.actor_id.as_str())
            .bind(work.target.namespace_target())
            .bind(work.target.agent_target())
            .bind(millis(delay))
            .bind(work.target.work_kind())
            .fetch_optional()
            .await?;
        if let Some(row) = inserted {
            return item_from_row(&row);
        }
        let item = self
            .work_get(&work.key)
            .await?
            .ok_or(StoreError::NotFound)?;
        let same = item.namespace_id == work.namespace_id
            && item.agent_id == work.agent_id
            && item.revision_id == work.revision_id
            && item.actor_id == work.actor_id
            && item.target == work.target;
        if same {
            Ok(item)
        } else {
            Err(StoreError::Conflict {
                constraint: "controller_work_pkey".into(),
            })
        }
    }

    /// Makes the revision's queued maintenance pass available now: its gateway was reported
    /// down, and waiting out the interval would leave the Agent down that long. Whether one
    /// was queued (none is while a pass runs, or without maintenance).
    pub async fn work_expedite_maintenance(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
    ) -> Result<bool, StoreError> {
        let moved = self
            .q(sql!(
                "UPDATE controller_work SET available_at = {{now}}, updated_at = {{now}} \
                 WHERE namespace_id = $1 AND agent_id = $2 AND revision_id = $3 \
                 AND state = 'queued' AND idempotency_key LIKE '%:maintenance:%'"
            ))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .bind(rev.as_str())
            .execute()
            .await?;
        if moved > 0 {
            // Wake the claim loops as a new item would.
            self.note_enqueued();
        }
        Ok(moved > 0)
    }

    /// A work item by key.
    pub async fn work_get(&mut self, key: &WorkKey) -> Result<Option<WorkItem>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                work_cols!(),
                " FROM controller_work WHERE idempotency_key = $1"
            )))
            .bind(key.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(item_from_row).transpose()
    }

    /// The work items of an Agent, oldest first.
    pub async fn work_list_for_agent(
        &mut self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<Vec<WorkItem>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                work_cols!(),
                " FROM controller_work WHERE namespace_id = $1 AND agent_id = $2 ORDER BY created_at, idempotency_key"
            )))
            .bind(ns.as_str())
            .bind(agent.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(item_from_row).collect()
    }

    /// Renews the lease inside this transaction and locks the row until commit: call before any
    /// write that publishes a worker's result. [`StoreError::ClaimLost`] when the claim is gone.
    pub async fn work_fence(
        &mut self,
        claim: &Claim,
        lease: Duration,
    ) -> Result<Timestamp, StoreError> {
        let row = self
            .q(sql!(
                "UPDATE controller_work SET lease_expires_at = {{now_plus_ms:$3}}, updated_at = {{now}} \
                 WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at > {{now}} \
                 RETURNING lease_expires_at"
            ))
            .bind(claim.key().as_str())
            .bind(claim.token.to_string())
            .bind(millis(lease))
            .fetch_optional()
            .await?;
        match row {
            Some(r) => r.time("lease_expires_at"),
            None => Err(StoreError::ClaimLost),
        }
    }

    /// Completes the claimed item (→ `succeeded`) with a reason code and optional result data.
    pub async fn work_complete(
        &mut self,
        claim: &Claim,
        code: &str,
        result: Option<Value>,
    ) -> Result<(), StoreError> {
        let code = sanitize_reason_code(code);
        let row = self
            .q(sql!(
                "UPDATE controller_work SET state = 'succeeded', claim_token = NULL, lease_expires_at = NULL, \
                 completed_at = {{now}}, reason_code = $3, result_data = $4, updated_at = {{now}} \
                 WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at > {{now}} \
                 RETURNING attempt_count"
            ))
            .bind(claim.key().as_str())
            .bind(claim.token.to_string())
            .bind(code.as_str())
            .bind(result)
            .fetch_optional()
            .await?
            .ok_or(StoreError::ClaimLost)?;
        let attempts = row.count("attempt_count")?;
        self.work_evidence(&claim.item, &code, AuditOutcome::Success, attempts, false)
            .await
    }

    /// Defers the claimed item: convergence is pending, so it goes back to the queue after
    /// `delay` and the attempt is refunded. Evidence is recorded only when it differs from the
    /// latest evidence of the same item (or always, with `always_record`).
    pub async fn work_defer(
        &mut self,
        claim: &Claim,
        code: &str,
        delay: Duration,
        always_record: bool,
    ) -> Result<(), StoreError> {
        let code = sanitize_reason_code(code);
        let row = self
            .q(sql!(
                "UPDATE controller_work SET state = 'queued', claim_token = NULL, lease_expires_at = NULL, \
                 attempt_count = CASE WHEN attempt_count > 0 THEN attempt_count - 1 ELSE 0 END, \
                 available_at = {{now_plus_ms:$3}}, updated_at = {{now}} \
                 WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at > {{now}} \
                 RETURNING attempt_count"
            ))
            .bind(claim.key().as_str())
            .bind(claim.token.to_string())
            .bind(millis(delay))
            .fetch_optional()
            .await?
            .ok_or(StoreError::ClaimLost)?;
        let attempts = row.count("attempt_count")?;
        if always_record
            || self.work_latest_evidence(claim.key()).await?
                != Some(("success".into(), code.clone()))
        {
            self.work_evidence(&claim.item, &code, AuditOutcome::Success, attempts, false)
                .await?;
        }
        Ok(())
    }

    /// A dependency failed: back to the queue after `delay`, attempt kept; when the item has used
    /// `max_attempts` it fails permanently with `code` instead. Returns the resulting state.
    pub async fn work_retry(
        &mut self,
        claim: &Claim,
        code: &str,
        delay: Duration,
        max_attempts: u32,
    ) -> Result<WorkState, StoreError> {
        let code = sanitize_reason_code(code);
        let row = self
            .q(sql!(
                "UPDATE controller_work SET claim_token = NULL, lease_expires_at = NULL, updated_at = {{now}}, \
                 state = CASE WHEN attempt_count >= $4 THEN 'failed_permanent' ELSE 'queued' END, \
                 completed_at = CASE WHEN attempt_count >= $4 THEN {{now}} ELSE NULL END, \
                 reason_code = CASE WHEN attempt_count >= $4 THEN $5 ELSE NULL END, \
                 available_at = CASE WHEN attempt_count >= $4 THEN available_at ELSE {{now_plus_ms:$3}} END \
                 WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at > {{now}} \
                 RETURNING attempt_count, state"
            ))
            .bind(claim.key().as_str())
            .bind(claim.token.to_string())
            .bind(millis(delay))
            .bind(i64::from(max_attempts))
            .bind(code.as_str())
            .fetch_optional()
            .await?
            .ok_or(StoreError::ClaimLost)?;
        let attempts = row.count("attempt_count")?;
        let state = row.enum_of("state", WorkState::parse)?;
        let last = state == WorkState::FailedPermanent;
        self.work_evidence(&claim.item, &code, AuditOutcome::Failure, attempts, last)
            .await?;
        Ok(state)
    }

    /// Fails the claimed item permanently with a reason code and optional data.
    pub async fn work_fail(
        &mut self,
        claim: &Claim,
        code: &str,
        data: Option<Value>,
    ) -> Result<(), StoreError> {
        let code = sanitize_reason_code(code);
        let row = self
            .q(sql!(
                "UPDATE controller_work SET state = 'failed_permanent', claim_token = NULL, lease_expires_at = NULL, \
                 completed_at = {{now}}, reason_code = $3, result_data = $4, updated_at = {{now}} \
                 WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at > {{now}} \
                 RETURNING attempt_count"
            ))
            .bind(claim.key().as_str())
            .bind(claim.token.to_string())
            .bind(code.as_str())
            .bind(data)
            .fetch_optional()
            .await?
            .ok_or(StoreError::ClaimLost)?;
        let attempts = row.count("attempt_count")?;
        self.work_evidence(&claim.item, &code, AuditOutcome::Failure, attempts, true)
            .await
    }

    /// The outcome and reason code of the latest `reconcile` evidence of a work item.
    pub async fn work_latest_evidence(
        &mut self,
        key: &WorkKey,
    ) -> Result<Option<(String, String)>, StoreError> {
        Ok(self
            .work_latest_attempt(key)
            .await?
            .map(|(outcome, code, _)| (outcome, code)))
    }

    /// Outcome, reason code and time of the latest `reconcile` evidence of a work item.
    pub async fn work_latest_attempt(
        &mut self,
        key: &WorkKey,
    ) -> Result<Option<(String, String, Timestamp)>, StoreError> {
        let row = self
            .q(sql!(
                "SELECT outcome, {{json_text:details:reasonCode}} AS code, occurred_at FROM audit_events \
                 WHERE {{json_text:details:workId}} = $1 AND action = 'reconcile' \
                 ORDER BY occurred_at DESC, id DESC LIMIT 1"
            ))
            .bind(key.as_str())
            .fetch_optional()
            .await?;
        row.map(|r| {
            Ok((
                r.text("outcome")?,
                r.opt_text("code")?.unwrap_or_default(),
                r.time("occurred_at")?,
            ))
        })
        .transpose()
    }

    async fn work_evidence(
        &mut self,
        item: &WorkItem,
        code: &str,
        outcome: AuditOutcome,
        attempts: u64,
        last: bool,
    ) -> Result<(), StoreError> {
        let event = AuditEvent::new(
            AuditKind::Mutation,
            item.actor_id.as_str(),
            "reconcile",
            &evidence_resource(item),
            outcome,
        );
        let mut details = Map::new();
        details.insert("reasonCode".into(), json!(code));
        details.insert("attemptCount".into(), json!(attempts));
        details.insert("workId".into(), json!(item.key.as_str()));
        if last {
            details.insert("final".into(), json!(true));
        }
        self.q(sql!(
            "INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, namespace_id, resource_kind, \
             resource_id, outcome, details) VALUES ($1, {{now}}, 'mutation', $2, 'reconcile', $3, $4, $5, $6, $7)"
        ))
        .bind(event.id.as_str())
        .bind(event.actor_id.as_str())
        .bind(event.namespace_id.as_ref().map(|n| n.to_string()))
        .bind(event.resource_kind.as_str())
        .bind(event.resource_id.as_str())
        .bind(outcome.as_str())
        .bind(Value::Object(details))
        .execute()
        .await?;
        Ok(())
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Enqueues work inside the caller's transaction. The same key with the same owner and target
    /// returns the existing row unchanged (terminal or not); a different owner or target is a
    /// [`StoreError::Conflict`].
    pub async fn work_enqueue(&mut self, work: &NewWork) -> Result<WorkItem, StoreError> {
        self.require_work(work)?;
        self.work_enqueue_after(work, Duration::ZERO).await
    }
}

impl Store {
    /// Claims the next available item, if any: oldest `available_at` first, never an item whose
    /// Agent (or Namespace) lane already has a live claim, never one that used `max_attempts`.
    pub async fn work_claim(&self, options: &QueueOptions) -> Result<Option<Claim>, StoreError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_claim(options).await {
                // Another worker claimed the same lane or row first: look again.
                Err(StoreError::Conflict { .. } | StoreError::Serialization) if attempt < 3 => {
                    continue;
                }
                Err(StoreError::Conflict { .. } | StoreError::Serialization) => return Ok(None),
                other => return other,
            }
        }
    }

    async fn try_claim(&self, options: &QueueOptions) -> Result<Option<Claim>, StoreError> {
        let mut tx = self.begin_write().await?;
        let candidate = tx
            .q(sql!(
                "SELECT w.idempotency_key FROM controller_work w \
                 WHERE w.state = 'queued' AND w.available_at <= {{now}} AND w.attempt_count < $1 \
                 AND NOT EXISTS (SELECT 1 FROM controller_work c WHERE c.state = 'claimed' \
                   AND COALESCE(c.agent_id, c.namespace_id) = COALESCE(w.agent_id, w.namespace_id)) \
                 ORDER BY w.available_at, w.created_at, {{seq:w}} LIMIT 1 {{skip_locked}}"
            ))
            .bind(i64::from(options.max_attempts))
            .fetch_optional()
            .await?;
        let Some(candidate) = candidate else {
            tx.rollback().await?;
            return Ok(None);
        };
        let key = candidate.text("idempotency_key")?;
        let token = Uuid::new_v4();
        let row = tx
            .q(sql!(concat!(
                "UPDATE controller_work SET state = 'claimed', attempt_count = attempt_count + 1, claim_token = $2, \
                 lease_expires_at = {{now_plus_ms:$3}}, updated_at = {{now}} \
                 WHERE idempotency_key = $1 AND state = 'queued' RETURNING ",
                work_cols!(),
                ", {{now}} AS db_now"
            )))
            .bind(key.as_str())
            .bind(token.to_string())
            .bind(millis(options.lease))
            .fetch_optional()
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let claim = Claim {
            item: item_from_row(&row)?,
            token,
            claimed_at: row.time("db_now")?,
        };
        tx.commit().await?;
        Ok(Some(claim))
    }

    /// Renews the lease of a live claim; [`StoreError::ClaimLost`] when it is gone. Returns the
    /// new expiry.
    pub async fn work_heartbeat(
        &self,
        claim: &Claim,
        lease: Duration,
    ) -> Result<Timestamp, StoreError> {
        let mut tx = self.begin_write().await?;
        let expiry = tx.work_fence(claim, lease).await?;
        tx.commit().await?;
        Ok(expiry)
    }

    /// Releases claims whose lease expired (back to the queue with backoff, or `LEASE_EXPIRED`
    /// when attempts are exhausted) and fails queued items that exhausted their attempts
    /// (`MAX_ATTEMPTS_EXHAUSTED`). A Namespace whose ensure work fails this way becomes `failed`
    /// in the same transaction. Handles at most `limit` expired claims per call.
    pub async fn work_recover(
        &self,
        options: &QueueOptions,
        limit: u32,
    ) -> Result<RecoveryReport, StoreError> {
        let mut tx = self.begin_write().await?;
        let mut report = RecoveryReport::default();
        let expired = tx
            .q(sql!(concat!(
                "SELECT ",
                work_cols!(),
                " FROM controller_work WHERE state = 'claimed' AND lease_expires_at <= {{now}} \
                 ORDER BY lease_expires_at, idempotency_key LIMIT $1 {{skip_locked}}"
            )))
            .bind(i64::from(limit))
            .fetch_all()
            .await?
            .iter()
            .map(item_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        for item in expired {
            let exhausted = item.attempt_count >= options.max_attempts;
            let delay = retry_backoff(item.attempt_count, rand::random::<f64>());
            let row = tx
                .q(sql!(
                    "UPDATE controller_work SET claim_token = NULL, lease_expires_at = NULL, updated_at = {{now}}, \
                     state = CASE WHEN $3 THEN 'failed_permanent' ELSE 'queued' END, \
                     completed_at = CASE WHEN $3 THEN {{now}} ELSE NULL END, \
                     reason_code = CASE WHEN $3 THEN 'LEASE_EXPIRED' ELSE NULL END, \
                     available_at = CASE WHEN $3 THEN available_at ELSE {{now_plus_ms:$4}} END \
                     WHERE idempotency_key = $1 AND state = 'claimed' AND claim_token = $2 AND lease_expires_at <= {{now}} \
                     RETURNING attempt_count"
                ))
                .bind(item.key.as_str())
                .bind(item.claim_token.map(|t| t.to_string()))
                .bind(exhausted)
                .bind(millis(delay))
                .fetch_optional()
                .await?;
            let Some(row) = row else { continue };
            let attempts = row.count("attempt_count")?;
            tx.work_evidence(
                &item,
                ReasonCode::LeaseExpired.as_str(),
                AuditOutcome::Failure,
                attempts,
                exhausted,
            )
            .await?;
            if exhausted {
                tx.fail_provisioning_namespace(&item).await?;
                report.failed.push(item.key);
            } else {
                report.requeued.push(item.key);
            }
        }
        let stuck = tx
            .q(sql!(concat!(
                "SELECT ",
                work_cols!(),
                " FROM controller_work WHERE state = 'queued' AND attempt_count >= $1 \
                 ORDER BY available_at, idempotency_key LIMIT $2 {{skip_locked}}"
            )))
            .bind(i64::from(options.max_attempts))
            .bind(i64::from(limit))
            .fetch_all()
            .await?
            .iter()
            .map(item_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        for item in stuck {
            let n = tx
                .q(sql!(
                    "UPDATE controller_work SET state = 'failed_permanent', completed_at = {{now}}, \
                     reason_code = 'MAX_ATTEMPTS_EXHAUSTED', updated_at = {{now}} \
                     WHERE idempotency_key = $1 AND state = 'queued'"
                ))
                .bind(item.key.as_str())
                .execute()
                .await?;
            if n == 1 {
                let attempts = u64::from(item.attempt_count);
                tx.work_evidence(
                    &item,
                    ReasonCode::MaxAttemptsExhausted.as_str(),
                    AuditOutcome::Failure,
                    attempts,
                    true,
                )
                .await?;
                tx.fail_provisioning_namespace(&item).await?;
                report.failed.push(item.key);
            }
        }
        tx.commit().await?;
        Ok(report)
    }

    /// Pending count and the age of the oldest pending item.
    pub async fn work_stats(&self) -> Result<QueueStats, StoreError> {
        let mut tx = self.begin_read().await?;
        let row = tx
            .q(sql!(
                "SELECT count(*) AS pending, MIN(created_at) AS oldest, {{now}} AS db_now FROM controller_work \
                 WHERE state IN ('queued', 'claimed')"
            ))
            .fetch_one()
            .await?;
        let pending = row.count("pending")?;
        let oldest = row.opt_time("oldest")?;
        let now = row.time("db_now")?;
        tx.rollback().await?;
        let age = oldest
            .map(|o| {
                Duration::from_millis(
                    u64::try_from(now.unix_millis() - o.unix_millis()).unwrap_or(0),
                )
            })
            .unwrap_or_default();
        Ok(QueueStats {
            pending,
            oldest_pending_age: age,
        })
    }
}

impl Tx {
    async fn fail_provisioning_namespace(&mut self, item: &WorkItem) -> Result<(), StoreError> {
        if item.target == WorkTarget::NamespaceReady {
            self.q(sql!(
                "UPDATE namespaces SET status = 'failed' WHERE id = $1 AND status = 'provisioning' AND deleted_at IS NULL"
            ))
            .bind(item.namespace_id.as_str())
            .execute()
            .await?;
        }
        Ok(())
    }
}
