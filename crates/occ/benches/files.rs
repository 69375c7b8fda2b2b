#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Workspace-file latency through occ next to the same operation made directly against the
//! gateway, in the same run, on one real OpenClaw gateway (process Compute Driver).
//!
//! The real `occ serve` and `occ worker` binaries run as processes on a throwaway database
//! (SQLite by default, `--backend postgres` for PostgreSQL); one Agent is deployed. Then, per
//! round, each way reads `AGENTS.md` and writes `USER.md` (~1 KiB), sequentially, in an order
//! that rotates every round:
//!
//! - `occ API`: `GET`/`PUT /namespaces/{ns}/agents/{agt}/workspace/files/{name}` with a service
//!   key, over one keep-alive HTTP/1.1 connection (authentication, authorization, the Agent
//!   read, the audit event of a write, occ's pooled gateway connection);
//! - `direct: session`: a native [`Session`] kept open (`agents.files.get`/`set`) — the floor;
//! - `direct: FileClient`: occ's pooled [`FileClient`] in the bench process;
//! - `direct: connect per op`: a fresh [`Session::connect`] (WebSocket + `connect` handshake),
//!   the call and the close per operation, as the reference controller does.
//!
//! occ's overhead = occ p50 − session p50 (goal ≤ 3 ms), per operation.
//!
//! Run: `cargo bench -p occ --bench files` (optionally `-- --ops 200 --warmup 20 --backend
//! postgres`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use occ_gateway::{Endpoint, FileClient, ReadOutcome, Session, WriteOutcome};
use occ_store::Backend;
use serde_json::{Value, json};
use support::Stack;

/// The gateway ports of this bench's process Driver (no other test or bench uses them).
const PORTS: &str = "29700-29749";
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// The native agent of occ's gateways.
const NATIVE_AGENT: &str = "main";
const READ_FILE: &str = "AGENTS.md";
const WRITE_FILE: &str = "USER.md";
const GOAL_MS: f64 = 3.0;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn arg_usize(name: &str, default: usize) -> usize {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The stack of the end-to-end tests (database, `occ serve`, `occ worker`, cleanup by PID), one
/// Agent deployed on it. Returns the stack and the Agent's id.
async fn deploy_agent(backend: Backend) -> (Stack, String) {
    let stack = Stack::start(backend, PORTS).await;
    let doc = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}});
    let cfg = stack.configuration(doc).await;
    let agent = stack.agent("files-bench", &cfg).await;
    let started = Instant::now();
    let rev = stack.deploy(&agent).await;
    let d = stack.settled(&agent, &rev).await;
    assert_eq!(d["status"], "succeeded", "deployment failed: {d}");
    println!(
        "{}",
        json!({"setup": "deployed", "deploy_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0})
    );
    (stack, agent)
}

/// The Agent's gateway as the process Driver recorded it: port and token.
fn gateway_endpoint(agent_dir: &Path) -> Endpoint {
    let record: Value = serde_json::from_slice(
        &std::fs::read(agent_dir.join("gateway.json")).expect("gateway.json"),
    )
    .expect("gateway.json is JSON");
    let port = u16::try_from(record["port"].as_u64().expect("port")).expect("port");
    let token = std::fs::read_to_string(agent_dir.join("gateway-token")).expect("gateway-token");
    Endpoint::loopback(port, token.trim())
}

/// ~1 KiB of Markdown, distinct per write.
fn user_md(tag: &str) -> String {
    let mut s = format!("# USER.md\n\nfiles bench write {tag}\n\n");
    while s.len() < 1024 {
        s.push_str("The quick brown fox jumps over the lazy dog.\n");
    }
    s.truncate(1023);
    s.push('\n');
    s
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Occ,
    Session,
    FileClient,
    ConnectPerOp,
}

impl Way {
    const ALL: [Way; 4] = [Way::Occ, Way::Session, Way::FileClient, Way::ConnectPerOp];

    fn name(self) -> &'static str {
        match self {
            Way::Occ => "occ API (HTTP keep-alive)",
            Way::Session => "direct: session kept open",
            Way::FileClient => "direct: FileClient (pooled)",
            Way::ConnectPerOp => "direct: connect + call + close per op",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Way::Occ => "occ_api",
            Way::Session => "direct_session",
            Way::FileClient => "direct_file_client",
            Way::ConnectPerOp => "direct_connect_per_op",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Put,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Put => "PUT",
        }
    }
}

struct Clients {
    http: reqwest::Client,
    url_read: String,
    url_write: String,
    key: String,
    endpoint: Endpoint,
    session: Session,
    files: FileClient,
}

