//! The Kubernetes Configuration and Secret Drivers, driven through the real `kube` client over
//! HTTP against occ-testkit's fake API server: the shared Configuration conformance suite, the
//! exact objects sent (golden files under `tests/golden/`), refusal of foreign and malformed
//! objects without writing, tenant namespace discovery, optimistic concurrency, preconditions,
//! retries and permission errors. An ignored test runs the conformance suite against a real
//! cluster on request (see `configuration_conformance_against_a_real_cluster`).

use std::path::PathBuf;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::Generation;
use occ_core::{AgentId, ConfigurationId, NamespaceId, RevisionId, SecretId, Timestamp};
use occ_drivers::DriverError;
use occ_drivers::compute::{Convergence, FailureClass, NamespaceHook as _, NamespaceTarget};
use occ_drivers::configuration::{
    ConfigurationDriver, DocumentKey, KubernetesConfigurationDriver, configmap_name,
};
use occ_drivers::kubernetes::{
    KubeClient, KubernetesAuth, TenantAccess, TenantNamespaces, tenant_namespace_name,
};
use occ_drivers::secret::{KubernetesSecretDriver, SecretDriver};
use occ_testkit::kube::FakeKube;
use serde_json::{Map, Value, json};

fn doc(v: Value) -> Map<String, Value> {
    v.as_object().expect("object").clone()
}

/// Seeds the tenant namespace the Kubernetes Compute Driver would have provisioned.
fn provision(fake: &FakeKube, ns: &NamespaceId) -> String {
    let name = tenant_namespace_name(ns);
    fake.seed(
        "namespaces",
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "occ", "openclaw.dev/namespace": ns.as_str()},
            "annotations": {"openclaw.dev/namespace-id": ns.as_str()},
        }}),
    );
    name
}

fn golden(name: &str, actual: &Value) {
    occ_testkit::golden::assert_golden(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        name,
        actual,
    );
}

fn fixed_key<'a>(ns: &'a NamespaceId, id: &'a ConfigurationId, g: u64) -> DocumentKey<'a> {
    DocumentKey {
        namespace_id: ns,
        configuration_id: id,
        generation: Generation::new(g).expect("generation"),
        created_at: Timestamp::parse_canonical("2026-11-29T12:00:00.000Z").expect("time"),
    }
}

fn ids() -> (NamespaceId, ConfigurationId) {
    (
        "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50"
            .parse()
            .expect("ns"),
        "cfg_0b0c9a5e-8d1f-4f5e-9a55-3c1f0b2c7d11"
            .parse()
            .expect("cfg"),
    )
}

#[tokio::test]
async fn configuration_conformance_against_the_fake_api_server() {
    let fake = FakeKube::start().await;
    let ns = NamespaceId::generate();
    provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    occ_testkit::configuration_conformance::run(&driver, &ns).await;
}

#[tokio::test]
async fn configuration_conformance_on_the_filesystem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let driver = ConfigurationDriver::Filesystem(
        occ_drivers::configuration::FilesystemConfigurationDriver::new(dir.path().join("c"))
            .expect("driver"),
    );
    occ_testkit::configuration_conformance::run(&driver, &NamespaceId::generate()).await;
}

/// Opt-in: the same suite against a real cluster. Run with
/// `OCC_TEST_KUBECONFIG=/abs/kubeconfig OCC_TEST_KUBE_CONTEXT=ctx cargo test -p occ-drivers --test kubernetes -- --ignored`.
/// It creates a labelled tenant namespace and deletes it afterwards.
#[tokio::test]
#[ignore = "needs a real cluster (OCC_TEST_KUBECONFIG, OCC_TEST_KUBE_CONTEXT)"]
#[expect(
    clippy::disallowed_methods,
    reason = "an opt-in run configured by the operator's variables"
)]
async fn configuration_conformance_against_a_real_cluster() {
    let path = std::env::var_os("OCC_TEST_KUBECONFIG").expect("OCC_TEST_KUBECONFIG is required");
    let context =
        std::env::var("OCC_TEST_KUBE_CONTEXT").expect("OCC_TEST_KUBE_CONTEXT is required");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = KubeClient::connect(&KubernetesAuth::Kubeconfig {
        path: path.into(),
        context,
    })
    .await
    .expect("kubeconfig");
    let ns = NamespaceId::generate();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(kube.client());
    let manifest: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
        "metadata": {"name": tenant_namespace_name(&ns),
            "labels": {"app.kubernetes.io/managed-by": "occ", "openclaw.dev/namespace": ns.as_str()},
            "annotations": {"openclaw.dev/namespace-id": ns.as_str()}}
    }))
    .expect("namespace");
    namespaces
        .create(&Default::default(), &manifest)
        .await
        .expect("create the tenant namespace");
    let driver = ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(kube));
    occ_testkit::configuration_conformance::run(&driver, &ns).await;
    namespaces
        .delete(&tenant_namespace_name(&ns), &Default::default())
        .await
        .expect("delete the tenant namespace");
}

