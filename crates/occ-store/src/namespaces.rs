//! Namespaces: the tenant boundary. Deletion leaves a tombstone (`deleted_at`) so the name stays
//! reserved; the database refuses lifecycle moves the spec does not allow.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::iam::BuiltinRole;
use occ_core::preset::BuiltinPreset;
use occ_core::resource::{Namespace, NamespaceStatus};
use occ_core::{NamespaceId, Timestamp};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! ns_cols {
    () => {
        "id, name, existing_namespace, status, created_at, deleted_at"
    };
}

fn from_row(r: &Row) -> Result<Namespace, StoreError> {
    Ok(Namespace {
        id: r.parse("id")?,
        name: r.parse("name")?,
        existing_namespace: r.opt_text("existing_namespace")?,
        status: r.enum_of("status", NamespaceStatus::parse)?,
        created_at: r.time("created_at")?,
        deleted_at: r.opt_time("deleted_at")?,
    })
}

/// What still lives in a Namespace (for `NAMESPACE_NOT_EMPTY`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceContents {
    /// Agent ids.
    pub agents: Vec<String>,
    /// Configuration ids.
    pub configurations: Vec<String>,
    /// Secret ids.
    pub secrets: Vec<String>,
    /// ServiceAccount ids.
    pub service_accounts: Vec<String>,
    /// Credential source ids.
    pub credential_sources: Vec<String>,
}

impl NamespaceContents {
    /// Whether nothing remains.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
            && self.configurations.is_empty()
            && self.secrets.is_empty()
            && self.service_accounts.is_empty()
            && self.credential_sources.is_empty()
    }
}

impl Tx {
    /// A Namespace by id, tombstones included.
    pub async fn namespace_get(
        &mut self,
        id: &NamespaceId,
    ) -> Result<Option<Namespace>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                ns_cols!(),
                " FROM namespaces WHERE id = $1"
            )))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A Namespace by id, locked for the rest of the transaction (PostgreSQL `FOR UPDATE`; SQLite
    /// transactions already hold the write lock).
    pub async fn namespace_lock(
        &mut self,
        id: &NamespaceId,
    ) -> Result<Option<Namespace>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                ns_cols!(),
                " FROM namespaces WHERE id = $1 {{for_update}}"
            )))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A Namespace by name, tombstones included.
    pub async fn namespace_get_by_name(
        &mut self,
        name: &str,
    ) -> Result<Option<Namespace>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                ns_cols!(),
                " FROM namespaces WHERE name = $1"
            )))
            .bind(name)
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Live (not tombstoned) Namespaces, oldest first.
    pub async fn namespace_list(&mut self) -> Result<Vec<Namespace>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                ns_cols!(),
                " FROM namespaces WHERE deleted_at IS NULL ORDER BY created_at, id"
            )))
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// Writes the tombstone of a `deleting` Namespace. The database refuses it while the Namespace
    /// holds resources. Returns whether a live deleting Namespace was tombstoned.
    pub async fn namespace_tombstone(
        &mut self,
        id: &NamespaceId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let n = self
            .q(sql!(
                "UPDATE namespaces SET deleted_at = $2 WHERE id = $1 AND status = 'deleting' AND deleted_at IS NULL"
            ))
            .bind(id.as_str())
            .bind(at)
            .execute()
            .await?;
        Ok(n == 1)
    }

    /// What the Namespace still holds.
    pub async fn namespace_contents(
        &mut self,
        id: &NamespaceId,
    ) -> Result<NamespaceContents, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT 'agent' AS kind, id FROM agents WHERE namespace_id = $1 \
                 UNION ALL SELECT 'configuration', id FROM configurations WHERE namespace_id = $1 \
                 UNION ALL SELECT 'secret', id FROM secrets WHERE namespace_id = $1 \
                 UNION ALL SELECT 'service_account', id FROM service_accounts WHERE namespace_id = $1 \
                 UNION ALL SELECT 'credential_source', id FROM credential_sources WHERE namespace_id = $1 \
                 ORDER BY 1, 2"
            ))
            .bind(id.as_str())
            .fetch_all()
            .await?;
        let mut contents = NamespaceContents::default();
        for r in rows {
            let id = r.text("id")?;
            match r.text("kind")?.as_str() {
                "agent" => contents.agents.push(id),
                "configuration" => contents.configurations.push(id),
                "secret" => contents.secrets.push(id),
                "credential_source" => contents.credential_sources.push(id),
                _ => contents.service_accounts.push(id),
            }
        }
        Ok(contents)
    }

    /// Ends provisioning as settled Namespace work records it: `provisioning → ready` when it
    /// succeeded, `→ failed` when it failed. Returns whether it moved.
    pub async fn namespace_settle_provisioning(
        &mut self,
        id: &NamespaceId,
        ready: bool,
    ) -> Result<bool, StoreError> {
        let to = if ready {
            NamespaceStatus::Ready
        } else {
            NamespaceStatus::Failed
        };
        self.namespace_cas_status(id, NamespaceStatus::Provisioning, to)
            .await
    }

    async fn namespace_cas_status(
        &mut self,
        id: &NamespaceId,
        from: NamespaceStatus,
        to: NamespaceStatus,
    ) -> Result<bool, StoreError> {
        let n = self
            .q(sql!(
                "UPDATE namespaces SET status = $3 WHERE id = $1 AND status = $2 AND deleted_at IS NULL"
            ))
            .bind(id.as_str())
            .bind(from.as_str())
            .bind(to.as_str())
            .execute()
            .await?;
        Ok(n == 1)
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts a Namespace. A taken name (tombstones included) is a [`StoreError::Conflict`].
    pub async fn namespace_insert(&mut self, ns: &Namespace) -> Result<(), StoreError> {
        self.require_installation_collection(Action::Create, ResourceKind::Namespace)?;
        self.q(sql!(
            "INSERT INTO namespaces (id, name, existing_namespace, status, created_at, deleted_at) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(ns.id.as_str())
        .bind(ns.name.as_str())
        .bind(ns.existing_namespace.clone())
        .bind(ns.status.as_str())
        .bind(ns.created_at)
        .bind(ns.deleted_at)
        .execute()
        .await?;
        // A Namespace comes with its built-in Roles, under the authority that created it.
        for role in BuiltinRole::ALL {
            self.role_row_insert(&role.role(&ns.id, ns.created_at))
                .await?;
        }
        Ok(())
    }

    /// Gives a Namespace just created ([`Self::namespace_insert`]) its built-in Presets, under
    /// the authority that created it.
    pub async fn namespace_seed_presets(&mut self, ns: &Namespace) -> Result<(), StoreError> {
        self.require_installation_collection(Action::Create, ResourceKind::Namespace)?;
        for preset in BuiltinPreset::ALL {
            self.preset_row_insert(&preset.preset(&ns.id, ns.created_at))
                .await?;
        }
        Ok(())
    }

    /// Compare-and-set of the status: moves `from → to` only if the live Namespace is still in
    /// `from`. Returns whether it moved.
    pub async fn namespace_set_status(
        &mut self,
        id: &NamespaceId,
        from: NamespaceStatus,
        to: NamespaceStatus,
    ) -> Result<bool, StoreError> {
        self.require(&[Action::Delete], &ResourceRef::namespace(id))?;
        self.namespace_cas_status(id, from, to).await
    }
}
