//! Dedicated execution on the process Compute Driver, against real parts: the pinned gateway with
//! the Codex plugin, `occ harness-launch` (this binary) running the real `codex app-server` and
//! the OpenClaw node host, and the test kit's fake model (an OpenAI-compatible Responses
//! endpoint, `OCC_CODEX_BASE_URL`).
//!
//! One Agent through its whole life, as the issue lists it: the deploy succeeds; the probe turn
//! reached the model with the Agent's key as Bearer; the gateway holds no key (environment,
//! argv, config files); `node.describe` shows the seven commands; workspace files written and
//! read through the gateway land in the harness's workspace; a chat request to the gateway is
//! answered by the model through the app-server; a SIGKILLed harness is reported, restarted,
//! reconnects with its saved device (no new pairing) and answers again; a redeploy replaces both
//! workloads and retirement removes the old revision's credential; a wrong key fails the deploy
//! permanently with `RUNTIME_AUTHENTICATION_FAILED` and the key in no output; delete leaves no
//! process and no directory.
//!
//! About 3–6 minutes on a quiet 2-core machine (each activation starts a gateway and a Codex
//! probe turn); every process the Driver recorded is killed by PID when the test ends.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_core::compute::{LogEntry, LogQuery, LogWorkload};
use occ_core::resource::ExecutionMode;
use occ_core::runtime_report::WorkloadRole;
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::{
    AgentTarget, Compute, FailureClass, Readiness, RevisionContext, RevisionTarget, RuntimeState,
    SecretText,
};
use occ_gateway::{Endpoint, NodeEnrollment, Session};
use occ_host::{DedicatedSettings, LocalSettings, recorded_gateways};
use occ_testkit::compute_conformance::{self, targets};
use occ_testkit::fake_model::{Failure, FakeModel};
use occ_testkit::gateway::chat_completion;
use serde_json::{Value, json};

const KEY: &str = "sk-dedicated-agent-key-0123456789abcdef";
const WRONG_KEY: &str = "sk-dedicated-wrong-key-9876543210fedcba";
const MODEL: &str = "openai/gpt-5.6-sol";

/// The Agent's Configuration as a user writes it for a dedicated Agent (the app-server wiring
/// as the reference's placeholders; the Driver fills them in).
fn document() -> Value {
    json!({
        "gateway": {"controlUi": {"enabled": false},
            "http": {"endpoints": {"chatCompletions": {"enabled": true}}}},
        "agents": {"defaults": {"model": MODEL, "skipBootstrap": true,
            "models": {MODEL: {"agentRuntime": {"id": "codex"}}},
            "modelPolicy": {"allow": [MODEL]}}},
        "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {
            "transport": "websocket", "url": "${APP_SERVER_URL}",
            "authToken": "${APP_SERVER_TOKEN}"}}}}},
    })
}

fn dedicated_revision(compute: &dyn Compute, agent: &AgentTarget, number: u64) -> RevisionTarget {
    compute_conformance::dedicated_revision(compute, agent, number, document())
}

fn context(key: &str) -> RevisionContext {
    RevisionContext {
        harness_credential: Some(SecretText::new(key.into())),
        ..RevisionContext::default()
    }
}

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
            port_range: 29500..=29599,
            ready_timeout: Duration::from_secs(180),
            stop_timeout: Duration::from_secs(10),
            path: path(),
        },
        maintenance_interval: None,
        dedicated: Some(DedicatedSettings {
            launcher: PathBuf::from(env!("CARGO_BIN_EXE_occ")),
            model_base_url: Some(model.base_url()),
            ready_timeout: Duration::from_secs(240),
        }),
    })
    .expect("driver")
}

fn agent_dir(root: &Path, rev: &RevisionTarget) -> PathBuf {
    root.join("namespaces")
        .join(rev.agent.namespace_id.as_str())
        .join("agents")
        .join(rev.agent.agent_id.as_str())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .expect("json")
}

/// A session to the Agent's gateway with its operator token.
async fn session(dir: &Path) -> (Session, u16, String) {
    let port = u16::try_from(read_json(&dir.join("agent.json"))["port"].as_u64().unwrap()).unwrap();
    let token = std::fs::read_to_string(dir.join("gateway-token")).expect("token");
    let endpoint = Endpoint::loopback(port, token.clone());
    let (session, _) = Session::connect(&endpoint, Duration::from_secs(15))
        .await
        .expect("session");
    (session, port, token)
}

fn harness_log(dir: &Path, rev: &RevisionTarget) -> String {
    std::fs::read_to_string(
        dir.join("logs")
            .join(rev.revision_id.as_str())
            .join("harness.log"),
    )
    .unwrap_or_default()
}

fn gateway_log(dir: &Path, rev: &RevisionTarget) -> String {
    std::fs::read_to_string(
        dir.join("logs")
            .join(rev.revision_id.as_str())
            .join("gateway.log"),
    )
    .unwrap_or_default()
}

