//! The local Secret Driver: each value is sealed with XChaCha20-Poly1305 under a 256-bit key kept
//! in a key file (0600), with the exact `(namespace, secret)` as associated data, so a file moved
//! to another Secret does not decrypt. Files live at `<root>/<namespace>/<secret>.secret` (0600,
//! written atomically); the locator is that relative path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use occ_core::{AgentId, NamespaceId, RevisionId, SecretId};

use super::handed;

use crate::{DriverError, DriverIdentity};
use occ_host::fsutil::{ensure_private_dir, read_bounded, remove_if_exists, write_atomic};

const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;
const MAX_FILE: u64 = 70 * 1024;
/// Largest record of handed values (64 bindings of 64 KiB and the harness credential, sealed).
const HANDED_MAX_FILE: u64 = 8 * 1024 * 1024;

/// Encrypted values under `root`.
#[derive(Clone)]
pub struct LocalSecretDriver {
    root: Arc<PathBuf>,
    cipher: Arc<XChaCha20Poly1305>,
}

impl std::fmt::Debug for LocalSecretDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSecretDriver")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl LocalSecretDriver {
    /// A driver storing under `root` with the key in `key_file`. A missing key file is created
    /// with a fresh random key (0600, exclusive create); an existing one must hold exactly 64 hex
    /// characters (optionally followed by a newline) and must not be a symlink.
    pub fn open(root: impl Into<PathBuf>, key_file: &Path) -> Result<Self, DriverError> {
        let root = root.into();
        if !root.is_absolute() || !key_file.is_absolute() {
            return Err(DriverError::Configuration(
                "the secret root and key file must be absolute paths".into(),
            ));
        }
        ensure_private_dir(&root).map_err(|e| {
            DriverError::Configuration(format!("secret root {}: {e}", root.display()))
        })?;
        let key = load_or_create_key(key_file)?;
        Ok(Self {
            root: Arc::new(root),
            cipher: Arc::new(XChaCha20Poly1305::new(&key)),
        })
    }

    /// `secret-local` / `local`.
    pub fn identity(&self) -> DriverIdentity {
        DriverIdentity {
            id: "secret-local".into(),
            implementation: "local".into(),
        }
    }

    fn locator(ns: &NamespaceId, id: &SecretId) -> String {
        format!("{ns}/{id}.secret")
    }

    fn path(&self, ns: &NamespaceId, id: &SecretId, locator: &str) -> Result<PathBuf, DriverError> {
        if locator != Self::locator(ns, id) {
            return Err(DriverError::Corrupt(
                "the secret locator does not belong to this Secret".into(),
            ));
        }
        Ok(self.root.join(locator))
    }

    fn aad(ns: &NamespaceId, id: &SecretId) -> Vec<u8> {
        format!("occ-secret:v1:{ns}:{id}").into_bytes()
    }

    fn seal(&self, aad: &[u8], value: &str) -> Result<Vec<u8>, DriverError> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad,
                },
            )
            .map_err(|_| DriverError::Unavailable("encryption failed".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn open_sealed(&self, aad: &[u8], bytes: &[u8]) -> Result<Vec<u8>, DriverError> {
        if bytes.len() < 1 + NONCE_LEN || bytes[0] != VERSION {
            return Err(DriverError::Corrupt(
                "the stored secret is malformed".into(),
            ));
        }
        let nonce: [u8; NONCE_LEN] = bytes[1..1 + NONCE_LEN]
            .try_into()
            .map_err(|_| DriverError::Corrupt("the stored secret is malformed".into()))?;
        self.cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &bytes[1 + NONCE_LEN..],
                    aad,
                },
            )
            .map_err(|_| {
                DriverError::Corrupt(
                    "the stored secret does not authenticate for this Secret".into(),
                )
            })
    }

    async fn store(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        value: &str,
        create_new: bool,
    ) -> Result<String, DriverError> {
        let locator = Self::locator(ns, id);
        let sealed = self.seal(&Self::aad(ns, id), value)?;
        let dir = self.root.join(ns.as_str());
        let path = self.root.join(&locator);
        blocking(move || {
            ensure_private_dir(&dir).map_err(|e| DriverError::io("secret directory", e))?;
            write_atomic(&path, &sealed, create_new).map_err(|e| DriverError::io("secret", e))
        })
        .await?;
        Ok(locator)
    }

    pub(super) async fn put(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        value: &str,
    ) -> Result<String, DriverError> {
        self.store(ns, id, value, true).await
    }

    pub(super) async fn replace(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        value: &str,
    ) -> Result<String, DriverError> {
        self.verify(ns, id, locator).await?;
        self.store(ns, id, value, false).await
    }

    pub(super) async fn delete(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        let path = self.path(ns, id, locator)?;
        blocking(move || remove_if_exists(&path).map_err(|e| DriverError::io("secret", e))).await
    }

    async fn load(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<Vec<u8>, DriverError> {
        let path = self.path(ns, id, locator)?;
        let bytes = blocking(move || {
            read_bounded(&path, MAX_FILE).map_err(|e| DriverError::io("secret", e))
        })
        .await?
        .ok_or(DriverError::NotFound)?;
        self.open_sealed(&Self::aad(ns, id), &bytes)
    }

    pub(super) async fn verify(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
    ) -> Result<(), DriverError> {
        self.load(ns, id, locator).await.map(drop)
    }

    pub(super) async fn with_value<T>(
        &self,
        ns: &NamespaceId,
        id: &SecretId,
        locator: &str,
        use_value: impl FnOnce(&str) -> T,
    ) -> Result<T, DriverError> {
        let plain = self.load(ns, id, locator).await?;
        let text = std::str::from_utf8(&plain)
            .map_err(|_| DriverError::Corrupt("the stored secret is not UTF-8".into()))?;
        Ok(use_value(text))
    }
}

