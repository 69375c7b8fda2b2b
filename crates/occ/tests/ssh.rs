//! The SSH Compute Driver against a real OpenSSH server on 127.0.0.1 (started by each test) and
//! real OpenClaw gateways on the "remote" side, run by the real `occ compute-host` (this build's
//! binary) over the system `ssh` client:
//!
//! - the Compute conformance suite (its resumed revision's Control UI through the Driver's SSH
//!   forward included);
//! - two Agents on one host: separate Unix users, 0700 directories, gateways running as their
//!   own users, staged workspace files applied as the Agent's user, neither user can read the
//!   other's files, workspace files GET/PUT through the gateway endpoint the Driver hands out;
//! - an unknown or changed host key is refused (permanent, nothing created on the host); a
//!   revision that needs a Secret is refused before the host is contacted;
//! - sshd stopped while gateways serve: transient failures, the gateways outlive it, and the
//!   retried activation converges once it is back (through the whole stack: a deploy while
//!   sshd is down converges once it is back).
//!
//! Gateway-starting tests take turns (at most two gateways at once); every process a test
//! started is killed by PID and every account it created is removed when it ends.

mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_drivers::compute::ssh::{SshCompute, SshHost, SshSettings};
use occ_drivers::compute::{
    AgentTarget, Compute, FailureClass, Readiness, RevisionContext, RuntimeState, SecretText,
};
use occ_host::account::account_name;
use occ_host::recorded_gateways;
use occ_host::snapshot::GatewayBind;
use occ_host::wire::{HostSettings, SupervisorChoice, default_unit_dir};
use occ_host::workspace_setup::STOCK_DEFAULTS_ID;
use occ_testkit::compute_conformance::{self as conformance, document, revision, targets};
use occ_testkit::runtime::AgentReachablePrograms;
use support::sshd::Sshd;
use tokio::sync::Mutex;

/// One gateway-starting test at a time.
static GATEWAYS: Mutex<()> = Mutex::const_new(());

const OCC: &str = env!("CARGO_BIN_EXE_occ");
const PREFIX: &str = "occtest";

/// The "remote" root of one test: gateways killed by PID and test accounts removed on drop.
struct Host {
    root: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        Self {
            root: tempfile::tempdir().expect("root"),
        }
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn agent_dir(&self, agent: &AgentTarget) -> PathBuf {
        self.path()
            .join("namespaces")
            .join(agent.namespace_id.as_str())
            .join("agents")
            .join(agent.agent_id.as_str())
    }

    /// The account names occ recorded under this root.
    fn accounts(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path().join("accounts")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".json")
                    .map(str::to_owned)
            })
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for (pid, _) in recorded_gateways(self.path()) {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
        occ_testkit::occ_process::kill_processes_with_env(&format!("{}/", self.path().display()));
        for name in self.accounts() {
            let _ = std::process::Command::new("userdel").arg(&name).output();
            let _ = std::process::Command::new("groupdel").arg(&name).output();
        }
    }
}

/// The runtime and `occ` where the Agents' users can reach them (gateways and workspace setup
/// run as those users, from the runtime and from the `occ` that runs `occ compute-host`).
fn agent_programs() -> &'static AgentReachablePrograms {
    AgentReachablePrograms::shared(Path::new(OCC))
}

fn driver(
    sshd: &Sshd,
    host: &Host,
    programs: &AgentReachablePrograms,
    ports: (u16, u16),
    known: PathBuf,
) -> SshCompute {
    driver_at(
        sshd,
        host,
        (programs.occ(), programs.runtime()),
        ports,
        known,
    )
}

