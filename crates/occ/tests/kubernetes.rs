//! The Kubernetes Configuration and Secret Drivers in the real binaries: `occ serve` and
//! `occ worker` configured with `OCC_KUBERNETES_AUTH=kubeconfig` against occ-testkit's fake API
//! server over HTTPS (its self-signed certificate as the kubeconfig's authority). The worker
//! provisions each Namespace's tenant namespace (so `default` becomes ready), Configurations
//! and Secrets land in it as ConfigMaps and Secrets, and deleting a Namespace removes it.
//! Startup refuses a kubeconfig that names a missing context or an `http://` server.

mod support;

use std::time::Duration;

use occ_core::NamespaceId;
use occ_drivers::kubernetes::tenant_namespace_name;
use occ_store::Backend;
use occ_testkit::kube::FakeKube;
use serde_json::json;
use support::Stack;

fn kubernetes_env(kubeconfig: &std::path::Path) -> Vec<(&'static str, String)> {
    vec![
        ("OCC_CONFIGURATION_DRIVER", "kubernetes".into()),
        ("OCC_SECRET_DRIVER", "kubernetes".into()),
        ("OCC_KUBERNETES_AUTH", "kubeconfig".into()),
        ("OCC_KUBECONFIG", kubeconfig.display().to_string()),
        ("OCC_KUBERNETES_CONTEXT", "fake".into()),
        (
            "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
            "occ-system/occ-api".into(),
        ),
        (
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
            "occ-system/occ-worker".into(),
        ),
    ]
}

fn body(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("json")
}

#[tokio::test]
async fn configurations_and_secrets_live_in_the_cluster() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeKube::start_tls().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).expect("kubeconfig");
    // `default` becomes ready only once the worker provisioned its tenant namespace.
    let s = Stack::start_with(Backend::Sqlite, "29960-29969", &kubernetes_env(&kubeconfig)).await;
    let default: NamespaceId = s.ns.parse().expect("namespace id");
    let tenant = tenant_namespace_name(&default);
    assert!(fake.object("namespaces", "", &tenant).is_some());
    assert!(
        fake.object("rolebindings", &tenant, "occ-configurations")
            .is_some()
    );

    let cfg = s
        .call(
            reqwest::Method::POST,
            &format!("/namespaces/{}/configurations", s.ns),
            Some(body(
                json!({"kind": "agent", "values": {"gateway": {"mode": "local"}}}),
            )),
        )
        .await;
    assert_eq!(cfg.0.as_u16(), 201, "{}", cfg.1);
    let cfg_id = cfg.1["data"]["id"].as_str().expect("id").to_owned();
    let stored = fake
        .object(
            "configmaps",
            &tenant,
            &occ_drivers::configuration::configmap_name(&cfg_id.parse().expect("cfg")),
        )
        .expect("the ConfigMap");
    assert_eq!(
        stored["data"]["openclaw.json"],
        r#"{"gateway":{"mode":"local"}}"#
    );
    let got = s
        .get(&format!("/namespaces/{}/configurations/{cfg_id}", s.ns))
        .await;
    assert_eq!(got["data"]["values"], json!({"gateway": {"mode": "local"}}));

    let secret = s
        .call(
            reqwest::Method::POST,
            &format!("/namespaces/{}/secrets", s.ns),
            Some(body(
                json!({"name": "openai", "value": "sk-cluster-canary"}),
            )),
        )
        .await;
    assert_eq!(secret.0.as_u16(), 201, "{}", secret.1);
    assert_eq!(fake.names("secrets", &tenant).len(), 1);

    // A new Namespace gets its own tenant namespace; deleting it removes it again.
    let created = s
        .call(
            reqwest::Method::POST,
            "/namespaces",
            Some(body(json!({"name": "team-k"}))),
        )
        .await;
    assert_eq!(created.0.as_u16(), 201, "{}", created.1);
    let team: NamespaceId = created.1["data"]["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("id");
    let team_tenant = tenant_namespace_name(&team);
    s.wait_for("team-k ready", async || {
        s.get(&format!("/namespaces/{team}")).await["data"]["status"] == "ready"
    })
    .await;
    assert!(fake.object("namespaces", "", &team_tenant).is_some());
    let deleted = s
        .call(
            reqwest::Method::DELETE,
            &format!("/namespaces/{team}"),
            None,
        )
        .await;
    assert_eq!(deleted.0.as_u16(), 202, "{}", deleted.1);
    s.wait_for("the tenant namespace removed", async || {
        fake.object("namespaces", "", &team_tenant).is_none()
    })
    .await;

    // No log line of either process carries the Secret's value.
    for log in ["serve.log", "worker-1.log"] {
        let text = std::fs::read_to_string(s.dir.path().join(log)).unwrap_or_default();
        assert!(!text.contains("sk-cluster-canary"), "{log} leaks the value");
    }
}