#[tokio::test]
async fn the_configmap_is_exactly_the_reviewed_object_and_updates_carry_the_observed_version() {
    let fake = FakeKube::start().await;
    let (ns, id) = ids();
    let tenant = provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let v1 = doc(json!({"gateway": {"mode": "local"},
        "models": {"providers": {"openai": {"apiKey": {"source": "env", "provider": "default", "id": "OPENAI_API_KEY"}}}}}));
    driver
        .write(fixed_key(&ns, &id, 1), &v1, false)
        .await
        .expect("create");
    let create = fake.sent("create", Some("configmaps"));
    assert_eq!(create.namespace, tenant);
    golden(
        "configuration-configmap.json",
        create.body.as_ref().expect("body"),
    );

    let stored = fake
        .object("configmaps", &tenant, &configmap_name(&id))
        .expect("stored");
    let observed = stored["metadata"]["resourceVersion"].clone();
    fake.clear_requests();
    let v2 = doc(json!({"gateway": {"mode": "local"}}));
    driver
        .write(fixed_key(&ns, &id, 2), &v2, true)
        .await
        .expect("update");
    let update = fake.sent("update", None);
    let body = update.body.expect("body");
    assert_eq!(
        body["metadata"]["resourceVersion"], observed,
        "replace carries the observed version"
    );
    assert_eq!(
        body["metadata"]["annotations"]["openclaw.dev/configuration-generation"],
        "2"
    );
    assert_eq!(
        body["data"]["openclaw.json"],
        serde_json::to_string(&v2).expect("json")
    );
    // Only get and update: never list or watch ConfigMaps, never touch other resources.
    for r in fake.requests() {
        assert!(
            (r.resource == "configmaps" && matches!(r.verb.as_str(), "get" | "update"))
                || (r.resource == "namespaces" && r.verb == "list"),
            "unexpected request {r:?}"
        );
    }
    // The committed generation is 2 now; asking for 1 is refused (never the wrong document).
    assert!(matches!(
        driver.read(fixed_key(&ns, &id, 1)).await,
        Err(DriverError::Unavailable(_))
    ));
}

#[tokio::test]
async fn concurrent_updates_conflict_instead_of_overwriting() {
    let fake = FakeKube::start().await;
    let ns = NamespaceId::generate();
    provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let id = ConfigurationId::generate();
    let key = |g| fixed_key(&ns, &id, g);
    driver
        .write(key(1), &doc(json!({"n": 1})), false)
        .await
        .expect("create");
    // Both writers read generation 1 at the same resourceVersion before either replaces.
    fake.set_latency(Duration::from_millis(150));
    let (doc_a, doc_b) = (doc(json!({"writer": "a"})), doc(json!({"writer": "b"})));
    let (a, b) = tokio::join!(
        driver.write(key(2), &doc_a, true),
        driver.write(key(2), &doc_b, true),
    );
    fake.set_latency(Duration::ZERO);
    let outcomes = [a.is_ok(), b.is_ok()];
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "exactly one writer wins: {outcomes:?}"
    );
    let loser = if outcomes[0] { b } else { a };
    assert!(matches!(loser, Err(DriverError::Conflict(_))), "{loser:?}");
    let stored = driver.read(key(2)).await.expect("read");
    let winner = if outcomes[0] { "a" } else { "b" };
    assert_eq!(
        stored,
        doc(json!({"writer": winner})),
        "the loser did not overwrite"
    );
}

#[tokio::test]
async fn undo_never_clobbers_a_later_change() {
    let fake = FakeKube::start().await;
    let ns = NamespaceId::generate();
    let tenant = provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let id = ConfigurationId::generate();
    let key = |g| fixed_key(&ns, &id, g);
    driver
        .write(key(1), &doc(json!({"n": 1})), false)
        .await
        .expect("create");
    let receipt = driver
        .write(key(2), &doc(json!({"n": 2})), true)
        .await
        .expect("update");
    // Someone changes the object after our write (e.g. a later update).
    fake.mutate("configmaps", &tenant, &configmap_name(&id), |o| {
        o["metadata"]["labels"]["team"] = json!("x");
    });
    assert!(matches!(
        driver.undo(key(2), &receipt).await,
        Err(DriverError::Conflict(_))
    ));
    assert_eq!(
        driver.read(key(2)).await.expect("kept"),
        doc(json!({"n": 2}))
    );
}

#[tokio::test]
async fn foreign_and_malformed_configmaps_are_refused_and_never_overwritten() {
    type Mutation = fn(&mut Value);
    let cases: [(&str, Mutation); 13] = [
        ("extra data entry", |o| o["data"]["other"] = json!("x")),
        ("binary data", |o| o["binaryData"] = json!({"b": "AA=="})),
        ("malformed JSON", |o| {
            o["data"]["openclaw.json"] = json!("{not json")
        }),
        ("array document", |o| {
            o["data"]["openclaw.json"] = json!("[1]")
        }),
        ("foreign manager", |o| {
            o["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("helm")
        }),
        ("other namespace label", |o| {
            o["metadata"]["labels"]["openclaw.dev/namespace"] = json!("ns_x")
        }),
        ("other configuration annotation", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-id"] = json!("cfg_x")
        }),
        ("generation 0", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-generation"] = json!("0")
        }),
        ("generation 01", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-generation"] = json!("01")
        }),
        ("generation 2^64", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-generation"] =
                json!("18446744073709551616")
        }),
        ("other kind", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-kind"] = json!("preset")
        }),
        ("other creation time", |o| {
            o["metadata"]["annotations"]["openclaw.dev/configuration-created-at"] =
                json!("2020-01-01T00:00:00.000Z")
        }),
        ("1 MiB document", |o| {
            o["data"]["openclaw.json"] =
                json!(format!("{{\"pad\":\"{}\"}}", "x".repeat(1024 * 1024)))
        }),
    ];
    let fake = FakeKube::start().await;
    let ns = NamespaceId::generate();
    let tenant = provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    for (what, mutation) in cases {
        let id = ConfigurationId::generate();
        let key = |g| fixed_key(&ns, &id, g);
        driver
            .write(key(1), &doc(json!({"n": 1})), false)
            .await
            .expect("create");
        let name = configmap_name(&id);
        fake.mutate("configmaps", &tenant, &name, mutation);
        let tampered = fake.object("configmaps", &tenant, &name).expect("stored");
        assert!(
            matches!(driver.read(key(1)).await, Err(DriverError::Corrupt(_))),
            "{what}: read refused"
        );
        assert!(
            matches!(
                driver.write(key(2), &doc(json!({"n": 2})), true).await,
                Err(DriverError::Corrupt(_))
            ),
            "{what}: update refused"
        );
        assert!(
            driver
                .prune(&ns, &id, key(1).created_at, None)
                .await
                .is_err(),
            "{what}: delete refused"
        );
        assert_eq!(
            fake.object("configmaps", &tenant, &name)
                .expect("still there"),
            tampered,
            "{what}: never overwritten or deleted"
        );
    }
}

