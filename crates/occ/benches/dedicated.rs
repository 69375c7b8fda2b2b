#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Deploy → active of a dedicated Agent next to an embedded one, in the same run, on the process
//! Compute Driver (prepare + activate, as the worker calls them), and the resident memory of the
//! dedicated Agent's harness (`occ harness-launch` with `codex app-server` and the node host)
//! next to its gateway's. The pinned runtime, real Codex, the test kit's fake model.
//!
//! Run: `cargo bench -p occ --bench dedicated` (optionally `-- --runs 3`). Each run deploys a
//! fresh embedded Agent, then a fresh dedicated Agent, alternating.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_core::resource::ExecutionMode;
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::{AgentTarget, Compute, RevisionContext, RevisionTarget, SecretText};
use occ_host::{DedicatedSettings, LocalSettings};
use occ_testkit::compute_conformance::{dedicated_revision, revision, targets};
use occ_testkit::fake_model::FakeModel;
use serde_json::json;

const MODEL: &str = "openai/gpt-5.6-sol";

fn runs() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn embedded(compute: &dyn Compute, agent: &AgentTarget) -> RevisionTarget {
    revision(
        compute,
        agent,
        1,
        json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
               "gateway": {"controlUi": {"enabled": false}}}),
    )
}

fn dedicated(compute: &dyn Compute, agent: &AgentTarget) -> RevisionTarget {
    dedicated_revision(
        compute,
        agent,
        1,
        json!({"gateway": {"controlUi": {"enabled": false}},
               "agents": {"defaults": {"model": MODEL, "skipBootstrap": true,
                   "models": {MODEL: {"agentRuntime": {"id": "codex"}}}}}}),
    )
}

/// The pids of `root` and every process below it.
fn tree(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parents.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    out
}

/// Resident memory (VmRSS, MiB) of a process tree.
fn rss_mib(root: u32) -> f64 {
    tree(root)
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        })
        .sum::<f64>()
        / 1024.0
}

fn record_pid(path: &Path) -> u32 {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("record")).expect("json");
    u32::try_from(record["pid"].as_u64().expect("pid")).expect("pid")
}

fn agent_dir(root: &Path, rev: &RevisionTarget) -> PathBuf {
    root.join("namespaces")
        .join(rev.agent.namespace_id.as_str())
        .join("agents")
        .join(rev.agent.agent_id.as_str())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runtime_root = tokio::task::spawn_blocking(|| {
        occ_testkit::runtime::shared_runtime();
        occ_testkit::runtime::runtime_root()
    })
    .await
    .expect("runtime");
    let model = FakeModel::start().await;
    let root = tempfile::tempdir().expect("root");
    let compute = ProcessCompute::new(ProcessSettings {
        host: LocalSettings {
            root: root.path().to_path_buf(),
            runtime_root,
            port_range: 29600..=29649,
            ready_timeout: Duration::from_secs(180),
            stop_timeout: Duration::from_secs(10),
            path: std::env::var_os("PATH").unwrap_or_default(),
        },
        sandbox: None,
        credential_proxy_port: None,
        maintenance_interval: None,
        dedicated: Some(DedicatedSettings {
            launcher: PathBuf::from(env!("CARGO_BIN_EXE_occ")),
            model_base_url: Some(model.base_url()),
            ready_timeout: Duration::from_secs(240),
        }),
    })
    .expect("driver");
    let (ns, _) = targets();
    compute.ensure_namespace(&ns).await.expect("namespace");
    let ctx = RevisionContext {
        harness_credential: Some(SecretText::new("sk-bench-0123456789abcdef".into())),
        ..RevisionContext::default()
    };
    let (mut embedded_s, mut dedicated_s) = (Vec::new(), Vec::new());
    let (mut gateway_mib, mut harness_mib, mut embedded_mib) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs() {
        for mode in [ExecutionMode::Embedded, ExecutionMode::Dedicated] {
            let agent = AgentTarget {
                namespace_id: ns.id.clone(),
                ..targets().1
            };
            let rev = match mode {
                ExecutionMode::Embedded => embedded(&compute, &agent),
                ExecutionMode::Dedicated => dedicated(&compute, &agent),
            };
            // The embedded gateway runs without a model credential (harnessAuth `runtime`).
            let ctx = match mode {
                ExecutionMode::Embedded => RevisionContext::default(),
                ExecutionMode::Dedicated => ctx.clone(),
            };
            let started = Instant::now();
            compute.prepare_revision(&rev, &ctx).await.expect("prepare");
            compute
                .activate_revision(&rev, &ctx)
                .await
                .expect("activate");
            let took = started.elapsed().as_secs_f64();
            // Settled: the gateway's startup work (plugins, catalog) is done.
            tokio::time::sleep(Duration::from_secs(10)).await;
            let dir = agent_dir(root.path(), &rev);
            let gateway = rss_mib(record_pid(&dir.join("gateway.json")));
            match mode {
                ExecutionMode::Embedded => {
                    embedded_s.push(took);
                    embedded_mib.push(gateway);
                }
                ExecutionMode::Dedicated => {
                    dedicated_s.push(took);
                    gateway_mib.push(gateway);
                    harness_mib.push(rss_mib(record_pid(&dir.join("harness.json"))));
                }
            }
            compute.delete_agent(&rev.agent).await.expect("delete");
        }
    }
    let (e, d) = (median(embedded_s), median(dedicated_s));
    println!(
        "deploy → active (prepare + activate), medians of {} run(s):",
        runs()
    );
    println!("  embedded Agent            {e:8.2} s");
    println!(
        "  dedicated Agent           {d:8.2} s   ({:.2}× embedded)",
        d / e
    );
    let (g, h, ge) = (
        median(gateway_mib),
        median(harness_mib),
        median(embedded_mib),
    );
    println!("resident memory (VmRSS of each process tree, 10 s after active):");
    println!("  embedded gateway          {ge:8.1} MiB");
    println!("  dedicated gateway         {g:8.1} MiB");
    println!(
        "  dedicated harness         {h:8.1} MiB   ({:.2}× its gateway)",
        h / g
    );
}
