//! Writing test state straight into the store, past the controller and its authorization.
//!
//! The store's admission mutators take an [`Authorized`] transaction, which needs the
//! [`Evidence`] of the decision each mutation requires. Tests that set up rows directly (and
//! the store's own conformance suite) act with bootstrap's authority, as `occ bootstrap` does:
//! no identity is decided about, and every mutator accepts it.

use occ_core::authz::Evidence;
use occ_core::iam::{Identity, IdentityKind};
use occ_core::{IamId, Timestamp};
use occ_store::{Authorized, Store};

/// The authority test set-up writes with (bootstrap's).
#[expect(
    clippy::disallowed_methods,
    reason = "test set-up writes state directly, with bootstrap's authority"
)]
pub fn setup_evidence() -> Evidence {
    Evidence::bootstrap()
}

/// A fresh Installation-wide (non-Agent) service principal.
pub(crate) fn service_principal(created_at: Timestamp) -> Identity {
    Identity {
        id: IamId::generate_service_principal(),
        kind: IdentityKind::ServicePrincipal,
        namespace_id: None,
        agent_id: None,
        issuer: None,
        subject: None,
        created_at,
    }
}

/// A write transaction for setting up test state directly in the store.
#[expect(
    clippy::disallowed_methods,
    reason = "tests set up state directly in the store, bypassing the controller on purpose"
)]
pub async fn begin_setup(store: &Store) -> Authorized {
    let tx = store.begin().await.expect("begin a set-up transaction");
    Authorized::new(tx, setup_evidence()).expect("a write transaction")
}
