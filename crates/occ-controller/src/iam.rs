//! Namespace IAM: Roles and AccessBindings under `/namespaces/{ns}/iam`. Every route needs
//! `installation:administer` and exact `namespace:read`. Roles and bindings are immutable; they
//! are replaced by creating new ones and deleting old ones.

use std::borrow::BorrowMut;

use occ_core::authz::{
    Action, AuthMethod, GrantScope, Permission, ResourceKind, ResourceRef, StandIns, covers,
};
use occ_core::iam::{AccessBinding, BoundResource, IdentityKind, Role};
use occ_core::validate::Problems;
use occ_core::{AgentId, ConfigurationId, DetailCode, Error, IamId, NamespaceId, Timestamp};
use occ_store::{Authorized, StoreError, Tx};

use crate::authorization::{found, installation_required};
use crate::namespaces::live_namespace;
use crate::{Controller, Request};

/// The validated body of Role creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleInput {
    /// Optional display name.
    pub name: Option<String>,
    /// 1..64 permissions.
    pub permissions: Vec<Permission>,
}

/// The validated body of AccessBinding creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingInput {
    /// The identity granted.
    pub subject_id: IamId,
    /// The Role granted.
    pub role_id: IamId,
    /// What the binding covers.
    pub target: BindingTarget,
    /// The runtime role the person holds in the exact Agent's native Control UI.
    pub runtime_role: Option<String>,
}

/// What an AccessBinding covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingTarget {
    /// One exact resource of the Namespace (the reference's only kind of Namespace binding).
    Resource {
        /// Its kind.
        kind: ResourceKind,
        /// Its id.
        id: String,
    },
    /// Every resource of the Namespace, present and future (occ extension). The caller's own
    /// grants must cover every permission of the Role there.
    Namespace,
}

const NAMESPACE_KINDS: [ResourceKind; 8] = [
    ResourceKind::Namespace,
    ResourceKind::Agent,
    ResourceKind::AgentRevision,
    ResourceKind::Configuration,
    ResourceKind::CredentialSource,
    ResourceKind::Preset,
    ResourceKind::Secret,
    ResourceKind::ServiceAccount,
];

impl Controller {
    /// A read of the Namespace's IAM: see [`Controller::iam_namespace`].
    pub(crate) async fn iam_read(
        &self,
        req: &Request,
        ns: &NamespaceId,
        audit_action: &str,
    ) -> Result<Tx, Error> {
        let (tx, _) = self.read_administering(req, audit_action).await?;
        self.iam_namespace(tx, req, ns, audit_action).await
    }

    /// A change of the Namespace's IAM, with the evidence of `installation:administer`: see
    /// [`Controller::iam_namespace`].
    async fn iam_write(
        &self,
        req: &Request,
        ns: &NamespaceId,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        let (tx, _) = self.write_administering(req, audit_action).await?;
        self.iam_namespace(tx, req, ns, audit_action).await
    }

