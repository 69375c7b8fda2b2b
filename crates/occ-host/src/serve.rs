//! The host side of the SSH Compute Driver: one [`HostRequest`] executed against this machine's
//! layout by [`Host`] with per-Agent accounts, answered by one [`HostReply`]. `occ compute-host`
//! reads the request, calls [`execute`] and prints the reply.
//!
//! Operations on one host are serialized by an exclusive `flock` on `<root>/.compute-lock`,
//! held for the whole operation (the kernel releases it if the process dies); `observe` and
//! `gateway-access` do not wait for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, Convergence, Readiness, RevisionContext, RuntimeState};
use occ_core::resource::WorkspaceSetup;

use crate::host::{AccountSettings, Host, HostOptions, LocalSettings, Supervision};
use crate::sandbox::{SandboxSettings, WorkloadLimits};
use crate::systemd::{Systemctl, SystemdSupervision, hidden_by_hardening};
use crate::wire::{
    HostOp, HostReply, HostRequest, HostSettings, HostValue, SupervisorChoice, WireSetup,
};

/// What the running `occ` hands the host side (it reads its own environment; this crate does
/// not).
#[derive(Debug, Clone)]
pub struct HostProcess {
    /// The `occ` binary that runs `workspace-setup` as an Agent's user (the running one).
    pub setup_program: PathBuf,
    /// The `PATH` the host's programs search.
    pub path: OsString,
}

/// Runs one operation under the host lock.
pub async fn execute(request: HostRequest, process: HostProcess) -> HostReply {
    run(request, process).await.into()
}

