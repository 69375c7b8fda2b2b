//! Router state.

use std::sync::Arc;

use occ_controller::Controller;
use occ_controller::metrics::Metrics;

/// The session cookie (over plain HTTP; [`ApiSettings::cookie_name`] names the one in use).
pub const SESSION_COOKIE: &str = "openclaw_occ.session_token";

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// The public origin (`scheme://host[:port]`) browsers must send as `Origin`.
    pub public_origin: String,
    /// Whether the session cookie is `Secure` (the base URL is https).
    pub secure_cookies: bool,
}

impl ApiSettings {
    /// The session cookie name (`__Secure-` prefixed over HTTPS).
    pub fn cookie_name(&self) -> &'static str {
        if self.secure_cookies {
            "__Secure-openclaw_occ.session_token"
        } else {
            SESSION_COOKIE
        }
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The application.
    pub controller: Arc<Controller>,
    /// HTTP settings.
    pub settings: Arc<ApiSettings>,
    /// Request metrics, when the process exports them.
    pub metrics: Option<Arc<Metrics>>,
}
