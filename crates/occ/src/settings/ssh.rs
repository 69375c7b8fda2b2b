//! The SSH Compute Driver's settings (`OCC_SSH_*`, and the YAML `ssh_namespace_hosts`).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use occ_host::wire::SupervisorChoice;

use super::source::{Env, FileSettings, port_number, port_range, positive};

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

/// The `OCC_SSH_*` settings of the SSH Compute Driver.
pub(super) fn ssh_settings(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<SshComputeSettings> {
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
        Some(text) => {
            port_number(&text).ok_or_else(|| anyhow!("OCC_SSH_PORT: {text:?} is not a port"))?
        }
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