/// A Driver whose host runs `occ` and the runtime from the given paths.
fn driver_at(
    sshd: &Sshd,
    host: &Host,
    (occ, runtime): (&Path, &Path),
    ports: (u16, u16),
    known: PathBuf,
) -> SshCompute {
    SshCompute::new(SshSettings {
        host: SshHost {
            address: "127.0.0.1".into(),
            port: sshd.port,
            user: "root".into(),
            identity_file: sshd.identity(),
            known_hosts_file: known,
            remote_occ: occ.to_path_buf(),
            host: HostSettings {
                root: host.path().to_path_buf(),
                runtime_root: runtime.to_path_buf(),
                port_start: ports.0,
                port_end: ports.1,
                bind: GatewayBind::Loopback,
                account_prefix: PREFIX.into(),
                ready_timeout_ms: 180_000,
                stop_timeout_ms: 15_000,
                lock_timeout_ms: 60_000,
                // The sshd tests run the gateways detached, whatever the host runs.
                supervisor: SupervisorChoice::Detached,
                systemd_unit_dir: default_unit_dir(),
            },
        },
        namespace_hosts: std::collections::BTreeMap::new(),
        connect_timeout: Duration::from_secs(5),
        operation_timeout: Duration::from_secs(400),
        maintenance_interval: None,
    })
    .expect("driver")
}

fn user_exists(name: &str) -> bool {
    std::process::Command::new("getent")
        .args(["passwd", name])
        .output()
        .expect("getent")
        .status
        .success()
}

/// The real uid of a live process.
fn process_uid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("Uid")
}

fn gateway_pid(dir: &Path) -> u32 {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("gateway.json")).expect("gateway.json"))
            .expect("json");
    u32::try_from(record["pid"].as_u64().expect("pid")).expect("pid")
}

/// `cat <path>` as `user`: Ok(contents) or Err(stderr).
fn cat_as(user: &str, path: &Path) -> Result<String, String> {
    let out = std::process::Command::new("runuser")
        .args(["-u", user, "--", "cat"])
        .arg(path)
        .output()
        .expect("runuser");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::print_stderr,
    reason = "the rollback figures docs/ARCHITECTURE.md cites"
)]
async fn conformance_suite_over_ssh() {
    let programs = tokio::task::spawn_blocking(agent_programs).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let sshd = Sshd::start().await;
    let host = Host::new();
    let compute = driver(&sshd, &host, programs, (29900, 29909), sshd.known_hosts());
    let figures = conformance::lifecycle_and_rollback(&compute).await;
    conformance::refusals(&compute).await;
    eprintln!("SSH rollback: {figures:?}");
    assert!(recorded_gateways(host.path()).is_empty());
    // Deleting the Agents removed their accounts.
    assert!(host.accounts().is_empty(), "{:?}", host.accounts());
}

