//! Tenant namespaces: the Kubernetes namespace that holds an occ Namespace's ConfigMaps and
//! Secrets, with exactly the access occ's API and worker need there.
//!
//! The worker provisions it when the occ Namespace is created (after Compute prepared the
//! Namespace) and removes it when the occ Namespace is deleted (before Compute removes its
//! part), through the [`NamespaceHook`] contract, so it works with every Compute Driver. For
//! each occ Namespace it keeps:
//!
//! - a namespace `occ-<sha256(id)[0:15]>` labelled `app.kubernetes.io/managed-by=occ` and
//!   `openclaw.dev/namespace=<id>`, annotated `openclaw.dev/namespace-id=<id>`, with the
//!   restricted Pod Security Standard enforced;
//! - per Kubernetes Driver a RoleBinding that grants, in this namespace only, one of the
//!   ClusterRoles the installation ships (`deploy/kubernetes/rbac.yaml`) to the API's
//!   ServiceAccount: `occ-tenant-configurations` (ConfigMaps: `create` in its own rule, since
//!   Kubernetes cannot restrict create by name; `get`, `update`, `delete`) and
//!   `occ-tenant-secrets` (Secrets, the same), and `occ-tenant-secret-reader` (Secrets `get`)
//!   to the worker's, which delivers Secret values to workloads; with the Kubernetes Compute
//!   Driver also `occ-tenant-compute` (gateway workloads) to the worker's and
//!   `occ-tenant-gateway-access` (the Agent's Deployment and token Secret `get`, Pods `list`,
//!   `pods/portforward`) to the API's. The rules live in ClusterRoles rather than per-namespace Roles so that the
//!   worker needs only `bind` on exactly these `occ-tenant-*` names — never `escalate`, which
//!   would let it write any rules.
//!
//! An object at one of these names that is not marked as occ's is refused (permanent), never
//! adopted or overwritten. A namespace is deleted with its uid as a precondition and the
//! deletion is done only once the namespace is observed gone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use serde::de::DeserializeOwned;

use super::{
    ANNOTATION_NAMESPACE_ID, KubeClient, KubeFailure, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, tenant_namespace_name,
};
use crate::compute::{ComputeError, Convergence, NamespaceHook, NamespaceTarget};

/// A ServiceAccount that is granted access in tenant namespaces (`namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::str::FromStr for ServiceAccountRef {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let dns = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        match text.split_once('/') {
            Some((namespace, name)) if dns(namespace) && dns(name) => Ok(Self {
                namespace: namespace.into(),
                name: name.into(),
            }),
            _ => Err("must be NAMESPACE/NAME of a ServiceAccount".into()),
        }
    }
}

/// Who gets what in tenant namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantAccess {
    /// The API's ServiceAccount (Configuration and Secret Drivers run in the API).
    pub api: ServiceAccountRef,
    /// The worker's ServiceAccount, when it reads Secret values for delivery to workloads.
    pub worker: Option<ServiceAccountRef>,
    /// Whether Configurations are stored as ConfigMaps here.
    pub configurations: bool,
    /// Whether Secret values are stored as Secrets here.
    pub secrets: bool,
    /// Whether Agents' gateways run here (the Kubernetes Compute Driver): the worker manages
    /// them and the API reaches them through `pods/portforward`.
    pub compute: bool,
}

/// Provisions and removes tenant namespaces.
#[derive(Debug, Clone)]
pub struct TenantNamespaces {
    kube: KubeClient,
    access: Option<TenantAccess>,
}

/// The ClusterRoles tenant RoleBindings grant (installed with occ, `deploy/kubernetes/rbac.yaml`)
/// and the RoleBindings' names: `(binding, cluster role)`.
pub const TENANT_CONFIGURATIONS: (&str, &str) = ("occ-configurations", "occ-tenant-configurations");
/// See [`TENANT_CONFIGURATIONS`].
pub const TENANT_SECRETS: (&str, &str) = ("occ-secrets", "occ-tenant-secrets");
/// See [`TENANT_CONFIGURATIONS`].
pub const TENANT_SECRET_READER: (&str, &str) = ("occ-secret-reader", "occ-tenant-secret-reader");
/// See [`TENANT_CONFIGURATIONS`]: the worker's rights over gateway workloads.
pub const TENANT_COMPUTE: (&str, &str) = ("occ-compute", "occ-tenant-compute");
/// See [`TENANT_CONFIGURATIONS`]: the API's way to a gateway (`pods/portforward`).
pub const TENANT_GATEWAY_ACCESS: (&str, &str) = ("occ-gateway-access", "occ-tenant-gateway-access");
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn foreign(what: String) -> ComputeError {
    ComputeError::permanent("TENANT_OBJECT_FOREIGN", what)
}

