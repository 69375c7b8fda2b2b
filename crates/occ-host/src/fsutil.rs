//! File-system primitives shared by the host and the local Drivers: private directories, atomic
//! replacement (exclusive temp file, fsync, rename, directory fsync), bounded reads that refuse
//! symlinks and anything but a regular file, and the check that keeps a path plain enough for a
//! remote command line or a generated file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (and parents) with mode 0700 if missing; refuses a symlink or a non-directory.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a symbolic link", dir.display()),
        )),
        Ok(meta) if !meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a directory", dir.display()),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
    }
}

fn temp_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let nonce: u64 = rand::random();
    dest.with_file_name(format!(".{name}.{nonce:016x}.tmp"))
}

/// fsyncs a directory (after a rename into it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically writes `bytes` to `dest` (mode 0600): an exclusive temp file in the same
/// directory, fsync, rename over `dest`, fsync of the directory. With `create_new`, an existing
/// `dest` is an `AlreadyExists` error instead of being replaced. The temp file is removed on any
/// failure; other files are never touched.
pub fn write_atomic(dest: &Path, bytes: &[u8], create_new: bool) -> io::Result<()> {
    write_atomic_via(&temp_path(dest), dest, bytes, create_new)
}

/// [`write_atomic`] through a temp file the caller names (it must be in `dest`'s directory and
/// must not exist: it is created exclusively).
pub fn write_atomic_via(tmp: &Path, dest: &Path, bytes: &[u8], create_new: bool) -> io::Result<()> {
    let dir = dest
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        if create_new {
            // link(2) fails if dest exists, so a concurrent creator cannot be overwritten.
            fs::hard_link(tmp, dest)?;
            fs::remove_file(tmp)?;
        } else {
            fs::rename(tmp, dest)?;
        }
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// Reads a regular file of at most `max` bytes without following a symlink.
/// `Ok(None)` when it does not exist.
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "refusing a symbolic link",
            ));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    if meta.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "file is larger than allowed",
        ));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "file is larger than allowed",
        ));
    }
    Ok(Some(buf))
}

/// Removes a file; a missing file is fine.
pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Whether `path` is absolute, normalized and made only of `[A-Za-z0-9_./:@+-]` (so it is safe
/// on a remote command line and in generated files).
pub fn safe_path(path: &Path) -> bool {
    let Some(text) = path.to_str() else {
        return false;
    };
    text.starts_with('/')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:@+-".contains(&b))
        && !text.split('/').any(|c| c == ".." || c == ".")
}

/// Why this process cannot read `path` when the cause is a permission: the first directory on
/// the way (symbolic links followed) that it may not search, or the file itself when it may not
/// read it, with that entry's owner and mode — e.g. "/tmp/tmp.x1 (owner uid 0, mode 0700) is not
/// searchable by uid 999". `None` when every step is permitted (or the path does not exist),
/// so the caller keeps the error it had. A permission error alone does not say which of a
/// path's many ancestors refused: the operator needs that one to fix it.
pub fn permission_blocker(path: &Path) -> Option<String> {
    use nix::unistd::{AccessFlags, access};
    use std::collections::VecDeque;
    use std::os::unix::fs::MetadataExt as _;
    use std::path::Component;

    const MAX_LINKS: usize = 40;
    let describe = |entry: &Path, what: &str| {
        let (owner, mode) = fs::metadata(entry)
            .map(|m| (m.uid().to_string(), format!("{:04o}", m.mode() & 0o7777)))
            .unwrap_or_else(|_| ("?".into(), "?".into()));
        format!(
            "{} (owner uid {owner}, mode {mode}) is not {what} by uid {}",
            entry.display(),
            nix::unistd::geteuid()
        )
    };
    let absolute = std::path::absolute(path).ok()?;
    let mut pending: VecDeque<PathBuf> = absolute
        .components()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match part.components().next() {
            Some(Component::RootDir) => resolved = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                resolved.pop();
            }
            Some(Component::Normal(name)) => {
                if access(&resolved, AccessFlags::X_OK).is_err() {
                    return Some(describe(&resolved, "searchable"));
                }
                let next = resolved.join(name);
                let meta = fs::symlink_metadata(&next).ok()?;
                if meta.file_type().is_symlink() {
                    links += 1;
                    if links > MAX_LINKS {
                        return None;
                    }
                    let target = fs::read_link(&next).ok()?;
                    for part in target.components().rev() {
                        pending.push_front(PathBuf::from(part.as_os_str()));
                    }
                } else {
                    resolved = next;
                }
            }
            _ => {}
        }
    }
    let wanted = if resolved.is_dir() {
        AccessFlags::R_OK | AccessFlags::X_OK
    } else {
        AccessFlags::R_OK
    };
    match access(&resolved, wanted) {
        Ok(()) => None,
        Err(_) => Some(describe(&resolved, "readable")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn atomic_write_modes_and_exclusivity() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ns");
        ensure_private_dir(&sub).unwrap();
        assert_eq!(fs::metadata(&sub).unwrap().mode() & 0o777, 0o700);
        let f = sub.join("a.json");
        write_atomic(&f, b"one", true).unwrap();
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            write_atomic(&f, b"two", true).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(fs::read(&f).unwrap(), b"one");
        write_atomic(&f, b"three", false).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"three");
        // no temp files left behind
        assert_eq!(fs::read_dir(&sub).unwrap().count(), 1);
        // a failed rename (destination is a directory) leaves no temp and keeps other files
        let d = sub.join("dir.json");
        fs::create_dir(&d).unwrap();
        fs::write(sub.join(".foreign.tmp"), b"x").unwrap();
        assert!(write_atomic(&d, b"x", false).is_err());
        let names: Vec<_> = fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn bounded_reads_refuse_links_and_big_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"hello").unwrap();
        assert_eq!(read_bounded(&f, 5).unwrap().unwrap(), b"hello");
        assert!(read_bounded(&f, 4).is_err());
        let l = dir.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(read_bounded(&l, 100).is_err());
        assert!(
            read_bounded(&dir.path().join("missing"), 1)
                .unwrap()
                .is_none()
        );
        assert!(read_bounded(dir.path(), 100).is_err());
        assert!(ensure_private_dir(&l).is_err());
    }

    #[test]
    fn paths_on_the_remote_command_line_are_plain() {
        assert!(safe_path(Path::new("/usr/local/bin/occ")));
        assert!(safe_path(Path::new("/var/lib/occ-compute")));
        for bad in ["occ", "/a b", "/a;b", "/a/../b", "/a/$x", "/a'b", "/a/./b"] {
            assert!(!safe_path(Path::new(bad)), "{bad}");
        }
    }
}
