#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Memory of the release `occ serve` and `occ worker` processes on PostgreSQL, with an empty
//! Installation (the baseline, same run) and with 10 000 Agents: resident set (VmRSS) and its
//! peak (VmHWM) after a workload — the API lists all Agents three times and reads 1 000 of them;
//! the worker serves three metrics scrapes (its gauges aggregate every Agent) and idles.
//!
//! Run: `cargo bench -p occ --bench footprint` (optionally `-- --agents 10000`).

use std::path::Path;
use std::time::Duration;

use occ_store::Backend;
use occ_testkit::TestDb;
use occ_testkit::occ_process::OccProcess;
use serde_json::{Value, json};

const OCC: &str = env!("CARGO_BIN_EXE_occ");

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// (VmRSS, VmHWM) in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Stack {
    api: OccProcess,
    worker: OccProcess,
    url: String,
    metrics: String,
}

fn start(db: &TestDb, dir: &Path, label: &str) -> Stack {
    let port = free_port();
    let metrics_port = free_port();
    let env: Vec<(String, String)> = [
        ("OCC_DATABASE_URL", db.url.clone()),
        ("OCC_DATA_DIR", dir.join("data").display().to_string()),
        (
            "OCC_AUTH_SECRET",
            "footprint-secret-0123456789abcdef0123".into(),
        ),
        ("OCC_PORT", port.to_string()),
        ("OCC_METRICS_ENABLED", "true".into()),
        ("OCC_METRICS_HOST", "127.0.0.1".into()),
        ("OCC_METRICS_PORT", metrics_port.to_string()),
        ("OCC_LOG", "warn,occ=info".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let api = OccProcess::spawn(
        OCC,
        &["serve"],
        &env,
        dir.join(format!("serve-{label}.log")),
        Some("occ API listening"),
        Duration::from_secs(30),
    );
    // the worker gets its own metrics port
    let mut worker_env = env.clone();
    let worker_metrics = free_port();
    for (k, v) in &mut worker_env {
        if k == "OCC_METRICS_PORT" {
            *v = worker_metrics.to_string();
        }
    }
    let worker = OccProcess::spawn(
        OCC,
        &["worker"],
        &worker_env,
        dir.join(format!("worker-{label}.log")),
        Some("worker.started"),
        Duration::from_secs(30),
    );
    Stack {
        api,
        worker,
        url: format!("http://127.0.0.1:{port}"),
        metrics: format!("http://127.0.0.1:{worker_metrics}/metrics"),
    }
}

async fn workload(stack: &Stack, http: &reqwest::Client, key: &str, ns: &str) -> (usize, usize) {
    let mut listed = 0;
    for _ in 0..3 {
        let list: Value = http
            .get(format!("{}/namespaces/{ns}/agents", stack.url))
            .header("x-api-key", key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed = list["data"].as_array().map_or(0, Vec::len);
    }
    if let Some(first) = listed.checked_sub(1) {
        let list: Value = http
            .get(format!("{}/namespaces/{ns}/agents", stack.url))
            .header("x-api-key", key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ids: Vec<String> = list["data"].as_array().unwrap()[..=first.min(999)]
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect();
        for id in ids {
            let r = http
                .get(format!("{}/namespaces/{ns}/agents/{id}", stack.url))
                .header("x-api-key", key)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }
    }
    let mut scraped = 0;
    for _ in 0..3 {
        let text = http
            .get(&stack.metrics)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        scraped = text.len();
        assert!(text.contains("occ_agents"), "{text}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    (listed, scraped)
}

fn main() {
    let agents = arg("--agents", 10_000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = TestDb::new(Backend::Postgres).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "footprint password 1").unwrap();
        let key_file = dir.path().join("key.json");
        let out = std::process::Command::new(OCC)
            .args(["bootstrap", "--database-url", &db.url, "--admin-password-file"])
            .arg(dir.path().join("pw"))
            .arg("--service-key-file")
            .arg(&key_file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let key: Value = serde_json::from_slice(&std::fs::read(&key_file).unwrap()).unwrap();
        let key = key["data"]["key"].as_str().unwrap().to_owned();
        let http = reqwest::Client::new();

        // Baseline: an empty Installation.
        let stack = start(&db, dir.path(), "empty");
        let ns = loop {
            let list: Value = http
                .get(format!("{}/namespaces", stack.url))
                .header("x-api-key", &key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let default = list["data"][0].clone();
            if default["status"] == "ready" {
                break default["id"].as_str().unwrap().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        workload(&stack, &http, &key, &ns).await;
        let empty_api = memory(stack.api.pid());
        let empty_worker = memory(stack.worker.pid());

        // 10 000 Agents, created through the API.
        let cfg: Value = http
            .post(format!("{}/namespaces/{ns}/configurations", stack.url))
            .header("x-api-key", &key)
            .json(&json!({"kind": "agent", "values": {"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let cfg = cfg["data"]["id"].as_str().unwrap().to_owned();
        let created = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for t in 0..8 {
            let (http, url, key, ns, cfg, created) = (
                http.clone(),
                stack.url.clone(),
                key.clone(),
                ns.clone(),
                cfg.clone(),
                created.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for i in (t..agents).step_by(8) {
                    let r = http
                        .post(format!("{url}/namespaces/{ns}/agents"))
                        .header("x-api-key", &key)
                        .json(&json!({"name": format!("agent-{i}"), "configurationId": cfg, "harnessAuth": {"method": "runtime"}}))
                        .send()
                        .await
                        .unwrap();
                    assert!(r.status().is_success());
                    created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        drop(stack);

        // Fresh processes over 10 000 Agents.
        let stack = start(&db, dir.path(), "full");
        let (listed, scraped) = workload(&stack, &http, &key, &ns).await;
        assert_eq!(listed, agents);
        let full_api = memory(stack.api.pid());
        let full_worker = memory(stack.worker.pid());
        println!(
            "{}",
            json!({"agents": agents, "metrics_bytes": scraped,
                   "serve_empty_rss_mib": empty_api.0, "serve_empty_peak_mib": empty_api.1,
                   "serve_rss_mib": full_api.0, "serve_peak_mib": full_api.1,
                   "worker_empty_rss_mib": empty_worker.0, "worker_empty_peak_mib": empty_worker.1,
                   "worker_rss_mib": full_worker.0, "worker_peak_mib": full_worker.1})
        );
        println!();
        println!("| process | empty: RSS / peak MiB | {agents} Agents: RSS / peak MiB | peak vs empty |");
        println!("|---|---:|---:|---:|");
        for (name, empty, full) in [
            ("occ serve", empty_api, full_api),
            ("occ worker", empty_worker, full_worker),
        ] {
            println!(
                "| {name} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1}× |",
                empty.0,
                empty.1,
                full.0,
                full.1,
                full.1 / empty.1
            );
        }
        drop(stack);
    });
}
