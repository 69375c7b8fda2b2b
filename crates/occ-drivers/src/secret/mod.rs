//! Secret Drivers: where Secret values live. occ stores only the Driver id and a locator; values
//! are written and replaced here and never returned to API callers. `verify` checks that a
//! reference still resolves to an intact value owned by that exact Secret, without handing the
//! bytes to occ. Beside the values, a Driver keeps what each revision's workloads were handed
//! ([`handed`]), so their output stays redactable after a Secret changes.

mod handed;
mod kubernetes;
mod local;

use occ_core::{AgentId, NamespaceId, RevisionId, SecretId};

pub use kubernetes::KubernetesSecretDriver;
pub use local::LocalSecretDriver;

use crate::{DriverError, DriverIdentity};

/// The selected Secret Driver.
#[derive(Debug, Clone)]
pub enum SecretDriver {
    /// Values encrypted at rest in local files (the embedded default).
    Local(LocalSecretDriver),
    /// One Kubernetes Secret per value in the tenant namespace.
    Kubernetes(KubernetesSecretDriver),
}

impl SecretDriver {
    /// The Driver's identity.
    pub fn identity(&self) -> DriverIdentity {
        match self {
            SecretDriver::Local(d) => d.identity(),
            SecretDriver::Kubernetes(d) => d.identity(),
        }
    }

    /// Stores a new value; returns the locator occ records. Refuses to overwrite.
    pub async fn put(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        value: &str,
    ) -> Result<String, DriverError> {
        match self {
            SecretDriver::Local(d) => d.put(ns, id, value).await,
            SecretDriver::Kubernetes(d) => d.put(ns, id, value).await,
        }
    }

    /// Replaces the value at an existing locator; returns the (possibly new) locator.
    pub async fn replace(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        value: &str,
    ) -> Result<String, DriverError> {
        match self {
            SecretDriver::Local(d) => d.replace(ns, id, locator, value).await,
            SecretDriver::Kubernetes(d) => d.replace(ns, id, locator, value).await,
        }
    }

    /// Deletes the value. Absent is fine.
    pub async fn delete(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        match self {
            SecretDriver::Local(d) => d.delete(ns, id, locator).await,
            SecretDriver::Kubernetes(d) => d.delete(ns, id, locator).await,
        }
    }

    /// Verifies that the reference resolves to an intact value owned by this Secret.
    pub async fn verify(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        match self {
            SecretDriver::Local(d) => d.verify(ns, id, locator).await,
            SecretDriver::Kubernetes(d) => d.verify(ns, id, locator).await,
        }
    }

    /// Adds `values` (what the revision's workloads are handed now) to the revision's record.
    pub async fn record_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        values: &[&str],
    ) -> Result<(), DriverError> {
        match self {
            SecretDriver::Local(d) => d.record_handed(ns, agent, rev, values).await,
            SecretDriver::Kubernetes(d) => d.record_handed(ns, agent, rev, values).await,
        }
    }

    /// Every value the revision's workloads were handed (none recorded: empty). Server-side
    /// only, for redaction.
    pub async fn handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
    ) -> Result<Vec<String>, DriverError> {
        match self {
            SecretDriver::Local(d) => d.handed(ns, agent, rev).await,
            SecretDriver::Kubernetes(d) => d.handed(ns, agent, rev).await,
        }
    }

    /// Forgets the records of every revision of the Agent (it is being deleted). Absent is fine.
    pub async fn forget_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<(), DriverError> {
        match self {
            SecretDriver::Local(d) => d.forget_handed(ns, agent).await,
            SecretDriver::Kubernetes(d) => d.forget_handed(ns, agent).await,
        }
    }

    /// Runs `use_value` with the value, server-side only (for Compute delivery). The value is
    /// never logged or returned through the API.
    pub async fn with_value<T>(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        use_value: impl FnOnce(&str) -> T,
    ) -> Result<T, DriverError> {
        match self {
            SecretDriver::Local(d) => d.with_value(ns, id, locator, use_value).await,
            SecretDriver::Kubernetes(d) => d.with_value(ns, id, locator, use_value).await,
        }
    }
}
