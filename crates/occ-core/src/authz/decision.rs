//! The native IAM decision (spec/api.md §5.3), evaluated on a fresh policy snapshot.

use serde::Serialize;

use super::{Action, ResourceRef};
use crate::iam::{AccessBinding, Identity, Restriction, Role};
use crate::id::{AdmissionDecisionId, IamId, NamespaceId};

/// How a caller authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A sign-in session cookie (a human).
    Session,
    /// A service key (a non-Agent service principal).
    ApiKey,
    /// The worker, re-checking the original requester of queued work before each effect.
    Work,
}

/// An authenticated caller of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The IAM identity acting.
    pub principal_id: IamId,
    /// How it authenticated.
    pub method: AuthMethod,
    /// For Namespace-scoped service keys: the only Namespace the key works in.
    pub key_namespace: Option<NamespaceId>,
    /// The session id (session callers).
    pub session_id: Option<String>,
    /// The service key id (key callers).
    pub key_id: Option<IamId>,
    /// This request's admission decision id, recorded in audit evidence.
    pub admission_id: AdmissionDecisionId,
}

/// The policy records a decision looked at (sorted, unique): the identity evaluated, the
/// bindings (and their Roles) that grant the action, and the Restrictions that deny it.
/// Audit records carry them as `iamEvidence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecords {
    #[serde(skip_serializing_if = "Option::is_none")]
    identity_id: Option<String>,
    binding_ids: Vec<String>,
    role_ids: Vec<String>,
    restriction_ids: Vec<String>,
}

impl PolicyRecords {
    fn of(identity_id: Option<String>) -> Self {
        Self {
            identity_id,
            binding_ids: Vec::new(),
            role_ids: Vec::new(),
            restriction_ids: Vec::new(),
        }
    }
}

/// Proof that an action was allowed on a resource: only [`decide`] makes one (when it
/// allows), apart from [`Evidence::bootstrap`]. It has no public fields, no `Default` and no
/// `Clone`, and it names the action and the exact resource it allowed ([`Evidence::allows`]),
/// so holding one means a decision allowed *this* operation; the store's admission mutators
/// require it (`occ_store::Authorized`) and check it is the decision *they* need. A read
/// decision hands out [`ReadEvidence`] instead, which no mutator accepts. Serialized as the
/// decision's [`PolicyRecords`] (what audit records carry as `iamEvidence`).
///
/// ```compile_fail,E0451
/// # fn forge(records: occ_core::authz::PolicyRecords) {
/// let _ = occ_core::authz::Evidence { records, grant: todo!() };
/// # }
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Evidence {
    records: PolicyRecords,
    grant: Grant,
}

/// What an [`Evidence`] proves.
#[derive(Debug, PartialEq, Eq)]
enum Grant {
    /// A decision allowed `action` on exactly `resource`.
    Decided {
        action: Action,
        resource: ResourceRef,
    },
    /// First-run bootstrap: the operator running `occ bootstrap` is the authority.
    Bootstrap,
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.records.serialize(serializer)
    }
}

impl Evidence {
    /// The authority of first-run bootstrap, which creates the Installation and its first
    /// identities and policy: no identity exists yet to decide about, so the operator running
    /// `occ bootstrap` is the authority. It names no policy records and allows what bootstrap
    /// writes. Only bootstrap (and tests setting up state) may use it (`clippy.toml`
    /// disallows it elsewhere).
    pub fn bootstrap() -> Self {
        Evidence {
            records: PolicyRecords::of(None),
            grant: Grant::Bootstrap,
        }
    }

    /// Whether this is the proof of a decision that allowed `action` on exactly `resource`
    /// (bootstrap's authority allows what it writes).
    pub fn allows(&self, action: Action, resource: &ResourceRef) -> bool {
        match &self.grant {
            Grant::Decided {
                action: allowed,
                resource: target,
            } => *allowed == action && target == resource,
            Grant::Bootstrap => true,
        }
    }

