//! An Agent's native Control UI through occ, with a real OpenClaw gateway behind the real
//! `occ serve` and `occ worker` and the process Compute Driver:
//!
//! - a Configuration with `gateway.controlUi.enabled: true` deploys (the gateway runs in
//!   trusted-proxy mode and occ's own clients — readiness, workspace files — get in with the
//!   gateway credential as a password);
//! - `GET …/native-admin` refuses a person without a runtime role on the Agent (the
//!   administrator included); `occ agent grant-control-ui` assigns one (idempotently); then it
//!   answers `stopped` before the deploy and `available` with the Agent's own origin after it; a
//!   service key gets 403;
//! - the Agent origin without a pass sends the browser to the console's launch, which answers a
//!   one-time ticket; the callback sets a host-only HttpOnly pass; a replayed ticket is refused;
//! - with the pass the Control UI's page loads through occ (no `Set-Cookie`, `worker-src 'none'`,
//!   `no-store`), a service-worker fetch and a cross-origin write are refused, and the pass does
//!   not open another Agent origin;
//! - the UI's WebSocket connects through occ as the proxy identity (hello-ok with
//!   `operator.admin`); without the pass or from another origin it is refused; open and close are
//!   audited; signing out closes it at once (reason `session_invalid`) and ends the pass.
//!
//! Status shapes, authorization edges and the unsupported/disabled statuses are covered with a
//! test double in the API tests (`crates/occ-api/tests/api/native_admin.rs`).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use occ_core::native::control_ui;
use occ_store::Backend;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::Stack;
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

/// A browser-like client that never follows redirects and resolves `host` to occ.
fn browser(host: &str, occ: SocketAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(host, occ)
        .build()
        .expect("client")
}

fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// Opens the Control UI's WebSocket through occ at `origin` with `cookie` and `browser_origin`.
async fn open_socket(
    occ: SocketAddr,
    origin: &str,
    cookie: Option<&str>,
    browser_origin: &str,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let url = origin.replace("http://", "ws://") + "/";
    let mut request = url.into_client_request().expect("request");
    request
        .headers_mut()
        .insert("origin", browser_origin.parse().unwrap());
    if let Some(cookie) = cookie {
        request
            .headers_mut()
            .insert("cookie", cookie.parse().unwrap());
    }
    let stream = tokio::net::TcpStream::connect(occ).await.expect("tcp");
    tokio_tungstenite::client_async(request, stream)
        .await
        .map(|(ws, _)| ws)
}

/// A Control UI `connect` straight to the gateway at `authority`, claiming occ's proxy identity
/// in the header `header`; the gateway's answer (or `{"closed": …}`).
async fn direct_ui_connect(authority: &str, header: &str) -> Value {
    let mut request = format!("ws://{authority}/")
        .into_client_request()
        .expect("request");
    let headers = request.headers_mut();
    headers.insert("origin", control_ui::UPSTREAM_ORIGIN.parse().unwrap());
    headers.insert(
        "x-forwarded-for",
        control_ui::FORWARDED_CLIENT.parse().unwrap(),
    );
    headers.insert(
        tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(header.as_bytes()).unwrap(),
        control_ui::PROXY_IDENTITY.parse().unwrap(),
    );
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("tcp");
    let Ok((mut ws, _)) = tokio_tungstenite::client_async(request, stream).await else {
        return json!({"closed": "upgrade refused"});
    };
    let _challenge = next_frame(&mut ws, Duration::from_secs(10)).await;
    let connect = json!({"type": "req", "id": "c1", "method": "connect", "params": {
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "openclaw-control-ui", "version": "test", "platform": "web", "mode": "ui"},
        "role": "operator", "scopes": ["operator.admin"]}});
    if ws.send(Message::text(connect.to_string())).await.is_err() {
        return json!({"closed": "send"});
    }
    loop {
        match next_frame(&mut ws, Duration::from_secs(15)).await {
            Some(frame) if frame["id"] == "c1" => return frame,
            Some(_) => continue,
            None => return json!({"closed": "no answer"}),
        }
    }
}

