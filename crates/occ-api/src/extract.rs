//! Extractors: the authenticated caller ([`Ctx`]), strict JSON bodies with route limits
//! ([`JsonBody`]), bodyless routes ([`NoBody`]) and validated path parameters ([`Params`]).

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams};
use http::request::Parts;
use http::{HeaderMap, Method, header};
use occ_controller::{Authenticated, Request as CtlRequest};
use occ_core::{DetailCode, Error, ErrorCode, RequestId};
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;

/// Default request body limit.
pub const DEFAULT_LIMIT: usize = 64 * 1024;
/// Agent creation body limit (four 16 KiB files can grow about 6× when JSON-escaped).
pub const AGENT_CREATE_LIMIT: usize = 448 * 1024;
/// Agent provisioning body limit: an Agent's body and a Configuration's together.
pub const PROVISION_LIMIT: usize = AGENT_CREATE_LIMIT + DEFAULT_LIMIT;
/// Workspace file PUT body limit.
pub const WORKSPACE_PUT_LIMIT: usize = 48 * 1024;
/// Chat body limit: a 16 KiB message can grow about 3× when JSON-escaped.
pub const CHAT_LIMIT: usize = 48 * 1024;
/// Secret create and update body limit: a value of the documented maximum (65 536 bytes) can
/// grow 6× when JSON-escaped (`\u0001` per byte), plus room for the name and the object around it.
/// The reference's 64 KiB default would refuse values it documents as valid.
pub const SECRET_WRITE_LIMIT: usize = 6 * occ_core::inputs::SECRET_VALUE_MAX_BYTES + DEFAULT_LIMIT;

/// The request id of this request (set by the framing middleware).
pub fn request_id() -> RequestId {
    crate::envelope::REQUEST_ID
        .try_with(Clone::clone)
        .unwrap_or_else(|_| RequestId::generate())
}

/// All values of one cookie name in the `Cookie` headers.
pub fn cookie_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .collect()
}

fn is_safe_method(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The CSRF rule for cookie requests: `Origin` must equal the public origin exactly and
/// `Sec-Fetch-Site` must be absent or `same-origin`.
pub fn check_csrf(headers: &HeaderMap, public_origin: &str) -> Result<(), Error> {
    let origin_ok =
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) == Some(public_origin);
    let site_ok = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|s| s == "same-origin");
    if origin_ok && site_ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorCode::Forbidden,
            "A trusted browser Origin is required for this request",
        ))
    }
}

/// The authenticated caller of a protected route.
pub struct Ctx {
    /// The request for the controller.
    pub req: CtlRequest,
    /// Who authenticated, with the session for session callers.
    pub auth: Authenticated,
}

impl FromRequestParts<AppState> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let headers = &parts.headers;
        // A Bearer credential is always refused, even next to a valid cookie.
        if headers.contains_key(header::AUTHORIZATION) {
            return Err(Error::unauthenticated().into());
        }
        let auth = if let Some(key) = headers.get("x-api-key") {
            // A present key takes precedence and never falls back to the cookie.
            let key = key
                .to_str()
                .map_err(|_| ApiError(Error::unauthenticated()))?;
            state.controller.authenticate_key(key).await?
        } else {
            let cookies = cookie_values(headers, state.settings.cookie_name());
            let [token] = cookies.as_slice() else {
                return Err(Error::unauthenticated().into());
            };
            let auth = state
                .controller
                .authenticate_session(token)
                .await?
                .ok_or_else(Error::unauthenticated)?;
            if !is_safe_method(&parts.method) {
                check_csrf(headers, &state.settings.public_origin)?;
            }
            auth
        };
        Ok(Ctx {
            req: auth.request(request_id()),
            auth,
        })
    }
}

/// The body must be `application/json`, with no parameter but `charset=utf-8` (any case, quoted
/// or not): another charset or parameter is 415, two `Content-Type` headers are ambiguous (400).
fn check_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let unsupported = || {
        ApiError(Error::new(
            ErrorCode::UnsupportedMediaType,
            "The request body must be application/json",
        ))
    };
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.contains_key(header::CONTENT_TYPE) {
            true => Err(ApiError(Error::invalid_request(
                "The request has more than one Content-Type header",
            ))),
            false => Err(unsupported()),
        };
    };
    let mut parts = value.to_str().map_err(|_| unsupported())?.split(';');
    let mime_ok = parts
        .next()
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    let parameters_ok = parts.map(str::trim).all(|parameter| {
        parameter.is_empty()
            || parameter.split_once('=').is_some_and(|(name, value)| {
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                name.trim().eq_ignore_ascii_case("charset") && value.eq_ignore_ascii_case("utf-8")
            })
    });
    if mime_ok && parameters_ok {
        Ok(())
    } else {
        Err(unsupported())
    }
}