#[tokio::test]
async fn startup_refuses_a_weakened_or_wrong_kubeconfig() {
    let fake = FakeKube::start().await; // plain http: must be refused
    let dir = tempfile::tempdir().expect("tempdir");
    let http = dir.path().join("http");
    std::fs::write(&http, fake.kubeconfig()).expect("kubeconfig");
    let tls = FakeKube::start_tls().await;
    let wrong_context = dir.path().join("wrong-context");
    std::fs::write(
        &wrong_context,
        tls.kubeconfig()
            .replace("- name: fake\n  context:", "- name: other\n  context:"),
    )
    .expect("kubeconfig");
    let db = occ_testkit::TestDb::new(Backend::Sqlite).await;
    support::bootstrap(&db.url, dir.path());
    for (file, expected) in [(&http, "https"), (&wrong_context, "exactly once")] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_occ"));
        cmd.arg("worker")
            .env_clear()
            .env("OCC_DATABASE_URL", &db.url)
            .env("OCC_DATA_DIR", dir.path().join("data"))
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "0");
        for (k, v) in kubernetes_env(file) {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::task::spawn_blocking(move || cmd.output().expect("run occ worker")),
        )
        .await
        .expect("exits")
        .expect("join");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("OCC_KUBERNETES_AUTH"), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

