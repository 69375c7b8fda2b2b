//! The Kubernetes manifests in `deploy/kubernetes` (no cluster needed): every YAML document is
//! read as the k8s-openapi type of its `kind` and written back, and must come back identical
//! (k8s-openapi ignores unknown fields when reading, so a misspelled or misplaced field would
//! vanish and fail here); then the security properties the manifests promise are checked on the
//! typed objects (including that the worker may bind exactly the tenant ClusterRoles its
//! RoleBindings grant, as the worker's own code builds them and as the Kubernetes Drivers'
//! golden file records them), and every `OCC_*` name they mention must be a setting occ reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PersistentVolumeClaim, PodSpec, Secret, Service,
    ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use occ_core::NamespaceId;
use occ_drivers::compute::NamespaceTarget;
use occ_drivers::kubernetes::{
    KubeClient, KubernetesAuth, ServiceAccountRef, TENANT_COMPUTE, TENANT_CONFIGURATIONS,
    TENANT_GATEWAY_ACCESS, TENANT_SECRET_READER, TENANT_SECRETS, TenantAccess, TenantNamespaces,
};
use occ_testkit::kube::FakeKube;
use serde::Serialize;
use serde::de::{Deserialize as _, DeserializeOwned};
use serde_json::Value;

/// The sources that read every setting (names appear there as string literals).
const SETTINGS_SOURCES: [&str; 7] = [
    include_str!("../src/settings/mod.rs"),
    include_str!("../src/settings/source.rs"),
    include_str!("../src/settings/platform.rs"),
    include_str!("../src/settings/kubernetes.rs"),
    include_str!("../src/settings/ssh.rs"),
    include_str!("../src/settings/server.rs"),
    include_str!("../src/settings/worker.rs"),
];
/// Where the readiness probe's route is declared.
const AUTH_ROUTES_SOURCE: &str = include_str!("../../occ-api/src/handlers/auth.rs");
/// Not applied by `kubectl apply -k` on purpose (placeholders).
const NOT_IN_KUSTOMIZATION: &[&str] = &["secrets.template.yaml"];
/// occ's own namespace, where its ServiceAccounts live.
const OCC_NAMESPACE: &str = "occ-system";
/// The API group of Roles and RoleBindings.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// One YAML document, as JSON, and where it came from.
#[derive(Debug, Clone)]
struct Doc {
    origin: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    fn typed<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.value.clone())
            .unwrap_or_else(|e| panic!("{}: not a {}: {e}", self.origin, self.kind()))
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn documents(origin: &str, text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    for (i, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let yaml = serde_yaml_ng::Value::deserialize(de)
            .unwrap_or_else(|e| panic!("{origin}: document {i}: invalid YAML: {e}"));
        if yaml.is_null() {
            continue;
        }
        let value = serde_json::to_value(&yaml)
            .unwrap_or_else(|e| panic!("{origin}: document {i}: not JSON-like: {e}"));
        docs.push(Doc {
            origin: format!("{origin} (document {i}, {})", value["kind"]),
            value,
        });
    }
    docs
}

/// The first path where two JSON values differ.
fn difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .find_map(|k| {
                difference(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                )
            }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (a, b))| difference(&format!("{path}[{i}]"), a, b)),
        _ if a == b => None,
        _ => Some(format!("{path}: written {a}, read back {b}")),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Doc) -> Value {
    serde_json::to_value(doc.typed::<T>()).expect("serialize")
}

/// Reads a document as the type of its kind and writes it back.
fn check_round_trip(doc: &Doc) {
    let back = match doc.kind() {
        "Namespace" => round_trip::<Namespace>(doc),
        "ServiceAccount" => round_trip::<ServiceAccount>(doc),
        "ClusterRole" => round_trip::<ClusterRole>(doc),
        "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(doc),
        "Role" => round_trip::<Role>(doc),
        "RoleBinding" => round_trip::<RoleBinding>(doc),
        "ConfigMap" => round_trip::<ConfigMap>(doc),
        "Secret" => round_trip::<Secret>(doc),
        "Deployment" => round_trip::<Deployment>(doc),
        "Service" => round_trip::<Service>(doc),
        "Job" => round_trip::<Job>(doc),
        "PersistentVolumeClaim" => round_trip::<PersistentVolumeClaim>(doc),
        other => panic!("{}: unexpected kind {other:?}", doc.origin),
    };
    if let Some(d) = difference("", &doc.value, &back) {
        panic!(
            "{}: not a valid {} (unknown, misspelled or misplaced field?): {d}",
            doc.origin,
            doc.kind()
        );
    }
}

/// Every manifest, as it is (the secret template included).
struct Manifests {
    /// File name (relative to deploy/kubernetes) → text.
    files: BTreeMap<String, String>,
    /// Documents of the files applied by the kustomization, and of the secret template.
    base: Vec<Doc>,
}

