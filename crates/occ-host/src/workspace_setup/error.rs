//! Why a setup failed, and the names of the workspace files it speaks of. Messages name steps,
//! paths and file names, never file contents.

use std::io;

use crate::runtime::OPENCLAW_VERSION;

/// The marker in the workspace that records which setup was applied.
pub const MARKER_FILE: &str = ".oce-workspace-setup.json";
/// The sibling temp file of atomic replacements in the workspace.
pub const TEMP_FILE: &str = ".oce-workspace-setup.tmp";

/// Why a setup failed. The messages name steps, paths and file names, never file contents.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The input is unreadable or malformed.
    #[error("invalid setup input: {0}")]
    Input(String),
    /// The workspace path is not acceptable (relative, not normalized, a symbolic link…).
    #[error("unsafe workspace: {0}")]
    Workspace(String),
    /// The marker names another setup.
    #[error(
        "the workspace was set up for another identity ({} differs); it is never re-applied",
        MARKER_FILE
    )]
    MarkerMismatch,
    /// The record says completed but the workspace has no marker.
    #[error(
        "initialized storage is missing; operator recovery needed (the setup was completed but {} is absent)",
        MARKER_FILE
    )]
    MarkerMissing,
    /// The marker is not a small regular file.
    #[error("unreadable marker .oce-workspace-setup.json: {0}")]
    MarkerInvalid(String),
    /// The stock defaults cannot be rendered from the runtime.
    #[error("stock workspace defaults unavailable: {0}")]
    Defaults(String),
    /// The input was written against other defaults.
    #[error(
        "stale form: defaultsId {given} is not the stock defaults id of OpenClaw {OPENCLAW_VERSION} ({current})"
    )]
    StaleDefaults {
        /// The id in the input.
        given: String,
        /// The id of the installed runtime.
        current: String,
    },
    /// A supplied file already holds other content; it is never overwritten.
    #[error(
        "{name} already exists with content that is neither the stock template nor the submitted text; it is never overwritten"
    )]
    Divergent {
        /// The file.
        name: String,
    },
    /// A workspace file is not a plain regular file.
    #[error("{name}: {reason}")]
    UnsafeFile {
        /// The file.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// Native `openclaw setup` failed.
    #[error("native openclaw setup failed: {0}")]
    NativeSetup(String),
    /// A supplied file does not hold its value after setup.
    #[error("{name} does not hold the submitted text after setup")]
    Verify {
        /// The file.
        name: String,
    },
    /// A file-system operation failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done (names a path, never content).
        step: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl SetupError {
    /// A short stable code for logs and `occ workspace-setup`'s stderr.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Input(_) => "INPUT_INVALID",
            Self::Workspace(_) => "WORKSPACE_UNSAFE",
            Self::MarkerMismatch => "MARKER_MISMATCH",
            Self::MarkerMissing => "MARKER_MISSING",
            Self::MarkerInvalid(_) => "MARKER_INVALID",
            Self::Defaults(_) => "DEFAULTS_UNAVAILABLE",
            Self::StaleDefaults { .. } => "DEFAULTS_STALE",
            Self::Divergent { .. } => "FILE_DIVERGENT",
            Self::UnsafeFile { .. } => "FILE_UNSAFE",
            Self::NativeSetup(_) => "NATIVE_SETUP_FAILED",
            Self::Verify { .. } => "VERIFY_FAILED",
            Self::Io { .. } => "IO",
        }
    }

    /// Whether running the same setup again may succeed without anyone changing the input or
    /// the workspace (native setup and I/O failures); the others need a new Agent or an
    /// operator.
    pub fn is_retryable(&self) -> bool {
        kind_is_retryable(self.kind())
    }
}

/// [`SetupError::is_retryable`] by the kind `occ workspace-setup` prints, for Drivers that run
/// it as a separate process.
pub fn kind_is_retryable(kind: &str) -> bool {
    matches!(
        kind,
        "NATIVE_SETUP_FAILED" | "IO" | "DEFAULTS_UNAVAILABLE" | "VERIFY_FAILED"
    )
}

pub(crate) fn io_step(step: impl Into<String>) -> impl FnOnce(io::Error) -> SetupError {
    let step = step.into();
    move |source| SetupError::Io { step, source }
}
