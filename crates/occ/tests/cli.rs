//! End to end: the `occ` binary drives a real `occ serve` through the whole flow a user follows,
//! once on PostgreSQL and once on SQLite.
//!
//! migrate → bootstrap → serve → installation → namespaces → configuration create/update/get →
//! secret → IAM grant for the Agent's principal → agent create → deploy (admission) →
//! deployment status → revisions (frozen against later Configuration changes) → rollback to an
//! earlier revision → stop → delete;
//! plus the error paths (key file problems, API errors with status, code and request id) and
//! the three output formats.
//!
//! The worker does not exist yet, so the test marks the Namespace `default` ready directly in
//! the database, as the worker would.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use occ_store::Backend;
use occ_testkit::TestDb;
use serde_json::{Value, json};

const OCC: &str = env!("CARGO_BIN_EXE_occ");
const AUTH_SECRET: &str = "cli-test-secret-cli-test-secret-0123456789";
const ADMIN_PASSWORD: &str = "correct horse battery staple";
/// A Secret value that must never appear in any output or log.
const SECRET_VALUE: &str = "sk-cli-e2e-never-printed-7f3a9c";
/// A well-formed Agent id that does not exist.
const MISSING_AGENT: &str = "agt_00000000-0000-4000-8000-000000000000";
/// A well-formed revision id that does not exist.
const MISSING_REVISION: &str = "rev_00000000-0000-4000-8000-000000000000";

/// A running `occ serve`, killed (by PID) and reaped when dropped, also on panic.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    /// Starts `occ serve` on a free port and waits until it listens.
    fn start(database_url: &str, dir: &Path) -> Server {
        let data_dir = dir.join("data");
        let mut last_log = String::new();
        // A port picked by binding :0 may be taken again before the server binds it: retry.
        for attempt in 0..3 {
            let port = free_port();
            let log = dir.join(format!("serve-{attempt}.log"));
            let child = Command::new(OCC)
                .arg("serve")
                .env_clear()
                .env("OCC_DATABASE_URL", database_url)
                .env("OCC_DATA_DIR", &data_dir)
                .env("OCC_AUTH_SECRET", AUTH_SECRET)
                .env("OCC_HOST", "127.0.0.1")
                .env("OCC_PORT", port.to_string())
                .env("OCC_AUTH_BASE_URL", format!("http://127.0.0.1:{port}"))
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(File::create(dir.join(format!("serve-{attempt}.out"))).expect("stdout"))
                .stderr(File::create(&log).expect("log file"))
                .spawn()
                .expect("spawn occ serve");
            let mut server = Server { child, port, log };
            let ready = format!("listening on http://127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let text = server.log_text();
                if text.contains(&ready) {
                    return server;
                }
                if let Some(status) = server.child.try_wait().expect("try_wait") {
                    last_log = format!("occ serve exited with {status}:\n{text}");
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "occ serve did not listen within 20 s:\n{text}"
                );
                std::thread::sleep(Duration::from_millis(25));
            }
            if !last_log.contains("cannot listen") {
                break;
            }
        }
        panic!("occ serve did not start: {last_log}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            #[allow(clippy::print_stderr, reason = "the server log helps debug a failure")]
            {
                eprintln!(
                    "---- occ serve log ({}) ----\n{}",
                    self.log.display(),
                    self.log_text()
                );
            }
        }
    }
}

/// Sends raw bytes to the server and reads until it closes the connection (10 s at most).
fn raw_http(port: u16, request: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream.write_all(request.as_bytes()).expect("send");
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind :0");
    listener.local_addr().expect("local addr").port()
}

/// Runs `occ` with a clean environment (no proxies, no stray OCC_* variables).
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(OCC);
    cmd.args(args)
        .env_clear()
        .env("NO_COLOR", "1")
        .env("OCC_TIMEOUT_SECONDS", "20")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run occ")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn succeeded(args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "occ {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[track_caller]
fn failed(args: &[&str], out: &Output) -> String {
    assert!(
        !out.status.success(),
        "occ {args:?} should fail:\nstdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "a failed call prints nothing on stdout: {}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(err.starts_with("error: "), "stderr: {err}");
    err
}

/// The CLI pointed at one server with one key and one Namespace, passed as flags.
struct Cli {
    url: String,
    key_file: String,
    namespace: Option<String>,
}

impl Cli {
    fn args<'a>(&'a self, output: &'a str, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec!["--url", &self.url, "--service-key-file", &self.key_file];
        if let Some(ns) = &self.namespace {
            all.extend(["--namespace", ns.as_str()]);
        }
        all.extend(["-o", output]);
        all.extend_from_slice(args);
        all
    }

    /// Runs with `-o output`; returns the raw output.
    fn raw(&self, output: &str, args: &[&str]) -> Output {
        run(&self.args(output, args), &[])
    }

    /// Succeeds with `-o table`; returns stdout.
    #[track_caller]
    fn table(&self, args: &[&str]) -> String {
        let out = self.raw("table", args);
        succeeded(args, &out)
    }

    /// Succeeds with `-o json`; returns the parsed resource.
    #[track_caller]
    fn json(&self, args: &[&str]) -> Value {
        let out = self.raw("json", args);
        let stdout = succeeded(args, &out);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("occ {args:?} -o json is not JSON ({e}): {stdout}"))
    }

    /// Succeeds with `-o yaml`; returns the parsed resource.
    #[track_caller]
    fn yaml(&self, args: &[&str]) -> Value {
        let out = self.raw("yaml", args);
        let stdout = succeeded(args, &out);
        serde_yaml_ng::from_str(&stdout)
            .unwrap_or_else(|e| panic!("occ {args:?} -o yaml is not YAML ({e}): {stdout}"))
    }

    /// Fails (table output); returns stderr.
    #[track_caller]
    fn fails(&self, args: &[&str]) -> String {
        let out = self.raw("table", args);
        failed(args, &out)
    }
}

/// `path` is readable and writable by its owner only.
#[track_caller]
fn assert_owner_only(path: impl AsRef<Path>, what: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path.as_ref())
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{what}");
}

