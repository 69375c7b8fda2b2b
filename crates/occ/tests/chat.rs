//! A chat turn through occ with a real OpenClaw gateway, through the real `occ serve` and
//! `occ worker` processes and the process Compute Driver, the model being the test kit's fake
//! OpenAI-compatible provider:
//!
//! - one `occ agent provision --file … --wait` makes the Configuration pointing a provider at
//!   the fake with its key bound from a Secret (`secretBindings` + `${FAKE_API_KEY}`), the
//!   Agent, the Agent principal's grant of the Secret and the deploy, and follows each step and
//!   the deployment to success;
//! - `POST …/chat` answers with the fake's reply, the model and the session; the fake saw
//!   exactly the Secret's value as Bearer;
//! - with `Accept: text/event-stream` the reply arrives as `delta` events whose concatenation
//!   is the `final` reply, in order; `occ agent chat` streams the same to a terminal;
//! - a second turn in the same session carries the first exchange to the model (history);
//!   two turns at once in two sessions each stream only their own reply;
//! - the provider gone → an error well within the deadline, never a hang;
//! - the provider refusing the key (HTTP 401) → 502 `MODEL_ERROR` naming the status, quickly;
//! - the key appears in no response, no occ log line and no audit row; each turn is audited
//!   without the message or the reply;
//! - stopped (no active revision) → 503 `DEPENDENCY_UNAVAILABLE`.
//!
//! Authorization (401/403/404), validation and 413 are covered with a test double in the API
//! tests (`crates/occ-api/tests/api/chat.rs`).

mod support;

use std::time::{Duration, Instant};

use occ_store::Backend;
use occ_testkit::fake_model::{Failure, FakeModel};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{OCC, Stack};

const KEY: &str = "sk-chat-test-0123456789abcdefghij";
const FIRST_REPLY: &str = "Hello from the fake model, first turn.";
const SECOND_REPLY: &str = "Second answer, with history.";
const FIRST_MESSAGE: &str = "chat-canary-message: what is two plus two?";

fn chat_path(s: &Stack, agent: &str) -> String {
    format!("/namespaces/{}/agents/{agent}/chat", s.ns)
}

async fn chat(s: &Stack, agent: &str, body: Value) -> (StatusCode, Value) {
    s.call(
        Method::POST,
        &chat_path(s, agent),
        Some(serde_json::to_vec(&body).unwrap()),
    )
    .await
}

/// The events of a streamed turn, in order: `(event, data)`.
async fn chat_stream(s: &Stack, agent: &str, body: Value) -> (StatusCode, Vec<(String, Value)>) {
    let res = s
        .http
        .post(format!("{}{}", s.url, chat_path(s, agent)))
        .header("x-api-key", &s.key)
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = res.status();
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = res.text().await.expect("body");
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event:") {
                name = Some(n.trim().to_owned());
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            }
        }
        if let Some(name) = name {
            events.push((name, serde_json::from_str(&data).unwrap_or(Value::Null)));
        }
    }
    (status, events)
}

