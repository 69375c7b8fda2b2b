//! Where an occ Namespace lives in the cluster: its tenant namespace, found only through
//! namespace list/get (never guessed, never created here). The Kubernetes Compute Driver
//! provisions it (a namespace named [`tenant_namespace_name`]) or adopts the operator's
//! `existingNamespace` by labelling it; both carry the occ Namespace id as a label and an
//! annotation.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use occ_core::NamespaceId;

use super::client::KubeClient;
use super::marks::{
    ANNOTATION_NAMESPACE_ID, ANNOTATION_NAMESPACE_LIFECYCLE, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, annotation, label, short_hash,
};
use crate::DriverError;
use crate::compute::NamespaceTarget;

/// `ANNOTATION_NAMESPACE_LIFECYCLE` value of an adopted (operator-owned) namespace.
pub const TENANT_LIFECYCLE_EXTERNAL: &str = "external";

/// The name of the tenant namespace occ provisions for an occ Namespace:
/// `occ-<first 15 hex of sha256(id)>` (deterministic, DNS-safe, no id text in the name).
pub fn tenant_namespace_name(ns: &NamespaceId) -> String {
    format!("occ-{}", short_hash(ns.as_str(), 15))
}

/// The tenant namespace an occ Namespace uses: the operator's adopted `existingNamespace`, or
/// the one occ provisions at [`tenant_namespace_name`].
pub fn tenant_namespace_of(ns: &NamespaceTarget) -> String {
    ns.existing_namespace
        .clone()
        .unwrap_or_else(|| tenant_namespace_name(&ns.id))
}

/// The namespace that claims `ns` (its label), verified: exactly one namespace carries the
/// label, its annotation agrees, and it is occ's own (managed, at the derived name) or
/// explicitly adopted. None when no namespace claims it (not provisioned, or already gone);
/// several claimants or a disagreeing object → refused as not ours.
pub(crate) async fn find_tenant_namespace(
    kube: &KubeClient,
    ns: &NamespaceId,
) -> Result<Option<Namespace>, DriverError> {
    let api: Api<Namespace> = Api::all(kube.client());
    let params = ListParams::default().labels(&format!("{LABEL_NAMESPACE}={ns}"));
    let mut list = kube.call("list namespaces", || api.list(&params)).await?;
    if list.items.len() > 1 {
        return Err(DriverError::Corrupt(format!(
            "{} namespaces claim occ Namespace {ns}",
            list.items.len()
        )));
    }
    let Some(found) = list.items.pop() else {
        return Ok(None);
    };
    let meta = &found.metadata;
    let name = meta.name.clone().unwrap_or_default();
    if annotation(meta, ANNOTATION_NAMESPACE_ID) != Some(ns.as_str()) {
        return Err(DriverError::Corrupt(format!(
            "namespace {name} is labelled for {ns} but its {ANNOTATION_NAMESPACE_ID} annotation disagrees"
        )));
    }
    let adopted =
        annotation(meta, ANNOTATION_NAMESPACE_LIFECYCLE) == Some(TENANT_LIFECYCLE_EXTERNAL);
    if !adopted
        && (label(meta, LABEL_MANAGED_BY) != Some(MANAGED_BY) || name != tenant_namespace_name(ns))
    {
        return Err(DriverError::Corrupt(format!(
            "namespace {name} claims {ns} but is neither occ-managed at its derived name nor adopted"
        )));
    }
    Ok(Some(found))
}

/// The tenant namespace of `ns` ([`find_tenant_namespace`]), which must be `Active`: not
/// provisioned yet or terminating → unavailable (try again later). Once found it is
/// remembered by the client (a Namespace's placement never changes; the objects in it are
/// still checked on every use, and a namespace that went away answers 404 → unavailable).
pub(crate) async fn resolve_tenant_namespace(
    kube: &KubeClient,
    ns: &NamespaceId,
) -> Result<String, DriverError> {
    if let Some(known) = kube.known_tenant(ns) {
        return Ok(known);
    }
    let Some(found) = find_tenant_namespace(kube, ns).await? else {
        return Err(DriverError::Unavailable(format!(
            "the tenant namespace of {ns} is not provisioned yet"
        )));
    };
    let name = found.metadata.name.clone().unwrap_or_default();
    let phase = found.status.as_ref().and_then(|s| s.phase.as_deref());
    if found.metadata.deletion_timestamp.is_some() || phase != Some("Active") {
        return Err(DriverError::Unavailable(format!(
            "the tenant namespace {name} is not active"
        )));
    }
    kube.remember_tenant(ns, Some(name.clone()));
    Ok(name)
}
