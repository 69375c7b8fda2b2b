//! Settings shared by the commands. The only place occ touches the environment and the local
//! file system on behalf of configuration.

use std::path::Path;

use anyhow::Context as _;
use occ_store::Backend;

/// Checks a database URL and, for SQLite, creates the file's parent directory (0700) so a
/// first run on a fresh machine just works.
pub fn prepare_database_url(url: &str) -> anyhow::Result<Backend> {
    let backend = occ_store::backend_of(url)?;
    if backend == Backend::Sqlite {
        let path = url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:")
            .split('?')
            .next()
            .unwrap_or_default();
        if path.is_empty() || path.starts_with(':') {
            anyhow::bail!("an SQLite URL must name a file, e.g. sqlite://./.occ/occ.db");
        }
        let parent = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.exists()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
            }
        }
    }
    Ok(backend)
}
