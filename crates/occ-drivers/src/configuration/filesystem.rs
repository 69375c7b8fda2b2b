//! The development Configuration Driver: one directory per Namespace under a configured root
//! (0700), one file per generation `<cfg_id>.<generation>.json` (0600), written atomically.
//! File names are derived only from server-generated ids. Reads refuse symlinks, non-regular,
//! oversized, malformed and foreign files (an envelope whose ids, kind or generation differ).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::document::{DOCUMENT_MAX_BYTES, DocumentKey};
use crate::{DriverError, DriverIdentity};
use occ_host::fsutil::{ensure_private_dir, read_bounded, remove_if_exists, write_atomic};

/// Stores documents under `root`.
#[derive(Debug, Clone)]
pub struct FilesystemConfigurationDriver {
    root: Arc<PathBuf>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Envelope {
    id: ConfigurationId,
    namespace_id: NamespaceId,
    kind: String,
    generation: Generation,
    values: Map<String, Value>,
}

const ENVELOPE_SLACK: u64 = 4096;

impl FilesystemConfigurationDriver {
    /// A driver rooted at `root` (created 0700 if missing; a symlink or file is refused).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, DriverError> {
        let root = root.into();
        if !root.is_absolute() {
            return Err(DriverError::Configuration(format!(
                "the configuration root {} must be absolute",
                root.display()
            )));
        }
        ensure_private_dir(&root).map_err(|e| {
            DriverError::Configuration(format!("configuration root {}: {e}", root.display()))
        })?;
        Ok(Self {
            root: Arc::new(root),
        })
    }

    /// `configuration-filesystem` / `filesystem`.
    pub fn identity(&self) -> DriverIdentity {
        DriverIdentity {
            id: "configuration-filesystem".into(),
            implementation: "filesystem".into(),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, ns: &NamespaceId) -> PathBuf {
        self.root.join(ns.as_str())
    }

    fn file(&self, key: &DocumentKey<'_>) -> PathBuf {
        self.dir(key.namespace_id)
            .join(format!("{}.{}.json", key.configuration_id, key.generation))
    }

    pub(super) async fn write(
        &self,
        key: DocumentKey<'_>,
        values: &Map<String, Value>,
        replace_stale: bool,
    ) -> Result<(), DriverError> {
        let envelope = Envelope {
            id: key.configuration_id.clone(),
            namespace_id: key.namespace_id.clone(),
            kind: "agent".into(),
            generation: key.generation,
            values: values.clone(),
        };
        let mut bytes =
            serde_json::to_vec(&envelope).map_err(|e| DriverError::Corrupt(e.to_string()))?;
        bytes.push(b'\n');
        let dir = self.dir(key.namespace_id);
        let path = self.file(&key);
        blocking(move || {
            ensure_private_dir(&dir).map_err(|e| DriverError::io("namespace directory", e))?;
            write_atomic(&path, &bytes, !replace_stale)
                .map_err(|e| DriverError::io("configuration document", e))
        })
        .await
    }

    pub(super) async fn read(
        &self,
        key: DocumentKey<'_>,
    ) -> Result<Map<String, Value>, DriverError> {
        let path = self.file(&key);
        let bytes = blocking(move || {
            read_bounded(&path, DOCUMENT_MAX_BYTES as u64 + ENVELOPE_SLACK)
                .map_err(|e| DriverError::io("configuration document", e))
        })
        .await?
        .ok_or(DriverError::NotFound)?;
        let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|_| {
            DriverError::Corrupt("the stored configuration document is malformed".into())
        })?;
        if &envelope.id != key.configuration_id
            || &envelope.namespace_id != key.namespace_id
            || envelope.kind != "agent"
            || envelope.generation != key.generation
        {
            return Err(DriverError::Corrupt(
                "the stored configuration document belongs to another configuration".into(),
            ));
        }
        Ok(envelope.values)
    }

    pub(super) async fn discard(&self, key: DocumentKey<'_>) -> Result<(), DriverError> {
        let path = self.file(&key);
        blocking(move || {
            remove_if_exists(&path).map_err(|e| DriverError::io("configuration document", e))
        })
        .await
    }

