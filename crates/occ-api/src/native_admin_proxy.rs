//! Agent origins (`agent-<opaque>.<domain>`): occ's reverse proxy to each Agent's native
//! Control UI, HTTP and WebSocket.
//!
//! Every request needs the origin's pass cookie (see `occ_controller::native_admin`; a
//! navigation without one is sent to the console's launch), is admitted again by the controller
//! (live session, Agent `use`, the pass's revision still serving), and reaches the gateway with
//! occ's proxy identity and nothing of the browser's credentials:
//!
//! - upstream, the browser's cookies, `Authorization`, API keys, forwarding headers, every
//!   `x-occ-*` header and hop-by-hop headers are removed; occ sets the identity (in the header
//!   named with the revision's secret proxy key, `control_ui::identity_header`), a forwarded
//!   client and the one origin the gateway allows (after checking the browser's own `Origin`
//!   where it matters: every WebSocket and every request that is not GET/HEAD);
//! - downstream, `Set-Cookie` and hop-by-hop headers are removed, `worker-src 'none'` and
//!   `frame-ancestors 'none'` replace those directives of the CSP (the stock UI registers a
//!   service worker, which would outlive occ's checks; sibling Agent origins are same-site, so
//!   only this stops one framing another), `X-Frame-Options: DENY` is set and nothing is
//!   cached;
//! - a WebSocket is connected to the browser only after the gateway accepted it, audited on open
//!   and close with a connection id and reason, re-admitted every 25 s and closed at once when
//!   its session signs out here.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use hyper_util::rt::TokioIo;
use occ_controller::native_admin::{
    CALLBACK_PATH, LEASE_INTERVAL, NativeAdminSettings, ProxyAdmission, ProxyRefusal,
    RESERVED_PREFIX, launch_binding, launch_nonce,
};
use occ_core::RequestId;
use occ_core::native::control_ui;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::extract::cookie_values;
use crate::handlers::native_admin::page;
use crate::state::AppState;

/// The pass cookie of an Agent origin (host-only).
const PASS_COOKIE: &str = "occ_native_admin";
/// The same over HTTPS (`__Host-`: Secure, Path=/, no Domain).
const SECURE_PASS_COOKIE: &str = "__Host-occ_native_admin";
/// The launch nonce of an Agent origin (host-only): only the browser holding it redeems the
/// ticket its launch comes back with.
const LAUNCH_COOKIE: &str = "occ_native_admin_launch";
/// The same over HTTPS.
const SECURE_LAUNCH_COOKIE: &str = "__Host-occ_native_admin_launch";
/// How long a launch nonce lives (the ticket itself lives 60 s).
const LAUNCH_COOKIE_MAX_AGE: u64 = 300;
/// How long the gateway may take to answer a proxied request's head.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest path (with query) proxied.
const MAX_TARGET: usize = 4096;

/// Request headers never sent upstream (besides hop-by-hop ones and every `x-forwarded-*`).
const STRIPPED_UPSTREAM: [&str; 13] = [
    "authorization",
    "cookie",
    "forwarded",
    "host",
    "origin",
    "x-api-key",
    "x-real-ip",
    "x-occ-identity",
    "x-occ-role",
    "x-occ-role-policy",
    "x-occ-session-key",
    "x-openclaw-scopes",
    "proxy-authorization",
];
/// Hop-by-hop headers (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The outermost layer: requests for an Agent origin are served here, everything else goes on
/// to the API and the console.
pub async fn agent_origin(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(settings) = state.controller.native_admin_settings() else {
        return next.run(req).await;
    };
    let authority = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default();
    let Some(host) = settings.agent_host_of(authority) else {
        return next.run(req).await;
    };
    let host = host.to_owned();
    let settings = settings.clone();
    serve(state, settings, host, req).await
}

fn pass_cookie(settings: &NativeAdminSettings) -> &'static str {
    if settings.secure() {
        SECURE_PASS_COOKIE
    } else {
        PASS_COOKIE
    }
}

