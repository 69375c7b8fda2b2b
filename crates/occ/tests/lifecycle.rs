//! The Agent lifecycle end to end with real OpenClaw gateways: the real `occ serve` and
//! `occ worker` binaries as separate processes (so the worker can crash), the process Compute
//! Driver, the pinned runtime. What a user sees through the API, and what runs on the machine.
//!
//! - deploy → `succeeded`, the pointer set, the gateway answering `hello-ok` with the Agent's
//!   token, its config the frozen snapshot; redeploy after a Configuration change → revision 2
//!   at generation 2, rolled onto the new snapshot, revision 1 retired with its snapshot kept;
//!   a SIGKILLed gateway seen at once (its exit reported by the Driver that reaps it: the
//!   runtime route says `restarting` or counts the restart within seconds, the worker logs a
//!   WARN naming the Agent, revision and signal), restarted long before the maintenance
//!   interval, audited, serving again; stop → no process, pointer
//!   cleared; deploy again → the same workspace; deploys admitted back to back and a stop
//!   between them → only the last runs; delete → nothing left (SQLite);
//! - the worker SIGKILLed during workspace seeding and during gateway startup, then restarted →
//!   exactly one active revision and exactly one gateway (PostgreSQL).
//!
//! Each test runs its own stack with its own port range; every process it started is killed by
//! PID at the end, gateways included.

mod support;

use std::time::{Duration, Instant};

