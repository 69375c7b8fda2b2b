//! PostgreSQL restarted under a running worker (its own test binary: the restart cuts every
//! session of this process's cluster). The worker and the API reconnect, work admitted before
//! the outage converges, work admitted after it too, nothing is lost or done twice in the
//! platform state. Compute is the test double: this proves the worker's behaviour, not a
//! runtime's.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use occ_controller::worker::{Worker, WorkerSettings};
use occ_store::Backend;
use occ_testkit::app::TestApp;
use occ_testkit::compute::{FakeCompute, Scripted, Verb};
use serde_json::Value;

async fn admit(app: &TestApp, name: &str) -> (String, String) {
    let (_, agent) = app.draft_agent(name).await;
    let rev = app.deploy_as(&app.admin(), &agent).await;
    (agent, rev)
}

async fn status(app: &TestApp, agent: &str, rev: &str) -> Option<Value> {
    let r = app
        .call(
            Method::GET,
            &format!(
                "/namespaces/{}/agents/{agent}/deployments/{rev}",
                app.default_ns
            ),
            &app.admin(),
            None,
        )
        .await;
    (r.status == StatusCode::OK).then(|| r.data().clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_survives_a_postgresql_restart() {
    let app = TestApp::on(Backend::Postgres).await;
    let compute = Arc::new(FakeCompute::new());
    // Two activations are still running when the database goes away.
    for _ in 0..2 {
        compute.script(Verb::Activate, Scripted::Delay(Duration::from_secs(3)));
    }
    let settings = WorkerSettings {
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_millis(1500),
        ..WorkerSettings::default()
    };
    let worker = Arc::new(Worker::new(
        app.controller.clone(),
        compute.clone(),
        settings,
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));

    let mut admitted = Vec::new();
    for i in 0..4 {
        admitted.push(admit(&app, &format!("before-{i}")).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The outage: every connection is cut; the worker keeps running.
    tokio::task::spawn_blocking(|| occ_testkit::pg_cluster().restart(Duration::from_secs(2)))
        .await
        .unwrap();
    for i in 0..4 {
        // the API's pool reconnects on demand
        admitted.push(admit(&app, &format!("after-{i}")).await);
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut done = 0;
        for (agent, rev) in &admitted {
            if status(&app, agent, rev)
                .await
                .is_some_and(|s| s["status"] == "succeeded")
            {
                done += 1;
            }
        }
        if done == admitted.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {} deployments converged after the restart",
            admitted.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (agent, rev) in &admitted {
        let agent_id: occ_core::AgentId = agent.parse().unwrap();
        assert_eq!(
            compute.serving(&agent_id).map(|r| r.to_string()).as_deref(),
            Some(rev.as_str())
        );
    }
    // every work item settled exactly once: no duplicate completion evidence
    let mut raw = app.db.raw().await;
    let completions = raw
        .count(
            "SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.lifecycle.activate'",
        )
        .await;
    assert_eq!(completions, admitted.len() as i64);
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}
