//! Wire views: what the API returns, in the reference's shapes. Optional fields are omitted when
//! absent; fields typed `X | null` are always present.

use occ_controller::configurations::Configuration;
use std::collections::BTreeMap;

use occ_controller::deployment_runtime::{DeploymentRuntime, Diagnostics};
use occ_controller::deployments::DeploymentStatus;
use occ_controller::iam::NamespacePermissions;
use occ_controller::runtime_logs::LogPage;
use occ_core::iam::{AccessBinding, Role};
use occ_core::resource::{
    Agent, AgentRevision, AgentRuntime, DesiredRuntimeState, HarnessAuth, Installation, Namespace,
    SecretMeta, ServiceAccount,
};
use occ_core::runtime_report::{MAX_PODS, WorkloadRole};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

mod identity;
mod presets;
mod provisioning;

pub use identity::*;
pub use presets::*;
pub use provisioning::*;

/// The Installation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallationView {
    id: String,
    name: String,
    created_at: String,
    #[schema(value_type = Object)]
    capabilities: Value,
}

impl InstallationView {
    /// From the domain type and the execution modes Compute supports.
    pub fn new(i: &Installation, modes: &[&str]) -> Self {
        Self {
            id: i.id.to_string(),
            name: i.name.to_string(),
            created_at: i.created_at.to_string(),
            capabilities: json!({"agentProvisioning": {"executionModes": modes}}),
        }
    }
}

/// A Namespace.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceView {
    id: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    existing_namespace: Option<String>,
    /// `provisioning` | `ready` | `failed` | `deleting`.
    status: String,
    created_at: String,
}

impl From<&Namespace> for NamespaceView {
    fn from(n: &Namespace) -> Self {
        Self {
            id: n.id.to_string(),
            name: n.name.to_string(),
            existing_namespace: n.existing_namespace.clone(),
            status: n.status.as_str().into(),
            created_at: n.created_at.to_string(),
        }
    }
}

/// A Configuration with its native document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationView {
    id: String,
    namespace_id: String,
    /// Always `agent`.
    kind: String,
    generation: u64,
    /// The native `openclaw.json` document.
    #[schema(value_type = Object)]
    values: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    secret_bindings: Option<Value>,
    created_at: String,
}

impl From<&Configuration> for ConfigurationView {
    fn from(c: &Configuration) -> Self {
        let m = &c.meta;
        Self {
            id: m.id.to_string(),
            namespace_id: m.namespace_id.to_string(),
            kind: "agent".into(),
            generation: m.generation.get(),
            values: Value::Object(c.values.clone()),
            secret_bindings: (!m.secret_bindings.is_empty())
                .then(|| serde_json::to_value(&m.secret_bindings).unwrap_or_default()),
            created_at: m.created_at.to_string(),
        }
    }
}

/// A reference to a Secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRefView {
    /// Always `secret`.
    kind: String,
    namespace_id: String,
    id: String,
}

/// Secret metadata (never the value).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretView {
    id: String,
    namespace_id: String,
    name: String,
    #[serde(rename = "ref")]
    reference: SecretRefView,
}

impl From<&SecretMeta> for SecretView {
    fn from(s: &SecretMeta) -> Self {
        Self {
            id: s.id.to_string(),
            namespace_id: s.namespace_id.to_string(),
            name: s.name.to_string(),
            reference: SecretRefView {
                kind: "secret".into(),
                namespace_id: s.namespace_id.to_string(),
                id: s.id.to_string(),
            },
        }
    }
}

/// A ServiceAccount (no credential value, ever).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountView {
    id: String,
    namespace_id: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    credential: Option<Value>,
}

impl From<&ServiceAccount> for ServiceAccountView {
    fn from(s: &ServiceAccount) -> Self {
        Self {
            id: s.id.to_string(),
            namespace_id: s.namespace_id.to_string(),
            name: s.name.to_string(),
            credential: s.credential_kind.map(|k| json!({"kind": k})),
        }
    }
}

/// An Agent (the editable draft).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    id: String,
    namespace_id: String,
    name: String,
    service_principal_id: String,
    configuration_id: String,
    backend_id: Option<String>,
    /// `embedded` | `dedicated`.
    execution_mode: String,
    /// `{method:"runtime"}` | `{method:"api_key", source}` | `{method:"chatgpt_service_account", serviceAccountId}` | null.
    #[schema(value_type = Option<Object>)]
    harness_auth: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    active_revision_id: Option<String>,
    /// `running` | `stopped`.
    desired_runtime_state: String,
    /// `active` | `deleting`.
    status: String,
    created_at: String,
}

