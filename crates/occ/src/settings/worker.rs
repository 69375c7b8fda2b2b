//! The worker's settings: the shared ones and its tuning (`OCC_WORKER_*`).

use std::time::Duration;

use anyhow::bail;
use occ_controller::worker::WorkerSettings;

use super::platform::PlatformSettings;
use super::source::{Env, load_file, positive, positive_as};

/// Validated settings of the worker.
#[derive(Debug, Clone)]
pub struct WorkerProcessSettings {
    /// Shared settings.
    pub platform: PlatformSettings,
    /// Worker tuning.
    pub worker: WorkerSettings,
}

impl WorkerProcessSettings {
    /// Loads and validates the worker settings.
    pub fn load(env: Env<'_>) -> anyhow::Result<Self> {
        let mut file = load_file(env)?;
        let platform = PlatformSettings::load(env, &mut file)?;
        let ms = |name: &str, from_file: Option<u64>, default: u64| {
            positive(env, name, from_file, default).map(Duration::from_millis)
        };
        let worker = WorkerSettings {
            poll_interval: ms(
                "OCC_WORKER_POLL_INTERVAL_MS",
                file.worker_poll_interval_ms,
                250,
            )?,
            lease: ms(
                "OCC_WORKER_LEASE_DURATION_MS",
                file.worker_lease_duration_ms,
                5000,
            )?,
            max_attempts: positive_as(env, "OCC_WORKER_MAX_ATTEMPTS", file.worker_max_attempts, 5)?,
            convergence_timeout: ms(
                "OCC_WORKER_CONVERGENCE_TIMEOUT_MS",
                file.worker_convergence_timeout_ms,
                900_000,
            )?,
            concurrency: positive_as(env, "OCC_WORKER_CONCURRENCY", file.worker_concurrency, 4)?,
            recover_batch: 100,
        };
        if worker.lease < Duration::from_millis(300) {
            bail!("OCC_WORKER_LEASE_DURATION_MS must be at least 300");
        }
        Ok(Self { platform, worker })
    }
}
