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

use occ_core::ReasonCode;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use serde::de::DeserializeOwned;

use super::client::KubeClient;
use super::marks::{
    ANNOTATION_NAMESPACE_ID, ANNOTATION_NAMESPACE_LIFECYCLE, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, annotation, label,
};
use super::placement::{TENANT_LIFECYCLE_EXTERNAL, tenant_namespace_name, tenant_namespace_of};
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
    quota: Option<TenantQuota>,
}

/// The ResourceQuota occ keeps in every tenant namespace (`occ-quota`), as `resource=quantity`
/// pairs: what all of a Namespace's gateways together may request. Only resources every gateway
/// Pod declares can be limited (a quota on a resource a Pod does not declare makes Kubernetes
/// refuse the Pod): `limits.cpu` is not among them, gateways have no CPU limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantQuota(BTreeMap<String, String>);

/// The resources [`TenantQuota`] accepts.
pub const QUOTA_RESOURCES: [&str; 9] = [
    "pods",
    "requests.cpu",
    "requests.memory",
    "limits.memory",
    "requests.storage",
    "persistentvolumeclaims",
    "configmaps",
    "secrets",
    "services",
];

/// The name of occ's ResourceQuota in a tenant namespace.
pub const TENANT_QUOTA_NAME: &str = "occ-quota";

