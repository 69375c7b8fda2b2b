#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Runtime logs through occ next to reading the same file directly, in the same run, on one
//! real OpenClaw gateway (process Compute Driver, real `occ serve` and `occ worker` on a
//! throwaway SQLite database).
//!
//! - **A 1000-line page.** The Agent's captured output gets 1000 OpenClaw-style JSON lines
//!   (~300 bytes each, some with credentials to redact). Each round, in alternating order:
//!   `occ API` asks `GET …/runtime/logs?source=gateway&tailLines=1000` over one keep-alive
//!   connection (authentication, authorization, the access audit event of a new view, the
//!   Driver's bounded read, classification, redaction, JSON); `direct` reads the last 1000
//!   lines of the same file in this process (open, read the last MiB, split). The rounds are
//!   paced at the route's per-caller rate (2 reads/s) so that no read waits for the limiter.
//! - **Follow delay.** `occ agent logs AGENT -f` (the CLI, polling with the cursor) and
//!   `tail -F -n 0` on the file (inotify: the floor) run side by side; every ~0.7 s a numbered
//!   line is appended; the delay is from the write to the line appearing on each one's stdout.
//!
//! Run: `cargo bench -p occ --bench logs` (optionally `-- --pages 100 --lines 30`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use occ_store::Backend;
use serde_json::json;
use support::Stack;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// The gateway ports of this bench's process Driver (no test or other bench uses them).
const PORTS: &str = "29870-29889";
const PAGE_LINES: usize = 1000;
/// The logs route's refill rate per caller (`occ-controller`'s limiter): reads are paced to it.
const PACE: Duration = Duration::from_millis(520);

fn arg_usize(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn summary(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 50.0), percentile(&samples, 99.0))
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// A line as OpenClaw's JSON file logger writes it; every tenth carries a credential.
fn openclaw_line(n: usize) -> String {
    let message = if n.is_multiple_of(10) {
        format!("provider call {n} with key sk-bench{n:0>32} failed, retrying")
    } else {
        format!("handled request {n} for channel main in 12 ms; queue depth 0, sessions 1")
    };
    json!({
        "0": message,
        "_meta": {"runtime": "node", "runtimeVersion": "24.11.1", "hostname": "bench",
                  "name": "{\"subsystem\":\"gateway\"}", "parentNames": ["openclaw"],
                  "date": "2026-12-02T03:04:05.678Z", "logLevelId": 3, "logLevelName": "INFO"},
        "time": "2026-12-02T03:04:05.678Z",
    })
    .to_string()
}

/// The last `lines` complete lines of the file, read as the Driver bounds it (the last MiB).
fn tail_directly(path: &Path, lines: usize) -> Vec<String> {
    let mut file = std::fs::File::open(path).expect("log");
    let len = file.metadata().expect("metadata").len();
    let from = len.saturating_sub(1024 * 1024);
    file.seek(SeekFrom::Start(from)).expect("seek");
    let mut bytes = Vec::with_capacity((len - from) as usize);
    file.read_to_end(&mut bytes).expect("read");
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect()
}

fn append(path: &Path, text: &str) {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("log");
    log.write_all(text.as_bytes()).expect("append");
}

