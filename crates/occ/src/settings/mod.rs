//! Settings: a YAML file (`OCC_CONFIG_PATH`) overlaid by `OCC_*` environment variables. The only
//! place occ reads its environment for configuration. Invalid or contradictory settings fail at
//! startup with a message naming the setting.
//!
//! [`PlatformSettings`] are shared by every process (database, Drivers, Compute, metrics);
//! [`ServerSettings`] add the API's listener and authentication, [`WorkerProcessSettings`] the
//! worker's tuning.

mod kubernetes;
mod platform;
mod server;
mod source;
mod ssh;
mod worker;

#[cfg(test)]
mod tests;

pub use kubernetes::KubernetesComputeSettings;
pub use platform::{
    ComputeDriverSettings, ComputeSettings, ConfigurationStore, ModelDiscoverySettings,
    PlatformSettings, ProcessIsolation, SecretStore, codex_base_url, dev_metrics_address,
    prepare_database_url, process_isolation,
};
pub use server::ServerSettings;
pub(crate) use source::port_range;
pub use source::{FileSettings, origin_of, process_env, program_path};
pub use ssh::SshComputeSettings;
pub use worker::WorkerProcessSettings;