async fn read_limited(req: axum::extract::Request, limit: usize) -> Result<Bytes, ApiError> {
    if let Some(len) = req.headers().get(header::CONTENT_LENGTH) {
        let len = len
            .to_str()
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError(Error::invalid_request(
                    "The Content-Length header is invalid",
                ))
            })?;
        if len > limit as u64 {
            return Err(too_large(limit));
        }
    }
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|e| {
            // Only the limit is a 413; a body that cannot be read (malformed chunked framing, a
            // connection closed mid-body) is the client's malformed request.
            if e.into_inner().is::<http_body_util::LengthLimitError>() {
                too_large(limit)
            } else {
                ApiError(Error::invalid_request("The request body could not be read"))
            }
        })
}

fn too_large(limit: usize) -> ApiError {
    ApiError(Error::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "The request body is larger than this route accepts ({} KiB)",
            limit / 1024
        ),
    ))
}

/// A JSON request body of at most `LIMIT` bytes, parsed (duplicate keys refused) but not yet
/// validated: the route's body declaration in [`crate::inputs`] does that.
pub struct JsonBody<const LIMIT: usize>(pub Value);

/// The body of a route for which the reference documents no 415: a body that is not JSON is an
/// invalid request (400) there, every other refusal as [`JsonBody`] gives it.
pub fn json_body_without_415<const LIMIT: usize>(
    body: Result<JsonBody<LIMIT>, ApiError>,
) -> Result<Value, ApiError> {
    match body {
        Ok(JsonBody(value)) => Ok(value),
        Err(e) if e.0.code() == occ_core::ErrorCode::UnsupportedMediaType => {
            Err(ApiError(occ_core::Error::invalid_request(e.0.message())))
        }
        Err(e) => Err(e),
    }
}

impl<const LIMIT: usize> FromRequest<AppState> for JsonBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, _: &AppState) -> Result<Self, ApiError> {
        // the size is checked before the media type, as the reference does
        let media_type = check_json_content_type(req.headers());
        let bytes = read_limited(req, LIMIT).await?;
        media_type?;
        if bytes.is_empty() {
            return Err(ApiError(Error::invalid_request(
                "The request body must be a JSON document",
            )));
        }
        Ok(JsonBody(crate::strict_json::parse(&bytes)?))
    }
}

/// A route that takes no request body: any body is a 400.
pub struct NoBody;

impl FromRequest<AppState> for NoBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, _: &AppState) -> Result<Self, ApiError> {
        // Any body is refused with 400, whatever its size: these routes document no 413.
        match read_limited(req, DEFAULT_LIMIT).await {
            Ok(bytes) if bytes.is_empty() => Ok(NoBody),
            _ => Err(ApiError(Error::invalid_request(
                "This route takes no request body",
            ))),
        }
    }
}

/// Path parameters, every one validated when extracted — before authentication — so a malformed
/// id is a 400 naming the parameter whatever else is wrong.
#[derive(Debug, Default)]
pub struct Params {
    ns: Option<occ_core::NamespaceId>,
    agent: Option<occ_core::AgentId>,
    configuration: Option<occ_core::ConfigurationId>,
    secret: Option<occ_core::SecretId>,
    preset: Option<occ_core::PresetId>,
    credential_source: Option<occ_core::CredentialSourceId>,
    work: Option<occ_core::ProvisioningId>,
    service_account: Option<occ_core::ServiceAccountId>,
    revision: Option<occ_core::RevisionId>,
    iam: Option<occ_core::IamId>,
    file: Option<occ_core::resource::WorkspaceFileName>,
}

fn bad_id(name: &str, prefix: &str) -> ApiError {
    ApiError(Error::invalid_field(
        format!("/{name}"),
        DetailCode::InvalidFormat,
        format!("The path parameter {name} must be an id of the form {prefix}_<uuid>"),
    ))
}

fn parse_param<T: FromStr>(raw: &str, name: &str, prefix: &str) -> Result<Option<T>, ApiError> {
    raw.parse().map(Some).map_err(|_| bad_id(name, prefix))
}

