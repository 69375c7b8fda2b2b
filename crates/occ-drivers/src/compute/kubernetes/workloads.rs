//! The shapes every object of an Agent shares, the gateway's and a dedicated Agent's harness's:
//! the Driver's settings, object names, the labels and annotations that make an object this
//! Agent's, metadata, security contexts, and the Deployment around a Pod template.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use occ_core::ReasonCode;
use occ_core::RevisionId;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::compute::{AgentTarget, ComputeError, RevisionTarget};
use crate::kubernetes::{
    ANNOTATION_NAMESPACE_ID, LABEL_MANAGED_BY, LABEL_NAMESPACE, MANAGED_BY, label, short_hash,
};

/// The gateway's port inside its Pod.
pub const GATEWAY_PORT: u16 = 18789;
pub(super) const LABEL_AGENT: &str = "openclaw.dev/agent";
/// The name of the gateway's container in the Pod template.
pub(super) const GATEWAY_CONTAINER: &str = "gateway";
pub(super) const LABEL_REVISION: &str = "openclaw.dev/revision";
pub(super) const ANNOTATION_REVISION_ID: &str = "openclaw.dev/revision-id";
pub(super) const ANNOTATION_REVISION: &str = "openclaw.dev/revision-number";
pub(super) const ANNOTATION_TEMPLATE: &str = "openclaw.dev/template-hash";
const POD_USER: i64 = 10001;

/// The Agent's workspace, at the same path in both Pods: Codex's working directory, the node's
/// file root and the gateway's `agents.defaults.workspace`.
pub(super) const WORKSPACE_MOUNT: &str = "/workspace";
/// The transport Secret's key.
pub(super) const APP_SERVER_TOKEN_KEY: &str = "app-server-token";
/// The label naming the Agent on its harness Pods (not `openclaw.dev/agent`, see above).
pub(super) const LABEL_HARNESS_AGENT: &str = "openclaw.dev/harness-agent";
/// Settings of the Kubernetes Compute Driver.
#[derive(Debug, Clone)]
pub struct KubernetesComputeSettings {
    /// The gateway image: occ (for `occ workspace-setup`) and the pinned OpenClaw runtime.
    pub image: String,
    /// Where the runtime is installed in the image (`occ runtime install --dir`).
    pub runtime_dir: String,
    /// The `occ` binary in the image.
    pub occ_binary: String,
    /// Size of each Agent's state volume (e.g. `10Gi`).
    pub state_storage: String,
    /// Storage class of the state volumes (the cluster default when unset).
    pub storage_class: Option<String>,
    /// RuntimeClass of the Agent's Pods (gateway and harness: a gVisor or Kata class for a
    /// second boundary around untrusted Agents); the cluster's default runtime when unset.
    pub runtime_class: Option<String>,
    /// How long activation waits for the rollout and the native handshake.
    pub activation_timeout: Duration,
    /// How long stop and delete wait for the Pod to go.
    pub stop_timeout: Duration,
    /// Dedicated (Codex harness) execution; `None`: embedded only.
    pub dedicated: Option<KubernetesDedicatedSettings>,
}

pub(super) fn foreign(what: String) -> ComputeError {
    ComputeError::permanent(ReasonCode::OwnershipConflict, what)
}

/// Names of one Agent's objects.
pub(super) struct Names {
    pub tenant: String,
    pub gateway: String,
    pub token: String,
    pub state: String,
    pub setup: String,
    /// A dedicated Agent's harness objects.
    pub harness: HarnessNames,
}

impl Names {
    pub fn of(agent: &AgentTarget, tenant: String) -> Self {
        let h = short_hash(agent.agent_id.as_str(), 12);
        Self {
            tenant,
            gateway: format!("gw-{h}"),
            token: format!("gw-token-{h}"),
            state: format!("gw-state-{h}"),
            setup: format!("gw-setup-{h}"),
            harness: HarnessNames::of(agent),
        }
    }
    pub fn snapshot(&self, rev: &RevisionTarget) -> String {
        format!(
            "{}-cfg-{}",
            self.gateway,
            short_hash(rev.revision_id.as_str(), 12)
        )
    }
    pub fn environment(&self, rev: &RevisionTarget) -> String {
        format!(
            "{}-env-{}",
            self.gateway,
            short_hash(rev.revision_id.as_str(), 12)
        )
    }
}

pub(super) fn labels(agent: &AgentTarget) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_NAMESPACE.to_owned(), agent.namespace_id.to_string()),
        (LABEL_AGENT.to_owned(), agent.agent_id.to_string()),
    ])
}

