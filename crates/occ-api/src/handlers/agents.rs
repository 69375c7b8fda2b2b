//! `/namespaces/{namespaceId}/agents`, deploy, stop, revisions, redeploy, deployment status,
//! runtime and diagnostics.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{accepted, created, ok};
use crate::error::ApiError;
use crate::extract::{AGENT_CREATE_LIMIT, Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::{AgentCreateBody, AgentUpdateBody, ModelDiscoveryBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{
    AgentRuntimeView, AgentView, DeploymentRuntimeView, DeploymentView, DiagnosticsView,
    RevisionView,
};

/// Agents the caller may read.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents", operation_id = "listAgents", tag = "Agents",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<AgentView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_agents(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.agent_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list.iter().map(AgentView::from).collect::<Vec<_>>()))
}

/// Create an Agent (`stopped`; nothing is deployed).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents", operation_id = "createAgent", tag = "Agents",
    params(("namespaceId" = String, Path)), request_body = AgentCreateBody,
    responses((status = 201, body = Data<AgentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<AGENT_CREATE_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let input = AgentCreateBody::parse(&body, ns)?;
    let agent = s
        .controller
        .agent_create(&ctx.req, ns, input.into())
        .await?;
    Ok(created(AgentView::from(&agent)))
}

/// One Agent.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}", operation_id = "getAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = Data<AgentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let agent = s
        .controller
        .agent_get(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(ok(AgentView::from(&agent)))
}

/// What the worker last observed of the Agent's gateway: running, restarting after an exit,
/// stopped, or unknown; restarts of the observed revision and its last exit. occ's own route
/// (not in the reference API), read from platform state without asking the Compute Driver.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/runtime", operation_id = "getAgentRuntime", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = Data<AgentRuntimeView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_runtime(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let (agent, runtime) = s
        .controller
        .agent_runtime(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(ok(AgentRuntimeView::new(&agent, runtime.as_ref())))
}

/// Update the draft (omitted keeps, `null` clears). Never deploys.
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/agents/{agentId}", operation_id = "updateAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)), request_body = AgentUpdateBody,
    responses((status = 200, body = Data<AgentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let update = AgentUpdateBody::parse(&body, ns)?;
    let agent = s
        .controller
        .agent_update(&ctx.req, ns, p.agent()?, update.into())
        .await?;
    Ok(ok(AgentView::from(&agent)))
}

/// Delete an Agent (`deleting`; deletion work queued).
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/agents/{agentId}", operation_id = "deleteAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 202, body = Data<AgentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let agent = s
        .controller
        .agent_delete(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(accepted(AgentView::from(&agent)))
}

/// Admit a new immutable revision and queue its deployment.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/{agentId}/deploy", operation_id = "deployAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 202, body = Data<RevisionView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn deploy_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let rev = s
        .controller
        .agent_deploy(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(accepted(RevisionView::from(&rev)))
}

/// Stop the Agent (desired `stopped`; stop work queued).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/{agentId}/stop", operation_id = "stopAgent", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 202, body = Data<AgentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn stop_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let agent = s
        .controller
        .agent_stop(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(accepted(AgentView::from(&agent)))
}

/// Revisions of the Agent the caller may read, oldest first.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/revisions", operation_id = "listAgentRevisions", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = Data<Vec<RevisionView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_agent_revisions(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s
        .controller
        .revision_list(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(ok(list.iter().map(RevisionView::from).collect::<Vec<_>>()))
}

/// One revision.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/revisions/{revisionId}", operation_id = "getAgentRevision", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("revisionId" = String, Path)),
    responses((status = 200, body = Data<RevisionView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_revision(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let rev = s
        .controller
        .revision_get(&ctx.req, p.ns()?, p.agent()?, p.revision()?)
        .await?;
    Ok(ok(RevisionView::from(&rev)))
}

/// Redeploy an earlier revision: admit a new revision made from its frozen document and
/// identities (a rollback on purpose), authorized, checked and audited like a deploy. Not in the
/// reference API.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/{agentId}/revisions/{revisionId}/redeploy", operation_id = "redeployAgentRevision", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("revisionId" = String, Path)),
    responses((status = 202, body = Data<RevisionView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn redeploy_agent_revision(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let rev = s
        .controller
        .agent_redeploy(&ctx.req, p.ns()?, p.agent()?, p.revision()?)
        .await?;
    Ok(accepted(RevisionView::from(&rev)))
}

/// Deployment status of a revision.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/deployments/{deploymentId}", operation_id = "getAgentDeployment", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("deploymentId" = String, Path)),
    responses((status = 200, body = Data<DeploymentView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_deployment(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let status = s
        .controller
        .deployment_get(&ctx.req, p.ns()?, p.agent()?, p.revision()?)
        .await?;
    Ok(ok(DeploymentView::from(&status)))
}

/// What runs for a deployment now, as its Compute Driver reports it: Pods (process and SSH
/// Drivers: the gateway process or unit as one Pod), containers, restarts, last exit, events.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/deployments/{deploymentId}/runtime", operation_id = "getAgentDeploymentRuntime", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("deploymentId" = String, Path)),
    responses((status = 200, body = Data<DeploymentRuntimeView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_deployment_runtime(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let runtime = s
        .controller
        .deployment_runtime(&ctx.req, p.ns()?, p.agent()?, p.revision()?)
        .await?;
    Ok(ok(DeploymentRuntimeView::from(&runtime)))
}

/// Why a deployment failed or is stuck: its reconciliation's reason code, and whether its
/// workload exists, runs, is ready and has exited.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/{agentId}/deployments/{deploymentId}/diagnostics", operation_id = "diagnoseAgentDeployment", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("deploymentId" = String, Path)),
    responses((status = 200, body = Data<DiagnosticsView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn diagnose_agent_deployment(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let diagnostics = s
        .controller
        .deployment_diagnostics(&ctx.req, p.ns()?, p.agent()?, p.revision()?)
        .await?;
    Ok(ok(DiagnosticsView::from(&diagnostics)))
}

/// The models a provider offers to a key, for choosing an Agent's model (needs `agent:create`
/// in the Namespace). The key goes to the provider only and is never kept; the providers' base
/// URLs are settings (`OCC_OPENAI_BASE_URL`, `OCC_ANTHROPIC_BASE_URL`).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/models", operation_id = "discoverAgentModels", tag = "Agents",
    params(("namespaceId" = String, Path)), request_body = ModelDiscoveryBody,
    responses((status = 200, body = Data<Vec<crate::views::ModelView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody), (status = 429, body = ErrorBody), (status = 501, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn discover_models(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = ModelDiscoveryBody::parse(&body)?;
    let models = s
        .controller
        .discover_models(&ctx.req, p.ns()?, input.into())
        .await?;
    Ok(ok(models
        .iter()
        .map(crate::views::ModelView::from)
        .collect::<Vec<_>>()))
}