fn launch_cookie(settings: &NativeAdminSettings) -> &'static str {
    if settings.secure() {
        SECURE_LAUNCH_COOKIE
    } else {
        LAUNCH_COOKIE
    }
}

/// A host-only, HttpOnly, SameSite=Lax cookie of the Agent origin.
fn origin_cookie(settings: &NativeAdminSettings, name: &str, value: &str, max_age: u64) -> String {
    let secure = if settings.secure() { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

/// Sends a browser without a pass to the console's launch, with a fresh launch nonce set on
/// this origin and its binding in the launch URL.
fn to_launch(settings: &NativeAdminSettings, host: &str) -> Response {
    let nonce = launch_nonce();
    let mut response =
        Redirect::to(&settings.launch_url(host, &launch_binding(&nonce))).into_response();
    let cookie = origin_cookie(
        settings,
        launch_cookie(settings),
        &nonce,
        LAUNCH_COOKIE_MAX_AGE,
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn serve(
    state: AppState,
    settings: NativeAdminSettings,
    host: String,
    req: Request,
) -> Response {
    let path = req.uri().path().to_owned();
    if path == CALLBACK_PATH && req.method() == Method::GET {
        let query = req.uri().query().unwrap_or_default().to_owned();
        let nonce = match cookie_values(req.headers(), launch_cookie(&settings)).as_slice() {
            [one] => Some((*one).to_owned()),
            _ => None,
        };
        return callback(&state, &settings, &host, &query, nonce.as_deref()).await;
    }
    if path.starts_with(RESERVED_PREFIX) {
        return page(StatusCode::NOT_FOUND, "Not found.");
    }
    if req
        .headers()
        .get("service-worker")
        .is_some_and(|v| v.as_bytes() == b"script")
    {
        return page(
            StatusCode::FORBIDDEN,
            "Service workers are not allowed on Agent origins.",
        );
    }
    let Some(target) = req.uri().path_and_query().map(|p| p.as_str().to_owned()) else {
        return page(StatusCode::BAD_REQUEST, "The request has no path.");
    };
    if !clean_target(&target) {
        return page(StatusCode::BAD_REQUEST, "The request path is not allowed.");
    }
    let websocket = is_websocket(req.headers());
    let navigation = req.method() == Method::GET && !websocket;
    let cookies = cookie_values(req.headers(), pass_cookie(&settings));
    let pass = match cookies.as_slice() {
        [one] => Some((*one).to_owned()),
        _ => None,
    };
    // Sockets are admitted afresh (they are audited and leased); plain requests may reuse a
    // pass's admission from the last two seconds.
    let admitted = if websocket {
        state
            .controller
            .native_admin_admit(&host, pass.as_deref(), RequestId::generate())
            .await
    } else {
        state
            .controller
            .native_admin_admit_request(&host, pass.as_deref(), RequestId::generate())
            .await
    };
    let admission = match admitted {
        Ok(admission) => admission,
        Err(ProxyRefusal::SessionInvalid | ProxyRefusal::RevisionChanged) if navigation => {
            return to_launch(&settings, &host);
        }
        Err(refusal) => return refused(refusal),
    };
    let agent_origin = settings.origin_of(&host);
    let origin_ok = req
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|o| o.as_bytes() == agent_origin.as_bytes());
    let origin_required = websocket || !matches!(*req.method(), Method::GET | Method::HEAD);
    if origin_required && !origin_ok {
        return page(
            StatusCode::FORBIDDEN,
            "This request must come from the Agent's own origin.",
        );
    }
    let Some(upstream) = upstream_authority(&admission.gateway_url) else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "The Agent's gateway cannot be reached through occ.",
        );
    };
    if websocket {
        proxy_websocket(
            state,
            admission,
            upstream,
            pass.unwrap_or_default(),
            target,
            req,
        )
        .await
    } else {
        proxy_http(
            &agent_origin,
            &upstream,
            &target,
            admission.identity_header.expose(),
            req,
        )
        .await
    }
}

/// The Agent origin's ticket exchange: a host-only pass cookie, then the UI.
async fn callback(
    state: &AppState,
    settings: &NativeAdminSettings,
    host: &str,
    query: &str,
    nonce: Option<&str>,
) -> Response {
    let ticket = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("ticket="))
        .map(str::to_owned);
    let Some(ticket) = ticket else {
        return page(StatusCode::BAD_REQUEST, "The launch ticket is missing.");
    };
    match state
        .controller
        .native_admin_redeem(host, &ticket, nonce)
        .await
    {
        Ok(pass) => {
            let mut response = Redirect::to("/").into_response();
            for cookie in [
                origin_cookie(settings, pass_cookie(settings), &pass.value, pass.max_age),
                // The nonce did its one job.
                origin_cookie(settings, launch_cookie(settings), "", 0),
            ] {
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().append(header::SET_COOKIE, value);
                }
            }
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(refusal) => refused(refusal),
    }
}

