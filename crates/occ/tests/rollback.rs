//! A bad Configuration never takes a serving Agent down, end to end with real OpenClaw gateways
//! through the real `occ serve` and `occ worker` and the process Compute Driver, on SQLite (the
//! worker's own suite proves the rollback's records on PostgreSQL too):
//!
//! - a typo the pinned runtime's schema rejects (`bogusTopLevelKey`) is refused at the PATCH
//!   (400 naming `/values/bogusTopLevelKey`) and never reaches a deploy;
//! - a schema-valid document whose gateway cannot start (TLS with a missing certificate) is
//!   deployed: the new revision fails with the runtime's reason, the gateway's last output lines
//!   and a message saying revision 1 was restored; `activeRevisionId` stays revision 1, the
//!   rollback is audited, and the workspace files answer 200 again (the figures printed are the
//!   longest window in which they did not, as seen by a client polling every 100 ms);
//! - the operator learns why from occ alone: the failed revision's diagnostics name the failing
//!   step and reason code, and its runtime logs hold the gateway's own account of the failure.
//!
//! The serving revision's runtime and logs routes are also proven against the real
//! gateway's captured output: canaries planted among its lines (a bound Secret's exact value, an
//! `sk-…` key, a bearer header, a PEM private key split over lines, the gateway token) never come
//! back through a page, a follow or a download, and a follow delivers every line exactly once
//! or an explicit gap, across a real rotation of the log and a real gateway restart.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::io::Write as _;

use occ_store::Backend;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::Stack;

fn good_document() -> Value {
    json!({
        "agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
        "plugins": {"enabled": false},
    })
}

fn file(s: &Stack, agent: &str) -> String {
    format!(
        "/namespaces/{}/agents/{agent}/workspace/files/USER.md",
        s.ns
    )
}

/// Polls the Agent's USER.md until `done`; returns the longest run of non-200 answers.
async fn longest_outage(s: Arc<Stack>, agent: String, done: Arc<AtomicBool>) -> Duration {
    let mut longest = Duration::ZERO;
    let mut down_since: Option<Instant> = None;
    while !done.load(Ordering::SeqCst) {
        let (status, _) = s.call(Method::GET, &file(&s, &agent), None).await;
        match (status == StatusCode::OK, down_since) {
            (false, None) => down_since = Some(Instant::now()),
            (true, Some(since)) => {
                longest = longest.max(since.elapsed());
                down_since = None;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some(since) = down_since {
        longest = longest.max(since.elapsed());
    }
    longest
}

/// The exact value of the Secret the Agent's Configuration binds: it must never come back.
const BOUND_SECRET: &str = "plain-canary-value-4d9e2b71c0";

/// Credentials by pattern, one of them a PEM private key split over lines.
const PATTERN_CANARIES: [&str; 4] = [
    "sk-canaryabcdefghijklmnopqrstuvwxyz0123",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCcanarybody",
    "Y2FuYXJ5LXNlY29uZC1wZW0tbGluZQ==",
];

/// Lets the Agent's own principal operate the Secret it is bound to (admission checks it).
async fn grant_secret(s: &Stack, agent: &str, secret: &str) {
    let role = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/iam/roles", s.ns),
            Some(json!({"name": "secret-operator", "permissions": [{"action": "operate", "resourceKind": "secret"}]})),
        )
        .await["data"]["id"]
        .as_str()
        .expect("role id")
        .to_owned();
    s.send(
        Method::POST,
        &format!("/namespaces/{}/iam/access-bindings", s.ns),
        Some(
            json!({"subjectKind": "identity", "subjectId": format!("service-agent-{agent}"),
                    "roleId": role, "resourceKind": "secret", "resourceId": secret}),
        ),
    )
    .await;
}

/// The good document, with a Secret bound into the gateway's environment; returns the
/// Configuration and the Secret.
async fn bound_configuration(s: &Stack) -> (String, String) {
    let secret = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/secrets", s.ns),
            Some(json!({"name": "canary", "value": BOUND_SECRET})),
        )
        .await["data"]["id"]
        .as_str()
        .expect("secret id")
        .to_owned();
    let configuration = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/configurations", s.ns),
            Some(json!({
                "kind": "agent",
                "values": good_document(),
                "secretBindings": {"CANARY_TOKEN": {"source": {"kind": "secret", "namespaceId": s.ns, "id": secret}}},
            })),
        )
        .await["data"]["id"]
        .as_str()
        .expect("configuration id")
        .to_owned();
    (configuration, secret)
}

