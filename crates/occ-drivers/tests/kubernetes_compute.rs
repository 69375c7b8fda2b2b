//! The Kubernetes Compute Driver through the real `kube` client against occ-testkit's fake API
//! server, with its test kubelet running a real OpenClaw gateway for each ready Deployment and
//! the fake serving `pods/portforward`: the Compute conformance suite (unchanged), the exact
//! objects the Driver sends (golden files under `tests/golden/`), workspace setup through the
//! init container, refusal of foreign objects, and cleanup. The kubelet rewrites container paths
//! and ports to the host (see `occ-testkit/src/kubelet.rs`); everything else is the Driver's own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::{HarnessAuth, WorkspaceFileName, WorkspaceFiles, WorkspaceSetup};
use occ_core::{AgentId, IamId, NamespaceId, RevisionId};
use occ_drivers::compute::kubernetes::{KubernetesCompute, KubernetesComputeSettings};
use occ_drivers::compute::{
    AgentTarget, Compute, Convergence, FailureClass, NamespaceTarget, Readiness, RevisionContext,
    SecretText,
};
use occ_drivers::kubernetes::{KubeClient, TenantNamespaces, tenant_namespace_name};
use occ_testkit::compute_conformance::{self as conformance, document, revision};
use occ_testkit::kube::FakeKube;
use occ_testkit::kubelet::FakeKubelet;
use serde_json::{Value, json};

fn driver(fake: &FakeKube) -> KubernetesCompute {
    KubernetesCompute::new(
        fake.occ_client(),
        KubernetesComputeSettings {
            image: "registry.example/occ-gateway@sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
            runtime_dir: "/opt/occ/runtime".into(),
            occ_binary: "/usr/local/bin/occ".into(),
            state_storage: "10Gi".into(),
            storage_class: None,
        runtime_class: None,
            activation_timeout: Duration::from_secs(360),
            stop_timeout: Duration::from_secs(60),
            dedicated: None,
        },
        TenantNamespaces::namespaces_only(fake.occ_client()),
    )
}

fn golden(name: &str, actual: &Value) {
    occ_testkit::golden::assert_golden(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        name,
        actual,
    );
}

fn fixed_targets() -> (NamespaceTarget, AgentTarget) {
    let ns: NamespaceId = "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50"
        .parse()
        .expect("ns");
    let agent_id: AgentId = "agt_3c9d2e1f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
        .parse()
        .expect("agent");
    (
        NamespaceTarget {
            id: ns.clone(),
            name: "team-a".into(),
            existing_namespace: None,
        },
        AgentTarget {
            namespace_id: ns,
            service_principal_id: IamId::agent_service_principal(&agent_id),
            agent_id,
        },
    )
}

fn setup(agent: &AgentTarget) -> WorkspaceSetup {
    let mut files = WorkspaceFiles::new();
    files.insert(
        WorkspaceFileName::User,
        "# USER.md\n\nStaged for Kubernetes.\n".into(),
    );
    WorkspaceSetup {
        id: "wss_1".into(),
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.agent_id.clone(),
        defaults_id: None,
        files: Some(files),
        completed: false,
    }
}

/// The conformance suite, unchanged: ensure → prepare → activate → redeploy → retire → stop →
/// resume → delete, with real gateways (one at a time: Recreate) reached through portforward,
/// in an operator's namespace adopted through `existingNamespace`: every object of the Agent
/// lands there, and deleting the occ Namespace gives the namespace back with the operator's own
/// objects and without anything of occ's. Then a revision whose gateway exits during startup, in
/// a namespace occ makes and deletes: the crash is seen in the Pod status (not at the activation
/// deadline) and the previous template is rolled out again.
#[tokio::test]
#[expect(
    clippy::print_stderr,
    reason = "the rollback figures docs/ARCHITECTURE.md cites"
)]
async fn conformance_suite_on_kubernetes() {
    let fake = FakeKube::start().await;
    let _kubelet = FakeKubelet::start(&fake);
    let compute = driver(&fake);
    let existing = "platform-agents";
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": existing,
            "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            "annotations": {"openclaw.dev/namespace-lifecycle": "external"}}}),
    );
    let operator_config = fake.seed(
        "configmaps",
        existing,
        json!({"metadata": {"name": "operator-settings"}, "data": {"k": "v"}}),
    );
    let (mut ns, agent) = conformance::targets();
    ns.existing_namespace = Some(existing.into());
    conformance::lifecycle_in(&compute, (ns.clone(), agent)).await;
    assert!(
        fake.requests()
            .iter()
            .filter(|r| r.verb == "create" && r.resource != "namespaces")
            .all(|r| r.namespace == existing),
        "every object in the adopted namespace"
    );
    assert!(
        fake.names("deployments", &tenant_namespace_name(&ns.id))
            .is_empty()
    );
    let namespace = fake.object("namespaces", "", existing).expect("kept");
    assert_eq!(
        namespace["metadata"]["labels"],
        json!({"pod-security.kubernetes.io/enforce": "restricted"})
    );
    assert_eq!(
        fake.object("configmaps", existing, "operator-settings"),
        Some(operator_config)
    );
    for resource in [
        "configmaps",
        "secrets",
        "deployments",
        "persistentvolumeclaims",
        "serviceaccounts",
        "networkpolicies",
        "rolebindings",
    ] {
        for name in fake.names(resource, existing) {
            let object = fake.object(resource, existing, &name).expect("object");
            assert_ne!(
                object["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                json!("occ"),
                "{resource}/{name} left behind"
            );
        }
    }
    // Refusals, and the rollback in a namespace occ manages (created, and deleted after).
    conformance::refusals(&compute).await;
    let figures = conformance::rollback(&compute).await;
    eprintln!("Kubernetes rollback: {figures:?}");
}

