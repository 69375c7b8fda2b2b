//! Per-Agent Unix accounts on a Compute host: one system user and group per Agent, so Agents on
//! one host cannot read each other's directories.
//!
//! The account's name is `<prefix>-<h12(nsId:agentId)>` (at most 32 characters). Ownership is
//! recorded in `<root>/accounts/<name>.json` *before* the account is created, so a crash between
//! the marker and `useradd` leaves an account occ recognizes as its own on the next pass; a user
//! or group of that name without occ's marker (or with another Agent's) is refused, never
//! adopted. uid 0 is refused. Removal checks the marker and the live uid/gid first.

use std::path::{Path, PathBuf};

use occ_core::ReasonCode;
use occ_core::compute::{AgentTarget, ComputeError};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::failure::{ownership, unavailable};
use crate::fsutil;

/// A per-Agent account as it exists on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// The user's uid.
    pub uid: u32,
    /// The primary group's gid.
    pub gid: u32,
}

/// `accounts/<name>.json`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AccountMarker {
    driver_id: String,
    namespace_id: String,
    agent_id: String,
    user: String,
}

/// The account name of `agent` for `prefix` (a validated `[a-z_][a-z0-9_-]*`, not `root`).
pub fn account_name(prefix: &str, namespace_id: &str, agent_id: &str) -> String {
    let digest = sha2::Sha256::digest(format!("{namespace_id}:{agent_id}"));
    let prefix: String = prefix.chars().take(19).collect();
    format!("{prefix}-{}", &hex::encode(digest)[..12])
}

/// Whether `prefix` is usable as an account prefix.
pub fn valid_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    prefix != "root"
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn marker_path(root: &Path, name: &str) -> PathBuf {
    root.join("accounts").join(format!("{name}.json"))
}

fn read_marker(path: &Path) -> Result<Option<AccountMarker>, ComputeError> {
    match fsutil::read_bounded(path, 4096) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ownership(format!("{} is not ours: {e}", path.display()))),
        Ok(None) => Ok(None),
        Err(e) => Err(unavailable(format!("read {}: {e}", path.display()))),
    }
}

fn expected(driver_id: &str, namespace_id: &str, agent_id: &str, name: &str) -> AccountMarker {
    AccountMarker {
        driver_id: driver_id.to_owned(),
        namespace_id: namespace_id.to_owned(),
        agent_id: agent_id.to_owned(),
        user: name.to_owned(),
    }
}

fn lookup_user(name: &str) -> Result<Option<nix::unistd::User>, ComputeError> {
    nix::unistd::User::from_name(name)
        .map_err(|e| unavailable(format!("cannot look up user {name}: {e}")))
}

fn lookup_group(name: &str) -> Result<Option<nix::unistd::Group>, ComputeError> {
    nix::unistd::Group::from_name(name)
        .map_err(|e| unavailable(format!("cannot look up group {name}: {e}")))
}

async fn run(program: &str, args: &[&str]) -> Result<(), ComputeError> {
    let output = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| unavailable(format!("cannot run {program}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr: String = stderr.chars().take(512).collect();
    Err(unavailable(format!(
        "{program} {} failed ({}): {}",
        args.join(" "),
        output.status,
        stderr.trim()
    )))
}

/// `userdel NAME`, waiting out the last processes of a workload that was just stopped: userdel
/// refuses (exit 8) while any process still runs as the user, and a stopped unit's processes can
/// take a moment to be reaped.
async fn remove_user(name: &str) -> Result<(), ComputeError> {
    const USER_BUSY: i32 = 8;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let output = tokio::process::Command::new("userdel")
            .arg(name)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| unavailable(format!("cannot run userdel: {e}")))?;
        if output.status.success() {
            return Ok(());
        }
        if output.status.code() == Some(USER_BUSY) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            continue;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr: String = stderr.chars().take(512).collect();
        return Err(unavailable(format!(
            "userdel {name} failed ({}): {}",
            output.status,
            stderr.trim()
        )));
    }
}

/// The per-Agent accounts of one host root and Driver, named with one prefix.
#[derive(Debug, Clone)]
pub struct Accounts {
    root: PathBuf,
    driver_id: String,
    prefix: String,
}

impl Accounts {
    /// The accounts recorded under `root` (in `accounts/`) for Driver `driver_id`, named
    /// `<prefix>-…` (a prefix [`valid_prefix`] accepts).
    pub fn new(root: PathBuf, driver_id: String, prefix: String) -> Self {
        Self {
            root,
            driver_id,
            prefix,
        }
    }

    /// The account name of an Agent ([`account_name`] with this prefix).
    pub fn name(&self, namespace_id: &str, agent_id: &str) -> String {
        account_name(&self.prefix, namespace_id, agent_id)
    }