/// Appends lines to the revision's captured output as the gateway does (`O_APPEND`).
fn write_output(s: &Stack, agent: &str, rev: &str, lines: &[String]) {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(s.gateway_log(agent, rev))
        .expect("the revision's gateway log");
    let mut text = lines.join("\n");
    text.push('\n');
    log.write_all(text.as_bytes()).expect("append");
}

/// One page of the logs route (waiting out a 429 as its `Retry-After` says).
async fn logs(s: &Stack, agent: &str, rev: &str, query: &str) -> Value {
    let path = format!(
        "/namespaces/{}/agents/{agent}/deployments/{rev}/runtime/logs?source=gateway&{query}",
        s.ns
    );
    loop {
        let res = s
            .http
            .get(format!("{}{path}", s.url))
            .header("x-api-key", &s.key)
            .send()
            .await
            .expect("logs request");
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            let wait: u64 = res.headers()["retry-after"]
                .to_str()
                .ok()
                .and_then(|v| v.parse().ok())
                .expect("Retry-After in seconds");
            tokio::time::sleep(Duration::from_secs(wait)).await;
            continue;
        }
        let status = res.status();
        let text = res.text().await.expect("body");
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
        return serde_json::from_str(&text).expect("json");
    }
}

/// What a `--follow` client sees: records in order, until `until` holds for the records so far.
struct Follow {
    cursor: String,
    records: Vec<Value>,
}

impl Follow {
    async fn start(s: &Stack, agent: &str, rev: &str) -> Self {
        let page = logs(s, agent, rev, "tailLines=1000").await;
        Self {
            cursor: page["data"]["cursor"].as_str().expect("cursor").to_owned(),
            records: page["data"]["records"].as_array().expect("records").clone(),
        }
    }

