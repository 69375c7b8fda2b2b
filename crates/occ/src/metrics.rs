//! The private metrics listener: `GET /metrics` only (other paths 404, other methods 405),
//! OpenMetrics text, `Cache-Control: no-store`, no authentication — bind it to a private
//! address.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use occ_controller::metrics::Metrics;
use occ_store::Store;
use tokio::sync::watch;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn scrape(metrics: Arc<Metrics>, store: Option<Store>) -> Response {
    let mut response = match metrics.render(store.as_ref()).await {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "metrics scrape failed");
            (StatusCode::SERVICE_UNAVAILABLE, "metrics unavailable\n").into_response()
        }
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The metrics router (the worker passes its store for the gauges read at scrape time).
pub fn router(metrics: Arc<Metrics>, store: Option<Store>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || scrape(metrics.clone(), store.clone())),
        )
        .fallback(|| async { StatusCode::NOT_FOUND })
}

/// Serves until `stop` turns true.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    store: Option<Store>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("OCC_METRICS_HOST/OCC_METRICS_PORT: cannot listen on {addr}"))?;
    tracing::info!(address = %addr, "metrics listening");
    axum::serve(listener, router(metrics, store))
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .context("serving metrics")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use occ_controller::metrics::Service;
    use tower::ServiceExt as _;

    async fn call(method: &str, path: &str) -> (StatusCode, String, String) {
        let metrics = Arc::new(Metrics::new(Service::Api));
        metrics.record_http(
            "/installation",
            "GET",
            200,
            std::time::Duration::from_millis(3),
        );
        let response = router(metrics, None)
            .oneshot(
                axum::http::Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn only_get_metrics_is_served() {
        let (status, content_type, body) = call("GET", "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, CONTENT_TYPE);
        assert!(body.contains("occ_http_requests_total{"), "{body}");
        assert!(body.contains("service=\"api\""), "{body}");
        assert!(body.contains("route=\"/installation\""), "{body}");
        assert!(body.contains("status_class=\"2xx\""), "{body}");
        assert!(
            body.contains("occ_http_request_duration_seconds_bucket{"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert_eq!(call("GET", "/other").await.0, StatusCode::NOT_FOUND);
        assert_eq!(
            call("POST", "/metrics").await.0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