fn manifests() -> Manifests {
    let root = deploy_dir();
    let mut paths = Vec::new();
    yaml_files(&root, &mut paths);
    let mut files = BTreeMap::new();
    let mut base = Vec::new();
    for path in paths {
        let name = path
            .strip_prefix(&root)
            .expect("under deploy/kubernetes")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("read manifest");
        if name != "kustomization.yaml" {
            let docs = documents(&name, &text);
            assert!(!docs.is_empty(), "{name}: no document");
            for doc in &docs {
                check_round_trip(doc);
            }
            base.extend(docs);
        }
        files.insert(name, text);
    }
    Manifests { files, base }
}

fn of_kind<T: DeserializeOwned>(docs: &[Doc], kind: &str) -> Vec<T> {
    docs.iter()
        .filter(|d| d.kind() == kind)
        .map(Doc::typed)
        .collect()
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// (workload name, service account, pod spec) of every Deployment and Job.
fn pods(docs: &[Doc]) -> Vec<(String, PodSpec)> {
    let mut pods = Vec::new();
    for d in of_kind::<Deployment>(docs, "Deployment") {
        let spec = d.spec.and_then(|s| s.template.spec).expect("pod spec");
        pods.push((name_of(&d.metadata).to_owned(), spec));
    }
    for j in of_kind::<Job>(docs, "Job") {
        let spec = j.spec.and_then(|s| s.template.spec).expect("pod spec");
        pods.push((name_of(&j.metadata).to_owned(), spec));
    }
    pods
}

fn pod<'a>(pods: &'a [(String, PodSpec)], name: &str) -> &'a PodSpec {
    &pods
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no workload {name}"))
        .1
}

fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_document_is_a_valid_kubernetes_object() {
    let m = manifests();
    let kinds: BTreeSet<_> = m.base.iter().map(Doc::kind).collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "Job",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/kubernetes");
    }
    // Agents' state volumes are the Kubernetes Compute Driver's, in tenant namespaces; occ
    // itself keeps nothing on a volume.
    assert!(
        !kinds.contains("PersistentVolumeClaim"),
        "no PersistentVolumeClaim in deploy/kubernetes"
    );
    // Namespaced objects name their namespace; base objects live in occ's.
    for doc in &m.base {
        let cluster_scoped =
            ["Namespace", "ClusterRole", "ClusterRoleBinding"].contains(&doc.kind());
        let ns = doc.value["metadata"]["namespace"].as_str();
        if cluster_scoped {
            assert_eq!(ns, None, "{}", doc.origin);
        } else {
            assert_eq!(ns, Some(OCC_NAMESPACE), "{}", doc.origin);
        }
    }
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_templates() {
    let m = manifests();
    let text = &m.files["kustomization.yaml"];
    let k: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).expect("kustomization.yaml");
    assert_eq!(k["kind"].as_str(), Some("Kustomization"));
    let listed: BTreeSet<String> = k["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file name").to_owned())
        .collect();
    let expected: BTreeSet<String> = m
        .files
        .keys()
        .filter(|f| f.ends_with(".yaml") && *f != "kustomization.yaml")
        .filter(|f| {
            !NOT_IN_KUSTOMIZATION
                .iter()
                .any(|x| *f == x || f.starts_with(&format!("{x}/")))
        })
        .cloned()
        .collect();
    assert_eq!(listed, expected);
    assert!(
        !listed.iter().any(|f| f.contains("template")),
        "templates must never be applied as they are"
    );
    // The gateway image follows the occ image when `images:` pins it.
    let replacements = k["replacements"].as_sequence().expect("replacements");
    let [r] = replacements.as_slice() else {
        panic!("one replacement");
    };
    let source = &r["source"];
    assert_eq!(
        (
            source["kind"].as_str(),
            source["name"].as_str(),
            source["fieldPath"].as_str()
        ),
        (
            Some("Deployment"),
            Some("occ-api"),
            Some("spec.template.spec.containers.[name=api].image")
        )
    );
    let targets = r["targets"].as_sequence().expect("targets");
    let [t] = targets.as_slice() else {
        panic!("one target");
    };
    assert_eq!(
        (t["select"]["kind"].as_str(), t["select"]["name"].as_str()),
        (Some("ConfigMap"), Some("occ-settings"))
    );
    let paths: Vec<_> = t["fieldPaths"]
        .as_sequence()
        .expect("fieldPaths")
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert_eq!(paths, ["data.OCC_KUBERNETES_GATEWAY_IMAGE"]);
}