#[tokio::test]
async fn every_object_is_the_reviewed_one_and_foreign_objects_are_refused() {
    let fake = FakeKube::start().await;
    let compute = driver(&fake);
    let (ns, agent) = fixed_targets();
    assert_eq!(
        compute.ensure_namespace(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let tenant = tenant_namespace_name(&ns.id);
    let mut rev = revision(&compute, &agent, 1, document("gpt-5"));
    rev.revision_id = "rev_7d1e2f3a-4b5c-4d6e-8f70-a1b2c3d4e5f6"
        .parse::<RevisionId>()
        .expect("rev");
    rev.spec.harness_auth = Some(HarnessAuth::ApiKey {
        source: serde_json::from_value(json!({"kind": "secret", "namespaceId": ns.id, "id": "sec_9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"})).expect("ref"),
    });
    let ctx = RevisionContext {
        environment: BTreeMap::from([(
            "SLACK_TOKEN".to_owned(),
            SecretText::new("xoxb-canary".into()),
        )]),
        harness_credential: Some(SecretText::new("sk-canary".into())),
        workspace_setup: Some(setup(&agent)),
    };
    fake.clear_requests();
    assert_eq!(
        compute.prepare_revision(&rev, &ctx).await.expect("prepare"),
        Readiness::Ready
    );
    let mut sent: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .map(|r| {
            let mut body = r.body.expect("body");
            // Random or secret parts are shown as placeholders.
            if let Some(data) = body.get_mut("stringData").and_then(Value::as_object_mut) {
                for v in data.values_mut() {
                    *v = json!("<redacted>");
                }
            }
            json!({"resource": r.resource, "namespace": r.namespace, "body": body})
        })
        .collect();
    sent.sort_by_key(|v| v.to_string());
    golden("compute-prepare.json", &Value::Array(sent));
    let deployment =
        serde_json::to_value(compute.deployment(&tenant, &rev, true, true)).expect("json");
    golden("compute-deployment.json", &deployment);
    for r in fake.requests() {
        let text = format!("{:?}", r.body);
        assert!(!r.query.contains("canary"), "{r:?}");
        if r.resource != "secrets" {
            assert!(!text.contains("canary"), "values only in Secrets: {r:?}");
        }
    }
    // Idempotent: a second prepare creates and changes nothing.
    fake.clear_requests();
    compute
        .prepare_revision(&rev, &ctx)
        .await
        .expect("prepare again");
    assert!(
        fake.requests()
            .iter()
            .all(|r| matches!(r.verb.as_str(), "get" | "list")),
        "{:?}",
        fake.requests()
    );

    // A foreign object at one of the Agent's names: refused, untouched.
    let (_, other) = conformance::targets();
    let other_agent = AgentTarget {
        namespace_id: ns.id.clone(),
        ..other
    };
    let rev_b = revision(&compute, &other_agent, 1, document("gpt-5"));
    let claim = format!(
        "gw-state-{}",
        occ_drivers::kubernetes::short_hash(other_agent.agent_id.as_str(), 12)
    );
    let seeded = fake.seed(
        "persistentvolumeclaims",
        &tenant,
        json!({"metadata": {"name": claim, "labels": {"app": "someone-else"}}}),
    );
    let err = compute
        .prepare_revision(&rev_b, &RevisionContext::default())
        .await
        .expect_err("foreign claim");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::OwnershipConflict)
    );
    assert_eq!(
        fake.object("persistentvolumeclaims", &tenant, &claim),
        Some(seeded)
    );
    assert!(
        compute.delete_agent(&other_agent).await.is_err(),
        "never deleted"
    );
    assert!(
        fake.object("persistentvolumeclaims", &tenant, &claim)
            .is_some()
    );

    // Retire removes the revision's environment Secret; delete removes everything of the Agent.
    compute.retire_revision(&rev).await.expect("retire");
    assert!(
        !fake
            .names("secrets", &tenant)
            .iter()
            .any(|n| n.contains("-env-")),
        "{:?}",
        fake.names("secrets", &tenant)
    );
    compute.delete_agent(&agent).await.expect("delete");
    compute.delete_agent(&agent).await.expect("delete again");
    // Nothing of the deleted Agent remains (the other Agent's partial objects are its own).
    let mine = occ_drivers::kubernetes::short_hash(agent.agent_id.as_str(), 12);
    for resource in [
        "deployments",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "networkpolicies",
        "persistentvolumeclaims",
    ] {
        let names = fake.names(resource, &tenant);
        assert!(
            !names.iter().any(|n| n.contains(&mine)),
            "{resource}: {names:?}"
        );
    }
    assert_eq!(fake.names("persistentvolumeclaims", &tenant), vec![claim]);
}

