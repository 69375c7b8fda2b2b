//! The authorization vocabulary: actions, resource kinds, the supported action × kind matrix,
//! permissions and resource references (spec/api.md §1.11, §5.3).
//!
//! No action implies another: a Role that grants `agent:update` does not grant `agent:read`.
//! The decision itself is the pure [`decide`]; the controller applies it to a policy snapshot it
//! reads inside each operation's transaction, and an allowing decision's [`Evidence`] is what the
//! store's admission mutators require.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::id::{InstallationId, NamespaceId};

/// An IAM action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Create a child resource (checked against the parent collection).
    Create,
    /// Read.
    Read,
    /// Update.
    Update,
    /// Delete.
    Delete,
    /// Deploy an Agent (admit a revision).
    Deploy,
    /// Operate: stop an Agent, write workspace files, consume a Secret.
    Operate,
    /// Administer.
    Administer,
    /// Read runtime logs.
    ReadLogs,
    /// Use an Agent (runtime role).
    Use,
}

impl Action {
    /// Every action, in a stable order.
    pub const ALL: [Action; 9] = [
        Action::Create,
        Action::Read,
        Action::Update,
        Action::Delete,
        Action::Deploy,
        Action::Operate,
        Action::Administer,
        Action::ReadLogs,
        Action::Use,
    ];

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Read => "read",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Deploy => "deploy",
            Action::Operate => "operate",
            Action::Administer => "administer",
            Action::ReadLogs => "read_logs",
            Action::Use => "use",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Action::ALL.into_iter().find(|a| a.as_str() == s).ok_or(())
    }
}

/// A kind of resource that permissions and audit events refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// The singleton Installation.
    Installation,
    /// A Namespace.
    Namespace,
    /// A Configuration.
    Configuration,
    /// A Preset (not implemented by occ yet; kept for wire compatibility of Roles).
    Preset,
    /// A ServiceAccount.
    ServiceAccount,
    /// A Secret.
    Secret,
    /// An Agent.
    Agent,
    /// An AgentRevision.
    AgentRevision,
    /// A CredentialSource (a saved provider connection).
    CredentialSource,
}

impl ResourceKind {
    /// Every kind, in a stable order.
    pub const ALL: [ResourceKind; 9] = [
        ResourceKind::Installation,
        ResourceKind::Namespace,
        ResourceKind::Configuration,
        ResourceKind::Preset,
        ResourceKind::ServiceAccount,
        ResourceKind::Secret,
        ResourceKind::Agent,
        ResourceKind::AgentRevision,
        ResourceKind::CredentialSource,
    ];

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Installation => "installation",
            ResourceKind::Namespace => "namespace",
            ResourceKind::Configuration => "configuration",
            ResourceKind::Preset => "preset",
            ResourceKind::ServiceAccount => "service_account",
            ResourceKind::Secret => "secret",
            ResourceKind::Agent => "agent",
            ResourceKind::AgentRevision => "agent_revision",
            ResourceKind::CredentialSource => "credential_source",
        }
    }

    /// The actions that may be granted on this kind; any other pair is refused at Role creation.
    pub fn supported_actions(self) -> &'static [Action] {
        use Action::*;
        match self {
            ResourceKind::Installation => &[Read, Administer],
            ResourceKind::Namespace => &[Create, Read, Delete],
            ResourceKind::Configuration | ResourceKind::Preset | ResourceKind::ServiceAccount => {
                &[Create, Read, Update, Delete]
            }
            ResourceKind::Secret | ResourceKind::CredentialSource => {
                &[Create, Read, Update, Delete, Operate]
            }
            ResourceKind::Agent => &[
                Create, Read, Update, Delete, Deploy, Operate, Administer, ReadLogs, Use,
            ],
            ResourceKind::AgentRevision => &[Read],
        }
    }

    /// Whether resources of this kind live inside a Namespace.
    pub fn is_namespaced(self) -> bool {
        !matches!(self, ResourceKind::Installation) && !matches!(self, ResourceKind::Namespace)
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ResourceKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        ResourceKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or(())
    }
}

/// One grant of a Role: an action on a resource kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Permission {
    /// The action.
    pub action: Action,
    /// The kind it applies to.
    pub resource_kind: ResourceKind,
}

impl Permission {
    /// A permission.
    pub const fn new(action: Action, resource_kind: ResourceKind) -> Self {
        Self {
            action,
            resource_kind,
        }
    }

