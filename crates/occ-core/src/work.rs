//! Controller work items: the durable queue between admission and the worker
//! (spec/api.md §4.3, lifecycle.md §A.2–A.5).
//!
//! A work item names *what* to converge (a Namespace, an Agent, a revision) and the actor who
//! asked; it never carries instructions. Its idempotency key has an exact format per kind, so
//! re-enqueueing the same intent finds the existing row.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::id::{AgentId, IamId, NamespaceId, ProvisioningId, RevisionId};
use crate::time::Timestamp;

/// First retry delay.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Longest idempotency key.
pub const WORK_KEY_MAX_CHARS: usize = 512;
/// Default reason code of a successful completion.
pub const DEFAULT_SUCCESS_CODE: &str = "RECONCILE_SUCCEEDED";

/// What a work item converges to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkTarget {
    /// Namespace → `ready` (ensure through Compute).
    NamespaceReady,
    /// Namespace → tombstone (delete through Compute).
    NamespaceDeleted,
    /// Agent → stopped.
    AgentStopped,
    /// Agent → deleted.
    AgentDeleted,
    /// Revision → active (deploy reconcile).
    RevisionReconcile,
    /// Revision maintenance pass.
    RevisionMaintenance,
    /// An Agent provisioning job: create what it names, then deploy.
    AgentProvisioning,
}

impl WorkTarget {
    /// Metric and log label.
    pub fn label(self) -> &'static str {
        match self {
            WorkTarget::NamespaceReady => "namespace_ensure",
            WorkTarget::NamespaceDeleted => "namespace_delete",
            WorkTarget::AgentStopped => "agent_stop",
            WorkTarget::AgentDeleted => "agent_delete",
            WorkTarget::RevisionReconcile | WorkTarget::RevisionMaintenance => "agent_revision",
            WorkTarget::AgentProvisioning => "agent_provisioning",
        }
    }

    /// The stored `work_kind` column.
    pub fn work_kind(self) -> &'static str {
        match self {
            WorkTarget::AgentProvisioning => "provisioning",
            _ => "lifecycle",
        }
    }

    /// The stored `namespace_target` column.
    pub fn namespace_target(self) -> Option<&'static str> {
        match self {
            WorkTarget::NamespaceReady => Some("ready"),
            WorkTarget::NamespaceDeleted => Some("deleted"),
            _ => None,
        }
    }

    /// The stored `agent_target` column.
    pub fn agent_target(self) -> Option<&'static str> {
        match self {
            WorkTarget::AgentStopped => Some("stopped"),
            WorkTarget::AgentDeleted => Some("deleted"),
            _ => None,
        }
    }
}

/// A work item's idempotency key, built only by the constructors below.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct WorkKey(String);

