//! Deploy admission as facts → plan → effects.
//!
//! - **Facts** ([`AdmissionFacts`]): what the store says about the Agent and everything its new
//!   revision would consume, read by `Controller::admission_facts` — once in a read session
//!   before any lock, once in the deploy's own transaction under the Agent's and the
//!   Configuration's row locks. Authorization decisions on what is consumed are made while
//!   reading, before each resource is read, and the checks that come first for a caller
//!   ([`check_target`], [`check_basis`]) are made as soon as their facts are read, so a
//!   deploy that cannot run here is refused before the Agent's use of its inputs is judged.
//! - **Driver answers** ([`DriverAnswers`]): the only Driver I/O of admission — the
//!   Configuration Driver's document of the locked generation and the Secret Driver's
//!   verification (identity only) of each consumed Secret — asked for the unlocked facts,
//!   *before* the transaction, so no Driver call happens while a row is locked. The plan checks
//!   that the locked facts are still what the answers were for (same generation, same Secret
//!   locators), else the deploy is refused as concurrent (409, retry).
//! - **Plan** ([`plan`]): pure. From the locked facts and the answers, the admitted spec of the
//!   new revision or the refusal, in the order a caller should learn them.
//! - **Effects**: the revision, its desired state, its reconcile work and its audit event in one
//!   statement, committed (`Controller::admit_revision`); refusals that are audited are audited
//!   after the transaction rolls back.

use std::collections::BTreeMap;

use occ_core::resource::{
    AdmittedSpec, Agent, AgentRevision, AgentStatus, ComputeIdentity, ConfigurationMeta,
    ExecutionMode, FrozenAccountCredential, Generation, HarnessAuth, HarnessDescriptor, Namespace,
    NamespaceStatus, SecretBindings, SecretMeta, ServiceAccount, ServiceAccountBinding,
    ServiceAccountCredentialKind,
};
use occ_core::validate::Problems;
use occ_core::{ConfigurationId, Error, SecretId};
use occ_drivers::compute::ComputeSelection;
use serde_json::{Map, Value};

/// What a new revision is made from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Basis {
    /// The Agent's Configuration at its current generation (a deploy).
    Configuration(ConfigurationMeta),
    /// An earlier revision of the Agent (a redeploy).
    Revision(Box<AgentRevision>),
}

impl Basis {
    pub(crate) fn configuration_id(&self) -> &ConfigurationId {
        match self {
            Basis::Configuration(cfg) => &cfg.id,
            Basis::Revision(rev) => &rev.spec.configuration_id,
        }
    }

    pub(crate) fn generation(&self) -> Generation {
        match self {
            Basis::Configuration(cfg) => cfg.generation,
            Basis::Revision(rev) => rev.spec.configuration_generation,
        }
    }

    pub(crate) fn secret_bindings(&self) -> SecretBindings {
        match self {
            Basis::Configuration(cfg) => cfg.secret_bindings.clone(),
            Basis::Revision(rev) => rev.spec.secret_bindings.clone().unwrap_or_default(),
        }
    }
}

/// What the store says, at one moment, about the Agent and what its revision would consume.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionFacts {
    pub agent: Agent,
    pub namespace: Namespace,
    pub basis: Basis,
    /// The harnessAuth the revision would run with (the Agent's draft, or the source's).
    pub harness_auth: Option<HarnessAuth>,
    /// Each consumed Secret (bound, and the harness credential's), `None` when it is gone.
    pub secrets: BTreeMap<SecretId, Option<SecretMeta>>,
    /// The harnessAuth's ServiceAccount, when it names one.
    pub account: Option<ServiceAccount>,
}

impl AdmissionFacts {
    /// The execution mode the revision would run in (the Agent's draft, or the source's).
    pub(crate) fn mode(&self) -> ExecutionMode {
        match &self.basis {
            Basis::Configuration(_) => self.agent.execution_mode,
            Basis::Revision(rev) => rev.spec.harness.mode,
        }
    }
}

/// What the Drivers answered for a moment's facts (asked outside any lock).
#[derive(Debug, Clone)]
pub(crate) struct DriverAnswers {
    /// The Configuration and generation the document is of.
    pub basis: (ConfigurationId, Generation),
    /// The basis document (the Configuration Driver's, or the source revision's frozen copy).
    pub document: Map<String, Value>,
    /// The locator each consumed Secret was verified at (identity only).
    pub verified: BTreeMap<SecretId, String>,
}