#[test]
fn every_container_runs_restricted_with_resources() {
    let m = manifests();
    let pods = pods(&m.base);
    assert_eq!(pods.len(), 3, "occ-api, occ-worker, occ-migrate");
    for (name, spec) in &pods {
        let psc = spec.security_context.as_ref().expect("pod securityContext");
        assert_eq!(psc.run_as_non_root, Some(true), "{name}");
        assert!(psc.run_as_user.is_some_and(|u| u > 0), "{name}");
        assert_eq!(
            psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{name}"
        );
        assert_ne!(spec.host_network, Some(true), "{name}");
        assert_ne!(spec.host_pid, Some(true), "{name}");
        assert_ne!(spec.host_ipc, Some(true), "{name}");
        assert_eq!(spec.enable_service_links, Some(false), "{name}");
        for v in spec.volumes.iter().flatten() {
            assert!(v.host_path.is_none(), "{name}: hostPath volume {}", v.name);
        }
        for c in containers(spec) {
            let what = format!("{name}/{}", c.name);
            let sc = c
                .security_context
                .as_ref()
                .expect("container securityContext");
            assert_eq!(sc.run_as_non_root, Some(true), "{what}");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
            assert_ne!(sc.privileged, Some(true), "{what}");
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
            let caps = sc.capabilities.as_ref().expect("capabilities");
            assert_eq!(caps.drop, Some(strings(&["ALL"])), "{what}");
            assert!(caps.add.as_ref().is_none_or(Vec::is_empty), "{what}");
            let res = c.resources.as_ref().expect("resources");
            for (kind, map) in [("requests", &res.requests), ("limits", &res.limits)] {
                let map = map.as_ref().unwrap_or_else(|| panic!("{what}: no {kind}"));
                for r in ["cpu", "memory"] {
                    assert!(map.contains_key(r), "{what}: no {r} in {kind}");
                }
            }
            let image = c.image.as_deref().expect("image");
            assert!(image.starts_with("ghcr.io/openclaw/occ"), "{what}: {image}");
            assert!(c.command.is_none(), "{what}: keep the image's entrypoint");
        }
    }
    let args = |name: &str| pod(&pods, name).containers[0].args.clone();
    assert_eq!(args("occ-api"), Some(strings(&["serve"])));
    assert_eq!(args("occ-worker"), Some(strings(&["worker"])));
    assert_eq!(args("occ-migrate"), Some(strings(&["migrate"])));
}

#[test]
fn only_pods_that_call_the_kubernetes_api_get_a_token() {
    let m = manifests();
    let pods = pods(&m.base);
    for sa in of_kind::<ServiceAccount>(&m.base, "ServiceAccount") {
        assert_eq!(
            sa.automount_service_account_token,
            Some(false),
            "{}: Pods opt in",
            name_of(&sa.metadata)
        );
    }
    let mut bound: BTreeSet<String> = BTreeSet::new();
    let subjects = of_kind::<ClusterRoleBinding>(&m.base, "ClusterRoleBinding")
        .into_iter()
        .flat_map(|b| b.subjects.unwrap_or_default());
    for s in subjects {
        assert_eq!(s.kind, "ServiceAccount");
        assert_eq!(s.namespace.as_deref(), Some(OCC_NAMESPACE));
        bound.insert(s.name);
    }
    let accounts: BTreeSet<String> = of_kind::<ServiceAccount>(&m.base, "ServiceAccount")
        .iter()
        .map(|s| name_of(&s.metadata).to_owned())
        .collect();
    assert!(bound.is_subset(&accounts), "{bound:?} ⊄ {accounts:?}");
    for (name, spec) in &pods {
        let sa = spec
            .service_account_name
            .clone()
            .expect("serviceAccountName");
        assert!(accounts.contains(&sa), "{name}: {sa}");
        assert_eq!(
            spec.automount_service_account_token,
            Some(bound.contains(&sa)),
            "{name}: a token only where the ServiceAccount has permissions"
        );
    }
    assert_eq!(
        pod(&pods, "occ-migrate").automount_service_account_token,
        Some(false)
    );
    // Each workload has its own ServiceAccount.
    let used: BTreeSet<_> = pods
        .iter()
        .map(|(_, s)| s.service_account_name.clone())
        .collect();
    assert_eq!(used.len(), pods.len());
}

/// The ClusterRoles the Kubernetes Drivers' golden file records RoleBindings to (the tenant
/// namespace of a Configuration and Secret Driver installation, without Kubernetes Compute).
fn golden_tenant_cluster_roles() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../occ-drivers/tests/golden/tenant-namespace.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let objects: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let names: BTreeSet<String> = objects
        .iter()
        .map(|o| &o["body"])
        .filter(|b| b["kind"] == "RoleBinding")
        .map(|b| {
            let binding: RoleBinding = serde_json::from_value(b.clone()).expect("a RoleBinding");
            assert_eq!(binding.role_ref.kind, "ClusterRole");
            binding.role_ref.name
        })
        .collect();
    assert!(!names.is_empty(), "{}: no RoleBinding", path.display());
    names
}

