//! Settings: a YAML file (`OCC_CONFIG_PATH`) overlaid by `OCC_*` environment variables. The only
//! place occ reads its environment for configuration. Invalid or contradictory settings fail at
//! startup with a message naming the setting.
//!
//! [`PlatformSettings`] are shared by every process (database, Drivers, Compute, metrics);
//! [`ServerSettings`] add the API's listener and authentication, [`WorkerProcessSettings`] the
//! worker's tuning.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use occ_controller::worker::WorkerSettings;
use occ_host::wire::SupervisorChoice;
use occ_store::Backend;
use serde::Deserialize;

/// The `PATH` the programs occ runs search (npm, the OpenClaw runtime and what it runs,
/// `occ workspace-setup` as an Agent's user): occ's own, or a plain default when it has none.
pub fn program_path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| occ_host::runtime::DEFAULT_PATH.into())
}

/// Raw settings as written in the file (every field optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    host: Option<String>,
    port: Option<u16>,
    database_url: Option<String>,
    data_dir: Option<PathBuf>,
    configuration_driver: Option<String>,
    configuration_root: Option<PathBuf>,
    secret_driver: Option<String>,
    secret_root: Option<PathBuf>,
    secret_key_file: Option<PathBuf>,
    kubernetes_auth: Option<String>,
    kubeconfig: Option<PathBuf>,
    kubernetes_context: Option<String>,
    kubernetes_api_service_account: Option<String>,
    kubernetes_worker_service_account: Option<String>,
    kubernetes_gateway_image: Option<String>,
    kubernetes_gateway_runtime_dir: Option<String>,
    kubernetes_gateway_occ: Option<String>,
    kubernetes_state_storage: Option<String>,
    kubernetes_storage_class: Option<String>,
    kubernetes_tenant_quota: Option<String>,
    kubernetes_activation_timeout_seconds: Option<u64>,
    compute_driver: Option<String>,
    process_root: Option<PathBuf>,
    openclaw_runtime: Option<PathBuf>,
    process_port_range: Option<String>,
    ssh_address: Option<String>,
    ssh_port: Option<u16>,
    ssh_user: Option<String>,
    ssh_identity_file: Option<PathBuf>,
    ssh_known_hosts_file: Option<PathBuf>,
    ssh_connect_timeout_seconds: Option<u64>,
    ssh_remote_occ: Option<PathBuf>,
    ssh_remote_root: Option<PathBuf>,
    ssh_remote_runtime: Option<PathBuf>,
    ssh_port_range: Option<String>,
    ssh_gateway_bind: Option<String>,
    ssh_account_prefix: Option<String>,
    ssh_supervisor: Option<String>,
    ssh_systemd_unit_dir: Option<PathBuf>,
    ssh_namespace_hosts: Option<BTreeMap<String, NamespaceHostSetting>>,
    maintenance_interval_ms: Option<u64>,
    auth_base_url: Option<String>,
    auth_secret: Option<String>,
    session_ttl_seconds: Option<u64>,
    backends: Option<Vec<BackendSetting>>,
    worker_poll_interval_ms: Option<u64>,
    worker_lease_duration_ms: Option<u64>,
    worker_max_attempts: Option<u64>,
    worker_convergence_timeout_ms: Option<u64>,
    worker_concurrency: Option<u64>,
    metrics_enabled: Option<bool>,
    metrics_host: Option<String>,
    metrics_port: Option<u16>,
}

/// The host of one Namespace (YAML `ssh_namespace_hosts`, keyed by Namespace id); unset fields
/// are the default host's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceHostSetting {
    address: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    identity_file: Option<PathBuf>,
    known_hosts_file: Option<PathBuf>,
    remote_occ: Option<PathBuf>,
    remote_root: Option<PathBuf>,
    remote_runtime: Option<PathBuf>,
    port_range: Option<String>,
    supervisor: Option<String>,
    systemd_unit_dir: Option<PathBuf>,
}

/// A configured Backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSetting {
    /// Id agents select with `backendId`.
    pub id: String,
    /// Type, e.g. `chatgpt`.
    #[serde(rename = "type")]
    pub kind: String,
}

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
    /// The SSH Compute Driver's host, when `OCC_COMPUTE_DRIVER=ssh` (then `root` and
    /// `port_range` are unused: the host's own are below).
    pub ssh: Option<SshComputeSettings>,
    /// The Kubernetes Compute Driver's workloads, when `OCC_COMPUTE_DRIVER=kubernetes`.
    pub kubernetes: Option<KubernetesComputeSettings>,
}

/// Settings of the Kubernetes Compute Driver (`OCC_KUBERNETES_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesComputeSettings {
    /// `OCC_KUBERNETES_GATEWAY_IMAGE` (required): the image with occ and the OpenClaw runtime
    /// (pin it by digest).
    pub image: String,
    /// `OCC_KUBERNETES_GATEWAY_RUNTIME_DIR` (`/opt/occ/runtime`): the runtime in that image.
    pub runtime_dir: String,
    /// `OCC_KUBERNETES_GATEWAY_OCC` (`/usr/local/bin/occ`): occ in that image.
    pub occ_binary: String,
    /// `OCC_KUBERNETES_STATE_STORAGE` (`10Gi`): each Agent's state volume.
    pub state_storage: String,
    /// `OCC_KUBERNETES_STORAGE_CLASS`: the volumes' storage class (the cluster default).
    pub storage_class: Option<String>,
    /// `OCC_KUBERNETES_ACTIVATION_TIMEOUT_SECONDS` (300): rollout and handshake wait.
    pub activation_timeout: Duration,
    /// `OCC_KUBERNETES_TENANT_QUOTA` (`resource=quantity,…`; unset: none): the ResourceQuota
    /// `occ-quota` of every tenant namespace.
    pub tenant_quota: Option<occ_drivers::kubernetes::TenantQuota>,
}

