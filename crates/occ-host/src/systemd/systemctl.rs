//! `systemctl`, and the per-Agent operations on units: install (reload only on a change),
//! restart, state, stop, remove.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::ComputeError;

use super::unit::{UnitFile, UnitSpec, header, install_unit, read_unit, unit_name};
use crate::failure::unavailable;
use crate::fsutil;

/// How long one `systemctl` call may take.
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(60);

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
                    ReasonCode::SystemdUnavailable,
                    format!("{what} did not finish in {SYSTEMCTL_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| {
                ComputeError::transient(ReasonCode::SystemdUnavailable, format!("{what}: {e}"))
            })
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
            ReasonCode::SystemdFailed,
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
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::systemd::unit::spec;

    /// A fake `systemctl`, first on the `PATH` the driver runs `systemctl` with, that records
    /// its arguments (one call per line) and starts or stops nothing; `is-active` answers what
    /// the test wrote to `state`.
    #[expect(
        clippy::disallowed_methods,
        reason = "the fake systemctl goes first on the test's own PATH"
    )]
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
            assert_eq!(err.code, ReasonCode::OwnershipConflict);
        }
        assert!(calls(dir.path()).is_empty());
        assert!(units.join(&name).exists());
    }
}
