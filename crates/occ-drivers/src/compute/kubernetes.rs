//! The Kubernetes Compute Driver: each Agent's OpenClaw gateway is a one-replica Deployment in
//! its occ Namespace's tenant namespace (embedded execution).
//!
//! Per Agent (names from `h12 = sha256(agent id)[0:12]`, every object labelled
//! `app.kubernetes.io/managed-by=occ`, `openclaw.dev/namespace`, `openclaw.dev/agent`):
//!
//! - ServiceAccount `gw-<h12>` without a token (the gateway never calls the API server);
//! - Secret `gw-token-<h12>` (`token`: the gateway's operator credential, created once);
//! - PersistentVolumeClaim `gw-state-<h12>` mounted at `/var/lib/openclaw` (state, workspace;
//!   survives revisions, stop and resume);
//! - NetworkPolicy `gw-<h12>` denying all ingress to the gateway Pod: occ reaches the gateway
//!   through the API server's `pods/portforward`, so the token never crosses the Pod network
//!   and nothing else can connect;
//! - per admitted revision an immutable ConfigMap `gw-<h12>-cfg-<h12(rev)>` with the rendered
//!   `openclaw.json` (mounted read-only at `/etc/openclaw`, `OPENCLAW_CONFIG_PATH`), never the
//!   mutable Configuration ConfigMap; snapshots stay until the Agent is deleted;
//! - per revision with Secret bindings or an `api_key` credential, a Secret
//!   `gw-<h12>-env-<h12(rev)>` projected as environment (removed when the revision retires);
//! - with staged workspace setup, a Secret `gw-setup-<h12>` and an init container running
//!   `occ workspace-setup` before the gateway starts;
//! - Deployment `gw-<h12>` (1 replica, `Recreate`, restricted Pod security) whose Pod template
//!   names the active revision. Activation replaces the template, waits for the rollout and
//!   then for a native `hello-ok` through a forward; stop scales to 0.
//!
//! Objects at these names that are not occ's are refused, never adopted or overwritten.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use occ_core::resource::{ExecutionMode, WorkspaceSetup};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use sha2::Digest as _;

use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, GatewayAccess,
    NamespaceHook as _, NamespaceTarget, Readiness, RevisionContext, RevisionTarget, RuntimeState,
    SecretText,
};
use crate::DriverError;
use crate::kubernetes::{
    ANNOTATION_NAMESPACE_ID, KubeClient, KubeFailure, LABEL_MANAGED_BY, LABEL_NAMESPACE,
    MANAGED_BY, TenantNamespaces, annotation, find_tenant_namespace, label, short_hash,
    tenant_namespace_name, tenant_namespace_of,
};
use occ_host::runtime::{ENTRY_REL, NODE_REL};
use occ_host::snapshot::{GATEWAY_FIXED_ENV, harness_key_variable, render_snapshot};
use occ_host::workspace_setup::SetupInput;

/// The gateway's port inside its Pod.
pub const GATEWAY_PORT: u16 = 18789;
const LABEL_AGENT: &str = "openclaw.dev/agent";
const LABEL_REVISION: &str = "openclaw.dev/revision";
const ANNOTATION_REVISION_ID: &str = "openclaw.dev/revision-id";
const ANNOTATION_REVISION: &str = "openclaw.dev/revision-number";
const ANNOTATION_TEMPLATE: &str = "openclaw.dev/template-hash";
const STATE_MOUNT: &str = "/var/lib/openclaw";
const CONFIG_MOUNT: &str = "/etc/openclaw";
const SETUP_MOUNT: &str = "/etc/occ-setup";
const POD_USER: i64 = 10001;

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
    /// How long activation waits for the rollout and the native handshake.
    pub activation_timeout: Duration,
    /// How long stop and delete wait for the Pod to go.
    pub stop_timeout: Duration,
}

/// The Kubernetes Compute Driver.
pub struct KubernetesCompute {
    selection: ComputeSelection,
    kube: KubeClient,
    tenants: TenantNamespaces,
    settings: KubernetesComputeSettings,
    forwards: tokio::sync::Mutex<BTreeMap<(String, String), Forward>>,
}

