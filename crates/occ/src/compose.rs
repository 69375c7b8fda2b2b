//! Composition: settings → Drivers → Controller → API state.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use occ_api::{ApiSettings, AppState};
use occ_controller::{BackendConfig, Controller, ControllerSettings};
use occ_drivers::compute::ComputeSelection;
use occ_drivers::configuration::{ConfigurationDriver, FilesystemConfigurationDriver};
use occ_drivers::secret::{LocalSecretDriver, SecretDriver};
use occ_store::{Store, StoreOptions};

use crate::settings::ServerSettings;

/// The pinned OpenClaw release.
pub const OPENCLAW_VERSION: &str = "2026.9.6";

/// Opens the store and checks its schema is current.
pub async fn open_store(url: &str, max_connections: u32) -> anyhow::Result<Store> {
    crate::settings::prepare_database_url(url).context("OCC_DATABASE_URL")?;
    let store = Store::connect(
        url,
        &StoreOptions {
            max_connections,
            ..Default::default()
        },
    )
    .await
    .context("cannot open the database named by OCC_DATABASE_URL")?;
    store.check_schema().await.context("the database schema")?;
    Ok(store)
}

/// Builds the application from validated settings.
pub fn controller(settings: &ServerSettings, store: Store) -> anyhow::Result<Controller> {
    let configurations = ConfigurationDriver::Filesystem(
        FilesystemConfigurationDriver::new(settings.configuration_root.clone())
            .context("OCC_CONFIGURATION_ROOT")?,
    );
    let secrets = SecretDriver::Local(
        LocalSecretDriver::open(settings.secret_root.clone(), &settings.secret_key_file)
            .context("OCC_SECRET_ROOT / OCC_SECRET_KEY_FILE")?,
    );
    let controller_settings = ControllerSettings {
        harness_id: "openclaw".into(),
        harness_version: OPENCLAW_VERSION.into(),
        session_ttl: Duration::from_secs(settings.session_ttl_seconds),
        auth_secret: settings.auth_secret.as_bytes().to_vec(),
        backends: settings
            .backends
            .iter()
            .map(|b| BackendConfig {
                id: b.id.clone(),
                kind: b.kind.clone(),
            })
            .collect(),
        workspace_defaults_id: None,
    };
    Ok(Controller::new(
        store,
        configurations,
        secrets,
        ComputeSelection::process(),
        controller_settings,
    ))
}

/// The router state.
pub fn app_state(settings: &ServerSettings, controller: Controller) -> AppState {
    AppState {
        controller: Arc::new(controller),
        settings: Arc::new(ApiSettings {
            public_origin: settings.public_origin.clone(),
            secure_cookies: settings.secure_cookies(),
        }),
    }
}
