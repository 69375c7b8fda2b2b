//! `occ compute-host` (the SSH Driver's host side) run as a child with pipes, as sshd runs it:
//!
//! - a request from another occ build is refused (`HOST_VERSION_MISMATCH`, both versions
//!   named) before anything is done on the host; a request that is not JSON is
//!   `HOST_REQUEST_INVALID`;
//! - the heartbeat: a reader that goes away (the ssh session lost, the client killed) makes the
//!   host abandon the operation within seconds — whether it waits for the host lock or holds it
//!   — and the next operation gets the lock;
//! - the host's own deadline abandons an operation with a transient `HOST_OPERATION_TIMEOUT`.
//!
//! Slowness is made deterministically by holding the host's lock files from the test (`flock`),
//! never by a hook in the operation. Every child is killed by PID and every account a test
//! created is removed when it ends. Needs root (per-Agent accounts).

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_drivers::compute::ssh::{SshCompute, SshHost, SshSettings};
use occ_drivers::compute::{ComputeError, FailureClass, NamespaceTarget};
use occ_host::snapshot::GatewayBind;
use occ_host::wire::{
    HostOp, HostReply, HostRequest, HostSettings, HostValue, SupervisorChoice, WireVersion,
    default_unit_dir,
};
use occ_testkit::compute_conformance::{document, revision, targets};

const OCC: &str = env!("CARGO_BIN_EXE_occ");
const PREFIX: &str = "occtesth";

/// A `compute-host` child, killed by PID when dropped.
struct HostProcess {
    child: Child,
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HostProcess {
    fn start(request: &[u8]) -> Self {
        Self::start_with_path(request, None)
    }

    /// With `path` as its `PATH` (where it finds `systemctl`).
    fn start_with_path(request: &[u8], path: Option<&std::ffi::OsStr>) -> Self {
        Self::start_program(Path::new(OCC), request, path)
    }

    /// `program compute-host` (an `occ` at another path).
    fn start_program(program: &Path, request: &[u8], path: Option<&std::ffi::OsStr>) -> Self {
        let mut cmd = Command::new(program);
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let mut child = cmd
            .arg("compute-host")
            .env("OCC_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("occ compute-host");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(request).expect("request");
        drop(stdin);
        Self { child }
    }

    /// Waits up to `limit` for the exit.
    fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Reads stdout to the end: the lines and the exit status.
    fn finish(mut self) -> (String, ExitStatus) {
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read");
        let status = self.child.wait().expect("wait");
        (out, status)
    }
}

/// The reply: the last non-empty line (the empty ones are heartbeats).
fn reply_of(out: &str) -> HostReply {
    let line = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("no reply in {out:?}"));
    serde_json::from_str(line).expect("reply")
}

fn failure(out: &str) -> ComputeError {
    match reply_of(out) {
        HostReply::Failed { error } => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The per-Agent accounts a test created are removed by name from its own root's markers.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("root"),
        }
    }
    /// Outside /tmp, /home and /root (systemd units refuse roots their hardening would hide),
    /// wherever the checkout is: under /var/lib.
    fn outside_tmp() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("occ-test-compute-host-")
                .tempdir_in("/var/lib")
                .expect("root"),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    /// An exclusive `flock` on `<root>/<name>`, held until dropped.
    fn hold(&self, name: &str) -> File {
        let file = File::create(self.path().join(name)).expect("lock file");
        file.lock().expect("lock");
        file
    }
    fn lock_is_free(&self) -> bool {
        let file = File::options()
            .write(true)
            .open(self.path().join(".compute-lock"))
            .expect("open");
        file.try_lock().is_ok()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let markers = [
            self.path().join("accounts"),
            self.path().join("compute/accounts"),
        ];
        for entry in markers
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .flatten()
        {
            if let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
            {
                let _ = Command::new("userdel").arg(name).output();
                let _ = Command::new("groupdel").arg(name).output();
            }
        }
    }
}