/// What the installation contributes to a plan.
pub(crate) struct Installation<'a> {
    pub compute: &'a ComputeSelection,
    /// The harness this installation runs an execution mode with.
    pub harness: &'a (dyn Fn(ExecutionMode) -> HarnessDescriptor + Sync),
    pub secret_driver_id: &'a str,
}

/// What a plan admits: the new revision's spec, the Backend it runs on and, for a redeploy,
/// the revision it was made from.
#[derive(Debug)]
pub(crate) struct Planned {
    pub spec: AdmittedSpec,
    pub backend_id: Option<String>,
    pub source_revision_id: Option<occ_core::RevisionId>,
}

/// Why a deploy is refused, and whether the refusal is audited (with this reason code).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub error: Error,
    pub audited: Option<&'static str>,
}

impl From<occ_store::StoreError> for Refusal {
    fn from(error: occ_store::StoreError) -> Self {
        Error::from(error).into()
    }
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Self {
            error,
            audited: None,
        }
    }
}

/// The refusals the facts alone decide, in the order a caller should learn them:
/// [`check_target`], [`check_basis`], then that each consumed Secret still exists here.
/// Checked before any Driver is asked (no I/O for a deploy that cannot be admitted), and again
/// by [`plan`] on the locked facts.
pub(crate) fn check_facts(
    facts: &AdmissionFacts,
    installation: &Installation<'_>,
) -> Result<(), Refusal> {
    let source = match &facts.basis {
        Basis::Revision(rev) => Some(rev.as_ref()),
        Basis::Configuration(_) => None,
    };
    check_target(
        &facts.agent,
        &facts.namespace,
        source,
        facts.harness_auth.as_ref(),
        installation,
    )?;
    check_basis(&facts.basis, installation)?;
    for (id, meta) in &facts.secrets {
        secret_usable(id, meta.as_ref(), installation)?;
    }
    Ok(())
}

/// What is refused before anything the revision consumes is even authorized: the Agent is not
/// being deleted, the Namespace is ready, a harnessAuth is set and the Compute Driver can run
/// it, and a redeploy's `source` fits this installation.
pub(crate) fn check_target(
    agent: &Agent,
    namespace: &Namespace,
    source: Option<&AgentRevision>,
    harness_auth: Option<&HarnessAuth>,
    installation: &Installation<'_>,
) -> Result<(), Refusal> {
    if agent.status == AgentStatus::Deleting {
        return Err(crate::agents::agent_deleting().into());
    }
    if namespace.status != NamespaceStatus::Ready {
        return Err(Refusal {
            error: crate::namespaces::require_ready(namespace)
                .expect_err("a Namespace that is not ready"),
            audited: Some("NAMESPACE_NOT_READY"),
        });
    }
    let Some(harness_auth) = harness_auth else {
        return Err(
            Error::conflict("The Agent has no harnessAuth; set one before deploying").into(),
        );
    };
    let mode = source.map_or(agent.execution_mode, |rev| rev.spec.harness.mode);
    if let Some(refusal) = installation.compute.refusal(mode, Some(harness_auth)) {
        return Err(Error::conflict(refusal).into());
    }
    if let Some(rev) = source {
        same_runtime(rev, installation)?;
    }
    Ok(())
}

/// What is refused once the basis is known, before its Secrets are authorized: binding names a
/// gateway may not receive, and bindings the Compute Driver cannot deliver.
pub(crate) fn check_basis(basis: &Basis, installation: &Installation<'_>) -> Result<(), Refusal> {
    let secret_bindings = basis.secret_bindings();
    // A Configuration (or revision) stored before the binding-name rule must not reach a
    // gateway with a name that changes how the runtime starts.
    let mut problems = Problems::new();
    occ_core::inputs::check_binding_names(&secret_bindings, "/secretBindings", &mut problems);
    if !problems.is_empty() {
        return Err(Refusal {
            error: problems.into_error_saying(&format!(
                "Configuration {} binds a Secret to an environment variable that gateways may \
                 not receive; rename the binding and deploy again",
                basis.configuration_id()
            )),
            audited: Some("SECRET_BINDING_NAME_REFUSED"),
        });
    }
    if let Some(refusal) = installation
        .compute
        .secret_refusal(!secret_bindings.is_empty())
    {
        return Err(Error::conflict(refusal).into());
    }
    Ok(())
}