impl Clients {
    /// One operation; the elapsed time from the first byte sent to the checked answer (for
    /// `connect per op`, through the close).
    async fn run(&mut self, way: Way, op: Op, content: &str) -> Duration {
        let started = Instant::now();
        match (way, op) {
            (Way::Occ, Op::Get) => {
                let res = self
                    .http
                    .get(&self.url_read)
                    .header("x-api-key", &self.key)
                    .send()
                    .await
                    .expect("occ GET");
                let status = res.status();
                let body = res.bytes().await.expect("occ GET body");
                assert!(status.is_success(), "occ GET: {status}");
                assert!(!body.is_empty());
            }
            (Way::Occ, Op::Put) => {
                let body = serde_json::to_vec(&json!({"content": content})).unwrap();
                let res = self
                    .http
                    .put(&self.url_write)
                    .header("x-api-key", &self.key)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .expect("occ PUT");
                let status = res.status();
                let body = res.bytes().await.expect("occ PUT body");
                assert!(
                    status.is_success(),
                    "occ PUT: {status} {}",
                    String::from_utf8_lossy(&body)
                );
            }
            (Way::Session, Op::Get) => {
                let file = self
                    .session
                    .file_get(NATIVE_AGENT, READ_FILE, OP_TIMEOUT)
                    .await
                    .expect("session get");
                assert!(file.is_some(), "{READ_FILE} is missing");
            }
            (Way::Session, Op::Put) => {
                self.session
                    .file_set(NATIVE_AGENT, WRITE_FILE, content, None, OP_TIMEOUT)
                    .await
                    .expect("session set");
            }
            (Way::FileClient, Op::Get) => {
                let outcome = self
                    .files
                    .read(
                        &self.endpoint,
                        NATIVE_AGENT,
                        READ_FILE,
                        tokio::time::Instant::now() + OP_TIMEOUT,
                    )
                    .await;
                assert!(matches!(outcome, ReadOutcome::Ok(_)), "{outcome:?}");
            }
            (Way::FileClient, Op::Put) => {
                let outcome = self
                    .files
                    .write(
                        &self.endpoint,
                        NATIVE_AGENT,
                        WRITE_FILE,
                        content,
                        tokio::time::Instant::now() + OP_TIMEOUT,
                    )
                    .await;
                assert!(matches!(outcome, WriteOutcome::Ok { .. }), "{outcome:?}");
            }
            (Way::ConnectPerOp, op) => {
                let (mut session, _) = Session::connect(&self.endpoint, OP_TIMEOUT)
                    .await
                    .expect("connect");
                match op {
                    Op::Get => {
                        let file = session
                            .file_get(NATIVE_AGENT, READ_FILE, OP_TIMEOUT)
                            .await
                            .expect("get");
                        assert!(file.is_some(), "{READ_FILE} is missing");
                    }
                    Op::Put => {
                        session
                            .file_set(NATIVE_AGENT, WRITE_FILE, content, None, OP_TIMEOUT)
                            .await
                            .expect("set");
                    }
                }
                session.close().await;
            }
        }
        started.elapsed()
    }
}

struct Figures {
    ops: usize,
    p50: f64,
    p99: f64,
    mean: f64,
    min: f64,
    max: f64,
}

