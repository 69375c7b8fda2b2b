//! Dedicated (Codex harness) execution on the Kubernetes Compute Driver, through the real `kube`
//! client against occ-testkit's fake API server: the exact objects a dedicated revision gets
//! (golden files under `tests/golden/`), where its secrets go and where they do not, the
//! refusals that need no workload, retirement and deletion.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use occ_drivers::compute::{RevisionTarget, RuntimeState};
use occ_testkit::compute_conformance::{DEDICATED_KEY, DedicatedSite, dedicated_lifecycle};
use occ_testkit::fake_model::FakeModel;
use occ_testkit::kubelet::FakeKubelet;

use occ_core::ReasonCode;
use occ_core::resource::ExecutionMode;
use occ_core::resource::{HarnessAuth, WorkspaceFileName, WorkspaceFiles, WorkspaceSetup};
use occ_core::{AgentId, IamId, NamespaceId, RevisionId};
use occ_drivers::compute::kubernetes::{
    KubernetesCompute, KubernetesComputeSettings, KubernetesDedicatedSettings, ModelEgress,
};
use occ_drivers::compute::{
    AgentTarget, Compute, Convergence, FailureClass, NamespaceTarget, Readiness, RevisionContext,
    SecretText,
};
use occ_drivers::kubernetes::{TenantNamespaces, short_hash, tenant_namespace_name};
use occ_testkit::compute_conformance::{dedicated_revision, document};
use occ_testkit::kube::FakeKube;
use serde_json::{Value, json};
use sha2::Digest as _;

fn settings(dedicated: Option<KubernetesDedicatedSettings>) -> KubernetesComputeSettings {
    KubernetesComputeSettings {
        image: "registry.example/occ-gateway@sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
        runtime_dir: "/opt/occ/runtime".into(),
        occ_binary: "/usr/local/bin/occ".into(),
        state_storage: "10Gi".into(),
        storage_class: None,
        runtime_class: None,
        activation_timeout: Duration::from_secs(360),
        stop_timeout: Duration::from_secs(60),
        dedicated,
    }
}

fn dedicated_settings() -> KubernetesDedicatedSettings {
    KubernetesDedicatedSettings {
        model_base_url: Some("https://models.example/v1".into()),
        harness_storage: "20Gi".into(),
        token_audience: "occ".into(),
        model_egress: vec![ModelEgress {
            cidr: "203.0.113.0/24".into(),
            port: 443,
        }],
        ready_timeout: Duration::from_secs(360),
    }
}

fn driver(fake: &FakeKube, dedicated: Option<KubernetesDedicatedSettings>) -> KubernetesCompute {
    KubernetesCompute::new(
        fake.occ_client(),
        settings(dedicated),
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

fn staged(agent: &AgentTarget) -> WorkspaceSetup {
    let mut files = WorkspaceFiles::new();
    files.insert(WorkspaceFileName::User, "# USER.md\n\nStaged.\n".into());
    WorkspaceSetup {
        id: "wss_1".into(),
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.agent_id.clone(),
        defaults_id: None,
        files: Some(files),
        completed: false,
    }
}

/// A dedicated revision with fixed ids, so the golden files are stable.
fn fixed_revision(
    compute: &KubernetesCompute,
    agent: &AgentTarget,
) -> occ_drivers::compute::RevisionTarget {
    let mut rev = dedicated_revision(compute, agent, 1, document("gpt-5.6-sol"));
    rev.revision_id = "rev_7d1e2f3a-4b5c-4d6e-8f70-a1b2c3d4e5f6"
        .parse::<RevisionId>()
        .expect("rev");
    rev.spec.harness_auth = Some(HarnessAuth::ApiKey {
        source: serde_json::from_value(json!({"kind": "secret", "namespaceId": agent.namespace_id,
            "id": "sec_9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"}))
        .expect("ref"),
    });
    rev
}

fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("container {name}"))
}

fn mount<'a>(container: &'a Value, path: &str) -> &'a Value {
    container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"] == path)
        .unwrap_or_else(|| panic!("mount {path}"))
}

