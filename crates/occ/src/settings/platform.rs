//! What every occ process needs: the database, the Configuration and Secret Drivers, the
//! Compute Driver (process by default; SSH and Kubernetes in their own modules), Backends and
//! the metrics listener.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use occ_host::sandbox::WorkloadLimits;
use occ_store::Backend;

use super::kubernetes::{
    KubernetesComputeSettings, KubernetesSettings, kubernetes_compute_settings, kubernetes_settings,
};
use super::source::{
    BackendSetting, Env, FileSettings, absolute, port_number, port_range, positive,
};
use super::ssh::{SshComputeSettings, ssh_settings};

/// Settings of the process Compute Driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeSettings {
    /// Where Agents' gateway directories live.
    pub root: PathBuf,
    /// The installed OpenClaw runtime (`occ runtime install --dir`).
    pub runtime_root: PathBuf,
    /// Loopback ports gateways are given (one per Agent, for its lifetime).
    pub port_range: RangeInclusive<u16>,
    /// How often a running Agent's gateway is checked and restarted if it crashed.
    pub maintenance_interval: Duration,
    /// Which Compute Driver runs the Agents (`OCC_COMPUTE_DRIVER`), with its own settings.
    pub driver: ComputeDriverSettings,
    /// Where dedicated Agents' Codex harnesses send model calls (`OCC_CODEX_BASE_URL`, an
    /// OpenAI-compatible Responses endpoint); `None`: Codex's default.
    pub codex_base_url: Option<String>,
    /// How the process Compute Driver contains each Agent's gateway (`OCC_PROCESS_ISOLATION`).
    pub isolation: ProcessIsolation,
}

/// `OCC_PROCESS_ISOLATION`: `sandbox` (the default) runs each Agent's gateway under bubblewrap
/// with `OCC_PROCESS_MEMORY_LIMIT_MIB`, `OCC_PROCESS_PIDS_LIMIT`, `OCC_PROCESS_OPEN_FILES_LIMIT`
/// and `OCC_PROCESS_RESIDENT_LIMIT_MIB` (its cgroup's, where occ can make cgroups); `none` turns
/// containment off (for development only: every Agent then reads what occ's user can read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessIsolation {
    /// bubblewrap, with these limits per gateway.
    Sandbox(WorkloadLimits),
    /// No containment.
    None,
}

/// [`ProcessIsolation`] from the environment and the file.
pub fn process_isolation(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<ProcessIsolation> {
    let mode = env("OCC_PROCESS_ISOLATION")
        .or(file.process_isolation.take())
        .unwrap_or_else(|| "sandbox".into());
    let defaults = WorkloadLimits::default();
    match mode.as_str() {
        "sandbox" => Ok(ProcessIsolation::Sandbox(WorkloadLimits {
            memory_mib: positive(
                env,
                "OCC_PROCESS_MEMORY_LIMIT_MIB",
                file.process_memory_limit_mib,
                defaults.memory_mib,
            )?,
            processes: positive(
                env,
                "OCC_PROCESS_PIDS_LIMIT",
                file.process_pids_limit,
                defaults.processes,
            )?,
            open_files: positive(
                env,
                "OCC_PROCESS_OPEN_FILES_LIMIT",
                file.process_open_files_limit,
                defaults.open_files,
            )?,
            resident_mib: positive(
                env,
                "OCC_PROCESS_RESIDENT_LIMIT_MIB",
                file.process_resident_limit_mib,
                defaults.resident_mib,
            )?,
        })),
        "none" => Ok(ProcessIsolation::None),
        other => bail!("OCC_PROCESS_ISOLATION: {other:?} must be sandbox or none"),
    }
}

/// The Compute Driver the settings select (`OCC_COMPUTE_DRIVER`) and what only it needs: the
/// one place a Driver is registered (`compose` builds both its admission selection and the
/// Driver itself from the variant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputeDriverSettings {
    /// Local gateway processes (`process`, the default): `root` and `port_range` above.
    Process,
    /// Operator-provisioned hosts over SSH (`ssh`; `root` and `port_range` are the host's own).
    Ssh(SshComputeSettings),
    /// Deployments in each Namespace's tenant namespace (`kubernetes`).
    Kubernetes(KubernetesComputeSettings),
}

impl ComputeDriverSettings {
    /// The Kubernetes Compute Driver's settings, when it is the one selected.
    pub fn kubernetes(&self) -> Option<&KubernetesComputeSettings> {
        match self {
            Self::Kubernetes(k) => Some(k),
            _ => None,
        }
    }
}

