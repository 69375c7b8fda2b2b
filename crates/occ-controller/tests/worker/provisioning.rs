//! Agent provisioning through the worker (`provisionAgent` → `agent_provisioning` work), on both
//! backends: the job creates the Configuration, the Agent and its identity's Secret grant, then
//! admits the first revision, whose deployment the worker then activates; a step that fails
//! names its phase and reason and keeps what earlier steps created; a retry resumes there; a run
//! that ends after its creates committed but before it recorded them (a crash) is resumed by the
//! next run without a second Agent or revision.

use http::{Method, StatusCode};
use occ_core::provisioning::{ProvisioningPhase, ProvisioningStatus};
use occ_core::work::NewWork;
use occ_core::{IamId, ProvisioningId};
use occ_store::Backend;
use occ_testkit::compute::FakeCompute;
use serde_json::{Value, json};

use super::{Fixture, settings};

async fn fixture(backend: Backend) -> Fixture {
    Fixture::with(backend, FakeCompute::new(), settings()).await
}

fn body(request: &str, name: &str, secret: Option<&str>, ns: &str) -> Value {
    let mut configuration = json!({"kind": "agent", "values": {"gateway": {"mode": "local"}}});
    if let Some(secret) = secret {
        configuration["secretBindings"] = json!({
            "MODEL_KEY": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}
        });
    }
    json!({
        "requestId": request,
        "name": name,
        "configuration": configuration,
        "harnessAuth": {"method": "runtime"},
    })
}

fn request_id() -> String {
    format!("req_{}", uuid::Uuid::new_v4())
}

async fn provision(f: &Fixture, body: Value) -> Value {
    let r = f
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/provision", f.ns),
            Some(body),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    r.data()["provisioning"].clone()
}

async fn job(f: &Fixture, work: &str) -> Value {
    let r = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/provision/{work}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.data().clone()
}

async fn secret(f: &Fixture, name: &str) -> String {
    f.call(
        Method::POST,
        &format!("/namespaces/{}/secrets", f.ns),
        Some(json!({"name": name, "value": "sk-provisioned"})),
    )
    .await
    .created_id()
}

async fn agents_named(f: &Fixture, name: &str) -> Vec<Value> {
    let r = f
        .call(Method::GET, &format!("/namespaces/{}/agents", f.ns), None)
        .await;
    r.data()
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == name)
        .cloned()
        .collect()
}

async fn revisions(f: &Fixture, agent: &str) -> Vec<Value> {
    let r = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/{agent}/revisions", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.data().as_array().unwrap().clone()
}

async fn succeeds_end_to_end(backend: Backend) {
    let f = fixture(backend).await;
    let sec = secret(&f, "model-key").await;
    let request = request_id();
    let admitted = provision(&f, body(&request, "helper", Some(&sec), &f.ns)).await;
    assert_eq!(admitted["status"], "queued");
    assert_eq!(admitted["phase"], "admitted");
    assert_eq!(admitted["attemptCount"], 0);
    assert!(admitted.get("agentId").is_none(), "{admitted}");
    let work = admitted["workId"].as_str().unwrap().to_owned();
    assert_eq!(
        admitted["url"],
        format!("/namespaces/{}/agents/provision/{work}", f.ns)
    );
    // Resending the same request returns the same job and queues nothing new.
    let again = provision(&f, body(&request, "helper", Some(&sec), &f.ns)).await;
    assert_eq!(again["workId"], work.as_str());
    // The same requestId with another request is a conflict.
    let r = f
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/provision", f.ns),
            Some(body(&request, "other", Some(&sec), &f.ns)),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT")
    );

    let passes = f.drain().await;
    assert!(
        passes
            .iter()
            .any(|(k, _)| k.as_str().starts_with("agent_provisioning:")),
        "{passes:?}"
    );
    let done = job(&f, &work).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["phase"], "handoff");
    assert_eq!(done["attemptCount"], 1);
    assert!(done.get("error").is_none());
    let agent = done["agentId"].as_str().unwrap();
    let revision = done["revisionId"].as_str().unwrap();
    // The handoff's deployment ran too: the Agent serves the revision the job admitted.
    let a = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/{agent}", f.ns),
            None,
        )
        .await;
    assert_eq!(a.data()["name"], "helper");
    assert_eq!(a.data()["configurationId"], done["configurationId"]);
    assert_eq!(a.data()["activeRevisionId"], revision, "{}", a.body);
    // The Agent's own identity may use the Secret it consumes, through an exact binding.
    let principal = IamId::agent_service_principal(&agent.parse().unwrap());
    let bindings = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/iam/access-bindings", f.ns),
            None,
        )
        .await;
    let granted: Vec<&Value> = bindings
        .data()
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["subjectId"] == principal.as_str())
        .collect();
    assert_eq!(granted.len(), 1, "{}", bindings.body);
    assert_eq!(granted[0]["resourceKind"], "secret");
    assert_eq!(granted[0]["resourceId"], sec.as_str());
    // Every step is attributable to the requester.
    let mut tx = f.app.store.begin_read().await.unwrap();
    let actions: Vec<String> = tx
        .audit_list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.actor_id == f.app.admin_principal.as_str())
        .map(|e| e.action)
        .collect();
    for action in [
        "openclaw.agents.provision",
        "openclaw.configurations.create",
        "openclaw.agents.create",
        "openclaw.iam.access_bindings.create",
        "openclaw.agents.deploy",
    ] {
        assert!(actions.iter().any(|a| a == action), "{action}: {actions:?}");
    }
}

