//! A failed activation never leaves the Agent down: the worker restores the revision that
//! served before and fails the new one with the reason. These tests prove what the worker
//! decides and records with the Compute double (which, like a real Driver, stops what served
//! when it starts a candidate); the Drivers' own suites prove the restore with real gateways.

use super::*;
use occ_core::ReasonCode;

fn refused() -> ComputeError {
    ComputeError::permanent(
        ReasonCode::RuntimeConfigurationInvalid,
        "OpenClaw refused the configuration (exit status 78)",
    )
    .with_output(vec![
        "Config invalid".to_owned(),
        "  - <root>: Unrecognized key: \"bogusTopLevelKey\"".to_owned(),
    ])
}

// Both stores: the restore moves the pointer back in the same transaction that fails the
// candidate (the whole stack's real-gateway rollback runs on SQLite only).
#[tokio::test]
async fn a_failed_activation_restores_the_previous_revision_and_fails_the_new_one_sqlite() {
    a_failed_activation_restores_the_previous_revision_and_fails_the_new_one(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_failed_activation_restores_the_previous_revision_and_fails_the_new_one_postgres() {
    a_failed_activation_restores_the_previous_revision_and_fails_the_new_one(Backend::Postgres)
        .await;
}

async fn a_failed_activation_restores_the_previous_revision_and_fails_the_new_one(
    backend: Backend,
) {
    let f = Fixture::with(backend, FakeCompute::new(), settings()).await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev1)));

    f.compute.script(Verb::Activate, Scripted::Fail(refused()));
    let rev2 = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev2));
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Permanent)]);

    // Revision 1 serves again and the pointer names it.
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev1)));
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev1);
    let calls = f.compute.calls();
    let restore = Call::Revision(Verb::Restore, agent_id(&agent), rev_id(&rev1));
    assert!(calls.contains(&restore), "{calls:?}");
    // The predecessor is never retired; the failed candidate's leftovers are.
    assert!(!calls.contains(&Call::Revision(
        Verb::Retire,
        agent_id(&agent),
        rev_id(&rev1)
    )));
    let restore_at = calls.iter().position(|c| *c == restore).expect("restore");
    let retire2 = Call::Revision(Verb::Retire, agent_id(&agent), rev_id(&rev2));
    assert!(
        calls.iter().position(|c| *c == retire2).expect("retired") > restore_at,
        "{calls:?}"
    );

    // The deployment says why, with the gateway's output, and what happened to revision 1.
    let status = f.deployment(&agent, &rev2).await;
    assert_eq!(status["status"], "failed", "{status}");
    let error = &status["error"];
    assert_eq!(error["code"], "RUNTIME_CONFIGURATION_INVALID");
    assert_eq!(error["data"]["rolledBack"], true);
    assert_eq!(error["data"]["previousRevisionId"], rev1);
    assert_eq!(error["data"]["previousRevision"], 1);
    assert_eq!(
        error["data"]["output"][1],
        "  - <root>: Unrecognized key: \"bogusTopLevelKey\""
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Revision 1") && message.contains("keeps serving"),
        "{message}"
    );
    // Revision 1's own deployment still reads as succeeded.
    assert_eq!(f.deployment(&agent, &rev1).await["status"], "succeeded");

    // The rollback is audited with the reason.
    let audit = f.audit_actions().await;
    assert!(
        audit.contains(&(
            "openclaw.agents.lifecycle.rollback".to_owned(),
            "success".to_owned(),
            Some("RUNTIME_CONFIGURATION_INVALID".to_owned())
        )),
        "{audit:?}"
    );

    // A fixed deploy afterwards goes ahead from revision 1.
    let rev3 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev3);
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev3)));
}

