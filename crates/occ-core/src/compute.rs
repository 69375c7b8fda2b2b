//! The vocabulary of the Compute contract: what a Compute verb acts on (Namespace, Agent,
//! revision targets and a revision's run-time context), what it reports (convergence,
//! readiness, runtime state) and how it fails ([`ComputeError`], classified for the worker).
//!
//! The Compute Drivers (`occ-drivers`) and the host side they share (`occ-host`) speak it; the
//! worker reads it. Pure data: the verbs themselves are the `Compute` trait of `occ-drivers`.

use std::collections::BTreeMap;
use std::fmt;

use crate::resource::{AdmittedSpec, ExecutionMode, WorkspaceSetup};
use crate::{AgentId, IamId, NamespaceId, ReasonCode, RevisionId};

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

    /// Refuses a revision that is not embedded execution (permanent `COMPUTE_DRIVER_MISMATCH`)
    /// for the `driver` Compute Driver, which runs only that.
    pub fn require_embedded(&self, driver: &str) -> Result<(), ComputeError> {
        if self.execution_mode() == ExecutionMode::Embedded {
            return Ok(());
        }
        Err(ComputeError::permanent(
            ReasonCode::ComputeDriverMismatch,
            format!("the {driver} Compute Driver runs embedded execution only"),
        ))
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

impl RevisionContext {
    /// A redactor for the workload's output: the values this context hands the workload (its
    /// bound Secrets, the harness credential) and the gateway `token`, besides the patterns.
    pub fn output_redactor(&self, token: &str) -> crate::redact::Redactor {
        crate::redact::Redactor::new(
            self.environment
                .values()
                .map(SecretText::expose)
                .chain(self.harness_credential.as_ref().map(SecretText::expose))
                .chain([token]),
        )
    }
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
        code: ReasonCode,
    },
}

impl Readiness {
    /// What activation makes of a preparation it ran first: a revision that is not ready
    /// (prepare refuses to go back behind a newer installed revision) is not activated
    /// (permanent, with the pending code).
    pub fn activatable(self) -> Result<(), ComputeError> {
        match self {
            Readiness::Ready => Ok(()),
            Readiness::Pending { code } => Err(ComputeError::permanent(
                code,
                "a newer revision is installed for this Agent",
            )),
        }
    }
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

/// A gateway that exited without being asked to, as the Driver supervising it saw it (a stop,
/// retirement or replacement by occ is not an exit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayExit {
    /// The Agent.
    pub agent: AgentTarget,
    /// The revision the gateway served.
    pub revision_id: RevisionId,
    /// The process that exited.
    pub pid: u32,
    /// How it exited: `exit status 1`, `signal 9 (SIGKILL)`.
    pub status: String,
    /// When the Driver saw it exit.
    pub at: crate::Timestamp,
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

/// A Compute failure: its class, a reason code (recorded in evidence and the deployment
/// status) and a message for logs (never secret values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[error("{code}: {message}")]
pub struct ComputeError {
    /// What the worker does.
    pub class: FailureClass,
    /// Reason code.
    pub code: ReasonCode,
    /// Operator-facing detail.
    pub message: String,
    /// The last lines the workload printed before it failed (startup failures), already
    /// redacted of every secret value the Driver handed it; at most [`OUTPUT_LINES`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<String>,
}

/// The exit status with which an OpenClaw gateway refuses its configuration (`EX_CONFIG`):
/// a permanent `RUNTIME_CONFIGURATION_INVALID`, where any other early exit is a
/// `RUNTIME_STARTUP_FAILED`.
pub const EXIT_CONFIGURATION_INVALID: i32 = 78;

/// Whether an early exit with [`EXIT_CONFIGURATION_INVALID`] is OpenClaw deferring its own
/// startup maintenance (its state lease timed out on a saturated machine: "maintenance
/// required") rather than refusing the configuration: its output says so. Such an exit is
/// transient — the same configuration starts once the machine has room.
fn startup_maintenance_deferred(output: &[String]) -> bool {
    output.iter().any(|line| {
        line.contains("gateway.maintenance_required")
            || line.contains("lease heartbeat did not become ready")
    })
}

/// How many output lines a [`ComputeError`] carries at most.
pub const OUTPUT_LINES: usize = 20;

impl ComputeError {
    /// Convergence pending.
    pub fn pending(code: ReasonCode, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Pending, code, message)
    }
    /// A dependency failed.
    pub fn transient(code: ReasonCode, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Transient, code, message)
    }
    /// Cannot succeed.
    pub fn permanent(code: ReasonCode, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Permanent, code, message)
    }
    fn new(class: FailureClass, code: ReasonCode, message: impl Into<String>) -> Self {
        Self {
            class,
            code,
            message: message.into(),
            output: Vec::new(),
        }
    }

    /// A gateway that exited during startup with `exit_code`, carrying its last `output` lines
    /// (redacted by the caller): a refused configuration ([`EXIT_CONFIGURATION_INVALID`], unless
    /// the output shows deferred startup maintenance) is a permanent
    /// `RUNTIME_CONFIGURATION_INVALID`; any other exit a transient `RUNTIME_STARTUP_FAILED`.
    pub fn gateway_startup_exit(
        exit_code: Option<i32>,
        message: impl Into<String>,
        output: Vec<String>,
    ) -> Self {
        let error = if exit_code == Some(EXIT_CONFIGURATION_INVALID)
            && !startup_maintenance_deferred(&output)
        {
            Self::permanent(ReasonCode::RuntimeConfigurationInvalid, message)
        } else {
            Self::transient(ReasonCode::RuntimeStartupFailed, message)
        };
        error.with_output(output)
    }

    /// The same error with the workload's last output lines (redacted by the caller).
    pub fn with_output(mut self, lines: Vec<String>) -> Self {
        let skip = lines.len().saturating_sub(OUTPUT_LINES);
        self.output = lines.into_iter().skip(skip).collect();
        self
    }
}

