//! Enrollment of an OpenClaw node host into a gateway, over one [`Session`] (occ's backend
//! operator connection, which holds `operator.admin`).
//!
//! Three calls, each bounded by [`ENROLLMENT_CALL_TIMEOUT`] (or
//! [`NodeEnrollment::with_call_timeout`]):
//! 1. [`NodeEnrollment::create_setup`]: `device.pair.setupCode` with the node-only bootstrap
//!    profile; the reply must echo the requested public URL and grant `node` access.
//! 2. [`NodeEnrollment::setup_status`]: `device.pair.setupStatus`; `completion` (or
//!    `deliveryUncertain`: the bootstrap was retired but the gateway could not confirm the node
//!    got its credentials — presence is observed separately) names the paired device.
//! 3. [`NodeEnrollment::describe`]: `node.describe`; the node is ready once it is connected and
//!    advertises every one of [`NODE_COMMANDS`].
//!
//! Replies are checked strictly: a reply of the wrong shape is [`EnrollmentError::InvalidReply`]
//! (the peer is not behaving as the pinned gateway does; retrying will not help), distinct from
//! the transport and gateway errors of [`GatewayError`]. The setup code is a bearer credential
//! (it embeds the gateway's bootstrap token): it is held in [`SetupCode`], whose `Debug` never
//! shows it, and no error ever carries it.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::error::GatewayError;
use crate::session::Session;

/// The node commands a dedicated harness's node host must advertise: the workspace file
/// operations the gateway routes to the node (`file-transfer` plugin) and the workspace
/// memory/skills services. The gateway's `gateway.nodes.commands.allow` lists exactly these.
pub const NODE_COMMANDS: [&str; 7] = [
    "file.fetch",
    "file.stat",
    "file.write",
    "file.create",
    "dir.list",
    "workspace.memory",
    "workspace.skills",
];

/// Bound of each enrollment call (request written to answer received).
pub const ENROLLMENT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest integer a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`); the gateway's
/// timestamps are JavaScript numbers.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A node setup code: a single-use bearer credential for pairing one node. Never shown by
/// `Debug`; read it only to hand it to the node host.
#[derive(Clone, PartialEq, Eq)]
pub struct SetupCode(String);

impl SetupCode {
    /// The code itself, for delivery to the node host (a private file, never argv or logs).
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SetupCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SetupCode(<redacted>)")
    }
}

/// A setup credential issued by the gateway for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSetup {
    /// Identifies the setup in [`NodeEnrollment::setup_status`]; not a secret.
    pub setup_id: String,
    /// The code the node host pairs with.
    pub setup_code: SetupCode,
    /// When the gateway stops accepting the code (Unix milliseconds).
    pub expires_at_ms: u64,
}

impl NodeSetup {
    /// Whether the code has expired at `now` (a new one must be requested).
    pub fn is_expired_at(&self, now: SystemTime) -> bool {
        unix_millis(now) >= self.expires_at_ms
    }
}

/// A setup the node completed: the device the gateway paired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupCompletion {
    /// The paired device; also the node id for [`NodeEnrollment::describe`].
    pub device_id: String,
    /// The gateway reported `deliveryUncertain` rather than `completion`: the device is paired
    /// but the gateway could not confirm the node received its token. Only
    /// [`NodeEnrollment::describe`] tells whether it connected.
    pub delivery_uncertain: bool,
}

/// What the gateway knows of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node holds a live connection to the gateway.
    pub connected: bool,
    /// The commands it advertises.
    pub commands: Vec<String>,
}

impl NodeStatus {
    /// Connected and advertising every one of [`NODE_COMMANDS`].
    pub fn is_ready(&self) -> bool {
        self.connected && self.missing_commands().is_empty()
    }

    /// The [`NODE_COMMANDS`] the node does not advertise.
    pub fn missing_commands(&self) -> Vec<&'static str> {
        NODE_COMMANDS
            .into_iter()
            .filter(|wanted| !self.commands.iter().any(|c| c == wanted))
            .collect()
    }
}

/// Why an enrollment call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnrollmentError {
    /// Transport, authentication or a gateway error answer.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The gateway answered, but not with what the pinned gateway sends (wrong access, URL or
    /// id echoed back, expired code, missing fields). Not transient.
    #[error("gateway sent an invalid enrollment reply: {0}")]
    InvalidReply(String),
}

impl EnrollmentError {
    /// Whether retrying later may succeed (see [`GatewayError::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            EnrollmentError::Gateway(err) => err.is_transient(),
            EnrollmentError::InvalidReply(_) => false,
        }
    }
}

