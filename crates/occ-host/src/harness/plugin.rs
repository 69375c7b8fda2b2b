//! Makes the runtime's Codex plugin a *trusted* plugin of one gateway, without installing it.
//!
//! OpenClaw 2026.9.6 grants the trusted-plugin APIs the Codex plugin needs to register its
//! agent harness (`openKeyedStore`, reserved command ownership) only to a plugin that has an
//! official npm install record whose `installPath` holds it: `plugins.load.paths` leaves it
//! "record-missing", `plugins install --link` "origin-path". Besides the records in its state
//! database, the gateway recovers records from its managed npm root `<state>/npm` at every
//! load: each dependency in `<state>/npm/package.json` found as a plugin package under
//! `<state>/npm/node_modules/` becomes an npm record (spec `<name>@<version>`) with that
//! `installPath`, which is exactly the official shape. So a gateway gets the plugin trusted
//! from two small entries pointing at the runtime's copy (the gateway compares real paths):
//!
//! ```text
//! <state>/npm/package.json                      {"private":true,"dependencies":{"@openclaw/codex":"<pin>"}}
//! <state>/npm/node_modules/@openclaw/codex   -> <runtime>/codex/node_modules/@openclaw/codex
//! ```
//!
//! instead of `openclaw plugins install npm:@openclaw/codex` (15–47 s, 342 MB per state dir,
//! and a rewrite of the gateway's config). The gateway's config stays untouched: it only needs
//! `plugins.allow`/`plugins.entries.codex`, no `plugins.load.paths`. The plugin's own link to
//! its `openclaw` peer is made once by `occ runtime install`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::runtime::{CODEX_PLUGIN_VERSION, OpenclawRuntime};

/// The npm package of the plugin, as the gateway's official-plugin catalog names it.
const PLUGIN_PACKAGE: &str = "@openclaw/codex";

/// Why a gateway state directory could not be prepared. Names the step and the path; holds no
/// secret (there is none involved).
#[derive(Debug, thiserror::Error)]
#[error("trust the Codex plugin in {}: {step}: {source}", state_dir.display())]
pub struct PluginTrustError {
    /// The gateway's state directory (`OPENCLAW_STATE_DIR`).
    pub state_dir: PathBuf,
    /// What was being done.
    pub step: &'static str,
    /// The cause.
    #[source]
    pub source: io::Error,
}

/// Lays out `<state_dir>/npm` so that the gateway using `state_dir` loads the runtime's Codex
/// plugin as trusted (see the module docs). Idempotent and cheap (two small entries, no
/// process, no network); repoints the link when the runtime moved. Call it before the gateway
/// starts; a running gateway reads it at its next start.
pub fn trust_codex_plugin(
    runtime: &OpenclawRuntime,
    state_dir: &Path,
) -> Result<(), PluginTrustError> {
    let fail = |step: &'static str| {
        move |source| PluginTrustError {
            state_dir: state_dir.to_path_buf(),
            step,
            source,
        }
    };
    let npm_root = state_dir.join("npm");
    let link = npm_root.join("node_modules").join(PLUGIN_PACKAGE);
    let scope_dir = link.parent().unwrap_or(&npm_root);
    fs::create_dir_all(scope_dir).map_err(fail("create the managed npm root"))?;

    let manifest = serde_json::json!({
        "private": true,
        "dependencies": { PLUGIN_PACKAGE: CODEX_PLUGIN_VERSION },
    });
    let manifest = format!("{manifest}\n");
    let manifest_path = npm_root.join("package.json");
    if fs::read(&manifest_path).ok().as_deref() != Some(manifest.as_bytes()) {
        crate::fsutil::write_atomic(&manifest_path, manifest.as_bytes(), false)
            .map_err(fail("write the managed npm root's package.json"))?;
    }

    let target = runtime.codex_plugin_dir();
    if fs::read_link(&link).ok().as_deref() != Some(target.as_path()) {
        // A new link renamed over the old one: a concurrent reader never sees none.
        let staged = scope_dir.join(".codex.occ-link");
        crate::fsutil::remove_if_exists(&staged).map_err(fail("clear a staged link"))?;
        std::os::unix::fs::symlink(&target, &staged).map_err(fail("link the plugin"))?;
        fs::rename(&staged, &link).map_err(fail("move the plugin link into place"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(root: &Path) -> OpenclawRuntime {
        OpenclawRuntime {
            root: root.to_path_buf(),
            node: root.join("node"),
            entry: root.join("entry"),
            search_path: "/usr/bin".into(),
        }
    }

    #[test]
    fn lays_out_a_managed_npm_root_pointing_at_the_runtime() {
        let tmp = tempfile::tempdir().expect("tmp");
        let state = tmp.path().join("state");
        let rt = runtime(&tmp.path().join("rt"));
        trust_codex_plugin(&rt, &state).expect("trust");

        let manifest: serde_json::Value = serde_json::from_slice(
            &fs::read(state.join("npm/package.json")).expect("package.json"),
        )
        .expect("json");
        assert_eq!(
            manifest["dependencies"]["@openclaw/codex"],
            CODEX_PLUGIN_VERSION
        );
        assert_eq!(
            fs::read_link(state.join("npm/node_modules/@openclaw/codex")).expect("link"),
            rt.codex_plugin_dir()
        );
    }

    #[test]
    fn is_idempotent_and_follows_a_moved_runtime() {
        let tmp = tempfile::tempdir().expect("tmp");
        let state = tmp.path().join("state");
        let link = state.join("npm/node_modules/@openclaw/codex");
        trust_codex_plugin(&runtime(&tmp.path().join("rt1")), &state).expect("first");
        let manifest_inode = inode(&state.join("npm/package.json"));
        let link_inode = inode(&link);

        trust_codex_plugin(&runtime(&tmp.path().join("rt1")), &state).expect("again");
        assert_eq!(inode(&state.join("npm/package.json")), manifest_inode);
        assert_eq!(inode(&link), link_inode, "an unchanged link is left alone");

        let moved = runtime(&tmp.path().join("rt2"));
        trust_codex_plugin(&moved, &state).expect("moved");
        assert_eq!(
            fs::read_link(&link).expect("link"),
            moved.codex_plugin_dir()
        );
        let names: Vec<_> = fs::read_dir(state.join("npm/node_modules/@openclaw"))
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["codex"], "no staged link is left behind");
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        fs::symlink_metadata(path).expect("stat").ino()
    }
}