fn refused(refusal: ProxyRefusal) -> Response {
    let (status, text) = match refusal {
        ProxyRefusal::SessionInvalid => (
            StatusCode::UNAUTHORIZED,
            "Open the Control UI from the Agent's page in the occ console.",
        ),
        ProxyRefusal::AuthorizationDenied => (
            StatusCode::FORBIDDEN,
            "You may not use this Agent's Control UI.",
        ),
        ProxyRefusal::LaunchNotBound => (
            StatusCode::FORBIDDEN,
            "This launch link was started in another browser; open the Control UI from the \
             Agent's page in the occ console.",
        ),
        ProxyRefusal::RevisionChanged => (
            StatusCode::CONFLICT,
            "The Agent now serves another revision; reopen the Control UI from its page.",
        ),
        ProxyRefusal::AgentUnavailable
        | ProxyRefusal::Disabled
        | ProxyRefusal::DependencyTimeout
        | ProxyRefusal::DependencyFailure => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The Agent's Control UI is unavailable. Reopen it from the Agent's page to retry.",
        ),
    };
    page(status, text)
}

/// A path (and query) safe to hand to the gateway: no dot segments, no doubled or encoded
/// separators, no backslashes or control characters, bounded.
fn clean_target(target: &str) -> bool {
    let path = target.split('?').next().unwrap_or_default();
    let lower = target.to_ascii_lowercase();
    target.len() <= MAX_TARGET
        && path.starts_with('/')
        && !path.contains("//")
        && !path.split('/').any(|s| s == "." || s == "..")
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && !lower.contains("%2e")
        && !target.contains('\\')
        && !target.bytes().any(|b| b.is_ascii_control())
}

fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// `127.0.0.1:PORT` of a `ws://127.0.0.1:PORT` gateway address (the only kind the Drivers give).
fn upstream_authority(gateway_url: &str) -> Option<String> {
    let rest = gateway_url.strip_prefix("ws://")?;
    let authority = rest.trim_end_matches('/');
    (!authority.contains('/') && !authority.contains('@')).then(|| authority.to_owned())
}

/// The request headers the gateway gets: the browser's minus credentials, forwarding,
/// identity and hop-by-hop headers; plus occ's identity, forwarded client and allowed origin.
fn upstream_headers(
    from: &HeaderMap,
    upstream: &str,
    websocket: bool,
    identity_header: &str,
) -> HeaderMap {
    let connection_named: Vec<String> = from
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect();
    let mut headers = HeaderMap::new();
    for (name, value) in from {
        let n = name.as_str();
        let keep_for_upgrade = websocket && n.starts_with("sec-websocket-");
        if !keep_for_upgrade
            && (STRIPPED_UPSTREAM.contains(&n)
                || HOP_BY_HOP.contains(&n)
                || n.starts_with("x-forwarded-")
                || n.starts_with("x-occ-")
                || connection_named.iter().any(|c| c == n))
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    let set = |headers: &mut HeaderMap, name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    };
    set(&mut headers, "host", upstream);
    // The revision's identity header: its name holds the proxy key only occ and the gateway
    // know, so no local process can claim the identity.
    if let Ok(name) = HeaderName::from_bytes(identity_header.as_bytes()) {
        headers.insert(name, HeaderValue::from_static(control_ui::PROXY_IDENTITY));
    }
    set(
        &mut headers,
        "x-forwarded-for",
        control_ui::FORWARDED_CLIENT,
    );
    set(&mut headers, "origin", control_ui::UPSTREAM_ORIGIN);
    if websocket {
        set(&mut headers, "connection", "upgrade");
        set(&mut headers, "upgrade", "websocket");
    }
    headers
}

