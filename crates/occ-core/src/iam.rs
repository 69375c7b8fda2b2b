//! Native IAM records: identities (human principals and service principals), Roles,
//! AccessBindings, deny-only Restrictions, human accounts, sessions and service keys.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::authz::{Action, Permission, ResourceKind};
use crate::id::{AgentId, IamId, NamespaceId};
use crate::time::Timestamp;

/// What an identity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityKind {
    /// A human (signs in with a password; always Installation-scoped).
    Principal,
    /// A service principal (service keys), possibly owned by an Agent.
    ServicePrincipal,
}

impl IdentityKind {
    /// Stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityKind::Principal => "principal",
            IdentityKind::ServicePrincipal => "service_principal",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "principal" => Some(Self::Principal),
            "service_principal" => Some(Self::ServicePrincipal),
            _ => None,
        }
    }
}

/// An IAM identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `prn_…`, `spn_…` or `service-agent-<agentId>`.
    pub id: IamId,
    /// Human or service.
    pub kind: IdentityKind,
    /// Scope: `None` is Installation-wide. Agent principals always have one.
    pub namespace_id: Option<NamespaceId>,
    /// The owning Agent, for Agent service principals.
    pub agent_id: Option<AgentId>,
    /// External identity issuer (humans).
    pub issuer: Option<String>,
    /// External identity subject (humans).
    pub subject: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A Role: a set of exact action × kind permissions. Immutable once created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// `role_…`
    pub id: IamId,
    /// `None` for Installation Roles.
    pub namespace_id: Option<NamespaceId>,
    /// Optional display name.
    pub name: Option<String>,
    /// 1..64 distinct permissions.
    pub permissions: Vec<Permission>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// The exact resource an AccessBinding targets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BoundResource {
    /// Kind.
    pub kind: ResourceKind,
    /// Exact id.
    pub id: String,
}

/// Grants a Role to an identity at Installation, Namespace or exact-resource scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessBinding {
    /// `binding_…`
    pub id: IamId,
    /// `None`: Installation-wide.
    pub namespace_id: Option<NamespaceId>,
    /// The identity granted.
    pub subject_id: IamId,
    /// The Role granted.
    pub role_id: IamId,
    /// `None`: the whole scope; otherwise one exact resource.
    pub resource: Option<BoundResource>,
    /// The runtime role a person holds in the exact Agent's native Control UI (exact Agent
    /// bindings of people only; at most one per person and Agent).
    pub runtime_role: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A deny-only rule that overrides every grant it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    /// `res_…`
    pub id: IamId,
    /// `None`: every Namespace.
    pub namespace_id: Option<NamespaceId>,
    /// Denied action.
    pub action: Action,
    /// Kind it applies to.
    pub resource_kind: ResourceKind,
    /// `None`: every resource of the kind in scope.
    pub resource_id: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A human account (password sign-in).
#[derive(Clone, PartialEq, Eq)]
pub struct UserAccount {
    /// `usr_…`
    pub id: IamId,
    /// Lowercased email, unique.
    pub email: String,
    /// Display name.
    pub name: String,
    /// The IAM principal of this human.
    pub principal_id: IamId,
    /// Advanced by every administrative change (the reference's `version`, from 1).
    pub version: i64,
    /// When an administrator disabled it; `None` while it may sign in.
    pub disabled_at: Option<Timestamp>,
    /// Creation time.
    pub created_at: Timestamp,
}

impl fmt::Debug for UserAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserAccount")
            .field("id", &self.id)
            .field("principal_id", &self.principal_id)
            .finish_non_exhaustive()
    }
}

