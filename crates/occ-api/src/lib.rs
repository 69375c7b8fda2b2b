//! occ's HTTP API: the reference system's routes, envelopes, codes and headers.
//!
//! - Resource routes live at the root (`/namespaces/…`, `/installation`); authentication under
//!   `/api/auth/…`; the OpenAPI document at `/openapi.json`, generated from the handlers'
//!   annotations by `utoipa`, so it lists exactly what the router serves; the web console at
//!   `/console/` ([`console`]: embedded static files, not API operations).
//! - Every response carries `cache-control: no-store`, `x-content-type-options: nosniff` and a
//!   server-generated `x-request-id` that also appears in the body's `meta.requestId`.
//! - Handlers are thin: [`extract`] validates path ids (before authentication), authenticates
//!   the caller and reads strict bodies; [`inputs`] declares each body once ([`body`]: its typed
//!   fields, parser and OpenAPI schema) and turns it into controller input; the controller
//!   authorizes and acts; [`views`] renders. Errors become HTTP in [`error`] only.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, Method, header};
use occ_core::{Error, RequestId};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub mod body;
pub mod console;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod handlers;
pub mod inputs;
pub mod native_admin_proxy;
pub mod openapi;
pub mod state;
pub mod strict_json;
pub mod views;

pub use state::{ApiSettings, AppState};

use envelope::{AUTH_ROUTE_ERRORS, REQUEST_ID};
use error::ApiError;
use handlers::{
    agents, auth, chat, configurations, credential_sources, iam, namespaces, native_admin, presets,
    provisioning, runtime_logs, secrets, service_accounts, service_principals, workspace,
};

/// The generated OpenAPI document and the router that serves it.
pub fn router_and_openapi(state: AppState) -> (axum::Router, utoipa::openapi::OpenApi) {
    let (router, mut api) = OpenApiRouter::<AppState>::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(handlers::get_installation))
        .routes(routes!(handlers::get_deployment_inventory))
        .routes(routes!(handlers::list_backends))
        .routes(routes!(
            namespaces::list_namespaces,
            namespaces::create_namespace
        ))
        .routes(routes!(
            namespaces::get_namespace,
            namespaces::delete_namespace
        ))
        .routes(routes!(configurations::create_configuration))
        .routes(routes!(
            configurations::get_configuration,
            configurations::update_configuration,
            configurations::delete_configuration
        ))
        .routes(routes!(presets::list_presets, presets::create_preset))
        .routes(routes!(
            presets::get_preset,
            presets::update_preset,
            presets::delete_preset
        ))
        .routes(routes!(
            credential_sources::list_credential_sources,
            credential_sources::create_credential_source
        ))
        .routes(routes!(
            credential_sources::get_credential_source,
            credential_sources::update_credential_source,
            credential_sources::delete_credential_source
        ))
        .routes(routes!(credential_sources::credential_source_models))
        .routes(routes!(secrets::list_secrets, secrets::create_secret))
        .routes(routes!(
            secrets::get_secret,
            secrets::update_secret,
            secrets::delete_secret
        ))
        .routes(routes!(
            service_accounts::list_service_accounts,
            service_accounts::create_service_account
        ))
        .routes(routes!(
            service_accounts::get_service_account,
            service_accounts::delete_service_account
        ))
        .routes(routes!(service_accounts::create_service_account_credential))
        .routes(routes!(service_accounts::update_service_account_credential))
        .routes(routes!(agents::list_agents, agents::create_agent))
        .routes(routes!(agents::discover_models))
        .routes(routes!(provisioning::provision_agent))
        .routes(routes!(provisioning::get_agent_provisioning))
        .routes(routes!(provisioning::retry_agent_provisioning))
        .routes(routes!(
            agents::get_agent,
            agents::update_agent,
            agents::delete_agent
        ))
        .routes(routes!(agents::deploy_agent))
        .routes(routes!(agents::stop_agent))
        .routes(routes!(agents::list_agent_revisions))
        .routes(routes!(agents::get_agent_revision))
        .routes(routes!(agents::redeploy_agent_revision))
        .routes(routes!(agents::get_agent_deployment))
        .routes(routes!(agents::get_agent_deployment_runtime))
        .routes(routes!(agents::diagnose_agent_deployment))
        .routes(routes!(agents::get_agent_runtime))
        .routes(routes!(runtime_logs::get_runtime_logs))
        .routes(routes!(
            workspace::get_workspace_file,
            workspace::put_workspace_file
        ))
        .routes(routes!(workspace::get_workspace_defaults))
        .routes(routes!(chat::chat_with_agent))
        .routes(routes!(native_admin::get_agent_native_admin))
        .routes(routes!(native_admin::list_agent_runtime_roles))
        .routes(routes!(iam::list_roles, iam::create_role))
        .routes(routes!(iam::get_role, iam::delete_role))
        .routes(routes!(iam::list_bindings, iam::create_binding))
        .routes(routes!(iam::create_namespace_binding))
        .routes(routes!(iam::list_installation_roles))
        .routes(routes!(iam::get_binding, iam::delete_binding))
        .routes(routes!(iam::update_runtime_role))
        .routes(routes!(iam::get_permissions))
        .routes(routes!(auth::sign_in))
        .routes(routes!(auth::sign_out))
        .routes(routes!(auth::get_session))
        .routes(routes!(auth::get_providers))
        .routes(routes!(auth::create_account, auth::list_accounts))
        .routes(routes!(auth::get_account))
        .routes(routes!(auth::disable_account))
        .routes(routes!(auth::enable_account))
        .routes(routes!(auth::revoke_account_sessions))
        .routes(routes!(auth::create_service_key))
        .routes(routes!(auth::revoke_service_key))
        .routes(routes!(
            service_principals::create,
            service_principals::list
        ))
        .routes(routes!(service_principals::get, service_principals::delete))
        .routes(routes!(service_principals::disable))
        .routes(routes!(service_principals::enable))
        .split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    openapi::describe_responses(&mut api);
    let document = Arc::new(serde_json::to_value(&api).unwrap_or_default());
    let router = router
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move { envelope::json_response(http::StatusCode::OK, &document) }
            }),
        )
        .route(
            occ_controller::native_admin::LAUNCH_PATH,
            get(native_admin::launch),
        )
        .merge(console::router())
        // only matched routes: an unknown path or method still answers 404/405
        .route_layer(axum::middleware::from_fn(refuse_body_on_reads))
        .fallback(|| async { error::not_found() })
        .method_not_allowed_fallback(|| async { error::method_not_allowed() })
        .layer(from_fn_with_state(state.clone(), frame))
        // Outermost: Agent origins never reach the API or the console.
        .layer(from_fn_with_state(
            state.clone(),
            native_admin_proxy::agent_origin,
        ))
        .with_state(state);
    (router, api)
}