/// Nearest-rank percentiles, in milliseconds.
fn figures(samples: &[Duration]) -> Figures {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
        ms[i]
    };
    Figures {
        ops: ms.len(),
        p50: rank(0.50),
        p99: rank(0.99),
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
        min: ms[0],
        max: ms[ms.len() - 1],
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn main() {
    let ops = arg_usize("--ops", 200).max(1);
    let warmup = arg_usize("--warmup", 20);
    let (backend, backend_name) = match arg("--backend").as_deref() {
        None | Some("sqlite") => (Backend::Sqlite, "sqlite"),
        Some("postgres") => (Backend::Postgres, "postgres"),
        Some(other) => panic!("--backend sqlite|postgres, not {other}"),
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (stack, agent) = deploy_agent(backend).await;
        let ns = stack.ns.clone();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let agent_dir = stack.agent_dir(&agent);
        let endpoint = gateway_endpoint(&agent_dir);
        let (session, _) = Session::connect(&endpoint, OP_TIMEOUT)
            .await
            .expect("connect to the gateway");
        let files_base = format!(
            "{}/namespaces/{ns}/agents/{agent}/workspace/files",
            stack.url
        );
        let mut clients = Clients {
            http: http.clone(),
            url_read: format!("{files_base}/{READ_FILE}"),
            url_write: format!("{files_base}/{WRITE_FILE}"),
            key: stack.key.clone(),
            endpoint,
            session,
            files: FileClient::new(),
        };

        // Both sides see the same file.
        let through_occ = stack
            .get(&format!(
                "/namespaces/{ns}/agents/{agent}/workspace/files/{READ_FILE}"
            ))
            .await;
        let direct = clients
            .session
            .file_get(NATIVE_AGENT, READ_FILE, OP_TIMEOUT)
            .await
            .unwrap()
            .expect(READ_FILE);
        assert_eq!(through_occ["data"]["content"], direct.content.as_str());

        // Warm-up, then the measured rounds; the order of the ways rotates every round.
        let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(ops); Way::ALL.len() * 2];
        let mut last_written = String::new();
        for round in 0..warmup + ops {
            for op in [Op::Get, Op::Put] {
                for k in 0..Way::ALL.len() {
                    let w = (round + k) % Way::ALL.len();
                    let way = Way::ALL[w];
                    let content = user_md(&format!("{} round {round}", way.key()));
                    let elapsed = clients.run(way, op, &content).await;
                    if op == Op::Put {
                        last_written = content;
                    }
                    if round >= warmup {
                        samples[w * 2 + usize::from(op == Op::Put)].push(elapsed);
                    }
                }
            }
        }

        // The last write is what the gateway serves.
        let user = clients
            .session
            .file_get(NATIVE_AGENT, WRITE_FILE, OP_TIMEOUT)
            .await
            .unwrap()
            .expect(WRITE_FILE);
        assert_eq!(user.content, last_written);
        let pool = clients.files.stats();
        let Clients { session, .. } = clients;
        session.close().await;

        let fig = |way: Way, op: Op| {
            let w = Way::ALL.iter().position(|x| *x == way).unwrap();
            figures(&samples[w * 2 + usize::from(op == Op::Put)])
        };
        for op in [Op::Get, Op::Put] {
            for way in Way::ALL {
                let f = fig(way, op);
                println!(
                    "{}",
                    json!({"backend": backend_name, "op": op.name(), "way": way.key(),
                           "ops": f.ops, "p50_ms": round2(f.p50), "p99_ms": round2(f.p99),
                           "mean_ms": round2(f.mean), "min_ms": round2(f.min),
                           "max_ms": round2(f.max)})
                );
            }
        }
        let mut overheads = Vec::new();
        for op in [Op::Get, Op::Put] {
            let occ = fig(Way::Occ, op);
            let direct = fig(Way::Session, op);
            let pooled = fig(Way::FileClient, op);
            let overhead = occ.p50 - direct.p50;
            println!(
                "{}",
                json!({"backend": backend_name, "op": op.name(),
                       "occ_p50_ms": round2(occ.p50), "direct_session_p50_ms": round2(direct.p50),
                       "overhead_p50_ms": round2(overhead),
                       "overhead_vs_file_client_p50_ms": round2(occ.p50 - pooled.p50),
                       "goal_ms": GOAL_MS, "goal_met": overhead <= GOAL_MS})
            );
            overheads.push((op, occ.p50, direct.p50, overhead));
        }
        println!(
            "{}",
            json!({"file_client_connections_opened": pool.connections_opened,
                   "file_client_requests_written": pool.requests_written,
                   "file_client_stale_retries": pool.stale_retries})
        );

        println!();
        println!(
            "backend {backend_name}; {ops} sequential ops per series after {warmup} warm-up rounds; GET {READ_FILE}, PUT {WRITE_FILE} (1 KiB)"
        );
        println!();
        println!("| op | way | p50 ms | p99 ms | mean ms | p50 − session p50 |");
        println!("|---|---|---:|---:|---:|---:|");
        for op in [Op::Get, Op::Put] {
            let floor = fig(Way::Session, op).p50;
            for way in Way::ALL {
                let f = fig(way, op);
                println!(
                    "| {} | {} | {:.2} | {:.2} | {:.2} | {:+.2} |",
                    op.name(),
                    way.name(),
                    f.p50,
                    f.p99,
                    f.mean,
                    f.p50 - floor
                );
            }
        }
        println!();
        for (op, occ, direct, overhead) in overheads {
            println!(
                "occ overhead at p50, {}: {occ:.2} − {direct:.2} = {overhead:.2} ms (goal ≤ {GOAL_MS:.0} ms: {})",
                op.name(),
                if overhead <= GOAL_MS { "met" } else { "not met" }
            );
        }
        drop(stack);
    });
}
