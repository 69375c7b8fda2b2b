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
