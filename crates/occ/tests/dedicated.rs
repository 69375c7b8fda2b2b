//! Dedicated execution on the process Compute Driver, against real parts: the pinned gateway with
//! the Codex plugin, `occ harness-launch` (this binary) running the real `codex app-server` and
//! the OpenClaw node host, and the test kit's fake model (an OpenAI-compatible Responses
//! endpoint, `OCC_CODEX_BASE_URL`).
//!
//! The dedicated case of the Compute conformance suite
//! (`occ_testkit::compute_conformance::dedicated_lifecycle`: deploy, the probe turn with the
//! Agent's key, node enrollment, workspace files in the harness's workspace, a chat turn through
//! the app-server, redeploy reusing the node, a refused key failing permanently with
//! `RUNTIME_AUTHENTICATION_FAILED`, delete), plus what only this Driver shows: the key goes
//! through occ's credential proxy, so neither the gateway nor the harness holds it (environment,
//! argv, any file under the Agent's directory: the harness's private credential file and Codex's
//! login store hold the proxy's placeholder, and the runtime report says so), the plugin is trusted without a load path, a SIGKILLed harness is reported,
//! restarted, reconnects with its saved device (no new pairing) and answers again, retirement
//! removes the old revision's credential, and delete leaves no process and no directory.
//!
//! About 3–6 minutes on a quiet 2-core machine (each activation starts a gateway and a Codex
//! probe turn); every process the Driver recorded is killed by PID when the test ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::resource::ExecutionMode;
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::{AgentTarget, Compute, RevisionTarget, RuntimeState};
use occ_host::{DedicatedSettings, LocalSettings, recorded_gateways};
use occ_testkit::compute_conformance::{
    DEDICATED_KEY, DedicatedSite, dedicated_lifecycle, key_context,
};
use occ_testkit::fake_model::FakeModel;
use occ_testkit::gateway::chat_completion;
use serde_json::Value;

/// Kills every process the Driver recorded (gateway and harness groups) when the test ends.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut pids: Vec<u32> = recorded_gateways(&self.0)
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        pids.extend(recorded_harnesses(&self.0));
        for pid in pids {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// The pids of the live harness launchers recorded under `root`.
fn recorded_harnesses(root: &Path) -> Vec<u32> {
    occ_host::recorded_harnesses(root)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

fn record_pid(path: &Path) -> Option<u32> {
    let record: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    u32::try_from(record["pid"].as_u64()?).ok()
}

fn alive(pid: u32) -> bool {
    occ_testkit::gateway::process_alive(pid)
}

/// The test's own `PATH`, as occ passes its own.
fn path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| occ_host::runtime::DEFAULT_PATH.into())
}

fn driver(root: &Path, runtime_root: PathBuf, model: &FakeModel) -> ProcessCompute {
    ProcessCompute::new(ProcessSettings {
        host: LocalSettings {
            root: root.to_path_buf(),
            runtime_root,
            port_range: 29300..=29399,
            // Bounds for a hang, not for speed: on the 2-core CI machine beside two other
            // gateway suites the first activation alone has taken four minutes.
            ready_timeout: Duration::from_secs(360),
            stop_timeout: Duration::from_secs(10),
            path: path(),
        },
        // Gateways contained, as `occ dev` and `occ worker` run them by default.
        sandbox: Some(
            occ_host::sandbox::SandboxSettings::locate(
                &path(),
                occ_host::sandbox::WorkloadLimits::default(),
            )
            .expect("bubblewrap (scripts/test.sh installs it)")
            // Private networks, relayed by this binary as `occ worker`'s are.
            .with_occ_program(PathBuf::from(env!("CARGO_BIN_EXE_occ"))),
        ),
        // As `occ worker` runs it: the harness's API key goes through the credential proxy.
        credential_proxy_port: Some(0),
        maintenance_interval: None,
        dedicated: Some(DedicatedSettings {
            launcher: PathBuf::from(env!("CARGO_BIN_EXE_occ")),
            model_base_url: Some(model.base_url()),
            ready_timeout: Duration::from_secs(480),
        }),
    })
    .expect("driver")
}

/// The processes of the group led by `leader`.
fn group_members(leader: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1.to_owned();
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(leader)
        })
        .collect()
}

/// A process's command name.
/// Whether `pid` is a step of a workload's containment chain (`bwrap`, an `occ sandbox-relay`)
/// rather than the workload.
fn chain_process(pid: u32) -> bool {
    let relay = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == b"sandbox-relay")
    });
    relay || process_name(pid).as_deref() == Some("bwrap")
}

fn process_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|n| n.trim().to_owned())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .expect("json")
}

/// Every file under `dir` whose content contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && std::fs::read(&path)
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path);
            }
        }
    }
    found
}

