//! `/namespaces/{namespaceId}/credential-sources`: a Namespace's saved provider connections.

use axum::extract::State;
use axum::response::IntoResponse;
use occ_controller::credential_sources::CredentialSourceInput;
use occ_core::{DetailCode, Error};

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params, json_body_without_415};
use crate::inputs::{CredentialSourceCreateBody, CredentialSourceUpdateBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::CredentialSourceView;

/// Credential sources the caller may read.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/credential-sources", operation_id = "listCredentialSources", tag = "Credential sources",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<CredentialSourceView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_credential_sources(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s
        .controller
        .credential_source_list(&ctx.req, p.ns()?)
        .await?;
    Ok(ok(list
        .iter()
        .map(CredentialSourceView::from)
        .collect::<Vec<_>>()))
}

/// Register a credential source: a catalog type, its settings and the Secrets holding its key
/// (409 for a type the catalog lacks, 404 for a field the type lacks or a required one missing).
#[utoipa::path(post, path = "/namespaces/{namespaceId}/credential-sources", operation_id = "createCredentialSource", tag = "Credential sources",
    params(("namespaceId" = String, Path)), request_body = CredentialSourceCreateBody,
    responses((status = 201, body = Data<CredentialSourceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_credential_source(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let body = CredentialSourceCreateBody::parse(&body, ns)?;
    let source = s
        .controller
        .credential_source_create(
            &ctx.req,
            ns,
            CredentialSourceInput {
                name: body.name,
                source_type: body.source_type.0,
                config: body.config.unwrap_or_default().0,
                secrets: body.secrets.unwrap_or_default().0,
            },
        )
        .await?;
    Ok(created(CredentialSourceView::from(&source)))
}

/// One credential source.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/credential-sources/{credentialSourceId}", operation_id = "getCredentialSource", tag = "Credential sources",
    params(("namespaceId" = String, Path), ("credentialSourceId" = String, Path)),
    responses((status = 200, body = Data<CredentialSourceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_credential_source(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let source = s
        .controller
        .credential_source_get(&ctx.req, p.ns()?, p.credential_source()?)
        .await?;
    Ok(ok(CredentialSourceView::from(&source)))
}

/// Replace the Secrets of a credential source (a rotated key reaches the next delivery).
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/credential-sources/{credentialSourceId}", operation_id = "updateCredentialSource", tag = "Credential sources",
    params(("namespaceId" = String, Path), ("credentialSourceId" = String, Path)), request_body = CredentialSourceUpdateBody,
    responses((status = 200, body = Data<CredentialSourceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_credential_source(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    let body = json_body_without_415(body)?;
    let ns = p.ns()?;
    let body = CredentialSourceUpdateBody::parse(&body, ns)?;
    let Some(secrets) = body.secrets else {
        return Err(Error::invalid_field(
            "/secrets",
            DetailCode::Required,
            "The request is invalid: give secrets, the source's Secret fields",
        )
        .into());
    };
    let source = s
        .controller
        .credential_source_update(&ctx.req, ns, p.credential_source()?, secrets.0)
        .await?;
    Ok(ok(CredentialSourceView::from(&source)))
}

/// Delete a credential source (its Secrets stay).
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/credential-sources/{credentialSourceId}", operation_id = "deleteCredentialSource", tag = "Credential sources",
    params(("namespaceId" = String, Path), ("credentialSourceId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_credential_source(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .credential_source_delete(&ctx.req, p.ns()?, p.credential_source()?)
        .await?;
    Ok(NoContent)
}

/// The models the provider offers to the source's key, at the source's own endpoint when it
/// names one (occ extension; needs `credential_source:operate`): a client lists models for a
/// saved connection without ever holding its key.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/credential-sources/{credentialSourceId}/models", operation_id = "listCredentialSourceModels", tag = "Credential sources",
    params(("namespaceId" = String, Path), ("credentialSourceId" = String, Path)),
    responses((status = 200, body = Data<Vec<crate::views::ModelView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 429, body = ErrorBody),
        (status = 501, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn credential_source_models(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let models = s
        .controller
        .credential_source_models(&ctx.req, p.ns()?, p.credential_source()?)
        .await?;
    Ok(ok(models
        .iter()
        .map(crate::views::ModelView::from)
        .collect::<Vec<_>>()))
}
