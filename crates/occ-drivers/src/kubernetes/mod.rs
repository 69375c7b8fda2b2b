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

/// Whether `name` is a DNS subdomain (RFC 1123) as Kubernetes names most objects: at most 253
/// characters, dot-separated labels of lower-case letters, digits and `-` that start and end
/// with a letter or digit.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn dns_subdomains() {
        for ok in ["gvisor", "kata-qemu", "runsc.example.com", "a1"] {
            assert!(super::is_dns_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            "gVisor",
            "-a",
            "a-",
            "a..b",
            "a_b",
            &"a".repeat(64),
            &"a.".repeat(127),
        ] {
            assert!(!super::is_dns_subdomain(bad), "{bad}");
        }
    }
}
