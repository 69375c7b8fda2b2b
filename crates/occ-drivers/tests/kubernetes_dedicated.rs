//! Dedicated (Codex harness) execution on the Kubernetes Compute Driver, through the real `kube`
//! client against occ-testkit's fake API server: the exact objects a dedicated revision gets
//! (golden files under `tests/golden/`), where its secrets go and where they do not, the
//! refusals that need no workload, retirement and deletion.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use occ_core::compute::{LogQuery, LogWorkload};
use occ_core::runtime_report::WorkloadRole;
use occ_drivers::compute::RuntimeState;
use occ_gateway::NodeEnrollment;
use occ_testkit::gateway::chat_completion;

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
        activation_timeout: Duration::from_secs(240),
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
        ready_timeout: Duration::from_secs(240),
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

const KEY: &str = "sk-k8s-dedicated-key-0123456789abcdef";
const WRONG_KEY: &str = "sk-k8s-dedicated-wrong-9876543210fedcba";
const MODEL: &str = "openai/gpt-5.6-sol";

/// The Configuration a user writes for a dedicated Agent (the Driver wires the app-server).
fn chat_document() -> Value {
    json!({
        "gateway": {"controlUi": {"enabled": false},
            "http": {"endpoints": {"chatCompletions": {"enabled": true}}}},
        "agents": {"defaults": {"model": MODEL, "skipBootstrap": true,
            "models": {MODEL: {"agentRuntime": {"id": "codex"}}},
            "modelPolicy": {"allow": [MODEL]}}},
        "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {
            "transport": "websocket", "url": "${APP_SERVER_URL}",
            "authToken": "${APP_SERVER_TOKEN}"}}}}},
    })
}

fn key_context(key: &str) -> RevisionContext {
    RevisionContext {
        harness_credential: Some(SecretText::new(key.into())),
        ..RevisionContext::default()
    }
}

fn harness_lines(chunk: &occ_drivers::compute::LogChunk) -> Vec<String> {
    chunk.lines().map(str::to_owned).collect()
}

