//! The controller worker: turns queued work into Compute effects and records the outcome.
//!
//! Each pass claims one item under a lease (at most one live claim per Agent or Namespace lane,
//! whatever the number of workers), re-authorizes the item's *original* requester on fresh
//! policy, runs the Compute effects under [`lease::Lease`], and settles the item in one fenced
//! transaction together with the platform state it changes and its audit evidence. A worker that
//! lost its claim publishes nothing; the next claimant re-runs the (idempotent) effects.
//!
//! Outcomes ([`Outcome`]): done (complete), pending (defer: convergence; the attempt is
//! refunded and the item is looked at again after a delay that grows with its age), retry (a
//! dependency failed: backoff, the attempt is spent; exhausted attempts fail the item), permanent
//! (fail now). A pending item older than the convergence deadline (measured from admission)
//! fails with `CONVERGENCE_DEADLINE_EXCEEDED`.
//!
//! Work kinds: Namespace ensure/delete ([`namespaces`]), revision reconcile and maintenance
//! ([`revisions`]), Agent stop and delete ([`agents`]), Agent provisioning ([`provisioning`]). Gateway exits the Compute Driver
//! reports bring the maintenance pass forward ([`exits`]).

mod agents;
mod exits;
pub mod lease;
mod namespaces;
mod provisioning;
mod revisions;

pub(crate) use revisions::revision_target;

use std::sync::Arc;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::authz::{AuthMethod, Caller};
use occ_core::work::{WorkItem, WorkState, WorkTarget, pending_recheck_delay, retry_backoff};
use occ_core::{AdmissionDecisionId, Error, ErrorCode, RequestId};
use occ_drivers::compute::{Compute, ComputeError, FailureClass, NamespaceHook};
use occ_store::queue::{Claim, QueueOptions};
use occ_store::{Store, StoreError, Tx};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::{Controller, Request};
use lease::{ClaimLost, Lease};

/// How long in-flight work may finish after a shutdown request before it is abandoned.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Worker tuning.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// How long an idle loop waits for new work before polling again.
    pub poll_interval: Duration,
    /// Claim lease; renewed every third of it during effects.
    pub lease: Duration,
    /// Attempts before a retried item fails permanently.
    pub max_attempts: u32,
    /// Pending work older than this (since admission) fails.
    pub convergence_timeout: Duration,
    /// Items processed at once by this process (each in its own lane).
    pub concurrency: usize,
    /// Expired claims released per recovery pass.
    pub recover_batch: u32,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(250),
            lease: Duration::from_secs(5),
            max_attempts: 5,
            convergence_timeout: Duration::from_secs(900),
            concurrency: 4,
            recover_batch: 100,
        }
    }
}

/// How one claimed pass ended (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassOutcome {
    /// Completed.
    Success,
    /// Deferred: convergence pending.
    Pending,
    /// Back to the queue after a dependency failure.
    Retry,
    /// Failed permanently.
    Permanent,
    /// The claim was lost; nothing was published.
    ClaimLost,
    /// The outcome could not be recorded (the database failed); the lease will expire.
    Error,
}

impl PassOutcome {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            PassOutcome::Success => "success",
            PassOutcome::Pending => "pending",
            PassOutcome::Retry => "retry",
            PassOutcome::Permanent => "permanent",
            PassOutcome::ClaimLost => "claim_lost",
            PassOutcome::Error => "error",
        }
    }
}

/// What a handler decided about its item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Complete with a reason code and optional result data.
    Done(ReasonCode, Option<Value>),
    /// Convergence pending.
    Pending(ReasonCode),
    /// A dependency failed.
    Retry(ReasonCode),
    /// Fail now, with optional result data.
    Permanent(ReasonCode, Option<Value>),
}

impl Outcome {
    pub(crate) fn done(code: ReasonCode) -> Self {
        Outcome::Done(code, None)
    }
    pub(crate) fn permanent(code: ReasonCode) -> Self {
        Outcome::Permanent(code, None)
    }
    pub(crate) fn retry(code: ReasonCode) -> Self {
        Outcome::Retry(code)
    }
    pub(crate) fn pending(code: ReasonCode) -> Self {
        Outcome::Pending(code)
    }

    /// The outcome a Compute failure calls for.
    pub(crate) fn from_compute(err: &ComputeError) -> Self {
        match err.class {
            FailureClass::Pending => Outcome::Pending(err.code),
            FailureClass::Transient => Outcome::Retry(err.code),
            // The workload's last (redacted) output lines say why it failed.
            FailureClass::Permanent => Outcome::Permanent(
                err.code,
                (!err.output.is_empty()).then(|| serde_json::json!({ "output": err.output })),
            ),
        }
    }