/// `OCC_COMPUTE_DRIVER=kubernetes` in the real binaries: the worker provisions the tenant
/// namespace with the worker's and the API's access, deploys an Agent as a Deployment (run by
/// the test kubelet as a real gateway), the API reads and writes its workspace files through
/// `pods/portforward`, and stop and delete remove the workload.
#[tokio::test]
async fn agents_run_as_deployments() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeKube::start_tls().await;
    let _kubelet = occ_testkit::kubelet::FakeKubelet::start(&fake);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).expect("kubeconfig");
    let mut env = kubernetes_env(&kubeconfig);
    env.push(("OCC_COMPUTE_DRIVER", "kubernetes".into()));
    env.push((
        "OCC_KUBERNETES_GATEWAY_IMAGE",
        "registry.example/occ@sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
    ));
    env.push((
        "OCC_KUBERNETES_TENANT_QUOTA",
        "pods=4,requests.memory=16Gi".into(),
    ));
    let mut s = Stack::start_with(Backend::Sqlite, "29970-29979", &env).await;
    let default: NamespaceId = s.ns.parse().expect("namespace id");
    let tenant = tenant_namespace_name(&default);
    assert_eq!(
        fake.object("resourcequotas", &tenant, "occ-quota")
            .expect("the tenant quota")["spec"]["hard"],
        json!({"pods": "4", "requests.memory": "16Gi"})
    );
    for binding in [
        "occ-compute",
        "occ-gateway-access",
        "occ-configurations",
        "occ-secrets",
    ] {
        assert!(
            fake.object("rolebindings", &tenant, binding).is_some(),
            "{binding}: {:?}",
            fake.names("rolebindings", &tenant)
        );
    }

    let cfg = s
        .configuration(
            json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
                              "plugins": {"enabled": false}, "cron": {"enabled": false}}),
        )
        .await;
    let agent = s.agent("k8s-agent", &cfg).await;
    let rev = s.deploy(&agent).await;
    let settled = s.settled(&agent, &rev).await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let deployments = fake.names("deployments", &tenant);
    assert_eq!(deployments.len(), 1, "{deployments:?}");

    // Workspace files through the API: portforward to the gateway Pod.
    let path = format!(
        "/namespaces/{}/agents/{agent}/workspace/files/USER.md",
        s.ns
    );
    let edited = "# USER.md\n\nWritten through a port-forward.\n";
    let (status, r) = s
        .call(
            reqwest::Method::PUT,
            &path,
            Some(body(json!({"content": edited}))),
        )
        .await;
    assert_eq!(status.as_u16(), 200, "{r}");
    let (status, r) = s.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status.as_u16(), 200, "{r}");
    assert_eq!(r["data"]["content"], edited);
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.resource == "pods/portforward" && r.status == 101),
        "the API reached the gateway through pods/portforward"
    );

    // Stop: the Deployment scales to 0 and the files answer 503.
    s.stop(&agent).await;
    s.wait_for("the stop", async || {
        s.agent_state(&agent).await["activeRevisionId"].is_null()
    })
    .await;
    let d = fake
        .object("deployments", &tenant, &deployments[0])
        .expect("deployment");
    assert_eq!(d["spec"]["replicas"], 0);
    let (status, _) = s.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status.as_u16(), 503);

    // Delete: the Agent's objects go; the tenant namespace stays with the Namespace.
    let (status, r) = s
        .call(
            reqwest::Method::DELETE,
            &format!("/namespaces/{}/agents/{agent}", s.ns),
            None,
        )
        .await;
    assert_eq!(status.as_u16(), 202, "{r}");
    s.wait_for("agent objects removed", async || {
        fake.names("deployments", &tenant).is_empty()
            && fake.names("persistentvolumeclaims", &tenant).is_empty()
    })
    .await;

    // An operator's namespace adopted through existingNamespace: the worker claims it, the
    // Agent runs there, the API finds it there (through the claim), and deleting the occ
    // Namespace gives the namespace back.
    let adopted = "ops-agents";
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": adopted,
            "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            "annotations": {"openclaw.dev/namespace-lifecycle": "external"}}}),
    );
    let (status, r) = s
        .call(
            reqwest::Method::POST,
            "/namespaces",
            Some(body(json!({"name": "ops", "existingNamespace": adopted}))),
        )
        .await;
    assert_eq!(status.as_u16(), 201, "{r}");
    let ops = r["data"]["id"].as_str().expect("id").to_owned();
    s.wait_for("ops ready", async || {
        s.get(&format!("/namespaces/{ops}")).await["data"]["status"] == "ready"
    })
    .await;
    assert!(
        fake.object("resourcequotas", adopted, "occ-quota")
            .is_some()
    );
    s.ns = ops.clone();
    let cfg = s
        .configuration(
            json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}},
                              "plugins": {"enabled": false}, "cron": {"enabled": false}}),
        )
        .await;
    let agent = s.agent("ops-agent", &cfg).await;
    let rev = s.deploy(&agent).await;
    let settled = s.settled(&agent, &rev).await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    assert_eq!(fake.names("deployments", adopted).len(), 1);
    let path = format!("/namespaces/{ops}/agents/{agent}/workspace/files/USER.md");
    let (status, r) = s
        .call(
            reqwest::Method::PUT,
            &path,
            Some(body(json!({"content": "# USER.md\n\nAdopted.\n"}))),
        )
        .await;
    assert_eq!(status.as_u16(), 200, "{r}");
    let (status, r) = s.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status.as_u16(), 200, "{r}");
    assert_eq!(r["data"]["content"], "# USER.md\n\nAdopted.\n");
    for (method, path) in [
        (
            reqwest::Method::DELETE,
            format!("/namespaces/{ops}/agents/{agent}"),
        ),
        (
            reqwest::Method::DELETE,
            format!("/namespaces/{ops}/configurations/{cfg}"),
        ),
    ] {
        let (status, r) = s.call(method, &path, None).await;
        assert!(status.is_success(), "{path}: {r}");
        if path.contains("/agents/") {
            s.wait_for("the adopted Agent removed", async || {
                let path = format!("/namespaces/{ops}/agents/{agent}");
                s.call(reqwest::Method::GET, &path, None).await.0.as_u16() == 404
            })
            .await;
        }
    }
    let (status, r) = s
        .call(reqwest::Method::DELETE, &format!("/namespaces/{ops}"), None)
        .await;
    assert_eq!(status.as_u16(), 202, "{r}");
    s.wait_for("the adopted namespace released", async || {
        fake.object("namespaces", "", adopted).expect("kept")["metadata"]["labels"]
            == json!({"pod-security.kubernetes.io/enforce": "restricted"})
    })
    .await;
    for resource in [
        "deployments",
        "persistentvolumeclaims",
        "configmaps",
        "secrets",
        "rolebindings",
        "resourcequotas",
    ] {
        assert!(
            fake.names(resource, adopted).is_empty(),
            "{resource}: {:?}",
            fake.names(resource, adopted)
        );
    }
}
