//! The launch input (`LaunchInput`: what `occ harness-launch` is told, never a secret) and the
//! status it reports (`LaunchStatus`: phase and held failure code). Data and checks only.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;

/// Bound on the launch input file.
pub const LAUNCH_INPUT_MAX_BYTES: u64 = 64 * 1024;

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
    /// Also write each log line to standard output (a container's log, where occ cannot read
    /// the file).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_stdout: bool,
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
    /// The ChatGPT workspace Codex is held to (`forced_chatgpt_workspace_id`): set for
    /// `chatgpt_service_account`, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatgpt_workspace_id: Option<String>,
}

/// `harnessAuth` methods the launcher logs in with (wire names of `harnessAuth.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginMethod {
    /// An OpenAI API key: `codex login --with-api-key`.
    ApiKey,
    /// A Codex access token (`at-…`): `codex login --with-access-token`.
    CodexPat,
    /// A ChatGPT service account's access token, held to its workspace:
    /// `codex -c forced_chatgpt_workspace_id=… login --with-access-token`.
    ChatgptServiceAccount,
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
        let workspace = self.login.chatgpt_workspace_id.as_deref();
        match (self.login.method, workspace) {
            (LoginMethod::ChatgptServiceAccount, Some(id)) if is_uuid(id) => {}
            (LoginMethod::ChatgptServiceAccount, _) => {
                return Err(
                    "login.chatgptWorkspaceId must be a UUID for chatgpt_service_account".into(),
                );
            }
            (_, Some(_)) => {
                return Err("login.chatgptWorkspaceId is only for chatgpt_service_account".into());
            }
            (_, None) => {}
        }
        if let Some(model) = &self.model {
            check_model_base_url(&model.base_url).map_err(|e| format!("model.baseUrl {e}"))?;
            if let Some(name) = &model.model
                && (name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '"'))
            {
                return Err("model.model must be a model id".into());
            }
        }
        Ok(())
    }
}

/// Whether `s` is a UUID in canonical text form (it lands in TOML and on Codex's command line).
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks a model endpoint for Codex (`OCC_CODEX_BASE_URL`, the launch input's
/// `model.baseUrl`): `http(s)://authority/path` with no user info, no quotes or whitespace (it
/// lands in TOML). The error says what is wrong, without the value.
pub fn check_model_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("must start with http:// or https://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return Err("must name a host and carry no credentials".into());
    }
    if url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\'))
    {
        return Err("must not contain whitespace, quotes or backslashes".into());
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
    /// The phase's name in the launcher's log lines.
    pub fn name(self) -> &'static str {
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

impl FailureCode {
    const ALL: [Self; 5] = [
        Self::WorkspaceSetupFailed,
        Self::LoginFailed,
        Self::AuthenticationFailed,
        Self::ModelProbeFailed,
        Self::ModelProbeTimeout,
    ];

    /// The code's wire name (as in the status file), e.g. `AUTHENTICATION_FAILED`.
    pub fn wire(self) -> &'static str {
        match self {
            Self::WorkspaceSetupFailed => "WORKSPACE_SETUP_FAILED",
            Self::LoginFailed => "LOGIN_FAILED",
            Self::AuthenticationFailed => "AUTHENTICATION_FAILED",
            Self::ModelProbeFailed => "MODEL_PROBE_FAILED",
            Self::ModelProbeTimeout => "MODEL_PROBE_TIMEOUT",
        }
    }

    /// The code of a wire name.
    pub fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.wire() == name)
    }

    /// The launcher's log line announcing a held failure (after the `harness: ` prefix).
    pub fn held_line(self) -> String {
        format!("{HELD_LINE_PREFIX}{}", self.wire())
    }

    /// The held failure a launcher log announces (its last such line), if any: where occ
    /// cannot read the status file (a container), the log says it.
    pub fn held_in_log(log: &str) -> Option<Self> {
        log.lines().rev().find_map(|line| {
            let rest = line.trim_end().strip_prefix("harness: ")?;
            Self::from_wire(rest.strip_prefix(HELD_LINE_PREFIX)?)
        })
    }
}

const HELD_LINE_PREFIX: &str = "held failure code=";

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
        // A service account comes with exactly its workspace; nothing else carries one.
        let mut sa = sample();
        sa["login"]["method"] = "chatgpt_service_account".into();
        assert!(
            parse(sa.clone())
                .unwrap_err()
                .contains("chatgptWorkspaceId")
        );
        sa["login"]["chatgptWorkspaceId"] = "11111111-2222-4333-8444-555555555555".into();
        assert_eq!(
            parse(sa.clone()).expect("sa").login.method,
            LoginMethod::ChatgptServiceAccount
        );
        sa["login"]["chatgptWorkspaceId"] = "x\"\nforced_login_method = \"api".into();
        assert!(parse(sa).unwrap_err().contains("chatgptWorkspaceId"));
        let mut keyed = sample();
        keyed["login"]["chatgptWorkspaceId"] = "11111111-2222-4333-8444-555555555555".into();
        assert!(parse(keyed).unwrap_err().contains("chatgptWorkspaceId"));
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
    fn wire_names_are_the_status_file_names_and_the_log_announces_them() {
        for code in FailureCode::ALL {
            assert_eq!(
                serde_json::to_value(code).expect("json"),
                serde_json::json!(code.wire())
            );
            assert_eq!(FailureCode::from_wire(code.wire()), Some(code));
            let log = format!("harness: probe failed\nharness: {}\n", code.held_line());
            assert_eq!(FailureCode::held_in_log(&log), Some(code));
        }
        assert_eq!(FailureCode::from_wire("authentication_failed"), None);
        assert_eq!(
            FailureCode::held_in_log("node: held failure code=LOGIN_FAILED\n"),
            None,
            "only the launcher's own lines count"
        );
        assert_eq!(FailureCode::held_in_log("harness: phase=probe ok\n"), None);
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
}
