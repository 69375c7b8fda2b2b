//! Worker tests: the real API, controller, store and Drivers of `TestApp`, with the Compute
//! test double [`FakeCompute`] in place of a runtime. They prove what the worker records and
//! which Compute verbs it calls, in which order, under races, lost leases and crashes — not that
//! a gateway runs (the process Driver's suite does that with real gateways).

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use occ_controller::worker::{PassOutcome, Worker, WorkerSettings};
use occ_core::ReasonCode;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::resource::{DesiredRuntimeState, NamespaceStatus};
use occ_core::work::{WorkKey, WorkState};
use occ_core::{AgentId, NamespaceId, RevisionId};
use occ_drivers::compute::ComputeError;
use occ_store::Backend;
use occ_testkit::app::{Credential, Reply, TestApp};
use occ_testkit::compute::{Call, FakeCompute, Scripted, Verb};
use serde_json::{Value, json};

mod accounts;
mod exits;
mod provisioning;
mod rollback;

fn settings() -> WorkerSettings {
    WorkerSettings {
        poll_interval: Duration::from_millis(20),
        lease: Duration::from_millis(1500),
        max_attempts: 3,
        convergence_timeout: Duration::from_secs(900),
        concurrency: 2,
        recover_batch: 100,
    }
}

struct Fixture {
    app: TestApp,
    compute: Arc<FakeCompute>,
    worker: Worker,
    ns: String,
}

impl Fixture {
    async fn new() -> Self {
        Self::with(Backend::Sqlite, FakeCompute::new(), settings()).await
    }

    async fn with(backend: Backend, compute: FakeCompute, settings: WorkerSettings) -> Self {
        let app = TestApp::on(backend).await;
        let compute = Arc::new(compute);
        let worker = Worker::new(app.controller.clone(), compute.clone(), settings);
        let f = Self::of(app, compute, worker);
        // Bootstrap queued the ensure work of `default`, which the test app already made
        // ready: it settles as superseded.
        let passes = f.drain().await;
        assert_eq!(passes.len(), 1, "{passes:?}");
        f
    }

    /// A fixture around an app and a worker built for it (hooks, metrics, other Drivers).
    fn of(app: TestApp, compute: Arc<FakeCompute>, worker: Worker) -> Self {
        let ns = app.default_ns.to_string();
        Self {
            app,
            compute,
            worker,
            ns,
        }
    }

    fn admin(&self) -> Credential {
        self.app.admin()
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.app.call(method, path, &self.admin(), body).await
    }

    /// One worker pass, on whatever is claimable now. Where a test expects a retry, this
    /// rather than [`Self::drain`]: on a loaded machine the retry's backoff (about a second)
    /// can run out while a drain is still going, and the drain would run the retry too.
    async fn pass(&self) -> Option<(WorkKey, PassOutcome)> {
        let pass = self.worker.run_once().await.expect("worker");
        pass.map(|(item, outcome)| (item.key, outcome))
    }

    /// Runs the worker until nothing is claimable now.
    async fn drain(&self) -> Vec<(WorkKey, PassOutcome)> {
        let mut passes = Vec::new();
        while let Some((item, outcome)) = self.worker.run_once().await.expect("worker") {
            passes.push((item.key, outcome));
            assert!(
                passes.len() < 100,
                "the worker does not converge: {passes:?}"
            );
        }
        passes
    }

    /// A Configuration and an Agent with `{method:"runtime"}` auth.
    async fn agent(&self, name: &str) -> (String, String) {
        self.app.draft_agent(name).await
    }

    /// Deploys `agent` as the administrator; the revision id.
    async fn deploy(&self, agent: &str) -> String {
        self.app.deploy_as(&self.admin(), agent).await
    }

