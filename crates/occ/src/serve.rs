//! `occ serve`: the HTTP API.

use anyhow::Context as _;
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
    let store = compose::open_store(&settings.database_url, 20).await?;
    let controller = compose::controller(&settings, store.clone())?;
    let app = occ_api::router(compose::app_state(&settings, controller));
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
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
    store.close().await;
    tracing::info!("occ API stopped");
    Ok(())
}