impl TenantQuota {
    /// The hard limits.
    pub fn hard(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl std::str::FromStr for TenantQuota {
    type Err = String;
    /// `pods=20,requests.cpu=8,requests.memory=32Gi`: each resource once, each a Kubernetes
    /// quantity (digits, an optional fraction, an optional suffix m, k, M, G, T, P, E or Ki … Ei).
    fn from_str(text: &str) -> Result<Self, String> {
        let mut hard = BTreeMap::new();
        for pair in text.split(',').map(str::trim) {
            let Some((resource, quantity)) = pair.split_once('=') else {
                return Err(format!("{pair:?} is not resource=quantity"));
            };
            let (resource, quantity) = (resource.trim(), quantity.trim());
            if resource == "limits.cpu" {
                return Err(
                    "limits.cpu cannot be limited: gateway Pods declare no CPU limit, so Kubernetes would refuse them"
                        .into(),
                );
            }
            if !QUOTA_RESOURCES.contains(&resource) {
                return Err(format!(
                    "{resource:?} is not one of {}",
                    QUOTA_RESOURCES.join(", ")
                ));
            }
            if !is_quantity(quantity) {
                return Err(format!(
                    "{resource}: {quantity:?} is not a quantity like 8, 500m or 32Gi"
                ));
            }
            if hard
                .insert(resource.to_owned(), quantity.to_owned())
                .is_some()
            {
                return Err(format!("{resource} is given twice"));
            }
        }
        Ok(Self(hard))
    }
}

fn is_quantity(text: &str) -> bool {
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let number_ok = match number.split_once('.') {
        Some((whole, fraction)) => {
            !whole.is_empty()
                && !fraction.is_empty()
                && whole.bytes().all(|b| b.is_ascii_digit())
                && fraction.bytes().all(|b| b.is_ascii_digit())
        }
        None => !number.is_empty(),
    };
    number_ok
        && [
            "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
        ]
        .contains(&suffix)
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
const PSS_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

fn foreign(what: String) -> ComputeError {
    ComputeError::permanent(ReasonCode::TenantObjectForeign, what)
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
    label(meta, LABEL_MANAGED_BY) == Some(MANAGED_BY)
        && label(meta, LABEL_NAMESPACE) == Some(ns.id.as_str())
        && annotation(meta, ANNOTATION_NAMESPACE_ID) == Some(ns.id.as_str())
}

impl TenantNamespaces {
    /// Provisioning with `access`.
    pub fn new(kube: KubeClient, access: TenantAccess) -> Self {
        Self {
            kube,
            access: Some(access),
            quota: None,
        }
    }

    /// Keeps `quota` as the ResourceQuota `occ-quota` of every tenant namespace (the worker's
    /// rights for it come with the Kubernetes Compute Driver's RoleBinding).
    pub fn with_quota(mut self, quota: Option<TenantQuota>) -> Self {
        self.quota = quota;
        self
    }

    /// The ResourceQuota occ keeps in the tenant namespace of `ns` (also used by tests).
    pub fn quota_manifest(&self, ns: &NamespaceTarget) -> Option<ResourceQuota> {
        let quota = self.quota.as_ref()?;
        Some(ResourceQuota {
            metadata: managed_meta(TENANT_QUOTA_NAME, Some(&tenant_namespace_of(ns)), ns),
            spec: Some(ResourceQuotaSpec {
                hard: Some(
                    quota
                        .hard()
                        .iter()
                        .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                        .collect(),
                ),
                ..ResourceQuotaSpec::default()
            }),
            ..ResourceQuota::default()
        })
    }

    /// The namespaces alone (the Kubernetes Compute Driver's part, when no Kubernetes
    /// Configuration or Secret Driver grants access in them).
    pub fn namespaces_only(kube: KubeClient) -> Self {
        Self {
            kube,
            access: None,
            quota: None,
        }
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
        let tenant = tenant_namespace_of(ns);
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
        self.kube.find(api, name, what).await
    }

    /// Creates `desired`, or brings an existing RoleBinding of ours to it: other subjects are
    /// replaced under its resourceVersion; another roleRef (immutable in Kubernetes) means
    /// delete (uid precondition) and create. A RoleBinding that is not ours is refused.
    async fn converge_binding(
        &self,
        api: &Api<RoleBinding>,
        ns: &NamespaceTarget,
        mut desired: RoleBinding,
        what: &str,
    ) -> Result<(), ComputeError> {
        let name = desired.metadata.name.clone().unwrap_or_default();
        let post = PostParams::default();
        let create = async |desired: &RoleBinding| {
            self.kube
                .call(&format!("create {what}"), || api.create(&post, desired))
                .await
                .map(|_| ())
                .map_err(|e| e.into_compute("the tenant namespace"))
        };
        match self.get(api, &name, &format!("get {what}")).await? {
            None => create(&desired).await,
            Some(current) if !is_ours(&current.metadata, ns) => {
                Err(foreign(format!("{what} {name} exists and is not occ's")))
            }
            Some(current) if current.role_ref != desired.role_ref => {
                self.kube
                    .delete_exact(
                        api,
                        &name,
                        current.metadata.uid.clone(),
                        current.metadata.resource_version.clone(),
                        &format!("delete {what}"),
                    )
                    .await
                    .map_err(|e| e.into_compute("the tenant namespace"))?;
                create(&desired).await
            }
            Some(current) if current.subjects == desired.subjects => Ok(()),
            Some(current) => {
                desired.metadata.resource_version = current.metadata.resource_version.clone();
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
        let tenant = match &ns.existing_namespace {
            None => {
                if self.ensure_managed(ns).await? == Convergence::Pending {
                    return Ok(Convergence::Pending);
                }
                tenant_namespace_name(&ns.id)
            }
            Some(existing) => {
                if self.claim(ns, existing).await? == Convergence::Pending {
                    return Ok(Convergence::Pending);
                }
                existing.clone()
            }
        };
        let bindings: Api<RoleBinding> = Api::namespaced(self.kube.client(), &tenant);
        for binding in self.access_manifests(ns) {
            self.converge_binding(
                &bindings,
                ns,
                binding,
                &format!("rolebindings in namespace {tenant}"),
            )
            .await?;
        }
        if ns.existing_namespace.is_some() {
            self.refuse_foreign_policies(&tenant).await?;
        }
        if let Some(desired) = self.quota_manifest(ns) {
            self.converge_quota(ns, &tenant, desired).await?;
        }
        Ok(Convergence::Done)
    }

    /// Creates occ's ResourceQuota, or brings ours to the configured limits (replace under its
    /// resourceVersion); refuses one at that name that is not occ's.
    async fn converge_quota(
        &self,
        ns: &NamespaceTarget,
        tenant: &str,
        mut desired: ResourceQuota,
    ) -> Result<(), ComputeError> {
        let quotas: Api<ResourceQuota> = Api::namespaced(self.kube.client(), tenant);
        let what = format!("resourcequotas in namespace {tenant}");
        let post = PostParams::default();
        let hard = |q: &ResourceQuota| q.spec.as_ref().and_then(|s| s.hard.clone());
        match self
            .get(&quotas, TENANT_QUOTA_NAME, &format!("get {what}"))
            .await?
        {
            None => self
                .kube
                .call(&format!("create {what}"), || quotas.create(&post, &desired))
                .await
                .map(|_| ())
                .map_err(|e| e.into_compute(&format!("create {what}"))),
            Some(current) if !is_ours(&current.metadata, ns) => Err(foreign(format!(
                "{what} {TENANT_QUOTA_NAME} exists and is not occ's"
            ))),
            Some(current) if hard(&current) == hard(&desired) => Ok(()),
            Some(current) => {
                desired.metadata.resource_version = current.metadata.resource_version.clone();
                self.kube
                    .call(&format!("update {what}"), || {
                        quotas.replace(TENANT_QUOTA_NAME, &post, &desired)
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.into_compute(&format!("update {what}")))
            }
        }
    }

    /// The namespace occ provisions and owns: created at its derived name, exactly one claimant.
    async fn ensure_managed(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let name = tenant_namespace_name(&ns.id);
        self.refuse_other_claimants(ns, &name).await?;
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
        Ok(
            if current.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active") {
                Convergence::Done
            } else {
                Convergence::Pending
            },
        )
    }

    /// Exactly one namespace may claim an occ Namespace: `expected`.
    async fn refuse_other_claimants(
        &self,
        ns: &NamespaceTarget,
        expected: &str,
    ) -> Result<(), ComputeError> {
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let params = ListParams::default().labels(&format!("{LABEL_NAMESPACE}={}", ns.id));
        let claimants = self
            .kube
            .call("list namespaces", || namespaces.list(&params))
            .await
            .map_err(|e| e.into_compute("the tenant namespace"))?;
        match claimants
            .items
            .iter()
            .find(|n| n.metadata.name.as_deref() != Some(expected))
        {
            Some(other) => Err(foreign(format!(
                "namespace {} already claims occ Namespace {}",
                other.metadata.name.as_deref().unwrap_or("?"),
                ns.id
            ))),
            None => Ok(()),
        }
    }

    /// Adopts the operator's namespace `existing`: it must exist, be marked for adoption
    /// (`openclaw.dev/namespace-lifecycle=external`, the operator's consent), enforce the
    /// restricted Pod Security Standard and belong to no other occ Namespace or to occ itself;
    /// then it is labelled and annotated with the occ Namespace id (under its resourceVersion),
    /// which is how the other Drivers find it. What the operator has not prepared yet is a
    /// transient failure naming what is missing (retried until the attempts run out); a
    /// namespace that belongs to someone else is refused for good.
    async fn claim(
        &self,
        ns: &NamespaceTarget,
        existing: &str,
    ) -> Result<Convergence, ComputeError> {
        let not_ready = |what: String| {
            ComputeError::transient(
                ReasonCode::ExistingNamespaceNotReady,
                format!("existingNamespace {existing}: {what}"),
            )
        };
        self.refuse_other_claimants(ns, existing).await?;
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let Some(mut current) = self.get(&namespaces, existing, "get namespaces").await? else {
            return Err(not_ready("the namespace does not exist".into()));
        };
        let meta = &current.metadata;
        if label(meta, LABEL_MANAGED_BY) == Some(MANAGED_BY) {
            return Err(foreign(format!(
                "namespace {existing} is provisioned by occ and cannot be adopted"
            )));
        }
        for claimed in [
            label(meta, LABEL_NAMESPACE),
            annotation(meta, ANNOTATION_NAMESPACE_ID),
        ]
        .into_iter()
        .flatten()
        {
            if claimed != ns.id.as_str() {
                return Err(foreign(format!(
                    "namespace {existing} belongs to occ Namespace {claimed}"
                )));
            }
        }
        if meta.deletion_timestamp.is_some() {
            return Err(not_ready("the namespace is being deleted".into()));
        }
        if annotation(meta, ANNOTATION_NAMESPACE_LIFECYCLE) != Some(TENANT_LIFECYCLE_EXTERNAL) {
            return Err(not_ready(format!(
                "not marked for adoption; annotate it {ANNOTATION_NAMESPACE_LIFECYCLE}={TENANT_LIFECYCLE_EXTERNAL}"
            )));
        }
        if label(meta, PSS_ENFORCE) != Some("restricted") {
            return Err(not_ready(format!(
                "gateways run only where the restricted Pod Security Standard is enforced; label it {PSS_ENFORCE}=restricted"
            )));
        }
        if current.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Active") {
            return Ok(Convergence::Pending);
        }
        if label(meta, LABEL_NAMESPACE).is_some()
            && annotation(meta, ANNOTATION_NAMESPACE_ID).is_some()
        {
            return Ok(Convergence::Done);
        }
        let meta = &mut current.metadata;
        meta.labels
            .get_or_insert_default()
            .insert(LABEL_NAMESPACE.into(), ns.id.to_string());
        meta.annotations
            .get_or_insert_default()
            .insert(ANNOTATION_NAMESPACE_ID.into(), ns.id.to_string());
        self.replace_namespace(&namespaces, existing, &current, "claim")
            .await?;
        Ok(Convergence::Done)
    }

    /// Replaces a namespace under the resourceVersion it was read with (a concurrent change is
    /// a conflict, read again on the next pass).
    async fn replace_namespace(
        &self,
        namespaces: &Api<Namespace>,
        name: &str,
        desired: &Namespace,
        why: &str,
    ) -> Result<(), ComputeError> {
        let post = PostParams::default();
        self.kube
            .call("update namespaces", || {
                namespaces.replace(name, &post, desired)
            })
            .await
            .map(|_| ())
            .map_err(|e| e.into_compute(&format!("{why} namespace {name}")))
    }

    /// In an adopted namespace, a NetworkPolicy occ does not own could admit traffic to the
    /// gateways (policies only add allowed traffic), so adoption waits until there is none.
    async fn refuse_foreign_policies(&self, tenant: &str) -> Result<(), ComputeError> {
        let policies: Api<NetworkPolicy> = Api::namespaced(self.kube.client(), tenant);
        let everything = ListParams::default();
        let listed = self
            .kube
            .call("list networkpolicies", || policies.list(&everything))
            .await
            .map_err(|e| e.into_compute("list networkpolicies"))?;
        let foreign: Vec<String> = listed
            .items
            .iter()
            .filter(|p| label(&p.metadata, LABEL_MANAGED_BY) != Some(MANAGED_BY))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        if foreign.is_empty() {
            return Ok(());
        }
        Err(ComputeError::transient(
            ReasonCode::ExistingNamespaceNotReady,
            format!(
                "existingNamespace {tenant}: NetworkPolicies occ does not own could admit traffic to gateways; remove them: {}",
                foreign.join(", ")
            ),
        ))
    }

    async fn remove(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        match &ns.existing_namespace {
            None => self.remove_managed(ns).await,
            Some(existing) => self.release(ns, existing).await,
        }
    }

    /// Gives an adopted namespace back: occ's RoleBindings go (by their fixed names, each only
    /// if it is occ's, with its uid as a precondition), then the claim (label and annotation);
    /// the namespace and everything else in it stay. (The occ Namespace is empty by now, so
    /// the Drivers have already removed their other objects.)
    async fn release(
        &self,
        ns: &NamespaceTarget,
        existing: &str,
    ) -> Result<Convergence, ComputeError> {
        let namespaces: Api<Namespace> = Api::all(self.kube.client());
        let Some(mut current) = self.get(&namespaces, existing, "get namespaces").await? else {
            return Ok(Convergence::Done);
        };
        if label(&current.metadata, LABEL_NAMESPACE) != Some(ns.id.as_str()) {
            // Released already (or never claimed): nothing of ours is bound there.
            return Ok(Convergence::Done);
        }
        // The quota first: the worker's right to it comes with a RoleBinding removed below.
        if self.quota.is_some() || self.access.as_ref().is_some_and(|a| a.compute) {
            let quotas: Api<ResourceQuota> = Api::namespaced(self.kube.client(), existing);
            self.delete_ours(&quotas, ns, TENANT_QUOTA_NAME, existing, "resourcequotas")
                .await?;
        }
        let bindings: Api<RoleBinding> = Api::namespaced(self.kube.client(), existing);
        for (name, _) in [
            TENANT_CONFIGURATIONS,
            TENANT_SECRETS,
            TENANT_SECRET_READER,
            TENANT_COMPUTE,
            TENANT_GATEWAY_ACCESS,
        ] {
            self.delete_ours(&bindings, ns, name, existing, "rolebindings")
                .await?;
        }
        let meta = &mut current.metadata;
        if let Some(labels) = meta.labels.as_mut() {
            labels.remove(LABEL_NAMESPACE);
        }
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.remove(ANNOTATION_NAMESPACE_ID);
        }
        self.replace_namespace(&namespaces, existing, &current, "release")
            .await?;
        Ok(Convergence::Done)
    }

    /// Deletes occ's object `name` in `tenant` with its uid as a precondition; absent, or not
    /// occ's (left alone), is done.
    async fn delete_ours<K>(
        &self,
        api: &Api<K>,
        ns: &NamespaceTarget,
        name: &str,
        tenant: &str,
        resource: &str,
    ) -> Result<(), ComputeError>
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let what = format!("{resource} in namespace {tenant}");
        let Some(current) = self.get(api, name, &format!("get {what}")).await? else {
            return Ok(());
        };
        if !is_ours(current.meta(), ns) {
            return Ok(());
        }
        self.kube
            .delete_read(api, name, current.meta(), &format!("delete {resource}"))
            .await
            .map_err(|e| e.into_compute(&format!("delete {what}")))
    }

    async fn remove_managed(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
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
            self.kube
                .delete_read(&namespaces, &name, &current.metadata, "delete namespaces")
                .await
                .map_err(|e| e.into_compute("the tenant namespace"))?;
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
