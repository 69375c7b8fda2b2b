//! The authorization choke point, and the only way an operation gets a transaction.
//!
//! An operation opens its transaction through [`Controller::read_authorized`] or
//! [`Controller::write_authorized`] (or their `_on_installation` forms, for targets named by the
//! Installation's id): the helper begins the transaction, reads the caller's policy in it and
//! applies `occ_core::authz::decide` *before* anything is looked up, so a caller without the grant
//! is refused (403) whether or not the resource exists. A write operation receives an
//! [`Authorized`] transaction — the store's admission mutators exist only on that type, and it is
//! made only from the [`Evidence`] of an allowing decision — so a mutation without a decision does
//! not compile. Further decisions the same operation needs (referenced Configurations, Secrets)
//! go through [`Controller::authorize_in`] on the same transaction.
//!
//! On denial the transaction is rolled back, an `authorization_denial` audit event is appended in
//! its own transaction (503 if that fails: fail closed) and the caller gets 403.
//!
//! `clippy.toml` keeps it the only way: `Store::begin` (a write transaction), `decide` and
//! `Evidence::bootstrap` are disallowed outside this module and the few places that write without
//! a caller to authorize (bootstrap, sign-in sessions, the worker's settlement, audit records that
//! must outlive a rollback — [`audit_in_own_transaction`]).

use std::borrow::BorrowMut;
use std::sync::Arc;

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{
    Action, Caller, Decision, Evidence, ReadEvidence, ResourceKind, ResourceRef, decide_standing_in,
};
use occ_core::resource::Installation;
use occ_core::{Error, ErrorCode, IamId, InstallationId, NamespaceId};
use occ_store::iam::PolicySnapshot;
use occ_store::{Authorized, Store, StoreError, Tx};
use serde_json::json;

use crate::{Controller, Request};

impl Controller {
    /// Opens a read session on which the caller was allowed `action` on `resource`; the proof
    /// (a [`ReadEvidence`], which no store mutator accepts) comes along for operations that
    /// audit what they do elsewhere (workspace file writes through the gateway).
    pub(crate) async fn read_authorized(
        &self,
        req: &Request,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
    ) -> Result<(Tx, ReadEvidence), Error> {
        let tx = self.store.begin_read().await?;
        let (tx, evidence) = self
            .authorize_caller(tx, req, action, resource, audit_action)
            .await?;
        Ok((tx, evidence.into_read()))
    }

    /// Opens a write transaction on which the caller was allowed `action` on `resource`: the only
    /// way an operation reaches the store's admission mutators.
    pub(crate) async fn write_authorized(
        &self,
        req: &Request,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        let tx = self.begin_write().await?;
        let (tx, evidence) = self
            .authorize_caller(tx, req, action, resource, audit_action)
            .await?;
        Ok(authorized(tx, evidence)?)
    }

    /// [`Controller::read_authorized`] for a target named by the Installation's id (read first
    /// in the same session; 404 before bootstrap).
    pub(crate) async fn read_authorized_on_installation(
        &self,
        req: &Request,
        action: Action,
        target: fn(&InstallationId) -> ResourceRef,
        audit_action: &str,
    ) -> Result<(Tx, Installation), Error> {
        let tx = self.store.begin_read().await?;
        let (tx, _, installation) = self
            .authorize_on_installation(tx, req, action, target, audit_action)
            .await?;
        Ok((tx, installation))
    }

    /// [`Controller::read_authorized_on_installation`] for an Installation administrator
    /// (`installation:administer`): IAM, accounts, keys, service principals, the inventory.
    pub(crate) async fn read_administering(
        &self,
        req: &Request,
        audit_action: &str,
    ) -> Result<(Tx, Installation), Error> {
        self.read_authorized_on_installation(
            req,
            Action::Administer,
            ResourceRef::installation,
            audit_action,
        )
        .await
    }

    /// [`Controller::write_authorized_on_installation`] for an Installation administrator.
    pub(crate) async fn write_administering(
        &self,
        req: &Request,
        audit_action: &str,
    ) -> Result<(Authorized, Installation), Error> {
        self.write_authorized_on_installation(
            req,
            Action::Administer,
            ResourceRef::installation,
            audit_action,
        )
        .await
    }

    /// [`Controller::write_authorized`] for a target named by the Installation's id (read first
    /// in the same transaction; 404 before bootstrap).
    pub(crate) async fn write_authorized_on_installation(
        &self,
        req: &Request,
        action: Action,
        target: fn(&InstallationId) -> ResourceRef,
        audit_action: &str,
    ) -> Result<(Authorized, Installation), Error> {
        let tx = self.begin_write().await?;
        let (tx, evidence, installation) = self
            .authorize_on_installation(tx, req, action, target, audit_action)
            .await?;
        Ok((authorized(tx, evidence)?, installation))
    }

