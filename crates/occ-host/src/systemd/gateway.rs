//! An Agent's gateway under its systemd unit: activation (the token file systemd reads, the
//! workspace check's input, the unit written and reloaded only when its text changed, enabled
//! every time; a serving revision with an unchanged unit is left alone; otherwise `current` is
//! switched, the unit restarted and the handshake awaited while the unit stays running) and the
//! serving check.

use std::path::Path;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::RevisionId;
use occ_core::compute::{AgentTarget, ComputeError, RevisionContext};
use occ_gateway::{Endpoint, GatewayError};

use super::systemctl::SystemdSupervision;
use super::unit::{
    SetupCheck, UnitFile, UnitSpec, header, read_unit, setup_check_path, token_env_path, unit_name,
};
use crate::account::Account;
use crate::detached::{self, Launch};
use crate::layout::{
    self, AgentMarker, answers, installed_and_served, mark_served, read_json, switch_current,
    write_if_changed,
};
use crate::logs::GatewayLog;
use crate::process::startup_output;
use crate::workspace_setup::SetupInput;

/// Whether `rev` is installed, was served, its unit is `active` and its gateway answers the
/// handshake right now.
pub(crate) async fn serving(
    sd: &SystemdSupervision,
    agent: &AgentTarget,
    agent_dir: &Path,
    rev: &RevisionId,
) -> Result<bool, ComputeError> {
    if !installed_and_served(agent_dir, rev)? {
        return Ok(false);
    }
    let unit = sd.unit_path(agent.agent_id.as_str());
    let header = header(agent.namespace_id.as_str(), agent.agent_id.as_str());
    if read_unit(&unit, &header)? == UnitFile::Absent || !sd.active(agent.agent_id.as_str()).await?
    {
        return Ok(false);
    }
    let Some(marker) = read_json::<AgentMarker>(&agent_dir.join("agent.json"))? else {
        return Ok(false);
    };
    answers(agent_dir, marker.port, Duration::from_secs(5)).await
}

/// Refuses a revision that needs Secrets delivered: units deliver none.
pub(crate) fn refuse_secrets(ctx: &RevisionContext) -> Result<(), ComputeError> {
    if !ctx.environment.is_empty() || ctx.harness_credential.is_some() {
        return Err(ComputeError::permanent(
            ReasonCode::SecretDeliveryUnsupported,
            "systemd supervision delivers no Secrets to gateways",
        ));
    }
    Ok(())
}

/// Who a unit's gateway runs as, and what checks its workspace before every start.
pub(crate) struct UnitAccount<'a> {
    /// The Agent's account.
    pub account: Account,
    /// Its name (`User=`, `Group=`).
    pub name: String,
    /// The `occ` binary whose `workspace-setup` checks the workspace before every start.
    pub setup_program: &'a Path,
}

/// Activates the revision under the Agent's unit in `sd`'s unit directory (see the module
/// docs).
pub(crate) async fn activate(
    sd: &SystemdSupervision,
    launch: Launch<'_>,
    unit_account: UnitAccount<'_>,
) -> Result<(), ComputeError> {
    let Launch {
        rev,
        ctx,
        agent_dir,
        ..
    } = launch;
    let ns = rev.agent.namespace_id.as_str();
    let agent_id = rev.agent.agent_id.as_str();
    let token = layout::token(agent_dir)?;
    // systemd reads it as root; the unit text never holds it.
    let mut credentials = format!(
        "{}={}\n",
        crate::snapshot::credential_variable(rev),
        token.expose()
    );
    if let Some(key) = crate::snapshot::proxy_key(rev, token.expose()) {
        credentials.push_str(&format!(
            "{}={key}\n",
            occ_core::native::control_ui::PROXY_KEY_VARIABLE
        ));
    }
    write_if_changed(&token_env_path(agent_dir), credentials.as_bytes(), None)?;
    let setup_check = match &ctx.workspace_setup {
        Some(setup) => {
            // Identity only: the check verifies the marker and never applies files.
            let mut identity = SetupInput::from(setup);
            identity.files = None;
            identity.completed = true;
            let input = setup_check_path(agent_dir);
            write_if_changed(&input, &identity.to_json(), Some(unit_account.account.gid))?;
            Some(SetupCheck {
                occ: unit_account.setup_program.to_path_buf(),
                input,
                runtime_root: launch.runtime.root.clone(),
            })
        }
        None => None,
    };
    let spec = UnitSpec {
        namespace_id: ns.to_owned(),
        agent_id: agent_id.to_owned(),
        account: unit_account.name,
        agent_dir: agent_dir.to_path_buf(),
        port: launch.port,
        bind: launch.bind.as_str().to_owned(),
        node: launch.runtime.node.clone(),
        entry: launch.runtime.entry.clone(),
        stop_timeout: launch.stop_timeout,
        setup_check,
    };
    let changed = sd.install(&spec).await?;
    if !changed && serving(sd, &rev.agent, agent_dir, &rev.revision_id).await? {
        return Ok(());
    }
    // A gateway the detached supervisor started (before this host ran systemd) makes way.
    detached::stop(agent_dir, launch.stop_timeout).await?;
    switch_current(agent_dir, &rev.revision_id)?;
    sd.restart(agent_id).await?;
    let unit = unit_name(agent_id);
    let endpoint = Endpoint::loopback(launch.port, token.expose());
    let deadline = tokio::time::Instant::now() + launch.ready_timeout;
    let failed = |code: ReasonCode, message: String| {
        ComputeError::transient(code, format!("{message} (journalctl -u {unit})")).with_output(
            startup_output(
                &GatewayLog::of_revision(agent_dir, &rev.revision_id).current_path(),
                launch.ctx,
                token.expose(),
            ),
        )
    };
    loop {
        if !sd.running(agent_id).await? {
            let _ = sd.systemctl.run(&["stop", &unit]).await;
            return Err(failed(
                ReasonCode::RuntimeStartupFailed,
                format!("the unit {unit} stopped during startup"),
            ));
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            // Do not leave a gateway that never became ready: the next pass starts over.
            let _ = sd.systemctl.run(&["stop", &unit]).await;
            return Err(failed(
                ReasonCode::AgentGatewayUnavailable,
                format!(
                    "the gateway of {unit} did not become ready in {:?}",
                    launch.ready_timeout
                ),
            ));
        }
        match occ_gateway::wait_ready(&endpoint, left.min(Duration::from_secs(2))).await {
            Ok(hello) => {
                tracing::info!(unit, server = %hello.server_version, "gateway ready");
                return mark_served(agent_dir, &rev.revision_id);
            }
            Err(GatewayError::Unauthorized(m) | GatewayError::MissingScope(m)) => {
                let _ = sd.systemctl.run(&["stop", &unit]).await;
                return Err(ComputeError::permanent(
                    ReasonCode::AgentGatewayUnauthorized,
                    m,
                ));
            }
            Err(_) => {}
        }
    }
}
