//! The workspace setup runtime: applies an Agent's staged initial workspace files
//! (`initialWorkspaceFiles`) to its persistent workspace exactly once, on top of the stock files
//! of the pinned OpenClaw, and verifies the result on every later deploy.
//!
//! The process Compute Driver calls [`run`] in process; Drivers whose workspace lives elsewhere
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

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_core::validate::Problems;
use occ_core::{AgentId, NamespaceId};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use sha2::Digest as _;
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::fsutil;
use crate::runtime::{OPENCLAW_VERSION, OpenclawRuntime};

/// The marker in the workspace that records which setup was applied.
pub const MARKER_FILE: &str = ".oce-workspace-setup.json";
/// The sibling temp file of atomic replacements in the workspace.
pub const TEMP_FILE: &str = ".oce-workspace-setup.tmp";
/// Largest input file.
pub const INPUT_MAX_BYTES: u64 = 400_000;
/// Longest setup, Namespace or Agent id in the input, in characters.
pub const ID_MAX_CHARS: usize = 256;
/// Bound on one native setup run.
pub const NATIVE_SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// The stock defaults id of the pinned OpenClaw ([`OPENCLAW_VERSION`]): lowercase hex SHA-256
/// of `[[name, text], …]`. [`stock_defaults`] refuses a runtime whose templates render to
/// anything else.
pub const STOCK_DEFAULTS_ID: &str =
    "c017a28c6f49a9f34629782addcf4d4fe704ee7cb8e068efc6447016ebe22699";

const MARKER_MAX_BYTES: u64 = 4096;
/// Reads of existing workspace files; anything larger is neither stock nor a valid value.
const WORKSPACE_READ_MAX_BYTES: u64 = 32 * 1024;
const TEMPLATE_MAX_BYTES: u64 = 1 << 20;
const TEMPLATES_REL: &str = "docs/reference/templates";
const DUPLICATE_FILE: &str = "files names a file twice";

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

fn io_step(step: impl Into<String>) -> impl FnOnce(io::Error) -> SetupError {
    let step = step.into();
    move |source| SetupError::Io { step, source }
}

/// What a setup run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupOutcome {
    /// The files were applied and the marker written now.
    Applied,
    /// The marker was already present and equal (a lost acknowledgement replayed, or a
    /// completed record verified); nothing was touched.
    AlreadyApplied,
}

/// The private input of one setup (the staged record as the Driver delivers it).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetupInput {
    /// Setup identity.
    pub id: String,
    /// The owning Namespace.
    pub namespace_id: String,
    /// The owning Agent.
    pub agent_id: String,
    /// The stock defaults id the files were written against.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_string"
    )]
    pub defaults_id: Option<String>,
    /// File name → text; absent once completed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_files"
    )]
    pub files: Option<BTreeMap<String, String>>,
    /// Whether the setup was applied and activated (then only the marker is verified).
    pub completed: bool,
}

impl fmt::Debug for SetupInput {
    // Never print file contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetupInput")
            .field("id", &self.id)
            .field("namespace_id", &self.namespace_id)
            .field("agent_id", &self.agent_id)
            .field("defaults_id", &self.defaults_id)
            .field(
                "files",
                &self.files.as_ref().map(|f| {
                    f.iter()
                        .map(|(name, text)| (name.as_str(), text.len()))
                        .collect::<Vec<_>>()
                }),
            )
            .field("completed", &self.completed)
            .finish()
    }
}

impl From<&WorkspaceSetup> for SetupInput {
    fn from(setup: &WorkspaceSetup) -> Self {
        SetupInput {
            id: setup.id.clone(),
            namespace_id: setup.namespace_id.to_string(),
            agent_id: setup.agent_id.to_string(),
            defaults_id: setup.defaults_id.clone(),
            files: setup.files.as_ref().map(|files| {
                files
                    .iter()
                    .map(|(name, text)| (name.as_str().to_owned(), text.clone()))
                    .collect()
            }),
            completed: setup.completed,
        }
    }
}

