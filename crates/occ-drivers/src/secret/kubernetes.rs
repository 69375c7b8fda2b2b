//! The Kubernetes Secret Driver: one Opaque Secret per value in the occ Namespace's tenant
//! namespace, with a single key `value`, named
//! `secret-<sha12(namespace)>-<sha12(secret)>-<sha12(random)>` so that a pre-existing object is
//! never re-adopted, and marked as occ's by labels and annotations (Namespace, Secret, Driver).
//!
//! The locator occ stores is `<namespace>/<name>/<uid>`: every read checks that the object at
//! that name still has that uid and every ownership mark, so a Secret deleted and recreated by
//! someone else is refused rather than used. Replacement keeps the object (its uid) and writes
//! under the observed resourceVersion; deletion carries uid and resourceVersion preconditions.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use occ_core::{AgentId, NamespaceId, RevisionId, SecretId};

use super::handed;

use crate::kubernetes::{
    ANNOTATION_NAMESPACE_ID, KubeClient, KubeFailure, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, resolve_tenant_namespace, short_hash,
};
use crate::{DriverError, DriverIdentity};

const VALUE_KEY: &str = "value";
const LABEL_SECRET: &str = "openclaw.dev/secret";
const ANNOTATION_SECRET_ID: &str = "openclaw.dev/secret-id";
const ANNOTATION_DRIVER_ID: &str = "openclaw.dev/secret-driver-id";
const DRIVER_ID: &str = "secret-kubernetes";
/// Largest value accepted back from the cluster.
const VALUE_MAX_BYTES: usize = 65_536;

/// Stores values as Kubernetes Secrets.
#[derive(Debug, Clone)]
pub struct KubernetesSecretDriver {
    kube: KubeClient,
}

/// `<namespace>/<name>/<uid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Locator {
    namespace: String,
    name: String,
    uid: String,
}

impl Locator {
    fn parse(text: &str) -> Result<Self, DriverError> {
        let mut parts = text.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(namespace), Some(name), Some(uid), None)
                if !namespace.is_empty() && !name.is_empty() && !uid.is_empty() =>
            {
                Ok(Self {
                    namespace: namespace.into(),
                    name: name.into(),
                    uid: uid.into(),
                })
            }
            _ => Err(DriverError::Corrupt(
                "the secret locator is malformed".into(),
            )),
        }
    }

    fn render(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.name, self.uid)
    }
}

impl KubernetesSecretDriver {
    /// A driver using `kube`.
    pub fn new(kube: KubeClient) -> Self {
        Self { kube }
    }

    /// `secret-kubernetes` / `kubernetes-secret`.
    pub fn identity(&self) -> DriverIdentity {
        DriverIdentity {
            id: DRIVER_ID.into(),
            implementation: "kubernetes-secret".into(),
        }
    }

