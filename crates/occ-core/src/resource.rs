//! Platform resources: Installation, Namespace, Configuration metadata, Secret metadata,
//! ServiceAccount, Agent, AgentRevision (with its frozen snapshot) and WorkspaceSetup.
//!
//! These are domain types. The HTTP layer renders its own wire views from them; where a value is
//! stored as JSON (Secret bindings, harness auth, the admitted snapshot) its serde form here is
//! the stored form.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::{
    AgentId, ConfigurationId, IamId, InstallationId, NamespaceId, RevisionId, SecretId,
    ServiceAccountId,
};
use crate::name::Name;
use crate::time::Timestamp;

/// The singleton Installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// `ins_…`
    pub id: InstallationId,
    /// Display name.
    pub name: Name,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Namespace lifecycle. Transitions: provisioning → ready | failed | deleting; ready | failed →
/// deleting. The database refuses every other move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NamespaceStatus {
    /// Created; its Compute is being prepared.
    Provisioning,
    /// Usable for deployments.
    Ready,
    /// Provisioning failed permanently.
    Failed,
    /// Being torn down (or a tombstone once `deleted_at` is set).
    Deleting,
}

impl NamespaceStatus {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            NamespaceStatus::Provisioning => "provisioning",
            NamespaceStatus::Ready => "ready",
            NamespaceStatus::Failed => "failed",
            NamespaceStatus::Deleting => "deleting",
        }
    }

    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        [
            Self::Provisioning,
            Self::Ready,
            Self::Failed,
            Self::Deleting,
        ]
        .into_iter()
        .find(|s| s.as_str() == value)
    }

    /// Whether `self → next` is an allowed lifecycle move (staying put is not a move).
    pub fn can_move_to(self, next: NamespaceStatus) -> bool {
        use NamespaceStatus::*;
        matches!(
            (self, next),
            (Provisioning, Ready | Failed | Deleting) | (Ready | Failed, Deleting)
        )
    }
}

/// A Namespace: the tenant boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// `ns_…`
    pub id: NamespaceId,
    /// Unique across the Installation, tombstones included.
    pub name: Name,
    /// An externally owned Kubernetes namespace this Namespace binds to.
    pub existing_namespace: Option<String>,
    /// Lifecycle status.
    pub status: NamespaceStatus,
    /// Creation time.
    pub created_at: Timestamp,
    /// Set once teardown finished: the row is a tombstone and reads answer 404.
    pub deleted_at: Option<Timestamp>,
}

/// The only Configuration kind.
pub const CONFIGURATION_KIND_AGENT: &str = "agent";

/// Largest generation (and any JSON-safe integer): 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// A Configuration generation: 1 at creation, +1 per accepted PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Generation(u64);

impl Generation {
    /// Generation 1.
    pub const FIRST: Generation = Generation(1);

    /// A generation in 1..=2^53−1.
    pub fn new(value: u64) -> Option<Self> {
        (1..=MAX_SAFE_INTEGER)
            .contains(&value)
            .then_some(Self(value))
    }

    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The next generation, or `None` at the ceiling.
    pub fn next(self) -> Option<Self> {
        Self::new(self.0 + 1)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A reference to a Secret in a Namespace (`{kind:"secret", namespaceId, id}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// Always `"secret"`.
    pub kind: SecretRefKind,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// The Secret.
    pub id: SecretId,
}

/// The `kind` tag of a [`SecretRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretRefKind {
    /// A Secret.
    Secret,
}

impl SecretRef {
    /// A reference to `id` in `namespace_id`.
    pub fn new(namespace_id: NamespaceId, id: SecretId) -> Self {
        Self {
            kind: SecretRefKind::Secret,
            namespace_id,
            id,
        }
    }
}

/// How a bound Secret reaches the runtime. `env` is the only mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SecretDelivery {
    /// As an environment variable named by the binding key.
    Env,
}

/// One Secret binding of a Configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretBinding {
    /// The bound Secret.
    pub source: SecretRef,
    /// Delivery (normalized to `{type:"env"}`).
    pub delivery: SecretDelivery,
}

/// Secret bindings keyed by destination environment variable.
pub type SecretBindings = BTreeMap<String, SecretBinding>;

/// Configuration metadata. The document itself lives only in the Configuration Driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurationMeta {
    /// `cfg_…`
    pub id: ConfigurationId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// Current generation.
    pub generation: Generation,
    /// Normalized Secret bindings.
    pub secret_bindings: SecretBindings,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Secret metadata. The value lives only in the Secret Driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMeta {
    /// `sec_…`
    pub id: SecretId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// Unique per Namespace.
    pub name: Name,
    /// The Secret Driver that holds the value.
    pub driver_id: String,
    /// The Driver's locator for the value (never the value).
    pub locator: String,
    /// Creation time.
    pub created_at: Timestamp,
}

/// The kind of credential a ServiceAccount carries (the value is never stored or returned here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceAccountCredentialKind {
    /// An API key.
    ApiKey,
    /// An access token.
    AccessToken,
    /// An OAuth access token.
    OauthAccessToken,
}

