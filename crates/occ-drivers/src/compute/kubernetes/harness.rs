//! The objects of a dedicated revision on Kubernetes besides the gateway's: the harness
//! Deployment and its launch input, the ServiceAccount whose projected token only the harness
//! mounts, the Services between gateway and harness, the NetworkPolicies that allow only
//! gateway↔harness and harness→model traffic, and the gateway's configuration wired to the
//! harness (and bound to its paired node).
//!
//! Harness Pods carry `openclaw.dev/harness-agent`, never `openclaw.dev/agent`: every
//! gateway-side selector (the gateway Deployment's, its Pods' lists, the deny-all policy)
//! keeps meaning "the gateway".

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, RevisionTarget, SecretText};
use occ_host::harness::enroll::{login_input, primary_model_id};
use occ_host::harness::render::{DedicatedWiring, NodeWorkspace, render_dedicated};
use occ_host::harness::{AppServerInput, LaunchInput, ModelEndpoint, NodeInput};
use occ_host::runtime::NODE_REL;
use occ_host::snapshot::render_snapshot;
use serde_json::{Map, Value, json};
use sha2::Digest as _;

use super::workloads::{
    ANNOTATION_REVISION, ANNOTATION_REVISION_ID, GATEWAY_PORT, KubernetesComputeSettings,
    KubernetesDedicatedSettings, LABEL_AGENT, LABEL_HARNESS_AGENT, Names, WORKSPACE_MOUNT,
    container_security, meta, pod_security, workload,
};
use crate::compute::AgentTarget;
use crate::kubernetes::{LABEL_MANAGED_BY, LABEL_NAMESPACE, MANAGED_BY};

/// The harness container (as the process Driver's runtime report names it).
pub(super) const HARNESS_CONTAINER: &str = occ_host::harness::HARNESS_CONTAINER;
/// The app-server's port in the harness Pod and on its Service.
pub const APP_SERVER_PORT: u16 = 18800;
/// The harness claim's subPaths and the harness's own places.
const HARNESS_ROOT: &str = "/var/lib/occ-harness";
const LAUNCH_DIR: &str = "/etc/occ-harness";
const CREDENTIAL_PATH: &str = "/var/run/occ-harness/credential";
const NODE_SETUP_MOUNT: &str = "/run/occ-node-setup";
const SERVICE_PRINCIPAL_TOKEN_DIR: &str = "/var/run/secrets/occ/service-principal";
/// The harness claim's record of the paired node's device id.
pub(super) const ANNOTATION_NODE: &str = "openclaw.dev/node-device-id";
/// Set on the running harness Pod when a setup code is delivered: the kubelet refreshes the
/// Secret volume at once instead of at its next sync.
pub(super) const ANNOTATION_NODE_SETUP: &str = "openclaw.dev/node-setup";
const ANNOTATION_SERVICE_PRINCIPAL: &str = "openclaw.dev/service-principal";
/// The setup-code Secret's key (a file in the harness's Secret volume).
pub(super) const SETUP_CODE_KEY: &str = "setup-code";
/// The lifetime of the projected service-principal token (the API's minimum).
const SERVICE_PRINCIPAL_TOKEN_SECONDS: i64 = 600;
/// `0440`: root-owned files the Pod's user reads through `fsGroup`.
const GROUP_READ_MODE: i32 = 0o440;

/// The labels of harness Pods (selector of the harness Deployment, Service and policy).
pub(super) fn harness_pod_labels(agent: &AgentTarget) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_NAMESPACE.to_owned(), agent.namespace_id.to_string()),
        (LABEL_HARNESS_AGENT.to_owned(), agent.agent_id.to_string()),
    ])
}

/// The dedicated gateway's configuration: the snapshot with the Pod's paths, wired to the
/// harness's app-server Service, bound to `node` once one is paired.
pub(super) fn render_gateway(
    rev: &RevisionTarget,
    names: &Names,
    node: Option<&str>,
) -> Map<String, Value> {
    let mut doc = render_snapshot(rev, GATEWAY_PORT, "lan", WORKSPACE_MOUNT, None);
    let url = format!(
        "ws://{}.{}.svc:{APP_SERVER_PORT}",
        names.harness.harness, names.tenant
    );
    render_dedicated(
        &mut doc,
        &DedicatedWiring {
            app_server_url: &url,
            node: node.map(|node_id| NodeWorkspace {
                node_id,
                remote_root: WORKSPACE_MOUNT,
            }),
        },
    );
    doc
}

