//! The process Compute Driver against real OpenClaw gateways (the pinned runtime, installed once
//! per machine by the testkit): the Compute conformance suite, then what only this Driver
//! promises — the frozen snapshot on disk, snapshots kept after retirement, re-adoption by a
//! restarted worker, restart after a crash, no process left after stop, clear failures for a
//! missing runtime and an invalid configuration, ports that never collide, staged workspace
//! setup applied before any gateway starts (and verified, never reapplied, afterwards).
//!
//! Gateways are expensive (~1 GB, ~10 s of CPU to start), so the tests that start them take
//! turns; every gateway a test's Driver recorded is killed by PID when the test ends, even when
//! it fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::{
    Compute, ComputeError, FailureClass, Readiness, RevisionContext, RuntimeState,
};
use occ_host::sandbox::{SandboxSettings, WorkloadLimits};
use occ_host::workspace_setup::STOCK_DEFAULTS_ID;
use occ_host::{LocalSettings, recorded_gateways};
use occ_testkit::compute_conformance::{self as conformance, document, revision, targets};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// One gateway-starting test at a time.
static GATEWAYS: Mutex<()> = Mutex::const_new(());

/// A Driver over a fresh root, killing every gateway it recorded when dropped.
struct Driver {
    compute: ProcessCompute,
    root: tempfile::TempDir,
}

impl Driver {
    fn new(runtime_root: PathBuf) -> Self {
        let root = tempfile::tempdir().expect("root");
        let compute = ProcessCompute::new(settings(root.path(), runtime_root)).expect("driver");
        Self { compute, root }
    }

    /// A second Driver over the same root, as a restarted worker would build it.
    fn restarted(&self) -> ProcessCompute {
        ProcessCompute::new(settings(
            self.root.path(),
            self.compute.settings().host.runtime_root.clone(),
        ))
        .expect("driver")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        for (pid, _) in recorded_gateways(self.root.path()) {
            kill_group(pid);
        }
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test passes its own PATH as occ passes its own"
)]
fn settings(root: &Path, runtime_root: PathBuf) -> ProcessSettings {
    ProcessSettings {
        host: LocalSettings {
            root: root.to_path_buf(),
            runtime_root,
            port_range: 29100..=29199,
            ready_timeout: Duration::from_secs(180),
            stop_timeout: Duration::from_secs(15),
            path: std::env::var_os("PATH").unwrap_or_default(),
        },
        // Any free port: Drivers of this binary run side by side.
        credential_proxy_port: Some(0),
        maintenance_interval: None,
        dedicated: None,
        // Contained, as `occ dev` and `occ worker` run gateways by default.
        sandbox: Some(
            SandboxSettings::locate(
                &std::env::var_os("PATH").unwrap_or_default(),
                WorkloadLimits::default(),
            )
            .expect("bubblewrap (scripts/test.sh installs it)")
            .with_occ_program(occ_testkit::runtime::occ_binary()),
        ),
    }
}

fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

fn runtime_root() -> PathBuf {
    occ_testkit::runtime::shared_runtime();
    occ_testkit::runtime::runtime_root()
}

fn agent_dir(driver: &Driver, rev: &occ_drivers::compute::RevisionTarget) -> PathBuf {
    driver
        .root
        .path()
        .join("namespaces")
        .join(rev.agent.namespace_id.as_str())
        .join("agents")
        .join(rev.agent.agent_id.as_str())
}

fn gateway_pid(dir: &Path) -> u32 {
    let record: Value =
        serde_json::from_slice(&std::fs::read(dir.join("gateway.json")).expect("gateway.json"))
            .expect("json");
    u32::try_from(record["pid"].as_u64().expect("pid")).expect("pid")
}

fn alive(pid: u32) -> bool {
    occ_testkit::gateway::process_alive(pid)
}

