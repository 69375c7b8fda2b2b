//! The Pods of an Agent's workloads (its gateway; a dedicated Agent's harness too): which one
//! serves which revision, whether a new revision's container died during startup, the
//! gateway's token, and the port-forward occ reaches it by.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use occ_core::ReasonCode;

use super::harness::HARNESS_CONTAINER;
use super::objects::{exit_code, installed, rolled_out};
use super::workloads::{
    ANNOTATION_REVISION_ID, GATEWAY_CONTAINER, LABEL_AGENT, LABEL_HARNESS_AGENT, foreign, owned,
};
use super::{AgentTarget, ComputeError, KubernetesCompute, RevisionTarget, SecretText};
use crate::kubernetes::annotation;

/// One of an Agent's workloads: its Pods' label and container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Workload {
    /// The OpenClaw gateway.
    Gateway,
    /// A dedicated Agent's Codex harness.
    Harness,
}

impl Workload {
    /// The label naming the Agent on the workload's Pods.
    pub fn label(self) -> &'static str {
        match self {
            Self::Gateway => LABEL_AGENT,
            Self::Harness => LABEL_HARNESS_AGENT,
        }
    }
    /// The workload's container.
    pub fn container(self) -> &'static str {
        match self {
            Self::Gateway => GATEWAY_CONTAINER,
            Self::Harness => HARNESS_CONTAINER,
        }
    }
    /// Its name in messages.
    pub fn what(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Harness => "harness",
        }
    }
}

impl KubernetesCompute {
    /// The Agent's gateway Pods (of every revision).
    pub(super) async fn agent_pods(&self, agent: &AgentTarget) -> Result<Vec<Pod>, ComputeError> {
        self.workload_pods(agent, Workload::Gateway).await
    }

    /// The Pods of one of the Agent's workloads (of every revision).
    pub(super) async fn workload_pods(
        &self,
        agent: &AgentTarget,
        workload: Workload,
    ) -> Result<Vec<Pod>, ComputeError> {
        let names = self.names(agent).await?;
        let pods: Api<Pod> = self.api(&names.tenant);
        let params =
            ListParams::default().labels(&format!("{}={}", workload.label(), agent.agent_id));
        let list = self
            .kube
            .call("list pods", || pods.list(&params))
            .await
            .map_err(|e| e.into_compute("list pods"))?;
        Ok(list.items)
    }

    /// The running, ready gateway Pod of the Agent's current template, if any.
    pub(super) async fn serving_pod(
        &self,
        agent: &AgentTarget,
        revision_id: &str,
    ) -> Result<Option<String>, ComputeError> {
        self.ready_pod(agent, Workload::Gateway, revision_id).await
    }

    /// The running, ready Pod of `revision_id`'s `workload`, if any.
    pub(super) async fn ready_pod(
        &self,
        agent: &AgentTarget,
        workload: Workload,
        revision_id: &str,
    ) -> Result<Option<String>, ComputeError> {
        Ok(self
            .workload_pods(agent, workload)
            .await?
            .into_iter()
            .find_map(|p| {
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

    /// The exit code of the revision's `workload` container if it has exited since its Pod
    /// started (it has not served: the caller checked that first).
    pub(super) async fn exited_during_startup(
        &self,
        rev: &RevisionTarget,
        workload: Workload,
    ) -> Result<Option<i32>, ComputeError> {
        Ok(self
            .workload_pods(&rev.agent, workload)
            .await?
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && annotation(&p.metadata, ANNOTATION_REVISION_ID)
                        == Some(rev.revision_id.as_str())
            })
            .find_map(|p| exit_code(p, workload.container())))
    }

    pub(super) async fn token(&self, agent: &AgentTarget) -> Result<SecretText, ComputeError> {
        let names = self.names(agent).await?;
        self.stored_token(agent, &names.token, "token").await
    }

    /// A 64-hex token the Driver made and keeps in the Agent's Secret `name` under `key`.
    pub(super) async fn stored_token(
        &self,
        agent: &AgentTarget,
        name: &str,
        key: &str,
    ) -> Result<SecretText, ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Secret> = self.api(&names.tenant);
        let secret = self.get(&api, name, "get secrets").await?.ok_or_else(|| {
            ComputeError::transient(
                ReasonCode::GatewayTokenMissing,
                format!("the token Secret {name} is missing"),
            )
        })?;
        if !owned(&secret.metadata, agent) {
            return Err(foreign(format!("secret {name} is not this Agent's")));
        }
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|t| String::from_utf8(t.0.clone()).ok())
            .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(SecretText::new)
            .ok_or_else(|| foreign(format!("secret {name} holds no valid token")))
    }

    /// A local port forwarded to the gateway of `agent`'s Pod `pod` ([`Forwards::open`]).
    pub(super) async fn forward(
        &self,
        agent: &AgentTarget,
        pod: &str,
    ) -> Result<u16, ComputeError> {
        let names = self.names(agent).await?;
        // A forwarded connection may sit idle (a pooled session) or wait long for an answer.
        let pods = Api::namespaced(self.kube.stream_client(), &names.tenant);
        self.forwards
            .open(pods, (names.tenant, names.gateway), pod)
            .await
    }

    /// Whether `rev` serves: its template rolled out and its Pod answers `hello-ok`.
    pub(super) async fn serving(
        &self,
        rev: &RevisionTarget,
        wait: Duration,
    ) -> Result<bool, ComputeError> {
        match self.deployment_of(&rev.agent).await? {
            Some(d) => self.serving_from(rev, &d, wait).await,
            None => Ok(false),
        }
    }

    /// [`Self::serving`] with the Agent's Deployment as just read.
    pub(super) async fn serving_from(
        &self,
        rev: &RevisionTarget,
        d: &Deployment,
        wait: Duration,
    ) -> Result<bool, ComputeError> {
        if installed(d).map(|(id, _)| id) != Some(rev.revision_id.to_string()) || !rolled_out(d) {
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

    /// Waits until no Pod of the Agent's `workload` remains.
    pub(super) async fn wait_no_pods(
        &self,
        agent: &AgentTarget,
        workload: Workload,
    ) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let pods: Api<Pod> = self.api(&names.tenant);
        let params =
            ListParams::default().labels(&format!("{}={}", workload.label(), agent.agent_id));
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
                    ReasonCode::GatewayStopPending,
                    format!(
                        "the {} Pod of {} has not terminated yet",
                        workload.what(),
                        agent.agent_id
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
