//! Secret metadata. The value never enters the store: the Secret Driver keeps it and the store
//! keeps the Driver id and its locator.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::SecretMeta;
use occ_core::{NamespaceId, SecretId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! secret_cols {
    () => {
        "id, namespace_id, name, driver_id, locator, created_at"
    };
}

fn from_row(r: &Row) -> Result<SecretMeta, StoreError> {
    Ok(SecretMeta {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        name: r.parse("name")?,
        driver_id: r.text("driver_id")?,
        locator: r.text("locator")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// A Secret in exactly this Namespace.
    pub async fn secret_get(
        &mut self,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<Option<SecretMeta>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                secret_cols!(),
                " FROM secrets WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The Secrets of a Namespace, oldest first.
    pub async fn secret_list(&mut self, ns: &NamespaceId) -> Result<Vec<SecretMeta>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                secret_cols!(),
                " FROM secrets WHERE namespace_id = $1 ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// Ids of Configurations in the Namespace whose Secret bindings name this Secret.
    pub async fn secret_referencing_configurations(
        &mut self,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<Vec<String>, StoreError> {
        // Bindings are a small JSON map; filter in Rust to keep one statement for both dialects.
        let rows = self
            .q(sql!(
                "SELECT id, secret_bindings FROM configurations WHERE namespace_id = $1 ORDER BY id"
            ))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        let mut out = Vec::new();
        for r in rows {
            let bindings: occ_core::resource::SecretBindings = r.json_as("secret_bindings")?;
            if bindings.values().any(|b| &b.source.id == id) {
                out.push(r.text("id")?);
            }
        }
        Ok(out)
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts Secret metadata; a taken name is a [`StoreError::Conflict`].
    pub async fn secret_insert(&mut self, secret: &SecretMeta) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Secret, &secret.namespace_id),
        )?;
        self.q(sql!(
            "INSERT INTO secrets (id, namespace_id, name, driver_id, locator, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(secret.id.as_str())
        .bind(secret.namespace_id.as_str())
        .bind(secret.name.as_str())
        .bind(secret.driver_id.as_str())
        .bind(secret.locator.as_str())
        .bind(secret.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Replaces the locator after a value update (the Driver may move the value).
    pub async fn secret_set_locator(
        &mut self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(ResourceKind::Secret, ns, id),
        )?;
        let n = self
            .q(sql!(
                "UPDATE secrets SET locator = $3 WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(locator)
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Deletes Secret metadata; a reference from an Agent is a [`StoreError::Reference`].
    pub async fn secret_delete(
        &mut self,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::Secret, ns, id),
        )?;
        let n = self
            .q(sql!(
                "DELETE FROM secrets WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }
}