    async fn stop(&self, agent: &str) {
        let r = self
            .call(
                Method::POST,
                &format!("/namespaces/{}/agents/{agent}/stop", self.ns),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    }

    async fn deployment(&self, agent: &str, rev: &str) -> Value {
        let r = self
            .call(
                Method::GET,
                &format!("/namespaces/{}/agents/{agent}/deployments/{rev}", self.ns),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.data().clone()
    }

    async fn agent_state(&self, agent: &str) -> Value {
        let r = self
            .call(
                Method::GET,
                &format!("/namespaces/{}/agents/{agent}", self.ns),
                None,
            )
            .await;
        r.data().clone()
    }

    async fn work(&self, key: &WorkKey) -> occ_core::work::WorkItem {
        let mut tx = self.app.store.begin_read().await.unwrap();
        tx.work_get(key).await.unwrap().expect("work item")
    }

    async fn audit_actions(&self) -> Vec<(String, String, Option<String>)> {
        let mut tx = self.app.store.begin_read().await.unwrap();
        tx.audit_list(&Default::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| {
                let code = e
                    .details
                    .get("reasonCode")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                (e.action, e.outcome.as_str().to_owned(), code)
            })
            .collect()
    }
}

fn agent_id(s: &str) -> AgentId {
    s.parse().unwrap()
}
fn rev_id(s: &str) -> RevisionId {
    s.parse().unwrap()
}

#[tokio::test]
async fn namespaces_become_ready_and_are_torn_down() {
    let f = Fixture::new().await;
    let created = f
        .call(Method::POST, "/namespaces", Some(json!({"name": "team-a"})))
        .await;
    let ns: NamespaceId = created.data()["id"].as_str().unwrap().parse().unwrap();
    let passes = f.drain().await;
    assert_eq!(passes.len(), 1);
    assert_eq!(passes[0].1, PassOutcome::Success);
    let mut tx = f.app.store.begin_read().await.unwrap();
    assert_eq!(
        tx.namespace_get(&ns).await.unwrap().unwrap().status,
        NamespaceStatus::Ready
    );
    drop(tx);
    assert!(
        f.compute
            .calls()
            .contains(&Call::Namespace(Verb::EnsureNamespace, ns.clone()))
    );
    let r = f
        .call(Method::DELETE, &format!("/namespaces/{ns}"), None)
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert_eq!(f.drain().await[0].1, PassOutcome::Success);
    let mut tx = f.app.store.begin_read().await.unwrap();
    assert!(
        tx.namespace_get(&ns)
            .await
            .unwrap()
            .unwrap()
            .deleted_at
            .is_some()
    );
    drop(tx);
    let actions = f.audit_actions().await;
    for action in [
        "openclaw.namespaces.lifecycle.ensure",
        "openclaw.namespaces.lifecycle.delete",
    ] {
        assert!(
            actions
                .iter()
                .any(|(a, o, _)| a == action && o == "success"),
            "{action}: {actions:?}"
        );
    }
}

#[tokio::test]
async fn a_namespace_that_cannot_be_prepared_fails() {
    let f = Fixture::new().await;
    f.compute.script(
        Verb::EnsureNamespace,
        Scripted::Fail(ComputeError::permanent(ReasonCode::KubernetesInvalid, "no")),
    );
    let created = f
        .call(Method::POST, "/namespaces", Some(json!({"name": "team-b"})))
        .await;
    let ns: NamespaceId = created.data()["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(f.drain().await[0].1, PassOutcome::Permanent);
    let mut tx = f.app.store.begin_read().await.unwrap();
    assert_eq!(
        tx.namespace_get(&ns).await.unwrap().unwrap().status,
        NamespaceStatus::Failed
    );
}

#[tokio::test]
async fn deploy_activates_and_redeploy_retires_the_predecessor() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    assert_eq!(f.deployment(&agent, &rev1).await["status"], "queued");
    let passes = f.drain().await;
    assert_eq!(
        passes,
        vec![(
            WorkKey::revision_reconcile(&rev_id(&rev1)),
            PassOutcome::Success
        )]
    );
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev1);
    let status = f.deployment(&agent, &rev1).await;
    assert_eq!(
        (status["status"].as_str(), &status["error"]),
        (Some("succeeded"), &Value::Null)
    );
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev1)));
    assert_eq!(
        f.work(&WorkKey::revision_reconcile(&rev_id(&rev1)))
            .await
            .reason_code
            .as_deref(),
        Some("REVISION_ACTIVATED")
    );

    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev2);
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev2)));
    let calls = f.compute.calls();
    let activate2 = calls
        .iter()
        .position(|c| *c == Call::Revision(Verb::Activate, agent_id(&agent), rev_id(&rev2)))
        .expect("rev2 activated");
    let retire1 = calls
        .iter()
        .position(|c| *c == Call::Revision(Verb::Retire, agent_id(&agent), rev_id(&rev1)))
        .expect("rev1 retired");
    assert!(
        activate2 < retire1,
        "the predecessor is retired after activation: {calls:?}"
    );
    let activations = f
        .audit_actions()
        .await
        .into_iter()
        .filter(|(a, _, _)| a == "openclaw.agents.lifecycle.activate")
        .count();
    assert_eq!(activations, 2);
}

#[tokio::test]
async fn stop_clears_the_pointer_and_deploy_resumes() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    f.stop(&agent).await;
    let passes = f.drain().await;
    assert_eq!(passes.len(), 1);
    assert_eq!(passes[0].1, PassOutcome::Success);
    let state = f.agent_state(&agent).await;
    assert_eq!(state["activeRevisionId"], Value::Null);
    assert_eq!(state["desiredRuntimeState"], "stopped");
    assert_eq!(f.compute.serving(&agent_id(&agent)), None);
    assert_eq!(
        f.work(&passes[0].0).await.reason_code.as_deref(),
        Some("AGENT_STOPPED")
    );
    // a second stop finds nothing running
    f.stop(&agent).await;
    let again = f.drain().await;
    assert_eq!(
        f.work(&again[0].0).await.reason_code.as_deref(),
        Some("AGENT_ALREADY_STOPPED")
    );
    // resume = deploy a new revision
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_ne!(rev1, rev2);
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev2);
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev2)));
}

#[tokio::test]
async fn a_stop_admitted_after_a_deploy_wins() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev = f.deploy(&agent).await;
    f.stop(&agent).await;
    f.drain().await;
    assert_eq!(f.compute.serving(&agent_id(&agent)), None);
    let status = f.deployment(&agent, &rev).await;
    assert_eq!(status["status"], "failed", "{status}");
    assert_eq!(status["error"]["code"], "REVISION_STOPPED");
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], Value::Null);
    assert!(!f.compute.calls().contains(&Call::Revision(
        Verb::Activate,
        agent_id(&agent),
        rev_id(&rev)
    )));
}

#[tokio::test]
async fn back_to_back_deploys_the_later_wins_and_a_stop_between_them_wins_over_the_earlier() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev2);
    let s1 = f.deployment(&agent, &rev1).await;
    assert_eq!(
        (s1["status"].as_str(), s1["error"]["code"].as_str()),
        (Some("failed"), Some("REVISION_SUPERSEDED"))
    );
    assert_eq!(f.deployment(&agent, &rev2).await["status"], "succeeded");
    assert!(!f.compute.calls().contains(&Call::Revision(
        Verb::Activate,
        agent_id(&agent),
        rev_id(&rev1)
    )));

    // deploy, stop, deploy: the earlier never runs, the later does
    let (_, b) = f.agent("b1").await;
    let first = f.deploy(&b).await;
    f.stop(&b).await;
    let last = f.deploy(&b).await;
    f.drain().await;
    assert!(!f.compute.calls().contains(&Call::Revision(
        Verb::Activate,
        agent_id(&b),
        rev_id(&first)
    )));
    assert_eq!(f.agent_state(&b).await["activeRevisionId"], last);
    assert_eq!(f.compute.serving(&agent_id(&b)), Some(rev_id(&last)));
}

