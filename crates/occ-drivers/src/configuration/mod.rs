//! Configuration Drivers: backing storage for native `openclaw.json` documents.
//!
//! occ owns ids, generations, validation and authorization; a Driver only stores and returns the
//! document of one exact `(namespace, configuration, generation)`. Every generation is written as
//! its own object and the metadata row's generation selects the live one, so a write can be
//! undone (discard the new generation) and a crash between the Driver write and the database
//! commit leaves the committed generation untouched.

mod filesystem;

use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId};
use serde_json::{Map, Value};

pub use filesystem::FilesystemConfigurationDriver;

use crate::{DriverError, DriverIdentity};

/// Largest stored document, serialized.
pub const DOCUMENT_MAX_BYTES: usize = 1024 * 1024;

/// The selected Configuration Driver.
#[derive(Debug, Clone)]
pub enum ConfigurationDriver {
    /// Documents under a local directory (development default).
    Filesystem(FilesystemConfigurationDriver),
}

/// The exact document a call is about.
#[derive(Debug, Clone, Copy)]
pub struct DocumentKey<'a> {
    /// Owning Namespace.
    pub namespace_id: &'a NamespaceId,
    /// Configuration.
    pub configuration_id: &'a ConfigurationId,
    /// Generation.
    pub generation: Generation,
}

impl ConfigurationDriver {
    /// The Driver's identity.
    pub fn identity(&self) -> DriverIdentity {
        match self {
            ConfigurationDriver::Filesystem(d) => d.identity(),
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

    /// Stores a new generation. An existing object for exactly this generation is replaced only
    /// when `replace_stale` is set (a leftover of a write whose transaction never committed).
    pub async fn write(
        &self,
        key: DocumentKey<'_>,
        values: &Map<String, Value>,
        replace_stale: bool,
    ) -> Result<(), DriverError> {
        self.validate(values)?;
        match self {
            ConfigurationDriver::Filesystem(d) => d.write(key, values, replace_stale).await,
        }
    }

    /// Reads one generation.
    pub async fn read(&self, key: DocumentKey<'_>) -> Result<Map<String, Value>, DriverError> {
        match self {
            ConfigurationDriver::Filesystem(d) => d.read(key).await,
        }
    }

    /// Removes one generation (compensation, or pruning superseded generations). Absent is fine.
    pub async fn discard(&self, key: DocumentKey<'_>) -> Result<(), DriverError> {
        match self {
            ConfigurationDriver::Filesystem(d) => d.discard(key).await,
        }
    }

    /// Removes every generation of a Configuration except `keep` (all of them with `None`).
    pub async fn prune(
        &self,
        namespace_id: &NamespaceId,
        configuration_id: &ConfigurationId,
        keep: Option<Generation>,
    ) -> Result<(), DriverError> {
        match self {
            ConfigurationDriver::Filesystem(d) => {
                d.prune(namespace_id, configuration_id, keep).await
            }
        }
    }
}