/// The `OCC_*` settings of the shipped ConfigMap.
fn settings_data(m: &Manifests) -> BTreeMap<String, String> {
    let configs = of_kind::<ConfigMap>(&m.base, "ConfigMap");
    let [settings] = configs.as_slice() else {
        panic!("one ConfigMap");
    };
    settings.data.clone().unwrap_or_default()
}

/// The RoleBindings the worker keeps in a tenant namespace with the shipped settings (every
/// Kubernetes Driver selected), built by the worker's own code
/// ([`TenantNamespaces::access_manifests`]): (binding, ClusterRole, ServiceAccount).
async fn tenant_bindings(m: &Manifests) -> Vec<(String, String, String)> {
    let data = settings_data(m);
    let account = |var: &str| -> ServiceAccountRef {
        data.get(var)
            .unwrap_or_else(|| panic!("{var} is set"))
            .parse()
            .unwrap_or_else(|e| panic!("{var}: {e}"))
    };
    let selected = |var: &str| data.get(var).map(String::as_str) == Some("kubernetes");
    let access = TenantAccess {
        api: account("OCC_KUBERNETES_API_SERVICE_ACCOUNT"),
        worker: Some(account("OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT")),
        configurations: selected("OCC_CONFIGURATION_DRIVER"),
        secrets: selected("OCC_SECRET_DRIVER"),
        compute: selected("OCC_COMPUTE_DRIVER"),
    };
    // A client is needed to build the provisioner; nothing is sent.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeKube::start_tls().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).expect("kubeconfig");
    let kube = KubeClient::connect(&KubernetesAuth::Kubeconfig {
        path: kubeconfig,
        context: "fake".into(),
    })
    .await
    .expect("client");
    let ns = NamespaceTarget {
        id: "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50"
            .parse::<NamespaceId>()
            .expect("namespace id"),
        name: "team-a".into(),
        existing_namespace: None,
    };
    let bindings = TenantNamespaces::new(kube, access)
        .access_manifests(&ns)
        .into_iter()
        .map(|b| {
            assert_eq!(b.role_ref.kind, "ClusterRole");
            assert_eq!(b.role_ref.api_group, RBAC_GROUP);
            let subjects = b.subjects.unwrap_or_default();
            let [s] = subjects.as_slice() else {
                panic!("{:?}: one subject", b.metadata.name);
            };
            assert_eq!(s.kind, "ServiceAccount");
            assert_eq!(s.namespace.as_deref(), Some(OCC_NAMESPACE));
            (
                name_of(&b.metadata).to_owned(),
                b.role_ref.name,
                s.name.clone(),
            )
        })
        .collect();
    assert!(fake.requests().is_empty(), "nothing is sent");
    bindings
}

fn rule(group: &str, resource: &str, verbs: &[&str], names: Option<&[&str]>) -> PolicyRule {
    PolicyRule {
        api_groups: Some(strings(&[group])),
        resources: Some(strings(&[resource])),
        verbs: strings(verbs),
        resource_names: names.map(strings),
        ..PolicyRule::default()
    }
}

fn cluster_roles(m: &Manifests) -> BTreeMap<String, Vec<PolicyRule>> {
    of_kind::<ClusterRole>(&m.base, "ClusterRole")
        .into_iter()
        .map(|r| {
            assert!(r.aggregation_rule.is_none(), "{}", name_of(&r.metadata));
            (name_of(&r.metadata).to_owned(), r.rules.unwrap_or_default())
        })
        .collect()
}

/// The ClusterRoles granted in tenant namespaces, as the Drivers name them.
const TENANT_ROLES: [(&str, &str); 5] = [
    TENANT_CONFIGURATIONS,
    TENANT_SECRETS,
    TENANT_SECRET_READER,
    TENANT_COMPUTE,
    TENANT_GATEWAY_ACCESS,
];