use occ_gateway::{Endpoint, GatewayError, Session};
use occ_store::Backend;
use serde_json::{Value, json};
use support::{Stack, gateway_roots, hello, record, snapshot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_redeploy_restart_stop_resume_and_delete() {
    // Maintenance far beyond the test: only the reported exit can bring the restart on.
    let mut s = Stack::start_with(
        Backend::Sqlite,
        "29400-29449",
        &[("OCC_MAINTENANCE_INTERVAL_MS", "600000".to_owned())],
    )
    .await;
    let doc1 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}});
    let cfg = s.configuration(doc1.clone()).await;
    let agent = s.agent("lifecycle", &cfg).await;
    let dir = s.agent_dir(&agent);

    // ---- deploy ----
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev1);
    let token = std::fs::read_to_string(dir.join("gateway-token")).unwrap();
    hello(&dir, &token)
        .await
        .expect("hello-ok with the Agent's token");
    assert!(matches!(
        hello(&dir, &"0".repeat(64)).await,
        Err(GatewayError::Unauthorized(_))
    ));
    let frozen: Value =
        serde_json::from_slice(&std::fs::read(snapshot(&dir, &rev1)).unwrap()).unwrap();
    assert_eq!(
        frozen["agents"]["defaults"]["model"],
        doc1["agents"]["defaults"]["model"]
    );
    assert_eq!(frozen["plugins"], doc1["plugins"]);
    assert_eq!(gateway_roots(&dir).len(), 1);

    // ---- a Configuration change, redeploy ----
    let doc2 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5-mini"}}}, "plugins": {"enabled": false}});
    let patched = s
        .send(
            reqwest::Method::PATCH,
            &format!("/namespaces/{}/configurations/{cfg}", s.ns),
            Some(json!({"values": doc2})),
        )
        .await;
    assert_eq!(patched["data"]["generation"], 2);
    let rev1_bytes = std::fs::read(snapshot(&dir, &rev1)).unwrap();
    let pid1 = record(&dir).unwrap()["pid"].as_u64().unwrap();
    let rev2 = s.deploy(&agent).await;
    let revision2 = s
        .get(&format!(
            "/namespaces/{}/agents/{agent}/revisions/{rev2}",
            s.ns
        ))
        .await;
    assert_eq!(revision2["data"]["revision"], 2);
    assert_eq!(revision2["data"]["configurationGeneration"], 2);
    assert_eq!(s.settled(&agent, &rev2).await["status"], "succeeded");
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev2);
    let frozen2: Value =
        serde_json::from_slice(&std::fs::read(snapshot(&dir, &rev2)).unwrap()).unwrap();
    assert_eq!(
        frozen2["agents"]["defaults"]["model"]["primary"],
        "openai/gpt-5-mini"
    );
    assert_eq!(
        std::fs::read(snapshot(&dir, &rev1)).unwrap(),
        rev1_bytes,
        "revision 1's snapshot is kept unchanged"
    );
    let pid2 = record(&dir).unwrap()["pid"].as_u64().unwrap();
    assert_ne!(pid1, pid2, "rolled onto a new gateway");
    assert_eq!(
        gateway_roots(&dir),
        vec![u32::try_from(pid2).unwrap()],
        "revision 1 retired"
    );

    // ---- the gateway crashes: visible at once, restarted, recorded ----
    let runtime_path = format!("/namespaces/{}/agents/{agent}/runtime", s.ns);
    let runtime = s.get(&runtime_path).await["data"].clone();
    assert_eq!(
        (
            &runtime["state"],
            &runtime["restarts"],
            &runtime["revisionId"]
        ),
        (&json!("running"), &json!(0), &json!(rev2)),
        "{runtime}"
    );
    let restarts_before = s.audit_count("openclaw.agents.lifecycle.restart").await;
    let killed_at = Instant::now();
    if let Some(pid) = i32::try_from(pid2)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).unwrap();
    }
    let seen = loop {
        let runtime = s.get(&runtime_path).await["data"].clone();
        if runtime["state"] == "restarting" || runtime["restarts"] == 1 {
            break runtime;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(5),
            "the exit is not visible 5 s after the kill: {runtime}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(seen["lastExitStatus"], "signal: 9 (SIGKILL)", "{seen}");
    s.wait_for("the gateway to be restarted", async || {
        record(&dir).is_some_and(|r| r["pid"].as_u64() != Some(pid2))
            && dir.join("served.json").exists()
    })
    .await;
    hello(&dir, &token)
        .await
        .expect("hello-ok after the restart");
    s.wait_for("the restart to be recorded", async || {
        s.audit_count("openclaw.agents.lifecycle.restart").await > restarts_before
    })
    .await;
    let runtime = s.get(&runtime_path).await["data"].clone();
    assert_eq!(
        (
            &runtime["state"],
            &runtime["restarts"],
            &runtime["lastExitAt"]
        ),
        (&json!("running"), &json!(1), &seen["lastExitAt"]),
        "{runtime}"
    );
    let worker_log = std::fs::read_to_string(s.dir.path().join("worker-1.log")).unwrap();
    let warn = worker_log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("gateway exited unexpectedly"))
        .unwrap_or_else(|| panic!("no WARN for the exit in the worker log:\n{worker_log}"));
    for expected in [agent.as_str(), rev2.as_str(), s.ns.as_str(), "SIGKILL"] {
        assert!(warn.contains(expected), "{expected} missing from: {warn}");
    }
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev2);

    // ---- stop: nothing runs, the pointer is cleared ----
    let mut session = {
        let r = record(&dir).unwrap();
        let endpoint =
            Endpoint::loopback(u16::try_from(r["port"].as_u64().unwrap()).unwrap(), &token);
        Session::connect(&endpoint, Duration::from_secs(10))
            .await
            .unwrap()
            .0
    };
    session
        .file_set(
            "main",
            "USER.md",
            "# USER.md\n\nkept across stop and resume\n",
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    session.close().await;
    s.stop(&agent).await;
    s.wait_for("the stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    assert!(gateway_roots(&dir).is_empty(), "no gateway process is left");
    assert!(record(&dir).is_none());

    // ---- resume = deploy again: same workspace ----
    let rev3 = s.deploy(&agent).await;
    assert_eq!(s.settled(&agent, &rev3).await["status"], "succeeded");
    let r = record(&dir).unwrap();
    let endpoint = Endpoint::loopback(u16::try_from(r["port"].as_u64().unwrap()).unwrap(), &token);
    let (mut session, _) = Session::connect(&endpoint, Duration::from_secs(10))
        .await
        .unwrap();
    let user = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user.content, "# USER.md\n\nkept across stop and resume\n");
    session.close().await;

    // ---- admitted back to back while the worker is down: only the last one runs ----
    s.worker
        .as_mut()
        .unwrap()
        .terminate(Duration::from_secs(30));
    let rev4 = s.deploy(&agent).await;
    let rev5 = s.deploy(&agent).await;
    s.stop(&agent).await;
    let rev6 = s.deploy(&agent).await;
    s.start_worker();
    assert_eq!(s.settled(&agent, &rev6).await["status"], "succeeded");
    for rev in [&rev4, &rev5] {
        let d = s.settled(&agent, rev).await;
        assert_eq!(
            (d["status"].as_str(), d["error"]["code"].as_str()),
            (Some("failed"), Some("REVISION_SUPERSEDED")),
            "{d}"
        );
        assert!(!snapshot(&dir, rev).exists(), "{rev} never ran");
    }
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev6);
    assert_eq!(gateway_roots(&dir).len(), 1);

    // ---- delete: nothing left ----
    s.send(
        reqwest::Method::DELETE,
        &format!("/namespaces/{}/agents/{agent}", s.ns),
        None,
    )
    .await;
    s.wait_for("the deletion", async || !dir.exists()).await;
    assert!(gateway_roots(&dir).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_deploy_leaves_one_revision_and_one_gateway() {
    let mut s = Stack::start(Backend::Postgres, "29450-29499").await;
    let cfg = s
        .configuration(json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}}))
        .await;

    // Killed during the native workspace seeding (it starts with the Agent's directory), and
    // during the gateway's startup (it starts with the gateway record).
    for (name, point) in [("seeding", 0), ("starting", 1)] {
        let agent = s.agent(name, &cfg).await;
        let dir = s.agent_dir(&agent);
        let rev = s.deploy(&agent).await;
        // The first state of each window is enough: the kill lands in it or just after,
        // never before.
        s.wait_for(name, async || match point {
            0 => dir.join("agent.json").exists(),
            _ => record(&dir).is_some(),
        })
        .await;
        s.worker.as_mut().unwrap().kill();
        s.start_worker();
        let d = s.settled(&agent, &rev).await;
        assert_eq!(d["status"], "succeeded", "{name}: {d}");
        assert_eq!(
            s.agent_state(&agent).await["activeRevisionId"],
            rev,
            "{name}"
        );
        let revisions = s
            .get(&format!("/namespaces/{}/agents/{agent}/revisions", s.ns))
            .await;
        assert_eq!(revisions["data"].as_array().unwrap().len(), 1);
        // exactly one gateway: no duplicate, no orphan
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let roots = gateway_roots(&dir);
            if roots.len() == 1 {
                let recorded = record(&dir).unwrap()["pid"].as_u64().unwrap();
                assert_eq!(
                    u64::from(roots[0]),
                    recorded,
                    "{name}: the recorded gateway runs"
                );
                break;
            }
            assert!(Instant::now() < deadline, "{name}: gateways {roots:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // and it stops cleanly
        s.stop(&agent).await;
        s.wait_for("the stop", async || {
            s.agent_state(&agent).await["activeRevisionId"].is_null()
        })
        .await;
        assert!(gateway_roots(&dir).is_empty(), "{name}");
    }
}
