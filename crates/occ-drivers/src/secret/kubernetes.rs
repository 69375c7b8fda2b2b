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
use kube::api::{Api, PostParams};
use occ_core::{NamespaceId, SecretId};

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
