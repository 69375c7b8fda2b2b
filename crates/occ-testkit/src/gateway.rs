//! A real OpenClaw gateway for tests, isolated in a temporary directory and stopped by PID.
//!
//! Layout of [`TestGateway::dir`]:
//!
//! ```text
//! home/                 HOME (the gateway writes ~/.cache/openclaw)
//! state/                OPENCLAW_STATE_DIR (SQLite state, locks, logs/gateway.log, caches)
//! config/openclaw.json  OPENCLAW_CONFIG_PATH: rendered by us, mode 0440 in a 0550 directory
//! workspace/            the main agent's workspace, seeded by `openclaw setup --baseline`
//! tmp/                  TMPDIR (terminal staging, setup's default log; V8's compile cache
//!                       too when the runtime has no warm one)
//! gateway.out           the gateway's stdout and stderr
//! ```
//!
//! OpenClaw still keeps three empty SQLite lock files per state directory in the hard-coded
//! `/tmp/openclaw-state-locks-<uid>/`; nothing else is written outside [`TestGateway::dir`].
//!
//! The workspace is seeded as occ's process host seeds one: with the runtime's copy of native
//! `openclaw setup --baseline` output, or by that command run against a throwaway
//! HOME/state/config (removed afterwards), so the config the gateway runs with is
//! exactly the one rendered here: token auth through `${OPENCLAW_GATEWAY_TOKEN}`, a free
//! loopback port, its own log file, update check / catalog refresh / heartbeat / cron off. The
//! gateway gets the embedding preset (`docs/gateway/embedding.md`) and no other environment
//! than `PATH` and the variables listed in [`TestGateway::spawn`].
//!
//! Dropping a [`TestGateway`] sends SIGTERM to the gateway's PID, waits up to 10 s, then
//! SIGKILL, and removes the directory. A detached watcher does the same if the test process
//! dies without dropping it.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use occ_gateway::{Endpoint, GatewayError, Hello, wait_ready};
use occ_host::runtime::OpenclawRuntime;

/// Default readiness deadline of [`TestGateway::start`] (a cold start takes 8–15 s alone,
/// much longer on a loaded 2-core box).
pub const READY_DEADLINE: Duration = Duration::from_secs(120);
/// How long [`TestGateway::stop`] waits after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
const SETUP_TIMEOUT: Duration = Duration::from_secs(180);

/// A running (or starting) gateway with one agent, `main`.
pub struct TestGateway {
    /// `ws://127.0.0.1:PORT` and the token.
    pub endpoint: Endpoint,
    /// The gateway process (`openclaw-gateway`).
    pub pid: u32,
    /// Everything the gateway owns; removed on drop.
    pub dir: tempfile::TempDir,
    /// The loopback port.
    pub port: u16,
    /// The main agent's workspace.
    pub workspace: PathBuf,
    /// `OPENCLAW_STATE_DIR`.
    pub state_dir: PathBuf,
    /// `OPENCLAW_CONFIG_PATH` (read-only).
    pub config_path: PathBuf,
    /// The gateway's stdout and stderr.
    pub output_path: PathBuf,
    /// Environment added by [`TestGateway::spawn_configured`], kept for [`TestGateway::respawn`].
    extra_env: Vec<(String, String)>,
    child: Option<tokio::process::Child>,
}

/// How a gateway stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopReport {
    /// From the first signal to the exit.
    pub elapsed: Duration,
    /// SIGKILL was needed.
    pub killed: bool,
    /// The exit code, if it exited rather than being killed by a signal.
    pub code: Option<i32>,
}

fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The environment every OpenClaw process of a test gateway gets (besides `PATH`).
fn openclaw_env(
    home: &Path,
    state: &Path,
    config: &Path,
    tmp: &Path,
) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", home.display().to_string()),
        ("TMPDIR", tmp.display().to_string()),
        ("OPENCLAW_STATE_DIR", state.display().to_string()),
        ("OPENCLAW_CONFIG_PATH", config.display().to_string()),
        // embedding preset (docs/gateway/embedding.md)
        ("OPENCLAW_DISABLE_BONJOUR", "1".into()),
        ("OPENCLAW_EXEC_SHELL_SNAPSHOT", "0".into()),
        ("OPENCLAW_NO_RESPAWN", "1".into()),
        ("OPENCLAW_SKIP_CHANNELS", "1".into()),
        // no update checks or telemetry
        ("OPENCLAW_NO_AUTO_UPDATE", "1".into()),
        ("DO_NOT_TRACK", "1".into()),
    ]
}

