//! The decision half of Agent work: which revisions a stop shuts down, whether a delete may
//! proceed, and what each Compute report means. Pure: no I/O, so every case is a row of the
//! table tests below.

use occ_core::ReasonCode;
use occ_core::Timestamp;
use occ_core::resource::{Agent, AgentRevision, AgentStatus, ComputeIdentity, DesiredRuntimeState};
use occ_drivers::compute::ComputeError;

use super::super::Outcome;

/// What a stop pass read, after its requester was authorized (so that a deploy admitted
/// meanwhile is seen here).
#[derive(Debug, Clone)]
pub(crate) struct StopFacts {
    /// When the stop was requested: revisions admitted later belong to a later deploy.
    pub requested_at: Timestamp,
    pub agent: Option<Agent>,
    pub revisions: Vec<AgentRevision>,
    /// The identity of the Compute Driver this worker drives.
    pub compute: ComputeIdentity,
}

/// What a stop pass does.
#[derive(Debug, PartialEq)]
pub(crate) enum StopPlan<'a> {
    /// Nothing to stop: settle with this outcome.
    Finish(Outcome),
    /// Stop `cleanup` in order (the active revision first, if any).
    Stop {
        agent: &'a Agent,
        active: Option<&'a AgentRevision>,
        cleanup: Vec<&'a AgentRevision>,
    },
}

pub(crate) fn plan_stop(facts: &StopFacts) -> StopPlan<'_> {
    let Some(agent) = &facts.agent else {
        return StopPlan::Finish(Outcome::permanent(ReasonCode::InvalidAgentOwner));
    };
    if agent.desired_runtime_state != DesiredRuntimeState::Stopped {
        return StopPlan::Finish(Outcome::done(ReasonCode::StopSuperseded));
    }
    let active = match &agent.active_revision_id {
        None => None,
        Some(id) => match facts.revisions.iter().find(|r| &r.id == id) {
            Some(r) => Some(r),
            None => {
                return StopPlan::Finish(Outcome::permanent(ReasonCode::InvalidActiveRevision));
            }
        },
    };
    if let Some(active) = active {
        if active.created_at > facts.requested_at {
            // The active revision was admitted after this stop: a later deploy won.
            return StopPlan::Finish(Outcome::done(ReasonCode::StopSuperseded));
        }
        if active.spec.compute != facts.compute {
            return StopPlan::Finish(Outcome::permanent(ReasonCode::ComputeDriverMismatch));
        }
    }
    // Active first, then every other revision of ours admitted before the stop request.
    let mut cleanup: Vec<&AgentRevision> = active.into_iter().collect();
    cleanup.extend(facts.revisions.iter().filter(|r| {
        Some(&r.id) != agent.active_revision_id.as_ref()
            && r.created_at <= facts.requested_at
            && r.spec.compute == facts.compute
    }));
    StopPlan::Stop {
        agent,
        active,
        cleanup,
    }
}

/// What the stop's Compute calls mean: `Ok(false)` is a deploy that took over midway.
pub(crate) fn stop_outcome(stopped: &Result<bool, ComputeError>, had_active: bool) -> Outcome {
    match stopped {
        Ok(true) if had_active => Outcome::done(ReasonCode::AgentStopped),
        Ok(true) => Outcome::done(ReasonCode::AgentAlreadyStopped),
        Ok(false) => Outcome::done(ReasonCode::StopSuperseded),
        // A stop is never left pending: it retries until the runtime is down.
        Err(e) => match Outcome::from_compute(e) {
            Outcome::Pending(_) => Outcome::retry(ReasonCode::DependencyUnavailable),
            other => other,
        },
    }
}

/// What a delete pass read.
#[derive(Debug, Clone)]
pub(crate) struct DeleteFacts {
    pub agent: Option<Agent>,
    pub revisions: Vec<AgentRevision>,
    /// The identity of the Compute Driver this worker drives.
    pub compute: ComputeIdentity,
}