#[tokio::test]
async fn a_transient_startup_failure_is_rolled_back_at_once_instead_of_retried() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    f.compute.script(
        Verb::Activate,
        Scripted::Fail(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "the gateway exited with status 1",
        )),
    );
    let rev2 = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev2));
    // One pass: retrying would take the restored revision down again at every attempt.
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Permanent)]);
    assert_eq!(f.work(&key).await.attempt_count, 1);
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev1)));
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev1);
    let status = f.deployment(&agent, &rev2).await;
    assert_eq!(status["error"]["code"], "RUNTIME_STARTUP_FAILED");
    assert_eq!(status["error"]["data"]["rolledBack"], true);
}

#[tokio::test]
async fn a_failed_restore_is_reported_and_leaves_the_pointer_on_the_previous_revision() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    f.compute.script(Verb::Activate, Scripted::Fail(refused()));
    f.compute.script(
        Verb::Restore,
        Scripted::Fail(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "the gateway exited with status 1",
        )),
    );
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.compute.serving(&agent_id(&agent)), None);
    // The pointer never moved to the revision that did not start.
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev1);
    let status = f.deployment(&agent, &rev2).await;
    assert_eq!(status["error"]["code"], "RUNTIME_CONFIGURATION_INVALID");
    assert_eq!(status["error"]["data"]["rolledBack"], false);
    assert_eq!(
        status["error"]["data"]["rollbackCode"],
        "RUNTIME_STARTUP_FAILED"
    );
    let message = status["error"]["message"].as_str().unwrap();
    assert!(message.contains("failed too"), "{message}");
    assert!(
        !f.audit_actions()
            .await
            .iter()
            .any(|(a, _, _)| a == "openclaw.agents.lifecycle.rollback"),
        "no rollback is recorded when nothing was restored"
    );
}

#[tokio::test]
async fn a_first_deploy_that_fails_to_start_never_names_itself_active() {
    let mut s = settings();
    s.max_attempts = 2;
    let f = Fixture::with(Backend::Sqlite, FakeCompute::new(), s).await;
    let (_, agent) = f.agent("a1").await;
    let failure = ComputeError::transient(ReasonCode::RuntimeStartupFailed, "exit 1");
    f.compute
        .script(Verb::Activate, Scripted::Fail(failure.clone()));
    f.compute.script(Verb::Activate, Scripted::Fail(failure));
    let rev = f.deploy(&agent).await;
    let key = WorkKey::revision_reconcile(&rev_id(&rev));
    assert_eq!(f.pass().await, Some((key.clone(), PassOutcome::Retry)));
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], Value::Null);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(f.drain().await, vec![(key.clone(), PassOutcome::Permanent)]);
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], Value::Null);
    assert!(
        !f.compute
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Revision(Verb::Restore, ..))),
        "nothing to restore"
    );
    let status = f.deployment(&agent, &rev).await;
    assert_eq!(status["error"]["code"], "RUNTIME_STARTUP_FAILED");
    assert_eq!(status["error"]["data"], Value::Null);
}

#[tokio::test]
async fn a_restore_runs_under_the_previous_deployment_s_authority() {
    let f = Fixture::new().await;
    let (_, agent) = f.agent("a1").await;
    // Revision 1 is deployed by a principal of its own, as its maintenance passes would be
    // re-authorized.
    let (deployer, key) = f.app.deployer().await;
    let rev1 = f.app.deploy_as(&key, &agent).await;
    f.drain().await;
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev1)));
    // That principal loses its grants; the admin deploys revision 2, which fails to start.
    let mut raw = f.app.db.raw().await;
    raw.execute(&format!(
        "DELETE FROM iam_access_bindings WHERE subject_id = '{deployer}'"
    ))
    .await
    .unwrap();
    f.compute.script(Verb::Activate, Scripted::Fail(refused()));
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    // The restore needs revision 1's requester: refused, so Compute is never asked to restore.
    assert!(
        !f.compute
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Revision(Verb::Restore, ..))),
        "no restore without its authority"
    );
    let status = f.deployment(&agent, &rev2).await;
    assert_eq!(status["error"]["data"]["rolledBack"], false);
    assert_eq!(
        status["error"]["data"]["rollbackCode"],
        "AUTHORIZATION_DENIED"
    );
    assert!(
        f.audit_actions()
            .await
            .iter()
            .any(|(a, o, _)| a == "openclaw.agents.deploy" && o == "denied"),
        "the refusal is audited"
    );
}