/// `OCC_CODEX_BASE_URL`, checked (`http(s)://host[:port]/path`, no credentials in it).
pub fn codex_base_url(value: Option<String>) -> anyhow::Result<Option<String>> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(url) => {
            occ_host::harness::check_model_base_url(&url)
                .map_err(|e| anyhow!("OCC_CODEX_BASE_URL {e}"))?;
            Ok(Some(url))
        }
    }
}

/// Where model discovery reads providers' model lists (`OCC_OPENAI_BASE_URL`,
/// `OCC_ANTHROPIC_BASE_URL`; the public endpoints by default, an installation's own endpoint
/// when it is air-gapped or in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDiscoverySettings {
    /// OpenAI's (or an OpenAI-compatible) API base, e.g. `https://api.openai.com/v1`.
    pub openai_base_url: String,
    /// Anthropic's API base, e.g. `https://api.anthropic.com/v1`.
    pub anthropic_base_url: String,
}

impl ModelDiscoverySettings {
    /// From `OCC_OPENAI_BASE_URL` and `OCC_ANTHROPIC_BASE_URL`, checked like
    /// `OCC_CODEX_BASE_URL` (`http(s)://host[:port]/path`, no credentials in it).
    pub fn from_env(env: Env<'_>) -> anyhow::Result<Self> {
        let base = |name: &str, default: &str| -> anyhow::Result<String> {
            let url = env(name)
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_owned());
            occ_host::harness::check_model_base_url(&url).map_err(|e| anyhow!("{name} {e}"))?;
            Ok(url)
        };
        Ok(Self {
            openai_base_url: base("OCC_OPENAI_BASE_URL", "https://api.openai.com/v1")?,
            anthropic_base_url: base("OCC_ANTHROPIC_BASE_URL", "https://api.anthropic.com/v1")?,
        })
    }
}

/// What every occ process needs.
#[derive(Debug, Clone)]
pub struct PlatformSettings {
    /// `postgres://…` or `sqlite://PATH`.
    pub database_url: String,
    /// Where Configuration documents live.
    pub configurations: ConfigurationStore,
    /// Where Secret values live.
    pub secrets: SecretStore,
    /// How occ reaches the Kubernetes API server and who is granted access in tenant
    /// namespaces, when a Kubernetes Driver is selected.
    pub kubernetes: Option<KubernetesSettings>,
    /// Configured Backends.
    pub backends: Vec<BackendSetting>,
    /// The process Compute Driver.
    pub compute: ComputeSettings,
    /// The private metrics listener, when enabled.
    pub metrics: Option<SocketAddr>,
    /// Where model discovery reads providers' model lists.
    pub model_discovery: ModelDiscoverySettings,
}

/// The Configuration Driver (`OCC_CONFIGURATION_DRIVER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigurationStore {
    /// `filesystem`: documents under `OCC_CONFIGURATION_ROOT`.
    Filesystem {
        /// The root directory.
        root: PathBuf,
    },
    /// `kubernetes`: one ConfigMap per Configuration in the tenant namespace.
    Kubernetes,
}

/// The Secret Driver (`OCC_SECRET_DRIVER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretStore {
    /// `local`: sealed files under `OCC_SECRET_ROOT`, key in `OCC_SECRET_KEY_FILE`.
    Local {
        /// The root directory.
        root: PathBuf,
        /// The key file.
        key_file: PathBuf,
    },
    /// `kubernetes`: one Secret per value in the tenant namespace.
    Kubernetes,
}