fn invalid(method: &str, what: &str) -> EnrollmentError {
    EnrollmentError::InvalidReply(format!("{method}: {what}"))
}

fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn non_empty_str<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Node enrollment calls over one authenticated session.
#[derive(Debug)]
pub struct NodeEnrollment<'s> {
    session: &'s mut Session,
    call_timeout: Duration,
}

impl<'s> NodeEnrollment<'s> {
    /// Uses `session` (connected with `operator.admin`) for the calls, each bounded by
    /// [`ENROLLMENT_CALL_TIMEOUT`].
    pub fn new(session: &'s mut Session) -> NodeEnrollment<'s> {
        NodeEnrollment {
            session,
            call_timeout: ENROLLMENT_CALL_TIMEOUT,
        }
    }

    /// Another bound for each call (a caller with less time left).
    pub fn with_call_timeout(self, call_timeout: Duration) -> NodeEnrollment<'s> {
        NodeEnrollment {
            call_timeout,
            ..self
        }
    }

    /// `device.pair.setupCode {bootstrapProfile: "node", includeQr: false, publicUrl}`: a new
    /// node-only setup code whose embedded URL is `public_url` (the gateway URL as the node host
    /// reaches it).
    pub async fn create_setup(&mut self, public_url: &str) -> Result<NodeSetup, EnrollmentError> {
        const METHOD: &str = "device.pair.setupCode";
        let reply = self
            .session
            .call(
                METHOD,
                json!({"bootstrapProfile": "node", "includeQr": false, "publicUrl": public_url}),
                self.call_timeout,
            )
            .await?;
        if reply.get("access").and_then(Value::as_str) != Some("node") {
            return Err(invalid(METHOD, "access is not \"node\""));
        }
        if reply.get("gatewayUrl").and_then(Value::as_str) != Some(public_url) {
            return Err(invalid(
                METHOD,
                "gatewayUrl differs from the requested publicUrl",
            ));
        }
        let setup_id = non_empty_str(&reply, "setupId")
            .ok_or_else(|| invalid(METHOD, "no setupId"))?
            .to_owned();
        let setup_code = non_empty_str(&reply, "setupCode")
            .ok_or_else(|| invalid(METHOD, "no setupCode"))?
            .to_owned();
        let expires_at_ms = reply
            .get("expiresAtMs")
            .and_then(Value::as_u64)
            .filter(|ms| *ms <= MAX_SAFE_INTEGER)
            .ok_or_else(|| invalid(METHOD, "expiresAtMs is not a non-negative safe integer"))?;
        let setup = NodeSetup {
            setup_id,
            setup_code: SetupCode(setup_code),
            expires_at_ms,
        };
        if setup.is_expired_at(SystemTime::now()) {
            return Err(invalid(METHOD, "the setup code is already expired"));
        }
        Ok(setup)
    }

