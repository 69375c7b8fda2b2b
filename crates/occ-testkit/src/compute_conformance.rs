//! The Compute conformance suite: the behaviour every Compute Driver must show through the
//! [`Compute`] contract, checked only through the contract and the native gateway protocol (so
//! the same functions run against the process Driver here and SSH or Kubernetes Drivers
//! later). Each function panics with a description of the first violation.
//!
//! [`lifecycle`] walks one Agent through ensure → prepare → activate → redeploy → retire →
//! stop → resume → delete and checks, at each step, what serves (`observe`), that the gateway
//! answers the native handshake with the Agent's credential (`gateway_access`), that preparing
//! never disturbs what serves, that every verb is idempotent, and that the workspace survives
//! stop and resume. It starts three gateways. [`rollback`] checks that a revision whose gateway
//! cannot start is undone by `restore_revision` and measures the outage;
//! [`lifecycle_and_rollback`] runs it from the revision the lifecycle resumed with, saving a
//! gateway start. The resumed revision is a Control UI revision: [`control_ui_serves`] checks
//! the native Control UI's path through the Driver's gateway access (trusted-proxy mode) on
//! it. [`dedicated_lifecycle`] is the dedicated (Codex harness) case.

mod control_ui;
mod dedicated;

use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::{AdmittedSpec, ExecutionMode, Generation, HarnessAuth, HarnessDescriptor};
use occ_core::{AgentId, ConfigurationId, IamId, NamespaceId, RevisionId};
use occ_drivers::compute::{
    AgentTarget, Compute, Convergence, LOG_TAIL_MAX_LINES, LogChunk, LogEntry, LogGap, LogQuery,
    NamespaceTarget, OUTPUT_LINES, Readiness, RevisionContext, RevisionTarget, RuntimeState,
};
use occ_gateway::{Endpoint, GatewayError, Session};
use serde_json::{Value, json};

pub use control_ui::{control_ui_serves, with_control_ui};
pub use dedicated::{
    DEDICATED_KEY, DEDICATED_WRONG_KEY, DedicatedFigures, DedicatedSite, dedicated_document,
    dedicated_lifecycle, key_context,
};

/// The OpenClaw version revisions are admitted for.
pub const HARNESS_VERSION: &str = "2026.9.6";

/// A fresh Namespace and Agent.
pub fn targets() -> (NamespaceTarget, AgentTarget) {
    let ns = NamespaceTarget {
        id: NamespaceId::generate(),
        name: "conformance".into(),
        existing_namespace: None,
    };
    let agent_id = AgentId::generate();
    let agent = AgentTarget {
        namespace_id: ns.id.clone(),
        service_principal_id: IamId::agent_service_principal(&agent_id),
        agent_id,
    };
    (ns, agent)
}

/// Revision `number` of `agent` for `compute`, admitted with `document`.
pub fn revision(
    compute: &dyn Compute,
    agent: &AgentTarget,
    number: u64,
    document: Value,
) -> RevisionTarget {
    let Value::Object(configuration) = document else {
        panic!("a configuration document is an object");
    };
    RevisionTarget {
        agent: agent.clone(),
        revision_id: RevisionId::generate(),
        revision: number,
        spec: AdmittedSpec {
            configuration_id: ConfigurationId::generate(),
            configuration_kind: "agent".into(),
            configuration_generation: Generation::new(number).expect("generation"),
            configuration,
            harness: HarnessDescriptor {
                id: "openclaw".into(),
                version: HARNESS_VERSION.into(),
                mode: ExecutionMode::Embedded,
            },
            compute: compute.selection().identity.clone(),
            service_principal_id: agent.service_principal_id.clone(),
            harness_auth: Some(HarnessAuth::Runtime {}),
            secret_driver_id: None,
            secret_bindings: None,
            account_credential: None,
        },
    }
}