impl PlatformSettings {
    pub(super) fn load(env: Env<'_>, file: &mut FileSettings) -> anyhow::Result<Self> {
        let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
        let database_url = pick("OCC_DATABASE_URL", file.database_url.take()).ok_or_else(|| {
            anyhow!("OCC_DATABASE_URL is required (postgres://… or sqlite://PATH)")
        })?;
        occ_store::backend_of(&database_url).map_err(|e| anyhow!("OCC_DATABASE_URL: {e}"))?;
        let data_dir = env("OCC_DATA_DIR")
            .map(PathBuf::from)
            .or(file.data_dir.take());
        let driver = pick("OCC_CONFIGURATION_DRIVER", file.configuration_driver.take())
            .unwrap_or_else(|| "filesystem".into());
        if driver != "filesystem" && driver != "kubernetes" {
            bail!("OCC_CONFIGURATION_DRIVER: {driver:?} is not available (filesystem, kubernetes)");
        }
        let from_data = |sub: &str| data_dir.as_ref().map(|d| d.join(sub));
        let path_setting = |var: &str, from_file: Option<PathBuf>, sub: &str, what: &str| {
            env(var)
                .map(PathBuf::from)
                .or(from_file)
                .or_else(|| from_data(sub))
                .ok_or_else(|| anyhow!("{var} is required by {what} (or set OCC_DATA_DIR)"))
                .and_then(|p| absolute(var, p))
        };
        let configurations = if driver == "kubernetes" {
            ConfigurationStore::Kubernetes
        } else {
            ConfigurationStore::Filesystem {
                root: path_setting(
                    "OCC_CONFIGURATION_ROOT",
                    file.configuration_root.take(),
                    "configurations",
                    "the filesystem Configuration Driver",
                )?,
            }
        };
        let secret_driver =
            pick("OCC_SECRET_DRIVER", file.secret_driver.take()).unwrap_or_else(|| "local".into());
        let secrets = match secret_driver.as_str() {
            "kubernetes" => SecretStore::Kubernetes,
            "local" => SecretStore::Local {
                root: path_setting(
                    "OCC_SECRET_ROOT",
                    file.secret_root.take(),
                    "secrets",
                    "the local Secret Driver",
                )?,
                key_file: path_setting(
                    "OCC_SECRET_KEY_FILE",
                    file.secret_key_file.take(),
                    "secret.key",
                    "the local Secret Driver",
                )?,
            },
            _ => bail!("OCC_SECRET_DRIVER: {secret_driver:?} is not available (local, kubernetes)"),
        };
        let compute = pick("OCC_COMPUTE_DRIVER", file.compute_driver.take())
            .unwrap_or_else(|| "process".into());
        let driver = match compute.as_str() {
            "process" => ComputeDriverSettings::Process,
            "ssh" => ComputeDriverSettings::Ssh(ssh_settings(env, file)?),
            "kubernetes" => {
                ComputeDriverSettings::Kubernetes(kubernetes_compute_settings(env, file)?)
            }
            _ => {
                bail!("OCC_COMPUTE_DRIVER: {compute:?} is not available (process, ssh, kubernetes)")
            }
        };
        let kubernetes = (configurations == ConfigurationStore::Kubernetes
            || secrets == SecretStore::Kubernetes
            || driver.kubernetes().is_some())
        .then(|| kubernetes_settings(env, file))
        .transpose()?;
        if driver.kubernetes().is_some()
            && kubernetes
                .as_ref()
                .is_some_and(|k| k.worker_service_account.is_none())
        {
            bail!(
                "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT is required with OCC_COMPUTE_DRIVER=kubernetes: the worker is granted its rights over gateways per tenant namespace"
            );
        }
        let root = path_setting(
            "OCC_PROCESS_ROOT",
            file.process_root.take(),
            "compute",
            "the process Compute Driver",
        )?;
        let runtime_root = path_setting(
            "OCC_OPENCLAW_RUNTIME",
            file.openclaw_runtime.take(),
            "runtime",
            "the process Compute Driver",
        )?;
        let range_text = pick("OCC_PROCESS_PORT_RANGE", file.process_port_range.take())
            .unwrap_or_else(|| "28000-28999".into());
        let port_range =
            port_range(&range_text).map_err(|e| anyhow!("OCC_PROCESS_PORT_RANGE: {e}"))?;
        let maintenance_ms = positive(
            env,
            "OCC_MAINTENANCE_INTERVAL_MS",
            file.maintenance_interval_ms,
            30_000,
        )?;
        let backends = file.backends.take().unwrap_or_default();
        let mut seen = BTreeMap::new();
        for b in &backends {
            if seen.insert(b.id.clone(), ()).is_some() {
                bail!("backends: the id {:?} appears twice", b.id);
            }
            check_backend(b)?;
        }
        if backends.iter().filter(|b| b.manages_accounts()).count() > 1 {
            bail!("backends: at most one chatgpt Backend may have workspaceId and adminKeyFile");
        }
        let metrics = metrics_address(env, file)?;
        Ok(Self {
            database_url,
            configurations,
            secrets,
            kubernetes,
            backends,
            compute: ComputeSettings {
                root,
                runtime_root,
                port_range,
                maintenance_interval: Duration::from_millis(maintenance_ms),
                driver,
                codex_base_url: codex_base_url(env("OCC_CODEX_BASE_URL"))?,
                isolation: process_isolation(env, file)?,
            },
            metrics,
            model_discovery: ModelDiscoverySettings::from_env(env)?,
        })
    }
}

