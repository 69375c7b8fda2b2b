//! Node enrollment against a real gateway and a real node host (the pinned runtime):
//! setup code → `openclaw node run --pair-if-needed` → setup status → `node.describe`; then the
//! workspace binding the process Driver writes at activation (`bind_node_workspace`) is
//! hot-applied and `agents.files.*` read and write the node's workspace; then the node host is
//! killed and restarted without a code and reconnects with its saved device token.
//!
//! Ignored by default: it takes ~80 s under load (gateway cold start ~30 s, pairing ~9 s,
//! reconnect ~15 s); run it with `cargo test -p occ-gateway --test node_enrollment -- --ignored`.
//!
//! The gateway and the node host run in their own process groups and are stopped by PID (the
//! node host is two processes: the `node run` launcher and its `openclaw-node` child).
#![allow(clippy::print_stderr, reason = "timings for the test log")]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use occ_gateway::{
    GatewayError, NODE_COMMANDS, NodeEnrollment, NodeStatus, Session, SetupCompletion,
};
use occ_host::harness::render::{FILE_TRANSFER_PLUGIN_ID, NodeWorkspace, bind_node_workspace};
use occ_host::runtime::OpenclawRuntime;
use occ_testkit::gateway::TestGateway;
use serde_json::json;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);
/// Pairing after the node host starts (~7 s alone, much more on a loaded 2-core box).
const PAIR_DEADLINE: Duration = Duration::from_secs(90);
const NODE_STOP_GRACE: Duration = Duration::from_secs(10);

/// One `openclaw node run` in its own process group, stopped (group SIGTERM, then SIGKILL) on
/// drop.
struct NodeHost {
    child: Option<tokio::process::Child>,
    pid: u32,
    output: PathBuf,
}

impl NodeHost {
    /// Starts the node host against the gateway on `port` with its state under `dir`; with
    /// `setup_code` it pairs when it has no saved device token.
    fn spawn(runtime: &OpenclawRuntime, dir: &Path, port: u16, setup_code: Option<&str>) -> Self {
        let output = dir.join("node.out");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&output)
            .expect("node output");
        let mut cmd = runtime.command();
        cmd.args(["node", "run", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["--commands", &NODE_COMMANDS.join(",")]);
        if let Some(code) = setup_code {
            // Only in this test: the Driver must not put the code on argv (world-readable).
            cmd.args(["--pair-if-needed", code]);
        }
        for sub in ["home", "state", "tmp"] {
            fs::create_dir_all(dir.join(sub)).expect("node dirs");
        }
        cmd.env("HOME", dir.join("home"))
            .env("TMPDIR", dir.join("tmp"))
            .env("OPENCLAW_STATE_DIR", dir.join("state"))
            .env("OPENCLAW_NO_RESPAWN", "1")
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .env("OPENCLAW_DISABLE_BONJOUR", "1")
            .env("DO_NOT_TRACK", "1")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("output fd"))
            .stderr(out)
            .process_group(0);
        let child = cmd.spawn().expect("spawn openclaw node run");
        let pid = child.id().expect("node pid");
        NodeHost {
            child: Some(child),
            pid,
            output,
        }
    }

    fn signal_group(&self, signal: rustix::process::Signal) {
        let pid = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .expect("pid");
        let _ = rustix::process::kill_process_group(pid, signal);
    }

    fn group_alive(&self) -> bool {
        let pid = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .expect("pid");
        rustix::process::test_kill_process_group(pid).is_ok()
    }

    /// SIGKILL to the whole group, and waits until it is gone.
    async fn kill(&mut self) {
        self.signal_group(rustix::process::Signal::KILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait().await;
        }
        let deadline = Instant::now() + NODE_STOP_GRACE;
        while self.group_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            !self.group_alive(),
            "node host group {} survived SIGKILL",
            self.pid
        );
    }

    fn tail(&self) -> String {
        let text = fs::read_to_string(&self.output).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        text.get(start..).unwrap_or(&text).to_owned()
    }

    /// RSS (kB) of every process of the group.
    fn rss_kb(&self) -> Vec<(String, u64)> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|p| {
                let stat = fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                let (comm, rest) = stat.split_at(stat.rfind(')')? + 1);
                // pid (comm) state ppid pgrp …
                let pgrp: u32 = rest.split_whitespace().nth(2)?.parse().ok()?;
                if pgrp != self.pid {
                    return None;
                }
                let status = fs::read_to_string(format!("/proc/{p}/status")).ok()?;
                let rss = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))?
                    .trim()
                    .trim_end_matches(" kB")
                    .parse()
                    .ok()?;
                Some((
                    comm.split_once('(')?.1.trim_end_matches(')').to_owned(),
                    rss,
                ))
            })
            .collect()
    }
}

