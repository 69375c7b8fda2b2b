//! The request and reply of one host operation between the SSH Compute Driver (which sends it
//! through `ssh`) and `occ compute-host` on the host (which runs it, [`crate::serve`]): one
//! JSON [`HostRequest`] on stdin, one JSON [`HostReply`] line on stdout. The host needs no occ
//! settings, database or credentials: everything the operation needs is in the request
//! (settings, targets, the staged workspace files), and nothing secret ever reaches argv.
//!
//! The format is internal: both ends must be the same occ build ([`check_version`]).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use occ_core::ReasonCode;
use occ_core::compute::{
    AgentTarget, ComputeError, LogChunk, LogQuery, NamespaceTarget, RevisionTarget,
};
use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_core::runtime_report::RuntimeReport;
use occ_core::{AgentId, NamespaceId};
use serde::{Deserialize, Serialize};

use crate::account;
use crate::fsutil::safe_path;
use crate::snapshot::GatewayBind;

/// Largest request `occ compute-host` reads (the staged workspace files are the bulk).
pub const REQUEST_MAX_BYTES: u64 = 1024 * 1024;

/// The version of the request/reply format between the SSH Driver and `occ compute-host`. The
/// format is internal: the host's `occ` must be the same build as the controller's, so both this
/// number and the occ version ([`OCC_VERSION`]) must match ([`check_version`]).
pub const WIRE_PROTOCOL: u32 = 2;

/// This build's occ version.
pub const OCC_VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long `occ compute-host` lets an operation run when the request does not say.
pub const DEFAULT_DEADLINE_MS: u64 = 170_000;

/// The sender's build, carried by every request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireVersion {
    /// The occ version (`CARGO_PKG_VERSION`).
    pub occ: String,
    /// [`WIRE_PROTOCOL`].
    pub protocol: u32,
}

impl WireVersion {
    /// This build's version.
    pub fn current() -> Self {
        Self {
            occ: OCC_VERSION.to_owned(),
            protocol: WIRE_PROTOCOL,
        }
    }
}

impl std::fmt::Display for WireVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "occ {} (wire protocol {})", self.occ, self.protocol)
    }
}

/// How gateways are supervised on a host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SupervisorChoice {
    /// systemd where it runs (`/run/systemd/system` exists and `systemctl --version` works),
    /// the detached supervisor elsewhere.
    #[default]
    Auto,
    /// One systemd unit per Agent (refused where `systemctl --version` fails).
    Systemd,
    /// A detached process group per gateway, restarted by the worker's maintenance pass.
    Detached,
}

impl std::str::FromStr for SupervisorChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "systemd" => Ok(Self::Systemd),
            "detached" => Ok(Self::Detached),
            other => Err(format!("{other:?} is not auto, systemd or detached")),
        }
    }
}

/// The default directory of the per-Agent systemd units.
pub fn default_unit_dir() -> PathBuf {
    PathBuf::from("/etc/systemd/system")
}

/// The host settings, chosen by the operator for the host and sent with every operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostSettings {
    /// Root of the layout on the host (absolute; not under /tmp on a real host).
    pub root: PathBuf,
    /// The OpenClaw runtime on the host (`occ runtime install --dir`).
    pub runtime_root: PathBuf,
    /// First gateway port.
    pub port_start: u16,
    /// Last gateway port.
    pub port_end: u16,
    /// Where gateways listen (`lan` so occ reaches them over the network).
    pub bind: GatewayBind,
    /// Prefix of the per-Agent account names.
    pub account_prefix: String,
    /// How long a starting gateway may take to answer `hello-ok`, in milliseconds.
    pub ready_timeout_ms: u64,
    /// How long a stopping gateway may take before it is killed, in milliseconds.
    pub stop_timeout_ms: u64,
    /// How long an operation waits for the host lock, in milliseconds.
    pub lock_timeout_ms: u64,
    /// How gateways are supervised.
    #[serde(default)]
    pub supervisor: SupervisorChoice,
    /// Where the per-Agent systemd units are written (systemd supervision).
    #[serde(default = "default_unit_dir")]
    pub systemd_unit_dir: PathBuf,
}

impl HostSettings {
    /// The gateway port range.
    pub fn port_range(&self) -> RangeInclusive<u16> {
        self.port_start..=self.port_end
    }