#[tokio::test]
async fn tenant_namespace_discovery_is_exact() {
    let fake = FakeKube::start().await;
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let id = ConfigurationId::generate();

    // Not provisioned yet: unavailable (503), nothing written.
    let ns = NamespaceId::generate();
    assert!(matches!(
        driver
            .write(fixed_key(&ns, &id, 1), &doc(json!({})), false)
            .await,
        Err(DriverError::Unavailable(_))
    ));
    // Terminating: unavailable.
    let tenant = provision(&fake, &ns);
    fake.mutate("namespaces", "", &tenant, |o| {
        o["status"]["phase"] = json!("Terminating")
    });
    assert!(matches!(
        driver
            .write(fixed_key(&ns, &id, 1), &doc(json!({})), false)
            .await,
        Err(DriverError::Unavailable(_))
    ));
    // Annotation disagrees with the label: not ours.
    fake.mutate("namespaces", "", &tenant, |o| {
        o["status"]["phase"] = json!("Active");
        o["metadata"]["annotations"]["openclaw.dev/namespace-id"] = json!("ns_other");
    });
    assert!(matches!(
        driver
            .write(fixed_key(&ns, &id, 1), &doc(json!({})), false)
            .await,
        Err(DriverError::Corrupt(_))
    ));
    // Two namespaces claim the same occ Namespace: refused.
    let ns2 = NamespaceId::generate();
    provision(&fake, &ns2);
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": "impostor",
        "labels": {"app.kubernetes.io/managed-by": "occ", "openclaw.dev/namespace": ns2.as_str()},
        "annotations": {"openclaw.dev/namespace-id": ns2.as_str()}}}),
    );
    assert!(matches!(
        driver
            .write(fixed_key(&ns2, &id, 1), &doc(json!({})), false)
            .await,
        Err(DriverError::Corrupt(_))
    ));
    // A managed namespace at another name is refused; an adopted one (external) is accepted.
    let ns3 = NamespaceId::generate();
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "occ", "openclaw.dev/namespace": ns3.as_str()},
        "annotations": {"openclaw.dev/namespace-id": ns3.as_str()}}}),
    );
    assert!(matches!(
        driver
            .write(fixed_key(&ns3, &id, 1), &doc(json!({})), false)
            .await,
        Err(DriverError::Corrupt(_))
    ));
    fake.mutate("namespaces", "", "team-a", |o| {
        o["metadata"]["annotations"]["openclaw.dev/namespace-lifecycle"] = json!("external");
        o["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .remove("app.kubernetes.io/managed-by");
    });
    driver
        .write(
            fixed_key(&ns3, &id, 1),
            &doc(json!({"adopted": true})),
            false,
        )
        .await
        .expect("adopted namespace");
    assert!(
        fake.object("configmaps", "team-a", &configmap_name(&id))
            .is_some()
    );
    // Once found, the placement is remembered: later operations do not list namespaces again
    // (the ConfigMap's own marks are still checked on every read).
    fake.clear_requests();
    driver.read(fixed_key(&ns3, &id, 1)).await.expect("read");
    assert!(
        fake.requests().iter().all(|r| r.resource != "namespaces"),
        "{:?}",
        fake.requests()
    );
}

