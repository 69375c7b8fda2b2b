#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Admission-transaction throughput, PostgreSQL and SQLite, next to `pgbench -b simple-update`
//! on the same PostgreSQL cluster in the same run.
//!
//! One admission = the deploy transaction's writes: lock the Agent, pick the next revision
//! number, insert the immutable revision, set desired state `running`, enqueue
//! `agent_revision:<rev>:reconcile`, append the audit event, commit.
//!
//! Run: `cargo bench -p occ-store --bench admission` (optionally `-- --seconds 10`).
//! Prints one JSON line per measurement and a summary table.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{ResourceKind, ResourceRef};
use occ_core::resource::{
    AdmittedSpec, Agent, AgentStatus, ComputeIdentity, ConfigurationMeta, DesiredRuntimeState,
    ExecutionMode, Generation, HarnessDescriptor, Namespace, NamespaceStatus,
};
use occ_core::{AgentId, ConfigurationId, IamId, Name, NamespaceId, RevisionId, Timestamp};
use occ_store::revisions::NewRevision;
use occ_store::{Backend, Store, StoreOptions};
use occ_testkit::{TestDb, pg_cluster};

const AGENTS: usize = 64;

struct Fixture {
    ns: NamespaceId,
    cfg: ConfigurationId,
    agents: Vec<Agent>,
    actor: IamId,
}

async fn fixture(store: &Store) -> Fixture {
    let now = Timestamp::now();
    let ns = Namespace {
        id: NamespaceId::generate(),
        name: Name::parse("bench").unwrap(),
        existing_namespace: None,
        status: NamespaceStatus::Provisioning,
        created_at: now,
        deleted_at: None,
    };
    let cfg = ConfigurationMeta {
        id: ConfigurationId::generate(),
        namespace_id: ns.id.clone(),
        generation: Generation::FIRST,
        secret_bindings: Default::default(),
        created_at: now,
    };
    let mut tx = occ_testkit::begin_setup(store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.namespace_set_status(
        &ns.id,
        NamespaceStatus::Provisioning,
        NamespaceStatus::Ready,
    )
    .await
    .unwrap();
    tx.configuration_insert(&cfg).await.unwrap();
    let mut agents = Vec::new();
    for i in 0..AGENTS {
        let id = AgentId::generate();
        let agent = Agent {
            service_principal_id: IamId::agent_service_principal(&id),
            id,
            namespace_id: ns.id.clone(),
            name: Name::parse(&format!("agent-{i}")).unwrap(),
            configuration_id: cfg.id.clone(),
            backend_id: None,
            execution_mode: ExecutionMode::Embedded,
            harness_auth: None,
            active_revision_id: None,
            desired_runtime_state: DesiredRuntimeState::Stopped,
            status: AgentStatus::Active,
            created_at: now,
        };
        tx.agent_insert(&agent).await.unwrap();
        agents.push(agent);
    }
    tx.commit().await.unwrap();
    Fixture {
        ns: ns.id,
        cfg: cfg.id,
        agents,
        actor: IamId::generate_principal(),
    }
}

fn document() -> serde_json::Map<String, serde_json::Value> {
    serde_json::json!({
        "agents": {"defaults": {"model": {"primary": "openai/gpt-5"}, "workspace": "~/.openclaw/workspace"}},
        "models": {"providers": {"openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-responses"}}},
        "gateway": {"mode": "local"}
    })
    .as_object()
    .unwrap()
    .clone()
}

/// One admission transaction, as deploy will run it.
async fn admit(
    store: &Store,
    f: &Fixture,
    agent: &Agent,
    doc: &serde_json::Map<String, serde_json::Value>,
) {
    let mut tx = occ_testkit::begin_setup(store).await;
    let locked = tx.agent_lock(&f.ns, &agent.id).await.unwrap().unwrap();
    let new = NewRevision {
        id: RevisionId::generate(),
        namespace_id: f.ns.clone(),
        agent_id: agent.id.clone(),
        backend_id: None,
        spec: AdmittedSpec {
            configuration_id: f.cfg.clone(),
            configuration_kind: "agent".into(),
            configuration_generation: Generation::FIRST,
            configuration: doc.clone(),
            harness: HarnessDescriptor {
                id: "openclaw".into(),
                version: "2026.9.6".into(),
                mode: ExecutionMode::Embedded,
            },
            compute: ComputeIdentity {
                id: "compute-process".into(),
                implementation: "process".into(),
            },
            service_principal_id: locked.service_principal_id.clone(),
            harness_auth: None,
            secret_driver_id: None,
            secret_bindings: None,
            account_credential: None,
        },
        source_revision_id: None,
        admitted_at: Timestamp::now(),
    };
    let event = AuditEvent::new(
        AuditKind::Mutation,
        f.actor.as_str(),
        "openclaw.agents.deploy",
        &ResourceRef::exact(ResourceKind::AgentRevision, &f.ns, &new.id),
        AuditOutcome::Success,
    )
    .metadata("requestId", occ_core::RequestId::generate().to_string());
    tx.revision_admit(&new, &f.actor, &event).await.unwrap();
    tx.commit().await.unwrap();
}

