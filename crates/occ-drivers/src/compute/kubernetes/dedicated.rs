//! A dedicated revision on Kubernetes: the harness's objects (prepare), then activation —
//! harness first (its app-server must answer before the gateway loads the Codex plugin), then
//! the gateway, then the node enrollment through occ's port-forward.
//!
//! The node identity lives on the harness claim, so redeploys keep it; its device id is
//! recorded on the claim (`openclaw.dev/node-device-id`). The gateway's configuration is an
//! immutable ConfigMap, so binding a newly paired node means one more gateway rollout with the
//! bound copy (`gw-<h12>-run-…`); revisions after the first start bound. The setup code
//! reaches the harness through a Secret volume (refreshed in place; the Pod annotation makes
//! the kubelet refresh it at once) and is withdrawn as soon as the pairing completes or fails.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams, Patch, PatchParams};
use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, FailureClass, RevisionContext, RevisionTarget, SecretText};
use occ_core::resource::ExecutionMode;
use occ_gateway::{NodeSetup, Session};
use occ_host::harness::FailureCode;
use occ_host::harness::enroll::{
    NODE_CONNECT_WAIT, held_failure, login_method, node_ready, pair, wait_binding_applied,
};
use serde_json::{Value, json};

use super::harness::{
    self, ANNOTATION_NODE, ANNOTATION_NODE_SETUP, APP_SERVER_PORT, SETUP_CODE_KEY,
};
use super::objects::{self, DedicatedGateway, installed, pod_refusal, rolled_out};
use super::pods::Workload;
use super::workloads::{
    APP_SERVER_TOKEN_KEY, GATEWAY_PORT, KubernetesDedicatedSettings, LABEL_AGENT,
    LABEL_HARNESS_AGENT, LABEL_REVISION, Names, meta, typed,
};
use super::{AgentTarget, KubernetesCompute};
use crate::kubernetes::{annotation, short_hash};

/// How long occ's enrollment session may take to connect.
const SESSION_CONNECT: Duration = Duration::from_secs(15);
/// Bound on the harness log read for a held failure.
const HELD_LOG_LINES: usize = 200;

impl KubernetesCompute {
    /// A dedicated revision's gateway and harness Deployments (for golden tests): the harness
    /// reading ConfigMap `launch`, the gateway bound to `node` when given.
    pub fn dedicated_deployments(
        &self,
        tenant: &str,
        rev: &RevisionTarget,
        launch: &str,
        node: Option<&str>,
        with_setup: bool,
    ) -> Option<(Deployment, Deployment)> {
        let dedicated = self.settings.dedicated.as_ref()?;
        let names = Names::of(&rev.agent, tenant.to_owned());
        let config_map = match node {
            Some(node) => bound_config(rev, &names, node).ok()?.0,
            None => names.snapshot(rev),
        };
        Some((
            objects::deployment(
                &self.settings,
                tenant,
                rev,
                false,
                false,
                Some(&DedicatedGateway { config_map }),
            ),
            harness::harness_deployment(&self.settings, dedicated, &names, rev, launch, with_setup),
        ))
    }

