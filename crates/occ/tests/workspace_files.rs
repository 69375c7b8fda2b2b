//! Workspace files end to end with a real OpenClaw gateway, through the real `occ serve` and
//! `occ worker` processes and the process Compute Driver:
//!
//! - an Agent created with initial USER.md and SOUL.md (the form's defaults id checked, a stale
//!   one refused) → deploy → the gateway serves exactly them, AGENTS.md and IDENTITY.md are the
//!   stock templates, the setup marker exists, the staged row is completed with its bytes
//!   erased, and the staged text never reached a response, the audit log or a log line;
//! - PUT → GET through the API and the CLI; redeploy → the edits survive (the initial text is
//!   not reapplied);
//! - a wrong gateway credential → 503, and the right one works again at the next request
//!   (read at each operation);
//! - the gateway frozen with a PUT in flight, then killed → 503 `UNKNOWN_OUTCOME`, audited, and
//!   the write was never replayed once the gateway is back;
//! - stop → 503 (no active revision); resume → the edits are still there; delete → the setup
//!   row is gone;
//! - the HTTP rules on the real server: 413 on a 49 KiB body, 400 `TOO_LONG` on 16 KiB + 1,
//!   400 on an unknown file name.

mod support;

use std::time::Duration;

use occ_store::Backend;
use reqwest::{Method, StatusCode};
use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::{Value, json};
use support::{OCC, Stack, record};

const STAGED_USER: &str = "# USER.md\n\nstaged-user-canary: Ada, prefers metric units.\n";
const STAGED_SOUL: &str = "# SOUL.md\n\nstaged-soul-canary: calm and precise.\n";

fn files_path(s: &Stack, agent: &str, name: &str) -> String {
    format!("/namespaces/{}/agents/{agent}/workspace/files/{name}", s.ns)
}

async fn read(s: &Stack, agent: &str, name: &str) -> (StatusCode, Value) {
    s.call(Method::GET, &files_path(s, agent, name), None).await
}

async fn content(s: &Stack, agent: &str, name: &str) -> String {
    let (status, body) = read(s, agent, name).await;
    assert_eq!(status, StatusCode::OK, "GET {name}: {body}");
    assert_eq!(body["data"]["name"], name);
    body["data"]["content"].as_str().unwrap().to_owned()
}

async fn write(s: &Stack, agent: &str, name: &str, text: &str) -> (StatusCode, Value) {
    let body = serde_json::to_vec(&json!({"content": text})).unwrap();
    s.call(Method::PUT, &files_path(s, agent, name), Some(body))
        .await
}

fn signal_group(pid: u64, signal: Signal) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .expect("pid");
    kill_process_group(pid, signal).expect("signal the gateway's group");
}

