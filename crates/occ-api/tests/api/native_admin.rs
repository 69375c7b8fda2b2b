//! The native Control UI routes with the Compute test double (the real gateway behind the proxy
//! is proven in the `occ` crate's `native_admin` test): every status of
//! `GET …/native-admin` and its shape, who may ask (people with `use`; never keys), the launch
//! ticket and the Agent origin's pass (one-time, bound to its host, forged or foreign passes
//! refused, an unreachable gateway answered 503), an open socket closed by its lease once the
//! person's runtime assignment is revoked — audited with the reason — and runtime role
//! assignments themselves (`runtimeRole` on bindings, `PATCH …/runtime-role`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use http::{Method, Request, StatusCode};
use occ_controller::native_admin::NativeAdminSettings;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::{AgentId, IamId, RevisionId};
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, ORIGIN, TestApp, TestAppOptions};
use occ_testkit::compute::FakeCompute;
use serde_json::{Value, json};

use crate::common::{agent, expect};

const PASSWORD: &str = "a long enough password";

struct F {
    app: TestApp,
    compute: Arc<FakeCompute>,
    ns: String,
}

async fn fixture(offered: bool) -> F {
    let compute = Arc::new(FakeCompute::new());
    let app = TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            runtime: Some(compute.clone()),
            native_admin: offered.then(|| {
                NativeAdminSettings::new(ORIGIN, "localhost")
                    .expect("settings")
                    .with_lease_interval(Duration::from_millis(300))
            }),
            ..TestAppOptions::default()
        },
    )
    .await;
    let ns = app.default_ns.to_string();
    F { app, compute, ns }
}

impl F {
    /// An Agent whose Configuration is `values`; deployed (and serving) when `deploy`.
    async fn agent(&self, name: &str, values: Value, deploy: bool) -> (String, Option<String>) {
        let admin = self.app.admin();
        let cfg = expect(
            self.app
                .call(
                    Method::POST,
                    &format!("/namespaces/{}/configurations", self.ns),
                    &admin,
                    Some(json!({"kind": "agent", "values": values})),
                )
                .await,
            StatusCode::CREATED,
        )
        .created_id();
        let agt = agent(&self.app, &self.ns, &cfg, name, &admin).await;
        if !deploy {
            return (agt, None);
        }
        let rev = expect(
            self.app
                .call(
                    Method::POST,
                    &format!("/namespaces/{}/agents/{agt}/deploy", self.ns),
                    &admin,
                    None,
                )
                .await,
            StatusCode::ACCEPTED,
        )
        .data()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (a, r): (AgentId, RevisionId) = (agt.parse().unwrap(), rev.parse().unwrap());
        self.app.activate(&a, &r).await;
        self.compute.assume_serving(&a, &r);
        (agt, Some(rev))
    }

    async fn status(&self, agt: &str, who: &Credential) -> occ_testkit::app::Reply {
        self.app
            .call(
                Method::GET,
                &format!("/namespaces/{}/agents/{agt}/native-admin", self.ns),
                who,
                None,
            )
            .await
    }