/// [`revision`] frozen for dedicated execution with the pinned Codex harness, logging in with an
/// `api_key` from a Secret of the Agent's Namespace (the Secret id is only a reference here: the
/// caller hands the key itself in the revision context).
pub fn dedicated_revision(
    compute: &dyn Compute,
    agent: &AgentTarget,
    number: u64,
    document: Value,
) -> RevisionTarget {
    let mut rev = revision(compute, agent, number, document);
    rev.spec.harness = HarnessDescriptor {
        id: "codex".into(),
        version: occ_host::runtime::CODEX_VERSION.into(),
        mode: ExecutionMode::Dedicated,
    };
    rev.spec.harness_auth = Some(HarnessAuth::ApiKey {
        source: occ_core::resource::SecretRef {
            kind: occ_core::resource::SecretRefKind::Secret,
            namespace_id: agent.namespace_id.clone(),
            id: occ_core::SecretId::generate(),
        },
    });
    rev
}

/// A small valid document; `marker` makes revisions distinguishable.
pub fn document(marker: &str) -> Value {
    json!({
        "agents": {"defaults": {"model": {"primary": format!("openai/{marker}")}}},
        "plugins": {"enabled": false},
        "cron": {"enabled": false},
    })
}

/// One native chat turn (the `agent` call) in `session` with the gateway `compute` hands out
/// for `agent`, within two minutes.
pub async fn chat_turn(
    compute: &dyn Compute,
    agent: &AgentTarget,
    session: &str,
    message: &str,
) -> Result<(), occ_gateway::ChatError> {
    let access = compute
        .gateway_access(agent)
        .await
        .expect("gateway_access")
        .expect("the Agent has a gateway");
    let endpoint = Endpoint::new(access.url, access.token.expose());
    let turn = occ_gateway::ChatTurn {
        agent_id: "main",
        session_key: session,
        message,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    occ_gateway::chat_turn(&endpoint, turn, deadline, None)
        .await
        .map(|_| ())
}

/// Activates `rev` as the worker does: a transient failure (a gateway that did not come up on a
/// loaded machine, e.g. OpenClaw's own 5 s state-lease timeout at startup; a node that paired
/// late) is tried again, at most twice; the error of anything else, or of a third failure.
async fn activate_as_the_worker(
    compute: &dyn Compute,
    rev: &RevisionTarget,
    ctx: &RevisionContext,
) -> Result<(), occ_drivers::compute::ComputeError> {
    let mut retries = 0;
    loop {
        match compute.activate_revision(rev, ctx).await {
            Err(e) if e.class == occ_core::compute::FailureClass::Transient && retries < 2 => {
                retries += 1;
                #[expect(
                    clippy::print_stderr,
                    reason = "a retried failure shows in the test's output"
                )]
                {
                    eprintln!(
                        "activate {}: {e:?}; trying again, as the worker would",
                        rev.revision_id
                    );
                }
            }
            other => return other,
        }
    }
}

/// [`activate_as_the_worker`], failing the test on its error.
async fn activate(compute: &dyn Compute, rev: &RevisionTarget, ctx: &RevisionContext, what: &str) {
    if let Err(e) = activate_as_the_worker(compute, rev, ctx).await {
        panic!("activate {what}: {e:?}");
    }
}

async fn observe(compute: &dyn Compute, rev: &RevisionTarget) -> RuntimeState {
    compute
        .observe(rev)
        .await
        .unwrap_or_else(|e| panic!("observe {}: {e}", rev.revision_id))
}

/// Opens a native session to the Agent's gateway with the credential Compute hands out.
pub async fn connect(compute: &dyn Compute, agent: &AgentTarget) -> Result<Session, GatewayError> {
    let access = compute
        .gateway_access(agent)
        .await
        .expect("gateway_access")
        .ok_or_else(|| GatewayError::Unreachable("no gateway access".into()))?;
    let endpoint = Endpoint::new(access.url, access.token.expose());
    Session::connect(&endpoint, Duration::from_secs(10))
        .await
        .map(|(session, hello)| {
            assert!(
                hello.scopes.iter().any(|s| s == "operator.admin"),
                "the Agent's credential is an admin operator: {hello:?}"
            );
            session
        })
}

