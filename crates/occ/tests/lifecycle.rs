//! The Agent lifecycle end to end with real OpenClaw gateways: the real `occ serve` and
//! `occ worker` binaries as separate processes (so the worker can crash), the process Compute
//! Driver, the pinned runtime. What a user sees through the API, and what runs on the machine.
//!
//! - deploy → `succeeded`, the pointer set, the gateway answering `hello-ok` with the Agent's
//!   token, its config the frozen snapshot; redeploy after a Configuration change → revision 2
//!   at generation 2, rolled onto the new snapshot, revision 1 retired with its snapshot kept;
//!   a killed gateway restarted by maintenance (and recorded); stop → no process, pointer
//!   cleared; deploy again → the same workspace; deploys admitted back to back and a stop
//!   between them → only the last runs; delete → nothing left (SQLite);
//! - the worker SIGKILLed during workspace seeding and during gateway startup, then restarted →
//!   exactly one active revision and exactly one gateway (PostgreSQL).
//!
//! Each test runs its own stack with its own port range; every process it started is killed by
//! PID at the end, gateways included.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_gateway::{Endpoint, GatewayError, Session};
use occ_store::Backend;
use occ_testkit::TestDb;
use occ_testkit::occ_process::{OccProcess, kill_processes_with_env, processes_with_env};
use serde_json::{Value, json};

const OCC: &str = env!("CARGO_BIN_EXE_occ");
const ADMIN_PASSWORD: &str = "correct horse battery staple";
/// A deployment may wait for a gateway cold start on a loaded machine.
const DEPLOY_TIMEOUT: Duration = Duration::from_secs(300);

struct Stack {
    db: TestDb,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    api: OccProcess,
    worker: Option<OccProcess>,
    http: reqwest::Client,
    url: String,
    key: String,
    ns: String,
    workers_started: usize,
}