/// `null` is not "absent".
fn present_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// A JSON object of strings that names no key twice (`null` is not "absent").
fn present_files<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Files;
    impl<'de> Visitor<'de> for Files {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of file texts")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut files = BTreeMap::new();
            while let Some((name, text)) = map.next_entry::<String, String>()? {
                if files.insert(name, text).is_some() {
                    return Err(serde::de::Error::custom(DUPLICATE_FILE));
                }
            }
            Ok(files)
        }
    }
    d.deserialize_map(Files).map(Some)
}

impl SetupInput {
    /// Checks everything step 1 requires of a parsed input.
    pub fn validate(&self) -> Result<(), SetupError> {
        let bad = |m: &str| Err(SetupError::Input(m.to_owned()));
        let id_ok = |s: &str| {
            !s.is_empty() && s.chars().count() <= ID_MAX_CHARS && !s.chars().any(char::is_control)
        };
        if !id_ok(&self.id) {
            return bad("id must be 1 to 256 characters without control characters");
        }
        if self.namespace_id.parse::<NamespaceId>().is_err() {
            return bad("namespaceId is not a Namespace id (ns_<lowercase uuid v4>)");
        }
        if self.agent_id.parse::<AgentId>().is_err() {
            return bad("agentId is not an Agent id (agt_<lowercase uuid v4>)");
        }
        if let Some(d) = &self.defaults_id
            && !is_sha256_hex(d)
        {
            return bad("defaultsId must be 64 lowercase hex digits");
        }
        match (&self.files, self.completed) {
            (Some(_), true) => bad("a completed setup carries no files"),
            (None, false) => bad("a setup that is not completed needs at least one file"),
            (Some(files), false) if files.is_empty() => {
                bad("a setup that is not completed needs at least one file")
            }
            (Some(files), false) => {
                if files.keys().any(|n| WorkspaceFileName::parse(n).is_none()) {
                    return bad("files may only name AGENTS.md, SOUL.md, IDENTITY.md and USER.md");
                }
                let mut problems = Problems::new();
                for (name, text) in files {
                    occ_core::inputs::check_workspace_content(
                        text,
                        &format!("/files/{name}"),
                        &mut problems,
                    );
                }
                match problems.items().first() {
                    Some(p) => Err(SetupError::Input(format!("{} {}", p.path, p.expectation))),
                    None => Ok(()),
                }
            }
            (None, true) => Ok(()),
        }
    }

    /// The compact JSON the Driver writes into the private input file.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The marker bytes: compact JSON of `{id, namespaceId, agentId, defaultsId?}`.
    pub fn marker(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Marker<'a> {
            id: &'a str,
            namespace_id: &'a str,
            agent_id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            defaults_id: Option<&'a str>,
        }
        serde_json::to_vec(&Marker {
            id: &self.id,
            namespace_id: &self.namespace_id,
            agent_id: &self.agent_id,
            defaults_id: self.defaults_id.as_deref(),
        })
        .unwrap_or_default()
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses and validates input bytes (≤ [`INPUT_MAX_BYTES`]). Error messages never quote the
/// input.
pub fn parse_input(bytes: &[u8]) -> Result<SetupInput, SetupError> {
    if bytes.len() as u64 > INPUT_MAX_BYTES {
        return Err(SetupError::Input(format!(
            "larger than {INPUT_MAX_BYTES} bytes"
        )));
    }
    let input: SetupInput = serde_json::from_slice(bytes).map_err(|e| {
        SetupError::Input(format!(
            "{} (line {}, column {})",
            describe_json_error(&e),
            e.line(),
            e.column()
        ))
    })?;
    input.validate()?;
    Ok(input)
}

/// serde_json's data errors may quote values ("invalid type: string \"…\""); only messages
/// known to quote nothing but field names are passed on.
fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let shown = e.to_string();
    let message = shown
        .rsplit_once(" at line ")
        .map_or(shown.as_str(), |(m, _)| m);
    match e.classify() {
        Category::Syntax | Category::Eof => format!("not valid JSON: {message}"),
        Category::Io => "unreadable".to_owned(),
        Category::Data => {
            if message.starts_with("missing field")
                || message.starts_with("duplicate field")
                || message == DUPLICATE_FILE
            {
                message.to_owned()
            } else if message.starts_with("unknown field") {
                "has a key other than id, namespaceId, agentId, defaultsId, files, completed"
                    .to_owned()
            } else if message.starts_with("invalid type") {
                "a value has the wrong JSON type (expected an object of strings and a boolean)"
                    .to_owned()
            } else {
                "does not have the shape of a setup input".to_owned()
            }
        }
    }
}