    /// The Secret occ creates for a value (also used by the golden tests). `suffix` is the
    /// random part of the name.
    pub fn manifest(
        ns: &NamespaceId,
        id: &SecretId,
        tenant: &str,
        suffix: &str,
        value: &str,
    ) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(format!(
                    "secret-{}-{}-{}",
                    short_hash(ns.as_str(), 12),
                    short_hash(id.as_str(), 12),
                    short_hash(suffix, 12)
                )),
                namespace: Some(tenant.to_owned()),
                labels: Some(Self::labels(ns, id)),
                annotations: Some(Self::annotations(ns, id)),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".into()),
            immutable: Some(false),
            string_data: Some(BTreeMap::from([(VALUE_KEY.to_owned(), value.to_owned())])),
            ..Secret::default()
        }
    }

    fn labels(ns: &NamespaceId, id: &SecretId) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_NAMESPACE.to_owned(), ns.to_string()),
            (LABEL_SECRET.to_owned(), id.to_string()),
        ])
    }

    fn annotations(ns: &NamespaceId, id: &SecretId) -> BTreeMap<String, String> {
        BTreeMap::from([
            (ANNOTATION_NAMESPACE_ID.to_owned(), ns.to_string()),
            (ANNOTATION_SECRET_ID.to_owned(), id.to_string()),
            (ANNOTATION_DRIVER_ID.to_owned(), DRIVER_ID.to_owned()),
        ])
    }

    /// Refuses an object that is not exactly this Secret's value at this locator.
    fn check(
        ns: &NamespaceId,
        id: &SecretId,
        at: &Locator,
        secret: &Secret,
    ) -> Result<(), DriverError> {
        let refuse = |why: &str| {
            DriverError::Corrupt(format!(
                "Kubernetes Secret {}/{} of {id}: {why}",
                at.namespace, at.name
            ))
        };
        let meta = &secret.metadata;
        if meta.name.as_deref() != Some(at.name.as_str())
            || meta.namespace.as_deref().is_some_and(|n| n != at.namespace)
            || meta.uid.as_deref() != Some(at.uid.as_str())
        {
            return Err(refuse(
                "name, namespace or uid differs (replaced by someone else?)",
            ));
        }
        let has_all = |wanted: BTreeMap<String, String>,
                       actual: &Option<BTreeMap<String, String>>| {
            wanted
                .iter()
                .all(|(k, v)| actual.as_ref().and_then(|a| a.get(k)) == Some(v))
        };
        if !has_all(Self::labels(ns, id), &meta.labels)
            || !has_all(Self::annotations(ns, id), &meta.annotations)
        {
            return Err(refuse("ownership labels or annotations differ"));
        }
        if secret.type_.as_deref() != Some("Opaque") || secret.immutable == Some(true) {
            return Err(refuse("not a mutable Opaque Secret"));
        }
        if !secret
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key(VALUE_KEY))
        {
            return Err(refuse("the value entry is missing"));
        }
        Ok(())
    }

    async fn fetch(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(Api<Secret>, Locator, Secret), DriverError> {
        let at = Locator::parse(locator)?;
        let tenant = resolve_tenant_namespace(&self.kube, ns).await?;
        if tenant != at.namespace {
            return Err(DriverError::Corrupt(format!(
                "the Secret of {id} is recorded in namespace {} but {ns} lives in {tenant}",
                at.namespace
            )));
        }
        let api: Api<Secret> = Api::namespaced(self.kube.client(), &at.namespace);
        let what = format!("get secrets in namespace {}", at.namespace);
        let secret = self.kube.call(&what, || api.get(&at.name)).await?;
        Self::check(ns, id, &at, &secret)?;
        Ok((api, at, secret))
    }

    pub(super) async fn put(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        value: &str,
    ) -> Result<String, DriverError> {
        let tenant = resolve_tenant_namespace(&self.kube, ns).await?;
        let api: Api<Secret> = Api::namespaced(self.kube.client(), &tenant);
        let manifest = Self::manifest(ns, id, &tenant, &uuid_suffix(), value);
        let post = PostParams::default();
        let what = format!("create secrets in namespace {tenant}");
        // A random name: AlreadyExists can only mean an earlier attempt of this very call was
        // applied; the caller cannot tell its uid, so it is a conflict and occ records nothing.
        let created = self
            .kube
            .call(&what, || api.create(&post, &manifest))
            .await
            .map_err(|e| match e {
                KubeFailure::AlreadyExists => DriverError::Conflict(
                    "the Secret's create was answered ambiguously; retry".into(),
                ),
                other => other.into(),
            })?;
        let uid = created
            .metadata
            .uid
            .ok_or_else(|| DriverError::Unavailable("the API server returned no uid".into()))?;
        Ok(Locator {
            namespace: tenant,
            name: created.metadata.name.unwrap_or_default(),
            uid,
        }
        .render())
    }

    pub(super) async fn replace(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        value: &str,
    ) -> Result<String, DriverError> {
        let (api, at, mut secret) = self.fetch(ns, id, locator).await?;
        // Keep the object and foreign metadata; re-assert ours; replace the value under the
        // observed resourceVersion.
        secret
            .metadata
            .labels
            .get_or_insert_default()
            .extend(Self::labels(ns, id));
        secret
            .metadata
            .annotations
            .get_or_insert_default()
            .extend(Self::annotations(ns, id));
        secret.data = None;
        secret.string_data = Some(BTreeMap::from([(VALUE_KEY.to_owned(), value.to_owned())]));
        let post = PostParams::default();
        let what = format!("update secrets in namespace {}", at.namespace);
        self.kube
            .call(&what, || api.replace(&at.name, &post, &secret))
            .await?;
        Ok(at.render())
    }

    pub(super) async fn delete(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        let (api, at, secret) = match self.fetch(ns, id, locator).await {
            Ok(found) => found,
            Err(DriverError::NotFound) => return Ok(()),
            Err(other) => return Err(other),
        };
        let what = format!("delete secrets in namespace {}", at.namespace);
        self.kube
            .delete_exact(
                &api,
                &at.name,
                Some(at.uid.clone()),
                secret.metadata.resource_version.clone(),
                &what,
            )
            .await
            .map_err(Into::into)
    }

    pub(super) async fn verify(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        let (_, _, secret) = self.fetch(ns, id, locator).await?;
        decode_value(&secret).map(|_| ())
    }

    pub(super) async fn with_value<T>(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        use_value: impl FnOnce(&str) -> T,
    ) -> Result<T, DriverError> {
        let (_, _, secret) = self.fetch(ns, id, locator).await?;
        let value = decode_value(&secret)?;
        Ok(use_value(&value))
    }
}