    /// `device.pair.setupStatus {setupId}`: the paired device once the node used the code,
    /// `None` while it has not.
    pub async fn setup_status(
        &mut self,
        setup_id: &str,
    ) -> Result<Option<SetupCompletion>, EnrollmentError> {
        const METHOD: &str = "device.pair.setupStatus";
        let reply = self
            .session
            .call(METHOD, json!({"setupId": setup_id}), self.call_timeout)
            .await?;
        if !reply.is_object() {
            return Err(invalid(METHOD, "the reply is not an object"));
        }
        let present = |key: &str| reply.get(key).filter(|v| !v.is_null());
        let (completion, delivery_uncertain) =
            match (present("completion"), present("deliveryUncertain")) {
                (Some(completion), _) => (completion, false),
                (None, Some(uncertain)) => (uncertain, true),
                (None, None) => return Ok(None),
            };
        if !completion.is_object() {
            return Err(invalid(METHOD, "the completion is not an object"));
        }
        if completion.get("setupId").and_then(Value::as_str) != Some(setup_id) {
            return Err(invalid(METHOD, "the completion names another setupId"));
        }
        if completion.get("access").and_then(Value::as_str) != Some("node") {
            return Err(invalid(METHOD, "the completion's access is not \"node\""));
        }
        let device_id = non_empty_str(completion, "deviceId")
            .ok_or_else(|| invalid(METHOD, "the completion has no deviceId"))?
            .to_owned();
        Ok(Some(SetupCompletion {
            device_id,
            delivery_uncertain,
        }))
    }

