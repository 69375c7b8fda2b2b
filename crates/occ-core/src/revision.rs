//! What a revision consumes, and so which grants deploying it needs: one policy, applied by deploy
//! admission and again by the worker on fresh policy before every pass that runs the revision.
//!
//! A revision consumes read on its Configuration; operate on each Secret it binds and on the
//! Secret of an `api_key` harnessAuth — the Agent's service principal must hold that too, since
//! the values reach its runtime; and read on the ServiceAccount of a ChatGPT harnessAuth.

use crate::authz::{Action, ResourceKind, ResourceRef};
use crate::resource::{AdmittedSpec, HarnessAuth, SecretBindings};
use crate::{ConfigurationId, NamespaceId, SecretId, ServiceAccountId};

/// One resource a revision consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumed<'a> {
    /// The Configuration the revision was made from.
    Configuration(&'a ConfigurationId),
    /// A bound Secret or the harness credential's Secret.
    Secret(&'a SecretId),
    /// The ChatGPT ServiceAccount of the harnessAuth.
    ServiceAccount(&'a ServiceAccountId),
}

impl Consumed<'_> {
    /// The action the deployer must be allowed on it.
    pub fn action(self) -> Action {
        match self {
            Consumed::Configuration(_) | Consumed::ServiceAccount(_) => Action::Read,
            Consumed::Secret(_) => Action::Operate,
        }
    }

    /// The resource, in the revision's Namespace.
    pub fn resource(self, namespace: &NamespaceId) -> ResourceRef {
        match self {
            Consumed::Configuration(id) => {
                ResourceRef::exact(ResourceKind::Configuration, namespace, id)
            }
            Consumed::Secret(id) => ResourceRef::exact(ResourceKind::Secret, namespace, id),
            Consumed::ServiceAccount(id) => {
                ResourceRef::exact(ResourceKind::ServiceAccount, namespace, id)
            }
        }
    }

    /// Whether the Agent's service principal must be allowed the same action: a Secret's value
    /// is handed to the Agent's runtime.
    pub fn agent_principal_too(self) -> bool {
        matches!(self, Consumed::Secret(_))
    }
}

/// Everything a revision made from `configuration_id` consumes, in the order the grants are
/// checked: the Configuration first, then [`consumed_inputs`].
pub fn consumed<'a>(
    configuration_id: &'a ConfigurationId,
    secret_bindings: Option<&'a SecretBindings>,
    harness_auth: Option<&'a HarnessAuth>,
) -> Vec<Consumed<'a>> {
    let mut all = vec![Consumed::Configuration(configuration_id)];
    all.extend(consumed_inputs(secret_bindings, harness_auth));
    all
}

/// What a revision consumes besides its Configuration (admission knows these only once it holds
/// the Configuration): each bound Secret in binding order, then the harness credential's Secret
/// or its ServiceAccount.
pub fn consumed_inputs<'a>(
    secret_bindings: Option<&'a SecretBindings>,
    harness_auth: Option<&'a HarnessAuth>,
) -> Vec<Consumed<'a>> {
    let bindings = secret_bindings
        .into_iter()
        .flat_map(|b| b.values())
        .map(|b| Consumed::Secret(&b.source.id));
    let harness = harness_auth.and_then(|auth| match auth {
        HarnessAuth::ApiKey { source } | HarnessAuth::CodexPat { source } => {
            Some(Consumed::Secret(&source.id))
        }
        HarnessAuth::ChatgptServiceAccount { service_account_id } => {
            Some(Consumed::ServiceAccount(service_account_id))
        }
        HarnessAuth::Runtime {} => None,
    });
    bindings.chain(harness).collect()
}

impl AdmittedSpec {
    /// Everything this revision consumes ([`consumed`]).
    pub fn consumed(&self) -> Vec<Consumed<'_>> {
        consumed(
            &self.configuration_id,
            self.secret_bindings.as_ref(),
            self.harness_auth.as_ref(),
        )
    }

    /// The Secrets this revision consumes: its bindings and an `api_key` harness credential.
    pub fn consumed_secrets(&self) -> impl Iterator<Item = &SecretId> {
        self.consumed().into_iter().filter_map(|c| match c {
            Consumed::Secret(id) => Some(id),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{SecretBinding, SecretDelivery, SecretRef, SecretRefKind};

    fn secret_ref(ns: &NamespaceId, id: &SecretId) -> SecretRef {
        SecretRef {
            kind: SecretRefKind::Secret,
            namespace_id: ns.clone(),
            id: id.clone(),
        }
    }

    fn binding(ns: &NamespaceId, id: &SecretId) -> SecretBinding {
        SecretBinding {
            source: secret_ref(ns, id),
            delivery: SecretDelivery::Env,
        }
    }

    #[test]
    fn a_revision_consumes_its_configuration_bound_secrets_and_harness_credential() {
        let ns = NamespaceId::generate();
        let cfg = ConfigurationId::generate();
        let (first, second, key) = (
            SecretId::generate(),
            SecretId::generate(),
            SecretId::generate(),
        );
        let bindings = SecretBindings::from([
            ("B_VAR".to_owned(), binding(&ns, &second)),
            ("A_VAR".to_owned(), binding(&ns, &first)),
        ]);
        let api_key = HarnessAuth::ApiKey {
            source: secret_ref(&ns, &key),
        };
        assert_eq!(
            consumed(&cfg, Some(&bindings), Some(&api_key)),
            vec![
                Consumed::Configuration(&cfg),
                // Binding order is the variable names' order.
                Consumed::Secret(&first),
                Consumed::Secret(&second),
                Consumed::Secret(&key),
            ]
        );
        assert_eq!(
            consumed(&cfg, None, Some(&HarnessAuth::Runtime {})),
            vec![Consumed::Configuration(&cfg)]
        );
        assert_eq!(
            consumed(&cfg, None, None),
            vec![Consumed::Configuration(&cfg)]
        );
    }

    #[test]
    fn a_chatgpt_service_account_is_read_by_the_deployer_only() {
        let cfg = ConfigurationId::generate();
        let account = ServiceAccountId::generate();
        let auth = HarnessAuth::ChatgptServiceAccount {
            service_account_id: account.clone(),
        };
        let all = consumed(&cfg, None, Some(&auth));
        assert_eq!(
            all,
            vec![
                Consumed::Configuration(&cfg),
                Consumed::ServiceAccount(&account)
            ]
        );
        let ns = NamespaceId::generate();
        let grants: Vec<_> = all
            .iter()
            .map(|c| (c.action(), c.resource(&ns).kind, c.agent_principal_too()))
            .collect();
        assert_eq!(
            grants,
            vec![
                (Action::Read, ResourceKind::Configuration, false),
                (Action::Read, ResourceKind::ServiceAccount, false),
            ]
        );
    }

    #[test]
    fn secrets_are_operated_by_the_deployer_and_the_agent_principal() {
        let ns = NamespaceId::generate();
        let secret = SecretId::generate();
        let grant = Consumed::Secret(&secret);
        assert_eq!(grant.action(), Action::Operate);
        assert_eq!(
            grant.resource(&ns),
            ResourceRef::exact(ResourceKind::Secret, &ns, &secret)
        );
        assert!(grant.agent_principal_too());
        assert!(!Consumed::Configuration(&ConfigurationId::generate()).agent_principal_too());
    }
}