fn settings(root: &Path, runtime: &Path) -> HostSettings {
    HostSettings {
        root: root.to_path_buf(),
        runtime_root: runtime.to_path_buf(),
        port_start: 29950,
        port_end: 29959,
        bind: GatewayBind::Loopback,
        account_prefix: PREFIX.into(),
        ready_timeout_ms: 60_000,
        stop_timeout_ms: 5_000,
        lock_timeout_ms: 60_000,
        supervisor: SupervisorChoice::Detached,
        systemd_unit_dir: default_unit_dir(),
    }
}

fn request(settings: HostSettings, operation: HostOp) -> HostRequest {
    HostRequest {
        version: WireVersion::current(),
        deadline_ms: 120_000,
        settings,
        driver_id: "compute-ssh".into(),
        operation,
    }
}

fn bytes(request: &HostRequest) -> Vec<u8> {
    serde_json::to_vec(request).expect("json")
}

fn ensure(namespace: &NamespaceTarget, settings: HostSettings) -> HostRequest {
    request(
        settings,
        HostOp::EnsureNamespace {
            namespace: namespace.clone(),
        },
    )
}

fn namespace_dir(root: &Path, ns: &NamespaceTarget) -> PathBuf {
    root.join("namespaces").join(ns.id.as_str())
}

/// Reads the first heartbeat, then closes the reading end: the session is gone.
fn lose_session_after_a_heartbeat(host: &mut HostProcess) {
    let mut stdout = host.child.stdout.take().expect("stdout");
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).expect("a heartbeat");
    assert_eq!(&byte, b"\n", "heartbeats are empty lines");
    drop(stdout);
}

#[test]
fn a_request_of_another_build_is_refused_before_anything_else() {
    let root = Root::new();
    let fresh = root.path().join("fresh");
    let (ns, _) = targets();
    let mut value = serde_json::to_value(ensure(&ns, settings(&fresh, &fresh))).expect("json");
    value["version"] = serde_json::json!({"occ": "0.0.1-old", "protocol": 0});
    let (out, status) = HostProcess::start(value.to_string().as_bytes()).finish();
    assert!(status.success());
    let error = failure(&out);
    assert_eq!(
        (error.class, error.code),
        (FailureClass::Permanent, ReasonCode::HostVersionMismatch)
    );
    assert!(
        error.message.contains("0.0.1-old") && error.message.contains(env!("CARGO_PKG_VERSION")),
        "both versions are named: {}",
        error.message
    );
    // A request without a version (an older controller) is refused the same way.
    value.as_object_mut().expect("object").remove("version");
    let (out, _) = HostProcess::start(value.to_string().as_bytes()).finish();
    assert_eq!(failure(&out).code, ReasonCode::HostVersionMismatch);
    // Nothing was done on the host.
    assert!(!fresh.exists());
    // Not JSON at all.
    let (out, status) = HostProcess::start(b"ssh-banner garbage\n").finish();
    assert!(status.success());
    let error = failure(&out);
    assert_eq!(
        (error.class, error.code),
        (FailureClass::Permanent, ReasonCode::HostRequestInvalid)
    );
}

#[test]
fn a_lost_session_abandons_an_operation_waiting_for_the_lock() {
    let root = Root::new();
    let (ns, _) = targets();
    let lock = root.hold(".compute-lock");
    let mut host = HostProcess::start(&bytes(&ensure(&ns, settings(root.path(), root.path()))));
    lose_session_after_a_heartbeat(&mut host);
    let status = host
        .exit_within(Duration::from_secs(6))
        .expect("the host gives up within seconds");
    assert!(!status.success(), "{status}");
    drop(lock);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !namespace_dir(root.path(), &ns).exists(),
        "the abandoned operation never ran"
    );
    // The next operation takes the lock and runs.
    let (out, _) =
        HostProcess::start(&bytes(&ensure(&ns, settings(root.path(), root.path())))).finish();
    assert_eq!(
        reply_of(&out),
        HostReply::Ok {
            value: HostValue::Convergence { pending: false }
        }
    );
    assert!(namespace_dir(root.path(), &ns).exists());
}