pub(super) fn meta(
    name: &str,
    tenant: &str,
    agent: &AgentTarget,
    rev: Option<&RevisionTarget>,
) -> ObjectMeta {
    let mut labels = labels(agent);
    if let Some(rev) = rev {
        labels.insert(LABEL_REVISION.to_owned(), rev.revision_id.to_string());
    }
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(tenant.to_owned()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(
            ANNOTATION_NAMESPACE_ID.to_owned(),
            agent.namespace_id.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

pub(super) fn owned(meta: &ObjectMeta, agent: &AgentTarget) -> bool {
    label(meta, LABEL_MANAGED_BY) == Some(MANAGED_BY)
        && label(meta, LABEL_NAMESPACE) == Some(agent.namespace_id.as_str())
        && label(meta, LABEL_AGENT) == Some(agent.agent_id.as_str())
}

pub(super) fn typed<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a manifest built by this module is well-formed")
}

/// Settings of dedicated execution on Kubernetes (`None` in [`KubernetesComputeSettings`]:
/// embedded only).
#[derive(Debug, Clone)]
pub struct KubernetesDedicatedSettings {
    /// The OpenAI-compatible Responses endpoint Codex calls (`OCC_CODEX_BASE_URL`); Codex's
    /// default (OpenAI) when unset.
    pub model_base_url: Option<String>,
    /// Size of each dedicated Agent's harness claim (workspace, home, node identity).
    pub harness_storage: String,
    /// The audience of the projected service-principal token the harness mounts.
    pub token_audience: String,
    /// Where the harness may send model calls; empty: any public IPv4 address on 443.
    pub model_egress: Vec<ModelEgress>,
    /// How long activation waits for the harness's app-server (login and probe included).
    pub ready_timeout: Duration,
}

/// One allowed model destination of the harness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEgress {
    /// An IPv4 or IPv6 CIDR block.
    pub cidr: String,
    /// A TCP port.
    pub port: u16,
}

/// The names of a dedicated Agent's harness objects (`h12` as for the gateway's).
pub(super) struct HarnessNames {
    /// Deployment, ServiceAccount, Service and NetworkPolicy `hx-<h12>`.
    pub harness: String,
    /// The harness claim.
    pub state: String,
    /// The app-server token (created once).
    pub transport: String,
    /// The setup code while the node pairs (empty otherwise).
    pub node_setup: String,
    /// The policy letting the harness's node host reach the gateway.
    pub gateway_node_policy: String,
    h12: String,
}

impl HarnessNames {
    pub fn of(agent: &AgentTarget) -> Self {
        let h = short_hash(agent.agent_id.as_str(), 12);
        Self {
            harness: format!("hx-{h}"),
            state: format!("hx-state-{h}"),
            transport: format!("hx-transport-{h}"),
            node_setup: format!("hx-node-setup-{h}"),
            gateway_node_policy: format!("gw-node-{h}"),
            h12: h,
        }
    }
    /// The revision's credential Secret.
    pub fn credential(&self, rev: &RevisionId) -> String {
        format!("hx-{}-cred-{}", self.h12, short_hash(rev.as_str(), 12))
    }
    /// The revision's launch input ConfigMap for `content` (immutable; Driver settings shape
    /// it, so a changed setting is a new name).
    pub fn launch(&self, rev: &RevisionId, content: &str) -> String {
        format!(
            "hx-{}-launch-{}-{}",
            self.h12,
            short_hash(rev.as_str(), 12),
            short_hash(content, 8)
        )
    }
    /// The gateway's runtime configuration of the revision bound to a node (`content`).
    pub fn runtime_config(&self, rev: &RevisionId, content: &str) -> String {
        format!(
            "gw-{}-run-{}-{}",
            self.h12,
            short_hash(rev.as_str(), 12),
            short_hash(content, 8)
        )
    }
}

/// The container security context of every occ container.
pub(super) fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

/// The Pod security context of every occ Pod.
pub(super) fn pod_security() -> Value {
    json!({"runAsNonRoot": true, "runAsUser": POD_USER, "runAsGroup": POD_USER,
           "fsGroup": POD_USER, "seccompProfile": {"type": "RuntimeDefault"}})
}

/// A one-replica `Recreate` Deployment of `template` named `name`, selecting Pods by the
/// Agent's label in `pod_labels`, with the template hash and the revision it serves.
pub(super) fn workload(
    names: &Names,
    name: &str,
    rev: &RevisionTarget,
    pod_labels: &BTreeMap<String, String>,
    template: Value,
) -> Deployment {
    let hash = hex::encode(sha2::Sha256::digest(template.to_string().as_bytes()));
    let mut meta = meta(name, &names.tenant, &rev.agent, None);
    meta.annotations.get_or_insert_default().extend([
        (ANNOTATION_TEMPLATE.to_owned(), hash),
        (
            ANNOTATION_REVISION_ID.to_owned(),
            rev.revision_id.to_string(),
        ),
        (ANNOTATION_REVISION.to_owned(), rev.revision.to_string()),
    ]);
    let selector: BTreeMap<&String, &String> = pod_labels
        .iter()
        .filter(|(k, _)| *k == LABEL_AGENT || *k == LABEL_HARNESS_AGENT)
        .collect();
    typed(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }))
}
