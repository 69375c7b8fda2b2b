//! Presets: a Namespace's templates for new Agents ([`occ_core::preset`]). A template is
//! admitted by its own rules, and its `configuration.values` (each variable's default filled
//! in) by the pinned runtime's schema and the Configuration Driver, like a Configuration's.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::preset::{Preset, values_with_defaults};
use occ_core::{Error, Name, NamespaceId, PresetId, Timestamp};
use occ_store::StoreError;
use serde_json::Value;

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_ready};
use crate::{Controller, Request};

const NAME_TAKEN: &str =
    "A Preset with this name already exists in this Namespace. Choose a different name.";

/// A change of a Preset (`updatePreset`): what is given replaces what is stored.
#[derive(Debug, Clone, Default)]
pub struct PresetChange {
    /// A new name.
    pub name: Option<Name>,
    /// A new template, already admitted by [`occ_core::preset::parse_template`].
    pub template: Option<Value>,
}

fn name_conflict(e: StoreError) -> Error {
    match e {
        StoreError::Conflict { .. } => Error::conflict(NAME_TAKEN),
        other => other.into(),
    }
}

impl Controller {
    /// Presets of a Namespace the caller may read.
    pub async fn preset_list(&self, req: &Request, ns: &NamespaceId) -> Result<Vec<Preset>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.presets.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let all = tx.preset_list(ns).await?;
        Self::readable(&mut tx, req, ns, ResourceKind::Preset, all, |p| &p.id).await
    }

    /// One Preset.
    pub async fn preset_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<Preset, Error> {
        let target = ResourceRef::exact(ResourceKind::Preset, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.presets.read")
            .await?;
        found(tx.preset_get(ns, id).await?)
    }

    /// Creates a Preset (the Namespace must be ready; the name free in it).
    pub async fn preset_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        name: Name,
        template: Value,
    ) -> Result<Preset, Error> {
        let collection = ResourceRef::collection(ResourceKind::Preset, ns);
        let mut tx = self
            .write_authorized(req, Action::Create, &collection, "openclaw.presets.create")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_ready(&namespace)?;
        self.admit_template(&template)?;
        // A taken name is the database's unique constraint (`name_conflict`).
        let preset = Preset {
            id: PresetId::generate(),
            namespace_id: ns.clone(),
            name,
            template,
            seed_digest: None,
            created_at: Timestamp::now(),
        };
        tx.preset_insert(&preset).await.map_err(name_conflict)?;
        let target = ResourceRef::exact(ResourceKind::Preset, ns, &preset.id);
        let event = self.mutation(req, "openclaw.presets.create", &target, tx.evidence());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(preset)
    }

    /// Renames a Preset and/or replaces its template (the Namespace must be ready).
    pub async fn preset_update(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &PresetId,
        change: PresetChange,
    ) -> Result<Preset, Error> {
        let target = ResourceRef::exact(ResourceKind::Preset, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Update, &target, "openclaw.presets.update")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        let current = found(tx.preset_get(ns, id).await?)?;
        require_ready(&namespace)?;
        if let Some(template) = &change.template {
            self.admit_template(template)?;
        }
        let preset = Preset {
            name: change.name.unwrap_or(current.name),
            template: change.template.unwrap_or(current.template),
            ..current
        };
        tx.preset_update(&preset).await.map_err(name_conflict)?;
        let event = self.mutation(req, "openclaw.presets.update", &target, tx.evidence());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(preset)
    }

    /// Deletes a Preset and the access bindings that name it (Agents made from it keep their
    /// own copies).
    pub async fn preset_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &PresetId,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(ResourceKind::Preset, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Delete, &target, "openclaw.presets.delete")
            .await?;
        found(tx.preset_get(ns, id).await?)?;
        let removed = tx
            .binding_delete_targeting(ResourceKind::Preset, id.as_str())
            .await?;
        tx.preset_delete(ns, id).await?;
        let event = self
            .mutation(req, "openclaw.presets.delete", &target, tx.evidence())
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The Configuration Driver's check of a template's document (its bounds), its variables'
    /// defaults filled in; the runtime's schema was checked with the template.
    fn admit_template(&self, template: &Value) -> Result<(), Error> {
        match values_with_defaults(template) {
            Value::Object(values) => self.configurations.validate(&values).map_err(Error::from),
            _ => Ok(()),
        }
    }
}