/// Prepare sends exactly the reviewed objects; the credential is only in its Secret, the
/// app-server token only in the transport Secret (its SHA-256 in the launch input), only the
/// harness mounts the service-principal token, harness Pods are not selected as gateway Pods,
/// files the launcher opens are file mounts; a second prepare changes nothing.
#[tokio::test]
async fn a_dedicated_revision_gets_the_reviewed_objects() {
    let fake = FakeKube::start().await;
    let compute = driver(&fake, Some(dedicated_settings()));
    assert!(
        compute
            .selection()
            .execution_modes
            .contains(&ExecutionMode::Dedicated)
    );
    let (ns, agent) = fixed_targets();
    assert_eq!(
        compute.ensure_namespace(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let tenant = tenant_namespace_name(&ns.id);
    let rev = fixed_revision(&compute, &agent);
    let ctx = RevisionContext {
        environment: BTreeMap::from([(
            "SLACK_TOKEN".to_owned(),
            SecretText::new("xoxb-canary".into()),
        )]),
        harness_credential: Some(SecretText::new("sk-canary".into())),
        workspace_setup: Some(staged(&agent)),
    };
    fake.clear_requests();
    assert_eq!(
        compute.prepare_revision(&rev, &ctx).await.expect("prepare"),
        Readiness::Ready
    );
    let creates: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .collect();
    let mut sent: Vec<Value> = creates
        .iter()
        .map(|r| {
            let mut body = r.body.clone().expect("body");
            if let Some(data) = body.get_mut("stringData").and_then(Value::as_object_mut) {
                for v in data.values_mut() {
                    *v = json!("<redacted>");
                }
            }
            // The launch input holds the random token's digest (checked below, and its own
            // golden file); its name, a digest of it.
            if body["data"].get("launch.json").is_some() {
                body["data"]["launch.json"] = json!("<compute-dedicated-launch.json>");
                body["metadata"]["name"] = json!("<hx-h12-launch-r12-content8>");
            }
            json!({"resource": r.resource, "namespace": r.namespace, "body": body})
        })
        .collect();
    sent.sort_by_key(|v| v.to_string());
    golden("compute-dedicated-prepare.json", &Value::Array(sent));

    let h = short_hash(agent.agent_id.as_str(), 12);
    let body_of = |name: &str| {
        creates
            .iter()
            .find(|r| {
                r.body
                    .as_ref()
                    .is_some_and(|b| b["metadata"]["name"] == name)
            })
            .and_then(|r| r.body.clone())
            .unwrap_or_else(|| panic!("{name} created"))
    };
    // The credential: only in the revision's credential Secret, never in the environment.
    for r in &creates {
        let text = r.body.as_ref().map(Value::to_string).unwrap_or_default();
        let name = r.body.as_ref().map(|b| b["metadata"]["name"].clone());
        if text.contains("sk-canary") {
            assert_eq!(
                name,
                Some(json!(format!(
                    "hx-{h}-cred-{}",
                    short_hash(rev.revision_id.as_str(), 12)
                )))
            );
        }
    }
    let env = body_of(&format!(
        "gw-{h}-env-{}",
        short_hash(rev.revision_id.as_str(), 12)
    ));
    assert_eq!(
        env["stringData"],
        json!({"SLACK_TOKEN": "xoxb-canary"}),
        "the gateway's environment has no harness credential"
    );
    // The app-server token: in the transport Secret; the launcher gets its SHA-256 only.
    let token = body_of(&format!("hx-transport-{h}"))["stringData"]["app-server-token"]
        .as_str()
        .expect("token")
        .to_owned();
    assert_eq!(token.len(), 64);
    let launch_cm = creates
        .iter()
        .filter_map(|r| r.body.clone())
        .find(|b| {
            b["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("hx-{h}-launch-")))
        })
        .expect("launch configmap");
    let launch: Value =
        serde_json::from_str(launch_cm["data"]["launch.json"].as_str().expect("text"))
            .expect("json");
    assert_eq!(
        launch["appServer"]["tokenSha256"],
        json!(hex::encode(sha2::Sha256::digest(token.as_bytes())))
    );
    for r in &creates {
        let text = r.body.as_ref().map(Value::to_string).unwrap_or_default();
        if text.contains(&token) {
            assert_eq!(
                r.body.as_ref().expect("body")["metadata"]["name"],
                json!(format!("hx-transport-{h}"))
            );
        }
    }
    let mut launch_shown = launch.clone();
    launch_shown["appServer"]["tokenSha256"] = json!("<sha256 of the app-server token>");
    golden("compute-dedicated-launch.json", &launch_shown);
    // The gateway's snapshot: wired to the harness's Service, not yet bound to a node.
    let snapshot: Value = serde_json::from_str(
        body_of(&format!(
            "gw-{h}-cfg-{}",
            short_hash(rev.revision_id.as_str(), 12)
        ))["data"]["openclaw.json"]
            .as_str()
            .expect("text"),
    )
    .expect("json");
    assert!(
        snapshot
            .to_string()
            .contains(&format!("ws://hx-{h}.{tenant}.svc:18800"))
    );
    assert_eq!(
        snapshot["agents"]["defaults"]["workspace"],
        json!("/workspace")
    );

    let (gateway, harness) = compute
        .dedicated_deployments(
            &tenant,
            &rev,
            "hx-launch-configmap",
            Some("node-device-0001"),
            true,
        )
        .expect("dedicated");
    let gateway = serde_json::to_value(gateway).expect("json");
    let harness = serde_json::to_value(harness).expect("json");
    golden("compute-dedicated-gateway-deployment.json", &gateway);
    golden("compute-dedicated-harness-deployment.json", &harness);
    // Harness Pods are not gateway Pods.
    let labels = &harness["spec"]["template"]["metadata"]["labels"];
    assert!(labels.get("openclaw.dev/agent").is_none(), "{labels}");
    assert_eq!(
        labels["openclaw.dev/harness-agent"],
        json!(agent.agent_id.to_string())
    );
    // Only the harness mounts the service-principal token; the gateway no harness secret.
    assert!(harness.to_string().contains("serviceAccountToken"));
    assert!(!gateway.to_string().contains("serviceAccountToken"));
    assert!(!gateway.to_string().contains("-cred-"));
    assert!(!gateway.to_string().contains("hx-node-setup"));
    // Files the launcher opens without following links are file (subPath) mounts.
    let hx = container(&harness, "harness");
    for path in [
        "/etc/occ-harness/launch.json",
        "/var/run/occ-harness/credential",
        "/etc/occ-harness/workspace-setup.json",
    ] {
        assert!(mount(hx, path)["subPath"].is_string(), "{path}");
    }
    assert!(mount(hx, "/run/occ-node-setup").get("subPath").is_none());
    // The gateway reads the app-server token from the transport Secret, no model key.
    let gw = container(&gateway, "gateway");
    assert!(gw.to_string().contains(&format!("hx-transport-{h}")));
    assert!(
        gw.get("envFrom").is_none(),
        "no environment Secret in this template"
    );

    // Idempotent.
    fake.clear_requests();
    compute.prepare_revision(&rev, &ctx).await.expect("again");
    assert!(
        fake.requests()
            .iter()
            .all(|r| matches!(r.verb.as_str(), "get" | "list")),
        "{:?}",
        fake.requests()
    );

    // Retire removes the revision's credential, environment and launch input; the snapshot
    // stays until the Agent goes.
    compute.retire_revision(&rev).await.expect("retire");
    let secrets = fake.names("secrets", &tenant);
    assert!(
        !secrets
            .iter()
            .any(|n| n.contains("-cred-") || n.contains("-env-")),
        "{secrets:?}"
    );
    let configmaps = fake.names("configmaps", &tenant);
    assert!(
        !configmaps.iter().any(|n| n.contains("-launch-")),
        "{configmaps:?}"
    );
    assert!(
        configmaps.iter().any(|n| n.contains("-cfg-")),
        "{configmaps:?}"
    );

    // Delete removes every object of the Agent.
    compute.delete_agent(&agent).await.expect("delete");
    for resource in [
        "deployments",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "services",
        "networkpolicies",
        "persistentvolumeclaims",
    ] {
        let names = fake.names(resource, &tenant);
        assert!(
            !names.iter().any(|n| n.contains(&h)),
            "{resource}: {names:?}"
        );
    }
}

/// Refusals that need no workload: a Driver without dedicated settings, a login method the
/// harness does not have, no credential, a foreign object at a harness name.
#[tokio::test]
async fn dedicated_refusals_leave_nothing_running() {
    let fake = FakeKube::start().await;
    let (ns, agent) = fixed_targets();
    let embedded_only = driver(&fake, None);
    assert!(
        !embedded_only
            .selection()
            .execution_modes
            .contains(&ExecutionMode::Dedicated)
    );
    embedded_only.ensure_namespace(&ns).await.expect("ensure");
    let tenant = tenant_namespace_name(&ns.id);
    let ctx = RevisionContext {
        harness_credential: Some(SecretText::new("sk-canary".into())),
        ..RevisionContext::default()
    };
    let rev = fixed_revision(&embedded_only, &agent);
    let err = embedded_only
        .prepare_revision(&rev, &ctx)
        .await
        .expect_err("no dedicated settings");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::ComputeDriverMismatch)
    );

    let compute = driver(&fake, Some(dedicated_settings()));
    let mut runtime = rev.clone();
    runtime.spec.harness_auth = Some(HarnessAuth::Runtime {});
    let err = compute
        .prepare_revision(&runtime, &ctx)
        .await
        .expect_err("runtime login");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::InvalidHarnessAuth)
    );
    let err = compute
        .prepare_revision(&rev, &RevisionContext::default())
        .await
        .expect_err("no credential");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::InvalidHarnessAuth)
    );
    assert!(fake.names("deployments", &tenant).is_empty());

    // Someone else's claim at the harness claim's name: refused and left alone.
    let claim = format!("hx-state-{}", short_hash(agent.agent_id.as_str(), 12));
    let seeded = fake.seed(
        "persistentvolumeclaims",
        &tenant,
        json!({"metadata": {"name": claim, "labels": {"app": "someone-else"}}}),
    );
    let err = compute
        .prepare_revision(&rev, &ctx)
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
}

