//! `occ dev` as a user starts it: first run (credentials generated into the data directory with
//! private modes, bootstrap, the admin key written, the Namespace `default` made ready by the
//! worker, the next steps printed with real values), then a restart on the same directory
//! (nothing bootstrapped twice, the same key still works) with `OCC_METRICS_*` set (one listener
//! serves the API's and the worker's families). The runtime is the shared test
//! install, so no gateway is started here (the lifecycle test covers deploys).

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use occ_testkit::occ_process::OccProcess;
use serde_json::Value;

const OCC: &str = env!("CARGO_BIN_EXE_occ");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn occ_json(args: &[&str], env: &[(&str, String)]) -> Value {
    let mut cmd = Command::new(OCC);
    cmd.args(args).env_clear().env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("occ");
    assert!(
        out.status.success(),
        "occ {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn first_run_bootstraps_and_a_restart_resumes() {
    occ_testkit::runtime::shared_runtime();
    let runtime = occ_testkit::runtime::runtime_root();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let env: Vec<(String, String)> = vec![("OCC_LOG".into(), "info".into())];
    let args = [
        "dev",
        "--data-dir",
        data.to_str().unwrap(),
        "--port",
        &port.to_string(),
        "--runtime-dir",
        runtime.to_str().unwrap(),
    ];
    let mut first = OccProcess::spawn(
        OCC,
        &args,
        &env,
        dir.path().join("dev-1.log"),
        Some("occ dev is running at"),
        Duration::from_secs(60),
    );
    let key_file = data.join("admin-service-key.json");
    for file in ["admin-service-key.json", "admin-password", "auth-secret"] {
        let mode = std::fs::metadata(data.join(file))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
    assert_eq!(
        std::fs::metadata(&data).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let key_before = std::fs::read(&key_file).unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let cli = [
        ("OCC_URL", url.clone()),
        ("OCC_SERVICE_KEY_FILE", key_file.display().to_string()),
    ];
    // the worker makes `default` ready
    let deadline = Instant::now() + Duration::from_secs(30);
    let ns = loop {
        let list = occ_json(&["-o", "json", "namespace", "list"], &cli);
        let default = list
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "default")
            .cloned()
            .unwrap();
        if default["status"] == "ready" {
            break default["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "{default}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let banner = first.log_text();
    assert!(banner.contains(&format!("OCC_NAMESPACE={ns}")), "{banner}");
    assert!(
        banner.contains(&format!("console      {url}/console/")),
        "{banner}"
    );
    assert!(
        banner.contains("occ agent deploy <agt_id> --wait"),
        "{banner}"
    );
    // The model-credential how-to: its Configuration is valid JSON binding the key from a
    // Secret into the provider, and the two grants and the chat follow.
    let printed = banner
        .lines()
        .find(|l| l.contains("> cfg3.json"))
        .expect("the model how-to");
    let json_text = printed
        .trim()
        .strip_prefix("echo '")
        .and_then(|l| l.strip_suffix("' > cfg3.json"))
        .expect("echo '…' > cfg3.json");
    let doc: serde_json::Value = serde_json::from_str(json_text).expect("valid JSON");
    assert_eq!(
        doc["values"]["models"]["providers"]["my"]["apiKey"],
        "${MODEL_KEY}"
    );
    assert_eq!(
        doc["secretBindings"]["MODEL_KEY"]["source"]["namespaceId"],
        ns.as_str()
    );
    for step in [
        "occ secret grant <sec_id> --agent <agt_id>",
        "occ agent grant-use <agt_id>",
        "occ agent chat <agt_id> \"Hello!\"",
    ] {
        assert!(banner.contains(step), "{step}: {banner}");
    }
    let password = std::fs::read_to_string(data.join("admin-password")).unwrap();
    assert!(
        !banner.contains(password.trim()),
        "the password is not printed, only its file"
    );
    assert!(
        first.terminate(Duration::from_secs(20)),
        "occ dev stops on SIGTERM"
    );

    // a restart resumes: no second bootstrap, the same key works; metrics on request
    let metrics_port = free_port();
    let metrics_env: Vec<(String, String)> = env
        .iter()
        .cloned()
        .chain([
            ("OCC_METRICS_ENABLED".into(), "true".into()),
            ("OCC_METRICS_HOST".into(), "127.0.0.1".into()),
            ("OCC_METRICS_PORT".into(), metrics_port.to_string()),
        ])
        .collect();
    let second = OccProcess::spawn(
        OCC,
        &args,
        &metrics_env,
        dir.path().join("dev-2.log"),
        Some("occ dev is running at"),
        Duration::from_secs(60),
    );
    assert!(
        !second.log_text().contains("bootstrapped"),
        "{}",
        second.log_text()
    );
    assert_eq!(std::fs::read(&key_file).unwrap(), key_before);
    let installation = occ_json(&["-o", "json", "installation", "get"], &cli);
    assert!(installation["id"].as_str().unwrap().starts_with("ins_"));

    // one listener serves both sides, each family labelled with the side that records it
    assert!(
        second.log_text().contains(&format!(
            "metrics      http://127.0.0.1:{metrics_port}/metrics"
        )),
        "{}",
        second.log_text()
    );
    let scrape = http_get(metrics_port, "/metrics");
    assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
    assert!(
        scrape.contains("occ_http_requests_total{service=\"api\",route=\"/installation\",method=\"GET\",status_class=\"2xx\"} 1"),
        "{scrape}"
    );
    assert!(
        scrape.contains("occ_agents{service=\"worker\",lifecycle_state=\"running\"} 0"),
        "{scrape}"
    );
    assert!(
        scrape.contains("occ_work_pending{service=\"worker\"}"),
        "{scrape}"
    );
    assert!(scrape.trim_end().ends_with("# EOF"), "{scrape}");
}

#[test]
fn dev_refuses_inconsistent_metrics_settings_before_installing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = Command::new(OCC)
        .args(["dev", "--data-dir", data.to_str().unwrap(), "--port", "0"])
        .env_clear()
        .env("OCC_METRICS_ENABLED", "true")
        .env("OCC_METRICS_HOST", "127.0.0.1")
        .env("OCC_METRICS_PORT", "99999")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OCC_METRICS_PORT"), "{stderr}");
    assert!(!data.exists(), "nothing was created");
}

/// Containment is on by default: without bubblewrap `occ dev` stops at once with a message
/// naming the package (and how to turn containment off), before it creates anything.
#[test]
fn dev_without_bubblewrap_stops_naming_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = Command::new(OCC)
        .args(["dev", "--data-dir", data.to_str().unwrap(), "--port", "0"])
        .env_clear()
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OCC_PROCESS_ISOLATION=sandbox"), "{stderr}");
    assert!(
        stderr.contains("install the `bubblewrap` package"),
        "{stderr}"
    );
    assert!(stderr.contains("OCC_PROCESS_ISOLATION=none"), "{stderr}");
    assert!(!data.exists(), "nothing was created");

    let output = Command::new(OCC)
        .args(["dev", "--data-dir", data.to_str().unwrap(), "--port", "0"])
        .env_clear()
        .env("OCC_PROCESS_ISOLATION", "chroot")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OCC_PROCESS_ISOLATION: \"chroot\" must be sandbox or none"),
        "{stderr}"
    );
    assert!(!data.exists(), "nothing was created");
}

/// `GET path` over a plain connection (the listener closes it after the response).
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}
