//! Client of the native OpenClaw gateway WebSocket protocol, version 4.
//!
//! occ talks to each Agent's gateway as a device-less backend operator: it opens the
//! WebSocket, waits for `connect.challenge`, sends `connect` (`client {id: "gateway-client",
//! mode: "backend"}`, role `operator`, scopes `operator.admin` + `operator.read`, **no**
//! `device` field) and checks the grant in `hello-ok` — a gateway silently clears the scopes of
//! clients it does not trust, so the grant is always checked. Then it issues requests
//! (`req`/`res` frames matched by id; events are skipped, except on a chat turn's own
//! connection).
//!
//! Two ways to authenticate ([`Auth`]): the gateway's shared token in `connect.params.auth`
//! (loopback gateways of the process Driver), or a header on the WebSocket upgrade with no
//! `auth` in the connect params, for gateways behind an authenticating edge proxy (trusted-proxy
//! gateways; the Kubernetes Driver).
//!
//! Every connection is driven by its own task that reads continuously: pings are answered and a
//! dead or silent gateway is noticed even while nobody is calling, responses are matched to
//! their requests by id, and a request abandoned after it was written (deadline, or the caller
//! dropping its future) is followed by a `{"type":"cancel","id":…}` frame.
//!
//! - [`FileClient`]: the live workspace files (`agents.files.get`/`set` of the four profile
//!   files) with outcome classification ([`ReadOutcome`], [`WriteOutcome`]), one deadline per
//!   operation and pooled, verified connections keyed by URL and credential.
//! - [`Session`]: one connection; [`Session::connect`] is one attempt, [`Session::call`] one
//!   request, [`Session::file_get`] / [`Session::file_set`] the `agents.files.*` methods.
//! - [`chat_turn`]: one chat turn with an Agent (`agent`, its `chat` events streamed as
//!   deltas, `chat.abort` when abandoned), classified by [`ChatError`].
//! - [`NodeEnrollment`]: pairing a node host (`device.pair.setupCode`/`setupStatus`,
//!   `node.describe`) for dedicated execution, with strict reply checks ([`EnrollmentError`]).
//! - [`wait_ready`]: readiness — retries [`Session::connect`] on transient errors.
//! - [`GatewayError`]: every failure, classified; [`GatewayError::is_transient`] tells retry
//!   from give-up.
//!
//! Bounds: every read is capped ([`MAX_MESSAGE_BYTES`]) and every operation has a deadline.
//! Credentials are never logged and never put into an error (gateway messages are scrubbed of
//! them), and [`Endpoint`]'s `Debug` redacts them. Credentials are sent only over `wss://` or
//! to a loopback address.

mod chat;
mod conn;
mod endpoint;
mod enroll;
mod error;
mod files;
mod frames;
mod handshake;
mod ready;
mod session;
mod workspace_file;

#[cfg(test)]
mod fake;

pub use chat::{
    ChatError, ChatReply, ChatTurn, MAX_CHAT_MESSAGE_BYTES, MAX_SESSION_KEY_BYTES, ModelFailure,
    chat_turn,
};
pub use endpoint::{Auth, Endpoint};
pub use enroll::{
    ENROLLMENT_CALL_TIMEOUT, EnrollmentError, NODE_COMMANDS, NodeEnrollment, NodeSetup, NodeStatus,
    SetupCode, SetupCompletion,
};
pub use error::{DEFAULT_RETRY_AFTER, GatewayError, MAX_RETRY_AFTER};
pub use files::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, FileClient, FileClientSettings, FileClientStats,
    MAX_FILE_BYTES, ReadOutcome, WORKSPACE_FILE_NAMES, WriteOutcome,
};
pub use frames::MAX_MESSAGE_BYTES;
pub use handshake::{CLIENT_ID, CLIENT_MODE, Hello, PROTOCOL_VERSION, REQUIRED_SCOPES};
pub use ready::wait_ready;
pub use session::Session;
pub use workspace_file::{WorkspaceFile, content_hash};
