//! Durability of acknowledged writes across a PostgreSQL crash (its own test binary: it kills
//! this process's cluster). The cluster runs with `fsync`, `synchronous_commit` and
//! `full_page_writes` on, as in production; writers create Configurations and Agents through
//! the API while the postmaster and every backend are SIGKILLed and the server restarted.
//! Every write that was answered 201 must be there afterwards, with its audit event; writes
//! during the outage get an error, never a 201.
//!
//! The test can fail: run against the same cluster with `synchronous_commit=off` (what the other
//! test binaries use), the same crash lost 1–5 acknowledged writes in each of 3 runs.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use occ_store::Backend;
use occ_testkit::app::TestApp;
use serde_json::json;

/// One acknowledged write: what it created.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Acknowledged {
    Configuration(String),
    Agent(String),
}

#[derive(Default)]
struct Tally {
    acknowledged: Vec<Acknowledged>,
    refused: u64,
}

async fn writer(app: Arc<TestApp>, id: usize, stop: Arc<AtomicBool>, tally: Arc<Mutex<Tally>>) {
    let ns = app.default_ns.to_string();
    let admin = app.admin();
    let configurations = format!("/namespaces/{ns}/configurations");
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let r = app
            .call(
                Method::POST,
                &configurations,
                &admin,
                Some(json!({"kind": "agent", "values": {}})),
            )
            .await;
        if r.status != StatusCode::CREATED {
            assert_ne!(r.status.as_u16() / 100, 2, "{}", r.body);
            tally.lock().unwrap().refused += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let cfg = r.data()["id"].as_str().unwrap().to_owned();
        tally
            .lock()
            .unwrap()
            .acknowledged
            .push(Acknowledged::Configuration(cfg.clone()));
        let r = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/agents"),
                &admin,
                Some(json!({"name": format!("w{id}-{n}"), "configurationId": cfg,
                            "harnessAuth": {"method": "runtime"}})),
            )
            .await;
        n += 1;
        if r.status == StatusCode::CREATED {
            let agent = r.data()["id"].as_str().unwrap().to_owned();
            tally
                .lock()
                .unwrap()
                .acknowledged
                .push(Acknowledged::Agent(agent));
        } else {
            tally.lock().unwrap().refused += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_postgresql_crash() {
    let cluster = occ_testkit::pg_cluster();
    tokio::task::spawn_blocking(|| occ_testkit::pg_cluster().make_durable())
        .await
        .unwrap();
    let app = Arc::new(TestApp::on(Backend::Postgres).await);
    let mut raw = app.db.raw().await;
    assert_eq!(
        raw.strings(
            "SELECT current_setting('fsync') || ',' || current_setting('synchronous_commit')"
        )
        .await,
        vec!["on,on"]
    );
    drop(raw);

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let writers: Vec<_> = (0..6)
        .map(|i| tokio::spawn(writer(app.clone(), i, stop.clone(), tally.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_crash = tally.lock().unwrap().acknowledged.len();
    assert!(before_crash > 0, "the load was running");
    tokio::task::spawn_blocking(move || cluster.crash_and_restart())
        .await
        .unwrap();
    // Writers keep going through recovery and after it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = tally.lock().unwrap().acknowledged.len();
        if now >= before_crash + 20 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "writes did not resume after recovery ({now} acknowledged)"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }

    let tally = std::mem::take(&mut *tally.lock().unwrap());
    assert!(tally.refused > 0, "the crash hit the load");
    // Every acknowledged write is there, with its audit event.
    let mut raw = app.db.raw().await;
    let configurations: BTreeSet<String> = raw
        .strings("SELECT id FROM configurations")
        .await
        .into_iter()
        .collect();
    let agents: BTreeSet<String> = raw
        .strings("SELECT id FROM agents")
        .await
        .into_iter()
        .collect();
    let audited: BTreeSet<String> = raw
        .strings("SELECT resource_id FROM audit_events WHERE outcome = 'success'")
        .await
        .into_iter()
        .collect();
    let mut missing = Vec::new();
    for write in &tally.acknowledged {
        let (present, id) = match write {
            Acknowledged::Configuration(id) => (configurations.contains(id), id),
            Acknowledged::Agent(id) => (agents.contains(id), id),
        };
        if !present || !audited.contains(id) {
            missing.push(write.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost: {missing:?}",
        missing.len(),
        tally.acknowledged.len()
    );
    #[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
    {
        eprintln!(
            "acknowledged {} writes ({} before the crash), {} refused during the outage; none lost",
            tally.acknowledged.len(),
            before_crash,
            tally.refused
        );
    }
}