/// Settings of the SSH Compute Driver (`OCC_SSH_*`): the one operator-provisioned host Agents
/// run on, how to reach it, and the layout on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshComputeSettings {
    /// `OCC_SSH_ADDRESS`: host name or address.
    pub address: String,
    /// `OCC_SSH_PORT` (22).
    pub port: u16,
    /// `OCC_SSH_USER` (root).
    pub user: String,
    /// `OCC_SSH_IDENTITY_FILE`: the private key.
    pub identity_file: PathBuf,
    /// `OCC_SSH_KNOWN_HOSTS_FILE`: the host's key (strict checking).
    pub known_hosts_file: PathBuf,
    /// `OCC_SSH_CONNECT_TIMEOUT_SECONDS` (10).
    pub connect_timeout: Duration,
    /// `OCC_SSH_REMOTE_OCC` (`/usr/local/bin/occ`): the occ binary on the host.
    pub remote_occ: PathBuf,
    /// `OCC_SSH_REMOTE_ROOT` (`/var/lib/occ/compute`): the layout's root on the host.
    pub remote_root: PathBuf,
    /// `OCC_SSH_REMOTE_RUNTIME` (`/var/lib/occ/runtime`): the OpenClaw runtime on the host.
    pub remote_runtime: PathBuf,
    /// `OCC_SSH_PORT_RANGE` (`28000-28999`): gateway ports on the host.
    pub port_range: RangeInclusive<u16>,
    /// `OCC_SSH_GATEWAY_BIND` (`loopback`): where gateways listen on the host (`loopback` or
    /// `lan`). occ reaches them through an SSH forward to the host's loopback either way.
    pub bind_lan: bool,
    /// `OCC_SSH_ACCOUNT_PREFIX` (`occ-agent`): prefix of the per-Agent Unix accounts.
    pub account_prefix: String,
    /// `OCC_SSH_SUPERVISOR` (`auto`): how gateways are supervised on the host — `systemd` (one
    /// unit per Agent), `detached` (a detached process group, restarted by the maintenance
    /// pass) or `auto` (systemd where it runs).
    pub supervisor: SupervisorChoice,
    /// `OCC_SSH_SYSTEMD_UNIT_DIR` (`/etc/systemd/system`): where the units are written.
    pub systemd_unit_dir: PathBuf,
    /// YAML `ssh_namespace_hosts`: other hosts for particular Namespaces (by Namespace id), each
    /// complete (unset fields taken from the default host above; never nested further).
    pub namespace_hosts: BTreeMap<String, SshComputeSettings>,
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
}

/// Settings shared by the Kubernetes Drivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesSettings {
    /// `OCC_KUBERNETES_AUTH` (+ `OCC_KUBECONFIG`, `OCC_KUBERNETES_CONTEXT`).
    pub auth: occ_drivers::kubernetes::KubernetesAuth,
    /// `OCC_KUBERNETES_API_SERVICE_ACCOUNT` (`NAMESPACE/NAME`): granted ConfigMap and Secret
    /// access in tenant namespaces.
    pub api_service_account: occ_drivers::kubernetes::ServiceAccountRef,
    /// `OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT` (`NAMESPACE/NAME`): granted Secret reads in
    /// tenant namespaces (it delivers Secret values to workloads).
    pub worker_service_account: Option<occ_drivers::kubernetes::ServiceAccountRef>,
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

/// Validated settings of the API server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Shared settings.
    pub platform: PlatformSettings,
    /// Listen address.
    pub host: IpAddr,
    /// Listen port.
    pub port: u16,
    /// The origin of `auth_base_url`.
    pub public_origin: String,
    /// Session-key secret.
    pub auth_secret: String,
    /// Session lifetime.
    pub session_ttl_seconds: u64,
}

/// Validated settings of the worker.
#[derive(Debug, Clone)]
pub struct WorkerProcessSettings {
    /// Shared settings.
    pub platform: PlatformSettings,
    /// Worker tuning.
    pub worker: WorkerSettings,
}

/// The environment, as a lookup function (tests pass their own).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn load_file(env: Env<'_>) -> anyhow::Result<FileSettings> {
    let Some(path) = env("OCC_CONFIG_PATH") else {
        return Ok(FileSettings::default());
    };
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        bail!("OCC_CONFIG_PATH must be an absolute path");
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("OCC_CONFIG_PATH: cannot read {}", path.display()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| anyhow!("OCC_CONFIG_PATH {}: {e}", path.display()))
}

fn absolute(name: &str, path: PathBuf) -> anyhow::Result<PathBuf> {
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .context("current directory")?
            .join(path)
    };
    if path.exists() && !path.is_dir() && !name.ends_with("KEY_FILE") {
        bail!("{name}: {} exists and is not a directory", path.display());
    }
    Ok(path)
}

/// The origin (`scheme://host[:port]`) of an http(s) URL, or why it is not one.
pub fn origin_of(url: &str) -> Result<(String, bool), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be an absolute http or https URL")?;
    let secure = match scheme {
        "http" => false,
        "https" => true,
        _ => return Err("must use http or https".into()),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') || authority.contains(char::is_whitespace) {
        return Err("must name a host without credentials".into());
    }
    let path = &rest[authority.len()..];
    if !(path.is_empty() || path == "/") {
        return Err("must not have a path, query or fragment".into());
    }
    Ok((format!("{scheme}://{authority}"), secure))
}

