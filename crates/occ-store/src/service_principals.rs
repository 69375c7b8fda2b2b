//! Non-Agent service principals as automation manages them: the identity row (immutable) and
//! a `service_principals` row with its name and whether it is disabled.

use occ_core::authz::Action;
use occ_core::iam::{Identity, IdentityKind, ServicePrincipal};
use occ_core::{IamId, NamespaceId, Timestamp};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! principal_query {
    ($filter:literal) => {
        concat!(
            "SELECT i.id, i.namespace_id, s.name, s.disabled_at, i.created_at \
             FROM iam_identities i LEFT JOIN service_principals s ON s.id = i.id \
             WHERE i.kind = 'service_principal' AND i.agent_id IS NULL",
            $filter,
            " ORDER BY i.created_at, i.id"
        )
    };
}

fn from_row(r: &Row) -> Result<ServicePrincipal, StoreError> {
    Ok(ServicePrincipal {
        id: r.parse("id")?,
        namespace_id: r.opt_parse("namespace_id")?,
        name: r.opt_text("name")?,
        disabled_at: r.opt_time("disabled_at")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// A non-Agent service principal.
    pub async fn service_principal_get(
        &mut self,
        id: &IamId,
    ) -> Result<Option<ServicePrincipal>, StoreError> {
        let row = self
            .q(sql!(principal_query!(" AND i.id = $1")))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Non-Agent service principals, oldest first: all of them, or those of one Namespace.
    pub async fn service_principal_list(
        &mut self,
        ns: Option<&NamespaceId>,
    ) -> Result<Vec<ServicePrincipal>, StoreError> {
        let rows = match ns {
            None => self.q(sql!(principal_query!(""))).fetch_all().await?,
            Some(ns) => {
                self.q(sql!(principal_query!(" AND i.namespace_id = $1")))
                    .bind(ns.as_str())
                    .fetch_all()
                    .await?
            }
        };
        rows.iter().map(from_row).collect()
    }
}

impl Authorized {
    /// Creates a non-Agent service principal (its identity and its row). A taken name is a
    /// [`StoreError::Conflict`].
    pub async fn service_principal_insert(
        &mut self,
        principal: &ServicePrincipal,
    ) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.identity_insert(&Identity {
            id: principal.id.clone(),
            kind: IdentityKind::ServicePrincipal,
            namespace_id: principal.namespace_id.clone(),
            agent_id: None,
            issuer: None,
            subject: None,
            created_at: principal.created_at,
        })
        .await?;
        self.q(sql!(
            "INSERT INTO service_principals (id, name, disabled_at, created_at) VALUES ($1, $2, $3, $4)"
        ))
        .bind(principal.id.as_str())
        .bind(principal.name.clone())
        .bind(principal.disabled_at)
        .bind(principal.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Disables (`Some(when)`) or enables (`None`) a non-Agent service principal; a principal
    /// without a row yet (an older bootstrap's) gets one.
    pub async fn service_principal_set_disabled(
        &mut self,
        principal: &ServicePrincipal,
        disabled_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO service_principals (id, name, disabled_at, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO UPDATE SET disabled_at = excluded.disabled_at"
        ))
        .bind(principal.id.as_str())
        .bind(principal.name.clone())
        .bind(disabled_at)
        .bind(principal.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Deletes a non-Agent service principal; its keys and bindings go with it.
    pub async fn service_principal_delete(&mut self, id: &IamId) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        let n = self
            .q(sql!(
                "DELETE FROM iam_identities WHERE id = $1 AND kind = 'service_principal' AND agent_id IS NULL"
            ))
            .bind(id.as_str())
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }
}
