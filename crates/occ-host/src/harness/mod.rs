//! Dedicated (Codex harness) execution. The harness of a dedicated Agent: `occ harness-launch`
//! ([`launch`]) initialises the Agent's workspace, logs Codex in with the revision's credential
//! (on stdin, never argv or env), runs one bounded probe turn, then supervises `codex app-server`
//! (WebSocket, capability-token auth) and the OpenClaw node host that serves the gateway's
//! workspace operations. [`render`] sets the Driver-owned keys of the dedicated gateway's
//! configuration.
//!
//! Modules, one direction: `input` (the launch input and status: data and checks) ←
//! `probe` (login and the probe turn, classified) and `supervise` (the log, restarts with
//! backoff, prefixed output, stop) ← [`launch`] (the phases and the children's commands).
//!
//! Every Driver: [`enroll`] (login method, held failures, node pairing and binding over an
//! operator session, the setup code delivered the Driver's way).
//!
//! The host side: `dedicated` (the harness's files, readiness and node enrollment) and
//! `workload` (the launcher as a detached process group) are what [`crate::Host`] runs a
//! dedicated revision with.
//!
//! The gateway side: [`plugin`] lays out a gateway's state directory so that it loads the
//! runtime's Codex plugin as a trusted plugin (which its agent harness needs), without an
//! install; the Driver calls it when it prepares the gateway.

pub(crate) mod dedicated;
pub mod enroll;
mod input;
pub mod launch;
pub mod plugin;
mod probe;
pub mod render;
mod supervise;
pub mod workload;

/// The harness container's name in runtime reports (and a Kubernetes Pod).
pub use crate::report::HARNESS_CONTAINER;
pub use input::{
    AppServerInput, FailureCode, LAUNCH_INPUT_MAX_BYTES, LaunchError, LaunchInput, LaunchPhase,
    LaunchStatus, LoginInput, LoginMethod, ModelEndpoint, NodeInput, check_model_base_url,
    read_launch_input,
};
/// The commands the node host offers the gateway (workspace files, memory and skills).
pub use occ_gateway::NODE_COMMANDS;
pub use plugin::{PluginTrustError, trust_codex_plugin};
