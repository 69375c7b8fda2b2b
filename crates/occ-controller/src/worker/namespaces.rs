//! Namespace work: ensure (`provisioning → ready | failed`) and delete (`deleting →`
//! tombstone, with the Namespace's IAM policy removed).

use occ_core::ReasonCode;
use occ_core::Timestamp;
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceRef};
use occ_core::resource::{Namespace, NamespaceStatus};
use occ_drivers::compute::{ComputeError, Convergence, NamespaceTarget};
use occ_store::queue::Claim;
use serde_json::json;

use super::{Outcome, PassError, PassOutcome, Settled, Worker, no_extra};

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

    async fn namespace_pass(
        &self,
        claim: &Claim,
        expected: NamespaceStatus,
    ) -> Result<PassOutcome, PassError> {
        let item = &claim.item;
        let ensure = expected == NamespaceStatus::Provisioning;
        let action_name = if ensure {
            "openclaw.namespaces.lifecycle.ensure"
        } else {
            "openclaw.namespaces.lifecycle.delete"
        };
        let mut tx = self.store().begin_read().await?;
        let ns = tx.namespace_get(&item.namespace_id).await?;
        let installation = tx.installation_get().await?;
        drop(tx);
        let (Some(ns), Some(installation)) = (ns, installation) else {
            return self
                .settle(claim, Outcome::done(ReasonCode::SupersededTarget), no_extra)
                .await;
        };
        if ns.status != expected || ns.deleted_at.is_some() {
            // Already converged (or moved on): re-running is a no-op.
            return self
                .settle(claim, Outcome::done(ReasonCode::SupersededTarget), no_extra)
                .await;
        }

        // The original requester must still be allowed to do what it asked for.
        let req = self.request_for(item);
        let target = if ensure {
            ResourceRef::namespace_collection(&installation.id)
        } else {
            ResourceRef::namespace(&ns.id)
        };
        let (action, audit) = if ensure {
            (Action::Create, "openclaw.namespaces.create")
        } else {
            (Action::Delete, "openclaw.namespaces.delete")
        };
        let mut decisions = vec![(action, target)];
        if ensure && ns.existing_namespace.is_some() {
            // Adopting an operator's namespace is an Installation administrator's decision.
            decisions.push((
                Action::Administer,
                ResourceRef::installation(&installation.id),
            ));
        }
        for (action, target) in decisions {
            let tx = self.store().begin_read().await?;
            if let Err(e) = self
                .controller
                .authorize_in(tx, &req, action, &target, audit)
                .await
            {
                let outcome = self.authorization_outcome(item, &e).await?;
                return self
                    .finish_namespace(claim, &ns, outcome, action_name, None)
                    .await;
            }
        }

        let compute_target = NamespaceTarget {
            id: ns.id.clone(),
            name: ns.name.to_string(),
            existing_namespace: ns.existing_namespace.clone(),
        };
        let observed = self
            .effect(claim, async {
                if ensure {
                    self.prepare_namespace(&compute_target).await
                } else {
                    self.remove_namespace(&compute_target).await
                }
            })
            .await?;
        let (outcome, convergence) = match &observed {
            Ok(Convergence::Done) => (Outcome::done(ReasonCode::NamespaceReconciled), Some(true)),
            Ok(Convergence::Pending) => (
                Outcome::pending(ReasonCode::NamespaceIncomplete),
                Some(false),
            ),
            Err(e) => {
                tracing::warn!(namespace_id = %ns.id, code = %e.code, message = %e.message, "namespace effect failed");
                (Outcome::from_compute(e), None)
            }
        };
        self.finish_namespace(claim, &ns, outcome, action_name, convergence)
            .await
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
        ns: &Namespace,
        outcome: Outcome,
        action_name: &str,
        convergence: Option<bool>,
    ) -> Result<PassOutcome, PassError> {
        let ensure = ns.status == NamespaceStatus::Provisioning;
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
            match (ensure, settled) {
                (true, Settled::Succeeded) => {
                    tx.namespace_settle_provisioning(&ns.id, true).await?;
                }
                (true, Settled::Failed) => {
                    tx.namespace_settle_provisioning(&ns.id, false).await?;
                }
                (false, Settled::Succeeded) => {
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
                _ => {}
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