impl From<&Agent> for AgentView {
    fn from(a: &Agent) -> Self {
        Self {
            id: a.id.to_string(),
            namespace_id: a.namespace_id.to_string(),
            name: a.name.to_string(),
            service_principal_id: a.service_principal_id.to_string(),
            configuration_id: a.configuration_id.to_string(),
            backend_id: a.backend_id.clone(),
            execution_mode: a.execution_mode.as_str().into(),
            harness_auth: a
                .harness_auth
                .as_ref()
                .map(|h| serde_json::to_value(h).unwrap_or_default()),
            active_revision_id: a.active_revision_id.as_ref().map(ToString::to_string),
            desired_runtime_state: a.desired_runtime_state.as_str().into(),
            status: a.status.as_str().into(),
            created_at: a.created_at.to_string(),
        }
    }
}

/// The deployment inventory (`getInstallationDeploymentInventory`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryView {
    installation_id: String,
    namespaces: Vec<InventoryNamespaceView>,
}

/// A Namespace of the inventory.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryNamespaceView {
    id: String,
    status: String,
    agents: Vec<InventoryAgentView>,
}

/// An Agent of the inventory.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryAgentView {
    id: String,
    status: String,
    desired_runtime_state: String,
    execution_mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    active_revision_id: Option<String>,
    /// A deployment of it is queued or running.
    deployment_in_progress: bool,
}