/// Initial workspace files reach the workspace through the init container before the gateway
/// starts; a later revision's template carries no setup once it completed; a session through
/// the port-forward survives being idle longer than the API client's call deadline.
#[tokio::test]
async fn staged_workspace_files_are_applied_before_the_gateway_starts() {
    let fake = FakeKube::start().await;
    let _kubelet = FakeKubelet::start(&fake);
    let compute = driver(&fake);
    let (ns, agent) = conformance::targets();
    compute.ensure_namespace(&ns).await.expect("ensure");
    let staged = setup(&agent);
    let ctx = RevisionContext {
        workspace_setup: Some(staged.clone()),
        ..RevisionContext::default()
    };
    let rev = revision(&compute, &agent, 1, document("gpt-5"));
    compute
        .activate_revision(&rev, &ctx)
        .await
        .expect("activate with setup");
    let mut session = conformance::connect(&compute, &agent)
        .await
        .expect("hello-ok");
    let file = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .expect("read USER.md")
        .expect("exists");
    assert_eq!(file.content, "# USER.md\n\nStaged for Kubernetes.\n");
    // The same session, idle for longer than an API call's 10 s deadline, still answers: the
    // forward's stream has no read timeout (a pooled session, a long model turn).
    tokio::time::sleep(Duration::from_secs(12)).await;
    session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .expect("the forwarded session survives 12 s idle")
        .expect("exists");
    session.close().await;
    // Served: the setup Secret keeps only the identity, no file text.
    let tenant = tenant_namespace_name(&ns.id);
    let setup_name = format!(
        "gw-setup-{}",
        occ_drivers::kubernetes::short_hash(agent.agent_id.as_str(), 12)
    );
    let stored = fake
        .object("secrets", &tenant, &setup_name)
        .expect("setup secret");
    let encoded = stored["data"]["setup.json"].as_str().expect("data");
    let decoded = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
            .expect("base64"),
    )
    .expect("utf-8");
    assert!(decoded.contains("\"completed\":true"), "{decoded}");
    assert!(!decoded.contains("Staged for Kubernetes"), "{decoded}");
    compute.stop_revision(&rev).await.expect("stop");
    compute.delete_agent(&agent).await.expect("delete");
    compute
        .delete_namespace(&ns)
        .await
        .expect("delete namespace");
}

