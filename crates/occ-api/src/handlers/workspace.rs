//! `/namespaces/{namespaceId}/agents/{agentId}/workspace/files/{name}` and the stock defaults.

use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use serde_json::json;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::extract::{Ctx, JsonBody, Params, WORKSPACE_PUT_LIMIT};
use crate::inputs::WorkspaceFileBody;
use crate::openapi::{
    Data, ErrorBody, WorkspaceDefaultsView, WorkspaceFileView, WorkspaceFileWritten,
};
use crate::state::AppState;

/// One deadline covers admission and the native access (the reference's default).
const FILE_DEADLINE: Duration = Duration::from_secs(30);

/// Read a live workspace file through the Agent's gateway.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/workspace/files/{name}", operation_id = "getAgentWorkspaceFile", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("name" = String, Path, description = "AGENTS.md, SOUL.md, IDENTITY.md or USER.md")),
    responses((status = 200, body = Data<WorkspaceFileView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_workspace_file(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let deadline = tokio::time::Instant::now() + FILE_DEADLINE;
    let name = p.file()?;
    let content = s
        .controller
        .workspace_file_get(&ctx.req, p.ns()?, p.agent()?, name, deadline)
        .await?;
    Ok(ok(json!({"name": name.as_str(), "content": content})))
}

/// Write a live workspace file through the Agent's gateway (never retried; audited).
#[utoipa::path(put, path = "/namespaces/{namespaceId}/agents/{agentId}/workspace/files/{name}", operation_id = "putAgentWorkspaceFile", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("name" = String, Path, description = "AGENTS.md, SOUL.md, IDENTITY.md or USER.md")),
    request_body = WorkspaceFileBody,
    responses((status = 200, body = Data<WorkspaceFileWritten>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn put_workspace_file(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<WORKSPACE_PUT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let deadline = tokio::time::Instant::now() + FILE_DEADLINE;
    let name = p.file()?;
    let body = WorkspaceFileBody::parse(&body)?;
    let size = s
        .controller
        .workspace_file_put(
            &ctx.req,
            p.ns()?,
            p.agent()?,
            name,
            &body.content.0,
            deadline,
        )
        .await?;
    Ok(ok(json!({"name": name.as_str(), "size": size})))
}

/// The stock workspace files of the pinned OpenClaw and their digest (`workspaceDefaultsId`),
/// for forms that start `initialWorkspaceFiles` from them.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/workspace-defaults", operation_id = "getWorkspaceDefaults", tag = "Agents",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<WorkspaceDefaultsView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_workspace_defaults(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let defaults = s.controller.workspace_defaults(&ctx.req, p.ns()?).await?;
    Ok(ok(json!({"id": defaults.id, "files": defaults.files})))
}
