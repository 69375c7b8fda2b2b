//! The stack the end-to-end tests share: a throwaway database, the real `occ serve` and
//! `occ worker` binaries as separate processes (so a worker can crash), the process Compute
//! Driver on the pinned runtime, and helpers that look at what runs on the machine.
#![allow(dead_code, reason = "each test binary uses a part")]

pub mod sshd;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_gateway::{Endpoint, GatewayError, Session};
use occ_store::Backend;
use occ_testkit::TestDb;
use occ_testkit::occ_process::{OccProcess, kill_processes_with_env, processes_with_env};
use serde_json::{Value, json};

pub const OCC: &str = env!("CARGO_BIN_EXE_occ");
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";
/// A deployment may wait for a gateway cold start on a loaded machine.
pub const DEPLOY_TIMEOUT: Duration = Duration::from_secs(300);

pub struct Stack {
    pub db: TestDb,
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
    pub api: OccProcess,
    pub worker: Option<OccProcess>,
    pub http: reqwest::Client,
    pub url: String,
    pub key: String,
    pub ns: String,
    pub workers_started: usize,
}

impl Stack {
    pub async fn start(backend: Backend, ports: &str) -> Stack {
        Self::start_with(backend, ports, &[]).await
    }

    /// A stack whose `occ serve` and `occ worker` also get `extra` (added last, so they win).
    pub async fn start_with(backend: Backend, ports: &str, extra: &[(&str, String)]) -> Stack {
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
        .chain(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())))
        .collect();
        let key = bootstrap(&db.url, dir.path());
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

    pub fn compute_root(&self) -> PathBuf {
        self.dir.path().join("data").join("compute")
    }

    pub fn start_worker(&mut self) {
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

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
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

    /// Any request; the status and the body as JSON (`Null` when empty), success or not.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> (reqwest::StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("x-api-key", &self.key);
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Signs in the bootstrap administrator; the session cookie as `name=value`.
    pub async fn admin_session(&self) -> String {
        let res = self
            .http
            .post(format!("{}/api/auth/sign-in/email", self.url))
            .json(&serde_json::json!({"email": "admin@openclaw.local", "password": ADMIN_PASSWORD}))
            .send()
            .await
            .expect("sign in");
        assert_eq!(res.status(), reqwest::StatusCode::OK, "sign in");
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .expect("session cookie");
        cookie.split(';').next().expect("name=value").to_owned()
    }

    /// The IAM principal of the person signed in with `cookie` (`GET /api/auth/session`).
    pub async fn session_principal(&self, cookie: &str) -> String {
        let me: Value = self
            .http
            .get(format!("{}/api/auth/session", self.url))
            .header("cookie", cookie)
            .send()
            .await
            .expect("session")
            .json()
            .await
            .expect("session JSON");
        me["data"]["user"]["principalId"]
            .as_str()
            .expect("the session names its principal")
            .to_owned()
    }

    pub async fn get(&self, path: &str) -> Value {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn configuration(&self, doc: Value) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/configurations", self.ns),
                Some(json!({"kind": "agent", "values": doc})),
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn agent(&self, name: &str, cfg: &str) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/agents", self.ns),
                Some(json!({"name": name, "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn deploy(&self, agent: &str) -> String {
        let r = self
            .send(
                reqwest::Method::POST,
                &format!("/namespaces/{}/agents/{agent}/deploy", self.ns),
                None,
            )
            .await;
        r["data"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn stop(&self, agent: &str) {
        self.send(
            reqwest::Method::POST,
            &format!("/namespaces/{}/agents/{agent}/stop", self.ns),
            None,
        )
        .await;
    }

    pub async fn agent_state(&self, agent: &str) -> Value {
        self.get(&format!("/namespaces/{}/agents/{agent}", self.ns))
            .await["data"]
            .clone()
    }

    pub async fn deployment(&self, agent: &str, rev: &str) -> Value {
        self.get(&format!(
            "/namespaces/{}/agents/{agent}/deployments/{rev}",
            self.ns
        ))
        .await["data"]
            .clone()
    }

    /// Waits until the deployment is terminal; returns its status document.
    pub async fn settled(&self, agent: &str, rev: &str) -> Value {
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

    pub async fn wait_for(&self, what: &str, mut check: impl AsyncFnMut() -> bool) {
        let deadline = Instant::now() + DEPLOY_TIMEOUT;
        while !check().await {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn agent_dir(&self, agent: &str) -> PathBuf {
        self.compute_root()
            .join("namespaces")
            .join(&self.ns)
            .join("agents")
            .join(agent)
    }

    /// The file the process Driver captures revision `rev`'s gateway output in.
    pub fn gateway_log(&self, agent: &str, rev: &str) -> PathBuf {
        self.agent_dir(agent)
            .join("logs")
            .join(rev)
            .join("gateway.log")
    }

    pub async fn audit_count(&self, action: &str) -> i64 {
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

/// `occ bootstrap` of the database at `url` (files in `dir`); returns the service key.
pub fn bootstrap(url: &str, dir: &Path) -> String {
    let password = dir.join("password");
    std::fs::write(&password, ADMIN_PASSWORD).expect("password");
    let key_file = dir.join("key.json");
    let boot = std::process::Command::new(OCC)
        .args(["bootstrap", "--database-url", url, "--admin-password-file"])
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
    key_doc["data"]["key"].as_str().unwrap().to_owned()
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The gateway workloads of one Agent: processes started with its state directory whose
/// parent is not one of them (the helpers of a gateway are its children), each the gateway
/// itself or, contained, the `bwrap` that runs it (the pid occ records).
/// (The root of a contained chain is its outer `bwrap`, or the outer `occ sandbox-relay` of a
/// private network.)
pub fn gateway_roots(agent_dir: &Path) -> Vec<u32> {
    let procs = processes_with_env(&format!("OPENCLAW_STATE_DIR={}/state", agent_dir.display()));
    let pids: Vec<u32> = procs.iter().map(|(p, _)| *p).collect();
    procs
        .iter()
        .filter(|(_, parent)| !pids.contains(parent))
        .map(|(p, _)| *p)
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| {
                c.starts_with("openclaw-gatewa") || matches!(c.trim(), "bwrap" | "occ")
            })
        })
        .collect()
}

pub fn record(agent_dir: &Path) -> Option<Value> {
    std::fs::read(agent_dir.join("gateway.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

pub async fn hello(agent_dir: &Path, token: &str) -> Result<(), GatewayError> {
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

pub fn snapshot(agent_dir: &Path, rev: &str) -> PathBuf {
    agent_dir.join("revisions").join(rev).join("openclaw.json")
}