/// Opt-in: the conformance suite against a real cluster and a real gateway image. Run with
/// `OCC_TEST_KUBECONFIG=/abs/kubeconfig OCC_TEST_KUBE_CONTEXT=ctx OCC_TEST_GATEWAY_IMAGE=image
/// cargo test -p occ-drivers --test kubernetes_compute -- --ignored` (the image must hold occ and
/// the runtime as `deploy/Dockerfile` builds it; the cluster needs a default storage class).
#[tokio::test]
#[ignore = "needs a real cluster (OCC_TEST_KUBECONFIG, OCC_TEST_KUBE_CONTEXT, OCC_TEST_GATEWAY_IMAGE)"]
#[expect(
    clippy::disallowed_methods,
    reason = "an opt-in run configured by the operator's variables"
)]
async fn conformance_suite_on_a_real_cluster() {
    let path = std::env::var_os("OCC_TEST_KUBECONFIG").expect("OCC_TEST_KUBECONFIG is required");
    let context =
        std::env::var("OCC_TEST_KUBE_CONTEXT").expect("OCC_TEST_KUBE_CONTEXT is required");
    let image =
        std::env::var("OCC_TEST_GATEWAY_IMAGE").expect("OCC_TEST_GATEWAY_IMAGE is required");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = KubeClient::connect(&occ_drivers::kubernetes::KubernetesAuth::Kubeconfig {
        path: path.into(),
        context,
    })
    .await
    .expect("kubeconfig");
    let compute = KubernetesCompute::new(
        kube.clone(),
        KubernetesComputeSettings {
            image,
            runtime_dir: "/opt/occ/runtime".into(),
            occ_binary: "/usr/local/bin/occ".into(),
            state_storage: "1Gi".into(),
            storage_class: None,
            runtime_class: None,
            activation_timeout: Duration::from_secs(600),
            stop_timeout: Duration::from_secs(120),
            dedicated: None,
        },
        TenantNamespaces::namespaces_only(kube),
    );
    conformance::lifecycle(&compute).await;
    conformance::refusals(&compute).await;
}

/// A gateway Pod the cluster refuses to create (here an exceeded quota, as the Deployment
/// controller reports it in the `ReplicaFailure` condition) fails the activation at once with
/// `GATEWAY_POD_REFUSED` and the cluster's reason, instead of waiting out the activation timeout.
#[tokio::test]
async fn a_refused_gateway_pod_fails_the_activation_with_the_reason() {
    let fake = std::sync::Arc::new(FakeKube::start().await);
    let compute = driver(&fake);
    let (ns, agent) = conformance::targets();
    assert_eq!(
        compute.ensure_namespace(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let tenant = tenant_namespace_name(&ns.id);
    let rev = revision(&compute, &agent, 1, document("gpt-5"));
    let ctx = RevisionContext::default();
    compute.prepare_revision(&rev, &ctx).await.expect("prepare");
    let refuse = {
        let fake = fake.clone();
        let tenant = tenant.clone();
        tokio::spawn(async move {
            loop {
                if let Some(name) = fake.names("deployments", &tenant).first() {
                    fake.mutate("deployments", &tenant, name, |d| {
                        d["status"] = json!({"conditions": [{
                            "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                            "message": "pods \"gw-1\" is forbidden: exceeded quota: occ-quota, requested: pods=1, used: pods=4, limited: pods=4"}]});
                    });
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let err = compute
        .activate_revision(&rev, &ctx)
        .await
        .expect_err("refused");
    refuse.await.expect("refuse task");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Transient, ReasonCode::GatewayPodRefused)
    );
    assert!(err.message.contains("exceeded quota: occ-quota"), "{err:?}");
}

/// The runtime report: the revision's Pods only (not another revision's), their container
/// statuses, and each Pod's own Events (listed by `involvedObject.uid`), with the container
/// taken from the Event's field path. Redaction is the caller's (the controller's).
#[tokio::test]
async fn the_runtime_report_lists_the_revisions_pods_and_their_own_events() {
    let fake = FakeKube::start().await;
    let compute = driver(&fake);
    let (ns, agent) = conformance::targets();
    assert_eq!(
        compute.ensure_namespace(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let tenant = tenant_namespace_name(&ns.id);
    let rev = revision(&compute, &agent, 1, document("gpt-5"));
    let older = revision(&compute, &agent, 2, document("gpt-5"));
    assert!(
        compute
            .runtime_report(&rev)
            .await
            .expect("report")
            .pods
            .is_empty(),
        "nothing runs yet"
    );
    let pod = |name: &str, uid: &str, rev: &RevisionId| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "uid": uid,
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"openclaw.dev/agent": agent.agent_id.as_str()},
                "annotations": {"openclaw.dev/revision-id": rev.as_str()},
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{
                    "name": "gateway", "ready": false, "restartCount": 3,
                    "image": "i", "imageID": "i",
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {
                        "exitCode": 78, "reason": "Error",
                        "finishedAt": "2026-01-02T03:05:00Z"}},
                }],
            },
        })
    };
    fake.seed("pods", &tenant, pod("gw-new", "uid-new", &rev.revision_id));
    fake.seed(
        "pods",
        &tenant,
        pod("gw-old", "uid-old", &older.revision_id),
    );
    let event = |name: &str, uid: &str, field_path: Option<&str>, reason: &str, at: &str| {
        let mut involved = json!({"kind": "Pod", "name": "gw", "uid": uid});
        if let Some(path) = field_path {
            involved["fieldPath"] = json!(path);
        }
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": involved,
            "type": "Warning", "reason": reason, "count": 4,
            "message": format!("{reason} with Authorization: Bearer abcdefghijklmnopqrstuvwxyz"),
            "lastTimestamp": at,
        })
    };
    fake.seed(
        "events",
        &tenant,
        event(
            "e-backoff",
            "uid-new",
            Some("spec.containers{gateway}"),
            "BackOff",
            "2026-01-02T03:06:00Z",
        ),
    );
    fake.seed(
        "events",
        &tenant,
        event(
            "e-scheduled",
            "uid-new",
            None,
            "Scheduled",
            "2026-01-02T03:04:06Z",
        ),
    );
    fake.seed(
        "events",
        &tenant,
        event(
            "e-other",
            "uid-old",
            Some("spec.containers{gateway}"),
            "Killing",
            "2026-01-02T03:04:07Z",
        ),
    );

    let report = compute.runtime_report(&rev).await.expect("report");
    assert_eq!(report.pods.len(), 1, "{report:?}");
    let p = &report.pods[0];
    assert_eq!(
        (p.name.as_str(), p.uid.as_str(), p.phase.as_str(), p.ready),
        ("gw-new", "uid-new", "Running", false)
    );
    assert_eq!(
        p.created_at.map(|t| t.to_string()).as_deref(),
        Some("2026-01-02T03:04:05.000Z")
    );
    let c = &p.containers[0];
    assert_eq!(
        (c.name.as_str(), c.reason.as_deref(), c.restart_count),
        ("gateway", Some("CrashLoopBackOff"), 3)
    );
    let last = c.last_termination.as_ref().expect("last termination");
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (Some(78), Some("Error"))
    );
    let events: Vec<(&str, Option<&str>, u64)> = p
        .events
        .iter()
        .map(|e| (e.reason.as_str(), e.container.as_deref(), e.count))
        .collect();
    assert_eq!(
        events,
        [("Scheduled", None, 4), ("BackOff", Some("gateway"), 4)],
        "this Pod's Events only, oldest first"
    );
    let sanitized = report.sanitized(&occ_core::redact::Redactor::default());
    assert!(
        sanitized.pods[0]
            .events
            .iter()
            .all(|e| !e.message.contains("abcdefghijklmnopqrstuvwxyz")),
        "{sanitized:?}"
    );
}