    /// The action it allowed (`None`: bootstrap's authority).
    pub fn action(&self) -> Option<Action> {
        match &self.grant {
            Grant::Decided { action, .. } => Some(*action),
            Grant::Bootstrap => None,
        }
    }

    /// The exact resource it allowed the action on (`None`: bootstrap's authority).
    pub fn resource(&self) -> Option<&ResourceRef> {
        match &self.grant {
            Grant::Decided { resource, .. } => Some(resource),
            Grant::Bootstrap => None,
        }
    }

    /// The same decision as the proof of a read: what a read-only operation holds. There is
    /// no way back, so a read decision never reaches a mutator.
    pub fn into_read(self) -> ReadEvidence {
        ReadEvidence(self)
    }
}

/// Proof that a *read* was allowed: what a read-only operation holds (its audit evidence,
/// e.g. of a workspace file write that goes through the gateway, not the store). Unlike
/// [`Evidence`] it cannot make a transaction `occ_store::Authorized` (a compile-fail test
/// there shows it).
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ReadEvidence(Evidence);

impl ReadEvidence {
    /// Whether the read decision allowed `action` on exactly `resource`.
    pub fn allows(&self, action: Action, resource: &ResourceRef) -> bool {
        self.0.allows(action, resource)
    }
}

/// An authorization decision.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with the proof.
    Allowed(Evidence),
    /// Refused.
    Denied {
        /// Why, in fixed words (recorded in denial evidence).
        reason: &'static str,
        /// What the decision looked at (recorded in denial evidence).
        records: PolicyRecords,
    },
}

impl Decision {
    fn deny(reason: &'static str, records: PolicyRecords) -> Self {
        Decision::Denied { reason, records }
    }

    /// Whether the action is allowed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// The denial reason when no binding grants the action.
const NOT_GRANTED: &str = "no explicit scoped binding";
/// The denial reason when a Restriction denies the action.
const RESTRICTED: &str = "denied by a restriction";

/// Decides whether `identity` may perform `action` on `resource`, given its bindings (with
/// their Roles) and all Restrictions. No action implies another; Restrictions always win.
pub fn decide<'g>(
    identity: Option<&Identity>,
    key_namespace: Option<&NamespaceId>,
    grants: impl IntoIterator<Item = (&'g AccessBinding, &'g Role)>,
    restrictions: &[Restriction],
    action: Action,
    resource: &ResourceRef,
) -> Decision {
    let Some(identity) = identity else {
        return Decision::deny("unknown identity", PolicyRecords::of(None));
    };
    let mut records = PolicyRecords::of(Some(identity.id.to_string()));
    if resource.kind.is_namespaced() && resource.namespace_id.is_none() {
        return Decision::deny("invalid resource reference", records);
    }
    let scope = key_namespace.or(identity.namespace_id.as_ref());
    if let Some(scope) = scope
        && resource.namespace_id.as_ref() != Some(scope)
    {
        return Decision::deny("outside the caller's Namespace scope", records);
    }
    let ns = resource.namespace_id.as_ref();
    for (binding, role) in grants {
        let subject = binding.subject_id == identity.id;
        let binding_scope = binding.namespace_id.is_none() || binding.namespace_id.as_ref() == ns;
        let target = match &binding.resource {
            None => true,
            Some(r) => r.kind == resource.kind && r.id == resource.id,
        };
        let role_scope = role.namespace_id.is_none() || role.namespace_id.as_ref() == ns;
        let grants_it = role.id == binding.role_id
            && role
                .permissions
                .iter()
                .any(|p| p.action == action && p.resource_kind == resource.kind);
        if subject && binding_scope && target && role_scope && grants_it {
            records.binding_ids.push(binding.id.to_string());
            records.role_ids.push(role.id.to_string());
        }
    }
    records.binding_ids.sort();
    records.binding_ids.dedup();
    records.role_ids.sort();
    records.role_ids.dedup();
    if records.binding_ids.is_empty() {
        return Decision::deny(NOT_GRANTED, records);
    }
    records.restriction_ids = restricting(restrictions, action, resource);
    if !records.restriction_ids.is_empty() {
        return Decision::deny(RESTRICTED, records);
    }
    Decision::Allowed(Evidence {
        records,
        grant: Grant::Decided {
            action,
            resource: resource.clone(),
        },
    })
}

