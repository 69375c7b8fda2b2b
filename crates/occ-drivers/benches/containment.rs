#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! What containment costs on the process Compute Driver, contained (bubblewrap, the default)
//! next to `OCC_PROCESS_ISOLATION=none` in the same run, alternating which goes first:
//!
//! - deploy → active: `prepare_revision` + `activate_revision` of a fresh Agent (workspace
//!   seeding, snapshot, spawn, native `hello-ok`);
//! - a chat turn: the median of `--turns` native `agent` turns against the test kit's fake model
//!   (so the figure is the gateway's and the sandbox's, not a model's);
//! - memory: the resident set of the gateway's whole process group, and of the sandbox's own
//!   processes in it (the two `bwrap` processes and the two `occ sandbox-relay` of its private
//!   network: what each contained Agent adds).
//!
//! Goals (issue 32): ≤ 2% on deploy, ≤ 1 ms on a turn.
//!
//! Run: `cargo bench -p occ-drivers --bench containment` (optionally `-- --runs 3 --turns 20`).
//! Each figure is also printed as one JSON line `{"bench": "containment", "measure": …}`.

use std::path::Path;
use std::time::{Duration, Instant};

use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::{Compute as _, RevisionContext};
use occ_host::sandbox::{SandboxSettings, WorkloadLimits};
use occ_host::{LocalSettings, recorded_gateways};
use occ_testkit::compute_conformance::{chat_turn, revision, targets};
use occ_testkit::fake_model::FakeModel;
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark passes its own PATH as occ passes its own"
)]
fn driver(root: &Path, runtime_root: &Path, contained: bool, ports: u16) -> ProcessCompute {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let sandbox = contained.then(|| {
        SandboxSettings::locate(&path, WorkloadLimits::default())
            .expect("bubblewrap installed")
            // Its private network's relays, as `occ dev` and `occ worker` run them.
            .with_occ_program(occ_testkit::runtime::occ_binary())
    });
    ProcessCompute::new(ProcessSettings {
        host: LocalSettings {
            root: root.to_path_buf(),
            runtime_root: runtime_root.to_path_buf(),
            port_range: ports..=ports + 49,
            ready_timeout: Duration::from_secs(180),
            stop_timeout: Duration::from_secs(15),
            path,
        },
        sandbox,
        credential_proxy_port: None,
        maintenance_interval: None,
        dedicated: None,
    })
    .expect("driver")
}

/// `(pid, process group, resident KiB, command name)` of every process.
fn processes() -> Vec<(u32, u32, u64, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let name = stat
            .split_once('(')
            .and_then(|(_, rest)| rest.rsplit_once(')'))
            .map_or("", |(name, _)| name)
            .to_owned();
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        out.push((pid, pgrp, rss, name));
    }
    out
}

/// Resident MiB of the process group led by `leader`: all of it, and the sandbox's own
/// processes (`bwrap`, and the `occ` relays of its private network).
fn group_memory(leader: u32) -> (f64, f64) {
    let members: Vec<_> = processes()
        .into_iter()
        .filter(|(_, pgrp, _, _)| *pgrp == leader)
        .collect();
    let kib = |f: &dyn Fn(&str) -> bool| -> f64 {
        members
            .iter()
            .filter(|(_, _, _, name)| f(name))
            .map(|(_, _, rss, _)| *rss as f64)
            .sum::<f64>()
            / 1024.0
            + 0.0 // an empty sum is -0.0
    };
    (
        kib(&|_| true),
        kib(&|name| name == "bwrap" || name == "occ"),
    )
}

struct Sample {
    deploy: f64,
    turn_ms: f64,
    group_mib: f64,
    sandbox_mib: f64,
}

async fn one_agent(
    compute: &ProcessCompute,
    root: &Path,
    fake: &FakeModel,
    turns: usize,
) -> Sample {
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.expect("ensure");
    let document = fake.agent_document("sk-bench-0123456789");
    let rev = revision(compute, &agent, 1, document);
    let ctx = RevisionContext::default();
    let started = Instant::now();
    compute.prepare_revision(&rev, &ctx).await.expect("prepare");
    compute
        .activate_revision(&rev, &ctx)
        .await
        .expect("activate");
    let deploy = started.elapsed().as_secs_f64();
    // One turn to warm the session, then the measured ones.
    chat_turn(compute, &agent, "bench", "hello")
        .await
        .expect("turn");
    let mut times = Vec::new();
    for _ in 0..turns {
        let t = Instant::now();
        chat_turn(compute, &agent, "bench", "hello")
            .await
            .expect("turn");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let leader = recorded_gateways(root)
        .first()
        .map(|(pid, _)| *pid)
        .expect("a gateway runs");
    let (group_mib, sandbox_mib) = group_memory(leader);
    compute.stop_revision(&rev).await.expect("stop");
    compute.delete_agent(&agent).await.expect("delete");
    compute.delete_namespace(&ns).await.expect("delete ns");
    Sample {
        deploy,
        turn_ms: median(times),
        group_mib,
        sandbox_mib,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let runs = arg("--runs", 3);
    let turns = arg("--turns", 20);
    let runtime_root = {
        occ_testkit::runtime::shared_runtime();
        occ_testkit::runtime::runtime_root()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let fake = FakeModel::start().await;
        fake.reply("ok");
        let roots = [tempfile::tempdir().expect("root"), tempfile::tempdir().expect("root")];
        let drivers = [
            driver(roots[0].path(), &runtime_root, false, 29700),
            driver(roots[1].path(), &runtime_root, true, 29750),
        ];
        let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
        for run in 0..runs {
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let sample = one_agent(&drivers[i], roots[i].path(), &fake, turns).await;
                println!(
                    "{}",
                    json!({"run": run, "contained": i == 1, "deploy_s": sample.deploy,
                           "turn_ms": sample.turn_ms, "group_mib": sample.group_mib,
                           "sandbox_mib": sample.sandbox_mib})
                );
                samples[i].push(sample);
            }
        }
        let figure = |i: usize, f: &dyn Fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
        let rows: [(&str, &str, f64, f64); 4] = [
            ("deploy → active (s)", "deploy_s", figure(0, &|s| s.deploy), figure(1, &|s| s.deploy)),
            ("chat turn (ms)", "turn_ms", figure(0, &|s| s.turn_ms), figure(1, &|s| s.turn_ms)),
            (
                "gateway group resident (MiB)",
                "group_mib",
                figure(0, &|s| s.group_mib),
                figure(1, &|s| s.group_mib),
            ),
            (
                "sandbox processes resident (MiB)",
                "sandbox_mib",
                figure(0, &|s| s.sandbox_mib),
                figure(1, &|s| s.sandbox_mib),
            ),
        ];
        println!();
        println!("| median of {runs} runs | none | contained | difference |");
        println!("|---|---:|---:|---:|");
        for (name, measure, none, contained) in rows {
            let share = if none > 0.0 {
                format!(" ({:+.1}%)", 100.0 * (contained - none) / none)
            } else {
                String::new()
            };
            println!(
                "| {name} | {none:.2} | {contained:.2} | {:+.2}{share} |",
                contained - none
            );
            for (mode, value) in [("none", none), ("contained", contained)] {
                println!(
                    "{}",
                    json!({"bench": "containment", "measure": format!("{measure}_{mode}"), "value": value})
                );
            }
        }
    });
}