/// Reads and validates the private input file: a regular file (not a symbolic link) with one
/// link and at most [`INPUT_MAX_BYTES`].
pub fn read_input_file(path: &Path) -> Result<SetupInput, SetupError> {
    let bytes = match read_guarded(path, INPUT_MAX_BYTES) {
        Ok(Guarded::Content(bytes)) => bytes,
        Ok(Guarded::Absent) => {
            return Err(SetupError::Input(format!(
                "{} does not exist",
                path.display()
            )));
        }
        Ok(Guarded::TooLarge) => {
            return Err(SetupError::Input(format!(
                "{} is larger than {INPUT_MAX_BYTES} bytes",
                path.display()
            )));
        }
        Err(Unsafe::Refused(reason)) => {
            return Err(SetupError::Input(format!("{}: {reason}", path.display())));
        }
        Err(Unsafe::Io(e)) => return Err(io_step(format!("read {}", path.display()))(e)),
    };
    parse_input(&bytes)
}

/// Writes an input file for [`run`]: compact JSON, mode 0600, atomically (replacing a leftover
/// of an earlier attempt).
pub fn write_input_file(path: &Path, input: &SetupInput) -> Result<(), SetupError> {
    fsutil::write_atomic(path, &input.to_json(), false)
        .map_err(io_step(format!("write {}", path.display())))
}

/// The stock workspace files of an OpenClaw runtime, rendered as native setup writes them.
#[derive(Clone, PartialEq, Eq)]
pub struct Defaults {
    /// Lowercase hex SHA-256 of the compact JSON `[[name, text], …]` in the order AGENTS.md,
    /// SOUL.md, IDENTITY.md, USER.md.
    pub id: String,
    /// File name → rendered text.
    pub files: BTreeMap<String, String>,
}

impl fmt::Debug for Defaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Defaults")
            .field("id", &self.id)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Renders the four templates of `runtime` (`docs/reference/templates/<name>` of the openclaw
/// package) and checks that they give [`STOCK_DEFAULTS_ID`].
pub fn stock_defaults(runtime: &OpenclawRuntime) -> Result<Defaults, SetupError> {
    let package = runtime.entry.parent().unwrap_or(Path::new("/"));
    let dir = package.join(TEMPLATES_REL);
    let mut ordered = Vec::with_capacity(WorkspaceFileName::ALL.len());
    for name in WorkspaceFileName::ALL {
        let path = dir.join(name.as_str());
        let bytes = fsutil::read_bounded(&path, TEMPLATE_MAX_BYTES)
            .map_err(|e| SetupError::Defaults(format!("{}: {e}", path.display())))?
            .ok_or_else(|| SetupError::Defaults(format!("{} is missing", path.display())))?;
        let raw = String::from_utf8(bytes)
            .map_err(|_| SetupError::Defaults(format!("{} is not UTF-8", path.display())))?;
        ordered.push((name.as_str().to_owned(), render_template(&raw)));
    }
    let id = defaults_id(&ordered);
    if id != STOCK_DEFAULTS_ID {
        return Err(SetupError::Defaults(format!(
            "the templates under {} render to {id}, not the pinned defaults {STOCK_DEFAULTS_ID} of OpenClaw {OPENCLAW_VERSION}",
            dir.display()
        )));
    }
    Ok(Defaults {
        id,
        files: ordered.into_iter().collect(),
    })
}

/// Lowercase hex SHA-256 of the compact JSON array `[[name, text], …]`.
pub fn defaults_id(ordered: &[(String, String)]) -> String {
    let json = serde_json::to_string(ordered).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(json.as_bytes()))
}

/// JavaScript's `\s`.
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// JavaScript's `[^\S\n]`.
fn is_inline_space(c: char) -> bool {
    c != '\n' && is_js_space(c)
}

