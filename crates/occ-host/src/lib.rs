//! The host side of occ's gateways: everything that runs on a machine that hosts Agents'
//! OpenClaw gateways, whichever Compute Driver reaches it.
//!
//! - [`Host`] carries out the Compute verbs on this machine: the Agent layout and its markers
//!   (`layout`), ports, snapshots ([`snapshot`]), gateway spawn, adoption, readiness and stop
//!   under the detached supervisor (`detached`) or systemd units ([`systemd`]), per-Agent Unix
//!   accounts ([`account`]), the workspace seeding (`seed`) and the workspace setup runtime
//!   ([`workspace_setup`]).
//! - [`wire`] is the request/reply format of `occ compute-host` and [`serve`] runs one request
//!   against a [`Host`]: the SSH Compute Driver's remote transport. The process Compute Driver
//!   calls [`Host`] in process: the local transport.
//! - [`runtime`] locates (and installs) the pinned OpenClaw runtime.
//!
//! Nothing here reads the environment: what the host needs from occ's own process (the `PATH`
//! its programs search, the `occ` binary) is passed in.

pub mod account;
pub mod credential_proxy;
mod detached;
mod failure;
pub mod fsutil;
pub mod harness;
mod host;
mod layout;
mod logs;
mod process;
mod report;
pub mod runtime;
pub mod sandbox;
mod seed;
pub mod serve;
pub mod snapshot;
pub mod systemd;
pub mod wire;
pub mod workspace_setup;

pub use detached::recorded_gateways;
pub use harness::workload::recorded_harnesses;
pub use host::{AccountSettings, DedicatedSettings, Host, HostOptions, LocalSettings, Supervision};