    /// After `installation:administer`: exact `namespace:read`, then the live Namespace.
    async fn iam_namespace<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        ns: &NamespaceId,
        audit_action: &str,
    ) -> Result<T, Error> {
        let namespace = ResourceRef::namespace(ns);
        let mut tx = self
            .authorize_in(tx, req, Action::Read, &namespace, audit_action)
            .await?;
        live_namespace(tx.borrow_mut(), ns).await?;
        Ok(tx)
    }

    /// The Installation's own Roles (occ extension): what `POST /api/auth/accounts` may bind
    /// with `roleId`, the bootstrap administrator Role among them.
    pub async fn installation_role_list(&self, req: &Request) -> Result<Vec<Role>, Error> {
        let (mut tx, _) = self
            .read_administering(req, "openclaw.iam.installation_roles.list")
            .await?;
        Ok(tx.installation_role_list().await?)
    }

    /// Roles of a Namespace.
    pub async fn role_list(&self, req: &Request, ns: &NamespaceId) -> Result<Vec<Role>, Error> {
        let mut tx = self.iam_read(req, ns, "openclaw.iam.roles.list").await?;
        Ok(tx.role_list(ns).await?)
    }

    /// Creates a Namespace Role.
    pub async fn role_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: RoleInput,
    ) -> Result<Role, Error> {
        let mut problems = Problems::new();
        for (i, p) in input.permissions.iter().enumerate() {
            let path = format!("/permissions/{i}");
            if !NAMESPACE_KINDS.contains(&p.resource_kind) {
                problems.push(
                    format!("{path}/resourceKind"),
                    DetailCode::InvalidValue,
                    "must be a Namespace resource kind",
                );
            } else if p.action == Action::Create {
                problems.push(
                    format!("{path}/action"),
                    DetailCode::InvalidValue,
                    "cannot be create in a Namespace Role",
                );
            } else if !p.is_supported()
                || (p.resource_kind == ResourceKind::Namespace && p.action != Action::Read)
            {
                problems.push(
                    format!("{path}/action"),
                    DetailCode::InvalidValue,
                    "is not supported for this resource kind",
                );
            } else if input.permissions[..i].contains(p) {
                problems.push(
                    path,
                    DetailCode::InvalidValue,
                    "duplicates an earlier permission",
                );
            }
        }
        problems.finish(())?;
        let mut tx = self.iam_write(req, ns, "openclaw.iam.roles.create").await?;
        let role = Role {
            id: IamId::generate_role(false),
            namespace_id: Some(ns.clone()),
            name: input.name,
            permissions: input.permissions,
            created_at: Timestamp::now(),
        };
        tx.role_insert(&role).await?;
        let event = self
            .mutation(
                req,
                "openclaw.iam.roles.create",
                &ResourceRef::namespace(ns),
                tx.evidence(),
            )
            .detail("roleId", role.id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(role)
    }

    /// One Namespace Role.
    pub async fn role_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &IamId,
    ) -> Result<Role, Error> {
        let mut tx = self.iam_read(req, ns, "openclaw.iam.roles.read").await?;
        found(
            tx.role_get(id)
                .await?
                .filter(|r| r.namespace_id.as_ref() == Some(ns)),
        )
    }

    /// Deletes a Namespace Role no binding uses.
    pub async fn role_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &IamId,
    ) -> Result<(), Error> {
        let mut tx = self.iam_write(req, ns, "openclaw.iam.roles.delete").await?;
        found(
            tx.role_get(id)
                .await?
                .filter(|r| r.namespace_id.as_ref() == Some(ns)),
        )?;
        tx.role_delete(id).await.map_err(|e| match e {
            StoreError::Reference { .. } => Error::conflict("AccessBindings still grant this Role"),
            other => other.into(),
        })?;
        let event = self
            .mutation(
                req,
                "openclaw.iam.roles.delete",
                &ResourceRef::namespace(ns),
                tx.evidence(),
            )
            .detail("roleId", id.as_str());
        tx.audit_append(&event).await?;
        Ok(tx.commit().await?)
    }

    /// AccessBindings scoped to a Namespace.
    pub async fn binding_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<AccessBinding>, Error> {
        let mut tx = self
            .iam_read(req, ns, "openclaw.iam.access_bindings.list")
            .await?;
        let all = tx.binding_list(ns).await?;
        Ok(all
            .into_iter()
            .filter(|b| b.namespace_id.as_ref() == Some(ns))
            .collect())
    }

    /// Creates an AccessBinding for an identity: on one exact resource, or on the whole
    /// Namespace when the caller's own grants cover the Role there.
    pub async fn binding_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: BindingInput,
    ) -> Result<AccessBinding, Error> {
        const ACTION: &str = "openclaw.iam.access_bindings.create";
        if let BindingTarget::Resource { kind, .. } = &input.target
            && !NAMESPACE_KINDS.contains(kind)
        {
            return Err(Error::invalid_field(
                "/resourceKind",
                DetailCode::InvalidValue,
                "The request is invalid: /resourceKind must be a Namespace resource kind",
            ));
        }
        let tx = self.iam_write(req, ns, ACTION).await?;
        let mut tx = match &input.target {
            BindingTarget::Resource { kind, id } => {
                let target = ResourceRef::exact(*kind, ns, id);
                self.authorize_in(tx, req, Action::Read, &target, ACTION)
                    .await?
            }
            BindingTarget::Namespace => tx,
        };
        let invalid = |path: &str, why: &str| {
            Error::invalid_field(
                path,
                DetailCode::InvalidValue,
                format!("The request is invalid: {path} {why}"),
            )
        };
        let role = tx.role_get(&input.role_id).await?;
        let role = match role {
            Some(r) if r.namespace_id.is_none() || r.namespace_id.as_ref() == Some(ns) => r,
            _ => return Err(invalid("/roleId", "does not name a Role of this Namespace")),
        };
        if let BindingTarget::Resource { kind, .. } = &input.target {
            if role.permissions.iter().any(|p| p.action == Action::Create) {
                return Err(invalid(
                    "/roleId",
                    "grants create, which exact-resource bindings cannot carry",
                ));
            }
            if !role.permissions.iter().any(|p| p.resource_kind == *kind) {
                return Err(invalid(
                    "/roleId",
                    "grants nothing on the target's resource kind",
                ));
            }
        }
        let subject = tx.identity_get(&input.subject_id).await?;
        let subject_ok = subject.as_ref().is_some_and(|i| match i.kind {
            IdentityKind::Principal => true,
            IdentityKind::ServicePrincipal => {
                i.namespace_id.is_none() || i.namespace_id.as_ref() == Some(ns)
            }
        });
        if !subject_ok {
            return Err(invalid("/subjectId", "does not name a usable identity"));
        }
        let resource = match input.target {
            BindingTarget::Resource { kind, id } => {
                if kind == ResourceKind::Namespace && id != ns.as_str() {
                    return Err(invalid("/resourceId", "must be this Namespace"));
                }
                if !tx.resource_exists(kind, ns, &id).await? {
                    return Err(invalid(
                        "/resourceId",
                        "does not name a live resource of this Namespace",
                    ));
                }
                Some(BoundResource { kind, id })
            }
            BindingTarget::Namespace => {
                tx = self
                    .require_namespace_coverage(tx, req, ns, &role, ACTION)
                    .await?;
                None
            }
        };
        let binding = AccessBinding {
            id: IamId::generate_binding(""),
            namespace_id: Some(ns.clone()),
            subject_id: input.subject_id,
            role_id: role.id.clone(),
            resource,
            runtime_role: input.runtime_role,
            created_at: Timestamp::now(),
        };
        if binding.runtime_role.is_some() {
            let refusal =
                runtime_assignment_refusal(&mut tx, &binding, subject.map(|i| i.kind), &role)
                    .await?;
            match refusal {
                None => {}
                Some(Ineligible::Binding(why)) => return Err(invalid("/runtimeRole", why)),
                Some(Ineligible::Role(why)) => return Err(invalid("/runtimeRole", &why)),
                Some(Ineligible::Taken) => {
                    return Err(Error::conflict(
                        "This person already holds a runtime role on this Agent; change it with \
                         PATCH …/iam/access-bindings/{bindingId}/runtime-role",
                    ));
                }
            }
        }
        tx.binding_insert(&binding).await?;
        let event = self
            .mutation(req, ACTION, &ResourceRef::namespace(ns), tx.evidence())
            .detail("bindingId", binding.id.as_str())
            .detail("subjectId", binding.subject_id.as_str());
        let event = match &binding.runtime_role {
            Some(role) => event.detail("runtimeRole", role.as_str()),
            None => event,
        };
        let event = match &binding.resource {
            Some(_) => event,
            None => event.detail("scope", "namespace"),
        };
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(binding)
    }

    /// A Namespace-wide binding hands out every permission of its Role on the whole
    /// Namespace: the caller's own grants must already allow each there (the coverage rule;
    /// `agent:administer` stands in for log reads, and for a person also for `use`).
    async fn require_namespace_coverage(
        &self,
        mut tx: Authorized,
        req: &Request,
        ns: &NamespaceId,
        role: &Role,
        operation: &str,
    ) -> Result<Authorized, Error> {
        let mine = tx.policy_snapshot(&req.caller.principal_id).await?;
        let stand_ins = match req.caller.method {
            AuthMethod::Session => StandIns::LogReadsAndUse,
            AuthMethod::ApiKey | AuthMethod::Work => StandIns::LogReads,
        };
        let uncovered = role.permissions.iter().find(|p| {
            !covers(
                mine.grants.iter().map(|g| (&g.binding, &g.role)),
                **p,
                GrantScope::Namespace(ns),
                stand_ins,
            )
        });
        let Some(uncovered) = uncovered else {
            return Ok(tx);
        };
        drop(tx);
        Err(self
            .coverage_denial(
                req,
                operation,
                &ResourceRef::namespace(ns),
                ("roleId", role.id.as_str()),
                &format!(
                    "The caller's own grants do not cover {}:{} on this Namespace, which the Role grants",
                    uncovered.resource_kind, uncovered.action
                ),
            )
            .await)
    }

    /// Assigns the runtime role a person holds in an Agent's native Control UI
    /// (`PATCH …/iam/access-bindings/{id}/runtime-role`): only on a person's exact Agent binding
    /// whose Role grants `use`; the one change a binding takes in place.
    pub async fn binding_set_runtime_role(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &IamId,
        runtime_role: String,
    ) -> Result<AccessBinding, Error> {
        const ACTION: &str = "openclaw.iam.access_bindings.runtime_role.update";
        let mut tx = self.iam_write(req, ns, ACTION).await?;
        let mut binding = found(
            tx.binding_get(id)
                .await?
                .filter(|b| b.namespace_id.as_ref() == Some(ns)),
        )?;
        let Some(target) = binding.resource.clone() else {
            return Err(Error::conflict(
                "Only a person's binding on one exact Agent holds a runtime role",
            ));
        };
        let mut tx = self
            .authorize_in(
                tx,
                req,
                Action::Read,
                &ResourceRef::exact(target.kind, ns, &target.id),
                ACTION,
            )
            .await?;
        let role = found(tx.role_get(&binding.role_id).await?)?;
        let subject = tx.identity_get(&binding.subject_id).await?;
        let previous = binding.runtime_role.replace(runtime_role.clone());
        let refusal =
            runtime_assignment_refusal(&mut tx, &binding, subject.map(|i| i.kind), &role).await?;
        match refusal {
            None => {}
            Some(Ineligible::Binding(why)) => {
                return Err(Error::conflict(format!("This binding {why}")));
            }
            Some(Ineligible::Role(why)) => {
                return Err(Error::invalid_field(
                    "/runtimeRole",
                    DetailCode::InvalidValue,
                    format!("The request is invalid: /runtimeRole {why}"),
                ));
            }
            Some(Ineligible::Taken) => {
                return Err(Error::conflict(
                    "This person already holds a runtime role on this Agent through another binding; \
                     change that binding's runtime role, or delete it first",
                ));
            }
        }
        tx.binding_set_runtime_role(id, &runtime_role).await?;
        let event = self
            .mutation(req, ACTION, &ResourceRef::namespace(ns), tx.evidence())
            .detail("bindingId", id.as_str())
            .detail("subjectId", binding.subject_id.as_str())
            .detail("agentId", target.id.as_str())
            .detail("runtimeRole", runtime_role.as_str())
            .detail("previousRuntimeRole", previous);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(binding)
    }

    /// One AccessBinding of the Namespace.
    pub async fn binding_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &IamId,
    ) -> Result<AccessBinding, Error> {
        let mut tx = self
            .iam_read(req, ns, "openclaw.iam.access_bindings.read")
            .await?;
        found(
            tx.binding_get(id)
                .await?
                .filter(|b| b.namespace_id.as_ref() == Some(ns)),
        )
    }

    /// Deletes an AccessBinding of the Namespace.
    pub async fn binding_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &IamId,
    ) -> Result<(), Error> {
        let mut tx = self
            .iam_write(req, ns, "openclaw.iam.access_bindings.delete")
            .await?;
        found(
            tx.binding_get(id)
                .await?
                .filter(|b| b.namespace_id.as_ref() == Some(ns)),
        )?;
        tx.binding_delete(id).await?;
        let event = self
            .mutation(
                req,
                "openclaw.iam.access_bindings.delete",
                &ResourceRef::namespace(ns),
                tx.evidence(),
            )
            .detail("bindingId", id.as_str());
        tx.audit_append(&event).await?;
        Ok(tx.commit().await?)
    }

    /// The Installation (needs `installation:read`).
    pub async fn installation_get(
        &self,
        req: &Request,
    ) -> Result<occ_core::resource::Installation, Error> {
        let (_, installation) = self
            .read_authorized_on_installation(
                req,
                Action::Read,
                ResourceRef::installation,
                "openclaw.installation.read",
            )
            .await?;
        Ok(installation)
    }
}

