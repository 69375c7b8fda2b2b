//! Workspace file operations against one real OpenClaw gateway (the pinned runtime), three
//! ways, in the same run:
//!
//! - `direct`: one `Session` kept open, `agents.files.get`/`set` called on it — the native
//!   round trip, the floor;
//! - `file_client`: `FileClient::read`/`write` (validation, pooled verified connection, grant
//!   check, outcome classification) — what occ's API does per request;
//! - `fresh_session`: `Session::connect` + call + `close` per operation — the reference
//!   controller's way (one new WebSocket and handshake per file operation).
//!
//! 200 sequential reads (AGENTS.md, ~6 KB) and 200 sequential writes (USER.md, ~1 KB) per way,
//! after 20 warm-up rounds; the three ways are interleaved (one operation each per round, the
//! order rotating). Prints one JSON line per series, the overhead of `file_client` over
//! `direct`, and a table.
//!
//! `cargo bench -p occ-gateway --bench files`
#![allow(clippy::print_stdout, reason = "benchmark output")]

use std::time::Duration;

use occ_gateway::{Endpoint, FileClient, ReadOutcome, Session, WriteOutcome};
use occ_testkit::gateway::TestGateway;
use serde_json::json;
use tokio::time::Instant;

const N: usize = 200;
const WARMUP: usize = 20;
const T: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Direct,
    FileClient,
    FreshSession,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::FileClient => "file_client",
            Mode::FreshSession => "fresh_session",
        }
    }
}

struct Series {
    op: Op,
    mode: Mode,
    samples: Vec<Duration>,
}

impl Series {
    fn pct(&self, p: f64) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        let i = ((s.len() as f64 - 1.0) * p).round() as usize;
        s[i]
    }

    fn mean(&self) -> Duration {
        self.samples.iter().sum::<Duration>() / self.samples.len() as u32
    }
}

fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6 * 10.0).round() / 10.0
}

fn content(i: usize) -> String {
    let mut text = format!("# USER.md\n\nbenchmark write {i}\n\n");
    while text.len() < 1024 {
        text.push_str("Notes about the user, preferences, time zone, projects.\n");
    }
    text
}

/// The per-mode state: the direct session and the client with its pooled connection.
struct Clients {
    direct: Session,
    client: FileClient,
}

/// One timed operation.
async fn once(
    endpoint: &Endpoint,
    clients: &mut Clients,
    op: Op,
    mode: Mode,
    i: usize,
) -> Duration {
    let text = content(i);
    let started = Instant::now();
    match (mode, op) {
        (Mode::Direct, Op::Read) => {
            clients
                .direct
                .file_get("main", "AGENTS.md", T)
                .await
                .expect("get")
                .expect("present");
        }
        (Mode::Direct, Op::Write) => {
            clients
                .direct
                .file_set("main", "USER.md", &text, None, T)
                .await
                .expect("set");
        }
        (Mode::FileClient, Op::Read) => {
            let outcome = clients
                .client
                .read(endpoint, "main", "AGENTS.md", Instant::now() + T)
                .await;
            assert!(matches!(outcome, ReadOutcome::Ok(_)), "{outcome:?}");
        }
        (Mode::FileClient, Op::Write) => {
            let outcome = clients
                .client
                .write(endpoint, "main", "USER.md", &text, Instant::now() + T)
                .await;
            assert!(matches!(outcome, WriteOutcome::Ok { .. }), "{outcome:?}");
        }
        (Mode::FreshSession, op) => {
            let (mut s, _) = Session::connect(endpoint, T).await.expect("connect");
            if op == Op::Read {
                s.file_get("main", "AGENTS.md", T)
                    .await
                    .expect("get")
                    .expect("present");
            } else {
                s.file_set("main", "USER.md", &text, None, T)
                    .await
                    .expect("set");
            }
            s.close().await;
        }
    }
    started.elapsed()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let runtime = occ_testkit::runtime::shared_runtime();
    rt.block_on(async {
        let mut gw = TestGateway::start(runtime).await;
        let hello = Session::connect(&gw.endpoint, T).await.expect("connect").1;
        let endpoint = gw.endpoint.clone();
        let mut clients = Clients {
            direct: Session::connect(&endpoint, T).await.expect("connect").0,
            client: FileClient::new(),
        };
        let modes = [Mode::Direct, Mode::FileClient, Mode::FreshSession];
        let mut all = Vec::new();
        for op in [Op::Read, Op::Write] {
            let mut series: Vec<Series> = modes
                .iter()
                .map(|&mode| Series {
                    op,
                    mode,
                    samples: Vec::with_capacity(N),
                })
                .collect();
            // Interleaved, the order rotating every iteration, so load changes on the box
            // (and the gateway's garbage collections) hit every mode alike.
            for i in 0..WARMUP + N {
                for k in 0..modes.len() {
                    let m = (i + k) % modes.len();
                    let took = once(&endpoint, &mut clients, op, modes[m], i).await;
                    if i >= WARMUP {
                        series[m].samples.push(took);
                    }
                }
            }
            all.extend(series);
        }
        assert_eq!(
            clients.client.stats().connections_opened,
            1,
            "one pooled connection throughout"
        );
        clients.direct.close().await;
        for s in &all {
            println!(
                "{}",
                json!({
                    "bench": "occ-gateway/files",
                    "gateway": hello.server_version,
                    "op": s.op.name(),
                    "mode": s.mode.name(),
                    "n": s.samples.len(),
                    "p50_us": us(s.pct(0.50)),
                    "p90_us": us(s.pct(0.90)),
                    "p99_us": us(s.pct(0.99)),
                    "mean_us": us(s.mean()),
                    "max_us": us(s.pct(1.0)),
                })
            );
        }
        let find = |op: Op, mode: Mode| {
            all.iter()
                .find(|s| s.op == op && s.mode == mode)
                .expect("series")
        };
        for op in [Op::Read, Op::Write] {
            let direct = find(op, Mode::Direct);
            let pooled = find(op, Mode::FileClient);
            let fresh = find(op, Mode::FreshSession);
            println!(
                "{}",
                json!({
                    "bench": "occ-gateway/files",
                    "op": op.name(),
                    "file_client_overhead_p50_us": us(pooled.pct(0.5)) - us(direct.pct(0.5)),
                    "file_client_overhead_p99_us": us(pooled.pct(0.99)) - us(direct.pct(0.99)),
                    "fresh_session_over_file_client_p50": (fresh.pct(0.5).as_secs_f64()
                        / pooled.pct(0.5).as_secs_f64() * 10.0).round() / 10.0,
                })
            );
        }
        println!();
        println!(
            "{:<6} {:<14} {:>10} {:>10} {:>10} {:>10}",
            "op", "mode", "p50 µs", "p90 µs", "p99 µs", "mean µs"
        );
        for s in &all {
            println!(
                "{:<6} {:<14} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                s.op.name(),
                s.mode.name(),
                us(s.pct(0.50)),
                us(s.pct(0.90)),
                us(s.pct(0.99)),
                us(s.mean())
            );
        }
        let report = gw.stop();
        println!("\ngateway {} stopped: {report:?}", hello.server_version);
    });
}
