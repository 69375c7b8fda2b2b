//! The objects the Kubernetes Compute Driver writes for an Agent: their names, labels and
//! annotations (what makes an object this Agent's), the revision's snapshot with the Pod's
//! paths, the gateway Deployment, and how a Deployment reads back (installed revision,
//! rollout, refusals).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use occ_core::native::control_ui;
use occ_core::resource::WorkspaceSetup;
use occ_host::runtime::{ENTRY_REL, NODE_REL};
use occ_host::snapshot::{GATEWAY_FIXED_ENV, render_snapshot};
use occ_host::workspace_setup::SetupInput;
use serde_json::{Map, Value, json};

use super::workloads::{
    ANNOTATION_REVISION, ANNOTATION_REVISION_ID, APP_SERVER_TOKEN_KEY, GATEWAY_CONTAINER,
    GATEWAY_PORT, KubernetesComputeSettings, Names, WORKSPACE_MOUNT, container_security, labels,
    pod_security, workload,
};
use crate::compute::RevisionTarget;
use crate::kubernetes::annotation;

const STATE_MOUNT: &str = "/var/lib/openclaw";
const CONFIG_MOUNT: &str = "/etc/openclaw";
const SETUP_MOUNT: &str = "/etc/occ-setup";
/// The snapshot the revision runs with, with the Pod's paths.
pub(super) fn render(rev: &RevisionTarget) -> Map<String, Value> {
    render_snapshot(
        rev,
        GATEWAY_PORT,
        "lan",
        &format!("{STATE_MOUNT}/state/workspace"),
        None,
    )
}

/// What the gateway of a dedicated revision runs with besides the embedded template.
pub(super) struct DedicatedGateway {
    /// The ConfigMap of its configuration: the snapshot, or the runtime copy bound to the
    /// paired node.
    pub config_map: String,
}