impl LocalSecretDriver {
    /// `<root>/<namespace>/handed/<agent>`: the records of what the Agent's revisions were
    /// handed.
    fn handed_dir(&self, ns: &NamespaceId, agent: &AgentId) -> PathBuf {
        self.root
            .join(ns.as_str())
            .join("handed")
            .join(agent.as_str())
    }

    fn handed_aad(ns: &NamespaceId, agent: &AgentId, rev: &RevisionId) -> Vec<u8> {
        format!("occ-handed:v1:{ns}:{agent}:{rev}").into_bytes()
    }

    pub(super) async fn handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
    ) -> Result<Vec<String>, DriverError> {
        let path = self.handed_dir(ns, agent).join(format!("{rev}.sealed"));
        let Some(bytes) = blocking(move || {
            read_bounded(&path, HANDED_MAX_FILE).map_err(|e| DriverError::io("handed values", e))
        })
        .await?
        else {
            return Ok(Vec::new());
        };
        let plain = self.open_sealed(&Self::handed_aad(ns, agent, rev), &bytes)?;
        serde_json::from_slice(&plain)
            .map_err(|_| DriverError::Corrupt("the handed values are malformed".into()))
    }

    pub(super) async fn record_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        rev: &RevisionId,
        values: &[&str],
    ) -> Result<(), DriverError> {
        let known = self.handed(ns, agent, rev).await?;
        let Some(merged) = handed::merge(known, values) else {
            return Ok(());
        };
        let text = serde_json::to_string(&merged)
            .map_err(|e| DriverError::Unavailable(format!("handed values: {e}")))?;
        let sealed = self.seal(&Self::handed_aad(ns, agent, rev), &text)?;
        let dir = self.handed_dir(ns, agent);
        let path = dir.join(format!("{rev}.sealed"));
        blocking(move || {
            // Created recursively with mode 0700 (the root itself already is).
            ensure_private_dir(&dir).map_err(|e| DriverError::io("handed directory", e))?;
            write_atomic(&path, &sealed, false).map_err(|e| DriverError::io("handed values", e))
        })
        .await
    }

    pub(super) async fn forget_handed(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
    ) -> Result<(), DriverError> {
        let dir = self.handed_dir(ns, agent);
        blocking(move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DriverError::io("handed values", e)),
        })
        .await
    }
}