#[tokio::test]
async fn transient_failures_are_retried_and_permissions_are_named() {
    let fake = FakeKube::start().await;
    let ns = NamespaceId::generate();
    let tenant = provision(&fake, &ns);
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let id = ConfigurationId::generate();
    let key = |g| fixed_key(&ns, &id, g);

    // 429 then 500 on the create: retried, created once.
    fake.fail_next(1, 429, Some("create"), Some("configmaps"));
    fake.fail_next(1, 500, Some("create"), Some("configmaps"));
    driver
        .write(key(1), &doc(json!({"n": 1})), false)
        .await
        .expect("retried create");
    assert_eq!(fake.names("configmaps", &tenant), vec![configmap_name(&id)]);

    // Three failures in a row exhaust the attempts: unavailable.
    fake.fail_next(3, 503, Some("get"), Some("configmaps"));
    assert!(matches!(
        driver.read(key(1)).await,
        Err(DriverError::Unavailable(_))
    ));
    driver.read(key(1)).await.expect("recovered");

    // A create applied whose answer was lost: the retry finds its own object.
    let id2 = ConfigurationId::generate();
    let key2 = fixed_key(&ns, &id2, 1);
    let manifest = KubernetesConfigurationDriver::manifest(key2, &tenant, &doc(json!({"n": 1})))
        .expect("manifest");
    fake.seed(
        "configmaps",
        &tenant,
        serde_json::to_value(&manifest).expect("json"),
    );
    driver
        .write(key2, &doc(json!({"n": 1})), false)
        .await
        .expect("own object adopted");
    // ...but an object with other content at that name is a conflict.
    let id3 = ConfigurationId::generate();
    let key3 = fixed_key(&ns, &id3, 1);
    let other = KubernetesConfigurationDriver::manifest(key3, &tenant, &doc(json!({"n": 9})))
        .expect("manifest");
    fake.seed(
        "configmaps",
        &tenant,
        serde_json::to_value(&other).expect("json"),
    );
    assert!(matches!(
        driver.write(key3, &doc(json!({"n": 1})), false).await,
        Err(DriverError::Conflict(_))
    ));

    // Missing RBAC: a dependency error naming the verb, resource and namespace.
    fake.deny("update", "configmaps");
    match driver.write(key(2), &doc(json!({"n": 2})), true).await {
        Err(DriverError::Unavailable(message)) => {
            assert!(
                message.contains("update configmaps in namespace"),
                "{message}"
            );
            assert!(message.contains("403"), "{message}");
        }
        other => panic!("expected a permission error, got {other:?}"),
    }
    fake.allow_all();
    // Deletion carries uid and resourceVersion preconditions.
    fake.clear_requests();
    driver
        .prune(&ns, &id, key(1).created_at, None)
        .await
        .expect("delete");
    let delete = fake.sent("delete", None);
    let preconditions = &delete.body.expect("delete options")["preconditions"];
    assert!(
        preconditions["uid"].is_string() && preconditions["resourceVersion"].is_string(),
        "{preconditions}"
    );
}

