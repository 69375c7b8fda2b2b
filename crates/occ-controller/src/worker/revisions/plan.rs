//! The decision half of a revision pass: given what the pass read at its start and what its
//! effects have reported so far, what happens next. Pure: no I/O, no clock, so every case is a
//! unit test below.
//!
//! A deploy pass walks: validity → (maintenance superseded) → authorize → (stop wins) → resolve
//! the runtime context → (superseded) → prepare → re-check the desired state → activate →
//! publish the pointer → retire the predecessors → complete. When the activation of a new
//! revision fails and an earlier revision was serving, the pass rolls back: it restores that
//! revision, leaves the pointer on it, and fails the new one with the activation's reason.
//! The pointer moves only once the new revision serves, so `activeRevisionId` never names a
//! revision that did not start.
//!
//! A dedicated revision replaces its predecessors exclusively, as the reference does: the pass
//! stops every earlier revision before preparing it (a harness keeps one workspace and one
//! node identity per Agent), accepts the downtime, and never rolls back; the pointer stays on
//! the stopped predecessor until the new revision serves, and maintenance never restarts a
//! revision once a later dedicated one was admitted.

use occ_core::ReasonCode;
use occ_core::resource::{
    Agent, AgentRevision, AgentStatus, ComputeIdentity, DesiredRuntimeState, ExecutionMode,
    HarnessDescriptor,
};
use occ_drivers::compute::{ComputeError, FailureClass, Readiness, RuntimeState};
use serde_json::{Value, json};

use super::super::Outcome;

/// Which kind of pass this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PassKind {
    /// `agent_revision:<rev>:reconcile`: make the revision the one that serves.
    Deploy,
    /// `agent_revision:<rev>:maintenance:<bucket>`: keep the active revision serving.
    Maintenance,
}

/// What a pass reads up front, in one read session.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub kind: PassKind,
    /// Whether the Namespace is ready (and not deleted).
    pub namespace_ready: bool,
    pub agent: Agent,
    pub revision: AgentRevision,
    /// The revision the pointer names when the pass started (`None`: nothing serves).
    pub active: Option<AgentRevision>,
    /// Whether a later revision of the Agent has been admitted.
    pub newer_admitted: bool,
    /// Whether a later dedicated revision of the Agent has been admitted (it replaces this one
    /// exclusively, so this one is not restarted).
    pub newer_dedicated_admitted: bool,
    /// Whether occ last recorded this revision's gateway as down and being started again (an
    /// exit it reported, or a restart that did not finish): a maintenance pass that finds it
    /// serving again counts the restart an earlier, unsettled pass made.
    pub down_recorded: bool,
    /// The harness this installation approves for the revision's execution mode.
    pub approved_harness: HarnessDescriptor,
    /// The identity of the Compute Driver this worker drives.
    pub compute: ComputeIdentity,
}

impl Facts {
    pub(crate) fn is_active(&self) -> bool {
        self.agent.active_revision_id.as_ref() == Some(&self.revision.id)
    }

    /// Whether this revision replaces its predecessors exclusively (dedicated execution).
    pub(crate) fn exclusive(&self) -> bool {
        self.revision.spec.harness.mode == ExecutionMode::Dedicated
    }

    fn wants_running(&self) -> bool {
        self.agent.desired_runtime_state == DesiredRuntimeState::Running
            && self.agent.status == AgentStatus::Active
    }

    /// The revision to restore if this one cannot be activated: the one serving before it.
    pub(crate) fn predecessor(&self) -> Option<&AgentRevision> {
        self.active
            .as_ref()
            .filter(|p| p.id != self.revision.id && p.revision < self.revision.revision)
    }
}