/// A service key's public metadata. The key itself is returned once at issuance and stored
/// only as a SHA-256 hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceKey {
    /// `key_…`
    pub id: IamId,
    /// The service principal the key authenticates as.
    pub service_principal_id: IamId,
    /// `Some`: the key only works inside this Namespace.
    pub namespace_id: Option<NamespaceId>,
    /// 1..32 characters.
    pub name: String,
    /// Expiry.
    pub expires_at: Timestamp,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A sign-in session. The cookie token is stored only as a SHA-256 hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Session id (`ses_…`).
    pub id: String,
    /// The account.
    pub user_id: IamId,
    /// Expiry.
    pub expires_at: Timestamp,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A non-Agent service principal as automation sees it (an occ extension: the reference leaves
/// creating them to its IAM authority): a named identity for service keys, optionally limited
/// to one Namespace, that an administrator can disable (its keys then stop working at once)
/// and delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePrincipal {
    /// `spn_…`
    pub id: IamId,
    /// `Some`: the principal acts only inside this Namespace.
    pub namespace_id: Option<NamespaceId>,
    /// 1..64 characters, unique within its scope (`None` for principals made before names
    /// existed, such as an older bootstrap's).
    pub name: Option<String>,
    /// When it was disabled; `None` while it is enabled.
    pub disabled_at: Option<Timestamp>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// The Roles every Namespace is created with (an occ extension): bind one to a person, a group
/// or a service principal on the whole Namespace to give them access in one step. They are
/// ordinary Namespace Roles with fixed ids (`role_<name>_<namespace uuid>`); an administrator
/// may delete them like any other. None grants `agent:use`, so the bootstrap administrator
/// (who holds everything else) may hand each of them out under the coverage rule; talking to
/// an Agent is granted per Agent (`occ agent grant-use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinRole {
    /// Reads everything in the Namespace (Secret values are never readable).
    Viewer,
    /// A viewer who also deploys, stops and reads the logs of Agents, and lets them consume
    /// Secrets and credential sources.
    Operator,
    /// An operator who also creates, changes and deletes the Namespace's resources and
    /// administers its Agents (a person who administers an Agent may also talk to it).
    Admin,
}

impl BuiltinRole {
    /// Every built-in Role, least to most powerful.
    pub const ALL: [BuiltinRole; 3] = [Self::Viewer, Self::Operator, Self::Admin];

    /// Its name (also the Role's `name`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    /// The built-in Role called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Its id in Namespace `ns`.
    pub fn id(self, ns: &NamespaceId) -> IamId {
        IamId::builtin_role(self.name(), ns)
    }

    /// What it grants, in a stable order.
    pub fn permissions(self) -> Vec<Permission> {
        use Action::*;
        use ResourceKind as K;
        let readable = [
            K::Namespace,
            K::Agent,
            K::AgentRevision,
            K::Configuration,
            K::Secret,
            K::ServiceAccount,
            K::Preset,
            K::CredentialSource,
        ];
        let mut out: Vec<Permission> = readable.iter().map(|k| Permission::new(Read, *k)).collect();
        if self == Self::Viewer {
            return out;
        }
        for action in [Deploy, Operate, ReadLogs] {
            out.push(Permission::new(action, K::Agent));
        }
        out.push(Permission::new(Operate, K::Secret));
        out.push(Permission::new(Operate, K::CredentialSource));
        if self == Self::Operator {
            return out;
        }
        out.push(Permission::new(Administer, K::Agent));
        for kind in [
            K::Agent,
            K::Configuration,
            K::Secret,
            K::ServiceAccount,
            K::Preset,
            K::CredentialSource,
        ] {
            for action in [Create, Update, Delete] {
                out.push(Permission::new(action, kind));
            }
        }
        out
    }

    /// The Role as it is stored in Namespace `ns`.
    pub fn role(self, ns: &NamespaceId, created_at: Timestamp) -> Role {
        Role {
            id: self.id(ns),
            namespace_id: Some(ns.clone()),
            name: Some(self.name().to_owned()),
            permissions: self.permissions(),
            created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_roles_grow_from_viewer_to_admin_within_the_supported_matrix() {
        let ns = NamespaceId::generate();
        let mut previous: Vec<Permission> = Vec::new();
        for role in BuiltinRole::ALL {
            let perms = role.permissions();
            assert!(perms.iter().all(|p| p.is_supported()), "{role:?}");
            assert!(perms.iter().all(|p| p.resource_kind.is_namespaced()
                || p == &Permission::new(Action::Read, ResourceKind::Namespace)));
            assert!(
                previous.iter().all(|p| perms.contains(p)),
                "{role:?} keeps the lesser role's grants"
            );
            assert!(perms.len() > previous.len() && perms.len() <= 64);
            let mut unique = perms.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), perms.len());
            assert_eq!(BuiltinRole::from_name(role.name()), Some(role));
            let id = role.id(&ns);
            assert!(id.as_str().starts_with("role_") && id.as_str().ends_with(&ns.as_str()[3..]));
            previous = perms;
        }
        assert!(
            !BuiltinRole::Viewer
                .permissions()
                .iter()
                .any(|p| p.action != Action::Read)
        );
    }
}
