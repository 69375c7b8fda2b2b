//! What the Installation runs, for its administrators: the deployment inventory (every
//! Namespace with its Agents and their deployment state) and the configured Backends.

use std::collections::HashMap;

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{Agent, Namespace};
use occ_core::{Error, InstallationId, NamespaceId};

use crate::{BackendConfig, Controller, Request};

/// The deployment inventory: the Installation's Namespaces with their Agents, each Agent with
/// whether a deployment of it is queued or running.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The Installation.
    pub installation_id: InstallationId,
    /// Namespaces the caller may read, with the Agents it may read.
    pub namespaces: Vec<(Namespace, Vec<(Agent, bool)>)>,
}

impl Controller {
    /// The deployment inventory (`installation:administer`; each Namespace and Agent listed
    /// only when the caller may read it).
    pub async fn deployment_inventory(&self, req: &Request) -> Result<Inventory, Error> {
        let (mut tx, installation) = self
            .read_administering(req, "openclaw.installation.deployment_inventory.read")
            .await?;
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        let mut by_namespace: HashMap<NamespaceId, Vec<(Agent, bool)>> = HashMap::new();
        for (agent, in_progress) in tx.agent_inventory().await? {
            let readable = Self::allowed(
                &snapshot,
                &req.caller,
                Action::Read,
                &ResourceRef::exact(ResourceKind::Agent, &agent.namespace_id, &agent.id),
            );
            if readable {
                by_namespace
                    .entry(agent.namespace_id.clone())
                    .or_default()
                    .push((agent, in_progress));
            }
        }
        let namespaces = tx
            .namespace_list()
            .await?
            .into_iter()
            .filter(|ns| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::namespace(&ns.id),
                )
            })
            .map(|ns| {
                let agents = by_namespace.remove(&ns.id).unwrap_or_default();
                (ns, agents)
            })
            .collect();
        Ok(Inventory {
            installation_id: installation.id,
            namespaces,
        })
    }

    /// The configured Backends (`installation:administer`).
    pub async fn backend_list(&self, req: &Request) -> Result<Vec<BackendConfig>, Error> {
        self.read_administering(req, "openclaw.backends.list")
            .await?;
        Ok(self.settings.backends.clone())
    }
}
