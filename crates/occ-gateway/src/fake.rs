//! An in-process fake gateway (tokio-tungstenite server) scripted per test, and the protocol
//! tests that run against it.
//!
//! Every frame the client sends is checked against the gateway protocol's JSON Schema
//! (`tests/fixtures/protocol-subset.schema.json`, the subset of `@openclaw/gateway-protocol`
//! patched to the 2026.9.6 runtime): `RequestFrame`, plus `ConnectParams`,
//! `AgentsFilesGetParams` / `AgentsFilesSetParams` / `AgentsFilesListParams`,
//! `DevicePairSetupCodeParams` / `DevicePairSetupStatusParams` / `NodeDescribeParams` for those
//! methods. The schema has no definition for the `cancel` frame; its shape
//! (`{"type":"cancel","id":"<non-empty>"}`, nothing else) is checked by hand. A violation is
//! recorded and fails the test when its [`FakeGateway`] is dropped.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderMap;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// Validators for the frames a client may send.
struct Schemas {
    request: jsonschema::Validator,
    connect: jsonschema::Validator,
    files_get: jsonschema::Validator,
    files_set: jsonschema::Validator,
    files_list: jsonschema::Validator,
    setup_code: jsonschema::Validator,
    setup_status: jsonschema::Validator,
    node_describe: jsonschema::Validator,
}

static SCHEMAS: LazyLock<Schemas> = LazyLock::new(|| {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/protocol-subset.schema.json"
    ));
    let schema: Value = serde_json::from_str(text).expect("schema JSON");
    let compile = |name: &str| {
        jsonschema::validator_for(&schema["definitions"][name])
            .unwrap_or_else(|e| panic!("schema {name}: {e}"))
    };
    Schemas {
        request: compile("RequestFrame"),
        connect: compile("ConnectParams"),
        files_get: compile("AgentsFilesGetParams"),
        files_set: compile("AgentsFilesSetParams"),
        files_list: compile("AgentsFilesListParams"),
        setup_code: compile("DevicePairSetupCodeParams"),
        setup_status: compile("DevicePairSetupStatusParams"),
        node_describe: compile("NodeDescribeParams"),
    }
});

fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Checks one frame sent by the client; `Err` names what is wrong.
pub(crate) fn check_client_frame(frame: &Value) -> Result<(), String> {
    match frame.get("type").and_then(Value::as_str) {
        Some("req") => {
            let s = &*SCHEMAS;
            let mut errors = schema_errors(&s.request, frame);
            let params = frame.get("params").cloned().unwrap_or(Value::Null);
            let method_schema = match frame.get("method").and_then(Value::as_str) {
                Some("connect") => Some(&s.connect),
                Some("agents.files.get") => Some(&s.files_get),
                Some("agents.files.set") => Some(&s.files_set),
                Some("agents.files.list") => Some(&s.files_list),
                Some("device.pair.setupCode") => Some(&s.setup_code),
                Some("device.pair.setupStatus") => Some(&s.setup_status),
                Some("node.describe") => Some(&s.node_describe),
                _ => None,
            };
            if let Some(validator) = method_schema {
                errors.extend(schema_errors(validator, &params));
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            }
        }
        // No schema definition: {"type":"cancel","id":"<request id>"} exactly.
        Some("cancel") => {
            let object = frame.as_object().ok_or("cancel frame is not an object")?;
            let id_ok = object
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty());
            if id_ok && object.len() == 2 {
                Ok(())
            } else {
                Err(format!("malformed cancel frame {frame}"))
            }
        }
        _ => Err(format!("unexpected client frame {frame}")),
    }
}

/// Frames checked and violations found, shared by the peers of one [`FakeGateway`].
#[derive(Default)]
pub(crate) struct FrameLog {
    checked: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

/// A scripted gateway on 127.0.0.1; each accepted connection runs the handler with its index.
pub(crate) struct FakeGateway {
    pub url: String,
    pub connections: Arc<AtomicUsize>,
    frames: Arc<FrameLog>,
    task: JoinHandle<()>,
}

impl FakeGateway {
    pub async fn start<F, Fut>(handler: F) -> FakeGateway
    where
        F: Fn(usize, Peer) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let frames = Arc::new(FrameLog::default());
        let log = frames.clone();
        let handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut headers = HeaderMap::new();
                    // the callback's error type is tungstenite's, not ours
                    #[allow(clippy::result_large_err)]
                    let callback = |request: &Request, response: Response| {
                        headers = request.headers().clone();
                        Ok(response)
                    };
                    if let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await {
                        handler(n, Peer { ws, headers, log }).await;
                    }
                });
            }
        });
        FakeGateway {
            url,
            connections,
            frames,
            task,
        }
    }

    pub fn endpoint(&self) -> crate::Endpoint {
        crate::Endpoint::new(self.url.clone(), TOKEN)
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Client frames checked against the schema so far.
    pub fn frames_checked(&self) -> usize {
        self.frames.checked.load(Ordering::SeqCst)
    }
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.task.abort();
        let violations = std::mem::take(
            &mut *self
                .frames
                .violations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !std::thread::panicking() {
            assert!(
                violations.is_empty(),
                "client frames violating the protocol schema: {violations:#?}"
            );
        }
    }
}

pub(crate) const TOKEN: &str = "fake-token-0123456789abcdef";

/// The server side of one connection.
pub(crate) struct Peer {
    pub ws: WebSocketStream<TcpStream>,
    /// Headers of the WebSocket upgrade request.
    pub headers: HeaderMap,
    log: Arc<FrameLog>,
}

impl Peer {
    pub async fn send(&mut self, value: Value) {
        let _ = self.ws.send(Message::text(value.to_string())).await;
    }

    /// The next text frame as JSON (pings/pongs skipped), checked against the protocol
    /// schema; `None` once the client is gone.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            match self.ws.next().await? {
                Ok(Message::Text(t)) => {
                    let frame: Value = match serde_json::from_str(t.as_str()) {
                        Ok(v) => v,
                        Err(e) => {
                            self.violation(format!("client frame is not JSON: {e}"));
                            return None;
                        }
                    };
                    self.log.checked.fetch_add(1, Ordering::SeqCst);
                    if let Err(e) = check_client_frame(&frame) {
                        self.violation(e);
                    }
                    return Some(frame);
                }
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    fn violation(&self, what: String) {
        self.log
            .violations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(what);
    }

    pub async fn challenge(&mut self) {
        self.send(json!({"type":"event","event":"connect.challenge",
            "payload":{"nonce":"n-1","ts":1_795_965_062_726u64}}))
            .await;
    }

    /// Sends the challenge and returns the `connect` request (id, params).
    pub async fn expect_connect(&mut self) -> (String, Value) {
        self.challenge().await;
        let frame = self.recv().await.expect("connect frame");
        assert_eq!(frame["type"], "req");
        assert_eq!(frame["method"], "connect");
        (
            frame["id"].as_str().expect("id").to_owned(),
            frame["params"].clone(),
        )
    }

    pub async fn hello_ok(&mut self, id: &str, protocol: u32, scopes: &[&str]) {
        self.hello_ok_as(id, protocol, "operator", "token", scopes)
            .await;
    }