/// The launch input of the revision's harness, with the harness Pod's paths.
pub(super) fn launch_input(
    dedicated: &KubernetesDedicatedSettings,
    settings: &KubernetesComputeSettings,
    names: &Names,
    rev: &RevisionTarget,
    app_server_token: &SecretText,
    with_setup: bool,
) -> Result<LaunchInput, ComputeError> {
    let input = LaunchInput {
        runtime_dir: settings.runtime_dir.trim_end_matches('/').into(),
        workspace: WORKSPACE_MOUNT.into(),
        home: format!("{HARNESS_ROOT}/home").into(),
        // In the scratch volume: the launcher empties CODEX_HOME at each start, and a mount
        // point cannot be removed.
        codex_home: format!("{HARNESS_ROOT}/scratch/codex-home").into(),
        tmp_dir: "/tmp".into(),
        log_file: format!("{HARNESS_ROOT}/scratch/harness.log").into(),
        log_stdout: true,
        status_file: format!("{HARNESS_ROOT}/scratch/status.json").into(),
        workspace_setup: with_setup.then(|| format!("{LAUNCH_DIR}/workspace-setup.json").into()),
        login: login_input(rev, CREDENTIAL_PATH.into())?,
        model: dedicated
            .model_base_url
            .as_ref()
            .map(|base_url| ModelEndpoint {
                base_url: base_url.clone(),
                model: primary_model_id(rev),
            }),
        app_server: AppServerInput {
            host: std::net::Ipv4Addr::UNSPECIFIED.into(),
            port: APP_SERVER_PORT,
            token_sha256: hex::encode(sha2::Sha256::digest(app_server_token.expose().as_bytes())),
        },
        node: NodeInput {
            gateway_host: format!("{}.{}.svc", names.gateway, names.tenant),
            gateway_port: GATEWAY_PORT,
            state_dir: format!("{HARNESS_ROOT}/node").into(),
            setup_code_file: format!("{NODE_SETUP_MOUNT}/{SETUP_CODE_KEY}").into(),
        },
    };
    input
        .validate()
        .map_err(|m| ComputeError::permanent(ReasonCode::InvalidHostSettings, m))?;
    Ok(input)
}

/// The harness Deployment serving `rev`, reading its launch input from ConfigMap `launch`.
pub(super) fn harness_deployment(
    settings: &KubernetesComputeSettings,
    dedicated: &KubernetesDedicatedSettings,
    names: &Names,
    rev: &RevisionTarget,
    launch: &str,
    with_setup: bool,
) -> Deployment {
    let hx = &names.harness;
    let runtime = settings.runtime_dir.trim_end_matches('/');
    let node_bin = format!("{runtime}/{NODE_REL}")
        .rsplit_once('/')
        .map(|(d, _)| d.to_owned())
        .unwrap_or_default();
    let mut mounts = vec![
        json!({"name": "state", "mountPath": WORKSPACE_MOUNT, "subPath": "workspace"}),
        json!({"name": "state", "mountPath": format!("{HARNESS_ROOT}/home"), "subPath": "home"}),
        json!({"name": "state", "mountPath": format!("{HARNESS_ROOT}/node"), "subPath": "node"}),
        json!({"name": "scratch", "mountPath": format!("{HARNESS_ROOT}/scratch")}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
        // Files the launcher opens without following links: subPath mounts of the real file
        // (a Secret or ConfigMap volume's files are links into `..data`).
        json!({"name": "launch", "mountPath": format!("{LAUNCH_DIR}/launch.json"),
               "subPath": "launch.json", "readOnly": true}),
        json!({"name": "credential", "mountPath": CREDENTIAL_PATH,
               "subPath": "credential", "readOnly": true}),
        // Refreshed in place while the Pod runs (the setup code arrives later).
        json!({"name": "node-setup", "mountPath": NODE_SETUP_MOUNT, "readOnly": true}),
        json!({"name": "service-principal", "mountPath": SERVICE_PRINCIPAL_TOKEN_DIR,
               "readOnly": true}),
    ];
    let mut volumes = vec![
        json!({"name": "state", "persistentVolumeClaim": {"claimName": hx.state}}),
        json!({"name": "scratch", "emptyDir": {}}),
        json!({"name": "tmp", "emptyDir": {}}),
        json!({"name": "launch", "configMap": {"name": launch,
                "items": [{"key": "launch.json", "path": "launch.json"}]}}),
        json!({"name": "credential", "secret": {"secretName": hx.credential(&rev.revision_id),
                "defaultMode": GROUP_READ_MODE}}),
        json!({"name": "node-setup", "secret": {"secretName": hx.node_setup, "optional": true,
                "defaultMode": GROUP_READ_MODE}}),
        json!({"name": "service-principal", "projected": {"defaultMode": GROUP_READ_MODE,
                "sources": [{"serviceAccountToken": {"audience": dedicated.token_audience,
                    "expirationSeconds": SERVICE_PRINCIPAL_TOKEN_SECONDS, "path": "token"}}]}}),
    ];
    if with_setup {
        mounts.push(
            json!({"name": "setup", "mountPath": format!("{LAUNCH_DIR}/workspace-setup.json"),
                           "subPath": "setup.json", "readOnly": true}),
        );
        volumes.push(
            json!({"name": "setup", "secret": {"secretName": names.setup,
                              "defaultMode": GROUP_READ_MODE}}),
        );
    }
    let container = json!({
        "name": HARNESS_CONTAINER,
        "image": settings.image,
        "command": [settings.occ_binary, "harness-launch", "--input",
                    format!("{LAUNCH_DIR}/launch.json")],
        "env": [
            {"name": "HOME", "value": format!("{HARNESS_ROOT}/home")},
            {"name": "TMPDIR", "value": "/tmp"},
            {"name": "PATH", "value": format!("{node_bin}:/usr/local/bin:/usr/bin:/bin")},
        ],
        "ports": [{"name": "app-server", "containerPort": APP_SERVER_PORT}],
        // The app-server listens only after login and the probe turn.
        "readinessProbe": {"tcpSocket": {"port": APP_SERVER_PORT},
                            "periodSeconds": 2, "failureThreshold": 3},
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                      "limits": {"memory": "1536Mi"}},
        "securityContext": container_security(),
    });
    let mut template = json!({
        "metadata": {
            "labels": harness_pod_labels(&rev.agent),
            "annotations": {
                ANNOTATION_REVISION_ID: rev.revision_id.to_string(),
                ANNOTATION_REVISION: rev.revision.to_string(),
            },
        },
        "spec": {
            "serviceAccountName": hx.harness,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "securityContext": pod_security(),
            "containers": [container],
            "volumes": volumes,
        },
    });
    super::objects::with_runtime_class(&mut template, settings);
    workload(
        names,
        &hx.harness,
        rev,
        &harness_pod_labels(&rev.agent),
        template,
    )
}