/// Two Agents on one host: each its own account and group, its files its own, its workspace
/// files through the Driver's SSH forward, A's own tools unable to reach B or the host's records
/// ([`agent_tools_reach_only_their_own_files`]), sshd going away while both serve, a planted
/// log link refused, and delete removing directories, gateways and accounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_one_host_are_separate_users() {
    let programs = tokio::task::spawn_blocking(agent_programs).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let mut sshd = Sshd::start().await;
    let host = Host::new();
    let compute = driver(&sshd, &host, programs, (29910, 29919), sshd.known_hosts());
    let (ns, a) = targets();
    let b = AgentTarget {
        agent_id: occ_core::AgentId::generate(),
        ..a.clone()
    };
    let b = AgentTarget {
        service_principal_id: occ_core::IamId::agent_service_principal(&b.agent_id),
        ..b
    };
    compute.ensure_namespace(&ns).await.expect("ensure");

    // A is created with a staged USER.md, applied on the host as A's user.
    let staged = "# USER.md\n\nStaged for A only.\n".to_owned();
    let setup = WorkspaceSetup {
        id: "wss_a".into(),
        namespace_id: a.namespace_id.clone(),
        agent_id: a.agent_id.clone(),
        defaults_id: Some(STOCK_DEFAULTS_ID.into()),
        files: Some([(WorkspaceFileName::User, staged.clone())].into()),
        completed: false,
    };
    let ctx_a = RevisionContext {
        workspace_setup: Some(setup),
        ..RevisionContext::default()
    };
    let ctx_b = RevisionContext::default();
    // A's model answers with tool calls: the Agent's own tools probe what it can reach.
    let fake = occ_testkit::fake_model::FakeModel::start().await;
    fake.reply("done");
    // (A literal key: the SSH Driver takes no Secret bindings.)
    let rev_a = revision(&compute, &a, 1, fake.agent_document("sk-ssh-probe-literal"));
    let rev_b = revision(&compute, &b, 1, document("gpt-5"));
    assert_eq!(
        compute
            .prepare_revision(&rev_a, &ctx_a)
            .await
            .expect("prepare a"),
        Readiness::Ready
    );
    compute
        .activate_revision(&rev_a, &ctx_a)
        .await
        .expect("activate a");
    compute
        .activate_revision(&rev_b, &ctx_b)
        .await
        .expect("activate b");
    assert_eq!(
        compute.observe(&rev_a).await.unwrap(),
        RuntimeState::Serving
    );
    assert_eq!(
        compute.observe(&rev_b).await.unwrap(),
        RuntimeState::Serving
    );

    let (user_a, user_b) = (
        account_name(PREFIX, a.namespace_id.as_str(), a.agent_id.as_str()),
        account_name(PREFIX, b.namespace_id.as_str(), b.agent_id.as_str()),
    );
    assert!(user_exists(&user_a) && user_exists(&user_b));
    let (dir_a, dir_b) = (host.agent_dir(&a), host.agent_dir(&b));
    // The Agent's state belongs to its own user and group.
    let (meta_a, meta_b) = (
        std::fs::metadata(dir_a.join("state")).unwrap(),
        std::fs::metadata(dir_b.join("state")).unwrap(),
    );
    assert_ne!(meta_a.uid(), 0);
    assert_ne!(meta_a.uid(), meta_b.uid(), "one user per Agent");
    assert_ne!(meta_a.gid(), meta_b.gid(), "one group per Agent");
    for (dir, meta) in [(&dir_a, &meta_a), (&dir_b, &meta_b)] {
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o700,
            "{}",
            dir.display()
        );
        // The Agent's directory: root's, entered by the Agent's group only, so the markers,
        // the token and the snapshots cannot be changed by the Agent.
        let top = std::fs::metadata(dir).unwrap();
        assert_eq!(
            (top.uid(), top.gid(), top.permissions().mode() & 0o777),
            (0, meta.gid(), 0o750),
            "{}",
            dir.display()
        );
        let token = std::fs::metadata(dir.join("gateway-token")).unwrap();
        assert_eq!(
            (token.uid(), token.permissions().mode() & 0o777),
            (0, 0o600)
        );
        // The gateway runs as the Agent's user, detached from the ssh session that started it.
        assert_eq!(process_uid(gateway_pid(dir)), meta.uid());
    }
    // The revision's log directory is the Agent's; `logs/` above it stays root's, so the
    // Agent's user cannot swap the directory root reads and rotates for a link.
    let logs_a = std::fs::metadata(dir_a.join("logs")).unwrap();
    assert_eq!(
        (
            logs_a.uid(),
            logs_a.gid(),
            logs_a.permissions().mode() & 0o777
        ),
        (0, meta_a.gid(), 0o750)
    );
    let rev_logs_a =
        std::fs::metadata(dir_a.join("logs").join(rev_a.revision_id.as_str())).unwrap();
    assert_eq!(
        (rev_logs_a.uid(), rev_logs_a.permissions().mode() & 0o777),
        (meta_a.uid(), 0o700)
    );
    let denied = cat_as(&user_a, &dir_a.join("gateway-token")).expect_err("the token is root's");
    assert!(denied.contains("Permission denied"), "{denied}");
    // The staged file is in A's workspace, written by A's user; B has the stock file.
    let user_md_a = dir_a.join("state/workspace/USER.md");
    assert_eq!(std::fs::read_to_string(&user_md_a).unwrap(), staged);
    assert_eq!(std::fs::metadata(&user_md_a).unwrap().uid(), meta_a.uid());
    let user_md_b = dir_b.join("state/workspace/USER.md");
    assert_ne!(std::fs::read_to_string(&user_md_b).unwrap(), staged);
    // B's stock files were copied from the runtime by B's own user.
    assert_eq!(std::fs::metadata(&user_md_b).unwrap().uid(), meta_b.uid());
    // Each user reads its own files and not the other's.
    assert_eq!(
        cat_as(&user_a, &user_md_a).expect("A reads its own"),
        staged
    );
    let denied = cat_as(&user_a, &user_md_b).expect_err("A cannot read B's workspace");
    assert!(denied.contains("Permission denied"), "{denied}");
    let denied =
        cat_as(&user_b, &dir_a.join("gateway-token")).expect_err("B cannot read A's token");
    assert!(denied.contains("Permission denied"), "{denied}");

    // Workspace files through the endpoint the Driver hands out: an SSH forward to the
    // gateway on the host's loopback (a local port outside the host's gateway range), reused.
    let access = compute.gateway_access(&a).await.unwrap().expect("access");
    let local: u16 = access
        .url
        .strip_prefix("ws://127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a loopback forward: {}", access.url));
    assert!(!(29900..=29949).contains(&local), "{}", access.url);
    assert_eq!(
        compute
            .gateway_access(&a)
            .await
            .unwrap()
            .expect("again")
            .url,
        access.url,
        "the forward is reused"
    );
    let mut session = conformance::connect(&compute, &a)
        .await
        .expect("hello-ok from A");
    let edited = "# USER.md\n\nEdited through the gateway.\n";
    session
        .file_set("main", "USER.md", edited, None, Duration::from_secs(10))
        .await
        .expect("PUT USER.md");
    let file = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .expect("GET USER.md")
        .expect("exists");
    assert_eq!(file.content, edited);
    session.close().await;
    assert_eq!(std::fs::read_to_string(&user_md_a).unwrap(), edited);
    let mut session = conformance::connect(&compute, &b)
        .await
        .expect("hello-ok from B");
    let file = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .expect("GET B's USER.md")
        .expect("exists");
    assert_ne!(file.content, edited, "B sees its own workspace");
    session.close().await;
    agent_tools_reach_only_their_own_files(&compute, &fake, &host, (&a, &b)).await;

    // sshd goes away while both serve: the Driver's operations fail as transient
    // (`HOST_UNAVAILABLE`), the gateways outlive the ssh sessions and sshd itself, and once sshd
    // is back the retried activation converges, as the worker's retry would.
    sshd.stop().await;
    let err = compute
        .activate_revision(&rev_b, &ctx_b)
        .await
        .expect_err("no sshd");
    assert_eq!(err.class, FailureClass::Transient, "{err}");
    assert_eq!(err.code, ReasonCode::HostUnavailable, "{err}");
    let err = compute.observe(&rev_b).await.expect_err("no sshd");
    assert_eq!(err.class, FailureClass::Transient, "{err}");
    assert!(occ_testkit::gateway::process_alive(gateway_pid(&dir_b)));
    sshd.resume().await;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match compute.activate_revision(&rev_b, &ctx_b).await {
            Ok(()) => break,
            Err(e) if e.class == FailureClass::Transient && attempts < 3 => {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!("activation after sshd came back: {e}"),
        }
    }
    assert_eq!(
        compute.observe(&rev_b).await.unwrap(),
        RuntimeState::Serving
    );
    conformance::connect(&compute, &b)
        .await
        .expect("hello-ok from B after sshd came back")
        .close()
        .await;

    // A link planted by A's user where root opens A's log is refused, and its target untouched.
    compute.stop_revision(&rev_a).await.expect("stop a");
    let canary = host.path().join("canary");
    std::fs::write(&canary, "root's").unwrap();
    let log = dir_a
        .join("logs")
        .join(rev_a.revision_id.as_str())
        .join("gateway.log");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&canary, &log).unwrap();
    std::os::unix::fs::lchown(&log, Some(meta_a.uid()), Some(meta_a.gid())).unwrap();
    let err = compute
        .activate_revision(&rev_a, &ctx_a)
        .await
        .expect_err("a linked log is refused");
    assert_eq!(err.code, ReasonCode::OwnershipConflict, "{err}");
    let canary_meta = std::fs::metadata(&canary).unwrap();
    assert_eq!((canary_meta.uid(), canary_meta.len()), (0, 6));

    // Deleting removes the directories, the gateways and the accounts.
    compute.delete_agent(&a).await.expect("delete a");
    compute.delete_agent(&b).await.expect("delete b");
    assert!(!dir_a.exists() && !dir_b.exists());
    assert!(!user_exists(&user_a) && !user_exists(&user_b));
    assert!(recorded_gateways(host.path()).is_empty());
    compute.delete_namespace(&ns).await.expect("delete ns");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_or_changed_host_keys_and_secrets_are_refused() {
    let programs = tokio::task::spawn_blocking(agent_programs).await.unwrap();
    let sshd = Sshd::start().await;
    let host = Host::new();
    let (ns, agent) = targets();
    for known in [sshd.wrong_known_hosts(), sshd.empty_known_hosts()] {
        let compute = driver(&sshd, &host, programs, (29920, 29929), known.clone());
        let err = compute
            .ensure_namespace(&ns)
            .await
            .expect_err("an unverified host is refused");
        assert_eq!(err.class, FailureClass::Permanent, "{err}");
        assert_eq!(err.code, ReasonCode::HostKeyVerificationFailed, "{err}");
        assert!(err.message.contains(&known.display().to_string()), "{err}");
    }
    assert!(
        !host.path().join("namespaces").exists(),
        "nothing was created on a refused host"
    );

    // A key the host does not accept: refused, permanent.
    let mut wrong_key = driver(&sshd, &host, programs, (29920, 29929), sshd.known_hosts());
    let other_key = sshd.dir.path().join("other_ed25519");
    wrong_key = SshCompute::new(SshSettings {
        host: SshHost {
            identity_file: other_key,
            ..wrong_key.settings().host.clone()
        },
        ..wrong_key.settings().clone()
    })
    .expect("driver");
    let err = wrong_key.ensure_namespace(&ns).await.expect_err("refused");
    assert_eq!(err.code, ReasonCode::HostAuthenticationFailed, "{err}");
    assert_eq!(err.class, FailureClass::Permanent);

    // Secrets are never delivered to a host: refused before the host is contacted.
    let compute = driver(&sshd, &host, programs, (29920, 29929), sshd.known_hosts());
    let rev = revision(&compute, &agent, 1, document("gpt-5"));
    let ctx = RevisionContext {
        environment: [("OPENAI_API_KEY".to_owned(), SecretText::new("sk-x".into()))].into(),
        ..RevisionContext::default()
    };
    for result in [
        compute.prepare_revision(&rev, &ctx).await.map(|_| ()),
        compute.activate_revision(&rev, &ctx).await,
    ] {
        let err = result.expect_err("refused");
        assert_eq!(err.code, ReasonCode::SecretDeliveryUnsupported, "{err}");
        assert_eq!(err.class, FailureClass::Permanent);
    }
    assert!(!host.path().join("namespaces").exists());
}