#[test]
fn cluster_wide_occ_has_exactly_what_the_api_and_the_worker_need() {
    let m = manifests();
    let roles = cluster_roles(&m);
    assert_eq!(
        roles.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "occ-api",
            "occ-tenant-compute",
            "occ-tenant-configurations",
            "occ-tenant-gateway-access",
            "occ-tenant-secret-reader",
            "occ-tenant-secrets",
            "occ-worker"
        ],
        "the API's, the worker's and the five granted in tenant namespaces"
    );
    // The API finds tenant namespaces (a label-selected list) and reads them; nothing else.
    assert_eq!(
        roles["occ-api"],
        [rule("", "namespaces", &["get", "list"], None)]
    );
    // The worker provisions and deletes tenant namespaces and the RoleBindings in them, claims
    // and releases adopted ones (update; RoleBindings deleted only at occ's names); it may
    // bind only the five tenant ClusterRoles, and escalate nothing.
    let tenant_roles = TENANT_ROLES.map(|(_, role)| role);
    assert_eq!(
        roles["occ-worker"],
        [
            rule(
                "",
                "namespaces",
                &["get", "list", "create", "update", "delete"],
                None
            ),
            rule(RBAC_GROUP, "rolebindings", &["create"], None),
            rule(RBAC_GROUP, "rolebindings", &["get", "update"], None),
            rule(
                RBAC_GROUP,
                "rolebindings",
                &["delete"],
                Some(&TENANT_ROLES.map(|(binding, _)| binding))
            ),
            rule(RBAC_GROUP, "clusterroles", &["bind"], Some(&tenant_roles)),
        ]
    );
    // What tenant namespaces get for Configurations and Secrets: create in its own rule, no
    // list.
    assert_eq!(
        roles["occ-tenant-configurations"],
        [
            rule("", "configmaps", &["create"], None),
            rule("", "configmaps", &["get", "update", "delete"], None),
        ]
    );
    assert_eq!(
        roles["occ-tenant-secrets"],
        [
            rule("", "secrets", &["create"], None),
            rule("", "secrets", &["get", "update", "delete"], None),
        ]
    );
    assert_eq!(
        roles["occ-tenant-secret-reader"],
        [rule(
            "",
            "secrets",
            &["get", "create", "update", "list", "delete"],
            None
        )]
    );
    // The worker's calls in crates/occ-drivers/src/compute/kubernetes/: get/create/delete of
    // each per-Agent object, replace (update) of the Deployment and of Secrets, label-selected
    // lists of revision ConfigMaps and Secrets (deletion) and of Pods, a failed start's
    // pods/log, port-forwards (a WebSocket GET: `get`, plus `create` since Kubernetes 1.35);
    // for dedicated Agents Services and the merge patches of the harness claim and Pod.
    assert_eq!(
        roles["occ-tenant-compute"],
        [
            rule(
                "apps",
                "deployments",
                &["get", "create", "update", "delete"],
                None
            ),
            rule("", "configmaps", &["get", "create", "list", "delete"], None),
            rule(
                "",
                "secrets",
                &["get", "create", "update", "list", "delete"],
                None
            ),
            rule(
                "",
                "persistentvolumeclaims",
                &["get", "create", "patch", "delete"],
                None
            ),
            rule("", "serviceaccounts", &["get", "create", "delete"], None),
            rule("", "services", &["get", "create", "delete"], None),
            rule(
                "",
                "resourcequotas",
                &["get", "create", "update", "delete"],
                None
            ),
            rule(
                "networking.k8s.io",
                "networkpolicies",
                &["get", "create", "list", "delete"],
                None
            ),
            rule("", "pods", &["list", "patch"], None),
            rule("", "pods/log", &["get"], None),
            rule("", "pods/portforward", &["get", "create"], None),
        ]
    );
    // The API's `gateway_access`: the Deployment (deployment_of), the Pods (serving_pod), the
    // token Secret (token) and the port-forward (forward); runtime reports (Events) and logs.
    assert_eq!(
        roles["occ-tenant-gateway-access"],
        [
            rule("apps", "deployments", &["get"], None),
            rule("", "secrets", &["get"], None),
            rule("", "pods", &["list"], None),
            rule("", "pods/log", &["get"], None),
            rule("", "events", &["list"], None),
            rule("", "pods/portforward", &["get", "create"], None),
        ]
    );

    // The same properties, stated independently of the exact lists above.
    let tenant_roles: BTreeSet<String> = strings(&tenant_roles).into_iter().collect();
    for (name, rules) in &roles {
        for r in rules {
            let what = format!("{name}: {r:?}");
            assert!(r.non_resource_urls.is_none(), "{what}");
            let fields = r
                .api_groups
                .iter()
                .chain(&r.resources)
                .chain(&r.resource_names)
                .flatten()
                .chain(&r.verbs);
            for f in fields {
                assert!(!f.contains('*'), "{what}: no wildcard");
            }
            let has = |v: &str| r.verbs.iter().any(|x| x == v);
            let resources = r.resources.clone().unwrap_or_default();
            if has("create") {
                assert!(
                    r.resource_names.is_none(),
                    "{what}: create cannot be restricted by resourceNames"
                );
            }
            assert!(!has("watch"), "{what}: no watch");
            if has("list") {
                // Cluster-wide only namespaces; in tenant namespaces what the Kubernetes
                // Compute Driver finds by an Agent's label (and a Pod's Events by its uid), and
                // the worker's records of handed values (by the Agent's label).
                let listable: &[&str] = match name.as_str() {
                    "occ-api" | "occ-worker" => &["namespaces"],
                    "occ-tenant-compute" => &["configmaps", "secrets", "pods", "networkpolicies"],
                    "occ-tenant-secret-reader" => &["secrets"],
                    "occ-tenant-gateway-access" => &["pods", "events"],
                    _ => &[],
                };
                for resource in &resources {
                    assert!(listable.contains(&resource.as_str()), "{what}: no list");
                }
            }
            assert!(!has("escalate"), "{what}: never escalate");
            if has("bind") {
                assert_eq!(resources, strings(&["clusterroles"]), "{what}");
                let names: BTreeSet<String> = r
                    .resource_names
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect();
                assert_eq!(names, tenant_roles, "{what}: only the tenant ClusterRoles");
            }
            // Objects of tenants only in the tenant ClusterRoles, which are never bound
            // cluster-wide (checked below); gateway workloads only in the Compute ones.
            let allowed: &[&str] = match name.as_str() {
                "occ-tenant-compute" => &[
                    "deployments",
                    "configmaps",
                    "secrets",
                    "persistentvolumeclaims",
                    "serviceaccounts",
                    "resourcequotas",
                    "networkpolicies",
                    "services",
                    "pods",
                    "pods/log",
                    "pods/portforward",
                ],
                "occ-tenant-gateway-access" => &[
                    "deployments",
                    "secrets",
                    "pods",
                    "pods/log",
                    "events",
                    "pods/portforward",
                ],
                n if n.starts_with("occ-tenant-") => &["configmaps", "secrets"],
                _ => &["namespaces", "rolebindings", "clusterroles"],
            };
            for resource in &resources {
                assert!(
                    allowed.contains(&resource.as_str()),
                    "{what}: no {resource}"
                );
            }
            // Pods are made by the Deployment controller, never by occ, and occ never runs
            // anything in them; the worker only annotates a harness Pod (a setup code's nudge).
            if resources.iter().any(|r| r == "pods") {
                let expected: &[&str] = if name == "occ-tenant-compute" {
                    &["list", "patch"]
                } else {
                    &["list"]
                };
                assert_eq!(r.verbs, strings(expected), "{what}: Pods are only listed");
            }
            // Merge patches only where occ records an annotation: a harness Pod's and claim's.
            let patchable = name == "occ-tenant-compute"
                && resources
                    .iter()
                    .all(|r| r == "pods" || r == "persistentvolumeclaims");
            for v in &r.verbs {
                assert!(
                    !["deletecollection", "impersonate"].contains(&v.as_str())
                        && (v != "patch" || patchable),
                    "{what}: {v}"
                );
            }
        }
    }

    // One ClusterRoleBinding each, to the ServiceAccount of the same name in occ-system.
    let bindings = of_kind::<ClusterRoleBinding>(&m.base, "ClusterRoleBinding");
    assert_eq!(bindings.len(), 2);
    for b in bindings {
        let name = name_of(&b.metadata).to_owned();
        assert_eq!(b.role_ref.api_group, RBAC_GROUP);
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert_eq!(b.role_ref.name, name);
        let subjects = b.subjects.unwrap_or_default();
        let [s] = subjects.as_slice() else {
            panic!("{name}: one subject");
        };
        assert_eq!(
            (s.kind.as_str(), s.name.as_str(), s.namespace.as_deref()),
            ("ServiceAccount", name.as_str(), Some(OCC_NAMESPACE))
        );
    }
    assert!(
        of_kind::<Role>(&m.base, "Role").is_empty()
            && of_kind::<RoleBinding>(&m.base, "RoleBinding").is_empty(),
        "no Role or RoleBinding in the manifests: tenant access is the worker's to create"
    );
}