#[tokio::test]
async fn secrets_and_the_harness_credential_reach_compute_only_at_run_time() {
    let f = Fixture::new().await;
    let ns = f.ns.clone();
    let secret = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": "model-key", "value": "sk-test-123456"})),
        )
        .await;
    let secret = secret.data()["id"].as_str().unwrap().to_owned();
    let cfg = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            Some(json!({"kind": "agent", "values": {},
                        "secretBindings": {"MODEL_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}}})),
        )
        .await;
    let cfg = cfg.data()["id"].as_str().unwrap().to_owned();
    let agent = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            Some(json!({"name": "s1", "configurationId": cfg,
                        "harnessAuth": {"method": "api_key", "source": {"kind": "secret", "namespaceId": ns, "id": secret}}})),
        )
        .await;
    let agent_json = agent.data().clone();
    let agent = agent_json["id"].as_str().unwrap().to_owned();
    let sp: occ_core::IamId = agent_json["servicePrincipalId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    f.app
        .grant(
            &sp,
            &[Permission::new(Action::Operate, ResourceKind::Secret)],
            &f.app.default_ns,
            Some((ResourceKind::Secret, secret.clone())),
        )
        .await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let env = f.compute.environment_of(&rev_id(&rev)).expect("activated");
    assert_eq!(
        env.get("MODEL_TOKEN").map(String::as_str),
        Some("sk-test-123456")
    );
    assert_eq!(
        env.get("HARNESS_CREDENTIAL").map(String::as_str),
        Some("sk-test-123456")
    );
    // the value is nowhere in platform state or evidence
    let mut tx = f.app.store.begin_read().await.unwrap();
    let audit = tx.audit_list(&Default::default()).await.unwrap();
    assert!(
        !serde_json::to_string(&audit.iter().map(|e| &e.details).collect::<Vec<_>>())
            .unwrap()
            .contains("sk-test")
    );
}

/// A revision admitted by an older occ, before the binding-name rule, that binds a Secret as
/// `NODE_OPTIONS` (simulated by rewriting the stored revision in a throwaway database, past its
/// immutability trigger) fails permanently with `SECRET_BINDING_NAME_REFUSED`: Compute is never
/// asked to run it, so no code in the value runs.
#[tokio::test]
async fn a_stored_revision_with_a_refused_binding_name_never_reaches_compute() {
    let f = Fixture::new().await;
    let ns = f.ns.clone();
    let secret = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": "payload", "value": "--import=data:text/javascript,process.exit(7)"})),
        )
        .await;
    let secret = secret.data()["id"].as_str().unwrap().to_owned();
    let cfg = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            Some(json!({"kind": "agent", "values": {},
                        "secretBindings": {"MODEL_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}}})),
        )
        .await;
    let cfg = cfg.data()["id"].as_str().unwrap().to_owned();
    let agent = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            Some(json!({"name": "old", "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
        )
        .await;
    let agent_json = agent.data().clone();
    let agent = agent_json["id"].as_str().unwrap().to_owned();
    let sp: occ_core::IamId = agent_json["servicePrincipalId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    f.app
        .grant(
            &sp,
            &[Permission::new(Action::Operate, ResourceKind::Secret)],
            &f.app.default_ns,
            Some((ResourceKind::Secret, secret.clone())),
        )
        .await;
    let rev = f.deploy(&agent).await;
    let mut raw = f.app.db.raw().await;
    raw.execute(&format!(
        "DROP TRIGGER agent_revisions_are_immutable; \
         UPDATE agent_revisions SET admitted_spec = \
           replace(admitted_spec, '\"MODEL_TOKEN\"', '\"NODE_OPTIONS\"') WHERE id = '{rev}'"
    ))
    .await
    .unwrap();
    f.drain().await;
    let deployment = f.deployment(&agent, &rev).await;
    assert_eq!(deployment["status"], "failed", "{deployment}");
    assert_eq!(deployment["error"]["code"], "SECRET_BINDING_NAME_REFUSED");
    assert!(f.compute.environment_of(&rev_id(&rev)).is_none());
    assert!(
        !f.compute
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Revision(Verb::Activate, _, _))),
        "{:?}",
        f.compute.calls()
    );
}

/// Redaction uses what the workload holds, not what the Secret holds now: the worker records
/// every value it hands a revision (through the Secret Driver), so output written with a value
/// stays redacted after the Secret is rotated — the reproduction showed the old value in clear
/// to anyone with `read_logs` once the current value differed — and after the Secret is deleted.
#[tokio::test]
async fn output_written_with_a_rotated_or_deleted_secret_stays_redacted() {
    let compute = Arc::new(FakeCompute::new());
    let app = TestApp::with(
        Backend::Sqlite,
        occ_testkit::app::TestAppOptions {
            runtime: Some(compute.clone()),
            ..Default::default()
        },
    )
    .await;
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings());
    let f = Fixture::of(app, compute, worker);
    f.drain().await;
    let ns = f.ns.clone();
    let old = "OLD-model-key-0123456789abcdef";
    let secret = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": "model-key", "value": old})),
        )
        .await;
    let secret = secret.data()["id"].as_str().unwrap().to_owned();
    let cfg = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            Some(json!({"kind": "agent", "values": {},
                        "secretBindings": {"MODEL_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}}})),
        )
        .await;
    let cfg = cfg.data()["id"].as_str().unwrap().to_owned();
    let agent = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            Some(json!({"name": "leaky", "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
        )
        .await;
    let agent_json = agent.data().clone();
    let agent = agent_json["id"].as_str().unwrap().to_owned();
    let sp: occ_core::IamId = agent_json["servicePrincipalId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    f.app
        .grant(
            &sp,
            &[Permission::new(Action::Operate, ResourceKind::Secret)],
            &f.app.default_ns,
            Some((ResourceKind::Secret, secret.clone())),
        )
        .await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(
        f.compute
            .environment_of(&rev_id(&rev))
            .expect("activated")
            .get("MODEL_TOKEN")
            .map(String::as_str),
        Some(old)
    );
    f.compute
        .write_output(&rev_id(&rev), &[&format!("provider refused key {old}")]);
    let logs = || async {
        let r = f
            .call(
                Method::GET,
                &format!(
                    "/namespaces/{ns}/agents/{agent}/deployments/{rev}/runtime/logs?source=gateway"
                ),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body.to_string()
    };
    assert!(!logs().await.contains(old));

    // Rotated: the running gateway still holds (and printed) the old value.
    let r = f
        .call(
            Method::PATCH,
            &format!("/namespaces/{ns}/secrets/{secret}"),
            Some(json!({"value": "NEW-model-key-9876543210fedcba"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let page = logs().await;
    assert!(!page.contains(old), "the rotated-away value leaked: {page}");
    assert!(page.contains("[REDACTED]"), "{page}");

    // Unbound and deleted: the Secret Driver no longer holds it as a Secret; still redacted.
    let r = f
        .call(
            Method::PATCH,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            Some(json!({"values": {}, "secretBindings": {}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = f
        .call(
            Method::DELETE,
            &format!("/namespaces/{ns}/secrets/{secret}"),
            None,
        )
        .await;
    if r.status.is_success() {
        let page = logs().await;
        assert!(
            !page.contains(old),
            "the deleted Secret's value leaked: {page}"
        );
    } else {
        // A Secret the active revision binds may not be deleted: then it is still held.
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    }
}

#[tokio::test]
async fn a_revoked_requester_is_refused_before_any_effect() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let (deployer, key) = f.app.deployer().await;
    let rev = f.app.deploy_as(&key, &agent).await;
    // revoke every binding of the deployer before the worker runs
    let mut raw = f.app.db.raw().await;
    raw.execute(&format!(
        "DELETE FROM iam_access_bindings WHERE subject_id = '{deployer}'"
    ))
    .await
    .unwrap();
    assert_eq!(f.drain().await[0].1, PassOutcome::Permanent);
    let status = f.deployment(&agent, &rev).await;
    assert_eq!(status["error"]["code"], "AUTHORIZATION_DENIED");
    assert!(
        f.compute
            .calls()
            .iter()
            .all(|c| !matches!(c, Call::Revision(..))),
        "no Compute call after a denial"
    );
    assert!(
        f.audit_actions()
            .await
            .iter()
            .any(|(a, o, _)| a == "openclaw.agents.deploy" && o == "denied")
    );
    // a deleted requester is reported as revoked
    let (_, agent2) = f.agent("a2").await;
    let (deployer2, key2) = f.app.deployer().await;
    let rev2 = f.app.deploy_as(&key2, &agent2).await;
    raw.execute(&format!(
        "DELETE FROM iam_identities WHERE id = '{deployer2}'"
    ))
    .await
    .unwrap();
    f.drain().await;
    assert_eq!(
        f.deployment(&agent2, &rev2).await["error"]["code"],
        "ACTOR_REVOKED"
    );
}

#[tokio::test]
async fn pending_work_waits_and_fails_at_the_convergence_deadline() {
    let mut s = settings();
    s.convergence_timeout = Duration::from_millis(1200);
    let f = Fixture::with(Backend::Sqlite, FakeCompute::new(), s).await;
    for _ in 0..20 {
        f.compute.script(Verb::Prepare, Scripted::Pending);
    }
    let (_, agent) = f.agent("a1").await;
    let rev = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev));
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Pending)]);
    let item = f.work(&key).await;
    assert_eq!(
        (item.state, item.attempt_count),
        (WorkState::Queued, 0),
        "pending refunds the attempt"
    );
    let progress = f.deployment(&agent, &rev).await;
    assert_eq!(progress["status"], "queued");
    assert_eq!(
        progress["progress"]["lastAttempt"]["code"],
        "REVISION_INCOMPLETE"
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Permanent)]);
    let status = f.deployment(&agent, &rev).await;
    assert_eq!(status["error"]["code"], "CONVERGENCE_DEADLINE_EXCEEDED");
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], Value::Null);
}

/// A failed deployment's `error.data.output` is the gateway's own output: a caller who may read
/// the revision but not the Agent's logs gets the deployment without it (and no logs-view
/// audit), while one allowed `read_logs` sees it and the read is audited like a logs view.
#[tokio::test]
async fn a_failed_deployments_output_needs_read_logs() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("noisy").await;
    f.compute.script(
        Verb::Activate,
        Scripted::Fail(
            ComputeError::permanent(ReasonCode::RuntimeStartupFailed, "the gateway exited")
                .with_output(vec!["gateway: listening failed".into()]),
        ),
    );
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let path = format!("/namespaces/{}/agents/{agent}/deployments/{rev}", f.ns);
    let reader = async |actions: &[Action]| {
        let mut permissions = vec![Permission::new(Action::Read, ResourceKind::AgentRevision)];
        permissions.extend(
            actions
                .iter()
                .map(|a| Permission::new(*a, ResourceKind::Agent)),
        );
        let (_, key) = f
            .app
            .principal_with(&permissions, Some(&f.app.default_ns), None, None)
            .await;
        Credential::Key(key)
    };
    let views = || async {
        let mut tx = f.app.store.begin_read().await.unwrap();
        tx.audit_list(&occ_store::audit::AuditFilter {
            action: Some("openclaw.agents.runtime_logs.view".into()),
            resource_id: Some(agent.clone()),
        })
        .await
        .unwrap()
    };

    let revision_only = reader(&[]).await;
    let r = f.app.call(Method::GET, &path, &revision_only, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.data()["status"], "failed");
    assert_eq!(r.data()["error"]["code"], "RUNTIME_STARTUP_FAILED");
    assert!(
        !r.body.to_string().contains("listening failed"),
        "output without read_logs: {}",
        r.body
    );
    assert!(views().await.is_empty());

    let log_reader = reader(&[Action::ReadLogs]).await;
    let r = f.app.call(Method::GET, &path, &log_reader, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.data()["error"]["data"]["output"],
        json!(["gateway: listening failed"])
    );
    let views = views().await;
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].details["source"], "deployment_output");
    assert_eq!(views[0].details["revisionId"], rev.as_str());
}

#[tokio::test]
async fn failures_retry_then_fail_and_permanent_failures_fail_at_once() {
    let mut s = settings();
    s.max_attempts = 2;
    let f = Fixture::with(Backend::Sqlite, FakeCompute::new(), s).await;
    let (_, agent) = f.agent("a1").await;
    f.compute.script(
        Verb::Prepare,
        Scripted::Fail(ComputeError::transient(
            ReasonCode::DependencyUnavailable,
            "disk busy",
        )),
    );
    let rev = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev));
    assert_eq!(f.pass().await, Some((key.clone(), PassOutcome::Retry)));
    // the backoff (≤ 1 s) passes, the second attempt succeeds
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Success)]);
    assert_eq!(f.work(&key).await.attempt_count, 2);

    f.compute.script(
        Verb::Prepare,
        Scripted::Fail(ComputeError::permanent(
            ReasonCode::RuntimeNotInstalled,
            "no runtime",
        )),
    );
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    let status = f.deployment(&agent, &rev2).await;
    assert_eq!(
        (status["status"].as_str(), status["error"]["code"].as_str()),
        (Some("failed"), Some("RUNTIME_NOT_INSTALLED"))
    );
    assert_eq!(
        f.agent_state(&agent).await["activeRevisionId"],
        rev,
        "a failed deploy leaves the active revision"
    );
}