/// The whole lifecycle of one Agent (see the module docs).
pub async fn lifecycle(compute: &dyn Compute) {
    lifecycle_in(compute, targets()).await;
}

/// [`lifecycle`] in the given Namespace (e.g. one adopting an existing namespace).
pub async fn lifecycle_in(compute: &dyn Compute, (ns, agent): (NamespaceTarget, AgentTarget)) {
    let resumed = lifecycle_until_resumed(compute, &ns, &agent).await;
    deleted(compute, &ns, &agent, &resumed).await;
}

/// [`lifecycle`], then [`rollback`] from the revision the lifecycle resumed with (a Driver's
/// rollback undoes a failed activation whatever brought the serving revision up), then the
/// deletion: one gateway fewer than running both.
pub async fn lifecycle_and_rollback(compute: &dyn Compute) -> RollbackFigures {
    let (ns, agent) = targets();
    let resumed = lifecycle_until_resumed(compute, &ns, &agent).await;
    let figures = rollback_from(compute, &resumed, RESUMED_MARKER).await;
    deleted(compute, &ns, &agent, &resumed).await;
    figures
}

/// The model of the revision [`lifecycle`] resumes with (`document("resumed")`), which its
/// gateway names in its startup output.
const RESUMED_MARKER: &str = "openai/resumed";

/// The walk of [`lifecycle`] up to the resumed revision 3, which it leaves serving.
async fn lifecycle_until_resumed(
    compute: &dyn Compute,
    ns: &NamespaceTarget,
    agent: &AgentTarget,
) -> RevisionTarget {
    let (ns, agent) = (ns.clone(), agent.clone());
    let ctx = RevisionContext::default();

    // Namespaces: idempotent.
    for _ in 0..2 {
        assert_eq!(
            compute
                .ensure_namespace(&ns)
                .await
                .expect("ensure_namespace"),
            Convergence::Done
        );
    }

    // Prepare does not start anything and is idempotent.
    let rev1 = revision(compute, &agent, 1, document("gpt-5"));
    for _ in 0..2 {
        assert_eq!(
            compute
                .prepare_revision(&rev1, &ctx)
                .await
                .expect("prepare rev1"),
            Readiness::Ready
        );
    }
    assert_ne!(observe(compute, &rev1).await, RuntimeState::Serving);

    // Activate: it serves and answers the native handshake with the Agent's credential.
    activate(compute, &rev1, &ctx, "rev1").await;
    assert_eq!(observe(compute, &rev1).await, RuntimeState::Serving);
    // The runtime report shows its workload ready and running, and survives sanitizing
    // (names and uids in the published patterns) as the API serves it.
    let report = compute
        .runtime_report(&rev1)
        .await
        .expect("runtime_report rev1")
        .sanitized(&occ_core::redact::Redactor::default());
    assert!(
        report.pods.iter().any(|p| p.ready
            && p.containers
                .iter()
                .any(|c| c.state == occ_core::runtime_report::ContainerState::Running)),
        "{report:?}"
    );
    let mut session = connect(compute, &agent).await.expect("hello-ok from rev1");
    let note = format!("written through the gateway of {}\n", rev1.revision_id);
    session
        .file_set("main", "USER.md", &note, None, Duration::from_secs(10))
        .await
        .expect("write USER.md");
    session.close().await;
    // Activating what already serves is a no-op.
    activate(compute, &rev1, &ctx, "rev1 again").await;
    assert_eq!(observe(compute, &rev1).await, RuntimeState::Serving);

    // Preparing a new revision does not disturb what serves.
    let rev2 = revision(compute, &agent, 2, document("gpt-5-mini"));
    assert_eq!(
        compute
            .prepare_revision(&rev2, &ctx)
            .await
            .expect("prepare rev2"),
        Readiness::Ready
    );
    assert_eq!(observe(compute, &rev1).await, RuntimeState::Serving);

    // Redeploy: rev2 replaces rev1; retiring rev1 leaves rev2 alone.
    activate(compute, &rev2, &ctx, "rev2").await;
    assert_eq!(observe(compute, &rev2).await, RuntimeState::Serving);
    assert_eq!(observe(compute, &rev1).await, RuntimeState::NotCurrent);
    compute.retire_revision(&rev1).await.expect("retire rev1");
    compute
        .retire_revision(&rev1)
        .await
        .expect("retire rev1 again");
    assert_eq!(observe(compute, &rev2).await, RuntimeState::Serving);
    // An older revision prepared late never replaces the newer one.
    let _ = compute.prepare_revision(&rev1, &ctx).await;
    assert_eq!(observe(compute, &rev2).await, RuntimeState::Serving);
    // Stopping a revision that is not installed does nothing.
    compute.stop_revision(&rev1).await.expect("stop rev1");
    assert_eq!(observe(compute, &rev2).await, RuntimeState::Serving);

    // Stop: nothing serves, idempotently; the gateway is gone.
    compute.stop_revision(&rev2).await.expect("stop rev2");
    compute.stop_revision(&rev2).await.expect("stop rev2 again");
    assert_ne!(observe(compute, &rev2).await, RuntimeState::Serving);
    assert!(
        connect(compute, &agent).await.is_err(),
        "no gateway answers after stop"
    );

    // Resume = a new revision; the workspace survived. It is a Control UI revision, so the
    // native Control UI's path through the Driver is checked on it (without a gateway start
    // of its own).
    let rev3 = revision(compute, &agent, 3, with_control_ui(document("resumed")));
    compute
        .prepare_revision(&rev3, &ctx)
        .await
        .expect("prepare rev3");
    activate(compute, &rev3, &ctx, "rev3").await;
    assert_eq!(observe(compute, &rev3).await, RuntimeState::Serving);
    let mut session = connect(compute, &agent).await.expect("hello-ok from rev3");
    let file = session
        .file_get("main", "USER.md", Duration::from_secs(10))
        .await
        .expect("read USER.md")
        .expect("USER.md exists");
    assert_eq!(file.content, note, "the workspace survives stop and resume");
    session.close().await;
    control_ui_serves(compute, &agent, &rev3).await;
    rev3
}