async fn pages(stack: &Stack, agent: &str, rev: &str, log: &Path, rounds: usize) {
    let mut body = String::new();
    for n in 0..PAGE_LINES {
        body.push_str(&openclaw_line(n));
        body.push('\n');
    }
    append(log, &body);
    let url = format!(
        "{}/namespaces/{}/agents/{agent}/deployments/{rev}/runtime/logs?source=gateway&tailLines={PAGE_LINES}",
        stack.url, stack.ns
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .expect("client");
    let (mut through_occ, mut direct) = (Vec::new(), Vec::new());
    let mut records = 0;
    for round in 0..rounds + 3 {
        let paced = Instant::now();
        let occ_read = async || {
            let started = Instant::now();
            let res = http
                .get(&url)
                .header("x-api-key", &stack.key)
                .send()
                .await
                .expect("logs");
            assert_eq!(res.status(), 200, "logs page");
            let page: serde_json::Value = res.json().await.expect("json");
            let elapsed = started.elapsed().as_secs_f64() * 1000.0;
            (
                elapsed,
                page["data"]["records"].as_array().map_or(0, Vec::len),
            )
        };
        let direct_read = || {
            let started = Instant::now();
            let lines = tail_directly(log, PAGE_LINES);
            (started.elapsed().as_secs_f64() * 1000.0, lines.len())
        };
        let ((occ_ms, occ_records), (direct_ms, direct_lines)) = if round % 2 == 0 {
            let o = occ_read().await;
            (o, direct_read())
        } else {
            let d = direct_read();
            (occ_read().await, d)
        };
        assert_eq!(direct_lines, PAGE_LINES);
        // The first rounds warm connections and caches.
        if round >= 3 {
            through_occ.push(occ_ms);
            direct.push(direct_ms);
            records = occ_records;
        }
        tokio::time::sleep(PACE.saturating_sub(paced.elapsed())).await;
    }
    assert_eq!(records, PAGE_LINES, "a page holds the 1000 lines");
    let (occ50, occ99) = summary(through_occ);
    let (d50, d99) = summary(direct);
    println!(
        "{}",
        json!({"bench": "page of 1000 lines", "rounds": rounds,
               "occ_p50_ms": round2(occ50), "occ_p99_ms": round2(occ99),
               "direct_p50_ms": round2(d50), "direct_p99_ms": round2(d99),
               "ratio_p50": round2(occ50 / d50)})
    );
}

/// A child whose stdout lines are timestamped as they arrive.
struct Reader {
    child: Child,
    seen: tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
}

impl Reader {
    fn spawn(mut command: Command, stderr: &Path) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).expect("stderr file"))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn reader");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send((line, Instant::now())).is_err() {
                    break;
                }
            }
        });
        Self { child, seen }
    }

    /// When each `follow-N` line arrived.
    fn arrivals(&mut self) -> HashMap<usize, Instant> {
        let mut at = HashMap::new();
        while let Ok((line, when)) = self.seen.try_recv() {
            if let Some(n) = line
                .split("follow-")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
            {
                at.entry(n).or_insert(when);
            }
        }
        at
    }
}

async fn follow(stack: &Stack, agent: &str, log: &Path, lines: usize) {
    let mut cli = Command::new(support::OCC);
    cli.args(["agent", "logs", agent, "-f", "--tail", "1"])
        .env_clear()
        .env("OCC_URL", &stack.url)
        .env("OCC_SERVICE_KEY_FILE", stack.dir.path().join("key.json"))
        .env("OCC_NAMESPACE", &stack.ns)
        .env("NO_COLOR", "1");
    let cli_stderr = stack.dir.path().join("cli-follow.stderr");
    let mut through_occ = Reader::spawn(cli, &cli_stderr);
    let mut tail = Command::new("tail");
    tail.args(["-F", "-n", "0"]).arg(log);
    let mut direct = Reader::spawn(tail, &stack.dir.path().join("tail.stderr"));
    // Both are reading before the first numbered line.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut written = Vec::new();
    for n in 0..lines {
        written.push(Instant::now());
        append(
            log,
            &format!(
                "{}\n",
                // line 1 has no credential: the marker is never redacted
                openclaw_line(1).replace("handled request 1", &format!("follow-{n} handled"))
            ),
        );
        // Not in step with the CLI's poll.
        tokio::time::sleep(Duration::from_millis(700 + (n as u64 * 137) % 400)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delays = |arrivals: HashMap<usize, Instant>, who: &str| -> Vec<f64> {
        (0..lines)
            .map(|n| {
                let at = arrivals.get(&n).unwrap_or_else(|| {
                    panic!(
                        "{who} never showed line {n}; its stderr: {}",
                        std::fs::read_to_string(&cli_stderr).unwrap_or_default()
                    )
                });
                at.duration_since(written[n]).as_secs_f64() * 1000.0
            })
            .collect()
    };
    let (occ50, occ99) = summary(delays(through_occ.arrivals(), "occ agent logs -f"));
    let (d50, d99) = summary(delays(direct.arrivals(), "tail -F"));
    for reader in [&mut through_occ, &mut direct] {
        reader.child.kill().await.expect("stop reader");
    }
    println!(
        "{}",
        json!({"bench": "follow delay", "lines": lines,
               "occ_cli_p50_ms": round2(occ50), "occ_cli_p99_ms": round2(occ99),
               "tail_f_p50_ms": round2(d50), "tail_f_p99_ms": round2(d99)})
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = arg_usize("--pages", 100);
    let lines = arg_usize("--lines", 30);
    let stack = Stack::start(Backend::Sqlite, PORTS).await;
    let doc = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}});
    let cfg = stack.configuration(doc).await;
    let agent = stack.agent("logs-bench", &cfg).await;
    let rev = stack.deploy(&agent).await;
    let d = stack.settled(&agent, &rev).await;
    assert_eq!(d["status"], "succeeded", "deployment failed: {d}");
    let log: PathBuf = stack.gateway_log(&agent, &rev);
    pages(&stack, &agent, &rev, &log, rounds).await;
    follow(&stack, &agent, &log, lines).await;
}