    /// Why these settings cannot be used, if they cannot.
    pub fn problem(&self) -> Option<String> {
        for (name, path) in [
            ("root", &self.root),
            ("runtime root", &self.runtime_root),
            ("systemd unit directory", &self.systemd_unit_dir),
        ] {
            if !safe_path(path) {
                return Some(format!(
                    "the host {name} {} must be absolute, without whitespace, quotes or `..`",
                    path.display()
                ));
            }
        }
        if self.port_start < 1024 || self.port_start > self.port_end {
            return Some(format!(
                "the gateway port range {}-{} must satisfy 1024 <= start <= end",
                self.port_start, self.port_end
            ));
        }
        if !account::valid_prefix(&self.account_prefix) {
            return Some(format!(
                "the account prefix {:?} must match [a-z_][a-z0-9_-]* and not be root",
                self.account_prefix
            ));
        }
        None
    }
}

/// A staged workspace setup on the wire (the text never leaves the request and the host's
/// workspace; `Debug` prints file names only).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireSetup {
    id: String,
    namespace_id: NamespaceId,
    agent_id: AgentId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    defaults_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files: Option<BTreeMap<WorkspaceFileName, String>>,
    completed: bool,
}

impl std::fmt::Debug for WireSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireSetup")
            .field("id", &self.id)
            .field(
                "files",
                &self.files.as_ref().map(|f| f.keys().collect::<Vec<_>>()),
            )
            .field("completed", &self.completed)
            .finish_non_exhaustive()
    }
}

impl From<&WorkspaceSetup> for WireSetup {
    fn from(s: &WorkspaceSetup) -> Self {
        Self {
            id: s.id.clone(),
            namespace_id: s.namespace_id.clone(),
            agent_id: s.agent_id.clone(),
            defaults_id: s.defaults_id.clone(),
            files: s.files.clone(),
            completed: s.completed,
        }
    }
}

impl From<WireSetup> for WorkspaceSetup {
    fn from(s: WireSetup) -> Self {
        Self {
            id: s.id,
            namespace_id: s.namespace_id,
            agent_id: s.agent_id,
            defaults_id: s.defaults_id,
            files: s.files,
            completed: s.completed,
        }
    }
}

/// One Compute operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HostOp {
    /// [`crate::Host::ensure_namespace`]
    EnsureNamespace {
        /// The Namespace.
        namespace: NamespaceTarget,
    },
    /// [`crate::Host::delete_namespace`]
    DeleteNamespace {
        /// The Namespace.
        namespace: NamespaceTarget,
    },
    /// [`crate::Host::prepare_revision`] (workspace setup included)
    PrepareRevision {
        /// The revision.
        revision: Box<RevisionTarget>,
        /// The Agent's staged workspace setup.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace_setup: Option<WireSetup>,
    },
    /// [`crate::Host::activate_revision`]
    ActivateRevision {
        /// The revision.
        revision: Box<RevisionTarget>,
        /// The Agent's staged workspace setup.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace_setup: Option<WireSetup>,
    },
    /// [`crate::Host::restore_revision`]
    RestoreRevision {
        /// The revision to serve again.
        previous: Box<RevisionTarget>,
        /// The newer revision whose activation failed.
        failed: Box<RevisionTarget>,
        /// The Agent's staged workspace setup.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace_setup: Option<WireSetup>,
    },
    /// [`crate::Host::stop_revision`]
    StopRevision {
        /// The revision.
        revision: Box<RevisionTarget>,
    },
    /// [`crate::Host::retire_revision`]
    RetireRevision {
        /// The revision.
        revision: Box<RevisionTarget>,
    },
    /// [`crate::Host::delete_agent`]
    DeleteAgent {
        /// The Agent.
        agent: AgentTarget,
    },
    /// [`crate::Host::observe`]
    Observe {
        /// The revision.
        revision: Box<RevisionTarget>,
    },
    /// [`crate::Host::runtime_report`]
    RuntimeReport {
        /// The revision.
        revision: Box<RevisionTarget>,
    },
    /// The Agent's gateway port and credential ([`crate::Host::gateway_port`]).
    GatewayAccess {
        /// The Agent.
        agent: AgentTarget,
    },
    /// [`crate::Host::read_logs`]
    ReadLogs {
        /// The revision.
        revision: Box<RevisionTarget>,
        /// What to read.
        query: LogQuery,
    },
}

