//! The chat route through the API with the chat test double in place of a gateway (the
//! real-gateway path is proven end to end in the `occ` crate's `chat` test): JSON and streamed
//! answers, every refusal (400, 401, 403, 404, 413, 415, 503), each failure of a turn and its
//! audit record, and a caller that goes away mid-turn.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use occ_controller::chat::gateway_session_key;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::chat::{FakeChat, Next};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect};

struct F {
    app: TestApp,
    chat: Arc<FakeChat>,
    agt: String,
    path: String,
    /// A service key granted `use` on the Agent (the bootstrap key administers, which is not
    /// enough for a key).
    user: String,
    /// Its principal.
    user_principal: occ_core::IamId,
}

async fn fixture(deployed: bool) -> F {
    let chat = Arc::new(FakeChat::default());
    let app = TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            chat: Some(chat.clone()),
            ..TestAppOptions::default()
        },
    )
    .await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "talker", &admin).await;
    if deployed {
        let rev = expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agt}/deploy"),
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
        app.activate(&agt.parse().unwrap(), &rev.parse().unwrap())
            .await;
    }
    let path = format!("/namespaces/{ns}/agents/{agt}/chat");
    let (user_principal, user) = app
        .principal_with(
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            Some(&app.default_ns),
            Some((ResourceKind::Agent, agt.clone())),
            None,
        )
        .await;
    F {
        app,
        chat,
        agt,
        path,
        user,
        user_principal,
    }
}

/// `(outcome, reasonCode, details)` of every chat audit record.
async fn turns(app: &TestApp) -> Vec<(String, Option<String>, Value)> {
    let mut tx = app.store.begin_read().await.unwrap();
    let mut all: Vec<_> = tx
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "openclaw.agents.chat")
        .map(|e| {
            let code = e
                .details
                .get("reasonCode")
                .and_then(Value::as_str)
                .map(str::to_owned);
            (
                e.outcome.as_str().to_owned(),
                code,
                Value::Object(e.details),
            )
        })
        .collect();
    all.sort_by_key(|(outcome, _, _)| outcome.clone());
    all
}

fn streamed(f: &F, key: &str, body: Value) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(&f.path)
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// `(event, data)` pairs of a server-sent event stream.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_owned());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            Some((name?, serde_json::from_str(&data).unwrap_or(Value::Null)))
        })
        .collect()
}