#[tokio::test]
async fn secrets_round_trip_with_ownership_checks() {
    let fake = FakeKube::start().await;
    let ns: NamespaceId = "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50"
        .parse()
        .expect("ns");
    let tenant = provision(&fake, &ns);
    let driver = SecretDriver::Kubernetes(KubernetesSecretDriver::new(fake.occ_client()));
    let id: SecretId = "sec_7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        .parse()
        .expect("sec");
    let locator = driver.put(&ns, &id, "s3cr3t-v1").await.expect("put");
    let create = fake.sent("create", Some("secrets"));
    let mut body = create.body.expect("body");
    // The name's last part is random; everything else is reviewed.
    let name = body["metadata"]["name"].as_str().expect("name").to_owned();
    assert!(name.starts_with("secret-") && name.len() <= 63, "{name}");
    body["metadata"]["name"] = json!("secret-<ns>-<id>-<random>");
    body["stringData"]["value"] = json!("<value>");
    golden("secret.json", &body);
    assert!(
        locator.starts_with(&format!("{tenant}/{name}/")),
        "{locator}"
    );
    assert!(!locator.contains("s3cr3t"));

    driver.verify(&ns, &id, &locator).await.expect("verify");
    assert_eq!(
        driver
            .with_value(&ns, &id, &locator, str::to_owned)
            .await
            .expect("value"),
        "s3cr3t-v1"
    );
    let again = driver
        .replace(&ns, &id, &locator, "s3cr3t-v2")
        .await
        .expect("replace");
    assert_eq!(again, locator, "replacement keeps the object");
    assert_eq!(
        driver
            .with_value(&ns, &id, &locator, str::to_owned)
            .await
            .expect("value"),
        "s3cr3t-v2"
    );

    // Another Secret id, or the object replaced by someone else (new uid): refused.
    let other = SecretId::generate();
    assert!(matches!(
        driver.verify(&ns, &other, &locator).await,
        Err(DriverError::Corrupt(_))
    ));
    let stored = fake.remove("secrets", &tenant, &name).expect("stored");
    let mut impostor = stored.clone();
    impostor["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("uid");
    fake.seed("secrets", &tenant, impostor);
    assert!(matches!(
        driver.verify(&ns, &id, &locator).await,
        Err(DriverError::Corrupt(_))
    ));
    assert!(driver.replace(&ns, &id, &locator, "x").await.is_err());
    assert!(
        driver.delete(&ns, &id, &locator).await.is_err(),
        "a foreign object is not deleted"
    );
    assert!(fake.object("secrets", &tenant, &name).is_some());
    fake.remove("secrets", &tenant, &name);
    fake.seed("secrets", &tenant, stored);

    // Malformed stored values are refused, never handed out.
    for (what, data) in [("empty", ""), ("NUL", "YQBi"), ("not UTF-8", "/w==")] {
        fake.mutate("secrets", &tenant, &name, |o| {
            o["data"]["value"] = json!(data)
        });
        assert!(
            driver.with_value(&ns, &id, &locator, |_| ()).await.is_err(),
            "{what} refused"
        );
    }

    // Delete with uid + resourceVersion preconditions; absent afterwards is fine.
    fake.clear_requests();
    driver.delete(&ns, &id, &locator).await.expect("delete");
    let delete = fake.sent("delete", None);
    let preconditions = &delete.body.expect("options")["preconditions"];
    assert_eq!(
        preconditions["uid"],
        json!(locator.rsplit('/').next().expect("uid"))
    );
    assert!(preconditions["resourceVersion"].is_string());
    driver.delete(&ns, &id, &locator).await.expect("idempotent");
    assert!(matches!(
        driver.verify(&ns, &id, &locator).await,
        Err(DriverError::NotFound)
    ));
    // No request or log line carried the value in clear outside the create/replace bodies.
    for r in fake.requests() {
        assert!(!format!("{r:?}").contains("s3cr3t"), "{r:?}");
    }
}

/// What a revision was handed is kept as one Secret per revision in the tenant namespace
/// (golden), only grows, is refused when someone else's object sits at its name, and all of an
/// Agent's records are deleted with it (listed by the Agent's label, uid preconditions).
#[tokio::test]
async fn handed_values_are_one_secret_per_revision_deleted_with_the_agent() {
    let fake = FakeKube::start().await;
    let ns: NamespaceId = "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f51"
        .parse()
        .expect("ns");
    let tenant = provision(&fake, &ns);
    let driver = SecretDriver::Kubernetes(KubernetesSecretDriver::new(fake.occ_client()));
    let agent: AgentId = "agt_1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
        .parse()
        .expect("agt");
    let rev: RevisionId = "rev_2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"
        .parse()
        .expect("rev");
    let rev2 = RevisionId::generate();
    assert!(
        driver
            .handed(&ns, &agent, &rev)
            .await
            .expect("none")
            .is_empty()
    );
    driver
        .record_handed(&ns, &agent, &rev, &["h4nded-old"])
        .await
        .expect("record");
    let create = fake.sent("create", Some("secrets"));
    let mut body = create.body.expect("body");
    body["stringData"]["values"] = json!("<values>");
    golden("secret-handed.json", &body);
    let name = body["metadata"]["name"].as_str().expect("name").to_owned();
    driver
        .record_handed(&ns, &agent, &rev, &["h4nded-new", "h4nded-old"])
        .await
        .expect("grow");
    driver
        .record_handed(&ns, &agent, &rev2, &["h4nded-2"])
        .await
        .expect("second revision");
    assert_eq!(
        driver.handed(&ns, &agent, &rev).await.expect("read"),
        ["h4nded-old", "h4nded-new"]
    );
    // Someone else's object at the record's name is refused, never read or overwritten.
    let stored = fake.remove("secrets", &tenant, &name).expect("stored");
    let mut foreign = stored.clone();
    foreign["metadata"]["labels"] = json!({});
    fake.seed("secrets", &tenant, foreign);
    assert!(matches!(
        driver.handed(&ns, &agent, &rev).await,
        Err(DriverError::Corrupt(_))
    ));
    assert!(
        driver
            .record_handed(&ns, &agent, &rev, &["x"])
            .await
            .is_err()
    );
    fake.remove("secrets", &tenant, &name);
    fake.seed("secrets", &tenant, stored);

    fake.clear_requests();
    driver.forget_handed(&ns, &agent).await.expect("forget");
    assert!(
        driver
            .handed(&ns, &agent, &rev)
            .await
            .expect("gone")
            .is_empty()
    );
    assert!(
        driver
            .handed(&ns, &agent, &rev2)
            .await
            .expect("gone")
            .is_empty()
    );
    let delete = fake.sent("delete", None);
    assert!(delete.body.expect("options")["preconditions"]["uid"].is_string());
    driver.forget_handed(&ns, &agent).await.expect("idempotent");
}

fn tenant_access() -> TenantAccess {
    TenantAccess {
        api: "occ-system/occ-api".parse().expect("sa"),
        worker: Some("occ-system/occ-worker".parse().expect("sa")),
        configurations: true,
        secrets: true,
        compute: false,
    }
}

#[tokio::test]
async fn tenant_namespaces_are_provisioned_exactly_and_idempotently() {
    let fake = FakeKube::start().await;
    let tenants = TenantNamespaces::new(fake.occ_client(), tenant_access());
    let (ns_id, _) = ids();
    let ns = NamespaceTarget {
        id: ns_id.clone(),
        name: "team-a".into(),
        existing_namespace: None,
    };
    assert_eq!(
        tenants.after_namespace_prepared(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let tenant = tenant_namespace_name(&ns_id);
    let mut sent: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .map(|r| json!({"resource": r.resource, "namespace": r.namespace, "body": r.body}))
        .collect();
    sent.sort_by_key(|v| v.to_string());
    golden("tenant-namespace.json", &Value::Array(sent));
    // The Configuration and Secret Drivers find and use what was provisioned.
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let id = ConfigurationId::generate();
    driver
        .write(fixed_key(&ns_id, &id, 1), &doc(json!({"a": 1})), false)
        .await
        .expect("stored in the provisioned namespace");
    assert!(
        fake.object("configmaps", &tenant, &configmap_name(&id))
            .is_some()
    );

    // Idempotent: a second pass reads and writes nothing.
    fake.clear_requests();
    tenants.after_namespace_prepared(&ns).await.expect("again");
    assert!(
        fake.requests()
            .iter()
            .all(|r| matches!(r.verb.as_str(), "get" | "list")),
        "{:?}",
        fake.requests()
    );
    // Drift in a RoleBinding of ours (another subject) is repaired under its resourceVersion.
    fake.mutate("rolebindings", &tenant, "occ-configurations", |o| {
        o["subjects"] = json!([{"kind": "ServiceAccount", "name": "intruder", "namespace": "x"}]);
    });
    fake.clear_requests();
    tenants.after_namespace_prepared(&ns).await.expect("repair");
    let update = fake.sent("update", None);
    assert!(update.body.expect("body")["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        fake.object("rolebindings", &tenant, "occ-configurations")
            .expect("binding")["subjects"][0]["name"],
        json!("occ-api")
    );
    // A RoleBinding of ours pointing at another role (roleRef is immutable in Kubernetes) is
    // deleted under its uid and resourceVersion and created again.
    let before = fake
        .object("rolebindings", &tenant, "occ-secrets")
        .expect("binding");
    fake.mutate("rolebindings", &tenant, "occ-secrets", |o| {
        o["roleRef"]["name"] = json!("admin");
    });
    fake.clear_requests();
    tenants
        .after_namespace_prepared(&ns)
        .await
        .expect("recreate");
    let verbs: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.resource == "rolebindings" && !matches!(r.verb.as_str(), "get" | "list"))
        .map(|r| {
            if r.verb == "delete" {
                let options = r.body.expect("options");
                assert!(options["preconditions"]["uid"].is_string(), "{options}");
                assert!(
                    options["preconditions"]["resourceVersion"].is_string(),
                    "{options}"
                );
            }
            r.verb
        })
        .collect();
    assert_eq!(verbs, ["delete", "create"]);
    let after = fake
        .object("rolebindings", &tenant, "occ-secrets")
        .expect("binding");
    assert_eq!(after["roleRef"]["name"], json!("occ-tenant-secrets"));
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"]);
    // Only namespaces and RoleBindings are ever written: the rules are installed ClusterRoles.
    assert!(fake.names("roles", &tenant).is_empty());
    // Removal deletes the namespace (uid precondition) and is done once it is gone.
    fake.hold_namespace_deletion(true);
    assert_eq!(
        tenants.before_namespace_delete(&ns).await.expect("delete"),
        Convergence::Pending
    );
    let delete = fake.sent("delete", None);
    assert!(delete.body.expect("options")["preconditions"]["uid"].is_string());
    assert_eq!(
        tenants
            .before_namespace_delete(&ns)
            .await
            .expect("still terminating"),
        Convergence::Pending
    );
    fake.finish_namespace_deletion(&tenant);
    assert_eq!(
        tenants.before_namespace_delete(&ns).await.expect("gone"),
        Convergence::Done
    );
    assert!(fake.object("namespaces", "", &tenant).is_none());
}

#[tokio::test]
async fn tenant_provisioning_refuses_foreign_objects_and_names_missing_permissions() {
    let fake = FakeKube::start().await;
    let tenants = TenantNamespaces::new(fake.occ_client(), tenant_access());
    let target = |id: &NamespaceId| NamespaceTarget {
        id: id.clone(),
        name: "t".into(),
        existing_namespace: None,
    };

    // Someone else's namespace at the derived name: refused, untouched.
    let a = NamespaceId::generate();
    let seeded = fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": tenant_namespace_name(&a)}}),
    );
    let err = tenants
        .after_namespace_prepared(&target(&a))
        .await
        .expect_err("foreign");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::TenantObjectForeign)
    );
    assert_eq!(
        fake.object("namespaces", "", &tenant_namespace_name(&a)),
        Some(seeded)
    );
    assert!(
        tenants.before_namespace_delete(&target(&a)).await.is_err(),
        "never deleted"
    );
    assert!(
        fake.object("namespaces", "", &tenant_namespace_name(&a))
            .is_some()
    );

    // Another namespace already claims the occ Namespace: refused.
    let b = NamespaceId::generate();
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": "elsewhere",
        "labels": {"openclaw.dev/namespace": b.as_str()}}}),
    );
    let err = tenants
        .after_namespace_prepared(&target(&b))
        .await
        .expect_err("claimed");
    assert_eq!(err.code, ReasonCode::TenantObjectForeign);

    // A foreign RoleBinding at our name inside our namespace: refused, not overwritten.
    let c = NamespaceId::generate();
    let tenant = tenant_namespace_name(&c);
    fake.seed(
        "namespaces",
        "",
        serde_json::to_value(TenantNamespaces::namespace_manifest(&target(&c))).expect("json"),
    );
    let foreign_role = fake.seed(
        "rolebindings",
        &tenant,
        json!({"metadata": {"name": "occ-secrets"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}}),
    );
    let err = tenants
        .after_namespace_prepared(&target(&c))
        .await
        .expect_err("foreign role");
    assert_eq!(err.code, ReasonCode::TenantObjectForeign);
    assert_eq!(
        fake.object("rolebindings", &tenant, "occ-secrets"),
        Some(foreign_role)
    );

    // Missing permission: transient, naming verb, resource and namespace.
    let d = NamespaceId::generate();
    fake.deny("create", "namespaces");
    let err = tenants
        .after_namespace_prepared(&target(&d))
        .await
        .expect_err("403");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Transient, ReasonCode::KubernetesForbidden)
    );
    assert!(err.message.contains("create namespaces"), "{}", err.message);
    fake.allow_all();
    assert_eq!(
        tenants
            .after_namespace_prepared(&target(&d))
            .await
            .expect("after the grant"),
        Convergence::Done
    );
    // API server down: transient.
    fake.fail_next(3, 503, None, None);
    let err = tenants
        .after_namespace_prepared(&target(&d))
        .await
        .expect_err("503");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Transient, ReasonCode::KubernetesUnavailable)
    );
}