impl HostOp {
    /// The Namespace the operation acts in (which host it goes to).
    pub fn namespace_id(&self) -> &NamespaceId {
        match self {
            Self::EnsureNamespace { namespace } | Self::DeleteNamespace { namespace } => {
                &namespace.id
            }
            Self::PrepareRevision { revision, .. }
            | Self::ActivateRevision { revision, .. }
            | Self::RestoreRevision {
                previous: revision, ..
            }
            | Self::StopRevision { revision }
            | Self::RetireRevision { revision }
            | Self::Observe { revision }
            | Self::RuntimeReport { revision }
            | Self::ReadLogs { revision, .. } => &revision.agent.namespace_id,
            Self::DeleteAgent { agent } | Self::GatewayAccess { agent } => &agent.namespace_id,
        }
    }

    /// The operation's name (for logs).
    pub fn name(&self) -> &'static str {
        match self {
            Self::EnsureNamespace { .. } => "ensure-namespace",
            Self::DeleteNamespace { .. } => "delete-namespace",
            Self::PrepareRevision { .. } => "prepare-revision",
            Self::ActivateRevision { .. } => "activate-revision",
            Self::RestoreRevision { .. } => "restore-revision",
            Self::StopRevision { .. } => "stop-revision",
            Self::RetireRevision { .. } => "retire-revision",
            Self::DeleteAgent { .. } => "delete-agent",
            Self::Observe { .. } => "observe",
            Self::RuntimeReport { .. } => "runtime-report",
            Self::GatewayAccess { .. } => "gateway-access",
            Self::ReadLogs { .. } => "read-logs",
        }
    }
}

/// What the host is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostRequest {
    /// The sender's build: the host refuses any other ([`check_version`]).
    pub version: WireVersion,
    /// How long the host lets the operation run before it abandons it (below the Driver's own
    /// bound, so the host gives up first and says so).
    #[serde(default = "default_deadline_ms")]
    pub deadline_ms: u64,
    /// The host settings.
    pub settings: HostSettings,
    /// The Driver's identity, recorded in (and checked against) the host's markers.
    pub driver_id: String,
    /// The operation.
    pub operation: HostOp,
}

fn default_deadline_ms() -> u64 {
    DEFAULT_DEADLINE_MS
}

/// Refuses a request from another build (permanent `HOST_VERSION_MISMATCH`, naming both
/// versions). `request` is the request as parsed JSON, before its fields are read, so a
/// request of any other format is refused by version first.
pub fn check_version(request: &serde_json::Value) -> Result<(), ComputeError> {
    let ours = WireVersion::current();
    let theirs = request
        .get("version")
        .cloned()
        .and_then(|v| serde_json::from_value::<WireVersion>(v).ok());
    match theirs {
        Some(theirs) if theirs == ours => Ok(()),
        Some(theirs) => Err(ComputeError::permanent(
            ReasonCode::HostVersionMismatch,
            format!(
                "the controller runs {theirs} and this host runs {ours}: install the controller's \
                 occ build on the host"
            ),
        )),
        None => Err(ComputeError::permanent(
            ReasonCode::HostVersionMismatch,
            format!(
                "the controller's request carries no version (an occ older than this host's \
                 {ours}): install the controller's occ build on the host"
            ),
        )),
    }
}

/// Reads a request: not JSON is `HOST_REQUEST_INVALID`; another build's request is
/// `HOST_VERSION_MISMATCH` ([`check_version`]), before anything else is read; a request of this
/// build that does not parse is `HOST_REQUEST_INVALID`. All permanent.
pub fn parse_request(bytes: &[u8]) -> Result<HostRequest, ComputeError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        ComputeError::permanent(
            ReasonCode::HostRequestInvalid,
            format!("the request is not JSON: {e}"),
        )
    })?;
    check_version(&value)?;
    serde_json::from_value(value).map_err(|e| {
        ComputeError::permanent(
            ReasonCode::HostRequestInvalid,
            format!("the host's occ cannot read the request: {e}"),
        )
    })
}