/// The lifecycle, then the rollback from the revision it resumed with (stop → start → on
/// failure restart the predecessor: the figures are the outage the process Driver's rollback
/// costs, which docs/ARCHITECTURE.md cites), and the refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::print_stderr,
    reason = "the figures docs/ARCHITECTURE.md cites"
)]
async fn conformance_suite() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let driver = Driver::new(runtime);
    let figures = conformance::lifecycle_and_rollback(&driver.compute).await;
    eprintln!("process rollback: {figures:?}");
    conformance::refusals(&driver.compute).await;
    assert!(recorded_gateways(driver.root.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_adoption_crash_and_stop() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let driver = Driver::new(runtime);
    let compute = &driver.compute;
    let ctx = RevisionContext::default();
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.unwrap();

    // The snapshot is the admitted document plus only the settings the Driver owns.
    let doc1 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
                      "gateway": {"port": 1, "controlUi": {"enabled": false}},
                      "plugins": {"enabled": false}});
    let rev1 = revision(compute, &agent, 1, doc1.clone());
    compute.prepare_revision(&rev1, &ctx).await.unwrap();
    let dir = agent_dir(&driver, &rev1);
    let snapshot1 = dir
        .join("revisions")
        .join(rev1.revision_id.as_str())
        .join("openclaw.json");
    let frozen: Value = serde_json::from_slice(&std::fs::read(&snapshot1).unwrap()).unwrap();
    assert_eq!(
        frozen["agents"]["defaults"]["model"],
        doc1["agents"]["defaults"]["model"]
    );
    assert_eq!(frozen["plugins"], doc1["plugins"]);
    assert_eq!(
        frozen["gateway"]["controlUi"],
        json!({"enabled": false}),
        "other gateway settings are kept"
    );
    assert_eq!(frozen["gateway"]["bind"], "loopback");
    assert_eq!(
        frozen["gateway"]["auth"],
        json!({"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"})
    );
    assert_ne!(frozen["gateway"]["port"], 1, "the Driver owns the port");
    assert_eq!(frozen["update"]["checkOnStart"], false);
    assert_eq!(frozen["models"]["catalogRefresh"]["enabled"], false);
    let token = std::fs::read_to_string(dir.join("gateway-token")).unwrap();
    assert!(
        !String::from_utf8_lossy(&std::fs::read(&snapshot1).unwrap()).contains(&token),
        "the token is not in the snapshot"
    );
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("gateway-token")), 0o600);
    assert_eq!(mode(&snapshot1), 0o600);
    // The native setup seeded the workspace with the stock files.
    assert!(dir.join("state/workspace/AGENTS.md").is_file());
    // The revision's own log file, the console silenced (the Driver captures it in that file).
    let log1 = dir
        .join("logs")
        .join(rev1.revision_id.as_str())
        .join("gateway.log");
    assert_eq!(
        frozen["logging"],
        json!({"file": log1.display().to_string(), "consoleLevel": "silent"})
    );
    // A snapshot an older occ rendered (the Agent-level log, no consoleLevel) is rendered
    // again; one of another document is refused.
    let marker1 = snapshot1.with_file_name("revision.json");
    let (frozen_bytes, marker_bytes) = (
        std::fs::read(&snapshot1).unwrap(),
        std::fs::read(&marker1).unwrap(),
    );
    let older_render = |doc: &Value| {
        let mut marker: Value = serde_json::from_slice(&marker_bytes).unwrap();
        marker["configurationHash"] = json!("0".repeat(64));
        std::fs::write(&marker1, serde_json::to_vec(&marker).unwrap()).unwrap();
        std::fs::write(&snapshot1, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    };
    let mut legacy = frozen.clone();
    legacy["logging"] = json!({"file": dir.join("logs/gateway.log").display().to_string()});
    older_render(&legacy);
    assert_eq!(
        compute.prepare_revision(&rev1, &ctx).await.unwrap(),
        Readiness::Ready
    );
    assert_eq!(std::fs::read(&snapshot1).unwrap(), frozen_bytes);
    assert_eq!(std::fs::read(&marker1).unwrap(), marker_bytes);
    let mut other = legacy.clone();
    other["agents"]["defaults"]["model"]["primary"] = json!("openai/another");
    older_render(&other);
    assert_eq!(
        compute
            .prepare_revision(&rev1, &ctx)
            .await
            .expect_err("another document under the revision's id")
            .code,
        ReasonCode::SnapshotMismatch
    );
    std::fs::write(&snapshot1, &frozen_bytes).unwrap();
    std::fs::write(&marker1, &marker_bytes).unwrap();

    compute.activate_revision(&rev1, &ctx).await.unwrap();
    let pid1 = gateway_pid(&dir);
    assert!(alive(pid1));

    // A restarted worker builds a new Driver over the same root: it re-adopts the running
    // gateway instead of starting a second one.
    let restarted = driver.restarted();
    assert_eq!(
        restarted.observe(&rev1).await.unwrap(),
        RuntimeState::Serving
    );
    restarted.activate_revision(&rev1, &ctx).await.unwrap();
    assert_eq!(gateway_pid(&dir), pid1, "adopted, not restarted");

    // A crashed gateway is noticed and started again by activation (the maintenance pass).
    kill_group(pid1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while alive(pid1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway did not die"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        restarted.observe(&rev1).await.unwrap(),
        RuntimeState::NotRunning
    );
    restarted.activate_revision(&rev1, &ctx).await.unwrap();
    let pid2 = gateway_pid(&dir);
    assert_ne!(pid2, pid1);
    assert_eq!(
        restarted.observe(&rev1).await.unwrap(),
        RuntimeState::Serving
    );

    // A new revision: rev1's snapshot stays, byte for byte, after it is retired.
    let before = std::fs::read(&snapshot1).unwrap();
    let rev2 = revision(
        compute,
        &agent,
        2,
        json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5-mini"}}}}),
    );
    compute.prepare_revision(&rev2, &ctx).await.unwrap();
    compute.activate_revision(&rev2, &ctx).await.unwrap();
    compute.retire_revision(&rev1).await.unwrap();
    assert!(!alive(pid2), "rev1's gateway is gone");
    assert_eq!(std::fs::read(&snapshot1).unwrap(), before);
    let snapshot2 = dir
        .join("revisions")
        .join(rev2.revision_id.as_str())
        .join("openclaw.json");
    let frozen2: Value = serde_json::from_slice(&std::fs::read(&snapshot2).unwrap()).unwrap();
    assert_eq!(
        frozen2["agents"]["defaults"]["model"]["primary"],
        "openai/gpt-5-mini"
    );
    assert_eq!(
        std::fs::read_link(dir.join("current")).unwrap(),
        Path::new("revisions").join(rev2.revision_id.as_str())
    );

    // Stop ends the gateway's whole process group and keeps workspace and state.
    let pid3 = gateway_pid(&dir);
    let helpers = occ_testkit::gateway::children_of(pid3);
    compute.stop_revision(&rev2).await.unwrap();
    assert!(!alive(pid3));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while helpers.iter().any(|p| alive(*p)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "helper processes outlived the gateway"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!dir.join("gateway.json").exists());
    assert!(dir.join("state/workspace/AGENTS.md").is_file());
    assert!(snapshot2.is_file());

    compute.delete_agent(&agent).await.unwrap();
    assert!(!dir.exists());
    compute.delete_namespace(&ns).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_configuration_fails_permanently_with_the_cause() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let driver = Driver::new(runtime);
    let compute = &driver.compute;
    let ctx = RevisionContext::default();
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.unwrap();
    // occ's validator accepts it (it checks shape, not OpenClaw's schema); OpenClaw refuses it.
    let rev = revision(
        compute,
        &agent,
        1,
        json!({"agents": {"defaults": {"heartbeat": {"every": 42}}}}),
    );
    compute.prepare_revision(&rev, &ctx).await.unwrap();
    let err = compute
        .activate_revision(&rev, &ctx)
        .await
        .expect_err("OpenClaw refuses the configuration");
    assert_eq!(err.class, FailureClass::Permanent, "{err}");
    assert_eq!(err.code, ReasonCode::RuntimeConfigurationInvalid, "{err}");
    assert!(err.message.contains("exit status: 78"), "{}", err.message);
    assert!(recorded_gateways(driver.root.path()).is_empty());
    compute.delete_agent(&agent).await.unwrap();
}

fn setup_for(
    agent: &occ_drivers::compute::AgentTarget,
    files: Option<&[(WorkspaceFileName, &str)]>,
) -> WorkspaceSetup {
    WorkspaceSetup {
        id: format!("wss-{}", agent.agent_id),
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.agent_id.clone(),
        defaults_id: Some(STOCK_DEFAULTS_ID.into()),
        files: files.map(|f| f.iter().map(|(n, t)| (*n, (*t).to_owned())).collect()),
        completed: files.is_none(),
    }
}

/// Staged setup through `prepare_revision` (native setup runs, no gateway is started): applied
/// once, a replay after a lost acknowledgement is a no-op, a completed record only verifies the
/// marker (a live edit survives), a lost marker and a divergent existing file fail permanently
/// without saying what the files hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_workspace_setup_is_applied_once_and_verified_after() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let driver = Driver::new(runtime);
    let compute = &driver.compute;
    assert!(compute.supports_workspace_setup());
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.unwrap();
    let staged = "# USER.md\n\nstaged-canary\n";
    let pending = RevisionContext {
        workspace_setup: Some(setup_for(
            &agent,
            Some(&[(WorkspaceFileName::User, staged)]),
        )),
        ..RevisionContext::default()
    };
    let rev = revision(compute, &agent, 1, document("gpt-5"));
    let dir = agent_dir(&driver, &rev);
    let workspace = dir.join("state/workspace");
    assert_eq!(
        compute.prepare_revision(&rev, &pending).await.unwrap(),
        Readiness::Ready
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("USER.md")).unwrap(),
        staged
    );
    assert!(
        workspace.join("AGENTS.md").is_file(),
        "stock files seeded too"
    );
    let marker = workspace.join(".oce-workspace-setup.json");
    let marker_bytes = std::fs::read(&marker).expect("marker");
    assert!(
        recorded_gateways(driver.root.path()).is_empty(),
        "no gateway yet"
    );
    // The acknowledgement was lost: the same pending input again is a no-op.
    compute.prepare_revision(&rev, &pending).await.unwrap();
    assert_eq!(std::fs::read(&marker).unwrap(), marker_bytes);

    // Completed: a live edit survives the next revision; nothing is reapplied.
    std::fs::write(workspace.join("USER.md"), "# edited live\n").unwrap();
    let completed = RevisionContext {
        workspace_setup: Some(setup_for(&agent, None)),
        ..RevisionContext::default()
    };
    let rev2 = revision(compute, &agent, 2, document("gpt-5-mini"));
    compute.prepare_revision(&rev2, &completed).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.join("USER.md")).unwrap(),
        "# edited live\n"
    );

    // The initialized storage is gone: the next start is blocked, not silently reseeded.
    std::fs::remove_file(&marker).unwrap();
    let rev3 = revision(compute, &agent, 3, document("gpt-5"));
    let err = compute
        .prepare_revision(&rev3, &completed)
        .await
        .expect_err("marker missing");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::WorkspaceSetupFailed),
        "{err}"
    );
    assert!(err.message.contains(".oce-workspace-setup.json"), "{err}");
    assert!(
        !dir.join("revisions")
            .join(rev3.revision_id.as_str())
            .exists()
    );

    // Another Agent whose workspace already holds other text: refused, the text untouched.
    let (_, other) = targets();
    let other = occ_drivers::compute::AgentTarget {
        namespace_id: ns.id.clone(),
        ..other
    };
    let plain = revision(compute, &other, 1, document("gpt-5"));
    compute
        .prepare_revision(&plain, &RevisionContext::default())
        .await
        .unwrap();
    let other_dir = agent_dir(&driver, &plain);
    let user = other_dir.join("state/workspace/USER.md");
    std::fs::write(&user, "# mine, hands off\n").unwrap();
    let divergent = RevisionContext {
        workspace_setup: Some(setup_for(
            &other,
            Some(&[(WorkspaceFileName::User, staged)]),
        )),
        ..RevisionContext::default()
    };
    let plain2 = revision(compute, &other, 2, document("gpt-5"));
    let err = compute
        .prepare_revision(&plain2, &divergent)
        .await
        .expect_err("divergent");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::WorkspaceSetupFailed),
        "{err}"
    );
    assert!(err.message.contains("USER.md"), "{err}");
    assert!(
        !err.message.contains("hands off") && !err.message.contains("canary"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&user).unwrap(),
        "# mine, hands off\n"
    );

    compute.delete_agent(&agent).await.unwrap();
    compute.delete_agent(&other).await.unwrap();
}

