//! `occ harness-launch --input <launch.json>`: the dedicated Agent's harness process.
//!
//! Phases, each logged as one `harness: phase=<name> outcome=ok|failed ms=<n>` line (never a
//! value): `workspace` (native `openclaw setup --baseline`, or occ's workspace setup runtime
//! when a staged input is given; its marker rules unchanged), `config` (a fresh `CODEX_HOME`
//! with a 0600 `config.toml`), `login` (the credential from a private file written to
//! `codex login`'s stdin), `probe` (one bounded `codex exec` turn), then `supervise`
//! (`codex app-server` and the OpenClaw node host, each restarted after it exits).
//!
//! The status file (`{phase, code}`, written atomically) tells occ where the launcher is: a
//! failure is held there (`code` set, e.g. `AUTHENTICATION_FAILED`) while the launcher stays
//! alive and unready until it is stopped, so occ reads a permanent verdict instead of a crash
//! loop. Native output of login and probe is never logged; the credential is never logged,
//! put in a status, an argument or an environment variable.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::probe::{self, ProbeSettings};
use super::supervise::{Child, supervise, until_stopped};
use crate::fsutil;
use crate::runtime::OpenclawRuntime;
use crate::workspace_setup::{self, SetupEnv};

/// Bound on the launch input file.
pub const LAUNCH_INPUT_MAX_BYTES: u64 = 64 * 1024;

/// The commands the node host offers the gateway (workspace files, memory and skills).
pub const NODE_COMMANDS: [&str; 7] = [
    "file.fetch",
    "file.stat",
    "file.write",
    "file.create",
    "dir.list",
    "workspace.memory",
    "workspace.skills",
];

/// The node host's preload that hands it the setup code from a file (see the file's header).
const NODE_PAIR_PRELOAD: &str = include_str!("node-pair.cjs");

/// What the launcher is told (non-secret: paths, ports, the login method, the model endpoint,
/// the SHA-256 of the app-server token). Written by occ's process Driver (or a Kubernetes
/// ConfigMap), read by `occ harness-launch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LaunchInput {
    /// The pinned runtime (Node, openclaw, Codex).
    pub runtime_dir: PathBuf,
    /// The Agent's workspace: Codex's working directory and the node host's file root.
    pub workspace: PathBuf,
    /// `HOME` of every child.
    pub home: PathBuf,
    /// `CODEX_HOME`: emptied at each start (login state lives only as long as the launcher).
    pub codex_home: PathBuf,
    /// `TMPDIR` of every child, and the launcher's scratch space.
    pub tmp_dir: PathBuf,
    /// The launcher's log: its phase lines and its children's output, prefixed.
    pub log_file: PathBuf,
    /// The status file (`{phase, code}`).
    pub status_file: PathBuf,
    /// A staged workspace setup input (private file); without it the workspace gets the stock
    /// files of native `openclaw setup --baseline` (existing files are never overwritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_setup: Option<PathBuf>,
    /// How Codex logs in.
    pub login: LoginInput,
    /// The model endpoint Codex calls; without it, Codex's default (OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelEndpoint>,
    /// The app-server's listener.
    pub app_server: AppServerInput,
    /// The node host.
    pub node: NodeInput,
}

/// The revision's credential and how it reaches Codex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoginInput {
    /// The Agent's `harnessAuth` method.
    pub method: LoginMethod,
    /// The private file holding the credential (read at each start, never copied).
    pub credential_file: PathBuf,
}

/// `harnessAuth` methods the launcher logs in with (wire names of `harnessAuth.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginMethod {
    /// An OpenAI API key: `codex login --with-api-key`.
    ApiKey,
    /// A Codex access token (`at-…`): `codex login --with-access-token`.
    CodexPat,
}

/// An OpenAI-compatible Responses endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelEndpoint {
    /// `http(s)://host[:port]/v1`, no credentials in it.
    pub base_url: String,
    /// The model the probe asks (Codex's default otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Where `codex app-server` listens, and the SHA-256 (hex) of the token the gateway presents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppServerInput {
    /// Listen address (an IP literal).
    pub host: std::net::IpAddr,
    /// Listen port.
    pub port: u16,
    /// Lowercase hex SHA-256 of the app-server token; the launcher never holds the token.
    pub token_sha256: String,
}

