//! Agent provisioning jobs (`provisionAgent`): one request that creates a Configuration, an
//! Agent and the Agent's Secret grants, then deploys, run by the worker as durable work.
//!
//! Admission records the accepted request and *plans* the ids of what the job will create; the
//! worker creates each resource under its planned id and records it. Because an id is fixed
//! before anything exists, a retry (or a worker that crashed after a create committed) finds
//! what an earlier run made instead of making it twice: no orphan Agent, no second revision.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::id::{AgentId, ConfigurationId, IamId, NamespaceId, ProvisioningId, RevisionId};
use crate::resource::{ExecutionMode, HarnessAuth, SecretBindings, WorkspaceFiles};
use crate::time::Timestamp;

/// Longest `error.message` the reference allows.
pub const ERROR_MESSAGE_MAX_CHARS: usize = 256;

/// What a provisioning request asks for, kept as admitted (no credential values: Secrets are
/// referenced, never embedded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionSpec {
    /// The Agent's name (validated at admission).
    pub name: String,
    /// The native `openclaw.json` document of the new Configuration.
    pub configuration_values: Map<String, Value>,
    /// The new Configuration's Secret bindings.
    #[serde(default)]
    pub secret_bindings: SecretBindings,
    /// The Agent's execution mode.
    pub execution_mode: ExecutionMode,
    /// A configured Backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_id: Option<String>,
    /// How the harness authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_auth: Option<HarnessAuth>,
    /// Initial workspace files to stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_workspace_files: Option<WorkspaceFiles>,
    /// The workspace defaults identity the form was rendered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_defaults_id: Option<String>,
}

impl ProvisionSpec {
    /// The request's fingerprint: the same `requestId` with another fingerprint is a conflict.
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_vec(&canonical(
            serde_json::to_value(self).unwrap_or(Value::Null),
        ))
        .unwrap_or_default();
        hex::encode(Sha256::digest(&canonical))
    }

    /// Every Secret the new Agent consumes (bindings and harness credential), each once.
    pub fn consumed_secrets(&self) -> Vec<crate::SecretId> {
        let mut out: Vec<crate::SecretId> = self
            .secret_bindings
            .values()
            .map(|b| b.source.id.clone())
            .collect();
        if let Some(id) = self.harness_auth.as_ref().and_then(|a| a.secret_id()) {
            out.push(id.clone());
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Objects with their keys sorted, so equal documents hash equally whatever their key order.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// Where a job is (the reference's `phase`): admitted, then creating the Configuration, then the
/// Agent and the grants its runtime credentials need (`transport`), then the first deploy
/// (`handoff`). A failed job keeps the phase it failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisioningPhase {
    /// Accepted, nothing created yet.
    Admitted,
    /// Creating the Configuration.
    Configuration,
    /// Creating the Agent and granting its identity the Secrets it consumes.
    Transport,
    /// Admitting the first revision (the deployment then owns the lifecycle).
    Handoff,
}

/// How a job stands (the reference's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisioningStatus {
    /// Waiting for a worker.
    Queued,
    /// A worker runs it.
    Running,
    /// The first revision was admitted.
    Succeeded,
    /// Stopped at a step; retry resumes there.
    Failed,
}

macro_rules! wire_enum {
    ($ty:ident { $($variant:ident = $wire:literal),* $(,)? }) => {
        impl $ty {
            /// The stored and wire form.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $wire,)* }
            }
            /// Parses the stored form.
            pub fn parse(value: &str) -> Option<Self> {
                [$($ty::$variant,)*].into_iter().find(|v| v.as_str() == value)
            }
        }
    };
}

wire_enum!(ProvisioningPhase {
    Admitted = "admitted",
    Configuration = "configuration",
    Transport = "transport",
    Handoff = "handoff",
});
wire_enum!(ProvisioningStatus {
    Queued = "queued",
    Running = "running",
    Succeeded = "succeeded",
    Failed = "failed",
});

/// Why a job failed: a safe code and message (never a credential or a document value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisioningError {
    /// An error code of the API (`RESOURCE_CONFLICT`, `NOT_FOUND`, …) or a reason code.
    pub code: String,
    /// What happened, at most 256 characters.
    pub message: String,
}