fn managed_meta(name: &str, namespace: Option<&str>, ns: &NamespaceTarget) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_NAMESPACE.to_owned(), ns.id.to_string()),
        ])),
        annotations: Some(BTreeMap::from([(
            ANNOTATION_NAMESPACE_ID.to_owned(),
            ns.id.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

fn is_ours(meta: &ObjectMeta, ns: &NamespaceTarget) -> bool {
    let label = |k: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(k))
            .map(String::as_str)
    };
    let annotation = |k: &str| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .map(String::as_str)
    };
    label(LABEL_MANAGED_BY) == Some(MANAGED_BY)
        && label(LABEL_NAMESPACE) == Some(ns.id.as_str())
        && annotation(ANNOTATION_NAMESPACE_ID) == Some(ns.id.as_str())
}

impl TenantNamespaces {
    /// Provisioning with `access`.
    pub fn new(kube: KubeClient, access: TenantAccess) -> Self {
        Self {
            kube,
            access: Some(access),
        }
    }

    /// The namespaces alone (the Kubernetes Compute Driver's part, when no Kubernetes
    /// Configuration or Secret Driver grants access in them).
    pub fn namespaces_only(kube: KubeClient) -> Self {
        Self { kube, access: None }
    }

    /// The tenant namespace object occ creates (also used by the golden tests).
    pub fn namespace_manifest(ns: &NamespaceTarget) -> Namespace {
        let mut meta = managed_meta(&tenant_namespace_name(&ns.id), None, ns);
        let labels = meta.labels.get_or_insert_default();
        for mode in ["enforce", "audit", "warn"] {
            labels.insert(
                format!("pod-security.kubernetes.io/{mode}"),
                "restricted".into(),
            );
        }
        Namespace {
            metadata: meta,
            ..Namespace::default()
        }
    }

    /// The RoleBindings occ keeps in a tenant namespace (also used by golden tests).
    pub fn access_manifests(&self, ns: &NamespaceTarget) -> Vec<RoleBinding> {
        let tenant = tenant_namespace_name(&ns.id);
        let binding = |(name, cluster_role): (&str, &str), who: &ServiceAccountRef| RoleBinding {
            metadata: managed_meta(name, Some(&tenant), ns),
            role_ref: RoleRef {
                api_group: RBAC_GROUP.into(),
                kind: "ClusterRole".into(),
                name: cluster_role.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: who.name.clone(),
                namespace: Some(who.namespace.clone()),
                ..Subject::default()
            }]),
        };
        let mut out = Vec::new();
        let Some(access) = &self.access else {
            return out;
        };
        if access.configurations {
            out.push(binding(TENANT_CONFIGURATIONS, &access.api));
        }
        if access.secrets {
            out.push(binding(TENANT_SECRETS, &access.api));
            if let Some(worker) = &access.worker {
                out.push(binding(TENANT_SECRET_READER, worker));
            }
        }
        if access.compute {
            if let Some(worker) = &access.worker {
                out.push(binding(TENANT_COMPUTE, worker));
            }
            out.push(binding(TENANT_GATEWAY_ACCESS, &access.api));
        }
        out
    }

    async fn get<K>(&self, api: &Api<K>, name: &str, what: &str) -> Result<Option<K>, ComputeError>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        self.kube
            .get_opt(api, name, what)
            .await
            .map_err(|e| e.into_compute(what))
    }

    /// Creates `desired`, or brings an existing object of ours to it (replace under its
    /// resourceVersion); refuses an object that is not ours.
    async fn converge<K>(
        &self,
        api: &Api<K>,
        ns: &NamespaceTarget,
        mut desired: K,
        same: impl Fn(&K, &K) -> bool,
        what: &str,
    ) -> Result<(), ComputeError>
    where
        K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let name = desired.meta().name.clone().unwrap_or_default();
        let post = PostParams::default();
        match self.get(api, &name, &format!("get {what}")).await? {
            None => match self
                .kube
                .call(&format!("create {what}"), || api.create(&post, &desired))
                .await
            {
                Ok(_) => Ok(()),
                Err(other) => Err(other.into_compute("the tenant namespace")),
            },
            Some(current) if !is_ours(current.meta(), ns) => {
                Err(foreign(format!("{what} {name} exists and is not occ's")))
            }
            Some(current) if same(&current, &desired) => Ok(()),
            Some(current) => {
                desired.meta_mut().resource_version = current.meta().resource_version.clone();
                self.kube
                    .call(&format!("update {what}"), || {
                        api.replace(&name, &post, &desired)
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.into_compute("the tenant namespace"))
            }
        }
    }

    async fn ensure(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let name = tenant_namespace_name(&ns.id);
        // Exactly one namespace may claim this occ Namespace: ours, at its derived name.
        let params = ListParams::default().labels(&format!("{LABEL_NAMESPACE}={}", ns.id));
        let claimants = self
            .kube
            .call("list namespaces", || namespaces.list(&params))
            .await
            .map_err(|e| e.into_compute("the tenant namespace"))?;
        if let Some(other) = claimants
            .items
            .iter()
            .find(|n| n.metadata.name.as_deref() != Some(name.as_str()))
        {
            return Err(foreign(format!(
                "namespace {} already claims occ Namespace {}",
                other.metadata.name.as_deref().unwrap_or("?"),
                ns.id
            )));
        }
        let current = match self.get(&namespaces, &name, "get namespaces").await? {
            Some(current) => current,
            None => {
                let post = PostParams::default();
                let manifest = Self::namespace_manifest(ns);
                self.kube
                    .call("create namespaces", || namespaces.create(&post, &manifest))
                    .await
                    .map_err(|e| e.into_compute("the tenant namespace"))?
            }
        };
        if !is_ours(&current.metadata, ns) {
            return Err(foreign(format!("namespace {name} exists and is not occ's")));
        }
        if current.metadata.deletion_timestamp.is_some() {
            // An earlier deletion is still running; create again once it is gone.
            return Ok(Convergence::Pending);
        }
        if current.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Active") {
            return Ok(Convergence::Pending);
        }
        let bindings: Api<RoleBinding> = Api::namespaced(self.kube.client(), &name);
        for binding in self.access_manifests(ns) {
            self.converge(
                &bindings,
                ns,
                binding,
                |a, b| a.role_ref == b.role_ref && a.subjects == b.subjects,
                &format!("rolebindings in namespace {name}"),
            )
            .await?;
        }
        Ok(Convergence::Done)
    }

    async fn remove(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let name = tenant_namespace_name(&ns.id);
        let Some(current) = self.get(&namespaces, &name, "get namespaces").await? else {
            return Ok(Convergence::Done);
        };
        if !is_ours(&current.metadata, ns) {
            return Err(foreign(format!(
                "namespace {name} is not occ's; it is left alone"
            )));
        }
        if current.metadata.deletion_timestamp.is_none() {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: current.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match self
                .kube
                .call("delete namespaces", || namespaces.delete(&name, &params))
                .await
            {
                Ok(_) | Err(KubeFailure::NotFound) => {}
                Err(other) => return Err(other.into_compute("the tenant namespace")),
            }
        }
        // Done only once the namespace is observed gone.
        Ok(
            match self.get(&namespaces, &name, "get namespaces").await? {
                None => Convergence::Done,
                Some(_) => Convergence::Pending,
            },
        )
    }
}

#[async_trait::async_trait]
impl NamespaceHook for TenantNamespaces {
    fn name(&self) -> &'static str {
        "kubernetes-tenant-namespace"
    }

    async fn after_namespace_prepared(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError> {
        self.ensure(ns).await
    }

    async fn before_namespace_delete(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError> {
        self.remove(ns).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_references_are_checked() {
        let sa: ServiceAccountRef = "occ/occ-api".parse().expect("valid");
        assert_eq!(
            (sa.namespace.as_str(), sa.name.as_str()),
            ("occ", "occ-api")
        );
        for bad in ["occ", "/x", "x/", "Occ/api", "a/b/c", "-a/b"] {
            assert!(bad.parse::<ServiceAccountRef>().is_err(), "{bad}");
        }
    }
}