impl FromRequestParts<AppState> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError(Error::invalid_request("The request path is invalid")))?;
        let mut params = Params::default();
        for (name, value) in raw.iter() {
            match name {
                "namespaceId" => params.ns = parse_param(value, name, "ns")?,
                "agentId" => params.agent = parse_param(value, name, "agt")?,
                "configurationId" => params.configuration = parse_param(value, name, "cfg")?,
                "secretId" => params.secret = parse_param(value, name, "sec")?,
                "presetId" => params.preset = parse_param(value, name, "pre")?,
                "credentialSourceId" => {
                    params.credential_source = parse_param(value, name, "cs")?;
                }
                "workId" => params.work = parse_param(value, name, "prv")?,
                "serviceAccountId" => params.service_account = parse_param(value, name, "sa")?,
                "revisionId" | "deploymentId" => params.revision = parse_param(value, name, "rev")?,
                "name" => {
                    params.file = Some(occ_core::resource::WorkspaceFileName::parse(value).ok_or_else(|| {
                        ApiError(Error::invalid_field(
                            "/name",
                            DetailCode::InvalidValue,
                            "The path parameter name must be AGENTS.md, SOUL.md, IDENTITY.md or USER.md",
                        ))
                    })?);
                }
                "roleId" | "bindingId" | "keyId" | "servicePrincipalId" | "userId" => {
                    params.iam = Some(value.parse().map_err(|_| {
                        let code = if value.chars().count() > 200 { DetailCode::TooLong } else { DetailCode::InvalidFormat };
                        ApiError(Error::invalid_field(
                            format!("/{name}"),
                            code,
                            format!("The path parameter {name} must have 1 to 200 characters without whitespace"),
                        ))
                    })?);
                }
                _ => {
                    return Err(ApiError(Error::internal(format!(
                        "unexpected path parameter {name}"
                    ))));
                }
            }
        }
        Ok(params)
    }
}

fn missing(name: &str) -> ApiError {
    ApiError(Error::internal(format!("route has no parameter {name}")))
}

impl Params {
    /// `{namespaceId}`.
    pub fn ns(&self) -> Result<&occ_core::NamespaceId, ApiError> {
        self.ns.as_ref().ok_or_else(|| missing("namespaceId"))
    }
    /// `{agentId}`.
    pub fn agent(&self) -> Result<&occ_core::AgentId, ApiError> {
        self.agent.as_ref().ok_or_else(|| missing("agentId"))
    }
    /// `{name}`: one of the four workspace files.
    pub fn file(&self) -> Result<occ_core::resource::WorkspaceFileName, ApiError> {
        self.file.ok_or_else(|| missing("name"))
    }
    /// `{configurationId}`.
    pub fn configuration(&self) -> Result<&occ_core::ConfigurationId, ApiError> {
        self.configuration
            .as_ref()
            .ok_or_else(|| missing("configurationId"))
    }
    /// `{secretId}`.
    pub fn secret(&self) -> Result<&occ_core::SecretId, ApiError> {
        self.secret.as_ref().ok_or_else(|| missing("secretId"))
    }
    /// `{credentialSourceId}`.
    pub fn credential_source(&self) -> Result<&occ_core::CredentialSourceId, ApiError> {
        self.credential_source
            .as_ref()
            .ok_or_else(|| missing("credentialSourceId"))
    }

    /// `{presetId}`.
    pub fn preset(&self) -> Result<&occ_core::PresetId, ApiError> {
        self.preset.as_ref().ok_or_else(|| missing("presetId"))
    }
    /// `{workId}` (a provisioning job).
    pub fn work(&self) -> Result<&occ_core::ProvisioningId, ApiError> {
        self.work.as_ref().ok_or_else(|| missing("workId"))
    }
    /// `{serviceAccountId}`.
    pub fn service_account(&self) -> Result<&occ_core::ServiceAccountId, ApiError> {
        self.service_account
            .as_ref()
            .ok_or_else(|| missing("serviceAccountId"))
    }
    /// `{revisionId}` or `{deploymentId}`.
    pub fn revision(&self) -> Result<&occ_core::RevisionId, ApiError> {
        self.revision.as_ref().ok_or_else(|| missing("revisionId"))
    }
    /// `{roleId}`, `{bindingId}`, `{keyId}`, `{servicePrincipalId}` or `{userId}`.
    pub fn iam(&self) -> Result<&occ_core::IamId, ApiError> {
        self.iam.as_ref().ok_or_else(|| missing("roleId"))
    }
}
