//! `occ migrate`.

use anyhow::Context as _;
use clap::Args;
use occ_store::{Store, StoreOptions};

/// Arguments of `occ migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Database to migrate: `postgres://…` or `sqlite://PATH` (the file is created if missing).
    #[arg(long, env = "OCC_DATABASE_URL", value_name = "URL")]
    database_url: String,
}

/// Applies pending migrations and reports what it did.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    crate::settings::prepare_database_url(&args.database_url)
        .context("--database-url / OCC_DATABASE_URL")?;
    let store = Store::connect(
        &args.database_url,
        &StoreOptions {
            max_connections: 2,
            ..Default::default()
        },
    )
    .await
    .context("cannot open the database named by --database-url")?;
    let report = store.migrate().await.context("migration failed")?;
    store.close().await;
    if report.applied.is_empty() {
        tracing::info!(
            schema_version = report.current,
            backend = store.backend().name(),
            "schema is up to date"
        );
    } else {
        tracing::info!(
            applied = ?report.applied,
            schema_version = report.current,
            backend = store.backend().name(),
            "migrations applied"
        );
    }
    Ok(())
}