/// The OpenClaw node host and how it reaches the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeInput {
    /// The gateway's host.
    pub gateway_host: String,
    /// The gateway's port.
    pub gateway_port: u16,
    /// `OPENCLAW_STATE_DIR` of the node host: its device identity and device token.
    pub state_dir: PathBuf,
    /// The private file occ writes the one-time setup code into; the node host starts once it
    /// exists or once the state directory holds a paired identity.
    pub setup_code_file: PathBuf,
}

/// Why the launch input was refused.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The input file is missing, too large, or not valid.
    #[error("launch input {path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong (never file content).
        message: String,
    },
    /// The pinned runtime is not installed where the input says.
    #[error("{0}")]
    Runtime(#[from] crate::runtime::RuntimeError),
    /// The log or status file cannot be written.
    #[error("{step}: {source}")]
    Io {
        /// The step.
        step: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Reads and checks a launch input file (bounded, no symlink).
pub fn read_launch_input(path: &Path) -> Result<LaunchInput, LaunchError> {
    let refuse = |message: String| LaunchError::Input {
        path: path.to_path_buf(),
        message,
    };
    let bytes = fsutil::read_bounded(path, LAUNCH_INPUT_MAX_BYTES)
        .map_err(|e| refuse(e.to_string()))?
        .ok_or_else(|| refuse("missing".into()))?;
    let input: LaunchInput = serde_json::from_slice(&bytes).map_err(|e| refuse(e.to_string()))?;
    input.validate().map_err(refuse)?;
    Ok(input)
}

impl LaunchInput {
    /// Paths absolute and normalized, the token digest 64 lowercase hex, the base URL
    /// `http(s)` without credentials.
    pub fn validate(&self) -> Result<(), String> {
        let mut paths = vec![
            ("runtimeDir", &self.runtime_dir),
            ("workspace", &self.workspace),
            ("home", &self.home),
            ("codexHome", &self.codex_home),
            ("tmpDir", &self.tmp_dir),
            ("logFile", &self.log_file),
            ("statusFile", &self.status_file),
            ("login.credentialFile", &self.login.credential_file),
            ("node.stateDir", &self.node.state_dir),
            ("node.setupCodeFile", &self.node.setup_code_file),
        ];
        if let Some(setup) = &self.workspace_setup {
            paths.push(("workspaceSetup", setup));
        }
        for (name, path) in paths {
            if !fsutil::safe_path(path) {
                return Err(format!("{name} must be an absolute, normalized path"));
            }
        }
        let digest = &self.app_server.token_sha256;
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err("appServer.tokenSha256 must be 64 lowercase hex digits".into());
        }
        if self.app_server.port == 0 || self.node.gateway_port == 0 {
            return Err("ports must not be 0".into());
        }
        if self.node.gateway_host.is_empty()
            || self
                .node
                .gateway_host
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err("node.gatewayHost must be a host name or address".into());
        }
        if let Some(model) = &self.model {
            check_base_url(&model.base_url)?;
            if let Some(name) = &model.model
                && (name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '"'))
            {
                return Err("model.model must be a model id".into());
            }
        }
        Ok(())
    }
}

/// `http(s)://authority/path` with no user info, no quotes or whitespace (it lands in TOML).
fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("model.baseUrl must start with http:// or https://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return Err("model.baseUrl must name a host and carry no credentials".into());
    }
    if url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\'))
    {
        return Err("model.baseUrl must not contain whitespace, quotes or backslashes".into());
    }
    Ok(())
}

/// Where the launcher is; written atomically to the status file at each change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchStatus {
    /// The phase running, or the one that failed.
    pub phase: LaunchPhase,
    /// Set when the phase failed; the launcher then holds (alive, unready) until stopped.
    pub code: Option<FailureCode>,
}

/// The launcher's phases, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchPhase {
    /// Workspace initialisation.
    Workspace,
    /// The fresh Codex home and its configuration.
    Config,
    /// `codex login`.
    Login,
    /// The probe turn.
    Probe,
    /// The app-server and the node host are supervised.
    Running,
}

impl LaunchPhase {
    fn name(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Config => "config",
            Self::Login => "login",
            Self::Probe => "probe",
            Self::Running => "supervise",
        }
    }
}

/// A held failure, as occ maps it to a deployment reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureCode {
    /// The workspace could not be initialised.
    WorkspaceSetupFailed,
    /// Codex could not be set up or refused the credential locally (before any model call).
    LoginFailed,
    /// The model endpoint refused the credential (401/403).
    AuthenticationFailed,
    /// The probe turn failed otherwise.
    ModelProbeFailed,
    /// The probe turn timed out twice.
    ModelProbeTimeout,
}

