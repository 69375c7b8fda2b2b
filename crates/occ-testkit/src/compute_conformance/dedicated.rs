//! The dedicated case of the Compute conformance suite: one dedicated Agent through deploy,
//! the harness's probe turn, node enrollment, workspace files, a chat turn (HTTP, and after the
//! redeploy also the native `agent` method occ's chat route uses), redeploy,
//! retirement, a refused credential and delete, checked through the [`Compute`] contract and
//! the native gateway protocol. What only a Driver can show (where the workspace lives on disk,
//! a local port for the gateway's HTTP endpoint, Driver-specific checks) comes from
//! [`DedicatedSite`]. Needs the pinned runtime, Codex and the test kit's fake model; about two
//! minutes on a quiet 2-core machine.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_core::compute::LogWorkload;
use occ_core::runtime_report::WorkloadRole;
use occ_drivers::compute::{
    AgentTarget, Compute, FailureClass, LogQuery, Readiness, RevisionContext, RevisionTarget,
    RuntimeState, SecretText,
};
use occ_gateway::{ChatTurn, Endpoint, NodeEnrollment, Session, chat_turn};
use serde_json::{Value, json};

use super::{connect, dedicated_revision, observe, targets};
use crate::fake_model::{Failure, FakeModel};
use crate::gateway::chat_completion;

/// The Agent's key the conformance run deploys with.
pub const DEDICATED_KEY: &str = "sk-dedicated-conformance-0123456789abcdef";
/// A key the fake model refuses.
pub const DEDICATED_WRONG_KEY: &str = "sk-dedicated-conformance-wrong-9876543210";
/// An access token a ChatGPT Backend might issue (opaque: not an agent-identity JWT).
pub const DEDICATED_ACCOUNT_TOKEN: &str = "chatgpt-sa-token-conformance-0123456789";
const MODEL: &str = "openai/gpt-5.6-sol";

/// A dedicated revision that runs with a ChatGPT service account's issued credential.
fn account_revision(compute: &dyn Compute, agent: &AgentTarget, number: u64) -> RevisionTarget {
    let mut rev = dedicated_revision(compute, agent, number, dedicated_document());
    let account = occ_core::ServiceAccountId::generate();
    rev.spec.harness_auth = Some(occ_core::resource::HarnessAuth::ChatgptServiceAccount {
        service_account_id: account.clone(),
    });
    rev.spec.account_credential = Some(occ_core::resource::FrozenAccountCredential {
        service_account_id: account,
        kind: occ_core::resource::ServiceAccountCredentialKind::AccessToken,
        backend_id: "chatgpt".into(),
        workspace_id: crate::fake_chatgpt::WORKSPACE_ID.into(),
        upstream_credential_id: "cred-conformance".into(),
    });
    rev
}

/// The Configuration a user writes for a dedicated Agent (the Driver fills in the app-server
/// wiring behind the reference's placeholders); its chat-completions endpoint is on.
pub fn dedicated_document() -> Value {
    json!({
        "gateway": {"controlUi": {"enabled": false},
            "http": {"endpoints": {"chatCompletions": {"enabled": true}}}},
        "agents": {"defaults": {"model": MODEL, "skipBootstrap": true,
            "models": {MODEL: {"agentRuntime": {"id": "codex"}}},
            "modelPolicy": {"allow": [MODEL]}}},
        "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {
            "transport": "websocket", "url": "${APP_SERVER_URL}",
            "authToken": "${APP_SERVER_TOKEN}"}}}}},
    })
}

/// A revision context carrying `key` as the harness credential.
pub fn key_context(key: &str) -> RevisionContext {
    RevisionContext {
        harness_credential: Some(SecretText::new(key.into())),
        ..RevisionContext::default()
    }
}

/// What a Driver's test tells the dedicated case.
#[async_trait::async_trait]
pub trait DedicatedSite: Send + Sync {
    /// Where the Agent's workspace (the harness's) is on this machine.
    fn harness_workspace(&self, agent: &AgentTarget) -> PathBuf;
    /// A local port where the Agent's gateway answers HTTP.
    fn gateway_http_port(&self, agent: &AgentTarget) -> u16;
    /// Driver-specific checks once `rev` serves for the first time (may restart workloads, as
    /// long as `rev` serves again when it returns).
    async fn first_activation(&self, compute: &dyn Compute, rev: &RevisionTarget);
    /// Why an activation failed, for the panic message (logs the Driver kept).
    fn diagnostics(&self, agent: &AgentTarget) -> String;
}

