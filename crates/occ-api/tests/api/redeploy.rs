//! Redeploy (`POST …/revisions/{revisionId}/redeploy`): a new revision from an earlier revision's
//! frozen document, admitted, refused and audited like a deploy.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::resource::NamespaceStatus;
use occ_core::work::{WorkKey, WorkState};
use occ_core::{AgentId, NamespaceId, RevisionId};
use occ_store::Backend;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, Reply, TestApp};
use serde_json::json;

use crate::common::{agent, configuration, document, expect, secret};

async fn call(app: &TestApp, path: &str, who: &Credential) -> Reply {
    app.call(Method::POST, path, who, None).await
}

fn id_of(reply: &Reply) -> String {
    reply.data()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn redeploy_admits_a_new_revision_from_the_frozen_document() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::on(backend).await;
        let admin = app.admin();
        let ns = app.default_ns.to_string();
        let cfg = configuration(&app, &ns, &admin).await;
        let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
        let agents = format!("/namespaces/{ns}/agents");
        let first = id_of(&expect(
            call(&app, &format!("{agents}/{agt}/deploy"), &admin).await,
            StatusCode::ACCEPTED,
        ));
        // the Configuration and the Agent's draft move on and are deployed as revision 2
        expect(
            app.call(
                Method::PATCH,
                &format!("{agents}/{agt}"),
                &admin,
                Some(json!({"configurationId": cfg, "backendId": "chatgpt-main"})),
            )
            .await,
            StatusCode::OK,
        );
        expect(
            app.call(
                Method::PATCH,
                &format!("/namespaces/{ns}/configurations/{cfg}"),
                &admin,
                Some(json!({"values": {"gateway": {"mode": "local"}}})),
            )
            .await,
            StatusCode::OK,
        );
        expect(
            call(&app, &format!("{agents}/{agt}/deploy"), &admin).await,
            StatusCode::ACCEPTED,
        );
        expect(
            call(&app, &format!("{agents}/{agt}/stop"), &admin).await,
            StatusCode::ACCEPTED,
        );
        // redeploying revision 1 admits revision 3 with revision 1's document and generation
        let r = expect(
            call(
                &app,
                &format!("{agents}/{agt}/revisions/{first}/redeploy"),
                &admin,
            )
            .await,
            StatusCode::ACCEPTED,
        );
        let third = r.data().clone();
        let third_id = third["id"].as_str().unwrap().to_owned();
        assert_eq!(third["revision"], 3, "{backend:?}");
        assert_eq!(third["configuration"], document());
        assert_eq!(third["configurationId"], cfg.as_str());
        assert_eq!(third["configurationGeneration"], 1);
        assert_eq!(third["redeployedFromRevisionId"], first.as_str());
        assert_eq!(third["harnessAuth"], json!({"method": "runtime"}));
        assert_eq!(
            third["backendId"],
            serde_json::Value::Null,
            "revision 1's backend"
        );
        // the field is on the stored revision, and absent from a deploy's
        let read = |rev: String| {
            let app = &app;
            let path = format!("{agents}/{agt}/revisions/{rev}");
            let admin = admin.clone();
            async move {
                expect(
                    app.call(Method::GET, &path, &admin, None).await,
                    StatusCode::OK,
                )
            }
        };
        assert_eq!(
            read(third_id.clone()).await.data()["redeployedFromRevisionId"],
            first.as_str()
        );
        assert!(
            read(first.clone())
                .await
                .data()
                .get("redeployedFromRevisionId")
                .is_none(),
            "omitted for a deploy: the reference's AgentRevision is a closed object"
        );
        // desired running again, work queued for the caller, audited with the source revision
        let a = expect(
            app.call(Method::GET, &format!("{agents}/{agt}"), &admin, None)
                .await,
            StatusCode::OK,
        );
        assert_eq!(a.data()["desiredRuntimeState"], "running");
        let rid: RevisionId = third_id.parse().unwrap();
        let mut tx = app.store.begin_read().await.unwrap();
        let stored = tx
            .revision_get(&app.default_ns, &agt.parse().unwrap(), &rid)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.source_revision_id, Some(first.parse().unwrap()));
        let work = tx
            .work_get(&WorkKey::revision_reconcile(&rid))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (work.state, work.actor_id.clone()),
            (WorkState::Queued, app.admin_principal.clone())
        );
        let audit = tx
            .audit_list(&AuditFilter {
                action: Some("openclaw.agents.deploy".into()),
                resource_id: Some(third_id.clone()),
            })
            .await
            .unwrap();
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].details["sourceRevisionId"], first.as_str());
        assert_eq!(audit[0].details["configurationGeneration"], 1);
        assert_eq!(audit[0].details["agentId"], agt.as_str());
        drop(tx);
        // the deployment of the new revision is readable like any other
        let st = expect(
            app.call(
                Method::GET,
                &format!("{agents}/{agt}/deployments/{third_id}"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(st.data()["status"], "queued");
    }
}

#[tokio::test]
async fn redeploy_refusals() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::on(backend).await;
        let admin = app.admin();
        let ns = app.default_ns.to_string();
        let agents = format!("/namespaces/{ns}/agents");
        let cfg = configuration(&app, &ns, &admin).await;
        let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
        let other = agent(&app, &ns, &cfg, "beta", &admin).await;
        let rev = id_of(&expect(
            call(&app, &format!("{agents}/{agt}/deploy"), &admin).await,
            StatusCode::ACCEPTED,
        ));
        let others = id_of(&expect(
            call(&app, &format!("{agents}/{other}/deploy"), &admin).await,
            StatusCode::ACCEPTED,
        ));
        let redeploy =
            |agent: &str, rev: &str| format!("{agents}/{agent}/revisions/{rev}/redeploy");
        // another Agent's revision, a revision that never existed, an unknown Agent: 404
        for path in [
            redeploy(&agt, &others),
            redeploy(&agt, RevisionId::generate().as_str()),
            redeploy(AgentId::generate().as_str(), &rev),
        ] {
            let r = call(&app, &path, &admin).await;
            assert_eq!(
                r.status,
                StatusCode::NOT_FOUND,
                "{backend:?} {path}: {}",
                r.body
            );
        }
        // a malformed id names its parameter; a body (even `{}`) is refused as on deploy
        let r = call(&app, &redeploy(&agt, "rev_nope"), &admin).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["error"]["details"][0]["path"], "/revisionId");
        let r = app
            .call(Method::POST, &redeploy(&agt, &rev), &admin, Some(json!({})))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        // anonymous 401; a reader (read on everything, no deploy) 403, whether or not it exists
        let r = call(&app, &redeploy(&agt, &rev), &Credential::Anonymous).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let read_all: Vec<Permission> = [
            ResourceKind::Agent,
            ResourceKind::AgentRevision,
            ResourceKind::Configuration,
        ]
        .into_iter()
        .map(|kind| Permission::new(Action::Read, kind))
        .collect();
        let (_, key) = app.principal_with(&read_all, None, None, None).await;
        let reader = Credential::Key(key);
        for path in [
            redeploy(&agt, &rev),
            redeploy(&agt, RevisionId::generate().as_str()),
        ] {
            let r = call(&app, &path, &reader).await;
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.body);
        }
        // nothing was admitted by any refusal
        let count = |agent: String| {
            let store = app.store.clone();
            let ns: NamespaceId = app.default_ns.clone();
            async move {
                let mut tx = store.begin_read().await.unwrap();
                tx.revision_list(&ns, &agent.parse().unwrap())
                    .await
                    .unwrap()
                    .len()
            }
        };
        assert_eq!(count(agt.clone()).await, 1);
        // a deleting Agent: 409 AGENT_DELETING
        expect(
            app.call(Method::DELETE, &format!("{agents}/{agt}"), &admin, None)
                .await,
            StatusCode::ACCEPTED,
        );
        let r = call(&app, &redeploy(&agt, &rev), &admin).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::CONFLICT, "AGENT_DELETING"),
            "{backend:?}"
        );
        assert_eq!(count(agt.clone()).await, 1);
        // a Namespace that is not ready: 409 NAMESPACE_NOT_READY, as on deploy
        app.set_namespace_status(&app.default_ns, NamespaceStatus::Deleting)
            .await;
        let r = call(&app, &redeploy(&other, &others), &admin).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::CONFLICT, "NAMESPACE_NOT_READY")
        );
        assert_eq!(count(other.clone()).await, 1);
    }
}