impl From<&occ_controller::inventory::Inventory> for InventoryView {
    fn from(inv: &occ_controller::inventory::Inventory) -> Self {
        Self {
            installation_id: inv.installation_id.to_string(),
            namespaces: inv
                .namespaces
                .iter()
                .map(|(ns, agents)| InventoryNamespaceView {
                    id: ns.id.to_string(),
                    status: ns.status.as_str().into(),
                    agents: agents
                        .iter()
                        .map(|(a, in_progress)| InventoryAgentView {
                            id: a.id.to_string(),
                            status: a.status.as_str().into(),
                            desired_runtime_state: a.desired_runtime_state.as_str().into(),
                            execution_mode: a.execution_mode.as_str().into(),
                            active_revision_id: a
                                .active_revision_id
                                .as_ref()
                                .map(ToString::to_string),
                            deployment_in_progress: *in_progress,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A model a provider offers (`discoverAgentModels`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelView {
    id: String,
    name: String,
}

impl From<&occ_controller::models::ModelInfo> for ModelView {
    fn from(m: &occ_controller::models::ModelInfo) -> Self {
        Self {
            id: m.id.clone(),
            name: m.name.clone(),
        }
    }
}

/// A configured Backend (`listBackends`): its id and type, never its credentials.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackendView {
    id: String,
    #[serde(rename = "type")]
    kind: String,
}

impl From<&occ_controller::BackendConfig> for BackendView {
    fn from(b: &occ_controller::BackendConfig) -> Self {
        Self {
            id: b.id.clone(),
            kind: b.kind.clone(),
        }
    }
}

/// The public projection of a revision's harness auth: Secret sources lose their Namespace.
fn public_harness_auth(auth: &Option<HarnessAuth>) -> Value {
    match auth {
        None => json!({"method": "runtime"}),
        Some(auth @ (HarnessAuth::ApiKey { source } | HarnessAuth::CodexPat { source })) => {
            json!({"method": auth.method(), "source": {"kind": "secret", "id": source.id}})
        }
        Some(other) => serde_json::to_value(other).unwrap_or_default(),
    }
}

/// An immutable AgentRevision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionView {
    id: String,
    namespace_id: String,
    agent_id: String,
    revision: u64,
    configuration_id: String,
    /// Always `agent`.
    configuration_kind: String,
    configuration_generation: u64,
    /// The frozen native document.
    #[schema(value_type = Object)]
    configuration: Value,
    backend_id: Option<String>,
    #[schema(value_type = Object)]
    harness: Value,
    #[schema(value_type = Object)]
    compute: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret_driver_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    secret_bindings: Option<Value>,
    #[schema(value_type = Object)]
    harness_auth: Value,
    /// occ extension: the earlier revision this one was redeployed from. Omitted for a deploy
    /// of the Configuration (the reference's AgentRevision is a closed object).
    #[serde(skip_serializing_if = "Option::is_none")]
    redeployed_from_revision_id: Option<String>,
    created_at: String,
}

impl From<&AgentRevision> for RevisionView {
    fn from(r: &AgentRevision) -> Self {
        let s = &r.spec;
        Self {
            id: r.id.to_string(),
            namespace_id: r.namespace_id.to_string(),
            agent_id: r.agent_id.to_string(),
            revision: r.revision,
            configuration_id: s.configuration_id.to_string(),
            configuration_kind: s.configuration_kind.clone(),
            configuration_generation: s.configuration_generation.get(),
            configuration: Value::Object(s.configuration.clone()),
            backend_id: r.backend_id.clone(),
            harness: json!({"id": s.harness.id, "version": s.harness.version, "mode": s.harness.mode}),
            compute: json!({"id": s.compute.id, "implementation": s.compute.implementation}),
            secret_driver_id: s.secret_driver_id.clone(),
            secret_bindings: s
                .secret_bindings
                .as_ref()
                .map(|b| serde_json::to_value(b).unwrap_or_default()),
            harness_auth: public_harness_auth(&s.harness_auth),
            redeployed_from_revision_id: r.source_revision_id.as_ref().map(ToString::to_string),
            created_at: r.created_at.to_string(),
        }
    }
}

/// What the worker last observed of an Agent's gateway (occ's own route: the reference's Agent
/// is a closed object, so this is not a field of it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentRuntimeView {
    namespace_id: String,
    agent_id: String,
    /// `running` | `restarting` (exited or found down; occ is starting it again) | `stopped` |
    /// `unknown` (not observed yet).
    state: String,
    /// The revision observed (`null` before any observation).
    revision_id: Option<String>,
    /// How often occ started this revision's gateway again after it went down.
    restarts: u64,
    /// When it last exited on its own (or was found down, where the Driver cannot report exits).
    last_exit_at: Option<String>,
    /// How it exited, when the Driver saw it (`exit status: 1`, `signal: 9 (SIGKILL)`).
    last_exit_status: Option<String>,
    /// When this was observed.
    observed_at: Option<String>,
}

impl AgentRuntimeView {
    /// The view of `agent` with its last `runtime` observation. Before any, an Agent that is
    /// meant to be stopped and has nothing active is `stopped`; anything else is `unknown`.
    pub fn new(agent: &Agent, runtime: Option<&AgentRuntime>) -> Self {
        let unobserved_state = if agent.desired_runtime_state == DesiredRuntimeState::Stopped
            && agent.active_revision_id.is_none()
        {
            "stopped"
        } else {
            "unknown"
        };
        Self {
            namespace_id: agent.namespace_id.to_string(),
            agent_id: agent.id.to_string(),
            state: runtime
                .map_or(unobserved_state, |r| r.state.as_str())
                .into(),
            revision_id: runtime.map(|r| r.revision_id.to_string()),
            restarts: runtime.map_or(0, |r| r.restarts),
            last_exit_at: runtime.and_then(|r| r.last_exit_at).map(|t| t.to_string()),
            last_exit_status: runtime.and_then(|r| r.last_exit_status.clone()),
            observed_at: runtime.map(|r| r.observed_at.to_string()),
        }
    }
}

/// One page of a revision's runtime output (records are line, gap or withheld objects).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeLogPageView {
    revision_id: String,
    /// `gateway` | `agent` | `sandbox`.
    source: String,
    #[schema(value_type = Option<Object>)]
    stream: Option<Value>,
    observed_at: String,
    #[schema(value_type = Vec<Object>)]
    records: Vec<Value>,
    withheld: u64,
    truncated: bool,
    cursor: Option<String>,
}

impl From<&LogPage> for RuntimeLogPageView {
    fn from(page: &LogPage) -> Self {
        Self {
            revision_id: page.revision_id.to_string(),
            source: page.source.as_str().into(),
            stream: page.stream.as_ref().map(json_of),
            observed_at: page.observed_at.clone(),
            records: page.records.iter().map(json_of).collect(),
            withheld: page.withheld,
            truncated: page.truncated,
            cursor: page.cursor.clone(),
        }
    }
}

/// A controller value as JSON (its own `Serialize` is the wire form).
fn json_of<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Deployment status of a revision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentView {
    deployment_id: String,
    namespace_id: String,
    agent_id: String,
    /// `queued` | `running` | `succeeded` | `failed`.
    status: String,
    #[schema(value_type = Option<Object>)]
    error: Option<Value>,
    #[schema(value_type = Vec<Object>)]
    warnings: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    progress: Option<Value>,
}

impl From<&DeploymentStatus> for DeploymentView {
    fn from(d: &DeploymentStatus) -> Self {
        Self {
            deployment_id: d.deployment_id.to_string(),
            namespace_id: d.namespace_id.to_string(),
            agent_id: d.agent_id.to_string(),
            status: d.status.as_str().into(),
            error: d.error.as_ref().map(|e| {
                let mut v = json!({"code": e.code, "message": e.message});
                if let Some(data) = &e.data {
                    v["data"] = data.clone();
                }
                v
            }),
            warnings: Vec::new(),
            progress: d.progress.as_ref().map(|p| {
                json!({
                    "lastAttempt": p.last_attempt.as_ref().map(|a| json!({"at": a.at.to_string(), "code": a.code, "message": a.message})),
                    "nextAttemptAt": p.next_attempt_at.map(|t| t.to_string()),
                })
            }),
        }
    }
}

/// What runs for a deployment (`getAgentDeploymentRuntime`): its workloads in the
/// reference's Pod shape, and the log sources they offer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentRuntimeView {
    revision_id: String,
    observed_at: String,
    /// `{role, cluster, name, uid, phase, ready, createdAt, containers[], events[]}`.
    #[schema(value_type = Vec<Object>)]
    pods: Vec<Value>,
    /// `{id, kind, pods[], available, retention, unavailableCode?}`.
    #[schema(value_type = Vec<Object>)]
    sources: Vec<Value>,
}

/// How long a workload's output stays readable, as the log source describes it.
const GATEWAY_LOG_RETENTION: &str =
    "The workload's recent output as its Compute Driver keeps it (size-capped); occ stores none.";

impl From<&DeploymentRuntime> for DeploymentRuntimeView {
    fn from(r: &DeploymentRuntime) -> Self {
        let gateway_containers: Vec<Value> = r
            .report
            .pods
            .iter()
            .filter(|p| p.role == WorkloadRole::Gateway)
            .flat_map(|p| {
                p.containers.iter().map(|c| {
                    json!({"name": p.name, "uid": p.uid, "container": c.name, "restartCount": c.restart_count})
                })
            })
            .take(MAX_PODS)
            .collect();
        let mut gateway = json!({
            "id": "gateway",
            "kind": "container",
            "available": !gateway_containers.is_empty(),
            "retention": GATEWAY_LOG_RETENTION,
            "pods": gateway_containers,
        });
        if gateway["pods"].as_array().is_some_and(Vec::is_empty) {
            gateway["unavailableCode"] = json!("NO_POD");
        }
        Self {
            revision_id: r.revision_id.to_string(),
            observed_at: r.observed_at.to_string(),
            pods: r
                .report
                .pods
                .iter()
                .map(|p| serde_json::to_value(p).unwrap_or_default())
                .collect(),
            sources: vec![gateway],
        }
    }
}

/// The checks of a deployment (`diagnoseAgentDeployment`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsView {
    revision_id: String,
    observed_at: String,
    /// `{component, check, state: succeeded|failed|unknown, checkedAt, code?}`.
    #[schema(value_type = Vec<Object>)]
    checks: Vec<Value>,
}

impl From<&Diagnostics> for DiagnosticsView {
    fn from(d: &Diagnostics) -> Self {
        Self {
            revision_id: d.revision_id.to_string(),
            observed_at: d.observed_at.to_string(),
            checks: d
                .checks
                .iter()
                .map(|c| {
                    let mut v = json!({
                        "component": c.component,
                        "check": c.check,
                        "state": c.state.as_str(),
                        "checkedAt": c.checked_at.map(|t| t.to_string()),
                    });
                    if let Some(code) = &c.code {
                        v["code"] = json!(code);
                    }
                    v
                })
                .collect(),
        }
    }
}

/// A Role.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleView {
    id: String,
    /// Absent for the Installation's own Roles (`GET /iam/roles`).
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[schema(value_type = Vec<Object>)]
    permissions: Vec<Value>,
}

impl From<&Role> for RoleView {
    fn from(r: &Role) -> Self {
        Self {
            id: r.id.to_string(),
            namespace_id: r.namespace_id.as_ref().map(ToString::to_string),
            name: r.name.clone(),
            permissions: r
                .permissions
                .iter()
                .map(|p| serde_json::to_value(p).unwrap_or_default())
                .collect(),
        }
    }
}

/// An AccessBinding.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingView {
    id: String,
    namespace_id: String,
    /// Always `identity`.
    subject_kind: String,
    subject_id: String,
    role_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_id: Option<String>,
    /// The runtime role the person holds in the Agent's native Control UI.
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_role: Option<String>,
}

