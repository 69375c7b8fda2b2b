//! What admission needs to know about the installation's Compute Driver: its identity (pinned
//! into every revision) and which execution modes and harness authentication methods it can run.
//! Each Driver's module says what it is (`process::selection`, `ssh::selection`,
//! `kubernetes::selection`): the one source, used by the Driver itself and by admission. The
//! Driver's runtime operations belong to the worker.

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
        let mut process = crate::compute::process::selection(false);
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
        let ssh = crate::compute::ssh::selection();
        assert!(ssh.refusal(ExecutionMode::Dedicated, Some(&pat)).is_some());
    }
}