#[tokio::test]
async fn the_worker_may_bind_exactly_the_cluster_roles_it_grants_in_tenant_namespaces() {
    let m = manifests();
    let roles = cluster_roles(&m);
    let bindable: BTreeSet<String> = roles["occ-worker"]
        .iter()
        .filter(|r| r.verbs.iter().any(|v| v == "bind"))
        .flat_map(|r| r.resource_names.clone().unwrap_or_default())
        .collect();
    let installed: BTreeSet<String> = roles
        .keys()
        .filter(|n| n.starts_with("occ-tenant-"))
        .cloned()
        .collect();
    assert_eq!(bindable, installed, "bind: every installed tenant role");
    let named: BTreeSet<String> = TENANT_ROLES.iter().map(|(_, r)| (*r).to_owned()).collect();
    assert_eq!(bindable, named, "the tenant roles the Drivers name");
    // What the Drivers' golden file records (Configurations and Secrets) is among them.
    let golden = golden_tenant_cluster_roles();
    assert!(golden.is_subset(&bindable), "{golden:?} ⊄ {bindable:?}");

    // With the shipped settings the worker creates exactly one RoleBinding per tenant role,
    // for the account that uses it.
    let bindings = tenant_bindings(&m).await;
    let granted: BTreeSet<String> = bindings.iter().map(|(_, role, _)| role.clone()).collect();
    assert_eq!(granted, bindable, "{bindings:?}");
    assert_eq!(bindings.len(), granted.len(), "{bindings:?}");
    let pods = pods(&m.base);
    let account = |workload: &str| {
        pod(&pods, workload)
            .service_account_name
            .clone()
            .expect("serviceAccountName")
    };
    for (binding, role, subject) in &bindings {
        let expected = match (binding.as_str(), role.as_str()) {
            b if b == TENANT_CONFIGURATIONS
                || b == TENANT_SECRETS
                || b == TENANT_GATEWAY_ACCESS =>
            {
                account("occ-api")
            }
            b if b == TENANT_SECRET_READER || b == TENANT_COMPUTE => account("occ-worker"),
            other => panic!("unexpected tenant RoleBinding {other:?}"),
        };
        assert_eq!(subject, &expected, "{binding} → {role}");
    }
}

