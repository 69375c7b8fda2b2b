//! The web console: a single-page application of static files (`crates/occ-api/console/`)
//! embedded in the binary and served at `/console/`, on the API's origin. It has no backend of
//! its own: it signs in with the password route and then calls the same authorized API routes as
//! every other client, with the session cookie (never a token in storage, never a service key).
//!
//! - `/console/assets/<file>` serves the embedded assets with their content types (an unknown
//!   asset is 404);
//! - every other path under `/console/` serves `index.html`, and the application routes on the
//!   client (`/console/agents/agt_…?namespace=ns_…`): deep links and reloads work;
//! - `/console` redirects to `/console/`.
//!
//! Console responses carry a strict Content-Security-Policy (same-origin scripts, styles and
//! connections only; no inline script, no framing). They are exempt from the API's query-string
//! rule (the Namespace selector lives in the URL) and from the bootstrap gate (the sign-in page
//! loads before the Installation exists; the API calls it makes still answer 404 until then).
//! The routes are not part of the OpenAPI document: they are not API operations.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error;
use crate::state::AppState;

/// Where the console lives.
pub const PREFIX: &str = "/console";

/// The policy every console response carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../console/index.html");

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! assets {
    ($(($name:literal, $type:expr)),* $(,)?) => {
        &[$(Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../console/assets/", $name)),
        }),*]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = assets![
    ("app.css", "text/css; charset=utf-8"),
    ("app.js", JS),
    ("api.js", JS),
    ("dom.js", JS),
    ("shell.js", JS),
    ("lifecycle.js", JS),
    ("signin.js", JS),
    ("agents.js", JS),
    ("agent.js", JS),
    ("logs.js", JS),
    ("logs-tab.js", JS),
    ("chat-tab.js", JS),
    ("secret-access.js", JS),
    ("presets.js", JS),
    ("diagnosis.js", JS),
    ("diagnosis-panel.js", JS),
    ("namespaces.js", JS),
    ("connections.js", JS),
    ("access.js", JS),
    ("accounts.js", JS),
    ("favicon.svg", "image/svg+xml"),
];

/// Whether a path belongs to the console.
pub fn is_console_path(path: &str) -> bool {
    path == PREFIX || path.starts_with("/console/")
}

/// The console's routes (merged into the API router; not in the OpenAPI document).
pub fn router() -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(redirect))
        .route("/console/", get(index))
        .route("/console/assets/{*file}", get(asset))
        .route("/console/{*path}", get(index))
}

fn with_console_headers(mut response: Response, content_type: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

async fn index() -> Response {
    with_console_headers(INDEX_HTML.into_response(), "text/html; charset=utf-8")
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => with_console_headers(a.body.into_response(), a.content_type),
        None => error::not_found().into_response(),
    }
}

/// `/console` → `/console/`, keeping the query.
async fn redirect(uri: Uri) -> Response {
    let target = match uri.query() {
        Some(q) => format!("/console/?{q}"),
        None => "/console/".to_owned(),
    };
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    if let Ok(v) = HeaderValue::from_str(&target) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}