/// The launcher's log file: its own lines and its children's, each prefixed. Shared by the
/// supervisors; `O_APPEND`, so a supervisor that also captures the launcher's stdout may
/// write the same file.
#[derive(Debug, Clone)]
pub(super) struct HarnessLog(Arc<Mutex<std::fs::File>>);

impl HarnessLog {
    fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Self(Arc::new(Mutex::new(file))))
    }

    /// Appends `<prefix>: <line>`; a failing write is dropped (the log must not stop the
    /// harness).
    pub(super) fn line(&self, prefix: &str, line: &str) {
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(file, "{prefix}: {line}");
    }

    fn phase(&self, phase: LaunchPhase, ok: bool, started: Instant) {
        self.line(
            "harness",
            &format!(
                "phase={} outcome={} ms={}",
                phase.name(),
                if ok { "ok" } else { "failed" },
                started.elapsed().as_millis()
            ),
        );
    }
}

/// Runs the launcher until `shutdown` turns true (SIGTERM in `occ harness-launch`): the phases,
/// then supervision; a failed phase is written to the status file and held. Returns once every
/// child has stopped. `search_path` is occ's `PATH` (the runtime's processes search it after
/// their own directories).
pub async fn run(
    input: &LaunchInput,
    search_path: &std::ffi::OsStr,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LaunchError> {
    let runtime = OpenclawRuntime::locate(&input.runtime_dir, search_path)?;
    let log = HarnessLog::open(&input.log_file).map_err(|source| LaunchError::Io {
        step: format!("open {}", input.log_file.display()),
        source,
    })?;
    let status = StatusFile(&input.status_file);
    match prepare(input, &runtime, &log, &status).await {
        Ok(()) => {}
        Err(code) => {
            // Held: alive and unready until stopped; occ reads the code.
            log.line("harness", &format!("held failure code={code:?}"));
            until_stopped(&mut shutdown).await;
            return Ok(());
        }
    }
    status.write(LaunchPhase::Running, None)?;
    log.phase(LaunchPhase::Running, true, Instant::now());
    let children = vec![
        app_server_child(input, &runtime),
        node_child(input, &runtime).map_err(|source| LaunchError::Io {
            step: "write the node host preload".into(),
            source,
        })?,
    ];
    supervise(children, &log, shutdown).await;
    log.line("harness", "stopped");
    Ok(())
}

/// The status file's writer.
struct StatusFile<'a>(&'a Path);

impl StatusFile<'_> {
    fn write(&self, phase: LaunchPhase, code: Option<FailureCode>) -> Result<(), LaunchError> {
        let body = serde_json::to_vec(&LaunchStatus { phase, code }).unwrap_or_default();
        fsutil::write_atomic(self.0, &body, false).map_err(|source| LaunchError::Io {
            step: format!("write {}", self.0.display()),
            source,
        })
    }
}

/// The phases before supervision; `Err` is the held failure (already in the status file).
async fn prepare(
    input: &LaunchInput,
    runtime: &OpenclawRuntime,
    log: &HarnessLog,
    status: &StatusFile<'_>,
) -> Result<(), FailureCode> {
    let phases: [(LaunchPhase, FailureCode); 4] = [
        (LaunchPhase::Workspace, FailureCode::WorkspaceSetupFailed),
        (LaunchPhase::Config, FailureCode::LoginFailed),
        (LaunchPhase::Login, FailureCode::LoginFailed),
        (LaunchPhase::Probe, FailureCode::ModelProbeFailed),
    ];
    let settings = ProbeSettings {
        codex: runtime.codex_bin(),
        path: runtime.codex_path_env(),
        home: input.home.clone(),
        codex_home: input.codex_home.clone(),
        tmp_dir: input.tmp_dir.clone(),
        workspace: input.workspace.clone(),
    };
    for (phase, default_code) in phases {
        // A status that cannot be written leaves occ blind: hold with what we know.
        if status.write(phase, None).is_err() {
            log.line(
                "harness",
                &format!("cannot write the status file ({})", phase.name()),
            );
        }
        let started = Instant::now();
        let result = match phase {
            LaunchPhase::Workspace => init_workspace(input, runtime, log).await,
            LaunchPhase::Config => write_codex_config(input).map_err(|e| {
                log.line("harness", &format!("codex home: {}", e.kind()));
                default_code
            }),
            LaunchPhase::Login => probe::login(&settings, &input.login).await,
            LaunchPhase::Probe => {
                let model = input.model.as_ref().and_then(|m| m.model.as_deref());
                probe::probe(&settings, model).await
            }
            LaunchPhase::Running => Ok(()),
        };
        log.phase(phase, result.is_ok(), started);
        if let Err(code) = result {
            let _ = status.write(phase, Some(code));
            return Err(code);
        }
    }
    Ok(())
}