/// `---[^\S\n]*` then a newline (or, with `end_ok`, the end) at the start of `s`; returns the
/// length matched.
fn delimiter_at(s: &str, end_ok: bool) -> Option<usize> {
    let rest = s.strip_prefix("---")?;
    let after = rest.trim_start_matches(is_inline_space);
    let used = s.len() - after.len();
    if after.starts_with('\n') {
        Some(used + 1)
    } else if end_ok && after.is_empty() {
        Some(used)
    } else {
        None
    }
}

/// A template as OpenClaw's `loadTemplate` renders it: on the normalized text (leading BOM
/// dropped, CRLF and CR → LF) the YAML front matter block is removed and leading whitespace
/// stripped; a text without a complete front matter block is returned unchanged.
pub fn render_template(raw: &str) -> String {
    let normalized = raw
        .strip_prefix('\u{feff}')
        .unwrap_or(raw)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let Some(open) = delimiter_at(&normalized, false) else {
        return raw.to_owned();
    };
    let tail = &normalized[open..];
    // (?:^|\n)---[^\S\n]*(?:\n|$), leftmost.
    let mut end = delimiter_at(tail, true);
    if end.is_none() {
        for (i, _) in tail.match_indices('\n') {
            if let Some(len) = delimiter_at(&tail[i + 1..], true) {
                end = Some(i + 1 + len);
                break;
            }
        }
    }
    match end {
        Some(end) => tail[end..].trim_start_matches(is_js_space).to_owned(),
        None => raw.to_owned(),
    }
}

/// Where and how native setup runs.
#[derive(Debug, Clone)]
pub struct SetupEnv {
    /// The pinned runtime.
    pub runtime: OpenclawRuntime,
    /// A private directory for the throwaway HOME, state and config of each native setup run;
    /// recreated for every run and removed after it. Must not contain the workspace or lie in it,
    /// and only one setup may use it at a time.
    pub scratch: PathBuf,
    /// `TMPDIR` of native setup (created 0700 if missing).
    pub tmpdir: PathBuf,
    /// Bound on each native setup run ([`NATIVE_SETUP_TIMEOUT`] by default).
    pub timeout: Duration,
}

impl SetupEnv {
    /// An environment with the default timeout.
    pub fn new(runtime: OpenclawRuntime, scratch: PathBuf, tmpdir: PathBuf) -> Self {
        SetupEnv {
            runtime,
            scratch,
            tmpdir,
            timeout: NATIVE_SETUP_TIMEOUT,
        }
    }
}

/// Runs the setup described by the private `input_file` against `workspace` (steps 1–7 of the
/// module docs). On success of a setup that is not completed yet, the input file is deleted
/// (a file that cannot be deleted because of permissions or a read-only mount is left).
pub async fn run(
    input_file: &Path,
    workspace: &Path,
    env: &SetupEnv,
) -> Result<SetupOutcome, SetupError> {
    let input = read_input_file(input_file)?;
    let outcome = apply(&input, workspace, env).await?;
    if !input.completed {
        remove_input_file(input_file)?;
    }
    Ok(outcome)
}

/// Step 7: deletes the input file after a successful application; a file that is already gone,
/// or cannot be deleted because of permissions or a read-only mount, is fine.
pub fn remove_input_file(input_file: &Path) -> Result<(), SetupError> {
    match fs::remove_file(input_file) {
        Ok(()) => Ok(()),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || matches!(
                    e.raw_os_error(),
                    Some(libc::EROFS | libc::EACCES | libc::EPERM)
                ) =>
        {
            Ok(())
        }
        Err(e) => Err(io_step(format!("delete {}", input_file.display()))(e)),
    }
}