/// A ServiceAccount (not an IAM principal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    /// `sa_…`
    pub id: ServiceAccountId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// Unique per Namespace.
    pub name: Name,
    /// Which kind of credential it carries, if any.
    pub credential_kind: Option<ServiceAccountCredentialKind>,
    /// Where the account and its credential live (private: never returned).
    pub binding: Option<ServiceAccountBinding>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A ServiceAccount's private binding: the upstream account a Backend's ServiceAccount Driver
/// made for it and the credential issued to it, or a native credential reference. Stored as
/// JSON in this shape; never part of a response, an audit record or a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServiceAccountBinding {
    /// An account of a Backend (`chatgpt`), with the credential issued to it, if any.
    #[serde(rename_all = "camelCase")]
    Managed {
        /// The Backend whose Driver made the account.
        backend_id: String,
        /// The provider workspace the account belongs to.
        workspace_id: String,
        /// The provider's id of the account.
        upstream_account_id: String,
        /// The issued credential, once issued.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<IssuedCredential>,
    },
    /// A native reference to a credential the operator keeps (`PATCH …/credential`).
    #[serde(rename_all = "camelCase")]
    Native {
        /// The Secret's name in the account's Namespace.
        secret_name: String,
        /// The key within it.
        secret_key: String,
    },
}

/// A credential a Backend issued to a ServiceAccount: the provider's id for it and where occ's
/// Secret Driver keeps its value (the access token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuedCredential {
    /// The provider's id of the credential.
    pub upstream_credential_id: String,
    /// The id the Secret Driver holds the value under (not a user-visible Secret).
    pub value_id: SecretId,
    /// The Secret Driver that holds it.
    pub driver_id: String,
    /// The Driver's locator of the value.
    pub locator: String,
}

/// What a revision freezes of a `chatgpt_service_account` credential: which account and issued
/// credential it runs with and the workspace Codex is held to. No locator, no value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrozenAccountCredential {
    /// The ServiceAccount.
    pub service_account_id: ServiceAccountId,
    /// Always `access_token` (the only kind a harness can run with).
    pub kind: ServiceAccountCredentialKind,
    /// The Backend that issued it.
    pub backend_id: String,
    /// The provider workspace (`forced_chatgpt_workspace_id`).
    pub workspace_id: String,
    /// The provider's id of the credential (a replaced credential no longer matches).
    pub upstream_credential_id: String,
}

/// Where an Agent's harness runs relative to its gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// One gateway process runs the harness.
    Embedded,
    /// A separate harness workload.
    Dedicated,
}

impl ExecutionMode {
    /// Stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMode::Embedded => "embedded",
            ExecutionMode::Dedicated => "dedicated",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "embedded" => Some(Self::Embedded),
            "dedicated" => Some(Self::Dedicated),
            _ => None,
        }
    }
}

/// What the operator wants the Agent's runtime to be doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesiredRuntimeState {
    /// Serve the latest admitted revision.
    Running,
    /// Nothing runs.
    Stopped,
}

impl DesiredRuntimeState {
    /// Stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredRuntimeState::Running => "running",
            DesiredRuntimeState::Stopped => "stopped",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "running" => Some(Self::Running),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }
}

/// Agent existence status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Normal.
    Active,
    /// Deletion requested; mutations answer `AGENT_DELETING`.
    Deleting,
}