fn load_or_create_key(path: &Path) -> Result<Key, DriverError> {
    let bad = |why: &str| {
        DriverError::Configuration(format!("secret key file {}: {why}", path.display()))
    };
    match read_bounded(path, 128) {
        Ok(Some(bytes)) => {
            let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text"))?;
            let hex_key = text.strip_suffix('\n').unwrap_or(text);
            let raw =
                hex::decode(hex_key).map_err(|_| bad("expected 64 hexadecimal characters"))?;
            let raw: [u8; 32] = raw
                .try_into()
                .map_err(|_| bad("expected 64 hexadecimal characters"))?;
            Ok(Key::from(raw))
        }
        Ok(None) => {
            if let Some(parent) = path.parent() {
                ensure_private_dir(parent).map_err(|e| bad(&e.to_string()))?;
            }
            let raw: [u8; 32] = rand::random();
            let mut text = hex::encode(raw);
            text.push('\n');
            match write_atomic(path, text.as_bytes(), true) {
                Ok(()) => Ok(Key::from(raw)),
                // another process created it first: use theirs
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load_or_create_key(path),
                Err(e) => Err(bad(&e.to_string())),
            }
        }
        Err(e) => Err(bad(&e.to_string())),
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
    use crate::secret::SecretDriver;
    use std::os::unix::fs::MetadataExt;

    #[tokio::test]
    async fn values_are_sealed_bound_to_their_secret_and_never_plain_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("keys/secret.key");
        let driver =
            SecretDriver::Local(LocalSecretDriver::open(dir.path().join("secrets"), &key).unwrap());
        assert_eq!(std::fs::metadata(&key).unwrap().mode() & 0o777, 0o600);
        let (ns, a, b) = (
            NamespaceId::generate(),
            SecretId::generate(),
            SecretId::generate(),
        );
        let la = driver.put(&ns, &a, "sk-very-secret-value").await.unwrap();
        let lb = driver.put(&ns, &b, "other").await.unwrap();
        assert!(matches!(
            driver.put(&ns, &a, "again").await,
            Err(DriverError::Conflict(_))
        ));
        driver.verify(&ns, &a, &la).await.unwrap();
        let raw = std::fs::read(dir.path().join("secrets").join(&la)).unwrap();
        assert!(!raw.windows(6).any(|w| w == b"secret"), "stored encrypted");
        assert_eq!(
            driver
                .with_value(&ns, &a, &la, str::to_owned)
                .await
                .unwrap(),
            "sk-very-secret-value"
        );
        // a value moved to another Secret does not authenticate
        std::fs::copy(
            dir.path().join("secrets").join(&la),
            dir.path().join("secrets").join(&lb),
        )
        .unwrap();
        assert!(matches!(
            driver.verify(&ns, &b, &lb).await,
            Err(DriverError::Corrupt(_))
        ));
        // a locator of another Secret is refused
        assert!(driver.verify(&ns, &b, &la).await.is_err());
        driver.replace(&ns, &a, &la, "rotated").await.unwrap();
        assert_eq!(
            driver
                .with_value(&ns, &a, &la, str::to_owned)
                .await
                .unwrap(),
            "rotated"
        );
        driver.delete(&ns, &a, &la).await.unwrap();
        driver.delete(&ns, &a, &la).await.unwrap();
        assert!(matches!(
            driver.verify(&ns, &a, &la).await,
            Err(DriverError::NotFound)
        ));
        // the key persists across restarts
        let again =
            SecretDriver::Local(LocalSecretDriver::open(dir.path().join("secrets"), &key).unwrap());
        let lc = again.put(&ns, &a, "v").await.unwrap();
        driver.verify(&ns, &a, &lc).await.unwrap();
        std::fs::write(&key, "not hex").unwrap();
        assert!(LocalSecretDriver::open(dir.path().join("secrets"), &key).is_err());
    }

    /// What a revision was handed is kept sealed (bound to its Namespace, Agent and revision),
    /// only grows, reads back empty when nothing was recorded, and goes with its Agent.
    #[tokio::test]
    async fn handed_values_are_sealed_per_revision_and_forgotten_with_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("secrets");
        let driver = SecretDriver::Local(
            LocalSecretDriver::open(&root, &dir.path().join("secret.key")).unwrap(),
        );
        let (ns, agent, other) = (
            NamespaceId::generate(),
            AgentId::generate(),
            AgentId::generate(),
        );
        let (rev, rev2) = (RevisionId::generate(), RevisionId::generate());
        assert!(driver.handed(&ns, &agent, &rev).await.unwrap().is_empty());
        driver
            .record_handed(&ns, &agent, &rev, &["sk-old-value-1", "tok-2"])
            .await
            .unwrap();
        driver
            .record_handed(&ns, &agent, &rev, &["sk-new-value-3", "tok-2"])
            .await
            .unwrap();
        driver
            .record_handed(&ns, &other, &rev2, &["other-agent"])
            .await
            .unwrap();
        assert_eq!(
            driver.handed(&ns, &agent, &rev).await.unwrap(),
            ["sk-old-value-1", "tok-2", "sk-new-value-3"]
        );
        assert!(driver.handed(&ns, &agent, &rev2).await.unwrap().is_empty());
        let file = root
            .join(ns.as_str())
            .join("handed")
            .join(agent.as_str())
            .join(format!("{rev}.sealed"));
        let raw = std::fs::read(&file).unwrap();
        assert!(!raw.windows(6).any(|w| w == b"sk-old"), "stored encrypted");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        // Moved to another revision, it does not authenticate.
        let moved = file.with_file_name(format!("{rev2}.sealed"));
        std::fs::copy(&file, &moved).unwrap();
        assert!(matches!(
            driver.handed(&ns, &agent, &rev2).await,
            Err(DriverError::Corrupt(_))
        ));
        driver.forget_handed(&ns, &agent).await.unwrap();
        driver.forget_handed(&ns, &agent).await.unwrap();
        assert!(driver.handed(&ns, &agent, &rev).await.unwrap().is_empty());
        assert_eq!(
            driver.handed(&ns, &other, &rev2).await.unwrap(),
            ["other-agent"]
        );
    }
}