/// A local listener bridged to one Pod's gateway port through `pods/portforward`.
struct Forward {
    pod: String,
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn foreign(what: String) -> ComputeError {
    ComputeError::permanent("OWNERSHIP_CONFLICT", what)
}

/// Names of one Agent's objects.
struct Names {
    tenant: String,
    gateway: String,
    token: String,
    state: String,
    setup: String,
}

impl Names {
    fn of(agent: &AgentTarget, tenant: String) -> Self {
        let h = short_hash(agent.agent_id.as_str(), 12);
        Self {
            tenant,
            gateway: format!("gw-{h}"),
            token: format!("gw-token-{h}"),
            state: format!("gw-state-{h}"),
            setup: format!("gw-setup-{h}"),
        }
    }
    fn snapshot(&self, rev: &RevisionTarget) -> String {
        format!(
            "{}-cfg-{}",
            self.gateway,
            short_hash(rev.revision_id.as_str(), 12)
        )
    }
    fn environment(&self, rev: &RevisionTarget) -> String {
        format!(
            "{}-env-{}",
            self.gateway,
            short_hash(rev.revision_id.as_str(), 12)
        )
    }
}

fn labels(agent: &AgentTarget) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_NAMESPACE.to_owned(), agent.namespace_id.to_string()),
        (LABEL_AGENT.to_owned(), agent.agent_id.to_string()),
    ])
}

fn meta(name: &str, tenant: &str, agent: &AgentTarget, rev: Option<&RevisionTarget>) -> ObjectMeta {
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

fn owned(meta: &ObjectMeta, agent: &AgentTarget) -> bool {
    label(meta, LABEL_MANAGED_BY) == Some(MANAGED_BY)
        && label(meta, LABEL_NAMESPACE) == Some(agent.namespace_id.as_str())
        && label(meta, LABEL_AGENT) == Some(agent.agent_id.as_str())
}

fn typed<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a manifest built by this module is well-formed")
}

impl KubernetesCompute {
    /// The Driver, using `kube` (nothing is contacted yet); `tenants` provisions each
    /// Namespace's tenant namespace and the access granted in it.
    pub fn new(
        kube: KubeClient,
        settings: KubernetesComputeSettings,
        tenants: TenantNamespaces,
    ) -> Self {
        Self {
            selection: ComputeSelection::kubernetes(),
            tenants,
            kube,
            settings,
            forwards: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    fn api<K>(&self, tenant: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.kube.client(), tenant)
    }

    async fn get<K>(&self, api: &Api<K>, name: &str, what: &str) -> Result<Option<K>, ComputeError>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        self.kube
            .get_opt(api, name, what)
            .await
            .map_err(|e| e.into_compute(what))
    }

    /// The names of the Agent's objects, in its Namespace's tenant namespace: the one that
    /// claims the occ Namespace (provisioned or adopted; remembered), or, while none does,
    /// the derived name (where nothing of the Agent can exist yet).
    async fn names(&self, agent: &AgentTarget) -> Result<Names, ComputeError> {
        let ns = &agent.namespace_id;
        let tenant = match self.kube.known_tenant(ns) {
            Some(tenant) => tenant,
            None => match find_tenant_namespace(&self.kube, ns).await {
                Ok(Some(found)) => {
                    let tenant = found.metadata.name.unwrap_or_default();
                    self.kube.remember_tenant(ns, Some(tenant.clone()));
                    tenant
                }
                Ok(None) => tenant_namespace_name(ns),
                Err(DriverError::Corrupt(m)) => {
                    return Err(ComputeError::permanent("TENANT_OBJECT_FOREIGN", m));
                }
                Err(other) => {
                    return Err(ComputeError::transient(
                        "KUBERNETES_UNAVAILABLE",
                        other.to_string(),
                    ));
                }
            },
        };
        Ok(Names::of(agent, tenant))
    }