impl AgentStatus {
    /// Stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Deleting => "deleting",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "active" => Some(Self::Active),
            "deleting" => Some(Self::Deleting),
            _ => None,
        }
    }
}

/// How the harness authenticates to its model backend (spec/api.md §1.5.1). Stored as JSON in
/// this exact shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum HarnessAuth {
    /// Credentials are managed by the operator on the runtime host.
    Runtime {},
    /// An API key held in a Secret.
    ApiKey {
        /// The Secret holding the key.
        source: SecretRef,
    },
    /// A Codex personal access token (`at-…`) held in a Secret; dedicated Codex harnesses log
    /// in with it.
    CodexPat {
        /// The Secret holding the token.
        source: SecretRef,
    },
    /// A ChatGPT service account.
    #[serde(rename_all = "camelCase")]
    ChatgptServiceAccount {
        /// The ServiceAccount.
        service_account_id: ServiceAccountId,
    },
}

impl HarnessAuth {
    /// The wire name of the method (`runtime`, `api_key`, …).
    pub fn method(&self) -> &'static str {
        match self {
            HarnessAuth::Runtime {} => "runtime",
            HarnessAuth::ApiKey { .. } => "api_key",
            HarnessAuth::CodexPat { .. } => "codex_pat",
            HarnessAuth::ChatgptServiceAccount { .. } => "chatgpt_service_account",
        }
    }
    /// The Secret holding the credential, if the method reads one.
    pub fn secret_source(&self) -> Option<&SecretRef> {
        match self {
            HarnessAuth::ApiKey { source } | HarnessAuth::CodexPat { source } => Some(source),
            _ => None,
        }
    }
    /// The Secret this auth reads, if any (for reference checks).
    pub fn secret_id(&self) -> Option<&SecretId> {
        self.secret_source().map(|source| &source.id)
    }
    /// The ServiceAccount this auth uses, if any.
    pub fn service_account_id(&self) -> Option<&ServiceAccountId> {
        match self {
            HarnessAuth::ChatgptServiceAccount { service_account_id } => Some(service_account_id),
            _ => None,
        }
    }
}

/// The editable Agent draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// `agt_…`
    pub id: AgentId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// Unique per Namespace.
    pub name: Name,
    /// `service-agent-<id>`, created with the Agent, immutable.
    pub service_principal_id: IamId,
    /// The Configuration the next deploy freezes.
    pub configuration_id: ConfigurationId,
    /// Optional Backend.
    pub backend_id: Option<String>,
    /// Execution mode.
    pub execution_mode: ExecutionMode,
    /// Harness authentication, if any.
    pub harness_auth: Option<HarnessAuth>,
    /// The revision last committed to run (set and cleared only by the worker).
    pub active_revision_id: Option<RevisionId>,
    /// Desired runtime state.
    pub desired_runtime_state: DesiredRuntimeState,
    /// Existence status.
    pub status: AgentStatus,
    /// Creation time.
    pub created_at: Timestamp,
}

/// An Agent's gateway as the worker last observed it (occ's own `runtime` view, read without
/// asking the Compute Driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservedRuntimeState {
    /// The revision's gateway serves.
    Running,
    /// It exited (or was found down) and occ is starting it again.
    Restarting,
    /// Nothing runs, and occ does not start it: stopped on request, or down with no maintenance
    /// pass to restart it.
    Stopped,
}

impl ObservedRuntimeState {
    /// Stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ObservedRuntimeState::Running => "running",
            ObservedRuntimeState::Restarting => "restarting",
            ObservedRuntimeState::Stopped => "stopped",
        }
    }
    /// Parses the stored form.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "running" => Some(Self::Running),
            "restarting" => Some(Self::Restarting),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }
}

/// What the worker last observed of an Agent's gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRuntime {
    /// The Agent's Namespace.
    pub namespace_id: NamespaceId,
    /// The Agent.
    pub agent_id: AgentId,
    /// The revision observed.
    pub revision_id: RevisionId,
    /// Its state.
    pub state: ObservedRuntimeState,
    /// How often occ started this revision's gateway again after finding it down.
    pub restarts: u64,
    /// When it last exited on its own (or was found down, when its Driver cannot tell sooner).
    pub last_exit_at: Option<Timestamp>,
    /// How it exited (`exit status 1`, `signal 9 (SIGKILL)`), when its Driver saw the exit.
    pub last_exit_status: Option<String>,
    /// When this was recorded.
    pub observed_at: Timestamp,
}

