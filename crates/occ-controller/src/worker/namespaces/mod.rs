//! Namespace work: ensure (`provisioning → ready | failed`) and delete (`deleting →`
//! tombstone, with the Namespace's IAM policy removed).
//!
//! A pass reads its facts, decides in [`plan`] (pure), and runs Compute and the hooks under the
//! work item's lease with no row locked; the settling transaction calls no Driver.

use occ_core::ReasonCode;
use occ_core::Timestamp;
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceRef};
use occ_core::resource::{Namespace, NamespaceStatus};
use occ_drivers::compute::{ComputeError, Convergence, NamespaceTarget};
use occ_store::queue::Claim;
use serde_json::json;

use super::{Outcome, PassError, PassOutcome, Worker, no_extra};

mod plan;

use plan::{Facts, Progress, Settlement, Step, plan, settlement};

impl Worker {
    /// `namespace:<id>:reconcile:ready`
    pub(crate) async fn namespace_ensure(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        self.namespace_pass(claim, NamespaceStatus::Provisioning)
            .await
    }

    /// `namespace:<id>:reconcile:deleted`
    pub(crate) async fn namespace_delete(&self, claim: &Claim) -> Result<PassOutcome, PassError> {
        self.namespace_pass(claim, NamespaceStatus::Deleting).await
    }

