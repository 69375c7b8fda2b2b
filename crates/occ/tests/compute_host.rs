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

use occ_drivers::compute::host::{
    HostOp, HostReply, HostRequest, HostSettings, HostValue, SupervisorChoice, WireVersion,
    default_unit_dir,
};
use occ_drivers::compute::process::GatewayBind;
use occ_drivers::compute::ssh::{SshCompute, SshHost, SshSettings};
use occ_drivers::compute::{ComputeError, FailureClass, NamespaceTarget};
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
        let mut child = Command::new(OCC)
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
        let Ok(entries) = std::fs::read_dir(self.path().join("accounts")) else {
            return;
        };
        for entry in entries.flatten() {
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
        (error.class, error.code.as_str()),
        (FailureClass::Permanent, "HOST_VERSION_MISMATCH")
    );
    assert!(
        error.message.contains("0.0.1-old") && error.message.contains(env!("CARGO_PKG_VERSION")),
        "both versions are named: {}",
        error.message
    );
    // A request without a version (an older controller) is refused the same way.
    value.as_object_mut().expect("object").remove("version");
    let (out, _) = HostProcess::start(value.to_string().as_bytes()).finish();
    assert_eq!(failure(&out).code, "HOST_VERSION_MISMATCH");
    // Nothing was done on the host.
    assert!(!fresh.exists());
    // Not JSON at all.
    let (out, status) = HostProcess::start(b"ssh-banner garbage\n").finish();
    assert!(status.success());
    let error = failure(&out);
    assert_eq!(
        (error.class, error.code.as_str()),
        (FailureClass::Permanent, "HOST_REQUEST_INVALID")
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
    let placeholder = SshCompute::new(SshSettings {
        host: SshHost {
            address: "127.0.0.1".into(),
            port: 22,
            user: "root".into(),
            identity_file: "/nonexistent/id".into(),
            known_hosts_file: "/nonexistent/known_hosts".into(),
            remote_occ: OCC.into(),
            gateway_address: None,
            host: settings.clone(),
        },
        namespace_hosts: std::collections::BTreeMap::new(),
        connect_timeout: Duration::from_secs(1),
        operation_timeout: Duration::from_secs(60),
        maintenance_interval: None,
    })
    .expect("selection");
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
        (error.class, error.code.as_str()),
        (FailureClass::Transient, "HOST_OPERATION_TIMEOUT")
    );
    drop(lock);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!namespace_dir(root.path(), &ns).exists());
}
