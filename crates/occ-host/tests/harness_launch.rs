//! The harness launcher against the real pinned Codex (the test kit's runtime) and the fake
//! model; no gateway (the node host waits for a setup code that never comes).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use occ_host::harness::launch::run as run_launcher;
use occ_host::harness::{FailureCode, LaunchInput, LaunchPhase, LaunchStatus};
use occ_testkit::fake_model::{Failure, FakeModel};
use occ_testkit::harness::launch_input;
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;

const KEY: &str = "sk-harness-test-0123456789abcdef";
const APP_SERVER_TOKEN: &str = "app-server-token-for-the-test";

/// The test's own `PATH`, as occ passes its own.
#[expect(
    clippy::disallowed_methods,
    reason = "the test passes its own PATH as occ passes its own"
)]
fn path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| occ_host::runtime::DEFAULT_PATH.into())
}

/// SHA-256 (hex) of the app-server token the test presents.
fn token_sha256() -> String {
    hex::encode(sha2::Sha256::digest(APP_SERVER_TOKEN.as_bytes()))
}

struct Launcher {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), occ_host::harness::LaunchError>>,
}

async fn start(input: &LaunchInput) -> Launcher {
    let (stop, stopped) = watch::channel(false);
    let input = input.clone();
    let task = tokio::spawn(async move { run_launcher(&input, &path(), &[], stopped).await });
    Launcher { stop, task }
}

impl Launcher {
    /// What SIGTERM does in `occ harness-launch`; returns once the launcher has returned.
    async fn stop(self) -> Duration {
        let asked = Instant::now();
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the launcher returns after a stop")
            .expect("task")
            .expect("launcher ok");
        asked.elapsed()
    }
}

fn read_status(input: &LaunchInput) -> Option<LaunchStatus> {
    let bytes = std::fs::read(&input.status_file).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Waits until the status reaches a final state: running, or a held failure.
async fn settled_status(input: &LaunchInput) -> LaunchStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = read_status(input)
            && (status.phase == LaunchPhase::Running || status.code.is_some())
        {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "launcher did not settle; log:\n{}",
            log_text(input)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn log_text(input: &LaunchInput) -> String {
    std::fs::read_to_string(&input.log_file).unwrap_or_default()
}

/// The pids the log reports for `child` (`<child>: started pid=N`).
fn started_pids(input: &LaunchInput, child: &str) -> Vec<i32> {
    let prefix = format!("{child}: started pid=");
    log_text(input)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for our purposes: it runs nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The status line of a WebSocket upgrade to the app-server, with or without the token.
async fn upgrade_status(port: u16, token: Option<&str>) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the app-server");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{auth}\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("an answer")
        .expect("read");
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the app-server accepts connections (it starts in well under a second).
async fn app_server_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "app-server never listened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn runtime_root() -> PathBuf {
    tokio::task::spawn_blocking(|| occ_testkit::runtime::shared_runtime().root.clone())
        .await
        .expect("runtime")
}

/// Login with the key on stdin and a probe turn that reached the fake model with the key as
/// Bearer; the app-server answers a WebSocket upgrade with the token (101) and refuses one
/// without it or with another (401); a killed app-server is restarted; a stop leaves no child
/// running; the key is in neither the log nor the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_probe_app_server_restart_and_stop() {
    let runtime = runtime_root().await;
    let model = FakeModel::start().await;
    model.reply("READY");
    let tmp = tempfile::tempdir().expect("tmp");
    let input = launch_input(tmp.path(), &runtime, &model, KEY, token_sha256());
    let launcher = start(&input).await;

    let status = settled_status(&input).await;
    assert_eq!(
        status,
        LaunchStatus {
            phase: LaunchPhase::Running,
            code: None
        },
        "log:\n{}",
        log_text(&input)
    );
    let probes = model.requests_to("/v1/responses");
    assert!(!probes.is_empty(), "the probe reached the fake model");
    assert!(
        probes.iter().all(|r| r.bearer() == Some(KEY)),
        "the key from the credential file is the Bearer"
    );
    let config = input.codex_home.join("config.toml");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&config)
            .expect("config")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(
        input.workspace.join("AGENTS.md").is_file(),
        "native setup seeded the workspace"
    );

    let port = input.app_server.port;
    app_server_listening(port).await;
    assert!(
        upgrade_status(port, Some(APP_SERVER_TOKEN))
            .await
            .contains(" 101 ")
    );
    assert!(upgrade_status(port, None).await.contains(" 401 "));
    assert!(
        upgrade_status(port, Some("another-token"))
            .await
            .contains(" 401 ")
    );

    // The app-server is restarted after it dies.
    let first = started_pids(&input, "app-server");
    assert_eq!(first.len(), 1, "log:\n{}", log_text(&input));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the app-server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while started_pids(&input, "app-server").len() < 2 {
        assert!(
            Instant::now() < deadline,
            "not restarted:\n{}",
            log_text(&input)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app_server_listening(port).await;
    assert!(
        upgrade_status(port, Some(APP_SERVER_TOKEN))
            .await
            .contains(" 101 ")
    );

    let log = log_text(&input);
    assert!(log.contains("harness: phase=probe outcome=ok ms="), "{log}");
    assert!(log.contains("node: waiting for a setup code"), "{log}");
    let elapsed = launcher.stop().await;
    assert!(elapsed < Duration::from_secs(15), "stopped in {elapsed:?}");
    for pid in started_pids(&input, "app-server") {
        assert!(!alive(pid), "app-server {pid} left running");
    }
    let log = log_text(&input);
    assert!(log.contains("app-server: stopped"), "{log}");
    for file in [&input.log_file, &input.status_file] {
        let text = std::fs::read_to_string(file).expect("read");
        assert!(!text.contains(KEY), "the key is in {}", file.display());
    }
}

/// A key the model endpoint refuses (401) is held as `AUTHENTICATION_FAILED` after the probe:
/// the launcher stays alive without starting the app-server, writes the key nowhere it logs,
/// and stops at once when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_held_as_authentication_failed() {
    let runtime = runtime_root().await;
    let model = FakeModel::start().await;
    model.fail_with(Some(Failure {
        status: 401,
        code: "invalid_api_key".into(),
        message: "Incorrect API key provided".into(),
    }));
    let tmp = tempfile::tempdir().expect("tmp");
    let input = launch_input(tmp.path(), &runtime, &model, KEY, token_sha256());
    let launcher = start(&input).await;

    let status = settled_status(&input).await;
    assert_eq!(
        status,
        LaunchStatus {
            phase: LaunchPhase::Probe,
            code: Some(FailureCode::AuthenticationFailed)
        },
        "log:\n{}",
        log_text(&input)
    );
    assert!(
        model
            .requests_to("/v1/responses")
            .iter()
            .all(|r| r.bearer() == Some(KEY))
    );
    // Held: alive, and no app-server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !launcher.task.is_finished(),
        "a held failure keeps the launcher alive"
    );
    assert!(started_pids(&input, "app-server").is_empty());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", input.app_server.port))
            .await
            .is_err()
    );
    let log = log_text(&input);
    assert!(
        log.contains("harness: phase=probe outcome=failed ms="),
        "{log}"
    );
    for file in [&input.log_file, &input.status_file] {
        let text = std::fs::read_to_string(file).expect("read");
        assert!(!text.contains(KEY), "the key is in {}", file.display());
        assert!(
            !text.contains("Incorrect API key"),
            "native output in {}",
            file.display()
        );
    }
    let elapsed = launcher.stop().await;
    assert!(elapsed < Duration::from_secs(2), "stopped in {elapsed:?}");
}

