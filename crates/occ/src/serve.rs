//! `occ serve`: the HTTP API.

use std::sync::Arc;

use anyhow::Context as _;
use occ_controller::metrics::{Metrics, Service};
use tokio::net::TcpListener;

use crate::compose;
use crate::settings::{ServerSettings, process_env};

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// Runs the API until a shutdown signal, then drains in-flight requests.
pub async fn run() -> anyhow::Result<()> {
    let settings = ServerSettings::load(&process_env)?;
    let store = compose::open_store(&settings.platform.database_url, 20).await?;
    let controller = Arc::new(
        compose::controller(
            &settings.platform,
            compose::SessionSettings::of(&settings)?,
            store.clone(),
            Some(compose::compute(&settings.platform, compose::ComputeRole::Access).await?),
        )
        .await?,
    );
    let metrics = settings
        .platform
        .metrics
        .map(|_| Arc::new(Metrics::new(Service::Api)));
    let app = occ_api::router(compose::app_state(&settings, controller, metrics.clone()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let metrics_task = match (settings.platform.metrics, metrics) {
        (Some(addr), Some(m)) => Some(tokio::spawn(crate::metrics::serve(
            addr,
            m,
            None,
            stop_rx.clone(),
        ))),
        _ => None,
    };
    let listener = TcpListener::bind((settings.host, settings.port))
        .await
        .with_context(|| {
            format!(
                "OCC_HOST/OCC_PORT: cannot listen on {}:{}",
                settings.host, settings.port
            )
        })?;
    let addr = listener.local_addr()?;
    tracing::info!(address = %addr, backend = store.backend().name(), "occ API listening on http://{addr}");
    axum::serve(without_nagle(listener), app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
    let _ = stop_tx.send(true);
    if let Some(task) = metrics_task {
        task.await.context("metrics listener")??;
    }
    store.close().await;
    tracing::info!("occ API stopped");
    Ok(())
}

/// The API's listener with Nagle's algorithm off on every connection: responses that go out in
/// several writes (streamed chat turns, proxied Control UI assets) would otherwise wait for the
/// peer's delayed ACK between them.
pub(crate) fn without_nagle(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
    axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set");
        }
    })
}
