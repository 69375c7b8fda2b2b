//! The Kubernetes manifests in `deploy/kubernetes` (no cluster needed): every YAML document is
//! read as the k8s-openapi type of its `kind` and written back, and must come back identical
//! (k8s-openapi ignores unknown fields when reading, so a misspelled or misplaced field would
//! vanish and fail here); the tenant template is rendered by its own script; then the security
//! properties the manifests promise are checked on the typed objects, and every `OCC_*` name
//! they mention must be a setting occ reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PersistentVolumeClaim, PodSpec, Secret, Service,
    ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use occ_core::NamespaceId;
use occ_drivers::kubernetes::{
    ANNOTATION_NAMESPACE_ID, ANNOTATION_NAMESPACE_LIFECYCLE, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, TENANT_LIFECYCLE_EXTERNAL, tenant_namespace_name,
};
use serde::Serialize;
use serde::de::{Deserialize as _, DeserializeOwned};
use serde_json::Value;

/// The source that reads every setting (names appear there as string literals).
const SETTINGS_SOURCE: &str = include_str!("../src/settings.rs");
/// Where the readiness probe's route is declared.
const AUTH_ROUTES_SOURCE: &str = include_str!("../../occ-api/src/handlers/auth.rs");
/// Settings of the Kubernetes Drivers being wired into settings.rs at the time these manifests
/// were written (`OCC_KUBERNETES_AUTH=in-cluster|kubeconfig`, `OCC_KUBECONFIG`,
/// `OCC_KUBERNETES_CONTEXT`). Accepted before settings.rs reads them; drop this list once it does.
const PENDING_SETTINGS: &[&str] = &[
    "OCC_KUBERNETES_AUTH",
    "OCC_KUBECONFIG",
    "OCC_KUBERNETES_CONTEXT",
];
/// Not applied by `kubectl apply -k` on purpose (placeholders; one per occ Namespace).
const NOT_IN_KUSTOMIZATION: &[&str] = &["secrets.template.yaml", "tenant"];
/// A fixed occ Namespace id to render the tenant template with (the Kubernetes Drivers' golden
/// objects use the same one: `occ-b8b5a4204da537a`).
const NAMESPACE_ID: &str = "ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50";
/// occ's own namespace, where its ServiceAccounts live.
const OCC_NAMESPACE: &str = "occ-system";

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

fn render_tenant(args: &[&str]) -> String {
    let script = deploy_dir().join("tenant/render.sh");
    let out = Command::new("sh")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "render.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
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

/// Every manifest: the files as they are (templates included), and the tenant template rendered
/// both ways.
struct Manifests {
    /// File name (relative to deploy/kubernetes) → text.
    files: BTreeMap<String, String>,
    /// Documents of the files applied by the kustomization, and of the secret template.
    base: Vec<Doc>,
    /// The tenant template rendered for [`NAMESPACE_ID`] (an occ-managed namespace).
    tenant: Vec<Doc>,
    /// The same, adopting an existing namespace.
    adopted: Vec<Doc>,
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
            if !name.starts_with("tenant/") {
                base.extend(docs);
            }
        }
        files.insert(name, text);
    }
    let tenant_text = render_tenant(&[NAMESPACE_ID]);
    let adopted_text = render_tenant(&[NAMESPACE_ID, "team-a"]);
    files.insert("tenant (rendered)".into(), tenant_text.clone());
    files.insert("tenant (rendered, adopted)".into(), adopted_text.clone());
    let tenant = documents("tenant (rendered)", &tenant_text);
    let adopted = documents("tenant (rendered, adopted)", &adopted_text);
    for doc in tenant.iter().chain(&adopted) {
        check_round_trip(doc);
    }
    Manifests {
        files,
        base,
        tenant,
        adopted,
    }
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
        "PersistentVolumeClaim",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/kubernetes");
    }
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
    let rbac = m.base.iter().chain(&m.tenant).cloned().collect::<Vec<_>>();
    let subjects = of_kind::<ClusterRoleBinding>(&rbac, "ClusterRoleBinding")
        .into_iter()
        .flat_map(|b| b.subjects.unwrap_or_default())
        .chain(
            of_kind::<RoleBinding>(&rbac, "RoleBinding")
                .into_iter()
                .flat_map(|b| b.subjects.unwrap_or_default()),
        );
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

#[test]
fn cluster_wide_occ_only_reads_namespaces() {
    let m = manifests();
    let roles = of_kind::<ClusterRole>(&m.base, "ClusterRole");
    let [role] = roles.as_slice() else {
        panic!("exactly one ClusterRole");
    };
    assert!(role.aggregation_rule.is_none());
    let rules = role.rules.clone().unwrap_or_default();
    let [rule] = rules.as_slice() else {
        panic!("exactly one rule");
    };
    assert_eq!(
        rule,
        &PolicyRule {
            api_groups: Some(strings(&[""])),
            resources: Some(strings(&["namespaces"])),
            verbs: strings(&["get", "list"]),
            ..PolicyRule::default()
        }
    );
    for b in of_kind::<ClusterRoleBinding>(&m.base, "ClusterRoleBinding") {
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert_eq!(b.role_ref.name, name_of(&role.metadata));
    }
    assert!(
        of_kind::<Role>(&m.base, "Role").is_empty(),
        "no Role in occ's own namespace"
    );
}

