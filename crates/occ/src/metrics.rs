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
