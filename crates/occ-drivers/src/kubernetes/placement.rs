//! Where an occ Namespace lives in the cluster: its tenant namespace, found only through
//! namespace list/get (never guessed, never created here). The Kubernetes Compute Driver
//! provisions it (a namespace named [`tenant_namespace_name`]) or adopts the operator's
//! `existingNamespace` by labelling it; both carry the occ Namespace id as a label and an
//! annotation.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use occ_core::NamespaceId;

use super::{
    ANNOTATION_NAMESPACE_ID, ANNOTATION_NAMESPACE_LIFECYCLE, KubeClient, LABEL_MANAGED_BY,
    LABEL_NAMESPACE, MANAGED_BY, short_hash,
};
use crate::DriverError;

/// `ANNOTATION_NAMESPACE_LIFECYCLE` value of an adopted (operator-owned) namespace.
pub const TENANT_LIFECYCLE_EXTERNAL: &str = "external";

/// The name of the tenant namespace occ provisions for an occ Namespace:
/// `occ-<first 15 hex of sha256(id)>` (deterministic, DNS-safe, no id text in the name).
pub fn tenant_namespace_name(ns: &NamespaceId) -> String {
    format!("occ-{}", short_hash(ns.as_str(), 15))
}

/// The tenant namespace of `ns`, verified: exactly one namespace carries its label, its
/// annotation agrees, it is occ's own (managed, at the derived name) or explicitly adopted, and it
/// is `Active`. Not provisioned yet or terminating → unavailable (try again later); several
/// claimants or a disagreeing object → refused as not ours.
pub(crate) async fn resolve_tenant_namespace(
    kube: &KubeClient,
    ns: &NamespaceId,
) -> Result<String, DriverError> {
    let api: Api<Namespace> = Api::all(kube.client());
    let params = ListParams::default().labels(&format!("{LABEL_NAMESPACE}={ns}"));
    let list = kube.call("list namespaces", || api.list(&params)).await?;
    let [found] = list.items.as_slice() else {
        return Err(if list.items.is_empty() {
            DriverError::Unavailable(format!(
                "the tenant namespace of {ns} is not provisioned yet"
            ))
        } else {
            DriverError::Corrupt(format!(
                "{} namespaces claim occ Namespace {ns}",
                list.items.len()
            ))
        });
    };
    let meta = &found.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key));
    if annotation(ANNOTATION_NAMESPACE_ID).map(String::as_str) != Some(ns.as_str()) {
        return Err(DriverError::Corrupt(format!(
            "namespace {name} is labelled for {ns} but its {ANNOTATION_NAMESPACE_ID} annotation disagrees"
        )));
    }
    let adopted = annotation(ANNOTATION_NAMESPACE_LIFECYCLE).map(String::as_str)
        == Some(TENANT_LIFECYCLE_EXTERNAL);
    if !adopted
        && (label(LABEL_MANAGED_BY).map(String::as_str) != Some(MANAGED_BY)
            || name != tenant_namespace_name(ns))
    {
        return Err(DriverError::Corrupt(format!(
            "namespace {name} claims {ns} but is neither occ-managed at its derived name nor adopted"
        )));
    }
    let phase = found.status.as_ref().and_then(|s| s.phase.as_deref());
    if meta.deletion_timestamp.is_some() || phase != Some("Active") {
        return Err(DriverError::Unavailable(format!(
            "the tenant namespace {name} is not active"
        )));
    }
    Ok(name)
}
