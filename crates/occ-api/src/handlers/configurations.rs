//! `/namespaces/{namespaceId}/configurations`.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::{ConfigurationCreateBody, ConfigurationUpdateBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::ConfigurationView;

/// Create a Configuration (generation 1).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/configurations", operation_id = "createConfiguration", tag = "Configurations",
    params(("namespaceId" = String, Path)), request_body = ConfigurationCreateBody,
    responses((status = 201, body = Data<ConfigurationView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_configuration(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let input = ConfigurationCreateBody::parse(&body, ns)?;
    let cfg = s
        .controller
        .configuration_create(&ctx.req, ns, input.into())
        .await?;
    Ok(created(ConfigurationView::from(&cfg)))
}

/// One Configuration with its current document.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/configurations/{configurationId}", operation_id = "getConfiguration", tag = "Configurations",
    params(("namespaceId" = String, Path), ("configurationId" = String, Path)),
    responses((status = 200, body = Data<ConfigurationView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_configuration(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let cfg = s
        .controller
        .configuration_get(&ctx.req, p.ns()?, p.configuration()?)
        .await?;
    Ok(ok(ConfigurationView::from(&cfg)))
}

/// Replace the whole document; the generation advances by one.
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/configurations/{configurationId}", operation_id = "updateConfiguration", tag = "Configurations",
    params(("namespaceId" = String, Path), ("configurationId" = String, Path)), request_body = ConfigurationUpdateBody,
    responses((status = 200, body = Data<ConfigurationView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_configuration(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let input = ConfigurationUpdateBody::parse(&body, ns)?;
    let cfg = s
        .controller
        .configuration_update(&ctx.req, ns, p.configuration()?, input.into())
        .await?;
    Ok(ok(ConfigurationView::from(&cfg)))
}

/// Delete a Configuration no Agent references.
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/configurations/{configurationId}", operation_id = "deleteConfiguration", tag = "Configurations",
    params(("namespaceId" = String, Path), ("configurationId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_configuration(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .configuration_delete(&ctx.req, p.ns()?, p.configuration()?)
        .await?;
    Ok(NoContent)
}
