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
//! [`ssh::SshCompute`] (the same host code on operator-provisioned hosts, over SSH) — two
//! transports over `occ-host` — and [`kubernetes::KubernetesCompute`] (Deployments in tenant
//! namespaces). Test doubles of this trait are used by the worker's tests.
//!
//! What the verbs take and report (targets, context, convergence, readiness, runtime state,
//! [`ComputeError`]) is `occ_core::compute`, re-exported here.

use std::fmt;
use std::time::Duration;

mod selection;

pub mod kubernetes;
pub mod process;
pub mod ssh;

pub use occ_core::compute::{
    AgentTarget, ComputeError, Convergence, FailureClass, GatewayExit, LOG_READ_MAX_BYTES,
    LOG_TAIL_MAX_LINES, LogChunk, LogEntry, LogGap, LogPosition, LogQuery, NamespaceTarget,
    OUTPUT_LINES, Readiness, RevisionContext, RevisionTarget, RuntimeState, SecretText,
};
pub use occ_core::runtime_report::RuntimeReport;
pub use selection::{ComputeSelection, DEDICATED_AUTH_METHODS};

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

    /// Exits of gateways this Driver supervises itself, as they happen (a stop, retirement or
    /// replacement by the Driver is not an exit), when it can tell: the process Driver reaps the
    /// gateways it started. `None` when exits are only found by looking — the maintenance pass
    /// (re-activation) — as over SSH, under systemd or on Kubernetes. Each call subscribes anew.
    fn gateway_exits(&self) -> Option<tokio::sync::broadcast::Receiver<GatewayExit>>;

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

    /// The revision's workloads as they run now, for operators (`GET …/runtime`): Kubernetes
    /// Pods with their container statuses and Events, or the host Drivers' gateway process or
    /// unit as one Pod. Raw: the caller adds what occ recorded and sanitizes it
    /// ([`RuntimeReport::with_recorded`], [`RuntimeReport::sanitized`]). Nothing for a revision
    /// that is not installed. Read-only.
    async fn runtime_report(&self, rev: &RevisionTarget) -> Result<RuntimeReport, ComputeError>;
    /// One bounded read ([`LOG_READ_MAX_BYTES`]) of the revision's gateway output: raw lines
    /// (never redacted here: the caller redacts) and explicit gaps, with the position the next
    /// follow read resumes at. Nothing is stored.
    async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError>;
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