/// The gateway's Content-Security-Policy with `worker-src 'none'` and `frame-ancestors 'none'`
/// in place of any directive of those names it had (a repeated directive is ignored by
/// browsers, so appending alone would not override one).
fn hardened_csp(existing: &str) -> String {
    let mut directives: Vec<&str> = existing
        .split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let name = d.split_ascii_whitespace().next().unwrap_or_default();
            !name.eq_ignore_ascii_case("worker-src")
                && !name.eq_ignore_ascii_case("frame-ancestors")
        })
        .collect();
    directives.extend(["worker-src 'none'", "frame-ancestors 'none'"]);
    directives.join("; ")
}

/// The response headers the browser gets: the gateway's minus cookies and hop-by-hop headers,
/// with service workers blocked and nothing cached. `None` when the gateway redirects off its
/// own origin.
fn downstream_headers(from: &HeaderMap, agent_origin: &str) -> Option<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (name, value) in from {
        let n = name.as_str();
        if n == "set-cookie" || HOP_BY_HOP.contains(&n) {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    if let Some(location) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok())
        && (location.contains("://") || location.starts_with("//"))
    {
        let path = location
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('/'))
            .filter(|(authority, _)| {
                authority.starts_with("127.0.0.1:") || authority.starts_with("localhost:")
            })
            .map(|(_, path)| format!("{agent_origin}/{path}"))?;
        headers.insert(header::LOCATION, HeaderValue::from_str(&path).ok()?);
    }
    let csp = hardened_csp(
        headers
            .get(header::CONTENT_SECURITY_POLICY)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default(),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_str(&csp).ok()?,
    );
    // Sibling Agent origins are same-site, so SameSite=Lax does not stop one framing another.
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(headers)
}

fn unavailable() -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The native gateway is unavailable. Reopen native admin from the Agent page to retry.",
    )
}

async fn connect(upstream: &str) -> Option<TcpStream> {
    match tokio::time::timeout(UPSTREAM_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(stream)) => {
            // A request or frame written in pieces must not wait for the gateway's delayed ACK.
            let _ = stream.set_nodelay(true);
            Some(stream)
        }
        _ => None,
    }
}

async fn proxy_http(
    agent_origin: &str,
    upstream: &str,
    target: &str,
    identity_header: &str,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let mut outgoing = http::Request::builder()
        .method(parts.method.clone())
        .uri(target)
        .body(body)
        .expect("a method and a checked path make a request");
    *outgoing.headers_mut() = upstream_headers(&parts.headers, upstream, false, identity_header);
    let Some(stream) = connect(upstream).await else {
        return unavailable();
    };
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return unavailable();
    };
    tokio::spawn(connection);
    let response = match tokio::time::timeout(UPSTREAM_TIMEOUT, sender.send_request(outgoing)).await
    {
        Ok(Ok(response)) => response,
        _ => return unavailable(),
    };
    let (mut head, body) = response.into_parts();
    let Some(headers) = downstream_headers(&head.headers, agent_origin) else {
        return page(
            StatusCode::BAD_GATEWAY,
            "The gateway redirected outside the Agent's origin.",
        );
    };
    head.headers = headers;
    Response::from_parts(head, Body::new(body))
}

