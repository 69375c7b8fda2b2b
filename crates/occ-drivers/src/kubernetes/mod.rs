//! What the Kubernetes Drivers share: how occ connects to the API server (in-cluster service
//! account or an explicit kubeconfig context, TLS verified, never an ambient kubeconfig), the
//! request policy (a deadline per call, bounded retries of answers that prove nothing was
//! applied or that are safe to repeat), the classification of API answers, the labels and
//! annotations that mark objects as occ's, and the discovery of an occ Namespace's tenant
//! namespace.

mod client;
mod marks;
mod placement;
mod tenant;

pub use client::{KubeClient, KubeFailure, KubernetesAuth};
pub use placement::{TENANT_LIFECYCLE_EXTERNAL, tenant_namespace_name, tenant_namespace_of};
pub use tenant::{
    QUOTA_RESOURCES, ServiceAccountRef, TENANT_COMPUTE, TENANT_CONFIGURATIONS,
    TENANT_GATEWAY_ACCESS, TENANT_QUOTA_NAME, TENANT_SECRET_READER, TENANT_SECRETS, TenantAccess,
    TenantNamespaces, TenantQuota,
};

pub use marks::{
    ANNOTATION_NAMESPACE_ID, ANNOTATION_NAMESPACE_LIFECYCLE, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, short_hash,
};
pub(crate) use marks::{annotation, label};
pub(crate) use placement::{find_tenant_namespace, resolve_tenant_namespace};
