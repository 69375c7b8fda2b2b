//! The pinned OpenClaw runtime for tests, installed once per machine.
//!
//! It lives in `<workspace root>/target/openclaw-runtime` (or `$OCC_OPENCLAW_RUNTIME`), so
//! `cargo clean` removes it and every test binary reuses it. The first test that needs it
//! installs it with [`occ_host::runtime::install`] (npm registry, ~25 s with a warm npm
//! cache, ~1.2 GB with the Codex harness; a runtime installed before the harness was pinned is
//! completed with the harness only, ~5 s warm); the install lock makes concurrent test
//! processes wait for one another.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use occ_host::runtime::{DEFAULT_PATH, OpenclawRuntime, install};

static RUNTIME: OnceLock<OpenclawRuntime> = OnceLock::new();

/// Where the test runtime is installed: `$OCC_OPENCLAW_RUNTIME`, else
/// `<workspace root>/target/openclaw-runtime`.
pub fn runtime_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("OCC_OPENCLAW_RUNTIME") {
        return dir.into();
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().and_then(Path::parent).unwrap_or(manifest);
    workspace.join("target").join("openclaw-runtime")
}

/// The `occ` binary of this build (`$OCC_BIN`, else `<workspace root>/target/debug/occ`), for
/// Driver tests whose sandboxes run its `sandbox-relay` and `workspace-setup` as occ's own
/// Drivers do. `scripts/test.sh` builds it before any test runs; panics when it is missing.
pub fn occ_binary() -> PathBuf {
    let path = std::env::var_os("OCC_BIN").map_or_else(
        || {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            let workspace = manifest.parent().and_then(Path::parent).unwrap_or(manifest);
            workspace.join("target").join("debug").join("occ")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p occ)",
        path.display()
    );
    path
}

/// The installed runtime, installing it on first use. Blocking; call it from a test thread or
/// `spawn_blocking` (it runs the install on its own thread with its own tokio runtime).
/// Panics with the install error (which names the failed step) when it cannot be installed.
pub fn shared_runtime() -> &'static OpenclawRuntime {
    RUNTIME.get_or_init(|| {
        let root = runtime_root();
        // The test process's own PATH, as occ passes its own.
        let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        // A runtime from before occ kept a warm compile cache is completed by the install.
        if let Ok(runtime) = OpenclawRuntime::locate(&root, &path)
            && runtime.compile_cache().is_some()
        {
            // Installs made before the marker was world-readable: the SSH Driver's tests run
            // workspace setup as per-Agent users, which locate the runtime too.
            use std::os::unix::fs::PermissionsExt as _;
            let marker = root.join(occ_host::runtime::MARKER_FILE);
            if let Ok(meta) = std::fs::metadata(&marker)
                && meta.permissions().mode() & 0o044 != 0o044
            {
                let _ = std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o644));
            }
            return runtime;
        }
        let installed = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime for the OpenClaw install");
            #[allow(clippy::print_stderr, reason = "install progress for the test log")]
            let progress = |line: &str| eprintln!("[openclaw runtime] {line}");
            rt.block_on(install(&root, &path, &progress))
        })
        .join()
        .expect("OpenClaw install thread panicked");
        installed.unwrap_or_else(|e| panic!("cannot install the OpenClaw runtime for tests: {e}"))
    })
}

/// The programs that per-Agent Unix users run in a test — the shared runtime and an `occ`
/// binary (`occ workspace-setup`, started from the binary that runs `occ compute-host`) — at
/// paths any user can reach. The checkout may sit under a directory other users cannot enter
/// (a clone inside `mktemp -d`, mode 0700): then both are copied under `/var/lib`, once per test
/// process, and the copy is removed when the process ends (by a watcher waiting on its PID).
/// Otherwise they are used in place.
///
/// The runtime is copied, never hard-linked: a link changes the shared runtime's files (their
/// link count and change time), and OpenClaw refuses a plugin file with more than one link and
/// a plugin whose sources changed while it loads, so a gateway another test binary starts from
/// the shared runtime meanwhile would come up without its plugin.
pub struct AgentReachablePrograms {
    runtime: PathBuf,
    occ: PathBuf,
}

static AGENT_REACHABLE: OnceLock<AgentReachablePrograms> = OnceLock::new();