impl Stack {
    async fn start(backend: Backend, ports: &str) -> Stack {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime_root = tokio::task::spawn_blocking(|| {
            occ_testkit::runtime::shared_runtime();
            occ_testkit::runtime::runtime_root()
        })
        .await
        .expect("runtime");
        let db = TestDb::new(backend).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let env: Vec<(String, String)> = [
            ("OCC_DATABASE_URL", db.url.as_str()),
            ("OCC_DATA_DIR", data.to_str().expect("utf-8")),
            (
                "OCC_OPENCLAW_RUNTIME",
                runtime_root.to_str().expect("utf-8"),
            ),
            ("OCC_PROCESS_PORT_RANGE", ports),
            ("OCC_MAINTENANCE_INTERVAL_MS", "2000"),
            ("OCC_WORKER_LEASE_DURATION_MS", "2000"),
            ("OCC_WORKER_POLL_INTERVAL_MS", "100"),
            ("OCC_AUTH_SECRET", "lifecycle-test-secret-0123456789abcdef"),
            ("OCC_HOST", "127.0.0.1"),
            ("OCC_PORT", &port.to_string()),
            ("OCC_LOG", "info"),
            ("PATH", &std::env::var("PATH").unwrap_or_default()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let password = dir.path().join("password");
        std::fs::write(&password, ADMIN_PASSWORD).expect("password");
        let key_file = dir.path().join("key.json");
        let boot = std::process::Command::new(OCC)
            .args([
                "bootstrap",
                "--database-url",
                &db.url,
                "--admin-password-file",
            ])
            .arg(&password)
            .arg("--service-key-file")
            .arg(&key_file)
            .env_clear()
            .env("NO_COLOR", "1")
            .output()
            .expect("bootstrap");
        assert!(
            boot.status.success(),
            "{}",
            String::from_utf8_lossy(&boot.stderr)
        );
        let key_doc: Value = serde_json::from_slice(&std::fs::read(&key_file).unwrap()).unwrap();
        let key = key_doc["data"]["key"].as_str().unwrap().to_owned();
        let api = OccProcess::spawn(
            OCC,
            &["serve"],
            &env,
            dir.path().join("serve.log"),
            Some("occ API listening"),
            Duration::from_secs(30),
        );
        let mut stack = Stack {
            db,
            dir,
            env,
            api,
            worker: None,
            http: reqwest::Client::new(),
            url,
            key,
            ns: String::new(),
            workers_started: 0,
        };
        stack.start_worker();
        // The worker makes `default` ready.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let list = stack.get("/namespaces").await;
            let default = list["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["name"] == "default")
                .cloned()
                .expect("default");
            if default["status"] == "ready" {
                stack.ns = default["id"].as_str().unwrap().to_owned();
                break;
            }
            assert!(
                Instant::now() < deadline,
                "default never became ready: {default}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stack
    }

    fn compute_root(&self) -> PathBuf {
        self.dir.path().join("data").join("compute")
    }

    fn start_worker(&mut self) {
        self.workers_started += 1;
        self.worker = Some(OccProcess::spawn(
            OCC,
            &["worker"],
            &self.env,
            self.dir
                .path()
                .join(format!("worker-{}.log", self.workers_started)),
            Some("worker.started"),
            Duration::from_secs(30),
        ));
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.url))
            .header("x-api-key", &self.key);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.expect("body");
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("json")
        }
    }

    async fn get(&self, path: &str) -> Value {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn configuration(&self, doc: Value) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/configurations", self.ns),
                Some(json!({"kind": "agent", "values": doc})),
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    async fn agent(&self, name: &str, cfg: &str) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/agents", self.ns),
                Some(json!({"name": name, "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    async fn deploy(&self, agent: &str) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/agents/{agent}/deploy", self.ns),
                None,
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    async fn stop(&self, agent: &str) {
        self.send(
            reqwest::Method::POST,
            &format!("/namespaces/{}/agents/{agent}/stop", self.ns),
            None,
        )
        .await;
    }

    async fn agent_state(&self, agent: &str) -> Value {
        self.get(&format!("/namespaces/{}/agents/{agent}", self.ns))
            .await["data"]
            .clone()
    }

    async fn deployment(&self, agent: &str, rev: &str) -> Value {
        self.get(&format!(
            "/namespaces/{}/agents/{agent}/deployments/{rev}",
            self.ns
        ))
        .await["data"]
            .clone()
    }

    /// Waits until the deployment is terminal; returns its status document.
    async fn settled(&self, agent: &str, rev: &str) -> Value {
        let deadline = Instant::now() + DEPLOY_TIMEOUT;
        loop {
            let d = self.deployment(agent, rev).await;
            if d["status"] == "succeeded" || d["status"] == "failed" {
                return d;
            }
            assert!(
                Instant::now() < deadline,
                "deployment {rev} did not settle: {d}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn wait_for(&self, what: &str, mut check: impl AsyncFnMut() -> bool) {
        let deadline = Instant::now() + DEPLOY_TIMEOUT;
        while !check().await {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn agent_dir(&self, agent: &str) -> PathBuf {
        self.compute_root()
            .join("namespaces")
            .join(&self.ns)
            .join("agents")
            .join(agent)
    }

    async fn audit_count(&self, action: &str) -> i64 {
        let mut raw = self.db.raw().await;
        raw.count(&format!(
            "SELECT count(*) FROM audit_events WHERE action = '{action}'"
        ))
        .await
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(mut w) = self.worker.take() {
            w.kill();
        }
        self.api.kill();
        // Every gateway and setup process this stack's Driver started (their environment
        // names its compute root), by PID.
        kill_processes_with_env(&format!("{}/", self.compute_root().display()));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The gateway processes of one Agent: processes started with its state directory whose
/// parent is not one of them (the helpers of a gateway are its children).
fn gateway_roots(agent_dir: &Path) -> Vec<u32> {
    let procs = processes_with_env(&format!("OPENCLAW_STATE_DIR={}/state", agent_dir.display()));
    let pids: Vec<u32> = procs.iter().map(|(p, _)| *p).collect();
    procs
        .iter()
        .filter(|(_, parent)| !pids.contains(parent))
        .map(|(p, _)| *p)
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.starts_with("openclaw-gatewa"))
        })
        .collect()
}

fn record(agent_dir: &Path) -> Option<Value> {
    std::fs::read(agent_dir.join("gateway.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

async fn hello(agent_dir: &Path, token: &str) -> Result<(), GatewayError> {
    let record = record(agent_dir).expect("gateway.json");
    let endpoint = Endpoint::loopback(
        u16::try_from(record["port"].as_u64().unwrap()).unwrap(),
        token,
    );
    let (session, hello) = Session::connect(&endpoint, Duration::from_secs(10)).await?;
    assert!(hello.scopes.iter().any(|s| s == "operator.admin"));
    session.close().await;
    Ok(())
}

fn snapshot(agent_dir: &Path, rev: &str) -> PathBuf {
    agent_dir.join("revisions").join(rev).join("openclaw.json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_redeploy_restart_stop_resume_and_delete() {
    let mut s = Stack::start(Backend::Sqlite, "29400-29449").await;
    let doc1 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}});
    let cfg = s.configuration(doc1.clone()).await;
    let agent = s.agent("lifecycle", &cfg).await;
    let dir = s.agent_dir(&agent);

    // ---- deploy ----
    let rev1 = s.deploy(&agent).await;
    let d = s.settled(&agent, &rev1).await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev1);
    let token = std::fs::read_to_string(dir.join("gateway-token")).unwrap();
    hello(&dir, &token)
        .await
        .expect("hello-ok with the Agent's token");
    assert!(matches!(
        hello(&dir, &"0".repeat(64)).await,
        Err(GatewayError::Unauthorized(_))
    ));
    let frozen: Value =
        serde_json::from_slice(&std::fs::read(snapshot(&dir, &rev1)).unwrap()).unwrap();
    assert_eq!(
        frozen["agents"]["defaults"]["model"],
        doc1["agents"]["defaults"]["model"]
    );
    assert_eq!(frozen["plugins"], doc1["plugins"]);
    assert_eq!(gateway_roots(&dir).len(), 1);

    // ---- a Configuration change, redeploy ----
    let doc2 = json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5-mini"}}}, "plugins": {"enabled": false}});
    let patched = s
        .send(
            reqwest::Method::PATCH,
            &format!("/namespaces/{}/configurations/{cfg}", s.ns),
            Some(json!({"values": doc2})),
        )
        .await;
    assert_eq!(patched["data"]["generation"], 2);
    let rev1_bytes = std::fs::read(snapshot(&dir, &rev1)).unwrap();
    let pid1 = record(&dir).unwrap()["pid"].as_u64().unwrap();
    let rev2 = s.deploy(&agent).await;
    let revision2 = s
        .get(&format!(
            "/namespaces/{}/agents/{agent}/revisions/{rev2}",
            s.ns
        ))
        .await;
    assert_eq!(revision2["data"]["revision"], 2);
    assert_eq!(revision2["data"]["configurationGeneration"], 2);
    assert_eq!(s.settled(&agent, &rev2).await["status"], "succeeded");
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev2);
    let frozen2: Value =
        serde_json::from_slice(&std::fs::read(snapshot(&dir, &rev2)).unwrap()).unwrap();
    assert_eq!(
        frozen2["agents"]["defaults"]["model"]["primary"],
        "openai/gpt-5-mini"
    );
    assert_eq!(
        std::fs::read(snapshot(&dir, &rev1)).unwrap(),
        rev1_bytes,
        "revision 1's snapshot is kept unchanged"
    );
    let pid2 = record(&dir).unwrap()["pid"].as_u64().unwrap();
    assert_ne!(pid1, pid2, "rolled onto a new gateway");
    assert_eq!(
        gateway_roots(&dir),
        vec![u32::try_from(pid2).unwrap()],
        "revision 1 retired"
    );

    // ---- the gateway crashes; maintenance restarts it and records it ----
    let restarts_before = s.audit_count("openclaw.agents.lifecycle.restart").await;
    if let Some(pid) = i32::try_from(pid2)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).unwrap();
    }
    s.wait_for("the gateway to be restarted", async || {
        record(&dir).is_some_and(|r| r["pid"].as_u64() != Some(pid2))
            && dir.join("served.json").exists()
    })
    .await;
    hello(&dir, &token)
        .await
        .expect("hello-ok after the restart");
    s.wait_for("the restart to be recorded", async || {
        s.audit_count("openclaw.agents.lifecycle.restart").await > restarts_before
    })
    .await;
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev2);

    // ---- stop: nothing runs, the pointer is cleared ----
    let mut session = {
        let r = record(&dir).unwrap();
        let endpoint =
            Endpoint::loopback(u16::try_from(r["port"].as_u64().unwrap()).unwrap(), &token);
        Session::connect(&endpoint, Duration::from_secs(10))
            .await
            .unwrap()
            .0
    };
    session
        .file_set(
            "main",
            "USER.md",
            "# USER.md\n\nkept across stop and resume\n",
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    session.close().await;
    s.stop(&agent).await;
    s.wait_for("the stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    assert!(gateway_roots(&dir).is_empty(), "no gateway process is left");
    assert!(record(&dir).is_none());

    // ---- resume = deploy again: same workspace ----
    let rev3 = s.deploy(&agent).await;
    assert_eq!(s.settled(&agent, &rev3).await["status"], "succeeded");
    let r = record(&dir).unwrap();
    let endpoint = Endpoint::loopback(u16::try_from(r["port"].as_u64().unwrap()).unwrap(), &token);
    let (mut session, _) = Session::connect(&endpoint, Duration::from_secs(10))
        .await
        .unwrap();
    let user = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user.content, "# USER.md\n\nkept across stop and resume\n");
    session.close().await;

    // ---- admitted back to back while the worker is down: only the last one runs ----
    s.worker
        .as_mut()
        .unwrap()
        .terminate(Duration::from_secs(30));
    let rev4 = s.deploy(&agent).await;
    let rev5 = s.deploy(&agent).await;
    s.stop(&agent).await;
    let rev6 = s.deploy(&agent).await;
    s.start_worker();
    assert_eq!(s.settled(&agent, &rev6).await["status"], "succeeded");
    for rev in [&rev4, &rev5] {
        let d = s.settled(&agent, rev).await;
        assert_eq!(
            (d["status"].as_str(), d["error"]["code"].as_str()),
            (Some("failed"), Some("REVISION_SUPERSEDED")),
            "{d}"
        );
        assert!(!snapshot(&dir, rev).exists(), "{rev} never ran");
    }
    assert_eq!(s.agent_state(&agent).await["activeRevisionId"], rev6);
    assert_eq!(gateway_roots(&dir).len(), 1);

    // ---- delete: nothing left ----
    s.send(
        reqwest::Method::DELETE,
        &format!("/namespaces/{}/agents/{agent}", s.ns),
        None,
    )
    .await;
    s.wait_for("the deletion", async || !dir.exists()).await;
    assert!(gateway_roots(&dir).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_deploy_leaves_one_revision_and_one_gateway() {
    let mut s = Stack::start(Backend::Postgres, "29450-29499").await;
    let cfg = s
        .configuration(json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}, "plugins": {"enabled": false}}))
        .await;

    // Killed during the native workspace seeding (it starts with the Agent's directory), and
    // during the gateway's startup (it starts with the gateway record).
    for (name, point) in [("seeding", 0), ("starting", 1)] {
        let agent = s.agent(name, &cfg).await;
        let dir = s.agent_dir(&agent);
        let rev = s.deploy(&agent).await;
        // The first state of each window is enough: the kill lands in it or just after,
        // never before.
        s.wait_for(name, async || match point {
            0 => dir.join("agent.json").exists(),
            _ => record(&dir).is_some(),
        })
        .await;
        s.worker.as_mut().unwrap().kill();
        s.start_worker();
        let d = s.settled(&agent, &rev).await;
        assert_eq!(d["status"], "succeeded", "{name}: {d}");
        assert_eq!(
            s.agent_state(&agent).await["activeRevisionId"],
            rev,
            "{name}"
        );
        let revisions = s
            .get(&format!("/namespaces/{}/agents/{agent}/revisions", s.ns))
            .await;
        assert_eq!(revisions["data"].as_array().unwrap().len(), 1);
        // exactly one gateway: no duplicate, no orphan
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let roots = gateway_roots(&dir);
            if roots.len() == 1 {
                let recorded = record(&dir).unwrap()["pid"].as_u64().unwrap();
                assert_eq!(
                    u64::from(roots[0]),
                    recorded,
                    "{name}: the recorded gateway runs"
                );
                break;
            }
            assert!(Instant::now() < deadline, "{name}: gateways {roots:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // and it stops cleanly
        s.stop(&agent).await;
        s.wait_for("the stop", async || {
            s.agent_state(&agent).await["activeRevisionId"].is_null()
        })
        .await;
        assert!(gateway_roots(&dir).is_empty(), "{name}");
    }
}