impl WorkKey {
    /// `namespace:<ns>:reconcile:ready`
    pub fn namespace_ready(ns: &NamespaceId) -> Self {
        Self(format!("namespace:{ns}:reconcile:ready"))
    }
    /// `namespace:<ns>:reconcile:deleted`
    pub fn namespace_deleted(ns: &NamespaceId) -> Self {
        Self(format!("namespace:{ns}:reconcile:deleted"))
    }
    /// `agent:<agt>:reconcile:stopped:<uuid>`, new per stop request.
    pub fn agent_stop(agent: &AgentId, operation: Uuid) -> Self {
        Self(format!("agent:{agent}:reconcile:stopped:{operation}"))
    }
    /// `agent:<agt>:reconcile:deleted`, one per Agent.
    pub fn agent_deleted(agent: &AgentId) -> Self {
        Self(format!("agent:{agent}:reconcile:deleted"))
    }
    /// `agent_revision:<rev>:reconcile`, one per admitted revision.
    pub fn revision_reconcile(rev: &RevisionId) -> Self {
        Self(format!("agent_revision:{rev}:reconcile"))
    }
    /// `agent_revision:<rev>:maintenance:<bucket>`.
    pub fn revision_maintenance(rev: &RevisionId, bucket: u64) -> Self {
        Self(format!("agent_revision:{rev}:maintenance:{bucket}"))
    }
    /// `agent_provisioning:<prv>:attempt:<n>`: one per admission or retry of a provisioning job.
    pub fn agent_provisioning(job: &ProvisioningId, attempt: u32) -> Self {
        Self(format!("agent_provisioning:{job}:attempt:{attempt}"))
    }
    /// A key read back from storage (trusted: the database checks its format).
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for WorkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A work item to enqueue; the constructors guarantee the shape the database checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWork {
    /// Idempotency key.
    pub key: WorkKey,
    /// The Namespace (every item has one).
    pub namespace_id: NamespaceId,
    /// The Agent, for Agent and revision work.
    pub agent_id: Option<AgentId>,
    /// The revision, for revision work.
    pub revision_id: Option<RevisionId>,
    /// The actor whose authority the worker re-checks.
    pub actor_id: IamId,
    /// What to converge to.
    pub target: WorkTarget,
}

impl NewWork {
    /// Namespace ensure.
    pub fn namespace_ready(ns: &NamespaceId, actor: &IamId) -> Self {
        Self::namespace(
            WorkKey::namespace_ready(ns),
            ns,
            actor,
            WorkTarget::NamespaceReady,
        )
    }
    /// Namespace delete.
    pub fn namespace_deleted(ns: &NamespaceId, actor: &IamId) -> Self {
        Self::namespace(
            WorkKey::namespace_deleted(ns),
            ns,
            actor,
            WorkTarget::NamespaceDeleted,
        )
    }
    fn namespace(key: WorkKey, ns: &NamespaceId, actor: &IamId, target: WorkTarget) -> Self {
        Self {
            key,
            namespace_id: ns.clone(),
            agent_id: None,
            revision_id: None,
            actor_id: actor.clone(),
            target,
        }
    }
    /// Agent stop (fresh key per request).
    pub fn agent_stop(ns: &NamespaceId, agent: &AgentId, actor: &IamId) -> Self {
        Self::agent(
            WorkKey::agent_stop(agent, Uuid::new_v4()),
            ns,
            agent,
            actor,
            WorkTarget::AgentStopped,
        )
    }
    /// Agent delete.
    pub fn agent_deleted(ns: &NamespaceId, agent: &AgentId, actor: &IamId) -> Self {
        Self::agent(
            WorkKey::agent_deleted(agent),
            ns,
            agent,
            actor,
            WorkTarget::AgentDeleted,
        )
    }
    fn agent(
        key: WorkKey,
        ns: &NamespaceId,
        agent: &AgentId,
        actor: &IamId,
        target: WorkTarget,
    ) -> Self {
        Self {
            key,
            namespace_id: ns.clone(),
            agent_id: Some(agent.clone()),
            revision_id: None,
            actor_id: actor.clone(),
            target,
        }
    }
    /// An Agent provisioning job's `attempt`-th run (its lane is the Namespace's).
    pub fn agent_provisioning(
        ns: &NamespaceId,
        job: &ProvisioningId,
        actor: &IamId,
        attempt: u32,
    ) -> Self {
        Self::namespace(
            WorkKey::agent_provisioning(job, attempt),
            ns,
            actor,
            WorkTarget::AgentProvisioning,
        )
    }
    /// Revision reconcile (deploy).
    pub fn revision_reconcile(
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        actor: &IamId,
    ) -> Self {
        Self {
            key: WorkKey::revision_reconcile(rev),
            namespace_id: ns.clone(),
            agent_id: Some(agent.clone()),
            revision_id: Some(rev.clone()),
            actor_id: actor.clone(),
            target: WorkTarget::RevisionReconcile,
        }
    }
    /// Revision maintenance pass.
    pub fn revision_maintenance(
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        actor: &IamId,
        bucket: u64,
    ) -> Self {
        Self {
            key: WorkKey::revision_maintenance(rev, bucket),
            namespace_id: ns.clone(),
            agent_id: Some(agent.clone()),
            revision_id: Some(rev.clone()),
            actor_id: actor.clone(),
            target: WorkTarget::RevisionMaintenance,
        }
    }
}

/// Queue state of a work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Waiting for `available_at`.
    Queued,
    /// Held by a worker under a lease.
    Claimed,
    /// Finished (the reason code says how).
    Succeeded,
    /// Finished without converging.
    FailedPermanent,
}

impl WorkState {
    /// Stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Queued => "queued",
            WorkState::Claimed => "claimed",
            WorkState::Succeeded => "succeeded",
            WorkState::FailedPermanent => "failed_permanent",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        [
            Self::Queued,
            Self::Claimed,
            Self::Succeeded,
            Self::FailedPermanent,
        ]
        .into_iter()
        .find(|s| s.as_str() == value)
    }
    /// Whether the item is finished.
    pub fn is_terminal(self) -> bool {
        matches!(self, WorkState::Succeeded | WorkState::FailedPermanent)
    }
}