    /// Creates `desired` unless an object of this Agent exists at its name; refuses one that
    /// is not. Returns the object as stored.
    async fn ensure<K>(
        &self,
        api: &Api<K>,
        agent: &AgentTarget,
        desired: &K,
        what: &str,
    ) -> Result<K, ComputeError>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let name = desired.meta().name.clone().unwrap_or_default();
        if let Some(current) = self.get(api, &name, &format!("get {what}")).await? {
            return if owned(current.meta(), agent) {
                Ok(current)
            } else {
                Err(foreign(format!(
                    "{what} {name} exists and is not this Agent's"
                )))
            };
        }
        let post = PostParams::default();
        match self
            .kube
            .call(&format!("create {what}"), || api.create(&post, desired))
            .await
        {
            Ok(created) => Ok(created),
            Err(KubeFailure::AlreadyExists) => Err(ComputeError::transient(
                "KUBERNETES_CONFLICT",
                format!("{what} {name} appeared concurrently"),
            )),
            Err(other) => Err(other.into_compute(what)),
        }
    }

    /// Creates or replaces (under its resourceVersion) a Secret of this Agent holding `data`.
    async fn ensure_secret(
        &self,
        api: &Api<Secret>,
        agent: &AgentTarget,
        mut desired: Secret,
    ) -> Result<(), ComputeError> {
        let current = self.ensure(api, agent, &desired, "secrets").await?;
        let wanted: BTreeMap<String, Vec<u8>> = desired
            .string_data
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        let stored: BTreeMap<String, Vec<u8>> = current
            .data
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        if stored == wanted {
            return Ok(());
        }
        desired.metadata.resource_version = current.metadata.resource_version.clone();
        let name = desired.metadata.name.clone().unwrap_or_default();
        let post = PostParams::default();
        self.kube
            .call("update secrets", || api.replace(&name, &post, &desired))
            .await
            .map(|_| ())
            .map_err(|e| e.into_compute("update secrets"))
    }

    /// Deletes an object of this Agent with its uid as a precondition; absent is fine.
    async fn delete_owned<K>(
        &self,
        api: &Api<K>,
        agent: &AgentTarget,
        name: &str,
        what: &str,
    ) -> Result<(), ComputeError>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let Some(current) = self.get(api, name, &format!("get {what}")).await? else {
            return Ok(());
        };
        if !owned(current.meta(), agent) {
            return Err(foreign(format!(
                "{what} {name} is not this Agent's; left alone"
            )));
        }
        self.kube
            .delete_exact(
                api,
                name,
                current.meta().uid.clone(),
                None,
                &format!("delete {what}"),
            )
            .await
            .map_err(|e| e.into_compute(what))
    }

    /// The snapshot the revision runs with, with the Pod's paths (also used by golden tests).
    pub fn render(rev: &RevisionTarget) -> Map<String, Value> {
        render_snapshot(
            rev,
            GATEWAY_PORT,
            "lan",
            &format!("{STATE_MOUNT}/state/workspace"),
            None,
        )
    }

    /// The Agent's Deployment serving `rev` (also used by the golden tests).
    pub fn deployment(
        &self,
        tenant: &str,
        rev: &RevisionTarget,
        with_setup: bool,
        with_environment: bool,
    ) -> Deployment {
        let names = Names::of(&rev.agent, tenant.to_owned());
        let runtime = self.settings.runtime_dir.trim_end_matches('/');
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
            json!({"name": "OPENCLAW_GATEWAY_TOKEN",
                   "valueFrom": {"secretKeyRef": {"name": names.token, "key": "token"}}}),
        ];
        env.extend(
            GATEWAY_FIXED_ENV
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v})),
        );
        let security = json!({
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
        });
        let mut gateway = json!({
            "name": "gateway",
            "image": self.settings.image,
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
            gateway["envFrom"] = json!([{"secretRef": {"name": names.environment(rev)}}]);
        }
        let mut volumes = vec![
            json!({"name": "config", "configMap": {"name": names.snapshot(rev),
                    "items": [{"key": "openclaw.json", "path": "openclaw.json"}]}}),
            json!({"name": "state", "persistentVolumeClaim": {"claimName": names.state}}),
            json!({"name": "tmp", "emptyDir": {}}),
        ];
        let mut init = Vec::new();
        if with_setup {
            volumes.push(json!({"name": "setup", "secret": {"secretName": names.setup}}));
            init.push(json!({
                "name": "workspace-setup",
                "image": self.settings.image,
                "command": [self.settings.occ_binary, "workspace-setup"],
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
        let template = json!({
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
                "securityContext": {"runAsNonRoot": true, "runAsUser": POD_USER, "runAsGroup": POD_USER,
                                     "fsGroup": POD_USER, "seccompProfile": {"type": "RuntimeDefault"}},
                "initContainers": init,
                "containers": [gateway],
                "volumes": volumes,
            },
        });
        let hash = hex::encode(sha2::Sha256::digest(template.to_string().as_bytes()));
        let mut meta = meta(&names.gateway, &names.tenant, &rev.agent, None);
        meta.annotations.get_or_insert_default().extend([
            (ANNOTATION_TEMPLATE.to_owned(), hash),
            (
                ANNOTATION_REVISION_ID.to_owned(),
                rev.revision_id.to_string(),
            ),
            (ANNOTATION_REVISION.to_owned(), rev.revision.to_string()),
        ]);
        typed(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {LABEL_AGENT: rev.agent.agent_id.to_string()}},
                "template": template,
            },
        }))
    }

    /// The revision the Agent's Deployment is set to serve, with its number.
    fn installed(d: &Deployment) -> Option<(String, u64)> {
        Some((
            annotation(&d.metadata, ANNOTATION_REVISION_ID)?.to_owned(),
            annotation(&d.metadata, ANNOTATION_REVISION)?.parse().ok()?,
        ))
    }

    async fn deployment_of(&self, agent: &AgentTarget) -> Result<Option<Deployment>, ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Deployment> = self.api(&names.tenant);
        match self.get(&api, &names.gateway, "get deployments").await? {
            Some(d) if !owned(&d.metadata, agent) => Err(foreign(format!(
                "deployment {} is not this Agent's",
                names.gateway
            ))),
            other => Ok(other),
        }
    }

    /// Why the Deployment controller cannot create the gateway's Pod (its `ReplicaFailure`
    /// condition: an exceeded quota, a Pod Security or other admission refusal), if it cannot.
    fn pod_refusal(d: &Deployment) -> Option<String> {
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

    fn rolled_out(d: &Deployment) -> bool {
        let generation = d.metadata.generation.unwrap_or(0);
        let status = d.status.clone().unwrap_or_default();
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
            && status.observed_generation.unwrap_or(0) >= generation
            && status.updated_replicas == Some(1)
            && status.ready_replicas == Some(1)
    }

    /// The running, ready Pod of the Agent's current template, if any.
    async fn serving_pod(
        &self,
        agent: &AgentTarget,
        revision_id: &str,
    ) -> Result<Option<String>, ComputeError> {
        let names = self.names(agent).await?;
        let pods: Api<Pod> = self.api(&names.tenant);
        let params = ListParams::default().labels(&format!("{LABEL_AGENT}={}", agent.agent_id));
        let list = self
            .kube
            .call("list pods", || pods.list(&params))
            .await
            .map_err(|e| e.into_compute("list pods"))?;
        Ok(list.items.into_iter().find_map(|p| {
            let status = p.status.as_ref()?;
            let ready = status
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let revision = annotation(&p.metadata, ANNOTATION_REVISION_ID)?;
            (p.metadata.deletion_timestamp.is_none()
                && status.phase.as_deref() == Some("Running")
                && ready
                && revision == revision_id)
                .then(|| p.metadata.name.clone())
                .flatten()
        }))
    }

    async fn token(&self, agent: &AgentTarget) -> Result<SecretText, ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Secret> = self.api(&names.tenant);
        let secret = self
            .get(&api, &names.token, "get secrets")
            .await?
            .ok_or_else(|| {
                ComputeError::transient(
                    "GATEWAY_TOKEN_MISSING",
                    "the gateway token Secret is missing",
                )
            })?;
        if !owned(&secret.metadata, agent) {
            return Err(foreign(format!(
                "secret {} is not this Agent's",
                names.token
            )));
        }
        secret
            .data
            .as_ref()
            .and_then(|d| d.get("token"))
            .and_then(|t| String::from_utf8(t.0.clone()).ok())
            .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(SecretText::new)
            .ok_or_else(|| foreign(format!("secret {} holds no valid token", names.token)))
    }

    /// A local port forwarded to the gateway of `agent`'s Pod `pod` through the API server (one
    /// listener per Agent, reused while the Pod is the same; each accepted connection opens its
    /// own port-forward stream).
    async fn forward(&self, agent: &AgentTarget, pod: &str) -> Result<u16, ComputeError> {
        let names = self.names(agent).await?;
        let tenant = names.tenant.as_str();
        let key = (names.tenant.clone(), names.gateway.clone());
        let mut forwards = self.forwards.lock().await;
        if let Some(f) = forwards.get(&key)
            && f.pod == pod
            && !f.task.is_finished()
        {
            return Ok(f.port);
        }
        forwards.remove(&key);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| {
                ComputeError::transient("DEPENDENCY_UNAVAILABLE", format!("no local port: {e}"))
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| ComputeError::transient("DEPENDENCY_UNAVAILABLE", e.to_string()))?
            .port();
        let pods: Api<Pod> = self.api(tenant);
        let pod_name = pod.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let pods = pods.clone();
                let pod_name = pod_name.clone();
                tokio::spawn(async move {
                    let Ok(mut forwarder) = pods.portforward(&pod_name, &[GATEWAY_PORT]).await
                    else {
                        return;
                    };
                    let Some(mut upstream) = forwarder.take_stream(GATEWAY_PORT) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
                    drop(upstream);
                    let _ = forwarder.join().await;
                });
            }
        });
        forwards.insert(
            key,
            Forward {
                pod: pod.to_owned(),
                port,
                task,
            },
        );
        Ok(port)
    }

    /// Closes the forward of `agent`, or of every Agent of a tenant namespace (`None`).
    async fn drop_forwards(&self, tenant: &str, gateway: Option<&str>) {
        self.forwards
            .lock()
            .await
            .retain(|(t, g), _| !(t == tenant && gateway.is_none_or(|name| name == g)));
    }

    /// Whether `rev` serves: its template rolled out and its Pod answers `hello-ok`.
    async fn serving(&self, rev: &RevisionTarget, wait: Duration) -> Result<bool, ComputeError> {
        match self.deployment_of(&rev.agent).await? {
            Some(d) => self.serving_from(rev, &d, wait).await,
            None => Ok(false),
        }
    }

    /// [`Self::serving`] with the Agent's Deployment as just read.
    async fn serving_from(
        &self,
        rev: &RevisionTarget,
        d: &Deployment,
        wait: Duration,
    ) -> Result<bool, ComputeError> {
        if Self::installed(d).map(|(id, _)| id) != Some(rev.revision_id.to_string())
            || !Self::rolled_out(d)
        {
            return Ok(false);
        }
        let Some(pod) = self
            .serving_pod(&rev.agent, rev.revision_id.as_str())
            .await?
        else {
            return Ok(false);
        };
        let port = self.forward(&rev.agent, &pod).await?;
        let token = self.token(&rev.agent).await?;
        let endpoint = occ_gateway::Endpoint::loopback(port, token.expose());
        Ok(occ_gateway::wait_ready(&endpoint, wait).await.is_ok())
    }

    /// Waits until no Pod of the Agent remains.
    async fn wait_no_pods(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let pods: Api<Pod> = self.api(&names.tenant);
        let params = ListParams::default().labels(&format!("{LABEL_AGENT}={}", agent.agent_id));
        let deadline = tokio::time::Instant::now() + self.settings.stop_timeout;
        loop {
            let list = self
                .kube
                .call("list pods", || pods.list(&params))
                .await
                .map_err(|e| e.into_compute("list pods"))?;
            if list.items.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    "GATEWAY_STOP_PENDING",
                    format!(
                        "the gateway Pod of {} has not terminated yet",
                        agent.agent_id
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Once the gateway serves, the staged files have been applied: the setup Secret keeps
    /// only the identity (a restarted Pod's init container then verifies the marker), so the
    /// file text does not linger in the cluster.
    async fn seal_setup(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        let Some(setup) = ctx.workspace_setup.as_ref().filter(|s| !s.completed) else {
            return Ok(());
        };
        let names = self.names(&rev.agent).await?;
        let sealed = WorkspaceSetup {
            files: None,
            completed: true,
            ..setup.clone()
        };
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.ensure_secret(
            &secrets,
            &rev.agent,
            typed(
                json!({"metadata": meta(&names.setup, &names.tenant, &rev.agent, None),
                         "type": "Opaque",
                         "stringData": {"setup.json": setup_secret_data(&sealed)}}),
            ),
        )
        .await
    }

    async fn set_replicas(
        &self,
        agent: &AgentTarget,
        mut d: Deployment,
        replicas: i32,
    ) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Deployment> = self.api(&names.tenant);
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        d.status = None;
        let post = PostParams::default();
        self.kube
            .call("update deployments", || {
                api.replace(&names.gateway, &post, &d)
            })
            .await
            .map(|_| ())
            .map_err(|e| e.into_compute("update deployments"))
    }
}

fn setup_secret_data(setup: &WorkspaceSetup) -> String {
    String::from_utf8(SetupInput::from(setup).to_json()).expect("setup input is JSON text")
}

#[async_trait::async_trait]
impl Compute for KubernetesCompute {
    fn selection(&self) -> &ComputeSelection {
        &self.selection
    }

    fn supports_workspace_setup(&self) -> bool {
        true
    }

    fn maintenance_interval(&self) -> Option<Duration> {
        // The Deployment controller restarts a crashed gateway; nothing to re-run.
        None
    }

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        let outcome = self.tenants.after_namespace_prepared(ns).await?;
        if outcome == Convergence::Done {
            self.kube
                .remember_tenant(&ns.id, Some(tenant_namespace_of(ns)));
        }
        Ok(outcome)
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        self.drop_forwards(&tenant_namespace_of(ns), None).await;
        let outcome = self.tenants.before_namespace_delete(ns).await?;
        if outcome == Convergence::Done {
            self.kube.remember_tenant(&ns.id, None);
        }
        Ok(outcome)
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        if rev.spec.harness.mode != ExecutionMode::Embedded {
            return Err(ComputeError::permanent(
                "COMPUTE_DRIVER_MISMATCH",
                "the Kubernetes Compute Driver runs embedded execution only",
            ));
        }
        let agent = &rev.agent;
        let names = self.names(agent).await?;
        if let Some(d) = self.deployment_of(agent).await?
            && let Some((id, number)) = Self::installed(&d)
            && id != rev.revision_id.as_str()
            && number > rev.revision
        {
            return Ok(Readiness::Pending {
                code: "REVISION_SUPERSEDED".into(),
            });
        }
        let accounts: Api<ServiceAccount> = self.api(&names.tenant);
        self.ensure(
            &accounts,
            agent,
            &typed(
                json!({"metadata": meta(&names.gateway, &names.tenant, agent, None),
                          "automountServiceAccountToken": false}),
            ),
            "serviceaccounts",
        )
        .await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        if self
            .get(&secrets, &names.token, "get secrets")
            .await?
            .is_none()
        {
            let token = hex::encode(rand::random::<[u8; 32]>());
            self.ensure(
                &secrets,
                agent,
                &typed(
                    json!({"metadata": meta(&names.token, &names.tenant, agent, None),
                              "type": "Opaque", "stringData": {"token": token}}),
                ),
                "secrets",
            )
            .await?;
        }
        self.token(agent).await?;
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        let mut claim = json!({"metadata": meta(&names.state, &names.tenant, agent, None),
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": self.settings.state_storage}}}});
        if let Some(class) = &self.settings.storage_class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        self.ensure(&claims, agent, &typed(claim), "persistentvolumeclaims")
            .await?;
        let policies: Api<NetworkPolicy> = self.api(&names.tenant);
        self.ensure(
            &policies,
            agent,
            &typed(
                json!({"metadata": meta(&names.gateway, &names.tenant, agent, None),
                "spec": {"podSelector": {"matchLabels": {LABEL_AGENT: agent.agent_id.to_string()}},
                         "policyTypes": ["Ingress"], "ingress": []}}),
            ),
            "networkpolicies",
        )
        .await?;
        if let Some(setup) = &ctx.workspace_setup {
            self.ensure_secret(
                &secrets,
                agent,
                typed(
                    json!({"metadata": meta(&names.setup, &names.tenant, agent, None),
                             "type": "Opaque",
                             "stringData": {"setup.json": setup_secret_data(setup)}}),
                ),
            )
            .await?;
        }
        let mut environment: BTreeMap<String, String> = ctx
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect();
        if let Some(credential) = &ctx.harness_credential {
            environment.insert(
                harness_key_variable(rev)?.to_owned(),
                credential.expose().to_owned(),
            );
        }
        if !environment.is_empty() {
            self.ensure_secret(
                &secrets,
                agent,
                typed(json!({"metadata": meta(&names.environment(rev), &names.tenant, agent, Some(rev)),
                             "type": "Opaque", "stringData": environment})),
            )
            .await?;
        }
        let snapshot = serde_json::to_string(&Value::Object(Self::render(rev)))
            .map_err(|e| ComputeError::permanent("SNAPSHOT_INVALID", e.to_string()))?;
        let configmaps: Api<ConfigMap> = self.api(&names.tenant);
        let stored = self
            .ensure(
                &configmaps,
                agent,
                &typed(
                    json!({"metadata": meta(&names.snapshot(rev), &names.tenant, agent, Some(rev)),
                              "immutable": true, "data": {"openclaw.json": snapshot}}),
                ),
                "configmaps",
            )
            .await?;
        if stored.data.as_ref().and_then(|d| d.get("openclaw.json")) != Some(&snapshot) {
            return Err(ComputeError::permanent(
                "SNAPSHOT_MISMATCH",
                format!(
                    "configmap {} holds a different snapshot of this revision",
                    names.snapshot(rev)
                ),
            ));
        }
        Ok(Readiness::Ready)
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        if let Readiness::Pending { code } = self.prepare_revision(rev, ctx).await? {
            return Err(ComputeError::permanent(
                &code,
                "a newer revision is installed for this Agent",
            ));
        }
        let names = self.names(&rev.agent).await?;
        let with_environment = !ctx.environment.is_empty() || ctx.harness_credential.is_some();
        let mut desired = self.deployment(
            &names.tenant,
            rev,
            ctx.workspace_setup.is_some(),
            with_environment,
        );
        let api: Api<Deployment> = self.api(&names.tenant);
        let post = PostParams::default();
        match self.deployment_of(&rev.agent).await? {
            None => {
                self.kube
                    .call("create deployments", || api.create(&post, &desired))
                    .await
                    .map_err(|e| e.into_compute("create deployments"))?;
            }
            Some(current) => {
                let running = current.spec.as_ref().and_then(|s| s.replicas) == Some(1);
                if !(running
                    && annotation(&current.metadata, ANNOTATION_TEMPLATE)
                        == annotation(&desired.metadata, ANNOTATION_TEMPLATE))
                {
                    desired.metadata.resource_version = current.metadata.resource_version.clone();
                    self.kube
                        .call("update deployments", || {
                            api.replace(&names.gateway, &post, &desired)
                        })
                        .await
                        .map_err(|e| e.into_compute("update deployments"))?;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + self.settings.activation_timeout;
        loop {
            let current = self.deployment_of(&rev.agent).await?;
            if let Some(why) = current.as_ref().and_then(Self::pod_refusal) {
                // No Pod can be made (quota, admission): say why instead of waiting it out.
                return Err(ComputeError::transient(
                    "GATEWAY_POD_REFUSED",
                    format!(
                        "the gateway Pod of {} cannot be created: {why}",
                        rev.revision_id
                    ),
                ));
            }
            if let Some(d) = &current
                && self.serving_from(rev, d, Duration::from_secs(10)).await?
            {
                return self.seal_setup(rev, ctx).await;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    "GATEWAY_NOT_READY",
                    format!(
                        "the gateway of {} did not roll out and answer within {:?}",
                        rev.revision_id, self.settings.activation_timeout
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let Some(d) = self.deployment_of(&rev.agent).await? else {
            return Ok(());
        };
        if Self::installed(&d).map(|(id, _)| id) != Some(rev.revision_id.to_string()) {
            return Ok(());
        }
        if d.spec.as_ref().and_then(|s| s.replicas) != Some(0) {
            self.set_replicas(&rev.agent, d, 0).await?;
        }
        let names = self.names(&rev.agent).await?;
        self.drop_forwards(&names.tenant, Some(&names.gateway))
            .await;
        self.wait_no_pods(&rev.agent).await
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.stop_revision(rev).await?;
        let names = self.names(&rev.agent).await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.delete_owned(&secrets, &rev.agent, &names.environment(rev), "secrets")
            .await
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let deployments: Api<Deployment> = self.api(&names.tenant);
        self.delete_owned(&deployments, agent, &names.gateway, "deployments")
            .await?;
        self.drop_forwards(&names.tenant, Some(&names.gateway))
            .await;
        self.wait_no_pods(agent).await?;
        // Revision objects (snapshots, environment) by label, then the Agent's own.
        let selector = format!("{LABEL_AGENT}={}", agent.agent_id);
        let params = ListParams::default().labels(&selector);
        let configmaps: Api<ConfigMap> = self.api(&names.tenant);
        let listed = self
            .kube
            .call("list configmaps", || configmaps.list(&params))
            .await
            .map_err(|e| e.into_compute("list configmaps"))?;
        for cm in listed.items {
            let name = cm.metadata.name.clone().unwrap_or_default();
            self.delete_owned(&configmaps, agent, &name, "configmaps")
                .await?;
        }
        let secrets: Api<Secret> = self.api(&names.tenant);
        let listed = self
            .kube
            .call("list secrets", || secrets.list(&params))
            .await
            .map_err(|e| e.into_compute("list secrets"))?;
        for s in listed.items {
            let name = s.metadata.name.clone().unwrap_or_default();
            self.delete_owned(&secrets, agent, &name, "secrets").await?;
        }
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        self.delete_owned(&claims, agent, &names.state, "persistentvolumeclaims")
            .await?;
        let policies: Api<NetworkPolicy> = self.api(&names.tenant);
        self.delete_owned(&policies, agent, &names.gateway, "networkpolicies")
            .await?;
        let accounts: Api<ServiceAccount> = self.api(&names.tenant);
        self.delete_owned(&accounts, agent, &names.gateway, "serviceaccounts")
            .await
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        let Some(d) = self.deployment_of(&rev.agent).await? else {
            return Ok(RuntimeState::NotRunning);
        };
        if Self::installed(&d).map(|(id, _)| id) != Some(rev.revision_id.to_string()) {
            return Ok(RuntimeState::NotCurrent);
        }
        Ok(if self.serving(rev, Duration::from_secs(5)).await? {
            RuntimeState::Serving
        } else {
            RuntimeState::NotRunning
        })
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        let Some(d) = self.deployment_of(agent).await? else {
            return Ok(None);
        };
        let Some((revision_id, _)) = Self::installed(&d) else {
            return Ok(None);
        };
        if d.spec.as_ref().and_then(|s| s.replicas) != Some(1) {
            return Ok(None);
        }
        let Some(pod) = self.serving_pod(agent, &revision_id).await? else {
            return Ok(None);
        };
        let port = self.forward(agent, &pod).await?;
        Ok(Some(GatewayAccess {
            url: format!("ws://127.0.0.1:{port}"),
            token: self.token(agent).await?,
        }))
    }
}
