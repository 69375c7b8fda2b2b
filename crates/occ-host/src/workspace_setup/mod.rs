//! The workspace setup runtime: applies an Agent's staged initial workspace files
//! (`initialWorkspaceFiles`) to its persistent workspace exactly once, on top of the stock files
//! of the pinned OpenClaw, and verifies the result on every later deploy.
//!
//! The host calls [`apply`] in process; Drivers whose workspace lives elsewhere
//! run `occ workspace-setup` there, which wraps the same function. The input is a private file
//! (never argv or environment values) holding a [`SetupInput`]:
//!
//! 1. The input is validated: closed object, ids, `completed` ⇒ no files, otherwise at least
//!    one of the four files, each ≤ 16 KiB of UTF-8 without NUL.
//! 2. The workspace path must be absolute and normalized, every existing component a real
//!    directory (no symbolic links); missing components are created 0700.
//! 3. The marker [`MARKER_FILE`] holds the setup identity (`{id, namespaceId, agentId,
//!    defaultsId?}`). Present and equal ⇒ [`SetupOutcome::AlreadyApplied`] (a lost
//!    acknowledgement, or a completed record verified), nothing is touched; present and
//!    different ⇒ refused; absent although the record says completed ⇒ refused (the
//!    initialized storage is gone and needs an operator).
//! 4. The stock defaults are rendered from the runtime's templates ([`stock_defaults`]); a
//!    given `defaultsId` must equal their id (the form was built on other defaults).
//! 5. Every supplied file must currently be absent, the stock text or the submitted text:
//!    user content is never overwritten.
//! 6. Native `openclaw setup --baseline` ([`native_setup`]); each supplied file that differs is
//!    replaced atomically; native setup again (so its BOOTSTRAP.md lifecycle sees the
//!    profile); every supplied file is verified; the marker is written atomically.
//! 7. [`run`] deletes the input file after a successful application of a record that is not
//!    completed yet.
//!
//! Errors ([`SetupError`]) never carry file contents, and the output of native setup (which may
//! echo them) is captured, bounded and dropped.

mod apply;
mod defaults;
mod error;
mod files;
mod input;
mod native;

pub use apply::{SetupOutcome, apply, remove_input_file, run};
pub use defaults::{Defaults, STOCK_DEFAULTS_ID, defaults_id, render_template, stock_defaults};
pub use error::{MARKER_FILE, SetupError, TEMP_FILE, kind_is_retryable};
pub use input::{
    ID_MAX_CHARS, INPUT_MAX_BYTES, SetupInput, parse_input, read_input_file, write_input_file,
};
pub use native::{NATIVE_SETUP_TIMEOUT, SetupEnv, native_setup, seed_workspace};