/// What the pass's effects have reported so far (each `None` until its step ran).
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress {
    /// The original requester's re-authorization (`Err`: the outcome).
    pub authorized: Option<Result<(), Outcome>>,
    /// Resolving Secret values and workspace setup (`Err`: the outcome).
    pub context: Option<Result<(), Outcome>>,
    /// Stopping the candidate because a stop won.
    pub stopped: Option<Result<(), ComputeError>>,
    /// Stopping every earlier revision before an exclusive (dedicated) candidate is prepared.
    pub predecessors_stopped: Option<Result<(), ComputeError>>,
    /// `prepare_revision`.
    pub prepared: Option<Result<Readiness, ComputeError>>,
    /// The desired state read again just before activation: still running?
    pub still_wanted: Option<bool>,
    /// `activate_revision`, with what ran for the revision before it.
    pub activated: Option<Result<RuntimeState, ComputeError>>,
    /// Publishing the pointer.
    pub published: Option<Publish>,
    /// Retiring the predecessors.
    pub retired: Option<Result<(), ComputeError>>,
    /// Restoring the predecessor after a failed activation.
    pub restored: Option<Result<(), ComputeError>>,
}

/// What publishing the pointer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// The pointer names the revision now.
    Published,
    /// Someone else moved it (or the Agent is gone): look again.
    Changed,
    /// A stop was admitted meanwhile.
    Stopped,
}

/// The next thing the pass does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Re-authorize the original requester on fresh policy.
    Authorize,
    /// Resolve Secret values and staged workspace setup.
    ResolveContext,
    /// A stop or delete admitted after this deploy wins: stop the candidate (and retire the
    /// earlier revisions when nothing else serves).
    StopCandidate { retire_earlier: bool },
    /// Stop every earlier revision of the Agent (exclusive replacement).
    StopPredecessors,
    /// `prepare_revision`.
    Prepare,
    /// Read the desired state again before touching what serves.
    Recheck,
    /// `activate_revision`.
    Activate,
    /// Move the pointer to this revision (compare-and-set, fenced).
    Publish,
    /// Retire every earlier revision of the Agent on this Compute.
    Retire,
    /// Restore the predecessor after a failed activation.
    RollBack,
    /// Settle the item.
    Finish(Finish),
}

/// How the pass ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finish {
    pub outcome: Outcome,
    /// Set when the revision serves: what the completion records.
    pub completion: Option<Completion>,
    /// Set when the pass restored the predecessor.
    pub rolled_back: bool,
}

impl Finish {
    fn with(outcome: Outcome) -> Step {
        Step::Finish(Finish {
            outcome,
            completion: None,
            rolled_back: false,
        })
    }
}

/// What a successful activation records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completion {
    /// `REVISION_ACTIVATED` or `REVISION_ALREADY_ACTIVE`.
    pub code: ReasonCode,
    /// A maintenance pass found the gateway down and started it again.
    pub restarted: bool,
}