/// The admitted spec of the new revision, or why there is none (see the module docs): the
/// checks of [`check_facts`], then that the answers are for exactly these facts, the
/// ServiceAccount's credential, the document and its harness.
pub(crate) fn plan(
    facts: &AdmissionFacts,
    answers: &DriverAnswers,
    installation: &Installation<'_>,
) -> Result<Planned, Refusal> {
    check_facts(facts, installation)?;
    let agent = &facts.agent;
    let mode = facts.mode();
    let harness_auth = facts
        .harness_auth
        .clone()
        .expect("checked: the revision has a harnessAuth");
    let harness = (installation.harness)(mode);
    let configuration_id = facts.basis.configuration_id().clone();
    let secret_bindings = facts.basis.secret_bindings();
    concurrent_unless(answers.basis == (configuration_id.clone(), facts.basis.generation()))?;
    let locators: BTreeMap<SecretId, String> = facts
        .secrets
        .iter()
        .filter_map(|(id, meta)| meta.as_ref().map(|m| (id.clone(), m.locator.clone())))
        .collect();
    concurrent_unless(answers.verified == locators)?;
    let (backend_id, source_revision_id) = match &facts.basis {
        Basis::Revision(rev) => (rev.backend_id.clone(), Some(rev.id.clone())),
        Basis::Configuration(_) => (agent.backend_id.clone(), None),
    };
    let account_credential = match (harness_auth.service_account_id(), &facts.account) {
        (None, _) => None,
        (Some(_), None) => return Err(Error::not_found().into()),
        (Some(account), Some(sa)) => {
            let frozen = freeze_account_credential(sa, backend_id.as_deref())?;
            if let Basis::Revision(rev) = &facts.basis
                && rev.spec.account_credential.as_ref() != Some(&frozen)
            {
                return Err(Error::conflict(format!(
                    "ServiceAccount {account} carries another credential than revision {} \
                     ran with; deploy the Agent's Configuration instead",
                    rev.revision
                ))
                .into());
            }
            Some(frozen)
        }
    };
    let generation = facts.basis.generation();
    let document = occ_core::native::check_stored_document(
        answers.document.clone(),
        &configuration_id,
        generation,
    )?;
    occ_core::native::harness::require_harness(&document, mode, &configuration_id, generation)?;
    let uses_secrets = !secret_bindings.is_empty() || harness_auth.secret_id().is_some();
    let spec = AdmittedSpec {
        configuration_id,
        configuration_kind: occ_core::resource::CONFIGURATION_KIND_AGENT.into(),
        configuration_generation: generation,
        configuration: document,
        harness,
        compute: installation.compute.identity.clone(),
        service_principal_id: agent.service_principal_id.clone(),
        harness_auth: Some(harness_auth),
        secret_driver_id: uses_secrets.then(|| installation.secret_driver_id.to_owned()),
        secret_bindings: (!secret_bindings.is_empty()).then_some(secret_bindings),
        account_credential,
    };
    Ok(Planned {
        spec,
        backend_id,
        source_revision_id,
    })
}

/// A redeploy reuses the source revision's harness and Compute identities, so the worker would
/// refuse it (`HARNESS_DESCRIPTOR_MISMATCH`, `COMPUTE_DRIVER_MISMATCH`) if this installation no
/// longer runs them: refused at admission instead.
fn same_runtime(rev: &AgentRevision, installation: &Installation<'_>) -> Result<(), Error> {
    let compute: &ComputeIdentity = &installation.compute.identity;
    if &rev.spec.compute != compute {
        return Err(Error::conflict(format!(
            "Revision {} was admitted for the {} Compute Driver ({}), which this installation \
             no longer uses; deploy the Agent's Configuration instead",
            rev.revision, rev.spec.compute.implementation, rev.spec.compute.id
        )));
    }
    let approved = (installation.harness)(rev.spec.harness.mode);
    if rev.spec.harness != approved {
        return Err(Error::conflict(format!(
            "Revision {} was admitted for {} {}, but this installation runs {}; deploy the \
             Agent's Configuration instead",
            rev.revision, rev.spec.harness.id, rev.spec.harness.version, approved.version
        )));
    }
    Ok(())
}

