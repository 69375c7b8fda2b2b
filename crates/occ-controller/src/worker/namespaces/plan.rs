//! The decision half of Namespace work: given what the pass read and what it has done so far,
//! what happens next. Pure: no I/O, so every case is a row of the table test below.
//!
//! A pass walks: still the expected status? → authorize the requester (creating, plus
//! administering the Installation when it adopts an operator's namespace; or deleting) →
//! converge through Compute and the hooks → finish with what was observed.

use occ_core::InstallationId;
use occ_core::ReasonCode;
use occ_core::authz::{Action, ResourceRef};
use occ_core::resource::{Namespace, NamespaceStatus};
use occ_drivers::compute::{ComputeError, Convergence};

use super::super::Outcome;

/// What the pass read up front, in one read session.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// `Provisioning` for ensure work, `Deleting` for delete work.
    pub expected: NamespaceStatus,
    pub namespace: Option<Namespace>,
    pub installation: Option<InstallationId>,
}

impl Facts {
    pub(crate) fn ensure(&self) -> bool {
        self.expected == NamespaceStatus::Provisioning
    }

    /// The lifecycle evidence's action name.
    pub(crate) fn action_name(&self) -> &'static str {
        if self.ensure() {
            "openclaw.namespaces.lifecycle.ensure"
        } else {
            "openclaw.namespaces.lifecycle.delete"
        }
    }

    /// The audit name a denial of the requester's decisions is recorded under.
    pub(crate) fn audit_name(&self) -> &'static str {
        if self.ensure() {
            "openclaw.namespaces.create"
        } else {
            "openclaw.namespaces.delete"
        }
    }
}

/// What the pass has done so far.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The requester's decisions: `Err` carries the refusal's outcome.
    pub authorized: Option<Result<(), Outcome>>,
    /// What Compute and the hooks reported.
    pub converged: Option<Result<Convergence, ComputeError>>,
}

/// The next thing the pass does.
#[derive(Debug, PartialEq)]
pub(crate) enum Step<'a> {
    /// The Namespace is gone or has moved on: settle without lifecycle evidence.
    Superseded,
    /// Check that the requester still holds each of these decisions.
    Authorize(Vec<(Action, ResourceRef)>),
    /// Compute prepares the Namespace, then each hook in order.
    Prepare(&'a Namespace),
    /// Each hook removes its part (reverse order), then Compute.
    Remove(&'a Namespace),
    /// Settle with the Namespace's state change and lifecycle evidence; `converged` is what
    /// Compute reported (`None`: it was not asked or failed).
    Finish {
        namespace: &'a Namespace,
        outcome: Outcome,
        converged: Option<bool>,
    },
}

pub(crate) fn plan<'a>(facts: &'a Facts, progress: &Progress) -> Step<'a> {
    let (Some(ns), Some(installation)) = (&facts.namespace, &facts.installation) else {
        return Step::Superseded;
    };
    if ns.status != facts.expected || ns.deleted_at.is_some() {
        // Already converged (or moved on): re-running is a no-op.
        return Step::Superseded;
    }
    match &progress.authorized {
        None => return Step::Authorize(decisions(facts, ns, installation)),
        Some(Err(refusal)) => {
            return Step::Finish {
                namespace: ns,
                outcome: refusal.clone(),
                converged: None,
            };
        }
        Some(Ok(())) => {}
    }
    match &progress.converged {
        None if facts.ensure() => Step::Prepare(ns),
        None => Step::Remove(ns),
        Some(Ok(Convergence::Done)) => Step::Finish {
            namespace: ns,
            outcome: Outcome::done(ReasonCode::NamespaceReconciled),
            converged: Some(true),
        },
        Some(Ok(Convergence::Pending)) => Step::Finish {
            namespace: ns,
            outcome: Outcome::pending(ReasonCode::NamespaceIncomplete),
            converged: Some(false),
        },
        Some(Err(e)) => Step::Finish {
            namespace: ns,
            outcome: Outcome::from_compute(e),
            converged: None,
        },
    }
}

/// The original requester must still be allowed to do what it asked for.
fn decisions(
    facts: &Facts,
    ns: &Namespace,
    installation: &InstallationId,
) -> Vec<(Action, ResourceRef)> {
    if !facts.ensure() {
        return vec![(Action::Delete, ResourceRef::namespace(&ns.id))];
    }
    let mut decisions = vec![(
        Action::Create,
        ResourceRef::namespace_collection(installation),
    )];
    if ns.existing_namespace.is_some() {
        // Adopting an operator's namespace is an Installation administrator's decision.
        decisions.push((Action::Administer, ResourceRef::installation(installation)));
    }
    decisions
}

/// The state change settling the work writes, by where it ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// Provisioning ends: ready (`true`) or failed.
    Provisioned(bool),
    /// Teardown finished: the IAM policy goes and the row becomes a tombstone.
    Tombstone,
    /// Nothing changes yet.
    Unchanged,
}