/// Delete: nothing left of the Agent whose last revision was `last`, idempotently, and the
/// Namespace goes too.
async fn deleted(
    compute: &dyn Compute,
    ns: &NamespaceTarget,
    agent: &AgentTarget,
    last: &RevisionTarget,
) {
    compute.delete_agent(agent).await.expect("delete_agent");
    compute
        .delete_agent(agent)
        .await
        .expect("delete_agent again");
    assert_ne!(observe(compute, last).await, RuntimeState::Serving);
    assert!(
        compute
            .gateway_access(agent)
            .await
            .expect("gateway_access")
            .is_none()
    );
    namespace_deleted_twice(compute, ns).await;
}

/// Deleting the Namespace is done, and deleting it again is done too.
async fn namespace_deleted_twice(compute: &dyn Compute, ns: &NamespaceTarget) {
    for _ in 0..2 {
        assert_eq!(
            compute
                .delete_namespace(ns)
                .await
                .expect("delete_namespace"),
            Convergence::Done
        );
    }
}

/// A document occ and the pinned runtime's schema accept but whose gateway cannot start: TLS
/// without a certificate in its state and without generating one.
pub fn document_failing_at_startup() -> Value {
    let mut doc = document("tls");
    doc["gateway"] = json!({"tls": {"enabled": true, "autoGenerate": false}});
    doc
}

/// What [`rollback`] measured.
#[derive(Debug, Clone, Copy)]
pub struct RollbackFigures {
    /// From the failed candidate's activation call to its failure.
    pub failed_activation: Duration,
    /// From the activation call until revision 1 answered the native handshake again: the
    /// longest the Agent can have been unreachable.
    pub outage: Duration,
}