/// A consumed Secret exists and is held by this installation's Secret Driver.
fn secret_usable(
    id: &SecretId,
    meta: Option<&SecretMeta>,
    installation: &Installation<'_>,
) -> Result<(), Error> {
    // A Configuration's bound Secrets cannot be deleted, but a Secret an earlier revision
    // froze can be once it is unbound: the revision exists, its Secret does not (409).
    let meta = meta.ok_or_else(|| {
        Error::conflict(format!(
            "Secret {id}, which the revision consumes, no longer exists"
        ))
    })?;
    if meta.driver_id != installation.secret_driver_id {
        return Err(Error::conflict(
            "A bound Secret is held by a Secret Driver this installation does not use",
        ));
    }
    Ok(())
}

fn concurrent_unless(same: bool) -> Result<(), Error> {
    if same {
        Ok(())
    } else {
        Err(Error::conflict(
            "The Agent's Configuration or a Secret it binds changed while the deploy was \
             admitted; retry",
        ))
    }
}

/// The credential a `chatgpt_service_account` revision freezes: an access token the Agent's
/// Backend issued to the ServiceAccount.
pub(crate) fn freeze_account_credential(
    sa: &ServiceAccount,
    backend_id: Option<&str>,
) -> Result<FrozenAccountCredential, Error> {
    match (&sa.binding, sa.credential_kind) {
        (
            Some(ServiceAccountBinding::Managed {
                backend_id: issuer,
                workspace_id,
                credential: Some(credential),
                ..
            }),
            Some(ServiceAccountCredentialKind::AccessToken),
        ) => {
            if backend_id != Some(issuer.as_str()) {
                return Err(Error::conflict(format!(
                    "ServiceAccount {} holds a credential of Backend {issuer:?}; the Agent must \
                     select it (backendId {issuer:?})",
                    sa.id
                )));
            }
            Ok(FrozenAccountCredential {
                service_account_id: sa.id.clone(),
                kind: ServiceAccountCredentialKind::AccessToken,
                backend_id: issuer.clone(),
                workspace_id: workspace_id.clone(),
                upstream_credential_id: credential.upstream_credential_id.clone(),
            })
        }
        (_, None) => Err(Error::conflict(format!(
            "ServiceAccount {} has no credential; issue one with POST \
             /namespaces/{}/service-accounts/{}/credentials",
            sa.id, sa.namespace_id, sa.id
        ))),
        (_, Some(_)) => Err(Error::conflict(format!(
            "ServiceAccount {} carries a native credential reference, which a harness cannot \
             run with: only a credential its Backend issued (access_token) can",
            sa.id
        ))),
    }
}

#[cfg(test)]
mod tests {
    use occ_core::resource::{
        AgentStatus, DesiredRuntimeState, SecretBinding, SecretDelivery, SecretRef,
    };
    use occ_core::{AgentId, ErrorCode, IamId, Name, NamespaceId, Timestamp};
    use serde_json::json;

    use super::*;

    fn code(result: &Result<Planned, Refusal>) -> Option<(ErrorCode, Option<&'static str>)> {
        result.as_ref().err().map(|r| (r.error.code(), r.audited))
    }

