//! The test kubelet's harness container: `occ harness-launch --input <file>` run in process
//! ([`occ_host::harness::launch::run`], as `occ harness-launch` runs it) with the launch input
//! mapped to the host — every path through the container's mounts, the runtime to the shared
//! test runtime, the app-server to a free loopback port, the gateway address (a Service) to the
//! kubelet's proxy — and its log file copied, line by line, into the container instance's log
//! that `pods/log` serves. Ready when the app-server accepts connections (its readiness probe);
//! a launcher that returns is a container exit, restarted like any other.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use occ_host::harness::{LaunchInput, read_launch_input};
use serde_json::json;
use tokio::sync::{Semaphore, watch};

use super::services::{proxy_port, service_of};
use super::{Inner, PodCtx, TICK, free_port, lock, map_mounted};

/// At most this many harnesses run at once in one test process.
pub const MAX_HARNESSES: usize = 2;
static HARNESS_SLOTS: Semaphore = Semaphore::const_new(MAX_HARNESSES);

/// A harness container ready to start.
pub(super) struct HarnessContainer {
    pub name: String,
    /// The launch input with host paths (ports and the gateway address set at each start).
    pub input: LaunchInput,
    /// The app-server's container port (what Services target).
    pub container_port: u16,
}

/// Whether a container runs `occ harness-launch`.
pub(super) fn is_harness(argv: &[String]) -> bool {
    argv.windows(2).any(|w| {
        w[1] == "harness-launch" && Path::new(&w[0]).file_name().is_some_and(|n| n == "occ")
    })
}

/// The harness container of `argv`, its launch input read from the mounted file and mapped.
pub(super) fn prepare(
    name: &str,
    argv: &[String],
    mounts: &[(String, PathBuf)],
    runtime_root: &Path,
    pod_dir: &Path,
) -> Result<HarnessContainer, String> {
    let file = argv
        .windows(2)
        .find(|w| w[0] == "--input")
        .map(|w| w[1].clone())
        .ok_or_else(|| format!("container {name}: harness-launch without --input"))?;
    let host_file = map_mounted(mounts, &file)
        .ok_or_else(|| format!("container {name}: {file} is not in a volume"))?;
    let mut input = read_launch_input(Path::new(&host_file)).map_err(|e| e.to_string())?;
    let map = |path: &mut PathBuf| -> Result<(), String> {
        let text = path.display().to_string();
        *path = match map_mounted(mounts, &text) {
            Some(mapped) => PathBuf::from(mapped),
            // Outside every volume: the container's own filesystem.
            None => PathBuf::from(super::rootfs_path(pod_dir, &text)),
        };
        Ok(())
    };
    for path in [
        &mut input.workspace,
        &mut input.home,
        &mut input.codex_home,
        &mut input.tmp_dir,
        &mut input.status_file,
        &mut input.login.credential_file,
        &mut input.node.state_dir,
        &mut input.node.setup_code_file,
    ] {
        map(path)?;
    }
    if let Some(setup) = input.workspace_setup.as_mut() {
        map(setup)?;
    }
    input.runtime_dir = runtime_root.to_path_buf();
    // The container's stdout is the log file, copied into `pods/log`.
    input.log_stdout = false;
    let container_port = input.app_server.port;
    input.app_server.host = std::net::Ipv4Addr::LOCALHOST.into();
    Ok(HarnessContainer {
        name: name.to_owned(),
        input,
        container_port,
    })
}

/// What stops a running launcher and tells when it has.
pub(super) struct HarnessRun {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    tail: tokio::task::AbortHandle,
}

impl HarnessRun {
    /// Asks the launcher to stop (SIGTERM); the returned task ends once it has.
    pub(super) fn stop(self) -> tokio::task::JoinHandle<()> {
        let _ = self.stop.send(true);
        self.tail.abort();
        self.task
    }
}

