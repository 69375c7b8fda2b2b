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
use std::path::Path;
use std::time::Instant;

use tokio::sync::watch;

use super::input::{
    FailureCode, LaunchError, LaunchInput, LaunchPhase, LaunchStatus, ModelEndpoint,
};
use super::probe::{self, ProbeSettings};
use super::supervise::{Child, HarnessLog, supervise, until_stopped};
use occ_gateway::NODE_COMMANDS;

use crate::fsutil;
use crate::runtime::OpenclawRuntime;
use crate::workspace_setup::{self, SetupEnv};

/// The node host's preload that hands it the setup code from a file (see the file's header).
const NODE_PAIR_PRELOAD: &str = include_str!("node-pair.cjs");

/// Logs `harness: phase=<name> outcome=ok|failed ms=<n>`.
fn log_phase(log: &HarnessLog, phase: LaunchPhase, ok: bool, started: Instant) {
    log.line(
        "harness",
        &format!(
            "phase={} outcome={} ms={}",
            phase.name(),
            if ok { "ok" } else { "failed" },
            started.elapsed().as_millis()
        ),
    );
}

/// Runs the launcher until `shutdown` turns true (SIGTERM in `occ harness-launch`): the phases,
/// then supervision; a failed phase is written to the status file and held. Returns once every
/// child has stopped. `search_path` is occ's `PATH` (the runtime's processes search it after
/// their own directories); `proxy` the egress proxy variables of the harness's private network
/// (`crate::sandbox::PROXY_VARIABLES` from the launcher's environment), for Codex's and Node's
/// HTTP clients.
pub async fn run(
    input: &LaunchInput,
    search_path: &std::ffi::OsStr,
    proxy: &[(OsString, OsString)],
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LaunchError> {
    let runtime = OpenclawRuntime::locate(&input.runtime_dir, search_path)?;
    let log =
        HarnessLog::open(&input.log_file, input.log_stdout).map_err(|source| LaunchError::Io {
            step: format!("open {}", input.log_file.display()),
            source,
        })?;
    let status = StatusFile(&input.status_file);
    match prepare(input, &runtime, &log, &status).await {
        Ok(()) => {}
        Err(code) => {
            // Held: alive and unready until stopped; occ reads the code.
            log.line("harness", &code.held_line());
            until_stopped(&mut shutdown).await;
            return Ok(());
        }
    }
    status.write(LaunchPhase::Running, None)?;
    log_phase(&log, LaunchPhase::Running, true, Instant::now());
    let children = vec![
        app_server_child(input, &runtime, proxy),
        node_child(input, &runtime, proxy).map_err(|source| LaunchError::Io {
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
        log_phase(log, phase, result.is_ok(), started);
        if let Err(code) = result {
            let _ = status.write(phase, Some(code));
            return Err(code);
        }
    }
    Ok(())
}

/// Native setup (seeded from the runtime's copy when the workspace is empty), or the staged
/// setup input applied (a completed record only verified).
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
        None => workspace_setup::seed_workspace(&input.workspace, &env).await,
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
    // Emptied rather than replaced: in a sandbox the directory is a mount point.
    fsutil::ensure_private_dir(&input.codex_home)?;
    for entry in std::fs::read_dir(&input.codex_home)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    for dir in [&input.home, &input.tmp_dir] {
        std::fs::create_dir_all(dir)?;
    }
    let config = codex_config(
        input.model.as_ref(),
        input.login.chatgpt_workspace_id.as_deref(),
    );
    write_private(&input.codex_home.join("config.toml"), config.as_bytes())
}

/// The text of `config.toml` (values checked by [`LaunchInput::validate`]). With an endpoint,
/// both providers point at it: the probe uses `openai-compatible` (the default provider), while
/// the gateway's Codex plugin starts threads on Codex's built-in `openai` provider for an
/// `openai/<model>`, which only `openai_base_url` redirects.
fn codex_config(model: Option<&ModelEndpoint>, workspace: Option<&str>) -> String {
    let mut text = String::from("cli_auth_credentials_store = \"file\"\n");
    // The app-server and the probe are held to the account's workspace, as the login was.
    if let Some(id) = workspace {
        text.push_str(&format!("forced_chatgpt_workspace_id = \"{id}\"\n"));
    }
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
fn app_server_child(
    input: &LaunchInput,
    runtime: &OpenclawRuntime,
    proxy: &[(OsString, OsString)],
) -> Child {
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
        env: [
            ("HOME".into(), input.home.clone().into()),
            ("CODEX_HOME".into(), input.codex_home.clone().into()),
            ("TMPDIR".into(), input.tmp_dir.clone().into()),
            ("PATH".into(), runtime.codex_path_env()),
        ]
        .into_iter()
        .chain(proxy.iter().cloned())
        .collect(),
        cwd: input.workspace.clone(),
        parent_stdin: false,
        ready: None,
        search_path: runtime.search_path.clone(),
    }
}

/// `openclaw node run` with its own state directory, the seven commands, and the setup code
/// spliced in from its file by the preload (never on the command line). It exits when the
/// launcher's end of its stdin closes (`--parent-stdin`).
fn node_child(
    input: &LaunchInput,
    runtime: &OpenclawRuntime,
    proxy: &[(OsString, OsString)],
) -> std::io::Result<Child> {
    std::fs::create_dir_all(&input.tmp_dir)?;
    write_node_config(input)?;
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
        ]
        .into_iter()
        .chain(proxy.iter().cloned())
        .collect(),
        cwd: input.workspace.clone(),
        parent_stdin: true,
        ready: Some(Box::new(move || node_may_start(&state_dir, &code_file))),
        search_path: runtime.search_path.clone(),
    })
}