/// A ChatGPT service account logs in with the real Codex held to its workspace
/// (`-c forced_chatgpt_workspace_id=…` parsed, and written into its configuration). Codex
/// accepts only an agent-identity JWT it verifies against ChatGPT's production keys, which no
/// test here can reach, so an issued token is refused at login: held as `LOGIN_FAILED`, before
/// any model call, with the token nowhere in the launcher's log or status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_codex_cannot_verify_is_held_as_login_failed() {
    const TOKEN: &str = "chatgpt-sa-token-cred-0002-15838";
    const WORKSPACE: &str = "7d0a9c1e-3b5f-4e21-9a8c-2f6b4d1e0c3a";
    let runtime = runtime_root().await;
    let model = FakeModel::start().await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut input = launch_input(tmp.path(), &runtime, &model, TOKEN, token_sha256());
    input.login.method = occ_host::harness::LoginMethod::ChatgptServiceAccount;
    input.login.chatgpt_workspace_id = Some(WORKSPACE.into());
    input.validate().expect("valid input");
    let launcher = start(&input).await;

    let status = settled_status(&input).await;
    assert_eq!(
        status,
        LaunchStatus {
            phase: LaunchPhase::Login,
            code: Some(FailureCode::LoginFailed)
        },
        "log:\n{}",
        log_text(&input)
    );
    assert!(model.requests_to("/v1/responses").is_empty());
    let config =
        std::fs::read_to_string(input.codex_home.join("config.toml")).expect("codex config");
    assert!(
        config.contains(&format!("forced_chatgpt_workspace_id = \"{WORKSPACE}\"")),
        "{config}"
    );
    for file in [&input.log_file, &input.status_file] {
        let text = std::fs::read_to_string(file).expect("read");
        assert!(!text.contains(TOKEN), "the token is in {}", file.display());
    }
    launcher.stop().await;
}