/// What the run measured.
#[derive(Debug, Clone, Copy)]
pub struct DedicatedFigures {
    /// Prepare + first activation (harness, gateway, pairing).
    pub first_activation: Duration,
    /// The first chat turn answered through the app-server.
    pub chat: Duration,
    /// Stop + prepare + activation of a second revision (the node reconnects).
    pub redeploy: Duration,
}

async fn activate(
    compute: &dyn Compute,
    site: &dyn DedicatedSite,
    rev: &RevisionTarget,
    ctx: &RevisionContext,
) {
    assert_eq!(
        compute.prepare_revision(rev, ctx).await.expect("prepare"),
        Readiness::Ready
    );
    if let Err(e) = super::activate_as_the_worker(compute, rev, ctx).await {
        panic!(
            "activation of {} failed: {e:?}\n{}",
            rev.revision_id,
            site.diagnostics(&rev.agent)
        );
    }
    assert_eq!(observe(compute, rev).await, RuntimeState::Serving);
}

/// The node the gateway's applied configuration binds the workspace to.
async fn bound_node(session: &mut Session) -> String {
    let reply = session
        .call("config.get", json!({}), Duration::from_secs(10))
        .await
        .expect("config.get");
    ["config", "resolved", "parsed"]
        .iter()
        .find_map(|key| {
            reply
                .get(*key)?
                .pointer("/plugins/entries/file-transfer/config/workspaces/main/nodeId")?
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("the workspace is bound to a node: {reply}"))
}

async fn chat(
    compute: &dyn Compute,
    site: &dyn DedicatedSite,
    agent: &AgentTarget,
    text: &str,
) -> Duration {
    let token = compute
        .gateway_access(agent)
        .await
        .expect("gateway_access")
        .expect("a serving gateway")
        .token;
    let started = Instant::now();
    let (code, body) = chat_completion(
        site.gateway_http_port(agent),
        token.expose(),
        text,
        Duration::from_secs(240),
    )
    .await;
    assert_eq!(
        code,
        200,
        "chat {text:?}: {body}\n{}",
        site.diagnostics(agent)
    );
    assert!(body.contains("Hello from the fake model."), "{body}");
    started.elapsed()
}

/// A turn through the gateway's native `agent` method at the Driver's gateway endpoint — the
/// path occ's chat route takes (`GatewayChat`), forwards included.
async fn native_chat(compute: &dyn Compute, site: &dyn DedicatedSite, agent: &AgentTarget) {
    let access = compute
        .gateway_access(agent)
        .await
        .expect("gateway_access")
        .expect("a serving gateway");
    let endpoint = Endpoint::new(access.url, access.token.expose());
    let turn = ChatTurn {
        agent_id: "main",
        session_key: "conformance",
        message: "again, natively",
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let reply = chat_turn(&endpoint, turn, deadline, None)
        .await
        .unwrap_or_else(|e| panic!("native chat turn: {e}\n{}", site.diagnostics(agent)));
    assert!(
        reply.text.contains("Hello from the fake model."),
        "{reply:?}"
    );
}

/// Runs the dedicated case against `compute` (whose selection must list `dedicated` and whose
/// harness calls `model`).
pub async fn dedicated_lifecycle(
    compute: &dyn Compute,
    model: &FakeModel,
    site: &dyn DedicatedSite,
) -> DedicatedFigures {
    let (ns, agent) = targets();
    compute.ensure_namespace(&ns).await.expect("namespace");
    let ctx = key_context(DEDICATED_KEY);

    // Deploy: the harness's probe turn carried the Agent's key; both workloads report; the
    // harness's output reads as its own source, without the key.
    let started = Instant::now();
    let rev1 = dedicated_revision(compute, &agent, 1, dedicated_document());
    activate(compute, site, &rev1, &ctx).await;
    let first_activation = started.elapsed();
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.bearer() == Some(DEDICATED_KEY)),
        "the probe turn carried the Agent's key"
    );
    let report = compute.runtime_report(&rev1).await.expect("report");
    let roles: Vec<_> = report.pods.iter().map(|p| (p.role, p.ready)).collect();
    assert_eq!(
        roles,
        [(WorkloadRole::Gateway, true), (WorkloadRole::Agent, true)],
        "{report:?}"
    );
    let output = compute
        .read_logs(
            &rev1,
            &LogQuery {
                after: None,
                tail_lines: 500,
                previous: false,
                workload: LogWorkload::Harness,
            },
        )
        .await
        .expect("harness output");
    let lines: Vec<&str> = output.lines().collect();
    assert!(
        lines.iter().any(|l| l.contains("phase=probe outcome=ok")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains(DEDICATED_KEY)));
    site.first_activation(compute, &rev1).await;

    // The node: bound in the applied configuration, connected with the seven commands.
    let mut session = connect(compute, &agent).await.expect("session");
    let node = bound_node(&mut session).await;
    let status = NodeEnrollment::new(&mut session)
        .describe(&node)
        .await
        .expect("node.describe");
    assert!(status.is_ready(), "{status:?}");

    // Workspace files through the gateway are the harness's.
    let content = "# Soul\nWritten through the gateway to the harness's node.\n";
    session
        .file_set("main", "SOUL.md", content, None, Duration::from_secs(30))
        .await
        .expect("file set");
    let on_disk = site.harness_workspace(&agent).join("SOUL.md");
    assert_eq!(
        std::fs::read_to_string(&on_disk).unwrap_or_else(|e| panic!("{on_disk:?}: {e}")),
        content
    );
    let read = session
        .file_get("main", "SOUL.md", Duration::from_secs(30))
        .await
        .expect("file get")
        .expect("present");
    assert_eq!(read.content, content);
    session.close().await;

    // A chat turn, answered by the model through the app-server.
    let chat_after = chat(compute, site, &agent, "hi").await;

    // Redeploy (the worker stops predecessors of a dedicated candidate): the node reconnects
    // with its saved identity; retiring the old revision leaves the new one serving.
    let redeployed = Instant::now();
    compute.stop_revision(&rev1).await.expect("stop rev1");
    assert_ne!(observe(compute, &rev1).await, RuntimeState::Serving);
    let rev2 = dedicated_revision(compute, &agent, 2, dedicated_document());
    activate(compute, site, &rev2, &ctx).await;
    let redeploy = redeployed.elapsed();
    compute.retire_revision(&rev1).await.expect("retire rev1");
    let mut session = connect(compute, &agent).await.expect("session");
    assert_eq!(
        bound_node(&mut session).await,
        node,
        "the redeploy reused the node"
    );
    session.close().await;
    chat(compute, site, &agent, "again").await;
    native_chat(compute, site, &agent).await;

    // A credential the model refuses: permanent, with its reason, the key in no output, and
    // nothing left serving.
    compute.stop_revision(&rev2).await.expect("stop rev2");
    model.fail_with(Some(Failure {
        status: 401,
        code: "invalid_api_key".into(),
        message: "Incorrect API key provided.".into(),
    }));
    let rev3 = dedicated_revision(compute, &agent, 3, dedicated_document());
    let wrong = key_context(DEDICATED_WRONG_KEY);
    compute
        .prepare_revision(&rev3, &wrong)
        .await
        .expect("prepare 3");
    let err = compute
        .activate_revision(&rev3, &wrong)
        .await
        .expect_err("a refused key fails the deploy");
    model.fail_with(None);
    assert_eq!(
        (err.class, err.code),
        (
            FailureClass::Permanent,
            ReasonCode::RuntimeAuthenticationFailed
        ),
        "{err:?}"
    );
    assert!(!format!("{err:?} {:?}", err.output).contains(DEDICATED_WRONG_KEY));
    assert_ne!(observe(compute, &rev3).await, RuntimeState::Serving);

    // A ChatGPT service account's credential reaches Codex's login held to its workspace; Codex
    // verifies such a token against ChatGPT's production keys, unreachable here, so this one
    // is refused at login: permanent, with its reason, the token in no output.
    let rev4 = account_revision(compute, &agent, 4);
    let token = key_context(DEDICATED_ACCOUNT_TOKEN);
    compute
        .prepare_revision(&rev4, &token)
        .await
        .expect("prepare 4");
    let err = compute
        .activate_revision(&rev4, &token)
        .await
        .expect_err("an unverifiable service-account token fails the deploy");
    assert_eq!(
        (err.class, err.code),
        (FailureClass::Permanent, ReasonCode::RuntimeLoginFailed),
        "{err:?}"
    );
    assert!(!format!("{err:?} {:?}", err.output).contains(DEDICATED_ACCOUNT_TOKEN));
    assert_ne!(observe(compute, &rev4).await, RuntimeState::Serving);

    compute.delete_agent(&agent).await.expect("delete");
    compute.delete_agent(&agent).await.expect("delete again");
    assert_eq!(observe(compute, &rev3).await, RuntimeState::NotRunning);
    DedicatedFigures {
        first_activation,
        chat: chat_after,
        redeploy,
    }
}