/// Spawns `openclaw gateway run` for the gateway directory `root` (own process group, stdin
/// null, output appended to `output`).
fn spawn_gateway(
    runtime: &OpenclawRuntime,
    root: &Path,
    config: &Path,
    token: &str,
    extra_env: &[(String, String)],
    output: &Path,
) -> tokio::process::Child {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(output)
        .expect("gateway output");
    let mut cmd = runtime.command();
    cmd.args(["gateway", "run"])
        .envs(openclaw_env(
            &root.join("home"),
            &root.join("state"),
            config,
            &root.join("tmp"),
        ))
        .env("OPENCLAW_GATEWAY_TOKEN", token)
        .envs(extra_env.iter().map(|(k, v)| (k, v)))
        // The runtime's warm compile cache, as occ's gateways get it.
        .envs(runtime.compile_cache().into_iter().flat_map(|cache| {
            let (name, value) = occ_host::runtime::COMPILE_CACHE_SETTLED;
            [
                ("NODE_COMPILE_CACHE", cache.into_os_string()),
                (name, value.into()),
            ]
        }))
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("output fd"))
        .stderr(out)
        .process_group(0);
    cmd.spawn().expect("spawn openclaw gateway run")
}

/// The gateway config a test gateway runs with.
pub fn render_config(port: u16, workspace: &Path, state: &Path) -> serde_json::Value {
    serde_json::json!({
        "gateway": {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"},
        },
        "agents": {"defaults": {"workspace": workspace, "heartbeat": {"every": "0m"}}},
        "logging": {"file": state.join("logs").join("gateway.log")},
        "update": {"checkOnStart": false},
        "models": {"catalogRefresh": {"enabled": false}},
        "cron": {"enabled": false},
    })
}

fn tail_of(path: &Path, max: usize) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

impl TestGateway {
    /// Sets up and spawns a gateway, then waits until it answers `hello-ok`
    /// ([`READY_DEADLINE`]). Panics (after stopping it) if it does not get ready.
    pub async fn start(runtime: &OpenclawRuntime) -> TestGateway {
        TestGateway::start_with(runtime, |_| {}).await
    }

    /// [`Self::start`] with the rendered config changed by `customize` before the gateway
    /// first reads it.
    pub async fn start_with(
        runtime: &OpenclawRuntime,
        customize: impl FnOnce(&mut serde_json::Value),
    ) -> TestGateway {
        let mut gateway = TestGateway::spawn_with(runtime, customize).await;
        gateway.ready(READY_DEADLINE).await;
        gateway
    }

    /// Seeds the workspace with `openclaw setup --baseline`, renders the config and spawns
    /// `openclaw gateway run` (own process group, stdin null, output to [`Self::output_path`])
    /// without waiting for readiness. The gateway's environment: `PATH` (Node first), `HOME`,
    /// `TMPDIR`, `OPENCLAW_STATE_DIR`, `OPENCLAW_CONFIG_PATH`, the embedding preset,
    /// `OPENCLAW_NO_AUTO_UPDATE`, `DO_NOT_TRACK` and `OPENCLAW_GATEWAY_TOKEN`.
    pub async fn spawn(runtime: &OpenclawRuntime) -> TestGateway {
        TestGateway::spawn_configured(runtime, |_, _| {}, Vec::new()).await
    }

    /// [`Self::spawn`] with the rendered config changed by `customize`.
    pub async fn spawn_with(
        runtime: &OpenclawRuntime,
        customize: impl FnOnce(&mut serde_json::Value),
    ) -> TestGateway {
        TestGateway::spawn_configured(runtime, |config, _| customize(config), Vec::new()).await
    }

