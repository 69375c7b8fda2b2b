//! The labels and annotations that mark objects as occ's, and the short hashes in occ's object
//! names.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest as _, Sha256};

/// `app.kubernetes.io/managed-by` value on every object occ creates.
pub const MANAGED_BY: &str = "occ";
/// The standard "managed by" label.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The occ Namespace id an object belongs to.
pub const LABEL_NAMESPACE: &str = "openclaw.dev/namespace";
/// The same id as an annotation (labels can be edited by selectors' users; both must agree).
pub const ANNOTATION_NAMESPACE_ID: &str = "openclaw.dev/namespace-id";
/// How a tenant namespace is owned: `external` when adopted from `existingNamespace`.
pub const ANNOTATION_NAMESPACE_LIFECYCLE: &str = "openclaw.dev/namespace-lifecycle";

/// The value of label `key` on an object, if set.
pub(crate) fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// The value of annotation `key` on an object, if set.
pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Lowercase hex SHA-256 of `text`, cut to `len` characters.
pub fn short_hash(text: &str, len: usize) -> String {
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    digest[..len.min(digest.len())].to_owned()
}
