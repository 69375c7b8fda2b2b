//! Native IAM records: identities, Roles, AccessBindings and Restrictions, plus the policy
//! snapshot the authorizer evaluates. Policy is always read fresh; nothing is cached.

use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::iam::{
    AccessBinding, BoundResource, Identity, IdentityKind, Restriction, Role, ServiceKey,
};
use occ_core::{IamId, NamespaceId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

fn identity_from_row(r: &Row) -> Result<Identity, StoreError> {
    Ok(Identity {
        id: r.parse("id")?,
        kind: r.enum_of("kind", IdentityKind::parse)?,
        namespace_id: r.opt_parse("namespace_id")?,
        agent_id: r.opt_parse("agent_id")?,
        issuer: r.opt_text("issuer")?,
        subject: r.opt_text("subject")?,
        created_at: r.time("created_at")?,
    })
}

/// The columns `IDENTITY_COLUMNS` selects from `iam_identities i` (an outer join: all NULL when
/// there is no identity).
pub(crate) fn identity_from_aliased(r: &Row) -> Result<Option<Identity>, StoreError> {
    if r.opt_text("identity_id")?.is_none() {
        return Ok(None);
    }
    Ok(Some(Identity {
        id: r.parse("identity_id")?,
        kind: r.enum_of("identity_kind", IdentityKind::parse)?,
        namespace_id: r.opt_parse("identity_namespace_id")?,
        agent_id: r.opt_parse("identity_agent_id")?,
        issuer: r.opt_text("identity_issuer")?,
        subject: r.opt_text("identity_subject")?,
        created_at: r.time("identity_created_at")?,
    }))
}

fn role_from_row(r: &Row) -> Result<Role, StoreError> {
    Ok(Role {
        id: r.parse("id")?,
        namespace_id: r.opt_parse("namespace_id")?,
        name: r.opt_text("name")?,
        permissions: r.json_as::<Vec<Permission>>("permissions")?,
        created_at: r.time("created_at")?,
    })
}

fn kind_of(value: &str) -> Option<ResourceKind> {
    value.parse().ok()
}

fn binding_from_row(r: &Row) -> Result<AccessBinding, StoreError> {
    let resource = match (r.opt_text("resource_kind")?, r.opt_text("resource_id")?) {
        (Some(kind), Some(id)) => Some(BoundResource {
            kind: kind_of(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("resource_kind {kind:?}")))?,
            id,
        }),
        _ => None,
    };
    Ok(AccessBinding {
        id: r.parse("id")?,
        namespace_id: r.opt_parse("namespace_id")?,
        subject_id: r.parse("subject_id")?,
        role_id: r.parse("role_id")?,
        resource,
        runtime_role: r.opt_text("runtime_role")?,
        created_at: r.time("created_at")?,
    })
}

fn restriction_from_row(r: &Row) -> Result<Restriction, StoreError> {
    let action = r.text("action")?;
    let kind = r.text("resource_kind")?;
    Ok(Restriction {
        id: r.parse("id")?,
        namespace_id: r.opt_parse("namespace_id")?,
        action: action
            .parse::<Action>()
            .map_err(|()| StoreError::Corrupt(format!("action {action:?}")))?,
        resource_kind: kind_of(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("resource_kind {kind:?}")))?,
        resource_id: r.opt_text("resource_id")?,
        created_at: r.time("created_at")?,
    })
}

/// A binding together with its Role, as the authorizer needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedRole {
    /// The binding.
    pub binding: AccessBinding,
    /// The Role it grants.
    pub role: Role,
}

/// Everything that decides one identity's access, read in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySnapshot {
    /// The identity, if it still exists.
    pub identity: Option<Identity>,
    /// Its bindings with their Roles.
    pub grants: Vec<GrantedRole>,
    /// Every Restriction (deny rules apply to everyone in scope).
    pub restrictions: Vec<Restriction>,
}

