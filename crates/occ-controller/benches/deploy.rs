#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Deploy → active latency with real OpenClaw gateways (process Compute Driver, SQLite, the
//! worker in process), next to the raw gateway measured in the same run and on the same
//! machine:
//!
//! - fresh Agent: occ's deploy (admission → worker claim → workspace seeding → snapshot →
//!   spawn → `hello-ok` → pointer and completion) against the raw sequence a script would run
//!   (`openclaw setup --baseline`, spawn, `hello-ok`);
//! - redeploy: occ's second deploy of the same Agent (the old gateway stopped, the new one
//!   started) against a raw restart of a gateway (stop, spawn on the same directories →
//!   `hello-ok`).
//!
//! Both sides run OpenClaw with the same settings (the raw side's test profile).
//!
//! occ's overhead = occ − raw, as a share of raw. Runs alternate raw and occ.
//!
//! Run: `cargo bench -p occ-controller --bench deploy` (optionally `-- --runs 3`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use occ_controller::worker::{Worker, WorkerSettings};
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_host::{LocalSettings, recorded_gateways};
use occ_store::Backend;
use occ_testkit::app::TestApp;
use occ_testkit::gateway::TestGateway;
use serde_json::{Value, json};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn deploy_and_wait(app: &TestApp, agent: &str) -> Duration {
    let ns = app.default_ns.to_string();
    let started = Instant::now();
    let rev = app.deploy_as(&app.admin(), agent).await;
    loop {
        let d = app
            .call(
                Method::GET,
                &format!("/namespaces/{ns}/agents/{agent}/deployments/{rev}"),
                &app.admin(),
                None,
            )
            .await;
        match d.data()["status"].as_str() {
            Some("succeeded") => return started.elapsed(),
            Some("failed") => panic!("deployment failed: {}", d.body),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark passes its own PATH as occ passes its own"
)]
fn main() {
    let runs = arg("--runs", 3);
    let runtime_root = {
        occ_testkit::runtime::shared_runtime();
        occ_testkit::runtime::runtime_root()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let app = TestApp::on(Backend::Sqlite).await;
        let root = tempfile::tempdir().unwrap();
        let compute = Arc::new(
            ProcessCompute::new(ProcessSettings {
                host: LocalSettings {
                    root: root.path().to_path_buf(),
                    runtime_root: runtime_root.clone(),
                    port_range: 29600..=29699,
                    ready_timeout: Duration::from_secs(180),
                    stop_timeout: Duration::from_secs(15),
                    path: std::env::var_os("PATH").unwrap_or_default(),
                },
                sandbox: None,
        credential_proxy_port: None,
        maintenance_interval: None,
                dedicated: None,
            })
            .unwrap(),
        );
        let worker = Arc::new(Worker::new(
            app.controller.clone(),
            compute.clone(),
            WorkerSettings {
                poll_interval: Duration::from_millis(50),
                ..WorkerSettings::default()
            },
        ));
        // The test app made `default` ready without the worker: prepare it on this Compute.
        use occ_drivers::compute::Compute as _;
        compute
            .ensure_namespace(&occ_drivers::compute::NamespaceTarget {
                id: app.default_ns.clone(),
                name: "default".into(),
                existing_namespace: None,
            })
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = tokio::spawn(worker.run(stopped));
        let ns = app.default_ns.to_string();
        let admin = app.admin();
        let cfg = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/configurations"),
                &admin,
                // the same OpenClaw settings the raw test gateway runs with
                Some(json!({"kind": "agent", "values": {
                    "agents": {"defaults": {"heartbeat": {"every": "0m"}}},
                    "cron": {"enabled": false}}})),
            )
            .await;
        let cfg = cfg.data()["id"].as_str().unwrap().to_owned();
        let openclaw = occ_testkit::runtime::shared_runtime().clone();

        let (mut raw_fresh, mut raw_restart, mut occ_fresh, mut occ_redeploy) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for run in 0..runs {
            // raw: setup + spawn + hello-ok, then stop + (setup-less) spawn + hello-ok
            let t0 = Instant::now();
            let mut gw = TestGateway::spawn(&openclaw).await;
            gw.ready(Duration::from_secs(180)).await;
            let fresh = t0.elapsed();
            let restart = Instant::now();
            gw.respawn(&openclaw);
            gw.ready(Duration::from_secs(180)).await;
            let restarted = restart.elapsed();
            gw.stop();
            raw_fresh.push(fresh.as_secs_f64());
            raw_restart.push(restarted.as_secs_f64());
            drop(gw);

            // occ: a fresh Agent, then its redeploy
            let agent = app
                .call(
                    Method::POST,
                    &format!("/namespaces/{ns}/agents"),
                    &admin,
                    Some(json!({"name": format!("bench-{run}"), "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
                )
                .await;
            let agent: Value = agent.data().clone();
            let agent = agent["id"].as_str().unwrap().to_owned();
            occ_fresh.push(deploy_and_wait(&app, &agent).await.as_secs_f64());
            occ_redeploy.push(deploy_and_wait(&app, &agent).await.as_secs_f64());
            let r = app
                .call(
                    Method::POST,
                    &format!("/namespaces/{ns}/agents/{agent}/stop"),
                    &admin,
                    None,
                )
                .await;
            assert_eq!(r.status, StatusCode::ACCEPTED);
            while !recorded_gateways(root.path()).is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            println!(
                "{}",
                json!({"run": run, "raw_fresh_s": fresh.as_secs_f64(), "raw_restart_s": restarted.as_secs_f64(),
                       "occ_fresh_s": occ_fresh.last(), "occ_redeploy_s": occ_redeploy.last()})
            );
        }
        stop.send(true).unwrap();
        running.await.unwrap().unwrap();

        let rows = [
            ("fresh Agent", median(raw_fresh), median(occ_fresh)),
            ("redeploy", median(raw_restart), median(occ_redeploy)),
        ];
        println!();
        println!("| case | raw (median s) | occ deploy → active (median s) | occ overhead |");
        println!("|---|---:|---:|---:|");
        for (case, raw, occ) in rows {
            println!(
                "| {case} | {raw:.2} | {occ:.2} | {:+.2} s ({:+.0}%) |",
                occ - raw,
                100.0 * (occ - raw) / raw
            );
        }
    });
}
