//! A dedicated Codex Agent on `occ dev`, the way the README tells a user to make one, through
//! the CLI only: `OCC_CODEX_BASE_URL` names the model endpoint (the test kit's fake model), the
//! Installation lists `dedicated`, a Secret holds the key, the Configuration selects a Codex model,
//! the Agent is created `dedicated` with `harnessAuth` `api_key`, `occ agent deploy --wait`
//! succeeds (admission, the worker's exclusive replacement, the harness's login and probe turn,
//! the gateway, the node enrollment), workspace files go through the gateway to the harness's
//! node, `occ agent logs --source agent` shows the harness's output without the key, `occ agent
//! chat` is answered by the model through the harness, and delete
//! leaves no process. The process Driver's own lifecycle test (`dedicated.rs`) covers the rest.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use occ_testkit::fake_model::FakeModel;
use occ_testkit::occ_process::OccProcess;
use serde_json::{Value, json};

const OCC: &str = env!("CARGO_BIN_EXE_occ");
const KEY: &str = "sk-dev-dedicated-0123456789abcdef";
const MODEL: &str = "openai/gpt-5.6-sol";

/// Kills every gateway and harness `occ dev` recorded under its compute root when the test ends
/// (they run detached and outlive `occ dev` by design).
struct Cleanup(std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let recorded = occ_host::recorded_gateways(&self.0)
            .into_iter()
            .chain(occ_host::recorded_harnesses(&self.0));
        for (pid, _) in recorded {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs the CLI; panics with its stderr when it fails.
fn occ(args: &[&str], env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(OCC);
    cmd.args(args).env_clear().env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("occ");
    assert!(
        out.status.success(),
        "occ {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn occ_json(args: &[&str], env: &[(&str, String)]) -> Value {
    let mut full = vec!["-o", "json"];
    full.extend_from_slice(args);
    serde_json::from_str(&occ(&full, env)).expect("json")
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_deploys_a_dedicated_codex_agent_on_occ_dev() {
    let runtime = tokio::task::spawn_blocking(|| {
        occ_testkit::runtime::shared_runtime();
        occ_testkit::runtime::runtime_root()
    })
    .await
    .unwrap();
    let model = FakeModel::start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _cleanup = Cleanup(data.join("compute"));
    let port = free_port();
    let env: Vec<(String, String)> = vec![
        ("OCC_LOG".into(), "info".into()),
        ("OCC_CODEX_BASE_URL".into(), model.base_url()),
        ("OCC_PROCESS_PORT_RANGE".into(), "29650-29699".into()),
    ];
    let args = [
        "dev",
        "--data-dir",
        data.to_str().unwrap(),
        "--port",
        &port.to_string(),
        "--runtime-dir",
        runtime.to_str().unwrap(),
    ];
    let mut dev = OccProcess::spawn(
        OCC,
        &args,
        &env,
        dir.path().join("dev.log"),
        Some("occ dev is running at"),
        Duration::from_secs(60),
    );
    let cli = [
        ("OCC_URL", format!("http://127.0.0.1:{port}")),
        (
            "OCC_SERVICE_KEY_FILE",
            data.join("admin-service-key.json").display().to_string(),
        ),
    ];
    let installation = occ_json(&["installation", "get"], &cli);
    assert_eq!(
        installation["capabilities"]["agentProvisioning"]["executionModes"],
        json!(["embedded", "dedicated"]),
        "{installation}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let ns = loop {
        let list = occ_json(&["namespace", "list"], &cli);
        let default = list
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "default")
            .cloned()
            .unwrap();
        if default["status"] == "ready" {
            break default["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "{default}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let cli: Vec<(&str, String)> = cli
        .into_iter()
        .chain([("OCC_NAMESPACE", ns.clone())])
        .collect();

    let secret = occ_json(
        &[
            "secret",
            "create",
            "--file",
            &write(
                dir.path(),
                "secret.json",
                &json!({"name": "codex-key", "value": KEY}),
            ),
        ],
        &cli,
    );
    let secret_id = secret["id"].as_str().expect("sec id").to_owned();
    let cfg = occ_json(
        &[
            "configuration",
            "create",
            "--file",
            &write(
                dir.path(),
                "cfg.json",
                &json!({"kind": "agent", "values": {
                    "gateway": {"http": {"endpoints": {"chatCompletions": {"enabled": true}}}},
                    "agents": {"defaults": {"model": MODEL, "skipBootstrap": true,
                        "models": {MODEL: {"agentRuntime": {"id": "codex"}}}}}}}),
            ),
        ],
        &cli,
    );
    let cfg_id = cfg["id"].as_str().expect("cfg id").to_owned();
    let agent = occ_json(
        &[
            "agent",
            "create",
            "--file",
            &write(
                dir.path(),
                "agent.json",
                &json!({"name": "coder", "configurationId": cfg_id, "executionMode": "dedicated",
                    "harnessAuth": {"method": "api_key", "source":
                        {"kind": "secret", "namespaceId": ns, "id": secret_id}}}),
            ),
        ],
        &cli,
    );
    let agent_id = agent["id"].as_str().expect("agt id").to_owned();
    // The Agent's principal may use exactly that Secret (deploy checks it, 403 otherwise).
    let binding = occ_json(&["secret", "grant", &secret_id, "--agent", &agent_id], &cli);
    assert_eq!(binding["subjectId"], format!("service-agent-{agent_id}"));
    let deployed = Command::new(OCC)
        .args(["agent", "deploy", &agent_id, "--wait"])
        .env_clear()
        .envs(cli.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("deploy");
    assert!(
        deployed.status.success(),
        "deploy failed: {}{}\n--- occ dev ---\n{}",
        String::from_utf8_lossy(&deployed.stdout),
        String::from_utf8_lossy(&deployed.stderr),
        dev.log_text()
    );
    assert!(
        model.requests().iter().any(|r| r.bearer() == Some(KEY)),
        "the harness's probe turn reached the model with the Secret's key"
    );

    // Workspace files through the gateway, served by the harness's node.
    let content = "# USER.md\n\nAda, prefers short answers.\n";
    let local = dir.path().join("USER.md");
    std::fs::write(&local, content).unwrap();
    occ(
        &[
            "agent",
            "files",
            "put",
            &agent_id,
            "USER.md",
            "--file",
            local.to_str().unwrap(),
        ],
        &cli,
    );
    assert_eq!(
        occ(&["agent", "files", "get", &agent_id, "USER.md"], &cli),
        content
    );
    let compute = data.join("compute");
    let on_node: Vec<_> = walk(&compute)
        .into_iter()
        .filter(|p| p.ends_with("harness/workspace/USER.md"))
        .collect();
    assert_eq!(on_node.len(), 1, "{on_node:?}");
    assert_eq!(std::fs::read_to_string(&on_node[0]).unwrap(), content);

    // The harness's output, as source `agent`, without the key.
    let logs = occ(
        &[
            "agent", "logs", &agent_id, "--source", "agent", "--tail", "500",
        ],
        &cli,
    );
    assert!(logs.contains("phase=probe outcome=ok"), "{logs}");
    assert!(!logs.contains(KEY));

    // It answers through occ: the turn goes gateway → Codex app-server → the model, which sees
    // the harness's key.
    model.reply("Dedicated answer through occ.");
    let before = model.requests_to("/v1/responses").len();
    occ(&["agent", "grant-use", &agent_id], &cli);
    let said = occ(&["agent", "chat", &agent_id, "Hello, Codex?"], &cli);
    assert_eq!(said.trim(), "Dedicated answer through occ.", "{said}");
    let turns = model.requests_to("/v1/responses");
    assert!(turns.len() > before, "the model was not called");
    assert!(turns[before..].iter().all(|r| r.bearer() == Some(KEY)));

    // Delete: nothing of the Agent runs or stays.
    occ(&["agent", "delete", &agent_id], &cli);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !occ_host::recorded_harnesses(&compute).is_empty()
        || !occ_host::recorded_gateways(&compute).is_empty()
    {
        assert!(Instant::now() < deadline, "the Agent's directory stays");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(dev.terminate(Duration::from_secs(30)), "occ dev stops");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) => out.push(path),
                Err(_) => {}
            }
        }
    }
    out
}