/// The next step of the pass.
pub(crate) fn plan(facts: &Facts, progress: &Progress) -> Step {
    if let Some(outcome) = invalid(facts) {
        return Finish::with(outcome);
    }
    let is_active = facts.is_active();
    if facts.kind == PassKind::Maintenance
        && (!is_active
            || facts.agent.desired_runtime_state != DesiredRuntimeState::Running
            || facts.newer_dedicated_admitted)
    {
        return Finish::with(Outcome::done(ReasonCode::RevisionMaintenanceSuperseded));
    }
    match &progress.authorized {
        None => return Step::Authorize,
        Some(Err(outcome)) => return Finish::with(outcome.clone()),
        Some(Ok(())) => {}
    }
    if !facts.wants_running() {
        // A stop (or delete) was admitted after this deploy: it wins. The earlier revisions
        // are retired too when nothing else is recorded as serving.
        let retire_earlier = facts.agent.active_revision_id.is_none() || is_active;
        return stop_wins(progress, retire_earlier);
    }
    match &progress.context {
        None => return Step::ResolveContext,
        // An active runtime is never failed for this: it keeps serving, the pass waits.
        Some(Err(Outcome::Permanent(code, _))) if is_active => {
            return Finish::with(Outcome::Pending(*code));
        }
        Some(Err(outcome)) => return Finish::with(outcome.clone()),
        Some(Ok(())) => {}
    }
    if !is_active {
        if facts
            .active
            .as_ref()
            .is_some_and(|a| a.revision >= facts.revision.revision)
        {
            // Recovered old work never replaces a newer active revision.
            return Finish::with(Outcome::done(ReasonCode::RevisionSuperseded));
        }
        if facts.newer_admitted {
            // A later deploy of the same Agent is queued behind this one in its lane: starting
            // this revision would only be replaced at once.
            return Finish::with(Outcome::done(ReasonCode::RevisionSuperseded));
        }
    }
    if facts.exclusive() && !is_active {
        match &progress.predecessors_stopped {
            None => return Step::StopPredecessors,
            Some(Err(e)) => return Finish::with(Outcome::from_compute(e)),
            Some(Ok(())) => {}
        }
    }
    match &progress.prepared {
        None => return Step::Prepare,
        Some(Ok(Readiness::Pending { code })) => {
            return Finish::with(Outcome::Pending(*code));
        }
        Some(Err(e)) => return Finish::with(failure_of_serving(facts, e)),
        Some(Ok(Readiness::Ready)) => {}
    }
    match progress.still_wanted {
        None => return Step::Recheck,
        // A stop admitted meanwhile wins: shut the candidate down.
        Some(false) => return stop_wins(progress, true),
        Some(true) => {}
    }
    let before = match &progress.activated {
        None => return Step::Activate,
        Some(Ok(before)) => before.clone(),
        Some(Err(e)) => return activation_failed(facts, progress, e),
    };
    if !is_active {
        match progress.published {
            None => return Step::Publish,
            Some(Publish::Changed) => {
                return Finish::with(Outcome::retry(ReasonCode::ActiveRevisionChanged));
            }
            // The candidate runs but a stop was admitted meanwhile: shut it down. The stop's
            // own work stops the rest.
            Some(Publish::Stopped) => return stop_wins(progress, false),
            Some(Publish::Published) => {}
        }
    }
    match &progress.retired {
        None => return Step::Retire,
        // The pointer names the revision: the next pass takes the already-active path.
        Some(Err(e)) => return Finish::with(Outcome::from_compute(e)),
        Some(Ok(())) => {}
    }
    let code = if is_active {
        ReasonCode::RevisionAlreadyActive
    } else {
        ReasonCode::RevisionActivated
    };
    Step::Finish(Finish {
        outcome: Outcome::done(code),
        completion: Some(Completion {
            code,
            restarted: facts.kind == PassKind::Maintenance
                && (before == RuntimeState::NotRunning || facts.down_recorded),
        }),
        rolled_back: false,
    })
}

/// Why the item cannot proceed at all, if it cannot.
fn invalid(facts: &Facts) -> Option<Outcome> {
    let (agent, revision) = (&facts.agent, &facts.revision);
    if !facts.namespace_ready {
        return Some(Outcome::permanent(ReasonCode::NamespaceNotReady));
    }
    if revision.agent_id != agent.id
        || revision.namespace_id != agent.namespace_id
        || revision.spec.service_principal_id != agent.service_principal_id
    {
        return Some(Outcome::permanent(ReasonCode::InvalidAdmittedRevision));
    }
    if revision.spec.harness != facts.approved_harness {
        return Some(Outcome::permanent(ReasonCode::HarnessDescriptorMismatch));
    }
    if revision.spec.compute != facts.compute {
        return Some(Outcome::permanent(ReasonCode::ComputeDriverMismatch));
    }
    None
}

/// Stop the candidate, or finish with how stopping it went.
fn stop_wins(progress: &Progress, retire_earlier: bool) -> Step {
    match &progress.stopped {
        None => Step::StopCandidate { retire_earlier },
        Some(Ok(())) => Finish::with(Outcome::done(ReasonCode::RevisionStopped)),
        Some(Err(e)) => Finish::with(Outcome::from_compute(e)),
    }
}

/// A failure of an already active revision's runtime is never permanent from a maintenance
/// pass (the runtime keeps its place and the pass waits); a deploy pass reports it as it is.
fn failure_of_serving(facts: &Facts, e: &ComputeError) -> Outcome {
    match Outcome::from_compute(e) {
        Outcome::Permanent(code, _) if facts.kind == PassKind::Maintenance => {
            Outcome::Pending(code)
        }
        other => other,
    }
}

