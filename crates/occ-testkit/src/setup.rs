//! Writing test state straight into the store, past the controller and its authorization.
//!
//! The store's admission mutators take an [`Authorized`] transaction, which needs the
//! [`Evidence`] of an allowing decision. Tests that set up rows directly (and the store's own
//! conformance suite) get it from the real decision function, asked about an Installation
//! administrator that exists only in memory: the evidence names records that are in no database.

use occ_core::authz::{Action, Decision, Evidence, ResourceRef, administrator_permissions, decide};
use occ_core::iam::{AccessBinding, Identity, IdentityKind, Role};
use occ_core::{IamId, InstallationId, Timestamp};
use occ_store::{Authorized, Store};

/// Evidence that an (in-memory) Installation administrator may administer the Installation.
#[expect(
    clippy::disallowed_methods,
    reason = "test set-up mints its evidence through the real decision function"
)]
pub fn setup_evidence() -> Evidence {
    let now = Timestamp::now();
    let administrator = service_principal(now);
    let role = Role {
        id: IamId::generate_role(true),
        namespace_id: None,
        name: None,
        permissions: administrator_permissions(),
        created_at: now,
    };
    let binding = AccessBinding {
        id: IamId::generate_binding(""),
        namespace_id: None,
        subject_id: administrator.id.clone(),
        role_id: role.id.clone(),
        resource: None,
        runtime_role: None,
        created_at: now,
    };
    match decide(
        Some(&administrator),
        None,
        [(&binding, &role)],
        &[],
        Action::Administer,
        &ResourceRef::installation(&InstallationId::generate()),
    ) {
        Decision::Allowed(evidence) => evidence,
        Decision::Denied { reason, .. } => panic!("the set-up administrator was refused: {reason}"),
    }
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
    Authorized::new(tx, setup_evidence())
}