/// A rollback on purpose: redeploying an earlier revision admits a new one whose frozen
/// document is the earlier one's, and the worker activates exactly that document and retires
/// what served.
#[tokio::test]
async fn a_redeployed_revision_activates_the_document_its_source_froze() {
    let f = Fixture::new().await;
    let (cfg, agent) = f.agent("a1").await;
    let rev1 = f.deploy(&agent).await;
    f.drain().await;
    let first_document = f.compute.document_of(&rev_id(&rev1)).expect("activated");
    assert_eq!(
        serde_json::Value::Object(first_document.clone()),
        json!({"gateway": {"mode": "local"}})
    );

    let r = f
        .call(
            Method::PATCH,
            &format!("/namespaces/{}/configurations/{cfg}", f.ns),
            Some(json!({"values": {}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let rev2 = f.deploy(&agent).await;
    f.drain().await;
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev2)));
    assert_eq!(
        f.compute.document_of(&rev_id(&rev2)),
        Some(serde_json::Map::new())
    );

    let r = f
        .call(
            Method::POST,
            &format!(
                "/namespaces/{}/agents/{agent}/revisions/{rev1}/redeploy",
                f.ns
            ),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.data()["revision"], 3);
    let rev3 = r.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        f.drain().await,
        vec![(
            WorkKey::revision_reconcile(&rev_id(&rev3)),
            PassOutcome::Success
        )]
    );

    // Revision 3 serves revision 1's document; revision 2 is retired after it activated.
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev3)));
    assert_eq!(f.compute.document_of(&rev_id(&rev3)), Some(first_document));
    assert_eq!(f.agent_state(&agent).await["activeRevisionId"], rev3);
    assert_eq!(f.deployment(&agent, &rev3).await["status"], "succeeded");
    let calls = f.compute.calls();
    let activate3 = Call::Revision(Verb::Activate, agent_id(&agent), rev_id(&rev3));
    let retire2 = Call::Revision(Verb::Retire, agent_id(&agent), rev_id(&rev2));
    let at = |call: &Call| calls.iter().position(|c| c == call);
    assert!(
        at(&activate3).expect("activated") < at(&retire2).expect("retired"),
        "{calls:?}"
    );
}

/// Diagnostics of a first deployment the gateway refused: the failing step carries the reason
/// code the deployment failed with, and the runtime checks say nothing runs for it.
#[tokio::test]
async fn diagnostics_name_the_cause_of_a_failed_deployment() {
    let compute = Arc::new(FakeCompute::new());
    let app = TestApp::with(
        Backend::Sqlite,
        occ_testkit::app::TestAppOptions {
            runtime: Some(compute.clone()),
            ..Default::default()
        },
    )
    .await;
    let worker = Worker::new(app.controller.clone(), compute.clone(), settings());
    let f = Fixture::of(app, compute, worker);
    f.drain().await;
    let (_, agent) = f.agent("a1").await;
    f.compute.script(Verb::Activate, Scripted::Fail(refused()));
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let r = f
        .call(
            Method::POST,
            &format!(
                "/namespaces/{}/agents/{agent}/deployments/{rev}/diagnostics",
                f.ns
            ),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let checks: Vec<(String, String, String)> = r.data()["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                format!(
                    "{}/{}",
                    c["component"].as_str().unwrap(),
                    c["check"].as_str().unwrap()
                ),
                c["state"].as_str().unwrap().to_owned(),
                c["code"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        checks[..2],
        [
            (
                "deployment/reconcile".to_owned(),
                "failed".to_owned(),
                "RUNTIME_CONFIGURATION_INVALID".to_owned()
            ),
            (
                "runtime/workload".to_owned(),
                "failed".to_owned(),
                "NO_WORKLOAD".to_owned()
            ),
        ],
        "{checks:?}"
    );
}
