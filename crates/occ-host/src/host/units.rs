//! Gateways supervised by systemd units (per-Agent accounts on hosts where systemd runs).

use super::*;

impl Host {
    /// Activation under systemd ([`systemd::activate`]).
    pub(super) async fn activate_unit(
        &self,
        sd: &SystemdSupervision,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        port: u16,
    ) -> Result<(), ComputeError> {
        systemd::refuse_secrets(ctx)?;
        let (Some(settings), Some(accounts)) = (&self.options.accounts, &self.accounts) else {
            return Err(ComputeError::permanent(
                ReasonCode::InvalidHostSettings,
                "systemd supervision needs per-Agent accounts",
            ));
        };
        let account = self.account(&rev.agent).await?.ok_or_else(|| {
            ComputeError::permanent(ReasonCode::InvalidHostSettings, "no per-Agent account")
        })?;
        let runtime = self.runtime()?;
        let unit_account = UnitAccount {
            account,
            name: accounts.name(rev.agent.namespace_id.as_str(), rev.agent.agent_id.as_str()),
            setup_program: &settings.setup_program,
        };
        let launch = self.launch(&runtime, rev, ctx, agent_dir, port);
        systemd::activate(sd, launch, unit_account).await
    }
}