    pub async fn hello_ok_as(
        &mut self,
        id: &str,
        protocol: u32,
        role: &str,
        method: &str,
        scopes: &[&str],
    ) {
        self.send(json!({"type":"res","id":id,"ok":true,"payload":{
            "type":"hello-ok","protocol":protocol,
            "server":{"version":"2026.9.6","connId":"c-1"},
            "features":{"methods":["agents.files.get","agents.files.set"]},
            "auth":{"method":method,"role":role,"scopes":scopes},
            "policy":{"maxPayload":26_214_400u64,"tickIntervalMs":30_000u64}}}))
            .await;
    }

    /// Challenge, connect (token checked), hello-ok with both scopes; then a `health` event as
    /// the real gateway sends.
    pub async fn handshake(&mut self) -> Value {
        let (id, params) = self.expect_connect().await;
        assert_eq!(params["auth"]["token"], TOKEN);
        self.hello_ok(&id, 4, &["operator.admin", "operator.read"])
            .await;
        self.send(json!({"type":"event","event":"health","payload":{"ok":true},"seq":1}))
            .await;
        params
    }

    /// The next request (id, method, params).
    pub async fn expect_req(&mut self) -> (String, String, Value) {
        let frame = self.recv().await.expect("request frame");
        assert_eq!(frame["type"], "req", "{frame}");
        (
            frame["id"].as_str().expect("id").to_owned(),
            frame["method"].as_str().expect("method").to_owned(),
            frame["params"].clone(),
        )
    }

    /// The next frame is the cancel of request `id`.
    pub async fn expect_cancel(&mut self, id: &str) {
        let frame = self.recv().await.expect("cancel frame");
        assert_eq!(frame, json!({"type":"cancel","id":id}));
    }

    pub async fn res_ok(&mut self, id: &str, payload: Value) {
        self.send(json!({"type":"res","id":id,"ok":true,"payload":payload}))
            .await;
    }

    pub async fn res_err(&mut self, id: &str, error: Value) {
        self.send(json!({"type":"res","id":id,"ok":false,"error":error}))
            .await;
    }

    pub async fn close(&mut self, code: u16, reason: &str) {
        let _ = self
            .ws
            .close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: reason.to_owned().into(),
            }))
            .await;
    }

    /// Keeps the connection open until the client goes away.
    pub async fn linger(&mut self) {
        while self.recv().await.is_some() {}
    }
}

/// A `agents.files.get` answer as the real gateway sends it.
pub(crate) fn file_payload(name: &str, content: &str) -> Value {
    json!({"agentId":"main","workspace":"/w","file":{"name":name,"path":format!("/w/{name}"),
        "missing":false,"size":content.len(),"updatedAtMs":1u64,
        "hash":crate::content_hash(content),"content":content}})
}

/// A `agents.files.set` answer as the real gateway sends it.
pub(crate) fn set_payload(name: &str, content: &str) -> Value {
    let mut payload = file_payload(name, content);
    payload["ok"] = json!(true);
    payload
}

/// A `device.pair.setupCode` answer as the 2026.9.6 gateway sends it for the node profile.
pub(crate) fn setup_code_payload(public_url: &str, setup_code: &str, expires_at_ms: u64) -> Value {
    json!({"setupId":"134c2c2e-78ba-4019-873a-5cef384f3d87","expiresAtMs":expires_at_ms,
        "setupCode":setup_code,"gatewayUrl":public_url,"auth":"token",
        "urlSource":"request.publicUrl","access":"node"})
}

/// A `device.pair.setupStatus` answer once the node paired (`key` is `completion` or
/// `deliveryUncertain`).
pub(crate) fn setup_status_payload(key: &str, setup_id: &str, device_id: &str) -> Value {
    json!({key: {"setupId":setup_id,"deviceId":device_id,"deviceName":"vm","access":"node",
        "ts":1_796_201_930_132u64}})
}

/// A `node.describe` answer as the 2026.9.6 gateway sends it.
pub(crate) fn node_describe_payload(node_id: &str, connected: bool, commands: &[&str]) -> Value {
    json!({"ts":1_796_201_932_755u64,"nodeId":node_id,"displayName":"vm","platform":"linux",
        "version":"2026.9.6","clientId":"node-host","clientMode":"node","caps":["file"],
        "commands":commands,"approvalState":"approved","paired":true,"connected":connected})
}

impl FakeGateway {
    /// A gateway whose every connection does the handshake, then answers its requests in
    /// order from `script` (`method`, `Ok(payload)` or `Err(error shape)`), asserting each
    /// method, and sends every request's params to `params`.
    pub async fn scripted(
        script: Vec<(&'static str, Result<Value, Value>)>,
        params: tokio::sync::mpsc::UnboundedSender<Value>,
    ) -> FakeGateway {
        let script = Arc::new(script);
        FakeGateway::start(move |_, mut peer| {
            let script = script.clone();
            let params = params.clone();
            async move {
                peer.handshake().await;
                for (expected, answer) in script.iter() {
                    let Some(frame) = peer.recv().await else {
                        return;
                    };
                    assert_eq!(frame["method"], *expected, "{frame}");
                    let _ = params.send(frame["params"].clone());
                    let id = frame["id"].as_str().expect("id").to_owned();
                    match answer {
                        Ok(payload) => peer.res_ok(&id, payload.clone()).await,
                        Err(error) => peer.res_err(&id, error.clone()).await,
                    }
                }
                peer.linger().await;
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::{GatewayError, Session, content_hash, wait_ready};

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn handshake_sends_the_backend_operator_connect_and_checks_hello() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let tx = tx.clone();
            async move {
                let params = peer.handshake().await;
                tx.send(params).expect("send params");
                let (id, method, params) = peer.expect_req().await;
                assert_eq!(method, "agents.files.get");
                assert_eq!(params, json!({"agentId":"main","name":"AGENTS.md"}));
                peer.res_ok(&id, file_payload("AGENTS.md", "# AGENTS.md\n"))
                    .await;
                peer.linger().await;
            }
        })
        .await;
        let (mut session, hello) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        assert_eq!(hello.protocol, 4);
        assert_eq!(hello.server_version, "2026.9.6");
        assert_eq!(hello.role, "operator");
        assert_eq!(hello.scopes, ["operator.admin", "operator.read"]);
        assert_eq!(hello.auth_method, "token");

        let params = rx.recv().await.expect("params");
        assert_eq!(
            params,
            json!({
                "minProtocol": 4, "maxProtocol": 4,
                "client": {"id": "gateway-client", "version": env!("CARGO_PKG_VERSION"),
                           "platform": "linux", "mode": "backend"},
                "role": "operator",
                "scopes": ["operator.admin", "operator.read"],
                "auth": {"token": TOKEN, "password": TOKEN},
            }),
            "exact connect params, and no device field"
        );

        let file = session
            .file_get("main", "AGENTS.md", T)
            .await
            .expect("get")
            .expect("present");
        assert_eq!(file.name, "AGENTS.md");
        assert_eq!(file.content, "# AGENTS.md\n");
        assert_eq!(file.hash, content_hash("# AGENTS.md\n"));
        assert_eq!(file.size, 12);
        session.close().await;
    }

    #[tokio::test]
    async fn cleared_scopes_are_missing_scope() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            let (id, _) = peer.expect_connect().await;
            peer.hello_ok(&id, 4, &[]).await;
            peer.linger().await;
        })
        .await;
        let err = Session::connect(&gw.endpoint(), T).await.unwrap_err();
        assert!(matches!(err, GatewayError::MissingScope(_)), "{err:?}");

