//! `/namespaces/{namespaceId}/secrets`.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, JsonBody, NoBody, Params, SECRET_WRITE_LIMIT};
use crate::inputs::{SecretCreateBody, SecretUpdateBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::SecretView;

/// Secrets the caller may read (metadata only).
#[utoipa::path(get, path = "/namespaces/{namespaceId}/secrets", operation_id = "listSecrets", tag = "Secrets",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<SecretView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_secrets(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.secret_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list.iter().map(SecretView::from).collect::<Vec<_>>()))
}

/// Create a Secret; the value is write-only.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/secrets", operation_id = "createSecret", tag = "Secrets",
    params(("namespaceId" = String, Path)), request_body = SecretCreateBody,
    responses((status = 201, body = Data<SecretView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_secret(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<SECRET_WRITE_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let body = SecretCreateBody::parse(&body)?;
    let secret = s
        .controller
        .secret_create(&ctx.req, p.ns()?, body.name, body.value.0)
        .await?;
    Ok(created(SecretView::from(&secret)))
}

/// One Secret's metadata.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/secrets/{secretId}", operation_id = "getSecret", tag = "Secrets",
    params(("namespaceId" = String, Path), ("secretId" = String, Path)),
    responses((status = 200, body = Data<SecretView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_secret(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let secret = s
        .controller
        .secret_get(&ctx.req, p.ns()?, p.secret()?)
        .await?;
    Ok(ok(SecretView::from(&secret)))
}

/// Replace a Secret's value.
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/secrets/{secretId}", operation_id = "updateSecret", tag = "Secrets",
    params(("namespaceId" = String, Path), ("secretId" = String, Path)), request_body = SecretUpdateBody,
    responses((status = 200, body = Data<SecretView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_secret(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<SECRET_WRITE_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let body = SecretUpdateBody::parse(&body)?;
    let secret = s
        .controller
        .secret_update(&ctx.req, p.ns()?, p.secret()?, body.value.0)
        .await?;
    Ok(ok(SecretView::from(&secret)))
}

/// Delete a Secret nothing references.
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/secrets/{secretId}", operation_id = "deleteSecret", tag = "Secrets",
    params(("namespaceId" = String, Path), ("secretId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_secret(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .secret_delete(&ctx.req, p.ns()?, p.secret()?)
        .await?;
    Ok(NoContent)
}