/// Containment on an SSH host, through A's own tools (the fake model answers with tool calls,
/// as a prompt-injected model would): A reads and writes its own workspace; B's workspace, the
/// host's records of both Agents (tokens, gateway records) and anything outside its workspace
/// do not exist for it; its shell runs as A's account with no capability, under the seccomp
/// filter.
async fn agent_tools_reach_only_their_own_files(
    compute: &SshCompute,
    fake: &occ_testkit::fake_model::FakeModel,
    host: &Host,
    (a, b): (&AgentTarget, &AgentTarget),
) {
    let (dir_a, dir_b) = (host.agent_dir(a), host.agent_dir(b));
    let own = dir_a.join("state/workspace");
    std::fs::write(
        dir_b.join("state/workspace/SOUL.md"),
        "other-agent-canary-4b1e",
    )
    .unwrap();
    // A listener of the host's loopback (as occ's own or another service's would be).
    let host_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let probes = [
        ("read", serde_json::json!({"path": own.join("USER.md")})),
        (
            "read",
            serde_json::json!({"path": dir_b.join("state/workspace/SOUL.md")}),
        ),
        (
            "read",
            serde_json::json!({"path": dir_a.join("gateway-token")}),
        ),
        (
            "read",
            serde_json::json!({"path": dir_b.join("gateway-token")}),
        ),
        (
            "write",
            serde_json::json!({"path": own.join("probe.txt"), "content": "written-inside"}),
        ),
        (
            "write",
            serde_json::json!({"path": host.path().join("planted.txt"), "content": "planted"}),
        ),
        (
            "exec",
            serde_json::json!({"command": format!(
                "node -e \"require('net').connect({}, '127.0.0.1').on('connect', () => {{ console.log('host-port reached'); process.exit(0); }}).on('error', (e) => console.log('host-port refused', e.code))\"; id -u; grep -E 'CapEff|NoNewPrivs|Seccomp:' /proc/self/status; ls /proc | grep -c '^[0-9]'",
                host_listener.local_addr().unwrap().port()
            )}),
        ),
    ];
    for (name, args) in probes {
        fake.call_tool(name, args);
        if let Err(e) = conformance::chat_turn(compute, a, "containment", "use your tool").await {
            panic!("the {name} turn failed: {e}");
        }
    }
    let results = fake.tool_results();
    assert_eq!(results.len(), 7, "every tool call came back: {results:#?}");
    assert!(
        results[0].contains("Edited through the gateway"),
        "A reads its own workspace (the probe works): {results:#?}"
    );
    let token = |dir: &Path| std::fs::read_to_string(dir.join("gateway-token")).unwrap();
    for (i, secret) in [
        (1, "other-agent-canary-4b1e".to_owned()),
        (2, token(&dir_a).trim().to_owned()),
        (3, token(&dir_b).trim().to_owned()),
    ] {
        assert!(
            !results[i].contains(&secret),
            "probe {i} reached what it must not: {}",
            results[i]
        );
    }
    assert_eq!(
        std::fs::read_to_string(own.join("probe.txt")).unwrap(),
        "written-inside"
    );
    assert!(
        !host.path().join("planted.txt").exists(),
        "A wrote outside its workspace: {}",
        results[5]
    );
    let shell = &results[6];
    assert!(shell.contains("CapEff:\t0000000000000000"), "{shell}");
    assert!(shell.contains("NoNewPrivs:\t1"), "{shell}");
    assert!(shell.contains("Seccomp:\t2"), "{shell}");
    // In its private network, the host's loopback listeners do not exist.
    assert!(
        shell.contains("host-port refused ECONNREFUSED"),
        "A reached a listener of the host: {shell}"
    );
    let processes: usize = shell
        .lines()
        .rev()
        .find_map(|line| line.trim().parse().ok())
        .unwrap_or(usize::MAX);
    assert!(processes < 30, "it sees {processes} processes: {shell}");
    std::fs::remove_file(own.join("probe.txt")).unwrap();
}