    async fn until(
        &mut self,
        s: &Stack,
        agent: &str,
        rev: &str,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done(&self.records) {
            assert!(Instant::now() < deadline, "follow never saw {what}");
            let page = logs(s, agent, rev, &format!("cursor={}", self.cursor)).await;
            self.cursor = page["data"]["cursor"].as_str().expect("cursor").to_owned();
            let new = page["data"]["records"].as_array().expect("records");
            if new.is_empty() {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            self.records.extend(new.iter().cloned());
        }
    }
}

fn messages(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .filter(|r| r["type"] == "line")
        .filter_map(|r| r["message"].as_str())
        .collect()
}

/// The numbers of the lines `marker-N-…` in delivery order, each gap as `None`.
fn numbered(records: &[Value], marker: &str) -> Vec<Option<u64>> {
    records
        .iter()
        .filter_map(|r| {
            if r["type"] == "gap" {
                return Some(None);
            }
            let rest = r["message"].as_str()?.strip_prefix(marker)?;
            Some(rest.split('-').next().and_then(|n| n.parse().ok()))
        })
        .collect()
}

/// Every numbered line arrives once and in order; where numbers are missing a gap says so.
fn exactly_once_or_gap(seen: &[Option<u64>], total: u64) {
    let mut next = 0;
    let mut gap_since_last = false;
    for n in seen {
        match n {
            None => gap_since_last = true,
            Some(n) => {
                assert!(
                    *n == next || (*n > next && gap_since_last),
                    "line {n} after line {next} without a gap record (duplicate or silent loss)"
                );
                next = n + 1;
                gap_since_last = false;
            }
        }
    }
    assert_eq!(next, total, "the last numbered line arrived");
}

fn assert_no_canary(text: &str, token: &str) {
    for canary in PATTERN_CANARIES
        .iter()
        .copied()
        .chain([BOUND_SECRET, token])
    {
        assert!(!text.contains(canary), "{canary} came back: {text}");
    }
}

/// The serving revision's runtime and logs routes over the real gateway's captured output (see
/// the module docs).
async fn runtime_and_logs_of_a_serving_gateway(s: &Stack, agent: &str, rev: &str) {
    let runtime = s
        .get(&format!(
            "/namespaces/{}/agents/{agent}/deployments/{rev}/runtime",
            s.ns
        ))
        .await;
    let container = &runtime["data"]["pods"][0]["containers"][0];
    assert_eq!(container["name"], "gateway", "{runtime}");
    assert_eq!(container["state"], "running", "{runtime}");

    // The real gateway's own lines are there, classified.
    let mut follow = Follow::start(s, agent, rev).await;
    follow
        .until(s, agent, rev, "the gateway's own structured lines", |r| {
            r.iter().any(|r| r["kind"] == "openclaw")
        })
        .await;

    // Canaries among the gateway's lines, every one of them numbered.
    let token =
        std::fs::read_to_string(s.agent_dir(agent).join("gateway-token")).expect("gateway token");
    let token = token.trim();
    let planted = vec![
        "canary-0-provider key sk-canaryabcdefghijklmnopqrstuvwxyz0123".to_owned(),
        "canary-1-Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5".to_owned(),
        format!("canary-2-bound secret {BOUND_SECRET} in the environment"),
        format!("canary-3-gateway token={token}"),
        "-----BEGIN PRIVATE KEY-----".to_owned(),
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCcanarybody".to_owned(),
        "Y2FuYXJ5LXNlY29uZC1wZW0tbGluZQ==".to_owned(),
        "-----END PRIVATE KEY-----".to_owned(),
        "canary-4-after the key".to_owned(),
    ];
    write_output(s, agent, rev, &planted);
    follow
        .until(s, agent, rev, "the planted lines", |r| {
            numbered(r, "canary-").contains(&Some(4))
        })
        .await;
    exactly_once_or_gap(&numbered(&follow.records, "canary-"), 5);
    let page = logs(s, agent, rev, "tailLines=1000").await;
    assert_no_canary(&page.to_string(), token);
    assert_no_canary(&Value::Array(follow.records.clone()).to_string(), token);
    let download = s
        .http
        .get(format!(
            "{}/namespaces/{}/agents/{agent}/deployments/{rev}/runtime/logs?source=gateway&tailLines=1000&download=true",
            s.url, s.ns
        ))
        .header("x-api-key", &s.key)
        .send()
        .await
        .expect("download");
    assert_eq!(download.status(), StatusCode::OK);
    assert!(
        download.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "{:?}",
        download.headers()
    );
    assert!(
        download.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment"),
        "{:?}",
        download.headers()
    );
    let text = download.text().await.expect("download body");
    assert!(text.contains("canary-4-after the key"), "{text}");
    assert_no_canary(&text, token);

    // Past the cap the log is rotated (by the next read); the follow finishes the rotated copy,
    // then says where the copy and the truncation may have lost lines.
    let filler: Vec<String> = (0..60_000)
        .map(|n| format!("filler-{n}-{}", "x".repeat(64)))
        .collect();
    write_output(s, agent, rev, &filler);
    write_output(s, agent, rev, &["after-0-rotation".to_owned()]);
    follow
        .until(s, agent, rev, "the line after the rotation", |r| {
            messages(r).contains(&"after-0-rotation")
        })
        .await;
    exactly_once_or_gap(&numbered(&follow.records, "filler-"), 60_000);
    let gaps: Vec<&Value> = follow
        .records
        .iter()
        .filter(|r| r["type"] == "gap")
        .collect();
    assert!(
        gaps.iter().all(|g| g["reason"] == "buffer_lost"),
        "the only gap is the rotation's: {gaps:?}"
    );
    assert!(
        s.gateway_log(agent, rev).with_extension("log.1").exists(),
        "the log was rotated"
    );

    // A gateway restart: the new gateway appends to the same log, so nothing is lost or repeated.
    let dir = s.agent_dir(agent);
    let before = support::record(&dir).expect("gateway.json")["pid"]
        .as_u64()
        .expect("the gateway's pid");
    if let Some(pid) = i32::try_from(before)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).unwrap();
    }
    s.wait_for("the restarted gateway to answer", async || {
        support::record(&dir).is_some_and(|r| r["pid"].as_u64() != Some(before))
            && s.call(Method::GET, &file(s, agent), None).await.0 == StatusCode::OK
    })
    .await;
    write_output(s, agent, rev, &["after-1-restart".to_owned()]);
    follow
        .until(s, agent, rev, "the line after the restart", |r| {
            messages(r).contains(&"after-1-restart")
        })
        .await;
    exactly_once_or_gap(&numbered(&follow.records, "after-"), 2);
    exactly_once_or_gap(&numbered(&follow.records, "canary-"), 5);
    assert_no_canary(&Value::Array(follow.records.clone()).to_string(), token);
    // The worker records the restart once the new gateway answers; on a loaded machine that
    // write may land a moment after the first request got through.
    let runtime_path = format!(
        "/namespaces/{}/agents/{agent}/deployments/{rev}/runtime",
        s.ns
    );
    let restarts = |runtime: &Value| {
        runtime["data"]["pods"][0]["containers"][0]["restartCount"]
            .as_u64()
            .unwrap_or_default()
    };
    s.wait_for("the restart to be counted", async || {
        restarts(&s.get(&runtime_path).await) >= 1
    })
    .await;
    let runtime = s.get(&runtime_path).await;
    assert!(restarts(&runtime) >= 1, "the restart is counted: {runtime}");
}

