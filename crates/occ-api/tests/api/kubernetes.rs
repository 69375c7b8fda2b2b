//! The API over the Kubernetes Configuration and Secret Drivers (real kube client, fake API
//! server over HTTP): Configurations and Secrets stored as ConfigMaps and Secrets in the tenant
//! namespace, the compensating boundary between the database and the ConfigMap, and 503s (with
//! nothing half-written) when the tenant namespace is missing or a permission is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Method, StatusCode};
use occ_controller::FaultHooks;
use occ_core::NamespaceId;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::resource::NamespaceStatus;
use occ_drivers::compute::ComputeSelection;
use occ_drivers::configuration::{
    ConfigurationDriver, KubernetesConfigurationDriver, configmap_name,
};
use occ_drivers::kubernetes::tenant_namespace_name;
use occ_drivers::secret::{KubernetesSecretDriver, SecretDriver};
use occ_store::Backend;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::kube::FakeKube;
use serde_json::json;

use crate::common::{document, expect};

fn provision(fake: &FakeKube, ns: &NamespaceId) -> String {
    let name = tenant_namespace_name(ns);
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": name,
            "labels": {"app.kubernetes.io/managed-by": "occ", "openclaw.dev/namespace": ns.as_str()},
            "annotations": {"openclaw.dev/namespace-id": ns.as_str()}}}),
    );
    name
}

async fn app_on(fake: &FakeKube, hooks: FaultHooks) -> TestApp {
    app_with(fake, hooks, None).await
}

/// The app over the Kubernetes Configuration and Secret Drivers, admitting for `compute`
/// (default: the process Driver's selection).
async fn app_with(
    fake: &FakeKube,
    hooks: FaultHooks,
    compute: Option<ComputeSelection>,
) -> TestApp {
    let kube = fake.occ_client();
    TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            hooks,
            configurations: Some(ConfigurationDriver::Kubernetes(
                KubernetesConfigurationDriver::new(kube.clone()),
            )),
            secrets: Some(SecretDriver::Kubernetes(KubernetesSecretDriver::new(kube))),
            compute,
            ..Default::default()
        },
    )
    .await
}

#[tokio::test]
async fn configurations_live_in_configmaps_under_one_compensating_boundary() {
    let fake = FakeKube::start().await;
    let fail = Arc::new(AtomicBool::new(false));
    let flag = fail.clone();
    let hooks = FaultHooks {
        before_configuration_commit: Some(Arc::new(move || {
            if flag.load(Ordering::SeqCst) {
                Err(occ_core::Error::unavailable("injected commit failure"))
            } else {
                Ok(())
            }
        })),
    };
    let app = app_on(&fake, hooks).await;
    let tenant = provision(&fake, &app.default_ns);
    let admin = app.admin();
    let base = format!("/namespaces/{}/configurations", app.default_ns);

    let r = expect(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"kind": "agent", "values": document()})),
        )
        .await,
        StatusCode::CREATED,
    );
    let id = r.data()["id"].as_str().expect("id").to_owned();
    let cm_name = configmap_name(&id.parse().expect("cfg id"));
    let stored = fake
        .object("configmaps", &tenant, &cm_name)
        .expect("ConfigMap created");
    assert_eq!(
        stored["metadata"]["annotations"]["openclaw.dev/configuration-generation"],
        "1"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(
            stored["data"]["openclaw.json"].as_str().expect("doc")
        )
        .expect("json"),
        document()
    );

    let patched = json!({"gateway": {"mode": "local"}});
    let r = expect(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"values": patched})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(r.data()["generation"], 2);
    let got = expect(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        (&got.data()["values"], got.data()["generation"].as_u64()),
        (&patched, Some(2))
    );

    // The commit fails after the ConfigMap was replaced: the replaced document is restored.
    fail.store(true, Ordering::SeqCst);
    let r = app
        .call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"values": {"agents": {"defaults": {"timeoutSeconds": 3}}}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    fail.store(false, Ordering::SeqCst);
    let got = expect(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(
        (&got.data()["values"], got.data()["generation"].as_u64()),
        (&patched, Some(2))
    );

    // A create whose commit fails leaves no ConfigMap behind.
    fail.store(true, Ordering::SeqCst);
    let before = fake.names("configmaps", &tenant);
    let r = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"kind": "agent", "values": document()})),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(fake.names("configmaps", &tenant), before);
    fail.store(false, Ordering::SeqCst);

    // Missing RBAC: 503, the committed generation unchanged.
    fake.deny("update", "configmaps");
    let r = app
        .call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"values": {"agents": {"defaults": {"timeoutSeconds": 4}}}})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    );
    fake.allow_all();
    let got = expect(
        app.call(Method::GET, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(got.data()["generation"], 2);

    // Delete removes the ConfigMap.
    expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::NO_CONTENT,
    );
    assert!(fake.object("configmaps", &tenant, &cm_name).is_none());
}

