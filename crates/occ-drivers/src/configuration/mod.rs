//! Configuration Drivers: backing storage for native `openclaw.json` documents.
//!
//! occ owns ids, generations, validation and authorization; a Driver only stores and returns the
//! document of one exact `(namespace, configuration, generation)`. The metadata row's generation
//! selects the live document; a write returns a [`WriteReceipt`] with which the caller undoes it
//! when its database transaction does not commit.
//!
//! - Filesystem: every generation is its own file, so undoing discards the new file and a crash
//!   between the Driver write and the commit leaves the committed generation readable.
//! - Kubernetes: one ConfigMap per Configuration, replaced under its resourceVersion; undoing
//!   restores what the write replaced. A crash between the write and the commit leaves the
//!   ConfigMap one generation ahead: reads of that Configuration fail (503) until the next
//!   update, which accepts and replaces such a leftover.

mod document;
mod filesystem;
mod kubernetes;

use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId, Timestamp};
use serde_json::{Map, Value};

pub use document::{DOCUMENT_MAX_BYTES, DocumentKey};
pub use filesystem::FilesystemConfigurationDriver;
pub use kubernetes::{DOCUMENT_KEY, KubernetesConfigurationDriver, configmap_name};

use crate::{DriverError, DriverIdentity};

/// The selected Configuration Driver.
#[derive(Debug, Clone)]
pub enum ConfigurationDriver {
    /// Documents under a local directory (development default).
    Filesystem(FilesystemConfigurationDriver),
    /// One ConfigMap per Configuration in the tenant namespace.
    Kubernetes(KubernetesConfigurationDriver),
}

/// What a write did, so that exactly it can be undone.
#[derive(Debug, Clone)]
pub struct WriteReceipt(Receipt);

#[derive(Debug, Clone)]
enum Receipt {
    /// A new per-generation object: undo removes it.
    NewObject,
    /// A replaced ConfigMap: undo restores what it replaced.
    Kubernetes(kubernetes::Replaced),
}

impl WriteReceipt {
    fn kubernetes(replaced: kubernetes::Replaced) -> Self {
        Self(Receipt::Kubernetes(replaced))
    }
}

impl ConfigurationDriver {
    /// The Driver's identity.
    pub fn identity(&self) -> DriverIdentity {
        match self {
            ConfigurationDriver::Filesystem(d) => d.identity(),
            ConfigurationDriver::Kubernetes(d) => d.identity(),
        }
    }

    /// Refuses what this backend cannot store (size).
    pub fn validate(&self, values: &Map<String, Value>) -> Result<(), DriverError> {
        let size = serde_json::to_vec(values)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > DOCUMENT_MAX_BYTES {
            return Err(DriverError::Conflict(
                "the document is larger than 1 MiB".into(),
            ));
        }
        Ok(())
    }

    /// Stores a new generation: generation 1 creates, a later one follows the generation
    /// before it. An existing object for exactly this generation is replaced only when
    /// `replace_stale` is set (a leftover of a write whose transaction never committed).
    pub async fn write(
        &self,
        key: DocumentKey<'_>,
        values: &Map<String, Value>,
        replace_stale: bool,
    ) -> Result<WriteReceipt, DriverError> {
        self.validate(values)?;
        match self {
            ConfigurationDriver::Filesystem(d) => d
                .write(key, values, replace_stale)
                .await
                .map(|()| WriteReceipt(Receipt::NewObject)),
            ConfigurationDriver::Kubernetes(d) => d
                .write(key, values, replace_stale)
                .await
                .map(WriteReceipt::kubernetes),
        }
    }

    /// Reads one generation.
    pub async fn read(&self, key: DocumentKey<'_>) -> Result<Map<String, Value>, DriverError> {
        match self {
            ConfigurationDriver::Filesystem(d) => d.read(key).await,
            ConfigurationDriver::Kubernetes(d) => d.read(key).await,
        }
    }

    /// Undoes the write `receipt` came from (its transaction did not commit). Absent is fine;
    /// a document changed by someone else since is left alone (conflict).
    pub async fn undo(
        &self,
        key: DocumentKey<'_>,
        receipt: &WriteReceipt,
    ) -> Result<(), DriverError> {
        match (self, &receipt.0) {
            (ConfigurationDriver::Filesystem(d), _) => d.discard(key).await,
            (ConfigurationDriver::Kubernetes(d), Receipt::Kubernetes(replaced)) => {
                d.undo(key, replaced).await
            }
            (ConfigurationDriver::Kubernetes(_), Receipt::NewObject) => Err(
                DriverError::Configuration("a receipt of another Driver cannot be undone".into()),
            ),
        }
    }

    /// Removes every generation of a Configuration except `keep` (all of them with `None`).
    pub async fn prune(
        &self,
        namespace_id: &NamespaceId,
        configuration_id: &ConfigurationId,
        created_at: Timestamp,
        keep: Option<Generation>,
    ) -> Result<(), DriverError> {
        match self {
            ConfigurationDriver::Filesystem(d) => {
                d.prune(namespace_id, configuration_id, keep).await
            }
            ConfigurationDriver::Kubernetes(d) => {
                d.prune(namespace_id, configuration_id, created_at, keep)
                    .await
            }
        }
    }
}