/// Names the workspace in the node host's own configuration (its `main` agent's workspace): the
/// node serves `workspace.memory` / `workspace.skills` only for a workspace its configuration
/// owns ("Workspace does not belong to this node" otherwise, which fails every chat turn of the
/// gateway). Anything else the node keeps there is left as it is.
fn write_node_config(input: &LaunchInput) -> std::io::Result<()> {
    fsutil::ensure_private_dir(&input.node.state_dir)?;
    let path = input.node.state_dir.join("openclaw.json");
    let mut config = fsutil::read_bounded(&path, 1024 * 1024)?
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    // The gateway's binding names the canonical path (`remoteRoot`); the node compares exactly.
    let workspace = std::fs::canonicalize(&input.workspace)
        .unwrap_or_else(|_| input.workspace.clone())
        .display()
        .to_string();
    if config
        .pointer("/agents/defaults/workspace")
        .and_then(|w| w.as_str())
        == Some(&workspace)
    {
        return Ok(());
    }
    let agents = config
        .as_object_mut()
        .expect("an object")
        .entry("agents")
        .or_insert_with(|| serde_json::json!({}));
    if !agents.is_object() {
        *agents = serde_json::json!({});
    }
    let defaults = agents
        .as_object_mut()
        .expect("an object")
        .entry("defaults")
        .or_insert_with(|| serde_json::json!({}));
    if !defaults.is_object() {
        *defaults = serde_json::json!({});
    }
    defaults
        .as_object_mut()
        .expect("an object")
        .insert("workspace".into(), workspace.into());
    let bytes = serde_json::to_vec_pretty(&config).map_err(std::io::Error::other)?;
    fsutil::write_atomic(&path, &bytes, false)
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

    #[test]
    fn codex_config_holds_a_service_account_to_its_workspace() {
        let text = codex_config(None, Some("11111111-2222-4333-8444-555555555555"));
        assert!(
            text.contains(
                "\nforced_chatgpt_workspace_id = \"11111111-2222-4333-8444-555555555555\"\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn codex_config_names_the_provider_only_with_an_endpoint() {
        assert_eq!(
            codex_config(None, None),
            "cli_auth_credentials_store = \"file\"\n"
        );
        let text = codex_config(
            Some(&ModelEndpoint {
                base_url: "http://127.0.0.1:9/v1".into(),
                model: Some("gpt-5.6-sol".into()),
            }),
            None,
        );
        assert!(!text.contains("forced_chatgpt_workspace_id"), "{text}");
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

    /// The preload appends `--pair-if-needed <code>` to the argv OpenClaw parses, while the
    /// process's real command line (`/proc/<pid>/cmdline`, world-readable) and environment
    /// never carry the code; without the file nothing is added. Real Node of the test runtime.
    #[test]
    fn the_preload_hands_the_code_to_argv_only() {
        let runtime = occ_testkit::runtime::shared_runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let preload = tmp.path().join("occ-node-pair.cjs");
        std::fs::write(&preload, NODE_PAIR_PRELOAD).expect("preload");
        let script = tmp.path().join("show.cjs");
        std::fs::write(
            &script,
            "const fs = require('node:fs');\n\
             console.log(JSON.stringify({argv: process.argv.slice(2),\n\
               cmdline: fs.readFileSync('/proc/self/cmdline', 'utf8'),\n\
               environ: fs.readFileSync('/proc/self/environ', 'utf8'),\n\
               env: process.env.OCC_NODE_SETUP_CODE_FILE ?? null}));\n",
        )
        .expect("script");
        let code_file = tmp.path().join("setup-code");
        let run = || {
            let out = std::process::Command::new(&runtime.node)
                .arg("--require")
                .arg(&preload)
                .arg(&script)
                .args(["node", "run"])
                .env_clear()
                .env("OCC_NODE_SETUP_CODE_FILE", &code_file)
                .output()
                .expect("node");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
        };
        let without = run();
        assert_eq!(without["argv"], serde_json::json!(["node", "run"]));
        std::fs::write(&code_file, "c0de-SECRET\n").expect("code");
        let with = run();
        assert_eq!(
            with["argv"],
            serde_json::json!(["node", "run", "--pair-if-needed", "c0de-SECRET"])
        );
        for place in ["cmdline", "environ"] {
            let text = with[place].as_str().expect(place);
            assert!(!text.contains("c0de-SECRET"), "{place}: {text}");
        }
        assert_eq!(
            with["env"],
            serde_json::Value::Null,
            "the variable is removed"
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
