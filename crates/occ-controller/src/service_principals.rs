//! Non-Agent service principals for automation (an occ extension under
//! `/api/auth/service-principals`): create one (Installation-wide or limited to one Namespace),
//! bind Roles to it through the Namespace IAM API, issue it keys through
//! `POST /api/auth/service-keys`, disable it (its keys stop working on their next request) and
//! delete it with its keys and bindings. Every route needs `installation:administer`; changing
//! an existing principal also needs the caller to hold every grant it has (the coverage rule
//! of key issuance), so nobody disables or deletes a principal more powerful than themselves.

use occ_core::authz::ResourceRef;
use occ_core::iam::ServicePrincipal;
use occ_core::{DetailCode, Error, IamId, NamespaceId, Timestamp};
use occ_store::StoreError;

use crate::authorization::found;
use crate::{Controller, Request};

/// The validated body of service principal creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePrincipalInput {
    /// 1..64 characters, unique in the Installation.
    pub name: String,
    /// `Some`: the principal (and every key issued to it) acts only inside this Namespace.
    pub namespace_id: Option<NamespaceId>,
}

const CREATE: &str = "openclaw.auth.service-principals.create";
const LIST: &str = "openclaw.auth.service-principals.list";
const READ: &str = "openclaw.auth.service-principals.read";
const DISABLE: &str = "openclaw.auth.service-principals.disable";
const ENABLE: &str = "openclaw.auth.service-principals.enable";
const DELETE: &str = "openclaw.auth.service-principals.delete";

impl Controller {
    /// Creates a non-Agent service principal.
    pub async fn service_principal_create(
        &self,
        req: &Request,
        input: ServicePrincipalInput,
    ) -> Result<ServicePrincipal, Error> {
        let (mut tx, installation) = self.write_administering(req, CREATE).await?;
        if let Some(ns) = &input.namespace_id
            && tx
                .namespace_get(ns)
                .await?
                .is_none_or(|n| n.deleted_at.is_some())
        {
            return Err(Error::invalid_field(
                "/namespaceId",
                DetailCode::InvalidValue,
                "The request is invalid: /namespaceId does not name a live Namespace",
            ));
        }
        let principal = ServicePrincipal {
            id: IamId::generate_service_principal(),
            namespace_id: input.namespace_id,
            name: Some(input.name),
            disabled_at: None,
            created_at: Timestamp::now(),
        };
        tx.service_principal_insert(&principal)
            .await
            .map_err(|e| match e {
                StoreError::Conflict { .. } => {
                    Error::conflict("A service principal with this name already exists")
                }
                other => other.into(),
            })?;
        let event = self
            .mutation(
                req,
                CREATE,
                &ResourceRef::installation(&installation.id),
                tx.evidence(),
            )
            .detail("servicePrincipalId", principal.id.as_str())
            .detail("name", principal.name.as_deref())
            .detail(
                "namespaceId",
                principal.namespace_id.as_ref().map(|n| n.to_string()),
            );
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(principal)
    }

    /// Non-Agent service principals: all, or those limited to one Namespace.
    pub async fn service_principal_list(
        &self,
        req: &Request,
        ns: Option<&NamespaceId>,
    ) -> Result<Vec<ServicePrincipal>, Error> {
        let (mut tx, _) = self.read_administering(req, LIST).await?;
        Ok(tx.service_principal_list(ns).await?)
    }

    /// One non-Agent service principal.
    pub async fn service_principal_get(
        &self,
        req: &Request,
        id: &IamId,
    ) -> Result<ServicePrincipal, Error> {
        let (mut tx, _) = self.read_administering(req, READ).await?;
        found(tx.service_principal_get(id).await?)
    }

    /// Disables (`true`) or enables (`false`) a non-Agent service principal. A disabled
    /// principal's keys are refused from their next request on, in every API process, and
    /// work it queued is no longer authorized; enabling it restores both. Setting the state it
    /// already has changes nothing and records nothing.
    pub async fn service_principal_set_disabled(
        &self,
        req: &Request,
        id: &IamId,
        disabled: bool,
    ) -> Result<ServicePrincipal, Error> {
        let operation = if disabled { DISABLE } else { ENABLE };
        let (mut tx, installation) = self.write_administering(req, operation).await?;
        let mut principal = found(tx.service_principal_get(id).await?)?;
        if principal.disabled_at.is_some() == disabled {
            return Ok(principal);
        }
        if disabled && *id == req.caller.principal_id {
            return Err(Error::conflict(
                "A service principal cannot disable itself; use another administrator's key or session",
            ));
        }
        let target = ResourceRef::installation(&installation.id);
        let mut tx = self
            .require_coverage(tx, req, id, &target, operation)
            .await?;
        principal.disabled_at = disabled.then(Timestamp::now);
        tx.service_principal_set_disabled(&principal, principal.disabled_at)
            .await?;
        let event = self
            .mutation(req, operation, &target, tx.evidence())
            .detail("servicePrincipalId", id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(principal)
    }

    /// Deletes a non-Agent service principal with its keys and its bindings.
    pub async fn service_principal_delete(&self, req: &Request, id: &IamId) -> Result<(), Error> {
        let (mut tx, installation) = self.write_administering(req, DELETE).await?;
        found(tx.service_principal_get(id).await?)?;
        if *id == req.caller.principal_id {
            return Err(Error::conflict(
                "A service principal cannot delete itself; use another administrator's key or session",
            ));
        }
        let target = ResourceRef::installation(&installation.id);
        let mut tx = self.require_coverage(tx, req, id, &target, DELETE).await?;
        tx.service_principal_delete(id).await?;
        let event = self
            .mutation(req, DELETE, &target, tx.evidence())
            .detail("servicePrincipalId", id.as_str());
        tx.audit_append(&event).await?;
        Ok(tx.commit().await?)
    }
}