/// Something the worker learned about an Agent's gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeObservation {
    /// The revision's gateway serves (activated, or found serving).
    Serving,
    /// A maintenance pass found it down and started it again.
    Restarted,
    /// It exited on its own; occ starts it again (`restarting`) or does not.
    Exited {
        /// When the Driver saw it exit.
        at: Timestamp,
        /// How it exited.
        status: String,
        /// Whether a maintenance pass will start it again.
        restarting: bool,
    },
    /// A maintenance pass found it down and could not start it yet (the next pass tries again).
    RestartFailed,
    /// Stopped on request.
    Stopped,
}

impl AgentRuntime {
    /// What `observation` of revision `revision_id` at `now` makes of the `previous` record.
    /// Restarts and the last exit belong to one revision: observing another starts from zero.
    /// A gateway found down with no exit recorded (its Driver cannot report exits) gets `now`
    /// as its exit time and no status.
    pub fn observe(
        previous: Option<&AgentRuntime>,
        target: (&NamespaceId, &AgentId, &RevisionId),
        observation: &RuntimeObservation,
        now: Timestamp,
    ) -> AgentRuntime {
        let (namespace_id, agent_id, revision_id) = target;
        let same = previous.filter(|p| &p.revision_id == revision_id);
        // An exit reported after a later observation accounted for it (the pass that restarted
        // the gateway settled first) changes nothing.
        if let (RuntimeObservation::Exited { at, .. }, Some(p)) = (observation, same)
            && p.observed_at > *at
        {
            return p.clone();
        }
        let exit_already_recorded =
            same.is_some_and(|p| p.state == ObservedRuntimeState::Restarting);
        let mut restarts = same.map_or(0, |p| p.restarts);
        let mut last_exit_at = same.and_then(|p| p.last_exit_at);
        let mut last_exit_status = same.and_then(|p| p.last_exit_status.clone());
        let mut found_down = || {
            if !exit_already_recorded {
                last_exit_at = Some(now);
                last_exit_status = None;
            }
        };
        let state = match observation {
            RuntimeObservation::Serving => ObservedRuntimeState::Running,
            RuntimeObservation::Restarted => {
                found_down();
                restarts = restarts.saturating_add(1);
                ObservedRuntimeState::Running
            }
            RuntimeObservation::RestartFailed => {
                found_down();
                ObservedRuntimeState::Restarting
            }
            RuntimeObservation::Exited {
                at,
                status,
                restarting,
            } => {
                last_exit_at = Some(*at);
                last_exit_status = Some(status.clone());
                if *restarting {
                    ObservedRuntimeState::Restarting
                } else {
                    ObservedRuntimeState::Stopped
                }
            }
            RuntimeObservation::Stopped => ObservedRuntimeState::Stopped,
        };
        AgentRuntime {
            namespace_id: namespace_id.clone(),
            agent_id: agent_id.clone(),
            revision_id: revision_id.clone(),
            state,
            restarts,
            last_exit_at,
            last_exit_status,
            observed_at: now,
        }
    }
}

/// The approved harness a revision runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessDescriptor {
    /// Harness id, e.g. `openclaw`.
    pub id: String,
    /// Harness version, e.g. `2026.9.6`.
    pub version: String,
    /// Execution mode.
    pub mode: ExecutionMode,
}

/// The Compute Driver a revision is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeIdentity {
    /// Driver instance id, e.g. `compute-process`.
    pub id: String,
    /// Implementation, e.g. `process`.
    pub implementation: String,
}

/// The immutable snapshot frozen into an AgentRevision at admission. Stored as the
/// `admitted_spec` JSON object whose key set the database checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmittedSpec {
    /// Source Configuration.
    pub configuration_id: ConfigurationId,
    /// Always `agent`.
    pub configuration_kind: String,
    /// Source generation.
    pub configuration_generation: Generation,
    /// The complete admitted native document (unresolved SecretRefs included).
    pub configuration: serde_json::Map<String, serde_json::Value>,
    /// The harness.
    pub harness: HarnessDescriptor,
    /// The Compute Driver.
    pub compute: ComputeIdentity,
    /// The Agent's service principal at admission.
    pub service_principal_id: IamId,
    /// Harness authentication at admission.
    pub harness_auth: Option<HarnessAuth>,
    /// The Secret Driver that resolves the bindings, when there are bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_driver_id: Option<String>,
    /// The normalized Secret bindings, when there are bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_bindings: Option<SecretBindings>,
    /// The ServiceAccount credential a `chatgpt_service_account` harness runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_credential: Option<FrozenAccountCredential>,
}

