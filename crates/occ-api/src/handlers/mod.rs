//! Thin handlers: extract (ids, caller, body), call one controller operation, render a view.

pub mod agents;
pub mod auth;
pub mod chat;
pub mod configurations;
pub mod credential_sources;
pub mod iam;
pub mod namespaces;
pub mod native_admin;
pub mod presets;
pub mod provisioning;
pub mod runtime_logs;
pub mod secrets;
pub mod service_accounts;
pub mod service_principals;
pub mod workspace;

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::extract::Ctx;
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{BackendView, InstallationView, InventoryView};

/// The Installation.
#[utoipa::path(get, path = "/installation", operation_id = "getInstallation", tag = "Installation",
    responses((status = 200, body = Data<InstallationView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_installation(
    State(s): State<AppState>,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let installation = s.controller.installation_get(&ctx.req).await?;
    Ok(ok(InstallationView::new(
        &installation,
        &s.controller.execution_modes(),
    )))
}

/// What the Installation runs: every Namespace the caller may read with the Agents it may read,
/// each with its runtime state and whether a deployment of it is queued or running
/// (Installation administrators).
#[utoipa::path(get, path = "/installation/deployment-inventory", operation_id = "getInstallationDeploymentInventory", tag = "Installation",
    responses((status = 200, body = Data<InventoryView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_deployment_inventory(
    State(s): State<AppState>,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let inventory = s.controller.deployment_inventory(&ctx.req).await?;
    Ok(ok(InventoryView::from(&inventory)))
}

/// The configured Backends Agents may select with `backendId` (Installation administrators).
#[utoipa::path(get, path = "/backends", operation_id = "listBackends", tag = "Installation",
    responses((status = 200, body = Data<Vec<BackendView>>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_backends(
    State(s): State<AppState>,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let backends = s.controller.backend_list(&ctx.req).await?;
    Ok(ok(backends
        .iter()
        .map(BackendView::from)
        .collect::<Vec<_>>()))
}