async fn measure(store: Arc<Store>, f: Arc<Fixture>, clients: usize, seconds: u64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let doc = Arc::new(document());
    // warm-up
    for a in f.agents.iter().take(clients) {
        admit(&store, &f, a, &doc).await;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (store, f, stop, done, doc) = (
            store.clone(),
            f.clone(),
            stop.clone(),
            done.clone(),
            doc.clone(),
        );
        tasks.push(tokio::spawn(async move {
            // each client owns a disjoint set of Agents, as pgbench clients mostly touch distinct rows
            let mine: Vec<&Agent> = f.agents.iter().skip(c).step_by(clients).collect();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                admit(&store, &f, mine[i % mine.len()], &doc).await;
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn pgbench(clients: usize, seconds: u64) -> f64 {
    let cluster = pg_cluster();
    let port = cluster.port.to_string();
    let base = ["-h", "127.0.0.1", "-p", port.as_str(), "-U", "postgres"];
    let out = std::process::Command::new("pgbench")
        .args(base)
        .args([
            "-n",
            "-b",
            "simple-update",
            "-c",
            &clients.to_string(),
            "-j",
            &clients.min(2).to_string(),
        ])
        .args(["-T", &seconds.to_string(), "pgbench"])
        .output()
        .expect("pgbench (apt-get install postgresql-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| {
            l.strip_prefix("tps = ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .expect("pgbench printed no tps")
}

fn pgbench_init() {
    let cluster = pg_cluster();
    let port = cluster.port.to_string();
    let run = |program: &str, extra: &[&str]| {
        let out = std::process::Command::new(program)
            .args(["-h", "127.0.0.1", "-p", port.as_str(), "-U", "postgres"])
            .args(extra)
            .output()
            .expect(program);
        assert!(
            out.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run("createdb", &["pgbench"]);
    run("pgbench", &["-i", "-q", "-s", "4", "pgbench"]);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for backend in [Backend::Postgres, Backend::Sqlite] {
        for clients in [1usize, 16] {
            let ops = runtime.block_on(async {
                let db = TestDb::new(backend).await;
                let store = Arc::new(
                    db.store_with(&StoreOptions {
                        max_connections: 20,
                        ..Default::default()
                    })
                    .await,
                );
                let f = Arc::new(fixture(&store).await);
                let ops = measure(store.clone(), f, clients, seconds).await;
                store.close().await;
                ops
            });
            println!(
                "{{\"bench\":\"admission\",\"backend\":\"{}\",\"clients\":{clients},\"ops_per_sec\":{ops:.1}}}",
                backend.name()
            );
            rows.push((backend, clients, ops));
        }
    }
    pgbench_init();
    let mut pg_tps = Vec::new();
    for clients in [1usize, 16] {
        let tps = pgbench(clients, seconds);
        println!("{{\"bench\":\"pgbench-simple-update\",\"clients\":{clients},\"tps\":{tps:.1}}}");
        pg_tps.push((clients, tps));
    }
    println!();
    println!(
        "{:<10} {:>8} {:>14} {:>16} {:>10}",
        "backend", "clients", "admission/s", "pgbench tps", "ratio"
    );
    for (backend, clients, ops) in rows {
        let baseline = pg_tps
            .iter()
            .find(|(c, _)| *c == clients)
            .map(|(_, t)| *t)
            .unwrap_or(f64::NAN);
        println!(
            "{:<10} {:>8} {:>14.1} {:>16.1} {:>9.0}%",
            backend.name(),
            clients,
            ops,
            baseline,
            100.0 * ops / baseline
        );
    }
}