/// [`decide`] for `action`, where each of `stand_ins` allows in its place when `action`
/// itself is not granted (`administer` standing in for `read_logs`). A Restriction on
/// `action` denies its stand-ins too; a denial is `action`'s own.
#[expect(
    clippy::disallowed_methods,
    reason = "the same decision, reached only through the choke point"
)]
pub fn decide_standing_in<'g>(
    identity: Option<&Identity>,
    key_namespace: Option<&NamespaceId>,
    grants: impl IntoIterator<Item = (&'g AccessBinding, &'g Role)> + Clone,
    restrictions: &[Restriction],
    action: Action,
    stand_ins: &[Action],
    resource: &ResourceRef,
) -> Decision {
    let own = decide(
        identity,
        key_namespace,
        grants.clone(),
        restrictions,
        action,
        resource,
    );
    let Decision::Denied { reason, records } = own else {
        return own;
    };
    // Not granted: a stand-in may allow, unless a Restriction denies the action itself.
    if reason == NOT_GRANTED {
        let restriction_ids = restricting(restrictions, action, resource);
        if !restriction_ids.is_empty() {
            return Decision::deny(
                RESTRICTED,
                PolicyRecords {
                    restriction_ids,
                    ..records
                },
            );
        }
        for stand_in in stand_ins {
            let decision = decide(
                identity,
                key_namespace,
                grants.clone(),
                restrictions,
                *stand_in,
                resource,
            );
            if decision.is_allowed() {
                return decision;
            }
        }
    }
    Decision::Denied { reason, records }
}

/// The ids (sorted) of the Restrictions that deny `action` on `resource`, whoever asks.
fn restricting(
    restrictions: &[Restriction],
    action: Action,
    resource: &ResourceRef,
) -> Vec<String> {
    let ns = resource.namespace_id.as_ref();
    let mut ids: Vec<String> = restrictions
        .iter()
        .filter(|r| {
            let scope_ok = r.namespace_id.is_none() || r.namespace_id.as_ref() == ns;
            let target_ok = r.resource_id.as_deref().is_none_or(|id| id == resource.id);
            scope_ok && target_ok && r.action == action && r.resource_kind == resource.kind
        })
        .map(|r| r.id.to_string())
        .collect();
    ids.sort();
    ids
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the decision function's own tests"
)]
mod tests {
    use super::*;
    use crate::authz::{Permission, ResourceKind, administrator_permissions};
    use crate::iam::{BoundResource, IdentityKind};
    use crate::time::Timestamp;

    fn pairs(
        grants: &[(AccessBinding, Role)],
    ) -> impl Iterator<Item = (&AccessBinding, &Role)> + Clone {
        grants.iter().map(|(b, r)| (b, r))
    }
    use crate::{AgentId, InstallationId};

    fn identity(ns: Option<NamespaceId>) -> Identity {
        Identity {
            id: IamId::generate_service_principal(),
            kind: IdentityKind::ServicePrincipal,
            namespace_id: ns,
            agent_id: None,
            issuer: None,
            subject: None,
            created_at: Timestamp::now(),
        }
    }

    fn role(ns: Option<NamespaceId>, perms: Vec<Permission>) -> Role {
        Role {
            id: IamId::generate_role(false),
            namespace_id: ns,
            name: None,
            permissions: perms,
            created_at: Timestamp::now(),
        }
    }

