//! occ Drivers. Each capability is a closed enum over its implementations, built from settings
//! by the `occ` binary; callers see domain verbs only.
//!
//! - [`configuration::ConfigurationDriver`]: where native `openclaw.json` documents live
//!   (filesystem for development; Kubernetes ConfigMaps later).
//! - [`secret::SecretDriver`]: where Secret values live (local, encrypted at rest).
//! - [`service_account::AccountDriver`]: a Backend that makes provider accounts for
//!   ServiceAccounts and issues their credentials (ChatGPT's workspace Admin API).
//! - [`model_catalog::ModelCatalog`]: which models a provider offers to a key.
//! - [`compute::ComputeSelection`]: which Compute Driver this installation uses and what it
//!   supports, as admission needs to know it.

pub mod compute;
pub mod configuration;
pub mod error;
pub mod kubernetes;
pub mod model_catalog;
pub mod secret;
pub mod service_account;

pub use error::DriverError;

/// An HTTP client for a Driver's calls to an outside service: TLS through ring (as everywhere in
/// occ; the process may already have installed it), no redirects, each call bounded by
/// `timeout`.
pub(crate) fn http_client(timeout: std::time::Duration) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// A Driver's identity, as pinned into revisions and recorded in audit evidence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DriverIdentity {
    /// Instance id, e.g. `configuration-filesystem`.
    pub id: String,
    /// Implementation, e.g. `filesystem`.
    pub implementation: String,
}