/// Reading the gateway's output through `pods/log` (no gateways run: Pods are seeded as the
/// Deployment controller creates them and their container instances driven by the fake).
mod pod_logs {
    use super::*;
    use occ_drivers::compute::{
        ComputeError, LOG_READ_MAX_BYTES, LogChunk, LogEntry, LogQuery, RevisionTarget,
    };

    struct Fixture {
        fake: FakeKube,
        compute: KubernetesCompute,
        rev: RevisionTarget,
        tenant: String,
        token: String,
    }

    /// A prepared revision (its token Secret exists) and a Pod of it, not started yet.
    async fn fixture() -> Fixture {
        let fake = FakeKube::start().await;
        let compute = driver(&fake);
        let (ns, agent) = conformance::targets();
        compute.ensure_namespace(&ns).await.expect("ensure");
        let tenant = tenant_namespace_name(&ns.id);
        let rev = revision(&compute, &agent, 1, document("gpt-5"));
        compute
            .prepare_revision(&rev, &RevisionContext::default())
            .await
            .expect("prepare");
        let secret = format!(
            "gw-token-{}",
            occ_drivers::kubernetes::short_hash(agent.agent_id.as_str(), 12)
        );
        let stored = fake.object("secrets", &tenant, &secret).expect("token");
        let token = String::from_utf8(
            base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                stored["data"]["token"].as_str().expect("token data"),
            )
            .expect("base64"),
        )
        .expect("utf-8");
        let fixture = Fixture {
            fake,
            compute,
            rev,
            tenant,
            token,
        };
        fixture.seed_pod("gw-1", "2026-01-02T03:04:05Z");
        fixture
    }

    impl Fixture {
        fn seed_pod(&self, name: &str, created: &str) {
            self.fake.seed(
                "pods",
                &self.tenant,
                json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {
                        "name": name, "creationTimestamp": created,
                        "labels": {"openclaw.dev/agent": self.rev.agent.agent_id.as_str()},
                        "annotations": {"openclaw.dev/revision-id": self.rev.revision_id.as_str()},
                    },
                    "spec": {"containers": [
                        {"name": "gateway", "image": "i"},
                        {"name": "log-shipper", "image": "j"},
                    ]},
                    "status": {"phase": "Pending"},
                }),
            );
        }

        fn write(&self, pod: &str, line: &str) {
            self.fake.append_pod_log(&self.tenant, pod, "gateway", line);
        }

        async fn read(&self, after: Option<&LogChunk>, previous: bool) -> LogChunk {
            self.try_read(after, previous).await.expect("read logs")
        }

        async fn try_read(
            &self,
            after: Option<&LogChunk>,
            previous: bool,
        ) -> Result<LogChunk, ComputeError> {
            self.compute
                .read_logs(
                    &self.rev,
                    &LogQuery {
                        workload: Default::default(),
                        after: after.and_then(|c| c.position.clone()),
                        tail_lines: 3,
                        previous,
                    },
                )
                .await
        }

        /// The query of the last `pods/log` request, as (key, value) pairs.
        fn last_log_query(&self) -> BTreeMap<String, String> {
            let sent = self
                .fake
                .requests()
                .into_iter()
                .rfind(|r| r.resource == "pods/log")
                .expect("a pods/log request");
            assert_eq!(
                (sent.verb.as_str(), sent.namespace.as_str()),
                ("get", self.tenant.as_str())
            );
            url_query(&sent.query)
        }
    }

    fn url_query(query: &str) -> BTreeMap<String, String> {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn lines(chunk: &LogChunk) -> Vec<&str> {
        chunk.lines().collect()
    }

    fn entries(chunk: &LogChunk) -> Vec<String> {
        chunk
            .entries
            .iter()
            .map(|e| match e {
                LogEntry::Line(l) => l.clone(),
                LogEntry::Gap(g) => format!("<{g:?}>"),
            })
            .collect()
    }

    /// The first page is the tail; following with the returned position delivers each line
    /// written since exactly once, also lines sharing one timestamp split across reads; the
    /// request is the gateway container's, timestamped and bounded.
    #[tokio::test]
    async fn a_tail_page_then_a_follow_delivers_each_line_exactly_once() {
        let f = fixture().await;
        let empty = f.read(None, false).await;
        assert_eq!(
            (empty.entries.len(), &empty.position),
            (0, &None),
            "not started"
        );
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        for i in 1..=5 {
            f.write("gw-1", &format!("line {i}"));
        }
        let page = f.read(None, false).await;
        assert_eq!(lines(&page), ["line 3", "line 4", "line 5"]);
        assert!(!page.truncated);
        let query = f.last_log_query();
        assert_eq!(query.get("container").map(String::as_str), Some("gateway"));
        assert_eq!(query.get("timestamps").map(String::as_str), Some("true"));
        assert_eq!(query.get("tailLines").map(String::as_str), Some("3"));
        assert_eq!(
            query.get("limitBytes"),
            Some(&LOG_READ_MAX_BYTES.to_string())
        );
        assert!(!query.contains_key("sinceSeconds"), "{query:?}");
        assert!(!query.contains_key("previous"), "{query:?}");

        // Nothing new: nothing delivered, the position stays.
        let idle = f.read(Some(&page), false).await;
        assert!(idle.entries.is_empty(), "{idle:?}");
        assert_eq!(idle.position, page.position);
        let query = f.last_log_query();
        assert!(query.contains_key("sinceSeconds"), "{query:?}");
        assert!(!query.contains_key("tailLines"), "{query:?}");

        // Three lines with one timestamp, two of them read before the third is written.
        let at = chrono::Utc::now();
        f.fake
            .append_pod_log_at(&f.tenant, "gw-1", "gateway", at, "same 1");
        f.fake
            .append_pod_log_at(&f.tenant, "gw-1", "gateway", at, "same 2");
        let first = f.read(Some(&idle), false).await;
        assert_eq!(lines(&first), ["same 1", "same 2"]);
        f.fake
            .append_pod_log_at(&f.tenant, "gw-1", "gateway", at, "same 3");
        f.write("gw-1", "after");
        let second = f.read(Some(&first), false).await;
        assert_eq!(lines(&second), ["same 3", "after"]);
        let third = f.read(Some(&second), false).await;
        assert!(third.entries.is_empty(), "{third:?}");
    }

    /// `previous` reads the last terminated instance (also while the gateway waits to restart
    /// after crashing on its first run) and is refused with RUNTIME_LOGS_SOURCE_UNAVAILABLE
    /// when there is none.
    #[tokio::test]
    async fn previous_reads_the_last_terminated_instance_and_is_refused_without_one() {
        let f = fixture().await;
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.write("gw-1", "first run");
        let refused = f.try_read(None, true).await.expect_err("no previous");
        assert_eq!(
            (refused.class, refused.code),
            (
                FailureClass::Transient,
                ReasonCode::RuntimeLogsSourceUnavailable
            )
        );
        f.fake.stop_container(&f.tenant, "gw-1", "gateway", 1);
        assert_eq!(lines(&f.read(None, true).await), ["first run"]);
        assert_eq!(
            f.last_log_query().get("previous").map(String::as_str),
            Some("true")
        );
        assert_eq!(lines(&f.read(None, false).await), ["first run"]);
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.write("gw-1", "second run");
        assert_eq!(lines(&f.read(None, true).await), ["first run"]);
        assert_eq!(lines(&f.read(None, false).await), ["second run"]);
    }

    /// A crashed instance is read to its end; the next instance comes after an explicit
    /// `stream_replaced` gap, and so does a new Pod replacing the old one.
    #[tokio::test]
    async fn a_restart_or_a_replaced_pod_gives_a_stream_replaced_gap_then_the_new_lines() {
        let f = fixture().await;
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.write("gw-1", "a");
        let page = f.read(None, false).await;
        f.write("gw-1", "b (last words)");
        f.fake.stop_container(&f.tenant, "gw-1", "gateway", 1);
        let finished = f.read(Some(&page), false).await;
        assert_eq!(entries(&finished), ["b (last words)"]);
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.write("gw-1", "c");
        let restarted = f.read(Some(&finished), false).await;
        assert_eq!(entries(&restarted), ["<StreamReplaced>", "c"]);
        f.write("gw-1", "d");
        let next = f.read(Some(&restarted), false).await;
        assert_eq!(entries(&next), ["d"]);

        // A new Pod of the revision (the Deployment recreated it): its own output, after a gap.
        f.seed_pod("gw-2", "2026-01-02T03:09:00Z");
        f.fake.start_container(&f.tenant, "gw-2", "gateway");
        f.write("gw-2", "new pod");
        let replaced = f.read(Some(&next), false).await;
        assert_eq!(entries(&replaced), ["<StreamReplaced>", "new pod"]);
        assert_eq!(
            f.fake
                .requests()
                .into_iter()
                .rfind(|r| r.resource == "pods/log")
                .map(|r| r.name)
                .as_deref(),
            Some("gw-2")
        );
    }

    /// An answer cut at the read bound is `truncated` and never delivers the partial line; a
    /// follow whose window is all delivered output beyond one read makes progress from the
    /// newest lines instead of repeating itself.
    #[tokio::test]
    async fn a_cut_read_is_truncated_without_a_partial_line_and_follow_gets_past_it() {
        let f = fixture().await;
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        let filler = "x".repeat(1100);
        let line = |i: usize| format!("{i:05} {filler}");
        for i in 0..1200 {
            f.write("gw-1", &line(i));
        }
        let page = f
            .compute
            .read_logs(
                &f.rev,
                &LogQuery {
                    workload: Default::default(),
                    after: None,
                    tail_lines: 1000,
                    previous: false,
                },
            )
            .await
            .expect("tail");
        assert!(page.truncated);
        let got = lines(&page);
        assert!(got.len() < 1000 && got.len() > 900, "{}", got.len());
        let expected: Vec<String> = (200..200 + got.len()).map(line).collect();
        assert_eq!(got, expected, "whole lines from the tail's start, in order");

        for i in 1200..1205 {
            f.write("gw-1", &line(i));
        }
        let mut after = page;
        let mut delivered = Vec::new();
        for _ in 0..3 {
            let next = f
                .compute
                .read_logs(
                    &f.rev,
                    &LogQuery {
                        workload: Default::default(),
                        after: after.position.clone(),
                        tail_lines: 1000,
                        previous: false,
                    },
                )
                .await
                .expect("follow");
            delivered.extend(lines(&next).into_iter().map(str::to_owned));
            after = next;
        }
        let rest: Vec<String> = (200 + expected.len()..1205).map(line).collect();
        assert_eq!(delivered, rest, "every remaining line once");
    }

    /// The gateway token never leaves the Driver, wherever it appears in a line.
    #[tokio::test]
    async fn the_gateway_token_never_appears_in_returned_lines() {
        let f = fixture().await;
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.write("gw-1", &format!("auth token={} accepted", f.token));
        f.write("gw-1", &format!("{0}{0}", f.token));
        let page = f.read(None, false).await;
        assert_eq!(page.entries.len(), 2);
        for line in lines(&page) {
            assert!(!line.contains(&f.token), "{line}");
            assert!(line.contains(occ_core::redact::REDACTED), "{line}");
        }
    }

    /// A cluster that denies `pods/log` is RUNTIME_LOGS_CLUSTER_RBAC.
    #[tokio::test]
    async fn a_denied_pods_log_read_is_a_cluster_rbac_failure() {
        let f = fixture().await;
        f.fake.start_container(&f.tenant, "gw-1", "gateway");
        f.fake.deny("get", "pods/log");
        let err = f.try_read(None, false).await.expect_err("denied");
        assert_eq!(
            (err.class, err.code),
            (FailureClass::Transient, ReasonCode::RuntimeLogsClusterRbac)
        );
        let sent = f
            .fake
            .requests()
            .into_iter()
            .rfind(|r| r.resource == "pods/log")
            .expect("sent");
        assert_eq!(sent.status, 403);
    }
}

