//! The worker's metric gauges, read in one statement at scrape time.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::db::sql;
use crate::{Store, StoreError};

/// Gauges of the work queue and the Agents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Queued plus claimed work items.
    pub pending: u64,
    /// Age since admission of the oldest pending item (zero when none).
    pub oldest_pending_age: Duration,
    /// Agents per lifecycle state (`draft`, `deploying`, `running`, `stopping`, `stopped`,
    /// `failed`); absent states have none.
    pub agents: BTreeMap<String, u64>,
}

impl Store {
    /// Reads the gauges in one read-only statement.
    ///
    /// Agent lifecycle projection: `draft` — nothing admitted; `deploying` — running desired
    /// and the latest deploy still pending; `running` — the latest deploy activated; `failed` —
    /// the latest operation for the desired state failed; `stopping` — deleting, or stopped
    /// desired with a pointer or unfinished stop work; `stopped` — otherwise.
    pub async fn metrics_snapshot(&self) -> Result<MetricsSnapshot, StoreError> {
        let mut tx = self.begin_read().await?;
        let rows = tx
            .q(sql!(
                "SELECT '~queue' AS k, count(*) AS n, MIN(created_at) AS oldest, {{now}} AS db_now \
                 FROM controller_work WHERE state IN ('queued', 'claimed') \
                 UNION ALL \
                 SELECT s.state, count(*), NULL, NULL FROM ( \
                   SELECT CASE \
                     WHEN a.status = 'deleting' THEN 'stopping' \
                     WHEN a.desired_runtime_state = 'running' THEN CASE \
                       WHEN w.state = 'succeeded' AND w.reason_code IN ('REVISION_ACTIVATED', 'REVISION_ALREADY_ACTIVE') THEN 'running' \
                       WHEN w.state IN ('succeeded', 'failed_permanent') THEN 'failed' \
                       ELSE 'deploying' END \
                     WHEN NOT EXISTS (SELECT 1 FROM agent_revisions r WHERE r.namespace_id = a.namespace_id AND r.agent_id = a.id) THEN 'draft' \
                     WHEN a.active_revision_id IS NOT NULL OR EXISTS (SELECT 1 FROM controller_work x \
                       WHERE x.agent_id = a.id AND x.revision_id IS NULL AND x.state IN ('queued', 'claimed')) THEN 'stopping' \
                     WHEN (SELECT y.state FROM controller_work y WHERE y.agent_id = a.id AND y.revision_id IS NULL \
                       ORDER BY y.created_at DESC LIMIT 1) = 'failed_permanent' THEN 'failed' \
                     ELSE 'stopped' END AS state \
                   FROM agents a \
                   LEFT JOIN controller_work w ON w.idempotency_key = ( \
                     SELECT 'agent_revision:' || r.id || ':reconcile' FROM agent_revisions r \
                     WHERE r.namespace_id = a.namespace_id AND r.agent_id = a.id \
                     ORDER BY r.revision_number DESC LIMIT 1) \
                 ) s GROUP BY s.state"
            ))
            .fetch_all()
            .await?;
        drop(tx);
        let mut snapshot = MetricsSnapshot::default();
        for row in &rows {
            let key = row.text("k")?;
            let n = row.count("n")?;
            if key == "~queue" {
                snapshot.pending = n;
                if let (Some(oldest), Some(now)) =
                    (row.opt_time("oldest")?, row.opt_time("db_now")?)
                {
                    snapshot.oldest_pending_age = Duration::from_millis(
                        u64::try_from(now.unix_millis() - oldest.unix_millis()).unwrap_or(0),
                    );
                }
            } else {
                snapshot.agents.insert(key, n);
            }
        }
        Ok(snapshot)
    }
}