/// The router.
pub fn router(state: AppState) -> axum::Router {
    router_and_openapi(state).0
}

/// Whether a path is a resource route (404 until the Installation is bootstrapped).
fn is_resource_route(path: &str) -> bool {
    !(path.starts_with("/api/auth/") || path == "/openapi.json" || console::is_console_path(path))
}

/// Whether the request carries a body (the body's own size hint: known-empty or not).
fn has_body(req: &Request) -> bool {
    use axum::body::HttpBody as _;
    req.body().size_hint().exact() != Some(0)
}

/// The route template a request matched, handed from the route layer to the framing layer
/// (which runs before routing) for metrics.
#[derive(Clone)]
struct MatchedRoute(String);

/// Runs on matched routes only. No read route takes a body; one sent anyway is refused rather
/// than ignored.
async fn refuse_body_on_reads(
    matched: Option<axum::extract::MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    let route = matched.map(|m| MatchedRoute(m.as_str().to_owned()));
    let mut response = if matches!(*req.method(), Method::GET | Method::HEAD) && has_body(&req) {
        ApiError(Error::invalid_request("This route takes no request body")).into_response()
    } else {
        next.run(req).await
    };
    if let Some(route) = route {
        response.extensions_mut().insert(route);
    }
    response
}

/// Outermost middleware: request id scope, the query-string rule (API routes take no query; the
/// console's client-side routes do), the bootstrap gate, the common headers and one log line per
/// request.
async fn frame(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let id = RequestId::generate();
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let auth_route = path.starts_with("/api/auth/");
    let handle = async move {
        if req.uri().query().is_some()
            && !console::is_console_path(req.uri().path())
            && !runtime_logs::takes_query(req.uri().path())
            && !service_principals::takes_query(req.uri().path())
            && req.uri().path() != occ_controller::native_admin::LAUNCH_PATH
        {
            return ApiError(Error::invalid_request(
                "This route accepts no query parameters",
            ))
            .into_response();
        }
        if is_resource_route(req.uri().path()) {
            match state.controller.is_bootstrapped().await {
                Ok(true) => {}
                Ok(false) => return error::not_found().into_response(),
                Err(e) => return ApiError(e).into_response(),
            }
        }
        next.run(req).await
    };
    let mut response = REQUEST_ID
        .scope(id.clone(), AUTH_ROUTE_ERRORS.scope(auth_route, handle))
        .await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(id.as_str()) {
        headers.insert("x-request-id", v);
    }
    let elapsed = started.elapsed();
    tracing::info!(
        request_id = %id,
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        duration_ms = elapsed.as_millis() as u64,
        "http.completed"
    );
    if let Some(metrics) = &state.metrics {
        let route = response
            .extensions()
            .get::<MatchedRoute>()
            .map_or("unmatched", |r| r.0.as_str());
        metrics.record_http(route, method.as_str(), response.status().as_u16(), elapsed);
    }
    response
}
