//! `/api/auth/service-principals` (occ extension): non-Agent service principals for automation.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::IntoResponse;
use occ_core::{DetailCode, Error, NamespaceId};
use serde::Deserialize;
use serde_json::json;

use crate::envelope::{created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::ServicePrincipalCreateBody;
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::ServicePrincipalView;

/// Create a non-Agent service principal: Installation-wide, or limited to one Namespace.
/// Give it access with AccessBindings and keys with `POST /api/auth/service-keys`.
#[utoipa::path(post, path = "/api/auth/service-principals", operation_id = "createServicePrincipal", tag = "Authentication",
    request_body = ServicePrincipalCreateBody,
    responses((status = 201, body = Data<ServicePrincipalView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn create(
    State(s): State<AppState>,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = ServicePrincipalCreateBody::parse(&body)?;
    let principal = s
        .controller
        .service_principal_create(&ctx.req, input.into())
        .await?;
    Ok(created(ServicePrincipalView::from(&principal)))
}

/// Whether `path` is the one route here that takes a query (the list's filter).
pub fn takes_query(path: &str) -> bool {
    path == "/api/auth/service-principals"
}

/// The list's optional filter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(rename = "namespaceId")]
    namespace_id: Option<String>,
}

/// Non-Agent service principals, oldest first; `?namespaceId=` keeps those of one Namespace.
#[utoipa::path(get, path = "/api/auth/service-principals", operation_id = "listServicePrincipals", tag = "Authentication",
    params(("namespaceId" = Option<String>, Query, description = "Only the principals limited to this Namespace")),
    responses((status = 200, body = Data<Vec<ServicePrincipalView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    ctx: Ctx,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let invalid = || {
        Error::invalid_field(
            "/namespaceId",
            DetailCode::InvalidFormat,
            "The query parameter namespaceId must be a Namespace id (ns_<uuid>)",
        )
    };
    let Ok(Query(query)) = query else {
        return Err(invalid().into());
    };
    let ns: Option<NamespaceId> = match query.namespace_id {
        None => None,
        Some(raw) => Some(raw.parse().map_err(|_| invalid())?),
    };
    let list = s
        .controller
        .service_principal_list(&ctx.req, ns.as_ref())
        .await?;
    Ok(ok(list
        .iter()
        .map(ServicePrincipalView::from)
        .collect::<Vec<_>>()))
}

/// One non-Agent service principal.
#[utoipa::path(get, path = "/api/auth/service-principals/{servicePrincipalId}", operation_id = "getServicePrincipal", tag = "Authentication",
    params(("servicePrincipalId" = String, Path)),
    responses((status = 200, body = Data<ServicePrincipalView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let principal = s
        .controller
        .service_principal_get(&ctx.req, p.iam()?)
        .await?;
    Ok(ok(ServicePrincipalView::from(&principal)))
}

/// Disable a service principal: its keys are refused from their next request on.
#[utoipa::path(post, path = "/api/auth/service-principals/{servicePrincipalId}/disable", operation_id = "disableServicePrincipal", tag = "Authentication",
    params(("servicePrincipalId" = String, Path)),
    responses((status = 200, body = Data<ServicePrincipalView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn disable(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let principal = s
        .controller
        .service_principal_set_disabled(&ctx.req, p.iam()?, true)
        .await?;
    Ok(ok(ServicePrincipalView::from(&principal)))
}

/// Enable a disabled service principal again.
#[utoipa::path(post, path = "/api/auth/service-principals/{servicePrincipalId}/enable", operation_id = "enableServicePrincipal", tag = "Authentication",
    params(("servicePrincipalId" = String, Path)),
    responses((status = 200, body = Data<ServicePrincipalView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn enable(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let principal = s
        .controller
        .service_principal_set_disabled(&ctx.req, p.iam()?, false)
        .await?;
    Ok(ok(ServicePrincipalView::from(&principal)))
}

/// Delete a service principal with its keys and its AccessBindings.
#[utoipa::path(delete, path = "/api/auth/service-principals/{servicePrincipalId}", operation_id = "deleteServicePrincipal", tag = "Authentication",
    params(("servicePrincipalId" = String, Path)),
    responses((status = 200, description = "Deleted"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let id = p.iam()?;
    s.controller.service_principal_delete(&ctx.req, id).await?;
    Ok(ok(json!({"id": id, "deleted": true})))
}
