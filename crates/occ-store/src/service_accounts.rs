//! ServiceAccounts (not IAM principals). No credential value is ever stored here: an issued
//! credential's value lives in the Secret Driver, the binding holds only its locator.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{ServiceAccount, ServiceAccountBinding, ServiceAccountCredentialKind};
use occ_core::{NamespaceId, ServiceAccountId};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

macro_rules! sa_cols {
    () => {
        "id, namespace_id, name, credential_kind, binding, created_at"
    };
}

fn credential_kind(value: &str) -> Option<ServiceAccountCredentialKind> {
    serde_json::from_value(serde_json::Value::String(value.to_owned())).ok()
}

fn credential_kind_str(kind: ServiceAccountCredentialKind) -> &'static str {
    match kind {
        ServiceAccountCredentialKind::ApiKey => "api_key",
        ServiceAccountCredentialKind::AccessToken => "access_token",
        ServiceAccountCredentialKind::OauthAccessToken => "oauth_access_token",
    }
}

fn binding_json(
    b: Option<&ServiceAccountBinding>,
) -> Result<Option<serde_json::Value>, StoreError> {
    b.map(|b| serde_json::to_value(b).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

fn from_row(r: &Row) -> Result<ServiceAccount, StoreError> {
    let credential_kind = match r.opt_text("credential_kind")? {
        None => None,
        Some(k) => Some(
            credential_kind(&k)
                .ok_or_else(|| StoreError::Corrupt(format!("credential_kind {k:?}")))?,
        ),
    };
    Ok(ServiceAccount {
        id: r.parse("id")?,
        namespace_id: r.parse("namespace_id")?,
        name: r.parse("name")?,
        credential_kind,
        binding: r.opt_json_as("binding")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// A ServiceAccount in exactly this Namespace.
    pub async fn service_account_get(
        &mut self,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<Option<ServiceAccount>, StoreError> {
        let row = self
            .q(sql!(concat!(
                "SELECT ",
                sa_cols!(),
                " FROM service_accounts WHERE namespace_id = $1 AND id = $2"
            )))
            .bind(ns.as_str())
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The ServiceAccounts of a Namespace, oldest first.
    pub async fn service_account_list(
        &mut self,
        ns: &NamespaceId,
    ) -> Result<Vec<ServiceAccount>, StoreError> {
        let rows = self
            .q(sql!(concat!(
                "SELECT ",
                sa_cols!(),
                " FROM service_accounts WHERE namespace_id = $1 ORDER BY created_at, id"
            )))
            .bind(ns.as_str())
            .fetch_all()
            .await?;
        rows.iter().map(from_row).collect()
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts a ServiceAccount; a taken name is a [`StoreError::Conflict`].
    pub async fn service_account_insert(&mut self, sa: &ServiceAccount) -> Result<(), StoreError> {
        self.require(
            &[Action::Create],
            &ResourceRef::collection(ResourceKind::ServiceAccount, &sa.namespace_id),
        )?;
        self.q(sql!(
            "INSERT INTO service_accounts (id, namespace_id, name, credential_kind, binding, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(sa.id.as_str())
        .bind(sa.namespace_id.as_str())
        .bind(sa.name.as_str())
        .bind(sa.credential_kind.map(credential_kind_str))
        .bind(binding_json(sa.binding.as_ref())?)
        .bind(sa.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Sets the credential a ServiceAccount carries (its kind and private binding).
    pub async fn service_account_set_credential(
        &mut self,
        sa: &ServiceAccount,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Update],
            &ResourceRef::exact(ResourceKind::ServiceAccount, &sa.namespace_id, &sa.id),
        )?;
        let n = self
            .q(sql!(
                "UPDATE service_accounts SET credential_kind = $3, binding = $4 WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(sa.namespace_id.as_str())
            .bind(sa.id.as_str())
            .bind(sa.credential_kind.map(credential_kind_str))
            .bind(binding_json(sa.binding.as_ref())?)
            .execute()
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Deletes a ServiceAccount; a reference from an Agent is a [`StoreError::Reference`].
    pub async fn service_account_delete(
        &mut self,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<(), StoreError> {
        self.require(
            &[Action::Delete],
            &ResourceRef::exact(ResourceKind::ServiceAccount, ns, id),
        )?;
        let n = self
            .q(sql!(
                "DELETE FROM service_accounts WHERE namespace_id = $1 AND id = $2"
            ))
            .bind(ns.as_str())
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