#[test]
fn a_lost_session_releases_the_lock_the_operation_holds() {
    occ_testkit::runtime::shared_runtime();
    let runtime = occ_testkit::runtime::runtime_root();
    let root = Root::new();
    let settings = settings(root.path(), &runtime);
    let (ns, agent) = targets();
    let (out, _) = HostProcess::start(&bytes(&ensure(&ns, settings.clone()))).finish();
    assert!(matches!(reply_of(&out), HostReply::Ok { .. }), "{out}");
    // prepare-revision takes the host lock, then waits for the port allocation lock, which the
    // test holds: the operation holds the host lock for as long as the test wants.
    let allocation = root.hold(".allocation.lock");
    let placeholder = placeholder_compute(&settings);
    let rev = revision(&placeholder, &agent, 1, document("gpt-5"));
    let prepare = request(
        settings.clone(),
        HostOp::PrepareRevision {
            revision: Box::new(rev),
            workspace_setup: None,
        },
    );
    let mut host = HostProcess::start(&bytes(&prepare));
    let deadline = Instant::now() + Duration::from_secs(60);
    while root.lock_is_free() {
        assert!(
            Instant::now() < deadline,
            "prepare never took the host lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    lose_session_after_a_heartbeat(&mut host);
    let status = host
        .exit_within(Duration::from_secs(8))
        .expect("the host gives up within seconds");
    assert!(!status.success(), "{status}");
    assert!(root.lock_is_free(), "the host lock is released");
    // The next operation takes the lock.
    let (out, _) = HostProcess::start(&bytes(&ensure(&ns, settings))).finish();
    assert!(matches!(reply_of(&out), HostReply::Ok { .. }), "{out}");
    drop(allocation);
}

#[test]
fn the_host_deadline_abandons_an_operation() {
    let root = Root::new();
    let (ns, _) = targets();
    let lock = root.hold(".compute-lock");
    let mut slow = ensure(&ns, settings(root.path(), root.path()));
    slow.deadline_ms = 1_500;
    let started = Instant::now();
    let (out, status) = HostProcess::start(&bytes(&slow)).finish();
    let elapsed = started.elapsed();
    assert!(!status.success(), "{status}");
    assert!(elapsed < Duration::from_secs(6), "{elapsed:?}");
    let error = failure(&out);
    assert_eq!(
        (error.class, error.code),
        (FailureClass::Transient, ReasonCode::HostOperationTimeout)
    );
    drop(lock);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!namespace_dir(root.path(), &ns).exists());
}

/// systemd as far as this machine allows (it runs no systemd): a fake `systemctl`, first on the
/// `PATH` of `occ compute-host`, logs each call and answers `is-active` from a state file
/// (`restart` and `stop` return once their job is done, as systemd's do); a
/// thread of the test plays the service manager for `restart` and `stop` by reading the unit
/// file the Driver wrote and running its `ExecStartPre` and `ExecStart` lines as its `User=`,
/// in its `WorkingDirectory=`, with exactly its `Environment=` and `EnvironmentFile=`
/// variables. This proves the unit's command lines and environment start a real gateway that
/// answers with the Agent's token and that the workspace check passes as the Agent's user; it
/// does not prove the sandboxing directives (systemd is not there to apply them).
struct FakeSystemd {
    dir: PathBuf,
    units: PathBuf,
    stop: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<String>>>,
    gateway: Arc<Mutex<Option<Child>>>,
    player: Option<std::thread::JoinHandle<()>>,
}

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

impl FakeSystemd {
    fn start(dir: PathBuf, units: PathBuf) -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(&units).expect("units");
        let script = bin.join("systemctl");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 echo \"$*\" >>{calls}\n\
                 case \"$1\" in\n\
                 is-active) cat {state} ;;\n\
                 restart|stop)\n\
                   # Like systemd, return once the job is done (the test's thread does it).\n\
                   echo pending >{state}\n\
                   n=0; while [ \"$(cat {state})\" = pending ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done ;;\n\
                 esac\n\
                 exit 0\n",
                calls = dir.join("calls").display(),
                state = dir.join("state").display()
            ),
        )
        .expect("systemctl");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.join("state"), "inactive\n").expect("state");
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let gateway = Arc::new(Mutex::new(None));
        let player = std::thread::spawn({
            let (dir, units) = (dir.clone(), units.clone());
            let (stop, events, gateway) = (stop.clone(), events.clone(), gateway.clone());
            move || play(&dir, &units, &stop, &events, &gateway)
        });
        Self {
            dir,
            units,
            stop,
            events,
            gateway,
            player: Some(player),
        }
    }

    fn path_env(&self) -> std::ffi::OsString {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        std::env::join_paths(
            std::iter::once(self.dir.join("bin")).chain(std::env::split_paths(&rest)),
        )
        .expect("PATH")
    }

    /// The calls so far, without the probes (`--version`, `is-active`), whose number depends on
    /// timing.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .filter(|l| *l != "--version" && !l.starts_with("is-active "))
            .map(str::to_owned)
            .collect()
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().expect("events").clone()
    }

    fn gateway_pid(&self) -> Option<u32> {
        self.gateway
            .lock()
            .expect("gateway")
            .as_ref()
            .map(Child::id)
    }
}

