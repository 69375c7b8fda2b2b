//! `/api/auth/…`: password sign-in and sessions, accounts, service keys.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, header};
use occ_controller::accounts::AccountChange;
use occ_core::{Error, ErrorCode};
use serde_json::json;

use crate::envelope::{created, ok};
use crate::error::ApiError;
use crate::extract::{
    Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params, check_csrf, cookie_values, json_body_without_415,
};
use crate::inputs::{AccountCreateBody, AccountVersionBody, ServiceKeyCreateBody, SignInBody};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{AccountListItemView, AccountStateView, AccountView, IssuedKeyView};

fn set_cookie(response: &mut Response, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// Sign in with email and password; sets the session cookie.
#[utoipa::path(post, path = "/api/auth/sign-in/email", operation_id = "signInEmail", tag = "Authentication", request_body = SignInBody,
    security(()),
    responses((status = 200, description = "Signed in; the session cookie is set"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn sign_in(
    State(s): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<Response, ApiError> {
    // A missing Origin is accepted (the CLI); a different one or a cross-site fetch is not.
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let cross_site =
        headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("cross-site");
    if origin.is_some_and(|o| o != s.settings.public_origin) || cross_site {
        return Err(Error::new(
            ErrorCode::Forbidden,
            "A trusted browser Origin is required for this request",
        )
        .into());
    }
    let body = SignInBody::parse(&body)?;
    let signed = s
        .controller
        .sign_in(&body.email.0, &body.password.0)
        .await?;
    let max_age =
        (signed.session.expires_at.unix_millis() - signed.session.created_at.unix_millis()) / 1000;
    let mut response =
        ok(json!({"authenticated": true, "sessionKey": s.controller.session_key(&signed.session)}))
            .into_response();
    let secure = if s.settings.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    set_cookie(
        &mut response,
        &format!(
            "{}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}",
            s.settings.cookie_name(),
            signed.token
        ),
    );
    Ok(response)
}

/// End the current session (cookie callers, exact Origin).
#[utoipa::path(post, path = "/api/auth/sign-out", operation_id = "signOut", tag = "Authentication",
    responses((status = 200, description = "Signed out"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn sign_out(
    State(s): State<AppState>,
    headers: HeaderMap,
    ctx: Ctx,
    _: NoBody,
) -> Result<Response, ApiError> {
    let Some(session) = ctx.auth.session.as_ref() else {
        return Err(Error::unauthenticated().into());
    };
    check_csrf(&headers, &s.settings.public_origin)?;
    s.controller.sign_out(&session.id).await?;
    let mut response = ok(json!({})).into_response();
    let secure = if s.settings.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    set_cookie(
        &mut response,
        &format!(
            "{}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{secure}",
            s.settings.cookie_name()
        ),
    );
    Ok(response)
}

/// The current session, or `null` (never 401).
#[utoipa::path(get, path = "/api/auth/session", operation_id = "getAuthSession", tag = "Authentication", security(()),
    responses((status = 200, description = "The session or null"), (status = 503, body = ErrorBody)))]
pub async fn get_session(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let cookies = cookie_values(&headers, s.settings.cookie_name());
    let found = match cookies.as_slice() {
        [token] => s.controller.authenticate_session(token).await?,
        _ => None,
    };
    let data = found
        .and_then(|a| Some((a.session?, a.user?)))
        .map(|(session, user)| {
            json!({
                "authenticated": true,
                "sessionKey": s.controller.session_key(&session),
                "user": {"id": user.id, "email": user.email, "name": user.name,
                         "principalId": user.principal_id},
            })
        });
    Ok(ok(data).into_response())
}

/// How people sign in here: occ signs people in with a password (single sign-on providers are
/// not configured), and its sessions are bound to their account (disabling it or ending its
/// sessions takes effect on the next request). Public: the sign-in page asks before anyone
/// signs in.
#[utoipa::path(get, path = "/api/auth/providers", operation_id = "getAuthProviders", tag = "Authentication", security(()),
    responses((status = 200, description = "The sign-in methods: `{github, google, oidc, password, sessionBinding}`"),
        (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_providers() -> impl IntoResponse {
    ok(json!({
        "github": false,
        "google": false,
        "oidc": false,
        "password": true,
        "sessionBinding": true,
    }))
}

/// Create a human account (session callers administering the Installation).
#[utoipa::path(post, path = "/api/auth/accounts", operation_id = "createAuthAccount", tag = "Authentication", request_body = AccountCreateBody,
    responses((status = 201, body = Data<AccountView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_account(
    State(s): State<AppState>,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = AccountCreateBody::parse(&body)?;
    let user = s.controller.account_create(&ctx.req, input.into()).await?;
    Ok(created(AccountView::from(&user)))
}

/// Issue a service key (returned once).
#[utoipa::path(post, path = "/api/auth/service-keys", operation_id = "createServiceKey", tag = "Authentication", request_body = ServiceKeyCreateBody,
    responses((status = 201, body = Data<IssuedKeyView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_service_key(
    State(s): State<AppState>,
    ctx: Ctx,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    let body = json_body_without_415(body)?;
    let input = ServiceKeyCreateBody::parse(&body)?;
    let issued = s
        .controller
        .service_key_issue(&ctx.req, input.into())
        .await?;
    Ok(created(IssuedKeyView::from(&issued)))
}

/// Revoke a service key.
#[utoipa::path(delete, path = "/api/auth/service-keys/{keyId}", operation_id = "revokeServiceKey", tag = "Authentication",
    params(("keyId" = String, Path)),
    responses((status = 200, description = "Revoked"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn revoke_service_key(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    let id = p.iam()?;
    s.controller.service_key_revoke(&ctx.req, id).await?;
    Ok(ok(json!({"id": id, "revoked": true})))
}

/// The account administration routes are for people: a missing session is 401 before the path
/// is read (the caller comes first in their handlers), a service key is 401 before the body is.
fn account_body(
    s: &AppState,
    ctx: &Ctx,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<i64, ApiError> {
    s.controller.account_administration_caller(&ctx.req)?;
    let JsonBody(body) = body?;
    Ok(AccountVersionBody::parse(&body)?.expected_version.0)
}

async fn change_account(
    s: AppState,
    p: Params,
    ctx: Ctx,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
    change: AccountChange,
) -> Result<impl IntoResponse, ApiError> {
    let expected = account_body(&s, &ctx, body)?;
    let id = p.iam()?;
    let user = s
        .controller
        .account_change(&ctx.req, id, expected, change)
        .await?;
    Ok(ok(json!({"userId": user.id})))
}

/// Every account, oldest first (occ extension, for the console's Accounts page; people
/// administering the Installation).
#[utoipa::path(get, path = "/api/auth/accounts", operation_id = "listAuthAccounts", tag = "Authentication",
    responses((status = 200, body = Data<Vec<AccountListItemView>>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn list_accounts(State(s): State<AppState>, ctx: Ctx) -> Result<Response, ApiError> {
    let list = s.controller.account_list(&ctx.req).await?;
    let mut response = ok(list
        .iter()
        .map(AccountListItemView::from)
        .collect::<Vec<_>>())
    .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// An account: its principal, version, whether it is disabled and how it signs in (people
/// administering the Installation).
#[utoipa::path(get, path = "/api/auth/accounts/{userId}", operation_id = "getAuthAccount", tag = "Authentication",
    params(("userId" = String, Path)),
    responses((status = 200, body = Data<AccountStateView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_account(
    State(s): State<AppState>,
    ctx: Ctx,
    p: Params,
) -> Result<Response, ApiError> {
    let user = s.controller.account_get(&ctx.req, p.iam()?).await?;
    let mut response = ok(AccountStateView::from(&user)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// Disable an account: it signs in no more and every session it has ends at once.
#[utoipa::path(post, path = "/api/auth/accounts/{userId}/disable", operation_id = "disableAuthAccount", tag = "Authentication",
    params(("userId" = String, Path)), request_body = AccountVersionBody,
    responses((status = 200, description = "Disabled: `{userId}`"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn disable_account(
    State(s): State<AppState>,
    ctx: Ctx,
    p: Params,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    change_account(s, p, ctx, body, AccountChange::Disable).await
}

/// Enable a disabled account: it may sign in again.
#[utoipa::path(post, path = "/api/auth/accounts/{userId}/enable", operation_id = "enableAuthAccount", tag = "Authentication",
    params(("userId" = String, Path)), request_body = AccountVersionBody,
    responses((status = 200, description = "Enabled: `{userId}`"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn enable_account(
    State(s): State<AppState>,
    ctx: Ctx,
    p: Params,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    change_account(s, p, ctx, body, AccountChange::Enable).await
}

/// End every session of an account at once; signing in again works.
#[utoipa::path(post, path = "/api/auth/accounts/{userId}/revoke", operation_id = "revokeAuthAccountSessions", tag = "Authentication",
    params(("userId" = String, Path)), request_body = AccountVersionBody,
    responses((status = 200, description = "Sessions ended: `{userId}`"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn revoke_account_sessions(
    State(s): State<AppState>,
    ctx: Ctx,
    p: Params,
    body: Result<JsonBody<DEFAULT_LIMIT>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    change_account(s, p, ctx, body, AccountChange::RevokeSessions).await
}