/// What the Kubernetes Driver's dedicated case sees on this machine: the test kubelet's claim
/// directories and gateway ports, and the Kubernetes-only checks.
struct KubeSite<'a> {
    fake: &'a FakeKube,
    kubelet: &'a FakeKubelet,
}

impl KubeSite<'_> {
    /// The harness Pod of `hx`, whether its container is ready, and its restart count.
    fn harness_instance(&self, tenant: &str, hx: &str) -> (String, bool, i64) {
        let (_, _, pod, _) = self
            .kubelet
            .harnesses()
            .into_iter()
            .find(|(ns, d, ..)| ns == tenant && d == hx)
            .unwrap_or_default();
        let object = self.fake.object("pods", tenant, &pod).unwrap_or_default();
        let status = &object["status"]["containerStatuses"][0];
        (
            pod,
            status["ready"] == serde_json::json!(true),
            status["restartCount"].as_i64().unwrap_or(0),
        )
    }

    fn names(agent: &AgentTarget) -> (String, String, String) {
        let h = short_hash(agent.agent_id.as_str(), 12);
        (
            tenant_namespace_name(&agent.namespace_id),
            format!("gw-{h}"),
            format!("hx-{h}"),
        )
    }
}

#[async_trait::async_trait]
impl DedicatedSite for KubeSite<'_> {
    fn harness_workspace(&self, agent: &AgentTarget) -> PathBuf {
        let (tenant, _, hx) = Self::names(agent);
        self.kubelet
            .claim_dir(&tenant, &hx.replacen("hx-", "hx-state-", 1))
            .join("workspace")
    }

    fn gateway_http_port(&self, agent: &AgentTarget) -> u16 {
        let (_, gw, _) = Self::names(agent);
        self.kubelet
            .gateways()
            .into_iter()
            .find(|g| g.deployment == gw && g.ready)
            .expect("a ready gateway")
            .port
    }

    /// The gateway's process holds no key; only the harness Pod has the projected
    /// service-principal token; the paired node is recorded on the harness claim; a harness
    /// container that exits is restarted by the kubelet alone, and the gateway's Codex plugin
    /// and the node host reconnect to it (the revision serves and answers again, no re-pairing).
    async fn first_activation(&self, compute: &dyn Compute, rev: &RevisionTarget) {
        let (tenant, gw, hx) = Self::names(&rev.agent);
        let gateway_pid = self
            .kubelet
            .gateways()
            .into_iter()
            .find(|g| g.deployment == gw)
            .expect("gateway")
            .pid;
        for file in ["environ", "cmdline"] {
            let bytes = std::fs::read(format!("/proc/{gateway_pid}/{file}")).expect("proc");
            assert!(
                !bytes
                    .windows(DEDICATED_KEY.len())
                    .any(|w| w == DEDICATED_KEY.as_bytes()),
                "the key is in the gateway's {file}"
            );
        }
        let token = std::fs::read_to_string(
            self.kubelet
                .pod_dir(&tenant, &hx)
                .expect("harness pod")
                .join("volumes/service-principal/token"),
        )
        .expect("projected token");
        assert!(
            token.contains(&format!("serviceAccount={hx} audience=occ")),
            "{token}"
        );
        assert!(
            !self
                .kubelet
                .pod_dir(&tenant, &gw)
                .expect("gateway pod")
                .join("volumes/service-principal")
                .exists()
        );
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.fake.occ_client().client(), &tenant);
        let claim = claims
            .get(&hx.replacen("hx-", "hx-state-", 1))
            .await
            .expect("claim");
        assert!(
            claim
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("openclaw.dev/node-device-id")),
            "the paired node is recorded on the harness claim"
        );

        let (harness_pod, ..) = self.harness_instance(&tenant, &hx);
        assert!(self.kubelet.end_harness_container(&tenant, &hx));
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let (pod, ready, restarts) = self.harness_instance(&tenant, &hx);
            if ready && restarts >= 1 {
                assert_eq!(pod, harness_pod, "the container restarted in its Pod");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the harness container came back\n{}",
                self.diagnostics(&rev.agent)
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while compute.observe(rev).await.expect("observe") != RuntimeState::Serving {
            assert!(
                std::time::Instant::now() < deadline,
                "the revision serves again after a harness restart"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let mut session = occ_testkit::compute_conformance::connect(compute, &rev.agent)
            .await
            .expect("session");
        let node = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("openclaw.dev/node-device-id").cloned())
            .expect("node");
        // The node host reconnects with its own backoff after the harness container restarts;
        // on a loaded 2-core machine that took longer than a minute once (CI).
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let status = occ_gateway::NodeEnrollment::new(&mut session)
                .describe(&node)
                .await;
            if status.as_ref().is_ok_and(|s| s.is_ready()) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the node reconnected after the harness restart: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        session.close().await;
        let token = compute
            .gateway_access(&rev.agent)
            .await
            .expect("access")
            .expect("serving")
            .token;
        let (code, body) = occ_testkit::gateway::chat_completion(
            self.gateway_http_port(&rev.agent),
            token.expose(),
            "after the harness restarted",
            Duration::from_secs(240),
        )
        .await;
        assert_eq!(
            code,
            200,
            "chat after a harness restart: {body}\n{}",
            self.diagnostics(&rev.agent)
        );
    }

    fn diagnostics(&self, agent: &AgentTarget) -> String {
        let (tenant, gw, hx) = Self::names(agent);
        let read = |deployment: &str, prefix: &str| {
            let Some(dir) = self.kubelet.pod_dir(&tenant, deployment) else {
                return String::new();
            };
            let mut text = String::new();
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_name().to_string_lossy().starts_with(prefix) {
                    text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
                }
            }
            text
        };
        format!(
            "--- harness ---\n{}\n--- gateway ---\n{}",
            read(&hx, "harness-"),
            read(&gw, "gateway.log")
        )
    }
}