/// The next JSON frame, within `limit`.
async fn next_frame(ws: &mut Ws, limit: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return serde_json::from_str(&text).ok(),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            _ => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_opens_an_agents_control_ui_through_occ() {
    let s = Stack::start_with(
        Backend::Sqlite,
        "29200-29219",
        &[("OCC_AGENT_NATIVE_ADMIN_DOMAIN", "localhost".into())],
    )
    .await;
    let occ: SocketAddr = format!("127.0.0.1:{}", port_of(&s.url)).parse().unwrap();
    let session = s.admin_session().await;
    let cfg = s
        .configuration(json!({"gateway": {"controlUi": {"enabled": true}}}))
        .await;
    let agent = s.agent("ui", &cfg).await;
    let status_path = format!("{}/namespaces/{}/agents/{agent}/native-admin", s.url, s.ns);
    let status = async |cookie: &str| -> (StatusCode, Value) {
        let res = s
            .http
            .get(&status_path)
            .header("cookie", cookie)
            .send()
            .await
            .expect("status");
        let code = res.status();
        (code, res.json().await.unwrap_or(Value::Null))
    };

    // Without a runtime role on the Agent, even the Installation administrator is refused.
    let (code, body) = status(&session).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("runtime role"),
        "{body}"
    );
    // The CLI assigns one (the person's `use` binding, then its runtime role), idempotently.
    let principal = s.session_principal(&session).await;
    let key_file = s.dir.path().join("admin-key.json");
    std::fs::write(&key_file, json!({"data": {"key": s.key}}).to_string()).unwrap();
    let grant = || {
        let out = std::process::Command::new(support::OCC)
            .args(["--url", &s.url, "--namespace", &s.ns, "-o", "json"])
            .arg("--service-key-file")
            .arg(&key_file)
            .args([
                "agent",
                "grant-control-ui",
                &agent,
                "--principal",
                &principal,
            ])
            .output()
            .expect("occ agent grant-control-ui");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    let binding = grant();
    assert_eq!(
        binding["runtimeRole"], "platform-administrator",
        "{binding}"
    );
    assert_eq!(binding["subjectId"], principal.as_str());
    assert_eq!(grant()["id"], binding["id"], "granting twice binds once");

    // Not deployed: stopped, nothing else said.
    let (code, body) = status(&session).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["data"], json!({"status": "stopped"}));
    // Service keys never open it.
    let res = s
        .http
        .get(&status_path)
        .header("x-api-key", &s.key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    let rev = s.deploy(&agent).await;
    let deployment = s.settled(&agent, &rev).await;
    assert_eq!(deployment["status"], "succeeded", "{deployment}");
    // occ's own clients reach the trusted-proxy gateway with the password.
    let file_path = format!(
        "/namespaces/{}/agents/{agent}/workspace/files/USER.md",
        s.ns
    );
    let (code, _) = s
        .call(
            reqwest::Method::PUT,
            &file_path,
            Some(serde_json::to_vec(&json!({"content": "# through the proxy mode\n"})).unwrap()),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let file = s.get(&file_path).await;
    assert_eq!(file["data"]["content"], "# through the proxy mode\n");

    let (code, body) = status(&session).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let data = &body["data"];
    assert_eq!(data["status"], "available", "{body}");
    let host = data["host"].as_str().unwrap().to_owned();
    let origin = data["origin"].as_str().unwrap().to_owned();
    assert!(
        host.starts_with("agent-") && host.ends_with(".localhost"),
        "{host}"
    );
    assert_eq!(origin, format!("http://{host}:{}", occ.port()));
    assert_eq!(data["url"], format!("{origin}/"));
    assert!(
        data["activeRevisionId"]
            .as_str()
            .unwrap()
            .starts_with("rev_")
    );
    assert!(
        !host.contains(&agent[4..]),
        "the host does not reveal the Agent id"
    );

    // Launch: no pass → the console's launch → a one-time ticket → a host-only pass.
    let b = browser(&host, occ);
    let res = b.get(format!("{origin}/")).send().await.unwrap();
    assert!(res.status().is_redirection(), "{}", res.status());
    // The origin binds the launch to this browser with a host-only nonce cookie.
    let nonce_cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        nonce_cookie.starts_with("occ_native_admin_launch="),
        "{nonce_cookie}"
    );
    let nonce = nonce_cookie.split(';').next().unwrap().to_owned();
    let launch = location(&res);
    assert!(
        launch.starts_with(&format!(
            "{}/__occ/native-admin/launch?host={host}&binding=",
            s.url
        )),
        "{launch}"
    );
    // Without a console session the launch explains what to do.
    let res = b.get(&launch).send().await.unwrap();
    let code = res.status();
    assert_eq!(
        code,
        StatusCode::UNAUTHORIZED,
        "{}",
        res.text().await.unwrap()
    );
    let res = b
        .get(&launch)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection(), "{}", res.status());
    let callback = location(&res);
    assert!(
        callback.starts_with(&format!("{origin}/__occ/native-admin/callback?ticket=")),
        "{callback}"
    );
    // Another browser (without the nonce) cannot redeem the ticket.
    let res = b.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = b
        .get(&callback)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection(), "{}", res.status());
    assert_eq!(location(&res), "/");
    let set_cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(set_cookie.starts_with("occ_native_admin="), "{set_cookie}");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Domain"), "host-only: {set_cookie}");
    let pass = set_cookie.split(';').next().unwrap().to_owned();
    // A ticket works once.
    let res = b
        .get(&callback)
        .header("cookie", &nonce)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    // The page loads through occ, without the gateway's cookies and with workers blocked.
    let res = b
        .get(format!("{origin}/"))
        .header("cookie", &pass)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get("set-cookie").is_none());
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("worker-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(res.headers()["x-frame-options"], "DENY");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let html = res.text().await.unwrap();
    assert!(
        html.to_lowercase().contains("<html"),
        "{}",
        &html[..html.len().min(300)]
    );
    let res = b
        .get(format!("{origin}/sw.js"))
        .header("cookie", &pass)
        .header("service-worker", "script")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = b
        .post(format!("{origin}/"))
        .header("cookie", &pass)
        .header("origin", "http://evil.localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // The pass is bound to its Agent's origin.
    let other = "agent-00000000000000000000000000000000.localhost";
    let res = browser(other, occ)
        .get(format!("http://{other}:{}/", occ.port()))
        .header("cookie", &pass)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection(), "{}", res.status());
    assert!(location(&res).contains("/__occ/native-admin/launch"));

    // The UI's WebSocket: refused without the pass or from another origin.
    let refused = open_socket(occ, &origin, None, &origin).await;
    assert!(refused.is_err(), "no pass");
    let refused = open_socket(occ, &origin, Some(&pass), "http://evil.localhost").await;
    assert!(refused.is_err(), "another origin");
    // With both it reaches the gateway as occ's proxy identity.
    let mut ws = open_socket(occ, &origin, Some(&pass), &origin)
        .await
        .expect("socket through occ");
    let challenge = next_frame(&mut ws, Duration::from_secs(10))
        .await
        .expect("challenge");
    assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
    let connect = json!({"type": "req", "id": "c1", "method": "connect", "params": {
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "openclaw-control-ui", "version": "test", "platform": "web", "mode": "ui"},
        "role": "operator", "scopes": ["operator.admin"]}});
    ws.send(Message::text(connect.to_string())).await.unwrap();
    let hello = loop {
        let frame = next_frame(&mut ws, Duration::from_secs(15))
            .await
            .expect("hello");
        if frame["id"] == "c1" {
            break frame;
        }
    };
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["type"], "hello-ok", "{hello}");
    let scopes = hello["payload"]["auth"]["scopes"].to_string();
    assert!(scopes.contains("operator.admin"), "{hello}");
    // A local process that reaches the gateway's port directly with the identity header occ
    // used to send (or a guessed key) gets nothing: only occ's proxy knows the revision's key.
    let record: Value = serde_json::from_slice(
        &std::fs::read(s.agent_dir(&agent).join("gateway.json")).expect("gateway.json"),
    )
    .expect("gateway.json is JSON");
    let gateway = format!("127.0.0.1:{}", record["port"]);
    for header in [
        control_ui::LEGACY_IDENTITY_HEADER.to_owned(),
        control_ui::identity_header(&"0".repeat(40)),
    ] {
        let answer = direct_ui_connect(&gateway, &header).await;
        assert_ne!(answer["ok"], true, "{header}: {answer}");
    }
    s.wait_for("the socket's open audit", async || {
        s.audit_count("openclaw.agents.native_admin.websocket.connect")
            .await
            == 1
    })
    .await;

    // Signing out closes the socket at once and ends the pass.
    let signed_out_at = Instant::now();
    let res = s
        .http
        .post(format!("{}/api/auth/sign-out", s.url))
        .header("cookie", &session)
        .header("origin", &s.url)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Close(_))) | Some(Err(_)) | None) => break,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!("the socket stayed open after sign-out"),
        }
    }
    assert!(signed_out_at.elapsed() < Duration::from_secs(10));
    s.wait_for("the socket's close audit", async || {
        s.audit_count("openclaw.agents.native_admin.websocket.close")
            .await
            == 1
    })
    .await;
    let mut raw = s.db.raw().await;
    let reason = raw
        .count(
            "SELECT count(*) FROM audit_events WHERE action = 'openclaw.agents.native_admin.websocket.close' \
             AND details LIKE '%session_invalid%'",
        )
        .await;
    assert_eq!(reason, 1, "closed for session_invalid");
    let res = b
        .get(format!("{origin}/"))
        .header("cookie", &pass)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection(), "a signed-out pass is dead");
    assert!(
        open_socket(occ, &origin, Some(&pass), &origin)
            .await
            .is_err()
    );
}
