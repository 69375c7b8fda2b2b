//! Claim heartbeat: an external effect runs only while the worker provably holds its lease.
//!
//! Before the effect starts the lease is renewed synchronously. While it runs, renewals go out
//! every third of the lease. Each renewal must be confirmed before the lease measured from the
//! *sending* of the previous confirmed renewal runs out — so a silent database connection can
//! never stretch a claim — and a failed or late renewal aborts the effect (its future is
//! dropped), no later than another worker could recover the item. Effects are idempotent, so an
//! aborted one is simply run again by the next claimant.

use std::future::Future;
use std::time::Duration;

use occ_store::Store;
use occ_store::queue::Claim;
use tokio::time::Instant;

/// The claim is gone (expired, recovered by another worker, or the database did not confirm a
/// renewal in time): nothing may be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the work claim was lost")]
pub struct ClaimLost;

/// Keeps one claim alive around external effects.
pub struct Lease<'a> {
    store: &'a Store,
    claim: &'a Claim,
    length: Duration,
}

impl<'a> Lease<'a> {
    /// A keeper for `claim` with leases of `length`.
    pub fn new(store: &'a Store, claim: &'a Claim, length: Duration) -> Self {
        Self {
            store,
            claim,
            length,
        }
    }

    /// The claim.
    pub fn claim(&self) -> &Claim {
        self.claim
    }

    /// Renews once; the deadline for the confirmation is the lease itself.
    async fn renew(&self) -> Result<(), ClaimLost> {
        match tokio::time::timeout(
            self.length,
            self.store.work_heartbeat(self.claim, self.length),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                tracing::debug!(work = %self.claim.key(), error = %e, "lease renewal failed");
                Err(ClaimLost)
            }
            Err(_) => Err(ClaimLost),
        }
    }

    /// Runs `effect` under the lease; `Err(ClaimLost)` when the lease could not be kept (the
    /// effect was then abandoned).
    pub async fn run<T>(&self, effect: impl Future<Output = T>) -> Result<T, ClaimLost> {
        let sent = Instant::now();
        self.renew().await?;
        let keep_alive = async {
            let mut confirmed_from = sent;
            let period = (self.length / 3).max(Duration::from_millis(1));
            loop {
                tokio::time::sleep(period).await;
                let sending = Instant::now();
                let budget = (confirmed_from + self.length).saturating_duration_since(sending);
                if budget.is_zero() {
                    return ClaimLost;
                }
                match tokio::time::timeout(budget, self.renew()).await {
                    Ok(Ok(())) => confirmed_from = sending,
                    _ => return ClaimLost,
                }
            }
        };
        tokio::select! {
            result = effect => Ok(result),
            lost = keep_alive => {
                tracing::warn!(work = %self.claim.key(), "lease lost during an external effect; abandoning it");
                Err(lost)
            }
        }
    }
}