#[tokio::test]
async fn a_missing_runtime_is_a_clear_permanent_failure() {
    let missing = tempfile::tempdir().unwrap();
    let driver = Driver::new(missing.path().join("runtime"));
    let compute = &driver.compute;
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.unwrap();
    let rev = revision(compute, &agent, 1, document("gpt-5"));
    let err: ComputeError = compute
        .prepare_revision(&rev, &RevisionContext::default())
        .await
        .expect_err("no runtime");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::RuntimeNotInstalled)
    );
    assert!(
        err.message.contains("occ runtime install"),
        "{}",
        err.message
    );
}

/// The first of `n` consecutive loopback ports that are free now, below the kernel's ephemeral
/// range (outgoing connections take ports there) and away from the fixed ranges of other tests
/// and of `occ dev` (28000-28999 and up): a fixed range collided with other processes on a busy
/// machine.
fn free_port_run(n: u16) -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id();
    (0..200u32)
        .map(|i| 21_000 + ((seed.wrapping_add(i * 7919)) % 6_000) as u16)
        .find(|base| {
            (*base..base + n).all(|port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        })
        .expect("a run of free loopback ports")
}

#[tokio::test]
async fn ports_never_collide_and_busy_ports_are_skipped() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut s = settings(root.path(), runtime);
    let base = free_port_run(4);
    s.host.port_range = base..=base + 3;
    let compute = ProcessCompute::new(s.clone()).unwrap();
    let (ns, first) = targets();
    compute.ensure_namespace(&ns).await.unwrap();
    // Something else listens on the first port of the range.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", base)).unwrap();
    let mut ports = Vec::new();
    for agent in [first.clone(), targets().1, targets().1] {
        let agent = occ_drivers::compute::AgentTarget {
            namespace_id: ns.id.clone(),
            ..agent
        };
        let rev = revision(&compute, &agent, 1, document("gpt-5"));
        assert_eq!(
            compute
                .prepare_revision(&rev, &RevisionContext::default())
                .await
                .unwrap(),
            Readiness::Ready
        );
        let access = compute
            .gateway_access(&agent)
            .await
            .unwrap()
            .expect("access");
        ports.push(access.url);
    }
    drop(squatter);
    let url = |port: u16| format!("ws://127.0.0.1:{port}");
    assert_eq!(ports, vec![url(base + 1), url(base + 2), url(base + 3)]);
    // A restarted Driver sees the allocations on disk: the next Agent gets the free port.
    let again = ProcessCompute::new(s.clone()).unwrap();
    let (_, fourth) = targets();
    let fourth = occ_drivers::compute::AgentTarget {
        namespace_id: ns.id.clone(),
        ..fourth
    };
    let rev = revision(&again, &fourth, 1, document("gpt-5"));
    again
        .prepare_revision(&rev, &RevisionContext::default())
        .await
        .unwrap();
    assert_eq!(
        again.gateway_access(&fourth).await.unwrap().unwrap().url,
        url(base)
    );
    // The range is exhausted now.
    let (_, fifth) = targets();
    let fifth = occ_drivers::compute::AgentTarget {
        namespace_id: ns.id.clone(),
        ..fifth
    };
    let rev = revision(&again, &fifth, 1, document("gpt-5"));
    let err = again
        .prepare_revision(&rev, &RevisionContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::GatewayPortsExhausted)
    );
}