/// The metrics listener of `occ dev`, from the same `OCC_METRICS_*` variables as a production
/// install (`occ dev` reads no settings file).
pub fn dev_metrics_address(env: Env<'_>) -> anyhow::Result<Option<SocketAddr>> {
    metrics_address(env, &mut FileSettings::default())
}

/// `OCC_METRICS_ENABLED=true` needs `OCC_METRICS_HOST` and `OCC_METRICS_PORT`; either of those
/// set while metrics are disabled is a contradiction.
fn metrics_address(env: Env<'_>, file: &mut FileSettings) -> anyhow::Result<Option<SocketAddr>> {
    let enabled = match env("OCC_METRICS_ENABLED") {
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(v) => bail!("OCC_METRICS_ENABLED: {v:?} must be true or false"),
        None => file.metrics_enabled.unwrap_or(false),
    };
    let host = env("OCC_METRICS_HOST").or(file.metrics_host.take());
    let port = match env("OCC_METRICS_PORT") {
        Some(p) => Some(
            port_number(&p)
                .ok_or_else(|| anyhow!("OCC_METRICS_PORT: {p:?} is not a port (1..65535)"))?,
        ),
        None => file.metrics_port,
    };
    match (enabled, host, port) {
        (false, None, None) => Ok(None),
        (false, _, _) => {
            bail!("OCC_METRICS_HOST/OCC_METRICS_PORT are set but OCC_METRICS_ENABLED is not true")
        }
        (true, Some(host), Some(port)) => {
            let ip: IpAddr = host
                .parse()
                .map_err(|_| anyhow!("OCC_METRICS_HOST: {host:?} is not an IP address"))?;
            Ok(Some(SocketAddr::new(ip, port)))
        }
        (true, None, _) => bail!("OCC_METRICS_HOST is required when OCC_METRICS_ENABLED=true"),
        (true, _, None) => bail!("OCC_METRICS_PORT is required when OCC_METRICS_ENABLED=true"),
    }
}

/// Checks a database URL and, for SQLite, creates the file's parent directory (0700) so a
/// first run on a fresh machine just works.
pub fn prepare_database_url(url: &str) -> anyhow::Result<Backend> {
    let backend = occ_store::backend_of(url)?;
    if backend == Backend::Sqlite {
        let path = url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:")
            .split('?')
            .next()
            .unwrap_or_default();
        if path.is_empty() || path.starts_with(':') {
            anyhow::bail!("an SQLite URL must name a file, e.g. sqlite://./.occ/occ.db");
        }
        let parent = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.exists()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
            }
        }
    }
    Ok(backend)
}

/// A Backend's own fields: ServiceAccount fields only on `chatgpt`, and there all of
/// `workspaceId` and `adminKeyFile` or none.
fn check_backend(b: &BackendSetting) -> anyhow::Result<()> {
    let id = &b.id;
    let account_fields = b.workspace_id.is_some()
        || b.admin_key_file.is_some()
        || b.credential_ttl_seconds.is_some()
        || b.api_base_url.is_some();
    if b.kind != "chatgpt" {
        if account_fields {
            bail!(
                "backends[{id:?}]: workspaceId, adminKeyFile, credentialTtlSeconds and apiBaseUrl are for type chatgpt"
            );
        }
        return Ok(());
    }
    if !account_fields {
        return Ok(());
    }
    let (Some(workspace), Some(key_file)) = (&b.workspace_id, &b.admin_key_file) else {
        bail!("backends[{id:?}]: workspaceId and adminKeyFile go together");
    };
    if !occ_drivers::service_account::chatgpt::is_workspace_id(workspace) {
        bail!("backends[{id:?}].workspaceId must be a UUID");
    }
    if !key_file.is_absolute() {
        bail!("backends[{id:?}].adminKeyFile must be an absolute path");
    }
    if let Some(ttl) = b.credential_ttl_seconds
        && !(1..=occ_drivers::service_account::chatgpt::MAX_CREDENTIAL_TTL_SECONDS).contains(&ttl)
    {
        bail!("backends[{id:?}].credentialTtlSeconds must be between 1 and 2592000 (30 days)");
    }
    if let Some(url) = &b.api_base_url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        bail!("backends[{id:?}].apiBaseUrl must be an http(s) URL");
    }
    Ok(())
}
