//! `occ harness-launch` as a process: a real SIGTERM stops it and its children, exit 0; a
//! refused input exits non-zero without echoing the file. Real Codex from the test kit's
//! runtime and the fake model; no gateway.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use occ_host::harness::{LaunchPhase, LaunchStatus};
use occ_testkit::fake_model::FakeModel;
use occ_testkit::harness::launch_input;

const KEY: &str = "sk-harness-cli-test-0123456789";

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
    let input = launch_input(tmp.path(), &runtime, &model, KEY, "0".repeat(64));
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

/// `occ codex-plugin-trust` (a dedicated gateway's init container on Kubernetes) lays out the
/// state directory named by `OPENCLAW_STATE_DIR` to trust the runtime's Codex plugin, twice
/// without harm; a runtime that is not there fails with a message naming it.
#[tokio::test]
async fn codex_plugin_trust_lays_out_the_state_directory() {
    let runtime =
        tokio::task::spawn_blocking(|| occ_testkit::runtime::shared_runtime().root.clone())
            .await
            .expect("runtime");
    let tmp = tempfile::tempdir().expect("tmp");
    let state = tmp.path().join("state");
    for _ in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_occ"))
            .arg("codex-plugin-trust")
            .env("OPENCLAW_STATE_DIR", &state)
            .env("OCC_OPENCLAW_RUNTIME", &runtime)
            .env("NO_COLOR", "1")
            .output()
            .expect("occ codex-plugin-trust");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("npm/package.json")).expect("package.json"),
    )
    .expect("json");
    assert!(
        manifest["dependencies"]["@openclaw/codex"].is_string(),
        "{manifest}"
    );
    let link = state.join("npm/node_modules/@openclaw/codex");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(
        link.join("package.json").is_file(),
        "the link reaches the plugin"
    );

    let missing = tmp.path().join("no-runtime");
    let out = Command::new(env!("CARGO_BIN_EXE_occ"))
        .arg("codex-plugin-trust")
        .env("OPENCLAW_STATE_DIR", tmp.path().join("other"))
        .env("OCC_OPENCLAW_RUNTIME", &missing)
        .env("NO_COLOR", "1")
        .output()
        .expect("occ codex-plugin-trust");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-runtime"), "{stderr}");
}
