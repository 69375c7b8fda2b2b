//! ServiceAccounts with a Backend's ServiceAccount Driver: occ's real ChatGPT Driver against the
//! test kit's fake ChatGPT Admin API (a real HTTP server). Proves: an account is made upstream
//! with the admin key; `POST …/credentials` issues one credential (scope, lifetime) whose token
//! appears in no response or audit record; a second issuance, a native reference on a Backend
//! account and deletion while an Agent uses it are 409; provider failures are 503 and leave
//! nothing behind (an account made upstream is removed again; a credential occ could not record
//! is revoked); deletion removes the credential and the account upstream; a dedicated Agent's
//! deploy needs an issued credential and the Backend that issued it, and the revision freezes
//! which credential and workspace (never a locator or token). Without a Driver: accounts are
//! native, issuing is 503, native references are set by `PATCH …/credential`.

use http::{Method, StatusCode};
use occ_core::resource::{ExecutionMode, ServiceAccountCredentialKind};
use occ_drivers::compute::ComputeSelection;
use occ_drivers::service_account::chatgpt::CODEX_LOCAL_ACCESS_SCOPE;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{TestApp, TestAppOptions};
use occ_testkit::fake_chatgpt::{self, ADMIN_KEY, FakeChatgpt, Fault, WORKSPACE_ID};
use serde_json::{Value, json};

use crate::common::expect;

/// The Backend id the test app configures.
const BACKEND: &str = "chatgpt-main";

fn dedicated_selection() -> ComputeSelection {
    let mut selection = occ_drivers::compute::process::selection(false);
    selection.execution_modes.push(ExecutionMode::Dedicated);
    selection
}

async fn app_with(fake: Option<&FakeChatgpt>) -> TestApp {
    TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            accounts: fake.map(|f| fake_chatgpt::accounts_driver(f, BACKEND)),
            compute: Some(dedicated_selection()),
            ..TestAppOptions::default()
        },
    )
    .await
}

async fn audit_text(app: &TestApp) -> String {
    let mut tx = app.store.begin_read().await.unwrap();
    serde_json::to_string(
        &tx.audit_list(&AuditFilter::default())
            .await
            .unwrap()
            .iter()
            .map(|e| json!({"action": e.action, "details": e.details}))
            .collect::<Vec<_>>(),
    )
    .unwrap()
}

