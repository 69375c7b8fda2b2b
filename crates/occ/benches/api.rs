#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! End-to-end API latency: the real `occ serve` binary (release build) as a child process on
//! PostgreSQL (over TCP and over its Unix socket) and on SQLite, driven over HTTP/1.1 by 32 concurrent keep-alive clients.
//!
//! Measured per backend:
//! - `floor`: an unauthenticated `GET /installation` (401 before any database work) — the
//!   HTTP stack, framing middleware and load generator alone, the baseline of the run;
//! - `get agent`: `GET /namespaces/{ns}/agents/{id}` with a service key (key lookup, policy
//!   snapshot, authorization, read);
//! - `deploy`: `POST /namespaces/{ns}/agents/{id}/deploy` (the whole admission transaction),
//!   each client deploying its own Agent;
//! - `create configuration`: `POST /namespaces/{ns}/configurations` with the realistic document
//!   of `crates/occ-core/testdata/openclaw-documents.json` (native validation against the
//!   pinned runtime's schema, the Driver's write, the transaction), next to its baseline: the
//!   same document as the configuration of an unbundled plugin, which the schema leaves
//!   free-form — the same bytes parsed, walked, written and committed, without the schema's work.
//!
//! Run: `cargo bench -p occ --bench api` (optionally `-- --seconds 10 --clients 32`, and
//! `--backend sqlite` or `--load configuration` to run only the rows whose names contain that).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use occ_core::resource::NamespaceStatus;
use occ_store::{Backend, Store, StoreOptions};
use occ_testkit::TestDb;
use serde_json::{Value, json};

