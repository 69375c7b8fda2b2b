//! `occ bootstrap`: the first Installation, its administrator and the bootstrap service key.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use occ_controller::auth::IssuedKey;
use occ_controller::bootstrap::{BootstrapInput, BootstrapOutcome, KeySink, bootstrap};
use occ_core::resource::Installation;
use occ_core::{Error, Name};
use serde_json::json;

/// Arguments of `occ bootstrap`.
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    /// The database (`postgres://…` or `sqlite://PATH`), already migrated.
    #[arg(long, env = "OCC_DATABASE_URL", value_name = "URL")]
    database_url: String,
    /// The administrator's email.
    #[arg(
        long,
        env = "OCC_BOOTSTRAP_ADMIN_EMAIL",
        default_value = "admin@openclaw.local"
    )]
    admin_email: String,
    /// A file holding the administrator's password (12..128 characters).
    #[arg(long, env = "OCC_BOOTSTRAP_PASSWORD_FILE", value_name = "PATH")]
    admin_password_file: PathBuf,
    /// Where to write the bootstrap service key (must not exist; written 0600).
    #[arg(long, env = "OCC_BOOTSTRAP_SERVICE_KEY_FILE", value_name = "PATH")]
    service_key_file: PathBuf,
    /// The Installation's display name.
    #[arg(
        long,
        env = "OCC_BOOTSTRAP_INSTALLATION_NAME",
        default_value = "OpenClaw Local Development"
    )]
    installation_name: String,
}

/// Writes the key JSON to a new private file before the bootstrap commits.
pub struct FileKeySink {
    path: PathBuf,
}

impl FileKeySink {
    /// A sink for `path`: absolute, not existing, in a directory that is not a symlink and not
    /// writable by others.
    pub fn new(path: &Path) -> anyhow::Result<Self> {
        if !path.is_absolute() {
            bail!("the service key file must be an absolute path");
        }
        if path.symlink_metadata().is_ok() {
            bail!(
                "the service key file {} already exists; bootstrap never overwrites a key",
                path.display()
            );
        }
        let parent = path
            .parent()
            .ok_or_else(|| anyhow!("the service key file has no directory"))?;
        let meta = parent
            .symlink_metadata()
            .with_context(|| format!("the key file's directory {}", parent.display()))?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            bail!(
                "the key file's directory {} must be a real directory",
                parent.display()
            );
        }
        if meta.mode() & 0o002 != 0 {
            bail!(
                "the key file's directory {} is writable by everyone",
                parent.display()
            );
        }
        Ok(Self {
            path: path.to_owned(),
        })
    }
}

/// The bootstrap key file's JSON.
pub fn key_document(key: &IssuedKey, installation: &Installation) -> serde_json::Value {
    json!({
        "data": {
            "id": key.key.id,
            "servicePrincipalId": key.key.service_principal_id,
            "name": key.key.name,
            "expiresAt": key.key.expires_at.to_string(),
            "key": key.plaintext,
        },
        "meta": {"installationId": installation.id},
    })
}

impl KeySink for FileKeySink {
    fn persist(&self, key: &IssuedKey, installation: &Installation) -> Result<(), Error> {
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)?;
            let mut bytes =
                serde_json::to_vec_pretty(&key_document(key, installation)).unwrap_or_default();
            bytes.push(b'\n');
            f.write_all(&bytes)?;
            f.sync_all()?;
            if let Some(dir) = self.path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| Error::unavailable(format!("writing the service key file: {e}")))
    }

    fn discard(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs `occ bootstrap`.
pub async fn run(args: BootstrapArgs) -> anyhow::Result<()> {
    let store = crate::compose::open_store(&args.database_url, 2).await?;
    let password = std::fs::read_to_string(&args.admin_password_file).with_context(|| {
        format!(
            "--admin-password-file {}",
            args.admin_password_file.display()
        )
    })?;
    let password = password.trim_end_matches(['\n', '\r']).to_owned();
    let name =
        Name::parse(&args.installation_name).map_err(|e| anyhow!("--installation-name {e}"))?;
    let input = BootstrapInput {
        installation_name: name,
        admin_email: args.admin_email.clone(),
        admin_password: password,
    };
    let existing = {
        let mut tx = store.begin_read().await?;
        tx.installation_get().await?
    };
    if let Some(installation) = existing {
        tracing::info!(installation_id = %installation.id, "already bootstrapped; nothing created, no key issued");
        return Ok(());
    }
    let sink = FileKeySink::new(&args.service_key_file)?;
    match bootstrap(&store, &input, &sink)
        .await
        .map_err(|e| anyhow!("{e}"))?
    {
        BootstrapOutcome::Created {
            installation,
            namespace,
            ..
        } => {
            tracing::info!(
                installation_id = %installation.id,
                namespace_id = %namespace.id,
                key_file = %args.service_key_file.display(),
                "bootstrapped: administrator {}, service key written",
                args.admin_email
            );
        }
        BootstrapOutcome::Existing { installation } => {
            tracing::info!(installation_id = %installation.id, "already bootstrapped; nothing created, no key issued");
        }
    }
    store.close().await;
    Ok(())
}
