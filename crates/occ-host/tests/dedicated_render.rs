//! The gateway configuration of a dedicated revision, as the process Driver renders it, against
//! the reviewed golden file `testdata/dedicated-openclaw.json` (`OCC_UPDATE_GOLDEN=1` rewrites
//! it), and against the pinned runtime's own validator (`openclaw config validate`).

use std::path::Path;

use occ_host::harness::render::{DedicatedWiring, NodeWorkspace, render_dedicated};
use serde_json::{Value, json};

/// The reference's production Configuration for a dedicated Agent, with the keys
/// `snapshot::render_snapshot` sets for a loopback gateway.
fn rendered_snapshot() -> serde_json::Map<String, Value> {
    let doc = json!({
        "gateway": {"mode": "local", "port": 18789, "bind": "loopback",
            "controlUi": {"enabled": false},
            "auth": {"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"},
            "http": {"endpoints": {"chatCompletions": {"enabled": true}}}},
        "agents": {"defaults": {"model": "codex/gpt-5.6-sol", "skipBootstrap": true,
            "workspace": "/var/lib/occ/agents/agt_1/harness/workspace",
            "models": {"codex/gpt-5.6-sol": {"agentRuntime": {"id": "codex"}}}}},
        "models": {"catalogRefresh": {"enabled": false},
            "providers": {"codex": {"baseUrl": "http://127.0.0.1:9", "api": "openai-responses",
            "models": [{"id": "gpt-5.6-sol", "name": "gpt-5.6-sol"}]}}},
        "plugins": {"allow": ["codex"], "entries": {"codex": {"enabled": true, "config": {"appServer": {
            "mode": "guardian", "approvalPolicy": "on-request", "sandbox": "read-only",
            "transport": "websocket", "url": "${APP_SERVER_URL}", "authToken": "${APP_SERVER_TOKEN}"}}}}},
        "logging": {"file": "/var/lib/occ/agents/agt_1/logs/rev_1/gateway.log", "consoleLevel": "silent"},
        "update": {"checkOnStart": false},
    });
    doc.as_object().expect("object").clone()
}

const NODE_ID: &str = "b5fadac901d6693f3e4825d7fa5383f492e5124acd9c1a096f600275a5537b57";

fn render() -> serde_json::Map<String, Value> {
    let mut snapshot = rendered_snapshot();
    render_dedicated(
        &mut snapshot,
        &DedicatedWiring {
            app_server_url: "ws://127.0.0.1:41000",
            node: Some(NodeWorkspace {
                node_id: NODE_ID,
                remote_root: "/var/lib/occ/agents/agt_1/harness/workspace",
            }),
        },
    );
    snapshot
}

#[test]
fn dedicated_gateway_configuration_matches_the_golden_file() {
    let snapshot = render();
    occ_testkit::golden::assert_golden(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata"),
        "dedicated-openclaw.json",
        &Value::Object(snapshot),
    );
}

/// `openclaw config validate --json` of `config`: (valid, issues, warnings) as JSON text.
async fn validate(config: &serde_json::Map<String, Value>) -> (bool, String, String) {
    let runtime = tokio::task::spawn_blocking(occ_testkit::runtime::shared_runtime)
        .await
        .expect("runtime");
    let scratch = tempfile::tempdir().expect("scratch");
    // The gateway's state directory as the Driver lays it out: the Codex plugin trusted.
    occ_host::harness::trust_codex_plugin(runtime, &scratch.path().join("state"))
        .expect("trust the plugin");
    std::fs::write(
        scratch.path().join("openclaw.json"),
        serde_json::to_vec(config).expect("json"),
    )
    .expect("write config");
    let output = runtime
        .scratch_command(scratch.path())
        .args(["config", "validate", "--json"])
        .env("npm_config_offline", "true")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), output)
        .await
        .expect("validate in time")
        .expect("run openclaw config validate");
    let text = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "validate output is not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (
        report["valid"].as_bool().expect("valid flag"),
        report
            .get("issues")
            .map(Value::to_string)
            .unwrap_or_default(),
        report
            .get("warnings")
            .map(Value::to_string)
            .unwrap_or_default(),
    )
}

/// The pinned gateway accepts the rendered keys with the Codex plugin trusted as the Driver
/// lays it out (so both the bundled `file-transfer` plugin's schema and the Codex plugin's are
/// checked), and the validator does inspect them: the binding without `remoteRoot` is refused.
#[tokio::test]
async fn the_pinned_gateway_accepts_the_rendered_configuration() {
    let snapshot = render();
    let (valid, issues, warnings) = validate(&snapshot).await;
    assert!(valid, "issues: {issues}; warnings: {warnings}");
    assert!(!warnings.contains("file-transfer"), "{warnings}");

    let mut without_root = snapshot;
    let binding =
        without_root["plugins"]["entries"]["file-transfer"]["config"]["workspaces"]["main"]
            .as_object_mut()
            .expect("binding");
    binding.remove("remoteRoot");
    let (valid, issues, _) = validate(&without_root).await;
    assert!(!valid);
    assert!(
        issues.contains("plugins.entries.file-transfer.config.workspaces.main.remoteRoot"),
        "{issues}"
    );
}