/// What the caller may do in one Namespace: the answer to a question, decided exactly as the
/// operations themselves decide, without audit records (see [`Controller::namespace_permissions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacePermissions {
    /// Actions on the Installation (`read`, `administer`).
    pub installation: Vec<Action>,
    /// Actions on the Namespace itself (`read`, `delete`).
    pub namespace: Vec<Action>,
    /// Actions on the Installation's collection of Namespaces (`create`; `read`/`delete` when
    /// granted Installation-wide).
    pub namespace_collection: Vec<Action>,
    /// Per kind, the actions granted on the Namespace's whole collection (`create`, and anything
    /// granted Namespace- or Installation-wide).
    pub collections: Vec<(ResourceKind, Vec<Action>)>,
    /// Per Agent the caller may read: its exact actions.
    pub agents: Vec<(AgentId, Vec<Action>)>,
    /// Per Configuration those Agents use: the caller's exact actions on it.
    pub configurations: Vec<(ConfigurationId, Vec<Action>)>,
}

/// The kinds whose collections [`NamespacePermissions`] reports.
const REPORTED_COLLECTIONS: [ResourceKind; 6] = [
    ResourceKind::Agent,
    ResourceKind::AgentRevision,
    ResourceKind::Configuration,
    ResourceKind::Secret,
    ResourceKind::ServiceAccount,
    ResourceKind::CredentialSource,
];