    /// `node.describe {nodeId}`: whether the node is connected and which commands it
    /// advertises ([`NodeStatus::is_ready`]).
    pub async fn describe(&mut self, node_id: &str) -> Result<NodeStatus, EnrollmentError> {
        const METHOD: &str = "node.describe";
        let reply = self
            .session
            .call(METHOD, json!({"nodeId": node_id}), self.call_timeout)
            .await?;
        if reply.get("nodeId").and_then(Value::as_str) != Some(node_id) {
            return Err(invalid(METHOD, "nodeId differs from the requested node"));
        }
        let connected = reply
            .get("connected")
            .and_then(Value::as_bool)
            .ok_or_else(|| invalid(METHOD, "connected is not a boolean"))?;
        let commands = match reply.get("commands") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|c| c.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| invalid(METHOD, "commands holds a non-string"))?,
            Some(_) => return Err(invalid(METHOD, "commands is not an array")),
        };
        Ok(NodeStatus {
            connected,
            commands,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use tokio::sync::mpsc;

    use super::*;
    use crate::fake::{
        FakeGateway, node_describe_payload, setup_code_payload, setup_status_payload,
    };

    const T: Duration = Duration::from_secs(5);
    const URL: &str = "ws://127.0.0.1:35853";
    const CODE: &str = "eyJ1cmwiOiJ3czovLzEyNy4wLjAuMTozNTg1MyJ9-secret-bootstrap";
    const SETUP_ID: &str = "134c2c2e-78ba-4019-873a-5cef384f3d87";
    const DEVICE: &str = "b5fadac901d6693f3e4825d7fa5383f492e5124acd9c1a096f600275a5537b57";

    fn in_ten_minutes() -> u64 {
        unix_millis(SystemTime::now()) + 600_000
    }

    async fn connect(gw: &FakeGateway) -> Session {
        Session::connect(&gw.endpoint(), T)
            .await
            .expect("connect")
            .0
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Value>) -> Vec<Value> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn enrolls_a_node_through_the_three_calls() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::scripted(
            vec![
                (
                    "device.pair.setupCode",
                    Ok(setup_code_payload(URL, CODE, in_ten_minutes())),
                ),
                ("device.pair.setupStatus", Ok(json!({}))),
                (
                    "device.pair.setupStatus",
                    Ok(setup_status_payload("completion", SETUP_ID, DEVICE)),
                ),
                (
                    "node.describe",
                    Ok(node_describe_payload(DEVICE, false, &[])),
                ),
                (
                    "node.describe",
                    Ok(node_describe_payload(DEVICE, true, &NODE_COMMANDS)),
                ),
            ],
            tx,
        )
        .await;
        let mut session = connect(&gw).await;
        let mut enrollment = NodeEnrollment::new(&mut session);

        let setup = enrollment.create_setup(URL).await.expect("setup");
        assert_eq!(setup.setup_id, SETUP_ID);
        assert_eq!(setup.setup_code.expose_secret(), CODE);
        assert!(!setup.is_expired_at(SystemTime::now()));
        assert!(setup.is_expired_at(UNIX_EPOCH + Duration::from_millis(setup.expires_at_ms)));
        assert!(!format!("{setup:?}").contains(CODE), "{setup:?}");

        assert_eq!(
            enrollment.setup_status(SETUP_ID).await.expect("pending"),
            None
        );
        let completion = enrollment
            .setup_status(SETUP_ID)
            .await
            .expect("status")
            .expect("completed");
        assert_eq!(
            completion,
            SetupCompletion {
                device_id: DEVICE.into(),
                delivery_uncertain: false
            }
        );

        let offline = enrollment.describe(DEVICE).await.expect("describe");
        assert!(!offline.is_ready());
        assert_eq!(offline.missing_commands(), NODE_COMMANDS);
        let online = enrollment.describe(DEVICE).await.expect("describe");
        assert!(online.is_ready(), "{online:?}");

        assert_eq!(
            drain(&mut rx),
            [
                json!({"bootstrapProfile":"node","includeQr":false,"publicUrl":URL}),
                json!({"setupId":SETUP_ID}),
                json!({"setupId":SETUP_ID}),
                json!({"nodeId":DEVICE}),
                json!({"nodeId":DEVICE}),
            ]
        );
        session.close().await;
        assert!(
            gw.frames_checked() >= 6,
            "every frame checked against the schema"
        );
    }

    #[tokio::test]
    async fn delivery_uncertain_still_names_the_device() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::scripted(
            vec![(
                "device.pair.setupStatus",
                Ok(setup_status_payload("deliveryUncertain", SETUP_ID, DEVICE)),
            )],
            tx,
        )
        .await;
        let mut session = connect(&gw).await;
        let completion = NodeEnrollment::new(&mut session)
            .setup_status(SETUP_ID)
            .await
            .expect("status")
            .expect("uncertain counts");
        assert_eq!(completion.device_id, DEVICE);
        assert!(completion.delivery_uncertain);
        session.close().await;
    }

    /// Each `create_setup` reply, checked on its own connection: the reply is invalid and no
    /// error shows the code.
    async fn refused_setup(reply: Value) -> EnrollmentError {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::scripted(vec![("device.pair.setupCode", Ok(reply))], tx).await;
        let mut session = connect(&gw).await;
        let err = NodeEnrollment::new(&mut session)
            .create_setup(URL)
            .await
            .unwrap_err();
        assert!(!format!("{err} {err:?}").contains(CODE), "{err:?}");
        session.close().await;
        err
    }

    #[tokio::test]
    async fn setup_replies_are_checked_strictly() {
        let valid = setup_code_payload(URL, CODE, in_ten_minutes());
        let with = |key: &str, value: Value| {
            let mut reply = valid.clone();
            reply[key] = value;
            reply
        };
        let cases = [
            (
                "expired",
                with("expiresAtMs", json!(unix_millis(SystemTime::now()) - 1)),
            ),
            ("wrong access", with("access", json!("full"))),
            (
                "URL mismatch",
                with("gatewayUrl", json!("ws://10.0.0.1:35853")),
            ),
            ("empty setupId", with("setupId", json!(""))),
            ("no setupCode", with("setupCode", Value::Null)),
            (
                "fractional expiry",
                with("expiresAtMs", json!(in_ten_minutes() as f64 + 0.5)),
            ),
            (
                "unsafe expiry",
                with("expiresAtMs", json!(MAX_SAFE_INTEGER + 1)),
            ),
            ("not an object", json!("nope")),
        ];
        for (case, reply) in cases {
            let err = refused_setup(reply).await;
            assert!(
                matches!(err, EnrollmentError::InvalidReply(_)),
                "{case}: {err:?}"
            );
            assert!(!err.is_transient(), "{case}");
        }
    }

    #[tokio::test]
    async fn status_and_describe_replies_are_checked_strictly() {
        let mut wrong_access = setup_status_payload("completion", SETUP_ID, DEVICE);
        wrong_access["completion"]["access"] = json!("full");
        let mut no_device = setup_status_payload("completion", SETUP_ID, DEVICE);
        no_device["completion"]["deviceId"] = json!("");
        let mut no_connected = node_describe_payload(DEVICE, true, &NODE_COMMANDS);
        no_connected["connected"] = json!("yes");
        let mut odd_commands = node_describe_payload(DEVICE, true, &NODE_COMMANDS);
        odd_commands["commands"] = json!(["file.fetch", 7]);
        let (tx, _rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::scripted(
            vec![
                (
                    "device.pair.setupStatus",
                    Ok(setup_status_payload("completion", "another-setup", DEVICE)),
                ),
                ("device.pair.setupStatus", Ok(wrong_access)),
                ("device.pair.setupStatus", Ok(no_device)),
                ("device.pair.setupStatus", Ok(json!({"completion": "done"}))),
                (
                    "node.describe",
                    Ok(node_describe_payload("another-node", true, &NODE_COMMANDS)),
                ),
                ("node.describe", Ok(no_connected)),
                ("node.describe", Ok(odd_commands)),
            ],
            tx,
        )
        .await;
        let mut session = connect(&gw).await;
        let mut enrollment = NodeEnrollment::new(&mut session);
        for case in [
            "setupId mismatch",
            "wrong access",
            "no deviceId",
            "not an object",
        ] {
            let err = enrollment.setup_status(SETUP_ID).await.unwrap_err();
            assert!(
                matches!(err, EnrollmentError::InvalidReply(_)),
                "{case}: {err:?}"
            );
        }
        for case in [
            "nodeId mismatch",
            "connected not a boolean",
            "non-string command",
        ] {
            let err = enrollment.describe(DEVICE).await.unwrap_err();
            assert!(
                matches!(err, EnrollmentError::InvalidReply(_)),
                "{case}: {err:?}"
            );
        }
        session.close().await;
    }

    #[tokio::test]
    async fn partial_commands_are_not_ready_and_gateway_errors_pass_through() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::scripted(
            vec![
                (
                    "node.describe",
                    Ok(node_describe_payload(DEVICE, true, &NODE_COMMANDS[..5])),
                ),
                (
                    "device.pair.setupCode",
                    Err(
                        json!({"code":"FORBIDDEN","message":"missing scope: operator.admin",
                        "details":{"code":"MISSING_SCOPE","missingScope":"operator.admin"}}),
                    ),
                ),
                (
                    "node.describe",
                    Err(
                        json!({"code":"UNAVAILABLE","message":"gateway starting","retryable":true}),
                    ),
                ),
            ],
            tx,
        )
        .await;
        let mut session = connect(&gw).await;
        let mut enrollment = NodeEnrollment::new(&mut session);
        let partial = enrollment.describe(DEVICE).await.expect("describe");
        assert!(partial.connected);
        assert!(!partial.is_ready());
        assert_eq!(
            partial.missing_commands(),
            ["workspace.memory", "workspace.skills"]
        );
        let err = enrollment.create_setup(URL).await.unwrap_err();
        assert!(
            matches!(err, EnrollmentError::Gateway(GatewayError::MissingScope(_))),
            "{err:?}"
        );
        assert!(!err.is_transient());
        let err = enrollment.describe(DEVICE).await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        session.close().await;
    }

    #[tokio::test]
    async fn every_call_is_bounded_and_a_timeout_is_transient() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            // read requests (and their cancels), never answer
            peer.linger().await;
        })
        .await;
        let mut session = connect(&gw).await;
        let mut enrollment =
            NodeEnrollment::new(&mut session).with_call_timeout(Duration::from_millis(300));
        let started = tokio::time::Instant::now();
        let err = enrollment.create_setup(URL).await.unwrap_err();
        assert_eq!(err, EnrollmentError::Gateway(GatewayError::Timeout));
        assert!(err.is_transient());
        let err = enrollment.setup_status(SETUP_ID).await.unwrap_err();
        assert_eq!(err, EnrollmentError::Gateway(GatewayError::Timeout));
        let err = enrollment.describe(DEVICE).await.unwrap_err();
        assert_eq!(err, EnrollmentError::Gateway(GatewayError::Timeout));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        session.close().await;
    }
}