fn files_path(s: &support::Stack, agent: &str, name: &str) -> String {
    format!("/namespaces/{}/agents/{agent}/workspace/files/{name}", s.ns)
}

async fn file_content(s: &support::Stack, agent: &str, name: &str) -> String {
    let (status, body) = s
        .call(reqwest::Method::GET, &files_path(s, agent, name), None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "GET {name}: {body}");
    body["data"]["content"]
        .as_str()
        .expect("content")
        .to_owned()
}

/// The whole stack (`occ serve` + `occ worker` with `OCC_COMPUTE_DRIVER=ssh`): deploy → active →
/// workspace files GET/PUT → a crashed gateway restarted by maintenance → stop → resume (a
/// redeploy over SSH is the conformance suite's, a redeploy through the stack `lifecycle`'s);
/// a deploy while sshd is down is retried
/// and converges once it is back; dedicated execution and Secret bindings are refused at
/// deploy admission with 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_files_redeploy_stop_resume_through_the_api() {
    use reqwest::{Method, StatusCode};
    use serde_json::json;

    let programs = tokio::task::spawn_blocking(agent_programs).await.unwrap();
    let _turn = GATEWAYS.lock().await;
    let mut sshd = Sshd::start().await;
    let host = Host::new();
    let extra = [
        ("OCC_COMPUTE_DRIVER", "ssh".to_owned()),
        ("OCC_SSH_ADDRESS", "127.0.0.1".to_owned()),
        ("OCC_SSH_PORT", sshd.port.to_string()),
        (
            "OCC_SSH_IDENTITY_FILE",
            sshd.identity().display().to_string(),
        ),
        (
            "OCC_SSH_KNOWN_HOSTS_FILE",
            sshd.known_hosts().display().to_string(),
        ),
        ("OCC_SSH_REMOTE_OCC", programs.occ().display().to_string()),
        ("OCC_SSH_REMOTE_ROOT", host.path().display().to_string()),
        (
            "OCC_SSH_REMOTE_RUNTIME",
            programs.runtime().display().to_string(),
        ),
        ("OCC_SSH_PORT_RANGE", "29940-29949".to_owned()),
        ("OCC_SSH_ACCOUNT_PREFIX", PREFIX.to_owned()),
        // Detached gateways, whatever the machine runs (auto would pick systemd where it runs).
        ("OCC_SSH_SUPERVISOR", "detached".to_owned()),
        ("OCC_WORKER_MAX_ATTEMPTS", "10".to_owned()),
    ];
    let s = support::Stack::start_with(occ_store::Backend::Sqlite, "29940-29949", &extra).await;
    let doc1 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}});
    let cfg = s.configuration(doc1).await;
    let agent = s.agent("over-ssh", &cfg).await;

    // ---- deploy → active, through sshd ----
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev1);
    let ns_dir = host.path().join("namespaces").join(&s.ns);
    let dir = ns_dir.join("agents").join(&agent);
    let uid = std::fs::metadata(dir.join("state"))
        .expect("the Agent's state on the host")
        .uid();
    assert_ne!(uid, 0);
    assert_eq!(process_uid(gateway_pid(&dir)), uid);

    // ---- workspace files GET/PUT through the host's gateway ----
    let stock = file_content(&s, &agent, "USER.md").await;
    let edited = "# USER.md\n\nEdited over SSH.\n";
    assert_ne!(stock, edited);
    let body = serde_json::to_vec(&json!({"content": edited})).unwrap();
    let (status, r) = s
        .call(Method::PUT, &files_path(&s, &agent, "USER.md"), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(file_content(&s, &agent, "USER.md").await, edited);
    assert_eq!(
        std::fs::read_to_string(dir.join("state/workspace/USER.md")).unwrap(),
        edited
    );

    // ---- the supervisor: a crashed gateway is restarted by the worker's maintenance pass ----
    let crashed = gateway_pid(&dir);
    let group = i32::try_from(crashed)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("pid");
    rustix::process::kill_process_group(group, rustix::process::Signal::KILL).expect("kill");
    s.wait_for("the gateway restarted by maintenance", async || {
        let pid = std::fs::read(dir.join("gateway.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|r| r["pid"].as_u64())
            .and_then(|p| u32::try_from(p).ok());
        pid.is_some_and(|p| p != crashed && occ_testkit::gateway::process_alive(p))
            && dir.join("served.json").exists()
    })
    .await;
    assert_eq!(process_uid(gateway_pid(&dir)), uid);
    assert_eq!(file_content(&s, &agent, "USER.md").await, edited);

    // ---- stop: the gateway goes, the workspace stays ----
    let pid = gateway_pid(&dir);
    s.stop(&agent).await;
    s.wait_for("the stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    assert!(!occ_testkit::gateway::process_alive(pid));
    assert!(recorded_gateways(host.path()).is_empty());

    // ---- resume while sshd is down: retried, converges once it is back ----
    sshd.stop().await;
    let rev3 = s.deploy(&agent).await;
    let key = format!("agent_revision:{rev3}:reconcile");
    s.wait_for("a failed attempt while sshd is down", async || {
        let mut raw = s.db.raw().await;
        raw.count(&format!(
            "SELECT count(*) FROM controller_work WHERE idempotency_key = '{key}' AND attempt_count >= 1 AND state = 'queued'"
        ))
        .await
            == 1
    })
    .await;
    assert_ne!(s.deployment(&agent, &rev3).await["status"], "failed");
    sshd.resume().await;
    let d = s.settled(&agent, &rev3).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(
        file_content(&s, &agent, "USER.md").await,
        edited,
        "the workspace survived"
    );

    // ---- refused at deploy admission: dedicated execution, Secret bindings ----
    let r = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/agents", s.ns),
            Some(json!({"name": "ded", "configurationId": cfg, "executionMode": "dedicated", "harnessAuth": {"method": "runtime"}})),
        )
        .await;
    let ded = r["data"]["id"].as_str().unwrap().to_owned();
    let (status, r) = s
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/{ded}/deploy", s.ns),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("embedded"),
        "{r}"
    );
    let sec = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/secrets", s.ns),
            Some(json!({"name": "token", "value": "sk-test-value-123"})),
        )
        .await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bound = s
        .send(
            Method::POST,
            &format!("/namespaces/{}/configurations", s.ns),
            Some(json!({"kind": "agent", "values": {}, "secretBindings": {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": s.ns, "id": sec}}}})),
        )
        .await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let with_secret = s.agent("with-secret", &bound).await;
    let (status, r) = s
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/{with_secret}/deploy", s.ns),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("Secrets"),
        "{r}"
    );

    // ---- delete: nothing left on the host ----
    let (status, r) = s
        .call(
            Method::DELETE,
            &format!("/namespaces/{}/agents/{agent}", s.ns),
            None,
        )
        .await;
    assert!(status.is_success(), "{r}");
    // The directory goes first, then the account: wait for both.
    let account = account_name(PREFIX, &s.ns, &agent);
    s.wait_for("the deletion", async || {
        !dir.exists() && !user_exists(&account)
    })
    .await;
    assert!(recorded_gateways(host.path()).is_empty());
}

/// Namespaces mapped to their own host go there; the others to the default host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_go_to_their_hosts() {
    let programs = tokio::task::spawn_blocking(agent_programs).await.unwrap();
    let (sshd_a, sshd_b) = (Sshd::start().await, Sshd::start().await);
    let (host_a, host_b) = (Host::new(), Host::new());
    let a = driver(
        &sshd_a,
        &host_a,
        programs,
        (29920, 29929),
        sshd_a.known_hosts(),
    );
    let b = driver(
        &sshd_b,
        &host_b,
        programs,
        (29920, 29929),
        sshd_b.known_hosts(),
    );
    let (ns_default, _) = targets();
    let (ns_mapped, _) = targets();
    let compute = SshCompute::new(SshSettings {
        namespace_hosts: [(ns_mapped.id.clone(), b.settings().host.clone())].into(),
        ..a.settings().clone()
    })
    .expect("driver");
    for ns in [&ns_default, &ns_mapped] {
        compute.ensure_namespace(ns).await.expect("ensure");
    }
    let on = |host: &Host, ns: &occ_drivers::compute::NamespaceTarget| {
        host.path().join("namespaces").join(ns.id.as_str()).is_dir()
    };
    assert!(on(&host_a, &ns_default) && !on(&host_b, &ns_default));
    assert!(on(&host_b, &ns_mapped) && !on(&host_a, &ns_mapped));
    for ns in [&ns_default, &ns_mapped] {
        compute.delete_namespace(ns).await.expect("delete");
    }
    assert!(!on(&host_a, &ns_default) && !on(&host_b, &ns_mapped));
}

/// occ's `ssh` client killed mid-operation (the Driver gave up, or occ died): sshd does not
/// signal the remote `occ compute-host`, but its next heartbeat write fails, so it abandons the
/// operation instead of running it later, holding the host lock, for nobody. The operation is
/// kept waiting by the host lock, which the test holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ssh_client_abandons_the_operation_on_the_host() {
    let sshd = Sshd::start().await;
    let host = Host::new();
    let compute = std::sync::Arc::new(driver_at(
        &sshd,
        &host,
        (Path::new(OCC), Path::new("/opt/occ-test-no-runtime")),
        (29920, 29929),
        sshd.known_hosts(),
    ));
    let (ns, _) = targets();
    let lock = std::fs::File::create(host.path().join(".compute-lock")).expect("lock file");
    lock.lock().expect("lock");
    let task = tokio::spawn({
        let compute = std::sync::Arc::clone(&compute);
        let ns = ns.clone();
        async move { compute.ensure_namespace(&ns).await }
    });
    // The session is up and the host waits for the lock.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!task.is_finished());
    // Dropping the call kills the ssh client (by its PID: kill_on_drop).
    task.abort();
    let _ = task.await;
    // Within a few seconds the host has given up: releasing the lock now runs nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(lock);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !host.path().join("namespaces").join(ns.id.as_str()).exists(),
        "the abandoned operation did not run"
    );
    // The next operation takes the lock at once.
    let started = std::time::Instant::now();
    compute.ensure_namespace(&ns).await.expect("ensure");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(host.path().join("namespaces").join(ns.id.as_str()).exists());
}