/// Most bytes of output one [`LogChunk`] carries (one read of a workload's log).
pub const LOG_READ_MAX_BYTES: u64 = 1024 * 1024;

/// Most lines a tail read (a read without a [`LogPosition`]) returns.
pub const LOG_TAIL_MAX_LINES: usize = 1000;

/// Where a follow read of a workload's log resumes: the log's identity and how far it was read.
/// A Driver that finds the identity or generation changed reports it as a [`LogGap`] instead of
/// replaying or skipping output silently.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogPosition {
    /// The log's identity (a file's inode on a host, a Pod's uid and restart count on
    /// Kubernetes).
    pub stream: String,
    /// How many times that log was rotated when it was read.
    pub generation: u64,
    /// Bytes of that generation already delivered.
    pub offset: u64,
}

/// One read of a revision's workload output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogQuery {
    /// Resume after this position; `None` reads the last `tail_lines` lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<LogPosition>,
    /// Lines of a tail read (1..=[`LOG_TAIL_MAX_LINES`]).
    pub tail_lines: usize,
    /// The previous instance's output (a restarted container), where the Driver keeps it.
    #[serde(default)]
    pub previous: bool,
    /// Whose output: the gateway's, or a dedicated revision's harness.
    #[serde(default, skip_serializing_if = "LogWorkload::is_gateway")]
    pub workload: LogWorkload,
}

/// The workload of a revision whose output is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogWorkload {
    /// The OpenClaw gateway.
    #[default]
    Gateway,
    /// The Codex harness of a dedicated revision (a Driver without one answers
    /// `RUNTIME_LOGS_SOURCE_UNAVAILABLE`).
    Harness,
}

impl LogWorkload {
    /// Whether this is the gateway (the default, left off the wire).
    pub fn is_gateway(&self) -> bool {
        *self == Self::Gateway
    }
}

/// Why output between two delivered lines is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogGap {
    /// The log the position named is gone (recreated, another Pod): reading starts over.
    StreamReplaced,
    /// More output was written and rotated away than the Driver keeps since the position.
    WindowExceeded,
    /// A rotation happened since the position: lines written while it copied may be missing.
    BufferLost,
}

/// An item of a [`LogChunk`], in output order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "value")]
pub enum LogEntry {
    /// One raw line, without its newline (invalid UTF-8 replaced). Not redacted: the caller
    /// redacts before anything leaves occ.
    Line(String),
    /// Output is missing here.
    Gap(LogGap),
}