/// The label of a handed-values record: the Agent whose revision it belongs to.
const LABEL_HANDED_AGENT: &str = "openclaw.dev/handed-agent";
/// The annotation naming the record's revision.
const ANNOTATION_HANDED_REVISION: &str = "openclaw.dev/handed-revision";
/// The record's data key.
const HANDED_KEY: &str = "values";
/// Largest record accepted back from the cluster.
const HANDED_MAX_BYTES: usize = 8 * 1024 * 1024;

impl KubernetesSecretDriver {
    /// `handed-<sha12(namespace)>-<sha12(agent)>-<sha12(revision)>`: one record per revision.
    fn handed_name(ns: &NamespaceId, agent: &AgentId, rev: &RevisionId) -> String {
        format!(
            "handed-{}-{}-{}",
            short_hash(ns.as_str(), 12),
            short_hash(agent.as_str(), 12),
            short_hash(rev.as_str(), 12)
        )
    }

    fn handed_labels(ns: &NamespaceId, agent: &AgentId) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_NAMESPACE.to_owned(), ns.to_string()),
            (LABEL_HANDED_AGENT.to_owned(), agent.to_string()),
        ])
    }

    /// Whether `secret` is occ's record for exactly this revision.
    fn is_handed_record(
        ns: &NamespaceId,
        agent: &AgentId,
        rev: Option<&RevisionId>,
        secret: &Secret,
    ) -> bool {
        let labels = secret.metadata.labels.as_ref();
        let annotations = secret.metadata.annotations.as_ref();
        Self::handed_labels(ns, agent)
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            && rev.is_none_or(|rev| {
                annotations.and_then(|a| a.get(ANNOTATION_HANDED_REVISION))
                    == Some(&rev.to_string())
            })
    }

    async fn handed_record(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
    ) -> Result<(Api<Secret>, String, Option<Secret>), DriverError> {
        let tenant = resolve_tenant_namespace(&self.kube, ns).await?;
        let api: Api<Secret> = Api::namespaced(self.kube.client(), &tenant);
        let name = Self::handed_name(ns, agent, rev);
        let what = format!("get secrets in namespace {tenant}");
        let found = self.kube.get_opt(&api, &name, &what).await?;
        if let Some(secret) = &found
            && !Self::is_handed_record(ns, agent, Some(rev), secret)
        {
            return Err(DriverError::Corrupt(format!(
                "Kubernetes Secret {tenant}/{name} is not occ's record of {rev}"
            )));
        }
        Ok((api, tenant, found))
    }

    pub(super) async fn handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
    ) -> Result<Vec<String>, DriverError> {
        let (_, _, found) = self.handed_record(ns, agent, rev).await?;
        found.as_ref().map_or(Ok(Vec::new()), decode_handed)
    }

    pub(super) async fn record_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        values: &[&str],
    ) -> Result<(), DriverError> {
        let (api, tenant, found) = self.handed_record(ns, agent, rev).await?;
        let known = found.as_ref().map_or(Ok(Vec::new()), decode_handed)?;
        let Some(merged) = handed::merge(known, values) else {
            return Ok(());
        };
        let text = serde_json::to_string(&merged)
            .map_err(|e| DriverError::Unavailable(format!("handed values: {e}")))?;
        let data = BTreeMap::from([(HANDED_KEY.to_owned(), text)]);
        let post = PostParams::default();
        match found {
            // Replaced under the observed resourceVersion: a concurrent writer makes this a
            // conflict, and the caller retries with the merged record.
            Some(mut secret) => {
                secret.data = None;
                secret.string_data = Some(data);
                let what = format!("update secrets in namespace {tenant}");
                let name = Self::handed_name(ns, agent, rev);
                self.kube
                    .call(&what, || api.replace(&name, &post, &secret))
                    .await?;
            }
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(Self::handed_name(ns, agent, rev)),
                        namespace: Some(tenant.clone()),
                        labels: Some(Self::handed_labels(ns, agent)),
                        annotations: Some(BTreeMap::from([
                            (ANNOTATION_NAMESPACE_ID.to_owned(), ns.to_string()),
                            (ANNOTATION_HANDED_REVISION.to_owned(), rev.to_string()),
                        ])),
                        ..ObjectMeta::default()
                    },
                    type_: Some("Opaque".into()),
                    string_data: Some(data),
                    ..Secret::default()
                };
                let what = format!("create secrets in namespace {tenant}");
                self.kube
                    .call(&what, || api.create(&post, &secret))
                    .await
                    .map_err(|e| match e {
                        KubeFailure::AlreadyExists => DriverError::Conflict(
                            "the handed-values record was created concurrently; retry".into(),
                        ),
                        other => other.into(),
                    })?;
            }
        }
        Ok(())
    }

    pub(super) async fn forget_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<(), DriverError> {
        let tenant = match resolve_tenant_namespace(&self.kube, ns).await {
            Ok(tenant) => tenant,
            // The tenant namespace (and everything in it) is gone already.
            Err(DriverError::NotFound) => return Ok(()),
            Err(e) => return Err(e),
        };
        let api: Api<Secret> = Api::namespaced(self.kube.client(), &tenant);
        let params = ListParams::default().labels(&format!(
            "{LABEL_HANDED_AGENT}={agent},{LABEL_NAMESPACE}={ns}"
        ));
        let what = format!("list secrets in namespace {tenant}");
        let records = self.kube.call(&what, || api.list(&params)).await?;
        for secret in records.items {
            if !Self::is_handed_record(ns, agent, None, &secret) {
                continue;
            }
            let Some(name) = secret.metadata.name.clone() else {
                continue;
            };
            let what = format!("delete secrets in namespace {tenant}");
            self.kube
                .delete_exact(
                    &api,
                    &name,
                    secret.metadata.uid.clone(),
                    secret.metadata.resource_version.clone(),
                    &what,
                )
                .await?;
        }
        Ok(())
    }
}