#[tokio::test]
async fn a_namespace_without_its_tenant_namespace_answers_503_and_stores_nothing() {
    let fake = FakeKube::start().await;
    let app = app_on(&fake, FaultHooks::default()).await;
    let admin = app.admin();
    let base = format!("/namespaces/{}/configurations", app.default_ns);
    let r = app
        .call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"kind": "agent", "values": document()})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    );
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{}/secrets", app.default_ns),
            &admin,
            Some(json!({"name": "openai", "value": "sk-live-123"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!r.body.to_string().contains("sk-live"));
    // Nothing was recorded: once provisioned, the same names are free.
    provision(&fake, &app.default_ns);
    app.set_namespace_status(&app.default_ns, NamespaceStatus::Ready)
        .await;
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{}/secrets", app.default_ns),
            &admin,
            Some(json!({"name": "openai", "value": "sk-live-123"})),
        )
        .await,
        StatusCode::CREATED,
    );
}

#[tokio::test]
async fn secrets_live_in_kubernetes_secrets() {
    let fake = FakeKube::start().await;
    let app = app_on(&fake, FaultHooks::default()).await;
    let tenant = provision(&fake, &app.default_ns);
    let admin = app.admin();
    let base = format!("/namespaces/{}/secrets", app.default_ns);
    let r = expect(
        app.call(
            Method::POST,
            &base,
            &admin,
            Some(json!({"name": "openai", "value": "sk-live-1"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let id = r.data()["id"].as_str().expect("id").to_owned();
    assert!(!r.body.to_string().contains("sk-live"));
    let names = fake.names("secrets", &tenant);
    assert_eq!(names.len(), 1);
    let stored = fake.object("secrets", &tenant, &names[0]).expect("secret");
    assert_eq!(
        stored["metadata"]["labels"]["openclaw.dev/secret"],
        id.as_str()
    );
    expect(
        app.call(
            Method::PATCH,
            &format!("{base}/{id}"),
            &admin,
            Some(json!({"value": "sk-live-2"})),
        )
        .await,
        StatusCode::OK,
    );
    let stored = fake
        .object("secrets", &tenant, &names[0])
        .expect("same object");
    assert_eq!(
        stored["data"]["value"], "c2stbGl2ZS0y",
        "base64 of the new value"
    );
    expect(
        app.call(Method::DELETE, &format!("{base}/{id}"), &admin, None)
            .await,
        StatusCode::NO_CONTENT,
    );
    assert!(fake.names("secrets", &tenant).is_empty());
}

/// `existingNamespace` with the Kubernetes Compute Driver: accepted from an Installation
/// administrator only (403 for a principal that may just create Namespaces), and a
/// Configuration there waits for the adoption (409 `NAMESPACE_NOT_READY`, nothing stored);
/// once the worker has claimed it, Configurations are ConfigMaps in the operator's namespace.
#[tokio::test]
async fn existing_namespaces_are_adopted_for_administrators_and_used_once_ready() {
    let fake = FakeKube::start().await;
    let app = app_with(
        &fake,
        FaultHooks::default(),
        Some(occ_drivers::compute::kubernetes::selection(false)),
    )
    .await;
    let admin = app.admin();
    let (_, creator) = app
        .principal_with(
            &[
                Permission::new(Action::Create, ResourceKind::Namespace),
                Permission::new(Action::Read, ResourceKind::Namespace),
            ],
            None,
            None,
            None,
        )
        .await;
    let creator = Credential::Key(creator);
    let r = app
        .call(
            Method::POST,
            "/namespaces",
            &creator,
            Some(json!({"name": "adopted", "existingNamespace": "team-a-prod"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    expect(
        app.call(
            Method::POST,
            "/namespaces",
            &creator,
            Some(json!({"name": "plain"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let created = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "adopted", "existingNamespace": "team-a-prod"})),
        )
        .await,
        StatusCode::CREATED,
    );
    assert_eq!(created.data()["existingNamespace"], "team-a-prod");
    assert_eq!(created.data()["status"], "provisioning");
    let ns = created.data()["id"].as_str().expect("id").to_owned();
    let ns_id: NamespaceId = ns.parse().expect("id");

    let configurations = format!("/namespaces/{ns}/configurations");
    let create_configuration = || {
        app.call(
            Method::POST,
            &configurations,
            &admin,
            Some(json!({"kind": "agent", "values": document()})),
        )
    };
    let r = create_configuration().await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_READY")
    );
    assert!(
        fake.requests().iter().all(|r| r.resource != "configmaps"),
        "nothing stored"
    );
    // What the worker's adoption leaves: the operator's namespace claimed for this Namespace.
    fake.seed(
        "namespaces",
        "",
        json!({"metadata": {"name": "team-a-prod",
            "labels": {"openclaw.dev/namespace": ns,
                       "pod-security.kubernetes.io/enforce": "restricted"},
            "annotations": {"openclaw.dev/namespace-id": ns,
                            "openclaw.dev/namespace-lifecycle": "external"}}}),
    );
    app.set_namespace_status(&ns_id, NamespaceStatus::Ready)
        .await;
    let cfg = expect(create_configuration().await, StatusCode::CREATED);
    let cfg = cfg.data()["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("cfg id");
    assert!(
        fake.object("configmaps", "team-a-prod", &configmap_name(&cfg))
            .is_some()
    );
}