/// `occ agent …` with the stack's service key.
fn cli(s: &Stack, args: &[&str]) -> std::process::Output {
    let key_file = s.dir.path().join("key.json");
    std::process::Command::new(OCC)
        .args(args)
        .env_clear()
        .env("OCC_URL", &s.url)
        .env("OCC_SERVICE_KEY_FILE", &key_file)
        .env("OCC_NAMESPACE", &s.ns)
        .env("NO_COLOR", "1")
        .output()
        .expect("occ cli")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_files_live_edits_redeploys_and_unknown_outcomes() {
    let s = Stack::start(Backend::Sqlite, "29500-29549").await;
    let cfg = s
        .configuration(json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}}))
        .await;

    // ---- the form's starting point, and a stale one refused ----
    let defaults = s
        .get(&format!("/namespaces/{}/workspace-defaults", s.ns))
        .await["data"]
        .clone();
    let defaults_id = defaults["id"].as_str().unwrap().to_owned();
    assert_eq!(defaults_id.len(), 64);
    for name in ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"] {
        assert!(defaults["files"][name].is_string(), "{name}");
    }
    let create = |name: &str, id: &str| {
        serde_json::to_vec(&json!({
            "name": name,
            "configurationId": cfg,
            "harnessAuth": {"method": "runtime"},
            "initialWorkspaceFiles": {"USER.md": STAGED_USER, "SOUL.md": STAGED_SOUL},
            "workspaceDefaultsId": id,
        }))
        .unwrap()
    };
    let agents = format!("/namespaces/{}/agents", s.ns);
    let (status, body) = s
        .call(
            Method::POST,
            &agents,
            Some(create("stale", &"0".repeat(64))),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("RESOURCE_CONFLICT")),
        "{body}"
    );
    let (status, body) = s
        .call(Method::POST, &agents, Some(create("files", &defaults_id)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let agent = body["data"]["id"].as_str().unwrap().to_owned();
    assert!(
        !body.to_string().contains("canary"),
        "the staged text is never in a response"
    );
    let dir = s.agent_dir(&agent);

    // ---- never deployed: no active revision ----
    for (status, body) in [
        read(&s, &agent, "USER.md").await,
        write(&s, &agent, "USER.md", "x").await,
    ] {
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("DEPENDENCY_UNAVAILABLE")
            ),
            "{body}"
        );
    }

    // ---- deploy: the staged files are applied before the gateway starts ----
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(content(&s, &agent, "USER.md").await, STAGED_USER);
    assert_eq!(content(&s, &agent, "SOUL.md").await, STAGED_SOUL);
    for stock in ["AGENTS.md", "IDENTITY.md"] {
        assert_eq!(
            content(&s, &agent, stock).await,
            defaults["files"][stock].as_str().unwrap(),
            "{stock} is the stock template"
        );
    }
    let marker = dir.join("state/workspace/.oce-workspace-setup.json");
    let marker: Value = serde_json::from_slice(&std::fs::read(&marker).expect("marker")).unwrap();
    assert_eq!(marker["agentId"], agent.as_str());
    assert_eq!(marker["defaultsId"], defaults_id.as_str());
    let mut raw = s.db.raw().await;
    assert_eq!(
        raw.count(&format!(
            "SELECT count(*) FROM workspace_setups WHERE agent_id = '{agent}' AND completed AND files IS NULL"
        ))
        .await,
        1,
        "completed, bytes erased"
    );

    // ---- live edits, through the API and the CLI ----
    let edited_agents = "# AGENTS.md\n\nlive edit through occ\n";
    let (status, body) = write(&s, &agent, "AGENTS.md", edited_agents).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"],
        json!({"name": "AGENTS.md", "size": edited_agents.len()})
    );
    assert_eq!(content(&s, &agent, "AGENTS.md").await, edited_agents);
    let edited_user = "# USER.md\n\nedited with the CLI\n";
    let file = s.dir.path().join("USER.md");
    std::fs::write(&file, edited_user).unwrap();
    let out = cli(
        &s,
        &[
            "agent",
            "files",
            "put",
            &agent,
            "USER.md",
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&s, &["agent", "files", "get", &agent, "USER.md"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), edited_user);

    // ---- the HTTP rules on the real server ----
    let (status, body) = write(&s, &agent, "USER.md", &"a".repeat(16 * 1024 + 1)).await;
    assert_eq!(
        (
            status,
            body["error"]["code"].as_str(),
            body["error"]["details"][0]["code"].as_str(),
            body["error"]["details"][0]["path"].as_str()
        ),
        (
            StatusCode::BAD_REQUEST,
            Some("INVALID_REQUEST"),
            Some("TOO_LONG"),
            Some("/content")
        ),
        "{body}"
    );
    let (status, body) = write(&s, &agent, "USER.md", &"a".repeat(49 * 1024)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, _) = read(&s, &agent, "MEMORY.md").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(content(&s, &agent, "USER.md").await, edited_user);

    // ---- redeploy: the edits survive, the staged text is not reapplied ----
    let rev2 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev2).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(content(&s, &agent, "AGENTS.md").await, edited_agents);
    assert_eq!(content(&s, &agent, "USER.md").await, edited_user);
    assert_eq!(content(&s, &agent, "SOUL.md").await, STAGED_SOUL);

    // ---- a wrong gateway credential: 503, no scope leak; the right one applies again ----
    let token_file = dir.join("gateway-token");
    let token = std::fs::read(&token_file).unwrap();
    std::fs::write(&token_file, "f".repeat(64)).unwrap();
    let (status, body) = read(&s, &agent, "USER.md").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("DEPENDENCY_UNAVAILABLE")
        ),
        "{body}"
    );
    assert!(!body.to_string().contains("ffffffff"), "{body}");
    std::fs::write(&token_file, &token).unwrap();
    // (A maintenance pass may have restarted the gateway meanwhile; it comes back.)
    s.wait_for("the right credential to work again", async || {
        read(&s, &agent, "USER.md").await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(content(&s, &agent, "USER.md").await, edited_user);

    // ---- the gateway dies with a PUT in flight ----
    let unknown_before = raw
        .count("SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.workspace.files.write' AND outcome = 'failure' AND json_extract(details, '$.reasonCode') = 'UNKNOWN_OUTCOME'")
        .await;
    let pid = record(&dir).unwrap()["pid"].as_u64().unwrap();
    // Frozen, the gateway keeps its socket but answers nothing: the request is sent into it.
    signal_group(pid, Signal::STOP);
    let in_flight = {
        let s = &s;
        let agent = agent.clone();
        async move { write(s, &agent, "AGENTS.md", "# AGENTS.md\n\nlost in flight\n").await }
    };
    let killer = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        signal_group(pid, Signal::KILL);
    };
    let ((status, body), ()) = tokio::join!(in_flight, killer);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("UNKNOWN_OUTCOME")),
        "{body}"
    );
    assert_eq!(
        raw.count("SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.workspace.files.write' AND outcome = 'failure' AND json_extract(details, '$.reasonCode') = 'UNKNOWN_OUTCOME'")
            .await,
        unknown_before + 1
    );
    // Maintenance restarts the gateway; the lost write was never replayed.
    s.wait_for("the gateway to be back", async || {
        read(&s, &agent, "AGENTS.md").await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(content(&s, &agent, "AGENTS.md").await, edited_agents);

    // ---- stop: no active revision; resume: the edits are still there ----
    s.stop(&agent).await;
    s.wait_for("the stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    let (status, body) = write(&s, &agent, "USER.md", "x").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("DEPENDENCY_UNAVAILABLE")
        ),
        "{body}"
    );
    let rev3 = s.deploy(&agent).await;
    assert_eq!(s.settled(&agent, &rev3).await["status"], "succeeded");
    assert_eq!(content(&s, &agent, "AGENTS.md").await, edited_agents);
    assert_eq!(content(&s, &agent, "USER.md").await, edited_user);

    // ---- the staged text never reached the audit log or a log line ----
    assert_eq!(
        raw.count("SELECT count(*) FROM audit_events WHERE details LIKE '%canary%' OR details LIKE '%live edit%'")
            .await,
        0
    );
    for entry in std::fs::read_dir(s.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                !text.contains("canary") && !text.contains("live edit"),
                "{} mentions file content",
                path.display()
            );
        }
    }

    // ---- delete: the setup row goes with the Agent ----
    s.send(
        Method::DELETE,
        &format!("/namespaces/{}/agents/{agent}", s.ns),
        None,
    )
    .await;
    s.wait_for("the deletion", async || !dir.exists()).await;
    s.wait_for("the setup row to go", async || {
        let mut raw = s.db.raw().await;
        raw.count(&format!(
            "SELECT count(*) FROM workspace_setups WHERE agent_id = '{agent}'"
        ))
        .await
            == 0
    })
    .await;
}