/// A positive integer setting (digits only) from the environment or the file.
fn positive(env: Env<'_>, name: &str, file: Option<u64>, default: u64) -> anyhow::Result<u64> {
    match env(name) {
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|v| *v > 0 && text.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| anyhow!("{name}: {text:?} is not a positive integer")),
        None => match file {
            Some(0) => bail!("{name}: must be positive"),
            Some(v) => Ok(v),
            None => Ok(default),
        },
    }
}

/// `START-END` with 1024 ≤ START ≤ END ≤ 65535.
pub(crate) fn port_range(text: &str) -> Result<RangeInclusive<u16>, String> {
    let (a, b) = text
        .split_once('-')
        .ok_or("must be START-END, e.g. 28000-28999")?;
    let a: u16 = a.trim().parse().map_err(|_| "START is not a port")?;
    let b: u16 = b.trim().parse().map_err(|_| "END is not a port")?;
    if a < 1024 || a > b {
        return Err("must satisfy 1024 <= START <= END <= 65535".into());
    }
    Ok(a..=b)
}

impl PlatformSettings {
    fn load(env: Env<'_>, file: &mut FileSettings) -> anyhow::Result<Self> {
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
        let (ssh, kubernetes_compute) = match compute.as_str() {
            "process" => (None, None),
            "ssh" => (Some(ssh_settings(env, file)?), None),
            "kubernetes" => (None, Some(kubernetes_compute_settings(env, file)?)),
            _ => {
                bail!("OCC_COMPUTE_DRIVER: {compute:?} is not available (process, ssh, kubernetes)")
            }
        };
        let kubernetes = (configurations == ConfigurationStore::Kubernetes
            || secrets == SecretStore::Kubernetes
            || kubernetes_compute.is_some())
        .then(|| kubernetes_settings(env, file))
        .transpose()?;
        if kubernetes_compute.is_some()
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
                ssh,
                kubernetes: kubernetes_compute,
            },
            metrics,
        })
    }
}

/// The Kubernetes Compute Driver's workload settings.
fn kubernetes_compute_settings(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<KubernetesComputeSettings> {
    let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
    let image = pick(
        "OCC_KUBERNETES_GATEWAY_IMAGE",
        file.kubernetes_gateway_image.take(),
    )
    .ok_or_else(|| {
        anyhow!("OCC_KUBERNETES_GATEWAY_IMAGE is required with OCC_COMPUTE_DRIVER=kubernetes")
    })?;
    if image.trim().is_empty() || image.contains(char::is_whitespace) {
        bail!("OCC_KUBERNETES_GATEWAY_IMAGE: {image:?} is not an image reference");
    }
    let absolute_path = |var: &str, value: String| -> anyhow::Result<String> {
        if !value.starts_with('/') || value.contains(char::is_whitespace) {
            bail!("{var}: {value:?} must be an absolute path in the image");
        }
        Ok(value)
    };
    let runtime_dir = absolute_path(
        "OCC_KUBERNETES_GATEWAY_RUNTIME_DIR",
        pick(
            "OCC_KUBERNETES_GATEWAY_RUNTIME_DIR",
            file.kubernetes_gateway_runtime_dir.take(),
        )
        .unwrap_or_else(|| "/opt/occ/runtime".into()),
    )?;
    let occ_binary = absolute_path(
        "OCC_KUBERNETES_GATEWAY_OCC",
        pick(
            "OCC_KUBERNETES_GATEWAY_OCC",
            file.kubernetes_gateway_occ.take(),
        )
        .unwrap_or_else(|| "/usr/local/bin/occ".into()),
    )?;
    let state_storage = pick(
        "OCC_KUBERNETES_STATE_STORAGE",
        file.kubernetes_state_storage.take(),
    )
    .unwrap_or_else(|| "10Gi".into());
    let quantity = state_storage
        .strip_suffix("Gi")
        .or_else(|| state_storage.strip_suffix("Mi"))
        .or_else(|| state_storage.strip_suffix("Ti"));
    if !quantity.is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit())) {
        bail!("OCC_KUBERNETES_STATE_STORAGE: {state_storage:?} is not a quantity like 10Gi");
    }
    let storage_class = pick(
        "OCC_KUBERNETES_STORAGE_CLASS",
        file.kubernetes_storage_class.take(),
    );
    let timeout = positive(
        env,
        "OCC_KUBERNETES_ACTIVATION_TIMEOUT_SECONDS",
        file.kubernetes_activation_timeout_seconds,
        300,
    )?;
    let tenant_quota = pick(
        "OCC_KUBERNETES_TENANT_QUOTA",
        file.kubernetes_tenant_quota.take(),
    )
    .map(|text| {
        text.parse()
            .map_err(|e| anyhow!("OCC_KUBERNETES_TENANT_QUOTA: {e}"))
    })
    .transpose()?;
    Ok(KubernetesComputeSettings {
        image,
        runtime_dir,
        occ_binary,
        state_storage,
        storage_class,
        activation_timeout: Duration::from_secs(timeout),
        tenant_quota,
    })
}

