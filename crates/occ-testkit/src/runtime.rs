//! The pinned OpenClaw runtime for tests, installed once per machine.
//!
//! It lives in `<workspace root>/target/openclaw-runtime` (or `$OCC_OPENCLAW_RUNTIME`), so
//! `cargo clean` removes it and every test binary reuses it. The first test that needs it
//! installs it with [`occ_host::runtime::install`] (npm registry, ~25 s with a warm npm
//! cache, ~840 MB); the install lock makes concurrent test processes wait for one another.

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
        if let Ok(runtime) = OpenclawRuntime::locate(&root, &path) {
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
