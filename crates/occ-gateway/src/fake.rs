//! An in-process fake gateway (tokio-tungstenite server) scripted per test, and the protocol
//! tests that run against it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// A scripted gateway on 127.0.0.1; each accepted connection runs the handler with its index.
pub(crate) struct FakeGateway {
    pub url: String,
    pub connections: Arc<AtomicUsize>,
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
        let handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                tokio::spawn(async move {
                    if let Ok(ws) = tokio_tungstenite::accept_async(tcp).await {
                        handler(n, Peer { ws }).await;
                    }
                });
            }
        });
        FakeGateway {
            url,
            connections,
            task,
        }
    }

    pub fn endpoint(&self) -> crate::Endpoint {
        crate::Endpoint::new(self.url.clone(), TOKEN)
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) const TOKEN: &str = "fake-token-0123456789abcdef";

/// The server side of one connection.
pub(crate) struct Peer {
    pub ws: WebSocketStream<TcpStream>,
}

impl Peer {
    pub async fn send(&mut self, value: Value) {
        let _ = self.ws.send(Message::text(value.to_string())).await;
    }

    /// The next text frame as JSON (pings/pongs skipped); `None` once the client is gone.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            match self.ws.next().await? {
                Ok(Message::Text(t)) => return serde_json::from_str(t.as_str()).ok(),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
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
        self.send(json!({"type":"res","id":id,"ok":true,"payload":{
            "type":"hello-ok","protocol":protocol,
            "server":{"version":"2026.9.6","connId":"c-1"},
            "features":{"methods":["agents.files.get","agents.files.set"]},
            "auth":{"method":"token","role":"operator","scopes":scopes},
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
        assert_eq!(frame["type"], "req");
        (
            frame["id"].as_str().expect("id").to_owned(),
            frame["method"].as_str().expect("method").to_owned(),
            frame["params"].clone(),
        )
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::{GatewayError, Session, content_hash, wait_ready};

    const T: Duration = Duration::from_secs(5);

    fn file_payload(name: &str, content: &str) -> Value {
        json!({"agentId":"main","workspace":"/w","file":{"name":name,"path":format!("/w/{name}"),
            "missing":false,"size":content.len(),"updatedAtMs":1u64,
            "hash":content_hash(content),"content":content}})
    }

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
                "auth": {"token": TOKEN},
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