/// The Kubernetes Drivers' settings: authentication and the ServiceAccounts granted access in
/// tenant namespaces.
fn kubernetes_settings(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<KubernetesSettings> {
    let auth = kubernetes_auth(env, file)?;
    let account = |var: &str, from_file: Option<String>| -> anyhow::Result<Option<_>> {
        env(var)
            .or(from_file)
            .map(|text| text.parse().map_err(|e| anyhow!("{var}: {e}")))
            .transpose()
    };
    let api_service_account = account(
        "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
        file.kubernetes_api_service_account.take(),
    )?
    .ok_or_else(|| {
        anyhow!("OCC_KUBERNETES_API_SERVICE_ACCOUNT (NAMESPACE/NAME) is required by the Kubernetes Drivers")
    })?;
    let worker_service_account = account(
        "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
        file.kubernetes_worker_service_account.take(),
    )?;
    Ok(KubernetesSettings {
        auth,
        api_service_account,
        worker_service_account,
    })
}

/// How the Kubernetes Drivers authenticate: `OCC_KUBERNETES_AUTH` = `in-cluster` (the Pod's
/// service account) or `kubeconfig` (`OCC_KUBECONFIG`, an absolute path, and
/// `OCC_KUBERNETES_CONTEXT`, both required; no fallback to `$KUBECONFIG` or `~/.kube`).
fn kubernetes_auth(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<occ_drivers::kubernetes::KubernetesAuth> {
    use occ_drivers::kubernetes::KubernetesAuth;
    let mode = env("OCC_KUBERNETES_AUTH")
        .or(file.kubernetes_auth.take())
        .ok_or_else(|| {
            anyhow!(
                "OCC_KUBERNETES_AUTH is required by the Kubernetes Drivers (in-cluster, kubeconfig)"
            )
        })?;
    match mode.as_str() {
        "in-cluster" => Ok(KubernetesAuth::InCluster),
        "kubeconfig" => {
            let path = env("OCC_KUBECONFIG")
                .map(PathBuf::from)
                .or(file.kubeconfig.take())
                .ok_or_else(|| {
                    anyhow!("OCC_KUBECONFIG is required with OCC_KUBERNETES_AUTH=kubeconfig")
                })?;
            if !path.is_absolute() {
                bail!("OCC_KUBECONFIG must be an absolute path");
            }
            let context = env("OCC_KUBERNETES_CONTEXT")
                .or(file.kubernetes_context.take())
                .ok_or_else(|| {
                    anyhow!(
                        "OCC_KUBERNETES_CONTEXT is required with OCC_KUBERNETES_AUTH=kubeconfig"
                    )
                })?;
            Ok(KubernetesAuth::Kubeconfig { path, context })
        }
        other => bail!("OCC_KUBERNETES_AUTH: {other:?} is not one of in-cluster, kubeconfig"),
    }
}

/// The `OCC_SSH_*` settings of the SSH Compute Driver.
fn ssh_settings(env: Env<'_>, file: &mut FileSettings) -> anyhow::Result<SshComputeSettings> {
    let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
    let path = |var: &str, from_file: Option<PathBuf>, default: Option<&str>| {
        let path = env(var)
            .map(PathBuf::from)
            .or(from_file)
            .or_else(|| default.map(PathBuf::from))
            .ok_or_else(|| anyhow!("{var} is required by the SSH Compute Driver"))?;
        if !path.is_absolute() {
            bail!("{var}: {} must be an absolute path", path.display());
        }
        Ok(path)
    };
    let address = pick("OCC_SSH_ADDRESS", file.ssh_address.take())
        .ok_or_else(|| anyhow!("OCC_SSH_ADDRESS is required by the SSH Compute Driver"))?;
    let port = match env("OCC_SSH_PORT") {
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| anyhow!("OCC_SSH_PORT: {text:?} is not a port"))?,
        None => file.ssh_port.take().unwrap_or(22),
    };
    let range_text = pick("OCC_SSH_PORT_RANGE", file.ssh_port_range.take())
        .unwrap_or_else(|| "28000-28999".into());
    let bind = pick("OCC_SSH_GATEWAY_BIND", file.ssh_gateway_bind.take())
        .unwrap_or_else(|| "loopback".into());
    let bind_lan = match bind.as_str() {
        "lan" => true,
        "loopback" => false,
        other => bail!("OCC_SSH_GATEWAY_BIND: {other:?} is not lan or loopback"),
    };
    let connect = positive(
        env,
        "OCC_SSH_CONNECT_TIMEOUT_SECONDS",
        file.ssh_connect_timeout_seconds.take(),
        10,
    )?;
    let mut default = SshComputeSettings {
        address,
        port,
        user: pick("OCC_SSH_USER", file.ssh_user.take()).unwrap_or_else(|| "root".into()),
        identity_file: path("OCC_SSH_IDENTITY_FILE", file.ssh_identity_file.take(), None)?,
        known_hosts_file: path(
            "OCC_SSH_KNOWN_HOSTS_FILE",
            file.ssh_known_hosts_file.take(),
            None,
        )?,
        connect_timeout: Duration::from_secs(connect),
        remote_occ: path(
            "OCC_SSH_REMOTE_OCC",
            file.ssh_remote_occ.take(),
            Some("/usr/local/bin/occ"),
        )?,
        remote_root: path(
            "OCC_SSH_REMOTE_ROOT",
            file.ssh_remote_root.take(),
            Some("/var/lib/occ/compute"),
        )?,
        remote_runtime: path(
            "OCC_SSH_REMOTE_RUNTIME",
            file.ssh_remote_runtime.take(),
            Some("/var/lib/occ/runtime"),
        )?,
        port_range: port_range(&range_text).map_err(|e| anyhow!("OCC_SSH_PORT_RANGE: {e}"))?,
        bind_lan,
        account_prefix: pick("OCC_SSH_ACCOUNT_PREFIX", file.ssh_account_prefix.take())
            .unwrap_or_else(|| "occ-agent".into()),
        supervisor: match pick("OCC_SSH_SUPERVISOR", file.ssh_supervisor.take()) {
            Some(text) => text
                .parse()
                .map_err(|e| anyhow!("OCC_SSH_SUPERVISOR: {e}"))?,
            None => SupervisorChoice::Auto,
        },
        systemd_unit_dir: path(
            "OCC_SSH_SYSTEMD_UNIT_DIR",
            file.ssh_systemd_unit_dir.take(),
            Some("/etc/systemd/system"),
        )?,
        namespace_hosts: BTreeMap::new(),
    };
    let mut hosts = BTreeMap::new();
    for (ns, entry) in file.ssh_namespace_hosts.take().unwrap_or_default() {
        let name = format!("ssh_namespace_hosts.{ns}");
        if ns.parse::<occ_core::NamespaceId>().is_err() {
            bail!("{name}: {ns:?} is not a Namespace id (ns_…)");
        }
        let absolute = |field: &str, path: Option<PathBuf>, default: &PathBuf| match path {
            Some(p) if !p.is_absolute() => {
                bail!("{name}.{field}: {} must be an absolute path", p.display())
            }
            Some(p) => Ok(p),
            None => Ok(default.clone()),
        };
        let host = SshComputeSettings {
            address: entry
                .address
                .ok_or_else(|| anyhow!("{name}.address is required"))?,
            port: match entry.port {
                Some(0) => bail!("{name}.port: must be a port"),
                Some(p) => p,
                None => default.port,
            },
            user: entry.user.unwrap_or_else(|| default.user.clone()),
            identity_file: absolute("identity_file", entry.identity_file, &default.identity_file)?,
            known_hosts_file: absolute(
                "known_hosts_file",
                entry.known_hosts_file,
                &default.known_hosts_file,
            )?,
            connect_timeout: default.connect_timeout,
            remote_occ: absolute("remote_occ", entry.remote_occ, &default.remote_occ)?,
            remote_root: absolute("remote_root", entry.remote_root, &default.remote_root)?,
            remote_runtime: absolute(
                "remote_runtime",
                entry.remote_runtime,
                &default.remote_runtime,
            )?,
            port_range: match entry.port_range {
                Some(text) => port_range(&text).map_err(|e| anyhow!("{name}.port_range: {e}"))?,
                None => default.port_range.clone(),
            },
            bind_lan: default.bind_lan,
            account_prefix: default.account_prefix.clone(),
            supervisor: match entry.supervisor {
                Some(text) => text
                    .parse()
                    .map_err(|e| anyhow!("{name}.supervisor: {e}"))?,
                None => default.supervisor,
            },
            systemd_unit_dir: absolute(
                "systemd_unit_dir",
                entry.systemd_unit_dir,
                &default.systemd_unit_dir,
            )?,
            namespace_hosts: BTreeMap::new(),
        };
        hosts.insert(ns, host);
    }
    default.namespace_hosts = hosts;
    Ok(default)
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
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
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

impl ServerSettings {
    /// Loads and validates the server settings.
    pub fn load(env: Env<'_>) -> anyhow::Result<Self> {
        let mut file = load_file(env)?;
        let platform = PlatformSettings::load(env, &mut file)?;
        let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
        let host_text = pick("OCC_HOST", file.host.take()).unwrap_or_else(|| "127.0.0.1".into());
        let host: IpAddr = host_text
            .parse()
            .map_err(|_| anyhow!("OCC_HOST: {host_text:?} is not an IP address"))?;
        let port = match env("OCC_PORT") {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| anyhow!("OCC_PORT: {p:?} is not a port (1..65535)"))?,
            None => file.port.unwrap_or(3000),
        };
        if platform.metrics.is_some_and(|m| m.port() == port) {
            bail!("OCC_METRICS_PORT must differ from OCC_PORT");
        }
        let auth_base_url = pick("OCC_AUTH_BASE_URL", file.auth_base_url.take())
            .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
        let (public_origin, _) =
            origin_of(&auth_base_url).map_err(|e| anyhow!("OCC_AUTH_BASE_URL: {e}"))?;
        let auth_secret = pick("OCC_AUTH_SECRET", file.auth_secret.take()).ok_or_else(|| {
            anyhow!(
                "OCC_AUTH_SECRET is required (at least 32 characters, e.g. `openssl rand -hex 32`)"
            )
        })?;
        if auth_secret.len() < 32 {
            bail!("OCC_AUTH_SECRET must have at least 32 characters");
        }
        let session_ttl_seconds = file.session_ttl_seconds.unwrap_or(12 * 3600);
        if !(60..=30 * 24 * 3600).contains(&session_ttl_seconds) {
            bail!("session_ttl_seconds must be between 60 and 2592000");
        }
        Ok(Self {
            platform,
            host,
            port,
            public_origin,
            auth_secret,
            session_ttl_seconds,
        })
    }

    /// Whether cookies are `Secure` (https base URL).
    pub fn secure_cookies(&self) -> bool {
        self.public_origin.starts_with("https://")
    }
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
            max_attempts: u32::try_from(positive(
                env,
                "OCC_WORKER_MAX_ATTEMPTS",
                file.worker_max_attempts,
                5,
            )?)
            .map_err(|_| anyhow!("OCC_WORKER_MAX_ATTEMPTS is too large"))?,
            convergence_timeout: ms(
                "OCC_WORKER_CONVERGENCE_TIMEOUT_MS",
                file.worker_convergence_timeout_ms,
                900_000,
            )?,
            concurrency: usize::try_from(positive(
                env,
                "OCC_WORKER_CONCURRENCY",
                file.worker_concurrency,
                4,
            )?)
            .map_err(|_| anyhow!("OCC_WORKER_CONCURRENCY is too large"))?,
            recover_batch: 100,
        };
        if worker.lease < Duration::from_millis(300) {
            bail!("OCC_WORKER_LEASE_DURATION_MS must be at least 300");
        }
        Ok(Self { platform, worker })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn minimal_settings_with_a_data_dir() {
        let env = env_of(&[
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/occ-settings-test"),
            ("OCC_AUTH_SECRET", SECRET),
        ]);
        let s = ServerSettings::load(&env).unwrap();
        assert_eq!(s.port, 3000);
        assert_eq!(s.public_origin, "http://127.0.0.1:3000");
        assert_eq!(
            s.platform.configurations,
            ConfigurationStore::Filesystem {
                root: PathBuf::from("/tmp/occ-settings-test/configurations")
            }
        );
        assert_eq!(s.platform.kubernetes, None);
        assert_eq!(
            s.platform.compute.root,
            PathBuf::from("/tmp/occ-settings-test/compute")
        );
        assert_eq!(
            s.platform.compute.runtime_root,
            PathBuf::from("/tmp/occ-settings-test/runtime")
        );
        assert_eq!(s.platform.compute.port_range, 28000..=28999);
        assert_eq!(s.platform.metrics, None);
        assert!(!s.secure_cookies());
        let w = WorkerProcessSettings::load(&env).unwrap();
        assert_eq!(w.worker.lease, Duration::from_secs(5));
        assert_eq!(w.worker.max_attempts, 5);
    }

    #[test]
    fn the_kubernetes_drivers_settings() {
        let env = env_of(&[
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_CONFIGURATION_DRIVER", "kubernetes"),
            ("OCC_SECRET_DRIVER", "kubernetes"),
            ("OCC_KUBERNETES_AUTH", "kubeconfig"),
            ("OCC_KUBECONFIG", "/etc/occ/kubeconfig"),
            ("OCC_KUBERNETES_CONTEXT", "prod"),
            ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ-system/occ-api"),
            (
                "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
                "occ-system/occ-worker",
            ),
        ]);
        let w = WorkerProcessSettings::load(&env).unwrap();
        assert_eq!(w.platform.configurations, ConfigurationStore::Kubernetes);
        assert_eq!(w.platform.secrets, SecretStore::Kubernetes);
        let k = w.platform.kubernetes.expect("kubernetes settings");
        assert_eq!(
            k.auth,
            occ_drivers::kubernetes::KubernetesAuth::Kubeconfig {
                path: PathBuf::from("/etc/occ/kubeconfig"),
                context: "prod".into()
            }
        );
        assert_eq!(k.api_service_account, "occ-system/occ-api".parse().unwrap());
        assert_eq!(
            k.worker_service_account,
            Some("occ-system/occ-worker".parse().unwrap())
        );
        let in_cluster = env_of(&[
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_SECRET_DRIVER", "kubernetes"),
            ("OCC_KUBERNETES_AUTH", "in-cluster"),
            ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ/api"),
        ]);
        let w = WorkerProcessSettings::load(&in_cluster).unwrap();
        assert!(matches!(
            w.platform.configurations,
            ConfigurationStore::Filesystem { .. }
        ));
        let k = w.platform.kubernetes.expect("kubernetes settings");
        assert_eq!(k.auth, occ_drivers::kubernetes::KubernetesAuth::InCluster);
        assert_eq!(k.worker_service_account, None);
    }

    #[test]
    fn the_kubernetes_compute_driver_settings() {
        let base = [
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_COMPUTE_DRIVER", "kubernetes"),
            ("OCC_KUBERNETES_AUTH", "in-cluster"),
            ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ-system/occ-api"),
            (
                "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
                "occ-system/occ-worker",
            ),
            (
                "OCC_KUBERNETES_GATEWAY_IMAGE",
                "registry.example/occ@sha256:abc",
            ),
        ];
        let w = WorkerProcessSettings::load(&env_of(&base)).unwrap();
        let k = w.platform.compute.kubernetes.expect("kubernetes compute");
        assert_eq!(k.image, "registry.example/occ@sha256:abc");
        assert_eq!(
            (
                k.runtime_dir.as_str(),
                k.occ_binary.as_str(),
                k.state_storage.as_str()
            ),
            ("/opt/occ/runtime", "/usr/local/bin/occ", "10Gi")
        );
        assert_eq!(k.activation_timeout, Duration::from_secs(300));
        assert!(w.platform.kubernetes.is_some());
        for (drop, name) in [
            (
                "OCC_KUBERNETES_GATEWAY_IMAGE",
                "OCC_KUBERNETES_GATEWAY_IMAGE",
            ),
            (
                "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
                "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
            ),
            ("OCC_KUBERNETES_AUTH", "OCC_KUBERNETES_AUTH"),
        ] {
            let pairs: Vec<_> = base.iter().copied().filter(|(k, _)| *k != drop).collect();
            let err = WorkerProcessSettings::load(&env_of(&pairs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err}");
        }
        let mut bad = base.to_vec();
        bad.push(("OCC_KUBERNETES_STATE_STORAGE", "lots"));
        let err = WorkerProcessSettings::load(&env_of(&bad))
            .unwrap_err()
            .to_string();
        assert!(err.contains("OCC_KUBERNETES_STATE_STORAGE"), "{err}");
        assert_eq!(k.tenant_quota, None);
        let mut quota = base.to_vec();
        quota.push((
            "OCC_KUBERNETES_TENANT_QUOTA",
            "pods=20, requests.cpu=8,requests.memory=32Gi,requests.storage=0.5Ti",
        ));
        let w = WorkerProcessSettings::load(&env_of(&quota)).unwrap();
        let hard = w.platform.compute.kubernetes.unwrap().tenant_quota.unwrap();
        assert_eq!(
            hard.hard()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            [
                "pods=20",
                "requests.cpu=8",
                "requests.memory=32Gi",
                "requests.storage=0.5Ti"
            ]
        );
        for (bad, why) in [
            ("limits.cpu=4", "no CPU limit"),
            ("pods=20,pods=30", "twice"),
            ("nodes=3", "is not one of"),
            ("pods", "resource=quantity"),
            ("requests.memory=32GB", "quantity"),
            ("requests.cpu=.5", "quantity"),
            ("requests.cpu=", "quantity"),
        ] {
            let mut pairs = base.to_vec();
            pairs.push(("OCC_KUBERNETES_TENANT_QUOTA", bad));
            let err = WorkerProcessSettings::load(&env_of(&pairs))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("OCC_KUBERNETES_TENANT_QUOTA") && err.contains(why),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_ssh_compute_driver_settings() {
        let base = [
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_COMPUTE_DRIVER", "ssh"),
            ("OCC_SSH_ADDRESS", "host.example.com"),
            ("OCC_SSH_IDENTITY_FILE", "/etc/occ/id"),
            ("OCC_SSH_KNOWN_HOSTS_FILE", "/etc/occ/known_hosts"),
        ];
        let w = WorkerProcessSettings::load(&env_of(&base)).unwrap();
        let ssh = w.platform.compute.ssh.expect("ssh settings");
        assert_eq!(
            (ssh.port, ssh.user.as_str(), ssh.bind_lan),
            (22, "root", false)
        );
        assert_eq!(ssh.remote_occ, PathBuf::from("/usr/local/bin/occ"));
        assert_eq!(ssh.remote_root, PathBuf::from("/var/lib/occ/compute"));
        assert_eq!(ssh.port_range, 28000..=28999);
        assert_eq!(ssh.connect_timeout, Duration::from_secs(10));
        assert_eq!(ssh.account_prefix, "occ-agent");
        assert_eq!(ssh.supervisor, SupervisorChoice::Auto);
        assert_eq!(ssh.systemd_unit_dir, PathBuf::from("/etc/systemd/system"));
        let mut env = base.to_vec();
        env.push(("OCC_SSH_SUPERVISOR", "detached"));
        env.push(("OCC_SSH_SYSTEMD_UNIT_DIR", "/run/systemd/system"));
        let ssh = WorkerProcessSettings::load(&env_of(&env))
            .unwrap()
            .platform
            .compute
            .ssh
            .expect("ssh settings");
        assert_eq!(ssh.supervisor, SupervisorChoice::Detached);
        assert_eq!(ssh.systemd_unit_dir, PathBuf::from("/run/systemd/system"));
        for missing in [
            "OCC_SSH_ADDRESS",
            "OCC_SSH_IDENTITY_FILE",
            "OCC_SSH_KNOWN_HOSTS_FILE",
        ] {
            let env: Vec<_> = base
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
            assert!(err.to_string().contains(missing), "{err}");
        }
        for (name, value) in [
            ("OCC_SSH_PORT", "0"),
            ("OCC_SSH_KNOWN_HOSTS_FILE", "known_hosts"),
            ("OCC_SSH_PORT_RANGE", "80-90"),
            ("OCC_SSH_GATEWAY_BIND", "tailnet"),
            ("OCC_SSH_CONNECT_TIMEOUT_SECONDS", "0"),
            ("OCC_SSH_SUPERVISOR", "runit"),
            ("OCC_SSH_SYSTEMD_UNIT_DIR", "units"),
        ] {
            let mut env = base.to_vec();
            env.push((name, value));
            let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
        let mut env = base.to_vec();
        env[2] = ("OCC_COMPUTE_DRIVER", "nomad");
        let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
        assert!(
            err.to_string().contains("process, ssh, kubernetes"),
            "{err}"
        );
    }

    #[test]
    fn the_worker_needs_no_api_settings_and_checks_its_own() {
        let base = [
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
        ];
        assert!(WorkerProcessSettings::load(&env_of(&base)).is_ok());
        for (name, value) in [
            ("OCC_WORKER_POLL_INTERVAL_MS", "0"),
            ("OCC_WORKER_LEASE_DURATION_MS", "-5"),
            ("OCC_WORKER_MAX_ATTEMPTS", "five"),
            ("OCC_WORKER_CONVERGENCE_TIMEOUT_MS", "1e3"),
            ("OCC_PROCESS_PORT_RANGE", "80-90"),
            ("OCC_METRICS_ENABLED", "yes"),
        ] {
            let mut pairs = base.to_vec();
            pairs.push((name, value));
            let err = WorkerProcessSettings::load(&env_of(&pairs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn metrics_settings_must_be_consistent() {
        let base = [
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_AUTH_SECRET", SECRET),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = base.to_vec();
            pairs.extend_from_slice(extra);
            ServerSettings::load(&env_of(&pairs)).map(|s| s.platform.metrics)
        };
        assert_eq!(
            with(&[
                ("OCC_METRICS_ENABLED", "true"),
                ("OCC_METRICS_HOST", "127.0.0.1"),
                ("OCC_METRICS_PORT", "9464")
            ])
            .unwrap(),
            Some("127.0.0.1:9464".parse().unwrap())
        );
        for (extra, name) in [
            (&[("OCC_METRICS_PORT", "9464")][..], "OCC_METRICS_ENABLED"),
            (&[("OCC_METRICS_ENABLED", "true")][..], "OCC_METRICS_HOST"),
            (
                &[
                    ("OCC_METRICS_ENABLED", "true"),
                    ("OCC_METRICS_HOST", "127.0.0.1"),
                    ("OCC_METRICS_PORT", "3000"),
                ][..],
                "OCC_METRICS_PORT",
            ),
        ] {
            let err = with(extra).unwrap_err().to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn errors_name_the_setting() {
        let cases: [(&[(&str, &str)], &str); 14] = [
            (&[], "OCC_DATABASE_URL"),
            (&[("OCC_DATABASE_URL", "mysql://x")], "OCC_DATABASE_URL"),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_PORT", "70000"),
                ],
                "OCC_PORT",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_HOST", "localhost!"),
                ],
                "OCC_HOST",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_AUTH_SECRET", "short"),
                ],
                "OCC_AUTH_SECRET",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_AUTH_SECRET", SECRET),
                    ("OCC_AUTH_BASE_URL", "ftp://x"),
                ],
                "OCC_AUTH_BASE_URL",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_CONFIGURATION_DRIVER", "etcd"),
                ],
                "OCC_CONFIGURATION_DRIVER",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "vault"),
                ],
                "OCC_SECRET_DRIVER",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_CONFIGURATION_DRIVER", "kubernetes"),
                ],
                "OCC_KUBERNETES_AUTH",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "kubernetes"),
                    ("OCC_KUBERNETES_AUTH", "ambient"),
                ],
                "OCC_KUBERNETES_AUTH",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "kubernetes"),
                    ("OCC_KUBERNETES_AUTH", "kubeconfig"),
                    ("OCC_KUBECONFIG", "relative/config"),
                ],
                "OCC_KUBECONFIG",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "kubernetes"),
                    ("OCC_KUBERNETES_AUTH", "kubeconfig"),
                    ("OCC_KUBECONFIG", "/etc/occ/kubeconfig"),
                ],
                "OCC_KUBERNETES_CONTEXT",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "kubernetes"),
                    ("OCC_KUBERNETES_AUTH", "in-cluster"),
                ],
                "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_SECRET_DRIVER", "kubernetes"),
                    ("OCC_KUBERNETES_AUTH", "in-cluster"),
                    ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "api"),
                ],
                "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
            ),
        ];
        for (pairs, name) in cases {
            let err = ServerSettings::load(&env_of(pairs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn yaml_file_is_closed_and_env_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("occ.yaml");
        std::fs::write(&path, format!("database_url: sqlite:///tmp/f.db\nport: 4000\ndata_dir: /tmp/d\nauth_secret: {SECRET}\nworker_max_attempts: 7\n")).unwrap();
        let p = path.to_str().unwrap().to_owned();
        let s = ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p), ("OCC_PORT", "4001")]))
            .unwrap();
        assert_eq!(s.port, 4001);
        let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
        assert_eq!(w.worker.max_attempts, 7);
        std::fs::write(&path, "database_url: sqlite:///tmp/f.db\nprot: 4000\n").unwrap();
        let err = ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("prot"), "{err}");
    }

    #[test]
    fn ssh_hosts_of_particular_namespaces_come_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("occ.yaml");
        let ns = "ns_0f8fad5b-d9cb-469f-a165-70867728950e";
        std::fs::write(
            &path,
            format!(
                "database_url: sqlite:///tmp/f.db\ndata_dir: /tmp/d\ncompute_driver: ssh\n\
                 ssh_address: a.example.com\nssh_identity_file: /etc/occ/id\n\
                 ssh_known_hosts_file: /etc/occ/known_hosts\nssh_namespace_hosts:\n  {ns}:\n    \
                 address: b.example.com\n    port: 2222\n    port_range: 30000-30099\n    \
                 supervisor: systemd\n    systemd_unit_dir: /etc/systemd/occ\n"
            ),
        )
        .unwrap();
        let p = path.to_str().unwrap().to_owned();
        let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
        let ssh = w.platform.compute.ssh.expect("ssh");
        assert_eq!(ssh.address, "a.example.com");
        let b = &ssh.namespace_hosts[ns];
        assert_eq!((b.address.as_str(), b.port), ("b.example.com", 2222));
        assert_eq!(b.port_range, 30000..=30099);
        assert_eq!(b.identity_file, PathBuf::from("/etc/occ/id"), "inherited");
        assert!(b.namespace_hosts.is_empty());
        assert_eq!(b.supervisor, SupervisorChoice::Systemd);
        assert_eq!(b.systemd_unit_dir, PathBuf::from("/etc/systemd/occ"));
        assert_eq!(ssh.supervisor, SupervisorChoice::Auto, "the default host's");
        for (bad, named) in [
            ("  not-an-id:\n    address: b\n", "not-an-id"),
            (&format!("  {ns}:\n    port: 22\n"), "address"),
            (
                &format!("  {ns}:\n    address: b\n    remote_root: rel\n"),
                "remote_root",
            ),
            (
                &format!("  {ns}:\n    address: b\n    supervisor: upstart\n"),
                "supervisor",
            ),
        ] {
            std::fs::write(
                &path,
                format!(
                    "database_url: sqlite:///tmp/f.db\ndata_dir: /tmp/d\ncompute_driver: ssh\n\
                     ssh_address: a\nssh_identity_file: /id\nssh_known_hosts_file: /kh\n\
                     ssh_namespace_hosts:\n{bad}"
                ),
            )
            .unwrap();
            let err = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{named}: {err}");
        }
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("https://occ.example.com").unwrap(),
            ("https://occ.example.com".into(), true)
        );
        assert_eq!(
            origin_of("http://127.0.0.1:3000/").unwrap().0,
            "http://127.0.0.1:3000"
        );
        assert!(origin_of("http://x/console").is_err());
        assert!(origin_of("http://u:p@x").is_err());
    }
}
