//! Credential sources: a Namespace's saved provider connections
//! ([`occ_core::credential_source`]). The source row holds its type and settings; one
//! `credential_source_secrets` row per Secret field names the Secret (never a value).

use std::collections::BTreeMap;

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::credential_source::CredentialSource;
use occ_core::resource::SecretRef;
use occ_core::{CredentialSourceId, NamespaceId, SecretId, Timestamp};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! source_cols {
    () => {
        "id, namespace_id, name, source_type, config, created_at, updated_at"
    };
}

fn from_row(r: &Row, secrets: BTreeMap<String, SecretRef>) -> Result<CredentialSource, StoreError> {
    Ok(CredentialSource {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        name: r.parse("name")?,
        source_type: r.text("source_type")?,
        config: r.json_as("config")?,
        secrets,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
    })
}

impl Tx {
    /// A credential source in exactly this Namespace.
    pub async fn credential_source_get(
        &mut self,
        ns: &NamespaceId,
        id: &CredentialSourceId,
    ) -> Result<Option<CredentialSource>, StoreError> {
        let Some(row) = self
            .q(sql!(concat!(
                "SELECT ",
                source_cols!(),
                " FROM credential_sources WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?
        else {
            return Ok(None);
        };
        let mut secrets = self.credential_source_secrets(ns, Some(id)).await?;
        let own = secrets.remove(id.as_str()).unwrap_or_default();
        from_row(&row, own).map(Some)
    }

    /// The credential sources of a Namespace, oldest first.
    pub async fn credential_source_list(
        &mut self,
        ns: &NamespaceId,
    ) -> Result<Vec<CredentialSource>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                source_cols!(),
                " FROM credential_sources WHERE namespace_id = $1 ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        let mut secrets = self.credential_source_secrets(ns, None).await?;
        rows.iter()
            .map(|r| {
                let own = secrets.remove(&r.text("id")?).unwrap_or_default();
                from_row(r, own)
            })
            .collect()
    }

    /// Ids of the credential sources of the Namespace that name this Secret.
    pub async fn secret_referencing_credential_sources(
        &mut self,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT DISTINCT source_id FROM credential_source_secrets WHERE namespace_id = $1 AND secret_id = $2 ORDER BY source_id"
            ))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(|r| r.text("source_id")).collect()
    }

    /// The Secret fields of one source (`only`) or of every source of the Namespace, by source.
    async fn credential_source_secrets(
        &mut self,
        ns: &NamespaceId,
        only: Option<&CredentialSourceId>,
    ) -> Result<BTreeMap<String, BTreeMap<String, SecretRef>>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT source_id, field, secret_id FROM credential_source_secrets WHERE namespace_id = $1 AND ($2 = '' OR source_id = $2)"
            ))
            .bind(ns.as_str())
            .bind(only.map_or("", CredentialSourceId::as_str))
            .fetch_all()
            .await?;
        let mut out: BTreeMap<String, BTreeMap<String, SecretRef>> = BTreeMap::new();
        for r in rows {
            out.entry(r.text("source_id")?).or_default().insert(
                r.text("field")?,
                SecretRef::new(ns.clone(), r.parse("secret_id")?),
            );
        }
        Ok(out)
    }

    async fn credential_source_secrets_insert(
        &mut self,
        source: &CredentialSource,
    ) -> Result<(), StoreError> {
        for (field, secret) in &source.secrets {
            self.q(sql!(
                "INSERT INTO credential_source_secrets (namespace_id, source_id, field, secret_id) VALUES ($1, $2, $3, $4)"
            ))
            .bind(source.namespace_id.as_str())
            .bind(source.id.as_str())
            .bind(field.as_str())
            .bind(secret.id.as_str())
            .execute()
            .await?;
        }
        Ok(())
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts a credential source and its Secret references; a taken name is a
    /// [`StoreError::Conflict`], a Secret the Namespace lacks a [`StoreError::Reference`].
    pub async fn credential_source_insert(
        &mut self,
        source: &CredentialSource,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::CredentialSource, &source.namespace_id),
        )?;
        self.q(sql!(
            "INSERT INTO credential_sources (id, namespace_id, name, source_type, config, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(source.id.as_str())
        .bind(source.namespace_id.as_str())
        .bind(source.name.as_str())
        .bind(source.source_type.as_str())
        .bind(serde_json::Value::Object(
            source
                .config
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        ))
        .bind(source.created_at)
        .bind(source.updated_at)
        .execute()
        .await?;
        self.credential_source_secrets_insert(source).await
    }

    /// Replaces a source's Secret references (and its `updated_at`).
    pub async fn credential_source_replace_secrets(
        &mut self,
        source: &CredentialSource,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(
                ResourceKind::CredentialSource,
                &source.namespace_id,
                &source.id,
            ),
        )?;
        let n = self
            .q(sql!(
                "UPDATE credential_sources SET updated_at = $3 WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(source.namespace_id.as_str())
            .bind(source.id.as_str())
            .bind(at)
            .execute()
            .await?;
        if n != 1 {
            return Err(StoreError::NotFound);
        }
        self.q(sql!(
            "DELETE FROM credential_source_secrets WHERE namespace_id = $1 AND source_id = $2"
        ))
        .bind(source.namespace_id.as_str())
        .bind(source.id.as_str())
        .execute()
        .await?;
        self.credential_source_secrets_insert(source).await
    }

    /// Deletes a credential source (its Secret references go with it).
    pub async fn credential_source_delete(
        &mut self,
        ns: &NamespaceId,
        id: &CredentialSourceId,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::CredentialSource, ns, id),
        )?;
        let n = self
            .q(sql!(
                "DELETE FROM credential_sources WHERE namespace_id = $1 AND id = $2"
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