/// An operator's namespace named by `existingNamespace` is adopted only once the operator has
/// prepared it (exists, marked for adoption, restricted Pod Security, no NetworkPolicy occ does
/// not own): each missing step is a transient failure naming it. Adoption adds only occ's
/// label and annotation (under the namespace's resourceVersion) and the RoleBindings; the
/// Configuration Driver then stores there. A namespace of another occ Namespace, or one occ
/// provisioned, is refused for good. Release removes occ's RoleBindings and claim and leaves
/// the namespace and the operator's objects.
#[tokio::test]
async fn existing_namespaces_are_adopted_when_prepared_and_released_untouched() {
    let fake = FakeKube::start().await;
    let tenants = TenantNamespaces::new(
        fake.occ_client(),
        TenantAccess {
            compute: true,
            ..tenant_access()
        },
    )
    .with_quota(Some("pods=4,requests.memory=8Gi".parse().expect("quota")));
    let existing = "team-a-prod";
    let ns_id = NamespaceId::generate();
    let ns = NamespaceTarget {
        id: ns_id.clone(),
        name: "team-a".into(),
        existing_namespace: Some(existing.into()),
    };
    let not_ready = |needle: &str, err: occ_drivers::compute::ComputeError| {
        assert_eq!(
            (err.class, err.code),
            (
                FailureClass::Transient,
                ReasonCode::ExistingNamespaceNotReady
            ),
            "{err:?}"
        );
        assert!(
            err.message.contains(existing) && err.message.contains(needle),
            "{needle}: {err:?}"
        );
    };
    let ensure = || tenants.after_namespace_prepared(&ns);
    not_ready("does not exist", ensure().await.expect_err("missing"));
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": existing, "labels": {"team": "a"}}}),
    );
    not_ready(
        "openclaw.dev/namespace-lifecycle=external",
        ensure().await.expect_err("no consent"),
    );
    fake.mutate("namespaces", "", existing, |o| {
        o["metadata"]["annotations"] = json!({"openclaw.dev/namespace-lifecycle": "external"});
    });
    not_ready(
        "pod-security.kubernetes.io/enforce=restricted",
        ensure().await.expect_err("no restricted PSS"),
    );
    fake.mutate("namespaces", "", existing, |o| {
        o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = json!("restricted");
    });
    fake.seed(
        "networkpolicies",
        existing,
        json!({"metadata": {"name": "allow-all"}, "spec": {"podSelector": {}, "ingress": [{}]}}),
    );
    not_ready("allow-all", ensure().await.expect_err("foreign policy"));
    fake.remove("networkpolicies", existing, "allow-all");
    fake.seed(
        "rolebindings",
        existing,
        json!({"metadata": {"name": "operator-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
    );
    assert_eq!(ensure().await.expect("adopted"), Convergence::Done);

    let adopted = fake.object("namespaces", "", existing).expect("namespace");
    assert_eq!(
        adopted["metadata"]["labels"],
        json!({"team": "a", "pod-security.kubernetes.io/enforce": "restricted",
               "openclaw.dev/namespace": ns_id.as_str()}),
        "only the claim label is added; the namespace is not marked occ-managed"
    );
    assert_eq!(
        adopted["metadata"]["annotations"],
        json!({"openclaw.dev/namespace-lifecycle": "external",
               "openclaw.dev/namespace-id": ns_id.as_str()})
    );
    let claim = fake.sent("update", Some("namespaces"));
    assert!(claim.body.expect("body")["metadata"]["resourceVersion"].is_string());
    assert!(
        !fake
            .requests()
            .iter()
            .any(|r| r.resource == "namespaces" && r.verb == "create"),
        "no namespace is created"
    );
    assert_eq!(
        fake.names("rolebindings", existing),
        [
            "occ-compute",
            "occ-configurations",
            "occ-gateway-access",
            "occ-secret-reader",
            "occ-secrets",
            "operator-view"
        ]
    );
    assert_eq!(
        fake.names("namespaces", ""),
        [existing],
        "nothing provisioned"
    );
    assert_eq!(
        fake.object("resourcequotas", existing, "occ-quota")
            .expect("quota")["spec"],
        json!({"hard": {"pods": "4", "requests.memory": "8Gi"}})
    );
    // Idempotent.
    fake.clear_requests();
    assert_eq!(ensure().await.expect("again"), Convergence::Done);
    assert!(
        fake.requests()
            .iter()
            .all(|r| matches!(r.verb.as_str(), "get" | "list")),
        "{:?}",
        fake.requests()
    );
    // The Configuration Driver finds it through the claim.
    let driver =
        ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(fake.occ_client()));
    let cfg = ConfigurationId::generate();
    let key = fixed_key(&ns_id, &cfg, 1);
    driver
        .write(key, &doc(json!({"a": 1})), false)
        .await
        .expect("stored in the adopted namespace");
    assert!(
        fake.object("configmaps", existing, &configmap_name(&cfg))
            .is_some()
    );

    // Another occ Namespace cannot adopt it, nor can anyone adopt a namespace occ provisioned.
    let other = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "team-b".into(),
        existing_namespace: Some(existing.into()),
    };
    let err = tenants
        .after_namespace_prepared(&other)
        .await
        .expect_err("claimed");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::TenantObjectForeign)
    );
    let managed_id = NamespaceId::generate();
    let managed = provision(&fake, &managed_id);
    let err = tenants
        .after_namespace_prepared(&NamespaceTarget {
            id: NamespaceId::generate(),
            name: "team-c".into(),
            existing_namespace: Some(managed.clone()),
        })
        .await
        .expect_err("occ's own");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::TenantObjectForeign)
    );

    // Release (the occ Namespace is empty by then): occ's RoleBindings and claim go, the
    // namespace and the operator's objects stay.
    driver
        .prune(
            &ns_id,
            &cfg,
            Timestamp::parse_canonical("2026-11-29T12:00:00.000Z").expect("time"),
            None,
        )
        .await
        .expect("delete");
    assert!(fake.names("configmaps", existing).is_empty());
    fake.clear_requests();
    for _ in 0..2 {
        assert_eq!(
            tenants
                .before_namespace_delete(&ns)
                .await
                .expect("released"),
            Convergence::Done
        );
    }
    let released = fake.object("namespaces", "", existing).expect("kept");
    assert_eq!(
        released["metadata"]["labels"],
        json!({"team": "a", "pod-security.kubernetes.io/enforce": "restricted"})
    );
    assert_eq!(
        released["metadata"]["annotations"],
        json!({"openclaw.dev/namespace-lifecycle": "external"})
    );
    assert_eq!(fake.names("rolebindings", existing), ["operator-view"]);
    assert!(fake.names("resourcequotas", existing).is_empty());
    for r in fake.requests() {
        assert!(
            !(r.resource == "namespaces" && r.verb == "delete"),
            "an adopted namespace is never deleted"
        );
        if r.verb == "delete" {
            let body = r.body.expect("options");
            assert!(body["preconditions"]["uid"].is_string(), "{body}");
        }
    }
    // It can be adopted again afterwards (by a new occ Namespace).
    let again = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "team-a2".into(),
        existing_namespace: Some(existing.into()),
    };
    assert_eq!(
        tenants
            .after_namespace_prepared(&again)
            .await
            .expect("adopted again"),
        Convergence::Done
    );
}