#[test]
fn the_tenant_access_settings_name_the_bound_service_accounts() {
    let m = manifests();
    let pods = pods(&m.base);
    let configs = of_kind::<ConfigMap>(&m.base, "ConfigMap");
    let [settings] = configs.as_slice() else {
        panic!("one ConfigMap");
    };
    let data = settings.data.clone().unwrap_or_default();
    for (var, workload) in [
        ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ-api"),
        ("OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT", "occ-worker"),
    ] {
        let sa = pod(&pods, workload)
            .service_account_name
            .clone()
            .expect("serviceAccountName");
        assert_eq!(
            data.get(var).map(String::as_str),
            Some(format!("{OCC_NAMESPACE}/{sa}").as_str()),
            "{var}: the ServiceAccount of {workload}"
        );
        assert_eq!(
            pod(&pods, workload).automount_service_account_token,
            Some(true),
            "{workload} calls the Kubernetes API"
        );
    }
    // Both Pods read the ConfigMap (both parse the Kubernetes settings at start).
    for workload in ["occ-api", "occ-worker"] {
        let reads = containers(pod(&pods, workload)).any(|c| {
            c.env_from.iter().flatten().any(|e| {
                e.config_map_ref.as_ref().map(|r| r.name.as_str())
                    == settings.metadata.name.as_deref()
            })
        });
        assert!(reads, "{workload} reads {:?}", settings.metadata.name);
    }
}

#[test]
fn only_the_api_has_a_service_and_its_probes_hit_real_routes() {
    let m = manifests();
    let services = of_kind::<Service>(&m.base, "Service");
    let [svc] = services.as_slice() else {
        panic!("one Service (the API's)");
    };
    let spec = svc.spec.clone().expect("spec");
    let selector = spec.selector.clone().expect("selector");
    let labels = |name: &str| {
        of_kind::<Deployment>(&m.base, "Deployment")
            .into_iter()
            .find(|d| name_of(&d.metadata) == name)
            .and_then(|d| d.spec?.template.metadata?.labels)
            .unwrap_or_default()
    };
    let selects = |l: &BTreeMap<String, String>| selector.iter().all(|(k, v)| l.get(k) == Some(v));
    assert!(selects(&labels("occ-api")));
    assert!(!selects(&labels("occ-worker")));

    let pods = pods(&m.base);
    let api = &pod(&pods, "occ-api").containers[0];
    let ports = api.ports.clone().unwrap_or_default();
    let env_value = |c: &Container, n: &str| {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == n)
            .and_then(|e| e.value.clone())
    };
    let port = env_value(api, "OCC_PORT").expect("OCC_PORT");
    let http = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("http"))
        .expect("http port");
    assert_eq!(http.container_port.to_string(), port);
    assert_eq!(env_value(api, "OCC_HOST").as_deref(), Some("0.0.0.0"));
    for p in spec.ports.iter().flatten() {
        assert_eq!(p.target_port, Some(IntOrString::String("http".into())));
    }
    let readiness = api.readiness_probe.clone().expect("readiness probe");
    let get = readiness.http_get.expect("HTTP readiness");
    let path = get.path.expect("path");
    assert!(
        AUTH_ROUTES_SOURCE.contains(&format!("path = \"{path}\"")),
        "{path} is not a route of occ-api"
    );
    assert!(api.liveness_probe.is_some(), "liveness probe");

    let worker = pod(&pods, "occ-worker");
    assert!(
        worker.containers[0].ports.is_none(),
        "the worker listens on nothing"
    );
    // Gateways run in their own Pods (the Kubernetes Compute Driver): no occ Pod keeps state.
    for (name, spec) in &pods {
        for v in spec.volumes.iter().flatten() {
            assert!(v.empty_dir.is_some(), "{name}: {} is scratch only", v.name);
        }
    }
}

