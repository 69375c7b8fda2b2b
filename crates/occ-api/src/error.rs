//! The one place an error becomes an HTTP response: status from the API code, the reference
//! envelope `{error:{code, message, details?}, meta:{requestId}}`, and `Retry-After` when set.
//! Internal context is logged here and never sent.
//!
//! The reference serves `/api/auth/*` from its auth library, whose errors are `{code, message}`
//! only and which answers a missing, foreign or oversized body with 400: under `/api/auth/`
//! occ renders errors the same way (the message still names the offending field).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use occ_core::{Error, ErrorCode};
use serde_json::json;

use crate::envelope::{AUTH_ROUTE_ERRORS, current_request_id, json_response};

/// An error answered by the API.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let auth_route = AUTH_ROUTE_ERRORS.try_with(|v| *v).unwrap_or(false);
        // An oversized body is refused without reading it: the connection cannot carry another
        // request, so say so rather than let the client reuse it and fail its next request.
        let body_unread = self.0.code() == ErrorCode::PayloadTooLarge;
        let err = match self.0.code() {
            ErrorCode::PayloadTooLarge | ErrorCode::UnsupportedMediaType if auth_route => {
                Error::invalid_request(self.0.message())
            }
            _ => self.0,
        };
        let status = StatusCode::from_u16(err.code().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::warn!(
                code = err.code().as_str(),
                internal = err.internal_context().unwrap_or(""),
                "request failed"
            );
        }
        let mut error = json!({"code": err.code().as_str(), "message": err.message()});
        if !err.details().is_empty() && !auth_route {
            error["details"] = serde_json::to_value(err.details()).unwrap_or_default();
        }
        let body = json!({"error": error, "meta": {"requestId": current_request_id()}});
        let mut response = json_response(status, &body);
        if let Some(secs) = err.retry_after_secs()
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        if body_unread {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Shorthand for the error of an unknown path.
pub fn not_found() -> ApiError {
    ApiError(Error::not_found())
}

/// 405 for a known path with the wrong method.
pub fn method_not_allowed() -> ApiError {
    ApiError(Error::new(
        ErrorCode::MethodNotAllowed,
        "The method is not allowed on this path",
    ))
}
