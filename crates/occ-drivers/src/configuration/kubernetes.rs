//! The Kubernetes Configuration Driver: one ConfigMap per Configuration in the occ Namespace's
//! tenant namespace, holding exactly one data entry `openclaw.json` (the serialized native
//! document, inline SecretRefs unresolved), named `cfg-<slug>-<sha256(id)[0:12]>` and marked as
//! occ's by labels and annotations (Namespace and Configuration ids, kind `agent`, generation,
//! creation time).
//!
//! Creation writes generation 1; each update replaces the whole document with the observed
//! `resourceVersion` and advances the generation annotation by exactly one, so a concurrent
//! writer surfaces as a conflict, never as a blind overwrite. Deletion carries the observed uid
//! as a precondition. Anything malformed or not ours (name, labels, annotations, extra entries,
//! binary data, a document of 1 MiB or more, not a JSON object) is refused, never adopted or
//! overwritten.
//!
//! Unlike the filesystem Driver, the backend holds one generation only. A write therefore
//! returns what it replaced ([`super::WriteReceipt`]) and undoing it restores exactly that
//! (guarded by the resourceVersion the write produced), which keeps the metadata row and the
//! ConfigMap under one compensating boundary.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId, Timestamp};
use serde_json::{Map, Value};

use super::document::{DOCUMENT_MAX_BYTES, DocumentKey};
use crate::kubernetes::{
    ANNOTATION_NAMESPACE_ID, KubeClient, KubeFailure, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, annotation, label, resolve_tenant_namespace, short_hash,
};
use crate::{DriverError, DriverIdentity};

/// The one data entry of a Configuration ConfigMap.
pub const DOCUMENT_KEY: &str = "openclaw.json";
const LABEL_CONFIGURATION: &str = "openclaw.dev/configuration";
const ANNOTATION_CONFIGURATION_ID: &str = "openclaw.dev/configuration-id";
const ANNOTATION_KIND: &str = "openclaw.dev/configuration-kind";
const ANNOTATION_GENERATION: &str = "openclaw.dev/configuration-generation";
const ANNOTATION_CREATED_AT: &str = "openclaw.dev/configuration-created-at";
const KIND_AGENT: &str = "agent";

/// Stores documents as ConfigMaps.
#[derive(Debug, Clone)]
pub struct KubernetesConfigurationDriver {
    kube: KubeClient,
}

/// A document as stored, verified to be this Configuration's.
struct Stored {
    generation: Generation,
    values: Map<String, Value>,
    resource_version: String,
    uid: String,
}

/// What a write replaced (see [`super::WriteReceipt`]).
#[derive(Debug, Clone)]
pub(super) enum Replaced {
    /// The ConfigMap was created; undo deletes it.
    Nothing { written_version: String },
    /// An earlier generation was replaced; undo puts it back.
    Generation {
        generation: Generation,
        values: Map<String, Value>,
        written_version: String,
    },
    /// A leftover of the same generation was replaced: the earlier generation is gone, so
    /// there is nothing to restore.
    Leftover,
}

/// `cfg-<slug>-<sha256(id)[0:12]>`: deterministic, DNS-safe, at most 63 characters; distinct
/// ids never share a name (the hash suffix).
pub fn configmap_name(id: &ConfigurationId) -> String {
    let raw = id.as_str();
    let slug_source = raw.strip_prefix("cfg_").unwrap_or(raw).to_lowercase();
    let mut slug = String::with_capacity(slug_source.len());
    for c in slug_source.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            c
        } else {
            '-'
        };
        if !(c == '-' && slug.ends_with('-')) {
            slug.push(c);
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(46).collect();
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "config" } else { slug };
    format!("cfg-{slug}-{}", short_hash(raw, 12))
}

impl KubernetesConfigurationDriver {
    /// A driver using `kube`.
    pub fn new(kube: KubeClient) -> Self {
        Self { kube }
    }

    /// `configuration-kubernetes` / `kubernetes-configmap`.
    pub fn identity(&self) -> DriverIdentity {
        DriverIdentity {
            id: "configuration-kubernetes".into(),
            implementation: "kubernetes-configmap".into(),
        }
    }