async fn create_account(app: &TestApp, name: &str) -> String {
    let ns = app.default_ns.to_string();
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts"),
            &app.admin(),
            Some(json!({"name": name})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id()
}

async fn issue(app: &TestApp, sa: &str) -> occ_testkit::app::Reply {
    let ns = app.default_ns.to_string();
    app.call(
        Method::POST,
        &format!("/namespaces/{ns}/service-accounts/{sa}/credentials"),
        &app.admin(),
        Some(json!({})),
    )
    .await
}

#[tokio::test]
async fn a_backend_account_is_made_upstream_and_issued_one_credential() {
    let fake = FakeChatgpt::start().await;
    let app = app_with(Some(&fake)).await;
    let ns = app.default_ns.to_string();
    let sa = create_account(&app, "support-model").await;
    let accounts = fake.accounts();
    assert_eq!(accounts.len(), 1, "{accounts:?}");
    let created = &fake.requests()[0];
    assert_eq!(created.method, "POST");
    assert_eq!(
        created.path,
        format!("/v1/manage/workspaces/{WORKSPACE_ID}/service-accounts")
    );
    assert_eq!(
        created.authorization.as_deref(),
        Some(format!("Bearer {ADMIN_KEY}").as_str())
    );
    assert_eq!(created.body, json!({"name": "support-model"}));

    // No credential yet.
    let got = expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/service-accounts/{sa}"),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(got.data().get("credential"), None, "{}", got.body);

    let issued = expect(issue(&app, &sa).await, StatusCode::CREATED);
    assert_eq!(issued.data()["credential"], json!({"kind": "access_token"}));
    assert_eq!(issued.data()["id"], json!(sa));
    let request = fake.requests().last().cloned().unwrap();
    let upstream = accounts.keys().next().unwrap();
    assert_eq!(
        request.path,
        format!("/v1/manage/workspaces/{WORKSPACE_ID}/service-accounts/{upstream}/credentials")
    );
    assert_eq!(
        request.body,
        json!({"name": format!("occ-{sa}"), "ttl": 3600, "scopes": [CODEX_LOCAL_ACCESS_SCOPE]})
    );
    let tokens = fake.live_tokens();
    assert_eq!(tokens.len(), 1);
    // The token is in no response, list, or audit record; neither are provider ids.
    let list = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/service-accounts"),
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(
        list.data()[0]["credential"],
        json!({"kind": "access_token"})
    );
    let audit = audit_text(&app).await;
    for text in [
        issued.body.to_string(),
        list.body.to_string(),
        audit.clone(),
    ] {
        assert!(!text.contains(&tokens[0]), "{text}");
        assert!(!text.contains(upstream.as_str()), "{text}");
        assert!(!text.contains("locator"), "{text}");
    }
    assert!(
        audit.contains("openclaw.service_accounts.credentials.create"),
        "{audit}"
    );

    // Once only; and a Backend account takes no native reference.
    let again = expect(issue(&app, &sa).await, StatusCode::CONFLICT);
    assert_eq!(again.code(), "RESOURCE_CONFLICT");
    let patched = expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{ns}/service-accounts/{sa}/credential"),
            &app.admin(),
            Some(
                json!({"kind": "api_key", "secretRef": {"name": "provider-key", "key": "api-key"}}),
            ),
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert!(
        patched.body.to_string().contains("POST"),
        "{}",
        patched.body
    );
    assert_eq!(fake.live_tokens().len(), 1);

    // Deleting it removes the credential and the account upstream.
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/service-accounts/{sa}"),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    assert!(fake.accounts().is_empty(), "{:?}", fake.accounts());
    assert!(fake.live_tokens().is_empty());
}

#[tokio::test]
async fn provider_failures_are_503_and_leave_nothing_behind() {
    let fake = FakeChatgpt::start().await;
    let app = app_with(Some(&fake)).await;
    let ns = app.default_ns.to_string();
    fake.set_fault(Fault::Unavailable);
    let refused = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts"),
            &app.admin(),
            Some(json!({"name": "a"})),
        )
        .await,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert_eq!(refused.code(), "DEPENDENCY_UNAVAILABLE");
    assert!(
        refused.body.to_string().contains("HTTP 500"),
        "{}",
        refused.body
    );
    assert!(!refused.body.to_string().contains(ADMIN_KEY));
    let listed = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/service-accounts"),
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(listed.data(), &json!([]));

    fake.set_fault(Fault::None);
    let sa = create_account(&app, "a").await;
    // A credential for another workspace is refused and not recorded.
    fake.set_fault(Fault::WrongWorkspace);
    expect(issue(&app, &sa).await, StatusCode::SERVICE_UNAVAILABLE);
    fake.set_fault(Fault::None);
    let got = app
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/service-accounts/{sa}"),
            &app.admin(),
            None,
        )
        .await;
    assert_eq!(got.data().get("credential"), None, "{}", got.body);
    // The next issuance works, and only it is recorded.
    expect(issue(&app, &sa).await, StatusCode::CREATED);

    // A duplicate name is refused before anything is made upstream.
    let before = fake.requests().len();
    let dup = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts"),
            &app.admin(),
            Some(json!({"name": "a"})),
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert_eq!(dup.code(), "RESOURCE_CONFLICT");
    assert_eq!(fake.requests().len(), before);
}