    /// [`Self::spawn`] with `prepare` run on the rendered config and the (still empty) state
    /// directory before the config is written read-only and the gateway starts, and
    /// `extra_env` added to the gateway's environment.
    pub async fn spawn_configured(
        runtime: &OpenclawRuntime,
        prepare: impl FnOnce(&mut serde_json::Value, &Path),
        extra_env: Vec<(String, String)>,
    ) -> TestGateway {
        let dir = tempfile::Builder::new()
            .prefix("occ-gw")
            .tempdir()
            .expect("gateway tempdir");
        let root = dir.path();
        let home = root.join("home");
        let state = root.join("state");
        let config_dir = root.join("config");
        let workspace = root.join("workspace");
        let tmp = root.join("tmp");
        for d in [&home, &state, &config_dir, &tmp] {
            fs::create_dir_all(d).expect("gateway dirs");
        }

        // 1. Workspace seeding as occ's process host does it: the runtime's copy of native
        //    setup's output, or native setup against a throwaway home/state/config.
        fs::create_dir_all(&workspace).expect("workspace dir");
        if !runtime
            .seed_from_baseline(&workspace)
            .expect("seed from the runtime's stock workspace")
        {
            native_seed(runtime, root, &workspace, &tmp).await;
        }

        // 2. The config, read-only.
        let port = free_loopback_port();
        let config_path = config_dir.join("openclaw.json");
        let mut config = render_config(port, &workspace, &state);
        prepare(&mut config, &state);
        fs::write(
            &config_path,
            serde_json::to_vec_pretty(&config).expect("config json"),
        )
        .expect("write config");
        fs::set_permissions(&config_path, fs::Permissions::from_mode(0o440)).expect("chmod");
        fs::set_permissions(&config_dir, fs::Permissions::from_mode(0o550)).expect("chmod");

        // 3. The gateway.
        let token = random_token();
        let output_path = root.join("gateway.out");
        let child = spawn_gateway(
            runtime,
            root,
            &config_path,
            &token,
            &extra_env,
            &output_path,
        );
        let pid = child.id().expect("gateway pid");
        spawn_watcher(pid, root, &state);
        TestGateway {
            endpoint: Endpoint::loopback(port, token),
            pid,
            port,
            workspace,
            state_dir: state,
            config_path,
            output_path,
            dir,
            extra_env,
            child: Some(child),
        }
    }

    /// Rewrites the config the running gateway reads (as a Driver would: a new file renamed
    /// over the old one, same read-only mode), changed by `change`.
    pub fn update_config(&self, change: impl FnOnce(&mut serde_json::Value)) {
        let text = fs::read_to_string(&self.config_path).expect("read config");
        let mut config: serde_json::Value = serde_json::from_str(&text).expect("config json");
        change(&mut config);
        let dir = self.config_path.parent().expect("config dir");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o750)).expect("chmod");
        let next = dir.join("openclaw.json.next");
        fs::write(
            &next,
            serde_json::to_vec_pretty(&config).expect("config json"),
        )
        .expect("write config");
        fs::set_permissions(&next, fs::Permissions::from_mode(0o440)).expect("chmod");
        fs::rename(&next, &self.config_path).expect("replace config");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o550)).expect("chmod");
    }

    /// Stops the gateway and starts it again on the same directories, port and token (a
    /// restart: state, workspace and caches are warm). Returns how long the stop took; call
    /// [`Self::ready`] next.
    pub fn respawn(&mut self, runtime: &OpenclawRuntime) -> Duration {
        let stopped = self.stop().map_or(Duration::ZERO, |r| r.elapsed);
        let child = spawn_gateway(
            runtime,
            self.dir.path(),
            &self.config_path,
            self.endpoint.token().unwrap_or_default(),
            &self.extra_env,
            &self.output_path,
        );
        self.pid = child.id().expect("gateway pid");
        spawn_watcher(self.pid, self.dir.path(), &self.state_dir);
        self.child = Some(child);
        stopped
    }

    /// Waits for `hello-ok` with [`wait_ready`], failing fast if the gateway exits. Panics
    /// with the tail of the gateway's output on failure.
    pub async fn ready(&mut self, deadline: Duration) -> Hello {
        let result = {
            let child = self.child.as_mut().expect("gateway not stopped");
            tokio::select! {
                ready = wait_ready(&self.endpoint, deadline) => ready,
                status = child.wait() => Err(GatewayError::Unreachable(format!(
                    "gateway exited during startup: {status:?}"
                ))),
            }
        };
        match result {
            Ok(hello) => hello,
            Err(e) => panic!(
                "gateway on port {} not ready: {e}\n--- output ---\n{}",
                self.port,
                self.output_tail()
            ),
        }
    }

    /// Whether the gateway process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The last 8 KiB of the gateway's stdout/stderr.
    pub fn output_tail(&self) -> String {
        tail_of(&self.output_path, 8192)
    }

    /// The gateway's direct children (the spawn broker, in its own session, and the SQLite
    /// read-only worker).
    pub fn helper_pids(&self) -> Vec<u32> {
        children_of(self.pid)
    }

    /// SIGTERM by PID, wait up to [`STOP_GRACE`], then SIGKILL. `None` if already stopped.
    pub fn stop(&mut self) -> Option<StopReport> {
        let mut child = self.child.take()?;
        let started = Instant::now();
        if let Ok(Some(status)) = child.try_wait() {
            return Some(StopReport {
                elapsed: Duration::ZERO,
                killed: false,
                code: status.code(),
            });
        }
        let _ = signal(self.pid, rustix::process::Signal::TERM);
        let mut killed = false;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(StopReport {
                    elapsed: started.elapsed(),
                    killed,
                    code: status.code(),
                });
            }
            if !killed && started.elapsed() > STOP_GRACE {
                let _ = signal(self.pid, rustix::process::Signal::KILL);
                killed = true;
            }
            if started.elapsed() > STOP_GRACE * 2 {
                return Some(StopReport {
                    elapsed: started.elapsed(),
                    killed,
                    code: None,
                });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        self.stop();
        // Let the TempDir remove everything, including the read-only config directory
        // (which a non-root user could not empty otherwise).
        if let Some(config_dir) = self.config_path.parent() {
            let _ = fs::set_permissions(config_dir, fs::Permissions::from_mode(0o700));
        }
    }
}

