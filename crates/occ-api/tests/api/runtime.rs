//! `GET …/deployments/{rev}/runtime` and `POST …/deployments/{rev}/diagnostics` with the Compute
//! test double in place of a Driver (the Drivers' own reports are tested with them): the
//! published shape, redaction, ids, authorization, foreign revisions and an unreachable Driver.

use std::sync::Arc;

use http::{Method, StatusCode};
use occ_core::ReasonCode;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_drivers::compute::ComputeError;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::compute::{FAKE_EVENT_MESSAGE, FakeCompute, Scripted, Verb};
use serde_json::Value;

use crate::common::{agent, configuration, expect};

/// A uuid that names nothing.
const UNKNOWN: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

struct F {
    app: TestApp,
    compute: Arc<FakeCompute>,
    ns: String,
    agt: String,
    rev: String,
}

impl F {
    fn runtime(&self) -> String {
        format!(
            "/namespaces/{}/agents/{}/deployments/{}/runtime",
            self.ns, self.agt, self.rev
        )
    }

    fn diagnostics(&self) -> String {
        format!(
            "/namespaces/{}/agents/{}/deployments/{}/diagnostics",
            self.ns, self.agt, self.rev
        )
    }
}

/// An Agent deployed and (as the worker would record it) active, served by the double.
async fn fixture() -> F {
    let compute = Arc::new(FakeCompute::new());
    let app = TestApp::with(
        occ_store::Backend::Sqlite,
        TestAppOptions {
            runtime: Some(compute.clone()),
            ..TestAppOptions::default()
        },
    )
    .await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "runtime", &admin).await;
    let rev = app.deploy_as(&admin, &agt).await;
    let (agent_id, rev_id) = (agt.parse().unwrap(), rev.parse().unwrap());
    app.activate(&agent_id, &rev_id).await;
    compute.assume_serving(&agent_id, &rev_id);
    F {
        app,
        compute,
        ns,
        agt,
        rev,
    }
}

