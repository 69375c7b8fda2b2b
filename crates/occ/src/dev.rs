//! `occ dev`: the API and the worker in one process with embedded defaults — SQLite under the
//! data directory (or `--database-url`), the filesystem Configuration Driver, the local Secret
//! Driver and the process Compute Driver running real OpenClaw gateways.
//!
//! First run: installs the pinned runtime, migrates, generates the session secret and the
//! administrator password (0600 files in the data directory, unless `OCC_DEV_EMAIL` /
//! `OCC_DEV_PASSWORD` are set), bootstraps and writes the admin service key to
//! `<data-dir>/admin-service-key.json`. Later runs resume: nothing is bootstrapped twice and
//! gateways still running from the previous run are re-adopted by the worker. The web console
//! is at `/console/`; `OCC_PROCESS_PORT_RANGE` moves the gateways' ports (default 28000-28999).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "occ dev talks to the developer on the terminal"
)]

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use clap::Args;
use occ_controller::bootstrap::{BootstrapInput, BootstrapOutcome, bootstrap};
use occ_controller::metrics::{Metrics, Service};
use occ_controller::worker::{Worker, WorkerSettings};
use occ_core::Name;
use occ_host::runtime::{self, OpenclawRuntime};
use occ_store::{Store, StoreOptions};

use crate::bootstrap::FileKeySink;
use crate::compose;
use crate::serve::shutdown_signal;
use crate::settings::{
    ComputeDriverSettings, ComputeSettings, ConfigurationStore, PlatformSettings, SecretStore,
    ServerSettings, process_env,
};

/// Arguments of `occ dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Where occ keeps its state, Driver data, the runtime and the generated credentials.
    #[arg(long, env = "OCC_DATA_DIR", default_value = ".occ", value_name = "DIR")]
    data_dir: PathBuf,
    /// API port on 127.0.0.1.
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Use PostgreSQL (`postgres://…`) instead of the embedded SQLite file.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Where the OpenClaw runtime is (installed there on first use) [default: <data-dir>/runtime].
    #[arg(long, env = "OCC_OPENCLAW_RUNTIME", value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
}

const DEFAULT_ADMIN_EMAIL: &str = "admin@openclaw.local";