    /// A person (account and session) and their principal.
    async fn person(&self, email: &str) -> (IamId, Credential) {
        let admin = self.app.admin_session().await;
        let account = expect(
            self.app
                .call(
                    Method::POST,
                    "/api/auth/accounts",
                    &admin,
                    Some(json!({"email": email, "password": PASSWORD})),
                )
                .await,
            StatusCode::CREATED,
        );
        let principal: IamId = account.data()["principalId"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let reply = self
            .app
            .call(
                Method::POST,
                "/api/auth/sign-in/email",
                &Credential::Anonymous,
                Some(json!({"email": email, "password": PASSWORD})),
            )
            .await;
        let cookie = reply.headers["set-cookie"].to_str().unwrap();
        let token = cookie
            .split(';')
            .next()
            .and_then(|kv| kv.split_once('='))
            .map(|(_, v)| v.to_owned())
            .unwrap();
        (principal, Credential::Session(token))
    }

    /// The principal of a signed-in person (`GET /api/auth/session`).
    async fn principal_of(&self, who: &Credential) -> IamId {
        let r = expect(
            self.app
                .call(Method::GET, "/api/auth/session", who, None)
                .await,
            StatusCode::OK,
        );
        r.data()["user"]["principalId"]
            .as_str()
            .expect("the session names its principal")
            .parse()
            .unwrap()
    }

    /// Assigns `principal` the runtime role on `agt` through the API: a Role with `use` on
    /// Agents bound on the Agent with `runtimeRole`. Returns the binding.
    async fn assign(&self, principal: &IamId, agt: &str) -> Value {
        let admin = self.app.admin();
        let role = expect(
            self.app
                .call(
                    Method::POST,
                    &format!("/namespaces/{}/iam/roles", self.ns),
                    &admin,
                    Some(json!({"permissions": [{"action": "use", "resourceKind": "agent"}]})),
                )
                .await,
            StatusCode::CREATED,
        )
        .created_id();
        expect(
            self.app
                .call(
                    Method::POST,
                    &format!("/namespaces/{}/iam/access-bindings", self.ns),
                    &admin,
                    Some(
                        json!({"subjectKind": "identity", "subjectId": principal, "roleId": role,
                                "resourceKind": "agent", "resourceId": agt,
                                "runtimeRole": "platform-administrator"}),
                    ),
                )
                .await,
            StatusCode::CREATED,
        )
        .data()
        .clone()
    }

    /// Signs in the bootstrap administrator with a runtime role on each of `agents`.
    async fn admin_assigned(&self, agents: &[&str]) -> Credential {
        let admin = self.app.admin_session().await;
        let principal = self.principal_of(&admin).await;
        for agt in agents {
            self.assign(&principal, agt).await;
        }
        admin
    }

    /// A browser request to `uri` with `Host: host` and these cookies.
    async fn browse(&self, host: &str, uri: &str, cookie: Option<&str>) -> occ_testkit::app::Reply {
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header("host", host);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        self.app.send(request.body(Body::empty()).unwrap()).await
    }
}

/// The value of the `name` cookie a reply sets (`name=value`).
fn set_cookie(reply: &occ_testkit::app::Reply, name: &str) -> Option<String> {
    reply
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().to_owned())
        .find(|pair| pair.starts_with(&format!("{name}=")))
}

impl F {
    /// A browser's whole launch into `authority`: the Agent origin (no pass) sets its launch
    /// nonce and sends the browser to the console, the console (with `session_cookie`) sends it
    /// back with a ticket, and the callback (with the nonce) sets the pass, returned as
    /// `name=value`.
    async fn launch(&self, authority: &str, session_cookie: &str) -> String {
        let r = self.browse(authority, "/", None).await;
        assert!(r.status.is_redirection(), "{}", r.status);
        let nonce = set_cookie(&r, "occ_native_admin_launch").expect("a launch nonce");
        let launch = location(&r).trim_start_matches(ORIGIN).to_owned();
        let r = self
            .browse("127.0.0.1:3000", &launch, Some(session_cookie))
            .await;
        assert!(r.status.is_redirection(), "{}: {}", r.status, r.text);
        let callback = location(&r).replace(&format!("http://{authority}"), "");
        let r = self.browse(authority, &callback, Some(&nonce)).await;
        assert!(r.status.is_redirection(), "{}: {}", r.status, r.text);
        set_cookie(&r, "occ_native_admin").expect("a pass")
    }
}

fn ui_enabled() -> Value {
    json!({"gateway": {"controlUi": {"enabled": true}}})
}