#[tokio::test]
async fn a_job_creates_grants_and_deploys_on_sqlite() {
    succeeds_end_to_end(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_job_creates_grants_and_deploys_on_postgres() {
    succeeds_end_to_end(Backend::Postgres).await;
}

async fn fails_at_its_step_and_resumes(backend: Backend) {
    let f = fixture(backend).await;
    let admitted = provision(&f, body(&request_id(), "taken-later", None, &f.ns)).await;
    let work = admitted["workId"].as_str().unwrap().to_owned();
    // Another Agent takes the name after admission: the job's Agent step conflicts.
    let (_, squatter) = f.agent("taken-later").await;
    f.drain().await;
    let failed = job(&f, &work).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["phase"], "transport");
    assert_eq!(failed["error"]["code"], "RESOURCE_CONFLICT");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("name"),
        "{failed}"
    );
    let configuration = failed["configurationId"].as_str().unwrap().to_owned();
    assert!(failed.get("agentId").is_none());
    // A failed job is retried from its step; a job that is not failed cannot be.
    let r = f
        .call(
            Method::DELETE,
            &format!("/namespaces/{}/agents/{squatter}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    f.drain().await;
    let retried = f
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/provision/{work}/retry", f.ns),
            None,
        )
        .await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.body);
    assert_eq!(retried.data()["status"], "queued");
    assert!(retried.data().get("error").is_none());
    let twice = f
        .call(
            Method::POST,
            &format!("/namespaces/{}/agents/provision/{work}/retry", f.ns),
            None,
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.body);
    f.drain().await;
    let done = job(&f, &work).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["attemptCount"], 2);
    // The Configuration of the first run was reused, not made again.
    assert_eq!(done["configurationId"], configuration.as_str());
    let configurations = f
        .call(
            Method::GET,
            &format!("/namespaces/{}/configurations/{configuration}", f.ns),
            None,
        )
        .await;
    assert_eq!(configurations.status, StatusCode::OK);
    assert_eq!(agents_named(&f, "taken-later").await.len(), 1);
}

#[tokio::test]
async fn a_failed_step_keeps_what_was_made_and_a_retry_resumes_there_on_sqlite() {
    fails_at_its_step_and_resumes(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_failed_step_keeps_what_was_made_and_a_retry_resumes_there_on_postgres() {
    fails_at_its_step_and_resumes(Backend::Postgres).await;
}

async fn a_run_that_never_recorded_its_creates_converges(backend: Backend) {
    let f = fixture(backend).await;
    let admitted = provision(&f, body(&request_id(), "crashy", None, &f.ns)).await;
    let work: ProvisioningId = admitted["workId"].as_str().unwrap().parse().unwrap();
    f.drain().await;
    let done = job(&f, work.as_str()).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let agent = done["agentId"].as_str().unwrap().to_owned();
    // Rewind the job to what a worker that crashed right after the deploy committed would have
    // left: Configuration recorded, Agent and revision made but not recorded, still running;
    // and queue its next run as the lease recovery would.
    let ns = f.app.default_ns.clone();
    let mut tx = occ_testkit::setup::begin_setup(&f.app.store).await;
    let mut stored = tx.provisioning_get(&ns, &work).await.unwrap().unwrap();
    stored.status = ProvisioningStatus::Running;
    stored.phase = ProvisioningPhase::Transport;
    stored.agent_id = None;
    stored.revision_id = None;
    stored.run += 1;
    tx.provisioning_record(&stored).await.unwrap();
    tx.work_enqueue(&NewWork::agent_provisioning(
        &ns,
        &work,
        &stored.actor_id,
        stored.run,
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
    f.drain().await;
    let again = job(&f, work.as_str()).await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["agentId"], agent.as_str());
    assert_eq!(again["revisionId"], done["revisionId"]);
    assert_eq!(agents_named(&f, "crashy").await.len(), 1, "no second Agent");
    assert_eq!(revisions(&f, &agent).await.len(), 1, "no second revision");
}

#[tokio::test]
async fn a_run_that_crashed_after_its_creates_converges_on_sqlite() {
    a_run_that_never_recorded_its_creates_converges(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_run_that_crashed_after_its_creates_converges_on_postgres() {
    a_run_that_never_recorded_its_creates_converges(Backend::Postgres).await;
}

#[tokio::test]
async fn a_deleted_secret_fails_the_configuration_step_with_not_found() {
    let f = fixture(Backend::Sqlite).await;
    let sec = secret(&f, "short-lived").await;
    let admitted = provision(&f, body(&request_id(), "orphan", Some(&sec), &f.ns)).await;
    let work = admitted["workId"].as_str().unwrap().to_owned();
    let r = f
        .call(
            Method::DELETE,
            &format!("/namespaces/{}/secrets/{sec}", f.ns),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    f.drain().await;
    let failed = job(&f, &work).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["phase"], "configuration");
    assert_eq!(failed["error"]["code"], "NOT_FOUND");
    assert!(failed.get("configurationId").is_none());
    assert!(agents_named(&f, "orphan").await.is_empty(), "no Agent");
}