/// A stored work item.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    /// Idempotency key.
    pub key: WorkKey,
    /// Namespace.
    pub namespace_id: NamespaceId,
    /// Agent, for Agent and revision work.
    pub agent_id: Option<AgentId>,
    /// Revision, for revision work.
    pub revision_id: Option<RevisionId>,
    /// Original actor.
    pub actor_id: IamId,
    /// Target.
    pub target: WorkTarget,
    /// Queue state.
    pub state: WorkState,
    /// Earliest next claim.
    pub available_at: Timestamp,
    /// Attempts consumed.
    pub attempt_count: u32,
    /// Current claim token, when claimed.
    pub claim_token: Option<Uuid>,
    /// Lease expiry, when claimed.
    pub lease_expires_at: Option<Timestamp>,
    /// Completion time, when terminal.
    pub completed_at: Option<Timestamp>,
    /// Reason code, when terminal.
    pub reason_code: Option<String>,
    /// Closed-shape result data, when terminal.
    pub result_data: Option<serde_json::Value>,
    /// Admission time (deadlines count from here).
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// Normalizes a reason code: uppercase, anything outside `[A-Z0-9_]` becomes `_`, at most 64
/// characters, `UNKNOWN_FAILURE` when empty.
pub fn sanitize_reason_code(code: &str) -> String {
    let out: String = code
        .chars()
        .map(|c| c.to_ascii_uppercase())
        .map(|c| {
            if c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if out.is_empty() {
        "UNKNOWN_FAILURE".to_owned()
    } else {
        out
    }
}

/// "Full jitter" exponential backoff: `min(300 s, 1 s × 2^(attempt−1)) × U[0,1)`, where
/// `attempt` is the attempt count after the claim that failed. `unit` is a sample of U[0,1).
pub fn retry_backoff(attempt: u32, unit: f64) -> Duration {
    let exponent = attempt.saturating_sub(1).min(30);
    let ceiling = INITIAL_BACKOFF
        .saturating_mul(1u32 << exponent)
        .min(MAX_BACKOFF);
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

/// The readiness recheck delay of a pending deployment: 500 ms rising to 5 s as the work ages
/// (`clamp(age/40, 500 ms, 5 s)`).
pub fn pending_recheck_delay(age: Duration) -> Duration {
    (age / 40).clamp(Duration::from_millis(500), Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_reference_formats() {
        let ns = NamespaceId::generate();
        let agt = AgentId::generate();
        let rev = RevisionId::generate();
        assert_eq!(
            WorkKey::namespace_ready(&ns).as_str(),
            format!("namespace:{ns}:reconcile:ready")
        );
        assert_eq!(
            WorkKey::agent_deleted(&agt).as_str(),
            format!("agent:{agt}:reconcile:deleted")
        );
        assert_eq!(
            WorkKey::revision_reconcile(&rev).as_str(),
            format!("agent_revision:{rev}:reconcile")
        );
        let op = Uuid::new_v4();
        assert_eq!(
            WorkKey::agent_stop(&agt, op).as_str(),
            format!("agent:{agt}:reconcile:stopped:{op}")
        );
    }

    #[test]
    fn reason_codes_are_sanitized() {
        assert_eq!(
            sanitize_reason_code("revision activated"),
            "REVISION_ACTIVATED"
        );
        assert_eq!(sanitize_reason_code(""), "UNKNOWN_FAILURE");
        assert_eq!(sanitize_reason_code(&"a".repeat(100)).len(), 64);
    }

    #[test]
    fn backoff_doubles_to_the_ceiling() {
        assert_eq!(retry_backoff(1, 0.999_999).as_millis(), 999);
        assert_eq!(retry_backoff(3, 0.5), Duration::from_secs(2));
        assert_eq!(retry_backoff(40, 0.5), Duration::from_secs(150));
        assert_eq!(retry_backoff(2, 0.0), Duration::ZERO);
    }

    #[test]
    fn recheck_rises_from_half_a_second_to_five() {
        assert_eq!(
            pending_recheck_delay(Duration::ZERO),
            Duration::from_millis(500)
        );
        assert_eq!(
            pending_recheck_delay(Duration::from_secs(40)),
            Duration::from_secs(1)
        );
        assert_eq!(
            pending_recheck_delay(Duration::from_secs(1000)),
            Duration::from_secs(5)
        );
    }
}
