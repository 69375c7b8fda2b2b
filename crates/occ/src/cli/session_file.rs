//! The signed-in session `occ login` keeps: one file, owner-only, in the user's config directory
//! (`$OCC_CONFIG_DIR`, else `$XDG_CONFIG_HOME/occ`, else `~/.config/occ`), for one API origin.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use serde::{Deserialize, Serialize};

/// The signed-in session as it is kept on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedSession {
    /// The API origin it belongs to.
    pub url: String,
    /// The session cookie's name and value.
    pub cookie_name: String,
    /// The cookie's value: the session credential.
    pub token: String,
    /// Who signed in.
    pub email: String,
    /// The account.
    pub user_id: String,
}

/// Where the session file lives.
pub fn session_path() -> anyhow::Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = var("OCC_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("occ")))
        .or_else(|| var("HOME").map(|d| d.join(".config").join("occ")))
        .ok_or_else(|| anyhow!("no config directory: set OCC_CONFIG_DIR or HOME"))?;
    Ok(dir.join("session.json"))
}

/// The saved session for `url`, if there is one (none where no config directory is known).
pub fn load(url: &str) -> anyhow::Result<Option<SavedSession>> {
    let Ok(path) = session_path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let saved: SavedSession = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a saved session; run occ logout", path.display()))?;
    Ok((saved.url == url).then_some(saved))
}

/// Writes the session owner-only, replacing the previous one in one rename.
pub(super) fn save(session: &SavedSession) -> anyhow::Result<PathBuf> {
    let path = session_path()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let temp = dir.join(format!(".session.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .with_context(|| format!("creating {}", temp.display()))?;
    let mut bytes = serde_json::to_vec_pretty(session)?;
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