fn model_messages(request: &occ_testkit::fake_model::RecordedRequest) -> String {
    request.body["messages"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn an_agent_answers_through_occ_with_its_bound_key() {
    let fake = FakeModel::start().await;
    fake.reply(FIRST_REPLY);
    let s = Stack::start(Backend::Sqlite, "29850-29899").await;
    let ns = s.ns.clone();
    let secret = s
        .send(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": "fake-key", "value": KEY})),
        )
        .await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let key_file = s.dir.path().join("key.json");
    let cli = |args: &[&str]| {
        std::process::Command::new(OCC)
            .args(args)
            .env_clear()
            .env("OCC_URL", &s.url)
            .env("OCC_SERVICE_KEY_FILE", &key_file)
            .env("OCC_NAMESPACE", &s.ns)
            .env("NO_COLOR", "1")
            .output()
            .expect("occ cli")
    };
    // One step from the CLI: the Configuration, the Agent, its grant of the Secret and the
    // deploy, followed until the deployment succeeded.
    let body = s.dir.path().join("provision.json");
    std::fs::write(
        &body,
        serde_json::to_vec(&json!({
            "name": "talker",
            "configuration": {
                "kind": "agent",
                "values": {
                    "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}},
                    "models": {"providers": {"fake": {
                        "baseUrl": fake.base_url(),
                        "api": "openai-completions",
                        "apiKey": "${FAKE_API_KEY}",
                        "models": [{"id": "fake-model", "name": "Fake model"}],
                    }}},
                    "plugins": {"enabled": false},
                },
                "secretBindings": {"FAKE_API_KEY": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}},
            },
            "harnessAuth": {"method": "runtime"},
        }))
        .unwrap(),
    )
    .unwrap();
    let provisioned = cli(&[
        "agent",
        "provision",
        "--file",
        body.to_str().unwrap(),
        "--wait",
        "-o",
        "json",
    ]);
    let progress = String::from_utf8_lossy(&provisioned.stderr);
    assert!(provisioned.status.success(), "{provisioned:?}");
    for step in [
        "Provisioning prv_",
        "succeeded (handoff)",
        "deployment rev_",
    ] {
        assert!(progress.contains(step), "{step}: {progress}");
    }
    let deployment: Value = serde_json::from_slice(&provisioned.stdout).expect("json");
    assert_eq!(deployment["status"], "succeeded", "{deployment}");
    let agents = s
        .send(Method::GET, &format!("/namespaces/{ns}/agents"), None)
        .await;
    let agent = agents["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "talker")
        .expect("the provisioned Agent")["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A service key talks to an Agent only once granted `use` on it; the CLI says how.
    let (status, body) = chat(&s, &agent, json!({"message": "hi"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let refused = cli(&["agent", "chat", &agent, "hi"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&format!("occ agent grant-use {agent}")),
        "{stderr}"
    );
    let allowed = cli(&["agent", "grant-use", &agent]);
    assert!(allowed.status.success(), "{allowed:?}");
    let again = cli(&["agent", "grant-use", &agent]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(allowed.stdout, again.stdout, "grant-use is idempotent");

    // One turn, JSON.
    let started = Instant::now();
    let (status, body) = chat(&s, &agent, json!({"message": FIRST_MESSAGE})).await;
    let first_turn = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = &body["data"];
    assert_eq!(data["reply"], FIRST_REPLY, "{body}");
    assert_eq!(data["sessionKey"], "occ-chat");
    assert!(
        data["model"].as_str().unwrap_or("").contains("fake-model"),
        "{body}"
    );
    assert!(data["durationMs"].as_u64().is_some(), "{body}");
    let calls = fake.requests_to("/v1/chat/completions");
    assert!(!calls.is_empty(), "the gateway never called the model");
    for call in &calls {
        assert_eq!(call.bearer(), Some(KEY), "the model saw another credential");
    }
    let first_call = calls.last().unwrap();
    assert!(model_messages(first_call).contains(FIRST_MESSAGE));
    assert_eq!(first_call.body["stream"], true, "{}", first_call.body);
    eprintln!("first turn through occ: {first_turn:?}");

    // The same session, streamed: deltas in order, then the final answer; the model saw the
    // first exchange.
    fake.reply(SECOND_REPLY);
    let (status, events) = chat_stream(
        &s,
        &agent,
        json!({"message": "and then?", "sessionKey": "occ-chat"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (last, deltas) = events.split_last().expect("events");
    assert_eq!(last.0, "final", "{events:?}");
    assert_eq!(last.1["reply"], SECOND_REPLY);
    assert!(
        deltas.len() >= 2,
        "the reply should stream in pieces: {events:?}"
    );
    let joined: String = deltas
        .iter()
        .map(|(name, data)| {
            assert_eq!(name, "delta");
            data["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(joined, SECOND_REPLY);
    let history = model_messages(fake.requests_to("/v1/chat/completions").last().unwrap());
    assert!(
        history.contains(FIRST_MESSAGE) && history.contains(FIRST_REPLY),
        "the second turn lacks the first exchange: {history}"
    );

    // Another session starts fresh.
    let (status, body) = chat(
        &s,
        &agent,
        json!({"message": "fresh start", "sessionKey": "other-topic"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let fresh = model_messages(fake.requests_to("/v1/chat/completions").last().unwrap());
    assert!(!fresh.contains(FIRST_MESSAGE), "{fresh}");

    // Two turns at once, in two sessions: each stream carries only its own run's deltas.
    let (a, b) = tokio::join!(
        chat_stream(
            &s,
            &agent,
            json!({"message": "one", "sessionKey": "parallel-a"})
        ),
        chat_stream(
            &s,
            &agent,
            json!({"message": "two", "sessionKey": "parallel-b"})
        ),
    );
    for (status, events) in [a, b] {
        assert_eq!(status, StatusCode::OK);
        let (last, deltas) = events.split_last().expect("events");
        assert_eq!(last.0, "final", "{events:?}");
        let joined: String = deltas
            .iter()
            .map(|(_, d)| d["text"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(joined, SECOND_REPLY, "a stream carried another run's text");
    }

    // The CLI streams to the terminal.
    let out = cli(&["agent", "chat", &agent, "hello from the cli"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        SECOND_REPLY,
        "{out:?}"
    );
    // The interactive mode reads one message per line.
    let mut child = std::process::Command::new(OCC)
        .args(["agent", "chat", &agent, "--session", "lines"])
        .env_clear()
        .env("OCC_URL", &s.url)
        .env("OCC_SERVICE_KEY_FILE", &key_file)
        .env("OCC_NAMESPACE", &s.ns)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("occ agent chat");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"first line\nsecond line\n").unwrap();
    }
    let out = child.wait_with_output().expect("occ agent chat");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches(SECOND_REPLY)
            .count(),
        2,
        "{out:?}"
    );

    // The provider is gone: an error, never a hang.
    let port = fake.port();
    drop(fake);
    let started = Instant::now();
    let (status, body) = chat(&s, &agent, json!({"message": "anyone?"})).await;
    let gone_in = started.elapsed();
    assert!(
        [StatusCode::BAD_GATEWAY, StatusCode::GATEWAY_TIMEOUT].contains(&status),
        "{status} {body}"
    );
    assert!(
        ["MODEL_ERROR", "CHAT_TIMEOUT"].contains(&body["error"]["code"].as_str().unwrap_or("")),
        "{body}"
    );
    assert!(gone_in < Duration::from_secs(125), "{gone_in:?}");
    eprintln!("provider gone, answered in {gone_in:?}: {status} {body}");
    let fake = FakeModel::start_on(port).await;

    // The provider refuses the key: a clear error naming its status, quickly.
    fake.fail_with(Some(Failure {
        status: 401,
        code: "invalid_api_key".into(),
        message: "Incorrect API key provided".into(),
    }));
    let started = Instant::now();
    let (status, body) = chat(&s, &agent, json!({"message": "are you there?"})).await;
    let refused_in = started.elapsed();
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"]["code"], "MODEL_ERROR");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("401"),
        "{body}"
    );
    eprintln!("provider 401 answered in {refused_in:?}: {body}");

    // Audited, without the message, the reply or the key.
    let mut raw = s.db.raw().await;
    let ok_turns = raw
        .count("SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.chat' AND outcome = 'success'")
        .await;
    assert!(ok_turns >= 5, "{ok_turns}");
    let failed = raw
        .count("SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.chat' AND outcome = 'failure' AND json_extract(details, '$.reasonCode') = 'MODEL_ERROR'")
        .await;
    assert!(failed >= 1, "{failed}");
    let leaked = raw
        .count(&format!(
            "SELECT count(*) FROM audit_events WHERE details LIKE '%{KEY}%' OR details LIKE '%chat-canary%' OR details LIKE '%fake model, first%'"
        ))
        .await;
    assert_eq!(leaked, 0, "the audit log holds a key, a message or a reply");
    for log in ["serve.log", "worker-1.log"] {
        let text = std::fs::read_to_string(s.dir.path().join(log)).unwrap_or_default();
        assert!(!text.contains(KEY), "{log} holds the key");
        assert!(!text.contains("chat-canary"), "{log} holds a message");
    }

    // Stopped: no active revision.
    s.stop(&agent).await;
    s.wait_for("the Agent to stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    let (status, body) = chat(&s, &agent, json!({"message": "hi"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "DEPENDENCY_UNAVAILABLE");
}
