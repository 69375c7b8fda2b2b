//! The append-only audit ledger. Events are appended inside the caller's transaction; the
//! database refuses UPDATE, DELETE and TRUNCATE.

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use serde_json::Value;

use crate::db::{Row, sql};
use crate::{StoreError, Tx};

fn from_row(r: &Row) -> Result<AuditEvent, StoreError> {
    let kind = r.text("resource_kind")?;
    let details = match r.json("details")? {
        Value::Object(map) => map,
        _ => return Err(StoreError::Corrupt("column details: not an object".into())),
    };
    Ok(AuditEvent {
        id: r.parse("id")?,
        occurred_at: r.time("occurred_at")?,
        kind: r.enum_of("kind", AuditKind::parse)?,
        actor_id: r.text("actor_id")?,
        action: r.text("action")?,
        namespace_id: r.opt_parse("namespace_id")?,
        resource_kind: kind
            .parse()
            .map_err(|()| StoreError::Corrupt(format!("resource_kind {kind:?}")))?,
        resource_id: r.text("resource_id")?,
        outcome: r.enum_of("outcome", AuditOutcome::parse)?,
        details,
    })
}

/// The filter of [`Tx::audit_list`].
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only events with this action.
    pub action: Option<String>,
    /// Only events about this resource id.
    pub resource_id: Option<String>,
}

impl Tx {
    /// Appends an event.
    pub async fn audit_append(&mut self, event: &AuditEvent) -> Result<(), StoreError> {
        self.q(sql!(
            "INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, namespace_id, resource_kind, \
             resource_id, outcome, details) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
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
        .execute()
        .await?;
        Ok(())
    }

    /// Events in append order (`occurred_at`, `id`), optionally filtered. Internal: there is no
    /// public audit API.
    pub async fn audit_list(
        &mut self,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT id, occurred_at, kind, actor_id, action, namespace_id, resource_kind, resource_id, outcome, details \
                 FROM audit_events WHERE ($1 IS NULL OR action = $1) AND ($2 IS NULL OR resource_id = $2) \
                 ORDER BY occurred_at, id"
            ))
            .bind(filter.action.clone())
            .bind(filter.resource_id.clone())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }
}