async fn run(request: HostRequest, process: HostProcess) -> Result<HostValue, ComputeError> {
    let HostRequest {
        version: _,
        deadline_ms: _,
        settings,
        driver_id,
        operation,
    } = request;
    if let Some(problem) = settings.problem() {
        return Err(ComputeError::permanent(
            ReasonCode::InvalidHostSettings,
            problem,
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(ComputeError::permanent(
            ReasonCode::InvalidHostSettings,
            "occ compute-host runs as root (it creates one Unix user per Agent)",
        ));
    }
    // Reading the gateway's port and token does not involve the supervisor.
    let supervision = match operation {
        HostOp::GatewayAccess { .. } => Supervision::Detached,
        _ => supervision(&settings, &Systemctl::default()).await?,
    };
    tracing::debug!(
        systemd = matches!(supervision, Supervision::Systemd(_)),
        "supervisor"
    );
    // On a host that has bubblewrap, a detached gateway is also contained on top of its own
    // account, in a private network where it binds loopback (systemd units carry systemd's
    // own hardening instead); only activations start one, so only they check.
    let sandbox = match (&supervision, &operation) {
        (
            Supervision::Detached,
            HostOp::ActivateRevision { .. } | HostOp::RestoreRevision { .. },
        ) => match SandboxSettings::locate(&process.path, WorkloadLimits::default()) {
            // This binary relays a loopback gateway's private network.
            Ok(sandbox) => Some(sandbox.with_occ_program(process.setup_program.clone())),
            Err(e) => {
                tracing::info!(reason = %e, "gateways on this host run uncontained but for their accounts");
                None
            }
        },
        _ => None,
    };
    let host = Host::new(
        LocalSettings {
            root: settings.root.clone(),
            runtime_root: settings.runtime_root.clone(),
            port_range: settings.port_range(),
            ready_timeout: Duration::from_millis(settings.ready_timeout_ms),
            stop_timeout: Duration::from_millis(settings.stop_timeout_ms),
            path: process.path,
        },
        HostOptions {
            driver_id,
            bind: settings.bind,
            accounts: Some(AccountSettings {
                prefix: settings.account_prefix.clone(),
                setup_program: process.setup_program,
            }),
            supervision,
            // SSH hosts run embedded execution only.
            dedicated: None,
            sandbox,
            // The proxy lives with a long-running Driver process; SSH hosts deliver keys in the
            // gateway's environment (readable by the Agent's own account only).
            credential_proxy: None,
        },
    )?;
    // Reads do not wait behind a long activation (the host's reads are safe beside its own
    // writes); everything that changes the host takes its turn.
    let _lock = match operation {
        HostOp::Observe { .. }
        | HostOp::RuntimeReport { .. }
        | HostOp::GatewayAccess { .. }
        | HostOp::ReadLogs { .. } => None,
        _ => Some(
            host_lock(
                &settings.root,
                Duration::from_millis(settings.lock_timeout_ms),
            )
            .await?,
        ),
    };
    tracing::debug!(op = operation.name(), "host operation");
    let context = |setup: Option<WireSetup>| RevisionContext {
        workspace_setup: setup.map(WorkspaceSetup::from),
        ..RevisionContext::default()
    };
    let convergence = |c: Convergence| HostValue::Convergence {
        pending: c == Convergence::Pending,
    };
    Ok(match operation {
        HostOp::EnsureNamespace { namespace } => {
            convergence(host.ensure_namespace(&namespace).await?)
        }
        HostOp::DeleteNamespace { namespace } => {
            convergence(host.delete_namespace(&namespace).await?)
        }
        HostOp::PrepareRevision {
            revision,
            workspace_setup,
        } => match host
            .prepare_revision(&revision, &context(workspace_setup))
            .await?
        {
            Readiness::Ready => HostValue::Readiness {
                ready: true,
                code: None,
            },
            Readiness::Pending { code } => HostValue::Readiness {
                ready: false,
                code: Some(code),
            },
        },
        HostOp::ActivateRevision {
            revision,
            workspace_setup,
        } => {
            host.activate_revision(&revision, &context(workspace_setup))
                .await?;
            HostValue::Done
        }
        HostOp::RestoreRevision {
            previous,
            failed,
            workspace_setup,
        } => {
            host.restore_revision(&previous, &context(workspace_setup), &failed)
                .await?;
            HostValue::Done
        }
        HostOp::StopRevision { revision } => {
            host.stop_revision(&revision).await?;
            HostValue::Done
        }
        HostOp::RetireRevision { revision } => {
            host.retire_revision(&revision).await?;
            HostValue::Done
        }
        HostOp::DeleteAgent { agent } => {
            host.delete_agent(&agent).await?;
            HostValue::Done
        }
        HostOp::Observe { revision } => HostValue::Runtime {
            state: match host.observe(&revision).await? {
                RuntimeState::Serving => "serving",
                RuntimeState::NotRunning => "not-running",
                RuntimeState::NotCurrent => "not-current",
            }
            .into(),
        },
        HostOp::RuntimeReport { revision } => HostValue::Report {
            report: host.runtime_report(&revision).await?,
        },
        HostOp::GatewayAccess { agent } => match host.gateway_port(&agent)? {
            Some((port, token)) => HostValue::Gateway {
                port,
                token: token.expose().to_owned(),
            },
            None => HostValue::NoGateway,
        },
        HostOp::ReadLogs { revision, query } => HostValue::Logs {
            chunk: host.read_logs(&revision, &query).await?,
        },
    })
}

/// The supervisor `settings` choose on this host: `auto` is systemd where it runs
/// (`/run/systemd/system` exists and `systemctl --version` works), detached elsewhere; `systemd`
/// needs a working `systemctl`. Under systemd the root and the runtime must not be where the
/// units' hardening hides them.
pub async fn supervision(
    settings: &HostSettings,
    systemctl: &Systemctl,
) -> Result<Supervision, ComputeError> {
    let systemd = match settings.supervisor {
        SupervisorChoice::Detached => false,
        SupervisorChoice::Auto => systemctl.systemd_runs().await,
        SupervisorChoice::Systemd => {
            if !systemctl.works().await {
                return Err(ComputeError::permanent(
                    ReasonCode::InvalidHostSettings,
                    "systemd supervision is set but `systemctl --version` fails on the host",
                ));
            }
            true
        }
    };
    if !systemd {
        return Ok(Supervision::Detached);
    }
    for (name, path) in [
        ("root", &settings.root),
        ("runtime root", &settings.runtime_root),
    ] {
        if hidden_by_hardening(path) {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                format!(
                    "the host {name} {} is under /tmp, /var/tmp, /home, /root or /run/user, which \
                     the gateway units hide (PrivateTmp, ProtectHome)",
                    path.display()
                ),
            ));
        }
    }
    Ok(Supervision::Systemd(SystemdSupervision {
        unit_dir: settings.systemd_unit_dir.clone(),
        systemctl: systemctl.clone(),
    }))
}

/// The host-wide lock: an exclusive `flock` on `<root>/.compute-lock`, waited for up to
/// `timeout` (then a transient `HOST_BUSY`).
async fn host_lock(root: &Path, timeout: Duration) -> Result<std::fs::File, ComputeError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = root.join(".compute-lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| {
            ComputeError::transient(
                ReasonCode::DependencyUnavailable,
                format!("open {}: {e}", path.display()),
            )
        })?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(ComputeError::transient(
                    ReasonCode::DependencyUnavailable,
                    format!("lock {}: {e}", path.display()),
                ));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ComputeError::transient(
                ReasonCode::HostBusy,
                format!(
                    "another operation held {} for more than {timeout:?}",
                    path.display()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_lock_is_exclusive_and_times_out() {
        let dir = tempfile::tempdir().expect("dir");
        let held = host_lock(dir.path(), Duration::from_secs(1))
            .await
            .expect("first");
        let err = host_lock(dir.path(), Duration::from_millis(300))
            .await
            .expect_err("busy");
        assert_eq!(err.code, ReasonCode::HostBusy);
        drop(held);
        host_lock(dir.path(), Duration::from_millis(300))
            .await
            .expect("free again");
    }
}