fn keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[tokio::test]
async fn the_runtime_is_the_drivers_report_in_the_published_shape_and_redacted() {
    let f = fixture().await;
    let r = expect(
        f.app
            .call(Method::GET, &f.runtime(), &f.app.admin(), None)
            .await,
        StatusCode::OK,
    );
    let data = r.data();
    assert_eq!(keys(data), ["observedAt", "pods", "revisionId", "sources"]);
    assert_eq!(data["revisionId"], f.rev.as_str());
    let pod = &data["pods"][0];
    assert_eq!(
        keys(pod),
        [
            "cluster",
            "containers",
            "createdAt",
            "events",
            "name",
            "phase",
            "ready",
            "role",
            "uid"
        ]
    );
    assert_eq!(
        (&pod["role"], &pod["cluster"], &pod["phase"], &pod["ready"]),
        (
            &Value::from("gateway"),
            &Value::from("control"),
            &Value::from("Running"),
            &Value::from(true)
        )
    );
    let container = &pod["containers"][0];
    assert_eq!(
        keys(container),
        [
            "lastTermination",
            "name",
            "ready",
            "reason",
            "restartCount",
            "startedAt",
            "state"
        ]
    );
    assert_eq!(container["state"], "running");
    let event = &pod["events"][0];
    assert_eq!(
        keys(event),
        [
            "container",
            "count",
            "lastObservedAt",
            "message",
            "reason",
            "type"
        ]
    );
    assert_eq!(event["type"], "Normal");
    // The double's event carries a bearer token and an API key: neither comes back.
    assert!(FAKE_EVENT_MESSAGE.contains("fake-bearer-0123456789abcdef"));
    for planted in ["fake-bearer-0123456789abcdef", "sk-fakefakefakefakefake01"] {
        assert!(
            !r.body.to_string().contains(planted),
            "{planted} leaked: {}",
            r.body
        );
    }
    let source = &data["sources"][0];
    assert_eq!(
        (&source["id"], &source["kind"], &source["available"]),
        (
            &Value::from("gateway"),
            &Value::from("container"),
            &Value::from(true)
        )
    );
    assert_eq!(source["pods"][0]["name"], pod["name"]);

    // Another revision installed: nothing runs for this one, and its log source says so.
    f.compute.crash(&f.agt.parse().unwrap());
    let r = expect(
        f.app
            .call(Method::GET, &f.runtime(), &f.app.admin(), None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(r.data()["pods"], Value::Array(Vec::new()));
    assert_eq!(r.data()["sources"][0]["available"], false);
    assert_eq!(r.data()["sources"][0]["unavailableCode"], "NO_POD");
}

#[tokio::test]
async fn ids_authorization_foreign_revisions_and_an_unreachable_driver() {
    let f = fixture().await;
    let admin = f.app.admin();
    let ns = &f.ns;
    let agt = &f.agt;
    let rev = &f.rev;
    // A second Agent's id, and a second Namespace.
    let cfg = configuration(&f.app, ns, &admin).await;
    let other_agt = agent(&f.app, ns, &cfg, "other", &admin).await;
    let spare = expect(
        f.app
            .call(
                Method::POST,
                "/namespaces",
                &admin,
                Some(serde_json::json!({"name": "spare"})),
            )
            .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, leaf) in [(Method::GET, "runtime"), (Method::POST, "diagnostics")] {
        let path = |ns: &str, agt: &str, rev: &str| {
            format!("/namespaces/{ns}/agents/{agt}/deployments/{rev}/{leaf}")
        };
        for (path, status, code) in [
            (
                path(ns, agt, "rev_bad"),
                StatusCode::BAD_REQUEST,
                "INVALID_REQUEST",
            ),
            (
                path(ns, "agt_bad", rev),
                StatusCode::BAD_REQUEST,
                "INVALID_REQUEST",
            ),
            (
                path("ns_bad", agt, rev),
                StatusCode::BAD_REQUEST,
                "INVALID_REQUEST",
            ),
            (
                path(ns, agt, &format!("rev_{UNKNOWN}")),
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
            ),
            // The revision of another Agent, and the Agent in another Namespace.
            (
                path(ns, &other_agt, rev),
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
            ),
            (path(&spare, agt, rev), StatusCode::NOT_FOUND, "NOT_FOUND"),
        ] {
            let r = f.app.call(method.clone(), &path, &admin, None).await;
            assert_eq!((r.status, r.code()), (status, code), "{path}: {}", r.body);
        }
        let r = f
            .app
            .call(
                method.clone(),
                &path(ns, agt, rev),
                &Credential::Anonymous,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{leaf}");
        // `read` on the Agent alone is not enough: the reference asks `operate` as well.
        let (_, key) = f
            .app
            .principal_with(
                &[
                    Permission::new(Action::Read, ResourceKind::Agent),
                    Permission::new(Action::Read, ResourceKind::AgentRevision),
                ],
                None,
                None,
                None,
            )
            .await;
        let r = f
            .app
            .call(
                method.clone(),
                &path(ns, agt, rev),
                &Credential::Key(key),
                None,
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "FORBIDDEN"),
            "{leaf}"
        );
    }
    let mut tx = f.app.store.begin_read().await.unwrap();
    let denials: Vec<String> = tx
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == "authorization_denial")
        .map(|e| e.action)
        .collect();
    drop(tx);
    for action in [
        "openclaw.agent_deployments.runtime.read",
        "openclaw.agent_deployments.diagnose",
    ] {
        assert!(denials.iter().any(|a| a == action), "{action}: {denials:?}");
    }

    // An unreachable Driver: 503 for the runtime, `unknown` runtime checks in diagnostics.
    let down = || {
        Scripted::Fail(ComputeError::transient(
            ReasonCode::DependencyUnavailable,
            "the host is unreachable",
        ))
    };
    f.compute.script(Verb::Report, down());
    let r = f.app.call(Method::GET, &f.runtime(), &admin, None).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    );
    assert!(!r.body.to_string().contains("unreachable"), "{}", r.body);
    f.compute.script(Verb::Report, down());
    let r = expect(
        f.app
            .call(Method::POST, &f.diagnostics(), &admin, None)
            .await,
        StatusCode::OK,
    );
    let runtime_checks: Vec<&Value> = r.data()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["component"] == "runtime")
        .collect();
    assert_eq!(runtime_checks.len(), 3, "{}", r.body);
    for c in runtime_checks {
        assert_eq!(
            (&c["state"], &c["code"]),
            (
                &Value::from("unknown"),
                &Value::from("DEPENDENCY_UNAVAILABLE")
            ),
            "{c}"
        );
    }
}

#[tokio::test]
async fn diagnostics_of_a_pending_deployment_with_a_running_workload() {
    let f = fixture().await;
    let r = expect(
        f.app
            .call(Method::POST, &f.diagnostics(), &f.app.admin(), None)
            .await,
        StatusCode::OK,
    );
    let data = r.data();
    assert_eq!(keys(data), ["checks", "observedAt", "revisionId"]);
    let checks: Vec<(String, String, String)> = data["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c["checkedAt"].is_string(), "{c}");
            (
                format!(
                    "{}/{}",
                    c["component"].as_str().unwrap(),
                    c["check"].as_str().unwrap()
                ),
                c["state"].as_str().unwrap().to_owned(),
                c["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expected = [
        // No worker ran: the reconciliation is still queued.
        ("deployment/reconcile", "unknown", ""),
        ("runtime/workload", "succeeded", ""),
        ("runtime/running", "succeeded", ""),
        ("runtime/ready", "succeeded", ""),
        // Nothing recorded about the gateway yet.
        ("gateway/exits", "unknown", ""),
    ];
    assert_eq!(
        checks,
        expected
            .iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
            .collect::<Vec<_>>()
    );
}