        let gw = FakeGateway::start(|_, mut peer| async move {
            let (id, _) = peer.expect_connect().await;
            peer.hello_ok(&id, 4, &["operator.read"]).await;
            peer.linger().await;
        })
        .await;
        let err = Session::connect(&gw.endpoint(), T).await.unwrap_err();
        assert!(
            matches!(&err, GatewayError::MissingScope(m) if m.contains("operator.admin")),
            "{err:?}"
        );
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn wrong_protocol_in_hello_is_a_protocol_error() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            let (id, _) = peer.expect_connect().await;
            peer.hello_ok(&id, 3, &["operator.admin", "operator.read"])
                .await;
            peer.linger().await;
        })
        .await;
        let err = Session::connect(&gw.endpoint(), T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Protocol(_)), "{err:?}");
    }

    #[tokio::test]
    async fn token_mismatch_is_unauthorized_and_never_echoes_the_token() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            let (id, params) = peer.expect_connect().await;
            let sent = params["auth"]["token"].as_str().unwrap_or("").to_owned();
            peer.res_err(
                &id,
                json!({"code":"INVALID_REQUEST",
                "message": format!("unauthorized: gateway token mismatch (got {sent})"),
                "details":{"code":"AUTH_TOKEN_MISMATCH","authReason":"token_mismatch",
                           "canRetryWithDeviceToken":false}}),
            )
            .await;
            peer.close(1008, &format!("unauthorized {sent}")).await;
        })
        .await;
        let endpoint = crate::Endpoint::new(gw.url.clone(), "the-wrong-secret-token");
        let err = Session::connect(&endpoint, T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unauthorized(_)), "{err:?}");
        assert!(!format!("{err} {err:?}").contains("the-wrong-secret-token"));
        // not transient: wait_ready gives up at once
        let started = Instant::now();
        let err = wait_ready(&endpoint, Duration::from_secs(30))
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Unauthorized(_)), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(gw.connection_count(), 2);
    }

    #[tokio::test]
    async fn wait_ready_retries_unavailable_until_hello() {
        let gw = FakeGateway::start(|n, mut peer| async move {
            let (id, _) = peer.expect_connect().await;
            if n < 3 {
                peer.res_err(
                    &id,
                    json!({"code":"UNAVAILABLE","message":"gateway starting; retry shortly",
                    "retryable":true,"retryAfterMs":20,"details":{"reason":"startup-sidecars"}}),
                )
                .await;
                peer.close(1013, "gateway starting").await;
            } else {
                peer.hello_ok(&id, 4, &["operator.admin", "operator.read"])
                    .await;
                peer.linger().await;
            }
        })
        .await;
        // one attempt reports the transient error
        let err = Session::connect(&gw.endpoint(), T).await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_millis(20)));
        assert!(err.is_transient());
        let hello = wait_ready(&gw.endpoint(), Duration::from_secs(10))
            .await
            .expect("ready");
        assert_eq!(hello.server_version, "2026.9.6");
        assert_eq!(gw.connection_count(), 4);
    }

    #[tokio::test]
    async fn close_1013_before_an_answer_is_unavailable() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            let _ = peer.expect_connect().await;
            peer.close(1013, "gateway starting").await;
        })
        .await;
        let err = Session::connect(&gw.endpoint(), T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unavailable { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable_and_wait_ready_times_out() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let endpoint = crate::Endpoint::loopback(port, TOKEN);
        let err = Session::connect(&endpoint, T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unreachable(_)), "{err:?}");
        let started = Instant::now();
        let err = wait_ready(&endpoint, Duration::from_millis(700))
            .await
            .unwrap_err();
        assert_eq!(err, GatewayError::Timeout);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn responses_are_matched_by_id_and_events_skipped() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let (first, _, _) = peer.expect_req().await;
            // the client gave up on the first request after writing it: a cancel follows
            peer.expect_cancel(&first).await;
            let (second, _, _) = peer.expect_req().await;
            // answered out of order, with events and an unknown frame type in between
            peer.send(json!({"type":"event","event":"tick","payload":{"ts":1}}))
                .await;
            peer.send(json!({"type":"future-kind"})).await;
            peer.res_ok(&second, json!({"which":"second"})).await;
            peer.send(json!({"type":"event","event":"presence","payload":{}}))
                .await;
            peer.res_ok(&first, json!({"which":"first"})).await;
            let (third, _, _) = peer.expect_req().await;
            peer.res_ok(&third, json!({"which":"third"})).await;
            peer.linger().await;
        })
        .await;
        let (mut session, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        // The first call times out before its answer (the server waits for a second request).
        let err = session
            .call("health", json!({}), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert_eq!(err, GatewayError::Timeout);
        // The second call gets its own answer, skipping events and the stale answer
        // to the first.
        let second = session.call("health", json!({}), T).await.expect("second");
        assert_eq!(second, json!({"which":"second"}));
        let third = session.call("health", json!({}), T).await.expect("third");
        assert_eq!(third, json!({"which":"third"}));
        session.close().await;
    }

    #[tokio::test]
    async fn pings_are_answered_while_a_call_waits() {
        let ponged = Arc::new(AtomicBool::new(false));
        let seen = ponged.clone();
        let gw = FakeGateway::start(move |_, mut peer| {
            let seen = seen.clone();
            async move {
                peer.handshake().await;
                let (id, _, _) = peer.expect_req().await;
                peer.ws
                    .send(Message::Ping(b"keepalive".to_vec().into()))
                    .await
                    .expect("ping");
                loop {
                    match peer.ws.next().await {
                        Some(Ok(Message::Pong(p))) => {
                            assert_eq!(&p[..], b"keepalive");
                            seen.store(true, Ordering::SeqCst);
                            break;
                        }
                        Some(Ok(_)) => continue,
                        _ => return,
                    }
                }
                peer.res_ok(&id, json!({"ok":true})).await;
                peer.linger().await;
            }
        })
        .await;
        let (mut session, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        let out = session.call("health", json!({}), T).await.expect("call");
        assert_eq!(out, json!({"ok":true}));
        assert!(ponged.load(Ordering::SeqCst));
        session.close().await;
    }

    #[tokio::test]
    async fn files_get_missing_set_and_conflict() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            // get of a missing file
            let (id, _, params) = peer.expect_req().await;
            assert_eq!(params["name"], "MEMORY.md");
            peer.res_ok(&id, json!({"agentId":"main","workspace":"/w","file":{"name":"MEMORY.md",
                "path":"/w/MEMORY.md","missing":true,"expectedAbsent":true}}))
                .await;
            // unconditional set
            let (id, method, params) = peer.expect_req().await;
            assert_eq!(method, "agents.files.set");
            assert_eq!(params, json!({"agentId":"main","name":"USER.md","content":"hi\n"}));
            let mut payload = file_payload("USER.md", "hi\n");
            payload["ok"] = json!(true);
            peer.res_ok(&id, payload).await;
            // conditional set that conflicts
            let (id, _, params) = peer.expect_req().await;
            assert_eq!(params["expectedHash"], "0".repeat(64));
            peer.res_err(&id, json!({"code":"INVALID_REQUEST",
                "message":"agent file \"USER.md\" changed since it was read",
                "details":{"type":"agent_file_conflict","name":"USER.md","currentHash":content_hash("hi\n")}}))
                .await;
            // unsupported name
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(&id, json!({"code":"INVALID_REQUEST","message":"unsupported file \"notes.txt\""}))
                .await;
            // a get answer without hash (older gateway): the hash is computed
            let (id, _, _) = peer.expect_req().await;
            peer.res_ok(&id, json!({"agentId":"main","workspace":"/w","file":{"name":"SOUL.md",
                "path":"/w/SOUL.md","missing":false,"content":"soul"}}))
                .await;
            peer.linger().await;
        })
        .await;
        let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        assert_eq!(s.file_get("main", "MEMORY.md", T).await.expect("get"), None);
        let written = s
            .file_set("main", "USER.md", "hi\n", None, T)
            .await
            .expect("set");
        assert_eq!(written.hash, content_hash("hi\n"));
        assert_eq!(written.size, 3);
        let err = s
            .file_set("main", "USER.md", "x", Some(&"0".repeat(64)), T)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            GatewayError::Conflict {
                current_hash: content_hash("hi\n")
            }
        );
        let err = s.file_get("main", "notes.txt", T).await.unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
        let soul = s
            .file_get("main", "SOUL.md", T)
            .await
            .expect("get")
            .expect("present");
        assert_eq!(soul.hash, content_hash("soul"));
        assert_eq!(soul.size, 4);
        // a malformed expectedHash never reaches the gateway
        let err = s
            .file_set("main", "USER.md", "x", Some("abc"), T)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
        s.close().await;
    }

    #[tokio::test]
    async fn server_going_away_mid_call_is_unreachable() {
        // TCP dropped without a close frame
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let _ = peer.expect_req().await;
            drop(peer);
        })
        .await;
        let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        let err = s.call("health", json!({}), T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unreachable(_)), "{err:?}");
        // the session stays broken
        let again = s.call("health", json!({}), T).await.unwrap_err();
        assert!(matches!(again, GatewayError::Unreachable(_)), "{again:?}");

        // an orderly close frame
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let _ = peer.expect_req().await;
            peer.close(1000, "bye").await;
        })
        .await;
        let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        let err = s.call("health", json!({}), T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unreachable(_)), "{err:?}");

        // a restart: shutdown event then 1012
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let _ = peer.expect_req().await;
            peer.send(json!({"type":"event","event":"shutdown",
                "payload":{"reason":"restart","restartExpectedMs":1500}}))
                .await;
            peer.close(1012, "service restart").await;
        })
        .await;
        let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        let err = s.call("health", json!({}), T).await.unwrap_err();
        assert_eq!(
            err.retry_after(),
            Some(Duration::from_millis(1500)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn timeouts_bound_connect_and_calls() {
        // accepts the WebSocket but never sends the challenge
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.linger().await;
        })
        .await;
        let started = Instant::now();
        let err = Session::connect(&gw.endpoint(), Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(err, GatewayError::Timeout);
        assert!(started.elapsed() < Duration::from_secs(2));

        // never answers a call
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            peer.linger().await;
        })
        .await;
        let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
        let started = Instant::now();
        let err = s
            .call("health", json!({}), Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(err, GatewayError::Timeout);
        assert!(started.elapsed() < Duration::from_secs(2));
        s.close().await;

        // a raw TCP listener that never completes the WebSocket upgrade
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let hold = tokio::spawn(async move {
            let (_tcp, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let err = Session::connect(
            &crate::Endpoint::new(url, TOKEN),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        assert_eq!(err, GatewayError::Timeout);
        hold.abort();
    }

    #[tokio::test]
    async fn malformed_and_oversized_frames_are_protocol_errors() {
        let gw = FakeGateway::start(|n, mut peer| async move {
            peer.handshake().await;
            let _ = peer.expect_req().await;
            match n {
                0 => {
                    let _ = peer.ws.send(Message::text("not json")).await;
                }
                1 => {
                    let _ = peer.ws.send(Message::Binary(vec![1, 2, 3].into())).await;
                }
                _ => {
                    let big = "x".repeat(crate::MAX_MESSAGE_BYTES + 1024);
                    let _ = peer.ws.send(Message::text(big)).await;
                }
            }
            peer.linger().await;
        })
        .await;
        for _ in 0..3 {
            let (mut s, _) = Session::connect(&gw.endpoint(), T).await.expect("connect");
            let err = s.call("health", json!({}), T).await.unwrap_err();
            assert!(matches!(err, GatewayError::Protocol(_)), "{err:?}");
        }
    }

    #[tokio::test]
    async fn refused_upgrade_and_bad_urls() {
        // an HTTP server that answers 403 to the upgrade
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let (mut tcp, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 2048];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
                .await;
        });
        let err = Session::connect(&crate::Endpoint::new(url, TOKEN), T)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, GatewayError::Unreachable(m) if m.contains("403")),
            "{err:?}"
        );
        server.abort();

        let err = Session::connect(&crate::Endpoint::new("http://127.0.0.1:1", TOKEN), T)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Protocol(_)), "{err:?}");

        // wss:// uses rustls with ring (no process-wide provider needed); a peer that is not
        // TLS fails the handshake
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("wss://{}", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            let (mut tcp, _) = listener.accept().await.expect("accept");
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        });
        let err = Session::connect(&crate::Endpoint::new(url, TOKEN), T)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Unreachable(_)), "{err:?}");
        server.abort();
    }
}

