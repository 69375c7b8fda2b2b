//! The layout under a host's root and the rules for reading and writing it.
//!
//! ```text
//! namespaces/<nsId>/namespace.json                 ownership marker
//! namespaces/<nsId>/agents/<agentId>/agent.json    ownership marker + the Agent's port (fixed for its lifetime)
//!   gateway-token                                  the Agent's operator token (64 hex)
//!   home/  state/  state/workspace/                HOME, OPENCLAW_STATE_DIR, the persistent workspace
//!   state/workspace/.oce-workspace-setup.json      marker of an applied staged workspace setup
//!   workspace-seeded                               the workspace holds its initial files (stock or staged)
//!   revisions/<revId>/openclaw.json                immutable snapshot: the admitted document + driver-owned settings
//!   revisions/<revId>/revision.json                marker: revision number and snapshot hash
//!   current -> revisions/<revId>                   the installed revision (switched on activation)
//!   gateway.json                                   the running gateway: pid, process start time, revision, port
//!   served.json                                    the revision that answered the native handshake
//!   logs/setup.log                                 output of the workspace seeding
//!   logs/<revId>/gateway.log                       the revision's gateway log (stdout, stderr and logging.file),
//!   logs/<revId>/gateway.log.1, .generation        its rotated copy and rotation count (see `logs`);
//!                                                  the last few revisions' directories are kept
//! ```
//!
//! Directories are 0700 and files 0600; ids are occ's validated ids. Markers are small JSON
//! files that are refused (`OWNERSHIP_CONFLICT`) when they are not occ's. With per-Agent
//! accounts, `home/`, `state/`, `tmp/` and each `logs/<revId>/` belong to the Agent's user, the
//! Agent's directory, `revisions/` and `logs/` stay root's with mode 0750 for the Agent's group,
//! and the directories above are 0711. Agents created before per-revision logs keep their old
//! `logs/gateway.log` (never read again).

use std::ops::RangeInclusive;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::{AgentTarget, ComputeError, SecretText};
use occ_core::{AgentId, NamespaceId, RevisionId};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::account::Account;
use crate::failure::{io_error, ownership, unavailable};
use crate::fsutil;
use crate::process::port_is_free;

/// Largest marker file read.
const MARKER_LIMIT: u64 = 64 * 1024;

/// `namespace.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NamespaceMarker {
    pub driver_id: String,
    pub namespace_id: String,
    pub namespace_name: String,
}

/// `agent.json`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AgentMarker {
    pub driver_id: String,
    pub namespace_id: String,
    pub agent_id: String,
    pub service_principal_id: String,
    pub port: u16,
    /// The port of the app-server of a dedicated Agent's harness (allocated on its first
    /// dedicated revision, then fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_port: Option<u16>,
}

/// `revision.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RevisionMarker {
    pub revision_id: String,
    pub revision: u64,
    pub configuration_hash: String,
}

/// `served.json`
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServedMarker {
    revision_id: String,
}

/// Where a host keeps its Agents: the root, the Driver identity its markers carry, the port
/// range Agents get their ports from, and whether Agents have their own accounts.
pub(crate) struct Layout {
    root: PathBuf,
    driver_id: String,
    port_range: RangeInclusive<u16>,
    /// With per-Agent accounts the directories above each Agent are traversable (0711).
    accounts: bool,
    /// Serializes port allocation within this process (a file lock covers other processes).
    allocation: Mutex<()>,
}

impl Layout {
    /// The layout under `root`; creates the root (0700, or 0711 with accounts).
    pub fn new(
        root: PathBuf,
        driver_id: String,
        port_range: RangeInclusive<u16>,
        accounts: bool,
    ) -> Result<Self, ComputeError> {
        create_dir(&root)?;
        let layout = Self {
            root,
            driver_id,
            port_range,
            accounts,
            allocation: Mutex::new(()),
        };
        layout.traversable(&layout.root)?;
        Ok(layout)
    }

    /// The identity recorded in (and checked against) every marker.
    pub fn driver_id(&self) -> &str {
        &self.driver_id
    }

