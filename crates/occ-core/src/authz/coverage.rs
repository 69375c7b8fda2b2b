//! The coverage rule (the reference's, for service keys; occ applies it to Namespace-wide
//! bindings too): a caller may hand out a grant only when a grant it holds already allows the
//! same action on the same kind at the same or a broader scope.

use super::{Action, Permission, ResourceKind};
use crate::iam::{AccessBinding, BoundResource, Role};
use crate::id::NamespaceId;

/// Where a grant applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantScope<'a> {
    /// Everywhere (an Installation binding without a resource).
    Installation,
    /// Every resource of a Namespace.
    Namespace(&'a NamespaceId),
    /// One exact resource (of a Namespace, for every kind but the Installation).
    Resource(Option<&'a NamespaceId>, &'a BoundResource),
}

impl<'a> GrantScope<'a> {
    /// The scope of a binding.
    pub fn of(binding: &'a AccessBinding) -> Self {
        match (&binding.namespace_id, &binding.resource) {
            (None, None) => GrantScope::Installation,
            (Some(ns), None) => GrantScope::Namespace(ns),
            (ns, Some(r)) => GrantScope::Resource(ns.as_ref(), r),
        }
    }

    /// Whether a grant at this scope applies wherever one at `other` does.
    pub fn contains(self, other: GrantScope<'_>) -> bool {
        match (self, other) {
            (GrantScope::Installation, _) => true,
            (GrantScope::Namespace(mine), GrantScope::Namespace(ns)) => mine == ns,
            (GrantScope::Namespace(mine), GrantScope::Resource(ns, _)) => ns == Some(mine),
            (GrantScope::Resource(mine_ns, mine), GrantScope::Resource(ns, r)) => {
                mine_ns == ns && mine == r
            }
            _ => false,
        }
    }
}

/// Which held permissions stand in for a wanted one beyond itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIns {
    /// `agent:administer` covers `agent:read_logs` (both admit log reads): the reference's rule.
    LogReads,
    /// Also `agent:administer` covers `agent:use`: for a person, whom administering an Agent
    /// already lets talk to it.
    LogReadsAndUse,
}

fn stands_for(held: Permission, wanted: Permission, stand_ins: StandIns) -> bool {
    let administer = Permission::new(Action::Administer, ResourceKind::Agent);
    held == wanted
        || (held == administer
            && wanted.resource_kind == ResourceKind::Agent
            && (wanted.action == Action::ReadLogs
                || (stand_ins == StandIns::LogReadsAndUse && wanted.action == Action::Use)))
}

/// Whether `held` (a caller's grants) cover `wanted` at `scope`.
pub fn covers<'g>(
    held: impl IntoIterator<Item = (&'g AccessBinding, &'g Role)>,
    wanted: Permission,
    scope: GrantScope<'_>,
    stand_ins: StandIns,
) -> bool {
    held.into_iter().any(|(binding, role)| {
        role.id == binding.role_id
            && GrantScope::of(binding).contains(scope)
            && role
                .permissions
                .iter()
                .any(|p| stands_for(*p, wanted, stand_ins))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IamId;
    use crate::time::Timestamp;

    fn grant(
        ns: Option<&NamespaceId>,
        resource: Option<BoundResource>,
        perms: &[Permission],
    ) -> (AccessBinding, Role) {
        let role = Role {
            id: IamId::generate_role(false),
            namespace_id: ns.cloned(),
            name: None,
            permissions: perms.to_vec(),
            created_at: Timestamp::now(),
        };
        let binding = AccessBinding {
            id: IamId::generate_binding(""),
            namespace_id: ns.cloned(),
            subject_id: IamId::generate_principal(),
            role_id: role.id.clone(),
            resource,
            runtime_role: None,
            created_at: Timestamp::now(),
        };
        (binding, role)
    }

    #[test]
    fn a_grant_covers_the_same_permission_at_the_same_or_a_narrower_scope() {
        let ns = NamespaceId::generate();
        let other = NamespaceId::generate();
        let agent = BoundResource {
            kind: ResourceKind::Agent,
            id: "agt_x".into(),
        };
        let deploy = Permission::new(Action::Deploy, ResourceKind::Agent);
        let read = Permission::new(Action::Read, ResourceKind::Agent);
        let cases: [(
            Option<&NamespaceId>,
            Option<BoundResource>,
            GrantScope<'_>,
            bool,
        ); 7] = [
            (None, None, GrantScope::Namespace(&ns), true),
            (Some(&ns), None, GrantScope::Namespace(&ns), true),
            (
                Some(&ns),
                None,
                GrantScope::Resource(Some(&ns), &agent),
                true,
            ),
            (Some(&other), None, GrantScope::Namespace(&ns), false),
            (
                Some(&ns),
                Some(agent.clone()),
                GrantScope::Namespace(&ns),
                false,
            ),
            (
                Some(&ns),
                Some(agent.clone()),
                GrantScope::Resource(Some(&ns), &agent),
                true,
            ),
            (Some(&ns), None, GrantScope::Installation, false),
        ];
        for (i, (held_ns, resource, scope, expected)) in cases.into_iter().enumerate() {
            let (b, r) = grant(held_ns, resource, &[deploy]);
            assert_eq!(
                covers([(&b, &r)], deploy, scope, StandIns::LogReads),
                expected,
                "case {i}"
            );
            assert!(
                !covers([(&b, &r)], read, scope, StandIns::LogReads),
                "case {i}: another action"
            );
        }
    }

    #[test]
    fn administer_stands_in_for_log_reads_and_for_a_persons_use() {
        let ns = NamespaceId::generate();
        let scope = GrantScope::Namespace(&ns);
        let (b, r) = grant(
            None,
            None,
            &[Permission::new(Action::Administer, ResourceKind::Agent)],
        );
        let logs = Permission::new(Action::ReadLogs, ResourceKind::Agent);
        let talk = Permission::new(Action::Use, ResourceKind::Agent);
        assert!(covers([(&b, &r)], logs, scope, StandIns::LogReads));
        assert!(!covers([(&b, &r)], talk, scope, StandIns::LogReads));
        assert!(covers([(&b, &r)], talk, scope, StandIns::LogReadsAndUse));
        let secret = Permission::new(Action::Operate, ResourceKind::Secret);
        assert!(!covers([(&b, &r)], secret, scope, StandIns::LogReadsAndUse));
        assert!(!covers(
            std::iter::empty(),
            logs,
            scope,
            StandIns::LogReadsAndUse
        ));
    }
}