/// The Kubernetes side of the lifecycle, with real processes through the test kubelet
/// (the harness launcher in process with the real Codex and node host, real gateways, the fake
/// model): deploy → the probe carried the Agent's key; the gateway Pod's process has no key;
/// the node is recorded on the harness claim and serves the seven commands; a workspace file
/// written through the gateway lands on the harness claim; a chat turn is answered through the
/// app-server Service; only the harness has the projected token; a redeploy reuses the node
/// (no second pairing); retirement removes the credential Secret; a wrong key fails the deploy
/// permanently with no key in the output and both workloads scaled down; delete leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::print_stderr, reason = "the figures of the run, for the log")]
async fn a_dedicated_agent_runs_as_two_deployments() {
    tokio::task::spawn_blocking(occ_testkit::runtime::shared_runtime)
        .await
        .expect("runtime");
    let fake = FakeKube::start().await;
    let kubelet = occ_testkit::kubelet::FakeKubelet::start(&fake);
    let model = occ_testkit::fake_model::FakeModel::start().await;
    let mut dedicated = dedicated_settings();
    dedicated.model_base_url = Some(model.base_url());
    dedicated.model_egress = Vec::new();
    let compute = driver(&fake, Some(dedicated));
    let (ns, agent) = fixed_targets();
    compute.ensure_namespace(&ns).await.expect("namespace");
    let tenant = tenant_namespace_name(&ns.id);
    let h = short_hash(agent.agent_id.as_str(), 12);
    let (gw, hx) = (format!("gw-{h}"), format!("hx-{h}"));
    let failure_output = |kubelet: &occ_testkit::kubelet::FakeKubelet| {
        let read = |d: &str, f: &str| {
            kubelet
                .pod_dir(&tenant, d)
                .and_then(|dir| {
                    let mut text = String::new();
                    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
                        if entry.file_name().to_string_lossy().starts_with(f) {
                            text.push_str(
                                &std::fs::read_to_string(entry.path()).unwrap_or_default(),
                            );
                        }
                    }
                    Some(text)
                })
                .unwrap_or_default()
        };
        format!(
            "--- harness ---\n{}\n--- gateway ---\n{}",
            read(&hx, "harness-"),
            read(&gw, "gateway.log")
        )
    };

    // 1. Deploy.
    let started = Instant::now();
    let rev1 = dedicated_revision(&compute, &agent, 1, chat_document());
    let ctx = key_context(KEY);
    compute
        .prepare_revision(&rev1, &ctx)
        .await
        .expect("prepare");
    if let Err(e) = compute.activate_revision(&rev1, &ctx).await {
        panic!("activation failed: {e:?}\n{}", failure_output(&kubelet));
    }
    let activated_after = started.elapsed();
    assert_eq!(
        compute.observe(&rev1).await.expect("observe"),
        RuntimeState::Serving
    );
    assert!(
        model.requests().iter().any(|r| r.bearer() == Some(KEY)),
        "the probe turn carried the Agent's key"
    );
    let report = compute.runtime_report(&rev1).await.expect("report");
    let roles: Vec<_> = report.pods.iter().map(|p| (p.role, p.ready)).collect();
    assert_eq!(
        roles,
        [(WorkloadRole::Gateway, true), (WorkloadRole::Agent, true)],
        "{report:?}"
    );
    let output = compute
        .read_logs(
            &rev1,
            &LogQuery {
                after: None,
                tail_lines: 500,
                previous: false,
                workload: LogWorkload::Harness,
            },
        )
        .await
        .expect("harness log");
    let lines = harness_lines(&output);
    assert!(
        lines.iter().any(|l| l.contains("phase=probe outcome=ok")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains(KEY)));

    // The gateway's process has no key; only the harness Pod has the service-principal token.
    let gateway_pid = kubelet
        .gateways()
        .into_iter()
        .find(|g| g.deployment == gw)
        .expect("gateway")
        .pid;
    for file in ["environ", "cmdline"] {
        let bytes = std::fs::read(format!("/proc/{gateway_pid}/{file}")).expect("proc");
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key is in the gateway's {file}"
        );
    }
    let token = std::fs::read_to_string(
        kubelet
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
        !kubelet
            .pod_dir(&tenant, &gw)
            .expect("gateway pod")
            .join("volumes/service-principal")
            .exists()
    );

    // 2. The node: recorded on the harness claim, connected with its seven commands.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(fake.occ_client().client(), &tenant);
    let device_id = claims
        .get(&format!("hx-state-{h}"))
        .await
        .expect("claim")
        .metadata
        .annotations
        .and_then(|a| a.get("openclaw.dev/node-device-id").cloned())
        .expect("the paired node is recorded");
    let mut session = conformance_connect(&compute, &agent).await;
    let status = NodeEnrollment::new(&mut session)
        .describe(&device_id)
        .await
        .expect("node.describe");
    assert!(status.is_ready(), "{status:?}");

    // 3. A workspace file written through the gateway lands on the harness's claim.
    let content = "# Soul\nWritten through the gateway Pod to the harness Pod.\n";
    session
        .file_set("main", "SOUL.md", content, None, Duration::from_secs(30))
        .await
        .expect("file set");
    let on_claim = std::fs::read_to_string(
        kubelet
            .claim_dir(&tenant, &format!("hx-state-{h}"))
            .join("workspace/SOUL.md"),
    )
    .expect("on the harness claim");
    assert_eq!(
        on_claim,
        content,
        "config: {}",
        std::fs::read_to_string(
            kubelet
                .pod_dir(&tenant, &gw)
                .expect("gw")
                .join("openclaw.json")
        )
        .unwrap_or_default()
    );
    session.close().await;

    // 4. A chat turn to the gateway (its HTTP endpoint, on the kubelet's local port), answered
    // by the model through the app-server Service.
    let token = compute
        .gateway_access(&agent)
        .await
        .expect("access")
        .expect("serving")
        .token;
    let chat_started = Instant::now();
    let (code, body) = chat_completion(
        gateway_port(&kubelet, &gw),
        token.expose(),
        "hi",
        Duration::from_secs(240),
    )
    .await;
    assert_eq!(code, 200, "chat: {body}\n{}", failure_output(&kubelet));
    assert!(body.contains("Hello from the fake model."), "{body}");
    let chat_after = chat_started.elapsed();

    // 5. A redeploy reuses the node: no second setup code.
    compute.stop_revision(&rev1).await.expect("stop rev1");
    assert!(kubelet.harnesses().is_empty() && kubelet.gateways().is_empty());
    let rev2 = dedicated_revision(&compute, &agent, 2, chat_document());
    compute
        .prepare_revision(&rev2, &ctx)
        .await
        .expect("prepare 2");
    fake.clear_requests();
    let redeployed = Instant::now();
    if let Err(e) = compute.activate_revision(&rev2, &ctx).await {
        panic!("redeploy failed: {e:?}\n{}", failure_output(&kubelet));
    }
    let redeploy_after = redeployed.elapsed();
    assert!(
        !fake.requests().iter().any(|r| r.verb == "update"
            && r.body
                .as_ref()
                .is_some_and(|b| b["metadata"]["name"] == format!("hx-node-setup-{h}"))),
        "no setup code was issued again"
    );
    compute.retire_revision(&rev1).await.expect("retire rev1");
    let secrets = fake.names("secrets", &tenant);
    assert!(
        !secrets.iter().any(
            |n| n.ends_with(&short_hash(rev1.revision_id.as_str(), 12)) && n.contains("-cred-")
        ),
        "{secrets:?}"
    );
    let (code, body) = chat_completion(
        gateway_port(&kubelet, &gw),
        token.expose(),
        "v2",
        Duration::from_secs(240),
    )
    .await;
    assert_eq!(code, 200, "chat on revision 2: {body}");

    // 6. A wrong key: permanent RUNTIME_AUTHENTICATION_FAILED, no key shown, both scaled down.
    compute.stop_revision(&rev2).await.expect("stop rev2");
    model.fail_with(Some(occ_testkit::fake_model::Failure {
        status: 401,
        code: "invalid_api_key".into(),
        message: "Incorrect API key provided.".into(),
    }));
    let rev3 = dedicated_revision(&compute, &agent, 3, chat_document());
    let wrong = key_context(WRONG_KEY);
    compute
        .prepare_revision(&rev3, &wrong)
        .await
        .expect("prepare 3");
    let err = compute
        .activate_revision(&rev3, &wrong)
        .await
        .expect_err("a wrong key fails");
    assert_eq!(
        (err.class, err.code),
        (
            FailureClass::Permanent,
            ReasonCode::RuntimeAuthenticationFailed
        ),
        "{err:?}"
    );
    assert!(!format!("{err:?} {:?}", err.output).contains(WRONG_KEY));
    assert!(
        kubelet.harnesses().is_empty(),
        "the held harness is stopped"
    );
    model.fail_with(None);

    // 7. Delete leaves nothing of the Agent.
    compute.delete_agent(&agent).await.expect("delete");
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
        let names = fake.names(resource, &tenant);
        assert!(
            !names.iter().any(|n| n.contains(&h)),
            "{resource}: {names:?}"
        );
    }
    eprintln!(
        "kubernetes dedicated: activated in {:.1} s (pairing and a gateway re-roll included), \
         chat answered in {:.1} s, redeploy {:.1} s",
        activated_after.as_secs_f64(),
        chat_after.as_secs_f64(),
        redeploy_after.as_secs_f64()
    );
}

/// The local port the kubelet runs Deployment `deployment`'s gateway on.
fn gateway_port(kubelet: &occ_testkit::kubelet::FakeKubelet, deployment: &str) -> u16 {
    kubelet
        .gateways()
        .into_iter()
        .find(|g| g.deployment == deployment && g.ready)
        .expect("a ready gateway")
        .port
}

async fn conformance_connect(
    compute: &KubernetesCompute,
    agent: &AgentTarget,
) -> occ_gateway::Session {
    occ_testkit::compute_conformance::connect(compute, agent)
        .await
        .expect("session")
}
