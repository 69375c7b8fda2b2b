//! A bad Configuration never takes a serving Agent down, end to end with real OpenClaw gateways
//! through the real `occ serve` and `occ worker` and the process Compute Driver, on SQLite and
//! on PostgreSQL:
//!
//! - a typo the pinned runtime's schema rejects (`bogusTopLevelKey`) is refused at the PATCH
//!   (400 naming `/values/bogusTopLevelKey`) and never reaches a deploy;
//! - a schema-valid document whose gateway cannot start (TLS with a missing certificate) is
//!   deployed: the new revision fails with the runtime's reason, the gateway's last output lines
//!   and a message saying revision 1 was restored; `activeRevisionId` stays revision 1, the
//!   rollback is audited, and the workspace files answer 200 again (the figures printed are the
//!   longest window in which they did not, as seen by a client polling every 100 ms).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use occ_store::Backend;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::Stack;

/// One stack with gateways at a time: each starts and restarts real gateways.
static GATEWAYS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

#[expect(
    clippy::print_stderr,
    reason = "the figures docs/ARCHITECTURE.md cites"
)]
async fn a_bad_configuration_never_takes_a_serving_agent_down(backend: Backend, ports: &str) {
    let _turn = GATEWAYS.lock().await;
    let s = Arc::new(Stack::start(backend, ports).await);
    let cfg = s.configuration(good_document()).await;
    let agent = s.agent("steady", &cfg).await;
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    let (status, body) = s.call(Method::GET, &file(&s, &agent), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cfg_path = format!("/namespaces/{}/configurations/{cfg}", s.ns);

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
        // Without this the gateway generates a self-signed pair wherever it can write.
        "autoGenerate": false,
        // Under a file: no process can create it.
        "certPath": "/dev/null/occ-rollback/cert.pem",
        "keyPath": "/dev/null/occ-rollback/key.pem",
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
        "{backend:?}: the failed deploy settled after {settled_after:?}; workspace files \
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_never_takes_a_serving_agent_down_on_sqlite() {
    a_bad_configuration_never_takes_a_serving_agent_down(Backend::Sqlite, "29760-29779").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_never_takes_a_serving_agent_down_on_postgres() {
    a_bad_configuration_never_takes_a_serving_agent_down(Backend::Postgres, "29780-29799").await;
}