/// The harness's ServiceAccount: no API token; the projected token names its service principal.
pub(super) fn service_account(names: &Names, agent: &AgentTarget) -> Value {
    let mut meta = meta(&names.harness.harness, &names.tenant, agent, None);
    meta.annotations.get_or_insert_default().insert(
        ANNOTATION_SERVICE_PRINCIPAL.to_owned(),
        agent.service_principal_id.to_string(),
    );
    json!({"metadata": meta, "automountServiceAccountToken": false})
}

/// A ClusterIP Service `name` for Pods labelled `selector` on `port`.
pub(super) fn service(
    names: &Names,
    agent: &AgentTarget,
    name: &str,
    selector: (&str, &str),
    port_name: &str,
    port: u16,
) -> Value {
    json!({"metadata": meta(name, &names.tenant, agent, None),
           "spec": {"type": "ClusterIP", "selector": {selector.0: selector.1},
                    "ports": [{"name": port_name, "port": port, "targetPort": port,
                               "protocol": "TCP"}]}})
}

/// Lets the harness's node host reach the gateway (next to the gateway's deny-all policy;
/// occ's own way in, `pods/portforward`, is not subject to policies).
pub(super) fn gateway_node_policy(names: &Names, agent: &AgentTarget) -> Value {
    let id = agent.agent_id.to_string();
    json!({"metadata": meta(&names.harness.gateway_node_policy, &names.tenant, agent, None),
           "spec": {"podSelector": {"matchLabels": {LABEL_AGENT: id}},
                    "policyTypes": ["Ingress"],
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {LABEL_HARNESS_AGENT: id}}}],
                                 "ports": [{"protocol": "TCP", "port": GATEWAY_PORT}]}]}})
}

/// The harness's policy: in, only the gateway to the app-server; out, only the gateway, the
/// cluster's DNS and the model endpoint(s).
pub(super) fn harness_policy(
    names: &Names,
    agent: &AgentTarget,
    dedicated: &KubernetesDedicatedSettings,
) -> Value {
    let id = agent.agent_id.to_string();
    let mut egress = vec![
        json!({"to": [{"podSelector": {"matchLabels": {LABEL_AGENT: id}}}],
               "ports": [{"protocol": "TCP", "port": GATEWAY_PORT}]}),
        json!({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                       "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
               "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}),
    ];
    if dedicated.model_egress.is_empty() {
        egress.push(json!({"to": [{"ipBlock": {"cidr": "0.0.0.0/0",
                "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"]}}],
            "ports": [{"protocol": "TCP", "port": 443}]}));
    } else {
        egress.extend(dedicated.model_egress.iter().map(|e| {
            json!({"to": [{"ipBlock": {"cidr": e.cidr}}],
                   "ports": [{"protocol": "TCP", "port": e.port}]})
        }));
    }
    json!({"metadata": meta(&names.harness.harness, &names.tenant, agent, None),
           "spec": {"podSelector": {"matchLabels": {LABEL_HARNESS_AGENT: id}},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {LABEL_AGENT: id}}}],
                                 "ports": [{"protocol": "TCP", "port": APP_SERVER_PORT}]}],
                    "egress": egress}})
}