#[tokio::test]
async fn a_lost_lease_publishes_nothing() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    f.compute
        .script(Verb::Prepare, Scripted::Delay(Duration::from_millis(1500)));
    let rev = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev));
    let claim = f
        .app
        .store
        .work_claim(&f.worker_queue())
        .await
        .unwrap()
        .unwrap();
    // another worker takes the item over while the effect runs: the next renewal fails and
    // the effect is abandoned
    let mut raw = f.app.db.raw().await;
    let stolen = key.clone();
    let thief = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        raw.execute(&format!(
            "UPDATE controller_work SET claim_token = '00000000-0000-4000-8000-000000000000' WHERE idempotency_key = '{stolen}'"
        ))
        .await
        .unwrap();
    });
    assert_eq!(f.worker.process(claim).await, PassOutcome::ClaimLost);
    thief.await.unwrap();
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], Value::Null);
    assert!(!f.compute.calls().contains(&Call::Revision(
        Verb::Activate,
        agent_id(&agent),
        rev_id(&rev)
    )));
}

#[tokio::test]
async fn a_worker_that_dies_mid_deploy_is_recovered_exactly_once() {
    let mut s = settings();
    s.lease = Duration::from_millis(600);
    let f = Fixture::with(Backend::Sqlite, FakeCompute::new(), s).await;
    let (_, agent) = f.agent("a1").await;
    f.compute
        .script(Verb::Activate, Scripted::Delay(Duration::from_secs(5)));
    let rev = f.deploy(&agent).await;
    // the first worker dies during activation
    let dying = tokio::time::timeout(Duration::from_millis(700), f.worker.run_once()).await;
    assert!(dying.is_err(), "the pass was cut off");
    assert_eq!(
        f.agent_state(&agent).await["activeRevisionId"],
        Value::Null,
        "the pointer moves only once the revision serves"
    );
    // its lease runs out; a new worker recovers the item and finishes it
    tokio::time::sleep(Duration::from_millis(700)).await;
    let second = Worker::new(f.app.controller.clone(), f.compute.clone(), settings());
    let recovered = f
        .app
        .store
        .work_recover(&f.worker_queue(), 10)
        .await
        .unwrap();
    assert_eq!(recovered.requeued.len(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut passes = Vec::new();
    while let Some((item, outcome)) = second.run_once().await.unwrap() {
        passes.push((item.key, outcome));
    }
    assert_eq!(passes.len(), 1, "{passes:?}");
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev)));
    let key = WorkKey::revision_reconcile(&rev_id(&rev));
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev);
    assert_eq!(
        f.work(&key).await.reason_code.as_deref(),
        Some("REVISION_ACTIVATED")
    );
    let activations = f
        .audit_actions()
        .await
        .into_iter()
        .filter(|(a, _, _)| a == "openclaw.agents.lifecycle.activate")
        .count();
    assert_eq!(activations, 1, "one activation recorded");
}