    /// With accounts, lets other users pass through `dir` (0711) without listing it.
    pub fn traversable(&self, dir: &Path) -> Result<(), ComputeError> {
        if self.accounts {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| io_error("chmod", dir, e))?;
        }
        Ok(())
    }

    /// `namespaces/`
    pub fn namespaces_dir(&self) -> PathBuf {
        self.root.join("namespaces")
    }

    /// `namespaces/<nsId>`
    pub fn namespace_dir(&self, ns: &NamespaceId) -> PathBuf {
        self.namespaces_dir().join(ns.as_str())
    }

    /// `namespaces/<nsId>/agents/<agentId>`
    pub fn agent_dir(&self, ns: &NamespaceId, agent: &AgentId) -> PathBuf {
        self.namespace_dir(ns).join("agents").join(agent.as_str())
    }

    /// The verified marker of an Agent's directory, if the directory exists.
    pub fn agent_marker(&self, agent: &AgentTarget) -> Result<Option<AgentMarker>, ComputeError> {
        let dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        let Some(marker) = read_json::<AgentMarker>(&dir.join("agent.json"))? else {
            if dir.exists() {
                return Err(ownership(format!(
                    "{} exists without an agent marker",
                    dir.display()
                )));
            }
            return Ok(None);
        };
        if marker.driver_id != self.driver_id
            || marker.namespace_id != agent.namespace_id.as_str()
            || marker.agent_id != agent.agent_id.as_str()
            || marker.service_principal_id != agent.service_principal_id.as_str()
        {
            return Err(ownership(format!(
                "{} belongs to another Agent or Driver",
                dir.display()
            )));
        }
        Ok(Some(marker))
    }

    /// Creates the Agent's directory with a port allocated for its lifetime, if absent. With an
    /// account, the directory is handed over to it ([`hand_over_agent_dir`]).
    pub async fn ensure_agent(
        &self,
        agent: &AgentTarget,
        account: Option<Account>,
    ) -> Result<AgentMarker, ComputeError> {
        if let Some(marker) = self.agent_marker(agent)? {
            return Ok(marker);
        }
        let ns_dir = self.namespace_dir(&agent.namespace_id);
        if !ns_dir.join("namespace.json").exists() {
            return Err(ComputeError::permanent(
                ReasonCode::NamespaceNotReady,
                "the Namespace was never prepared on this Compute",
            ));
        }
        let _turn = self.allocation.lock().await;
        let lock = self.lock_file()?;
        // Another process may have created it while we waited for the lock.
        if let Some(marker) = self.agent_marker(agent)? {
            return Ok(marker);
        }
        let port = self.allocate_port()?;
        let dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        let staging = dir.with_extension(format!("creating-{}", std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io_error("remove", &staging, e))?;
        }
        for sub in [
            "",
            "home",
            "state",
            "state/workspace",
            "revisions",
            "logs",
            "tmp",
        ] {
            create_dir(&staging.join(sub))?;
        }
        let token = hex::encode(rand::random::<[u8; 32]>());
        write_new(&staging.join("gateway-token"), token.as_bytes())?;
        let marker = AgentMarker {
            driver_id: self.driver_id.clone(),
            namespace_id: agent.namespace_id.to_string(),
            agent_id: agent.agent_id.to_string(),
            service_principal_id: agent.service_principal_id.to_string(),
            port,
            harness_port: None,
        };
        write_json(&staging.join("agent.json"), &marker)?;
        hand_over_agent_dir(&staging, account)?;
        std::fs::rename(&staging, &dir).map_err(|e| io_error("install", &dir, e))?;
        fsutil::sync_dir(dir.parent().unwrap_or(&self.root))
            .map_err(|e| io_error("sync", &dir, e))?;
        drop(lock);
        Ok(marker)
    }

    /// The Agent's harness port, allocated (and recorded in its marker) on first use.
    pub async fn ensure_harness_port(&self, agent: &AgentTarget) -> Result<u16, ComputeError> {
        let found = |marker: Option<AgentMarker>| {
            marker.ok_or_else(|| unavailable("the Agent directory vanished"))
        };
        if let Some(port) = found(self.agent_marker(agent)?)?.harness_port {
            return Ok(port);
        }
        let _turn = self.allocation.lock().await;
        let lock = self.lock_file()?;
        let mut marker = found(self.agent_marker(agent)?)?;
        if let Some(port) = marker.harness_port {
            return Ok(port);
        }
        let port = self.allocate_port()?;
        marker.harness_port = Some(port);
        let dir = self.agent_dir(&agent.namespace_id, &agent.agent_id);
        write_json(&dir.join("agent.json"), &marker)?;
        drop(lock);
        Ok(port)
    }

    fn lock_file(&self) -> Result<std::fs::File, ComputeError> {
        let path = self.root.join(".allocation.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error("open", &path, e))?;
        file.lock().map_err(|e| io_error("lock", &path, e))?;
        Ok(file)
    }

    /// The lowest port in the range that no Agent owns and nothing listens on now.
    fn allocate_port(&self) -> Result<u16, ComputeError> {
        let mut taken = std::collections::BTreeSet::new();
        for agent in self.agent_dirs()? {
            if let Some(marker) = read_json::<AgentMarker>(&agent.join("agent.json"))? {
                taken.insert(marker.port);
                taken.extend(marker.harness_port);
            }
        }
        self.port_range
            .clone()
            .find(|p| !taken.contains(p) && port_is_free(*p))
            .ok_or_else(|| {
                ComputeError::permanent(
                    ReasonCode::GatewayPortsExhausted,
                    format!(
                        "no free port left in {}-{}",
                        self.port_range.start(),
                        self.port_range.end()
                    ),
                )
            })
    }

    /// Every Agent directory under the root.
    fn agent_dirs(&self) -> Result<Vec<PathBuf>, ComputeError> {
        agent_dirs(&self.root)
    }
}

