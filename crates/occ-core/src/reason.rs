//! Reason codes: why work ended, is pending or failed, as recorded in a work item, its evidence
//! and a deployment's status (`error.code`, `lastAttempt.code`), and as a Compute failure
//! carries them ([`crate::compute::ComputeError`], also over the SSH host wire).
//!
//! One enum, so a code is a compile-time name: its wire form is the `SCREAMING_SNAKE` string
//! (serde uses the same). Stored codes stay strings in the store (a row may come from another
//! build); [`ReasonCode::parse`] reads them back and [`deployment_message`] keeps the generic
//! message for a code this build does not know.

use std::fmt;
use std::str::FromStr;

/// Declares the codes once: the variant and its wire string.
macro_rules! reason_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $wire:literal,)*) => {
        /// A reason code (see the module documentation).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ReasonCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ReasonCode {
            /// Every code.
            pub const ALL: &[ReasonCode] = &[$(ReasonCode::$variant,)*];

            /// The wire form.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ReasonCode::$variant => $wire,)*
                }
            }

            /// The code of a wire form, `None` for one this build does not know.
            pub fn parse(code: &str) -> Option<Self> {
                match code {
                    $($wire => Some(ReasonCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

reason_codes! {
    /// The revision was activated and serves.
    RevisionActivated = "REVISION_ACTIVATED",
    /// The revision was already the one serving.
    RevisionAlreadyActive = "REVISION_ALREADY_ACTIVE",
    /// A maintenance pass found another revision active or the Agent stopped.
    RevisionMaintenanceSuperseded = "REVISION_MAINTENANCE_SUPERSEDED",
    /// The revision is being prepared (progress).
    RevisionIncomplete = "REVISION_INCOMPLETE",
    /// The revision cannot be scheduled yet (progress).
    RevisionUnschedulable = "REVISION_UNSCHEDULABLE",
    /// A newer revision superseded this one.
    RevisionSuperseded = "REVISION_SUPERSEDED",
    /// The Agent was stopped before the revision became active.
    RevisionStopped = "REVISION_STOPPED",
    /// The workspace's node is not known yet (progress).
    WorkspaceNodePending = "WORKSPACE_NODE_PENDING",
    /// The workspace is not bound to a node yet (progress).
    WorkspaceNodeBindingPending = "WORKSPACE_NODE_BINDING_PENDING",
    /// A dependency (database, Secret Driver, IAM state) failed; retried.
    DependencyUnavailable = "DEPENDENCY_UNAVAILABLE",
    /// The Agent gateway is not reachable yet (progress).
    AgentGatewayUnavailable = "AGENT_GATEWAY_UNAVAILABLE",
    /// The Agent gateway refused occ's credential.
    AgentGatewayUnauthorized = "AGENT_GATEWAY_UNAUTHORIZED",
    /// The Kubernetes API is not reachable (progress).
    KubernetesApiUnavailable = "KUBERNETES_API_UNAVAILABLE",
    /// The sandbox admission limit is reached (progress).
    SandboxAdmissionLimitReached = "SANDBOX_ADMISSION_LIMIT_REACHED",
    /// The active revision changed during the pass (progress).
    ActiveRevisionChanged = "ACTIVE_REVISION_CHANGED",
    /// The active revision is being recovered (progress).
    ActiveRevisionRecovery = "ACTIVE_REVISION_RECOVERY",
    /// A worker lost its lease (progress).
    LeaseExpired = "LEASE_EXPIRED",
    /// What a deployment's last attempt shows for any code that is not a progress code.
    ReconciliationPending = "RECONCILIATION_PENDING",
    /// Pending work outlived the convergence deadline.
    ConvergenceDeadlineExceeded = "CONVERGENCE_DEADLINE_EXCEEDED",
    /// Retried work spent its attempts.
    MaxAttemptsExhausted = "MAX_ATTEMPTS_EXHAUSTED",
    /// The requester is no longer authorized.
    AuthorizationDenied = "AUTHORIZATION_DENIED",
    /// The requester no longer exists.
    ActorRevoked = "ACTOR_REVOKED",
    /// The Compute Driver cannot initialize workspace files.
    WorkspaceSetupUnsupported = "WORKSPACE_SETUP_UNSUPPORTED",
    /// Preparing the Agent's workspace failed.
    WorkspaceSetupFailed = "WORKSPACE_SETUP_FAILED",
    /// The gateway did not start.
    RuntimeStartupFailed = "RUNTIME_STARTUP_FAILED",
    /// The OpenClaw runtime is not installed where the worker runs.
    RuntimeNotInstalled = "RUNTIME_NOT_INSTALLED",
    /// OpenClaw refused the Agent's configuration.
    RuntimeConfigurationInvalid = "RUNTIME_CONFIGURATION_INVALID",
    /// The runtime's model probe failed (a dedicated harness's probe turn).
    RuntimeModelProbeFailed = "RUNTIME_MODEL_PROBE_FAILED",
    /// The dedicated harness's probe turn timed out.
    RuntimeModelProbeTimeout = "RUNTIME_MODEL_PROBE_TIMEOUT",
    /// The model endpoint refused the dedicated harness's credential.
    RuntimeAuthenticationFailed = "RUNTIME_AUTHENTICATION_FAILED",
    /// The dedicated harness could not log Codex in with its credential.
    RuntimeLoginFailed = "RUNTIME_LOGIN_FAILED",
    /// The dedicated harness is not running yet (progress).
    HarnessNotReady = "HARNESS_NOT_READY",
    /// The gateway refused or garbled the harness's node enrollment.
    WorkspaceNodeEnrollmentFailed = "WORKSPACE_NODE_ENROLLMENT_FAILED",
    /// Another process holds the gateway's port.
    GatewayPortInUse = "GATEWAY_PORT_IN_USE",
    /// No free gateway port is left.
    GatewayPortsExhausted = "GATEWAY_PORTS_EXHAUSTED",
    /// The gateway is not ready yet.
    GatewayNotReady = "GATEWAY_NOT_READY",
    /// Kubernetes refused the gateway Pod.
    GatewayPodRefused = "GATEWAY_POD_REFUSED",
    /// A gateway is still stopping.
    GatewayStopPending = "GATEWAY_STOP_PENDING",
    /// The gateway's operator token is missing.
    GatewayTokenMissing = "GATEWAY_TOKEN_MISSING",
    /// The gateway was restarted (audit reason of a restart).
    GatewayRestarted = "GATEWAY_RESTARTED",
    /// The runtime storage belongs to something else.
    OwnershipConflict = "OWNERSHIP_CONFLICT",
    /// The runtime storage does not hold the revision's snapshot.
    SnapshotMismatch = "SNAPSHOT_MISMATCH",
    /// The revision's snapshot cannot be stored.
    SnapshotInvalid = "SNAPSHOT_INVALID",
    /// The Compute Driver cannot read the workload's output right now.
    RuntimeLogsUnavailable = "RUNTIME_LOGS_UNAVAILABLE",
    /// The requested log source does not exist for the revision.
    RuntimeLogsSourceUnavailable = "RUNTIME_LOGS_SOURCE_UNAVAILABLE",
    /// The cluster refused occ's read of `pods/log` (its RBAC lacks it).
    RuntimeLogsClusterRbac = "RUNTIME_LOGS_CLUSTER_RBAC",
    /// The Namespace is not ready.
    NamespaceNotReady = "NAMESPACE_NOT_READY",
    /// The Namespace is not ready yet (pending).
    NamespaceIncomplete = "NAMESPACE_INCOMPLETE",
    /// An Agent provisioning job created its resources and handed off the first deploy.
    AgentProvisioned = "AGENT_PROVISIONED",
    /// An Agent provisioning job stopped at a step (its record names the step and why).
    AgentProvisioningFailed = "AGENT_PROVISIONING_FAILED",
    /// The Namespace was ensured or removed.
    NamespaceReconciled = "NAMESPACE_RECONCILED",
    /// An adopted Kubernetes namespace is not ready.
    ExistingNamespaceNotReady = "EXISTING_NAMESPACE_NOT_READY",
    /// Namespace work another item superseded.
    SupersededTarget = "SUPERSEDED_TARGET",
    /// The revision is pinned to another Compute Driver.
    ComputeDriverMismatch = "COMPUTE_DRIVER_MISMATCH",
    /// The revision was admitted for another OpenClaw version.
    HarnessDescriptorMismatch = "HARNESS_DESCRIPTOR_MISMATCH",
    /// A bound Secret is missing or unreadable.
    SecretBindingUnavailable = "SECRET_BINDING_UNAVAILABLE",
    /// The harness credential's Secret is missing or unreadable.
    HarnessAuthSourceUnavailable = "HARNESS_AUTH_SOURCE_UNAVAILABLE",
    /// A Secret is held by another Secret Driver.
    SecretDriverMismatch = "SECRET_DRIVER_MISMATCH",
    /// The Compute Driver cannot deliver the revision's Secrets.
    SecretDeliveryUnsupported = "SECRET_DELIVERY_UNSUPPORTED",
    /// A Secret binding names an environment variable gateways may not receive.
    SecretBindingNameRefused = "SECRET_BINDING_NAME_REFUSED",
    /// The harnessAuth cannot be delivered to the runtime.
    InvalidHarnessAuth = "INVALID_HARNESS_AUTH",
    /// The work item names no valid target.
    InvalidTarget = "INVALID_TARGET",
    /// The revision, its Agent or Namespace is gone.
    InvalidRevisionOwner = "INVALID_REVISION_OWNER",
    /// The active revision is not a revision of the Agent.
    InvalidActiveRevision = "INVALID_ACTIVE_REVISION",
    /// The admitted snapshot cannot be run.
    InvalidAdmittedRevision = "INVALID_ADMITTED_REVISION",
    /// The Agent is gone.
    InvalidAgentOwner = "INVALID_AGENT_OWNER",
    /// The Agent is not in the state the work expects.
    InvalidAgentState = "INVALID_AGENT_STATE",
    /// The Agent's runtime was stopped.
    AgentStopped = "AGENT_STOPPED",
    /// The Agent had nothing running.
    AgentAlreadyStopped = "AGENT_ALREADY_STOPPED",
    /// The Agent's runtime was removed.
    AgentDeleted = "AGENT_DELETED",
    /// A later deploy superseded the stop.
    StopSuperseded = "STOP_SUPERSEDED",
    /// A Kubernetes object changed concurrently.
    KubernetesConflict = "KUBERNETES_CONFLICT",
    /// Kubernetes refused occ's credential.
    KubernetesForbidden = "KUBERNETES_FORBIDDEN",
    /// Kubernetes rejected an object.
    KubernetesInvalid = "KUBERNETES_INVALID",
    /// The Kubernetes API failed.
    KubernetesUnavailable = "KUBERNETES_UNAVAILABLE",
    /// A Kubernetes object occ would own belongs to something else.
    TenantObjectForeign = "TENANT_OBJECT_FOREIGN",
    /// The SSH host refused occ's key.
    HostAuthenticationFailed = "HOST_AUTHENTICATION_FAILED",
    /// The host runs another operation for the Agent.
    HostBusy = "HOST_BUSY",
    /// The SSH host's key is not the pinned one.
    HostKeyVerificationFailed = "HOST_KEY_VERIFICATION_FAILED",
    /// A host operation outlived its deadline.
    HostOperationTimeout = "HOST_OPERATION_TIMEOUT",
    /// The host's reply cannot be read.
    HostReplyInvalid = "HOST_REPLY_INVALID",
    /// The host cannot read the request.
    HostRequestInvalid = "HOST_REQUEST_INVALID",
    /// The SSH host is not reachable.
    HostUnavailable = "HOST_UNAVAILABLE",
    /// The host runs another occ build.
    HostVersionMismatch = "HOST_VERSION_MISMATCH",
    /// The request for the host cannot be written.
    InvalidHostRequest = "INVALID_HOST_REQUEST",
    /// The host settings are invalid.
    InvalidHostSettings = "INVALID_HOST_SETTINGS",
    /// A systemd operation failed.
    SystemdFailed = "SYSTEMD_FAILED",
    /// systemd is not reachable.
    SystemdUnavailable = "SYSTEMD_UNAVAILABLE",
    /// A failed deployment whose work recorded no code.
    LegacyOutcomeUnknown = "LEGACY_OUTCOME_UNKNOWN",
}

/// The message of a failed deployment whose code has no message of its own.
const DEPLOYMENT_ENDED: &str = "The deployment ended without activating the revision.";

impl ReasonCode {
    /// Whether a pending deployment shows this code as its last attempt's; any other code shows
    /// as [`ReasonCode::ReconciliationPending`].
    pub fn is_progress(self) -> bool {
        use ReasonCode::*;
        matches!(
            self,
            RevisionIncomplete
                | RevisionUnschedulable
                | WorkspaceNodePending
                | WorkspaceNodeBindingPending
                | DependencyUnavailable
                | AgentGatewayUnavailable
                | KubernetesApiUnavailable
                | SandboxAdmissionLimitReached
                | ActiveRevisionChanged
                | LeaseExpired
                | ActiveRevisionRecovery
                | RuntimeStartupFailed
                | WorkspaceSetupFailed
                | GatewayPortInUse
                | HarnessNotReady
        )
    }

    /// The fixed message of this code as a deployment's progress or error.
    pub fn deployment_message(self) -> &'static str {
        use ReasonCode::*;
        match self {
            RevisionIncomplete => "The revision is being prepared and is not ready yet.",
            RevisionUnschedulable => "The revision cannot be scheduled yet.",
            DependencyUnavailable => {
                "A dependency was unavailable; the deployment will be retried."
            }
            AgentGatewayUnavailable => "The Agent gateway is not reachable yet.",
            ActiveRevisionChanged => {
                "The active revision changed; the deployment will be re-evaluated."
            }
            LeaseExpired => "A worker lost its lease; the deployment will be retried.",
            ActiveRevisionRecovery => "The active revision is being recovered.",
            ReconciliationPending => "The deployment is waiting for reconciliation.",
            RevisionSuperseded => "A newer revision superseded this deployment.",
            RevisionStopped => "The Agent was stopped before this revision became active.",
            ConvergenceDeadlineExceeded => "The deployment did not converge before its deadline.",
            AuthorizationDenied => {
                "The requesting actor is no longer authorized to deploy this Agent."
            }
            ActorRevoked => "The requesting actor no longer exists.",
            WorkspaceSetupUnsupported => {
                "The selected Compute Driver cannot initialize workspace files."
            }
            RuntimeStartupFailed => {
                "The Agent's gateway did not start; error.data.output has its last output lines."
            }
            RuntimeNotInstalled => {
                "The OpenClaw runtime is not installed where the worker runs; run `occ runtime install`."
            }
            RuntimeConfigurationInvalid => {
                "OpenClaw refused the Agent's configuration (error.data.output has its last output lines); fix the Configuration and deploy again."
            }
            WorkspaceSetupFailed => "Preparing the Agent's workspace failed.",
            GatewayPortInUse => "Another process holds the Agent gateway's port.",
            GatewayPortsExhausted => "The Compute Driver has no free gateway port left.",
            AgentGatewayUnauthorized => "The Agent gateway refused occ's credential.",
            OwnershipConflict | SnapshotMismatch => {
                "The Agent's runtime storage does not match occ's records; nothing was changed."
            }
            NamespaceNotReady => "The Namespace is not ready.",
            ComputeDriverMismatch => "The revision is pinned to another Compute Driver.",
            HarnessDescriptorMismatch => "The revision was admitted for another OpenClaw version.",
            SecretBindingUnavailable | HarnessAuthSourceUnavailable => {
                "A Secret the revision needs is missing or unreadable."
            }
            InvalidHarnessAuth => "The Agent's harnessAuth cannot be delivered to its runtime.",
            SecretBindingNameRefused => {
                "A Secret binding names an environment variable gateways may not receive; rename it and deploy again."
            }
            RuntimeAuthenticationFailed => {
                "The model endpoint refused the Agent's harness credential; fix the Secret and deploy again."
            }
            RuntimeLoginFailed => {
                "The Codex harness could not log in with the Agent's harness credential."
            }
            RuntimeModelProbeFailed => {
                "The Codex harness's probe turn against the model endpoint failed; error.data.output has its last output lines."
            }
            RuntimeModelProbeTimeout => {
                "The Codex harness's probe turn got no answer from the model endpoint in time."
            }
            HarnessNotReady => "The Agent's Codex harness is not ready yet.",
            WorkspaceNodeEnrollmentFailed => {
                "The Agent's gateway did not enroll the harness's workspace node."
            }
            MaxAttemptsExhausted => "The deployment failed after its maximum number of attempts.",
            _ => DEPLOYMENT_ENDED,
        }
    }
}

/// The fixed deployment message of a stored code: a code this build does not know (written by
/// another build) gets the generic one.
pub fn deployment_message(code: &str) -> &'static str {
    ReasonCode::parse(code).map_or(DEPLOYMENT_ENDED, ReasonCode::deployment_message)
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wire form this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason code {0:?}")]
pub struct UnknownReasonCode(pub String);

impl FromStr for ReasonCode {
    type Err = UnknownReasonCode;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Self::parse(code).ok_or_else(|| UnknownReasonCode(code.to_owned()))
    }
}

impl serde::Serialize for ReasonCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ReasonCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        code.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_forms_are_distinct_reason_codes_that_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for &code in ReasonCode::ALL {
            let wire = code.as_str();
            assert!(seen.insert(wire), "{wire} twice");
            assert_eq!(crate::work::sanitize_reason_code(wire), wire);
            assert_eq!(ReasonCode::parse(wire), Some(code));
            assert_eq!(code.to_string(), wire);
            let json = serde_json::to_string(&code).expect("json");
            assert_eq!(json, format!("\"{wire}\""));
            assert_eq!(
                serde_json::from_str::<ReasonCode>(&json).expect("parse"),
                code
            );
        }
        assert_eq!(ReasonCode::parse("NO_SUCH_CODE"), None);
        assert!(serde_json::from_str::<ReasonCode>("\"NO_SUCH_CODE\"").is_err());
    }

    #[test]
    fn deployment_messages() {
        for &code in ReasonCode::ALL.iter().filter(|c| c.is_progress()) {
            assert!(!code.deployment_message().is_empty(), "{code}");
        }
        assert_eq!(
            ReasonCode::LeaseExpired.deployment_message(),
            "A worker lost its lease; the deployment will be retried."
        );
        assert!(!ReasonCode::ReconciliationPending.is_progress());
        assert_eq!(
            deployment_message("REVISION_SUPERSEDED"),
            "A newer revision superseded this deployment."
        );
        assert_eq!(deployment_message("INVALID_TARGET"), DEPLOYMENT_ENDED);
        // A code written by another build keeps the generic message.
        assert_eq!(deployment_message("SOME_FUTURE_CODE"), DEPLOYMENT_ENDED);
    }
}