impl From<&AccessBinding> for BindingView {
    fn from(b: &AccessBinding) -> Self {
        Self {
            id: b.id.to_string(),
            namespace_id: b
                .namespace_id
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            subject_kind: "identity".into(),
            subject_id: b.subject_id.to_string(),
            role_id: b.role_id.to_string(),
            resource_kind: b.resource.as_ref().map(|r| r.kind.as_str().into()),
            resource_id: b.resource.as_ref().map(|r| r.id.clone()),
            runtime_role: b.runtime_role.clone(),
        }
    }
}

/// What the caller may do in a Namespace (`GET /namespaces/{ns}/iam/permissions`; occ's own
/// route, for clients such as the console that offer only what would be allowed). Actions are
/// wire names (`read`, `update`, …).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsView {
    namespace_id: String,
    /// Actions on the Installation (`read`, `administer`).
    installation: Vec<&'static str>,
    /// Actions on this Namespace (`read`, `delete`).
    namespace: Vec<&'static str>,
    /// Actions on the Installation's collection of Namespaces (`create`, …).
    namespace_collection: Vec<&'static str>,
    /// Resource kind → actions granted on the Namespace's whole collection of that kind.
    collections: BTreeMap<&'static str, Vec<&'static str>>,
    /// Agent id → actions on that Agent (only Agents the caller may read).
    agents: BTreeMap<String, Vec<&'static str>>,
    /// Configuration id → actions on it (the Configurations those Agents use).
    configurations: BTreeMap<String, Vec<&'static str>>,
}

