//! What the operator configures for the SSH Compute Driver: its hosts (address, login, key,
//! known hosts, the remote `occ`, the host settings sent with every operation) and the Driver's
//! bounds; checked before anything is contacted.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use occ_core::NamespaceId;
use occ_core::ReasonCode;
use occ_host::fsutil::safe_path;
use occ_host::wire::HostSettings;

use crate::compute::ComputeError;

/// One host, as the operator configured it (trusted settings).
#[derive(Debug, Clone)]
pub struct SshHost {
    /// Host name or address (`[A-Za-z0-9:][A-Za-z0-9.:-]*`).
    pub address: String,
    /// SSH port.
    pub port: u16,
    /// The login user (root: the host side creates one Unix user per Agent).
    pub user: String,
    /// The private key (key authentication only).
    pub identity_file: PathBuf,
    /// The `known_hosts` file holding the host's key (strict checking).
    pub known_hosts_file: PathBuf,
    /// The `occ` binary on the host.
    pub remote_occ: PathBuf,
    /// The layout, runtime, ports and accounts on the host.
    pub host: HostSettings,
}

/// Settings of the SSH Driver.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// The host Agents run on unless their Namespace has its own.
    pub host: SshHost,
    /// Hosts of particular Namespaces, by Namespace id.
    pub namespace_hosts: BTreeMap<NamespaceId, SshHost>,
    /// `ConnectTimeout` of each `ssh` run.
    pub connect_timeout: Duration,
    /// Bound on one operation end to end (then the `ssh` client is killed: transient).
    pub operation_timeout: Duration,
    /// Maintenance passes (crash detection and restart by the worker), if any.
    pub maintenance_interval: Option<Duration>,
}

pub(super) fn invalid(message: impl Into<String>) -> ComputeError {
    ComputeError::permanent(ReasonCode::InvalidHostSettings, message)
}

/// Whether `address` is a plain host name or address (it cannot be read as an ssh option).
pub fn valid_address(address: &str) -> bool {
    let mut bytes = address.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b':' || b == b'-')
}

/// Why `host` cannot be used, if it cannot (nothing is contacted).
pub(super) fn check(host: &SshHost) -> Result<(), ComputeError> {
    if !valid_address(&host.address) {
        return Err(invalid(format!(
            "host address {:?} is not a host name or address",
            host.address
        )));
    }
    if host.user.is_empty()
        || !host
            .user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        || host.user.starts_with('-')
    {
        return Err(invalid(format!(
            "ssh user {:?} is not a user name",
            host.user
        )));
    }
    for (name, path) in [
        ("identity file", &host.identity_file),
        ("known_hosts file", &host.known_hosts_file),
    ] {
        if !path.is_absolute() {
            return Err(invalid(format!(
                "the {name} {} must be absolute",
                path.display()
            )));
        }
    }
    if !safe_path(&host.remote_occ) {
        return Err(invalid(format!(
            "the remote occ path {} must be absolute, without whitespace, quotes or `..`",
            host.remote_occ.display()
        )));
    }
    if let Some(problem) = host.host.problem() {
        return Err(invalid(problem));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_cannot_be_options() {
        for good in ["127.0.0.1", "host-1.example.com", "::1", "fe80::1"] {
            assert!(valid_address(good), "{good}");
        }
        for bad in ["", "-oProxyCommand=x", "a b", "a;b", "a/b", ".x"] {
            assert!(!valid_address(bad), "{bad}");
        }
    }
}