/// An immutable AgentRevision.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRevision {
    /// `rev_…`, also the deployment id.
    pub id: RevisionId,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// The owning Agent.
    pub agent_id: AgentId,
    /// 1 + the number of earlier revisions of the Agent.
    pub revision: u64,
    /// Backend at admission.
    pub backend_id: Option<String>,
    /// The frozen snapshot.
    pub spec: AdmittedSpec,
    /// The earlier revision of the same Agent whose snapshot this one was made from (a
    /// redeploy); `None` for a deploy of the Configuration.
    pub source_revision_id: Option<RevisionId>,
    /// Admission time.
    pub created_at: Timestamp,
}

/// The four workspace files an Agent can be created with and edited through the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WorkspaceFileName {
    /// `AGENTS.md`
    #[serde(rename = "AGENTS.md")]
    Agents,
    /// `SOUL.md`
    #[serde(rename = "SOUL.md")]
    Soul,
    /// `IDENTITY.md`
    #[serde(rename = "IDENTITY.md")]
    Identity,
    /// `USER.md`
    #[serde(rename = "USER.md")]
    User,
}

impl WorkspaceFileName {
    /// All four, in display order.
    pub const ALL: [WorkspaceFileName; 4] = [Self::Agents, Self::Soul, Self::Identity, Self::User];

    /// The file name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agents => "AGENTS.md",
            Self::Soul => "SOUL.md",
            Self::Identity => "IDENTITY.md",
            Self::User => "USER.md",
        }
    }

    /// Parses one of the four names.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == value)
    }
}

/// Largest workspace file, in UTF-8 bytes.
pub const WORKSPACE_FILE_MAX_BYTES: usize = 16 * 1024;

/// Staged initial workspace files (non-empty map).
pub type WorkspaceFiles = BTreeMap<WorkspaceFileName, String>;

/// Private staging of an Agent's initial workspace files. Completion erases the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct WorkspaceSetup {
    /// Setup identity.
    pub id: String,
    /// The owning Namespace.
    pub namespace_id: NamespaceId,
    /// The owning Agent.
    pub agent_id: AgentId,
    /// The defaults identity the files were written against.
    pub defaults_id: Option<String>,
    /// The staged files; `None` once completed.
    pub files: Option<WorkspaceFiles>,
    /// Whether the setup was applied and activated.
    pub completed: bool,
}