/// Steps 2–6 for an input already read (e.g. from stdin); [`run`] adds reading and deleting the
/// input file.
pub async fn apply(
    input: &SetupInput,
    workspace: &Path,
    env: &SetupEnv,
) -> Result<SetupOutcome, SetupError> {
    input.validate()?;
    let workspace = prepare_workspace(workspace)?;
    check_scratch(&workspace, env)?;
    let identity = input.marker();
    match read_marker(&workspace)? {
        Some(existing) if existing == identity => return Ok(SetupOutcome::AlreadyApplied),
        Some(_) => return Err(SetupError::MarkerMismatch),
        None if input.completed => return Err(SetupError::MarkerMissing),
        None => {}
    }
    let files = input.files.as_ref().ok_or_else(|| {
        SetupError::Input("a setup that is not completed needs at least one file".into())
    })?;
    let defaults = stock_defaults(&env.runtime)?;
    if let Some(given) = &input.defaults_id
        && *given != defaults.id
    {
        return Err(SetupError::StaleDefaults {
            given: given.clone(),
            current: defaults.id,
        });
    }
    let stock = |name: &str| defaults.files.get(name).map(String::as_bytes);

    // 5. Never overwrite user content.
    for (name, value) in files {
        check_replaceable(&workspace, name, value, stock(name))?;
    }
    remove_leftover_temp(&workspace)?;

    // 6.
    native_setup(&workspace, env).await?;
    for (name, value) in files {
        if check_replaceable(&workspace, name, value, stock(name))? {
            replace_file(&workspace, name, value.as_bytes())?;
        }
    }
    native_setup(&workspace, env).await?;
    for (name, value) in files {
        match read_workspace_file(&workspace, name)? {
            Guarded::Content(bytes) if bytes == value.as_bytes() => {}
            _ => return Err(SetupError::Verify { name: name.clone() }),
        }
    }
    replace_file(&workspace, MARKER_FILE, &identity)?;
    Ok(SetupOutcome::Applied)
}

/// Whether `name` must be replaced: `Ok(false)` when it already holds `value`, `Ok(true)` when
/// it is absent or the stock text, otherwise [`SetupError::Divergent`].
fn check_replaceable(
    workspace: &Path,
    name: &str,
    value: &str,
    stock: Option<&[u8]>,
) -> Result<bool, SetupError> {
    match read_workspace_file(workspace, name)? {
        Guarded::Absent => Ok(true),
        Guarded::Content(bytes) if bytes == value.as_bytes() => Ok(false),
        Guarded::Content(bytes) if Some(bytes.as_slice()) == stock => Ok(true),
        Guarded::Content(_) | Guarded::TooLarge => Err(SetupError::Divergent {
            name: name.to_owned(),
        }),
    }
}

fn read_workspace_file(workspace: &Path, name: &str) -> Result<Guarded, SetupError> {
    let path = workspace.join(name);
    read_guarded(&path, WORKSPACE_READ_MAX_BYTES).map_err(|e| match e {
        Unsafe::Refused(reason) => SetupError::UnsafeFile {
            name: name.to_owned(),
            reason,
        },
        Unsafe::Io(e) => io_step(format!("read {}", path.display()))(e),
    })
}

fn read_marker(workspace: &Path) -> Result<Option<Vec<u8>>, SetupError> {
    let path = workspace.join(MARKER_FILE);
    match read_guarded(&path, MARKER_MAX_BYTES) {
        Ok(Guarded::Absent) => Ok(None),
        Ok(Guarded::Content(bytes)) => Ok(Some(bytes)),
        Ok(Guarded::TooLarge) => Err(SetupError::MarkerInvalid(format!(
            "larger than {MARKER_MAX_BYTES} bytes"
        ))),
        Err(Unsafe::Refused(reason)) => Err(SetupError::MarkerInvalid(reason)),
        Err(Unsafe::Io(e)) => Err(io_step(format!("read {}", path.display()))(e)),
    }
}