/// A record's values, strictly: a JSON array of strings, bounded.
fn decode_handed(secret: &Secret) -> Result<Vec<String>, DriverError> {
    let bad = |why: &str| DriverError::Corrupt(format!("the handed-values record {why}"));
    let ByteString(bytes) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(HANDED_KEY))
        .ok_or_else(|| bad("is missing its values"))?;
    if bytes.len() > HANDED_MAX_BYTES {
        return Err(bad("is too large"));
    }
    serde_json::from_slice(bytes).map_err(|_| bad("is malformed"))
}

/// The stored value, strictly: non-empty UTF-8 without NUL, at most 64 KiB.
fn decode_value(secret: &Secret) -> Result<String, DriverError> {
    let bad = |why: &str| DriverError::Corrupt(format!("the stored Secret value {why}"));
    let ByteString(bytes) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(VALUE_KEY))
        .ok_or_else(|| bad("is missing"))?;
    if bytes.is_empty() || bytes.len() > VALUE_MAX_BYTES {
        return Err(bad("is empty or larger than 64 KiB"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad("is not UTF-8"))?;
    if text.contains('\0') {
        return Err(bad("contains NUL"));
    }
    Ok(text.to_owned())
}

fn uuid_suffix() -> String {
    let bytes: [u8; 16] = rand::random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locators_round_trip_and_refuse_malformed_text() {
        let l = Locator::parse("occ-abc/secret-1/uid-1").expect("parse");
        assert_eq!(l.render(), "occ-abc/secret-1/uid-1");
        for bad in ["", "a/b", "a/b/c/d", "a//c", "/b/c"] {
            assert!(Locator::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_dns_safe_and_fit() {
        let s = KubernetesSecretDriver::manifest(
            &NamespaceId::generate(),
            &SecretId::generate(),
            "t",
            "x",
            "v",
        );
        let name = s.metadata.name.expect("name");
        assert!(name.len() <= 63);
        assert!(
            name.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        );
    }
}