    /// Reads the facts, then follows [`plan::plan`]: authorization and Compute are the only
    /// I/O between the read and the settling transaction, and no row is locked while Compute
    /// or a hook runs.
    async fn namespace_pass(
        &self,
        claim: &Claim,
        expected: NamespaceStatus,
    ) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let mut tx = self.store().begin_read().await?;
        let facts = Facts {
            expected,
            namespace: tx.namespace_get(&item.namespace_id).await?,
            installation: tx.installation_get().await?.map(|i| i.id),
        };
        drop(tx);
        let mut progress = Progress::default();
        loop {
            match plan(&facts, &progress) {
                Step::Superseded => {
                    return self
                        .settle(claim, Outcome::done(ReasonCode::SupersededTarget), no_extra)
                        .await;
                }
                Step::Authorize(decisions) => {
                    progress.authorized = Some(self.authorize_all(item, &decisions, &facts).await?);
                }
                step @ (Step::Prepare(ns) | Step::Remove(ns)) => {
                    let target = NamespaceTarget {
                        id: ns.id.clone(),
                        name: ns.name.to_string(),
                        existing_namespace: ns.existing_namespace.clone(),
                    };
                    let ensure = matches!(step, Step::Prepare(_));
                    let observed = self
                        .effect(claim, async {
                            if ensure {
                                self.prepare_namespace(&target).await
                            } else {
                                self.remove_namespace(&target).await
                            }
                        })
                        .await?;
                    if let Err(e) = &observed {
                        tracing::warn!(namespace_id = %target.id, code = %e.code, message = %e.message, "namespace effect failed");
                    }
                    progress.converged = Some(observed);
                }
                Step::Finish {
                    namespace: ns,
                    outcome,
                    converged,
                } => {
                    return self
                        .finish_namespace(claim, &facts, ns, outcome, converged)
                        .await;
                }
            }
        }
    }

    /// Each decision in turn; the first refusal (audited where it was decided) ends the pass.
    async fn authorize_all(
        &self,
        item: &occ_core::work::WorkItem,
        decisions: &[(Action, ResourceRef)],
        facts: &Facts,
    ) -> Result<Result<(), Outcome>, PassError> {
        let req = self.request_for(item);
        for (action, target) in decisions {
            let tx = self.store().begin_read().await?;
            if let Err(e) = self
                .controller
                .authorize_in(tx, &req, *action, target, facts.audit_name())
                .await
            {
                return Ok(Err(self.authorization_outcome(item, &e).await?));
            }
        }
        Ok(Ok(()))
    }

    /// Compute prepares the Namespace, then each hook in order; pending anywhere is pending.
    async fn prepare_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        if self.compute.ensure_namespace(ns).await? == Convergence::Pending {
            return Ok(Convergence::Pending);
        }
        for hook in &self.namespace_hooks {
            if hook.after_namespace_prepared(ns).await? == Convergence::Pending {
                tracing::debug!(namespace_id = %ns.id, hook = hook.name(), "namespace hook pending");
                return Ok(Convergence::Pending);
            }
        }
        Ok(Convergence::Done)
    }

    /// Each hook removes its part (reverse order), then Compute; done only when all are.
    async fn remove_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        for hook in self.namespace_hooks.iter().rev() {
            if hook.before_namespace_delete(ns).await? == Convergence::Pending {
                tracing::debug!(namespace_id = %ns.id, hook = hook.name(), "namespace hook pending");
                return Ok(Convergence::Pending);
            }
        }
        self.compute.delete_namespace(ns).await
    }

    /// Settles Namespace work with its state change and lifecycle evidence.
    async fn finish_namespace(
        &self,
        claim: &Claim,
        facts: &Facts,
        ns: &Namespace,
        outcome: Outcome,
        convergence: Option<bool>,
    ) -> Result<PassOutcome, PassError> {
        let ensure = facts.ensure();
        let action_name = facts.action_name();
        let req = self.request_for(&claim.item);
        let compute_id = self.compute.selection().identity.id.clone();
        // Repeated identical pending observations are recorded once (the queue's own evidence
        // is de-duplicated the same way).
        let repeated_pending = match &outcome {
            Outcome::Pending(code) => {
                let mut tx = self.store().begin_read().await?;
                tx.work_latest_evidence(&claim.item.key).await?
                    == Some(("success".into(), code.as_str().to_owned()))
            }
            _ => false,
        };
        self.settle(claim, outcome, async |tx, settled, outcome| {
            match settlement(ensure, settled) {
                Settlement::Provisioned(ready) => {
                    tx.namespace_settle_provisioning(&ns.id, ready).await?;
                }
                Settlement::Tombstone => {
                    let removed = tx.iam_remove_namespace_policy(&ns.id).await?;
                    tx.namespace_tombstone(&ns.id, Timestamp::now()).await?;
                    let event = self
                        .controller
                        .event(
                            &req,
                            AuditKind::Mutation,
                            "openclaw.namespaces.lifecycle.policy-removed",
                            &ResourceRef::namespace(&ns.id),
                            AuditOutcome::Success,
                        )
                        .detail("removedBindingIds", json!(removed));
                    tx.audit_append(&event).await?;
                }
                Settlement::Unchanged => {}
            }
            // A refusal was audited as a denial when it was decided.
            let denied = matches!(
                outcome.code(),
                ReasonCode::AuthorizationDenied | ReasonCode::ActorRevoked
            );
            if denied || repeated_pending {
                return Ok(());
            }
            let success = matches!(outcome, Outcome::Done(..) | Outcome::Pending(..));
            let mut event = self
                .controller
                .event(
                    &req,
                    AuditKind::Mutation,
                    action_name,
                    &ResourceRef::namespace(&ns.id),
                    if success {
                        AuditOutcome::Success
                    } else {
                        AuditOutcome::Failure
                    },
                )
                .reason_code(outcome.code().as_str())
                .detail("computeDriverId", compute_id.as_str());
            if let Some(done) = convergence {
                let key = if ensure {
                    "namespaceReady"
                } else {
                    "namespaceDeleted"
                };
                event = event.detail(key, done);
            }
            if matches!(outcome, Outcome::Pending(..)) {
                event = event.detail("convergencePending", true);
            }
            tx.audit_append(&event).await
        })
        .await
        .inspect_err(|e| {
            if let PassError::Store(inner) = e {
                tracing::warn!(error = %inner, "namespace work not settled");
            }
        })
    }
}