#[tokio::test]
async fn without_a_driver_accounts_are_native_and_take_a_reference() {
    let app = app_with(None).await;
    let ns = app.default_ns.to_string();
    let sa = create_account(&app, "native").await;
    let refused = expect(issue(&app, &sa).await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.code(), "DEPENDENCY_UNAVAILABLE");
    assert!(
        refused.body.to_string().contains("ServiceAccount Driver"),
        "{}",
        refused.body
    );
    let path = format!("/namespaces/{ns}/service-accounts/{sa}/credential");
    let set = expect(
        app.call(
            Method::PATCH,
            &path,
            &app.admin(),
            Some(
                json!({"kind": "api_key", "secretRef": {"name": "provider-key", "key": "api-key"}}),
            ),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(set.data()["credential"], json!({"kind": "api_key"}));
    assert!(
        !set.body.to_string().contains("provider-key"),
        "{}",
        set.body
    );
    // Replaced by another reference.
    let set = expect(
        app.call(
            Method::PATCH,
            &path,
            &app.admin(),
            Some(json!({"kind": "oauth_access_token", "secretRef": {"name": "other", "key": "token"}})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        set.data()["credential"],
        json!({"kind": "oauth_access_token"})
    );
    // Each field is checked and named.
    for (body, pointer) in [
        (
            json!({"kind": "access_token", "secretRef": {"name": "a", "key": "b"}}),
            "/kind",
        ),
        (
            json!({"kind": "api_key", "secretRef": {"name": "Not_A_Name", "key": "b"}}),
            "/secretRef/name",
        ),
        (
            json!({"kind": "api_key", "secretRef": {"name": "a", "key": ".."}}),
            "/secretRef/key",
        ),
        (
            json!({"kind": "api_key", "secretRef": {"name": "a"}}),
            "/secretRef/key",
        ),
        (json!({"kind": "api_key"}), "/secretRef"),
        (
            json!({"kind": "api_key", "secretRef": {"name": "a", "key": "b"}, "value": "sk"}),
            "/value",
        ),
    ] {
        let r = expect(
            app.call(Method::PATCH, &path, &app.admin(), Some(body.clone()))
                .await,
            StatusCode::BAD_REQUEST,
        );
        assert_eq!(r.code(), "INVALID_REQUEST", "{body}");
        assert!(r.body.to_string().contains(pointer), "{body}: {}", r.body);
    }
    let extra = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts/{sa}/credentials"),
            &app.admin(),
            Some(json!({"kind": "access_token"})),
        )
        .await,
        StatusCode::BAD_REQUEST,
    );
    assert!(extra.body.to_string().contains("/kind"), "{}", extra.body);
    // Unknown account → 404; a key without update → 403.
    let unknown = format!(
        "/namespaces/{ns}/service-accounts/sa_0f8fad5b-d9cb-469f-a165-70867728950e/credential"
    );
    expect(
        app.call(
            Method::PATCH,
            &unknown,
            &app.admin(),
            Some(json!({"kind": "api_key", "secretRef": {"name": "a", "key": "b"}})),
        )
        .await,
        StatusCode::NOT_FOUND,
    );
    let (_, reader) = app
        .principal_with(
            &[occ_core::authz::Permission::new(
                occ_core::authz::Action::Read,
                occ_core::authz::ResourceKind::ServiceAccount,
            )],
            Some(&app.default_ns),
            Some((occ_core::authz::ResourceKind::ServiceAccount, sa.clone())),
            None,
        )
        .await;
    for (method, suffix, body) in [
        (
            Method::PATCH,
            "credential",
            json!({"kind": "api_key", "secretRef": {"name": "a", "key": "b"}}),
        ),
        (Method::POST, "credentials", json!({})),
    ] {
        let r = app
            .call(
                method,
                &format!("/namespaces/{ns}/service-accounts/{sa}/{suffix}"),
                &occ_testkit::app::Credential::Key(reader.clone()),
                Some(body),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{suffix}: {}", r.body);
    }
}

/// A dedicated Agent of the test app: Configuration, Agent with the account's auth and
/// `backendId`.
async fn dedicated_agent(app: &TestApp, name: &str, sa: &str, backend: Option<&str>) -> String {
    let ns = app.default_ns.to_string();
    let cfg = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &app.admin(),
            Some(json!({"kind": "agent", "values": fake_chatgpt::dedicated_document()})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &app.admin(),
            Some(json!({"name": name, "configurationId": cfg, "executionMode": "dedicated",
                        "backendId": backend,
                        "harnessAuth": {"method": "chatgpt_service_account", "serviceAccountId": sa}})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id()
}

#[tokio::test]
async fn a_dedicated_deploy_needs_an_issued_credential_and_its_backend_and_freezes_it() {
    let fake = FakeChatgpt::start().await;
    let app = app_with(Some(&fake)).await;
    let ns = app.default_ns.to_string();
    let sa = create_account(&app, "runner").await;
    let agt = dedicated_agent(&app, "coder", &sa, Some(BACKEND)).await;
    let deploy = format!("/namespaces/{ns}/agents/{agt}/deploy");
    let early = expect(
        app.call(Method::POST, &deploy, &app.admin(), None).await,
        StatusCode::CONFLICT,
    );
    assert!(
        early.body.to_string().contains("no credential"),
        "{}",
        early.body
    );

    let issued = expect(issue(&app, &sa).await, StatusCode::CREATED);
    let token = fake.live_tokens().pop().unwrap();
    // An Agent that does not select the issuing Backend is refused.
    let other = dedicated_agent(&app, "elsewhere", &sa, None).await;
    let refused = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{other}/deploy"),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert!(
        refused.body.to_string().contains("backendId"),
        "{}",
        refused.body
    );

    let rev = expect(
        app.call(Method::POST, &deploy, &app.admin(), None).await,
        StatusCode::ACCEPTED,
    );
    let text = rev.body.to_string();
    assert!(
        !text.contains(&token) && !text.contains("locator"),
        "{text}"
    );
    assert!(!text.contains("cred-"), "{text}");
    assert_eq!(
        rev.data()["harnessAuth"],
        json!({"method": "chatgpt_service_account", "serviceAccountId": sa})
    );
    let rev_id: occ_core::RevisionId = rev.data()["id"].as_str().unwrap().parse().unwrap();
    let mut tx = app.store.begin_read().await.unwrap();
    let stored = tx
        .revision_list(&app.default_ns, &agt.parse().unwrap())
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.id == rev_id)
        .unwrap();
    drop(tx);
    let frozen = stored.spec.account_credential.expect("frozen credential");
    assert_eq!(frozen.service_account_id.to_string(), sa);
    assert_eq!(frozen.kind, ServiceAccountCredentialKind::AccessToken);
    assert_eq!(frozen.backend_id, BACKEND);
    assert_eq!(frozen.workspace_id, WORKSPACE_ID);
    let upstream_credential = fake.accounts().values().next().unwrap()[0].clone();
    assert_eq!(frozen.upstream_credential_id, upstream_credential);
    assert_eq!(issued.data()["credential"], json!({"kind": "access_token"}));

    // In use: not deleted, nothing removed upstream.
    let held = expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/service-accounts/{sa}"),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert_eq!(held.code(), "RESOURCE_CONFLICT");
    // No draft names it any more, but the queued deployment still runs with it.
    for id in [&agt, &other] {
        let path = format!("/namespaces/{ns}/agents/{id}");
        let draft = expect(
            app.call(Method::GET, &path, &app.admin(), None).await,
            StatusCode::OK,
        );
        let cfg = draft.data()["configurationId"].clone();
        expect(
            app.call(
                Method::PATCH,
                &path,
                &app.admin(),
                Some(json!({"configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
            )
            .await,
            StatusCode::OK,
        );
    }
    let pending = expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/service-accounts/{sa}"),
            &app.admin(),
            None,
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert!(
        pending.body.to_string().contains("pending deployment"),
        "{}",
        pending.body
    );
    assert_eq!(fake.live_tokens(), vec![token]);
}

/// The serialized revision spec a worker reads carries the frozen credential by its provider
/// id only.
#[test]
fn the_frozen_credential_holds_no_locator() {
    let frozen = occ_core::resource::FrozenAccountCredential {
        service_account_id: occ_core::ServiceAccountId::generate(),
        kind: ServiceAccountCredentialKind::AccessToken,
        backend_id: BACKEND.into(),
        workspace_id: WORKSPACE_ID.into(),
        upstream_credential_id: "cred-1".into(),
    };
    let v: Value = serde_json::to_value(&frozen).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "backendId",
            "kind",
            "serviceAccountId",
            "upstreamCredentialId",
            "workspaceId"
        ]
    );
}
