//! Compute: where Agents' OpenClaw gateways run.
//!
//! Admission only needs to know what the selected Driver supports ([`ComputeSelection`]); the
//! worker drives the runtime through the [`Compute`] contract. Every verb is idempotent, takes
//! the ids it acts on (never "what changed") and is safe to repeat after a crash or a lost
//! lease: the worker re-runs verbs whose outcome it did not record.
//!
//! Errors say what the worker should do ([`ComputeError`]): wait and look again (pending —
//! convergence, does not spend an attempt), retry with backoff (transient — a dependency
//! failed), or give up (permanent — ownership, configuration, an impossible request).
//!
//! Implementations: [`process::ProcessCompute`] (local gateway processes) and
//! [`ssh::SshCompute`] (the same host code on operator-provisioned hosts, over SSH). Test doubles of
//! this trait are used by the worker's tests.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use occ_core::resource::{AdmittedSpec, ExecutionMode, WorkspaceSetup};
use occ_core::{AgentId, IamId, NamespaceId, RevisionId};

mod selection;

pub mod account;
pub mod host;
pub mod kubernetes;
pub mod process;
pub mod ssh;
pub mod systemd;

pub use selection::ComputeSelection;

/// The Namespace a Compute verb acts on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceTarget {
    /// `ns_…`
    pub id: NamespaceId,
    /// Its display name.
    pub name: String,
    /// The operator's Kubernetes namespace it adopts (`existingNamespace`), if any: only a
    /// Driver whose selection adopts existing namespaces is ever given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_namespace: Option<String>,
}

/// The Agent a Compute verb acts on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentTarget {
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// `agt_…`
    pub agent_id: AgentId,
    /// The Agent's own service principal.
    pub service_principal_id: IamId,
}

/// One admitted revision, as the worker hands it to Compute.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevisionTarget {
    /// The Agent.
    pub agent: AgentTarget,
    /// `rev_…`
    pub revision_id: RevisionId,
    /// The revision number (1, 2, …): a higher number supersedes a lower one.
    pub revision: u64,
    /// The immutable admitted snapshot.
    pub spec: AdmittedSpec,
}

impl RevisionTarget {
    /// The execution mode frozen into the revision.
    pub fn execution_mode(&self) -> ExecutionMode {
        self.spec.harness.mode
    }
}

/// A secret value on its way to a workload. Never printed, never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    /// Wraps a value.
    pub fn new(value: String) -> Self {
        Self(value)
    }
    /// The value, for the one place that hands it to the workload.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretText(…)")
    }
}

/// What a revision needs at run time besides its snapshot, resolved by the worker from
/// authoritative state under the revision's own authorization.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RevisionContext {
    /// Environment variables the workload gets: the Configuration's Secret bindings.
    pub environment: BTreeMap<String, SecretText>,
    /// The harness credential of an `api_key` harnessAuth (the Driver decides how the harness
    /// receives it).
    pub harness_credential: Option<SecretText>,
    /// The Agent's staged workspace setup, if it was created with initial files: with the
    /// files while not completed, metadata only (verify the marker) afterwards.
    pub workspace_setup: Option<WorkspaceSetup>,
}

/// The outcome of a Namespace verb that did not fail outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convergence {
    /// Done: the Namespace is ready (ensure) or gone (delete).
    Done,
    /// Not yet; look again later.
    Pending,
}

/// What `prepare_revision` observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The revision can be activated.
    Ready,
    /// Not yet (`code` says why, e.g. `REVISION_INCOMPLETE`).
    Pending {
        /// Reason code for evidence and deployment progress.
        code: String,
    },
}

/// A revision's runtime as the Driver sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeState {
    /// Serving this revision and answering the native handshake.
    Serving,
    /// This revision's gateway is not running (never started, stopped, or crashed).
    NotRunning,
    /// Another revision is the one installed for the Agent.
    NotCurrent,
}

/// Where the worker or API reaches an Agent's gateway over the native protocol.
#[derive(Clone, PartialEq, Eq)]
pub struct GatewayAccess {
    /// `ws://…` or `wss://…`
    pub url: String,
    /// The operator credential (read from the Driver's store at each call).
    pub token: SecretText,
}

impl fmt::Debug for GatewayAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayAccess")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// How a Compute failure is handled by the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureClass {
    /// Convergence pending: look again soon; does not spend an attempt.
    Pending,
    /// A dependency failed: retry with backoff; spends an attempt.
    Transient,
    /// Cannot succeed: fail the work now.
    Permanent,
}

