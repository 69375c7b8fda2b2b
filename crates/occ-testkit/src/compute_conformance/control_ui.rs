//! The native Control UI path through a Compute Driver's gateway access: what occ's Agent-origin
//! proxy relies on, whichever Driver runs the gateway.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use occ_core::native::control_ui;
use occ_drivers::compute::{AgentTarget, Compute, RevisionTarget};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

use super::connect;

/// Makes `doc` a Control UI revision's document (`gateway.controlUi.enabled`).
pub fn with_control_ui(mut doc: Value) -> Value {
    doc["gateway"] = json!({"controlUi": {"enabled": true}});
    doc
}

/// `rev`, a Control UI revision ([`with_control_ui`]) of `agent`, serves: occ's own client gets
/// in with the credential (sent as token and password: the gateway runs in trusted-proxy
/// mode); through the address `gateway_access` hands out, the proxy's HTTP gets the UI's page
/// and a Control UI WebSocket on the proxy identity — in the header named with the revision's
/// proxy key, derived from the credential — reaches hello-ok with `operator.admin`, while the
/// same socket without the identity, with the fixed header occ used before per-revision keys
/// (`x-occ-identity: occ-native-admin`, what any local process could send) or with another
/// key is refused.
pub async fn control_ui_serves(compute: &dyn Compute, agent: &AgentTarget, rev: &RevisionTarget) {
    let session = connect(compute, agent)
        .await
        .expect("occ's client: hello-ok with the password");
    session.close().await;
    let access = compute
        .gateway_access(agent)
        .await
        .expect("access")
        .expect("serving");
    let authority = access
        .url
        .trim_start_matches("ws://")
        .trim_end_matches('/')
        .to_owned();

    let header = control_ui::identity_header(&control_ui::proxy_key(
        access.token.expose(),
        &rev.revision_id,
    ));
    let (status, page) = get_page(&authority, &header).await;
    assert_eq!(status, 200, "the UI's page through the Driver's address");
    assert!(page.to_lowercase().contains("<html"), "{page:.200}");

    let admitted = ui_socket(&authority, Some(&header)).await;
    assert_eq!(admitted["ok"], true, "{admitted}");
    assert!(
        admitted["payload"]["auth"]["scopes"]
            .to_string()
            .contains("operator.admin"),
        "{admitted}"
    );
    let refused = ui_socket(&authority, None).await;
    assert_ne!(refused["ok"], true, "no identity: {refused}");
    let legacy = ui_socket(&authority, Some(control_ui::LEGACY_IDENTITY_HEADER)).await;
    assert_ne!(
        legacy["ok"], true,
        "the old fixed identity header: {legacy}"
    );
    let guessed = control_ui::identity_header(&control_ui::proxy_key(
        "not-the-credential",
        &rev.revision_id,
    ));
    let wrong = ui_socket(&authority, Some(&guessed)).await;
    assert_ne!(wrong["ok"], true, "another key: {wrong}");
}

/// `GET /` as occ's proxy sends it (the identity in `header`, a non-loopback client address).
async fn get_page(authority: &str, header: &str) -> (u16, String) {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect to the gateway's address");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("HTTP/1 handshake");
    tokio::spawn(connection);
    let request = http::Request::get("/")
        .header("host", authority)
        .header(header, control_ui::PROXY_IDENTITY)
        .header("x-forwarded-for", control_ui::FORWARDED_CLIENT)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let response = tokio::time::timeout(Duration::from_secs(30), sender.send_request(request))
        .await
        .expect("the page within 30 s")
        .expect("a response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// A Control UI socket through the gateway's address, with the proxy identity in the header
/// named `identity` (or none); the answer to its `connect` (or `{"closed": …}`).
async fn ui_socket(authority: &str, identity: Option<&str>) -> Value {
    let mut request = format!("ws://{authority}/").into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("origin", control_ui::UPSTREAM_ORIGIN.parse().unwrap());
    headers.insert(
        "x-forwarded-for",
        control_ui::FORWARDED_CLIENT.parse().unwrap(),
    );
    if let Some(name) = identity {
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            control_ui::PROXY_IDENTITY.parse().unwrap(),
        );
    }
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect to the gateway's address");
    let mut ws = match tokio_tungstenite::client_async(request, stream).await {
        Ok((ws, _)) => ws,
        // Refused at the upgrade (what a gateway may do with an unproven identity).
        Err(e) => return json!({"closed": format!("upgrade refused: {e}")}),
    };
    let challenge = next_json(&mut ws).await;
    assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
    let connect = json!({"type": "req", "id": "c1", "method": "connect", "params": {
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "openclaw-control-ui", "version": "test", "platform": "web", "mode": "ui"},
        "role": "operator", "scopes": ["operator.admin"]}});
    ws.send(Message::text(connect.to_string())).await.unwrap();
    loop {
        let frame = next_json(&mut ws).await;
        if frame["id"] == "c1" || frame.get("closed").is_some() {
            return frame;
        }
    }
}

/// The next JSON text frame, or `{"closed": …}` when the socket ends or stays silent for 20 s.
async fn next_json(ws: &mut Ws) -> Value {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                return serde_json::from_str::<Value>(&t).unwrap_or(Value::Null);
            }
            Ok(Some(Ok(_))) => continue,
            other => return json!({"closed": format!("{other:?}")}),
        }
    }
}