/// A revision whose Control UI occ proxies: its gateway gets the credential as
/// `OPENCLAW_GATEWAY_PASSWORD` from the same Secret key (OpenClaw refuses trusted-proxy mode
/// while `OPENCLAW_GATEWAY_TOKEN` is set) and its snapshot renders trusted-proxy authentication
/// for occ's proxy on the Pod's loopback (where the port-forward arrives); other revisions keep
/// token authentication.
#[tokio::test]
async fn a_control_ui_revision_runs_in_trusted_proxy_mode() {
    let fake = FakeKube::start().await;
    let compute = driver(&fake);
    let (ns, agent) = fixed_targets();
    let tenant = tenant_namespace_name(&ns.id);
    let mut doc = document("gpt-5");
    doc["gateway"] = json!({"controlUi": {"enabled": true, "allowedOrigins": ["*"]}});
    let ui = revision(&compute, &agent, 1, doc);
    let plain = revision(&compute, &agent, 2, document("gpt-5"));
    let env_names = |rev| {
        let deployment =
            serde_json::to_value(compute.deployment(&tenant, rev, false, false)).expect("json");
        let env = deployment
            .pointer("/spec/template/spec/containers/0/env")
            .and_then(Value::as_array)
            .cloned()
            .expect("env");
        env.into_iter()
            .filter(|e| {
                e["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("OPENCLAW_GATEWAY_")
            })
            .collect::<Vec<_>>()
    };
    let ui_env = env_names(&ui);
    assert_eq!(ui_env.len(), 1, "{ui_env:?}");
    assert_eq!(ui_env[0]["name"], "OPENCLAW_GATEWAY_PASSWORD");
    assert_eq!(ui_env[0]["valueFrom"]["secretKeyRef"]["key"], "token");
    assert_eq!(env_names(&plain)[0]["name"], "OPENCLAW_GATEWAY_TOKEN");

    let rendered = KubernetesCompute::render(&ui);
    let auth = &rendered["gateway"]["auth"];
    assert_eq!(auth["mode"], "trusted-proxy");
    assert_eq!(auth["password"], "${OPENCLAW_GATEWAY_PASSWORD}");
    assert!(auth.get("token").is_none());
    // The identity header's name carries the revision's proxy key, from an explicit variable of
    // the revision's environment Secret (never `envFrom` alone).
    assert_eq!(
        auth["trustedProxy"]["userHeader"],
        "x-occ-proxy-${OCC_PROXY_KEY}"
    );
    assert_eq!(rendered["gateway"]["terminal"], json!({"enabled": false}));
    let deployment =
        serde_json::to_value(compute.deployment(&tenant, &ui, false, true)).expect("json");
    let env = deployment
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .cloned()
        .expect("env");
    let key = env
        .iter()
        .find(|e| e["name"] == "OCC_PROXY_KEY")
        .expect("the proxy key variable");
    assert_eq!(
        key["valueFrom"]["secretKeyRef"]["key"], "OCC_PROXY_KEY",
        "{key}"
    );
    assert!(
        !serde_json::to_value(compute.deployment(&tenant, &plain, false, false))
            .expect("json")
            .to_string()
            .contains("OCC_PROXY_KEY"),
        "only Control UI revisions get a proxy key"
    );
    assert_eq!(
        rendered["gateway"]["trustedProxies"],
        json!(["127.0.0.1", "::1"])
    );
    assert_eq!(
        rendered["gateway"]["controlUi"]["allowedOrigins"],
        json!(["http://occ-native-admin.invalid"])
    );
    assert_eq!(
        KubernetesCompute::render(&plain)["gateway"]["auth"],
        json!({"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"})
    );
}
