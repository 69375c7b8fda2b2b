//! `/namespaces`.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{accepted, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::NamespaceCreateBody;
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::NamespaceView;

/// Namespaces the caller may read.
#[utoipa::path(get, path = "/namespaces", operation_id = "listNamespaces", tag = "Namespaces",
    responses((status = 200, body = Data<Vec<NamespaceView>>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_namespaces(
    State(s): State<AppState>,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.namespace_list(&ctx.req).await?;
    Ok(ok(list.iter().map(NamespaceView::from).collect::<Vec<_>>()))
}

/// Create a Namespace (`provisioning`; its ensure work is queued).
#[utoipa::path(post, path = "/namespaces", operation_id = "createNamespace", tag = "Namespaces", request_body = NamespaceCreateBody,
    responses((status = 201, body = Data<NamespaceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_namespace(
    State(s): State<AppState>,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let body = NamespaceCreateBody::parse(&body)?;
    let existing = body.existing_namespace.map(|n| n.0);
    let ns = s
        .controller
        .namespace_create(&ctx.req, body.name, existing)
        .await?;
    Ok(created(NamespaceView::from(&ns)))
}

/// One Namespace.
#[utoipa::path(get, path = "/namespaces/{namespaceId}", operation_id = "getNamespace", tag = "Namespaces",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<NamespaceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_namespace(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let ns = s.controller.namespace_get(&ctx.req, p.ns()?).await?;
    Ok(ok(NamespaceView::from(&ns)))
}

/// Delete an empty Namespace (`deleting`; teardown queued; the name stays reserved).
#[utoipa::path(delete, path = "/namespaces/{namespaceId}", operation_id = "deleteNamespace", tag = "Namespaces",
    params(("namespaceId" = String, Path)),
    responses((status = 202, body = Data<NamespaceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_namespace(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let ns = s.controller.namespace_delete(&ctx.req, p.ns()?).await?;
    Ok(accepted(NamespaceView::from(&ns)))
}
