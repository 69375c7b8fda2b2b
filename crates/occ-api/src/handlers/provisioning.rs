//! `/namespaces/{namespaceId}/agents/provision`: a Configuration and an Agent created and
//! deployed as one tracked, retryable job.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{accepted, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, JsonBody, NoBody, PROVISION_LIMIT, Params};
use crate::inputs::AgentProvisionBody;
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{ProvisionedView, ProvisioningView};

/// Admit a provisioning job (needs `installation:administer` and Agent and Configuration
/// `create` in the Namespace, plus `operate` on every Secret it binds). The worker creates the
/// Configuration, the Agent and its Secret grants, then deploys; follow `data.provisioning.url`.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/provision", operation_id = "provisionAgent", tag = "Agents",
    params(("namespaceId" = String, Path)), request_body = AgentProvisionBody,
    responses((status = 202, body = Data<ProvisionedView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn provision_agent(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<PROVISION_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let input = AgentProvisionBody::parse(&body, ns)?;
    let job = s
        .controller
        .agent_provision(&ctx.req, ns, input.into())
        .await?;
    Ok(accepted(ProvisionedView::from(&job)))
}

/// A provisioning job the caller admitted: its status, phase, what it created, and why it failed.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/provision/{workId}", operation_id = "getAgentProvisioning", tag = "Agents",
    params(("namespaceId" = String, Path), ("workId" = String, Path)),
    responses((status = 200, body = Data<ProvisioningView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_provisioning(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let job = s
        .controller
        .agent_provisioning_get(&ctx.req, p.ns()?, p.work()?)
        .await?;
    Ok(ok(ProvisioningView::from(&job)))
}

/// Retry a failed provisioning job from the step that failed (an empty body); nothing it
/// created already is created again.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/agents/provision/{workId}/retry", operation_id = "retryAgentProvisioning", tag = "Agents",
    params(("namespaceId" = String, Path), ("workId" = String, Path)),
    responses((status = 202, body = Data<ProvisioningView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn retry_agent_provisioning(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let job = s
        .controller
        .agent_provisioning_retry(&ctx.req, p.ns()?, p.work()?)
        .await?;
    Ok(accepted(ProvisioningView::from(&job)))
}