    pub(super) async fn prune(
        &self,
        ns: &NamespaceId,
        cfg: &ConfigurationId,
        keep: Option<Generation>,
    ) -> Result<(), DriverError> {
        let dir = self.dir(ns);
        let prefix = format!("{cfg}.");
        let keep_name = keep.map(|g| format!("{cfg}.{g}.json"));
        blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(DriverError::io("namespace directory", e)),
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let ours = name.starts_with(&prefix)
                    && name.ends_with(".json")
                    && name[prefix.len()..name.len() - 5].parse::<u64>().is_ok();
                if ours && Some(name) != keep_name.as_deref() {
                    remove_if_exists(&entry.path())
                        .map_err(|e| DriverError::io("configuration document", e))?;
                }
            }
            Ok(())
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DriverError> + Send + 'static,
) -> Result<T, DriverError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DriverError::Unavailable(format!("file-system task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::ConfigurationDriver;
    use serde_json::json;
    use std::os::unix::fs::MetadataExt;

    fn doc(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn generations_round_trip_and_prune() {
        let root = tempfile::tempdir().unwrap();
        let driver = ConfigurationDriver::Filesystem(
            FilesystemConfigurationDriver::new(root.path().join("configs")).unwrap(),
        );
        let (ns, cfg) = (NamespaceId::generate(), ConfigurationId::generate());
        let g1 = DocumentKey {
            namespace_id: &ns,
            configuration_id: &cfg,
            generation: Generation::FIRST,
            created_at: occ_core::Timestamp::now(),
        };
        let g2 = DocumentKey {
            generation: Generation::new(2).unwrap(),
            ..g1
        };
        driver
            .write(g1, &doc(json!({"a": 1})), false)
            .await
            .unwrap();
        assert!(matches!(
            driver.write(g1, &doc(json!({"a": 2})), false).await,
            Err(DriverError::Conflict(_))
        ));
        let receipt = driver
            .write(g2, &doc(json!({"b": 2})), false)
            .await
            .unwrap();
        assert_eq!(driver.read(g1).await.unwrap(), doc(json!({"a": 1})));
        assert_eq!(driver.read(g2).await.unwrap(), doc(json!({"b": 2})));
        let file = root
            .path()
            .join("configs")
            .join(ns.as_str())
            .join(format!("{cfg}.2.json"));
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(file.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
        driver
            .prune(&ns, &cfg, g1.created_at, Some(g2.generation))
            .await
            .unwrap();
        assert!(matches!(driver.read(g1).await, Err(DriverError::NotFound)));
        driver.undo(g2, &receipt).await.unwrap();
        driver.undo(g2, &receipt).await.unwrap();
        assert!(matches!(driver.read(g2).await, Err(DriverError::NotFound)));
    }

    #[tokio::test]
    async fn foreign_malformed_and_oversized_files_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let fs_driver = FilesystemConfigurationDriver::new(root.path().to_path_buf()).unwrap();
        let driver = ConfigurationDriver::Filesystem(fs_driver.clone());
        let (ns, cfg, other) = (
            NamespaceId::generate(),
            ConfigurationId::generate(),
            ConfigurationId::generate(),
        );
        let key = DocumentKey {
            namespace_id: &ns,
            configuration_id: &cfg,
            generation: Generation::FIRST,
            created_at: occ_core::Timestamp::now(),
        };
        let okey = DocumentKey {
            configuration_id: &other,
            ..key
        };
        driver.write(okey, &doc(json!({})), false).await.unwrap();
        // a file copied from another configuration is foreign
        let dir = root.path().join(ns.as_str());
        std::fs::copy(
            dir.join(format!("{other}.1.json")),
            dir.join(format!("{cfg}.1.json")),
        )
        .unwrap();
        assert!(matches!(
            driver.read(key).await,
            Err(DriverError::Corrupt(_))
        ));
        std::fs::write(dir.join(format!("{cfg}.1.json")), b"{not json").unwrap();
        assert!(matches!(
            driver.read(key).await,
            Err(DriverError::Corrupt(_))
        ));
        std::fs::write(
            dir.join(format!("{cfg}.1.json")),
            vec![b' '; DOCUMENT_MAX_BYTES + 8192],
        )
        .unwrap();
        assert!(matches!(
            driver.read(key).await,
            Err(DriverError::Corrupt(_))
        ));
        std::fs::remove_file(dir.join(format!("{cfg}.1.json"))).unwrap();
        std::os::unix::fs::symlink(
            dir.join(format!("{other}.1.json")),
            dir.join(format!("{cfg}.1.json")),
        )
        .unwrap();
        assert!(matches!(
            driver.read(key).await,
            Err(DriverError::Corrupt(_))
        ));
        let big = doc(json!({"x": "y".repeat(DOCUMENT_MAX_BYTES)}));
        assert!(driver.validate(&big).is_err());
        assert!(FilesystemConfigurationDriver::new("relative/path").is_err());
    }
}