impl ProvisioningError {
    /// An error with its message cut to the reference's bound.
    pub fn new(code: &str, message: &str) -> Self {
        let message: String = message.chars().take(ERROR_MESSAGE_MAX_CHARS).collect();
        Self {
            code: crate::work::sanitize_reason_code(code),
            message: if message.trim().is_empty() {
                "The provisioning step failed".to_owned()
            } else {
                message
            },
        }
    }
}

/// A provisioning job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Provisioning {
    /// The job (`workId`).
    pub id: ProvisioningId,
    /// Its Namespace.
    pub namespace_id: NamespaceId,
    /// Who asked (only they may read or retry it; the worker acts with their authority).
    pub actor_id: IamId,
    /// The caller's idempotency key.
    pub request_id: String,
    /// [`ProvisionSpec::fingerprint`] of the accepted request.
    pub fingerprint: String,
    /// The accepted request.
    pub spec: ProvisionSpec,
    /// How it stands.
    pub status: ProvisioningStatus,
    /// Where it is.
    pub phase: ProvisioningPhase,
    /// Worker runs so far.
    pub attempt_count: u32,
    /// Admissions plus retries (names the current work item).
    pub run: u32,
    /// The id the Configuration is (or will be) created under.
    pub planned_configuration_id: ConfigurationId,
    /// The id the Agent is (or will be) created under.
    pub planned_agent_id: AgentId,
    /// Set once the Configuration exists.
    pub configuration_id: Option<ConfigurationId>,
    /// Set once the Agent exists.
    pub agent_id: Option<AgentId>,
    /// Set once the first revision was admitted.
    pub revision_id: Option<RevisionId>,
    /// Why it failed, while failed.
    pub error: Option<ProvisioningError>,
    /// Admission time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl Provisioning {
    /// The job's status URL (the reference's `url`).
    pub fn url(&self) -> String {
        format!(
            "/namespaces/{}/agents/provision/{}",
            self.namespace_id, self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(values: Value) -> ProvisionSpec {
        ProvisionSpec {
            name: "helper".into(),
            configuration_values: values.as_object().cloned().unwrap_or_default(),
            secret_bindings: SecretBindings::new(),
            execution_mode: ExecutionMode::Embedded,
            backend_id: None,
            harness_auth: None,
            initial_workspace_files: None,
            workspace_defaults_id: None,
        }
    }

    #[test]
    fn the_fingerprint_ignores_key_order_and_sees_every_value() {
        let a = spec(serde_json::json!({"agents": {"a": 1, "b": 2}, "gateway": {}}));
        let b = spec(serde_json::json!({"gateway": {}, "agents": {"b": 2, "a": 1}}));
        let c = spec(serde_json::json!({"gateway": {}, "agents": {"b": 3, "a": 1}}));
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        let mut renamed = a.clone();
        renamed.name = "other".into();
        assert_ne!(a.fingerprint(), renamed.fingerprint());
    }

    #[test]
    fn the_spec_round_trips_through_its_stored_form() {
        let a = spec(serde_json::json!({"agents": {}}));
        let stored = serde_json::to_value(&a).expect("json");
        assert_eq!(
            serde_json::from_value::<ProvisionSpec>(stored).expect("parse"),
            a
        );
    }

    #[test]
    fn wire_forms_round_trip_and_errors_are_bounded() {
        for phase in [
            ProvisioningPhase::Admitted,
            ProvisioningPhase::Configuration,
            ProvisioningPhase::Transport,
            ProvisioningPhase::Handoff,
        ] {
            assert_eq!(ProvisioningPhase::parse(phase.as_str()), Some(phase));
        }
        assert_eq!(
            ProvisioningStatus::parse("running"),
            Some(ProvisioningStatus::Running)
        );
        assert_eq!(ProvisioningStatus::parse("done"), None);
        let e = ProvisioningError::new("resource conflict", &"x".repeat(400));
        assert_eq!(e.code, "RESOURCE_CONFLICT");
        assert_eq!(e.message.chars().count(), ERROR_MESSAGE_MAX_CHARS);
    }
}