/// Run by the Agent's own `exec` tool: a client on loopback with a freshly made, correctly
/// signed device identity and no gateway token asks for an operator session (twice, as a
/// pairing that waits for approval would be retried). Prints every frame it receives.
/// Connects to `127.0.0.1:<argv[1]>` and says whether anything answered.
const HOST_PORT_PROBE: &str = "require('net').connect(Number(process.argv[1]), '127.0.0.1').on('connect', () => { console.log('host-port reached'); process.exit(0); }).on('error', (e) => console.log('host-port refused', e.code))";

/// Fetches `argv[1]` with Node's own `fetch` and prints the status and body.
const FETCH_PROBE: &str = "const u = process.argv[1]; fetch(u).then(async (r) => console.log('fetch', u, r.status, (await r.text()).trim().slice(0, 40))).catch((e) => console.log('fetch', u, 'failed', String((e.cause && e.cause.message) || e.message)))";

const LOOPBACK_PROBE: &str = r#"const port = Number(process.argv[2]);
const crypto = require('crypto');
const out = [];
const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
const raw = publicKey.export({type:'spki',format:'der'}).subarray(12);
const b64u = b => Buffer.from(b).toString('base64').replace(/\+/g,'-').replace(/\//g,'_').replace(/=+$/,'');
const deviceId = crypto.createHash('sha256').update(raw).digest('hex');
const scopes = ['operator.admin'];
let attempt = 0;
function connect(){
 const ws = new WebSocket('ws://127.0.0.1:'+port);
 ws.onmessage = (m)=>{ out.push('WS '+String(m.data).slice(0,400)); const d=JSON.parse(m.data);
  if(d.event==='connect.challenge'){
   const signedAt = Date.now();
   const payload = ['v2',deviceId,'cli','cli','operator',scopes.join(','),String(signedAt),'',d.payload.nonce].join('|');
   const signature = b64u(crypto.sign(null, Buffer.from(payload), privateKey));
   ws.send(JSON.stringify({type:'req',id:'1',method:'connect',params:{minProtocol:4,maxProtocol:4,client:{id:'cli',version:'1.0.0',platform:'linux',mode:'cli'},role:'operator',scopes,device:{id:deviceId,publicKey:b64u(raw),signature,signedAt,nonce:d.payload.nonce}}}));
  } else if (d.type==='res') { attempt++; ws.close(); if (attempt<2) setTimeout(connect, 1500); else { console.log(out.join('\n')); process.exit(0);} } };
 ws.onerror=(e)=>{out.push('WSERR '+e.message);};
}
connect();
setTimeout(()=>{console.log(out.join('\n'));process.exit(0)},10000);
"#;

/// The bound model key of the containment test.
const MODEL_KEY: &str = "sk-contained-model-key-0123456789";

/// Containment: a prompt-injected model drives the Agent's own `read` and `write` tools (the
/// fake model answers with tool calls, as the issue's reproduction did against `occ dev`). The
/// gateway runs under bubblewrap: occ's files beside the layout (the data directory's keys), the
/// Driver's own records of the Agent and another Agent's workspace do not exist for it, and it
/// cannot write outside its workspace; its own workspace reads and writes (the probe works).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_tools_reach_only_its_own_files() {
    let runtime = tokio::task::spawn_blocking(runtime_root).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let driver = Driver::new(runtime);
    let compute = &driver.compute;
    let fake = occ_testkit::fake_model::FakeModel::start().await;
    fake.reply("done");
    // What must stay out of reach: occ's administrator key (in its data directory, beside
    // the Driver's root) and another Agent's workspace.
    let occ_key = driver.root.path().join("admin-service-key.json");
    std::fs::write(&occ_key, "occ-admin-key-canary-7f3a").expect("key file");
    let (ns, agent) = targets();
    compute
        .ensure_namespace(&ns)
        .await
        .expect("ensure_namespace");
    let (_, other) = targets();
    let other = occ_drivers::compute::AgentTarget {
        namespace_id: ns.id.clone(),
        ..other
    };
    let mut document = fake.agent_document("${MODEL_KEY}");
    // An endpoint on this machine's own network address that the configuration names (as a
    // provider on the company network would be): the egress proxy connects to it, and to no
    // other listener of this machine.
    let lan_ip = {
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp");
        probe
            .connect("198.51.100.1:9")
            .expect("a default route (the test needs a non-loopback address of this machine)");
        probe.local_addr().expect("addr").ip()
    };
    let named_listener = std::net::TcpListener::bind((lan_ip, 0)).expect("named listener");
    let unnamed_listener = std::net::TcpListener::bind((lan_ip, 0)).expect("unnamed listener");
    let answer = |listener: std::net::TcpListener| {
        std::thread::spawn(move || {
            use std::io::{Read as _, Write as _};
            for mut stream in listener.incoming().flatten() {
                let mut buf = [0u8; 2048];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nlan-ok",
                );
            }
        })
    };
    let named_url = format!("http://{}/", named_listener.local_addr().expect("addr"));
    let unnamed_url = format!("http://{}/", unnamed_listener.local_addr().expect("addr"));
    answer(named_listener);
    answer(unnamed_listener);
    document["models"]["providers"]["lan"] = json!({
        "baseUrl": named_url,
        "api": "openai-completions",
        "apiKey": "not-a-secret",
        "models": [{"id": "lan-model", "name": "LAN model"}],
    });
    // The model key, bound from a Secret: the credential proxy puts it on the wire.
    let ctx = RevisionContext {
        environment: [(
            "MODEL_KEY".to_owned(),
            occ_core::compute::SecretText::new(MODEL_KEY.into()),
        )]
        .into(),
        ..RevisionContext::default()
    };
    let other_rev = revision(compute, &other, 1, conformance::document("other"));
    compute
        .prepare_revision(&other_rev, &ctx)
        .await
        .expect("prepare the other Agent");
    let other_workspace = agent_dir(&driver, &other_rev).join("state/workspace");
    std::fs::write(other_workspace.join("SOUL.md"), "other-agent-canary-91c2").expect("write");
    let mut rev = revision(compute, &agent, 1, document);
    rev.spec.secret_bindings = Some(
        [(
            "MODEL_KEY".to_owned(),
            occ_core::resource::SecretBinding {
                source: occ_core::resource::SecretRef::new(
                    ns.id.clone(),
                    occ_core::SecretId::generate(),
                ),
                delivery: occ_core::resource::SecretDelivery::Env,
            },
        )]
        .into(),
    );
    compute.prepare_revision(&rev, &ctx).await.expect("prepare");
    compute
        .activate_revision(&rev, &ctx)
        .await
        .expect("activate");
    let dir = agent_dir(&driver, &rev);
    let own = dir.join("state/workspace");
    std::fs::write(own.join("USER.md"), "own-workspace-canary-55d0").expect("write");
    // The runtime report says how it runs and how its key travels, by name only.
    let report = compute.runtime_report(&rev).await.expect("runtime report");
    let said: Vec<(String, String)> = report.pods[0]
        .events
        .iter()
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    assert!(
        said.iter().any(|(reason, message)| reason == "Contained"
            && message.contains("seccomp")
            && message.contains("a private network")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|(reason, message)| reason == "SecretDelivery"
                && message.starts_with("MODEL_KEY (the key of model provider fake) never enters")),
        "{said:?}"
    );
    assert!(!format!("{said:?}").contains(MODEL_KEY), "{said:?}");

    let port = compute
        .gateway_access(&agent)
        .await
        .expect("access")
        .expect("a gateway")
        .url
        .rsplit(':')
        .next()
        .expect("port")
        .to_owned();
    std::fs::write(own.join("loopback-probe.js"), LOOPBACK_PROBE).expect("probe");
    // A listener of the host's loopback, as occ's API or a local database would be.
    let host_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("host listener");
    let mut probes = vec![
        ("read", json!({"path": own.join("USER.md")})),
        ("read", json!({"path": occ_key})),
        ("read", json!({"path": other_workspace.join("SOUL.md")})),
        ("read", json!({"path": dir.join("gateway-token")})),
        ("read", json!({"path": dir.join("gateway.json")})),
        (
            "write",
            json!({"path": own.join("probe.txt"), "content": "written-inside"}),
        ),
        (
            "write",
            json!({"path": driver.root.path().join("planted.txt"), "content": "planted"}),
        ),
        (
            "exec",
            json!({"command": format!(
                "cat {}; grep -E 'CapEff|NoNewPrivs|Seccomp:' /proc/self/status; unshare --user true 2>&1; echo unshare=$?; ls /proc | grep -c '^[0-9]'",
                occ_key.display()
            )}),
        ),
        (
            "exec",
            json!({"command": format!(
                "node {} {port}; for port in {} {}; do node -e \"{}\" $port; done; for url in {named_url} {unnamed_url}; do node -e \"{}\" $url; done",
                own.join("loopback-probe.js").display(),
                host_listener.local_addr().expect("addr").port(),
                fake.port(),
                HOST_PORT_PROBE,
                FETCH_PROBE,
            )}),
        ),
        (
            "exec",
            json!({"command": format!(
                "{{ printf 'MODEL_KEY=%s\\n' \"$MODEL_KEY\"; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; }} | rev; grep -r -l -s sk-contained {} {} {} /tmp; echo end-of-env",
                dir.join("home").display(),
                dir.join("state").display(),
                dir.join("revisions").display(),
            )}),
        ),
    ];
    let log = dir
        .join("logs")
        .join(rev.revision_id.as_str())
        .join("gateway.log");
    for (name, args) in probes.drain(..) {
        fake.call_tool(name, args);
        if let Err(e) =
            conformance::chat_turn(compute, &agent, "containment", "use your tool").await
        {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the {name} turn failed: {e}\ngateway log:\n{log}");
        }
    }
    let results = fake.tool_results();
    assert_eq!(results.len(), 10, "every tool call came back: {results:#?}");
    assert!(
        results[0].contains("own-workspace-canary-55d0"),
        "the Agent reads its own workspace (the probe works): {results:#?}"
    );
    let token = std::fs::read_to_string(dir.join("gateway-token")).expect("token");
    for (i, secret) in [
        (1, "occ-admin-key-canary-7f3a"),
        (2, "other-agent-canary-91c2"),
        (3, token.trim()),
        (4, "\"pid\""),
    ] {
        assert!(
            !results[i].contains(secret),
            "probe {i} reached what it must not: {}",
            results[i]
        );
    }
    assert_eq!(
        std::fs::read_to_string(own.join("probe.txt")).expect("written inside"),
        "written-inside"
    );
    assert!(
        !driver.root.path().join("planted.txt").exists(),
        "the Agent wrote outside its workspace: {}",
        results[6]
    );
    // Its shell: no capability, no way to gain one, and only its own processes in view.
    let shell = &results[7];
    assert!(!shell.contains("occ-admin-key-canary-7f3a"), "{shell}");
    assert!(shell.contains("CapEff:\t0000000000000000"), "{shell}");
    assert!(shell.contains("NoNewPrivs:\t1"), "{shell}");
    // Under the seccomp filter: a user namespace (the way to capabilities of its own) is
    // refused by the filter's EPERM.
    assert!(shell.contains("Seccomp:\t2"), "{shell}");
    assert!(
        shell.contains("unshare=1") && shell.contains("Operation not permitted"),
        "{shell}"
    );
    let processes: usize = shell
        .lines()
        .find_map(|line| line.trim().parse().ok())
        .unwrap_or(usize::MAX);
    assert!(processes < 30, "it sees {processes} processes: {shell}");
    // A gateway on the shared loopback (its own here; another Agent's answers the same) takes
    // no client for coming from loopback: without the token even a signed device is refused,
    // and nothing is paired for a retry.
    let loopback = &results[8];
    assert_eq!(
        loopback.matches("AUTH_TOKEN_MISSING").count(),
        2,
        "both attempts refused for want of the token: {loopback}"
    );
    assert!(!loopback.contains("hello-ok"), "{loopback}");
    // In its private network the host's loopback listeners do not exist: neither one the
    // configuration does not name, nor the model, which it reaches only through the proxy.
    assert_eq!(
        loopback.matches("host-port refused ECONNREFUSED").count(),
        2,
        "the Agent reached a listener of the host: {loopback}"
    );
    // Beyond its loopback only through the egress proxy (Node's own fetch follows
    // HTTP_PROXY): the named endpoint answers; the proxy refuses the tunnel to the unnamed one
    // on the same address (403, which Node reports as a cancelled request).
    assert!(
        loopback.contains(&format!("fetch {named_url} 200 lan-ok")),
        "the named endpoint through the egress proxy: {loopback}"
    );
    assert!(
        loopback.contains(&format!("fetch {unnamed_url} failed"))
            && loopback.matches("lan-ok").count() == 1,
        "the egress proxy refuses this machine's other listeners: {loopback}"
    );
    // Its model key: not in its environment (nor its sandbox's first processes'), nor in any
    // file it can read; the variable holds the proxy's placeholder.
    // (Each line reversed by the probe: OpenClaw shortens what looks like a credential in a
    // tool's output, which would hide a leak from this check.)
    let env: String = results[9]
        .lines()
        .map(|line| line.chars().rev().collect::<String>() + "\n")
        .collect();
    assert!(
        env.contains("vne-fo-dne"),
        "the probe ran to the end: {env}"
    );
    assert!(
        !env.contains(MODEL_KEY),
        "the Agent reached its model key: {env}"
    );
    assert!(
        env.contains(&format!(
            "MODEL_KEY={}\n",
            occ_host::credential_proxy::PLACEHOLDER
        )),
        "{env}"
    );
    assert!(
        !results[9].contains("/home") && !results[9].contains("/state"),
        "a file the Agent reads holds its key: {}",
        results[9]
    );
    // Yet every turn reached the model, with the key put on the wire by the proxy.
    let calls = fake.requests_to("/v1/chat/completions");
    assert!(calls.len() >= 20, "{} model calls", calls.len());
    for call in &calls {
        assert_eq!(
            call.bearer(),
            Some(MODEL_KEY),
            "the model saw another credential"
        );
    }
    compute.stop_revision(&rev).await.expect("stop");
    assert!(recorded_gateways(driver.root.path()).is_empty());
}