impl AgentReachablePrograms {
    /// The shared runtime (installed on first use) and `occ`, copied on first use where the
    /// Agents' users cannot reach them. Blocking, like [`shared_runtime`]. Every call in one
    /// process must name the same `occ`.
    pub fn shared(occ: &Path) -> &'static Self {
        let programs = AGENT_REACHABLE.get_or_init(|| Self::make(occ));
        assert_eq!(
            programs.occ.file_name(),
            occ.file_name(),
            "one occ binary per test process"
        );
        programs
    }

    fn make(occ: &Path) -> Self {
        shared_runtime();
        let runtime = std::fs::canonicalize(runtime_root()).expect("runtime root");
        let occ = std::fs::canonicalize(occ).expect("occ binary");
        if reachable_by_others(&runtime) && reachable_by_others(&occ) {
            return Self { runtime, occ };
        }
        let copy = reachable_dir();
        let copied_runtime = copy.join("runtime");
        copy_tree(&runtime, &copied_runtime).expect("copy the runtime");
        let copied_occ = copy.join("occ");
        link_or_copy(&occ, &copied_occ).expect("link occ");
        Self {
            runtime: copied_runtime,
            occ: copied_occ,
        }
    }

    /// The runtime's install root.
    pub fn runtime(&self) -> &Path {
        &self.runtime
    }

    /// The `occ` binary.
    pub fn occ(&self) -> &Path {
        &self.occ
    }
}

/// An `occ` binary any user can run: the given one, or a link to it (a copy across file
/// systems) under `/var/lib`, removed when this is dropped.
pub struct ReachableOcc {
    path: PathBuf,
    _copy: Option<tempfile::TempDir>,
}

impl ReachableOcc {
    /// `occ` itself where other users can reach it, else a link.
    pub fn new(occ: &Path) -> Self {
        let occ = std::fs::canonicalize(occ).expect("occ binary");
        if reachable_by_others(&occ) {
            return Self {
                path: occ,
                _copy: None,
            };
        }
        let copy = reachable_tempdir();
        let path = copy.path().join("occ");
        link_or_copy(&occ, &path).expect("link occ");
        Self {
            path,
            _copy: Some(copy),
        }
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A new directory under `/var/lib` that every user may enter.
fn reachable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("occ-test-programs-")
        .tempdir_in("/var/lib")
        .expect("a directory under /var/lib");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// A [`reachable_tempdir`] that lives as long as this process: a detached watcher removes it
/// once the process has ended, however it ended.
fn reachable_dir() -> PathBuf {
    let dir = reachable_tempdir().keep();
    // `setsid --fork` returns at once, leaving the watcher in a session of its own, so it
    // outlives whatever kills this process's group.
    let started = std::process::Command::new("setsid")
        .args([
            "--fork",
            "sh",
            "-c",
            r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; rm -rf -- "$2""#,
            "sh",
        ])
        .arg(std::process::id().to_string())
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the watcher that removes the copy");
    assert!(started.success(), "setsid: {started}");
    dir
}

/// Whether users other than the owner may search every directory down to `path` and search
/// or execute `path` itself.
fn reachable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.ancestors().all(|entry| {
        std::fs::metadata(entry).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0)
    })
}

/// Recreates the tree at `from` under `to`: directories with their modes, files copied with
/// theirs, symbolic links as they are. Nothing of `from` changes.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions())
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}

/// A hard link, or a copy (with its mode) where links cannot cross file systems.
fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    /// The copy leaves the source as it was — every file with one link and its change time —
    /// and holds the same files and links.
    #[test]
    fn a_copied_runtime_leaves_the_source_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from");
        let plugin = from.join("codex/node_modules/@openclaw/codex");
        std::fs::create_dir_all(plugin.join("dist")).expect("mkdir");
        std::fs::write(plugin.join("dist/index.js"), "export {}").expect("write");
        std::fs::write(from.join("codex/big-binary"), "ELF").expect("write");
        std::os::unix::fs::symlink("big-binary", from.join("codex/link")).expect("symlink");
        let stat = |path: &std::path::Path| {
            let meta = std::fs::metadata(path).expect("stat");
            (meta.nlink(), meta.ctime(), meta.ctime_nsec())
        };
        let before = stat(&plugin.join("dist/index.js"));
        let binary_before = stat(&from.join("codex/big-binary"));
        super::copy_tree(&from, &dir.path().join("to")).expect("copy_tree");
        assert_eq!(stat(&plugin.join("dist/index.js")), before);
        assert_eq!(stat(&from.join("codex/big-binary")), binary_before);
        assert_eq!(before.0, 1);
        let to = dir.path().join("to");
        assert_eq!(
            std::fs::read_to_string(to.join("codex/node_modules/@openclaw/codex/dist/index.js"))
                .expect("copied"),
            "export {}"
        );
        assert_eq!(
            std::fs::read_link(to.join("codex/link")).expect("link"),
            std::path::Path::new("big-binary")
        );
    }
}
