//! The Kubernetes Compute Driver: each Agent's OpenClaw gateway is a one-replica Deployment in
//! its occ Namespace's tenant namespace; a dedicated Agent's Codex harness is a second one
//! (`dedicated` and `harness`: its objects, enrollment through the forward).
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
//! A dedicated revision adds the harness's ServiceAccount, transport and setup-code Secrets,
//! claim, Services, NetworkPolicies, per-revision credential Secret and launch input, and
//! Deployment `hx-<h12>` (see `dedicated.rs`, `harness.rs` and docs/ARCHITECTURE.md).
//!
//! Objects at these names that are not occ's are refused, never adopted or overwritten.

mod activation;
mod dedicated;
mod forward;
mod harness;
mod logs;
mod objects;
mod pods;
mod report;
mod workloads;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use occ_core::ReasonCode;
use occ_core::RevisionId;
use occ_core::native::control_ui;
use occ_core::resource::WorkspaceSetup;
use occ_core::resource::{ComputeIdentity, ExecutionMode};
use occ_host::snapshot::harness_key_variable;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, DEDICATED_AUTH_METHODS,
    GatewayAccess, GatewayExit, LOG_READ_MAX_BYTES, LogChunk, LogEntry, LogGap, LogPosition,
    LogQuery, NamespaceHook as _, NamespaceTarget, Readiness, RevisionContext, RevisionTarget,
    RuntimeReport, RuntimeState, SecretText,
};
use crate::DriverError;
use crate::kubernetes::{
    KubeClient, KubeFailure, TenantNamespaces, annotation, find_tenant_namespace,
    tenant_namespace_name, tenant_namespace_of,
};
use forward::Forwards;
pub use harness::APP_SERVER_PORT;
use objects::{installed, pod_refusal, setup_secret_data};
use pods::Workload;
use workloads::{ANNOTATION_TEMPLATE, LABEL_AGENT, Names, foreign, meta, owned, typed};
pub use workloads::{
    GATEWAY_PORT, KubernetesComputeSettings, KubernetesDedicatedSettings, ModelEgress,
};

/// What the Kubernetes Driver runs: embedded execution, and dedicated execution when its
/// settings have [`KubernetesDedicatedSettings`] (admission in an API process that builds no
/// Driver asks this too).
pub fn selection(dedicated: bool) -> ComputeSelection {
    let mut execution_modes = vec![ExecutionMode::Embedded];
    if dedicated {
        execution_modes.push(ExecutionMode::Dedicated);
    }
    ComputeSelection {
        identity: ComputeIdentity {
            id: "compute-kubernetes".into(),
            implementation: "kubernetes".into(),
        },
        execution_modes,
        // Secret bindings and an `api_key` credential delivered as environment.
        harness_auth_methods: vec!["runtime", "api_key"],
        dedicated_auth_methods: DEDICATED_AUTH_METHODS.to_vec(),
        delivers_secrets: true,
        adopts_existing_namespaces: true,
    }
}

/// The Kubernetes Compute Driver.
pub struct KubernetesCompute {
    selection: ComputeSelection,
    kube: KubeClient,
    tenants: TenantNamespaces,
    settings: KubernetesComputeSettings,
    forwards: Forwards,
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
            selection: selection(settings.dedicated.is_some()),
            tenants,
            kube,
            settings,
            forwards: Forwards::default(),
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
        self.kube.find(api, name, what).await
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
                    return Err(ComputeError::permanent(ReasonCode::TenantObjectForeign, m));
                }
                Err(other) => {
                    return Err(ComputeError::transient(
                        ReasonCode::KubernetesUnavailable,
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
                ReasonCode::KubernetesConflict,
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
            .delete_read(api, name, current.meta(), &format!("delete {what}"))
            .await
            .map_err(|e| e.into_compute(what))
    }

    /// The snapshot the revision runs with, with the Pod's paths (also used by golden tests).
    pub fn render(rev: &RevisionTarget) -> serde_json::Map<String, Value> {
        objects::render(rev)
    }

    /// The Agent's Deployment serving `rev` (also used by the golden tests).
    pub fn deployment(
        &self,
        tenant: &str,
        rev: &RevisionTarget,
        with_setup: bool,
        with_environment: bool,
    ) -> Deployment {
        objects::deployment(
            &self.settings,
            tenant,
            rev,
            with_setup,
            with_environment,
            None,
        )
    }

    async fn deployment_of(&self, agent: &AgentTarget) -> Result<Option<Deployment>, ComputeError> {
        let names = self.names(agent).await?;
        self.owned_deployment(agent, &names.gateway).await
    }

    /// The Agent's Deployment `name` (its gateway's or its harness's), refusing a foreign one.
    async fn owned_deployment(
        &self,
        agent: &AgentTarget,
        name: &str,
    ) -> Result<Option<Deployment>, ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Deployment> = self.api(&names.tenant);
        match self.get(&api, name, "get deployments").await? {
            Some(d) if !owned(&d.metadata, agent) => {
                Err(foreign(format!("deployment {name} is not this Agent's")))
            }
            other => Ok(other),
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
        let name = d.metadata.name.clone().unwrap_or_default();
        let api: Api<Deployment> = self.api(&names.tenant);
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        d.status = None;
        let post = PostParams::default();
        self.kube
            .call("update deployments", || api.replace(&name, &post, &d))
            .await
            .map(|_| ())
            .map_err(|e| e.into_compute("update deployments"))
    }
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

    fn gateway_exits(&self) -> Option<tokio::sync::broadcast::Receiver<GatewayExit>> {
        // The kubelet restarts the container itself.
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
        self.forwards.close(&tenant_namespace_of(ns), None).await;
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
        self.prepare_over(rev, ctx, None).await
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        self.activate_over(rev, ctx, None).await
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        // The failed candidate's template is replaced by the previous revision's (whose
        // snapshot and environment Secret were never retired): the Deployment rolls back.
        self.activate_over(previous, ctx, Some(&failed.revision_id))
            .await
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        // Gateway, then a dedicated revision's harness (absent for embedded ones).
        self.stop_dedicated(rev).await
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.stop_revision(rev).await?;
        let names = self.names(&rev.agent).await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.delete_owned(&secrets, &rev.agent, &names.environment(rev), "secrets")
            .await?;
        self.retire_harness(rev).await
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let deployments: Api<Deployment> = self.api(&names.tenant);
        self.delete_owned(&deployments, agent, &names.gateway, "deployments")
            .await?;
        self.forwards
            .close(&names.tenant, Some(&names.gateway))
            .await;
        self.wait_no_pods(agent, Workload::Gateway).await?;
        self.delete_harness(agent).await?;
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
        if installed(&d).map(|(id, _)| id) != Some(rev.revision_id.to_string()) {
            return Ok(RuntimeState::NotCurrent);
        }
        let serving = match rev.execution_mode() {
            ExecutionMode::Dedicated => self.dedicated_serving(rev).await?,
            _ => self.serving(rev, Duration::from_secs(5)).await?,
        };
        Ok(if serving {
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
        let Some((revision_id, _)) = installed(&d) else {
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

    async fn runtime_report(&self, rev: &RevisionTarget) -> Result<RuntimeReport, ComputeError> {
        self.revision_report(rev).await
    }

    async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        let workload = if query.workload.is_gateway() {
            Workload::Gateway
        } else if rev.execution_mode() == ExecutionMode::Dedicated {
            Workload::Harness
        } else {
            return Err(ComputeError::permanent(
                ReasonCode::RuntimeLogsSourceUnavailable,
                "an embedded revision runs no harness",
            ));
        };
        self.read_pod_logs(rev, query, workload).await
    }
}