#[tokio::test]
async fn a_turn_answers_as_json_and_as_a_stream_and_is_audited_without_text() {
    let f = fixture(true).await;
    let user = Credential::Key(f.user.clone());
    let r = expect(
        f.app
            .call(
                Method::POST,
                &f.path,
                &user,
                Some(json!({"message": "chat-canary: hello?"})),
            )
            .await,
        StatusCode::OK,
    );
    let data = r.data();
    assert_eq!(data["reply"], "Hello, world.");
    assert_eq!(data["sessionKey"], "occ-chat");
    assert_eq!(data["model"], "fake/fake-model");
    assert_eq!(data["usage"], json!({"input": 7, "output": 3}));
    assert!(data["durationMs"].is_u64());
    let seen = f.chat.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (
            seen[0].agent.as_str(),
            seen[0].session_key.as_str(),
            seen[0].message.as_str()
        ),
        (
            f.agt.as_str(),
            gateway_session_key(&f.user_principal, "occ-chat").as_str(),
            "chat-canary: hello?"
        )
    );

    // Streamed: each piece in order, then the final answer.
    let r = f
        .app
        .send(streamed(
            &f,
            &f.user,
            json!({"message": "again", "sessionKey": "topic-2"}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    let got = events(&r.text);
    let (last, deltas) = got.split_last().unwrap();
    assert_eq!(last.0, "final");
    assert_eq!(last.1["reply"], "Hello, world.");
    assert_eq!(last.1["sessionKey"], "topic-2");
    let pieces: Vec<&str> = deltas
        .iter()
        .map(|(name, data)| {
            assert_eq!(name, "delta");
            data["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(pieces, f.chat.pieces());

    // A person who administers the Agent may talk to it (administer stands in for use).
    let session = f.app.admin_session().await;
    let r = expect(
        f.app
            .call(
                Method::POST,
                &f.path,
                &session,
                Some(json!({"message": "hi"})),
            )
            .await,
        StatusCode::OK,
    );
    assert_eq!(r.data()["reply"], "Hello, world.");

    let all = turns(&f.app).await;
    assert_eq!(all.len(), 3);
    for (outcome, code, details) in &all {
        assert_eq!((outcome.as_str(), code), ("success", &None));
        let text = details.to_string();
        assert!(
            !text.contains("canary") && !text.contains("Hello"),
            "{text}"
        );
        assert!(details["conversation"].is_string(), "{text}");
    }
}

#[tokio::test]
async fn failures_are_clear_errors_and_audited() {
    let f = fixture(true).await;
    let admin = Credential::Key(f.user.clone());
    for (next, status, code) in [
        (
            Next::ModelFails(401, "invalid_api_key"),
            StatusCode::BAD_GATEWAY,
            "MODEL_ERROR",
        ),
        (
            Next::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            "DEPENDENCY_UNAVAILABLE",
        ),
        (Next::Timeout, StatusCode::GATEWAY_TIMEOUT, "CHAT_TIMEOUT"),
    ] {
        f.chat.next(next);
        let r = f
            .app
            .call(
                Method::POST,
                &f.path,
                &admin,
                Some(json!({"message": "hi"})),
            )
            .await;
        assert_eq!((r.status, r.code()), (status, code), "{}", r.body);
        let recorded = turns(&f.app)
            .await
            .into_iter()
            .filter(|(outcome, reason, _)| outcome == "failure" && reason.as_deref() == Some(code))
            .count();
        assert_eq!(recorded, 1, "{code}");
    }
    // The model's failure names the provider's status and code.
    f.chat.next(Next::ModelFails(429, "rate_limit_exceeded"));
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &admin,
            Some(json!({"message": "hi"})),
        )
        .await;
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("429") && message.contains("rate_limit_exceeded"),
        "{message}"
    );
    // Streamed: the failure is the last event, with the same code.
    f.chat.next(Next::ModelFails(401, "invalid_api_key"));
    let r = f
        .app
        .send(streamed(&f, &f.user, json!({"message": "hi"})))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let got = events(&r.text);
    assert_eq!(got.last().unwrap().0, "error", "{got:?}");
    assert_eq!(got.last().unwrap().1["error"]["code"], "MODEL_ERROR");
}

#[tokio::test]
async fn a_caller_gone_mid_turn_is_audited() {
    let f = fixture(true).await;
    f.chat.next(Next::Hang);
    let admin = Credential::Key(f.user.clone());
    let call = f.app.call(
        Method::POST,
        &f.path,
        &admin,
        Some(json!({"message": "slow"})),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err()
    );
    for _ in 0..50 {
        if !turns(&f.app).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last = turns(&f.app).await.pop().expect("audited");
    assert_eq!(
        (last.0.as_str(), last.1.as_deref()),
        ("failure", Some("CLIENT_GONE"))
    );
}

#[tokio::test]
async fn refusals_come_before_the_turn() {
    let f = fixture(true).await;
    let user = Credential::Key(f.user.clone());
    let admin = f.app.admin();
    let ns = f.app.default_ns.clone();
    // validation: each names its field
    for (body, pointer, code) in [
        (json!({}), "/message", "REQUIRED"),
        (json!({"message": "   "}), "/message", "INVALID_FORMAT"),
        (json!({"message": 5}), "/message", "INVALID_TYPE"),
        (
            json!({"message": "x".repeat(16 * 1024 + 1)}),
            "/message",
            "TOO_LONG",
        ),
        (json!({"message": "a\u{0}b"}), "/message", "INVALID_VALUE"),
        (
            json!({"message": "hi", "sessionKey": "Has Spaces"}),
            "/sessionKey",
            "INVALID_FORMAT",
        ),
        (
            json!({"message": "hi", "sessionKey": "main"}),
            "/sessionKey",
            "INVALID_VALUE",
        ),
        (
            json!({"message": "hi", "extra": true}),
            "/extra",
            "UNKNOWN_FIELD",
        ),
    ] {
        let r = f.app.call(Method::POST, &f.path, &admin, Some(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(r.body["error"]["details"][0]["path"], pointer, "{}", r.body);
        assert_eq!(r.body["error"]["details"][0]["code"], code, "{}", r.body);
    }
    // exactly 16 KiB is fine
    expect(
        f.app
            .call(
                Method::POST,
                &f.path,
                &user,
                Some(json!({"message": "é".repeat(8 * 1024)})),
            )
            .await,
        StatusCode::OK,
    );
    // a body over the limit is refused unread
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &admin,
            Some(json!({"message": "x".repeat(49 * 1024)})),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    // not JSON
    let r = f
        .app
        .send(
            Request::builder()
                .method(Method::POST)
                .uri(&f.path)
                .header("x-api-key", &f.user)
                .header("content-type", "text/plain")
                .body(Body::from("hi"))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // nobody
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &Credential::Anonymous,
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // the bootstrap key administers everything but is a key: it needs use granted
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &admin,
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    // read and operate are not use
    let (_, key) = f
        .app
        .principal_with(
            &[
                Permission::new(Action::Read, ResourceKind::Agent),
                Permission::new(Action::Operate, ResourceKind::Agent),
                Permission::new(Action::Deploy, ResourceKind::Agent),
            ],
            Some(&ns),
            None,
            None,
        )
        .await;
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &Credential::Key(key),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    // use on this Agent, granted explicitly to a service key, is enough
    let (_, key) = f
        .app
        .principal_with(
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            Some(&ns),
            Some((ResourceKind::Agent, f.agt.clone())),
            None,
        )
        .await;
    expect(
        f.app
            .call(
                Method::POST,
                &f.path,
                &Credential::Key(key.clone()),
                Some(json!({"message": "hi"})),
            )
            .await,
        StatusCode::OK,
    );
    // ... and only on that Agent: another one is 403 (whether or not it exists)
    let r = f
        .app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/agt_00000000-0000-4000-8000-000000000000/chat"),
            &Credential::Key(key),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // an unknown Agent, for someone who may use any
    let (_, any) = f
        .app
        .principal_with(
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            Some(&ns),
            None,
            None,
        )
        .await;
    let r = f
        .app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/agt_00000000-0000-4000-8000-000000000000/chat"),
            &Credential::Key(any),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    // refusals never reached the Agent: only the two accepted turns did
    assert_eq!(f.chat.seen().len(), 2);
    // refusals stream nothing either: a 403 is plain JSON even when events were asked for
    let (_, key) = f.app.principal_with(&[], None, None, None).await;
    let r = f
        .app
        .send(streamed(&f, &key, json!({"message": "hi"})))
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "FORBIDDEN"));
}

#[tokio::test]
async fn without_an_active_revision_the_turn_is_503() {
    let f = fixture(false).await;
    let r = f
        .app
        .call(
            Method::POST,
            &f.path,
            &Credential::Key(f.user.clone()),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    );
    assert!(f.chat.seen().is_empty());
}

#[tokio::test]
async fn a_caller_has_at_most_four_turns_at_once() {
    let f = fixture(true).await;
    let user = Credential::Key(f.user.clone());
    let body = || Some(json!({"message": "slow"}));
    for _ in 0..4 {
        f.chat.next(Next::Hang);
    }
    {
        // Four turns that do not end, in flight together.
        let hung = futures::future::join_all(
            (0..4).map(|_| f.app.call(Method::POST, &f.path, &user, body())),
        );
        tokio::pin!(hung);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), &mut hung)
                .await
                .is_err()
        );
        assert_eq!(f.chat.seen().len(), 4);
        // A fifth waits its turn: 429 with Retry-After, and it never reached the Agent.
        let r = f.app.call(Method::POST, &f.path, &user, body()).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED")
        );
        assert_eq!(r.headers["retry-after"], "2");
        assert_eq!(f.chat.seen().len(), 4);
        // Another caller is not affected.
        let session = f.app.admin_session().await;
        expect(
            f.app.call(Method::POST, &f.path, &session, body()).await,
            StatusCode::OK,
        );
    }
    // The four callers went away (their futures dropped above): their places are free again.
    expect(
        f.app.call(Method::POST, &f.path, &user, body()).await,
        StatusCode::OK,
    );
}

/// Conversations belong to their caller: two principals allowed to talk to one Agent, naming the
/// same session key (the default one and a named one), reach different gateway sessions, so one
/// caller's messages never enter the other's context; each caller keeps seeing the key they
/// named, and their own gateway session stays the same from turn to turn.
#[tokio::test]
async fn two_callers_never_share_a_gateway_session() {
    let f = fixture(true).await;
    let (other_principal, other) = f
        .app
        .principal_with(
            &[Permission::new(Action::Use, ResourceKind::Agent)],
            Some(&f.app.default_ns),
            Some((ResourceKind::Agent, f.agt.clone())),
            None,
        )
        .await;
    let turn = |key: &str, body: Value| {
        let key = key.to_owned();
        let app = &f.app;
        let path = f.path.clone();
        async move {
            let r = app
                .call(Method::POST, &path, &Credential::Key(key), Some(body))
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            r.data()["sessionKey"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(
        turn(&f.user, json!({"message": "mine: 42"})).await,
        "occ-chat"
    );
    assert_eq!(turn(&other, json!({"message": "theirs"})).await, "occ-chat");
    assert_eq!(
        turn(
            &f.user,
            json!({"message": "named", "sessionKey": "shared-name"})
        )
        .await,
        "shared-name"
    );
    assert_eq!(
        turn(
            &other,
            json!({"message": "named", "sessionKey": "shared-name"})
        )
        .await,
        "shared-name"
    );
    assert_eq!(turn(&f.user, json!({"message": "again"})).await, "occ-chat");
    let seen: Vec<String> = f.chat.seen().into_iter().map(|t| t.session_key).collect();
    let mine = gateway_session_key(&f.user_principal, "occ-chat");
    let theirs = gateway_session_key(&other_principal, "occ-chat");
    assert_eq!(
        seen,
        [
            mine.clone(),
            theirs.clone(),
            gateway_session_key(&f.user_principal, "shared-name"),
            gateway_session_key(&other_principal, "shared-name"),
            mine.clone(),
        ]
    );
    assert_ne!(mine, theirs);
    assert_ne!(seen[2], seen[3]);
    // The gateway's session keys are what the chat route itself accepts as keys' shape.
    assert!(seen.iter().all(|k| k.len() <= 64 && k.starts_with("occ-")));
}