/// [`crate::FileClient`] against the fake gateway: every outcome classification, cancel
/// frames, connection reuse, rotation, grants and edge authentication.
#[cfg(test)]
mod file_client {
    use std::time::Duration;

    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;
    use crate::{
        Endpoint, FileClient, FileClientSettings, MAX_FILE_BYTES, ReadOutcome, WriteOutcome,
        content_hash,
    };

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// Waits for the next message of a test channel, bounded.
    async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("in time")
            .expect("a message")
    }

    /// A gateway that serves files from a map it keeps per connection.
    async fn serving(initial: &'static [(&'static str, &'static str)]) -> FakeGateway {
        FakeGateway::start(move |_, mut peer| async move {
            peer.handshake().await;
            let mut files: std::collections::HashMap<String, String> = initial
                .iter()
                .map(|(n, c)| ((*n).to_owned(), (*c).to_owned()))
                .collect();
            while let Some(frame) = peer.recv().await {
                if frame["type"] != "req" {
                    continue;
                }
                let id = frame["id"].as_str().expect("id").to_owned();
                let name = frame["params"]["name"].as_str().unwrap_or("").to_owned();
                match frame["method"].as_str() {
                    Some("agents.files.get") => match files.get(&name) {
                        Some(content) => peer.res_ok(&id, file_payload(&name, content)).await,
                        None => {
                            peer.res_ok(
                                &id,
                                json!({"agentId":"main","workspace":"/w",
                                "file":{"name":name,"path":"/w/x","missing":true}}),
                            )
                            .await;
                        }
                    },
                    Some("agents.files.set") => {
                        let content = frame["params"]["content"].as_str().expect("content");
                        files.insert(name.clone(), content.to_owned());
                        peer.res_ok(&id, set_payload(&name, content)).await;
                    }
                    _ => {
                        peer.res_err(
                            &id,
                            json!({"code":"INVALID_REQUEST","message":"unknown method"}),
                        )
                        .await;
                    }
                }
            }
        })
        .await
    }

    #[tokio::test]
    async fn reads_and_writes_reuse_one_verified_connection() {
        let gw = serving(&[("AGENTS.md", "# AGENTS.md\n")]).await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        let ReadOutcome::Ok(file) = client.read(&ep, "main", "AGENTS.md", soon()).await else {
            panic!("read")
        };
        assert_eq!(file.content, "# AGENTS.md\n");
        assert_eq!(file.hash, content_hash("# AGENTS.md\n"));
        assert_eq!(file.size, 12);
        // size is the UTF-8 byte count of what was submitted
        let content = "# USER.md\n\nJosé ☕\n";
        assert_eq!(
            client.write(&ep, "main", "USER.md", content, soon()).await,
            WriteOutcome::Ok {
                size: content.len() as u64
            }
        );
        assert_eq!(content.len(), 21);
        let ReadOutcome::Ok(back) = client.read(&ep, "main", "USER.md", soon()).await else {
            panic!("read back")
        };
        assert_eq!(back.content, content);
        // the largest allowed content goes through
        let largest = "x".repeat(MAX_FILE_BYTES);
        assert_eq!(
            client.write(&ep, "main", "SOUL.md", &largest, soon()).await,
            WriteOutcome::Ok {
                size: MAX_FILE_BYTES as u64
            }
        );
        assert_eq!(
            client.read(&ep, "main", "IDENTITY.md", soon()).await,
            ReadOutcome::Missing
        );
        let stats = client.stats();
        assert_eq!(gw.connection_count(), 1);
        assert_eq!(stats.connections_opened, 1);
        assert_eq!(stats.requests_written, 5);
        assert_eq!(stats.open_sessions, 1);
        assert_eq!(stats.cancels_sent, 0);
        assert!(gw.frames_checked() >= 6, "{}", gw.frames_checked());
    }

    #[tokio::test]
    async fn missing_answers_and_missing_errors() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_ok(
                &id,
                json!({"agentId":"main","workspace":"/w","file":{"name":"USER.md",
                "path":"/w/USER.md","missing":true,"expectedAbsent":false}}),
            )
            .await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(&id, json!({"code":"NOT_FOUND","message":"no such file"}))
                .await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(
                &id,
                json!({"code":"INVALID_REQUEST","message":"gone",
                "details":{"missing":true}}),
            )
            .await;
            let (id, method, _) = peer.expect_req().await;
            assert_eq!(method, "agents.files.set");
            peer.res_err(
                &id,
                json!({"code":"INVALID_REQUEST","message":"gone",
                "details":{"fileMissing":true}}),
            )
            .await;
            peer.linger().await;
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        for _ in 0..3 {
            assert_eq!(
                client.read(&ep, "main", "USER.md", soon()).await,
                ReadOutcome::Missing
            );
        }
        assert_eq!(
            client.write(&ep, "main", "USER.md", "x", soon()).await,
            WriteOutcome::Missing
        );
        assert_eq!(client.stats().connections_opened, 1);
    }

    #[tokio::test]
    async fn invalid_content_from_the_gateway_is_unavailable() {
        let long = "y".repeat(MAX_FILE_BYTES + 1);
        let gw = FakeGateway::start(move |_, mut peer| {
            let long = long.clone();
            async move {
                peer.handshake().await;
                // too long
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, file_payload("USER.md", &long)).await;
                // NUL
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, file_payload("USER.md", "secret\0stuff"))
                    .await;
                // another file's name
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, file_payload("SOUL.md", "secret soul"))
                    .await;
                // a hash that does not match the content
                let (id, _, _) = peer.expect_req().await;
                let mut p = file_payload("USER.md", "secret user");
                p["file"]["hash"] = json!(content_hash("other"));
                peer.res_ok(&id, p).await;
                // content is not a string
                let (id, _, _) = peer.expect_req().await;
                let mut p = file_payload("USER.md", "");
                p["file"]["content"] = json!(42);
                peer.res_ok(&id, p).await;
                // no file at all
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, json!({"agentId":"main"})).await;
                peer.linger().await;
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        for case in 0..6 {
            let outcome = client.read(&ep, "main", "USER.md", soon()).await;
            let ReadOutcome::Unavailable(reason) = &outcome else {
                panic!("case {case}: {outcome:?}")
            };
            assert!(
                reason.starts_with("invalid content from the gateway"),
                "case {case}: {reason}"
            );
            assert!(
                !reason.contains("secret") && !reason.contains("yyyy"),
                "{reason}"
            );
        }
        // the connection is still good after invalid answers
        assert_eq!(client.stats().connections_opened, 1);
    }

    #[tokio::test]
    async fn definite_errors_are_unavailable_and_never_retried() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(
                &id,
                json!({"code":"INVALID_REQUEST","message":"agent \"nobody\" not found"}),
            )
            .await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(
                &id,
                json!({"code":"FORBIDDEN","message":"missing scope: operator.admin",
                "details":{"code":"MISSING_SCOPE","missingScope":"operator.admin"}}),
            )
            .await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_err(
                &id,
                json!({"code":"UNAVAILABLE","message":"The server is busy.",
                "retryable":true,"retryAfterMs":10}),
            )
            .await;
            // an ok answer that does not name the written file: the write may have happened
            let (id, _, _) = peer.expect_req().await;
            peer.res_ok(&id, json!({"ok":true,"agentId":"main"})).await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_ok(&id, set_payload("SOUL.md", "x")).await;
            peer.linger().await;
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        let outcome = client.read(&ep, "nobody", "USER.md", soon()).await;
        assert!(
            matches!(&outcome, ReadOutcome::Unavailable(r) if r.contains("not found")),
            "{outcome:?}"
        );
        let outcome = client.write(&ep, "main", "USER.md", "x", soon()).await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("operator.admin")),
            "{outcome:?}"
        );
        let outcome = client.write(&ep, "main", "USER.md", "x", soon()).await;
        assert!(
            matches!(outcome, WriteOutcome::Unavailable(_)),
            "{outcome:?}"
        );
        for _ in 0..2 {
            let outcome = client.write(&ep, "main", "USER.md", "x", soon()).await;
            assert!(matches!(outcome, WriteOutcome::Unknown(_)), "{outcome:?}");
        }
        let stats = client.stats();
        assert_eq!(stats.requests_written, 5, "one frame per operation");
        assert_eq!(stats.connections_opened, 1);
    }

    #[tokio::test]
    async fn connection_lost_after_the_set_request_is_unknown() {
        // n = 0: TCP dropped; 1: close frame (restart); 2: the same for a read
        let gw = FakeGateway::start(|n, mut peer| async move {
            peer.handshake().await;
            let _ = peer.expect_req().await;
            match n {
                0 | 2 => drop(peer),
                _ => {
                    peer.send(json!({"type":"event","event":"shutdown",
                        "payload":{"reason":"restart","restartExpectedMs":1500}}))
                        .await;
                    peer.close(1012, "service restart").await;
                }
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        for _ in 0..2 {
            let started = Instant::now();
            let outcome = client.write(&ep, "main", "USER.md", "x", soon()).await;
            assert!(
                matches!(&outcome, WriteOutcome::Unknown(r) if r.starts_with("the request was sent")),
                "{outcome:?}"
            );
            assert!(started.elapsed() < Duration::from_secs(2));
        }
        let outcome = client.read(&ep, "main", "USER.md", soon()).await;
        assert!(
            matches!(outcome, ReadOutcome::Unavailable(_)),
            "{outcome:?}"
        );
        assert_eq!(client.stats().stale_retries, 0, "never retried after send");
        assert_eq!(client.stats().requests_written, 3);
    }

    #[tokio::test]
    async fn deadline_after_send_is_unknown_and_the_request_is_cancelled() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let tx = tx.clone();
            async move {
                peer.handshake().await;
                let (id, method, _) = peer.expect_req().await;
                assert_eq!(method, "agents.files.set");
                // no answer; the client gives up and cancels
                peer.expect_cancel(&id).await;
                tx.send(format!("cancelled {id}")).expect("notify");
                // like the real gateway: the late answer, and an error answer to the cancel
                // frame under the same id; both skipped
                peer.res_ok(&id, set_payload("USER.md", "late")).await;
                peer.res_err(&id, json!({"code":"INVALID_REQUEST",
                    "message":"invalid request frame: at root: must have required property 'method'"}))
                    .await;
                // the same connection serves the next operation; a read that also times out
                // after send is Unavailable (reads have no unknown outcome)
                let (id, _, _) = peer.expect_req().await;
                peer.expect_cancel(&id).await;
                tx.send("read cancelled".into()).expect("notify");
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, file_payload("USER.md", "fine")).await;
                peer.linger().await;
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        let started = Instant::now();
        let outcome = client
            .write(
                &ep,
                "main",
                "USER.md",
                "x",
                Instant::now() + Duration::from_millis(300),
            )
            .await;
        let took = started.elapsed();
        assert!(
            matches!(&outcome, WriteOutcome::Unknown(r) if r.contains("deadline")),
            "{outcome:?}"
        );
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(1),
            "{took:?}"
        );
        assert!(next(&mut rx).await.starts_with("cancelled "));
        let outcome = client
            .read(
                &ep,
                "main",
                "USER.md",
                Instant::now() + Duration::from_millis(200),
            )
            .await;
        assert!(
            matches!(outcome, ReadOutcome::Unavailable(_)),
            "{outcome:?}"
        );
        assert_eq!(next(&mut rx).await, "read cancelled");
        assert!(matches!(
            client.read(&ep, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(f) if f.content == "fine"
        ));
        let stats = client.stats();
        assert_eq!(stats.cancels_sent, 2);
        assert_eq!(stats.connections_opened, 1);
    }

    #[tokio::test]
    async fn a_dropped_caller_future_cancels_the_request() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let tx = tx.clone();
            async move {
                peer.handshake().await;
                let (id, _, _) = peer.expect_req().await;
                tx.send("request received".to_owned()).expect("notify");
                peer.expect_cancel(&id).await;
                tx.send("cancelled".to_owned()).expect("notify");
                peer.linger().await;
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        let task = {
            let client = client.clone();
            let ep = ep.clone();
            tokio::spawn(async move {
                client
                    .write(
                        &ep,
                        "main",
                        "USER.md",
                        "x",
                        Instant::now() + Duration::from_secs(60),
                    )
                    .await
            })
        };
        assert_eq!(next(&mut rx).await, "request received");
        // the HTTP client disconnected: its handler's future is dropped
        task.abort();
        assert!(task.await.expect_err("aborted").is_cancelled());
        assert_eq!(next(&mut rx).await, "cancelled");
        assert_eq!(client.stats().cancels_sent, 1);
    }

    #[tokio::test]
    async fn failures_before_the_request_is_sent_are_unavailable() {
        // nothing listening
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let client = FileClient::new();
        let outcome = client
            .write(
                &Endpoint::loopback(port, TOKEN),
                "main",
                "USER.md",
                "x",
                soon(),
            )
            .await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("unreachable")),
            "{outcome:?}"
        );

        // the token is refused (and never echoed)
        let gw = FakeGateway::start(|_, mut peer| async move {
            let (id, params) = peer.expect_connect().await;
            let sent = params["auth"]["token"].as_str().unwrap_or("").to_owned();
            peer.res_err(
                &id,
                json!({"code":"INVALID_REQUEST",
                "message": format!("unauthorized: gateway token mismatch ({sent})"),
                "details":{"code":"AUTH_TOKEN_MISMATCH"}}),
            )
            .await;
            peer.close(1008, "unauthorized").await;
        })
        .await;
        let wrong = Endpoint::new(gw.url.clone(), "the-wrong-secret-token");
        let outcome = client.write(&wrong, "main", "USER.md", "x", soon()).await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("refused the credentials")),
            "{outcome:?}"
        );
        assert!(!format!("{outcome:?}").contains("the-wrong-secret-token"));

        // the deadline passes during the handshake (no challenge ever comes)
        let gw = FakeGateway::start(|_, mut peer| async move { peer.linger().await }).await;
        let started = Instant::now();
        let outcome = client
            .write(
                &gw.endpoint(),
                "main",
                "USER.md",
                "x",
                Instant::now() + Duration::from_millis(300),
            )
            .await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("deadline")),
            "{outcome:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));

        // invalid requests never connect
        let gw = serving(&[]).await;
        let ep = gw.endpoint();
        let too_long = "x".repeat(MAX_FILE_BYTES + 1);
        for (agent, name, content) in [
            ("main", "MEMORY.md", "x"),
            ("main", "notes.txt", "x"),
            ("main", "USER.md", too_long.as_str()),
            ("main", "USER.md", "nul\0"),
            ("", "USER.md", "x"),
        ] {
            let outcome = client.write(&ep, agent, name, content, soon()).await;
            assert!(
                matches!(&outcome, WriteOutcome::Unavailable(r) if r.starts_with("invalid request")),
                "{name}: {outcome:?}"
            );
        }
        assert!(matches!(
            client.read(&ep, "main", "BOOTSTRAP.md", soon()).await,
            ReadOutcome::Unavailable(_)
        ));
        for url in ["http://127.0.0.1:1", "ws://192.0.2.1:1"] {
            let outcome = client
                .read(&Endpoint::new(url, TOKEN), "main", "USER.md", soon())
                .await;
            assert!(
                matches!(outcome, ReadOutcome::Unavailable(_)),
                "{outcome:?}"
            );
        }
        // an edge header that cannot be sent
        let outcome = client
            .read(
                &Endpoint::edge(gw.url.clone(), "x-api-key", "bad\r\nvalue"),
                "main",
                "USER.md",
                soon(),
            )
            .await;
        assert!(
            matches!(&outcome, ReadOutcome::Unavailable(r) if !r.contains("bad\r\nvalue")),
            "{outcome:?}"
        );
        assert_eq!(gw.connection_count(), 0, "nothing was sent");
        assert_eq!(client.stats().requests_written, 0);
    }

    #[tokio::test]
    async fn a_pooled_connection_closed_by_the_gateway_is_replaced() {
        // the gateway closes each connection after one answer (n = 0 with a close frame,
        // n = 1 by dropping TCP); the client notices while idle and reconnects
        let gw = FakeGateway::start(|n, mut peer| async move {
            peer.handshake().await;
            let (id, _, _) = peer.expect_req().await;
            peer.res_ok(&id, file_payload("USER.md", "u")).await;
            match n {
                0 => peer.close(1000, "bye").await,
                1 => drop(peer),
                _ => peer.linger().await,
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        for round in 1..=3 {
            let outcome = client.read(&ep, "main", "USER.md", soon()).await;
            assert!(
                matches!(&outcome, ReadOutcome::Ok(f) if f.content == "u"),
                "{outcome:?}"
            );
            // let the connection task see the close
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(client.stats().connections_opened, round);
        }
        assert_eq!(client.stats().stale_retries, 0);
    }

    #[tokio::test]
    async fn a_pooled_connection_found_closed_at_send_is_retried_once() {
        let gw = serving(&[("USER.md", "u")]).await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        assert!(matches!(
            client.read(&ep, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        // The pooled connection is going away, but the pool does not know yet: the close is
        // queued ahead of the next request (this runtime is single-threaded, so the
        // connection task runs only once the operation waits), and the request is refused
        // unsent. The operation reconnects once, transparently.
        client.pooled(&ep).expect("pooled").close_now();
        assert_eq!(
            client.write(&ep, "main", "USER.md", "v", soon()).await,
            WriteOutcome::Ok { size: 1 }
        );
        let stats = client.stats();
        assert_eq!(stats.stale_retries, 1);
        assert_eq!(stats.connections_opened, 2);
        assert_eq!(stats.requests_written, 2);
        assert_eq!(gw.connection_count(), 2);
    }

    #[tokio::test]
    async fn a_rotated_credential_never_reuses_the_old_session() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |n, mut peer| {
            let tx = tx.clone();
            async move {
                let (id, params) = peer.expect_connect().await;
                tx.send(format!(
                    "{n} connect {}",
                    params["auth"]["token"].as_str().unwrap_or("")
                ))
                .expect("notify");
                peer.hello_ok(&id, 4, &["operator.admin", "operator.read"])
                    .await;
                while let Some(frame) = peer.recv().await {
                    let id = frame["id"].as_str().expect("id").to_owned();
                    peer.res_ok(&id, file_payload("USER.md", "u")).await;
                }
                tx.send(format!("{n} closed")).expect("notify");
            }
        })
        .await;
        let client = FileClient::new();
        let old = Endpoint::new(gw.url.clone(), "token-one");
        let new = Endpoint::new(gw.url.clone(), "token-two");
        assert!(matches!(
            client.read(&old, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        assert_eq!(next(&mut rx).await, "0 connect token-one");
        assert!(matches!(
            client.read(&new, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        assert_eq!(next(&mut rx).await, "1 connect token-two");
        // the session opened with the old token is closed once the new one is up
        assert_eq!(next(&mut rx).await, "0 closed");
        assert!(matches!(
            client.read(&new, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        // going back to the old token opens a new connection too
        assert!(matches!(
            client.read(&old, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        assert_eq!(next(&mut rx).await, "2 connect token-one");
        assert_eq!(gw.connection_count(), 3);
        assert_eq!(client.stats().open_sessions, 1);
    }

    #[tokio::test]
    async fn grants_are_checked_per_operation() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |n, mut peer| {
            let tx = tx.clone();
            async move {
                let (id, _) = peer.expect_connect().await;
                match n {
                    0 => peer.hello_ok(&id, 4, &[]).await,
                    1 => peer.hello_ok(&id, 4, &["operator.read"]).await,
                    2 => {
                        peer.hello_ok_as(&id, 4, "node", "token", &["operator.admin"])
                            .await;
                    }
                    _ => peer.hello_ok(&id, 4, &["operator.admin"]).await,
                }
                while let Some(frame) = peer.recv().await {
                    let id = frame["id"].as_str().expect("id").to_owned();
                    let method = frame["method"].as_str().expect("method").to_owned();
                    tx.send(format!("{n} {method}")).expect("notify");
                    let payload = if method == "agents.files.set" {
                        set_payload("USER.md", "w")
                    } else {
                        file_payload("USER.md", "r")
                    };
                    peer.res_ok(&id, payload).await;
                }
            }
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        // empty grant: refused, nothing sent
        let outcome = client.read(&ep, "main", "USER.md", soon()).await;
        assert!(
            matches!(&outcome, ReadOutcome::Unavailable(r) if r.contains("granted []")),
            "{outcome:?}"
        );
        // operator.read: reads only
        assert!(matches!(
            client.read(&ep, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        let outcome = client.write(&ep, "main", "USER.md", "w", soon()).await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("operator.admin")),
            "{outcome:?}"
        );
        // another role
        let outcome = client.write(&ep, "main", "USER.md", "w", soon()).await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("role")),
            "{outcome:?}"
        );
        // operator.admin alone: both
        assert_eq!(
            client.write(&ep, "main", "USER.md", "w", soon()).await,
            WriteOutcome::Ok { size: 1 }
        );
        assert!(matches!(
            client.read(&ep, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        let mut seen = Vec::new();
        while let Ok(m) = rx.try_recv() {
            seen.push(m);
        }
        assert_eq!(
            seen,
            [
                "1 agents.files.get",
                "3 agents.files.set",
                "3 agents.files.get"
            ]
        );
        assert_eq!(client.stats().requests_written, 3);
    }

    #[tokio::test]
    async fn edge_authentication_sends_the_header_and_no_auth_param() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let tx = tx.clone();
            async move {
                let key = peer
                    .headers
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let (id, params) = peer.expect_connect().await;
                tx.send((key.clone(), params)).expect("notify");
                peer.hello_ok_as(&id, 4, "operator", "trusted-proxy", &["operator.admin"])
                    .await;
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, set_payload("AGENTS.md", "a")).await;
                // an error that echoes the key is scrubbed
                let (id, _, _) = peer.expect_req().await;
                peer.res_err(
                    &id,
                    json!({"code":"UNAVAILABLE","message":format!("bad key {key}")}),
                )
                .await;
                peer.linger().await;
            }
        })
        .await;
        let client = FileClient::new();
        let ep = Endpoint::edge(gw.url.clone(), "x-api-key", "edge-key-0123456789");
        assert_eq!(
            client.write(&ep, "main", "AGENTS.md", "a", soon()).await,
            WriteOutcome::Ok { size: 1 }
        );
        let (key, params) = next(&mut rx).await;
        assert_eq!(key, "edge-key-0123456789");
        assert!(params.get("auth").is_none(), "{params}");
        assert!(params.get("device").is_none(), "{params}");
        assert_eq!(params["client"]["id"], "gateway-client");
        assert_eq!(params["client"]["mode"], "backend");
        assert_eq!(params["role"], "operator");
        let outcome = client.read(&ep, "main", "AGENTS.md", soon()).await;
        assert!(
            matches!(&outcome, ReadOutcome::Unavailable(r) if r.contains("<redacted>") && !r.contains("edge-key")),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn concurrent_operations_share_one_connection() {
        let gw = FakeGateway::start(|_, mut peer| async move {
            peer.handshake().await;
            let (a, _, pa) = peer.expect_req().await;
            let (b, _, pb) = peer.expect_req().await;
            // answered in reverse order
            let name_b = pb["name"].as_str().expect("name").to_owned();
            peer.res_ok(&b, file_payload(&name_b, &format!("content of {name_b}")))
                .await;
            let name_a = pa["name"].as_str().expect("name").to_owned();
            peer.res_ok(&a, file_payload(&name_a, &format!("content of {name_a}")))
                .await;
            peer.linger().await;
        })
        .await;
        let client = FileClient::new();
        let ep = gw.endpoint();
        // neither finds a pooled connection: the first opens one, the second waits for it
        let (a, b) = tokio::join!(
            client.read(&ep, "main", "AGENTS.md", soon()),
            client.read(&ep, "main", "SOUL.md", soon()),
        );
        assert!(
            matches!(&a, ReadOutcome::Ok(f) if f.content == "content of AGENTS.md"),
            "{a:?}"
        );
        assert!(
            matches!(&b, ReadOutcome::Ok(f) if f.content == "content of SOUL.md"),
            "{b:?}"
        );
        assert_eq!(
            gw.connection_count(),
            1,
            "the second waited for the first's connection"
        );
    }

    #[tokio::test]
    async fn idle_connections_answer_pings_then_close() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gw = FakeGateway::start(move |_, mut peer| {
            let tx = tx.clone();
            async move {
                peer.handshake().await;
                let (id, _, _) = peer.expect_req().await;
                peer.res_ok(&id, file_payload("USER.md", "u")).await;
                // while the client is idle
                tokio::time::sleep(Duration::from_millis(50)).await;
                peer.ws
                    .send(Message::Ping(b"keepalive".to_vec().into()))
                    .await
                    .expect("ping");
                loop {
                    match peer.ws.next().await {
                        Some(Ok(Message::Pong(p))) => {
                            assert_eq!(&p[..], b"keepalive");
                            tx.send("pong").expect("notify");
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    }
                }
                tx.send("closed").expect("notify");
            }
        })
        .await;
        let client = FileClient::with_settings(FileClientSettings {
            idle_timeout: Duration::from_millis(400),
            ..FileClientSettings::default()
        });
        let ep = gw.endpoint();
        assert!(matches!(
            client.read(&ep, "main", "USER.md", soon()).await,
            ReadOutcome::Ok(_)
        ));
        let idle_since = Instant::now();
        assert_eq!(next(&mut rx).await, "pong");
        assert_eq!(next(&mut rx).await, "closed");
        let idle = idle_since.elapsed();
        assert!(
            idle >= Duration::from_millis(300) && idle < Duration::from_secs(3),
            "{idle:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(client.stats().open_sessions, 0);
    }

    #[tokio::test]
    async fn the_pool_is_bounded() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gateway = |label: &'static str| {
            let tx = tx.clone();
            FakeGateway::start(move |_, mut peer| {
                let tx = tx.clone();
                async move {
                    peer.handshake().await;
                    while let Some(frame) = peer.recv().await {
                        let id = frame["id"].as_str().expect("id").to_owned();
                        peer.res_ok(&id, file_payload("USER.md", label)).await;
                    }
                    tx.send(label).expect("notify");
                }
            })
        };
        let a = gateway("a").await;
        let b = gateway("b").await;
        let client = FileClient::with_settings(FileClientSettings {
            max_sessions: 1,
            ..FileClientSettings::default()
        });
        for gw in [&a, &b] {
            assert!(matches!(
                client.read(&gw.endpoint(), "main", "USER.md", soon()).await,
                ReadOutcome::Ok(_)
            ));
        }
        // a's idle connection made room for b's
        assert_eq!(next(&mut rx).await, "a");
        assert_eq!(client.stats().open_sessions, 1);
        drop(client);
        // dropping the client closes the rest
        assert_eq!(next(&mut rx).await, "b");
    }

    #[test]
    fn the_schema_check_catches_bad_frames() {
        let good = json!({"type":"req","id":"1","method":"agents.files.get",
            "params":{"agentId":"main","name":"USER.md"}});
        assert_eq!(check_client_frame(&good), Ok(()));
        let bad = [
            json!({"type":"req","id":"1","method":"agents.files.get",
                "params":{"agentId":"main","name":"USER.md","extra":1}}),
            json!({"type":"req","id":"","method":"agents.files.get",
                "params":{"agentId":"main","name":"USER.md"}}),
            json!({"type":"req","id":"1","method":"agents.files.set",
                "params":{"agentId":"main","name":"USER.md"}}),
            json!({"type":"req","id":"1","method":"connect","params":{"minProtocol":4,
                "maxProtocol":4,"client":{"id":"gateway-client","version":"1","platform":"linux",
                "mode":"backend"},"device":null}}),
            json!({"type":"req","id":"1","method":"connect","params":{"minProtocol":4,
                "maxProtocol":4,"client":{"id":"occ","version":"1","platform":"linux",
                "mode":"backend"}}}),
            json!({"type":"req","id":"1","method":"x","params":{},"extra":true}),
            json!({"type":"cancel","id":""}),
            json!({"type":"cancel","id":"1","reason":"x"}),
            json!({"type":"cancel"}),
            json!({"type":"ping"}),
        ];
        for frame in bad {
            assert!(check_client_frame(&frame).is_err(), "{frame}");
        }
        assert_eq!(
            check_client_frame(&json!({"type":"cancel","id":"abc"})),
            Ok(())
        );
        // the client's own frames
        let connect = json!({"type":"req","id":"1","method":"connect",
            "params": crate::handshake::connect_params(&crate::Auth::Token("t".into()))});
        assert_eq!(check_client_frame(&connect), Ok(()));
        let edge = json!({"type":"req","id":"1","method":"connect",
            "params": crate::handshake::connect_params(&crate::Auth::EdgeHeader {
                name: "x-api-key".into(), value: "v".into() })});
        assert_eq!(check_client_frame(&edge), Ok(()));
    }
}