/// What the process Driver's dedicated case sees: the Agent's directory under the Driver's
/// root, and the process-only checks.
struct ProcessSite<'a> {
    root: &'a Path,
    /// Subscribed before the harness is killed.
    exits: tokio::sync::Mutex<tokio::sync::broadcast::Receiver<occ_drivers::compute::GatewayExit>>,
    /// The gateway and harness processes of the first activation (gone after delete).
    pids: std::sync::Mutex<Vec<u32>>,
    /// The first revision's credential file (removed when it retires).
    credential: std::sync::Mutex<Option<PathBuf>>,
}

impl ProcessSite<'_> {
    fn dir(&self, agent: &AgentTarget) -> PathBuf {
        self.root
            .join("namespaces")
            .join(agent.namespace_id.as_str())
            .join("agents")
            .join(agent.agent_id.as_str())
    }
}

#[async_trait::async_trait]
impl DedicatedSite for ProcessSite<'_> {
    fn harness_workspace(&self, agent: &AgentTarget) -> PathBuf {
        self.dir(agent).join("harness/workspace")
    }

    fn gateway_http_port(&self, agent: &AgentTarget) -> u16 {
        u16::try_from(
            read_json(&self.dir(agent).join("agent.json"))["port"]
                .as_u64()
                .expect("port"),
        )
        .expect("port")
    }

    /// No key in the gateway process or in any file but the private credential; the plugin
    /// trusted without a load path; then a SIGKILLed harness: reported, restarted with the
    /// same node, and answering.
    async fn first_activation(&self, compute: &dyn Compute, rev: &RevisionTarget) {
        let dir = self.dir(&rev.agent);
        let gateway_pid = record_pid(&dir.join("gateway.json")).expect("gateway pid");
        for file in ["environ", "cmdline"] {
            let bytes = std::fs::read(format!("/proc/{gateway_pid}/{file}")).expect("proc");
            assert!(
                !bytes
                    .windows(DEDICATED_KEY.len())
                    .any(|w| w == DEDICATED_KEY.as_bytes()),
                "the key is in the gateway's {file}"
            );
        }
        let environ = std::fs::read(format!("/proc/{gateway_pid}/environ")).expect("environ");
        assert!(
            !String::from_utf8_lossy(&environ).contains("OPENAI_API_KEY"),
            "the gateway has a model key variable"
        );
        let run = dir.join("harness/run").join(rev.revision_id.as_str());
        let credential = run.join("credential");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&credential)
                .expect("credential")
                .permissions(),
        ) & 0o777;
        assert_eq!(mode, 0o600, "the credential file is private");
        // The key never reaches the harness: its credential file and Codex's login store hold
        // the credential proxy's placeholder, and no file of the Agent holds the key (the
        // model endpoint received it, the conformance case checks).
        assert_eq!(
            std::fs::read_to_string(&credential).expect("credential"),
            occ_host::credential_proxy::PLACEHOLDER
        );
        let leaks = files_containing(&dir, DEDICATED_KEY);
        assert!(leaks.is_empty(), "the key is in {leaks:?}");
        let launch = read_json(&run.join("launch.json"));
        assert!(
            occ_host::credential_proxy::is_capability_url(
                launch["model"]["baseUrl"].as_str().expect("model endpoint")
            ),
            "Codex is pointed at the credential proxy: {launch}"
        );
        let report = compute.runtime_report(rev).await.expect("report");
        let harness = report
            .pods
            .iter()
            .find(|p| p.role == occ_core::runtime_report::WorkloadRole::Agent)
            .expect("the harness pod");
        assert!(
            harness
                .events
                .iter()
                .any(|e| e.reason == "SecretDelivery" && e.message.contains("placeholder")),
            "the report says how the key travels: {harness:?}"
        );
        // The contained gateway's own view (its processes' root, through `/proc`): its
        // runtime config is there, the harness's credential is not.
        let config_path = dir
            .join("harness/gateway")
            .join(rev.revision_id.as_str())
            .join("openclaw.json");
        let inside = |pid: u32, path: &Path| {
            Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").expect("absolute"))
        };
        // (Not a `bwrap` of the chain, nor a relay of its private network.)
        let gateway_processes = group_members(gateway_pid);
        let node = gateway_processes
            .iter()
            .copied()
            .find(|pid| !chain_process(*pid))
            .expect("the gateway's own process in its group");
        assert!(
            inside(node, &config_path).is_file(),
            "the gateway sees its config"
        );
        assert!(
            !inside(node, &credential).exists(),
            "the contained gateway sees the harness's credential"
        );
        let config = read_json(&config_path);
        assert!(
            config["plugins"].get("load").is_none(),
            "the plugin is trusted through the state directory, not a load path"
        );
        let device_id = read_json(&dir.join("harness/node.json"))["deviceId"].clone();
        assert_eq!(
            config["plugins"]["entries"]["file-transfer"]["config"]["workspaces"]["main"]["nodeId"],
            device_id
        );
        *self.credential.lock().expect("lock") = Some(credential.clone());

        let harness_pid = record_pid(&dir.join("harness.json")).expect("harness pid");
        // The contained harness sees its credential, not the gateway's token or config.
        let launcher = group_members(harness_pid)
            .into_iter()
            .find(|pid| !chain_process(*pid))
            .expect("the launcher in the harness's group");
        assert!(
            inside(launcher, &credential).is_file(),
            "the harness reads its credential"
        );
        // Both run in networks of their own (each joined to the host by its relays only).
        let network_of = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        let host_network = network_of(std::process::id());
        assert!(host_network.is_some(), "this test reads network namespaces");
        for (what, pid) in [("gateway", node), ("harness", launcher)] {
            assert_ne!(
                network_of(pid),
                host_network,
                "the {what} shares the host's network"
            );
        }
        assert_ne!(network_of(node), network_of(launcher));
        for hidden in [dir.join("gateway-token"), config_path.clone()] {
            assert!(
                !inside(launcher, &hidden).exists(),
                "the harness sees {}",
                hidden.display()
            );
        }
        self.pids
            .lock()
            .expect("lock")
            .extend([gateway_pid, harness_pid]);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(i32::try_from(harness_pid).unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        )
        .expect("kill");
        let exit = tokio::time::timeout(Duration::from_secs(30), self.exits.lock().await.recv())
            .await
            .expect("the exit is reported")
            .expect("exit");
        assert_eq!(exit.pid, harness_pid);
        assert!(exit.status.starts_with("harness"), "{}", exit.status);
        assert_eq!(
            compute.observe(rev).await.expect("observe"),
            RuntimeState::NotRunning
        );
        let ctx = key_context(DEDICATED_KEY);
        if let Err(e) = compute.activate_revision(rev, &ctx).await {
            panic!("restart failed: {e:?}\n{}", self.diagnostics(&rev.agent));
        }
        assert_eq!(
            read_json(&dir.join("harness/node.json"))["deviceId"],
            device_id,
            "the node reconnected as the same device"
        );
        let token = std::fs::read_to_string(dir.join("gateway-token")).expect("token");
        let (code, body) = chat_completion(
            self.gateway_http_port(&rev.agent),
            &token,
            "after the restart",
            Duration::from_secs(240),
        )
        .await;
        assert_eq!(
            code,
            200,
            "chat after the restart: {body}\n{}",
            self.diagnostics(&rev.agent)
        );
    }

    fn diagnostics(&self, agent: &AgentTarget) -> String {
        let logs = self.dir(agent).join("logs");
        let mut text = String::new();
        for rev in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            for file in ["harness.log", "gateway.log"] {
                text.push_str(&format!(
                    "--- {} {file} ---\n{}\n",
                    rev.file_name().to_string_lossy(),
                    std::fs::read_to_string(rev.path().join(file)).unwrap_or_default()
                ));
            }
        }
        text
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn dedicated_conformance_on_the_process_driver() {
    let runtime_root = tokio::task::spawn_blocking(|| {
        occ_testkit::runtime::shared_runtime();
        occ_testkit::runtime::runtime_root()
    })
    .await
    .expect("runtime");
    let model = FakeModel::start().await;
    let root = tempfile::tempdir().expect("root");
    let _cleanup = Cleanup(root.path().to_path_buf());
    let compute = driver(root.path(), runtime_root, &model);
    assert!(
        compute
            .selection()
            .execution_modes
            .contains(&ExecutionMode::Dedicated)
    );
    let site = ProcessSite {
        root: root.path(),
        exits: tokio::sync::Mutex::new(compute.gateway_exits().expect("exit reports")),
        pids: std::sync::Mutex::new(Vec::new()),
        credential: std::sync::Mutex::new(None),
    };
    let figures = dedicated_lifecycle(&compute, &model, &site).await;

    let credential = site.credential.lock().expect("lock").clone().expect("rev1");
    assert!(
        !credential.exists(),
        "the retired revision's credential is removed"
    );
    let namespaces = root.path().join("namespaces");
    let agents: Vec<_> = std::fs::read_dir(&namespaces)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|ns| {
            std::fs::read_dir(ns.path().join("agents"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .collect();
    assert!(
        agents.is_empty(),
        "delete leaves no Agent directory: {agents:?}"
    );
    assert!(recorded_gateways(root.path()).is_empty());
    assert!(recorded_harnesses(root.path()).is_empty());
    for pid in site.pids.lock().expect("lock").iter() {
        assert!(!alive(*pid), "{pid} still runs");
    }
    eprintln!("process dedicated: {figures:?}");
}