#[tokio::test]
async fn deleting_an_agent_removes_its_runtime_and_its_rows() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let r = f
        .call(
            Method::DELETE,
            &format!("/namespaces/{}/agents/{agent}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert_eq!(f.drain().await[0].1, PassOutcome::Success);
    let calls = f.compute.calls();
    assert!(calls.contains(&Call::Revision(
        Verb::Retire,
        agent_id(&agent),
        rev_id(&rev)
    )));
    assert!(calls.contains(&Call::DeleteAgent(agent_id(&agent))));
    let r = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/{agent}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(
        f.audit_actions()
            .await
            .iter()
            .any(|(a, o, _)| a == "openclaw.agents.lifecycle.delete" && o == "success")
    );
}

/// The staged setup row of `agent`: (completed, file names still staged).
async fn staged(f: &Fixture, agent: &str) -> Option<(bool, Option<Vec<String>>)> {
    let mut tx = f.app.store.begin_read().await.unwrap();
    let ns: NamespaceId = f.ns.parse().unwrap();
    tx.workspace_setup_get(&ns, &agent_id(agent))
        .await
        .unwrap()
        .map(|s| {
            (
                s.completed,
                s.files
                    .map(|files| files.keys().map(|n| n.as_str().to_owned()).collect()),
            )
        })
}

async fn agent_with_files(f: &Fixture, name: &str) -> String {
    let (cfg, _) = f.agent(&format!("{name}-base")).await;
    let r = f
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents", f.ns),
            Some(
                json!({"name": name, "configurationId": cfg, "harnessAuth": {"method": "runtime"},
                "initialWorkspaceFiles": {"USER.md": "# USER.md\nstaged\n"}}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.data()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_compute_without_workspace_setup_fails_the_deploy_and_keeps_the_input() {
    let f = Fixture::new().await;
    let agent = agent_with_files(&f, "w1").await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let status = f.deployment(&agent, &rev).await;
    assert_eq!(
        (status["status"].as_str(), status["error"]["code"].as_str()),
        (Some("failed"), Some("WORKSPACE_SETUP_UNSUPPORTED")),
        "{status}"
    );
    assert_eq!(f.compute.setup_seen(&rev_id(&rev)), None, "never prepared");
    assert_eq!(
        staged(&f, &agent).await,
        Some((false, Some(vec!["USER.md".to_owned()])))
    );
}

#[tokio::test]
async fn staged_setup_reaches_compute_is_erased_at_activation_and_verified_after() {
    let f = Fixture::with(
        Backend::Sqlite,
        FakeCompute::new().with_workspace_setup(),
        settings(),
    )
    .await;
    let agent = agent_with_files(&f, "w1").await;
    // A failed deploy keeps the pending input.
    f.compute.script(
        Verb::Prepare,
        Scripted::Fail(ComputeError::permanent(
            ReasonCode::WorkspaceSetupFailed,
            "USER.md already exists with other content",
        )),
    );
    let failed = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.deployment(&agent, &failed).await["status"], "failed");
    assert_eq!(
        staged(&f, &agent).await,
        Some((false, Some(vec!["USER.md".to_owned()])))
    );
    // Deployed: Compute got the files; activation completed the row and erased them.
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.deployment(&agent, &rev1).await["status"], "succeeded");
    let seen = f
        .compute
        .setup_seen(&rev_id(&rev1))
        .unwrap()
        .expect("setup");
    assert!(!seen.completed);
    assert_eq!(
        seen.files
            .as_ref()
            .map(|f| f.values().cloned().collect::<Vec<_>>()),
        Some(vec!["# USER.md\nstaged\n".to_owned()])
    );
    assert_eq!(staged(&f, &agent).await, Some((true, None)));
    // A later revision gets the completed record only (verify, never reapply).
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.deployment(&agent, &rev2).await["status"], "succeeded");
    let seen = f
        .compute
        .setup_seen(&rev_id(&rev2))
        .unwrap()
        .expect("setup");
    assert!(seen.completed && seen.files.is_none(), "{seen:?}");
    // Deleting the Agent deletes the row.
    let r = f
        .call(
            Method::DELETE,
            &format!("/namespaces/{}/agents/{agent}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    f.drain().await;
    assert_eq!(staged(&f, &agent).await, None);
}

#[tokio::test]
async fn maintenance_restarts_a_crashed_gateway_and_records_it() {
    let f = Fixture::with(
        Backend::Sqlite,
        FakeCompute::new().with_maintenance(Duration::from_millis(100)),
        settings(),
    )
    .await;
    let (_, agent) = f.agent("a1").await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    f.compute.crash(&agent_id(&agent));
    tokio::time::sleep(Duration::from_millis(250)).await;
    let passes = f.drain().await;
    assert!(
        passes
            .iter()
            .any(|(k, o)| k.as_str().contains(":maintenance:") && *o == PassOutcome::Success),
        "{passes:?}"
    );
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev)));
    let actions = f.audit_actions().await;
    assert!(
        actions
            .iter()
            .any(|(a, _, c)| a == "openclaw.agents.lifecycle.restart"
                && c.as_deref() == Some("GATEWAY_RESTARTED")),
        "{actions:?}"
    );
    // maintenance ends with a stop: the next pass is superseded and schedules nothing
    f.stop(&agent).await;
    f.drain().await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    f.drain().await;
    let mut raw = f.app.db.raw().await;
    let queued = raw
        .count("SELECT count(*) FROM controller_work WHERE state = 'queued' AND idempotency_key LIKE '%:maintenance:%'")
        .await;
    assert_eq!(queued, 0);
    let superseded = raw
        .count("SELECT count(*) FROM controller_work WHERE reason_code = 'REVISION_MAINTENANCE_SUPERSEDED'")
        .await;
    assert!(superseded >= 1);
    let mut tx = f.app.store.begin_read().await.unwrap();
    let agent_row = tx
        .agent_get(&f.app.default_ns, &agent_id(&agent))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        agent_row.desired_runtime_state,
        DesiredRuntimeState::Stopped
    );
    assert_eq!(agent_row.active_revision_id, None);
}