/// Every file under `dir` whose content contains `needle`, but for the harness's own private
/// copies: the revision's credential file `skip` and Codex's login store under `codex-home/`.
fn files_containing(dir: &Path, needle: &str, skip: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !path.ends_with("harness/codex-home") {
                    stack.push(path);
                }
            } else if kind.is_file()
                && path != skip
                && std::fs::read(&path)
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn a_dedicated_agent_runs_its_codex_harness_beside_the_gateway() {
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
    let mut exits = compute.gateway_exits().expect("exit reports");
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.expect("namespace");

    // 1. Deploy.
    let started = Instant::now();
    let rev1 = dedicated_revision(&compute, &agent, 1);
    let ctx = context(KEY);
    assert_eq!(
        compute
            .prepare_revision(&rev1, &ctx)
            .await
            .expect("prepare"),
        Readiness::Ready
    );
    let dir = agent_dir(root.path(), &rev1);
    if let Err(e) = compute.activate_revision(&rev1, &ctx).await {
        panic!(
            "activation failed: {e:?}\n--- harness ---\n{}\n--- gateway ---\n{}",
            harness_log(&dir, &rev1),
            gateway_log(&dir, &rev1)
        );
    }
    let activated_after = started.elapsed();
    assert_eq!(
        compute.observe(&rev1).await.expect("observe"),
        RuntimeState::Serving
    );

    // 2. The probe turn reached the model with the Agent's key.
    assert!(
        model.requests().iter().any(|r| r.bearer() == Some(KEY)),
        "no model request carried the Agent's key"
    );

    // The runtime report shows both workloads; the harness's output reads as source `agent`.
    let report = compute.runtime_report(&rev1).await.expect("report");
    let roles: Vec<_> = report.pods.iter().map(|p| (p.role, p.ready)).collect();
    assert_eq!(
        roles,
        [(WorkloadRole::Gateway, true), (WorkloadRole::Agent, true)],
        "{report:?}"
    );
    let harness_output = compute
        .read_logs(
            &rev1,
            &LogQuery {
                after: None,
                tail_lines: 500,
                previous: false,
                workload: LogWorkload::Harness,
            },
        )
        .await
        .expect("harness log");
    let lines: Vec<&str> = harness_output
        .entries
        .iter()
        .filter_map(|e| match e {
            LogEntry::Line(line) => Some(line.as_str()),
            LogEntry::Gap(_) => None,
        })
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("phase=probe outcome=ok")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains(KEY)));

    // 3. The gateway holds no key: environment, argv, and nothing it was given to read.
    let gateway_pid = record_pid(&dir.join("gateway.json")).expect("gateway pid");
    for file in ["environ", "cmdline"] {
        let bytes = std::fs::read(format!("/proc/{gateway_pid}/{file}")).expect("proc");
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key is in the gateway's {file}"
        );
    }
    let environ = std::fs::read(format!("/proc/{gateway_pid}/environ")).expect("environ");
    assert!(
        !String::from_utf8_lossy(&environ).contains("OPENAI_API_KEY"),
        "the gateway has a model key variable"
    );
    let credential = dir
        .join("harness/run")
        .join(rev1.revision_id.as_str())
        .join("credential");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&credential)
            .expect("credential")
            .permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o600, "the credential file is private");
    let leaks = files_containing(&dir, KEY, &credential);
    assert!(leaks.is_empty(), "the key is in {leaks:?}");
    let config = read_json(
        &dir.join("harness/run")
            .join(rev1.revision_id.as_str())
            .join("openclaw.json"),
    );
    assert!(config.get("plugins").is_some());
    assert!(
        config["plugins"].get("load").is_none(),
        "the plugin is trusted through the state directory, not a load path"
    );

    // 4. The node serves the seven commands.
    let device_id = read_json(&dir.join("harness/node.json"))["deviceId"]
        .as_str()
        .expect("device id")
        .to_owned();
    let (mut gateway, port, token) = session(&dir).await;
    let status = NodeEnrollment::new(&mut gateway)
        .describe(&device_id)
        .await
        .expect("node.describe");
    assert!(status.is_ready(), "{status:?}");
    assert_eq!(
        config["plugins"]["entries"]["file-transfer"]["config"]["workspaces"]["main"]["nodeId"],
        device_id
    );

    // 5. Workspace files through the gateway land in the harness's workspace.
    let content = "# Soul\nWritten through the gateway to the harness node.\n";
    gateway
        .file_set("main", "SOUL.md", content, None, Duration::from_secs(30))
        .await
        .expect("file set");
    assert_eq!(
        std::fs::read_to_string(dir.join("harness/workspace/SOUL.md")).expect("on the node"),
        content
    );
    let read = gateway
        .file_get("main", "SOUL.md", Duration::from_secs(30))
        .await
        .expect("file get")
        .expect("present");
    assert_eq!(read.content, content);
    gateway.close().await;

    // 6. A chat request is answered by the model through the app-server.
    let chat_started = Instant::now();
    let (code, body) = chat_completion(port, &token, "hi", Duration::from_secs(240)).await;
    assert_eq!(
        code,
        200,
        "chat failed: {body}\n--- gateway ---\n{}",
        gateway_log(&dir, &rev1)
    );
    assert!(body.contains("Hello from the fake model."), "{body}");
    let chat_after = chat_started.elapsed();

    // 7. A SIGKILLed harness is reported, restarted, reconnects with its saved device, answers.
    let harness_pid = record_pid(&dir.join("harness.json")).expect("harness pid");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(harness_pid).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .expect("kill");
    let exit = tokio::time::timeout(Duration::from_secs(30), exits.recv())
        .await
        .expect("the exit is reported")
        .expect("exit");
    assert_eq!(exit.pid, harness_pid);
    assert!(exit.status.starts_with("harness"), "{}", exit.status);
    assert_eq!(
        compute.observe(&rev1).await.expect("observe"),
        RuntimeState::NotRunning
    );
    let restarted = Instant::now();
    if let Err(e) = compute.activate_revision(&rev1, &ctx).await {
        panic!(
            "restart failed: {e:?}\n--- harness ---\n{}",
            harness_log(&dir, &rev1)
        );
    }
    let restart_after = restarted.elapsed();
    assert_eq!(
        read_json(&dir.join("harness/node.json"))["deviceId"],
        device_id,
        "the node reconnected as the same device"
    );
    let (code, body) = chat_completion(port, &token, "again", Duration::from_secs(240)).await;
    assert_eq!(code, 200, "chat after the restart: {body}");

    // 8. A redeploy replaces both workloads (the worker stops predecessors first); the retired
    // revision's credential goes.
    compute.stop_revision(&rev1).await.expect("stop rev1");
    assert!(recorded_gateways(root.path()).is_empty());
    assert!(recorded_harnesses(root.path()).is_empty());
    let rev2 = dedicated_revision(&compute, &agent, 2);
    compute
        .prepare_revision(&rev2, &ctx)
        .await
        .expect("prepare 2");
    if let Err(e) = compute.activate_revision(&rev2, &ctx).await {
        panic!(
            "redeploy failed: {e:?}\n--- harness ---\n{}",
            harness_log(&dir, &rev2)
        );
    }
    compute.retire_revision(&rev1).await.expect("retire rev1");
    assert!(
        !credential.exists(),
        "the retired revision's credential is removed"
    );
    assert_eq!(
        read_json(&dir.join("harness/node.json"))["deviceId"],
        device_id,
        "the redeploy reused the paired node"
    );
    let (code, body) = chat_completion(port, &token, "v2", Duration::from_secs(240)).await;
    assert_eq!(code, 200, "chat on revision 2: {body}");

    // 9. A wrong key fails the deploy permanently, with a clear reason and no key in any output.
    compute.stop_revision(&rev2).await.expect("stop rev2");
    model.fail_with(Some(Failure {
        status: 401,
        code: "invalid_api_key".into(),
        message: "Incorrect API key provided.".into(),
    }));
    let rev3 = dedicated_revision(&compute, &agent, 3);
    let wrong = context(WRONG_KEY);
    compute
        .prepare_revision(&rev3, &wrong)
        .await
        .expect("prepare 3");
    let err = compute
        .activate_revision(&rev3, &wrong)
        .await
        .expect_err("a wrong key fails");
    assert_eq!(err.class, FailureClass::Permanent, "{err:?}");
    assert_eq!(err.code, ReasonCode::RuntimeAuthenticationFailed, "{err:?}");
    let shown = format!("{err:?} {:?}", err.output);
    assert!(
        !shown.contains(WRONG_KEY),
        "the key is in the error: {shown}"
    );
    let rev3_credential = dir
        .join("harness/run")
        .join(rev3.revision_id.as_str())
        .join("credential");
    let leaks = files_containing(&dir, WRONG_KEY, &rev3_credential);
    assert!(leaks.is_empty(), "the wrong key is in {leaks:?}");
    assert!(
        recorded_harnesses(root.path()).is_empty(),
        "the failed harness is stopped"
    );
    model.fail_with(None);

    // 10. Delete leaves nothing.
    compute.delete_agent(&rev1.agent).await.expect("delete");
    assert!(!dir.exists());
    assert!(recorded_gateways(root.path()).is_empty());
    for pid in [gateway_pid, harness_pid] {
        assert!(!alive(pid), "{pid} still runs");
    }
    eprintln!(
        "dedicated: activated in {:.1} s, chat answered in {:.1} s, harness restart {:.1} s",
        activated_after.as_secs_f64(),
        chat_after.as_secs_f64(),
        restart_after.as_secs_f64()
    );
}