/// Every Agent directory under `root` (`namespaces/*/agents/*`).
pub(crate) fn agent_dirs(root: &Path) -> Result<Vec<PathBuf>, ComputeError> {
    let mut out = Vec::new();
    for ns in read_dir(&root.join("namespaces"))? {
        out.extend(read_dir(&ns.join("agents"))?);
    }
    Ok(out)
}

/// `revisions/<revId>` of an Agent directory.
pub(crate) fn revision_dir(agent_dir: &Path, rev: &RevisionId) -> PathBuf {
    agent_dir.join("revisions").join(rev.as_str())
}

/// `logs/<revId>` of an Agent directory: where the revision's gateway output goes.
pub(crate) fn revision_log_dir(agent_dir: &Path, rev: &RevisionId) -> PathBuf {
    agent_dir.join("logs").join(rev.as_str())
}

/// Creates the revision's log directory (`logs/<revId>`) if absent. With an account it is the
/// Agent's (its gateway writes `logging.file` there), while `logs/` stays root's (0750 for the
/// Agent's group), so the Agent's user cannot swap a revision's directory for a link to one
/// root would then read, rotate or append to. Agents created before per-revision logs have a
/// `logs/` of their own user: it is taken back first.
pub(crate) fn ensure_revision_log_dir(
    agent_dir: &Path,
    rev: &RevisionId,
    account: Option<Account>,
) -> Result<PathBuf, ComputeError> {
    let logs = agent_dir.join("logs");
    create_dir(&logs)?;
    if let Some(account) = account {
        // `logs/` sits in the root-owned Agent directory: its user cannot replace it meanwhile.
        std::os::unix::fs::lchown(&logs, Some(0), Some(account.gid))
            .map_err(|e| io_error("chown", &logs, e))?;
        std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o750))
            .map_err(|e| io_error("chmod", &logs, e))?;
    }
    let dir = revision_log_dir(agent_dir, rev);
    create_dir(&dir)?;
    if let Some(account) = account {
        std::os::unix::fs::lchown(&dir, Some(account.uid), Some(account.gid))
            .map_err(|e| io_error("chown", &dir, e))?;
    }
    Ok(dir)
}

/// The Agent's operator token (`gateway-token`: 64 hex).
pub(crate) fn token(agent_dir: &Path) -> Result<SecretText, ComputeError> {
    let path = agent_dir.join("gateway-token");
    let bytes = fsutil::read_bounded(&path, 256)
        .map_err(|e| io_error("read", &path, e))?
        .ok_or_else(|| ownership(format!("{} is missing", path.display())))?;
    let token = String::from_utf8(bytes)
        .ok()
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| ownership(format!("{} is malformed", path.display())))?;
    Ok(SecretText::new(token))
}

