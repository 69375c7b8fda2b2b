//! Gateway exits the Compute Driver reports as they happen (the process Driver reaps the
//! gateways it started): each one is logged at WARN, recorded as the Agent's runtime
//! observation (`restarting`, with its time and status) and the revision's queued maintenance
//! pass is made available at once, so the gateway is started again within seconds instead of at
//! the next interval. The restart itself — and its audit event — is that pass's. Drivers that
//! cannot report exits rely on the maintenance pass alone, which records what it finds the same
//! way.

use occ_core::resource::{AgentStatus, DesiredRuntimeState, RuntimeObservation};
use occ_drivers::compute::GatewayExit;
use occ_store::{StoreError, Tx};
use tokio::sync::{broadcast, watch};

use super::Worker;

impl Worker {
    /// Handles reported exits until shutdown.
    pub(crate) async fn watch_gateway_exits(
        &self,
        mut exits: broadcast::Receiver<GatewayExit>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let received = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => return,
                received = exits.recv() => received,
            };
            match received {
                Ok(exit) => {
                    if let Err(e) = self.gateway_exited(&exit).await {
                        tracing::warn!(
                            agent_id = %exit.agent.agent_id,
                            error = %e,
                            "cannot record a gateway exit; the maintenance pass will find it"
                        );
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => tracing::warn!(
                    missed,
                    "gateway exit reports missed; the maintenance pass will find those gateways"
                ),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Records one reported exit. An exit of a gateway that should not serve (another
    /// revision is active, the Agent is stopping or deleting) is not a crash: it is only
    /// logged.
    pub async fn gateway_exited(&self, exit: &GatewayExit) -> Result<(), StoreError> {
        let (ns, agent_id, rev_id) = (
            &exit.agent.namespace_id,
            &exit.agent.agent_id,
            &exit.revision_id,
        );
        let mut tx = self.store().begin_read().await?;
        let agent = tx.agent_get(ns, agent_id).await?;
        let revision = tx.revision_get(ns, agent_id, rev_id).await?;
        drop(tx);
        let (Some(agent), Some(revision)) = (agent, revision) else {
            tracing::info!(namespace_id = %ns, agent_id = %agent_id, revision_id = %rev_id, exit_status = %exit.status, "a gateway of a removed Agent exited");
            return Ok(());
        };
        let should_serve = agent.active_revision_id.as_ref() == Some(rev_id)
            && agent.desired_runtime_state == DesiredRuntimeState::Running
            && agent.status == AgentStatus::Active;
        if !should_serve {
            tracing::info!(namespace_id = %ns, agent_id = %agent_id, revision_id = %rev_id, exit_status = %exit.status, "a gateway that no longer serves exited");
            return Ok(());
        }
        let restarting = self.compute.maintenance_interval().is_some();
        tracing::warn!(
            namespace_id = %ns,
            agent_id = %agent_id,
            revision_id = %rev_id,
            revision = revision.revision,
            pid = exit.pid,
            exit_status = %exit.status,
            restarting,
            "gateway exited unexpectedly"
        );
        let mut tx = self.observation_transaction().await?;
        tx.work_expedite_maintenance(ns, agent_id, rev_id).await?;
        tx.agent_runtime_observe(
            ns,
            agent_id,
            rev_id,
            &RuntimeObservation::Exited {
                at: exit.at,
                status: exit.status.clone(),
                restarting,
            },
        )
        .await?;
        tx.commit().await
    }

    /// A write transaction for what the worker observed outside a claimed pass (a reported
    /// gateway exit): it records the observation and brings the queued maintenance pass
    /// forward — no admission, no decision, no admitted state changes.
    #[expect(
        clippy::disallowed_methods,
        reason = "records a runtime observation; admits nothing"
    )]
    async fn observation_transaction(&self) -> Result<Tx, StoreError> {
        self.store().begin().await
    }
}
