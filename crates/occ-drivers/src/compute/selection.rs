//! What admission needs to know about the installation's Compute Driver: its identity (pinned
//! into every revision) and which execution modes and harness authentication methods it can run.
//! The Driver's runtime operations belong to the worker.

use occ_core::resource::{ComputeIdentity, ExecutionMode, HarnessAuth};

/// The Compute Driver selected by the installation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeSelection {
    /// Identity pinned into revisions.
    pub identity: ComputeIdentity,
    /// Execution modes it can run.
    pub execution_modes: Vec<ExecutionMode>,
    /// Harness authentication methods it can deliver.
    pub harness_auth_methods: Vec<&'static str>,
    /// Whether it delivers a Configuration's Secret bindings to the workload.
    pub delivers_secrets: bool,
    /// Whether a Namespace may adopt an existing Kubernetes namespace (`existingNamespace`).
    /// No Driver does yet: the Kubernetes Driver provisions its own tenant namespaces.
    pub adopts_existing_namespaces: bool,
}

impl ComputeSelection {
    /// Local OpenClaw gateway processes: embedded execution; credentials on the host or from
    /// a Secret delivered as an environment variable.
    pub fn process() -> Self {
        Self {
            identity: ComputeIdentity {
                id: "compute-process".into(),
                implementation: "process".into(),
            },
            execution_modes: vec![ExecutionMode::Embedded],
            harness_auth_methods: vec!["runtime", "api_key"],
            delivers_secrets: true,
            adopts_existing_namespaces: false,
        }
    }

    /// OpenClaw gateways on operator-provisioned hosts over SSH: embedded execution; the
    /// runtime's own credentials only (no Secret is delivered to a host).
    pub fn ssh() -> Self {
        Self {
            identity: ComputeIdentity {
                id: "compute-ssh".into(),
                implementation: "ssh".into(),
            },
            execution_modes: vec![ExecutionMode::Embedded],
            harness_auth_methods: vec!["runtime"],
            delivers_secrets: false,
            adopts_existing_namespaces: false,
        }
    }

    /// OpenClaw gateways as Deployments in each Namespace's tenant namespace: embedded
    /// execution; Secret bindings and an `api_key` credential delivered as environment.
    pub fn kubernetes() -> Self {
        Self {
            identity: ComputeIdentity {
                id: "compute-kubernetes".into(),
                implementation: "kubernetes".into(),
            },
            execution_modes: vec![ExecutionMode::Embedded],
            harness_auth_methods: vec!["runtime", "api_key"],
            delivers_secrets: true,
            adopts_existing_namespaces: true,
        }
    }

    /// Why this Compute Driver cannot run a Configuration with Secret bindings, if it cannot.
    pub fn secret_refusal(&self, has_bindings: bool) -> Option<String> {
        (has_bindings && !self.delivers_secrets).then(|| {
            format!(
                "The {} Compute Driver does not deliver Secrets to its hosts; remove the \
                 Configuration's Secret bindings and provision credentials on the host",
                self.identity.implementation
            )
        })
    }

    /// Why this Compute Driver cannot run an Agent in `mode` with `auth`, if it cannot.
    pub fn refusal(&self, mode: ExecutionMode, auth: Option<&HarnessAuth>) -> Option<String> {
        if !self.execution_modes.contains(&mode) {
            return Some(format!(
                "The {} Compute Driver does not support {} execution; use executionMode \"embedded\"",
                self.identity.implementation,
                mode.as_str()
            ));
        }
        let method = auth.map(HarnessAuth::method)?;
        (!self.harness_auth_methods.contains(&method)).then(|| {
            format!(
                "The {} Compute Driver cannot deliver harnessAuth method {method}",
                self.identity.implementation
            )
        })
    }
}