/// `OCC_KUBERNETES_TENANT_QUOTA` becomes the ResourceQuota `occ-quota` of every tenant
/// namespace: created with exactly the configured limits, brought back to them (under its
/// resourceVersion) when changed, and a quota at that name that is not occ's is refused and left
/// alone. Without the setting no quota is written.
#[tokio::test]
async fn tenant_namespaces_carry_the_configured_quota() {
    let fake = FakeKube::start().await;
    let access = TenantAccess {
        compute: true,
        ..tenant_access()
    };
    let quota = "pods=20,requests.cpu=10,requests.memory=40Gi,limits.memory=80Gi,persistentvolumeclaims=20,requests.storage=400Gi";
    let tenants = TenantNamespaces::new(fake.occ_client(), access.clone())
        .with_quota(Some(quota.parse().expect("quota")));
    let ns = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "team-q".into(),
        existing_namespace: None,
    };
    let tenant = tenant_namespace_name(&ns.id);
    assert_eq!(
        tenants.after_namespace_prepared(&ns).await.expect("ensure"),
        Convergence::Done
    );
    let stored = fake
        .object("resourcequotas", &tenant, "occ-quota")
        .expect("quota");
    assert_eq!(
        stored["spec"],
        json!({"hard": {"pods": "20", "requests.cpu": "10", "requests.memory": "40Gi",
            "limits.memory": "80Gi", "persistentvolumeclaims": "20", "requests.storage": "400Gi"}})
    );
    assert_eq!(
        stored["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        json!("occ")
    );
    // Changed behind occ's back: restored under the observed resourceVersion.
    fake.mutate("resourcequotas", &tenant, "occ-quota", |o| {
        o["spec"]["hard"]["pods"] = json!("1000");
    });
    fake.clear_requests();
    tenants.after_namespace_prepared(&ns).await.expect("repair");
    let update = fake.sent("update", Some("resourcequotas"));
    assert!(update.body.expect("body")["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        fake.object("resourcequotas", &tenant, "occ-quota")
            .expect("quota")["spec"]["hard"]["pods"],
        json!("20")
    );
    // Someone else's quota at occ's name: refused, untouched.
    let other = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "team-r".into(),
        existing_namespace: None,
    };
    let other_tenant = tenant_namespace_name(&other.id);
    fake.seed(
        "namespaces",
        "",
        serde_json::to_value(TenantNamespaces::namespace_manifest(&other)).expect("json"),
    );
    let foreign = fake.seed(
        "resourcequotas",
        &other_tenant,
        json!({"metadata": {"name": "occ-quota"}, "spec": {"hard": {"pods": "1"}}}),
    );
    let err = tenants
        .after_namespace_prepared(&other)
        .await
        .expect_err("foreign quota");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::TenantObjectForeign)
    );
    assert_eq!(
        fake.object("resourcequotas", &other_tenant, "occ-quota"),
        Some(foreign)
    );
    // No setting, no quota.
    let plain = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "team-s".into(),
        existing_namespace: None,
    };
    TenantNamespaces::new(fake.occ_client(), access)
        .after_namespace_prepared(&plain)
        .await
        .expect("ensure");
    assert!(
        fake.names("resourcequotas", &tenant_namespace_name(&plain.id))
            .is_empty()
    );
}