    /// The dedicated settings a dedicated revision runs with (`None` for an embedded one);
    /// permanent refusals for a Driver without dedicated execution, a login method the harness
    /// does not have, or a missing credential.
    pub(super) fn dedicated_for(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Option<&KubernetesDedicatedSettings>, ComputeError> {
        if rev.execution_mode() != ExecutionMode::Dedicated {
            return Ok(None);
        }
        let Some(dedicated) = &self.settings.dedicated else {
            rev.require_embedded("Kubernetes")?;
            return Ok(None);
        };
        login_method(rev)?;
        if ctx.harness_credential.is_none() {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHarnessAuth,
                "the revision has no harness credential",
            ));
        }
        Ok(Some(dedicated))
    }

    /// The harness's objects (after the gateway's): its ServiceAccount, the app-server token,
    /// its claim, the setup-code Secret, the Services and NetworkPolicies, the revision's
    /// credential and launch input. Never touches a Deployment.
    pub(super) async fn prepare_harness(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        dedicated: &KubernetesDedicatedSettings,
    ) -> Result<(), ComputeError> {
        let agent = &rev.agent;
        let names = self.names(agent).await?;
        let hx = &names.harness;
        let accounts: Api<ServiceAccount> = self.api(&names.tenant);
        self.ensure(
            &accounts,
            agent,
            &typed(harness::service_account(&names, agent)),
            "serviceaccounts",
        )
        .await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        if self
            .get(&secrets, &hx.transport, "get secrets")
            .await?
            .is_none()
        {
            let token = hex::encode(rand::random::<[u8; 32]>());
            self.ensure(
                &secrets,
                agent,
                &typed(
                    json!({"metadata": meta(&hx.transport, &names.tenant, agent, None),
                              "type": "Opaque", "stringData": {APP_SERVER_TOKEN_KEY: token}}),
                ),
                "secrets",
            )
            .await?;
        }
        let token = self.app_server_token(agent).await?;
        // Created empty, so the harness's (optional) volume has its source from the start.
        self.ensure(
            &secrets,
            agent,
            &typed(
                json!({"metadata": meta(&hx.node_setup, &names.tenant, agent, None),
                          "type": "Opaque"}),
            ),
            "secrets",
        )
        .await?;
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        let mut claim = json!({"metadata": meta(&hx.state, &names.tenant, agent, None),
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": dedicated.harness_storage}}}});
        if let Some(class) = &self.settings.storage_class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        self.ensure(&claims, agent, &typed(claim), "persistentvolumeclaims")
            .await?;
        let services: Api<Service> = self.api(&names.tenant);
        let id = agent.agent_id.to_string();
        for service in [
            harness::service(
                &names,
                agent,
                &hx.harness,
                (LABEL_HARNESS_AGENT, &id),
                "app-server",
                APP_SERVER_PORT,
            ),
            harness::service(
                &names,
                agent,
                &names.gateway,
                (LABEL_AGENT, &id),
                "gateway",
                GATEWAY_PORT,
            ),
        ] {
            self.ensure(&services, agent, &typed(service), "services")
                .await?;
        }
        let policies: Api<NetworkPolicy> = self.api(&names.tenant);
        for policy in [
            harness::gateway_node_policy(&names, agent),
            harness::harness_policy(&names, agent, dedicated),
        ] {
            self.ensure(&policies, agent, &typed(policy), "networkpolicies")
                .await?;
        }
        let credential = ctx.harness_credential.as_ref().ok_or_else(|| {
            ComputeError::permanent(
                ReasonCode::InvalidHarnessAuth,
                "the revision has no harness credential",
            )
        })?;
        self.ensure_secret(
            &secrets,
            agent,
            typed(json!({"metadata": meta(&hx.credential(&rev.revision_id), &names.tenant, agent, Some(rev)),
                         "type": "Opaque", "stringData": {"credential": credential.expose()}})),
        )
        .await?;
        self.ensure_launch(rev, ctx, dedicated, &names, &token)
            .await
            .map(|_| ())
    }

    /// The revision's launch input ConfigMap (immutable, named after its content); returns
    /// its name.
    async fn ensure_launch(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        dedicated: &KubernetesDedicatedSettings,
        names: &Names,
        token: &SecretText,
    ) -> Result<String, ComputeError> {
        let input = harness::launch_input(
            dedicated,
            &self.settings,
            names,
            rev,
            token,
            ctx.workspace_setup.is_some(),
        )?;
        let text = serde_json::to_string_pretty(&input)
            .map_err(|e| ComputeError::permanent(ReasonCode::InvalidHostSettings, e.to_string()))?;
        let name = names.harness.launch(&rev.revision_id, &text);
        self.ensure_immutable_config(rev, names, &name, "launch.json", &text)
            .await?;
        Ok(name)
    }

    /// Creates an immutable ConfigMap of the revision holding `key: text` under a name derived
    /// from the text; one that holds something else at that name is refused.
    async fn ensure_immutable_config(
        &self,
        rev: &RevisionTarget,
        names: &Names,
        name: &str,
        key: &str,
        text: &str,
    ) -> Result<(), ComputeError> {
        let configmaps: Api<ConfigMap> = self.api(&names.tenant);
        let stored = self
            .ensure(
                &configmaps,
                &rev.agent,
                &typed(
                    json!({"metadata": meta(name, &names.tenant, &rev.agent, Some(rev)),
                              "immutable": true, "data": {key: text}}),
                ),
                "configmaps",
            )
            .await?;
        if stored
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(String::as_str)
            != Some(text)
        {
            return Err(super::workloads::foreign(format!(
                "configmap {name} holds something else"
            )));
        }
        Ok(())
    }

    /// The app-server capability token (from the transport Secret).
    async fn app_server_token(&self, agent: &AgentTarget) -> Result<SecretText, ComputeError> {
        let names = self.names(agent).await?;
        self.stored_token(agent, &names.harness.transport, APP_SERVER_TOKEN_KEY)
            .await
    }

    /// The paired node's device id recorded on the harness claim.
    async fn recorded_node(&self, names: &Names) -> Result<Option<String>, ComputeError> {
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        Ok(self
            .get(&claims, &names.harness.state, "get persistentvolumeclaims")
            .await?
            .and_then(|c| annotation(&c.metadata, ANNOTATION_NODE).map(str::to_owned)))
    }

    async fn merge_patch<K>(
        &self,
        api: &Api<K>,
        name: &str,
        patch: Value,
        what: &str,
    ) -> Result<(), ComputeError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        self.kube
            .call(&format!("patch {what}"), || {
                api.patch(name, &params, &patch)
            })
            .await
            .map(|_| ())
            .map_err(|e| e.into_compute(&format!("patch {what}")))
    }

    /// `activate_revision` of a dedicated revision.
    pub(super) async fn activate_dedicated(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        let dedicated = self.dedicated_for(rev, ctx)?.ok_or_else(|| {
            ComputeError::permanent(
                ReasonCode::ComputeDriverMismatch,
                "the Kubernetes Compute Driver runs embedded execution only",
            )
        })?;
        if self.dedicated_serving(rev).await? {
            return self.seal_setup(rev, ctx).await;
        }
        let result = self.start_dedicated(rev, ctx, dedicated).await;
        if let Err(e) = &result
            && e.class == FailureClass::Permanent
        {
            // A held harness or a refused configuration does not heal by waiting: stop both
            // (a transient failure leaves them, so the retry resumes without restarts).
            if let Err(stop) = self.stop_dedicated(rev).await {
                tracing::warn!(revision = %rev.revision_id, error = %stop, "stop after a failed activation");
            }
        }
        result?;
        self.seal_setup(rev, ctx).await
    }

    async fn start_dedicated(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        dedicated: &KubernetesDedicatedSettings,
    ) -> Result<(), ComputeError> {
        let names = self.names(&rev.agent).await?;
        let token = self.app_server_token(&rev.agent).await?;
        let launch = self
            .ensure_launch(rev, ctx, dedicated, &names, &token)
            .await?;
        let desired = harness::harness_deployment(
            &self.settings,
            dedicated,
            &names,
            rev,
            &launch,
            ctx.workspace_setup.is_some(),
        );
        self.apply_deployment(&rev.agent, desired).await?;
        self.wait_harness(rev, ctx, dedicated).await?;
        let mut paired_now = false;
        loop {
            let node = self.recorded_node(&names).await?;
            let config_map = match &node {
                Some(node) => self.ensure_runtime_config(rev, &names, node).await?,
                None => names.snapshot(rev),
            };
            let desired = objects::deployment(
                &self.settings,
                &names.tenant,
                rev,
                false,
                !ctx.environment.is_empty()
                    || occ_core::native::control_ui::enabled(&rev.spec.configuration),
                Some(&DedicatedGateway { config_map }),
            );
            self.apply_deployment(&rev.agent, desired).await?;
            self.wait_gateway(rev, ctx).await?;
            let (mut session, url) = self.operator_session(rev).await?;
            let outcome = self
                .enroll(&mut session, &url, rev, &names, node.as_deref(), paired_now)
                .await;
            session.close().await;
            match outcome? {
                Enrollment::Bound => return Ok(()),
                // Recorded: roll the gateway once more with the bound configuration.
                Enrollment::Paired => paired_now = true,
            }
        }
    }

    /// A native session to the revision's serving gateway through the port-forward, and the
    /// forward's URL.
    async fn operator_session(
        &self,
        rev: &RevisionTarget,
    ) -> Result<(Session, String), ComputeError> {
        let unavailable =
            |m: String| ComputeError::transient(ReasonCode::AgentGatewayUnavailable, m);
        let pod = self
            .serving_pod(&rev.agent, rev.revision_id.as_str())
            .await?
            .ok_or_else(|| unavailable("the gateway Pod is not ready".into()))?;
        let port = self.forward(&rev.agent, &pod).await?;
        let token = self.token(&rev.agent).await?;
        let endpoint = occ_gateway::Endpoint::loopback(port, token.expose());
        Session::connect(&endpoint, SESSION_CONNECT)
            .await
            .map(|(session, _)| (session, endpoint.url.clone()))
            .map_err(|e| unavailable(format!("enrollment session: {e}")))
    }

    /// The node's part of activation: a recorded node connected and bound → `Bound`; otherwise
    /// a new pairing, recorded on the claim → `Paired` (the gateway must be rolled with the
    /// binding). A node paired during this activation that then does not connect is transient.
    async fn enroll(
        &self,
        session: &mut Session,
        public_url: &str,
        rev: &RevisionTarget,
        names: &Names,
        node: Option<&str>,
        paired_now: bool,
    ) -> Result<Enrollment, ComputeError> {
        if let Some(device_id) = node {
            if node_ready(session, device_id, NODE_CONNECT_WAIT).await? {
                wait_binding_applied(session, device_id).await?;
                return Ok(Enrollment::Bound);
            }
            if paired_now {
                return Err(ComputeError::transient(
                    ReasonCode::WorkspaceNodePending,
                    "the paired node did not connect with its commands",
                ));
            }
            tracing::warn!(
                device_id,
                "the recorded node did not reconnect; pairing again"
            );
        }
        // The gateway accepts only a loopback or private address for a plain `ws://` code; the
        // node host connects by its own `--host/--port` (the gateway Service) anyway.
        let device_id = pair(
            session,
            public_url,
            async |setup: &NodeSetup| self.deliver_setup_code(rev, names, setup).await,
            async || self.withdraw_setup_code(&rev.agent, names).await,
        )
        .await?;
        tracing::info!(device_id = %device_id, revision = %rev.revision_id, "harness node paired");
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        self.merge_patch(
            &claims,
            &names.harness.state,
            json!({"metadata": {"annotations": {ANNOTATION_NODE: device_id}}}),
            "persistentvolumeclaims",
        )
        .await?;
        Ok(Enrollment::Paired)
    }

    /// Puts the setup code into the harness's Secret volume and nudges the running harness Pod
    /// so the kubelet refreshes the volume now.
    async fn deliver_setup_code(
        &self,
        rev: &RevisionTarget,
        names: &Names,
        setup: &NodeSetup,
    ) -> Result<(), ComputeError> {
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.ensure_secret(
            &secrets,
            &rev.agent,
            typed(
                json!({"metadata": meta(&names.harness.node_setup, &names.tenant, &rev.agent, None),
                         "type": "Opaque",
                         "stringData": {SETUP_CODE_KEY: setup.setup_code.expose_secret()}}),
            ),
        )
        .await?;
        if let Some(pod) = self
            .ready_pod(&rev.agent, Workload::Harness, rev.revision_id.as_str())
            .await?
        {
            let pods: Api<Pod> = self.api(&names.tenant);
            self.merge_patch(
                &pods,
                &pod,
                json!({"metadata": {"annotations":
                    {ANNOTATION_NODE_SETUP: short_hash(&setup.setup_id, 12)}}}),
                "pods",
            )
            .await?;
        }
        Ok(())
    }

    /// Empties the setup-code Secret (the code is single-use).
    async fn withdraw_setup_code(
        &self,
        agent: &AgentTarget,
        names: &Names,
    ) -> Result<(), ComputeError> {
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.ensure_secret(
            &secrets,
            agent,
            typed(
                json!({"metadata": meta(&names.harness.node_setup, &names.tenant, agent, None),
                         "type": "Opaque", "stringData": {}}),
            ),
        )
        .await
    }

    /// The gateway's configuration of the revision bound to `node` (an immutable ConfigMap
    /// named after its content); returns its name.
    async fn ensure_runtime_config(
        &self,
        rev: &RevisionTarget,
        names: &Names,
        node: &str,
    ) -> Result<String, ComputeError> {
        let (name, text) = bound_config(rev, names, node)?;
        self.ensure_immutable_config(rev, names, &name, "openclaw.json", &text)
            .await?;
        Ok(name)
    }

    /// Waits until the revision's harness is ready (its app-server listens: Codex logged in and
    /// answered the probe), or says why it will not be.
    async fn wait_harness(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        dedicated: &KubernetesDedicatedSettings,
    ) -> Result<(), ComputeError> {
        let names = self.names(&rev.agent).await?;
        let deadline = tokio::time::Instant::now() + dedicated.ready_timeout;
        loop {
            let current = self
                .owned_deployment(&rev.agent, &names.harness.harness)
                .await?;
            if let Some(why) = current.as_ref().and_then(pod_refusal) {
                return Err(ComputeError::transient(
                    ReasonCode::GatewayPodRefused,
                    format!(
                        "the harness Pod of {} cannot be created: {why}",
                        rev.revision_id
                    ),
                ));
            }
            if let Some(d) = &current
                && installed(d).is_some_and(|(id, _)| id == rev.revision_id.as_str())
                && rolled_out(d)
                && self
                    .ready_pod(&rev.agent, Workload::Harness, rev.revision_id.as_str())
                    .await?
                    .is_some()
            {
                return Ok(());
            }
            if let Some(code) = self.held_failure_of(rev).await {
                return Err(held_failure(code)
                    .with_output(self.startup_output(rev, ctx, Workload::Harness).await));
            }
            if let Some(code) = self.exited_during_startup(rev, Workload::Harness).await? {
                return Err(ComputeError::transient(
                    ReasonCode::HarnessNotReady,
                    format!(
                        "the harness of {} exited while starting (exit code {code})",
                        rev.revision_id
                    ),
                )
                .with_output(self.startup_output(rev, ctx, Workload::Harness).await));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    ReasonCode::HarnessNotReady,
                    format!(
                        "the harness of {} did not start its app-server within {:?}",
                        rev.revision_id, dedicated.ready_timeout
                    ),
                )
                .with_output(self.startup_output(rev, ctx, Workload::Harness).await));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The failure the revision's harness holds, as its log announces it (occ cannot read the
    /// status file inside the Pod; a held launcher stays alive and says it once).
    async fn held_failure_of(&self, rev: &RevisionTarget) -> Option<FailureCode> {
        let query = super::LogQuery {
            workload: Default::default(),
            after: None,
            tail_lines: HELD_LOG_LINES,
            previous: false,
        };
        let chunk = self
            .read_pod_logs(rev, &query, Workload::Harness)
            .await
            .ok()?;
        let text: Vec<&str> = chunk.lines().collect();
        FailureCode::held_in_log(&text.join("\n"))
    }

    /// Whether the dedicated revision serves: the gateway serves it with the configuration
    /// bound to the recorded node, and the harness of the revision rolled out.
    pub(super) async fn dedicated_serving(
        &self,
        rev: &RevisionTarget,
    ) -> Result<bool, ComputeError> {
        let names = self.names(&rev.agent).await?;
        let Some(hx) = self
            .owned_deployment(&rev.agent, &names.harness.harness)
            .await?
        else {
            return Ok(false);
        };
        if !(installed(&hx).is_some_and(|(id, _)| id == rev.revision_id.as_str())
            && rolled_out(&hx))
        {
            return Ok(false);
        }
        let Some(node) = self.recorded_node(&names).await? else {
            return Ok(false);
        };
        let Some(gw) = self.deployment_of(&rev.agent).await? else {
            return Ok(false);
        };
        let (bound, _) = bound_config(rev, &names, &node)?;
        if config_map_of(&gw).as_deref() != Some(bound.as_str()) {
            return Ok(false);
        }
        self.serving_from(rev, &gw, Duration::from_secs(5)).await
    }

    /// Stops the revision's gateway, then its harness (each only if it serves this revision),
    /// and waits for their Pods to go.
    pub(super) async fn stop_dedicated(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let names = self.names(&rev.agent).await?;
        for (name, workload) in [
            (&names.gateway, Workload::Gateway),
            (&names.harness.harness, Workload::Harness),
        ] {
            let Some(d) = self.owned_deployment(&rev.agent, name).await? else {
                continue;
            };
            if installed(&d).map(|(id, _)| id) != Some(rev.revision_id.to_string()) {
                continue;
            }
            if d.spec.as_ref().and_then(|s| s.replicas) != Some(0) {
                self.set_replicas(&rev.agent, d, 0).await?;
            }
            if workload == Workload::Gateway {
                self.forwards
                    .close(&names.tenant, Some(&names.gateway))
                    .await;
            }
            self.wait_no_pods(&rev.agent, workload).await?;
        }
        Ok(())
    }

    /// Removes what only the retired revision's harness used: its credential Secret, launch
    /// input and bound gateway configurations.
    pub(super) async fn retire_harness(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        let names = self.names(&rev.agent).await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        self.delete_owned(
            &secrets,
            &rev.agent,
            &names.harness.credential(&rev.revision_id),
            "secrets",
        )
        .await?;
        let configmaps: Api<ConfigMap> = self.api(&names.tenant);
        let params = ListParams::default().labels(&format!(
            "{LABEL_AGENT}={},{LABEL_REVISION}={}",
            rev.agent.agent_id, rev.revision_id
        ));
        let listed = self
            .kube
            .call("list configmaps", || configmaps.list(&params))
            .await
            .map_err(|e| e.into_compute("list configmaps"))?;
        let snapshot = names.snapshot(rev);
        for cm in listed.items {
            let name = cm.metadata.name.clone().unwrap_or_default();
            // The snapshot stays until the Agent goes (as for embedded revisions).
            if name != snapshot {
                self.delete_owned(&configmaps, &rev.agent, &name, "configmaps")
                    .await?;
            }
        }
        Ok(())
    }

    /// Deletes a dedicated Agent's harness objects that are not found by the Agent's label
    /// (the per-revision ones are): Deployment first, then its claim, Services, policies and
    /// ServiceAccount. Absent objects are fine, so this serves every Agent.
    pub(super) async fn delete_harness(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let hx = &names.harness;
        let deployments: Api<Deployment> = self.api(&names.tenant);
        self.delete_owned(&deployments, agent, &hx.harness, "deployments")
            .await?;
        self.wait_no_pods(agent, Workload::Harness).await?;
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        self.delete_owned(&claims, agent, &hx.state, "persistentvolumeclaims")
            .await?;
        let services: Api<Service> = self.api(&names.tenant);
        for name in [&hx.harness, &names.gateway] {
            self.delete_owned(&services, agent, name, "services")
                .await?;
        }
        let policies: Api<NetworkPolicy> = self.api(&names.tenant);
        for name in [&hx.harness, &hx.gateway_node_policy] {
            self.delete_owned(&policies, agent, name, "networkpolicies")
                .await?;
        }
        let accounts: Api<ServiceAccount> = self.api(&names.tenant);
        self.delete_owned(&accounts, agent, &hx.harness, "serviceaccounts")
            .await
    }
}

/// How the node part of an activation ended.
enum Enrollment {
    /// The node is connected and the gateway applied its binding.
    Bound,
    /// A node was paired and recorded; the gateway must roll with the binding.
    Paired,
}

/// The name and text of the gateway's configuration of `rev` bound to `node`.
fn bound_config(
    rev: &RevisionTarget,
    names: &Names,
    node: &str,
) -> Result<(String, String), ComputeError> {
    let text = serde_json::to_string(&Value::Object(harness::render_gateway(
        rev,
        names,
        Some(node),
    )))
    .map_err(|e| ComputeError::permanent(ReasonCode::SnapshotInvalid, e.to_string()))?;
    Ok((names.harness.runtime_config(&rev.revision_id, &text), text))
}

/// The ConfigMap a gateway Deployment's template reads its configuration from.
fn config_map_of(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == "config")?
        .config_map
        .as_ref()
        .map(|c| c.name.clone())
}