impl Controller {
    /// What the caller may do in a Namespace, so a client can offer only what would be allowed.
    /// Needs exact `namespace:read` (refused and audited like any read); everything else is
    /// evaluated silently on the same policy snapshot with the same decision function as the
    /// operations, so the answer cannot drift from what they enforce.
    pub async fn namespace_permissions(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<NamespacePermissions, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.iam.permissions.read",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        // Read after the decision: an authenticated caller implies a bootstrapped Installation.
        let installation = installation_required(&mut tx).await?;
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        let caller = &req.caller;
        let actions = |resource: &ResourceRef, exact: bool| {
            Self::allowed_actions(&snapshot, caller, resource, exact)
        };
        let agents: Vec<_> = tx
            .agent_list(ns)
            .await?
            .into_iter()
            .filter_map(|a| {
                let allowed = actions(&ResourceRef::exact(ResourceKind::Agent, ns, &a.id), true);
                allowed
                    .contains(&Action::Read)
                    .then_some((a.id, a.configuration_id, allowed))
            })
            .collect();
        let mut configuration_ids: Vec<&ConfigurationId> =
            agents.iter().map(|(_, cfg, _)| cfg).collect();
        configuration_ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        configuration_ids.dedup();
        let configurations = configuration_ids
            .into_iter()
            .map(|cfg| {
                let exact = ResourceRef::exact(ResourceKind::Configuration, ns, cfg);
                (cfg.clone(), actions(&exact, true))
            })
            .collect();
        Ok(NamespacePermissions {
            installation: actions(&ResourceRef::installation(&installation.id), true),
            namespace: actions(&ResourceRef::namespace(ns), true),
            namespace_collection: actions(
                &ResourceRef::namespace_collection(&installation.id),
                false,
            ),
            collections: REPORTED_COLLECTIONS
                .iter()
                .map(|kind| (*kind, actions(&ResourceRef::collection(*kind, ns), false)))
                .collect(),
            agents: agents
                .into_iter()
                .map(|(id, _, allowed)| (id, allowed))
                .collect(),
            configurations,
        })
    }
}