/// Whether the Agent's gateway answers a native `hello-ok` on `port` with the Agent's token
/// within `wait`.
pub(crate) async fn answers(
    agent_dir: &Path,
    port: u16,
    wait: Duration,
) -> Result<bool, ComputeError> {
    let token = token(agent_dir)?;
    let endpoint = occ_gateway::Endpoint::loopback(port, token.expose());
    Ok(occ_gateway::wait_ready(&endpoint, wait).await.is_ok())
}

/// Points `current` at `rev` (atomically).
pub(crate) fn switch_current(agent_dir: &Path, rev: &RevisionId) -> Result<(), ComputeError> {
    let link = agent_dir.join("current");
    let temp = agent_dir.join(format!(".current-{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    std::os::unix::fs::symlink(Path::new("revisions").join(rev.as_str()), &temp)
        .map_err(|e| io_error("link", &temp, e))?;
    std::fs::rename(&temp, &link).map_err(|e| io_error("switch", &link, e))?;
    fsutil::sync_dir(agent_dir).map_err(|e| io_error("sync", agent_dir, e))
}

/// The revision `current` points at, verified to be one of ours.
pub(crate) fn current(agent_dir: &Path) -> Result<Option<String>, ComputeError> {
    let link = agent_dir.join("current");
    match std::fs::read_link(&link) {
        Ok(target) => {
            let name = target
                .strip_prefix("revisions")
                .ok()
                .and_then(|p| p.to_str())
                .filter(|n| n.parse::<RevisionId>().is_ok())
                .ok_or_else(|| {
                    ownership(format!("{} points outside revisions/", link.display()))
                })?;
            Ok(Some(name.to_owned()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", &link, e)),
    }
}

/// Whether `rev` is the installed revision (`current`).
pub(crate) fn is_current(agent_dir: &Path, rev: &RevisionId) -> Result<bool, ComputeError> {
    Ok(current(agent_dir)?.as_deref() == Some(rev.as_str()))
}

/// Whether `rev` is installed and is the revision that last answered the native handshake.
pub(crate) fn installed_and_served(
    agent_dir: &Path,
    rev: &RevisionId,
) -> Result<bool, ComputeError> {
    if !is_current(agent_dir, rev)? {
        return Ok(false);
    }
    let served = read_json::<ServedMarker>(&agent_dir.join("served.json"))?;
    Ok(served.is_some_and(|s| s.revision_id == rev.as_str()))
}

/// Records that `rev` answered the native handshake (`served.json`).
pub(crate) fn mark_served(agent_dir: &Path, rev: &RevisionId) -> Result<(), ComputeError> {
    write_json(
        &agent_dir.join("served.json"),
        &ServedMarker {
            revision_id: rev.to_string(),
        },
    )
}

/// Creates a private directory; a link or a non-directory there is not ours.
pub(crate) fn create_dir(path: &Path) -> Result<(), ComputeError> {
    fsutil::ensure_private_dir(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => ownership(e.to_string()),
        _ => io_error("create", path, e),
    })
}

/// The subdirectories of `path` named by occ ids (none when it does not exist).
pub(crate) fn read_dir(path: &Path) -> Result<Vec<PathBuf>, ComputeError> {
    match std::fs::read_dir(path) {
        Ok(entries) => {
            let mut out = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| io_error("list", path, e))?;
                // occ ids only: staging directories and lock files are not entries.
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || name.contains(".creating-") {
                    continue;
                }
                if entry
                    .file_type()
                    .map_err(|e| io_error("stat", &entry.path(), e))?
                    .is_dir()
                {
                    out.push(entry.path());
                }
            }
            out.sort();
            Ok(out)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_error("list", path, e)),
    }
}

/// Reads a marker; one that does not parse is not ours.
pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(
    path: &Path,
) -> Result<Option<T>, ComputeError> {
    match fsutil::read_bounded(path, MARKER_LIMIT) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ownership(format!("{} is not ours: {e}", path.display()))),
        Ok(None) => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

/// Writes a marker (atomically).
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ComputeError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| unavailable(e.to_string()))?;
    fsutil::write_atomic(path, &bytes, false).map_err(|e| io_error("write", path, e))
}

/// Creates a file that must not exist yet.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ComputeError> {
    fsutil::write_atomic(path, bytes, true).map_err(|e| io_error("create", path, e))
}

/// Removes a file; a missing one is fine.
pub(crate) fn remove_file(path: &Path) -> Result<(), ComputeError> {
    fsutil::remove_if_exists(path).map_err(|e| io_error("remove", path, e))
}