/// The verbs of a Role per resource, checking each rule on the way.
fn verbs_by_resource(role: &Role) -> BTreeMap<String, BTreeSet<String>> {
    let name = name_of(&role.metadata);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in role.rules.iter().flatten() {
        assert_eq!(
            rule.api_groups,
            Some(strings(&[""])),
            "{name}: core group only"
        );
        assert!(rule.non_resource_urls.is_none(), "{name}");
        for v in &rule.verbs {
            assert!(
                ["get", "create", "update", "delete"].contains(&v.as_str()),
                "{name}: verb {v} (no list, watch, patch, deletecollection or *)"
            );
        }
        if rule.verbs.iter().any(|v| v == "create") {
            assert_eq!(
                rule.verbs,
                strings(&["create"]),
                "{name}: create in its own rule"
            )
        }
        if rule.verbs.iter().any(|v| v == "create") && rule.resource_names.is_some() {
            panic!("{name}: create cannot be restricted by resourceNames");
        }
        for r in rule.resources.iter().flatten() {
            assert!(
                r == "configmaps" || r == "secrets",
                "{name}: resource {r} (no pods, nothing else)"
            );
            out.entry(r.clone())
                .or_default()
                .extend(rule.verbs.iter().cloned());
        }
    }
    out
}

#[test]
fn the_tenant_roles_are_least_privilege() {
    let m = manifests();
    for docs in [&m.tenant, &m.adopted] {
        let roles = of_kind::<Role>(docs, "Role");
        let role = |n: &str| {
            roles
                .iter()
                .find(|r| name_of(&r.metadata) == n)
                .unwrap_or_else(|| panic!("no Role {n}"))
        };
        let set = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let api = verbs_by_resource(role("occ-api"));
        assert_eq!(
            api["configmaps"],
            set(&["create", "get", "update", "delete"])
        );
        assert_eq!(api["secrets"], set(&["create", "get", "update", "delete"]));
        let worker = verbs_by_resource(role("occ-worker"));
        assert_eq!(
            worker,
            BTreeMap::from([("secrets".to_owned(), set(&["get"]))])
        );
        assert_eq!(roles.len(), 2);
        // The configmaps create rule stands alone, without resourceNames.
        assert!(role("occ-api").rules.iter().flatten().any(|r| {
            r.verbs == strings(&["create"])
                && r.resources == Some(strings(&["configmaps"]))
                && r.resource_names.is_none()
        }));
        for b in of_kind::<RoleBinding>(docs, "RoleBinding") {
            assert_eq!(b.role_ref.kind, "Role");
            let subjects = b.subjects.unwrap_or_default();
            assert_eq!(subjects.len(), 1);
            assert_eq!(
                subjects[0].name, b.role_ref.name,
                "each Role to its own account"
            );
        }
        assert!(of_kind::<ClusterRole>(docs, "ClusterRole").is_empty());
        assert!(of_kind::<ClusterRoleBinding>(docs, "ClusterRoleBinding").is_empty());
    }
}

#[test]
fn the_tenant_namespace_is_the_one_the_drivers_look_for() {
    let m = manifests();
    let id: NamespaceId = NAMESPACE_ID.parse().expect("namespace id");
    let expected = tenant_namespace_name(&id);
    assert_eq!(expected, "occ-b8b5a4204da537a");
    for (docs, name, adopted) in [
        (&m.tenant, expected.as_str(), false),
        (&m.adopted, "team-a", true),
    ] {
        let namespaces = of_kind::<Namespace>(docs, "Namespace");
        let [ns] = namespaces.as_slice() else {
            panic!("one Namespace");
        };
        assert_eq!(name_of(&ns.metadata), name);
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        let annotations = ns.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            labels.get(LABEL_NAMESPACE).map(String::as_str),
            Some(NAMESPACE_ID)
        );
        assert_eq!(
            annotations.get(ANNOTATION_NAMESPACE_ID).map(String::as_str),
            Some(NAMESPACE_ID)
        );
        if adopted {
            assert!(!labels.contains_key(LABEL_MANAGED_BY));
            assert_eq!(
                annotations
                    .get(ANNOTATION_NAMESPACE_LIFECYCLE)
                    .map(String::as_str),
                Some(TENANT_LIFECYCLE_EXTERNAL)
            );
        } else {
            assert_eq!(
                labels.get(LABEL_MANAGED_BY).map(String::as_str),
                Some(MANAGED_BY)
            );
            assert!(!annotations.contains_key(ANNOTATION_NAMESPACE_LIFECYCLE));
        }
        for doc in docs.iter().filter(|d| d.kind() != "Namespace") {
            assert_eq!(
                doc.value["metadata"]["namespace"].as_str(),
                Some(name),
                "{}",
                doc.origin
            );
        }
        for doc in docs {
            assert!(
                !doc.value.to_string().contains("__"),
                "{}: placeholder left",
                doc.origin
            );
        }
    }
    // Not an occ Namespace id: refused.
    let script = deploy_dir().join("tenant/render.sh");
    for bad in [
        &["default"][..],
        &["ns_x;rm"],
        &[],
        &[NAMESPACE_ID, "Bad_Name"],
    ] {
        let out = Command::new("sh")
            .arg(&script)
            .args(bad)
            .output()
            .expect("sh");
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(out.stdout.is_empty(), "{bad:?}");
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
    assert!(
        worker
            .volumes
            .iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.is_some()),
        "the process Compute Driver's data on a PersistentVolumeClaim"
    );
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
            Some("process")
        );
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
        .filter(|n| !SETTINGS_SOURCE.contains(&format!("\"{n}\"")))
        .filter(|n| !PENDING_SETTINGS.contains(&n.as_str()))
        .collect();
    assert!(unknown.is_empty(), "not read by settings.rs: {unknown:?}");
}