/// What the source revision froze must still be usable: its Secrets must exist, and this
/// installation must still run its Compute Driver and harness.
#[tokio::test]
async fn redeploy_rechecks_what_the_revision_consumes() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let agents = format!("/namespaces/{ns}/agents");
    let sec = secret(&app, &ns, "token", &admin).await;
    let binding = json!({"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": ns, "id": sec}}});
    let cfg = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            &admin,
            Some(json!({"kind": "agent", "values": {}, "secretBindings": binding})),
        )
        .await,
        StatusCode::CREATED,
    );
    let cfg = id_of(&cfg);
    let agt = agent(&app, &ns, &cfg, "consumer", &admin).await;
    // Namespace-wide, so the grant outlives the Secret (an exact one is removed with it)
    let sp: occ_core::IamId = format!("service-agent-{agt}").parse().unwrap();
    app.grant(
        &sp,
        &[Permission::new(Action::Operate, ResourceKind::Secret)],
        &app.default_ns,
        None,
    )
    .await;
    let rev = id_of(&expect(
        call(&app, &format!("{agents}/{agt}/deploy"), &admin).await,
        StatusCode::ACCEPTED,
    ));
    let redeploy = format!("{agents}/{agt}/revisions/{rev}/redeploy");
    // the frozen binding is authorized again for the caller's principal… (a reader with deploy
    // but no secret:operate is refused exactly as deploy would refuse it)
    let (_, key) = app
        .principal_with(
            &[
                Permission::new(Action::Deploy, ResourceKind::Agent),
                Permission::new(Action::Read, ResourceKind::Configuration),
            ],
            None,
            None,
            None,
        )
        .await;
    let r = call(&app, &redeploy, &Credential::Key(key)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // …and the Secret must still exist: unbind it, delete it, and the revision cannot come back
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{ns}/configurations/{cfg}"),
            &admin,
            Some(json!({"values": {}, "secretBindings": {}})),
        )
        .await,
        StatusCode::OK,
    );
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/secrets/{sec}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    let r = call(&app, &redeploy, &admin).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "RESOURCE_CONFLICT"),
        "{}",
        r.body
    );
    assert!(r.body["error"]["message"].as_str().unwrap().contains(&sec));

    // a revision admitted for another Compute Driver or another OpenClaw release: 409, since
    // the worker would refuse it
    let plain_cfg = configuration(&app, &ns, &admin).await;
    let plain = agent(&app, &ns, &plain_cfg, "plain", &admin).await;
    let plain_id: AgentId = plain.parse().unwrap();
    let base = id_of(&expect(
        call(&app, &format!("{agents}/{plain}/deploy"), &admin).await,
        StatusCode::ACCEPTED,
    ));
    let mut tx = app.store.begin_read().await.unwrap();
    let stored = tx
        .revision_get(&app.default_ns, &plain_id, &base.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    drop(tx);
    let mut foreign_compute = stored.clone();
    foreign_compute.spec.compute.id = "compute-elsewhere".into();
    let mut old_harness = stored.clone();
    old_harness.spec.harness.version = "2025.1.1".into();
    for (number, mut rev, expected) in [
        (2, foreign_compute, "Compute Driver"),
        (3, old_harness, "2025.1.1"),
    ] {
        rev.id = RevisionId::generate();
        rev.revision = number;
        let mut tx = occ_testkit::begin_setup(&app.store).await;
        tx.revision_insert(&rev).await.unwrap();
        tx.commit().await.unwrap();
        let r = call(
            &app,
            &format!("{agents}/{plain}/revisions/{}/redeploy", rev.id),
            &admin,
        )
        .await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(expected),
            "{}",
            r.body
        );
    }
}