impl Drop for FakeSystemd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(player) = self.player.take() {
            let _ = player.join();
        }
        kill_gateway(&self.gateway);
    }
}

fn kill_gateway(gateway: &Mutex<Option<Child>>) {
    if let Some(mut child) = gateway.lock().expect("gateway").take() {
        if let Some(pid) = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = child.wait();
    }
}

fn id_of(flag: &str, user: &str) -> u32 {
    let out = Command::new("id").args([flag, user]).output().expect("id");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("numeric id")
}

/// Plays systemd for `restart` and `stop` calls, in order.
fn play(
    dir: &Path,
    units: &Path,
    stop: &AtomicBool,
    events: &Mutex<Vec<String>>,
    gateway: &Mutex<Option<Child>>,
) {
    use std::os::unix::process::CommandExt as _;
    let mut seen = 0;
    while !stop.load(Ordering::SeqCst) {
        let calls = std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
        let lines: Vec<&str> = calls.lines().collect();
        for line in &lines[seen..] {
            if let Some(unit) = line.strip_prefix("stop ") {
                kill_gateway(gateway);
                std::fs::write(dir.join("state"), "inactive\n").expect("state");
                events
                    .lock()
                    .expect("events")
                    .push(format!("stopped {unit}"));
            }
            let Some(unit) = line.strip_prefix("restart ") else {
                continue;
            };
            kill_gateway(gateway);
            let text = std::fs::read_to_string(units.join(unit)).expect("unit file");
            let mut env: Vec<(String, String)> = Vec::new();
            let (mut user, mut cwd, mut pre, mut start) = (None, None, None, None);
            for l in text.lines() {
                let Some((key, value)) = l.split_once('=') else {
                    continue;
                };
                match key {
                    "User" => user = Some(value.to_owned()),
                    "WorkingDirectory" => cwd = Some(value.to_owned()),
                    "Environment" => {
                        let (k, v) = value.split_once('=').expect("K=V");
                        env.push((k.into(), v.into()));
                    }
                    "EnvironmentFile" => {
                        for e in std::fs::read_to_string(value)
                            .expect("EnvironmentFile")
                            .lines()
                        {
                            let (k, v) = e.split_once('=').expect("K=V");
                            env.push((k.into(), v.into()));
                        }
                    }
                    "ExecStartPre" => pre = Some(value.to_owned()),
                    "ExecStart" => start = Some(value.to_owned()),
                    _ => {}
                }
            }
            let user = user.expect("User=");
            let (uid, gid) = (id_of("-u", &user), id_of("-g", &user));
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("service.log"))
                .expect("log");
            let command = |line: &str| {
                let mut words = line.split_whitespace();
                let mut cmd = Command::new(words.next().expect("program"));
                cmd.args(words)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(cwd.as_deref().expect("WorkingDirectory="))
                    .uid(uid)
                    .gid(gid)
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().expect("log"))
                    .stderr(log.try_clone().expect("log"));
                cmd
            };
            if let Some(pre) = &pre {
                let status = command(pre).status().expect("ExecStartPre");
                events
                    .lock()
                    .expect("events")
                    .push(format!("ExecStartPre {status}"));
                if !status.success() {
                    std::fs::write(dir.join("state"), "failed\n").expect("state");
                    continue;
                }
            }
            let child = command(&start.expect("ExecStart="))
                .process_group(0)
                .spawn()
                .expect("ExecStart");
            events
                .lock()
                .expect("events")
                .push(format!("started {unit} as {uid}"));
            *gateway.lock().expect("gateway") = Some(child);
            std::fs::write(dir.join("state"), "active\n").expect("state");
        }
        seen = lines.len();
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn uid_of_process(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("Uid")
}

