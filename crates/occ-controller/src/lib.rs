//! The occ application layer. Every operation a client can perform is a method of
//! [`Controller`] that takes the authenticated [`Request`]; the HTTP layer only translates.
//!
//! **Authorization choke point.** Operations get their transaction from the helpers in
//! [`authorization`], which evaluate a fresh policy snapshot *before* any existence lookup (a
//! caller without the grant gets 403 even for a missing resource), and on denial roll the
//! transaction back, append an `authorization_denial` audit event in its own transaction (503 if
//! that fails: fail closed) and return 403. A write operation receives an
//! [`occ_store::Authorized`] transaction, the only receiver of the store's admission mutators. The
//! HTTP layer has no store handle, so it cannot reach state without passing here.
//!
//! **Audit.** Every mutation appends its audit event in the same transaction as the change
//! ([`Controller::event`] builds it with the request's metadata).

use std::sync::Arc;

use occ_store::iam::PolicySnapshot;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{Caller, Evidence, ResourceRef};
use occ_core::resource::{HarnessDescriptor, Installation};
use occ_core::{Error, RequestId};
use occ_drivers::compute::ComputeSelection;
use occ_drivers::configuration::ConfigurationDriver;
use occ_drivers::secret::SecretDriver;
use occ_store::Store;
use serde_json::json;

pub mod accounts;
mod admission;
pub mod agents;
pub mod auth;
mod authorization;
pub mod bootstrap;
pub mod chat;
pub mod configurations;
pub mod credential_sources;
pub mod deployment_runtime;
pub mod deployments;
pub mod iam;
pub mod inventory;
pub mod metrics;
pub mod models;
pub mod namespaces;
pub mod native_admin;
pub mod presets;
pub mod provisioning;
pub mod runtime_logs;
pub mod secrets;
pub mod service_accounts;
pub mod service_principals;
pub mod sign_in_limit;
pub mod worker;
pub mod workspace_files;

pub use auth::Authenticated;
pub use sign_in_limit::SignInLimiter;

/// The id of the native IAM Driver, recorded in audit evidence.
pub const IAM_DRIVER_ID: &str = "iam-native";

/// A Backend agents may select with `backendId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConfig {
    /// Backend id.
    pub id: String,
    /// Backend type (`chatgpt`, …).
    pub kind: String,
}

/// Settings of the application layer.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// The approved OpenClaw harness (its mode comes from each Agent).
    pub harness_id: String,
    /// The pinned OpenClaw version.
    pub harness_version: String,
    /// Version of the pinned Codex harness that dedicated revisions freeze (id `codex`).
    pub codex_version: String,
    /// Lifetime of a sign-in session.
    pub session_ttl: Duration,
    /// Secret for session keys (`GET /api/auth/session` → `sessionKey`).
    pub auth_secret: Vec<u8>,
    /// Configured Backends.
    pub backends: Vec<BackendConfig>,
    /// The stock workspace files of the pinned OpenClaw, when its runtime is installed (a stale
    /// `workspaceDefaultsId` is 409).
    pub workspace_defaults: Option<WorkspaceDefaults>,
}

impl ControllerSettings {
    /// The harness descriptor for an execution mode: OpenClaw inside the gateway for embedded
    /// Agents, the pinned Codex harness for dedicated ones.
    pub fn harness(&self, mode: occ_core::resource::ExecutionMode) -> HarnessDescriptor {
        let (id, version) = match mode {
            occ_core::resource::ExecutionMode::Embedded => {
                (self.harness_id.clone(), self.harness_version.clone())
            }
            occ_core::resource::ExecutionMode::Dedicated => (
                occ_core::native::harness::CODEX_RUNTIME.to_owned(),
                self.codex_version.clone(),
            ),
        };
        HarnessDescriptor { id, version, mode }
    }
}

/// The stock workspace files of the pinned OpenClaw and their digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceDefaults {
    /// Lowercase hex SHA-256 of `[[name, text], …]` (AGENTS, SOUL, IDENTITY, USER).
    pub id: String,
    /// File name → rendered stock text.
    pub files: std::collections::BTreeMap<String, String>,
}

/// Test-only fault injection points (never set in production composition).
#[derive(Clone, Default)]
pub struct FaultHooks {
    /// Called just before a Configuration write commits; an error aborts the commit as if the
    /// database had failed.
    pub before_configuration_commit: Option<Arc<dyn Fn() -> Result<(), Error> + Send + Sync>>,
}

impl std::fmt::Debug for FaultHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultHooks").finish_non_exhaustive()
    }
}

/// An authenticated request. Its fields are private and it is made only from an
/// [`auth::Authenticated`], which only this crate's authentication creates: code outside the
/// controller cannot act as a caller it did not authenticate.
#[derive(Debug, Clone)]
pub struct Request {
    id: RequestId,
    caller: Caller,
    /// The caller's policy read at authentication, if any (see `authorize_as`).
    policy: Option<Arc<PolicySnapshot>>,
}

