//! The gateway Pods of an Agent: which one serves which revision, whether a new revision's
//! container died during startup, the gateway's token, and the port-forward occ reaches it by.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use occ_core::ReasonCode;

use super::objects::{
    ANNOTATION_REVISION_ID, LABEL_AGENT, foreign, gateway_exit_code, installed, owned, rolled_out,
};
use super::{AgentTarget, ComputeError, KubernetesCompute, RevisionTarget, SecretText};
use crate::kubernetes::annotation;

impl KubernetesCompute {
    /// The Agent's Pods (of every revision).
    pub(super) async fn agent_pods(&self, agent: &AgentTarget) -> Result<Vec<Pod>, ComputeError> {
        let names = self.names(agent).await?;
        let pods: Api<Pod> = self.api(&names.tenant);
        let params = ListParams::default().labels(&format!("{LABEL_AGENT}={}", agent.agent_id));
        let list = self
            .kube
            .call("list pods", || pods.list(&params))
            .await
            .map_err(|e| e.into_compute("list pods"))?;
        Ok(list.items)
    }

    /// The running, ready Pod of the Agent's current template, if any.
    pub(super) async fn serving_pod(
        &self,
        agent: &AgentTarget,
        revision_id: &str,
    ) -> Result<Option<String>, ComputeError> {
        Ok(self.agent_pods(agent).await?.into_iter().find_map(|p| {
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

    /// The exit code of the revision's gateway container if it has exited since its Pod
    /// started (it has not served: the caller checked that first).
    pub(super) async fn exited_during_startup(
        &self,
        agent: &AgentTarget,
        rev: &RevisionTarget,
    ) -> Result<Option<i32>, ComputeError> {
        Ok(self
            .agent_pods(agent)
            .await?
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && annotation(&p.metadata, ANNOTATION_REVISION_ID)
                        == Some(rev.revision_id.as_str())
            })
            .find_map(gateway_exit_code))
    }

    pub(super) async fn token(&self, agent: &AgentTarget) -> Result<SecretText, ComputeError> {
        let names = self.names(agent).await?;
        let api: Api<Secret> = self.api(&names.tenant);
        let secret = self
            .get(&api, &names.token, "get secrets")
            .await?
            .ok_or_else(|| {
                ComputeError::transient(
                    ReasonCode::GatewayTokenMissing,
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

    /// A local port forwarded to the gateway of `agent`'s Pod `pod` ([`Forwards::open`]).
    pub(super) async fn forward(
        &self,
        agent: &AgentTarget,
        pod: &str,
    ) -> Result<u16, ComputeError> {
        let names = self.names(agent).await?;
        self.forwards
            .open(self.api(&names.tenant), (names.tenant, names.gateway), pod)
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

    /// Waits until no Pod of the Agent remains.
    pub(super) async fn wait_no_pods(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
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
                    ReasonCode::GatewayStopPending,
                    format!(
                        "the gateway Pod of {} has not terminated yet",
                        agent.agent_id
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