#[test]
fn a_gateway_runs_from_its_systemd_unit() {
    use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
    use occ_host::account::account_name;
    use occ_host::systemd::unit_name;
    use occ_host::wire::WireSetup;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    // The Agent's user runs the runtime: it must be able to reach it wherever the checkout is.
    let programs = occ_testkit::runtime::AgentReachablePrograms::shared(Path::new(OCC));
    let root = Root::outside_tmp();
    // The runtime through a link in the root, and occ itself from the root (its unit runs
    // `occ workspace-setup` from where `occ compute-host` ran): the checkout may be under /tmp.
    let runtime = root.path().join("runtime");
    std::os::unix::fs::symlink(programs.runtime(), &runtime).expect("link");
    let occ = root.path().join("occ");
    if std::fs::hard_link(OCC, &occ).is_err() {
        std::fs::copy(OCC, &occ).expect("copy occ");
    }
    let fake = FakeSystemd::start(root.path().join("fake"), root.path().join("units"));
    let path = fake.path_env();
    let mut settings = settings(&root.path().join("compute"), &runtime);
    settings.supervisor = SupervisorChoice::Systemd;
    settings.systemd_unit_dir = fake.units.clone();
    settings.port_start = 29955;
    settings.ready_timeout_ms = 180_000;
    let run = |operation: HostOp| {
        let (out, _) = HostProcess::start_program(
            &occ,
            &bytes(&request(settings.clone(), operation)),
            Some(&path),
        )
        .finish();
        match reply_of(&out) {
            HostReply::Ok { value } => value,
            HostReply::Failed { error } => panic!(
                "{error}\nevents: {:?}\nservice log: {}",
                fake.events(),
                std::fs::read_to_string(fake.dir.join("service.log")).unwrap_or_default()
            ),
        }
    };
    let (ns, agent) = targets();
    let placeholder = placeholder_compute(&settings);
    let rev = Box::new(revision(&placeholder, &agent, 1, document("gpt-5")));
    let setup = WireSetup::from(&WorkspaceSetup {
        id: "wss_systemd".into(),
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.agent_id.clone(),
        defaults_id: Some(occ_host::workspace_setup::STOCK_DEFAULTS_ID.into()),
        files: Some(
            [(
                WorkspaceFileName::User,
                "# USER.md\n\nFrom the unit test.\n".into(),
            )]
            .into(),
        ),
        completed: false,
    });
    run(HostOp::EnsureNamespace {
        namespace: ns.clone(),
    });
    assert!(matches!(
        run(HostOp::PrepareRevision {
            revision: rev.clone(),
            workspace_setup: Some(setup.clone()),
        }),
        HostValue::Readiness { ready: true, .. }
    ));
    let activate = HostOp::ActivateRevision {
        revision: rev.clone(),
        workspace_setup: Some(setup),
    };
    assert_eq!(run(activate.clone()), HostValue::Done);

    let unit = unit_name(agent.agent_id.as_str());
    let user = account_name(PREFIX, agent.namespace_id.as_str(), agent.agent_id.as_str());
    let agent_dir = settings
        .root
        .join("namespaces")
        .join(agent.namespace_id.as_str())
        .join("agents")
        .join(agent.agent_id.as_str());
    // The unit ran the workspace check, then the gateway as the Agent's user.
    let events = fake.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events[0].starts_with("ExecStartPre exit status: 0"),
        "{events:?}"
    );
    let uid = id_of("-u", &user);
    assert_eq!(uid_of_process(fake.gateway_pid().expect("gateway")), uid);
    // The token is in the root-only environment file, never in the unit.
    let token = std::fs::read_to_string(agent_dir.join("gateway-token")).expect("token");
    let text = std::fs::read_to_string(fake.units.join(&unit)).expect("unit");
    assert!(!text.contains(&token));
    let meta = std::fs::metadata(fake.units.join(&unit)).expect("unit");
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    let env_file = std::fs::metadata(agent_dir.join("gateway-token.env")).expect("env file");
    assert_eq!(
        (env_file.uid(), env_file.permissions().mode() & 0o777),
        (0, 0o600)
    );
    let check = std::fs::metadata(agent_dir.join("workspace-setup.json")).expect("check input");
    assert_eq!(
        (check.uid(), check.gid(), check.permissions().mode() & 0o777),
        (0, id_of("-g", &user), 0o640)
    );
    assert_eq!(
        run(HostOp::Observe {
            revision: rev.clone()
        }),
        HostValue::Runtime {
            state: "serving".into()
        }
    );
    // Activating the serving revision again changes nothing: no reload, no restart.
    assert_eq!(run(activate), HostValue::Done);
    assert_eq!(fake.events().len(), 2);
    run(HostOp::StopRevision {
        revision: rev.clone(),
    });
    assert!(fake.gateway_pid().is_none(), "stopped");
    assert!(fake.units.join(&unit).exists(), "stop keeps the unit file");
    run(HostOp::DeleteAgent {
        agent: agent.clone(),
    });
    assert!(!fake.units.join(&unit).exists());
    assert!(!agent_dir.exists());
    assert!(
        !Command::new("getent")
            .args(["passwd", &user])
            .output()
            .expect("getent")
            .status
            .success(),
        "the account is gone"
    );
    assert_eq!(
        fake.calls(),
        [
            "daemon-reload".to_owned(),
            format!("enable {unit}"),
            format!("restart {unit}"),
            format!("enable {unit}"),
            format!("stop {unit}"),
            format!("disable {unit}"),
            format!("stop {unit}"),
            format!("disable {unit}"),
            "daemon-reload".into(),
        ]
    );
}

/// An SSH Compute Driver that is never connected: only its selection is used, to admit the
/// revisions these tests hand to the host directly.
fn placeholder_compute(settings: &HostSettings) -> SshCompute {
    SshCompute::new(SshSettings {
        host: SshHost {
            address: "127.0.0.1".into(),
            port: 22,
            user: "root".into(),
            identity_file: "/nonexistent/id".into(),
            known_hosts_file: "/nonexistent/known_hosts".into(),
            remote_occ: OCC.into(),
            host: settings.clone(),
        },
        namespace_hosts: std::collections::BTreeMap::new(),
        connect_timeout: Duration::from_secs(1),
        operation_timeout: Duration::from_secs(60),
        maintenance_interval: None,
    })
    .expect("selection")
}