/// Step 2: `workspace` is absolute and normalized, every existing component is a directory
/// (not a symbolic link); missing components are created 0700.
fn prepare_workspace(workspace: &Path) -> Result<PathBuf, SetupError> {
    let bad = |m: String| Err(SetupError::Workspace(m));
    let Some(text) = workspace.to_str() else {
        return bad("the workspace path is not UTF-8".into());
    };
    if !text.starts_with('/') {
        return bad(format!("{text} is not an absolute path"));
    }
    let components: Vec<&str> = text[1..].split('/').collect();
    if text == "/"
        || components
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return bad(format!(
            "{text} is not a normalized path (no ., .., // or trailing /)"
        ));
    }
    let mut current = PathBuf::from("/");
    for component in components {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) => check_real_dir(&current, &meta)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match fs::DirBuilder::new().mode(0o700).create(&current) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        let meta = fs::symlink_metadata(&current)
                            .map_err(io_step(format!("inspect {}", current.display())))?;
                        check_real_dir(&current, &meta)?;
                    }
                    Err(e) => return Err(io_step(format!("create {}", current.display()))(e)),
                }
            }
            Err(e) => return Err(io_step(format!("inspect {}", current.display()))(e)),
        }
    }
    Ok(current)
}

fn check_real_dir(path: &Path, meta: &fs::Metadata) -> Result<(), SetupError> {
    if meta.file_type().is_symlink() {
        Err(SetupError::Workspace(format!(
            "{} is a symbolic link",
            path.display()
        )))
    } else if !meta.is_dir() {
        Err(SetupError::Workspace(format!(
            "{} is not a directory",
            path.display()
        )))
    } else {
        Ok(())
    }
}

/// The scratch directory is removed after each run, so it must be absolute and must neither
/// contain nor lie inside the workspace.
fn check_scratch(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let scratch = &env.scratch;
    if !scratch.is_absolute() || scratch.parent().is_none() {
        return Err(SetupError::Workspace(format!(
            "the setup scratch directory {} must be absolute and not /",
            scratch.display()
        )));
    }
    if scratch.starts_with(workspace) || workspace.starts_with(scratch) {
        return Err(SetupError::Workspace(format!(
            "the setup scratch directory {} overlaps the workspace {}",
            scratch.display(),
            workspace.display()
        )));
    }
    Ok(())
}

/// A leftover temp file of an interrupted replacement is removed when it is a plain file.
fn remove_leftover_temp(workspace: &Path) -> Result<(), SetupError> {
    let tmp = workspace.join(TEMP_FILE);
    match fs::symlink_metadata(&tmp) {
        Ok(meta) if meta.file_type().is_file() && meta.nlink() == 1 => {
            fs::remove_file(&tmp).map_err(io_step(format!("remove {}", tmp.display())))
        }
        Ok(_) => Err(SetupError::UnsafeFile {
            name: TEMP_FILE.to_owned(),
            reason: "a leftover that is not a plain regular file; remove it by hand".into(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_step(format!("inspect {}", tmp.display()))(e)),
    }
}

/// Atomically replaces `workspace/name`: exclusive 0600 temp [`TEMP_FILE`], write, fsync,
/// rename, directory fsync.
fn replace_file(workspace: &Path, name: &str, bytes: &[u8]) -> Result<(), SetupError> {
    remove_leftover_temp(workspace)?;
    let tmp = workspace.join(TEMP_FILE);
    let dest = workspace.join(name);
    let result = fsutil::write_atomic_via(&tmp, &dest, bytes, false);
    result.map_err(io_step(format!("replace {}", dest.display())))
}

/// What a guarded read found.
enum Guarded {
    Absent,
    Content(Vec<u8>),
    TooLarge,
}

enum Unsafe {
    /// Not a plain file: the reason, without content.
    Refused(String),
    Io(io::Error),
}

/// Reads a regular file with one link and at most `max` bytes without following a symbolic
/// link (and without blocking on a FIFO).
fn read_guarded(path: &Path, max: u64) -> Result<Guarded, Unsafe> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Guarded::Absent),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Unsafe::Refused("is a symbolic link".into()));
        }
        Err(e) => return Err(Unsafe::Io(e)),
    };
    let meta = file.metadata().map_err(Unsafe::Io)?;
    if !meta.is_file() {
        return Err(Unsafe::Refused("is not a regular file".into()));
    }
    if meta.nlink() != 1 {
        return Err(Unsafe::Refused("has more than one hard link".into()));
    }
    if meta.len() > max {
        return Ok(Guarded::TooLarge);
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(Unsafe::Io)?;
    if buf.len() as u64 > max {
        return Ok(Guarded::TooLarge);
    }
    Ok(Guarded::Content(buf))
}