    /// [`Controller::authorize_in`] of Installation `administer`: a further decision of an
    /// operation whose mutations need another (e.g. provisioning, which hands out grants).
    pub(crate) async fn authorize_administer_in<T: BorrowMut<Tx>>(
        &self,
        mut tx: T,
        req: &Request,
        audit_action: &str,
    ) -> Result<T, Error> {
        let installation = installation_required(tx.borrow_mut()).await?;
        self.authorize_in(
            tx,
            req,
            Action::Administer,
            &ResourceRef::installation(&installation.id),
            audit_action,
        )
        .await
    }

    /// A decision on a transaction the caller already holds: the further decisions of an
    /// operation (a referenced Configuration, a consumed Secret, the Namespace of an IAM route) —
    /// its evidence stays the first decision's — and the worker's re-authorization on its own
    /// read sessions. It hands back what it was given, so it never makes a transaction
    /// [`Authorized`].
    pub(crate) async fn authorize_in<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
    ) -> Result<T, Error> {
        let (tx, _) = self
            .authorize_caller(tx, req, action, resource, audit_action)
            .await?;
        Ok(tx)
    }

    /// [`Controller::authorize_in`] for another principal (an Agent's service principal at
    /// deploy); `denied_message`, if any, replaces the generic 403 message.
    #[expect(
        clippy::too_many_arguments,
        reason = "the choke point's inputs, explicit"
    )]
    pub(crate) async fn authorize_in_as<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        principal: &IamId,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
        denied_message: Option<String>,
    ) -> Result<T, Error> {
        let (tx, _) = self
            .decide_or_refuse(
                tx,
                req,
                principal,
                None,
                &[action],
                resource,
                audit_action,
                denied_message,
            )
            .await?;
        Ok(tx)
    }

    /// The one place an operation's write transaction is opened.
    #[expect(
        clippy::disallowed_methods,
        reason = "the authorization helper opens the write transactions it authorizes"
    )]
    async fn begin_write(&self) -> Result<Tx, Error> {
        Ok(self.store.begin().await?)
    }

    async fn authorize_on_installation(
        &self,
        mut tx: Tx,
        req: &Request,
        action: Action,
        target: fn(&InstallationId) -> ResourceRef,
        audit_action: &str,
    ) -> Result<(Tx, Evidence, Installation), Error> {
        let installation = installation_required(&mut tx).await?;
        let (tx, evidence) = self
            .authorize_caller(tx, req, action, &target(&installation.id), audit_action)
            .await?;
        Ok((tx, evidence, installation))
    }

    /// [`Controller::read_authorized`] where any of `actions` allows the operation (tried in
    /// order, e.g. `read_logs` with `administer` standing in); a denial is audited once, as the
    /// first action's.
    pub(crate) async fn read_authorized_either<const N: usize>(
        &self,
        req: &Request,
        actions: [Action; N],
        resource: &ResourceRef,
        audit_action: &str,
    ) -> Result<(Tx, ReadEvidence), Error> {
        let tx = self.store.begin_read().await?;
        let caller = &req.caller;
        let (tx, evidence) = self
            .decide_or_refuse(
                tx,
                req,
                &caller.principal_id,
                caller.key_namespace.as_ref(),
                &actions,
                resource,
                audit_action,
                None,
            )
            .await?;
        Ok((tx, evidence.into_read()))
    }

    /// Decides for the request's caller (with its key's Namespace scope).
    async fn authorize_caller<T: BorrowMut<Tx>>(
        &self,
        tx: T,
        req: &Request,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
    ) -> Result<(T, Evidence), Error> {
        let caller = &req.caller;
        self.decide_or_refuse(
            tx,
            req,
            &caller.principal_id,
            caller.key_namespace.as_ref(),
            &[action],
            resource,
            audit_action,
            None,
        )
        .await
    }

    /// Decides whether `principal` (with its key's Namespace scope) may do `action` on
    /// `resource`, on fresh policy, and either hands the transaction back with the evidence or —
    /// on denial — rolls it back, audits the denial (`audit_action`) in its own transaction and
    /// returns 403.
    #[expect(
        clippy::too_many_arguments,
        reason = "one choke point with every input explicit"
    )]
    async fn decide_or_refuse<T: BorrowMut<Tx>>(
        &self,
        mut tx: T,
        req: &Request,
        principal: &IamId,
        key_namespace: Option<&NamespaceId>,
        actions: &[Action],
        resource: &ResourceRef,
        audit_action: &str,
        denied_message: Option<String>,
    ) -> Result<(T, Evidence), Error> {
        let action = actions[0];
        let snapshot = self.policy_of(tx.borrow_mut(), req, principal).await?;
        // The first action's denial is the one recorded: the others only stand in for it.
        let (reason, records) =
            match decide_on(&snapshot, key_namespace, action, &actions[1..], resource) {
                Decision::Allowed(evidence) => return Ok((tx, evidence)),
                Decision::Denied { reason, records } => (reason, records),
            };
        drop(tx);
        let evidence = serde_json::to_value(&records).unwrap_or_default();
        Err(self
            .refuse(
                req,
                principal,
                action,
                resource,
                audit_action,
                reason,
                evidence,
                denied_message,
            )
            .await)
    }

    /// The principal's policy: for a read-only operation the one read while authenticating this
    /// same request (a separate statement either way under READ COMMITTED); anything that
    /// writes reads it inside its own transaction.
    async fn policy_of(
        &self,
        session: &mut Tx,
        req: &Request,
        principal: &IamId,
    ) -> Result<Arc<PolicySnapshot>, Error> {
        Ok(match &req.policy {
            Some(policy) if session.is_read_only() && *principal == req.caller.principal_id => {
                policy.clone()
            }
            _ => Arc::new(session.policy_snapshot(principal).await?),
        })
    }

    /// Audits a denial in its own transaction (503 if that fails: fail closed) and returns the
    /// 403 to answer.
    #[expect(
        clippy::too_many_arguments,
        reason = "everything a denial record names, explicit"
    )]
    async fn refuse(
        &self,
        req: &Request,
        principal: &IamId,
        action: Action,
        resource: &ResourceRef,
        audit_action: &str,
        reason: &str,
        evidence: serde_json::Value,
        denied_message: Option<String>,
    ) -> Error {
        let event = self
            .event(req, AuditKind::AuthorizationDenial, audit_action, resource, AuditOutcome::Denied)
            .reason_code("AUTHORIZATION_DENIED")
            .metadata("decisionReason", reason)
            .metadata(
                "authorization",
                json!({"principalId": principal.as_str(), "action": action.as_str(), "resource": resource}),
            )
            .detail("iamEvidence", evidence);
        if let Err(e) = audit_in_own_transaction(&self.store, &event).await {
            return Error::unavailable(format!("denial audit: {e}"));
        }
        match denied_message {
            Some(m) => Error::new(ErrorCode::Forbidden, m),
            None => Error::forbidden(),
        }
    }

    /// Runtime access to an exact Agent (its native Control UI): the caller may `use` the Agent
    /// and holds exactly one runtime role assignment on it — a binding of the caller itself
    /// (not a group's, not a broader scope's; Installation administration does not stand in)
    /// on that Agent with a `runtimeRole`. Hands back the read session, the evidence of `use`
    /// and the assigned role; a missing assignment is a denial like any other (audited, 403).
    pub(crate) async fn read_authorized_runtime_access(
        &self,
        req: &Request,
        agent: &ResourceRef,
        audit_action: &str,
        denied_message: &str,
    ) -> Result<(Tx, ReadEvidence, String), Error> {
        let mut tx = self.store.begin_read().await?;
        let caller = &req.caller;
        let snapshot = self.policy_of(&mut tx, req, &caller.principal_id).await?;
        let (reason, evidence) = match decide_on(
            &snapshot,
            caller.key_namespace.as_ref(),
            Action::Use,
            &[],
            agent,
        ) {
            Decision::Allowed(evidence) => {
                let mut assigned = snapshot.grants.iter().filter_map(|g| {
                    let b = &g.binding;
                    let exact = b.subject_id == caller.principal_id
                        && b.namespace_id == agent.namespace_id
                        && b.resource
                            .as_ref()
                            .is_some_and(|r| r.kind == agent.kind && r.id == agent.id);
                    exact.then_some(b.runtime_role.as_ref()).flatten()
                });
                match (assigned.next(), assigned.next()) {
                    (Some(role), None) => {
                        let role = role.clone();
                        return Ok((tx, evidence.into_read(), role));
                    }
                    (None, _) => {
                        // A caller allowed `use` learns that a missing Agent is missing.
                        let exists = match (&agent.namespace_id, agent.id.parse()) {
                            (Some(ns), Ok(id)) => tx.agent_get(ns, &id).await?.is_some(),
                            _ => false,
                        };
                        if !exists {
                            return Err(Error::not_found());
                        }
                        (
                            "no runtime role is assigned to the caller on the Agent",
                            serde_json::to_value(&evidence).unwrap_or_default(),
                        )
                    }
                    (Some(_), Some(_)) => (
                        "more than one runtime role is assigned to the caller on the Agent",
                        serde_json::to_value(&evidence).unwrap_or_default(),
                    ),
                }
            }
            Decision::Denied { reason, records } => {
                (reason, serde_json::to_value(&records).unwrap_or_default())
            }
        };
        drop(tx);
        Err(self
            .refuse(
                req,
                &caller.principal_id,
                Action::Use,
                agent,
                audit_action,
                reason,
                evidence,
                Some(denied_message.to_owned()),
            )
            .await)
    }

    /// A list route's per-item authorization: of `items` (of `kind` in `ns`, each with the id
    /// `id_of` gives), those the caller may read exactly, each decided silently like
    /// [`Controller::allowed`].
    pub(crate) async fn readable<T, I: std::fmt::Display>(
        tx: &mut Tx,
        req: &Request,
        ns: &NamespaceId,
        kind: ResourceKind,
        items: Vec<T>,
        id_of: impl Fn(&T) -> &I,
    ) -> Result<Vec<T>, Error> {
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        Ok(items
            .into_iter()
            .filter(|item| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::exact(kind, ns, id_of(item)),
                )
            })
            .collect())
    }

    /// Whether the caller may do `action` on `resource`, silently (list filtering): the same
    /// decision, whose evidence is dropped.
    pub(crate) fn allowed(
        snapshot: &PolicySnapshot,
        caller: &Caller,
        action: Action,
        resource: &ResourceRef,
    ) -> bool {
        decide_on(
            snapshot,
            caller.key_namespace.as_ref(),
            action,
            &[],
            resource,
        )
        .is_allowed()
    }

    /// The actions, of those `resource`'s kind supports, that the caller may do on it — the same
    /// decision as the choke point, asked silently (no audit record): a question about what the
    /// caller could do, not an attempt. Exact resources are never asked about `create` (creation
    /// is decided on the parent collection).
    pub(crate) fn allowed_actions(
        snapshot: &PolicySnapshot,
        caller: &Caller,
        resource: &ResourceRef,
        exact: bool,
    ) -> Vec<Action> {
        resource
            .kind
            .supported_actions()
            .iter()
            .copied()
            .filter(|a| !(exact && *a == Action::Create))
            .filter(|a| Self::allowed(snapshot, caller, *a, resource))
            .collect()
    }
}

