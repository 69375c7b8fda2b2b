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
            activation_timeout: Duration::from_secs(240),
            stop_timeout: Duration::from_secs(60),
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
/// resume → delete, with real gateways (one at a time: Recreate) reached through portforward.
/// Then a revision whose gateway exits during startup: the crash is seen in the Pod status
/// (not at the activation deadline) and the previous template is rolled out again.
#[tokio::test]
#[expect(
    clippy::print_stderr,
    reason = "the rollback figures docs/ARCHITECTURE.md cites"
)]
async fn conformance_suite_on_kubernetes() {
    let fake = FakeKube::start().await;
    let _kubelet = FakeKubelet::start(&fake);
    let compute = driver(&fake);
    conformance::lifecycle(&compute).await;
    conformance::refusals(&compute).await;
    let figures = conformance::rollback(&compute, false).await;
    eprintln!("Kubernetes rollback: {figures:?}");
}

/// The same lifecycle in an operator's namespace adopted through `existingNamespace`: every
/// object of the Agent lands there, and deleting the occ Namespace gives the namespace back
/// with the operator's own objects and without anything of occ's.
#[tokio::test]
async fn conformance_lifecycle_in_an_adopted_namespace() {
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
/// starts; a later revision's template carries no setup once it completed.
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
            activation_timeout: Duration::from_secs(600),
            stop_timeout: Duration::from_secs(120),
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