#[tokio::test]
async fn several_workers_on_postgresql_process_each_item_once() {
    let f = Fixture::with(Backend::Postgres, FakeCompute::new(), settings()).await;
    let mut revisions = Vec::new();
    for i in 0..12 {
        let (_, agent) = f.agent(&format!("a{i}")).await;
        revisions.push((agent.clone(), f.deploy(&agent).await));
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut handles = Vec::new();
    for _ in 0..3 {
        let worker = Arc::new(Worker::new(
            f.app.controller.clone(),
            f.compute.clone(),
            settings(),
        ));
        handles.push(tokio::spawn(worker.run(rx.clone())));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut done = 0;
        for (agent, rev) in &revisions {
            if f.deployment(agent, rev).await["status"] == "succeeded" {
                done += 1;
            }
        }
        if done == revisions.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {} converged",
            revisions.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tx.send(true).unwrap();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let calls = f.compute.calls();
    for (agent, rev) in &revisions {
        let activations = calls
            .iter()
            .filter(|c| **c == Call::Revision(Verb::Activate, agent_id(agent), rev_id(rev)))
            .count();
        assert_eq!(activations, 1, "{rev} activated once");
    }
}

impl Fixture {
    fn worker_queue(&self) -> occ_store::queue::QueueOptions {
        occ_store::queue::QueueOptions {
            lease: Duration::from_millis(600),
            max_attempts: 3,
        }
    }
}

/// The value of the sample of `family` whose labels include every `labels` pair.
fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|pair| l.contains(pair)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn worker_metrics_count_passes_and_read_gauges_from_the_database() {
    let metrics = Arc::new(occ_controller::metrics::Metrics::new(
        occ_controller::metrics::Service::Worker,
    ));
    let app = TestApp::on(Backend::Sqlite).await;
    let compute = Arc::new(FakeCompute::new());
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings())
        .with_metrics(metrics.clone());
    let f = Fixture::of(app, compute, worker);
    f.drain().await;
    let (_, running) = f.agent("running").await;
    f.deploy(&running).await;
    let (_, _draft) = f.agent("draft").await;
    let (_, stopped) = f.agent("stopped").await;
    f.deploy(&stopped).await;
    f.drain().await;
    f.stop(&stopped).await;
    f.drain().await;
    let (_, pending) = f.agent("pending").await;
    f.deploy(&pending).await; // not processed: deploying, and one pending work item

    let text = metrics.render(Some(&f.app.store)).await.unwrap();
    let agents = |state: &str| {
        sample(
            &text,
            "occ_agents",
            &[
                &format!("lifecycle_state=\"{state}\""),
                "service=\"worker\"",
            ],
        )
    };
    assert_eq!(agents("running"), Some(1.0), "{text}");
    assert_eq!(agents("draft"), Some(1.0), "{text}");
    assert_eq!(agents("stopped"), Some(1.0), "{text}");
    assert_eq!(agents("deploying"), Some(1.0), "{text}");
    assert_eq!(agents("failed"), Some(0.0), "{text}");
    assert!(
        text.contains("occ_work_pending{service=\"worker\"} 1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "occ_reconciliation_attempts_total",
            &["work_kind=\"agent_revision\"", "outcome=\"success\""]
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "occ_reconciliation_attempts_total",
            &["work_kind=\"agent_stop\"", "outcome=\"success\""]
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        text.contains("occ_agent_operation_duration_seconds_count{"),
        "{text}"
    );
}

/// With the Kubernetes Configuration Driver, the worker provisions each Namespace's tenant
/// namespace (through the real hook and kube client against the fake API server) before the
/// Namespace is ready, so Configurations can be stored right away; deletion removes it and
/// waits until it is gone.
#[tokio::test]
async fn tenant_namespaces_follow_the_namespace_lifecycle() {
    use occ_drivers::configuration::{ConfigurationDriver, KubernetesConfigurationDriver};
    use occ_drivers::kubernetes::{TenantAccess, TenantNamespaces, tenant_namespace_name};
    use occ_testkit::app::TestAppOptions;
    use occ_testkit::kube::FakeKube;

    let fake = FakeKube::start().await;
    let kube = fake.occ_client();
    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            configurations: Some(ConfigurationDriver::Kubernetes(
                KubernetesConfigurationDriver::new(kube.clone()),
            )),
            ..Default::default()
        },
    )
    .await;
    let compute = Arc::new(FakeCompute::new());
    let hook = Arc::new(TenantNamespaces::new(
        kube,
        TenantAccess {
            api: "occ-system/occ-api".parse().unwrap(),
            worker: None,
            configurations: true,
            secrets: false,
            compute: false,
        },
    ));
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings())
        .with_namespace_hooks(vec![hook]);
    let f = Fixture::of(app, compute, worker);
    let (app, compute) = (&f.app, &f.compute);
    let drain = || f.drain();
    drain().await;
    let admin = app.admin();
    let created = app
        .call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-k"})),
        )
        .await;
    let ns: NamespaceId = created.data()["id"].as_str().unwrap().parse().unwrap();
    let tenant = tenant_namespace_name(&ns);
    // Before the tenant namespace exists, storing a Configuration is unavailable (503).
    let base = format!("/namespaces/{ns}/configurations");
    let early = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"kind": "agent", "values": {}})),
        )
        .await;
    assert_eq!(
        early.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        early.body
    );
    // The API server fails every attempt of the first pass: the pass is retried after its
    // backoff and the Namespace becomes ready.
    fake.fail_next(3, 503, Some("create"), Some("namespaces"));
    // Pass by pass up to the retry (a drain could run the retry too once its backoff is over).
    let mut passes = Vec::new();
    while let Some(pass) = f.pass().await {
        let retry = pass.1 == PassOutcome::Retry;
        passes.push(pass);
        if retry {
            break;
        }
    }
    assert_eq!(
        passes.last().map(|p| &p.1),
        Some(&PassOutcome::Retry),
        "{passes:?}"
    );
    let namespace = async || {
        let mut tx = app.store.begin_read().await.unwrap();
        tx.namespace_get(&ns).await.unwrap().unwrap()
    };
    // Runs the worker (retries come due after their backoff) until `done`.
    let until = async |what: &str, done: &dyn Fn(&occ_core::resource::Namespace) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            drain().await;
            if done(&namespace().await) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    until("the Namespace never became ready", &|n| {
        n.status == NamespaceStatus::Ready
    })
    .await;
    assert!(fake.object("namespaces", "", &tenant).is_some());
    assert!(
        fake.object("rolebindings", &tenant, "occ-configurations")
            .is_some()
    );
    let cfg = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"kind": "agent", "values": {}})),
        )
        .await;
    assert_eq!(cfg.status, StatusCode::CREATED, "{}", cfg.body);
    let cfg_id = cfg.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.call(Method::DELETE, &format!("{base}/{cfg_id}"), &admin, None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    // Deletion waits until the tenant namespace is observed gone.
    fake.hold_namespace_deletion(true);
    let r = app
        .call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    drain().await;
    assert!(namespace().await.deleted_at.is_none(), "still deleting");
    assert!(
        !compute
            .calls()
            .contains(&Call::Namespace(Verb::DeleteNamespace, ns.clone())),
        "Compute removes its part only after the hook is done"
    );
    fake.finish_namespace_deletion(&tenant);
    // The pending pass is retried after its backoff.
    until("the Namespace was never tombstoned", &|n| {
        n.deleted_at.is_some()
    })
    .await;
    assert!(
        compute
            .calls()
            .contains(&Call::Namespace(Verb::DeleteNamespace, ns.clone()))
    );
}

