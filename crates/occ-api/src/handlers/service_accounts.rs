//! `/namespaces/{namespaceId}/service-accounts`.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::{
    ServiceAccountCreateBody, ServiceAccountCredentialBody, ServiceAccountCredentialIssueBody,
};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::ServiceAccountView;

/// ServiceAccounts the caller may read.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/service-accounts", operation_id = "listServiceAccounts", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<ServiceAccountView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_service_accounts(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.service_account_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list
        .iter()
        .map(ServiceAccountView::from)
        .collect::<Vec<_>>()))
}

/// Create a ServiceAccount.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/service-accounts", operation_id = "createServiceAccount", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path)), request_body = ServiceAccountCreateBody,
    responses((status = 201, body = Data<ServiceAccountView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_service_account(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let body = ServiceAccountCreateBody::parse(&body)?;
    let sa = s
        .controller
        .service_account_create(&ctx.req, p.ns()?, body.name)
        .await?;
    Ok(created(ServiceAccountView::from(&sa)))
}

/// One ServiceAccount.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/service-accounts/{serviceAccountId}", operation_id = "getServiceAccount", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path), ("serviceAccountId" = String, Path)),
    responses((status = 200, body = Data<ServiceAccountView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_service_account(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let sa = s
        .controller
        .service_account_get(&ctx.req, p.ns()?, p.service_account()?)
        .await?;
    Ok(ok(ServiceAccountView::from(&sa)))
}

/// Delete a ServiceAccount no Agent uses.
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/service-accounts/{serviceAccountId}", operation_id = "deleteServiceAccount", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path), ("serviceAccountId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_service_account(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .service_account_delete(&ctx.req, p.ns()?, p.service_account()?)
        .await?;
    Ok(NoContent)
}

/// Issue the ServiceAccount a credential through its Backend's ServiceAccount Driver.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/service-accounts/{serviceAccountId}/credentials", operation_id = "createServiceAccountCredential", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path), ("serviceAccountId" = String, Path)), request_body = ServiceAccountCredentialIssueBody,
    responses((status = 201, body = Data<ServiceAccountView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_service_account_credential(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    ServiceAccountCredentialIssueBody::parse(&body)?;
    let sa = s
        .controller
        .service_account_issue_credential(&ctx.req, p.ns()?, p.service_account()?)
        .await?;
    Ok(created(ServiceAccountView::from(&sa)))
}

/// Set or replace a native ServiceAccount's credential reference.
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/service-accounts/{serviceAccountId}/credential", operation_id = "updateServiceAccountCredential", tag = "ServiceAccounts",
    params(("namespaceId" = String, Path), ("serviceAccountId" = String, Path)), request_body = ServiceAccountCredentialBody,
    responses((status = 200, body = Data<ServiceAccountView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_service_account_credential(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let body = ServiceAccountCredentialBody::parse(&body)?;
    let sa = s
        .controller
        .service_account_set_reference(
            &ctx.req,
            p.ns()?,
            p.service_account()?,
            body.kind.0,
            body.secret_ref.name.0,
            body.secret_ref.key.0,
        )
        .await?;
    Ok(ok(ServiceAccountView::from(&sa)))
}