#[test]
fn secrets_come_from_secrets_and_settings_are_real() {
    let m = manifests();
    let secret_settings = ["OCC_DATABASE_URL", "OCC_AUTH_SECRET"];
    let pods = pods(&m.base);
    for (name, spec) in &pods {
        for c in containers(spec) {
            for e in c.env.iter().flatten() {
                if secret_settings.contains(&e.name.as_str()) {
                    let from = e
                        .value_from
                        .as_ref()
                        .and_then(|v| v.secret_key_ref.as_ref())
                        .unwrap_or_else(|| panic!("{name}: {} from a Secret", e.name));
                    assert_eq!(from.key, e.name);
                    assert!(e.value.is_none());
                }
            }
        }
    }
    let has_env = |name: &str, var: &str| {
        containers(pod(&pods, name)).any(|c| c.env.iter().flatten().any(|e| e.name == var))
    };
    assert!(has_env("occ-migrate", "OCC_DATABASE_URL"));
    assert!(has_env("occ-worker", "OCC_DATABASE_URL"));
    assert!(has_env("occ-api", "OCC_DATABASE_URL"));
    assert!(has_env("occ-api", "OCC_AUTH_SECRET"));
    assert!(!has_env("occ-worker", "OCC_AUTH_SECRET"));

    for cm in of_kind::<ConfigMap>(&m.base, "ConfigMap") {
        let data = cm.data.unwrap_or_default();
        for s in secret_settings {
            assert!(!data.contains_key(s), "{s} must not be in a ConfigMap");
        }
        assert_eq!(
            data.get("OCC_KUBERNETES_AUTH").map(String::as_str),
            Some("in-cluster")
        );
        assert_eq!(
            data.get("OCC_CONFIGURATION_DRIVER").map(String::as_str),
            Some("kubernetes")
        );
        assert_eq!(
            data.get("OCC_SECRET_DRIVER").map(String::as_str),
            Some("kubernetes")
        );
        assert_eq!(
            data.get("OCC_COMPUTE_DRIVER").map(String::as_str),
            Some("kubernetes")
        );
        // Gateways run the image occ runs, with the runtime where the API finds it.
        let images: BTreeSet<String> = pods
            .iter()
            .flat_map(|(_, spec)| containers(spec).filter_map(|c| c.image.clone()))
            .collect();
        let images: Vec<String> = images.into_iter().collect();
        let [image] = images.as_slice() else {
            panic!("one image for every occ container: {images:?}");
        };
        assert_eq!(
            data.get("OCC_KUBERNETES_GATEWAY_IMAGE"),
            Some(image),
            "the gateway image is occ's"
        );
        assert_eq!(
            data.get("OCC_KUBERNETES_GATEWAY_RUNTIME_DIR"),
            data.get("OCC_OPENCLAW_RUNTIME")
        );
        assert!(
            !data.keys().any(|k| k.starts_with("OCC_PROCESS_")),
            "no process Compute settings"
        );
        // The shipped tenant quota is one occ accepts.
        let quota = data
            .get("OCC_KUBERNETES_TENANT_QUOTA")
            .expect("a tenant quota is shipped");
        if let Err(e) = quota.parse::<occ_drivers::kubernetes::TenantQuota>() {
            panic!("OCC_KUBERNETES_TENANT_QUOTA: {e}");
        }
    }
    // The shipped Secrets are placeholders only.
    for s in of_kind::<Secret>(&m.base, "Secret") {
        assert!(
            s.data.is_none(),
            "{}: stringData placeholders only",
            name_of(&s.metadata)
        );
        for (k, v) in s.string_data.unwrap_or_default() {
            assert!(v.contains("REPLACE_ME"), "{k}: must be a placeholder");
        }
    }

    // Every OCC_* name anywhere in the manifests (comments included) is a setting occ reads.
    let mut names = BTreeSet::new();
    for text in m.files.values() {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("OCC_") {
            let word_start = !rest[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            if word_start {
                names.insert(tail[..end].to_owned());
            }
            rest = &tail[end..];
        }
    }
    assert!(names.contains("OCC_DATABASE_URL"));
    let unknown: Vec<_> = names
        .iter()
        .filter(|n| {
            let literal = format!("\"{n}\"");
            !SETTINGS_SOURCES
                .iter()
                .any(|source| source.contains(&literal))
        })
        .collect();
    assert!(unknown.is_empty(), "not read by src/settings/: {unknown:?}");
}