/// Native `openclaw setup --baseline --workspace <workspace>` against a throwaway HOME, state
/// and config (`{agents: {defaults: {workspace}, entries: {main: {}}}, gateway: {mode:
/// "local"}}`, written first so that setup does not run first-agent onboarding, which would
/// write the agent name into an existing IDENTITY.md) in `env.scratch`, with a clean
/// environment (with `OPENCLAW_NO_RESPAWN=1`, so it stays one process tree), in its own process
/// group, bounded by `env.timeout` (the group is killed on expiry). Its output is drained and
/// dropped, never logged or returned: it may echo file content. The workspace is checked and
/// created as in [`run`]; the scratch directory is removed after.
pub async fn native_setup(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let workspace = prepare_workspace(workspace)?;
    check_scratch(&workspace, env)?;
    let scratch = &env.scratch;
    reset_scratch(scratch)?;
    let result = native_setup_in(&workspace, env).await;
    if let Err(e) = remove_path(scratch) {
        tracing::warn!(
            scratch = %scratch.display(),
            error = %e,
            "cannot remove the workspace setup scratch directory"
        );
    }
    result
}

fn remove_path(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn reset_scratch(scratch: &Path) -> Result<(), SetupError> {
    remove_path(scratch).map_err(io_step(format!("remove {}", scratch.display())))?;
    for dir in [
        scratch.to_path_buf(),
        scratch.join("home"),
        scratch.join("state"),
    ] {
        fsutil::ensure_private_dir(&dir).map_err(io_step(format!("create {}", dir.display())))?;
    }
    Ok(())
}

async fn native_setup_in(workspace: &Path, env: &SetupEnv) -> Result<(), SetupError> {
    let scratch = &env.scratch;
    let config_path = scratch.join("openclaw.json");
    let workspace_text = workspace
        .to_str()
        .ok_or_else(|| SetupError::Workspace("the workspace path is not UTF-8".into()))?;
    let config = serde_json::json!({
        "agents": {"defaults": {"workspace": workspace_text}, "entries": {"main": {}}},
        "gateway": {"mode": "local"},
    });
    fsutil::write_atomic(&config_path, config.to_string().as_bytes(), true)
        .map_err(io_step(format!("write {}", config_path.display())))?;
    fsutil::ensure_private_dir(&env.tmpdir)
        .map_err(io_step(format!("create {}", env.tmpdir.display())))?;

    let mut cmd = env.runtime.command();
    cmd.args(["setup", "--baseline", "--workspace"])
        .arg(workspace)
        .current_dir(scratch)
        .env("HOME", scratch.join("home"))
        .env("TMPDIR", &env.tmpdir)
        .env("OPENCLAW_STATE_DIR", scratch.join("state"))
        .env("OPENCLAW_CONFIG_PATH", &config_path)
        // Without it the CLI re-executes itself as a detached child in its own process group,
        // which a timeout could not stop.
        .env("OPENCLAW_NO_RESPAWN", "1")
        .env("OPENCLAW_NO_AUTO_UPDATE", "1")
        .env("DO_NOT_TRACK", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = std::time::Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| SetupError::NativeSetup(format!("cannot start openclaw: {e}")))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let (out, err, status) = tokio::join!(drain(stdout), drain(stderr), child.wait());
        (out + err, status)
    };
    let (captured, status) = match tokio::time::timeout(env.timeout, work).await {
        Ok(done) => done,
        Err(_) => {
            kill_group(pid);
            let _ = child.wait().await;
            return Err(SetupError::NativeSetup(format!(
                "did not finish within {} ms (stopped)",
                env.timeout.as_millis()
            )));
        }
    };
    let status = status.map_err(|e| SetupError::NativeSetup(format!("cannot wait: {e}")))?;
    tracing::debug!(
        workspace = %workspace.display(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        output_bytes = captured,
        %status,
        "native openclaw setup finished"
    );
    if status.success() {
        Ok(())
    } else {
        Err(SetupError::NativeSetup(format!(
            "exited with {status} ({captured} bytes of output withheld)"
        )))
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Drains a stream and returns how many bytes it carried; the bytes are dropped (native setup
/// may echo file content).
async fn drain<R: AsyncRead + Unpin>(stream: Option<R>) -> usize {
    let Some(mut stream) = stream else {
        return 0;
    };
    let mut total = 0;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_front_matter_like_openclaw() {
        assert_eq!(render_template("---\na: 1\n---\n\n# T\nx\n"), "# T\nx\n");
        assert_eq!(
            render_template("\u{feff}---  \r\na: 1\r\n--- \r\n\r\n  # T\r\nx"),
            "# T\nx"
        );
        // empty block, closing at the end
        assert_eq!(render_template("---\n---"), "");
        assert_eq!(render_template("---\n---\nbody"), "body");
        // no front matter, or an unterminated one: unchanged (not even normalized)
        assert_eq!(render_template("# T\r\n"), "# T\r\n");
        assert_eq!(render_template("---\na: 1\n"), "---\na: 1\n");
        assert_eq!(render_template("---x\n---\n"), "---x\n---\n");
        // `---x` does not close; the next delimiter does
        assert_eq!(render_template("---\n---x\n---\nb"), "b");
        // JavaScript's \s includes U+FEFF but not U+0085
        assert_eq!(render_template("---\n---\n\u{feff} b"), "b");
        assert_eq!(render_template("---\n---\n\u{85}b"), "\u{85}b");
    }

    #[test]
    fn defaults_id_is_sha256_of_compact_pairs() {
        let id = defaults_id(&[("A".into(), "x\n\"".into())]);
        let want = hex::encode(sha2::Sha256::digest(br#"[["A","x\n\""]]"#));
        assert_eq!(id, want);
    }

    fn input(files: Option<&[(&str, &str)]>, completed: bool) -> SetupInput {
        SetupInput {
            id: "wss_1".into(),
            namespace_id: NamespaceId::generate().to_string(),
            agent_id: AgentId::generate().to_string(),
            defaults_id: None,
            files: files.map(|f| {
                f.iter()
                    .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                    .collect()
            }),
            completed,
        }
    }

    #[test]
    fn marker_is_compact_in_order() {
        let mut i = input(Some(&[("USER.md", "x")]), false);
        let ns = i.namespace_id.clone();
        let agt = i.agent_id.clone();
        assert_eq!(
            String::from_utf8(i.marker()).unwrap(),
            format!(r#"{{"id":"wss_1","namespaceId":"{ns}","agentId":"{agt}"}}"#)
        );
        i.defaults_id = Some("a".repeat(64));
        assert!(String::from_utf8(i.marker()).unwrap().ends_with(&format!(
            r#""agentId":"{agt}","defaultsId":"{}"}}"#,
            "a".repeat(64)
        )));
    }

    #[test]
    fn input_round_trips_and_debug_hides_contents() {
        let i = input(Some(&[("USER.md", "private words")]), false);
        let parsed = parse_input(&i.to_json()).unwrap();
        assert_eq!(parsed, i);
        assert!(!format!("{parsed:?}").contains("private words"));
        let done = input(None, true);
        assert_eq!(parse_input(&done.to_json()).unwrap(), done);
        assert!(!String::from_utf8(done.to_json()).unwrap().contains("files"));
    }

    #[test]
    fn parse_errors_never_quote_values() {
        let canary = "CANARY-7f3a";
        let ns = NamespaceId::generate();
        let agt = AgentId::generate();
        let cases = [
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":"{canary}"}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":5}},"{canary}":1}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"{canary}":"{canary}"}}}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":"{canary}\u0000"}}}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":"a","USER.md":"{canary}"}}}}"#
            ),
            format!(r#"["{canary}"]"#),
            format!(r#"{{"id":"{canary}","#),
            format!(r#"{{"id":"x","namespaceId":"{canary}","agentId":"{agt}","completed":true}}"#),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":true,"defaultsId":"{canary}"}}"#
            ),
        ];
        for case in cases {
            let err = parse_input(case.as_bytes()).unwrap_err();
            assert!(matches!(err, SetupError::Input(_)), "{err:?}");
            assert!(!err.to_string().contains(canary), "{err}");
        }
    }
}
