//! `GET …/agents/{agentId}/native-admin` (whether and where a person can open the Agent's
//! native Control UI) and the console's launch into an Agent origin (a browser navigation, not
//! an API operation). The Agent origins themselves are served by [`crate::native_admin_proxy`].

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::StatusCode;
use occ_core::ErrorCode;
use serde::Deserialize;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::extract::{Ctx, Params};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{NativeAdminStatusView, RuntimeRoleView};

/// Whether the signed-in person can open the Agent's native Control UI through occ, and its
/// URL: `disabled` (not offered by this installation), `stopped`, `unavailable` (no serving
/// revision yet), `unsupported` (the revision's Configuration does not enable
/// `gateway.controlUi`, or asks for something occ does not proxy), `available`. Needs a console
/// session, Agent `use` and a runtime role assigned to the person on the Agent; service keys
/// get 403.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/native-admin", operation_id = "getAgentNativeAdmin", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = Data<NativeAdminStatusView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_agent_native_admin(
    State(s): State<AppState>,
    ctx: Ctx,
    Path((ns, agent)): Path<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    // As the reference: its ids are any strings here, so one that cannot name an Agent is one
    // that names no Agent (404), not a malformed request.
    let (Ok(ns), Ok(agent)) = (ns.parse(), agent.parse()) else {
        return Err(ApiError(occ_core::Error::not_found()));
    };
    let view = s.controller.native_admin(&ctx.req, &ns, &agent).await?;
    Ok(ok(NativeAdminStatusView::from(view)))
}

/// The runtime roles a person may hold in the Agent's Control UI (Installation
/// administrators): occ enforces the shared `platform-administrator` role. 503 without an
/// active revision.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/runtime-roles", operation_id = "listAgentRuntimeRoles", tag = "Agents",
    params(("namespaceId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = Data<Vec<RuntimeRoleView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_agent_runtime_roles(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let roles = s
        .controller
        .runtime_roles(&ctx.req, p.ns()?, p.agent()?)
        .await?;
    Ok(ok(roles
        .iter()
        .map(RuntimeRoleView::from)
        .collect::<Vec<_>>()))
}

/// The launch query: the Agent host and the binding of the launch nonce the Agent origin set
/// on the browser.
#[derive(Debug, Deserialize)]
pub struct LaunchQuery {
    host: String,
    binding: String,
}

/// `GET /__occ/native-admin/launch?host=agent-…&binding=…`: the Agent origin sends a browser
/// without a pass here (after setting its launch nonce); with a console session and Agent
/// `use`, it goes back with a one-time ticket bound to that nonce.
pub async fn launch(
    State(s): State<AppState>,
    ctx: Result<Ctx, ApiError>,
    query: Result<Query<LaunchQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return page(StatusCode::BAD_REQUEST, "The launch link is incomplete.");
    };
    let Ok(ctx) = ctx else {
        return page(
            StatusCode::UNAUTHORIZED,
            "Sign in to the occ console, then open the Control UI from the Agent's page.",
        );
    };
    match s
        .controller
        .native_admin_launch(&ctx.req, &query.host, &query.binding)
        .await
    {
        Ok(callback) => Redirect::to(&callback).into_response(),
        Err(e) => {
            let status = match e.code() {
                ErrorCode::Forbidden => StatusCode::FORBIDDEN,
                ErrorCode::NotFound => StatusCode::NOT_FOUND,
                ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            page(status, e.message())
        }
    }
}

/// A plain-text answer for a browser navigation.
pub(crate) fn page(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (http::header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (http::header::CACHE_CONTROL, "no-store"),
        ],
        text.to_owned(),
    )
        .into_response()
}