/// A secret kept in a 0600 file of the data directory, generated on first use.
fn persistent_secret(path: &Path, generate: impl FnOnce() -> String) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim_end().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let value = generate();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("creating {}", path.display()))?;
            file.write_all(format!("{value}\n").as_bytes())?;
            file.sync_all()?;
            Ok(value)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn random_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    (0..24)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Runs `occ dev` until Ctrl-C.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let data_dir = std::path::absolute(&args.data_dir).context("--data-dir")?;
    // Settings first: a mistake is reported before a minute of runtime installation.
    let metrics_address =
        crate::settings::dev_metrics_address(&process_env).context("metrics settings")?;
    let isolation = crate::settings::process_isolation(
        &process_env,
        &mut crate::settings::FileSettings::default(),
    )?;
    // Containment's prerequisites too (the check runs an empty sandbox).
    compose::sandbox_for(isolation)?;
    occ_host::fsutil::ensure_private_dir(&data_dir)
        .with_context(|| format!("--data-dir {}", data_dir.display()))?;

    // 1. The runtime gateways run on.
    let runtime_root = args
        .runtime_dir
        .clone()
        .unwrap_or_else(|| data_dir.join("runtime"));
    let path = crate::settings::program_path();
    if OpenclawRuntime::locate(&runtime_root, &path).is_err() {
        eprintln!(
            "Installing the OpenClaw runtime into {} (first run; about a minute)…",
            runtime_root.display()
        );
        let started = std::time::Instant::now();
        let progress =
            move |line: &str| eprintln!("  [{:>3}s] {line}", started.elapsed().as_secs());
        runtime::install(&runtime_root, &path, &progress)
            .await
            .with_context(|| {
                format!(
                    "installing the OpenClaw runtime into {}",
                    runtime_root.display()
                )
            })?;
    }

    // 2. State.
    let database_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("occ.db").display()));
    crate::settings::prepare_database_url(&database_url).context("--database-url")?;
    let store = Store::connect(
        &database_url,
        &StoreOptions {
            max_connections: 10,
            ..Default::default()
        },
    )
    .await
    .context("cannot open the database")?;
    store.migrate().await.context("migrating the database")?;

    // 3. Credentials and bootstrap.
    let auth_secret = persistent_secret(&data_dir.join("auth-secret"), || {
        hex::encode(rand::random::<[u8; 32]>())
    })?;
    let admin_email = process_env("OCC_DEV_EMAIL").unwrap_or_else(|| DEFAULT_ADMIN_EMAIL.into());
    let (admin_password, password_file) = match process_env("OCC_DEV_PASSWORD") {
        Some(p) => (p, None),
        None => {
            let file = data_dir.join("admin-password");
            (persistent_secret(&file, random_password)?, Some(file))
        }
    };
    let key_file = data_dir.join("admin-service-key.json");
    let installation = {
        let mut tx = store.begin_read().await?;
        tx.installation_get().await?
    };
    if installation.is_none() {
        let input = BootstrapInput {
            installation_name: Name::parse("OpenClaw Local Development")
                .map_err(|e| anyhow!("{e}"))?,
            admin_email: admin_email.clone(),
            admin_password: admin_password.clone(),
        };
        if key_file.exists() {
            return Err(anyhow!(
                "{} exists but the database is not bootstrapped; move the old key file away",
                key_file.display()
            ));
        }
        let sink = FileKeySink::new(&key_file)?;
        if let BootstrapOutcome::Created { installation, .. } = bootstrap(&store, &input, &sink)
            .await
            .map_err(|e| anyhow!("{e}"))?
        {
            tracing::info!(installation_id = %installation.id, "bootstrapped");
        }
    }

    // 4. The application: one controller for the API and the worker.
    let port_range = match process_env("OCC_PROCESS_PORT_RANGE") {
        Some(text) => crate::settings::port_range(&text)
            .map_err(|e| anyhow!("OCC_PROCESS_PORT_RANGE: {e}"))?,
        None => 28000..=28999,
    };
    let platform = PlatformSettings {
        database_url: database_url.clone(),
        configurations: ConfigurationStore::Filesystem {
            root: data_dir.join("configurations"),
        },
        secrets: SecretStore::Local {
            root: data_dir.join("secrets"),
            key_file: data_dir.join("secret.key"),
        },
        kubernetes: None,
        backends: Vec::new(),
        compute: ComputeSettings {
            root: data_dir.join("compute"),
            runtime_root,
            port_range,
            maintenance_interval: Duration::from_secs(15),
            driver: ComputeDriverSettings::Process,
            codex_base_url: crate::settings::codex_base_url(process_env("OCC_CODEX_BASE_URL"))?,
            isolation,
        },
        metrics: metrics_address,
        model_discovery: crate::settings::ModelDiscoverySettings::from_env(&process_env)?,
    };
    let server = ServerSettings {
        platform: platform.clone(),
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: args.port,
        public_origin: format!("http://127.0.0.1:{}", args.port),
        auth_secret,
        session_ttl_seconds: 12 * 3600,
        // Agents' Control UIs at `agent-<opaque>.localhost:<port>`, which browsers resolve to
        // loopback; an empty value turns them off.
        native_admin_domain: Some(
            process_env("OCC_AGENT_NATIVE_ADMIN_DOMAIN").unwrap_or_else(|| "localhost".into()),
        )
        .filter(|d| !d.is_empty()),
    };
    let compute = compose::compute(&platform, compose::ComputeRole::Workloads).await?;
    let controller = Arc::new(
        compose::controller(
            &platform,
            compose::SessionSettings::of(&server)?,
            store.clone(),
            Some(compute.clone()),
        )
        .await?,
    );
    // One registry for both sides; each family keeps the service label of the side recording it.
    let metrics = Arc::new(Metrics::new(Service::Dev));
    let worker = Arc::new(
        Worker::new(controller.clone(), compute, WorkerSettings::default())
            .with_metrics(metrics.clone()),
    );
    let app = occ_api::router(compose::app_state(
        &server,
        controller,
        metrics_address.map(|_| metrics.clone()),
    ));
    let listener = tokio::net::TcpListener::bind((server.host, server.port))
        .await
        .with_context(|| format!("--port: cannot listen on 127.0.0.1:{}", args.port))?;

    let url = format!("http://127.0.0.1:{}", args.port);
    let data = data_dir.display();
    println!();
    println!("occ dev is running at {url}");
    println!("  console      {url}/console/");
    if let Some(domain) = &server.native_admin_domain {
        println!(
            "  control UI   http://agent-<opaque>.{domain}:{}/ for Agents whose Configuration sets gateway.controlUi.enabled (the Agent page's Try it tab assigns you a runtime role, then opens it)",
            args.port
        );
    }
    println!("  state        {}", database_url);
    if let Some(addr) = metrics_address {
        println!("  metrics      http://{addr}/metrics");
    }
    println!("  service key  {}", key_file.display());
    match &password_file {
        Some(file) => println!(
            "  sign-in      {admin_email} / password in {}",
            file.display()
        ),
        None => println!("  sign-in      {admin_email} / the password in OCC_DEV_PASSWORD"),
    }
    println!();
    let default_ns = {
        let mut tx = store.begin_read().await?;
        tx.namespace_get_by_name("default")
            .await?
            .map(|n| n.id.to_string())
            .unwrap_or_else(|| "<ns_id of default>".into())
    };
    println!("Next, in another terminal (with target/debug on PATH):");
    println!(
        "  export OCC_URL={url} OCC_SERVICE_KEY_FILE={} OCC_NAMESPACE={default_ns}",
        key_file.display()
    );
    println!(
        "  echo '{{\"kind\":\"agent\",\"values\":{{\"agents\":{{\"defaults\":{{\"model\":{{\"primary\":\"openai/gpt-5\"}}}}}}}}}}' > cfg.json"
    );
    println!("  occ configuration create --file cfg.json       # note its cfg_ id");
    println!(
        "  echo '{{\"name\":\"hello\",\"configurationId\":\"<cfg_id>\",\"harnessAuth\":{{\"method\":\"runtime\"}},\"initialWorkspaceFiles\":{{\"USER.md\":\"# USER.md\\nAda, metric units.\\n\"}}}}' > agent.json"
    );
    println!("  occ agent create --file agent.json             # note its agt_ id");
    println!("  occ agent deploy <agt_id> --wait               # a real OpenClaw gateway starts");
    println!(
        "  occ agent files get <agt_id> USER.md           # the live file, through the gateway"
    );
    println!("  occ agent files put <agt_id> AGENTS.md --file AGENTS.md");
    println!(
        "  echo '{{\"values\":{{\"agents\":{{\"defaults\":{{\"model\":{{\"primary\":\"openai/gpt-5-mini\"}}}}}}}}}}' > cfg2.json"
    );
    println!("  occ configuration update <cfg_id> --file cfg2.json");
    println!("  occ agent deploy <agt_id> --wait               # redeploy: revision 2 replaces 1");
    println!(
        "  occ agent stop <agt_id>                        # the gateway stops, the workspace stays"
    );
    println!("  occ agent deploy <agt_id> --wait               # resume");
    println!();
    println!(
        "To have it answer, give it a model: the provider's key as a Secret, bound into the Configuration"
    );
    println!(
        "(baseUrl: your provider's, or a local OpenAI-compatible endpoint such as http://127.0.0.1:8080/v1):"
    );
    println!(
        "  echo '{{\"name\":\"model-key\",\"value\":\"sk-...\"}}' > key.json && occ secret create --file key.json   # note its sec_ id"
    );
    println!(
        "  echo '{{\"values\":{{\"agents\":{{\"defaults\":{{\"model\":{{\"primary\":\"my/my-model\"}}}}}},\"models\":{{\"providers\":{{\"my\":{{\"baseUrl\":\"http://127.0.0.1:8080/v1\",\"api\":\"openai-completions\",\"apiKey\":\"${{MODEL_KEY}}\",\"models\":[{{\"id\":\"my-model\",\"name\":\"My model\"}}]}}}}}}}},\"secretBindings\":{{\"MODEL_KEY\":{{\"source\":{{\"kind\":\"secret\",\"namespaceId\":\"{default_ns}\",\"id\":\"<sec_id>\"}}}}}}}}' > cfg3.json"
    );
    println!("  occ configuration update <cfg_id> --file cfg3.json");
    println!("  occ secret grant <sec_id> --agent <agt_id>     # the Agent may use the Secret");
    println!("  occ agent grant-use <agt_id>                   # this key may talk to the Agent");
    println!("  occ agent deploy <agt_id> --wait");
    println!(
        "  occ agent chat <agt_id> \"Hello!\"               # the reply streams here (or the console's Try it tab)"
    );
    println!();
    println!(
        "Data in {data}; Ctrl-C stops occ (running gateways keep running and are re-adopted)."
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let metrics_task = metrics_address.map(|addr| {
        tokio::spawn(crate::metrics::serve(
            addr,
            metrics,
            Some(store.clone()),
            stop_rx.clone(),
        ))
    });
    let worker_task = tokio::spawn(worker.run(stop_rx));
    axum::serve(crate::serve::without_nagle(listener), app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
    let _ = stop_tx.send(true);
    worker_task.await.context("worker")??;
    if let Some(task) = metrics_task {
        task.await.context("metrics listener")??;
    }
    store.close().await;
    Ok(())
}