struct Server {
    child: Child,
    origin: String,
    key: String,
    namespace: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn occ(args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_occ"))
        .args(args)
        .env("OCC_LOG", "warn")
        .status()
        .expect("run occ");
    assert!(status.success(), "occ {args:?} failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

async fn start(db: &TestDb) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let password = dir.path().join("password");
    std::fs::write(&password, "bench password 123").unwrap();
    let key_file = dir.path().join("key.json");
    occ(&[
        "bootstrap",
        "--database-url",
        &db.url,
        "--admin-password-file",
        password.to_str().unwrap(),
        "--service-key-file",
        key_file.to_str().unwrap(),
    ]);
    let key_json: Value = serde_json::from_slice(&std::fs::read(&key_file).unwrap()).unwrap();
    let key = key_json["data"]["key"].as_str().unwrap().to_owned();

    // The worker (not part of this measurement) would make `default` ready.
    let store = Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let mut tx = occ_testkit::begin_setup(&store).await;
    let ns = tx
        .namespace_list()
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.name.as_str() == "default")
        .expect("default namespace");
    tx.namespace_set_status(
        &ns.id,
        NamespaceStatus::Provisioning,
        NamespaceStatus::Ready,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    store.close().await;

    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_occ"))
        .arg("serve")
        .env("OCC_LOG", "warn")
        .env("OCC_DATABASE_URL", &db.url)
        .env("OCC_DATA_DIR", dir.path().join("data"))
        .env("OCC_AUTH_SECRET", "b".repeat(64))
        .env("OCC_HOST", "127.0.0.1")
        .env("OCC_PORT", port.to_string())
        .env("OCC_AUTH_BASE_URL", &origin)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn occ serve");
    let server = Server {
        child,
        origin,
        key,
        namespace: ns.id.to_string(),
        _dir: dir,
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while client
        .get(format!("{}/installation", server.origin))
        .send()
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "occ serve did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server
}

async fn setup_agents(server: &Server, client: &reqwest::Client, n: usize) -> Vec<String> {
    let base = format!("{}/namespaces/{}", server.origin, server.namespace);
    let cfg: Value = client
        .post(format!("{base}/configurations"))
        .header("x-api-key", &server.key)
        .json(&json!({"kind": "agent", "values": {"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cfg = cfg["data"]["id"]
        .as_str()
        .expect("configuration")
        .to_owned();
    let mut agents = Vec::new();
    for i in 0..n {
        let agent: Value = client
            .post(format!("{base}/agents"))
            .header("x-api-key", &server.key)
            .json(&json!({"name": format!("bench-{i}"), "configurationId": cfg, "harnessAuth": {"method": "runtime"}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        agents.push(agent["data"]["id"].as_str().expect("agent").to_owned());
    }
    agents
}

#[derive(Clone, Copy)]
enum Load {
    Floor,
    GetAgent,
    Deploy,
    /// Create a Configuration with this body.
    Create(&'static str),
}

struct Figures {
    requests_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

async fn drive(
    server: &Server,
    agents: &[String],
    load: Load,
    clients: usize,
    seconds: u64,
) -> Figures {
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let key = server.key.clone();
        let agent_url = format!(
            "{}/namespaces/{}/agents/{}",
            server.origin,
            server.namespace,
            agents[c % agents.len()]
        );
        let floor_url = format!("{}/installation", server.origin);
        let configurations_url = format!(
            "{}/namespaces/{}/configurations",
            server.origin, server.namespace
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            while Instant::now() < until {
                let t = Instant::now();
                let response = match load {
                    Load::Floor => client.get(&floor_url).send().await,
                    Load::GetAgent => {
                        client
                            .get(&agent_url)
                            .header("x-api-key", &key)
                            .send()
                            .await
                    }
                    Load::Deploy => {
                        client
                            .post(format!("{agent_url}/deploy"))
                            .header("x-api-key", &key)
                            .send()
                            .await
                    }
                    Load::Create(body) => {
                        client
                            .post(&configurations_url)
                            .header("x-api-key", &key)
                            .header("content-type", "application/json")
                            .body(body)
                            .send()
                            .await
                    }
                };
                let expected = match load {
                    Load::Floor => 401,
                    Load::GetAgent => 200,
                    Load::Deploy => 202,
                    Load::Create(_) => 201,
                };
                match response {
                    Ok(r) => {
                        let ok = r.status().as_u16() == expected;
                        let _ = r.bytes().await;
                        if ok {
                            latencies.push(t.elapsed());
                        } else {
                            errors += 1;
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        all.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    };
    Figures {
        requests_per_second: all.len() as f64 / elapsed,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        errors,
    }
}

fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn arg(name: &str, default: u64) -> u64 {
    arg_text(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Create bodies: the realistic document, and the same document where the schema leaves it
/// free-form (an unbundled plugin's configuration). Leaked once: every client sends them.
fn create_bodies() -> (&'static str, &'static str) {
    let cases: Vec<Value> = serde_json::from_str(include_str!(
        "../../occ-core/testdata/openclaw-documents.json"
    ))
    .expect("documents");
    let realistic = cases
        .into_iter()
        .find(|c| c["name"] == "realistic")
        .map(|c| c["document"].clone())
        .expect("the realistic document");
    let body = |values: Value| -> &'static str {
        json!({"kind": "agent", "values": values})
            .to_string()
            .leak()
    };
    (
        body(realistic.clone()),
        body(json!({"plugins": {"entries": {"occ-bench": {"config": realistic}}}})),
    )
}

fn main() {
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let seconds = arg("--seconds", 5);
    let clients = arg("--clients", 32) as usize;
    let only_backend = arg_text("--backend").unwrap_or_default();
    let only_load = arg_text("--load").unwrap_or_default();
    let (validated, baseline) = create_bodies();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut rows = Vec::new();
        // PostgreSQL twice: over loopback TCP and over its Unix socket (what a co-located
        // database should use; the kernel's TCP path is a large share of each round trip).
        for (backend_name, backend, unix_socket) in [
            ("postgres (tcp)", Backend::Postgres, false),
            ("postgres (unix socket)", Backend::Postgres, true),
            ("sqlite", Backend::Sqlite, false),
        ] {
            if !backend_name.contains(&only_backend) {
                continue;
            }
            let mut db = TestDb::new(backend).await;
            if unix_socket {
                let dir = occ_testkit::pg_cluster().dir.display().to_string();
                db.url = format!("{}?host={dir}", db.url.replace("127.0.0.1", "localhost"));
            }
            let server = start(&db).await;
            let setup = reqwest::Client::new();
            let agents = setup_agents(&server, &setup, clients).await;
            // warm the connection pools and caches
            drive(&server, &agents, Load::GetAgent, clients, 1).await;
            for (name, load) in [
                ("floor (401, no database)", Load::Floor),
                ("GET agent", Load::GetAgent),
                ("deploy admission", Load::Deploy),
                (
                    "create configuration, baseline: schema-free section",
                    Load::Create(baseline),
                ),
                ("create configuration, validated", Load::Create(validated)),
            ] {
                if !name.starts_with("floor") && !name.contains(&only_load) {
                    continue;
                }
                let f = drive(&server, &agents, load, clients, seconds).await;
                println!(
                    "{}",
                    json!({"backend": backend_name, "load": name, "clients": clients,
                           "rps": f.requests_per_second.round(), "p50_ms": f.p50_ms,
                           "p99_ms": f.p99_ms, "errors": f.errors})
                );
                rows.push((backend_name, name, f));
            }
            drop(server);
            drop(db);
        }
        println!();
        println!(
            "| backend | load | req/s | p50 ms | p99 ms | errors | req/s vs floor | req/s vs create baseline |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
        for (backend, load, f) in &rows {
            let floor = rows
                .iter()
                .find(|(b, l, _)| b == backend && l.starts_with("floor"))
                .map(|(_, _, f)| f.requests_per_second)
                .unwrap_or(f64::NAN);
            let create_baseline = rows
                .iter()
                .find(|(b, l, _)| b == backend && l.ends_with("schema-free section"))
                .map(|(_, _, f)| f.requests_per_second);
            let vs_create = match create_baseline {
                Some(base) if load.starts_with("create") => {
                    format!("{:.0}%", 100.0 * f.requests_per_second / base)
                }
                _ => String::new(),
            };
            println!(
                "| {backend} | {load} | {:.0} | {:.2} | {:.2} | {} | {:.0}% | {vs_create} |",
                f.requests_per_second,
                f.p50_ms,
                f.p99_ms,
                f.errors,
                100.0 * f.requests_per_second / floor
            );
        }
    });
}
