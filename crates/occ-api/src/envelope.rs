//! Success envelopes `{data, meta:{requestId}}`, the per-request id, and the headers every API
//! response carries.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use occ_core::RequestId;
use serde::Serialize;
use serde_json::json;

tokio::task_local! {
    /// The id of the request being served (set by the outermost middleware).
    pub static REQUEST_ID: RequestId;
    /// Whether errors use the reference's auth-route shape (set by the outermost middleware).
    pub static AUTH_ROUTE_ERRORS: bool;
}

/// The current request id, or a fresh one outside a request scope.
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(|id| id.to_string())
        .unwrap_or_else(|_| RequestId::generate().to_string())
}

/// A JSON response with the API's content type.
pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

/// A success response with the envelope.
pub struct Envelope<T> {
    status: StatusCode,
    data: T,
}

/// 200 with data.
pub fn ok<T: Serialize>(data: T) -> Envelope<T> {
    Envelope {
        status: StatusCode::OK,
        data,
    }
}

/// 201 with data.
pub fn created<T: Serialize>(data: T) -> Envelope<T> {
    Envelope {
        status: StatusCode::CREATED,
        data,
    }
}

/// 202 with data.
pub fn accepted<T: Serialize>(data: T) -> Envelope<T> {
    Envelope {
        status: StatusCode::ACCEPTED,
        data,
    }
}

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        let data = serde_json::to_value(&self.data).unwrap_or(serde_json::Value::Null);
        json_response(
            self.status,
            &json!({"data": data, "meta": {"requestId": current_request_id()}}),
        )
    }
}

/// 204 without a body.
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> Response {
        StatusCode::NO_CONTENT.into_response()
    }
}