/// An API failure on stderr: `HTTP <status> <CODE>: <message> (request req_…)`.
#[track_caller]
fn assert_api_error(stderr: &str, status: u16, code: &str) {
    assert!(
        stderr.contains(&format!("HTTP {status} {code}: ")),
        "expected HTTP {status} {code}: {stderr}"
    );
    assert!(
        stderr.contains("(request req_"),
        "the request id is shown: {stderr}"
    );
}

/// The value of `key: value` in a single-resource table.
#[track_caller]
fn field(table: &str, key: &str) -> String {
    table
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key:?} line in:\n{table}"))
        .to_owned()
}

#[track_caller]
fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
    path.to_str().expect("utf-8 path").to_owned()
}

fn doc(primary: &str) -> Value {
    json!({"agents": {"defaults": {"model": {"primary": primary}}}})
}

/// Marks `default` ready, as the worker would.
fn mark_default_ready(rt: &tokio::runtime::Runtime, db: &TestDb) {
    rt.block_on(async {
        let mut raw = db.raw().await;
        let n = raw
            .execute(
                "UPDATE namespaces SET status = 'ready' \
                 WHERE name = 'default' AND status = 'provisioning' AND deleted_at IS NULL",
            )
            .await
            .expect("mark default ready");
        assert_eq!(n, 1, "exactly the provisioning Namespace default");
    });
}