    async fn api(&self, ns: &NamespaceId) -> Result<(Api<ConfigMap>, String), DriverError> {
        let tenant = resolve_tenant_namespace(&self.kube, ns).await?;
        Ok((Api::namespaced(self.kube.client(), &tenant), tenant))
    }

    /// The ConfigMap occ would write for `key` (also used by the golden tests).
    pub fn manifest(
        key: DocumentKey<'_>,
        tenant: &str,
        values: &Map<String, Value>,
    ) -> Result<ConfigMap, DriverError> {
        let document = serde_json::to_string(values)
            .map_err(|e| DriverError::Configuration(format!("serialize the document: {e}")))?;
        if document.len() >= DOCUMENT_MAX_BYTES {
            return Err(DriverError::Conflict(
                "the document is larger than 1 MiB".into(),
            ));
        }
        let labels = BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_NAMESPACE.to_owned(), key.namespace_id.to_string()),
            (
                LABEL_CONFIGURATION.to_owned(),
                key.configuration_id.to_string(),
            ),
        ]);
        let annotations = BTreeMap::from([
            (
                ANNOTATION_NAMESPACE_ID.to_owned(),
                key.namespace_id.to_string(),
            ),
            (
                ANNOTATION_CONFIGURATION_ID.to_owned(),
                key.configuration_id.to_string(),
            ),
            (ANNOTATION_KIND.to_owned(), KIND_AGENT.to_owned()),
            (
                ANNOTATION_GENERATION.to_owned(),
                key.generation.get().to_string(),
            ),
            (
                ANNOTATION_CREATED_AT.to_owned(),
                key.created_at.to_canonical(),
            ),
        ]);
        Ok(ConfigMap {
            metadata: ObjectMeta {
                name: Some(configmap_name(key.configuration_id)),
                namespace: Some(tenant.to_owned()),
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(DOCUMENT_KEY.to_owned(), document)])),
            ..ConfigMap::default()
        })
    }

    /// Verifies a stored ConfigMap is exactly this Configuration's and returns its document.
    /// The generation is returned, not checked (callers decide which generations they accept).
    fn checked(key: &DocumentKey<'_>, tenant: &str, cm: &ConfigMap) -> Result<Stored, DriverError> {
        let refuse = |why: &str| {
            DriverError::Corrupt(format!(
                "ConfigMap {}/{} of {}: {why}",
                tenant,
                configmap_name(key.configuration_id),
                key.configuration_id
            ))
        };
        let meta = &cm.metadata;
        if meta.name.as_deref() != Some(configmap_name(key.configuration_id).as_str())
            || meta.namespace.as_deref().is_some_and(|n| n != tenant)
        {
            return Err(refuse("name or namespace differs"));
        }
        if label(meta, LABEL_MANAGED_BY) != Some(MANAGED_BY)
            || label(meta, LABEL_NAMESPACE) != Some(key.namespace_id.as_str())
            || label(meta, LABEL_CONFIGURATION) != Some(key.configuration_id.as_str())
        {
            return Err(refuse("ownership labels differ"));
        }
        if annotation(meta, ANNOTATION_NAMESPACE_ID) != Some(key.namespace_id.as_str())
            || annotation(meta, ANNOTATION_CONFIGURATION_ID) != Some(key.configuration_id.as_str())
        {
            return Err(refuse("ownership annotations differ"));
        }
        if annotation(meta, ANNOTATION_KIND) != Some(KIND_AGENT) {
            return Err(refuse("kind annotation is not agent"));
        }
        let generation = annotation(meta, ANNOTATION_GENERATION)
            .filter(|g| {
                !g.is_empty()
                    && g.len() <= 19
                    && !g.starts_with('0')
                    && g.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|g| g.parse::<u64>().ok())
            .and_then(Generation::new)
            .ok_or_else(|| refuse("generation annotation is malformed"))?;
        let created_at = annotation(meta, ANNOTATION_CREATED_AT)
            .and_then(|t| Timestamp::parse_canonical(t).ok())
            .ok_or_else(|| refuse("creation time annotation is malformed"))?;
        if created_at != key.created_at {
            return Err(refuse("creation time differs"));
        }
        if cm.binary_data.as_ref().is_some_and(|b| !b.is_empty()) {
            return Err(refuse("binary data present"));
        }
        let data = cm.data.as_ref().ok_or_else(|| refuse("no data"))?;
        if data.len() != 1 {
            return Err(refuse("data must hold exactly one entry"));
        }
        let document = data
            .get(DOCUMENT_KEY)
            .ok_or_else(|| refuse("the document entry is missing"))?;
        if document.len() >= DOCUMENT_MAX_BYTES {
            return Err(refuse("the document is 1 MiB or larger"));
        }
        let values = match serde_json::from_str::<Value>(document) {
            Ok(Value::Object(values)) => values,
            _ => return Err(refuse("the document is not a JSON object")),
        };
        Ok(Stored {
            generation,
            values,
            resource_version: meta
                .resource_version
                .clone()
                .ok_or_else(|| refuse("no resourceVersion"))?,
            uid: meta.uid.clone().ok_or_else(|| refuse("no uid"))?,
        })
    }

    async fn fetch(
        &self,
        api: &Api<ConfigMap>,
        tenant: &str,
        key: &DocumentKey<'_>,
    ) -> Result<Option<Stored>, DriverError> {
        let name = configmap_name(key.configuration_id);
        let what = format!("get configmaps in namespace {tenant}");
        match self.kube.get_opt(api, &name, &what).await? {
            Some(cm) => Self::checked(key, tenant, &cm).map(Some),
            None => Ok(None),
        }
    }

    pub(super) async fn write(
        &self,
        key: DocumentKey<'_>,
        values: &Map<String, Value>,
        replace_stale: bool,
    ) -> Result<Replaced, DriverError> {
        let (api, tenant) = self.api(key.namespace_id).await?;
        let post = PostParams::default();
        let mut manifest = Self::manifest(key, &tenant, values)?;
        let name = configmap_name(key.configuration_id);
        let is_ours =
            |stored: &Stored| stored.generation == key.generation && &stored.values == values;
        if key.generation == Generation::FIRST && !replace_stale {
            let what = format!("create configmaps in namespace {tenant}");
            return match self.kube.call(&what, || api.create(&post, &manifest)).await {
                Ok(created) => Ok(Replaced::Nothing {
                    written_version: created.metadata.resource_version.unwrap_or_default(),
                }),
                // A retried create whose first attempt was applied finds its own object.
                Err(KubeFailure::AlreadyExists) => match self.fetch(&api, &tenant, &key).await {
                    Ok(Some(stored)) if is_ours(&stored) => Ok(Replaced::Nothing {
                        written_version: stored.resource_version,
                    }),
                    _ => Err(DriverError::Conflict(format!(
                        "ConfigMap {tenant}/{name} already exists"
                    ))),
                },
                Err(other) => Err(other.into()),
            };
        }
        let current = self
            .fetch(&api, &tenant, &key)
            .await?
            .ok_or(DriverError::NotFound)?;
        let follows_previous =
            Some(current.generation.get()) == key.generation.get().checked_sub(1);
        let replaces_leftover = current.generation == key.generation && replace_stale;
        if !(follows_previous || replaces_leftover) {
            return Err(DriverError::Conflict(format!(
                "ConfigMap {tenant}/{name} holds generation {}, not the one before {}",
                current.generation, key.generation
            )));
        }
        let replaced = |written_version: String| {
            if follows_previous {
                Replaced::Generation {
                    generation: current.generation,
                    values: current.values.clone(),
                    written_version,
                }
            } else {
                Replaced::Leftover
            }
        };
        manifest.metadata.resource_version = Some(current.resource_version.clone());
        let what = format!("update configmaps in namespace {tenant}");
        match self
            .kube
            .call(&what, || api.replace(&name, &post, &manifest))
            .await
        {
            Ok(written) => Ok(replaced(
                written.metadata.resource_version.unwrap_or_default(),
            )),
            // A retried replace whose first attempt was applied sees its own write.
            Err(KubeFailure::Conflict(message)) => match self.fetch(&api, &tenant, &key).await {
                Ok(Some(stored)) if is_ours(&stored) => Ok(replaced(stored.resource_version)),
                _ => Err(DriverError::Conflict(message)),
            },
            Err(other) => Err(other.into()),
        }
    }

    pub(super) async fn read(
        &self,
        key: DocumentKey<'_>,
    ) -> Result<Map<String, Value>, DriverError> {
        let (api, tenant) = self.api(key.namespace_id).await?;
        let stored = self
            .fetch(&api, &tenant, &key)
            .await?
            .ok_or(DriverError::NotFound)?;
        if stored.generation != key.generation {
            return Err(DriverError::Unavailable(format!(
                "ConfigMap of {} holds generation {}, occ committed {} (an update did not complete; the next update repairs it)",
                key.configuration_id, stored.generation, key.generation
            )));
        }
        Ok(stored.values)
    }

    /// Undoes one write, only if nothing changed the ConfigMap since (its resourceVersion).
    pub(super) async fn undo(
        &self,
        key: DocumentKey<'_>,
        replaced: &Replaced,
    ) -> Result<(), DriverError> {
        let (api, tenant) = self.api(key.namespace_id).await?;
        let name = configmap_name(key.configuration_id);
        match replaced {
            Replaced::Leftover => Ok(()),
            Replaced::Nothing { written_version } => {
                let Some(stored) = self.fetch(&api, &tenant, &key).await? else {
                    return Ok(());
                };
                if &stored.resource_version != written_version {
                    return Err(DriverError::Conflict(format!(
                        "ConfigMap {tenant}/{name} changed after the write being undone"
                    )));
                }
                self.delete_exact(&api, &tenant, &name, &stored).await
            }
            Replaced::Generation {
                generation,
                values,
                written_version,
            } => {
                let previous = DocumentKey {
                    generation: *generation,
                    ..key
                };
                let post = PostParams::default();
                let mut manifest = Self::manifest(previous, &tenant, values)?;
                manifest.metadata.resource_version = Some(written_version.clone());
                let what = format!("update configmaps in namespace {tenant}");
                match self
                    .kube
                    .call(&what, || api.replace(&name, &post, &manifest))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(KubeFailure::Conflict(message)) => {
                        match self.fetch(&api, &tenant, &previous).await {
                            Ok(Some(stored))
                                if stored.generation == *generation && &stored.values == values =>
                            {
                                Ok(())
                            }
                            _ => Err(DriverError::Conflict(message)),
                        }
                    }
                    Err(other) => Err(other.into()),
                }
            }
        }
    }

    async fn delete_exact(
        &self,
        api: &Api<ConfigMap>,
        tenant: &str,
        name: &str,
        stored: &Stored,
    ) -> Result<(), DriverError> {
        let what = format!("delete configmaps in namespace {tenant}");
        self.kube
            .delete_exact(
                api,
                name,
                Some(stored.uid.clone()),
                Some(stored.resource_version.clone()),
                &what,
            )
            .await
            .map_err(Into::into)
    }

    /// Deletes the ConfigMap when `keep` is `None` (the Configuration is deleted); one object
    /// holds one generation, so pruning superseded generations has nothing to do.
    pub(super) async fn prune(
        &self,
        namespace_id: &NamespaceId,
        configuration_id: &ConfigurationId,
        created_at: Timestamp,
        keep: Option<Generation>,
    ) -> Result<(), DriverError> {
        if keep.is_some() {
            return Ok(());
        }
        let key = DocumentKey {
            namespace_id,
            configuration_id,
            generation: Generation::FIRST,
            created_at,
        };
        let (api, tenant) = self.api(namespace_id).await?;
        let Some(stored) = self.fetch(&api, &tenant, &key).await? else {
            return Ok(());
        };
        self.delete_exact(&api, &tenant, &configmap_name(configuration_id), &stored)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_dns_safe_and_distinct() {
        let a: ConfigurationId = "cfg_0b0c9a5e-8d1f-4f5e-9a55-3c1f0b2c7d11"
            .parse()
            .expect("id");
        let b: ConfigurationId = "cfg_0b0c9a5e-8d1f-4f5e-9a55-3c1f0b2c7d12"
            .parse()
            .expect("id");
        let name = configmap_name(&a);
        assert_eq!(name, configmap_name(&a));
        assert_ne!(name, configmap_name(&b));
        assert!(name.len() <= 63, "{name}");
        assert!(
            name.starts_with("cfg-0b0c9a5e-8d1f-4f5e-9a55-3c1f0b2c7d11-"),
            "{name}"
        );
        assert!(
            name.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        );
    }
}