    /// Creates (or verifies) the Agent's account. `home` is recorded as the user's home directory.
    pub async fn ensure(&self, agent: &AgentTarget, home: &Path) -> Result<Account, ComputeError> {
        let root = self.root.as_path();
        let (ns, id) = (agent.namespace_id.as_str(), agent.agent_id.as_str());
        let name = self.name(ns, id);
        let path = marker_path(root, &name);
        let want = expected(&self.driver_id, ns, id, &name);
        match read_marker(&path)? {
            Some(marker) if marker == want => {}
            Some(_) => {
                return Err(ownership(format!(
                    "account {name} belongs to another Agent ({})",
                    path.display()
                )));
            }
            None => {
                if lookup_user(&name)?.is_some() || lookup_group(&name)?.is_some() {
                    return Err(ownership(format!(
                        "a user or group named {name} exists on the host and is not occ's"
                    )));
                }
                fsutil::ensure_private_dir(&root.join("accounts"))
                    .map_err(|e| unavailable(format!("create {}: {e}", root.display())))?;
                let bytes =
                    serde_json::to_vec_pretty(&want).map_err(|e| unavailable(e.to_string()))?;
                fsutil::write_atomic(&path, &bytes, false)
                    .map_err(|e| unavailable(format!("write {}: {e}", path.display())))?;
            }
        }
        if lookup_group(&name)?.is_none() {
            run("groupadd", &["--system", &name]).await?;
        }
        if lookup_user(&name)?.is_none() {
            let home = home.to_str().ok_or_else(|| {
                ComputeError::permanent(ReasonCode::InvalidHostSettings, "the root is not UTF-8")
            })?;
            run(
                "useradd",
                &[
                    "--system",
                    "--gid",
                    &name,
                    "--home-dir",
                    home,
                    "--shell",
                    "/usr/sbin/nologin",
                    "--no-create-home",
                    &name,
                ],
            )
            .await?;
        }
        let user =
            lookup_user(&name)?.ok_or_else(|| unavailable(format!("user {name} vanished")))?;
        let group =
            lookup_group(&name)?.ok_or_else(|| unavailable(format!("group {name} vanished")))?;
        if user.uid.is_root() || group.gid.as_raw() == 0 {
            return Err(ownership(format!("account {name} has uid or gid 0")));
        }
        if user.gid != group.gid {
            return Err(ownership(format!(
                "user {name} does not have group {name} as its primary group"
            )));
        }
        Ok(Account {
            uid: user.uid.as_raw(),
            gid: group.gid.as_raw(),
        })
    }

    /// Removes the account of Agent `agent_id` of Namespace `namespace_id` if occ created it
    /// (absence is success).
    pub async fn remove(&self, namespace_id: &str, agent_id: &str) -> Result<(), ComputeError> {
        let name = self.name(namespace_id, agent_id);
        let path = marker_path(&self.root, &name);
        match read_marker(&path)? {
            None => return Ok(()),
            Some(marker) if marker == expected(&self.driver_id, namespace_id, agent_id, &name) => {}
            Some(_) => {
                return Err(ownership(format!(
                    "account {name} belongs to another Agent ({})",
                    path.display()
                )));
            }
        }
        if let Some(user) = lookup_user(&name)? {
            if user.uid.is_root() {
                return Err(ownership(format!("user {name} has uid 0")));
            }
            remove_user(&name).await?;
        }
        if lookup_group(&name)?.is_some() {
            run("groupdel", &[&name]).await?;
        }
        fsutil::remove_if_exists(&path)
            .map_err(|e| unavailable(format!("remove {}: {e}", path.display())))
    }

    /// Removes every account occ created for Agents of Namespace `namespace_id` (the retry path of
    /// a Namespace deletion whose Agent directories are already gone).
    pub async fn remove_namespace(&self, namespace_id: &str) -> Result<(), ComputeError> {
        let dir = self.root.join("accounts");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(unavailable(format!("list {}: {e}", dir.display()))),
        };
        let mut agents = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unavailable(format!("list {}: {e}", dir.display())))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            if let Some(marker) = read_marker(&entry.path())?
                && marker.driver_id == self.driver_id
                && marker.namespace_id == namespace_id
            {
                agents.push(marker.agent_id);
            }
        }
        for agent_id in agents {
            self.remove(namespace_id, &agent_id).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_distinct_and_prefixed() {
        let a = account_name("occ-agent", "ns_1", "agt_1");
        let b = account_name("occ-agent", "ns_1", "agt_2");
        assert_ne!(a, b);
        assert!(a.starts_with("occ-agent-") && a.len() == "occ-agent-".len() + 12);
        let long = account_name("abcdefghijklmnopqrstuvwxyz", "ns_1", "agt_1");
        assert!(long.len() <= 32, "{long}");
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(valid_prefix("occ-agent"));
        assert!(valid_prefix("_x1"));
        for bad in ["", "root", "Occ", "1occ", "occ agent", "occ;x", "-occ"] {
            assert!(!valid_prefix(bad), "{bad:?}");
        }
    }
}
