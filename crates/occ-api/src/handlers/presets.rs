//! `/namespaces/{namespaceId}/presets`: a Namespace's templates for new Agents.

use axum::extract::State;
use axum::response::IntoResponse;
use occ_controller::presets::PresetChange;
use occ_core::{DetailCode, Error};

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::{PresetCreateBody, PresetUpdateBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::PresetView;

/// Presets the caller may read.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/presets", operation_id = "listPresets", tag = "Presets",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<PresetView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_presets(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.preset_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list.iter().map(PresetView::from).collect::<Vec<_>>()))
}

/// Create a Preset.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/presets", operation_id = "createPreset", tag = "Presets",
    params(("namespaceId" = String, Path)), request_body = PresetCreateBody,
    responses((status = 201, body = Data<PresetView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_preset(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let body = PresetCreateBody::parse(&body, ns)?;
    let preset = s
        .controller
        .preset_create(&ctx.req, ns, body.name, body.template.0)
        .await?;
    Ok(created(PresetView::from(&preset)))
}

/// One Preset.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/presets/{presetId}", operation_id = "getPreset", tag = "Presets",
    params(("namespaceId" = String, Path), ("presetId" = String, Path)),
    responses((status = 200, body = Data<PresetView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_preset(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let preset = s
        .controller
        .preset_get(&ctx.req, p.ns()?, p.preset()?)
        .await?;
    Ok(ok(PresetView::from(&preset)))
}

/// Rename a Preset and/or replace its template.
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/presets/{presetId}", operation_id = "updatePreset", tag = "Presets",
    params(("namespaceId" = String, Path), ("presetId" = String, Path)), request_body = PresetUpdateBody,
    responses((status = 200, body = Data<PresetView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_preset(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let body = PresetUpdateBody::parse(&body, ns)?;
    if body.name.is_none() && body.template.is_none() {
        return Err(Error::invalid_field(
            "",
            DetailCode::Required,
            "The request is invalid: give name, template or both",
        )
        .into());
    }
    let preset = s
        .controller
        .preset_update(
            &ctx.req,
            ns,
            p.preset()?,
            PresetChange {
                name: body.name,
                template: body.template.map(|t| t.0),
            },
        )
        .await?;
    Ok(ok(PresetView::from(&preset)))
}

/// Delete a Preset (Agents made from it keep their own copies).
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/presets/{presetId}", operation_id = "deletePreset", tag = "Presets",
    params(("namespaceId" = String, Path), ("presetId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_preset(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .preset_delete(&ctx.req, p.ns()?, p.preset()?)
        .await?;
    Ok(NoContent)
}