/// The Agent's gateway Deployment serving `rev` (a dedicated revision's with `dedicated`).
pub(super) fn deployment(
    settings: &KubernetesComputeSettings,
    tenant: &str,
    rev: &RevisionTarget,
    with_setup: bool,
    with_environment: bool,
    dedicated: Option<&DedicatedGateway>,
) -> Deployment {
    let names = Names::of(&rev.agent, tenant.to_owned());
    let runtime = settings.runtime_dir.trim_end_matches('/');
    let node = format!("{runtime}/{NODE_REL}");
    let node_bin = node
        .rsplit_once('/')
        .map(|(d, _)| d.to_owned())
        .unwrap_or_default();
    let mut env = vec![
        json!({"name": "HOME", "value": STATE_MOUNT}),
        json!({"name": "TMPDIR", "value": "/tmp"}),
        json!({"name": "PATH", "value": format!("{node_bin}:/usr/local/bin:/usr/bin:/bin")}),
        json!({"name": "OPENCLAW_STATE_DIR", "value": format!("{STATE_MOUNT}/state")}),
        json!({"name": "OPENCLAW_CONFIG_PATH", "value": format!("{CONFIG_MOUNT}/openclaw.json")}),
        json!({"name": occ_host::snapshot::credential_variable(rev),
               "valueFrom": {"secretKeyRef": {"name": names.token, "key": "token"}}}),
    ];
    env.extend(
        GATEWAY_FIXED_ENV
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v})),
    );
    if dedicated.is_some() {
        env.push(
            json!({"name": "APP_SERVER_TOKEN", "valueFrom": {"secretKeyRef":
            {"name": names.harness.transport, "key": APP_SERVER_TOKEN_KEY}}}),
        );
    }
    if control_ui::enabled(&rev.spec.configuration) {
        env.push(
            json!({"name": control_ui::PROXY_KEY_VARIABLE, "valueFrom": {"secretKeyRef":
            {"name": names.environment(rev), "key": control_ui::PROXY_KEY_VARIABLE}}}),
        );
    }
    let security = container_security();
    let mut gateway = json!({
        "name": GATEWAY_CONTAINER,
        "image": settings.image,
        "command": [node, format!("{runtime}/{ENTRY_REL}")],
        "args": ["gateway", "run", "--port", GATEWAY_PORT.to_string(), "--bind", "lan"],
        "env": env,
        "ports": [{"name": "gateway", "containerPort": GATEWAY_PORT}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": GATEWAY_PORT},
                            "periodSeconds": 2, "failureThreshold": 3},
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": true},
            {"name": "state", "mountPath": STATE_MOUNT},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "securityContext": security,
    });
    if with_environment {
        // The Secret bindings (and the harness credential) arrive through `envFrom`; a
        // container's `env` entries win over `envFrom` in Kubernetes, so the Driver's own
        // variables above are applied after the bindings and no binding can replace one.
        gateway["envFrom"] = json!([{"secretRef": {"name": names.environment(rev)}}]);
    }
    let config_map = dedicated.map_or_else(|| names.snapshot(rev), |d| d.config_map.clone());
    let mut volumes = vec![
        json!({"name": "config", "configMap": {"name": config_map,
                "items": [{"key": "openclaw.json", "path": "openclaw.json"}]}}),
        json!({"name": "state", "persistentVolumeClaim": {"claimName": names.state}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    let mut init = Vec::new();
    if dedicated.is_some() {
        // The workspace lives in the harness's Pod (the node serves it); the gateway only
        // needs the path to exist under its read-only root.
        gateway["volumeMounts"]
            .as_array_mut()
            .expect("mounts")
            .push(json!({"name": "workspace", "mountPath": WORKSPACE_MOUNT}));
        volumes.push(json!({"name": "workspace", "emptyDir": {}}));
        init.push(json!({
            "name": "codex-plugin-trust",
            "image": settings.image,
            "command": [settings.occ_binary, "codex-plugin-trust"],
            "env": [
                {"name": "HOME", "value": STATE_MOUNT},
                {"name": "TMPDIR", "value": "/tmp"},
                {"name": "PATH", "value": format!("{node_bin}:/usr/local/bin:/usr/bin:/bin")},
                {"name": "OPENCLAW_STATE_DIR", "value": format!("{STATE_MOUNT}/state")},
                {"name": "OCC_OPENCLAW_RUNTIME", "value": runtime},
            ],
            "volumeMounts": [
                {"name": "state", "mountPath": STATE_MOUNT},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": security,
        }));
    } else if with_setup {
        volumes.push(json!({"name": "setup", "secret": {"secretName": names.setup}}));
        init.push(json!({
            "name": "workspace-setup",
            "image": settings.image,
            "command": [settings.occ_binary, "workspace-setup"],
            "env": [
                {"name": "HOME", "value": STATE_MOUNT},
                {"name": "TMPDIR", "value": "/tmp"},
                {"name": "OCC_WORKSPACE_SETUP_PATH", "value": format!("{SETUP_MOUNT}/setup.json")},
                {"name": "OCC_WORKSPACE_DIR", "value": format!("{STATE_MOUNT}/state/workspace")},
                {"name": "OCC_OPENCLAW_RUNTIME", "value": runtime},
                {"name": "OCC_DATA_DIR", "value": format!("{STATE_MOUNT}/occ")},
            ],
            "volumeMounts": [
                {"name": "state", "mountPath": STATE_MOUNT},
                {"name": "setup", "mountPath": SETUP_MOUNT, "readOnly": true},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "securityContext": security,
        }));
    }
    let pod_labels = labels(&rev.agent);
    let mut template = json!({
        "metadata": {
            "labels": pod_labels,
            "annotations": {
                ANNOTATION_REVISION_ID: rev.revision_id.to_string(),
                ANNOTATION_REVISION: rev.revision.to_string(),
            },
        },
        "spec": {
            "serviceAccountName": names.gateway,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "securityContext": pod_security(),
            "initContainers": init,
            "containers": [gateway],
            "volumes": volumes,
        },
    });
    with_runtime_class(&mut template, settings);
    workload(&names, &names.gateway, rev, &pod_labels, template)
}

/// Sets the Pod template's `runtimeClassName` when the settings name one.
pub(super) fn with_runtime_class(template: &mut Value, settings: &KubernetesComputeSettings) {
    if let Some(class) = &settings.runtime_class {
        template["spec"]["runtimeClassName"] = json!(class);
    }
}

/// The revision the Agent's Deployment is set to serve, with its number.
pub(super) fn installed(d: &Deployment) -> Option<(String, u64)> {
    Some((
        annotation(&d.metadata, ANNOTATION_REVISION_ID)?.to_owned(),
        annotation(&d.metadata, ANNOTATION_REVISION)?.parse().ok()?,
    ))
}

/// Why the Deployment controller cannot create the gateway's Pod (its `ReplicaFailure`
/// condition: an exceeded quota, a Pod Security or other admission refusal), if it cannot.
pub(super) fn pod_refusal(d: &Deployment) -> Option<String> {
    let conditions = d.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
        .map(|c| {
            c.message
                .clone()
                .or_else(|| c.reason.clone())
                .unwrap_or_else(|| "ReplicaFailure".into())
        })
}

/// The exit code of a Pod's `container` that terminated (now, or last before a restart).
pub(super) fn exit_code(pod: &Pod, container: &str) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .iter()
        .filter(|c| c.name == container)
        .find_map(|c| {
            let terminated = |state: &Option<ContainerState>| {
                state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map(|t| t.exit_code)
            };
            terminated(&c.state).or_else(|| terminated(&c.last_state))
        })
}

/// Whether the Deployment's one replica runs its current template and is ready.
pub(super) fn rolled_out(d: &Deployment) -> bool {
    let generation = d.metadata.generation.unwrap_or(0);
    let status = d.status.clone().unwrap_or_default();
    d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
        && status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas == Some(1)
        && status.ready_replicas == Some(1)
}

/// The setup Secret's `setup.json`: the setup input the init container reads.
pub(super) fn setup_secret_data(setup: &WorkspaceSetup) -> String {
    String::from_utf8(SetupInput::from(setup).to_json()).expect("setup input is JSON text")
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::resource::{
        AdmittedSpec, ComputeIdentity, ExecutionMode, Generation, HarnessAuth, HarnessDescriptor,
    };
    use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId, RevisionId};

    fn settings(runtime_class: Option<&str>) -> KubernetesComputeSettings {
        KubernetesComputeSettings {
            image: "registry.example/occ-gateway:1".into(),
            runtime_dir: "/opt/occ/runtime".into(),
            occ_binary: "/usr/local/bin/occ".into(),
            state_storage: "10Gi".into(),
            storage_class: None,
            runtime_class: runtime_class.map(str::to_owned),
            activation_timeout: std::time::Duration::from_secs(60),
            stop_timeout: std::time::Duration::from_secs(60),
            dedicated: None,
        }
    }

    fn revision(mode: ExecutionMode) -> RevisionTarget {
        let agent_id = AgentId::generate();
        RevisionTarget {
            agent: occ_core::compute::AgentTarget {
                namespace_id: NamespaceId::generate(),
                service_principal_id: IamId::agent_service_principal(&agent_id),
                agent_id,
            },
            revision_id: RevisionId::generate(),
            revision: 1,
            spec: AdmittedSpec {
                configuration_id: ConfigurationId::generate(),
                configuration_kind: "agent".into(),
                configuration_generation: Generation::new(1).expect("generation"),
                configuration: serde_json::Map::new(),
                harness: HarnessDescriptor {
                    id: "openclaw".into(),
                    version: "test".into(),
                    mode,
                },
                compute: ComputeIdentity {
                    id: "compute-kubernetes".into(),
                    implementation: "kubernetes".into(),
                },
                service_principal_id: IamId::generate_service_principal(),
                harness_auth: Some(HarnessAuth::Runtime {}),
                secret_driver_id: None,
                secret_bindings: None,
                account_credential: None,
            },
        }
    }

    /// The typed object carries the class (a misspelt field would not deserialize into it), on
    /// the gateway's and the harness's Pods alike; without the setting there is none.
    #[test]
    fn agent_pods_run_with_the_configured_runtime_class() {
        let rev = revision(ExecutionMode::Embedded);
        let class_of = |d: &Deployment| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|s| s.runtime_class_name.clone())
        };
        let contained = deployment(&settings(Some("gvisor")), "t", &rev, true, true, None);
        assert_eq!(class_of(&contained).as_deref(), Some("gvisor"));
        let plain = deployment(&settings(None), "t", &rev, true, true, None);
        assert_eq!(class_of(&plain), None);

        let rev = revision(ExecutionMode::Dedicated);
        let names = Names::of(&rev.agent, "t".into());
        let dedicated = super::super::workloads::KubernetesDedicatedSettings {
            model_base_url: None,
            harness_storage: "10Gi".into(),
            token_audience: "occ".into(),
            model_egress: Vec::new(),
            ready_timeout: std::time::Duration::from_secs(60),
        };
        let harness = super::super::harness::harness_deployment(
            &settings(Some("kata")),
            &dedicated,
            &names,
            &rev,
            "launch",
            false,
        );
        assert_eq!(class_of(&harness).as_deref(), Some("kata"));
    }
}
