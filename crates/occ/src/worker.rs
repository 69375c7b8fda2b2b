//! `occ worker`: the controller worker with the selected Compute Driver.

use std::sync::Arc;

use anyhow::Context as _;
use occ_controller::metrics::{Metrics, Service};
use occ_controller::worker::Worker;

use crate::compose;
use crate::serve::shutdown_signal;
use crate::settings::{WorkerProcessSettings, process_env};

/// Runs the worker until SIGINT/SIGTERM: no new work is claimed after the signal and in-flight
/// items finish.
pub async fn run() -> anyhow::Result<()> {
    let settings = WorkerProcessSettings::load(&process_env)?;
    // Containment's prerequisites before anything else.
    compose::process_sandbox(&settings.platform)?;
    let store = compose::open_store(&settings.platform.database_url, 10).await?;
    let mut tx = store.begin_read().await.context("the database")?;
    let installation = tx.installation_get().await.context("the Installation")?;
    drop(tx);
    if installation.is_none() {
        anyhow::bail!("the database is not bootstrapped; run `occ bootstrap` first");
    }
    let controller = Arc::new(
        compose::controller(
            &settings.platform,
            compose::SessionSettings::none(),
            store.clone(),
            None,
        )
        .await?,
    );
    let compute = compose::compute(&settings.platform, compose::ComputeRole::Workloads).await?;
    let metrics = Arc::new(Metrics::new(Service::Worker));
    let hooks = compose::namespace_hooks(&settings.platform).await?;
    let worker = Arc::new(
        Worker::new(controller, compute, settings.worker.clone())
            .with_metrics(metrics.clone())
            .with_namespace_hooks(hooks),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let metrics_task = settings.platform.metrics.map(|addr| {
        tokio::spawn(crate::metrics::serve(
            addr,
            metrics.clone(),
            Some(store.clone()),
            stop_rx.clone(),
        ))
    });
    let running = tokio::spawn(worker.run(stop_rx));
    shutdown_signal().await;
    tracing::info!("shutting down: no new work is claimed; in-flight work finishes");
    let _ = stop_tx.send(true);
    running.await.context("worker")??;
    if let Some(task) = metrics_task {
        task.await.context("metrics listener")??;
    }
    store.close().await;
    Ok(())
}