/// Proxies a WebSocket: the browser is answered `101` only after the gateway answered it.
async fn proxy_websocket(
    state: AppState,
    admission: ProxyAdmission,
    upstream: String,
    pass: String,
    target: String,
    mut req: Request,
) -> Response {
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut outgoing = http::Request::builder()
        .method(Method::GET)
        .uri(&target)
        .body(Body::empty())
        .expect("a checked path makes a request");
    *outgoing.headers_mut() = upstream_headers(
        req.headers(),
        &upstream,
        true,
        admission.identity_header.expose(),
    );
    let Some(stream) = connect(&upstream).await else {
        return unavailable();
    };
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return unavailable();
    };
    tokio::spawn(connection.with_upgrades());
    let mut response =
        match tokio::time::timeout(UPSTREAM_TIMEOUT, sender.send_request(outgoing)).await {
            Ok(Ok(response)) => response,
            _ => return unavailable(),
        };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return page(
            StatusCode::BAD_GATEWAY,
            "The Agent's gateway refused the connection (upstream_rejected).",
        );
    }
    let upstream_upgrade = hyper::upgrade::on(&mut response);
    let mut answer = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for name in [
        "sec-websocket-accept",
        "sec-websocket-protocol",
        "sec-websocket-extensions",
    ] {
        if let Some(value) = response.headers().get(name) {
            answer = answer.header(name, value);
        }
    }
    let answer = answer
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .body(Body::empty())
        .expect("static headers make a response");
    let connection_id = format!("naws_{}", uuid_like());
    tokio::spawn(async move {
        let (Ok(client), Ok(gateway)) = (client_upgrade.await, upstream_upgrade.await) else {
            return;
        };
        let controller = state.controller.clone();
        if let Err(e) = controller
            .native_admin_socket_opened(&admission, &connection_id)
            .await
        {
            // Fail closed: an unaudited socket does not stay open.
            tracing::warn!(error = %e, "Control UI socket not audited; closing it");
            return;
        }
        let reason = relay(&state, &admission, &pass, client, gateway).await;
        if let Err(e) = controller
            .native_admin_socket_closed(&admission, &connection_id, reason)
            .await
        {
            tracing::warn!(error = %e, "Control UI socket close not audited");
        }
    });
    answer
}