fn location(reply: &occ_testkit::app::Reply) -> String {
    reply.headers["location"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn each_status_says_what_a_person_can_do() {
    let f = fixture(true).await;
    let (never, _) = f.agent("never-deployed", ui_enabled(), false).await;
    let (ui, rev) = f.agent("with-ui", ui_enabled(), true).await;
    let (plain, _) = f.agent("no-ui", json!({}), true).await;
    let (risky, _) = f
        .agent(
            "risky-ui",
            json!({"gateway": {"controlUi": {"enabled": true, "dangerouslyDisableDeviceAuth": true}}}),
            true,
        )
        .await;
    let (pending, _) = f.agent("pending", ui_enabled(), false).await;
    let admin = f
        .admin_assigned(&[&never, &ui, &plain, &risky, &pending])
        .await;

    let r = expect(f.status(&never, &admin).await, StatusCode::OK);
    assert_eq!(r.body["data"], json!({"status": "stopped"}));

    let r = expect(f.status(&ui, &admin).await, StatusCode::OK);
    let data = r.data();
    assert_eq!(data["status"], "available");
    let host = data["host"].as_str().unwrap();
    assert!(
        host.starts_with("agent-") && host.ends_with(".localhost"),
        "{host}"
    );
    assert_eq!(host.len(), "agent-".len() + 32 + ".localhost".len());
    assert_eq!(data["origin"], format!("http://{host}:3000"));
    assert_eq!(data["url"], format!("http://{host}:3000/"));
    assert_eq!(data["activeRevisionId"], json!(rev.unwrap()));
    // Stable, and distinct per Agent.
    let again = expect(f.status(&ui, &admin).await, StatusCode::OK);
    assert_eq!(again.data()["host"], data["host"]);

    let r = expect(f.status(&plain, &admin).await, StatusCode::OK);
    assert_eq!(r.data()["status"], "unsupported");
    assert!(r.data()["host"].is_string() && r.data()["url"].is_null());
    assert_ne!(r.data()["host"], data["host"]);

    let r = expect(f.status(&risky, &admin).await, StatusCode::OK);
    assert_eq!(r.data()["status"], "unsupported");

    // Desired running, nothing serving yet.
    expect(
        f.app
            .call(
                Method::POST,
                &format!("/namespaces/{}/agents/{pending}/deploy", f.ns),
                &f.app.admin(),
                None,
            )
            .await,
        StatusCode::ACCEPTED,
    );
    let r = expect(f.status(&pending, &admin).await, StatusCode::OK);
    assert_eq!(r.body["data"], json!({"status": "unavailable"}));

    // Stopped while a revision is still active: stopped, with where it would be.
    expect(
        f.app
            .call(
                Method::POST,
                &format!("/namespaces/{}/agents/{ui}/stop", f.ns),
                &f.app.admin(),
                None,
            )
            .await,
        StatusCode::ACCEPTED,
    );
    let r = expect(f.status(&ui, &admin).await, StatusCode::OK);
    assert_eq!(r.data()["status"], "stopped");
    assert_eq!(r.data()["host"], data["host"]);
    assert!(r.data()["url"].is_null());

    // Not offered by this installation: disabled, nothing else.
    let off = fixture(false).await;
    let (agt, _) = off.agent("with-ui", ui_enabled(), true).await;
    let admin = off.admin_assigned(&[&agt]).await;
    let r = expect(off.status(&agt, &admin).await, StatusCode::OK);
    assert_eq!(r.body["data"], json!({"status": "disabled"}));
}

#[tokio::test]
async fn installation_administrators_list_the_runtime_roles_occ_enforces() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    let path = format!("/namespaces/{}/agents/{agt}/runtime-roles", f.ns);
    let r = expect(
        f.app.call(Method::GET, &path, &f.app.admin(), None).await,
        StatusCode::OK,
    );
    assert_eq!(
        r.body["data"],
        json!([{"id": "platform-administrator", "permissions": {
            "sessions": {"others": "write"}, "agents": "*", "scopes": ["operator.admin"]}}])
    );
    // A person who may use the Agent does not administer the Installation.
    let (dave, session) = f.person("dave@example.com").await;
    f.app
        .grant(
            &dave,
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            &f.app.default_ns,
            Some((ResourceKind::Agent, agt.clone())),
        )
        .await;
    expect(
        f.app.call(Method::GET, &path, &session, None).await,
        StatusCode::FORBIDDEN,
    );
    // Nothing serving: the roles come from the revision it serves.
    let (idle, _) = f.agent("idle", ui_enabled(), false).await;
    let r = f
        .app
        .call(
            Method::GET,
            &format!("/namespaces/{}/agents/{idle}/runtime-roles", f.ns),
            &f.app.admin(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.code(), "DEPENDENCY_UNAVAILABLE");
}

#[tokio::test]
async fn only_people_who_may_use_the_agent_ask() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    expect(
        f.status(&agt, &Credential::Anonymous).await,
        StatusCode::UNAUTHORIZED,
    );
    // Keys never open it, not even the administrator's.
    let r = expect(f.status(&agt, &f.app.admin()).await, StatusCode::FORBIDDEN);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session")
    );
    // A person without `use` is refused and the denial is audited.
    let (bob, bob_session) = f.person("bob@example.com").await;
    expect(f.status(&agt, &bob_session).await, StatusCode::FORBIDDEN);
    let denials = f
        .app
        .store
        .begin_read()
        .await
        .unwrap()
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.agents.native_admin.read" && e.actor_id == bob.as_str())
        .count();
    assert_eq!(denials, 1);
    // `use` alone is not enough: entry needs a runtime role assigned to the person on the
    // Agent (the denial says so, and is audited).
    f.app
        .grant(
            &bob,
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            &f.app.default_ns,
            Some((ResourceKind::Agent, agt.clone())),
        )
        .await;
    let r = expect(f.status(&agt, &bob_session).await, StatusCode::FORBIDDEN);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("runtime role"),
        "{}",
        r.body
    );
    let denials = f
        .app
        .store
        .begin_read()
        .await
        .unwrap()
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.agents.native_admin.read" && e.actor_id == bob.as_str())
        .collect::<Vec<_>>();
    assert_eq!(denials.len(), 2);
    assert!(
        denials.iter().any(|e| serde_json::to_string(&e.details)
            .unwrap()
            .contains("no runtime role is assigned")),
        "the second denial says why"
    );
    // Installation administration does not stand in for an assignment either.
    let admin = f.app.admin_session().await;
    expect(f.status(&agt, &admin).await, StatusCode::FORBIDDEN);
    // With an assignment they may.
    f.assign(&bob, &agt).await;
    let r = expect(f.status(&agt, &bob_session).await, StatusCode::OK);
    assert_eq!(r.data()["status"], "available");
    // An unknown Agent is 403 without `use` on it, 404 for someone who may use every Agent of
    // the Namespace; an impossible id is refused first.
    let missing = AgentId::generate();
    expect(
        f.status(missing.as_str(), &admin).await,
        StatusCode::FORBIDDEN,
    );
    f.app
        .grant(
            &bob,
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            &f.app.default_ns,
            None,
        )
        .await;
    expect(
        f.status(missing.as_str(), &bob_session).await,
        StatusCode::NOT_FOUND,
    );
    // Ids that cannot name an Agent name none (the reference takes any string here).
    expect(f.status("not-an-id", &admin).await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_launch_ticket_opens_one_agent_origin_once() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    let Credential::Session(token) = f.admin_assigned(&[&agt]).await else {
        unreachable!()
    };
    let session_cookie = format!("openclaw_occ.session_token={token}");
    let status = expect(
        f.status(&agt, &Credential::Session(token.clone())).await,
        StatusCode::OK,
    );
    let host = status.data()["host"].as_str().unwrap().to_owned();
    let authority = format!("{host}:3000");

    // No pass: a navigation goes to the console's launch, after the origin set a launch nonce
    // (host-only, HttpOnly) that the launch URL is bound to.
    let r = f.browse(&authority, "/", None).await;
    assert!(r.status.is_redirection(), "{}", r.status);
    let nonce = set_cookie(&r, "occ_native_admin_launch").expect("a launch nonce");
    let nonce_cookie = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("occ_native_admin_launch="))
        .unwrap();
    assert!(
        nonce_cookie.contains("HttpOnly") && nonce_cookie.contains("SameSite=Lax"),
        "{nonce_cookie}"
    );
    let binding = occ_controller::native_admin::launch_binding(
        nonce.trim_start_matches("occ_native_admin_launch="),
    );
    let launch = location(&r);
    assert_eq!(
        launch,
        format!("{ORIGIN}/__occ/native-admin/launch?host={host}&binding={binding}")
    );
    let launch_path = launch.trim_start_matches(ORIGIN).to_owned();
    // The launch needs the console session, and a binding.
    let r = f.browse("127.0.0.1:3000", &launch_path, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = f
        .browse(
            "127.0.0.1:3000",
            &format!("/__occ/native-admin/launch?host={host}"),
            Some(&session_cookie),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = f
        .browse(
            "127.0.0.1:3000",
            &format!("/__occ/native-admin/launch?host={host}&binding=short"),
            Some(&session_cookie),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = f
        .browse(
            "127.0.0.1:3000",
            &format!(
                "/__occ/native-admin/launch?host=agent-0123456789abcdef0123456789abcdef.localhost&binding={binding}"
            ),
            Some(&session_cookie),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = f
        .browse("127.0.0.1:3000", &launch_path, Some(&session_cookie))
        .await;
    assert!(r.status.is_redirection(), "{}", r.status);
    let callback = location(&r);
    let prefix = format!("http://{authority}/__occ/native-admin/callback?ticket=");
    assert!(callback.starts_with(&prefix), "{callback}");
    let callback_path = callback
        .trim_start_matches(&format!("http://{authority}"))
        .to_owned();
    // The ticket is for this origin only.
    let other = "agent-0123456789abcdef0123456789abcdef.localhost:3000";
    let r = f.browse(other, &callback_path, Some(&nonce)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // ...and for the browser that started the launch only: without its nonce, or with another
    // browser's, the ticket plants no pass (the victim of a planted ticket is refused).
    let r = f.browse(&authority, &callback_path, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(set_cookie(&r, "occ_native_admin").is_none());
    let someone_else = format!(
        "occ_native_admin_launch={}",
        occ_controller::native_admin::launch_nonce()
    );
    let r = f
        .browse(&authority, &callback_path, Some(&someone_else))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    // The starting browser redeems it; the nonce is cleared.
    let r = f.browse(&authority, &callback_path, Some(&nonce)).await;
    assert!(r.status.is_redirection(), "{}", r.status);
    let pass = set_cookie(&r, "occ_native_admin").expect("a pass");
    assert_eq!(
        set_cookie(&r, "occ_native_admin_launch").as_deref(),
        Some("occ_native_admin_launch=")
    );
    // Once.
    let r = f.browse(&authority, &callback_path, Some(&nonce)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    // With the pass the request is admitted; this double's gateway is unreachable: 503.
    let r = f.browse(&authority, "/", Some(&pass)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(r.text.contains("unavailable"), "{}", r.text);
    // occ's own paths on the origin are never proxied.
    let r = f.browse(&authority, "/__occ/anything", Some(&pass)).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // A forged pass, or this pass on another Agent origin, is no pass.
    let forged = format!("{pass}x");
    let r = f.browse(&authority, "/", Some(&forged)).await;
    assert!(r.status.is_redirection());
    let r = f.browse(other, "/", Some(&pass)).await;
    assert!(r.status.is_redirection());
    // The console's own session cookie is not a pass.
    let r = f.browse(&authority, "/", Some(&session_cookie)).await;
    assert!(r.status.is_redirection());
    // A write without the Agent's origin is refused before anything is proxied.
    let r = f
        .app
        .send(
            Request::builder()
                .method(Method::POST)
                .uri("/")
                .header("host", &authority)
                .header("cookie", &pass)
                .header("origin", ORIGIN)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // The API still answers on the console's host, not on Agent origins.
    let r = f.browse(&authority, "/openapi.json", Some(&pass)).await;
    assert_ne!(r.status, StatusCode::OK);
    // Signing out ends the pass.
    expect(
        f.app
            .call(
                Method::POST,
                "/api/auth/sign-out",
                &Credential::Session(token),
                None,
            )
            .await,
        StatusCode::OK,
    );
    let r = f.browse(&authority, "/", Some(&pass)).await;
    assert!(r.status.is_redirection());
}

#[tokio::test]
async fn an_open_socket_closes_when_its_runtime_assignment_is_revoked() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    // The stand-in gateway accepts the socket and keeps it open.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    f.compute
        .set_gateway_url(&format!("ws://{}", upstream.local_addr().unwrap()));
    let gateway = tokio::spawn(async move {
        while let Ok((stream, _)) = upstream.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let _ = futures::SinkExt::send(
                    &mut ws,
                    tokio_tungstenite::tungstenite::Message::text(
                        "{\"event\":\"connect.challenge\"}",
                    ),
                )
                .await;
                while let Some(Ok(_)) = ws.next().await {}
            });
        }
    });
    let (carol, session) = f.person("carol@example.com").await;
    let binding: IamId = f.assign(&carol, &agt).await["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let Credential::Session(token) = &session else {
        unreachable!()
    };
    let session_cookie = format!("openclaw_occ.session_token={token}");
    let host = expect(f.status(&agt, &session).await, StatusCode::OK).data()["host"]
        .as_str()
        .unwrap()
        .to_owned();
    // Serve the router for real: WebSocket upgrades need a connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = f.app.router.clone();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let authority = format!("{host}:3000");
    let pass = f.launch(&authority, &session_cookie).await;

    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{authority}/"
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("cookie", pass.parse().unwrap());
    request
        .headers_mut()
        .insert("origin", format!("http://{authority}").parse().unwrap());
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .expect("socket through occ");
    // The stand-in speaks first: the proxy relays it.
    let first = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "{first:?}");

    // Revoke: the next lease closes the socket.
    let mut tx = occ_testkit::begin_setup(&f.app.store).await;
    tx.binding_delete(&binding).await.unwrap();
    tx.commit().await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
    assert!(closed.is_ok(), "the socket stayed open after revocation");
    let events = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let events: Vec<_> = f
                .app
                .store
                .begin_read()
                .await
                .unwrap()
                .audit_list(&AuditFilter::default())
                .await
                .unwrap()
                .into_iter()
                .filter(|e| {
                    e.action
                        .starts_with("openclaw.agents.native_admin.websocket.")
                })
                .collect();
            if events.len() == 2 {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("open and close audited");
    let close = events
        .iter()
        .find(|e| e.action.ends_with(".close"))
        .expect("close");
    assert_eq!(close.actor_id, carol.as_str());
    let details = serde_json::to_value(&close.details).unwrap();
    assert_eq!(
        details["nativeAdmin"]["closeReason"], "authorization_denied",
        "{details}"
    );
    assert!(
        details["nativeAdmin"]["connectionId"]
            .as_str()
            .unwrap()
            .starts_with("naws_")
    );
    server.abort();
    gateway.abort();
}

#[tokio::test]
async fn runtime_roles_are_assigned_on_a_persons_agent_use_binding_only() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    let (other, _) = f.agent("other", ui_enabled(), true).await;
    let admin = f.app.admin();
    let (erin, erin_session) = f.person("erin@example.com").await;
    let bindings = format!("/namespaces/{}/iam/access-bindings", f.ns);
    let role_with = |permissions: Value| {
        let app = &f.app;
        let path = format!("/namespaces/{}/iam/roles", f.ns);
        let admin = admin.clone();
        async move {
            expect(
                app.call(
                    Method::POST,
                    &path,
                    &admin,
                    Some(json!({"permissions": permissions})),
                )
                .await,
                StatusCode::CREATED,
            )
            .created_id()
        }
    };
    let user = role_with(json!([{"action": "use", "resourceKind": "agent"}])).await;
    let reader = role_with(json!([{"action": "read", "resourceKind": "agent"}, {"action": "read", "resourceKind": "secret"}])).await;
    let create = |body: Value| {
        let app = &f.app;
        let path = bindings.clone();
        let admin = admin.clone();
        async move { app.call(Method::POST, &path, &admin, Some(body)).await }
    };
    let body = |subject: &str, role: &str, kind: &str, id: &str, runtime_role: Value| {
        let mut b = json!({"subjectKind": "identity", "subjectId": subject, "roleId": role,
                           "resourceKind": kind, "resourceId": id});
        if !runtime_role.is_null() {
            b["runtimeRole"] = runtime_role;
        }
        b
    };
    let refused_at = |r: &occ_testkit::app::Reply, status: StatusCode, pointer: &str| {
        assert_eq!(r.status, status, "{}", r.body);
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(r.body["error"]["details"][0]["path"], pointer, "{}", r.body);
        }
    };
    let erin_id = erin.to_string();

    // Invalid on creation: not a role the runtime enforces, a malformed name, not an Agent
    // binding, not a person, a Role without `use`.
    let r = create(body(&erin_id, &user, "agent", &agt, json!("editor"))).await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("platform-administrator")
    );
    for bad in [
        json!(" padded"),
        json!(""),
        json!(7),
        json!("x".repeat(129)),
    ] {
        let r = create(body(&erin_id, &user, "agent", &agt, bad)).await;
        refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    }
    let sec = crate::common::secret(&f.app, &f.ns, "token", &admin).await;
    let r = create(body(
        &erin_id,
        &reader,
        "secret",
        &sec,
        json!("platform-administrator"),
    ))
    .await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    let service = f.app.admin_principal.to_string();
    let r = create(body(
        &service,
        &user,
        "agent",
        &agt,
        json!("platform-administrator"),
    ))
    .await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    let r = create(body(
        &erin_id,
        &reader,
        "agent",
        &agt,
        json!("platform-administrator"),
    ))
    .await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    // Nothing was written by the refusals.
    let listed = expect(
        f.app.call(Method::GET, &bindings, &admin, None).await,
        StatusCode::OK,
    );
    assert!(
        !listed
            .data()
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["subjectId"] == erin_id.as_str()),
        "{}",
        listed.body
    );

    // Created, shown, and at most one per person and Agent.
    let assigned = expect(
        create(body(
            &erin_id,
            &user,
            "agent",
            &agt,
            json!("platform-administrator"),
        ))
        .await,
        StatusCode::CREATED,
    );
    assert_eq!(assigned.data()["runtimeRole"], "platform-administrator");
    let id = assigned.data()["id"].as_str().unwrap().to_owned();
    let got = expect(
        f.app
            .call(Method::GET, &format!("{bindings}/{id}"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(got.data()["runtimeRole"], "platform-administrator");
    let user_too = role_with(json!([{"action": "use", "resourceKind": "agent"}, {"action": "read", "resourceKind": "agent"}])).await;
    let r = create(body(
        &erin_id,
        &user_too,
        "agent",
        &agt,
        json!("platform-administrator"),
    ))
    .await;
    refused_at(&r, StatusCode::CONFLICT, "");
    // A second plain binding on the same Agent is fine, but cannot take a role by PATCH.
    let plain = expect(
        create(body(&erin_id, &user_too, "agent", &agt, Value::Null)).await,
        StatusCode::CREATED,
    );
    assert!(plain.data().get("runtimeRole").is_none(), "{}", plain.body);
    let patch_path = |id: &str| format!("{bindings}/{id}/runtime-role");
    let patch = |id: String, body: Value, who: Credential| {
        let app = &f.app;
        let path = patch_path(&id);
        async move { app.call(Method::PATCH, &path, &who, Some(body)).await }
    };
    let set = json!({"runtimeRole": "platform-administrator"});
    let plain_id = plain.data()["id"].as_str().unwrap().to_owned();
    let r = patch(plain_id.clone(), set.clone(), admin.clone()).await;
    refused_at(&r, StatusCode::CONFLICT, "");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another binding")
    );

    // PATCH: a person's plain `use` binding on another Agent takes the role.
    let on_other = expect(
        create(body(&erin_id, &user, "agent", &other, Value::Null)).await,
        StatusCode::CREATED,
    );
    let on_other_id = on_other.data()["id"].as_str().unwrap().to_owned();
    expect(f.status(&other, &erin_session).await, StatusCode::FORBIDDEN);
    let r = expect(
        patch(on_other_id.clone(), set.clone(), admin.clone()).await,
        StatusCode::OK,
    );
    assert_eq!(r.data()["runtimeRole"], "platform-administrator");
    assert_eq!(r.data()["id"], on_other_id.as_str());
    let r = expect(f.status(&other, &erin_session).await, StatusCode::OK);
    assert_eq!(r.data()["status"], "available");
    // Again: the same answer.
    expect(
        patch(on_other_id.clone(), set.clone(), admin.clone()).await,
        StatusCode::OK,
    );
    let updates = f
        .app
        .store
        .begin_read()
        .await
        .unwrap()
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.iam.access_bindings.runtime_role.update")
        .collect::<Vec<_>>();
    assert_eq!(updates.len(), 2, "every change is audited");
    let details = serde_json::to_value(&updates[0].details).unwrap();
    assert_eq!(details["bindingId"], on_other_id.as_str(), "{details}");
    assert_eq!(
        details["runtimeRole"], "platform-administrator",
        "{details}"
    );

    // Refusals: the body, the value, the binding, the caller.
    let r = patch(
        on_other_id.clone(),
        json!({"runtimeRole": "editor"}),
        admin.clone(),
    )
    .await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    let r = patch(on_other_id.clone(), json!({}), admin.clone()).await;
    refused_at(&r, StatusCode::BAD_REQUEST, "/runtimeRole");
    let r = patch(
        on_other_id.clone(),
        json!({"runtimeRole": "platform-administrator", "x": 1}),
        admin.clone(),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let on_secret = expect(
        create(body(&erin_id, &reader, "secret", &sec, Value::Null)).await,
        StatusCode::CREATED,
    );
    let r = patch(
        on_secret.data()["id"].as_str().unwrap().to_owned(),
        set.clone(),
        admin.clone(),
    )
    .await;
    refused_at(&r, StatusCode::CONFLICT, "");
    let of_service = expect(
        create(body(&service, &user, "agent", &other, Value::Null)).await,
        StatusCode::CREATED,
    );
    let r = patch(
        of_service.data()["id"].as_str().unwrap().to_owned(),
        set.clone(),
        admin.clone(),
    )
    .await;
    refused_at(&r, StatusCode::CONFLICT, "");
    let r = patch(
        IamId::generate_binding("").to_string(),
        set.clone(),
        admin.clone(),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = patch(on_other_id.clone(), set.clone(), erin_session.clone()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = patch(on_other_id.clone(), set.clone(), Credential::Anonymous).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);

    // Deleting the binding revokes entry.
    expect(
        f.app
            .call(
                Method::DELETE,
                &format!("{bindings}/{on_other_id}"),
                &admin,
                None,
            )
            .await,
        StatusCode::NO_CONTENT,
    );
    expect(f.status(&other, &erin_session).await, StatusCode::FORBIDDEN);
}

/// A page load's requests reuse one admission for `ADMISSION_REUSE`; a revocation reaches plain
/// requests once that window has passed, and a sign-out at once.
#[tokio::test]
async fn plain_requests_reuse_an_admission_briefly_and_never_past_a_revocation_window() {
    let f = fixture(true).await;
    let (agt, _) = f.agent("with-ui", ui_enabled(), true).await;
    let (frank, session) = f.person("frank@example.com").await;
    let binding = f.assign(&frank, &agt).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let Credential::Session(token) = &session else {
        unreachable!()
    };
    let session_cookie = format!("openclaw_occ.session_token={token}");
    let host = expect(f.status(&agt, &session).await, StatusCode::OK).data()["host"]
        .as_str()
        .unwrap()
        .to_owned();
    let authority = format!("{host}:3000");
    let pass_of = async |cookie: &str| f.launch(&authority, cookie).await;
    let pass = pass_of(&session_cookie).await;
    // Admitted (this double's gateway is unreachable: 503 after admission).
    let admitted = |r: &occ_testkit::app::Reply| r.status == StatusCode::SERVICE_UNAVAILABLE;
    assert!(admitted(&f.browse(&authority, "/", Some(&pass)).await));
    // Revoked: refused once the reuse window has passed.
    expect(
        f.app
            .call(
                Method::DELETE,
                &format!("/namespaces/{}/iam/access-bindings/{binding}", f.ns),
                &f.app.admin(),
                None,
            )
            .await,
        StatusCode::NO_CONTENT,
    );
    tokio::time::sleep(occ_controller::native_admin::ADMISSION_REUSE + Duration::from_millis(200))
        .await;
    let r = f.browse(&authority, "/app.js", Some(&pass)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    // Signing out ends a freshly admitted pass at once, reuse window or not.
    f.assign(&frank, &agt).await;
    let pass = pass_of(&session_cookie).await;
    assert!(admitted(&f.browse(&authority, "/", Some(&pass)).await));
    expect(
        f.app
            .call(Method::POST, "/api/auth/sign-out", &session, None)
            .await,
        StatusCode::OK,
    );
    let r = f.browse(&authority, "/app.js", Some(&pass)).await;
    assert!(r.status.is_redirection(), "{}", r.status);
    assert!(
        location(&r).contains("/__occ/native-admin/launch"),
        "{}",
        location(&r)
    );
}