pub(crate) fn settlement(ensure: bool, settled: super::super::Settled) -> Settlement {
    use super::super::Settled;
    match (ensure, settled) {
        (true, Settled::Succeeded) => Settlement::Provisioned(true),
        (true, Settled::Failed) => Settlement::Provisioned(false),
        (false, Settled::Succeeded) => Settlement::Tombstone,
        _ => Settlement::Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::Settled;
    use super::*;
    use occ_core::{NamespaceId, Timestamp};

    fn namespace(status: NamespaceStatus, existing: Option<&str>) -> Namespace {
        Namespace {
            id: NamespaceId::generate(),
            name: "team".parse().expect("name"),
            existing_namespace: existing.map(str::to_owned),
            status,
            created_at: Timestamp::now(),
            deleted_at: None,
        }
    }

    fn facts(expected: NamespaceStatus, ns: Namespace) -> Facts {
        Facts {
            expected,
            namespace: Some(ns),
            installation: Some(InstallationId::generate()),
        }
    }

    fn authorized() -> Progress {
        Progress {
            authorized: Some(Ok(())),
            ..Progress::default()
        }
    }

    fn finish(step: Step<'_>) -> (ReasonCode, Option<bool>) {
        match step {
            Step::Finish {
                outcome, converged, ..
            } => (outcome.code(), converged),
            other => panic!("expected a finish, got {other:?}"),
        }
    }

    #[test]
    fn gone_or_moved_on_namespaces_are_superseded() {
        let ensure = facts(
            NamespaceStatus::Provisioning,
            namespace(NamespaceStatus::Provisioning, None),
        );
        let mut missing = ensure.clone();
        missing.namespace = None;
        let mut no_installation = ensure.clone();
        no_installation.installation = None;
        let moved_on = facts(
            NamespaceStatus::Provisioning,
            namespace(NamespaceStatus::Ready, None),
        );
        let mut tombstone = facts(
            NamespaceStatus::Deleting,
            namespace(NamespaceStatus::Deleting, None),
        );
        if let Some(ns) = tombstone.namespace.as_mut() {
            ns.deleted_at = Some(Timestamp::now());
        }
        for (case, facts) in [
            ("namespace row gone", missing),
            ("no installation", no_installation),
            ("already ready", moved_on),
            ("already a tombstone", tombstone),
        ] {
            assert_eq!(
                plan(&facts, &Progress::default()),
                Step::Superseded,
                "{case}"
            );
        }
    }

    #[test]
    fn the_requester_is_authorized_for_exactly_what_it_asked() {
        let ensure = facts(
            NamespaceStatus::Provisioning,
            namespace(NamespaceStatus::Provisioning, None),
        );
        let installation = ensure.installation.clone().expect("installation");
        assert_eq!(
            plan(&ensure, &Progress::default()),
            Step::Authorize(vec![(
                Action::Create,
                ResourceRef::namespace_collection(&installation)
            )])
        );

        let adopt = facts(
            NamespaceStatus::Provisioning,
            namespace(NamespaceStatus::Provisioning, Some("operator-ns")),
        );
        let installation = adopt.installation.clone().expect("installation");
        assert_eq!(
            plan(&adopt, &Progress::default()),
            Step::Authorize(vec![
                (
                    Action::Create,
                    ResourceRef::namespace_collection(&installation)
                ),
                (Action::Administer, ResourceRef::installation(&installation)),
            ])
        );

        let delete = facts(
            NamespaceStatus::Deleting,
            namespace(NamespaceStatus::Deleting, None),
        );
        let id = delete.namespace.as_ref().expect("ns").id.clone();
        assert_eq!(
            plan(&delete, &Progress::default()),
            Step::Authorize(vec![(Action::Delete, ResourceRef::namespace(&id))])
        );
    }

    #[test]
    fn each_observation_maps_to_one_outcome() {
        let ensure = facts(
            NamespaceStatus::Provisioning,
            namespace(NamespaceStatus::Provisioning, None),
        );
        let delete = facts(
            NamespaceStatus::Deleting,
            namespace(NamespaceStatus::Deleting, None),
        );
        assert!(matches!(plan(&ensure, &authorized()), Step::Prepare(_)));
        assert!(matches!(plan(&delete, &authorized()), Step::Remove(_)));

        let refused = Progress {
            authorized: Some(Err(Outcome::permanent(ReasonCode::AuthorizationDenied))),
            ..Progress::default()
        };
        assert_eq!(
            finish(plan(&ensure, &refused)),
            (ReasonCode::AuthorizationDenied, None)
        );

        let cases: [(Result<Convergence, ComputeError>, ReasonCode, Option<bool>); 4] = [
            (
                Ok(Convergence::Done),
                ReasonCode::NamespaceReconciled,
                Some(true),
            ),
            (
                Ok(Convergence::Pending),
                ReasonCode::NamespaceIncomplete,
                Some(false),
            ),
            (
                Err(ComputeError::transient(
                    ReasonCode::DependencyUnavailable,
                    "api down",
                )),
                ReasonCode::DependencyUnavailable,
                None,
            ),
            (
                Err(ComputeError::permanent(
                    ReasonCode::ComputeDriverMismatch,
                    "other driver",
                )),
                ReasonCode::ComputeDriverMismatch,
                None,
            ),
        ];
        for (observed, code, converged) in cases {
            let case = format!("{observed:?}");
            let progress = Progress {
                authorized: Some(Ok(())),
                converged: Some(observed),
            };
            assert_eq!(
                finish(plan(&delete, &progress)),
                (code, converged),
                "{case}"
            );
        }
        let transient = Progress {
            authorized: Some(Ok(())),
            converged: Some(Err(ComputeError::transient(
                ReasonCode::DependencyUnavailable,
                "x",
            ))),
        };
        match plan(&ensure, &transient) {
            Step::Finish { outcome, .. } => assert!(matches!(outcome, Outcome::Retry(..))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn settling_writes_the_state_change_of_where_the_work_ended() {
        for (ensure, settled, expected) in [
            (true, Settled::Succeeded, Settlement::Provisioned(true)),
            (true, Settled::Failed, Settlement::Provisioned(false)),
            (true, Settled::Requeued, Settlement::Unchanged),
            (false, Settled::Succeeded, Settlement::Tombstone),
            (false, Settled::Failed, Settlement::Unchanged),
            (false, Settled::Requeued, Settlement::Unchanged),
        ] {
            assert_eq!(
                settlement(ensure, settled),
                expected,
                "{ensure} {settled:?}"
            );
        }
    }
}
