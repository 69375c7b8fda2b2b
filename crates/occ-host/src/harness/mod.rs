//! The harness of a dedicated Agent: `occ harness-launch` ([`launch`]) initialises the Agent's
//! workspace, logs Codex in with the revision's credential (on stdin, never argv or env), runs
//! one bounded probe turn, then supervises `codex app-server` (WebSocket, capability-token
//! auth) and the OpenClaw node host that serves the gateway's workspace operations.
//!
//! Children: [`probe`] (login and the probe turn, classified), [`supervise`] (restarts with
//! backoff, prefixed output, stop). [`launch`] uses both; neither uses it.

pub mod launch;
mod probe;
mod supervise;

pub use launch::{
    FailureCode, LAUNCH_INPUT_MAX_BYTES, LaunchError, LaunchInput, LaunchPhase, LaunchStatus,
    LoginMethod, NODE_COMMANDS, read_launch_input,
};