    fn binding(
        subject: &Identity,
        role: &Role,
        ns: Option<NamespaceId>,
        resource: Option<BoundResource>,
    ) -> AccessBinding {
        AccessBinding {
            id: IamId::generate_binding(""),
            namespace_id: ns,
            subject_id: subject.id.clone(),
            role_id: role.id.clone(),
            resource,
            runtime_role: None,
            created_at: Timestamp::now(),
        }
    }

    #[test]
    fn installation_admin_is_allowed_everywhere_but_restrictions_win() {
        let who = identity(None);
        let admin = role(None, administrator_permissions());
        let grants = vec![(binding(&who, &admin, None, None), admin.clone())];
        let ns = NamespaceId::generate();
        let agent = ResourceRef::exact(ResourceKind::Agent, &ns, AgentId::generate());
        assert!(
            decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Deploy,
                &agent
            )
            .is_allowed()
        );
        assert!(
            !decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::ReadLogs,
                &agent
            )
            .is_allowed(),
            "admin lacks read_logs"
        );
        let inst = ResourceRef::installation(&InstallationId::generate());
        assert!(
            decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Administer,
                &inst
            )
            .is_allowed()
        );
        let deny = Restriction {
            id: IamId::generate_restriction(),
            namespace_id: Some(ns.clone()),
            action: Action::Deploy,
            resource_kind: ResourceKind::Agent,
            resource_id: None,
            created_at: Timestamp::now(),
        };
        let d = decide(
            Some(&who),
            None,
            pairs(&grants),
            &[deny],
            Action::Deploy,
            &agent,
        );
        let Decision::Denied { reason, records } = d else {
            panic!("a restriction must deny");
        };
        assert_eq!(reason, "denied by a restriction");
        assert_eq!(records.restriction_ids.len(), 1);
    }

    #[test]
    fn a_stand_in_allows_unless_a_restriction_denies_the_action_itself() {
        let who = identity(None);
        let admin = role(None, administrator_permissions());
        let grants = vec![(binding(&who, &admin, None, None), admin.clone())];
        let ns = NamespaceId::generate();
        let agent = ResourceRef::exact(ResourceKind::Agent, &ns, AgentId::generate());
        let restriction = |action| Restriction {
            id: IamId::generate_restriction(),
            namespace_id: Some(ns.clone()),
            action,
            resource_kind: ResourceKind::Agent,
            resource_id: None,
            created_at: Timestamp::now(),
        };
        let read_logs = |restrictions: &[Restriction]| {
            decide_standing_in(
                Some(&who),
                None,
                pairs(&grants),
                restrictions,
                Action::ReadLogs,
                &[Action::Administer],
                &agent,
            )
        };
        assert!(read_logs(&[]).is_allowed(), "administer stands in");
        let Decision::Denied { reason, records } = read_logs(&[restriction(Action::ReadLogs)])
        else {
            panic!("a restriction on read_logs denies its stand-in too");
        };
        assert_eq!(reason, "denied by a restriction");
        assert_eq!(records.restriction_ids.len(), 1);
        assert!(
            !read_logs(&[restriction(Action::Administer)]).is_allowed(),
            "a restricted stand-in does not allow"
        );
        // A caller granted read_logs itself keeps it when only administer is restricted.
        let reader = role(
            None,
            vec![Permission::new(Action::ReadLogs, ResourceKind::Agent)],
        );
        let reader_grants = vec![(binding(&who, &reader, None, None), reader.clone())];
        assert!(
            decide_standing_in(
                Some(&who),
                None,
                pairs(&reader_grants),
                &[restriction(Action::Administer)],
                Action::ReadLogs,
                &[Action::Administer],
                &agent,
            )
            .is_allowed()
        );
        // No grant at all: the action's own denial.
        let Decision::Denied { reason, .. } = decide_standing_in(
            Some(&who),
            None,
            pairs(&[]),
            &[],
            Action::ReadLogs,
            &[Action::Administer],
            &agent,
        ) else {
            panic!("nothing granted");
        };
        assert_eq!(reason, "no explicit scoped binding");
    }

    #[test]
    fn evidence_serializes_as_the_records_it_names() {
        let who = identity(None);
        let admin = role(None, administrator_permissions());
        let bound = binding(&who, &admin, None, None);
        let grants = vec![(bound.clone(), admin.clone())];
        let inst = ResourceRef::installation(&InstallationId::generate());
        let Decision::Allowed(evidence) = decide(
            Some(&who),
            None,
            pairs(&grants),
            &[],
            Action::Administer,
            &inst,
        ) else {
            panic!("an administrator administers the Installation");
        };
        assert_eq!(
            serde_json::to_value(&evidence).unwrap(),
            serde_json::json!({
                "identityId": who.id.as_str(),
                "bindingIds": [bound.id.as_str()],
                "roleIds": [admin.id.as_str()],
                "restrictionIds": [],
            })
        );
        assert_eq!(
            serde_json::to_value(Evidence::bootstrap()).unwrap(),
            serde_json::json!({"bindingIds": [], "roleIds": [], "restrictionIds": []})
        );
    }

    #[test]
    fn exact_bindings_cover_only_their_resource_and_kind() {
        let who = identity(None);
        let ns = NamespaceId::generate();
        let agent_id = AgentId::generate();
        let reader = role(
            Some(ns.clone()),
            vec![
                Permission::new(Action::Read, ResourceKind::Agent),
                Permission::new(Action::Read, ResourceKind::AgentRevision),
            ],
        );
        let on_agent = binding(
            &who,
            &reader,
            Some(ns.clone()),
            Some(BoundResource {
                kind: ResourceKind::Agent,
                id: agent_id.to_string(),
            }),
        );
        let grants = vec![(on_agent, reader)];
        assert!(
            decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Read,
                &ResourceRef::exact(ResourceKind::Agent, &ns, &agent_id)
            )
            .is_allowed()
        );
        assert!(
            !decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Update,
                &ResourceRef::exact(ResourceKind::Agent, &ns, &agent_id)
            )
            .is_allowed()
        );
        assert!(
            !decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Read,
                &ResourceRef::exact(ResourceKind::Agent, &ns, AgentId::generate())
            )
            .is_allowed()
        );
        // a binding on the Agent does not grant revision reads
        assert!(
            !decide(
                Some(&who),
                None,
                pairs(&grants),
                &[],
                Action::Read,
                &ResourceRef::exact(ResourceKind::AgentRevision, &ns, "rev_x")
            )
            .is_allowed()
        );
    }

    #[test]
    fn namespace_scope_limits_keys_and_identities() {
        let ns = NamespaceId::generate();
        let other = NamespaceId::generate();
        let who = identity(None);
        let admin = role(None, administrator_permissions());
        let grants = vec![(binding(&who, &admin, None, None), admin.clone())];
        let there = ResourceRef::exact(ResourceKind::Agent, &other, AgentId::generate());
        assert!(
            !decide(
                Some(&who),
                Some(&ns),
                pairs(&grants),
                &[],
                Action::Read,
                &there
            )
            .is_allowed()
        );
        assert!(
            !decide(
                Some(&who),
                Some(&ns),
                pairs(&grants),
                &[],
                Action::Read,
                &ResourceRef::installation(&InstallationId::generate())
            )
            .is_allowed()
        );
        assert!(
            decide(
                Some(&who),
                Some(&other),
                pairs(&grants),
                &[],
                Action::Read,
                &there
            )
            .is_allowed()
        );
        assert!(!decide(None, None, pairs(&grants), &[], Action::Read, &there).is_allowed());
        let bad = ResourceRef {
            kind: ResourceKind::Agent,
            id: "agt_x".into(),
            namespace_id: None,
        };
        assert!(!decide(Some(&who), None, pairs(&grants), &[], Action::Read, &bad).is_allowed());
    }
}