#[expect(
    clippy::print_stderr,
    reason = "the figures docs/ARCHITECTURE.md cites"
)]
// On SQLite only: the worker's own suite proves the rollback's records on both stores, and
// the real gateways here are what this test adds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_never_takes_a_serving_agent_down() {
    let s = Arc::new(Stack::start(Backend::Sqlite, "29760-29779").await);
    let (cfg, secret) = bound_configuration(&s).await;
    let agent = s.agent("steady", &cfg).await;
    grant_secret(&s, &agent, &secret).await;
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    let (status, body) = s.call(Method::GET, &file(&s, &agent), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cfg_path = format!("/namespaces/{}/configurations/{cfg}", s.ns);
    runtime_and_logs_of_a_serving_gateway(&s, &agent, &rev1).await;

    // ---- a typo the runtime's schema rejects never gets past the PATCH ----
    let mut typo = good_document();
    typo["bogusTopLevelKey"] = json!(1);
    let (status, body) = s
        .call(
            Method::PATCH,
            &cfg_path,
            Some(serde_json::to_vec(&json!({"values": typo})).unwrap()),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "INVALID_REQUEST", "{body}");
    assert!(
        body.to_string().contains("/values/bogusTopLevelKey"),
        "the detail names the pointer: {body}"
    );

    // ---- a document that fails only at startup is rolled back ----
    let mut broken = good_document();
    broken["gateway"] = json!({"tls": {
        "enabled": true,
        // Without a pair in its state and without generating one, the gateway cannot start
        // (cert and key paths are refused in documents: occ owns the listener).
        "autoGenerate": false,
    }});
    let (status, body) = s
        .call(
            Method::PATCH,
            &cfg_path,
            Some(serde_json::to_vec(&json!({"values": broken})).unwrap()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let done = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(longest_outage(s.clone(), agent.clone(), done.clone()));
    let started = Instant::now();
    let rev2 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev2).await;
    let settled_after = started.elapsed();
    assert_eq!(d["status"], "failed", "{d}");
    let error = &d["error"];
    assert!(
        ["RUNTIME_STARTUP_FAILED", "RUNTIME_CONFIGURATION_INVALID"]
            .contains(&error["code"].as_str().unwrap_or_default()),
        "{d}"
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Revision 1, which served before, was restored"),
        "{d}"
    );
    assert_eq!(error["data"]["rolledBack"], true, "{d}");
    assert_eq!(error["data"]["previousRevisionId"], rev1.as_str(), "{d}");
    let output = error["data"]["output"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !output.is_empty() && output.len() <= 20,
        "the gateway's last output lines: {d}"
    );

    // The operator finds out why without a shell: the diagnostics name the failing step and
    // code, and the failed revision's logs hold the gateway's own account of the failure.
    let diagnostics = s
        .send(
            Method::POST,
            &format!(
                "/namespaces/{}/agents/{agent}/deployments/{rev2}/diagnostics",
                s.ns
            ),
            None,
        )
        .await;
    let checks = diagnostics["data"]["checks"].as_array().expect("checks");
    assert!(
        checks.iter().any(|c| c["component"] == "deployment"
            && c["check"] == "reconcile"
            && c["state"] == "failed"
            && c["code"] == error["code"]),
        "{diagnostics}"
    );
    let page = s
        .get(&format!(
            "/namespaces/{}/agents/{agent}/deployments/{rev2}/runtime/logs?source=gateway&tailLines=1000",
            s.ns
        ))
        .await;
    let messages = page["data"]["records"].to_string().to_lowercase();
    assert!(
        messages.contains("tls") || messages.contains("cert"),
        "the failed gateway's own words about TLS: {page}"
    );

    // The Agent names the revision that serves, and it answers.
    assert_eq!(
        s.agent_state(&agent).await["activeRevisionId"],
        rev1.as_str()
    );
    s.wait_for("revision 1 to answer again", async || {
        s.call(Method::GET, &file(&s, &agent), None).await.0 == StatusCode::OK
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let outage = poller.await.expect("poller");
    eprintln!(
        "the failed deploy settled after {settled_after:?}; workspace files \
         unavailable for at most {outage:?}"
    );
    assert_eq!(s.audit_count("openclaw.agents.lifecycle.rollback").await, 1);
    // Revision 1 keeps serving once the failed revision was retired.
    assert_eq!(
        s.agent_state(&agent).await["activeRevisionId"],
        rev1.as_str()
    );
    let (status, body) = s.call(Method::GET, &file(&s, &agent), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