/// A failed activation is undone: revision 1 serves, revision 2 (whose gateway cannot start)
/// fails with a code that names the workload's failure and carries the gateway's last output
/// lines (which its captured log holds), `restore_revision` brings revision 1 back (idempotently), and
/// retiring revision 2 leaves revision 1 serving. Starts three gateways.
pub async fn rollback(compute: &dyn Compute) -> RollbackFigures {
    let ctx = RevisionContext::default();
    let (ns, agent) = targets();
    compute
        .ensure_namespace(&ns)
        .await
        .expect("ensure_namespace");
    let rev1 = revision(compute, &agent, 1, document("one"));
    compute
        .prepare_revision(&rev1, &ctx)
        .await
        .expect("prepare 1");
    activate(compute, &rev1, &ctx, "1").await;
    let figures = rollback_from(compute, &rev1, REVISION_1_MARKER).await;
    compute.delete_agent(&agent).await.expect("delete_agent");
    namespace_deleted_twice(compute, &ns).await;
    figures
}

/// The rollback of [`rollback`] from `serving`, the Agent's serving revision, whose gateway
/// names `marker` in its startup output: the next revision cannot start and `serving` is
/// restored. Leaves `serving` serving.
async fn rollback_from(
    compute: &dyn Compute,
    serving: &RevisionTarget,
    marker: &str,
) -> RollbackFigures {
    let ctx = RevisionContext::default();
    let agent = &serving.agent;
    connect(compute, agent)
        .await
        .expect("the serving revision serves");
    // The Agent's credential, while a gateway serves (a Driver may hand it out only then).
    let token = compute
        .gateway_access(agent)
        .await
        .expect("gateway_access")
        .expect("the Agent has a gateway credential")
        .token;

    let failing = revision(
        compute,
        agent,
        serving.revision + 1,
        document_failing_at_startup(),
    );
    assert_eq!(
        compute
            .prepare_revision(&failing, &ctx)
            .await
            .expect("prepare the failing revision"),
        Readiness::Ready
    );
    let started = std::time::Instant::now();
    let failure = compute
        .activate_revision(&failing, &ctx)
        .await
        .expect_err("a gateway with a missing TLS certificate does not start");
    let failed_activation = started.elapsed();
    assert!(
        [
            ReasonCode::RuntimeStartupFailed,
            ReasonCode::RuntimeConfigurationInvalid,
            ReasonCode::AgentGatewayUnavailable,
            ReasonCode::GatewayNotReady,
        ]
        .contains(&failure.code),
        "the failure names the workload: {failure}"
    );
    assert!(
        !failure.output.is_empty() && failure.output.len() <= OUTPUT_LINES,
        "the gateway's last output lines come with the failure: {failure:?}"
    );
    assert!(
        !failure.message.contains('\n'),
        "the output is not folded into the message: {}",
        failure.message
    );
    captured_output_holds(compute, &failing, &failure.output, token.expose(), marker).await;

    for _ in 0..2 {
        compute
            .restore_revision(serving, &ctx, &failing)
            .await
            .expect("restore the serving revision");
    }
    connect(compute, agent)
        .await
        .expect("the serving revision serves again");
    let outage = started.elapsed();
    assert_eq!(observe(compute, serving).await, RuntimeState::Serving);
    assert_eq!(observe(compute, &failing).await, RuntimeState::NotCurrent);
    // After the rollback: revision 1's output is its own (a Kubernetes Pod's log lives as
    // long as the Pod, so this is read once revision 1 runs again).
    revision_reads_only_its_own_output(compute, serving, &failure.output, marker).await;
    compute
        .retire_revision(&failing)
        .await
        .expect("retire the failing revision");
    assert_eq!(observe(compute, serving).await, RuntimeState::Serving);
    connect(compute, agent)
        .await
        .expect("retiring the failed revision leaves the serving one serving");

    RollbackFigures {
        failed_activation,
        outage,
    }
}