/// Native setup, or the staged setup input applied (a completed record only verified).
async fn init_workspace(
    input: &LaunchInput,
    runtime: &OpenclawRuntime,
    log: &HarnessLog,
) -> Result<(), FailureCode> {
    let scratch = input.tmp_dir.join("workspace-setup");
    let env = SetupEnv::new(
        runtime.clone(),
        scratch.join("setup"),
        input.tmp_dir.join("setup-tmp"),
    );
    let result = match &input.workspace_setup {
        Some(file) => workspace_setup::run(file, &input.workspace, &env)
            .await
            .map(|_| ()),
        None => workspace_setup::native_setup(&input.workspace, &env).await,
    };
    let _ = std::fs::remove_dir_all(&scratch);
    result.map_err(|e| {
        // The kind only: a setup error may name a file, never its content, but the log is
        // the Agent's and stays terse.
        log.line("harness", &format!("workspace setup: {}", e.kind()));
        FailureCode::WorkspaceSetupFailed
    })
}

/// A fresh `CODEX_HOME` (anything a previous start left is removed) with `config.toml`
/// (0600): file credential store, and the OpenAI-compatible provider when an endpoint is given.
fn write_codex_config(input: &LaunchInput) -> std::io::Result<()> {
    match std::fs::remove_dir_all(&input.codex_home) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fsutil::ensure_private_dir(&input.codex_home)?;
    for dir in [&input.home, &input.tmp_dir] {
        std::fs::create_dir_all(dir)?;
    }
    let config = codex_config(input.model.as_ref());
    write_private(&input.codex_home.join("config.toml"), config.as_bytes())
}

