//! `occ harness-launch` as a process: a real SIGTERM stops it and its children, exit 0; a
//! refused input exits non-zero without echoing the file. Real Codex from the test kit's
//! runtime and the fake model; no gateway.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use occ_host::harness::{
    AppServerInput, LaunchInput, LaunchPhase, LaunchStatus, LoginInput, LoginMethod, ModelEndpoint,
    NodeInput,
};
use occ_testkit::fake_model::FakeModel;

const KEY: &str = "sk-harness-cli-test-0123456789";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn launch_input(dir: &Path, runtime: &Path, model: &FakeModel) -> LaunchInput {
    let credential = dir.join("credential");
    std::fs::write(&credential, KEY).expect("credential");
    LaunchInput {
        runtime_dir: runtime.to_path_buf(),
        workspace: dir.join("workspace"),
        home: dir.join("home"),
        codex_home: dir.join("codex-home"),
        tmp_dir: dir.join("tmp"),
        log_file: dir.join("harness.log"),
        status_file: dir.join("status.json"),
        workspace_setup: None,
        login: LoginInput {
            method: LoginMethod::ApiKey,
            credential_file: credential,
        },
        model: Some(ModelEndpoint {
            base_url: model.base_url(),
            model: None,
        }),
        app_server: AppServerInput {
            host: "127.0.0.1".parse().expect("ip"),
            port: free_port(),
            token_sha256: "0".repeat(64),
        },
        node: NodeInput {
            gateway_host: "127.0.0.1".into(),
            gateway_port: free_port(),
            state_dir: dir.join("node"),
            setup_code_file: dir.join("setup-code"),
        },
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// SIGTERM to the `occ harness-launch` process (not its group): it stops the app-server it
/// supervises and exits 0, leaving no child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_launcher_and_its_children() {
    let runtime =
        tokio::task::spawn_blocking(|| occ_testkit::runtime::shared_runtime().root.clone())
            .await
            .expect("runtime");
    let model = FakeModel::start().await;
    model.reply("READY");
    let tmp = tempfile::tempdir().expect("tmp");
    let input = launch_input(tmp.path(), &runtime, &model);
    let input_file = tmp.path().join("launch.json");
    std::fs::write(&input_file, serde_json::to_vec(&input).expect("json")).expect("write");
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_occ"))
        .args(["harness-launch", "--input"])
        .arg(&input_file)
        .env("OCC_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("occ harness-launch");
    let pid = i32::try_from(launcher.id()).expect("pid");

    let deadline = Instant::now() + Duration::from_secs(120);
    let app_server = loop {
        let log = std::fs::read_to_string(&input.log_file).unwrap_or_default();
        let running = std::fs::read(&input.status_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<LaunchStatus>(&b).ok())
            .is_some_and(|s| s.phase == LaunchPhase::Running);
        if running
            && let Some(child) = log
                .lines()
                .find_map(|l| l.strip_prefix("app-server: started pid="))
        {
            break child.trim().parse::<i32>().expect("pid");
        }
        assert!(Instant::now() < deadline, "not running; log:\n{log}");
        assert!(
            launcher.try_wait().expect("wait").is_none(),
            "launcher exited"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(alive(app_server));

    let asked = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).expect("pid"),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM");
    let status = loop {
        if let Some(status) = launcher.try_wait().expect("wait") {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status}");
    assert!(
        !alive(app_server),
        "app-server {app_server} outlived the launcher"
    );
    let log = std::fs::read_to_string(&input.log_file).expect("log");
    assert!(log.contains("app-server: stopped"), "{log}");
    assert!(!log.contains(KEY));
}

/// An input with an unknown field is refused before anything starts; the error names the file
/// and the field, never the value.
#[test]
fn an_unknown_input_field_is_refused_without_its_value() {
    let tmp = tempfile::tempdir().expect("tmp");
    let input_file = tmp.path().join("launch.json");
    std::fs::write(&input_file, r#"{"credential": "sk-never-echoed"}"#).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_occ"))
        .args(["harness-launch", "--input"])
        .arg(&input_file)
        .env("OCC_LOG", "warn")
        .env("NO_COLOR", "1")
        .output()
        .expect("occ harness-launch");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("launch.json"), "{stderr}");
    assert!(stderr.contains("unknown field"), "{stderr}");
    assert!(!stderr.contains("sk-never-echoed"), "{stderr}");
}
