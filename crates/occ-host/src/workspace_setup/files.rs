//! The workspace on disk: the checked workspace path, guarded reads that refuse links and
//! anything but a plain file, atomic replacement of a file, the marker.

use std::fs::{self, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::error::{MARKER_FILE, SetupError, TEMP_FILE, io_step};
use crate::fsutil;

const MARKER_MAX_BYTES: u64 = 4096;
/// Reads of existing workspace files; anything larger is neither stock nor a valid value.
const WORKSPACE_READ_MAX_BYTES: u64 = 32 * 1024;

pub(super) fn read_workspace_file(workspace: &Path, name: &str) -> Result<Guarded, SetupError> {
    let path = workspace.join(name);
    read_guarded(&path, WORKSPACE_READ_MAX_BYTES).map_err(|e| match e {
        Unsafe::Refused(reason) => SetupError::UnsafeFile {
            name: name.to_owned(),
            reason,
        },
        Unsafe::Io(e) => io_step(format!("read {}", path.display()))(e),
    })
}

pub(super) fn read_marker(workspace: &Path) -> Result<Option<Vec<u8>>, SetupError> {
    let path = workspace.join(MARKER_FILE);
    match read_guarded(&path, MARKER_MAX_BYTES) {
        Ok(Guarded::Absent) => Ok(None),
        Ok(Guarded::Content(bytes)) => Ok(Some(bytes)),
        Ok(Guarded::TooLarge) => Err(SetupError::MarkerInvalid(format!(
            "larger than {MARKER_MAX_BYTES} bytes"
        ))),
        Err(Unsafe::Refused(reason)) => Err(SetupError::MarkerInvalid(reason)),
        Err(Unsafe::Io(e)) => Err(io_step(format!("read {}", path.display()))(e)),
    }
}

/// Step 2: `workspace` is absolute and normalized, every existing component is a directory
/// (not a symbolic link); missing components are created 0700.
pub(super) fn prepare_workspace(workspace: &Path) -> Result<PathBuf, SetupError> {
    let bad = |m: String| Err(SetupError::Workspace(m));
    let Some(text) = workspace.to_str() else {
        return bad("the workspace path is not UTF-8".into());
    };
    if !text.starts_with('/') {
        return bad(format!("{text} is not an absolute path"));
    }
    let components: Vec<&str> = text[1..].split('/').collect();
    if text == "/"
        || components
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return bad(format!(
            "{text} is not a normalized path (no ., .., // or trailing /)"
        ));
    }
    let mut current = PathBuf::from("/");
    for component in components {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) => check_real_dir(&current, &meta)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match fs::DirBuilder::new().mode(0o700).create(&current) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        let meta = fs::symlink_metadata(&current)
                            .map_err(io_step(format!("inspect {}", current.display())))?;
                        check_real_dir(&current, &meta)?;
                    }
                    Err(e) => return Err(io_step(format!("create {}", current.display()))(e)),
                }
            }
            Err(e) => return Err(io_step(format!("inspect {}", current.display()))(e)),
        }
    }
    Ok(current)
}

fn check_real_dir(path: &Path, meta: &fs::Metadata) -> Result<(), SetupError> {
    if meta.file_type().is_symlink() {
        Err(SetupError::Workspace(format!(
            "{} is a symbolic link",
            path.display()
        )))
    } else if !meta.is_dir() {
        Err(SetupError::Workspace(format!(
            "{} is not a directory",
            path.display()
        )))
    } else {
        Ok(())
    }
}

/// A leftover temp file of an interrupted replacement is removed when it is a plain file.
pub(super) fn remove_leftover_temp(workspace: &Path) -> Result<(), SetupError> {
    let tmp = workspace.join(TEMP_FILE);
    match fs::symlink_metadata(&tmp) {
        Ok(meta) if meta.file_type().is_file() && meta.nlink() == 1 => {
            fs::remove_file(&tmp).map_err(io_step(format!("remove {}", tmp.display())))
        }
        Ok(_) => Err(SetupError::UnsafeFile {
            name: TEMP_FILE.to_owned(),
            reason: "a leftover that is not a plain regular file; remove it by hand".into(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_step(format!("inspect {}", tmp.display()))(e)),
    }
}

/// Atomically replaces `workspace/name`: exclusive 0600 temp [`TEMP_FILE`], write, fsync,
/// rename, directory fsync.
pub(super) fn replace_file(workspace: &Path, name: &str, bytes: &[u8]) -> Result<(), SetupError> {
    remove_leftover_temp(workspace)?;
    let tmp = workspace.join(TEMP_FILE);
    let dest = workspace.join(name);
    let result = fsutil::write_atomic_via(&tmp, &dest, bytes, false);
    result.map_err(io_step(format!("replace {}", dest.display())))
}

/// What a guarded read found.
pub(super) enum Guarded {
    Absent,
    Content(Vec<u8>),
    TooLarge,
}

pub(super) enum Unsafe {
    /// Not a plain file: the reason, without content.
    Refused(String),
    Io(io::Error),
}

/// Reads a regular file with one link and at most `max` bytes without following a symbolic
/// link (and without blocking on a FIFO).
pub(super) fn read_guarded(path: &Path, max: u64) -> Result<Guarded, Unsafe> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Guarded::Absent),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Unsafe::Refused("is a symbolic link".into()));
        }
        Err(e) => return Err(Unsafe::Io(e)),
    };
    let meta = file.metadata().map_err(Unsafe::Io)?;
    if !meta.is_file() {
        return Err(Unsafe::Refused("is not a regular file".into()));
    }
    if meta.nlink() != 1 {
        return Err(Unsafe::Refused("has more than one hard link".into()));
    }
    if meta.len() > max {
        return Ok(Guarded::TooLarge);
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(Unsafe::Io)?;
    if buf.len() as u64 > max {
        return Ok(Guarded::TooLarge);
    }
    Ok(Guarded::Content(buf))
}

pub(super) fn remove_path(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