/// The text of `config.toml` (values checked by [`LaunchInput::validate`]). With an endpoint,
/// both providers point at it: the probe uses `openai-compatible` (the default provider), while
/// the gateway's Codex plugin starts threads on Codex's built-in `openai` provider for an
/// `openai/<model>`, which only `openai_base_url` redirects.
fn codex_config(model: Option<&ModelEndpoint>) -> String {
    let mut text = String::from("cli_auth_credentials_store = \"file\"\n");
    if let Some(model) = model {
        if let Some(name) = &model.model {
            text.push_str(&format!("model = \"{name}\"\n"));
        }
        text.push_str(&format!("openai_base_url = \"{}\"\n", model.base_url));
        text.push_str(&format!(
            "model_provider = \"openai-compatible\"\n\n\
             [model_providers.openai-compatible]\n\
             name = \"openai-compatible\"\n\
             base_url = \"{}\"\n\
             wire_api = \"responses\"\n\
             requires_openai_auth = true\n\
             supports_websockets = false\n",
            model.base_url
        ));
    }
    text
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `codex app-server` on the WebSocket listener, token auth by digest only.
fn app_server_child(input: &LaunchInput, runtime: &OpenclawRuntime) -> Child {
    let listen = format!(
        "ws://{}",
        std::net::SocketAddr::new(input.app_server.host, input.app_server.port)
    );
    let mut args: Vec<OsString> = vec!["app-server".into(), "--listen".into(), listen.into()];
    args.extend(
        ["--ws-auth", "capability-token", "--ws-token-sha256"]
            .into_iter()
            .map(OsString::from),
    );
    args.push(input.app_server.token_sha256.clone().into());
    Child {
        name: "app-server",
        program: runtime.codex_bin(),
        args,
        env: vec![
            ("HOME".into(), input.home.clone().into()),
            ("CODEX_HOME".into(), input.codex_home.clone().into()),
            ("TMPDIR".into(), input.tmp_dir.clone().into()),
            ("PATH".into(), runtime.codex_path_env()),
        ],
        cwd: input.workspace.clone(),
        parent_stdin: false,
        ready: None,
        search_path: runtime.search_path.clone(),
    }
}

/// `openclaw node run` with its own state directory, the seven commands, and the setup code
/// spliced in from its file by the preload (never on the command line). It exits when the
/// launcher's end of its stdin closes (`--parent-stdin`).
fn node_child(input: &LaunchInput, runtime: &OpenclawRuntime) -> std::io::Result<Child> {
    std::fs::create_dir_all(&input.tmp_dir)?;
    let preload = input.tmp_dir.join("occ-node-pair.cjs");
    fsutil::write_atomic(&preload, NODE_PAIR_PRELOAD.as_bytes(), false)?;
    let node = &input.node;
    let mut args: Vec<OsString> = vec!["--require".into(), preload.into()];
    args.push(runtime.entry.clone().into());
    args.extend(["node", "run", "--host"].into_iter().map(OsString::from));
    args.push(node.gateway_host.clone().into());
    args.push("--port".into());
    args.push(node.gateway_port.to_string().into());
    args.push("--commands".into());
    args.push(NODE_COMMANDS.join(",").into());
    args.push("--parent-stdin".into());
    let state_dir = node.state_dir.clone();
    let code_file = node.setup_code_file.clone();
    Ok(Child {
        name: "node",
        program: runtime.node.clone(),
        args,
        env: vec![
            ("HOME".into(), input.home.clone().into()),
            ("TMPDIR".into(), input.tmp_dir.clone().into()),
            ("PATH".into(), runtime.path_env()),
            ("OPENCLAW_STATE_DIR".into(), node.state_dir.clone().into()),
            (
                "OPENCLAW_CONFIG_PATH".into(),
                node.state_dir.join("openclaw.json").into(),
            ),
            ("OPENCLAW_NO_RESPAWN".into(), "1".into()),
            ("OPENCLAW_NO_AUTO_UPDATE".into(), "1".into()),
            ("OPENCLAW_DISABLE_BONJOUR".into(), "1".into()),
            ("DO_NOT_TRACK".into(), "1".into()),
            ("NO_COLOR".into(), "1".into()),
            (
                "OCC_NODE_SETUP_CODE_FILE".into(),
                node.setup_code_file.clone().into(),
            ),
        ],
        cwd: input.workspace.clone(),
        parent_stdin: true,
        ready: Some(Box::new(move || node_may_start(&state_dir, &code_file))),
        search_path: runtime.search_path.clone(),
    })
}

/// The node host starts once there is a setup code to pair with, or a state directory a
/// previous start paired in (OpenClaw keeps the device identity and token there and
/// `--pair-if-needed` uses the saved token first).
fn node_may_start(state_dir: &Path, setup_code_file: &Path) -> bool {
    setup_code_file.is_file()
        || state_dir.join("identity").is_dir()
        || state_dir.join("state").join("openclaw.sqlite").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> serde_json::Value {
        serde_json::json!({
            "runtimeDir": "/rt",
            "workspace": "/h/workspace",
            "home": "/h/home",
            "codexHome": "/h/codex-home",
            "tmpDir": "/h/tmp",
            "logFile": "/h/logs/harness.log",
            "statusFile": "/h/run/status.json",
            "login": {"method": "api_key", "credentialFile": "/r/credential"},
            "model": {"baseUrl": "http://127.0.0.1:9/v1", "model": "gpt-5.6-sol"},
            "appServer": {"host": "127.0.0.1", "port": 4100, "tokenSha256": "ab".repeat(32)},
            "node": {"gatewayHost": "127.0.0.1", "gatewayPort": 4000,
                     "stateDir": "/h/node/r1", "setupCodeFile": "/r/setup-code"}
        })
    }

    fn parse(value: serde_json::Value) -> Result<LaunchInput, String> {
        let input: LaunchInput = serde_json::from_value(value).map_err(|e| e.to_string())?;
        input.validate()?;
        Ok(input)
    }

    #[test]
    fn a_complete_input_parses_and_round_trips() {
        let input = parse(sample()).expect("valid");
        assert_eq!(input.login.method, LoginMethod::ApiKey);
        assert_eq!(input.workspace_setup, None);
        let again: LaunchInput =
            serde_json::from_value(serde_json::to_value(&input).expect("json")).expect("parse");
        assert_eq!(again, input);
        let mut pat = sample();
        pat["login"]["method"] = "codex_pat".into();
        assert_eq!(parse(pat).expect("pat").login.method, LoginMethod::CodexPat);
    }

    #[test]
    fn unknown_fields_and_methods_are_refused() {
        let mut extra = sample();
        extra["apiKey"] = "sk-x".into();
        assert!(parse(extra).unwrap_err().contains("unknown field"));
        let mut nested = sample();
        nested["login"]["secret"] = "sk-x".into();
        assert!(parse(nested).unwrap_err().contains("unknown field"));
        let mut method = sample();
        method["login"]["method"] = "oauth".into();
        assert!(parse(method).is_err());
    }

    #[test]
    fn unsafe_values_are_refused() {
        for (pointer, value, want) in [
            ("/workspace", serde_json::json!("relative/ws"), "workspace"),
            ("/codexHome", serde_json::json!("/h/../etc"), "codexHome"),
            (
                "/appServer/tokenSha256",
                serde_json::json!("AB".repeat(32)),
                "tokenSha256",
            ),
            (
                "/appServer/tokenSha256",
                serde_json::json!("ab"),
                "tokenSha256",
            ),
            ("/model/baseUrl", serde_json::json!("ftp://x/v1"), "baseUrl"),
            (
                "/model/baseUrl",
                serde_json::json!("http://u:p@x/v1"),
                "credentials",
            ),
            (
                "/model/baseUrl",
                serde_json::json!("http://x/v1\"\nevil=1"),
                "baseUrl",
            ),
            ("/model/model", serde_json::json!("a b"), "model"),
            ("/node/gatewayHost", serde_json::json!("a b"), "gatewayHost"),
            ("/appServer/port", serde_json::json!(0), "ports"),
        ] {
            let mut input = sample();
            *input.pointer_mut(pointer).expect(pointer) = value;
            let err = parse(input).unwrap_err();
            assert!(err.contains(want), "{pointer}: {err}");
        }
    }

    #[test]
    fn the_input_file_is_bounded_and_errors_carry_no_content() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("launch.json");
        std::fs::write(&path, "{\"secretish\": \"sk-do-not-echo\"}").expect("write");
        let err = read_launch_input(&path).unwrap_err().to_string();
        assert!(!err.contains("sk-do-not-echo"), "{err}");
        std::fs::write(&path, vec![b' '; LAUNCH_INPUT_MAX_BYTES as usize + 1]).expect("write");
        assert!(
            read_launch_input(&path)
                .unwrap_err()
                .to_string()
                .contains("larger")
        );
        std::fs::write(&path, serde_json::to_vec(&sample()).expect("json")).expect("write");
        read_launch_input(&path).expect("valid file");
    }

    #[test]
    fn codex_config_names_the_provider_only_with_an_endpoint() {
        assert_eq!(
            codex_config(None),
            "cli_auth_credentials_store = \"file\"\n"
        );
        let text = codex_config(Some(&ModelEndpoint {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: Some("gpt-5.6-sol".into()),
        }));
        assert!(text.contains("model = \"gpt-5.6-sol\"\n"), "{text}");
        assert!(
            text.contains("model_provider = \"openai-compatible\""),
            "{text}"
        );
        assert!(
            text.contains("\nbase_url = \"http://127.0.0.1:9/v1\""),
            "{text}"
        );
        assert!(
            text.contains("\nopenai_base_url = \"http://127.0.0.1:9/v1\""),
            "{text}"
        );
        assert!(text.contains("wire_api = \"responses\""), "{text}");
    }

    #[test]
    fn status_is_phase_and_code() {
        let held = LaunchStatus {
            phase: LaunchPhase::Probe,
            code: Some(FailureCode::AuthenticationFailed),
        };
        assert_eq!(
            serde_json::to_value(&held).expect("json"),
            serde_json::json!({"phase": "probe", "code": "AUTHENTICATION_FAILED"})
        );
        let running = LaunchStatus {
            phase: LaunchPhase::Running,
            code: None,
        };
        assert_eq!(
            serde_json::to_value(&running).expect("json"),
            serde_json::json!({"phase": "running", "code": null})
        );
    }

    #[test]
    fn the_node_waits_for_a_code_or_a_paired_state() {
        let tmp = tempfile::tempdir().expect("tmp");
        let state = tmp.path().join("node");
        let code = tmp.path().join("setup-code");
        assert!(!node_may_start(&state, &code));
        std::fs::write(&code, "c0de").expect("code");
        assert!(node_may_start(&state, &code));
        std::fs::remove_file(&code).expect("rm");
        std::fs::create_dir_all(state.join("identity")).expect("identity");
        assert!(node_may_start(&state, &code));
    }
}