/// The outcome of a successful operation (`Debug` never prints the token).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HostValue {
    /// A verb without a value.
    Done,
    /// A Namespace verb.
    Convergence {
        /// Not yet done.
        pending: bool,
    },
    /// `prepare-revision`.
    Readiness {
        /// Activatable.
        ready: bool,
        /// Why not, when not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<ReasonCode>,
    },
    /// `observe`.
    Runtime {
        /// `serving`, `not-running` or `not-current`.
        state: String,
    },
    /// `runtime-report`.
    Report {
        /// What runs for the revision.
        report: RuntimeReport,
    },
    /// `gateway-access` for an Agent that has a gateway on the host.
    Gateway {
        /// The gateway's port on the host.
        port: u16,
        /// The operator token.
        token: String,
    },
    /// `gateway-access` for an Agent without anything on the host.
    NoGateway,
    /// `read-logs`: raw output lines (the controller redacts them).
    Logs {
        /// What the read returned.
        chunk: LogChunk,
    },
}

impl std::fmt::Debug for HostValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done => f.write_str("Done"),
            Self::Convergence { pending } => write!(f, "Convergence {{ pending: {pending} }}"),
            Self::Readiness { ready, code } => {
                write!(f, "Readiness {{ ready: {ready}, code: {code:?} }}")
            }
            Self::Runtime { state } => write!(f, "Runtime {{ state: {state:?} }}"),
            Self::Report { report } => write!(f, "Report {{ report: {report:?} }}"),
            Self::Gateway { port, .. } => write!(f, "Gateway {{ port: {port}, .. }}"),
            Self::NoGateway => f.write_str("NoGateway"),
            // Raw output may hold secrets: never in a log line.
            Self::Logs { chunk } => write!(f, "Logs {{ entries: {}, .. }}", chunk.entries.len()),
        }
    }
}

/// The one line `occ compute-host` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HostReply {
    /// The operation succeeded.
    Ok {
        /// Its value.
        value: HostValue,
    },
    /// It failed, classified by the same code the process Driver uses.
    Failed {
        /// The failure.
        error: ComputeError,
    },
}

impl From<Result<HostValue, ComputeError>> for HostReply {
    fn from(result: Result<HostValue, ComputeError>) -> Self {
        match result {
            Ok(value) => Self::Ok { value },
            Err(error) => Self::Failed { error },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_of_another_build_are_refused_first() {
        let err = parse_request(b"not json").expect_err("not json");
        assert_eq!(
            (err.class, err.code),
            (
                occ_core::compute::FailureClass::Permanent,
                ReasonCode::HostRequestInvalid
            )
        );
        // Another build: refused by version whatever else the request holds.
        let other = serde_json::json!({
            "version": {"occ": "0.0.1", "protocol": WIRE_PROTOCOL},
            "anything": "else"
        });
        let err = parse_request(other.to_string().as_bytes()).expect_err("other");
        assert_eq!(err.code, ReasonCode::HostVersionMismatch);
        assert!(err.message.contains("0.0.1") && err.message.contains(OCC_VERSION));
        let newer =
            serde_json::json!({"version": {"occ": OCC_VERSION, "protocol": WIRE_PROTOCOL + 1}});
        assert_eq!(
            parse_request(newer.to_string().as_bytes())
                .expect_err("newer")
                .code,
            ReasonCode::HostVersionMismatch
        );
        let none = serde_json::json!({"settings": {}});
        assert_eq!(
            parse_request(none.to_string().as_bytes())
                .expect_err("none")
                .code,
            ReasonCode::HostVersionMismatch
        );
        // This build, but not a request.
        let same = serde_json::json!({"version": WireVersion::current(), "operation": 1});
        assert_eq!(
            parse_request(same.to_string().as_bytes())
                .expect_err("bad")
                .code,
            ReasonCode::HostRequestInvalid
        );
    }

    #[test]
    fn replies_round_trip() {
        for reply in [
            HostReply::Ok {
                value: HostValue::Readiness {
                    ready: false,
                    code: Some(ReasonCode::RevisionSuperseded),
                },
            },
            HostReply::Failed {
                error: ComputeError::permanent(ReasonCode::OwnershipConflict, "x"),
            },
        ] {
            let line = serde_json::to_string(&reply).expect("json");
            assert!(!line.contains('\n'));
            assert_eq!(
                serde_json::from_str::<HostReply>(&line).expect("parse"),
                reply
            );
        }
        let gateway = HostValue::Gateway {
            port: 1,
            token: "secret-token".into(),
        };
        assert!(!format!("{gateway:?}").contains("secret-token"));
    }
}