fn signal(pid: u32, sig: rustix::process::Signal) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::other("invalid pid"))?;
    rustix::process::kill_process(pid, sig).map_err(std::io::Error::from)
}

/// PIDs whose parent is `pid` (from `/proc/*/stat`).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // pid (comm) state ppid …; comm may contain spaces and parentheses
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Whether a process exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A detached watcher: once this test process exits, if the gateway's directory still exists
/// (so it was never dropped) and `pid` is still that gateway (its environment names its state
/// directory), SIGTERM it, SIGKILL after 10 s, and remove the directory.
fn spawn_watcher(pid: u32, dir: &Path, state: &Path) {
    let me = std::process::id();
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; \
         if [ -d '{dir}' ]; then \
           if tr '\\0' '\\n' < /proc/{pid}/environ 2>/dev/null | grep -qxF 'OPENCLAW_STATE_DIR={state}'; then \
             kill -TERM {pid}; i=0; while kill -0 {pid} 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
             kill -KILL {pid} 2>/dev/null; \
           fi; \
           chmod -R u+w '{dir}' 2>/dev/null; rm -rf '{dir}'; \
         fi",
        dir = dir.display(),
        state = state.display(),
    );
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("( {script} ) >/dev/null 2>&1 &"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .status()
        .expect("spawn the gateway watcher");
    assert!(status.success(), "gateway watcher shell failed");
}

/// `POST /v1/chat/completions` to a gateway on loopback `port` with its operator `token` (one
/// user message `text`, model `openclaw`), over HTTP/1.1 with the connection closed by the
/// server, bounded by `wait`: the status (0 when there is none) and the body.
pub async fn chat_completion(port: u16, token: &str, text: &str, wait: Duration) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let body = serde_json::json!({
        "model": "openclaw",
        "messages": [{"role": "user", "content": text}],
    })
    .to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the gateway");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    tokio::time::timeout(wait, stream.read_to_end(&mut response))
        .await
        .expect("the chat completion answers in time")
        .expect("read");
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// Native `openclaw setup --baseline` into `workspace`, against a throwaway home, state and
/// config under `root/setup`.
async fn native_seed(runtime: &OpenclawRuntime, root: &Path, workspace: &Path, tmp: &Path) {
    let setup = root.join("setup");
    let setup_config = setup.join("openclaw.json");
    fs::create_dir_all(setup.join("home")).expect("setup dir");
    let setup_log = root.join("setup.log");
    let log = fs::File::create(&setup_log).expect("setup log");
    let mut cmd = runtime.command();
    cmd.args(["setup", "--baseline", "--workspace"])
        .arg(workspace)
        .envs(openclaw_env(
            &setup.join("home"),
            &setup.join("state"),
            &setup_config,
            tmp,
        ))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log)
        .kill_on_drop(true);
    let status = tokio::time::timeout(SETUP_TIMEOUT, cmd.status())
        .await
        .unwrap_or_else(|_| panic!("openclaw setup did not finish in {SETUP_TIMEOUT:?}"))
        .expect("run openclaw setup");
    assert!(
        status.success(),
        "openclaw setup failed ({status}):\n{}",
        tail_of(&setup_log, 4000)
    );
    fs::remove_dir_all(&setup).expect("remove the throwaway setup dir");
}