/// Runs the harness container until the Pod's task is aborted, restarting it on exit.
pub(super) async fn run(ctx: &PodCtx, container: &HarnessContainer) {
    let mut restarts: u32 = 0;
    loop {
        let Ok(_slot) = HARNESS_SLOTS.acquire().await else {
            return;
        };
        let port = free_port();
        let mut input = container.input.clone();
        input.app_server.port = port;
        if let Some((ns, name)) = service_of(&input.node.gateway_host, &ctx.ns)
            && let Some(local) = proxy_port(&ctx.inner, &ns, &name, input.node.gateway_port)
        {
            input.node.gateway_host = "127.0.0.1".into();
            input.node.gateway_port = local;
        }
        input.log_file = ctx.dir.join(format!("harness-{restarts}.log"));
        let container_id = lock(&ctx.inner.state).new_container_instance();
        let (stop, stopped) = watch::channel(false);
        let (done_tx, mut done) = watch::channel(false);
        let launcher = tokio::spawn({
            let input = input.clone();
            async move {
                let result =
                    occ_host::harness::launch::run(&input, &search_path(), &[], stopped).await;
                let _ = done_tx.send(true);
                result
            }
        });
        let exit_code = Arc::new(std::sync::Mutex::new(None));
        let waiter = tokio::spawn({
            let exit_code = exit_code.clone();
            async move {
                let code = match launcher.await {
                    Ok(Ok(())) => 0,
                    Ok(Err(_)) => 1,
                    Err(_) => 137,
                };
                *lock(&exit_code) = Some(code);
            }
        });
        let tail = tokio::spawn(tail_log(
            ctx.inner.clone(),
            input.log_file.clone(),
            container_id.clone(),
        ));
        lock(&ctx.shared).harness = Some(HarnessRun {
            stop,
            task: waiter,
            tail: tail.abort_handle(),
        });
        let mut ready = false;
        loop {
            tokio::select! {
                _ = done.wait_for(|d| *d) => break,
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            if !ready
                && tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
            {
                ready = true;
                lock(&ctx.shared).ready = true;
                lock(&ctx.inner.state)
                    .pod_ports
                    .entry((ctx.ns.clone(), ctx.pod.clone()))
                    .or_default()
                    .insert(container.container_port, port);
                let (name, now) = (container.name.clone(), crate::kube::now_rfc3339());
                let id = container_id.clone();
                ctx.set_status(|s| {
                    *s = json!({
                        "phase": "Running",
                        "podIP": "127.0.0.1",
                        "conditions": [
                            {"type": "Initialized", "status": "True"},
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "ContainersReady", "status": "True"},
                        ],
                        "containerStatuses": [{
                            "name": name, "ready": true, "started": true,
                            "restartCount": restarts, "containerID": id,
                            "state": {"running": {"startedAt": now}},
                        }],
                    });
                });
            } else if !ready {
                let (name, id) = (container.name.clone(), container_id.clone());
                ctx.set_status(|s| {
                    if s["containerStatuses"][0]["containerID"] != json!(id) {
                        *s = json!({
                            "phase": "Running",
                            "podIP": "127.0.0.1",
                            "conditions": [{"type": "Ready", "status": "False"}],
                            "containerStatuses": [{
                                "name": name, "ready": false, "started": true,
                                "restartCount": restarts, "containerID": id,
                                "state": {"running": {"startedAt": crate::kube::now_rfc3339()}},
                            }],
                        });
                    }
                });
            }
        }
        // The launcher returned: the container exited.
        let waiter = lock(&ctx.shared).harness.take().map(|run| run.task);
        if let Some(waiter) = waiter {
            let _ = waiter.await;
        }
        // The last lines reach the log before the instance is over.
        tokio::time::sleep(Duration::from_millis(300)).await;
        tail.abort();
        lock(&ctx.shared).ready = false;
        lock(&ctx.inner.state)
            .pod_ports
            .remove(&(ctx.ns.clone(), ctx.pod.clone()));
        let code = lock(&exit_code).unwrap_or(137);
        let name = container.name.clone();
        ctx.set_status(|s| {
            *s = json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{
                    "name": name, "ready": false, "started": false,
                    "restartCount": restarts + 1,
                    "containerID": container_id,
                    "lastState": {"terminated": {"exitCode": code, "containerID": container_id}},
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }],
            });
        });
        restarts += 1;
        drop(_slot);
        tokio::time::sleep(TICK).await;
    }
}

/// The test process's own `PATH`, as occ passes its own.
fn search_path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| occ_host::runtime::DEFAULT_PATH.into())
}

/// Copies new lines of `file` into container instance `container_id`'s log until aborted.
async fn tail_log(inner: Arc<Inner>, file: PathBuf, container_id: String) {
    let mut offset = 0usize;
    let mut partial = String::new();
    loop {
        if let Ok(bytes) = tokio::fs::read(&file).await
            && bytes.len() > offset
        {
            partial.push_str(&String::from_utf8_lossy(&bytes[offset..]));
            offset = bytes.len();
            while let Some(end) = partial.find('\n') {
                let line: String = partial.drain(..=end).collect();
                lock(&inner.state).append_instance_log(&container_id, line.trim_end_matches('\n'));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