/// A write transaction joined with the proof of the decision that allowed its operation: the
/// one place (besides bootstrap and test set-up) an [`Authorized`] is made.
#[expect(
    clippy::disallowed_methods,
    reason = "the choke point joins the write transactions it opened with their decisions"
)]
fn authorized(tx: Tx, evidence: Evidence) -> Result<Authorized, StoreError> {
    Authorized::new(tx, evidence)
}

/// The decision on a policy snapshot: the only call of `decide_standing_in` (and so of
/// `decide`).
#[expect(
    clippy::disallowed_methods,
    reason = "the choke point is where decisions are made"
)]
fn decide_on(
    snapshot: &PolicySnapshot,
    key_namespace: Option<&NamespaceId>,
    action: Action,
    stand_ins: &[Action],
    resource: &ResourceRef,
) -> Decision {
    decide_standing_in(
        snapshot.identity.as_ref(),
        key_namespace,
        snapshot.grants.iter().map(|g| (&g.binding, &g.role)),
        &snapshot.restrictions,
        action,
        stand_ins,
        resource,
    )
}

/// Appends an audit record in its own transaction, for records that must survive the
/// operation's rollback or outlive it: denials, refused mutations, outcomes of workspace file
/// writes. An audit record changes no platform state, so it needs no evidence.
#[expect(
    clippy::disallowed_methods,
    reason = "audit records that must outlive the operation's transaction change no platform state"
)]
pub(crate) async fn audit_in_own_transaction(
    store: &Store,
    event: &AuditEvent,
) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    tx.audit_append(event).await?;
    tx.commit().await
}

/// The Installation, or 404 before bootstrap.
pub(crate) async fn installation_required(tx: &mut Tx) -> Result<Installation, Error> {
    found(tx.installation_get().await?)
}

/// What a lookup found, or 404.
pub(crate) fn found<T>(value: Option<T>) -> Result<T, Error> {
    value.ok_or_else(Error::not_found)
}