fn action_names(actions: &[occ_core::authz::Action]) -> Vec<&'static str> {
    actions.iter().map(|a| a.as_str()).collect()
}

impl PermissionsView {
    /// From the controller's answer.
    pub fn new(ns: &occ_core::NamespaceId, p: &NamespacePermissions) -> Self {
        Self {
            namespace_id: ns.to_string(),
            installation: action_names(&p.installation),
            namespace: action_names(&p.namespace),
            namespace_collection: action_names(&p.namespace_collection),
            collections: p
                .collections
                .iter()
                .map(|(kind, actions)| (kind.as_str(), action_names(actions)))
                .collect(),
            agents: p
                .agents
                .iter()
                .map(|(id, actions)| (id.to_string(), action_names(actions)))
                .collect(),
            configurations: p
                .configurations
                .iter()
                .map(|(id, actions)| (id.to_string(), action_names(actions)))
                .collect(),
        }
    }
}

/// Whether a person can open an Agent's native Control UI through occ, and where.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NativeAdminStatusView {
    /// `disabled` | `stopped` | `unsupported` | `unavailable` | `available`.
    #[schema(value_type = String)]
    status: occ_controller::native_admin::NativeAdminStatus,
    /// The Agent's own host (`agent-<opaque>.<domain>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// The Agent's browser origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
    /// The revision the Control UI serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    active_revision_id: Option<String>,
    /// What to open (`available` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

impl From<occ_controller::native_admin::NativeAdminView> for NativeAdminStatusView {
    fn from(view: occ_controller::native_admin::NativeAdminView) -> Self {
        let target = view.target;
        Self {
            status: view.status,
            host: target.as_ref().map(|t| t.host.clone()),
            origin: target.as_ref().map(|t| t.origin.clone()),
            active_revision_id: target
                .as_ref()
                .map(|t| t.active_revision_id.as_str().to_owned()),
            url: target.and_then(|t| t.url),
        }
    }
}

/// A runtime role of an Agent's Control UI.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeRoleView {
    /// The role's id.
    id: String,
    /// The native OpenClaw role it stands for (`sessions`, `agents`, `scopes`).
    #[schema(value_type = Object)]
    permissions: serde_json::Value,
}

impl From<&occ_controller::native_admin::RuntimeRole> for RuntimeRoleView {
    fn from(role: &occ_controller::native_admin::RuntimeRole) -> Self {
        Self {
            id: role.id.clone(),
            permissions: role.permissions.clone(),
        }
    }
}