/// What a delete pass has done so far.
#[derive(Debug, Default)]
pub(crate) struct DeleteProgress {
    /// The requester's decision: `Err` carries the refusal's outcome.
    pub authorized: Option<Result<(), Outcome>>,
    /// What retiring every revision and removing the Agent's storage reported.
    pub removed: Option<Result<(), ComputeError>>,
}

/// The next thing a delete pass does.
#[derive(Debug, PartialEq)]
pub(crate) enum DeleteStep<'a> {
    /// An earlier pass finalized the Agent and its completion was lost.
    AlreadyFinalized,
    /// Check that the requester may still delete the Agent.
    Authorize,
    /// Retire every revision, remove the Agent's storage and its handed-values records.
    Remove(&'a Agent),
    /// Settle with this outcome (success runs the deletion finalizer).
    Finish(&'a Agent, Outcome),
}

pub(crate) fn plan_delete<'a>(facts: &'a DeleteFacts, progress: &DeleteProgress) -> DeleteStep<'a> {
    let Some(agent) = &facts.agent else {
        return DeleteStep::AlreadyFinalized;
    };
    if agent.status != AgentStatus::Deleting
        || agent.desired_runtime_state != DesiredRuntimeState::Stopped
    {
        return DeleteStep::Finish(agent, Outcome::permanent(ReasonCode::InvalidAgentState));
    }
    match &progress.authorized {
        None => return DeleteStep::Authorize,
        Some(Err(refusal)) => return DeleteStep::Finish(agent, refusal.clone()),
        Some(Ok(())) => {}
    }
    if facts
        .revisions
        .iter()
        .any(|r| r.spec.compute != facts.compute)
    {
        return DeleteStep::Finish(agent, Outcome::permanent(ReasonCode::ComputeDriverMismatch));
    }
    match &progress.removed {
        None => DeleteStep::Remove(agent),
        Some(Ok(())) => DeleteStep::Finish(agent, Outcome::done(ReasonCode::AgentDeleted)),
        Some(Err(e)) => DeleteStep::Finish(agent, Outcome::from_compute(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::resource::{AdmittedSpec, ExecutionMode, Generation, HarnessAuth};
    use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId, RevisionId};

    fn compute() -> ComputeIdentity {
        occ_drivers::compute::process::selection(false).identity
    }

    fn other_compute() -> ComputeIdentity {
        occ_drivers::compute::ssh::selection().identity
    }

    fn at(millis: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_800_000_000_000 + millis).expect("timestamp")
    }

    fn agent(state: DesiredRuntimeState, status: AgentStatus) -> Agent {
        Agent {
            id: AgentId::generate(),
            namespace_id: NamespaceId::generate(),
            name: "a".parse().expect("name"),
            configuration_id: ConfigurationId::generate(),
            service_principal_id: IamId::generate_service_principal(),
            execution_mode: ExecutionMode::Embedded,
            harness_auth: Some(HarnessAuth::Runtime {}),
            backend_id: None,
            desired_runtime_state: state,
            active_revision_id: None,
            status,
            created_at: at(0),
        }
    }

    fn revision(
        agent: &Agent,
        number: u64,
        admitted: i64,
        compute: ComputeIdentity,
    ) -> AgentRevision {
        AgentRevision {
            id: RevisionId::generate(),
            namespace_id: agent.namespace_id.clone(),
            agent_id: agent.id.clone(),
            revision: number,
            backend_id: None,
            spec: AdmittedSpec {
                configuration_id: agent.configuration_id.clone(),
                configuration_kind: "agent".into(),
                configuration_generation: Generation::FIRST,
                configuration: serde_json::Map::new(),
                harness: occ_core::resource::HarnessDescriptor {
                    id: "openclaw".into(),
                    version: "2026.9.6".into(),
                    mode: ExecutionMode::Embedded,
                },
                compute,
                service_principal_id: agent.service_principal_id.clone(),
                harness_auth: Some(HarnessAuth::Runtime {}),
                secret_driver_id: None,
                secret_bindings: None,
                account_credential: None,
            },
            source_revision_id: None,
            created_at: at(admitted),
        }
    }

    /// A stopped Agent whose revision 2 (of 3) is active; the stop was requested at 100 and
    /// revision 3 was admitted at 50 (before it).
    fn stop_facts() -> StopFacts {
        let mut a = agent(DesiredRuntimeState::Stopped, AgentStatus::Active);
        let revisions = vec![
            revision(&a, 1, 10, compute()),
            revision(&a, 2, 20, compute()),
            revision(&a, 3, 50, compute()),
        ];
        a.active_revision_id = Some(revisions[1].id.clone());
        StopFacts {
            requested_at: at(100),
            agent: Some(a),
            revisions,
            compute: compute(),
        }
    }

    fn finish(plan: StopPlan<'_>) -> ReasonCode {
        match plan {
            StopPlan::Finish(outcome) => outcome.code(),
            other => panic!("expected a finish, got {other:?}"),
        }
    }

    #[test]
    fn a_stop_shuts_the_active_revision_first_then_every_earlier_one_of_ours() {
        let mut facts = stop_facts();
        // Revision 4 came after the stop; revision 5 belongs to another Driver.
        let a = facts.agent.clone().expect("agent");
        facts.revisions.push(revision(&a, 4, 150, compute()));
        facts.revisions.push(revision(&a, 5, 30, other_compute()));
        let StopPlan::Stop {
            active, cleanup, ..
        } = plan_stop(&facts)
        else {
            panic!("expected a stop");
        };
        assert_eq!(active.map(|r| r.revision), Some(2));
        let order: Vec<u64> = cleanup.iter().map(|r| r.revision).collect();
        assert_eq!(order, [2, 1, 3]);

        let mut nothing_active = stop_facts();
        if let Some(a) = nothing_active.agent.as_mut() {
            a.active_revision_id = None;
        }
        let StopPlan::Stop {
            active, cleanup, ..
        } = plan_stop(&nothing_active)
        else {
            panic!("expected a stop");
        };
        assert!(active.is_none());
        assert_eq!(cleanup.len(), 3);
    }

    #[test]
    fn a_stop_refuses_or_yields_for_each_fact_that_forbids_it() {
        let mut gone = stop_facts();
        gone.agent = None;
        let mut running = stop_facts();
        if let Some(a) = running.agent.as_mut() {
            a.desired_runtime_state = DesiredRuntimeState::Running;
        }
        let mut dangling = stop_facts();
        if let Some(a) = dangling.agent.as_mut() {
            a.active_revision_id = Some(RevisionId::generate());
        }
        let mut later_deploy = stop_facts();
        later_deploy.requested_at = at(15);
        let mut foreign = stop_facts();
        foreign.revisions[1].spec.compute = other_compute();
        for (case, facts, code) in [
            ("agent gone", gone, ReasonCode::InvalidAgentOwner),
            ("running again", running, ReasonCode::StopSuperseded),
            (
                "pointer names no revision",
                dangling,
                ReasonCode::InvalidActiveRevision,
            ),
            (
                "active admitted after the stop",
                later_deploy,
                ReasonCode::StopSuperseded,
            ),
            (
                "active on another Driver",
                foreign,
                ReasonCode::ComputeDriverMismatch,
            ),
        ] {
            assert_eq!(finish(plan_stop(&facts)), code, "{case}");
        }
    }

    #[test]
    fn each_stop_report_maps_to_one_outcome() {
        let pending = ComputeError::pending(ReasonCode::NamespaceIncomplete, "still going");
        let transient = ComputeError::transient(ReasonCode::DependencyUnavailable, "down");
        let permanent = ComputeError::permanent(ReasonCode::ComputeDriverMismatch, "no");
        let cases: [(Result<bool, ComputeError>, bool, Outcome); 6] = [
            (Ok(true), true, Outcome::done(ReasonCode::AgentStopped)),
            (
                Ok(true),
                false,
                Outcome::done(ReasonCode::AgentAlreadyStopped),
            ),
            (Ok(false), true, Outcome::done(ReasonCode::StopSuperseded)),
            (
                Err(pending),
                true,
                Outcome::retry(ReasonCode::DependencyUnavailable),
            ),
            (
                Err(transient),
                true,
                Outcome::retry(ReasonCode::DependencyUnavailable),
            ),
            (
                Err(permanent),
                true,
                Outcome::permanent(ReasonCode::ComputeDriverMismatch),
            ),
        ];
        for (reported, had_active, expected) in cases {
            assert_eq!(
                stop_outcome(&reported, had_active),
                expected,
                "{reported:?}"
            );
        }
    }

    fn delete_facts() -> DeleteFacts {
        let a = agent(DesiredRuntimeState::Stopped, AgentStatus::Deleting);
        let revisions = vec![revision(&a, 1, 10, compute())];
        DeleteFacts {
            agent: Some(a),
            revisions,
            compute: compute(),
        }
    }

    fn delete_code(step: DeleteStep<'_>) -> ReasonCode {
        match step {
            DeleteStep::Finish(_, outcome) => outcome.code(),
            other => panic!("expected a finish, got {other:?}"),
        }
    }

    #[test]
    fn a_delete_walks_authorize_remove_finish() {
        let facts = delete_facts();
        let mut progress = DeleteProgress::default();
        assert_eq!(plan_delete(&facts, &progress), DeleteStep::Authorize);
        progress.authorized = Some(Ok(()));
        assert!(matches!(
            plan_delete(&facts, &progress),
            DeleteStep::Remove(_)
        ));
        progress.removed = Some(Ok(()));
        assert_eq!(
            delete_code(plan_delete(&facts, &progress)),
            ReasonCode::AgentDeleted
        );
        progress.removed = Some(Err(ComputeError::transient(
            ReasonCode::DependencyUnavailable,
            "down",
        )));
        assert_eq!(
            delete_code(plan_delete(&facts, &progress)),
            ReasonCode::DependencyUnavailable
        );
    }

    #[test]
    fn a_delete_refuses_for_each_fact_that_forbids_it() {
        let mut gone = delete_facts();
        gone.agent = None;
        assert_eq!(
            plan_delete(&gone, &DeleteProgress::default()),
            DeleteStep::AlreadyFinalized
        );

        let mut active = delete_facts();
        if let Some(a) = active.agent.as_mut() {
            a.status = AgentStatus::Active;
        }
        let mut running = delete_facts();
        if let Some(a) = running.agent.as_mut() {
            a.desired_runtime_state = DesiredRuntimeState::Running;
        }
        for (case, facts) in [("not deleting", active), ("not stopped", running)] {
            // Refused before the requester is even asked about.
            assert_eq!(
                delete_code(plan_delete(&facts, &DeleteProgress::default())),
                ReasonCode::InvalidAgentState,
                "{case}"
            );
        }

        let refused = DeleteProgress {
            authorized: Some(Err(Outcome::permanent(ReasonCode::AuthorizationDenied))),
            ..DeleteProgress::default()
        };
        assert_eq!(
            delete_code(plan_delete(&delete_facts(), &refused)),
            ReasonCode::AuthorizationDenied
        );

        let mut foreign = delete_facts();
        foreign.revisions[0].spec.compute = other_compute();
        let authorized = DeleteProgress {
            authorized: Some(Ok(())),
            ..DeleteProgress::default()
        };
        assert_eq!(
            delete_code(plan_delete(&foreign, &authorized)),
            ReasonCode::ComputeDriverMismatch
        );
    }
}