/// The grant branch of a policy snapshot: identity, binding and Role columns (NULL where the
/// outer joins find nothing), aligned with [`policy_restriction_rows`].
macro_rules! policy_grant_columns {
    () => {
        "'grant' AS row_kind, \
         i.id AS identity_id, i.kind AS identity_kind, i.namespace_id AS identity_namespace_id, \
         i.agent_id AS identity_agent_id, i.issuer AS identity_issuer, i.subject AS identity_subject, \
         i.created_at AS identity_created_at, \
         b.id, b.namespace_id, b.subject_id, b.role_id, b.resource_kind, b.resource_id, b.created_at, \
         b.runtime_role, r.namespace_id AS role_namespace_id, r.name AS role_name, r.permissions AS role_permissions, \
         r.created_at AS role_created_at, NULL AS action"
    };
}

/// A disabled service principal or account has no policy: keys do not authenticate and queued
/// work is not authorized (`i` is the identity).
macro_rules! identity_enabled {
    () => {
        "NOT EXISTS (SELECT 1 FROM service_principals d WHERE d.id = i.id AND d.disabled_at IS NOT NULL) \
         AND NOT EXISTS (SELECT 1 FROM users d WHERE d.principal_id = i.id AND d.disabled_at IS NOT NULL)"
    };
}

macro_rules! policy_grant_joins {
    () => {
        "LEFT JOIN iam_access_bindings b ON b.subject_id = i.id LEFT JOIN iam_roles r ON r.id = b.role_id"
    };
}

/// Every Restriction as rows of the same shape; `$lead` pads columns that precede the grant
/// columns in the first branch.
macro_rules! policy_restriction_rows {
    ($lead:literal) => {
        concat!(
            "SELECT ",
            $lead,
            "'restriction', NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             x.id, x.namespace_id, NULL, NULL, x.resource_kind, x.resource_id, x.created_at, \
             NULL, NULL, NULL, NULL, NULL, x.action FROM iam_restrictions x"
        )
    };
}

/// Assembles a snapshot from policy rows (grant rows, then restriction rows, any order).
fn snapshot_from_rows(rows: &[Row]) -> Result<PolicySnapshot, StoreError> {
    let mut identity = None;
    let mut grants = Vec::new();
    let mut restrictions = Vec::new();
    for r in rows {
        if r.text("row_kind")? == "restriction" {
            restrictions.push(restriction_from_row(r)?);
            continue;
        }
        if identity.is_none() {
            identity = identity_from_aliased(r)?;
        }
        if r.opt_text("id")?.is_some() {
            let binding = binding_from_row(r)?;
            let role = Role {
                id: binding.role_id.clone(),
                namespace_id: r.opt_parse("role_namespace_id")?,
                name: r.opt_text("role_name")?,
                permissions: r.json_as("role_permissions")?,
                created_at: r.time("role_created_at")?,
            };
            grants.push(GrantedRole { binding, role });
        }
    }
    grants.sort_by(|a, b| a.binding.id.cmp(&b.binding.id));
    restrictions.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(PolicySnapshot {
        identity,
        grants,
        restrictions,
    })
}

macro_rules! binding_cols {
    () => {
        "id, namespace_id, subject_id, role_id, resource_kind, resource_id, runtime_role, created_at"
    };
}

