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
/// (a clone inside `mktemp -d`, mode 0700): then both are hard-linked (copied across file
/// systems; plugin packages always copied) under `/var/lib` and removed when this is dropped. Otherwise they are used in place.
pub struct AgentReachablePrograms {
    runtime: PathBuf,
    occ: PathBuf,
    _copy: Option<tempfile::TempDir>,
}

impl AgentReachablePrograms {
    /// The shared runtime (installed on first use) and `occ`. Blocking, like [`shared_runtime`].
    pub fn new(occ: &Path) -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        shared_runtime();
        let runtime = std::fs::canonicalize(runtime_root()).expect("runtime root");
        let occ = std::fs::canonicalize(occ).expect("occ binary");
        if reachable_by_others(&runtime) && reachable_by_others(&occ) {
            return Self {
                runtime,
                occ,
                _copy: None,
            };
        }
        let copy = tempfile::Builder::new()
            .prefix("occ-test-programs-")
            .tempdir_in("/var/lib")
            .expect("a directory under /var/lib");
        std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let copied_runtime = copy.path().join("runtime");
        link_tree(&runtime, &copied_runtime, false).expect("link the runtime");
        let copied_occ = copy.path().join("occ");
        link_or_copy(&occ, &copied_occ).expect("link occ");
        Self {
            runtime: copied_runtime,
            occ: copied_occ,
            _copy: Some(copy),
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

/// Whether users other than the owner may search every directory down to `path` and search
/// or execute `path` itself.
fn reachable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.ancestors().all(|entry| {
        std::fs::metadata(entry).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0)
    })
}

/// Recreates the tree at `from` under `to`: directories with their modes, files hard-linked,
/// symbolic links as they are. Plugin packages (directories with an `openclaw.plugin.json`,
/// ~19 MB in all) are copied instead: OpenClaw refuses a plugin file that has more than one
/// link, and a link here would add one to the shared runtime's own file while this copy lives
/// (a gateway started meanwhile from the shared runtime would drop the plugin).
fn link_tree(from: &Path, to: &Path, copy: bool) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        let copy = copy || from.join("openclaw.plugin.json").is_file();
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            link_tree(&entry.path(), &to.join(entry.file_name()), copy)?;
        }
        std::fs::set_permissions(to, meta.permissions())
    } else if copy {
        std::fs::copy(from, to).map(|_| ())
    } else {
        link_or_copy(from, to)
    }
}

/// A hard link, or a copy (with its mode) where links cannot cross file systems.
fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    /// The linked copy leaves every plugin file of the source with one link (OpenClaw refuses
    /// more), and links the rest.
    #[test]
    fn a_linked_runtime_copies_plugin_packages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from");
        let plugin = from.join("codex/node_modules/@openclaw/codex");
        std::fs::create_dir_all(plugin.join("dist")).expect("mkdir");
        std::fs::write(plugin.join("openclaw.plugin.json"), "{}").expect("write");
        std::fs::write(plugin.join("dist/index.js"), "").expect("write");
        std::fs::write(from.join("codex/big-binary"), "").expect("write");
        super::link_tree(&from, &dir.path().join("to"), false).expect("link_tree");
        let links = |path: &std::path::Path| std::fs::metadata(path).expect("stat").nlink();
        assert_eq!(links(&plugin.join("dist/index.js")), 1);
        assert_eq!(links(&plugin.join("openclaw.plugin.json")), 1);
        assert_eq!(links(&from.join("codex/big-binary")), 2);
        assert!(
            dir.path()
                .join("to/codex/node_modules/@openclaw/codex/dist/index.js")
                .is_file()
        );
    }
}