/// Why a binding cannot carry the runtime role it asks for.
enum Ineligible {
    /// The binding itself (its kind, subject or Role).
    Binding(&'static str),
    /// The role asked for.
    Role(String),
    /// Another binding already holds the person's role on that Agent.
    Taken,
}

/// Why `candidate` (a binding with its `runtime_role` set) may not carry that role, if it may
/// not: it must be a person's (`subject`) exact Agent binding whose `role` grants `use`, for a
/// role the runtime enforces, and no other binding may hold the person's role on that Agent.
async fn runtime_assignment_refusal(
    tx: &mut Tx,
    candidate: &AccessBinding,
    subject: Option<IdentityKind>,
    role: &Role,
) -> Result<Option<Ineligible>, StoreError> {
    let (Some(ns), Some(target)) = (&candidate.namespace_id, &candidate.resource) else {
        return Ok(Some(Ineligible::Binding(
            "is not on an exact Agent; only Agent bindings hold a runtime role",
        )));
    };
    if target.kind != ResourceKind::Agent {
        return Ok(Some(Ineligible::Binding(
            "is not on an exact Agent; only Agent bindings hold a runtime role",
        )));
    }
    if subject != Some(IdentityKind::Principal) {
        return Ok(Some(Ineligible::Binding(
            "is not a person's; only people hold a runtime role",
        )));
    }
    if !role
        .permissions
        .iter()
        .any(|p| p.resource_kind == ResourceKind::Agent && p.action == Action::Use)
    {
        return Ok(Some(Ineligible::Binding(
            "grants a Role without use on agents; a runtime role needs Agent use",
        )));
    }
    let asked = candidate.runtime_role.as_deref().unwrap_or_default();
    if !crate::native_admin::offered_runtime_role(asked) {
        return Ok(Some(Ineligible::Role(format!(
            "is not a runtime role the Agent's runtime enforces (only {})",
            occ_core::native::control_ui::RUNTIME_ROLE
        ))));
    }
    let held = tx
        .runtime_assignment(ns, &candidate.subject_id, &target.id)
        .await?;
    Ok(held
        .is_some_and(|other| other.id != candidate.id)
        .then_some(Ineligible::Taken))
}