/// A Compute failure: its class, a reason code (`[A-Z0-9_]`, recorded in evidence and the
/// deployment status) and a message for logs (never secret values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[error("{code}: {message}")]
pub struct ComputeError {
    /// What the worker does.
    pub class: FailureClass,
    /// Reason code.
    pub code: String,
    /// Operator-facing detail.
    pub message: String,
    /// The last lines the workload printed before it failed (startup failures), already
    /// redacted of every secret value the Driver handed it; at most [`OUTPUT_LINES`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<String>,
}

/// How many output lines a [`ComputeError`] carries at most.
pub const OUTPUT_LINES: usize = 20;

impl ComputeError {
    /// Convergence pending.
    pub fn pending(code: &str, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Pending, code, message)
    }
    /// A dependency failed.
    pub fn transient(code: &str, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Transient, code, message)
    }
    /// Cannot succeed.
    pub fn permanent(code: &str, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Permanent, code, message)
    }
    fn new(class: FailureClass, code: &str, message: impl Into<String>) -> Self {
        Self {
            class,
            code: code.to_owned(),
            message: message.into(),
            output: Vec::new(),
        }
    }

    /// The same error with the workload's last output lines (redacted by the caller).
    pub fn with_output(mut self, lines: Vec<String>) -> Self {
        let skip = lines.len().saturating_sub(OUTPUT_LINES);
        self.output = lines.into_iter().skip(skip).collect();
        self
    }
}

/// The runtime side of a Compute Driver, as the worker drives it.
#[async_trait::async_trait]
pub trait Compute: Send + Sync + 'static {
    /// What admission needs to know (identity, supported modes and auth methods).
    fn selection(&self) -> &ComputeSelection;

    /// Whether it can apply staged workspace setup before a gateway starts.
    fn supports_workspace_setup(&self) -> bool;

    /// How often the worker re-runs an active revision's maintenance pass (re-prepare and
    /// re-activate, which restarts a crashed gateway), if at all.
    fn maintenance_interval(&self) -> Option<Duration>;

    /// Prepares per-Namespace infrastructure. Idempotent.
    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError>;

    /// Removes per-Namespace infrastructure (only ever called for an empty Namespace).
    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError>;

    /// Makes the revision activatable (snapshot staged, Agent storage present) without touching
    /// what serves now. A revision older than the installed one is never prepared.
    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError>;

    /// Makes the revision the one that serves and waits until its gateway answers the native
    /// handshake. Idempotent: an already serving revision is left alone; a crashed one is
    /// restarted.
    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError>;

    /// Puts `previous` back after `failed` — a newer revision of the same Agent — could not be
    /// activated: makes `previous` the one that serves again and waits until its gateway
    /// answers, exactly as [`Compute::activate_revision`] would, except that `failed` being
    /// installed does not make `previous` "older than the installed one". Only ever replaces
    /// `failed` (or nothing); any other installed revision is left alone and is an error.
    /// `previous` was never retired (the worker retires predecessors only after a successful
    /// activation). Idempotent.
    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError>;

    /// Stops the revision's gateway if it is the installed one; keeps workspace, state and
    /// snapshots. Idempotent.
    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError>;

    /// Stops the revision if installed and removes its snapshot; never touches a gateway that
    /// serves another revision. Idempotent.
    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError>;

    /// Removes everything the Agent has on this Compute (gateway, workspace, state). Idempotent:
    /// absence is success.
    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError>;

    /// What runs for the revision right now.
    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError>;

    /// How to reach the Agent's gateway, if this Compute exposes one to occ.
    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError>;
}

/// Work other Drivers do around a Namespace's Compute lifecycle (the reference's
/// `afterNamespacePrepared` / `beforeNamespaceDelete` hooks): run by the worker after Compute
/// prepared a Namespace, in order, and before Compute removes one, in reverse order. Both are
/// idempotent and report convergence like the Compute verbs.
#[async_trait::async_trait]
pub trait NamespaceHook: Send + Sync + 'static {
    /// A name for logs and evidence.
    fn name(&self) -> &'static str;

    /// Prepares what this Driver needs for the Namespace.
    async fn after_namespace_prepared(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError>;

    /// Removes what this Driver keeps for the (empty) Namespace.
    async fn before_namespace_delete(
        &self,
        ns: &NamespaceTarget,
    ) -> Result<Convergence, ComputeError>;
}