    /// Whether this pair is in the supported matrix.
    pub fn is_supported(self) -> bool {
        self.resource_kind
            .supported_actions()
            .contains(&self.action)
    }
}

/// The bootstrap administrator Role's permissions (spec/api.md §1.11): everything except
/// `agent:read_logs` and `agent:use`.
pub fn administrator_permissions() -> Vec<Permission> {
    use Action::*;
    use ResourceKind as K;
    let mut out = vec![
        Permission::new(Administer, K::Installation),
        Permission::new(Read, K::Installation),
        Permission::new(Create, K::Namespace),
        Permission::new(Read, K::Namespace),
        Permission::new(Delete, K::Namespace),
    ];
    for kind in [
        K::Configuration,
        K::ServiceAccount,
        K::Secret,
        K::Preset,
        K::CredentialSource,
    ] {
        for action in [Create, Read, Update, Delete] {
            out.push(Permission::new(action, kind));
        }
    }
    out.push(Permission::new(Operate, K::Secret));
    out.push(Permission::new(Operate, K::CredentialSource));
    for action in [Create, Read, Update, Delete, Deploy, Operate, Administer] {
        out.push(Permission::new(action, K::Agent));
    }
    out.push(Permission::new(Read, K::AgentRevision));
    out
}

/// The exact resource an authorization decision is about.
///
/// Collection checks (creating in a Namespace, listing) use the parent's id with the child's
/// kind: creating an Agent in `ns_1` is `{kind: agent, id: ns_1, namespace: ns_1}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// The kind.
    pub kind: ResourceKind,
    /// The exact id (or the parent's id for collection checks).
    pub id: String,
    /// The owning Namespace, for namespaced kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_id: Option<NamespaceId>,
}

impl ResourceRef {
    /// The Installation itself.
    pub fn installation(id: &InstallationId) -> Self {
        Self {
            kind: ResourceKind::Installation,
            id: id.to_string(),
            namespace_id: None,
        }
    }

    /// The Namespace collection of the Installation (for Namespace create and list).
    pub fn namespace_collection(installation: &InstallationId) -> Self {
        Self {
            kind: ResourceKind::Namespace,
            id: installation.to_string(),
            namespace_id: None,
        }
    }

    /// An exact Namespace.
    pub fn namespace(id: &NamespaceId) -> Self {
        Self {
            kind: ResourceKind::Namespace,
            id: id.to_string(),
            namespace_id: Some(id.clone()),
        }
    }

    /// The collection of `kind` inside a Namespace.
    pub fn collection(kind: ResourceKind, namespace: &NamespaceId) -> Self {
        Self {
            kind,
            id: namespace.to_string(),
            namespace_id: Some(namespace.clone()),
        }
    }

    /// An exact namespaced resource.
    pub fn exact(kind: ResourceKind, namespace: &NamespaceId, id: impl fmt::Display) -> Self {
        Self {
            kind,
            id: id.to_string(),
            namespace_id: Some(namespace.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_matches_the_reference() {
        assert!(Permission::new(Action::Read, ResourceKind::AgentRevision).is_supported());
        assert!(!Permission::new(Action::Update, ResourceKind::AgentRevision).is_supported());
        assert!(!Permission::new(Action::Update, ResourceKind::Namespace).is_supported());
        assert!(Permission::new(Action::Operate, ResourceKind::Secret).is_supported());
        assert!(!Permission::new(Action::Operate, ResourceKind::Configuration).is_supported());
    }

    #[test]
    fn administrator_role_is_supported_and_excludes_logs_and_use() {
        let perms = administrator_permissions();
        assert!(perms.iter().all(|p| p.is_supported()));
        assert!(!perms.contains(&Permission::new(Action::ReadLogs, ResourceKind::Agent)));
        assert!(!perms.contains(&Permission::new(Action::Use, ResourceKind::Agent)));
        let mut dedup = perms.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), perms.len());
    }

    #[test]
    fn wire_names_round_trip() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>(), Ok(a));
        }
        for k in ResourceKind::ALL {
            assert_eq!(k.as_str().parse::<ResourceKind>(), Ok(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}

pub use coverage::{GrantScope, StandIns, covers};
pub use decision::{
    AuthMethod, Caller, Decision, Evidence, PolicyRecords, ReadEvidence, decide, decide_standing_in,
};

mod coverage;
mod decision;