/// Transient codes that mean the revision's own gateway failed (it exited during startup or
/// never became ready), not a dependency that may come back.
const WORKLOAD_FAILURES: &[ReasonCode] = &[
    ReasonCode::RuntimeStartupFailed,
    ReasonCode::AgentGatewayUnavailable,
    ReasonCode::GatewayNotReady,
    ReasonCode::WorkspaceSetupFailed,
];

/// Whether an activation failure is the new revision's own: only then is it rolled back, and
/// failed for good (retrying would take the restored predecessor down at every attempt).
fn workload_failed(e: &ComputeError) -> bool {
    match e.class {
        FailureClass::Pending => false,
        FailureClass::Permanent => true,
        FailureClass::Transient => WORKLOAD_FAILURES.contains(&e.code),
    }
}

/// The activation failed: roll back to the predecessor when there is one, else report it.
fn activation_failed(facts: &Facts, progress: &Progress, e: &ComputeError) -> Step {
    if facts.is_active() {
        // Nothing to go back to: the pointer already names this revision.
        return Finish::with(failure_of_serving(facts, e));
    }
    if facts.exclusive() {
        // Its predecessors were stopped before it was prepared: there is nothing serving to go
        // back to. Its own failure is final (the operator deploys again); anything else is
        // retried within the item's attempts.
        return Finish::with(match Outcome::from_compute(e) {
            Outcome::Permanent(code, _) | Outcome::Retry(code) if workload_failed(e) => {
                let data = (!e.output.is_empty()).then(|| json!({"output": e.output.clone()}));
                Outcome::Permanent(code, data)
            }
            other => other,
        });
    }
    if !workload_failed(e) {
        // Still converging, or a dependency (transport, API server) failed before the new
        // revision could fail on its own: look again or retry within the item's attempts.
        return Finish::with(Outcome::from_compute(e));
    }
    let Some(previous) = facts.predecessor() else {
        // A first deploy: nothing served before, the pointer stays empty; a transient failure
        // is retried within the item's attempts.
        return Finish::with(Outcome::from_compute(e));
    };
    let restored = match &progress.restored {
        None => return Step::RollBack,
        Some(restored) => restored,
    };
    let mut data = json!({
        "rolledBack": restored.is_ok(),
        "previousRevisionId": previous.id.as_str(),
        "previousRevision": previous.revision,
    });
    if !e.output.is_empty() {
        data["output"] = Value::from(e.output.clone());
    }
    if let Err(failed) = restored {
        data["rollbackCode"] = Value::from(failed.code.as_str());
    }
    // The new revision failed for good: retrying would take the restored predecessor down
    // again at every attempt. The operator fixes the Configuration and deploys again.
    Step::Finish(Finish {
        outcome: Outcome::Permanent(e.code, Some(data)),
        completion: None,
        rolled_back: restored.is_ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::resource::{AdmittedSpec, ExecutionMode, Generation, HarnessAuth};
    use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId, RevisionId, Timestamp};

    fn harness() -> HarnessDescriptor {
        HarnessDescriptor {
            id: "openclaw".into(),
            version: "2026.9.6".into(),
            mode: ExecutionMode::Embedded,
        }
    }

    fn compute() -> ComputeIdentity {
        occ_drivers::compute::process::selection(false).identity
    }

    fn revision(agent: &Agent, number: u64) -> AgentRevision {
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
                harness: harness(),
                compute: compute(),
                service_principal_id: agent.service_principal_id.clone(),
                harness_auth: Some(HarnessAuth::Runtime {}),
                secret_driver_id: None,
                secret_bindings: None,
                account_credential: None,
            },
            source_revision_id: None,
            created_at: Timestamp::now(),
        }
    }

    fn agent() -> Agent {
        Agent {
            id: AgentId::generate(),
            namespace_id: NamespaceId::generate(),
            name: "a".parse().expect("name"),
            configuration_id: ConfigurationId::generate(),
            service_principal_id: IamId::generate_service_principal(),
            execution_mode: ExecutionMode::Embedded,
            harness_auth: Some(HarnessAuth::Runtime {}),
            backend_id: None,
            desired_runtime_state: DesiredRuntimeState::Running,
            active_revision_id: None,
            status: AgentStatus::Active,
            created_at: Timestamp::now(),
        }
    }

    /// A first deploy of revision 1.
    fn first_deploy() -> Facts {
        let agent = agent();
        let revision = revision(&agent, 1);
        Facts {
            kind: PassKind::Deploy,
            namespace_ready: true,
            agent,
            revision,
            active: None,
            newer_admitted: false,
            newer_dedicated_admitted: false,
            down_recorded: false,
            approved_harness: harness(),
            compute: compute(),
        }
    }

    /// Revision 2 deployed while revision 1 serves.
    fn redeploy() -> Facts {
        let mut facts = first_deploy();
        let first = facts.revision.clone();
        facts.agent.active_revision_id = Some(first.id.clone());
        facts.revision = revision(&facts.agent, 2);
        facts.active = Some(first);
        facts
    }

    /// A maintenance pass of the active revision.
    fn maintenance() -> Facts {
        let mut facts = first_deploy();
        facts.kind = PassKind::Maintenance;
        facts.agent.active_revision_id = Some(facts.revision.id.clone());
        facts.active = Some(facts.revision.clone());
        facts
    }

    fn ready() -> Progress {
        Progress {
            authorized: Some(Ok(())),
            context: Some(Ok(())),
            prepared: Some(Ok(Readiness::Ready)),
            still_wanted: Some(true),
            ..Progress::default()
        }
    }

    fn outcome(step: Step) -> Outcome {
        match step {
            Step::Finish(f) => f.outcome,
            other => panic!("expected a finish, got {other:?}"),
        }
    }

    #[test]
    fn a_deploy_walks_authorize_context_prepare_recheck_activate_publish_retire_complete() {
        let facts = redeploy();
        let mut p = Progress::default();
        assert_eq!(plan(&facts, &p), Step::Authorize);
        p.authorized = Some(Ok(()));
        assert_eq!(plan(&facts, &p), Step::ResolveContext);
        p.context = Some(Ok(()));
        assert_eq!(plan(&facts, &p), Step::Prepare);
        p.prepared = Some(Ok(Readiness::Ready));
        assert_eq!(plan(&facts, &p), Step::Recheck);
        p.still_wanted = Some(true);
        assert_eq!(plan(&facts, &p), Step::Activate);
        p.activated = Some(Ok(RuntimeState::NotCurrent));
        assert_eq!(plan(&facts, &p), Step::Publish);
        p.published = Some(Publish::Published);
        assert_eq!(plan(&facts, &p), Step::Retire);
        p.retired = Some(Ok(()));
        assert_eq!(
            plan(&facts, &p),
            Step::Finish(Finish {
                outcome: Outcome::done(ReasonCode::RevisionActivated),
                completion: Some(Completion {
                    code: ReasonCode::RevisionActivated,
                    restarted: false
                }),
                rolled_back: false,
            })
        );
    }

    /// `facts` with its candidate (and the approved harness) in dedicated execution.
    fn dedicated(mut facts: Facts) -> Facts {
        let codex = HarnessDescriptor {
            id: "codex".into(),
            version: "0.154.0".into(),
            mode: ExecutionMode::Dedicated,
        };
        facts.revision.spec.harness = codex.clone();
        facts.approved_harness = codex;
        facts
    }

    #[test]
    fn a_dedicated_deploy_stops_every_predecessor_before_it_prepares() {
        let facts = dedicated(redeploy());
        let mut p = ready();
        p.prepared = None;
        p.still_wanted = None;
        assert_eq!(plan(&facts, &p), Step::StopPredecessors);
        // a predecessor that does not stop: the pass retries, nothing is prepared
        let failed = ComputeError::transient(ReasonCode::AgentGatewayUnavailable, "no answer");
        p.predecessors_stopped = Some(Err(failed));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::AgentGatewayUnavailable)
        );
        p.predecessors_stopped = Some(Ok(()));
        assert_eq!(plan(&facts, &p), Step::Prepare);
        // also on a first deploy (earlier revisions may have been stopped, not retired)
        let first = dedicated(first_deploy());
        assert_eq!(
            plan(
                &first,
                &Progress {
                    prepared: None,
                    ..ready()
                }
            ),
            Step::StopPredecessors
        );
        // an embedded deploy never stops what serves before its replacement is ready
        assert_eq!(
            plan(
                &redeploy(),
                &Progress {
                    prepared: None,
                    ..ready()
                }
            ),
            Step::Prepare
        );
        // an already active dedicated revision (a redelivered deploy) stops nothing
        let mut active = dedicated(maintenance());
        active.kind = PassKind::Deploy;
        assert_eq!(
            plan(
                &active,
                &Progress {
                    prepared: None,
                    ..ready()
                }
            ),
            Step::Prepare
        );
    }

    #[test]
    fn a_failed_dedicated_activation_is_final_and_never_rolls_back() {
        let facts = dedicated(redeploy());
        let mut p = ready();
        p.predecessors_stopped = Some(Ok(()));
        let mut e = ComputeError::transient(ReasonCode::RuntimeStartupFailed, "exited");
        e.output = vec!["codex: probe failed".into()];
        p.activated = Some(Err(e));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::Permanent(
                ReasonCode::RuntimeStartupFailed,
                Some(json!({"output": ["codex: probe failed"]}))
            )
        );
        // a dependency failure is retried (still no rollback)
        p.activated = Some(Err(ComputeError::transient(
            ReasonCode::DependencyUnavailable,
            "api server",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::DependencyUnavailable)
        );
    }

    #[test]
    fn maintenance_never_restarts_a_revision_a_dedicated_one_replaces() {
        let mut facts = maintenance();
        facts.newer_admitted = true;
        // an embedded successor replaces it only once it serves: keep this one up meanwhile
        assert_eq!(plan(&facts, &Progress::default()), Step::Authorize);
        facts.newer_dedicated_admitted = true;
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::done(ReasonCode::RevisionMaintenanceSuperseded)
        );
    }

    #[test]
    fn invalid_items_finish_before_anything_else() {
        let mut facts = first_deploy();
        facts.namespace_ready = false;
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::permanent(ReasonCode::NamespaceNotReady)
        );
        let mut facts = first_deploy();
        facts.revision.spec.service_principal_id = IamId::generate_service_principal();
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::permanent(ReasonCode::InvalidAdmittedRevision)
        );
        let mut facts = first_deploy();
        facts.approved_harness.version = "2026.1.1".into();
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::permanent(ReasonCode::HarnessDescriptorMismatch)
        );
        let mut facts = first_deploy();
        facts.compute.id = "compute-other".into();
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::permanent(ReasonCode::ComputeDriverMismatch)
        );
    }

    #[test]
    fn a_refused_requester_ends_the_pass() {
        let facts = first_deploy();
        let p = Progress {
            authorized: Some(Err(Outcome::permanent(ReasonCode::AuthorizationDenied))),
            ..Progress::default()
        };
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::permanent(ReasonCode::AuthorizationDenied)
        );
    }

    #[test]
    fn stop_wins_over_a_deploy_admitted_before_it() {
        let mut facts = redeploy();
        facts.agent.desired_runtime_state = DesiredRuntimeState::Stopped;
        let mut p = Progress {
            authorized: Some(Ok(())),
            ..Progress::default()
        };
        // Revision 1 is recorded as serving: the stop's own work stops it, not this pass.
        assert_eq!(
            plan(&facts, &p),
            Step::StopCandidate {
                retire_earlier: false
            }
        );
        p.stopped = Some(Ok(()));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::done(ReasonCode::RevisionStopped)
        );

        let mut facts = first_deploy();
        facts.agent.status = AgentStatus::Deleting;
        let p = Progress {
            authorized: Some(Ok(())),
            ..Progress::default()
        };
        assert_eq!(
            plan(&facts, &p),
            Step::StopCandidate {
                retire_earlier: true
            }
        );
    }

    #[test]
    fn a_stop_seen_just_before_activation_stops_the_candidate() {
        let facts = redeploy();
        let mut p = ready();
        p.still_wanted = Some(false);
        assert_eq!(
            plan(&facts, &p),
            Step::StopCandidate {
                retire_earlier: true
            }
        );
        p.stopped = Some(Err(ComputeError::transient(
            ReasonCode::HostUnavailable,
            "down",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::HostUnavailable)
        );
    }

    #[test]
    fn a_stop_seen_at_publication_stops_the_running_candidate() {
        let facts = redeploy();
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::NotCurrent));
        p.published = Some(Publish::Stopped);
        assert_eq!(
            plan(&facts, &p),
            Step::StopCandidate {
                retire_earlier: false
            }
        );
    }

    #[test]
    fn a_pointer_moved_by_someone_else_is_retried() {
        let facts = redeploy();
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::NotCurrent));
        p.published = Some(Publish::Changed);
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::ActiveRevisionChanged)
        );
    }

    #[test]
    fn older_or_already_followed_revisions_are_superseded_without_compute() {
        let mut facts = redeploy();
        // The active revision is newer than this one.
        let newer = revision(&facts.agent, 3);
        facts.agent.active_revision_id = Some(newer.id.clone());
        facts.active = Some(newer);
        let p = Progress {
            authorized: Some(Ok(())),
            context: Some(Ok(())),
            ..Progress::default()
        };
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::done(ReasonCode::RevisionSuperseded)
        );

        let mut facts = redeploy();
        facts.newer_admitted = true;
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::done(ReasonCode::RevisionSuperseded)
        );
    }

    #[test]
    fn an_unresolvable_context_waits_when_active_and_fails_otherwise() {
        let facts = redeploy();
        let p = Progress {
            authorized: Some(Ok(())),
            context: Some(Err(Outcome::permanent(
                ReasonCode::SecretBindingUnavailable,
            ))),
            ..Progress::default()
        };
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::permanent(ReasonCode::SecretBindingUnavailable)
        );
        let facts = maintenance();
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::pending(ReasonCode::SecretBindingUnavailable)
        );
    }

    #[test]
    fn preparation_pending_or_failing_ends_the_pass() {
        let facts = redeploy();
        let mut p = ready();
        p.prepared = Some(Ok(Readiness::Pending {
            code: ReasonCode::RevisionIncomplete,
        }));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::pending(ReasonCode::RevisionIncomplete)
        );
        p.prepared = Some(Err(ComputeError::permanent(
            ReasonCode::OwnershipConflict,
            "x",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::permanent(ReasonCode::OwnershipConflict)
        );
        // Maintenance never fails the serving runtime from an observation.
        let facts = maintenance();
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::pending(ReasonCode::OwnershipConflict)
        );
    }

    #[test]
    fn an_already_active_revision_converges_without_publishing() {
        let mut facts = redeploy();
        facts.agent.active_revision_id = Some(facts.revision.id.clone());
        facts.active = Some(facts.revision.clone());
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::Serving));
        assert_eq!(plan(&facts, &p), Step::Retire);
        p.retired = Some(Ok(()));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::done(ReasonCode::RevisionAlreadyActive)
        );
    }

    #[test]
    fn maintenance_records_a_restart_only_when_the_gateway_was_down() {
        let facts = maintenance();
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::NotRunning));
        p.retired = Some(Ok(()));
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert_eq!(
            finish.completion,
            Some(Completion {
                code: ReasonCode::RevisionAlreadyActive,
                restarted: true
            })
        );
        p.activated = Some(Ok(RuntimeState::Serving));
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert!(!finish.completion.expect("completion").restarted);
    }

    #[test]
    fn maintenance_counts_a_restart_an_unsettled_pass_made() {
        // The gateway exited (recorded), a pass restarted it but lost its claim before it
        // settled: the next pass finds it serving, and the restart still counts once.
        let mut facts = maintenance();
        facts.down_recorded = true;
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::Serving));
        p.retired = Some(Ok(()));
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert!(finish.completion.expect("completion").restarted);
        facts.kind = PassKind::Deploy;
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert!(!finish.completion.expect("completion").restarted);
    }

    #[test]
    fn maintenance_of_a_revision_no_longer_active_or_wanted_ends() {
        let mut facts = maintenance();
        facts.agent.active_revision_id = None;
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::done(ReasonCode::RevisionMaintenanceSuperseded)
        );
        let mut facts = maintenance();
        facts.agent.desired_runtime_state = DesiredRuntimeState::Stopped;
        assert_eq!(
            outcome(plan(&facts, &Progress::default())),
            Outcome::done(ReasonCode::RevisionMaintenanceSuperseded)
        );
    }

    #[test]
    fn a_failed_activation_rolls_back_to_the_predecessor_and_fails_the_revision() {
        let facts = redeploy();
        let mut p = ready();
        let mut failure =
            ComputeError::permanent(ReasonCode::RuntimeConfigurationInvalid, "refused");
        failure.output = vec!["Invalid config: bogusTopLevelKey".into()];
        p.activated = Some(Err(failure));
        assert_eq!(plan(&facts, &p), Step::RollBack);
        p.restored = Some(Ok(()));
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert!(finish.rolled_back);
        assert!(finish.completion.is_none());
        let previous = facts.active.as_ref().expect("previous");
        assert_eq!(
            finish.outcome,
            Outcome::Permanent(
                ReasonCode::RuntimeConfigurationInvalid,
                Some(json!({
                    "rolledBack": true,
                    "previousRevisionId": previous.id.as_str(),
                    "previousRevision": 1,
                    "output": ["Invalid config: bogusTopLevelKey"],
                }))
            )
        );
    }

    #[test]
    fn a_transient_activation_failure_also_rolls_back_rather_than_retrying_the_outage() {
        let facts = redeploy();
        let mut p = ready();
        p.activated = Some(Err(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "exit 1",
        )));
        assert_eq!(plan(&facts, &p), Step::RollBack);
        p.restored = Some(Err(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "exit 1",
        )));
        let Step::Finish(finish) = plan(&facts, &p) else {
            panic!("finish");
        };
        assert!(!finish.rolled_back);
        let Outcome::Permanent(code, Some(data)) = finish.outcome else {
            panic!("permanent");
        };
        assert_eq!(code, ReasonCode::RuntimeStartupFailed);
        assert_eq!(data["rolledBack"], false);
        assert_eq!(data["rollbackCode"], "RUNTIME_STARTUP_FAILED");
    }

    #[test]
    fn a_dependency_failure_during_activation_is_retried_without_a_rollback() {
        let facts = redeploy();
        let mut p = ready();
        for code in [
            ReasonCode::DependencyUnavailable,
            ReasonCode::KubernetesApiUnavailable,
        ] {
            p.activated = Some(Err(ComputeError::transient(code, "connection refused")));
            assert_eq!(outcome(plan(&facts, &p)), Outcome::retry(code));
        }
    }

    #[test]
    fn a_first_deploy_that_fails_to_start_is_retried_and_never_published() {
        let facts = first_deploy();
        let mut p = ready();
        p.activated = Some(Err(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "exit 1",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::RuntimeStartupFailed)
        );
        p.activated = Some(Err(ComputeError::permanent(
            ReasonCode::RuntimeConfigurationInvalid,
            "x",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::permanent(ReasonCode::RuntimeConfigurationInvalid)
        );
        // What the gateway printed reaches the failed deployment.
        p.activated = Some(Err(ComputeError::permanent(
            ReasonCode::RuntimeConfigurationInvalid,
            "x",
        )
        .with_output(vec!["Invalid config".into()])));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::Permanent(
                ReasonCode::RuntimeConfigurationInvalid,
                Some(json!({"output": ["Invalid config"]}))
            )
        );
    }

    #[test]
    fn a_pending_activation_waits_instead_of_rolling_back() {
        let facts = redeploy();
        let mut p = ready();
        p.activated = Some(Err(ComputeError::pending(
            ReasonCode::RevisionIncomplete,
            "rolling",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::pending(ReasonCode::RevisionIncomplete)
        );
    }

    #[test]
    fn a_retire_failure_after_publication_is_left_to_the_next_pass() {
        let facts = redeploy();
        let mut p = ready();
        p.activated = Some(Ok(RuntimeState::NotCurrent));
        p.published = Some(Publish::Published);
        p.retired = Some(Err(ComputeError::transient(
            ReasonCode::HostUnavailable,
            "down",
        )));
        assert_eq!(
            outcome(plan(&facts, &p)),
            Outcome::retry(ReasonCode::HostUnavailable)
        );
    }
}
