#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Worker throughput with a Compute Driver that does no I/O (the test double): how many admitted
//! revisions per second the worker takes to activated, for 1 000 Agents, on PostgreSQL and on
//! SQLite. The baseline of each run is the bare queue on another 1 000 admitted revisions:
//! claim and complete with the same concurrency and nothing in between, so the ratio is the
//! cost of what a pass adds (reads, re-authorization, pointer publication, activation audit).
//!
//! Run: `cargo bench -p occ-controller --bench worker` (optionally `-- --agents 1000
//! --concurrency 4`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use occ_controller::worker::{Worker, WorkerSettings};
use occ_store::Backend;
use occ_store::queue::QueueOptions;
use occ_testkit::app::TestApp;
use occ_testkit::compute::FakeCompute;
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Creates `n` Agents sharing one Configuration and admits one deploy each.
async fn admit(app: &TestApp, prefix: &str, n: usize) {
    let ns = app.default_ns.to_string();
    let admin = app.admin();
    let cfg = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}}})),
        )
        .await;
    assert_eq!(cfg.status, StatusCode::CREATED, "{}", cfg.body);
    let cfg = cfg.data()["id"].as_str().unwrap().to_owned();
    for i in 0..n {
        let agent = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/agents"),
                &admin,
                Some(json!({"name": format!("{prefix}-{i}"), "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
            )
            .await;
        let agent = agent.data()["id"].as_str().unwrap().to_owned();
        app.deploy_as(&admin, &agent).await;
    }
}

async fn queued(app: &TestApp) -> i64 {
    let mut raw = app.db.raw().await;
    raw.count("SELECT count(*) FROM controller_work WHERE state IN ('queued', 'claimed')")
        .await
}

async fn wait_until_drained(app: &TestApp) {
    loop {
        if queued(app).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The bare queue: claim and complete, `concurrency` loops.
async fn baseline(app: &TestApp, concurrency: usize) -> Duration {
    let started = Instant::now();
    let mut loops = Vec::new();
    for _ in 0..concurrency {
        let store = app.store.clone();
        loops.push(tokio::spawn(async move {
            let options = QueueOptions::default();
            while let Some(claim) = store.work_claim(&options).await.unwrap() {
                let mut tx = occ_testkit::begin_setup(&store).await;
                tx.work_fence(&claim, options.lease).await.unwrap();
                tx.work_complete(&claim, "RECONCILE_SUCCEEDED", None)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    started.elapsed()
}

async fn run(backend: Backend, agents: usize, concurrency: usize) -> (f64, f64) {
    let app = TestApp::on(backend).await;
    // the bootstrap's Namespace work, settled by the queue alone
    baseline(&app, 1).await;

    admit(&app, "base", agents).await;
    let base = baseline(&app, concurrency).await;

    admit(&app, "work", agents).await;
    let settings = WorkerSettings {
        poll_interval: Duration::from_millis(10),
        concurrency,
        ..WorkerSettings::default()
    };
    let worker = Arc::new(Worker::new(
        app.controller.clone(),
        Arc::new(FakeCompute::new().without_recording()),
        settings,
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let running = tokio::spawn(worker.run(stopped));
    wait_until_drained(&app).await;
    let elapsed = started.elapsed();
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
    let mut raw = app.db.raw().await;
    let activated = raw
        .count("SELECT count(*) FROM controller_work WHERE reason_code = 'REVISION_ACTIVATED'")
        .await;
    assert_eq!(
        activated,
        i64::try_from(agents).unwrap(),
        "every revision activated"
    );
    let n = agents as f64;
    (n / base.as_secs_f64(), n / elapsed.as_secs_f64())
}

fn main() {
    let agents = arg("--agents", 1000);
    let concurrency = arg("--concurrency", 4);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut rows = Vec::new();
        for backend in [Backend::Postgres, Backend::Sqlite] {
            let (base, worker) = run(backend, agents, concurrency).await;
            println!(
                "{}",
                json!({"backend": backend.name(), "agents": agents, "concurrency": concurrency,
                       "queue_only_per_s": base.round(), "activated_per_s": worker.round()})
            );
            rows.push((backend.name(), base, worker));
        }
        println!();
        println!(
            "| backend | agents | concurrency | queue alone /s | revisions activated /s | ratio |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for (backend, base, worker) in rows {
            println!(
                "| {backend} | {agents} | {concurrency} | {base:.0} | {worker:.0} | {:.0}% |",
                100.0 * worker / base
            );
        }
    });
}