/// Copies bytes both ways until a side ends, the lease fails or the session signs out; the
/// reason it stopped.
async fn relay(
    state: &AppState,
    admission: &ProxyAdmission,
    pass: &str,
    client: hyper::upgrade::Upgraded,
    gateway: hyper::upgrade::Upgraded,
) -> &'static str {
    let (mut client_read, mut client_write) = tokio::io::split(TokioIo::new(client));
    let (mut gateway_read, mut gateway_write) = tokio::io::split(TokioIo::new(gateway));
    let to_gateway = async {
        let _ = tokio::io::copy(&mut client_read, &mut gateway_write).await;
        let _ = gateway_write.shutdown().await;
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut gateway_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    let mut ends = state.controller.session_ends();
    let lease = async {
        let interval = state
            .controller
            .native_admin_settings()
            .map_or(LEASE_INTERVAL, NativeAdminSettings::lease_interval);
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(refusal) = state
                        .controller
                        .native_admin_admit(&admission.host, Some(pass), RequestId::generate())
                        .await
                    {
                        return refusal.as_str();
                    }
                }
                ended = ends.recv() => {
                    if let Ok(session) = ended
                        && session == admission.session_id
                    {
                        return ProxyRefusal::SessionInvalid.as_str();
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = to_gateway => "client_disconnect",
        _ = to_client => "upstream_disconnect",
        reason = lease => reason,
    }
}

fn uuid_like() -> String {
    occ_core::RequestId::generate()
        .as_str()
        .trim_start_matches("req_")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_paths_reach_the_gateway() {
        for ok in ["/", "/assets/app.js?v=1", "/chat?session=main"] {
            assert!(clean_target(ok), "{ok}");
        }
        for bad in [
            "/../etc/passwd",
            "/a/./b",
            "//evil",
            "/a%2Fb",
            "/a%2e%2e/b",
            "/a\\b",
            "relative",
        ] {
            assert!(!clean_target(bad), "{bad}");
        }
        assert!(!clean_target(&format!("/{}", "a".repeat(MAX_TARGET))));
    }

    #[test]
    fn the_browsers_credentials_and_forwarding_never_go_upstream() {
        let mut from = HeaderMap::new();
        for (n, v) in [
            ("cookie", "occ_native_admin=x; openclaw_occ.session_token=y"),
            ("authorization", "Bearer z"),
            ("x-api-key", "occ_key"),
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-host", "evil"),
            ("forwarded", "for=1.2.3.4"),
            ("x-occ-identity", "mallory"),
            ("x-occ-proxy-guess", "mallory"),
            ("x-openclaw-scopes", "operator.admin"),
            ("origin", "http://agent-a.localhost:3000"),
            ("connection", "keep-alive, x-custom"),
            ("x-custom", "hop"),
            ("accept", "text/html"),
            ("sec-websocket-key", "k"),
        ] {
            from.append(HeaderName::from_static(n), HeaderValue::from_static(v));
        }
        let up = upstream_headers(&from, "127.0.0.1:29000", true, "x-occ-proxy-0123abcd");
        for gone in [
            "cookie",
            "authorization",
            "x-api-key",
            "x-forwarded-host",
            "forwarded",
            "x-openclaw-scopes",
            "x-custom",
        ] {
            assert!(up.get(gone).is_none(), "{gone} went upstream");
        }
        assert!(
            up.get("x-occ-identity").is_none(),
            "the legacy identity went upstream"
        );
        assert!(up.get("x-occ-proxy-guess").is_none());
        assert_eq!(up["x-occ-proxy-0123abcd"], control_ui::PROXY_IDENTITY);
        assert_eq!(up["x-forwarded-for"], control_ui::FORWARDED_CLIENT);
        assert_eq!(up["origin"], control_ui::UPSTREAM_ORIGIN);
        assert_eq!(up["host"], "127.0.0.1:29000");
        assert_eq!(up["accept"], "text/html");
        assert_eq!(up["sec-websocket-key"], "k");
        assert_eq!(up["upgrade"], "websocket");
        let plain = upstream_headers(&from, "127.0.0.1:29000", false, "x-occ-proxy-0123abcd");
        assert!(plain.get("sec-websocket-key").is_some());
        assert!(plain.get("upgrade").is_none());
    }

    #[test]
    fn cookies_never_come_back_and_workers_are_blocked() {
        let mut from = HeaderMap::new();
        from.append(header::SET_COOKIE, HeaderValue::from_static("a=b"));
        from.append(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self';"),
        );
        from.append(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=600"),
        );
        let down = downstream_headers(&from, "http://agent-a.localhost:3000").expect("headers");
        assert!(down.get(header::SET_COOKIE).is_none());
        assert_eq!(
            down[header::CONTENT_SECURITY_POLICY],
            "default-src 'self'; worker-src 'none'; frame-ancestors 'none'"
        );
        assert_eq!(down[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(down[header::CACHE_CONTROL], "no-store");
        assert_eq!(down[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let bare = downstream_headers(&HeaderMap::new(), "http://a").expect("headers");
        assert_eq!(
            bare[header::CONTENT_SECURITY_POLICY],
            "worker-src 'none'; frame-ancestors 'none'"
        );
        // A gateway's own framing or worker policy is replaced, never left in front of occ's.
        assert_eq!(
            hardened_csp("frame-ancestors 'self'; Worker-Src *; img-src data:"),
            "img-src data:; worker-src 'none'; frame-ancestors 'none'"
        );
    }

    #[test]
    fn redirects_stay_on_the_agent_origin() {
        let mut from = HeaderMap::new();
        from.insert(
            header::LOCATION,
            HeaderValue::from_static("http://127.0.0.1:29000/chat"),
        );
        let down = downstream_headers(&from, "http://agent-a.localhost:3000").expect("headers");
        assert_eq!(down[header::LOCATION], "http://agent-a.localhost:3000/chat");
        from.insert(
            header::LOCATION,
            HeaderValue::from_static("https://evil.example/"),
        );
        assert!(downstream_headers(&from, "http://agent-a.localhost:3000").is_none());
        from.insert(header::LOCATION, HeaderValue::from_static("/relative"));
        let down = downstream_headers(&from, "http://agent-a.localhost:3000").expect("headers");
        assert_eq!(down[header::LOCATION], "/relative");
    }
}
