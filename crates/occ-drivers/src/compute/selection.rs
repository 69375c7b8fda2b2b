//! What admission needs to know about the installation's Compute Driver: its identity (pinned
//! into every revision) and which execution modes and harness authentication methods it can run.
//! The Driver's runtime operations belong to the worker.

use occ_core::resource::{ComputeIdentity, ExecutionMode, HarnessAuth};

/// What a dedicated Codex harness can log in with: an API key or a Codex access token, each from
/// a Secret, or the credential a Backend issued to a ServiceAccount (`runtime` would leave the
/// harness without any).
pub const DEDICATED_AUTH_METHODS: [&str; 3] = ["api_key", "codex_pat", "chatgpt_service_account"];

/// The Compute Driver selected by the installation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeSelection {
    /// Identity pinned into revisions.
    pub identity: ComputeIdentity,
    /// Execution modes it can run.
    pub execution_modes: Vec<ExecutionMode>,
    /// Harness authentication methods it can deliver to an embedded Agent's gateway.
    pub harness_auth_methods: Vec<&'static str>,
    /// Harness authentication methods a dedicated Codex harness logs in with (used only when
    /// `execution_modes` has `dedicated`).
    pub dedicated_auth_methods: Vec<&'static str>,
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
            dedicated_auth_methods: DEDICATED_AUTH_METHODS.to_vec(),
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
            dedicated_auth_methods: Vec::new(),
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
            dedicated_auth_methods: DEDICATED_AUTH_METHODS.to_vec(),
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
        let methods = match mode {
            ExecutionMode::Embedded => &self.harness_auth_methods,
            ExecutionMode::Dedicated => &self.dedicated_auth_methods,
        };
        (!methods.contains(&method)).then(|| {
            format!(
                "The {} Compute Driver cannot deliver harnessAuth method {method} to an Agent \
                 with executionMode {} (it can deliver {})",
                self.identity.implementation,
                mode.as_str(),
                methods.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use occ_core::resource::SecretRef;
    use occ_core::{NamespaceId, SecretId};

    use super::*;

    fn secret() -> SecretRef {
        SecretRef::new(NamespaceId::generate(), SecretId::generate())
    }

    #[test]
    fn methods_are_checked_per_execution_mode() {
        let mut process = ComputeSelection::process();
        let pat = HarnessAuth::CodexPat { source: secret() };
        let key = HarnessAuth::ApiKey { source: secret() };
        // a Codex access token logs a dedicated harness in; an embedded gateway cannot use it
        let refusal = process
            .refusal(ExecutionMode::Embedded, Some(&pat))
            .unwrap();
        assert!(refusal.contains("codex_pat"), "{refusal}");
        assert!(refusal.contains("embedded"), "{refusal}");
        assert_eq!(process.refusal(ExecutionMode::Embedded, Some(&key)), None);
        // a Driver without dedicated execution refuses the mode before any method
        let refusal = process
            .refusal(ExecutionMode::Dedicated, Some(&pat))
            .unwrap();
        assert!(refusal.contains("dedicated execution"), "{refusal}");
        process.execution_modes.push(ExecutionMode::Dedicated);
        assert_eq!(process.refusal(ExecutionMode::Dedicated, Some(&pat)), None);
        assert_eq!(process.refusal(ExecutionMode::Dedicated, Some(&key)), None);
        let refusal = process
            .refusal(ExecutionMode::Dedicated, Some(&HarnessAuth::Runtime {}))
            .unwrap();
        assert!(refusal.contains("api_key, codex_pat"), "{refusal}");
        // SSH keeps refusing dedicated execution, as the reference does
        let ssh = ComputeSelection::ssh();
        assert!(ssh.refusal(ExecutionMode::Dedicated, Some(&pat)).is_some());
    }
}