impl fmt::Debug for WorkspaceSetup {
    // Never print staged contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkspaceSetup")
            .field("id", &self.id)
            .field("namespace_id", &self.namespace_id)
            .field("agent_id", &self.agent_id)
            .field("defaults_id", &self.defaults_id)
            .field(
                "files",
                &self.files.as_ref().map(|f| f.keys().collect::<Vec<_>>()),
            )
            .field("completed", &self.completed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_observations_count_restarts_per_revision() {
        use super::{AgentRuntime, ObservedRuntimeState, RuntimeObservation};
        use crate::{AgentId, NamespaceId, RevisionId, Timestamp};
        let (ns, agent) = (NamespaceId::generate(), AgentId::generate());
        let (first, second) = (RevisionId::generate(), RevisionId::generate());
        let at = |ms| Timestamp::from_unix_millis(ms).expect("time");
        let observe = |prev: Option<&AgentRuntime>, rev: &RevisionId, o, now| {
            AgentRuntime::observe(prev, (&ns, &agent, rev), &o, at(now))
        };
        let running = observe(None, &first, RuntimeObservation::Serving, 1_000);
        assert_eq!(running.state, ObservedRuntimeState::Running);
        assert_eq!((running.restarts, running.last_exit_at), (0, None));
        // An exit the Driver reported keeps its time and status through the restart.
        let exited = observe(
            Some(&running),
            &first,
            RuntimeObservation::Exited {
                at: at(2_000),
                status: "signal 9 (SIGKILL)".into(),
                restarting: true,
            },
            2_001,
        );
        assert_eq!(exited.state, ObservedRuntimeState::Restarting);
        assert_eq!(exited.restarts, 0);
        let restarted = observe(Some(&exited), &first, RuntimeObservation::Restarted, 3_000);
        assert_eq!(restarted.state, ObservedRuntimeState::Running);
        assert_eq!(restarted.restarts, 1);
        assert_eq!(restarted.last_exit_at, Some(at(2_000)));
        assert_eq!(
            restarted.last_exit_status.as_deref(),
            Some("signal 9 (SIGKILL)")
        );
        // Found down with nothing reported: the observation time, no status.
        let found = observe(
            Some(&restarted),
            &first,
            RuntimeObservation::RestartFailed,
            4_000,
        );
        assert_eq!(found.state, ObservedRuntimeState::Restarting);
        assert_eq!(
            (found.last_exit_at, found.last_exit_status.as_deref()),
            (Some(at(4_000)), None)
        );
        let again = observe(Some(&found), &first, RuntimeObservation::Restarted, 5_000);
        assert_eq!((again.restarts, again.last_exit_at), (2, Some(at(4_000))));
        let stopped = observe(Some(&again), &first, RuntimeObservation::Stopped, 6_000);
        assert_eq!(
            (stopped.state, stopped.restarts),
            (ObservedRuntimeState::Stopped, 2)
        );
        // An exit older than what was observed since is stale.
        let stale = observe(
            Some(&again),
            &first,
            RuntimeObservation::Exited {
                at: at(4_500),
                status: "exit status 1".into(),
                restarting: true,
            },
            5_500,
        );
        assert_eq!(stale, again);
        // Another revision starts from zero.
        let next = observe(Some(&stopped), &second, RuntimeObservation::Serving, 7_000);
        assert_eq!(
            (next.restarts, next.last_exit_at, next.revision_id),
            (0, None, second)
        );
    }

    use super::*;

    #[test]
    fn namespace_transitions() {
        use NamespaceStatus::*;
        assert!(Provisioning.can_move_to(Ready));
        assert!(Provisioning.can_move_to(Failed));
        assert!(Ready.can_move_to(Deleting));
        assert!(!Ready.can_move_to(Provisioning));
        assert!(!Deleting.can_move_to(Ready));
        assert!(!Failed.can_move_to(Ready));
    }

    #[test]
    fn generation_bounds() {
        assert!(Generation::new(0).is_none());
        assert!(Generation::new(MAX_SAFE_INTEGER).is_some());
        assert!(Generation::new(MAX_SAFE_INTEGER).unwrap().next().is_none());
        assert_eq!(Generation::FIRST.next().unwrap().get(), 2);
    }

    #[test]
    fn harness_auth_shapes() {
        let ns = NamespaceId::generate();
        let sec = SecretId::generate();
        let auth = HarnessAuth::ApiKey {
            source: SecretRef::new(ns.clone(), sec.clone()),
        };
        let json = serde_json::to_value(&auth).unwrap();
        assert_eq!(json["method"], "api_key");
        assert_eq!(json["source"]["kind"], "secret");
        assert_eq!(json["source"]["namespaceId"], ns.as_str());
        assert_eq!(serde_json::from_value::<HarnessAuth>(json).unwrap(), auth);
        let rt: HarnessAuth = serde_json::from_str(r#"{"method":"runtime"}"#).unwrap();
        assert_eq!(rt, HarnessAuth::Runtime {});
        assert!(serde_json::from_str::<HarnessAuth>(r#"{"method":"runtime","x":1}"#).is_err());
    }

    #[test]
    fn workspace_setup_debug_hides_contents() {
        let mut files = WorkspaceFiles::new();
        files.insert(WorkspaceFileName::User, "my secret profile".into());
        let s = WorkspaceSetup {
            id: "x".into(),
            namespace_id: NamespaceId::generate(),
            agent_id: AgentId::generate(),
            defaults_id: None,
            files: Some(files),
            completed: false,
        };
        assert!(!format!("{s:?}").contains("secret profile"));
    }
}
