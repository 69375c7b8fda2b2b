//! systemd supervision of the SSH Driver's gateways: one unit per Agent,
//! `<unit dir>/occ-gateway-<h12(agentId)>.service` (0644), rendered from the Agent's layout,
//! written (atomically, only when its text changed) and driven with `systemctl` by the host side
//! ([`crate::Host`]) when the host runs systemd.
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

mod gateway;
mod systemctl;
mod unit;

pub(crate) use gateway::{UnitAccount, activate, refuse_secrets, serving};
pub use systemctl::{Systemctl, SystemdSupervision};
pub use unit::{
    SetupCheck, UnitFile, UnitSpec, header, hidden_by_hardening, install_unit, read_unit,
    setup_check_path, token_env_path, unit_name, write_file,
};
