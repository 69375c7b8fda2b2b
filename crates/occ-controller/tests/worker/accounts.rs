//! A `chatgpt_service_account` revision through the worker: the access token its Backend
//! issued reaches Compute as the harness credential at run time (and nowhere in platform state
//! or evidence); a credential that is no longer the one the revision froze fails the
//! deployment permanently with `HARNESS_AUTH_SOURCE_UNAVAILABLE`, before any Compute effect.

use std::sync::Arc;

use http::{Method, StatusCode};
use occ_controller::worker::Worker;
use occ_core::ReasonCode;
use occ_core::resource::{ExecutionMode, ServiceAccountBinding};
use occ_store::Backend;
use occ_testkit::app::{TestApp, TestAppOptions};
use occ_testkit::compute::FakeCompute;
use occ_testkit::fake_chatgpt::{self, FakeChatgpt};
use serde_json::json;

use super::{Fixture, rev_id, settings};

async fn fixture(fake: &FakeChatgpt) -> Fixture {
    let mut selection = occ_drivers::compute::process::selection(false);
    selection.execution_modes.push(ExecutionMode::Dedicated);
    let app = TestApp::with(
        Backend::Sqlite,
        TestAppOptions {
            accounts: Some(fake_chatgpt::accounts_driver(fake, "chatgpt-main")),
            compute: Some(selection),
            ..TestAppOptions::default()
        },
    )
    .await;
    let compute = Arc::new(FakeCompute::new());
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings());
    let f = Fixture::of(app, compute, worker);
    f.drain().await;
    f
}

/// An account with an issued credential and a dedicated Agent that runs with it; the Agent's
/// id and the issued token.
async fn agent_with_account(f: &Fixture, fake: &FakeChatgpt) -> (String, String) {
    let ns = f.ns.clone();
    let sa = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts"),
            Some(json!({"name": "runner"})),
        )
        .await
        .created_id();
    let issued = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts/{sa}/credentials"),
            Some(json!({})),
        )
        .await;
    assert_eq!(issued.status, StatusCode::CREATED, "{}", issued.body);
    let cfg = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            Some(json!({"kind": "agent", "values": fake_chatgpt::dedicated_document()})),
        )
        .await
        .created_id();
    let agent = f
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            Some(json!({"name": "coder", "configurationId": cfg, "executionMode": "dedicated",
                        "backendId": "chatgpt-main",
                        "harnessAuth": {"method": "chatgpt_service_account", "serviceAccountId": sa}})),
        )
        .await
        .created_id();
    (agent, fake.live_tokens().pop().expect("token"))
}

#[tokio::test]
async fn the_issued_token_reaches_compute_as_the_harness_credential() {
    let fake = FakeChatgpt::start().await;
    let f = fixture(&fake).await;
    let (agent, token) = agent_with_account(&f, &fake).await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let env = f.compute.environment_of(&rev_id(&rev)).expect("activated");
    assert_eq!(
        env.get("HARNESS_CREDENTIAL").map(String::as_str),
        Some(token.as_str())
    );
    let mut tx = f.app.store.begin_read().await.unwrap();
    let audit = tx.audit_list(&Default::default()).await.unwrap();
    let text =
        serde_json::to_string(&audit.iter().map(|e| &e.details).collect::<Vec<_>>()).unwrap();
    assert!(!text.contains(&token), "{text}");
    // The database holds where the token is, never the token.
    let accounts = tx.service_account_list(&f.app.default_ns).await.unwrap();
    assert!(!format!("{accounts:?}").contains(&token));
}

#[tokio::test]
async fn a_credential_other_than_the_frozen_one_fails_the_deployment() {
    let fake = FakeChatgpt::start().await;
    let f = fixture(&fake).await;
    let (agent, _) = agent_with_account(&f, &fake).await;
    let rev = f.deploy(&agent).await;
    // Between admission and the worker, the account's credential changes (as if replaced).
    let mut tx = occ_testkit::begin_setup(&f.app.store).await;
    let mut sa = tx
        .service_account_list(&f.app.default_ns)
        .await
        .unwrap()
        .pop()
        .unwrap();
    if let Some(ServiceAccountBinding::Managed {
        credential: Some(c),
        ..
    }) = &mut sa.binding
    {
        c.upstream_credential_id = "cred-replaced".into();
    }
    tx.service_account_set_credential(&sa).await.unwrap();
    tx.commit().await.unwrap();
    f.drain().await;
    let deployment = f.deployment(&agent, &rev).await;
    assert_eq!(deployment["status"], json!("failed"), "{deployment}");
    assert_eq!(
        deployment["error"]["code"],
        json!(ReasonCode::HarnessAuthSourceUnavailable.as_str()),
        "{deployment}"
    );
    assert!(f.compute.environment_of(&rev_id(&rev)).is_none());
}