impl Tx {
    /// An identity by id.
    pub async fn identity_get(&mut self, id: &IamId) -> Result<Option<Identity>, StoreError> {
        let row = self
            .q(sql!("SELECT id, kind, namespace_id, agent_id, issuer, subject, created_at FROM iam_identities WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(identity_from_row).transpose()
    }

    /// A Role by id.
    pub async fn role_get(&mut self, id: &IamId) -> Result<Option<Role>, StoreError> {
        let row = self
            .q(sql!("SELECT id, namespace_id, name, permissions, created_at FROM iam_roles WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(role_from_row).transpose()
    }

    /// The Roles scoped to a Namespace, oldest first.
    pub async fn role_list(&mut self, ns: &NamespaceId) -> Result<Vec<Role>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT id, namespace_id, name, permissions, created_at FROM iam_roles WHERE namespace_id = $1 ORDER BY created_at, id"
            ))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(role_from_row).collect()
    }

    /// The Installation's own Roles (no Namespace), oldest first.
    pub async fn installation_role_list(&mut self) -> Result<Vec<Role>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT id, namespace_id, name, permissions, created_at FROM iam_roles WHERE namespace_id IS NULL ORDER BY created_at, id"
            ))
            .fetch_all()
            .await?;
        rows.iter().map(role_from_row).collect()
    }

    /// An AccessBinding by id.
    pub async fn binding_get(&mut self, id: &IamId) -> Result<Option<AccessBinding>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                binding_cols!(),
                " FROM iam_access_bindings WHERE id = $1"
            )))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(binding_from_row).transpose()
    }

    /// The runtime role assignment of `subject` on an exact Agent, if any (at most one).
    pub async fn runtime_assignment(
        &mut self,
        ns: &NamespaceId,
        subject: &IamId,
        agent_id: &str,
    ) -> Result<Option<AccessBinding>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                binding_cols!(),
                " FROM iam_access_bindings WHERE namespace_id = $1 AND subject_id = $2 \
                 AND resource_kind = 'agent' AND resource_id = $3 AND runtime_role IS NOT NULL"
            )))
            .bind(ns.as_str())
            .bind(subject.as_str())
            .bind(agent_id)
            .fetch_optional()
            .await?;
        row.as_ref().map(binding_from_row).transpose()
    }

    /// Bindings that apply inside a Namespace: Namespace-scoped ones and Installation-wide ones.
    pub async fn binding_list(
        &mut self,
        ns: &NamespaceId,
    ) -> Result<Vec<AccessBinding>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                binding_cols!(),
                " FROM iam_access_bindings WHERE namespace_id = $1 OR namespace_id IS NULL ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(binding_from_row).collect()
    }

    /// Removes all IAM policy scoped to a Namespace (at its teardown); returns the removed
    /// binding ids.
    pub async fn iam_remove_namespace_policy(
        &mut self,
        ns: &NamespaceId,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .q(sql!(
                "SELECT id FROM iam_access_bindings WHERE namespace_id = $1 ORDER BY id"
            ))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        let ids = rows
            .iter()
            .map(|r| r.text("id"))
            .collect::<Result<Vec<_>, _>>()?;
        self.q(sql!(
            "DELETE FROM iam_access_bindings WHERE namespace_id = $1"
        ))
        .bind(ns.as_str())
        .execute()
        .await?;
        self.q(sql!("DELETE FROM iam_restrictions WHERE namespace_id = $1"))
            .bind(ns.as_str())
            .execute()
            .await?;
        self.q(sql!("DELETE FROM iam_roles WHERE namespace_id = $1"))
            .bind(ns.as_str())
            .execute()
            .await?;
        self.q(sql!("DELETE FROM service_keys WHERE namespace_id = $1"))
            .bind(ns.as_str())
            .execute()
            .await?;
        // The Namespace's own service principals (their keys and bindings cascade).
        self.q(sql!(
            "DELETE FROM iam_identities WHERE namespace_id = $1 AND kind = 'service_principal' AND agent_id IS NULL"
        ))
        .bind(ns.as_str())
        .execute()
        .await?;
        Ok(ids)
    }

    /// Reads everything that decides `identity`'s access — the identity, its bindings with their
    /// Roles, and the Restrictions — in one statement: every authorized request pays for it.
    pub async fn policy_snapshot(
        &mut self,
        identity: &IamId,
    ) -> Result<PolicySnapshot, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                policy_grant_columns!(),
                " FROM iam_identities i ",
                policy_grant_joins!(),
                " WHERE i.id = $1 AND ",
                identity_enabled!(),
                " UNION ALL ",
                policy_restriction_rows!("")
            )))
            .bind(identity.as_str())
            .fetch_all()
            .await?;
        snapshot_from_rows(&rows)
    }

    /// Every grant `identity` holds, whether or not it is disabled: what the coverage rule
    /// compares (a disabled principal keeps its grants, and re-enabling it hands them back).
    pub async fn grants_held(&mut self, identity: &IamId) -> Result<Vec<GrantedRole>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                policy_grant_columns!(),
                " FROM iam_identities i ",
                policy_grant_joins!(),
                " WHERE i.id = $1"
            )))
            .bind(identity.as_str())
            .fetch_all()
            .await?;
        Ok(snapshot_from_rows(&rows)?.grants)
    }

    /// The service key whose plaintext hashes to `key_hash` (expired ones included: the caller
    /// decides), its stored hash for a constant-time comparison, and the policy snapshot of the
    /// identity it acts as — one statement for a key-authenticated request's authentication
    /// and (for reads) its authorization.
    pub async fn service_key_with_policy(
        &mut self,
        key_hash: &str,
    ) -> Result<Option<(ServiceKey, String, PolicySnapshot)>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT k.id AS key_id, k.service_principal_id AS key_principal_id, \
                 k.namespace_id AS key_namespace_id, k.name AS key_name, k.key_hash, \
                 k.expires_at AS key_expires_at, k.created_at AS key_created_at, ",
                policy_grant_columns!(),
                " FROM service_keys k LEFT JOIN iam_identities i ON i.id = k.service_principal_id ",
                policy_grant_joins!(),
                " WHERE k.key_hash = $1 AND ",
                identity_enabled!(),
                " UNION ALL ",
                policy_restriction_rows!("NULL, NULL, NULL, NULL, NULL, NULL, NULL, ")
            )))
            .bind(key_hash)
            .fetch_all()
            .await?;
        let Some(first) = rows
            .iter()
            .find(|r| matches!(r.text("row_kind").as_deref(), Ok("grant")))
        else {
            return Ok(None);
        };
        let key = ServiceKey {
            id: first.parse("key_id")?,
            service_principal_id: first.parse("key_principal_id")?,
            namespace_id: first.opt_parse("key_namespace_id")?,
            name: first.text("key_name")?,
            expires_at: first.time("key_expires_at")?,
            created_at: first.time("key_created_at")?,
        };
        let stored = first.text("key_hash")?;
        Ok(Some((key, stored, snapshot_from_rows(&rows)?)))
    }

    /// Whether a live resource of `kind` with `id` exists in `ns` (Agents must be active).
    /// Kinds occ does not implement (presets, credential sources) never exist.
    pub async fn resource_exists(
        &mut self,
        kind: ResourceKind,
        ns: &NamespaceId,
        id: &str,
    ) -> Result<bool, StoreError> {
        let sql = match kind {
            ResourceKind::Namespace => sql!(
                "SELECT count(*) AS n FROM namespaces WHERE id = $1 AND id = $2 AND deleted_at IS NULL AND status <> 'deleting'"
            ),
            ResourceKind::Configuration => {
                sql!("SELECT count(*) AS n FROM configurations WHERE namespace_id = $1 AND id = $2")
            }
            ResourceKind::Secret => {
                sql!("SELECT count(*) AS n FROM secrets WHERE namespace_id = $1 AND id = $2")
            }
            ResourceKind::ServiceAccount => sql!(
                "SELECT count(*) AS n FROM service_accounts WHERE namespace_id = $1 AND id = $2"
            ),
            ResourceKind::Agent => sql!(
                "SELECT count(*) AS n FROM agents WHERE namespace_id = $1 AND id = $2 AND status = 'active'"
            ),
            ResourceKind::AgentRevision => sql!(
                "SELECT count(*) AS n FROM agent_revisions WHERE namespace_id = $1 AND id = $2"
            ),
            ResourceKind::Installation | ResourceKind::Preset | ResourceKind::CredentialSource => {
                return Ok(false);
            }
        };
        Ok(self
            .q(sql)
            .bind(ns.as_str())
            .bind(id)
            .fetch_one()
            .await?
            .count("n")?
            > 0)
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts an identity (humans and non-Agent service principals; Agent principals are created
    /// by [`Authorized::agent_insert`]).
    pub async fn identity_insert(&mut self, identity: &Identity) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO iam_identities (id, kind, namespace_id, agent_id, issuer, subject, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(identity.id.as_str())
        .bind(identity.kind.as_str())
        .bind(identity.namespace_id.as_ref().map(|n| n.to_string()))
        .bind(identity.agent_id.as_ref().map(|a| a.to_string()))
        .bind(identity.issuer.clone())
        .bind(identity.subject.clone())
        .bind(identity.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Inserts a Role.
    pub async fn role_insert(&mut self, role: &Role) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.role_row_insert(role).await
    }

    /// Inserts a Role row: for [`Authorized::role_insert`] and the built-in Roles a Namespace
    /// is created with ([`Authorized::namespace_insert`]).
    pub(crate) async fn role_row_insert(&mut self, role: &Role) -> Result<(), StoreError> {
        let permissions = serde_json::to_value(&role.permissions)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.q(sql!("INSERT INTO iam_roles (id, namespace_id, name, permissions, created_at) VALUES ($1, $2, $3, $4, $5)"))
            .bind(role.id.as_str())
            .bind(role.namespace_id.as_ref().map(|n| n.to_string()))
            .bind(role.name.clone())
            .bind(permissions)
            .bind(role.created_at)
            .execute()
            .await?;
        Ok(())
    }

    /// Deletes a Role; a binding that still grants it is a [`StoreError::Reference`].
    pub async fn role_delete(&mut self, id: &IamId) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        let n = self
            .q(sql!("DELETE FROM iam_roles WHERE id = $1"))
            .bind(id.as_str())
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Inserts an AccessBinding.
    pub async fn binding_insert(&mut self, binding: &AccessBinding) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO iam_access_bindings (id, namespace_id, subject_id, role_id, resource_kind, resource_id, runtime_role, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(binding.id.as_str())
        .bind(binding.namespace_id.as_ref().map(|n| n.to_string()))
        .bind(binding.subject_id.as_str())
        .bind(binding.role_id.as_str())
        .bind(binding.resource.as_ref().map(|r| r.kind.as_str()))
        .bind(binding.resource.as_ref().map(|r| r.id.clone()))
        .bind(binding.runtime_role.clone())
        .bind(binding.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Assigns a runtime role on a binding (the one column of a binding that changes in place).
    pub async fn binding_set_runtime_role(
        &mut self,
        id: &IamId,
        runtime_role: &str,
    ) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        let n = self
            .q(sql!(
                "UPDATE iam_access_bindings SET runtime_role = $2 WHERE id = $1"
            ))
            .bind(id.as_str())
            .bind(runtime_role)
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Deletes an AccessBinding.
    pub async fn binding_delete(&mut self, id: &IamId) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        let n = self
            .q(sql!("DELETE FROM iam_access_bindings WHERE id = $1"))
            .bind(id.as_str())
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Deletes every binding that targets an exact resource; returns their ids.
    pub async fn binding_delete_targeting(
        &mut self,
        kind: ResourceKind,
        id: &str,
    ) -> Result<Vec<String>, StoreError> {
        // With the resource they target (a deleted Configuration, Secret or ServiceAccount).
        self.require_deleting(kind, id)?;
        let rows = self
            .q(sql!("SELECT id FROM iam_access_bindings WHERE resource_kind = $1 AND resource_id = $2 ORDER BY id"))
            .bind(kind.as_str())
            .bind(id)
            .fetch_all()
            .await?;
        let ids = rows
            .iter()
            .map(|r| r.text("id"))
            .collect::<Result<Vec<_>, _>>()?;
        self.q(sql!(
            "DELETE FROM iam_access_bindings WHERE resource_kind = $1 AND resource_id = $2"
        ))
        .bind(kind.as_str())
        .bind(id)
        .execute()
        .await?;
        Ok(ids)
    }

    /// Inserts a Restriction.
    pub async fn restriction_insert(&mut self, r: &Restriction) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO iam_restrictions (id, namespace_id, action, resource_kind, resource_id, effect, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'deny', $6)"
        ))
        .bind(r.id.as_str())
        .bind(r.namespace_id.as_ref().map(|n| n.to_string()))
        .bind(r.action.as_str())
        .bind(r.resource_kind.as_str())
        .bind(r.resource_id.clone())
        .bind(r.created_at)
        .execute()
        .await?;
        Ok(())
    }
}
