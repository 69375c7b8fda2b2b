//! The gateway configuration of a dedicated revision, as the process Driver renders it, against
//! the reviewed golden file `testdata/dedicated-openclaw.json` (`OCC_UPDATE_GOLDEN=1` rewrites
//! it).

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

#[test]
fn dedicated_gateway_configuration_matches_the_golden_file() {
    let mut snapshot = rendered_snapshot();
    render_dedicated(
        &mut snapshot,
        &DedicatedWiring {
            codex_plugin_dir: "/opt/occ/openclaw-runtime/codex/node_modules/@openclaw/codex",
            app_server_url: "ws://127.0.0.1:41000",
            node: Some(NodeWorkspace {
                node_id: "b5fadac901d6693f3e4825d7fa5383f492e5124acd9c1a096f600275a5537b57",
                remote_root: "/var/lib/occ/agents/agt_1/harness/workspace",
            }),
        },
    );
    occ_testkit::golden::assert_golden(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata"),
        "dedicated-openclaw.json",
        &Value::Object(snapshot),
    );
}
