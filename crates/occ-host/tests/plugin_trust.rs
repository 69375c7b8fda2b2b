//! A real gateway of the pinned runtime loads the runtime's Codex plugin as trusted through
//! `harness::plugin::trust_codex_plugin` alone (no `openclaw plugins install`, no
//! `plugins.load.paths`), registers its agent harness, and answers a chat completion through
//! it: gateway → Codex plugin → `codex app-server` (started by the harness launcher) → the fake
//! model. Its read-only config is left as rendered.

use std::path::Path;
use std::time::{Duration, Instant};

use occ_host::harness::launch::run as run_launcher;
use occ_host::harness::{LaunchInput, LaunchPhase, LaunchStatus, trust_codex_plugin};
use occ_testkit::fake_model::FakeModel;
use occ_testkit::gateway::{READY_DEADLINE, TestGateway, chat_completion};
use occ_testkit::harness::launch_input;
use sha2::Digest as _;
use tokio::sync::watch;

const KEY: &str = "sk-plugin-trust-test-0123456789abcdef";
const APP_SERVER_TOKEN: &str = "app-server-token-for-the-plugin-test";
/// The model id the plugin runs threads with (`openai/<id>` bound to the `codex` runtime).
const MODEL: &str = "openai/gpt-5.6-sol";
/// What the gateway says when the plugin is loaded but not trusted (probes P2).
const UNTRUSTED_SIGNS: [&str; 4] = [
    "did not register agent harness",
    "reason=record-missing",
    "reason=origin-path",
    "missing-openclaw-peer-link",
];

/// The test's own `PATH`, as occ passes its own.
#[expect(
    clippy::disallowed_methods,
    reason = "the test passes its own PATH as occ passes its own"
)]
fn path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| occ_host::runtime::DEFAULT_PATH.into())
}

/// SHA-256 (hex) of the app-server token the gateway presents.
fn token_sha256() -> String {
    hex::encode(sha2::Sha256::digest(APP_SERVER_TOKEN.as_bytes()))
}

/// Waits until the launcher runs (probe turn done, app-server started) and the app-server
/// accepts connections.
async fn app_server_running(input: &LaunchInput) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status: Option<LaunchStatus> = std::fs::read(&input.status_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(status) = status {
            assert!(status.code.is_none(), "launcher failed: {status:?}");
            if status.phase == LaunchPhase::Running
                && tokio::net::TcpStream::connect(("127.0.0.1", input.app_server.port))
                    .await
                    .is_ok()
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "launcher did not get to running; log:\n{}",
            std::fs::read_to_string(&input.log_file).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The gateway config the Codex harness needs, on top of the test kit's: the model bound to
/// the `codex` runtime, the plugin allowed and pointed at the app-server, chat completions on.
/// No `plugins.load.paths` and no `meta`.
fn add_codex_harness(config: &mut serde_json::Value, workspace: &Path, app_server_port: u16) {
    let defaults = &mut config["agents"]["defaults"];
    defaults["workspace"] = workspace.display().to_string().into();
    defaults["model"] = MODEL.into();
    defaults["skipBootstrap"] = true.into();
    defaults["models"] = serde_json::json!({ MODEL: {"agentRuntime": {"id": "codex"}} });
    defaults["modelPolicy"] = serde_json::json!({"allow": [MODEL]});
    config["gateway"]["controlUi"] = serde_json::json!({"enabled": false});
    config["gateway"]["http"] =
        serde_json::json!({"endpoints": {"chatCompletions": {"enabled": true}}});
    config["plugins"] = serde_json::json!({
        "allow": ["codex"],
        "entries": {"codex": {"enabled": true, "config": {"appServer": {
            "transport": "websocket",
            "url": format!("ws://127.0.0.1:{app_server_port}"),
            "authToken": APP_SERVER_TOKEN,
        }}}},
    });
}

fn gateway_output(gateway: &TestGateway) -> String {
    let log =
        std::fs::read_to_string(gateway.state_dir.join("logs/gateway.log")).unwrap_or_default();
    format!(
        "{}\n{log}",
        std::fs::read_to_string(&gateway.output_path).unwrap_or_default()
    )
}

/// About 60–120 s on a quiet 2-core box (gateway cold start, plugin load, catalog warm-up,
/// one Codex turn), longer under load: ignored by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real gateway + Codex app-server, over 60 s"]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn a_gateway_trusts_the_runtime_plugin_and_answers_through_codex() {
    let started = Instant::now();
    let runtime = tokio::task::spawn_blocking(|| occ_testkit::runtime::shared_runtime().clone())
        .await
        .expect("runtime");
    let model = FakeModel::start().await;
    let tmp = tempfile::tempdir().expect("tmp");
    let input = launch_input(tmp.path(), &runtime.root, &model, KEY, token_sha256());
    let (stop, stopped) = watch::channel(false);
    let launcher = {
        let input = input.clone();
        tokio::spawn(async move { run_launcher(&input, &path(), &[], stopped).await })
    };
    app_server_running(&input).await;

    let mut gateway = TestGateway::spawn_configured(
        &runtime,
        |config, state| {
            add_codex_harness(config, &input.workspace, input.app_server.port);
            let trusted = Instant::now();
            trust_codex_plugin(&runtime, state).expect("trust the plugin");
            // no process, no network: a few file-system calls
            assert!(trusted.elapsed() < Duration::from_secs(1));
        },
        vec![("npm_config_offline".into(), "true".into())],
    )
    .await;
    let rendered = std::fs::read(&gateway.config_path).expect("config");
    gateway.ready(READY_DEADLINE).await;
    let ready_after = started.elapsed();

    let token = gateway.endpoint.token().unwrap_or_default().to_owned();
    let (status, body) =
        chat_completion(gateway.port, &token, "hi", Duration::from_secs(240)).await;
    let output = gateway_output(&gateway);
    assert_eq!(
        status, 200,
        "chat failed: {body}\n--- gateway ---\n{output}"
    );
    assert!(
        body.contains("Hello from the fake model."),
        "{body}\n--- gateway ---\n{output}"
    );
    assert!(
        model.requests().iter().any(|r| r.bearer() == Some(KEY)),
        "the turn reached the fake model with the logged-in key"
    );
    for sign in UNTRUSTED_SIGNS {
        assert!(!output.contains(sign), "gateway says {sign:?}:\n{output}");
    }
    assert_eq!(
        std::fs::read(&gateway.config_path).expect("config"),
        rendered,
        "the gateway's config is left as rendered"
    );
    eprintln!(
        "gateway ready {:.1} s after the start, chat answered at {:.1} s",
        ready_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    drop(gateway);
    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(30), launcher)
        .await
        .expect("the launcher returns after a stop")
        .expect("task")
        .expect("launcher ok");
}