/// The failed revision's captured output, read through [`Compute::read_logs`], holds the lines
/// the failure carried and nothing of revision 1's; a follow read from its position delivers
/// nothing twice; the gateway token never leaves the Driver.
async fn captured_output_holds(
    compute: &dyn Compute,
    rev: &RevisionTarget,
    failure_output: &[String],
    token: &str,
    serving_marker: &str,
) {
    let tail = tail_chunk(compute, rev).await;
    let lines = line_entries(&tail);
    let last = failure_output.last().expect("the failure has output");
    assert!(
        lines.iter().any(|l| l.contains(last.trim())),
        "the captured output holds the failure's last line {last:?}: {lines:?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains(token)),
        "the gateway token never leaves the Driver"
    );
    assert!(
        !lines.iter().any(|l| l.contains(serving_marker)),
        "the failed revision's output is its own, nothing of the serving revision's: {lines:?}"
    );
    let position = tail.position.clone().expect("a position to follow from");
    let next = compute
        .read_logs(
            rev,
            &LogQuery {
                workload: Default::default(),
                after: Some(position),
                tail_lines: 1,
                previous: false,
            },
        )
        .await
        .expect("a follow read");
    // A workload restarted since (Kubernetes restarts a crashed container) is a new stream
    // that may print the same words: only what precedes such a gap must be new.
    let same_stream: Vec<&str> = next
        .entries
        .iter()
        .take_while(|e| !matches!(e, LogEntry::Gap(LogGap::StreamReplaced)))
        .filter_map(|e| match e {
            LogEntry::Line(line) => Some(line.as_str()),
            LogEntry::Gap(_) => None,
        })
        .collect();
    assert!(
        !same_stream.iter().any(|l| l.contains(last.trim())),
        "a follow read from the tail's position does not deliver the failure's last words again: \
         {next:?}"
    );
}

/// The longest tail read of `rev`'s captured output.
async fn tail_chunk(compute: &dyn Compute, rev: &RevisionTarget) -> LogChunk {
    compute
        .read_logs(
            rev,
            &LogQuery {
                workload: Default::default(),
                after: None,
                tail_lines: LOG_TAIL_MAX_LINES,
                previous: false,
            },
        )
        .await
        .expect("read_logs")
}

/// The tail of `rev`'s captured output, lines only.
async fn tail_lines(compute: &dyn Compute, rev: &RevisionTarget) -> Vec<String> {
    line_entries(&tail_chunk(compute, rev).await)
}

/// The lines of a chunk, without its gaps.
fn line_entries(chunk: &LogChunk) -> Vec<String> {
    chunk.lines().map(str::to_owned).collect()
}

/// The model of the serving revision (`document("one")`), which its gateway names in its
/// startup output; the failing revision names another.
const REVISION_1_MARKER: &str = "openai/one";

/// Revision 1's captured output holds its own gateway's lines and nothing of revision 2's
/// failure: each revision's capture is its own.
async fn revision_reads_only_its_own_output(
    compute: &dyn Compute,
    rev1: &RevisionTarget,
    failure_output: &[String],
    marker: &str,
) {
    let failure = failure_output
        .last()
        .expect("the failure has output")
        .trim()
        .to_owned();
    let first = tail_lines(compute, rev1).await;
    assert!(
        first.iter().any(|l| l.contains(marker)),
        "revision 1's output holds its own gateway's lines: {first:?}"
    );
    assert!(
        !first.iter().any(|l| l.contains(&failure)),
        "revision 1's output holds nothing of revision 2's failure {failure:?}: {first:?}"
    );
}

/// Refusals every Driver makes: an execution mode it does not run is a permanent failure.
pub async fn refusals(compute: &dyn Compute) {
    let ctx = RevisionContext::default();
    let (ns, agent) = targets();
    compute
        .ensure_namespace(&ns)
        .await
        .expect("ensure_namespace");
    let mut dedicated = revision(compute, &agent, 1, document("gpt-5"));
    if !compute
        .selection()
        .execution_modes
        .contains(&ExecutionMode::Dedicated)
    {
        dedicated.spec.harness.mode = ExecutionMode::Dedicated;
        let err = compute
            .prepare_revision(&dedicated, &ctx)
            .await
            .expect_err("an unsupported execution mode is refused");
        assert_eq!(
            err.class,
            occ_drivers::compute::FailureClass::Permanent,
            "{err}"
        );
    }
    compute.delete_agent(&agent).await.expect("delete_agent");
    compute
        .delete_namespace(&ns)
        .await
        .expect("delete_namespace");
}
