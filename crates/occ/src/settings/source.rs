//! Where settings come from and the rules every value follows: the YAML file
//! (`OCC_CONFIG_PATH`, closed: unknown keys are refused) under the `OCC_*` environment, paths,
//! positive numbers, port ranges, origins; and occ's own `PATH`, which the programs it runs
//! search.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow, bail};
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
    pub(super) host: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) database_url: Option<String>,
    pub(super) data_dir: Option<PathBuf>,
    pub(super) configuration_driver: Option<String>,
    pub(super) configuration_root: Option<PathBuf>,
    pub(super) secret_driver: Option<String>,
    pub(super) secret_root: Option<PathBuf>,
    pub(super) secret_key_file: Option<PathBuf>,
    pub(super) kubernetes_auth: Option<String>,
    pub(super) kubeconfig: Option<PathBuf>,
    pub(super) kubernetes_context: Option<String>,
    pub(super) kubernetes_api_service_account: Option<String>,
    pub(super) kubernetes_worker_service_account: Option<String>,
    pub(super) kubernetes_gateway_image: Option<String>,
    pub(super) kubernetes_gateway_runtime_dir: Option<String>,
    pub(super) kubernetes_gateway_occ: Option<String>,
    pub(super) kubernetes_state_storage: Option<String>,
    pub(super) kubernetes_storage_class: Option<String>,
    pub(super) kubernetes_runtime_class: Option<String>,
    pub(super) kubernetes_tenant_quota: Option<String>,
    pub(super) kubernetes_activation_timeout_seconds: Option<u64>,
    pub(super) kubernetes_harness_storage: Option<String>,
    pub(super) kubernetes_harness_token_audience: Option<String>,
    pub(super) kubernetes_model_egress: Option<String>,
    pub(super) compute_driver: Option<String>,
    pub(super) process_root: Option<PathBuf>,
    pub(super) openclaw_runtime: Option<PathBuf>,
    pub(super) process_port_range: Option<String>,
    pub(super) process_isolation: Option<String>,
    pub(super) process_memory_limit_mib: Option<u64>,
    pub(super) process_pids_limit: Option<u64>,
    pub(super) process_open_files_limit: Option<u64>,
    pub(super) process_resident_limit_mib: Option<u64>,
    pub(super) ssh_address: Option<String>,
    pub(super) ssh_port: Option<u16>,
    pub(super) ssh_user: Option<String>,
    pub(super) ssh_identity_file: Option<PathBuf>,
    pub(super) ssh_known_hosts_file: Option<PathBuf>,
    pub(super) ssh_connect_timeout_seconds: Option<u64>,
    pub(super) ssh_remote_occ: Option<PathBuf>,
    pub(super) ssh_remote_root: Option<PathBuf>,
    pub(super) ssh_remote_runtime: Option<PathBuf>,
    pub(super) ssh_port_range: Option<String>,
    pub(super) ssh_gateway_bind: Option<String>,
    pub(super) ssh_account_prefix: Option<String>,
    pub(super) ssh_supervisor: Option<String>,
    pub(super) ssh_systemd_unit_dir: Option<PathBuf>,
    pub(super) ssh_namespace_hosts: Option<BTreeMap<String, NamespaceHostSetting>>,
    pub(super) maintenance_interval_ms: Option<u64>,
    pub(super) auth_base_url: Option<String>,
    pub(super) auth_secret: Option<String>,
    pub(super) session_ttl_seconds: Option<u64>,
    pub(super) agent_native_admin_domain: Option<String>,
    pub(super) backends: Option<Vec<BackendSetting>>,
    pub(super) worker_poll_interval_ms: Option<u64>,
    pub(super) worker_lease_duration_ms: Option<u64>,
    pub(super) worker_max_attempts: Option<u64>,
    pub(super) worker_convergence_timeout_ms: Option<u64>,
    pub(super) worker_concurrency: Option<u64>,
    pub(super) metrics_enabled: Option<bool>,
    pub(super) metrics_host: Option<String>,
    pub(super) metrics_port: Option<u16>,
}

/// The host of one Namespace (YAML `ssh_namespace_hosts`, keyed by Namespace id); unset fields
/// are the default host's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceHostSetting {
    pub(super) address: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) user: Option<String>,
    pub(super) identity_file: Option<PathBuf>,
    pub(super) known_hosts_file: Option<PathBuf>,
    pub(super) remote_occ: Option<PathBuf>,
    pub(super) remote_root: Option<PathBuf>,
    pub(super) remote_runtime: Option<PathBuf>,
    pub(super) port_range: Option<String>,
    pub(super) supervisor: Option<String>,
    pub(super) systemd_unit_dir: Option<PathBuf>,
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
    /// `chatgpt`: the ChatGPT workspace (a UUID) whose Admin API makes ServiceAccounts'
    /// provider accounts and issues their credentials. With `adminKeyFile`, this Backend is
    /// the installation's ServiceAccount Driver.
    #[serde(default, rename = "workspaceId")]
    pub workspace_id: Option<String>,
    /// `chatgpt`: a file holding the workspace admin key (one line, absolute path).
    #[serde(default, rename = "adminKeyFile")]
    pub admin_key_file: Option<PathBuf>,
    /// `chatgpt`: lifetime of issued credentials in seconds (1 … 2592000, default 30 days).
    #[serde(default, rename = "credentialTtlSeconds")]
    pub credential_ttl_seconds: Option<u64>,
    /// `chatgpt`: the Admin API base (default `https://api.chatgpt.com/v1`).
    #[serde(default, rename = "apiBaseUrl")]
    pub api_base_url: Option<String>,
}

impl BackendSetting {
    /// Whether this Backend makes and credentials ServiceAccounts (a `chatgpt` Backend with a
    /// workspace and an admin key).
    pub fn manages_accounts(&self) -> bool {
        self.kind == "chatgpt" && (self.workspace_id.is_some() || self.admin_key_file.is_some())
    }
}

/// The environment, as a lookup function (tests pass their own).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub(super) fn load_file(env: Env<'_>) -> anyhow::Result<FileSettings> {
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

pub(super) fn absolute(name: &str, path: PathBuf) -> anyhow::Result<PathBuf> {
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
pub(super) fn positive(
    env: Env<'_>,
    name: &str,
    file: Option<u64>,
    default: u64,
) -> anyhow::Result<u64> {
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

/// [`positive`] as a narrower integer; a value too large for it is an error naming the setting.
pub(super) fn positive_as<T: TryFrom<u64>>(
    env: Env<'_>,
    name: &str,
    file: Option<u64>,
    default: u64,
) -> anyhow::Result<T> {
    T::try_from(positive(env, name, file, default)?).map_err(|_| anyhow!("{name} is too large"))
}

/// A port number (1..65535), if `text` is one.
pub(super) fn port_number(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p > 0)
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