/// The dedicated case of the Compute conformance suite on Kubernetes, with real processes
/// through the test kubelet (the harness launcher in process with the real Codex and node host,
/// real gateways, the fake model), plus what only Kubernetes shows: the checks of
/// [`KubeSite::first_activation`], one pairing for the whole run (a redeploy's node reconnects:
/// the setup-code Secret is written once and emptied once), and nothing of the Agent left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn dedicated_conformance_on_kubernetes() {
    tokio::task::spawn_blocking(occ_testkit::runtime::shared_runtime)
        .await
        .expect("runtime");
    let fake = FakeKube::start().await;
    let kubelet = FakeKubelet::start(&fake);
    let model = FakeModel::start().await;
    let mut dedicated = dedicated_settings();
    dedicated.model_base_url = Some(model.base_url());
    dedicated.model_egress = Vec::new();
    let compute = driver(&fake, Some(dedicated));
    let site = KubeSite {
        fake: &fake,
        kubelet: &kubelet,
    };
    let figures = dedicated_lifecycle(&compute, &model, &site).await;

    let setup_writes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| {
            r.resource == "secrets"
                && r.verb == "update"
                && r.body.as_ref().is_some_and(|b| {
                    b["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("hx-node-setup-"))
                })
        })
        .collect();
    assert_eq!(
        setup_writes.len(),
        2,
        "one setup code delivered and withdrawn for the whole run"
    );
    assert!(kubelet.harnesses().is_empty() && kubelet.gateways().is_empty());
    for resource in [
        "deployments",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "services",
        "networkpolicies",
        "persistentvolumeclaims",
        "pods",
    ] {
        let left: Vec<String> = fake
            .all_names(resource)
            .into_iter()
            .filter(|n| n.starts_with("gw-") || n.starts_with("hx-"))
            .collect();
        assert!(left.is_empty(), "{resource}: {left:?}");
    }
    eprintln!("kubernetes dedicated: {figures:?}");
}