/// Adopting an existing namespace is an Installation administrator's decision, and the worker
/// checks it again before any effect: a requester that lost `installation:administer` after
/// the API accepted the Namespace gets it failed with `AUTHORIZATION_DENIED` and Compute is
/// never asked; one that still has it gets it prepared.
#[tokio::test]
async fn adopting_an_existing_namespace_is_reauthorized_as_administration() {
    use occ_testkit::app::TestAppOptions;

    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            compute: Some(occ_drivers::compute::kubernetes::selection(false)),
            ..Default::default()
        },
    )
    .await;
    let compute = Arc::new(FakeCompute::new());
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings());
    let f = Fixture::of(app, compute, worker);
    let (app, compute) = (&f.app, &f.compute);
    let drain = || f.drain();
    drain().await;
    let (requester, key) = app
        .principal_with(
            &[Permission::new(Action::Create, ResourceKind::Namespace)],
            None,
            None,
            None,
        )
        .await;
    let administer = app
        .grant_installation(
            &requester,
            &[Permission::new(
                Action::Administer,
                ResourceKind::Installation,
            )],
        )
        .await;
    let create = async |name: &str| {
        let r = app
            .call(
                Method::POST,
                "/namespaces",
                &Credential::Key(key.clone()),
                Some(json!({"name": name, "existingNamespace": format!("{name}-k8s")})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.data()["id"]
            .as_str()
            .unwrap()
            .parse::<NamespaceId>()
            .unwrap()
    };
    let kept = create("kept").await;
    assert_eq!(
        drain().await,
        [(WorkKey::namespace_ready(&kept), PassOutcome::Success)]
    );
    let revoked = create("revoked").await;
    let mut raw = app.db.raw().await;
    raw.execute(&format!(
        "DELETE FROM iam_access_bindings WHERE id = '{administer}'"
    ))
    .await
    .unwrap();
    assert_eq!(
        drain().await,
        [(WorkKey::namespace_ready(&revoked), PassOutcome::Permanent)]
    );
    let mut tx = app.store.begin_read().await.unwrap();
    assert_eq!(
        tx.namespace_get(&revoked).await.unwrap().unwrap().status,
        NamespaceStatus::Failed
    );
    assert_eq!(
        tx.namespace_get(&kept).await.unwrap().unwrap().status,
        NamespaceStatus::Ready
    );
    drop(tx);
    assert_eq!(
        compute.calls(),
        [Call::Namespace(Verb::EnsureNamespace, kept)],
        "Compute never saw the refused adoption"
    );
    let item = {
        let mut tx = app.store.begin_read().await.unwrap();
        tx.work_get(&WorkKey::namespace_ready(&revoked))
            .await
            .unwrap()
            .expect("work")
    };
    assert_eq!(item.state, WorkState::FailedPermanent);
}