    fn facts() -> (AdmissionFacts, DriverAnswers) {
        let namespace = Namespace {
            id: NamespaceId::generate(),
            name: Name::parse("default").expect("name"),
            existing_namespace: None,
            status: NamespaceStatus::Ready,
            created_at: Timestamp::now(),
            deleted_at: None,
        };
        let cfg = ConfigurationMeta {
            id: ConfigurationId::generate(),
            namespace_id: namespace.id.clone(),
            generation: Generation::new(3).expect("generation"),
            secret_bindings: SecretBindings::new(),
            created_at: Timestamp::now(),
        };
        let agent = Agent {
            id: AgentId::generate(),
            namespace_id: namespace.id.clone(),
            name: Name::parse("alpha").expect("name"),
            service_principal_id: IamId::generate_service_principal(),
            configuration_id: cfg.id.clone(),
            backend_id: None,
            execution_mode: ExecutionMode::Embedded,
            harness_auth: Some(HarnessAuth::Runtime {}),
            active_revision_id: None,
            desired_runtime_state: DesiredRuntimeState::Stopped,
            status: AgentStatus::Active,
            created_at: Timestamp::now(),
        };
        let answers = DriverAnswers {
            basis: (cfg.id.clone(), cfg.generation),
            document: json!({"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}})
                .as_object()
                .cloned()
                .expect("document"),
            verified: BTreeMap::new(),
        };
        (
            AdmissionFacts {
                harness_auth: agent.harness_auth.clone(),
                agent,
                namespace,
                basis: Basis::Configuration(cfg),
                secrets: BTreeMap::new(),
                account: None,
            },
            answers,
        )
    }

    fn bind(facts: &mut AdmissionFacts, answers: &mut DriverAnswers, name: &str, driver: &str) {
        let id = SecretId::generate();
        let Basis::Configuration(cfg) = &mut facts.basis else {
            panic!("a deploy")
        };
        cfg.secret_bindings.insert(
            name.to_owned(),
            SecretBinding {
                source: SecretRef::new(facts.namespace.id.clone(), id.clone()),
                delivery: SecretDelivery::Env,
            },
        );
        let meta = SecretMeta {
            id: id.clone(),
            namespace_id: facts.namespace.id.clone(),
            name: Name::parse("key").expect("name"),
            driver_id: driver.to_owned(),
            locator: format!("ns/{id}.secret"),
            created_at: Timestamp::now(),
        };
        answers.verified.insert(id.clone(), meta.locator.clone());
        facts.secrets.insert(id, Some(meta));
    }

    /// Each refusal, in the order a caller learns it, from one change to otherwise admissible
    /// facts; and the spec admitted when nothing is wrong.
    #[test]
    fn admission_is_a_function_of_the_facts() {
        let compute = occ_drivers::compute::process::selection(false);
        let harness = |mode| HarnessDescriptor {
            id: "openclaw".into(),
            version: "2026.9.6".into(),
            mode,
        };
        let installation = Installation {
            compute: &compute,
            harness: &harness,
            secret_driver_id: "secret-local",
        };
        type Change = fn(&mut AdmissionFacts, &mut DriverAnswers);
        /// The refusal's code and the field it names (`None`: admitted).
        type Expected = Option<(ErrorCode, Option<&'static str>)>;
        let cases: Vec<(&str, Change, Expected)> = vec![
            ("admissible", |_, _| {}, None),
            (
                "deleting",
                |f, _| f.agent.status = AgentStatus::Deleting,
                Some((ErrorCode::AgentDeleting, None)),
            ),
            (
                "namespace not ready",
                |f, _| f.namespace.status = NamespaceStatus::Provisioning,
                Some((ErrorCode::NamespaceNotReady, Some("NAMESPACE_NOT_READY"))),
            ),
            (
                "no harnessAuth",
                |f, _| f.harness_auth = None,
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "dedicated on an embedded-only Driver",
                |f, _| f.agent.execution_mode = ExecutionMode::Dedicated,
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "a binding name the runtime reads",
                |f, a| bind(f, a, "NODE_OPTIONS", "secret-local"),
                Some((
                    ErrorCode::InvalidRequest,
                    Some("SECRET_BINDING_NAME_REFUSED"),
                )),
            ),
            (
                "a bound Secret of another Secret Driver",
                |f, a| bind(f, a, "MODEL_KEY", "secret-kubernetes"),
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "a bound Secret deleted",
                |f, a| {
                    bind(f, a, "MODEL_KEY", "secret-local");
                    for meta in f.secrets.values_mut() {
                        *meta = None;
                    }
                },
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "the Configuration moved on after the Driver read",
                |_, a| a.basis.1 = Generation::new(2).expect("generation"),
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "a Secret replaced after the Driver verified it",
                |f, a| {
                    bind(f, a, "MODEL_KEY", "secret-local");
                    for locator in a.verified.values_mut() {
                        locator.push_str(".old");
                    }
                },
                Some((ErrorCode::ResourceConflict, None)),
            ),
            (
                "a document the runtime refuses",
                |_, a| {
                    a.document.insert("bogusTopLevelKey".into(), json!(1));
                },
                Some((ErrorCode::InvalidRequest, None)),
            ),
        ];
        for (name, change, expected) in cases {
            let (mut f, mut a) = facts();
            change(&mut f, &mut a);
            let planned = plan(&f, &a, &installation);
            assert_eq!(code(&planned), expected, "{name}: {planned:?}");
            if let Ok(Planned { spec, .. }) = planned {
                assert_eq!(spec.configuration_generation.get(), 3);
                assert_eq!(spec.compute, compute.identity);
                assert_eq!(spec.secret_driver_id, None);
            }
        }
    }
}
