//! Configuration metadata (kind, generation, Secret bindings). The native document lives only in
//! the Configuration Driver. The generation advances by compare-and-swap: a writer that read
//! generation `g` can only move it to `g + 1`, so concurrent PATCHes cannot both win.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{ConfigurationMeta, Generation, SecretBindings};
use occ_core::{ConfigurationId, NamespaceId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! cfg_cols {
    () => {
        "id, namespace_id, generation, secret_bindings, created_at"
    };
}

fn from_row(r: &Row) -> Result<ConfigurationMeta, StoreError> {
    let generation = u64::try_from(r.int("generation")?)
        .ok()
        .and_then(Generation::new)
        .ok_or_else(|| StoreError::Corrupt("column generation: out of range".into()))?;
    Ok(ConfigurationMeta {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        generation,
        secret_bindings: r.json_as("secret_bindings")?,
        created_at: r.time("created_at")?,
    })
}

fn bindings_json(bindings: &SecretBindings) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(bindings).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn generation_arg(g: Generation) -> i64 {
    // Generations are at most 2^53 − 1, so this never truncates.
    g.get() as i64
}

impl Tx {
    /// The metadata of a Configuration in exactly this Namespace.
    pub async fn configuration_get(
        &mut self,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<Option<ConfigurationMeta>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                cfg_cols!(),
                " FROM configurations WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Like [`Tx::configuration_get`], locking the row until the transaction ends.
    pub async fn configuration_lock(
        &mut self,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<Option<ConfigurationMeta>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                cfg_cols!(),
                " FROM configurations WHERE namespace_id = $1 AND id = $2 {{for_update}}"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Ids of Agents whose draft references the Configuration.
    pub async fn configuration_referencing_agents(
        &mut self,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .q(sql!("SELECT id FROM agents WHERE namespace_id = $1 AND configuration_id = $2 ORDER BY id"))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(|r| r.text("id")).collect()
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts Configuration metadata (kind `agent`).
    pub async fn configuration_insert(
        &mut self,
        cfg: &ConfigurationMeta,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Configuration, &cfg.namespace_id),
        )?;
        self.q(sql!(
            "INSERT INTO configurations (id, namespace_id, kind, generation, secret_bindings, created_at) \
             VALUES ($1, $2, 'agent', $3, $4, $5)"
        ))
        .bind(cfg.id.as_str())
        .bind(cfg.namespace_id.as_str())
        .bind(generation_arg(cfg.generation))
        .bind(bindings_json(&cfg.secret_bindings)?)
        .bind(cfg.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Advances the generation from `expected` to `expected + 1` and replaces the bindings.
    /// [`StoreError::Stale`] when the generation moved meanwhile, [`StoreError::NotFound`] when
    /// the Configuration is gone.
    pub async fn configuration_advance(
        &mut self,
        ns: &NamespaceId,
        id: &ConfigurationId,
        expected: Generation,
        bindings: &SecretBindings,
    ) -> Result<Generation, StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(ResourceKind::Configuration, ns, id),
        )?;
        let next = expected.next().ok_or_else(|| StoreError::Invariant {
            constraint: "configurations_generation_check".into(),
        })?;
        let n = self
            .q(sql!(
                "UPDATE configurations SET generation = $4, secret_bindings = $5 \
                 WHERE namespace_id = $1 AND id = $2 AND generation = $3"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .bind(generation_arg(expected))
            .bind(generation_arg(next))
            .bind(bindings_json(bindings)?)
            .execute()
            .await?;
        if n == 1 {
            return Ok(next);
        }
        match self.configuration_get(ns, id).await? {
            Some(_) => Err(StoreError::Stale),
            None => Err(StoreError::NotFound),
        }
    }

    /// Deletes a Configuration. An Agent that references it makes this a
    /// [`StoreError::Reference`] (the database's `ON DELETE RESTRICT`).
    pub async fn configuration_delete(
        &mut self,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::Configuration, ns, id),
        )?;
        let n = self
            .q(sql!(
                "DELETE FROM configurations WHERE namespace_id = $1 AND id = $2"
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