fn end_to_end(backend: Backend) {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let db = rt.block_on(TestDb::empty(backend));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name).to_str().expect("utf-8").to_owned();

    // ---- migrate (twice: idempotent) ----
    for _ in 0..2 {
        let args = ["migrate", "--database-url", &db.url];
        succeeded(&args, &run(&args, &[]));
    }

    // ---- bootstrap ----
    std::fs::write(path("password"), format!("{ADMIN_PASSWORD}\n")).expect("password file");
    let key_file = path("admin-key.json");
    let pw = path("password");
    let args = [
        "bootstrap",
        "--database-url",
        &db.url,
        "--admin-password-file",
        &pw,
        "--service-key-file",
        &key_file,
    ];
    succeeded(&args, &run(&args, &[]));
    assert_owner_only(&key_file, "the key file is private");
    let key_doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&key_file).expect("read key")).expect("key");
    let admin_key = str_of(&key_doc["data"], "key").to_owned();
    assert!(
        str_of(&key_doc["data"], "id").starts_with("key_"),
        "{key_doc}"
    );
    let installation_id = str_of(&key_doc["meta"], "installationId").to_owned();
    // a second bootstrap creates nothing and issues no key
    let second_key = path("second-key.json");
    let args = [
        "bootstrap",
        "--database-url",
        &db.url,
        "--admin-password-file",
        &pw,
        "--service-key-file",
        &second_key,
    ];
    succeeded(&args, &run(&args, &[]));
    assert!(!Path::new(&second_key).exists(), "no second key is issued");

    // ---- serve ----
    let server = Server::start(&db.url, dir.path());
    let mut cli = Cli {
        url: server.url(),
        key_file: key_file.clone(),
        namespace: None,
    };

    // ---- installation ----
    let inst = cli.json(&["installation", "get"]);
    assert_eq!(str_of(&inst, "id"), installation_id);
    let inst_table = cli.table(&["installation", "get"]);
    assert_eq!(field(&inst_table, "id"), installation_id);
    assert_eq!(field(&inst_table, "name"), "OpenClaw Local Development");

    // ---- namespaces: default is provisioning until the worker makes it ready ----
    let list = cli.json(&["namespace", "list"]);
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(str_of(&list[0], "name"), "default");
    assert_eq!(str_of(&list[0], "status"), "provisioning");
    let ns = str_of(&list[0], "id").to_owned();
    assert!(ns.starts_with("ns_"), "{ns}");
    let table = cli.table(&["namespace", "list"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["ID", "NAME", "STATUS", "CREATEDAT"], "{table}");
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(
        &row[..3],
        [ns.as_str(), "default", "provisioning"],
        "{table}"
    );
    assert!(lines.next().is_none(), "{table}");

    // a second Namespace: created provisioning, deleted to `deleting` (the worker finishes it)
    let team = cli.json(&["namespace", "create", "team-a"]);
    assert_eq!(str_of(&team, "status"), "provisioning");
    let team_id = str_of(&team, "id").to_owned();
    let gone = cli.yaml(&["namespace", "delete", &team_id]);
    assert_eq!(str_of(&gone, "status"), "deleting");
    let listed = cli.json(&["namespace", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");

    // a namespaced command without --namespace names the missing option
    let err = cli.fails(&["agent", "list"]);
    assert!(err.contains("--namespace / OCC_NAMESPACE"), "{err}");
    cli.namespace = Some(ns.clone());

    // writes that need a ready Namespace are refused while it provisions
    let secret_file = write_json(
        dir.path(),
        "secret.json",
        &json!({"name": "openai-key", "value": SECRET_VALUE}),
    );
    let err = cli.fails(&["secret", "create", "--file", &secret_file]);
    assert_api_error(&err, 409, "NAMESPACE_NOT_READY");

    mark_default_ready(&rt, &db);
    let ns_yaml = cli.yaml(&["namespace", "get", &ns]);
    assert_eq!(str_of(&ns_yaml, "id"), ns);
    assert_eq!(str_of(&ns_yaml, "status"), "ready");

    // ---- configuration: create, update, get; the generation counts ----
    let doc1 = doc("openai/gpt-5");
    let doc2 = json!({
        "agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
        "models": {"providers": {"openai": {
            "baseUrl": "https://api.openai.com/v1",
            "api": "openai-responses",
            "apiKey": "${OPENAI_API_KEY}"
        }}}
    });
    let doc3 = doc("openai/gpt-5-mini");
    let f1 = write_json(
        dir.path(),
        "cfg1.json",
        &json!({"kind": "agent", "values": doc1}),
    );
    let cfg = cli.json(&["configuration", "create", "--file", &f1]);
    let cfg_id = str_of(&cfg, "id").to_owned();
    assert!(cfg_id.starts_with("cfg_"), "{cfg}");
    assert_eq!(cfg["generation"], 1);
    assert_eq!(cfg["values"], doc1);
    assert_eq!(str_of(&cfg, "namespaceId"), ns);
    // an invalid document is refused before any Driver sees it
    let bad = write_json(
        dir.path(),
        "bad-cfg.json",
        &json!({"kind": "agent", "values": {"models": {"providers": {"x": {"baseUrl": "ftp://x"}}}}}),
    );
    let err = cli.fails(&["configuration", "create", "--file", &bad]);
    assert_api_error(&err, 400, "INVALID_REQUEST");
    let f2 = write_json(dir.path(), "cfg2.json", &json!({"values": doc2}));
    let updated = cli.json(&["configuration", "update", &cfg_id, "--file", &f2]);
    assert_eq!(updated["generation"], 2);
    let got = cli.yaml(&["configuration", "get", &cfg_id]);
    assert_eq!(got["generation"], 2);
    assert_eq!(got["values"], doc2);
    let got = cli.table(&["configuration", "get", &cfg_id]);
    assert_eq!(field(&got, "generation"), "2");
    assert_eq!(field(&got, "id"), cfg_id);

    // ---- secret: the value is never printed ----
    let out = cli.raw("table", &["secret", "create", "--file", &secret_file]);
    let created = succeeded(&["secret", "create"], &out);
    assert!(!created.contains(SECRET_VALUE) && !text(&out.stderr).contains(SECRET_VALUE));
    let sec_id = field(&created, "id");
    assert!(sec_id.starts_with("sec_"), "{created}");
    assert_eq!(field(&created, "name"), "openai-key");
    let sec = cli.json(&["secret", "get", &sec_id]);
    assert!(sec.get("value").is_none(), "{sec}");
    assert!(!sec.to_string().contains(SECRET_VALUE));
    let secret_ref = sec["ref"].clone();
    assert_eq!(
        secret_ref,
        json!({"kind": "secret", "namespaceId": ns, "id": sec_id})
    );
    // the OCC_* variables work as well as the flags
    let out = run(
        &["-o", "json", "secret", "list"],
        &[
            ("OCC_URL", cli.url.as_str()),
            ("OCC_SERVICE_KEY_FILE", key_file.as_str()),
            ("OCC_NAMESPACE", ns.as_str()),
        ],
    );
    let listed: Value =
        serde_json::from_str(&succeeded(&["secret", "list"], &out)).expect("json list");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(!listed.to_string().contains(SECRET_VALUE));

    // ---- agent ----
    let agent_file = write_json(
        dir.path(),
        "agent.json",
        &json!({
            "name": "alpha",
            "configurationId": cfg_id,
            "harnessAuth": {"method": "api_key", "source": secret_ref}
        }),
    );
    let created = cli.table(&["agent", "create", "--file", &agent_file]);
    let agt = field(&created, "id");
    assert!(agt.starts_with("agt_"), "{created}");
    assert_eq!(field(&created, "desiredRuntimeState"), "stopped");
    assert_eq!(field(&created, "configurationId"), cfg_id);
    let agent_sp = format!("service-agent-{agt}");
    assert_eq!(field(&created, "servicePrincipalId"), agent_sp);
    let table = cli.table(&["agent", "list"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "ID",
            "NAME",
            "DESIREDRUNTIMESTATE",
            "STATUS",
            "ACTIVEREVISIONID",
            "CONFIGURATIONID"
        ]
    );
    assert!(
        table.lines().nth(1).expect("row").starts_with(&agt),
        "{table}"
    );

    // ---- deploy: the Agent's principal needs its own grant on the Secret ----
    let err = cli.fails(&["agent", "deploy", &agt]);
    assert_api_error(&err, 403, "FORBIDDEN");
    assert!(err.contains(&agent_sp), "the 403 names the Agent SP: {err}");
    assert!(
        err.contains(&format!("occ secret grant {sec_id} --agent {agt}")),
        "the refusal says how to grant: {err}"
    );
    // `occ secret grant` reuses a Role that grants exactly `operate` on Secrets, binds it to the
    // Agent's principal on this Secret, and is idempotent.
    let role_file = write_json(
        dir.path(),
        "role.json",
        &json!({"name": "secret-operator", "permissions": [{"action": "operate", "resourceKind": "secret"}]}),
    );
    let role = cli.json(&["iam", "role", "create", "--file", &role_file]);
    let role_id = str_of(&role, "id").to_owned();
    let err = cli.fails(&[
        "secret",
        "grant",
        "sec_00000000-0000-4000-8000-000000000000",
        "--agent",
        &agt,
    ]);
    assert_api_error(&err, 404, "NOT_FOUND");
    let binding = cli.json(&["secret", "grant", &sec_id, "--agent", &agt]);
    assert_eq!(
        (
            str_of(&binding, "subjectId"),
            str_of(&binding, "roleId"),
            str_of(&binding, "resourceKind"),
            str_of(&binding, "resourceId")
        ),
        (
            agent_sp.as_str(),
            role_id.as_str(),
            "secret",
            sec_id.as_str()
        )
    );
    let again = cli.json(&["secret", "grant", &sec_id, "--agent", &agt]);
    assert_eq!(
        str_of(&again, "id"),
        str_of(&binding, "id"),
        "granting twice binds once"
    );
    let table = cli.table(&["iam", "access-binding", "list"]);
    assert!(table.starts_with("ID "), "{table}");
    assert!(table.contains(&agent_sp), "{table}");

    // admission prints the revision
    let out = cli.raw("table", &["agent", "deploy", &agt]);
    let deployed = succeeded(&["agent", "deploy"], &out);
    assert!(!deployed.contains(SECRET_VALUE) && !text(&out.stderr).contains(SECRET_VALUE));
    let rev_id = field(&deployed, "id");
    assert!(rev_id.starts_with("rev_"), "{deployed}");
    assert_eq!(field(&deployed, "revision"), "1");
    assert_eq!(field(&deployed, "configurationGeneration"), "2");
    assert_eq!(field(&deployed, "agentId"), agt);
    let frozen: Value = serde_json::from_str(&field(&deployed, "configuration")).expect("json");
    assert_eq!(frozen, doc2);
    let a = cli.json(&["agent", "get", &agt]);
    assert_eq!(str_of(&a, "desiredRuntimeState"), "running");

    // ---- deployment status (queued: no worker runs) ----
    let status = cli.json(&["agent", "deployment-status", &agt, &rev_id]);
    assert_eq!(str_of(&status, "deploymentId"), rev_id);
    assert_eq!(str_of(&status, "agentId"), agt);
    assert_eq!(str_of(&status, "status"), "queued");
    assert_eq!(status["error"], Value::Null);
    let status = cli.yaml(&["agent", "deployment-status", &agt, &rev_id]);
    assert_eq!(str_of(&status, "status"), "queued");

    // ---- the deployment inventory: the queued deployment shows; a table row per Agent ----
    let inventory = cli.json(&["installation", "deployment-inventory"]);
    let listed = inventory["namespaces"]
        .as_array()
        .and_then(|all| all.iter().find(|n| n["id"] == ns.as_str()))
        .unwrap_or_else(|| panic!("{inventory}"));
    let row = listed["agents"]
        .as_array()
        .and_then(|agents| agents.iter().find(|a| a["id"] == agt.as_str()))
        .unwrap_or_else(|| panic!("{inventory}"));
    assert_eq!(row["deploymentInProgress"], true, "{row}");
    let table = cli.table(&["installation", "deployment-inventory"]);
    assert!(table.starts_with("NAMESPACEID"), "{table}");
    assert!(table.contains(&agt), "{table}");
    assert_eq!(cli.json(&["installation", "backends"]), json!([]));

    // ---- automation: a service principal for CI, the built-in operator Role on the
    // Namespace, a key limited to it, written to a private file and never printed ----
    let ci = cli.json(&["service-principal", "create", "ci", "--in-namespace"]);
    let ci_id = str_of(&ci, "id").to_owned();
    assert_eq!(str_of(&ci, "namespaceId"), ns);
    let listed = cli.json(&["service-principal", "list", "--in-namespace"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let granted = cli.json(&["iam", "grant", "--subject", &ci_id, "--role", "operator"]);
    assert!(
        str_of(&granted, "roleId").starts_with("role_operator_"),
        "{granted}"
    );
    let ci_key = path("ci-key.json");
    let args = [
        "service-key",
        "create",
        "--principal",
        &ci_id,
        "--name",
        "ci",
        "--in-namespace",
        "--expires-in-days",
        "7",
        "--out",
        &ci_key,
    ];
    let out = cli.raw("json", &args);
    let shown = succeeded(&args, &out);
    let issued: Value =
        serde_json::from_str(&std::fs::read_to_string(&ci_key).expect("the key file"))
            .expect("json");
    let ci_plaintext = str_of(&issued["data"], "key");
    assert!(
        !shown.contains(ci_plaintext),
        "the key is never printed: {shown}"
    );
    assert_owner_only(&ci_key, "the key file is private");
    let err = cli.fails(&args);
    assert!(
        err.contains("--out"),
        "an existing file is never replaced: {err}"
    );
    let ci_cli = Cli {
        url: cli.url.clone(),
        key_file: ci_key.clone(),
        namespace: Some(ns.clone()),
    };
    let seen = ci_cli.json(&["agent", "get", &agt]);
    assert_eq!(str_of(&seen, "id"), agt);
    assert_api_error(
        &ci_cli.fails(&["namespace", "create", "ci-made"]),
        403,
        "FORBIDDEN",
    );
    cli.json(&["service-principal", "disable", &ci_id]);
    assert_api_error(
        &ci_cli.fails(&["agent", "get", &agt]),
        401,
        "UNAUTHENTICATED",
    );
    cli.json(&["service-principal", "enable", &ci_id]);
    ci_cli.json(&["agent", "get", &agt]);
    let revoked = cli.json(&["service-key", "revoke", str_of(&issued["data"], "id")]);
    assert_eq!(revoked["revoked"], true);
    assert_api_error(
        &ci_cli.fails(&["agent", "get", &agt]),
        401,
        "UNAUTHENTICATED",
    );
    cli.table(&["service-principal", "delete", &ci_id]);

    // ---- runtime: no active revision, so the latest; nothing runs for it (no worker) ----
    let runtime = cli.json(&["agent", "runtime", &agt]);
    assert_eq!(str_of(&runtime, "revisionId"), rev_id);
    assert_eq!(runtime["pods"], json!([]));
    assert_eq!(runtime["sources"][0]["unavailableCode"], "NO_POD");
    let table = cli.table(&["agent", "runtime", &agt, "--revision", &rev_id]);
    assert!(
        table.starts_with(&format!("Revision {rev_id} observed at ")),
        "{table}"
    );
    assert!(
        table.contains("No workload runs for this revision."),
        "{table}"
    );

    // ---- diagnose: the latest revision's checks next to its deployment ----
    let diagnosis = cli.json(&["agent", "diagnose", &agt]);
    assert_eq!(str_of(&diagnosis["diagnostics"], "revisionId"), rev_id);
    assert!(diagnosis["diagnostics"]["checks"].is_array(), "{diagnosis}");
    assert_eq!(str_of(&diagnosis["deployment"], "status"), "queued");
    let table = cli.table(&["agent", "diagnose", &agt, "--revision", &rev_id]);
    assert!(
        table.starts_with(&format!("Deployment {rev_id}: queued\n")),
        "{table}"
    );
    assert!(
        table.contains(&format!("occ agent logs {agt} --revision {rev_id}")),
        "{table}"
    );

    // ---- revisions ----
    let table = cli.table(&["agent", "revisions", &agt]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("header").split_whitespace().collect();
    assert_eq!(
        header,
        ["ID", "REVISION", "CONFIGURATIONGENERATION", "CREATEDAT"]
    );
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(&row[..3], [rev_id.as_str(), "1", "2"], "{table}");
    assert!(lines.next().is_none(), "{table}");

    // a later Configuration change never touches the admitted revision
    let f3 = write_json(dir.path(), "cfg3.json", &json!({"values": doc3}));
    let updated = cli.json(&["configuration", "update", &cfg_id, "--file", &f3]);
    assert_eq!(updated["generation"], 3);
    assert_eq!(updated["values"], doc3);
    let revisions = cli.yaml(&["agent", "revisions", &agt]);
    let revisions = revisions.as_array().expect("a list");
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    assert_eq!(str_of(&revisions[0], "id"), rev_id);
    assert_eq!(revisions[0]["configurationGeneration"], 2);
    assert_eq!(revisions[0]["configuration"], doc2);
    let revisions = cli.json(&["agent", "revisions", &agt]);
    assert_eq!(revisions[0]["configuration"], doc2);
    assert_eq!(revisions[0]["revision"], 1);

    // `deploy --wait` admits revision 2 (generation 3), reports progress on stderr and gives up
    // at its deadline, non-zero (no worker runs here)
    let out = cli.raw(
        "table",
        &[
            "agent",
            "deploy",
            &agt,
            "--wait",
            "--wait-timeout-seconds",
            "1",
        ],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(err.contains("(revision 2) admitted."), "{err}");
    assert!(err.contains("] queued"), "{err}");
    assert!(
        err.contains("error: the deployment did not finish within 1 seconds"),
        "{err}"
    );
    let revisions = cli.json(&["agent", "revisions", &agt]);
    let revisions = revisions.as_array().expect("a list");
    assert_eq!(revisions.len(), 2, "{revisions:?}");
    let by_number = |n: u64| {
        revisions
            .iter()
            .find(|r| r["revision"] == n)
            .unwrap_or_else(|| panic!("no revision {n}: {revisions:?}"))
    };
    assert_eq!(
        (
            &by_number(1)["configurationGeneration"],
            &by_number(1)["configuration"]
        ),
        (&json!(2), &doc2)
    );
    assert_eq!(
        (
            &by_number(2)["configurationGeneration"],
            &by_number(2)["configuration"]
        ),
        (&json!(3), &doc3)
    );
    // one revision on its own
    let one = cli.json(&["agent", "revision", &agt, &rev_id]);
    assert_eq!(
        (&one["configurationGeneration"], &one["configuration"]),
        (&json!(2), &doc2)
    );
    // ---- rollback: revision 1's frozen document comes back as revision 3 ----
    let rolled = cli.json(&["agent", "rollback", &agt, "--to", &rev_id]);
    assert_eq!(rolled["revision"], 3, "{rolled}");
    assert_eq!(str_of(&rolled, "redeployedFromRevisionId"), rev_id);
    assert_eq!(
        (&rolled["configurationGeneration"], &rolled["configuration"]),
        (&json!(2), &doc2)
    );
    // `--wait` follows it as `deploy --wait` does
    let out = cli.raw(
        "table",
        &[
            "agent",
            "rollback",
            &agt,
            "--to",
            &rev_id,
            "--wait",
            "--wait-timeout-seconds",
            "1",
        ],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("(revision 4) admitted."), "{err}");
    assert!(err.contains("] queued"), "{err}");
    assert!(
        err.contains("error: the deployment did not finish within 1 seconds"),
        "{err}"
    );
    // a revision the Agent never had
    let err = cli.fails(&["agent", "rollback", &agt, "--to", MISSING_REVISION]);
    assert_api_error(&err, 404, "NOT_FOUND");
    let err = cli.fails(&["agent", "rollback", &agt, "--to", "2"]);
    assert_api_error(&err, 400, "INVALID_REQUEST");

    // a referenced Configuration cannot be deleted
    let err = cli.fails(&["configuration", "delete", &cfg_id]);
    assert_api_error(&err, 409, "RESOURCE_CONFLICT");

    // ---- stop, delete ----
    let stopped = cli.table(&["agent", "stop", &agt]);
    assert_eq!(field(&stopped, "desiredRuntimeState"), "stopped");
    let deleted = cli.json(&["agent", "delete", &agt]);
    assert_eq!(str_of(&deleted, "id"), agt);
    assert_eq!(str_of(&deleted, "status"), "deleting");
    let after = cli.json(&["agent", "get", &agt]);
    assert_eq!(str_of(&after, "status"), "deleting");
    // a deleting Agent cannot be deployed, nor rolled back
    let err = cli.fails(&["agent", "deploy", &agt]);
    assert_api_error(&err, 409, "AGENT_DELETING");
    let err = cli.fails(&["agent", "rollback", &agt, "--to", &rev_id]);
    assert_api_error(&err, 409, "AGENT_DELETING");

    // a deletion answered with 204 still prints machine-readable output under -o json/yaml
    let sa = cli.json(&["service-account", "create", "ci"]);
    let sa_id = str_of(&sa, "id");
    // a native account takes a reference; issuing needs a Backend this server does not have
    let set = cli.json(&[
        "service-account",
        "set-credential",
        sa_id,
        "--kind",
        "api_key",
        "--secret",
        "provider-key",
        "--key",
        "api-key",
    ]);
    assert_eq!(set["credential"], json!({"kind": "api_key"}));
    let err = cli.fails(&["service-account", "issue-credential", sa_id]);
    assert_api_error(&err, 503, "DEPENDENCY_UNAVAILABLE");
    let err = cli.fails(&[
        "service-account",
        "set-credential",
        sa_id,
        "--kind",
        "access_token",
        "--secret",
        "a",
        "--key",
        "b",
    ]);
    assert_api_error(&err, 400, "INVALID_REQUEST");
    let gone = cli.json(&["service-account", "delete", sa_id]);
    assert_eq!(gone, json!({"id": sa_id, "deleted": true}));

    // ---- Presets: the built-in ones, then one of our own ----
    let listed = cli.json(&["preset", "list"]);
    let names: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| str_of(p, "name"))
        .collect();
    assert_eq!(names, ["Standard OpenClaw", "Standard Codex"]);
    let preset_file = write_json(
        dir.path(),
        "preset.json",
        &json!({"name": "support", "template": {
            "variables": {"model": {"type": "string", "default": "gpt-5-mini"}},
            "configuration": {"values": doc("openai/{{ vars.model }}")}}}),
    );
    let preset = cli.json(&["preset", "create", "--file", &preset_file]);
    let preset_id = str_of(&preset, "id").to_owned();
    assert!(preset_id.starts_with("pre_"), "{preset}");
    // the document is checked with each default filled in
    let bad_preset = write_json(
        dir.path(),
        "bad-preset.json",
        &json!({"name": "bad", "template": {
            "variables": {"url": {"type": "string", "default": "ftp://x"}},
            "configuration": {"values": {"models": {"providers": {"x": {"baseUrl": "{{ vars.url }}"}}}}}}}),
    );
    let err = cli.fails(&["preset", "create", "--file", &bad_preset]);
    assert_api_error(&err, 400, "INVALID_REQUEST");
    let rename = write_json(dir.path(), "rename.json", &json!({"name": "helpdesk"}));
    let renamed = cli.json(&["preset", "update", &preset_id, "--file", &rename]);
    assert_eq!(str_of(&renamed, "name"), "helpdesk");
    assert_eq!(
        cli.json(&["preset", "get", &preset_id])["template"],
        preset["template"]
    );
    let gone = cli.json(&["preset", "delete", &preset_id]);
    assert_eq!(gone, json!({"id": preset_id, "deleted": true}));

    // ---- one-step provisioning from a Preset (no worker runs here: the job stays queued) ----
    let job = cli.json(&[
        "agent",
        "provision",
        "--preset",
        "Standard Codex",
        "--name",
        "cli-codex",
        "--var",
        "model=gpt-5.6-sol",
        "--var",
        "modelSecret=sk-cli-provision-0123456789",
    ]);
    let work = str_of(&job, "workId").to_owned();
    assert!(work.starts_with("prv_"), "{job}");
    assert_eq!(
        (str_of(&job, "status"), str_of(&job, "phase")),
        ("queued", "admitted")
    );
    // the password became a Secret of the Namespace, never printed
    let secrets = cli.json(&["secret", "list"]);
    assert!(
        secrets
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "cli-codex-modelSecret"),
        "{secrets}"
    );
    assert!(!secrets.to_string().contains("sk-cli-provision"));
    // the embedded built-in takes its endpoint's key the same way, bound to the Configuration
    let embedded = cli.json(&[
        "agent",
        "provision",
        "--preset",
        "Standard OpenClaw",
        "--name",
        "cli-embedded",
        "--var",
        "model=local-model",
        "--var",
        "baseUrl=http://127.0.0.1:9/v1",
        "--var",
        "modelKey=sk-cli-embedded-0123456789",
    ]);
    assert_eq!(str_of(&embedded, "status"), "queued", "{embedded}");
    let secrets = cli.json(&["secret", "list"]);
    assert!(
        secrets
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "cli-embedded-modelKey"),
        "{secrets}"
    );
    let read = cli.json(&["agent", "provisioning", &work]);
    assert_eq!(str_of(&read, "workId"), work);
    let err = cli.fails(&["agent", "provision-retry", &work]);
    assert_api_error(&err, 409, "RESOURCE_CONFLICT");
    // variables are checked before anything is sent
    let err = cli.fails(&[
        "agent",
        "provision",
        "--preset",
        "Standard Codex",
        "--var",
        "colour=red",
    ]);
    assert!(err.contains("has no variable colour"), "{err}");
    let err = cli.fails(&[
        "agent",
        "provision",
        "--preset",
        "Standard Codex",
        "--name",
        "x",
    ]);
    assert!(
        err.contains("needs a value for: model, modelSecret"),
        "{err}"
    );
    let err = cli.fails(&["agent", "provision", "--preset", "no-such-preset"]);
    assert!(err.contains("no Preset"), "{err}");
    // a job the API refuses leaves no Secret behind
    let refused_file = write_json(
        dir.path(),
        "refused-preset.json",
        &json!({"name": "refused", "template": {
            "variables": {"key": {"type": "password"}},
            "agent": {"name": "refused-agent", "backendId": "no-such-backend",
                      "harnessAuth": {"method": "api_key", "secret": "{{ vars.key }}"}},
            "configuration": {"values": doc("openai/gpt-5")}}}),
    );
    let refused = cli.json(&["preset", "create", "--file", &refused_file]);
    let err = cli.fails(&[
        "agent",
        "provision",
        "--preset",
        "refused",
        "--var",
        "key=sk-refused-0123",
    ]);
    assert_api_error(&err, 404, "NOT_FOUND");
    let secrets = cli.json(&["secret", "list"]);
    assert!(
        !secrets.to_string().contains("refused-agent-key"),
        "{secrets}"
    );
    cli.json(&["preset", "delete", str_of(&refused, "id")]);

    // ---- credential sources: a key from a file becomes a Secret, never printed ----
    std::fs::write(path("provider-key"), "sk-provider-0123456789\n").expect("write");
    let table = cli.table(&[
        "credential-source",
        "create",
        "--name",
        "local-model",
        "--type",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--key-file",
        &path("provider-key"),
    ]);
    assert!(!table.contains("sk-provider"), "{table}");
    let source_id = field(&table, "id");
    assert!(source_id.starts_with("cs_"), "{table}");
    let source = cli.json(&["credential-source", "get", &source_id]);
    assert_eq!(
        source["config"],
        json!({"base_url": "http://127.0.0.1:9/v1"})
    );
    let key_secret = source["secrets"]["api_key"]["id"]
        .as_str()
        .expect("key")
        .to_owned();
    let secrets = cli.json(&["secret", "list"]);
    assert!(
        secrets.to_string().contains("local-model-api-key"),
        "{secrets}"
    );
    assert!(!secrets.to_string().contains("sk-provider"), "{secrets}");
    // a type the catalog lacks: 409, and the Secret made for it goes again
    let err = cli.fails(&[
        "credential-source",
        "create",
        "--name",
        "refused-source",
        "--type",
        "vertex",
        "--key-file",
        &path("provider-key"),
    ]);
    assert_api_error(&err, 409, "RESOURCE_CONFLICT");
    let secrets = cli.json(&["secret", "list"]);
    assert!(!secrets.to_string().contains("refused-source"), "{secrets}");
    let err = cli.fails(&[
        "credential-source",
        "create",
        "--name",
        "x",
        "--type",
        "openai",
    ]);
    assert!(
        err.contains("--secret") || err.contains("required"),
        "{err}"
    );
    // rotate to another Secret, then delete; the Secrets stay theirs to delete
    let other = cli.json(&[
        "credential-source",
        "update",
        &source_id,
        "--key-file",
        &path("provider-key"),
    ]);
    let rotated = other["secrets"]["api_key"]["id"]
        .as_str()
        .expect("key")
        .to_owned();
    assert_ne!(rotated, key_secret);
    // its models are asked at its own base URL, where nothing listens: a clear 503
    let err = cli.fails(&["credential-source", "models", &source_id]);
    assert_api_error(&err, 503, "MODEL_DISCOVERY_UNAVAILABLE");
    assert!(!err.contains("sk-provider"), "{err}");
    let listed = cli.json(&["credential-source", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    // a Preset provisioned with the saved connection: its key's Secret and its base URL fill
    // the Preset's password and baseUrl variables; no key is typed and no Secret is made
    let connected = cli.json(&[
        "agent",
        "provision",
        "--preset",
        "Standard OpenClaw",
        "--name",
        "cli-connected",
        "--var",
        "model=local-model",
        "--connection",
        "local-model",
    ]);
    assert_eq!(str_of(&connected, "status"), "queued", "{connected}");
    let secrets = cli.json(&["secret", "list"]);
    assert!(!secrets.to_string().contains("cli-connected"), "{secrets}");
    let spec = rt.block_on(async {
        let store = occ_store::Store::connect(&db.url, &Default::default())
            .await
            .expect("store");
        let mut tx = store.begin_read().await.expect("read");
        let job = tx
            .provisioning_get(
                &ns.parse().expect("ns"),
                &str_of(&connected, "workId").parse().expect("workId"),
            )
            .await
            .expect("job")
            .expect("the job is stored");
        job.spec
    });
    assert_eq!(
        spec.secret_bindings["MODEL_API_KEY"].source.id.as_str(),
        rotated,
        "the connection's key is bound"
    );
    assert_eq!(
        spec.configuration_values["models"]["providers"]["openai-compatible"]["baseUrl"],
        "http://127.0.0.1:9/v1",
        "the connection's base URL is the provider's"
    );
    let err = cli.fails(&[
        "agent",
        "provision",
        "--preset",
        "Standard OpenClaw",
        "--name",
        "x",
        "--var",
        "model=m",
        "--connection",
        "no-such-connection",
    ]);
    assert!(
        err.contains("no credential source") && err.contains("local-model"),
        "{err}"
    );
    let gone = cli.json(&["credential-source", "delete", &source_id]);
    assert_eq!(gone, json!({"id": source_id, "deleted": true}));
    for id in [&key_secret, &rotated] {
        cli.json(&["secret", "delete", id]);
    }

    // ---- API errors: status, code, message and request id on stderr ----
    let err = cli.fails(&["agent", "get", MISSING_AGENT]);
    assert_api_error(&err, 404, "NOT_FOUND");
    let out = cli.raw("json", &["agent", "get", MISSING_AGENT]);
    assert_api_error(&failed(&["agent", "get"], &out), 404, "NOT_FOUND");
    let err = cli.fails(&["agent", "get", "not-an-id"]);
    assert_api_error(&err, 400, "INVALID_REQUEST");

    // ---- key file problems ----
    let missing = path("no-such-key.json");
    let bad_key_cli = |key_file: &str| Cli {
        url: cli.url.clone(),
        key_file: key_file.to_owned(),
        namespace: Some(ns.clone()),
    };
    let err = bad_key_cli(&missing).fails(&["installation", "get"]);
    assert!(
        err.contains("--service-key-file") && err.contains(&missing),
        "names the option and the path: {err}"
    );
    assert!(err.contains("No such file"), "{err}");
    std::fs::write(path("garbage-key.json"), "not json\n").expect("write");
    let err = bad_key_cli(&path("garbage-key.json")).fails(&["installation", "get"]);
    assert!(
        err.contains(&path("garbage-key.json")) && err.contains("is not JSON"),
        "{err}"
    );
    std::fs::write(path("keyless.json"), r#"{"data":{"id":"key_x"}}"#).expect("write");
    let err = bad_key_cli(&path("keyless.json")).fails(&["namespace", "list"]);
    assert!(err.contains("has no data.key"), "{err}");
    std::fs::write(path("wrong-key.json"), r#"{"data":{"key":"occ_wrong"}}"#).expect("write");
    let err = bad_key_cli(&path("wrong-key.json")).fails(&["namespace", "list"]);
    assert_api_error(&err, 401, "UNAUTHENTICATED");
    // no key at all
    let out = run(&["--url", &cli.url, "installation", "get"], &[]);
    assert_api_error(
        &failed(&["installation", "get"], &out),
        401,
        "UNAUTHENTICATED",
    );
    // a malformed --url names the option
    let out = run(
        &["--url", &format!("{}/api", cli.url), "installation", "get"],
        &[],
    );
    let err = failed(&["installation", "get"], &out);
    assert!(err.contains("--url/OCC_URL"), "{err}");
    // an unreachable server
    let out = run(
        &[
            "--url",
            "http://127.0.0.1:1",
            "--service-key-file",
            &key_file,
            "installation",
            "get",
        ],
        &[],
    );
    let err = failed(&["installation", "get"], &out);
    assert!(err.contains("cannot reach http://127.0.0.1:1"), "{err}");

    // ---- request framing on the wire, decoded by the real HTTP server ----
    // a chunked body whose chunk size is not hexadecimal cannot be read: 400, not 413
    let reply = raw_http(
        server.port,
        &format!(
            "POST /namespaces HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {admin_key}\r\n\
             content-type: application/json\r\ntransfer-encoding: chunked\r\n\
             connection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    assert!(
        reply.contains("The request body could not be read"),
        "{reply}"
    );
    // two Content-Type headers are ambiguous: 400, and nothing is created
    let body = r#"{"name":"wire-twice"}"#;
    let reply = raw_http(
        server.port,
        &format!(
            "POST /namespaces HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {admin_key}\r\n\
             content-type: application/json\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    assert!(
        !cli.table(&["namespace", "list"]).contains("wire-twice"),
        "a refused body created a Namespace"
    );

    // ---- people: `occ login` keeps a session that commands without a key use; account
    // administration goes through it ----
    let config_dir = path("config");
    let pat_config = path("config-pat");
    let url = cli.url.clone();
    let as_user = |config: &str, args: &[&str]| -> Output {
        let mut all = vec!["--url", url.as_str(), "-o", "json"];
        all.extend_from_slice(args);
        run(&all, &[("OCC_CONFIG_DIR", config)])
    };
    let args = ["namespace", "list"];
    let err = failed(&args, &as_user(&config_dir, &args));
    assert!(
        err.contains("occ login"),
        "a missing credential says how to get one: {err}"
    );
    let args = [
        "login",
        "--email",
        "admin@openclaw.local",
        "--password-file",
        &pw,
    ];
    let shown = succeeded(&args, &as_user(&config_dir, &args));
    let session_file = Path::new(&config_dir).join("session.json");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&session_file).expect("session file"))
            .expect("json");
    assert!(
        !shown.contains(str_of(&saved, "token")),
        "the session is never printed"
    );
    assert_owner_only(&session_file, "the session file is private");
    let args = ["namespace", "list"];
    succeeded(&args, &as_user(&config_dir, &args));
    // Accounts are administered by people: the session creates one, and its owner signs in.
    std::fs::write(path("pat-password"), "pat's long password\n").expect("password");
    let pat_pw = path("pat-password");
    let args = [
        "account",
        "create",
        "--email",
        "pat@example.com",
        "--password-file",
        &pat_pw,
    ];
    let made: Value =
        serde_json::from_str(&succeeded(&args, &as_user(&config_dir, &args))).expect("json");
    let pat_id = str_of(&made, "id").to_owned();
    let args = [
        "login",
        "--email",
        "pat@example.com",
        "--password-file",
        &pat_pw,
    ];
    succeeded(&args, &as_user(&pat_config, &args));
    // A second full administrator, made with one flag.
    let args = [
        "account",
        "create",
        "--email",
        "second@example.com",
        "--password-file",
        &pat_pw,
        "--administrator",
    ];
    succeeded(&args, &as_user(&config_dir, &args));
    let second_config = path("config-second");
    let args = [
        "login",
        "--email",
        "second@example.com",
        "--password-file",
        &pat_pw,
    ];
    succeeded(&args, &as_user(&second_config, &args));
    let args = ["namespace", "create", "by-second"];
    succeeded(&args, &as_user(&second_config, &args));
    let args = ["account", "get", &pat_id];
    assert_api_error(
        &failed(&args, &as_user(&pat_config, &args)),
        403,
        "FORBIDDEN",
    );
    let args = ["account", "disable", &pat_id];
    let disabled: Value =
        serde_json::from_str(&succeeded(&args, &as_user(&config_dir, &args))).expect("json");
    assert_eq!(
        (disabled["disabled"].clone(), disabled["version"].clone()),
        (json!(true), json!(2))
    );
    let args = ["namespace", "list"];
    let err = failed(&args, &as_user(&pat_config, &args));
    assert_api_error(&err, 401, "UNAUTHENTICATED");
    assert!(err.contains("occ login"), "{err}");
    let args = [
        "login",
        "--email",
        "pat@example.com",
        "--password-file",
        &pat_pw,
    ];
    assert_api_error(
        &failed(&args, &as_user(&pat_config, &args)),
        401,
        "UNAUTHENTICATED",
    );
    let args = ["account", "enable", &pat_id];
    succeeded(&args, &as_user(&config_dir, &args));
    let args = [
        "login",
        "--email",
        "pat@example.com",
        "--password-file",
        &pat_pw,
    ];
    succeeded(&args, &as_user(&pat_config, &args));
    // Signing out ends the session on the server and forgets it.
    let token = str_of(&saved, "token").to_owned();
    let args = ["logout"];
    succeeded(&args, &as_user(&config_dir, &args));
    assert!(!session_file.exists(), "the session file is gone");
    let reply = raw_http(
        server.port,
        &format!(
            "GET /api/auth/session HTTP/1.1\r\nhost: 127.0.0.1\r\n\
             cookie: openclaw_occ.session_token={token}\r\nconnection: close\r\n\r\n"
        ),
    );
    assert!(
        reply.contains(r#""data":null"#),
        "the server ended it: {reply}"
    );

    // ---- the server never logged the Secret value or the service key ----
    let log = server.log_text();
    assert!(
        !log.contains(SECRET_VALUE),
        "the Secret value leaked into the log"
    );
    assert!(
        !log.contains(&admin_key),
        "the service key leaked into the log"
    );
    drop(server);

    #[allow(clippy::print_stderr, reason = "timing of the end-to-end run")]
    {
        eprintln!(
            "cli end to end on {backend:?}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn cli_end_to_end_postgres() {
    end_to_end(Backend::Postgres);
}

#[test]
fn cli_end_to_end_sqlite() {
    end_to_end(Backend::Sqlite);
}