/// Removes a directory tree; a missing one is fine.
pub(crate) fn remove_dir(path: &Path) -> Result<(), ComputeError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("remove", path, e)),
    }
}

/// Writes `bytes` to `path` (0600, atomically) unless it holds exactly them; with `group`, the
/// file is then root's with mode 0640 for that group.
pub(crate) fn write_if_changed(
    path: &Path,
    bytes: &[u8],
    group: Option<u32>,
) -> Result<(), ComputeError> {
    let current =
        fsutil::read_bounded(path, MARKER_LIMIT).map_err(|e| io_error("read", path, e))?;
    if current.as_deref() != Some(bytes) {
        fsutil::write_atomic(path, bytes, false).map_err(|e| io_error("write", path, e))?;
    }
    if let Some(gid) = group {
        share_with_group(path, gid, 0o640)?;
    }
    Ok(())
}

/// Hands a freshly built Agent directory (in the root-owned `agents/`, nothing in it writable by
/// anyone but root so far) to the Agent's account: `home/`, `state/` (the workspace) and `tmp/`
/// become the Agent's, children first, so nothing can be swapped for a link while this runs; the
/// directory itself, `revisions/` and `logs/` stay root's, readable by the Agent's group only
/// (0750), so the markers, the token (0600), the snapshots and which directory holds a
/// revision's log cannot be changed by the Agent (each `logs/<revId>/` is the Agent's, see
/// [`ensure_revision_log_dir`]).
fn hand_over_agent_dir(dir: &Path, account: Option<Account>) -> Result<(), ComputeError> {
    let Some(account) = account else {
        return Ok(());
    };
    for sub in ["state/workspace", "state", "home", "tmp"] {
        let path = dir.join(sub);
        std::os::unix::fs::lchown(&path, Some(account.uid), Some(account.gid))
            .map_err(|e| io_error("chown", &path, e))?;
    }
    share_with_group(&dir.join("revisions"), account.gid, 0o750)?;
    share_with_group(&dir.join("logs"), account.gid, 0o750)?;
    share_with_group(dir, account.gid, 0o750)
}

/// Gives a root-owned path in a root-owned directory to group `gid` with `mode`.
pub(crate) fn share_with_group(path: &Path, gid: u32, mode: u32) -> Result<(), ComputeError> {
    std::os::unix::fs::lchown(path, None, Some(gid)).map_err(|e| io_error("chown", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_error("chmod", path, e))
}

/// A log file (see [`open_log`]) as a child's stdout and stderr.
pub(crate) fn open_output(
    path: &Path,
    account: Option<Account>,
) -> Result<(Stdio, Stdio), ComputeError> {
    let log = open_log(path, account)?;
    let log_err = log.try_clone().map_err(|e| io_error("open", path, e))?;
    Ok((Stdio::from(log), Stdio::from(log_err)))
}

/// Opens (creating) a log file for appending. With an account the log directory is the Agent's:
/// a link or anything but a plain file with one name, owned by root (just created) or the Agent,
/// is refused before the file is handed to the Agent.
fn open_log(path: &Path, account: Option<Account>) -> Result<std::fs::File, ComputeError> {
    use std::os::unix::fs::MetadataExt as _;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true).mode(0o600);
    if account.is_some() {
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => ownership(format!("{} is a symbolic link", path.display())),
        _ => io_error("open", path, e),
    })?;
    if let Some(account) = account {
        let meta = file.metadata().map_err(|e| io_error("stat", path, e))?;
        if !meta.is_file() || meta.nlink() != 1 || (meta.uid() != 0 && meta.uid() != account.uid) {
            return Err(ownership(format!(
                "{} is not a plain log file of the Agent",
                path.display()
            )));
        }
        std::os::unix::fs::fchown(&file, Some(account.uid), Some(account.gid))
            .map_err(|e| io_error("chown", path, e))?;
    }
    Ok(file)
}
/// When `path` was last modified (what occ wrote right after the start it records).
pub(crate) fn modified_at(path: &Path) -> Result<Option<occ_core::Timestamp>, ComputeError> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta
            .modified()
            .ok()
            .map(|t| occ_core::Timestamp::from_datetime(t.into()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("reading", path, e)),
    }
}