    pub(crate) fn code(&self) -> ReasonCode {
        match self {
            Outcome::Done(c, _)
            | Outcome::Pending(c)
            | Outcome::Retry(c)
            | Outcome::Permanent(c, _) => *c,
        }
    }
}

/// Where a settled item ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Completed.
    Succeeded,
    /// Back in the queue (deferred or retried).
    Requeued,
    /// Failed permanently (directly, by exhausted retries, or by the deadline).
    Failed,
}

/// Failures inside a handler that are not decisions about the item.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PassError {
    /// The claim is gone.
    #[error(transparent)]
    ClaimLost(#[from] ClaimLost),
    /// Platform state could not be read or written.
    #[error("platform state: {0}")]
    Store(#[from] StoreError),
}

/// The worker.
pub struct Worker {
    pub(crate) controller: Arc<Controller>,
    pub(crate) compute: Arc<dyn Compute>,
    pub(crate) settings: WorkerSettings,
    pub(crate) metrics: Option<Arc<Metrics>>,
    pub(crate) namespace_hooks: Vec<Arc<dyn NamespaceHook>>,
}

impl Worker {
    /// A worker driving `compute` for the controller's installation.
    pub fn new(
        controller: Arc<Controller>,
        compute: Arc<dyn Compute>,
        settings: WorkerSettings,
    ) -> Self {
        Self {
            controller,
            compute,
            settings,
            metrics: None,
            namespace_hooks: Vec::new(),
        }
    }

    /// Records pass metrics into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Other Drivers' work around Namespace preparation and removal, in selection order.
    pub fn with_namespace_hooks(mut self, hooks: Vec<Arc<dyn NamespaceHook>>) -> Self {
        self.namespace_hooks = hooks;
        self
    }

    pub(crate) fn store(&self) -> &Store {
        &self.controller.store
    }

    pub(crate) fn queue(&self) -> QueueOptions {
        QueueOptions {
            lease: self.settings.lease,
            max_attempts: self.settings.max_attempts,
        }
    }

    /// Runs until `shutdown` turns true: `concurrency` loops claim and process items; one of
    /// them also releases expired claims of crashed workers. On shutdown no new item is claimed;
    /// in-flight items get 30 s to finish and are then abandoned to their leases.
    pub async fn run(self: Arc<Self>, shutdown: watch::Receiver<bool>) -> Result<(), Error> {
        tracing::info!(
            compute = %self.compute.selection().identity.id,
            concurrency = self.settings.concurrency,
            "worker.started"
        );
        let mut loops = tokio::task::JoinSet::new();
        if let Some(exits) = self.compute.gateway_exits() {
            let worker = self.clone();
            let shutdown = shutdown.clone();
            loops.spawn(async move { worker.watch_gateway_exits(exits, shutdown).await });
        }
        for index in 0..self.settings.concurrency.max(1) {
            let worker = self.clone();
            let shutdown = shutdown.clone();
            loops.spawn(async move { worker.claim_loop(index, shutdown).await });
        }
        while let Some(joined) = loops.join_next().await {
            if let Err(e) = joined {
                tracing::error!(error = %e, "worker loop panicked");
            }
        }
        tracing::info!("worker.stopped");
        Ok(())
    }

    async fn claim_loop(&self, index: usize, mut shutdown: watch::Receiver<bool>) {
        let mut listener = match self.store().work_listener().await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!(error = %e, "no work notifications; polling only");
                None
            }
        };
        while !*shutdown.borrow() {
            if index == 0 {
                match self
                    .store()
                    .work_recover(&self.queue(), self.settings.recover_batch)
                    .await
                {
                    Ok(report) => {
                        for key in &report.requeued {
                            tracing::info!(work = %key, code = ReasonCode::LeaseExpired.as_str(), "worker.recovered");
                        }
                        for key in &report.failed {
                            tracing::warn!(work = %key, "worker.recovered: attempts exhausted");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, code = "WORKER_UNAVAILABLE", "worker.error")
                    }
                }
            }
            match self.store().work_claim(&self.queue()).await {
                Ok(Some(claim)) => {
                    let key = claim.item.key.clone();
                    let mut stopping = shutdown.clone();
                    tokio::select! {
                        _ = self.process(claim) => {}
                        () = async {
                            let _ = stopping.wait_for(|s| *s).await;
                            tokio::time::sleep(SHUTDOWN_GRACE).await;
                        } => {
                            // Like a crash, by design safe: the lease expires and the next
                            // claimant re-runs the idempotent effects.
                            tracing::warn!(work = %key, "abandoning in-flight work at shutdown");
                        }
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, code = "WORKER_UNAVAILABLE", "worker.error"),
            }
            let wait = self.settings.poll_interval;
            tokio::select! {
                _ = shutdown.changed() => {}
                _ = async {
                    match listener.as_mut() {
                        Some(l) => { l.wait(wait).await; }
                        None => tokio::time::sleep(wait).await,
                    }
                } => {}
            }
        }
    }

    /// Claims and processes one available item, if any (for tests and benchmarks).
    pub async fn run_once(&self) -> Result<Option<(WorkItem, PassOutcome)>, Error> {
        let claim = self
            .store()
            .work_claim(&self.queue())
            .await
            .map_err(|e| Error::unavailable(e.to_string()))?;
        match claim {
            None => Ok(None),
            Some(claim) => {
                let item = claim.item.clone();
                let outcome = self.process(claim).await;
                Ok(Some((item, outcome)))
            }
        }
    }

    /// Processes one claimed item to a recorded outcome.
    pub async fn process(&self, claim: Claim) -> PassOutcome {
        let started = Instant::now();
        let kind = claim.item.target;
        let result = match kind {
            WorkTarget::NamespaceReady => self.namespace_ensure(&claim).await,
            WorkTarget::NamespaceDeleted => self.namespace_delete(&claim).await,
            WorkTarget::RevisionReconcile | WorkTarget::RevisionMaintenance => {
                self.revision_reconcile(&claim).await
            }
            WorkTarget::AgentStopped => self.agent_stop(&claim).await,
            WorkTarget::AgentDeleted => self.agent_delete(&claim).await,
            WorkTarget::AgentProvisioning => self.agent_provisioning(&claim).await,
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(PassError::ClaimLost(_)) => PassOutcome::ClaimLost,
            Err(PassError::Store(e)) => {
                tracing::warn!(work = %claim.key(), error = %e, "platform state unavailable during a pass");
                match self
                    .settle(
                        &claim,
                        Outcome::retry(ReasonCode::DependencyUnavailable),
                        no_extra,
                    )
                    .await
                {
                    Ok(o) => o,
                    Err(PassError::ClaimLost(_)) => PassOutcome::ClaimLost,
                    Err(PassError::Store(_)) => PassOutcome::Error,
                }
            }
        };
        let elapsed = started.elapsed();
        tracing::info!(
            work = %claim.key(),
            attempt = claim.item.attempt_count,
            operation = operation_name(kind),
            namespace_id = %claim.item.namespace_id,
            agent_id = claim.item.agent_id.as_ref().map(|a| a.as_str()).unwrap_or(""),
            outcome = outcome.as_str(),
            duration_ms = elapsed.as_millis() as u64,
            "worker.completed"
        );
        if let Some(m) = &self.metrics {
            m.record_pass(kind, outcome.as_str(), elapsed);
        }
        outcome
    }

    /// The request under which the worker acts for the item's original requester.
    pub(crate) fn request_for(&self, item: &WorkItem) -> Request {
        self.request_for_actor(&item.actor_id)
    }

    /// The request under which the worker acts for `actor` (the requester of some work).
    pub(crate) fn request_for_actor(&self, actor: &occ_core::IamId) -> Request {
        Request {
            id: RequestId::generate(),
            caller: Caller {
                principal_id: actor.clone(),
                method: AuthMethod::Work,
                key_namespace: None,
                session_id: None,
                key_id: None,
                admission_id: AdmissionDecisionId::generate(),
            },
            policy: None,
        }
    }

    /// Maps a failed re-authorization: a refusal is permanent (`ACTOR_REVOKED` when the
    /// requester no longer exists), anything else (IAM state unreadable) is retried — fail
    /// closed, never an effect without a decision.
    pub(crate) async fn authorization_outcome(
        &self,
        item: &WorkItem,
        err: &Error,
    ) -> Result<Outcome, PassError> {
        if err.code() != ErrorCode::Forbidden {
            return Ok(Outcome::retry(ReasonCode::DependencyUnavailable));
        }
        let mut tx = self.store().begin_read().await?;
        let exists = tx.identity_get(&item.actor_id).await?.is_some();
        Ok(if exists {
            Outcome::permanent(ReasonCode::AuthorizationDenied)
        } else {
            Outcome::permanent(ReasonCode::ActorRevoked)
        })
    }

    /// Runs a Compute effect under the item's lease.
    pub(crate) async fn effect<T>(
        &self,
        claim: &Claim,
        effect: impl std::future::Future<Output = T>,
    ) -> Result<T, ClaimLost> {
        Lease::new(self.store(), claim, self.settings.lease)
            .run(effect)
            .await
    }

    /// Records the outcome in one fenced transaction, with `extra` writes (platform state,
    /// audit) that depend on where the item ended up.
    pub(crate) async fn settle(
        &self,
        claim: &Claim,
        outcome: Outcome,
        extra: impl AsyncFnOnce(&mut Tx, Settled, &Outcome) -> Result<(), StoreError>,
    ) -> Result<PassOutcome, PassError> {
        let outcome = self.apply_deadline(claim, outcome);
        let mut tx = self.fenced(claim).await?;
        let (settled, pass) = match &outcome {
            Outcome::Done(code, data) => {
                tx.work_complete(claim, code.as_str(), data.clone()).await?;
                (Settled::Succeeded, PassOutcome::Success)
            }
            Outcome::Pending(code) => {
                tx.work_defer(
                    claim,
                    code.as_str(),
                    pending_recheck_delay(claim.age()),
                    false,
                )
                .await?;
                (Settled::Requeued, PassOutcome::Pending)
            }
            Outcome::Retry(code) => {
                let delay = retry_backoff(claim.item.attempt_count, rand::random::<f64>());
                match tx
                    .work_retry(claim, code.as_str(), delay, self.settings.max_attempts)
                    .await?
                {
                    WorkState::FailedPermanent => (Settled::Failed, PassOutcome::Permanent),
                    _ => (Settled::Requeued, PassOutcome::Retry),
                }
            }
            Outcome::Permanent(code, data) => {
                tx.work_fail(claim, code.as_str(), data.clone()).await?;
                (Settled::Failed, PassOutcome::Permanent)
            }
        };
        extra(&mut tx, settled, &outcome).await?;
        tx.commit().await.map_err(fence_error)?;
        Ok(pass)
    }

    /// A write transaction fenced by `claim`: it commits only while the claim is live, so a
    /// worker that lost its lease publishes nothing. Settling claimed work is not admission —
    /// the work was admitted with evidence and the requester was re-authorized before the
    /// effects — so this is a bare [`Tx`]: it runs the queue transitions and the settle-time
    /// state changes (provisioning ended, tombstones, the active-revision pointer, deletion
    /// finalizers), never an admission mutator.
    #[expect(
        clippy::disallowed_methods,
        reason = "settling claimed work: fenced by the claim, not by a new decision"
    )]
    pub(crate) async fn fenced(&self, claim: &Claim) -> Result<Tx, PassError> {
        let mut tx = self.store().begin().await?;
        tx.work_fence(claim, self.settings.lease)
            .await
            .map_err(fence_error)?;
        Ok(tx)
    }

    /// A pending item past the convergence deadline fails instead.
    fn apply_deadline(&self, claim: &Claim, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Pending(code) if claim.age() >= self.settings.convergence_timeout => {
                let timeout_ms = self.settings.convergence_timeout.as_millis() as u64;
                tracing::warn!(work = %claim.key(), last = %code, "convergence deadline exceeded");
                Outcome::Permanent(
                    ReasonCode::ConvergenceDeadlineExceeded,
                    Some(json!({"timeoutMs": timeout_ms})),
                )
            }
            other => other,
        }
    }
}

/// A failed fenced write: the claim is gone, or the database failed.
pub(crate) fn fence_error(e: StoreError) -> PassError {
    match e {
        StoreError::ClaimLost => PassError::ClaimLost(ClaimLost),
        other => PassError::Store(other),
    }
}

/// No extra writes when settling.
pub(crate) async fn no_extra(_: &mut Tx, _: Settled, _: &Outcome) -> Result<(), StoreError> {
    Ok(())
}

fn operation_name(target: WorkTarget) -> &'static str {
    match target {
        WorkTarget::NamespaceReady => "namespace.ensure",
        WorkTarget::NamespaceDeleted => "namespace.delete",
        WorkTarget::RevisionReconcile => "agent_revision.reconcile",
        WorkTarget::RevisionMaintenance => "agent_revision.maintenance",
        WorkTarget::AgentStopped => "agent.stop",
        WorkTarget::AgentDeleted => "agent.delete",
        WorkTarget::AgentProvisioning => "agent.provision",
    }
}