impl Request {
    /// The request id (`req_…`).
    pub fn id(&self) -> &RequestId {
        &self.id
    }
    /// Who is calling.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

/// The application.
pub struct Controller {
    store: Store,
    configurations: ConfigurationDriver,
    secrets: SecretDriver,
    compute: ComputeSelection,
    settings: ControllerSettings,
    bootstrapped: AtomicBool,
    sign_in_limiter: SignInLimiter,
    hooks: FaultHooks,
    workspace: Option<Arc<dyn workspace_files::WorkspaceAccess>>,
    /// How chat turns reach Agents (the chat route).
    chat: Option<Arc<dyn chat::AgentChat>>,
    /// Chat turns in flight per caller.
    chat_turns: chat::TurnLimiter,
    /// The Compute Driver the runtime routes ask (`deployment_runtime`, `runtime_logs`).
    runtime: Option<Arc<dyn occ_drivers::compute::Compute>>,
    /// Per-caller limit of the logs route.
    runtime_log_limiter: runtime_logs::LogRateLimiter,
    /// The Backend's ServiceAccount Driver, when one is configured.
    accounts: Option<Arc<dyn occ_drivers::service_account::AccountDriver>>,
    /// Where model discovery reads providers' model lists, when it is configured.
    model_catalog: Option<Arc<dyn occ_drivers::model_catalog::ModelCatalog>>,
    /// Where Agents' Control UIs are offered, when they are.
    native_admin: Option<native_admin::NativeAdminSettings>,
    /// Sessions that ended here, for the Control UI sockets they opened.
    session_ends: native_admin::SessionEnds,
    /// Recent admissions of proxied Control UI requests, per pass.
    recent_admissions: native_admin::RecentAdmissions,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Builds the application from its parts.
    pub fn new(
        store: Store,
        configurations: ConfigurationDriver,
        secrets: SecretDriver,
        compute: ComputeSelection,
        settings: ControllerSettings,
    ) -> Self {
        Self {
            store,
            configurations,
            secrets,
            compute,
            settings,
            bootstrapped: AtomicBool::new(false),
            sign_in_limiter: SignInLimiter::default(),
            hooks: FaultHooks::default(),
            workspace: None,
            chat: None,
            chat_turns: chat::TurnLimiter::default(),
            runtime: None,
            runtime_log_limiter: runtime_logs::LogRateLimiter::default(),
            accounts: None,
            model_catalog: None,
            native_admin: None,
            session_ends: native_admin::SessionEnds::default(),
            recent_admissions: native_admin::RecentAdmissions::default(),
        }
    }

    /// Gives the controller a Backend's ServiceAccount Driver (provider accounts and issued
    /// credentials for ServiceAccounts).
    pub fn with_account_driver(
        mut self,
        driver: Arc<dyn occ_drivers::service_account::AccountDriver>,
    ) -> Self {
        self.accounts = Some(driver);
        self
    }

    /// Gives the controller the model catalog that model discovery reads.
    pub fn with_model_catalog(
        mut self,
        catalog: Arc<dyn occ_drivers::model_catalog::ModelCatalog>,
    ) -> Self {
        self.model_catalog = Some(catalog);
        self
    }

    /// Gives the controller access to Agents' live workspaces (the API's file routes).
    pub fn with_workspace_access(
        mut self,
        access: Arc<dyn workspace_files::WorkspaceAccess>,
    ) -> Self {
        self.workspace = Some(access);
        self
    }

    /// Gives the controller a way to talk to Agents (the chat route).
    pub fn with_chat(mut self, chat: Arc<dyn chat::AgentChat>) -> Self {
        self.chat = Some(chat);
        self
    }

    /// Installs fault hooks (tests).
    pub fn with_hooks(mut self, hooks: FaultHooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Execution modes the installation's Compute Driver runs.
    pub fn execution_modes(&self) -> Vec<&'static str> {
        self.compute
            .execution_modes
            .iter()
            .map(|m| m.as_str())
            .collect()
    }

    /// The settings.
    pub fn settings(&self) -> &ControllerSettings {
        &self.settings
    }

    /// The Installation, if bootstrapped. Once seen it is cached (it is never removed).
    pub async fn installation(&self) -> Result<Option<Installation>, Error> {
        let mut tx = self.store.begin_read().await?;
        let installation = tx.installation_get().await?;
        if installation.is_some() {
            self.bootstrapped.store(true, Ordering::Relaxed);
        }
        Ok(installation)
    }

    /// Whether the Installation exists (cached once true).
    pub async fn is_bootstrapped(&self) -> Result<bool, Error> {
        if self.bootstrapped.load(Ordering::Relaxed) {
            return Ok(true);
        }
        Ok(self.installation().await?.is_some())
    }

    /// An audit event about `resource`, attributed to the caller, with the request metadata.
    pub(crate) fn event(
        &self,
        req: &Request,
        kind: AuditKind,
        action: &str,
        resource: &ResourceRef,
        outcome: AuditOutcome,
    ) -> AuditEvent {
        AuditEvent::new(
            kind,
            req.caller.principal_id.as_str(),
            action,
            resource,
            outcome,
        )
        .metadata("schemaVersion", 1)
        .metadata("source", "occ")
        .metadata("requestId", req.id.as_str())
        .metadata("admissionDecisionId", req.caller.admission_id.as_str())
        .metadata(
            "actor",
            json!({"principalId": req.caller.principal_id.as_str(), "method": req.caller.method}),
        )
        .metadata("iamDriverId", IAM_DRIVER_ID)
    }

    /// A mutation event with its authorization evidence.
    pub(crate) fn mutation(
        &self,
        req: &Request,
        action: &str,
        resource: &ResourceRef,
        evidence: &Evidence,
    ) -> AuditEvent {
        self.event(
            req,
            AuditKind::Mutation,
            action,
            resource,
            AuditOutcome::Success,
        )
        .detail(
            "iamEvidence",
            serde_json::to_value(evidence).unwrap_or_default(),
        )
    }
}