/// What one read returned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogChunk {
    /// Lines and gaps, oldest first.
    pub entries: Vec<LogEntry>,
    /// Where the next follow read resumes; `None` when the workload has no log yet.
    pub position: Option<LogPosition>,
    /// The read stopped at [`LOG_READ_MAX_BYTES`]: more output follows the position already.
    pub truncated: bool,
}

impl LogChunk {
    /// The chunk's lines in order, without its gaps.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|entry| match entry {
            LogEntry::Line(line) => Some(line.as_str()),
            LogEntry::Gap(_) => None,
        })
    }

    /// Replaces every occurrence of `value` in the lines with [`crate::redact::REDACTED`]: a
    /// Driver removes the credential it owns (the gateway token) before the lines leave it. Only
    /// the exact value: pattern redaction, which tracks PEM blocks across lines, is the
    /// caller's.
    pub fn without_value(mut self, value: &str) -> Self {
        if value.is_empty() {
            return self;
        }
        for entry in &mut self.entries {
            if let LogEntry::Line(line) = entry
                && line.contains(value)
            {
                *line = line.replace(value, crate::redact::REDACTED);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused configuration stays permanent; OpenClaw deferring its startup maintenance on a
    /// saturated machine (as a CI run's gateway printed it) is transient.
    #[test]
    fn deferred_startup_maintenance_is_told_from_a_refused_configuration() {
        let refused =
            vec!["Invalid config at /x: agents.defaults.model: expected string".to_owned()];
        assert!(!startup_maintenance_deferred(&refused));
        let deferred = vec![
            "Run \"openclaw doctor --fix\" against the same state/config, then restart the gateway. | gateway.maintenance_required | Doctor stopped".to_owned(),
            "Failing check media-persistence (step-refused): agent database maintenance lease core:agent-database-maintenance/global was lost | state lease heartbeat did not become ready (phase=startup".to_owned(),
        ];
        assert!(startup_maintenance_deferred(&deferred));
        assert!(startup_maintenance_deferred(&deferred[1..]));
        let class = |code, output: &[String]| {
            let e = ComputeError::gateway_startup_exit(code, "exited", output.to_vec());
            (e.class, e.code, e.output.len())
        };
        assert_eq!(
            class(Some(EXIT_CONFIGURATION_INVALID), &refused),
            (
                FailureClass::Permanent,
                ReasonCode::RuntimeConfigurationInvalid,
                1
            )
        );
        assert_eq!(
            class(Some(EXIT_CONFIGURATION_INVALID), &deferred),
            (FailureClass::Transient, ReasonCode::RuntimeStartupFailed, 2)
        );
        assert_eq!(
            class(Some(1), &refused),
            (FailureClass::Transient, ReasonCode::RuntimeStartupFailed, 1)
        );
        assert_eq!(
            class(None, &[]),
            (FailureClass::Transient, ReasonCode::RuntimeStartupFailed, 0)
        );
    }

    #[test]
    fn the_output_redactor_removes_what_the_context_hands_out() {
        let ctx = RevisionContext {
            environment: [(
                "PROVIDER_KEY".to_owned(),
                SecretText::new("bound-secret-value-42".into()),
            )]
            .into(),
            harness_credential: Some(SecretText::new("harness-credential-77".into())),
            workspace_setup: None,
        };
        let lines = ctx.output_redactor("gateway-token-0123").lines([
            "key bound-secret-value-42 refused",
            "harness harness-credential-77 and gateway-token-0123",
            "Error: ENOENT cert.pem",
        ]);
        assert_eq!(
            lines,
            [
                format!("key {} refused", crate::redact::REDACTED),
                format!("harness {0} and {0}", crate::redact::REDACTED),
                "Error: ENOENT cert.pem".to_owned(),
            ]
        );
    }

    #[test]
    fn a_driver_removes_its_own_credential_from_every_line() {
        let chunk = LogChunk {
            entries: vec![
                LogEntry::Line("token gw-0123456789 in use, gw-0123456789 again".into()),
                LogEntry::Gap(LogGap::BufferLost),
                LogEntry::Line("nothing here".into()),
            ],
            position: None,
            truncated: false,
        }
        .without_value("gw-0123456789");
        assert_eq!(
            chunk.entries,
            vec![
                LogEntry::Line("token [REDACTED] in use, [REDACTED] again".into()),
                LogEntry::Gap(LogGap::BufferLost),
                LogEntry::Line("nothing here".into()),
            ]
        );
    }
}
