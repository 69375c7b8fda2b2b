//! Presets: a Namespace's templates for new Agents. The template is kept as admitted
//! ([`occ_core::preset::parse_template`]).

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::preset::Preset;
use occ_core::{NamespaceId, PresetId};

use crate::db::{Conn, Query, Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! preset_cols {
    () => {
        "id, namespace_id, name, template, seed_digest, created_at"
    };
}

fn from_row(r: &Row) -> Result<Preset, StoreError> {
    Ok(Preset {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        name: r.parse("name")?,
        template: r.json("template")?,
        seed_digest: r.opt_text("seed_digest")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// A Preset in exactly this Namespace.
    pub async fn preset_get(
        &mut self,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<Option<Preset>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                preset_cols!(),
                " FROM presets WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The Presets of a Namespace, oldest first.
    pub async fn preset_list(&mut self, ns: &NamespaceId) -> Result<Vec<Preset>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                preset_cols!(),
                " FROM presets WHERE namespace_id = $1 ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }
}

impl Tx {
    /// Inserts a Preset row: behind [`Authorized::preset_insert`], and the built-in Presets a
    /// new Namespace comes with (under the authority that created it, like its Roles).
    pub(crate) async fn preset_row_insert(&mut self, preset: &Preset) -> Result<(), StoreError> {
        insert_row(self.conn(), preset).await
    }
}

/// Inserts a Preset row on `conn` (also the upgrade that gives existing Namespaces their
/// built-in Presets, [`crate::migrate`]).
pub(crate) async fn insert_row(conn: Conn<'_>, preset: &Preset) -> Result<(), StoreError> {
    Query::new(
        conn,
        sql!(
            "INSERT INTO presets (id, namespace_id, name, template, seed_digest, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        ),
    )
    .bind(preset.id.as_str())
    .bind(preset.namespace_id.as_str())
    .bind(preset.name.as_str())
    .bind(preset.template.clone())
    .bind(preset.seed_digest.clone())
    .bind(preset.created_at)
    .execute()
    .await?;
    Ok(())
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts a Preset; a taken name is a [`StoreError::Conflict`].
    pub async fn preset_insert(&mut self, preset: &Preset) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::Preset, &preset.namespace_id),
        )?;
        self.preset_row_insert(preset).await
    }

    /// Replaces a Preset's name and template; a taken name is a [`StoreError::Conflict`].
    pub async fn preset_update(&mut self, preset: &Preset) -> Result<(), StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(ResourceKind::Preset, &preset.namespace_id, &preset.id),
        )?;
        let n = self
            .q(sql!(
                "UPDATE presets SET name = $3, template = $4 WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(preset.namespace_id.as_str())
            .bind(preset.id.as_str())
            .bind(preset.name.as_str())
            .bind(preset.template.clone())
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Deletes a Preset (its own deletion's decision).
    pub async fn preset_delete(
        &mut self,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::Preset, ns, id),
        )?;
        self.preset_row_delete(ns, id).await
    }

    /// Deletes a built-in Preset nobody changed along with its Namespace (the Namespace
    /// deletion's decision).
    pub async fn preset_delete_with_namespace(
        &mut self,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<(), StoreError> {
        self.require(&[Action::Delete], &ResourceRef::namespace(ns))?;
        self.preset_row_delete(ns, id).await
    }

    async fn preset_row_delete(
        &mut self,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<(), StoreError> {
        let n = self
            .q(sql!(
                "DELETE FROM presets WHERE namespace_id = $1 AND id = $2"
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