impl Drop for NodeHost {
    fn drop(&mut self) {
        if self.child.is_none() {
            return;
        }
        self.signal_group(rustix::process::Signal::TERM);
        let started = std::time::Instant::now();
        while self.group_alive() && started.elapsed() < NODE_STOP_GRACE {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.signal_group(rustix::process::Signal::KILL);
    }
}

/// Polls `probe` until it yields a value or `deadline` passes (then panics with `what` and
/// `context()`).
async fn eventually<T>(
    what: &str,
    deadline: Duration,
    context: impl Fn() -> String,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < until,
            "{what}: not within {deadline:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn describe(session: &mut Session, node_id: &str) -> NodeStatus {
    NodeEnrollment::new(session)
        .describe(node_id)
        .await
        .expect("node.describe")
}

async fn read_agents_md(session: &mut Session) -> Result<Option<String>, GatewayError> {
    session
        .file_get("main", "AGENTS.md", T)
        .await
        .map(|file| file.map(|f| f.content))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a real gateway and node host: ~80 s on a loaded 2-core box (run with --ignored)"]
async fn a_node_host_enrolls_serves_the_workspace_and_reconnects_after_a_restart() {
    let started = Instant::now();
    let runtime = tokio::task::spawn_blocking(occ_testkit::runtime::shared_runtime)
        .await
        .expect("runtime");
    // The allowlist is in the config before any setup code is issued; `plugins.allow` is
    // exclusive, as in a dedicated gateway, and must name `file-transfer`.
    let gateway = TestGateway::start_with(runtime, |config| {
        config["gateway"]["nodes"] = json!({"commands": {"allow": NODE_COMMANDS}});
        config["plugins"] = json!({"allow": [FILE_TRANSFER_PLUGIN_ID]});
    })
    .await;
    let gateway_ready = started.elapsed();
    let public_url = format!("ws://127.0.0.1:{}", gateway.port);
    let (mut session, _) = Session::connect(&gateway.endpoint, T)
        .await
        .expect("connect");

    // 1. A node-only setup code; nothing completed yet.
    let setup = NodeEnrollment::new(&mut session)
        .create_setup(&public_url)
        .await
        .expect("setup code");
    assert_eq!(
        NodeEnrollment::new(&mut session)
            .setup_status(&setup.setup_id)
            .await
            .expect("status"),
        None
    );

    // 2. The node host pairs with it.
    let node_dir = tempfile::Builder::new()
        .prefix("occ-node")
        .tempdir()
        .expect("node dir");
    let node_root = fs::canonicalize(node_dir.path()).expect("canonical node dir");
    let spawned = Instant::now();
    let mut node = NodeHost::spawn(
        runtime,
        &node_root,
        gateway.port,
        Some(setup.setup_code.expose_secret()),
    );
    let completion: SetupCompletion = eventually(
        "setup completion",
        PAIR_DEADLINE,
        || node.tail(),
        async || {
            NodeEnrollment::new(&mut session)
                .setup_status(&setup.setup_id)
                .await
                .expect("status")
        },
    )
    .await;
    let paired = spawned.elapsed();
    let node_id = completion.device_id.clone();
    let status = eventually(
        "node ready",
        PAIR_DEADLINE,
        || node.tail(),
        async || Some(describe(&mut session, &node_id).await).filter(NodeStatus::is_ready),
    )
    .await;
    let ready = spawned.elapsed();
    assert!(status.connected);
    let mut advertised = status.commands.clone();
    advertised.sort();
    let mut wanted = NODE_COMMANDS.map(str::to_owned).to_vec();
    wanted.sort();
    assert_eq!(advertised, wanted, "exactly the seven commands");
    let rss = node.rss_kb();

    // 3. The binding, hot-applied: the gateway's workspace files are the node's.
    let remote_root = node_root.join("workspace");
    fs::create_dir_all(&remote_root).expect("node workspace");
    fs::write(remote_root.join("AGENTS.md"), "# node side\n").expect("node AGENTS.md");
    let local = read_agents_md(&mut session).await.expect("local read");
    assert_ne!(
        local.as_deref(),
        Some("# node side\n"),
        "still local before the binding"
    );
    let remote_root_text = remote_root.to_str().expect("utf-8 path").to_owned();
    let bound = Instant::now();
    gateway.update_config(|config| {
        let map = config.as_object_mut().expect("config object");
        bind_node_workspace(
            map,
            &NodeWorkspace {
                node_id: &node_id,
                remote_root: &remote_root_text,
            },
        );
    });
    eventually(
        "reads from the node",
        Duration::from_secs(30),
        || gateway.output_tail(),
        async || {
            (read_agents_md(&mut session).await.ok().flatten().as_deref() == Some("# node side\n"))
                .then_some(())
        },
    )
    .await;
    let hot_applied = bound.elapsed();
    let written = session
        .file_set("main", "USER.md", "written through the gateway\n", None, T)
        .await
        .expect("write through the node");
    assert_eq!(
        fs::read_to_string(remote_root.join("USER.md")).expect("on the node"),
        "written through the gateway\n"
    );
    assert_ne!(
        fs::read_to_string(gateway.workspace.join("USER.md"))
            .ok()
            .as_deref(),
        Some("written through the gateway\n"),
        "not in the gateway's own (seeded) workspace"
    );
    let conflict = session
        .file_set("main", "USER.md", "x", Some(&"0".repeat(64)), T)
        .await
        .unwrap_err();
    assert_eq!(
        conflict,
        GatewayError::Conflict {
            current_hash: written.hash
        }
    );

    // 4. Killed, then restarted without a code: the saved device token reconnects it.
    node.kill().await;
    eventually(
        "node seen disconnected",
        Duration::from_secs(30),
        String::new,
        async || (!describe(&mut session, &node_id).await.connected).then_some(()),
    )
    .await;
    let err = read_agents_md(&mut session).await.unwrap_err();
    assert!(
        err.is_transient(),
        "no local fallback while the node is away: {err:?}"
    );
    let restarted = Instant::now();
    let node = NodeHost::spawn(runtime, &node_root, gateway.port, None);
    eventually(
        "node reconnected",
        PAIR_DEADLINE,
        || node.tail(),
        async || {
            describe(&mut session, &node_id)
                .await
                .is_ready()
                .then_some(())
        },
    )
    .await;
    let reconnected = restarted.elapsed();
    assert_eq!(
        read_agents_md(&mut session)
            .await
            .expect("read after reconnect")
            .as_deref(),
        Some("# node side\n")
    );

    session.close().await;
    drop(node);
    drop(gateway);
    eprintln!(
        "node enrollment: gateway ready {gateway_ready:?}, paired {paired:?} and ready {ready:?} \
         after the node host started, binding hot-applied in {hot_applied:?}, reconnected \
         {reconnected:?} after a restart without a code, node host RSS {rss:?}, total {:?}",
        started.elapsed()
    );
}
