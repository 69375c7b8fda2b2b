//! The runtime logs route with the Compute test double in place of a gateway's output (the
//! real files are proven by occ-host's reader tests): success, follow, download, redaction of
//! planted canaries, the query and cursor rules, authorization, the access audit and the rate
//! limit.

use std::sync::Arc;

use http::{Method, StatusCode};
use occ_core::ReasonCode;
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_drivers::compute::ComputeError;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp, TestAppOptions};
use occ_testkit::compute::{FakeCompute, Scripted, Verb};

use crate::common::{agent, configuration, expect};

const CANARIES: [&str; 4] = [
    "sk-canaryabcdefghijklmnopqrstuvwxyz0123",
    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCcanarybody",
    "Y2FuYXJ5LXNlY29uZC1wZW0tbGluZQ==",
];

struct F {
    app: TestApp,
    compute: Arc<FakeCompute>,
    ns: String,
    agt: String,
    rev: String,
}

impl F {
    fn path(&self, query: &str) -> String {
        format!(
            "/namespaces/{}/agents/{}/deployments/{}/runtime/logs?{query}",
            self.ns, self.agt, self.rev
        )
    }

    async fn get(&self, query: &str, who: &Credential) -> occ_testkit::app::Reply {
        self.app
            .call(Method::GET, &self.path(query), who, None)
            .await
    }

    async fn views(&self) -> usize {
        let mut tx = self.app.store.begin_read().await.unwrap();
        tx.audit_list(&AuditFilter::default())
            .await
            .unwrap()
            .into_iter()
            .filter(|e| {
                e.action == "openclaw.agents.runtime_logs.view"
                    || e.action == "openclaw.agents.runtime_logs.download"
            })
            .filter(|e| e.kind.as_str() == "access")
            .count()
    }
}

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
    let agt = agent(&app, &ns, &cfg, "logs", &admin).await;
    let rev = app.deploy_as(&admin, &agt).await;
    let revision_id = rev.parse().unwrap();
    compute.write_output(
        &revision_id,
        &[
            r#"{"0":"{\"subsystem\":\"gateway\"}","1":"ready","_meta":{"logLevelName":"INFO","name":"{\"subsystem\":\"gateway\"}"},"time":"2026-12-01T14:31:37.222+00:00","message":"ready"}"#,
            &format!("provider key {}", CANARIES[0]),
            &format!("Authorization: {}", CANARIES[1]),
            "-----BEGIN PRIVATE KEY-----",
            CANARIES[2],
        ],
    );
    F {
        app,
        compute,
        ns,
        agt,
        rev,
    }
}

fn assert_clean(text: &str) {
    for canary in CANARIES {
        let secret = canary.trim_start_matches("Bearer ");
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

#[tokio::test]
async fn a_page_follow_and_download_are_classified_redacted_and_resume_exactly() {
    let f = fixture().await;
    let admin = f.app.admin();
    let page = expect(f.get("source=gateway", &admin).await, StatusCode::OK);
    let data = page.data();
    assert_eq!(data["revisionId"], f.rev.as_str());
    assert_eq!(data["source"], "gateway");
    let records = data["records"].as_array().unwrap();
    assert_eq!(records.len(), 5, "{data}");
    assert_eq!(records[0]["kind"], "openclaw");
    assert_eq!(records[0]["level"], "info");
    assert_eq!(records[0]["subsystem"], "gateway");
    assert_eq!(records[0]["time"], "2026-12-01T14:31:37.222Z");
    assert_eq!(records[1]["kind"], "text");
    assert_eq!(records[1]["level"], "unknown");
    assert_clean(&page.body.to_string());
    assert_eq!(f.views().await, 1, "a new view is audited");

    // Follow: only what was written since, the open PEM block still masked.
    let rev = f.rev.parse().unwrap();
    f.compute
        .write_output(&rev, &[CANARIES[3], "-----END PRIVATE KEY-----", "after"]);
    let cursor = data["cursor"].as_str().unwrap().to_owned();
    let next = expect(
        f.get(&format!("source=gateway&cursor={cursor}"), &admin)
            .await,
        StatusCode::OK,
    );
    let records = next.data()["records"].as_array().unwrap();
    assert_eq!(records.len(), 3, "{}", next.body);
    assert_eq!(records[2]["message"], "after");
    assert_clean(&next.body.to_string());
    assert_eq!(f.views().await, 1, "a follow read is not a new view");

    // A replaced stream is an explicit gap.
    f.compute.replace_output(&rev);
    f.compute.write_output(&rev, &["fresh"]);
    let cursor = next.data()["cursor"].as_str().unwrap().to_owned();
    let replaced = expect(
        f.get(&format!("source=gateway&cursor={cursor}"), &admin)
            .await,
        StatusCode::OK,
    );
    let records = replaced.data()["records"].as_array().unwrap();
    assert_eq!(records[0]["type"], "gap");
    assert_eq!(records[0]["reason"], "stream_replaced");
    assert_eq!(records[1]["message"], "fresh");

    // minLevel keeps unknown-level text.
    let filtered = expect(
        f.get("source=gateway&minLevel=error", &admin).await,
        StatusCode::OK,
    );
    assert_eq!(filtered.data()["records"].as_array().unwrap().len(), 1);

    let download = expect(
        f.get("source=gateway&download=true", &admin).await,
        StatusCode::OK,
    );
    assert!(
        download.headers[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(
        download.headers[http::header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment;")
    );
    assert!(download.text.contains("fresh"));
    assert_clean(&download.text);
    assert_eq!(f.views().await, 3, "a download is audited as its own view");
}

#[tokio::test]
async fn bad_queries_sources_and_cursors_are_refused() {
    let f = fixture().await;
    let admin = f.app.admin();
    let forged = format!("source=gateway&cursor=v1.e30.{}", "A".repeat(43));
    for (query, code) in [
        ("", "INVALID_REQUEST"),
        ("source=gateway&tailLines=0", "INVALID_REQUEST"),
        ("source=gateway&tailLines=1001", "INVALID_REQUEST"),
        ("source=gateway&sinceSeconds=90000", "INVALID_REQUEST"),
        ("source=gateway&minLevel=trace", "INVALID_REQUEST"),
        ("source=gateway&unknown=1", "INVALID_REQUEST"),
        ("source=sandbox", "RUNTIME_LOGS_SOURCE_UNAVAILABLE"),
        ("source=agent", "RUNTIME_LOGS_SOURCE_UNAVAILABLE"),
        ("source=gateway&pod=gw-0", "RUNTIME_LOGS_POD_INVALID"),
        (forged.as_str(), "RUNTIME_LOGS_CURSOR_INVALID"),
    ] {
        let reply = f.get(query, &admin).await;
        assert_eq!(
            (reply.status, reply.body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{query}: {}",
            reply.body
        );
    }
    // A cursor is bound to its caller and source, and cannot be altered.
    let page = expect(f.get("source=gateway", &admin).await, StatusCode::OK);
    let cursor = page.data()["cursor"].as_str().unwrap().to_owned();
    let (_, key) = f
        .app
        .principal_with(
            &[
                Permission::new(Action::ReadLogs, ResourceKind::Agent),
                Permission::new(Action::Read, ResourceKind::Agent),
            ],
            Some(&f.app.default_ns),
            None,
            None,
        )
        .await;
    let other = Credential::Key(key);
    expect(f.get("source=gateway", &other).await, StatusCode::OK);
    let foreign = f
        .get(&format!("source=gateway&cursor={cursor}"), &other)
        .await;
    assert_eq!(foreign.status, StatusCode::BAD_REQUEST, "{}", foreign.body);
    assert_eq!(foreign.body["error"]["code"], "RUNTIME_LOGS_CURSOR_INVALID");
    let mut altered = cursor.clone().into_bytes();
    let at = 5;
    altered[at] = if altered[at] == b'a' { b'b' } else { b'a' };
    let altered = String::from_utf8(altered).unwrap();
    let tampered = f
        .get(&format!("source=gateway&cursor={altered}"), &admin)
        .await;
    assert_eq!(
        tampered.status,
        StatusCode::BAD_REQUEST,
        "{}",
        tampered.body
    );
    let download = f
        .get(
            &format!("source=gateway&download=true&cursor={cursor}"),
            &admin,
        )
        .await;
    assert_eq!(download.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn authorization_and_missing_revisions() {
    let f = fixture().await;
    let anonymous = f.get("source=gateway", &Credential::Anonymous).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let (_, reader) = f
        .app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            Some(&f.app.default_ns),
            None,
            None,
        )
        .await;
    let reader = f.get("source=gateway", &Credential::Key(reader)).await;
    assert_eq!(
        reader.status,
        StatusCode::FORBIDDEN,
        "read alone is not read_logs"
    );
    assert_eq!(
        f.views().await,
        0,
        "a denial reads nothing and opens no view"
    );

    let admin = f.app.admin();
    let unknown = format!(
        "/namespaces/{}/agents/{}/deployments/rev_00000000-0000-4000-8000-000000000000/runtime/logs?source=gateway",
        f.ns, f.agt
    );
    let reply = f.app.call(Method::GET, &unknown, &admin, None).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    // Another Agent's revision is not found under this Agent.
    let cfg = configuration(&f.app, &f.ns, &admin).await;
    let other = agent(&f.app, &f.ns, &cfg, "other", &admin).await;
    let foreign = format!(
        "/namespaces/{}/agents/{other}/deployments/{}/runtime/logs?source=gateway",
        f.ns, f.rev
    );
    let reply = f.app.call(Method::GET, &foreign, &admin, None).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    // A caller whose grant is for another Namespace does not see this one's Agents.
    let elsewhere: occ_core::NamespaceId = expect(
        f.app
            .call(
                Method::POST,
                "/namespaces",
                &admin,
                Some(serde_json::json!({"name": "elsewhere"})),
            )
            .await,
        StatusCode::CREATED,
    )
    .created_id()
    .parse()
    .unwrap();
    let (_, scoped) = f
        .app
        .principal_with(
            &[Permission::new(Action::ReadLogs, ResourceKind::Agent)],
            Some(&elsewhere),
            None,
            None,
        )
        .await;
    let reply = f.get("source=gateway", &Credential::Key(scoped)).await;
    assert!(
        matches!(reply.status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND),
        "{}",
        reply.status
    );

    // A Restriction on read_logs denies the administrator, whose administer otherwise stands
    // in for it; the denial names the Restriction.
    assert_eq!(f.get("source=gateway", &admin).await.status, StatusCode::OK);
    let restriction = occ_core::iam::Restriction {
        id: occ_core::IamId::generate_restriction(),
        namespace_id: Some(f.app.default_ns.clone()),
        action: Action::ReadLogs,
        resource_kind: ResourceKind::Agent,
        resource_id: Some(f.agt.clone()),
        created_at: occ_core::Timestamp::now(),
    };
    let mut tx = occ_testkit::begin_setup(&f.app.store).await;
    tx.restriction_insert(&restriction).await.unwrap();
    tx.commit().await.unwrap();
    let views = f.views().await;
    let denied = f.get("source=gateway", &admin).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(f.views().await, views, "a denial opens no view");
    let mut tx = f.app.store.begin_read().await.unwrap();
    let denials = tx
        .audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == "authorization_denial")
        .map(|e| serde_json::to_string(&e.details).unwrap())
        .collect::<Vec<_>>();
    assert!(
        denials.iter().any(|d| d.contains(restriction.id.as_str())),
        "the denial is audited with the Restriction: {denials:?}"
    );
}

#[tokio::test]
async fn a_caller_past_its_burst_is_told_when_to_return() {
    let f = fixture().await;
    let admin = f.app.admin();
    let mut limited = None;
    for _ in 0..100 {
        let reply = f.get("source=gateway&tailLines=1", &admin).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(reply);
            break;
        }
        assert_eq!(reply.status, StatusCode::OK);
    }
    let limited = limited.expect("the limiter answered 429");
    assert!(limited.headers.contains_key(http::header::RETRY_AFTER));
    assert_eq!(limited.body["error"]["code"], "RUNTIME_LOGS_RATE_LIMITED");
}

/// A Driver that cannot read: the reference's codes with fixed messages, never the Driver's text.
#[tokio::test]
async fn driver_failures_are_the_references_codes_without_the_drivers_text() {
    let f = fixture().await;
    let admin = f.app.admin();
    for (reason, code) in [
        (
            ReasonCode::RuntimeLogsClusterRbac,
            "RUNTIME_LOGS_CLUSTER_RBAC",
        ),
        (
            ReasonCode::DependencyUnavailable,
            "RUNTIME_LOGS_UNAVAILABLE",
        ),
    ] {
        f.compute.script(
            Verb::ReadLogs,
            Scripted::Fail(ComputeError::transient(
                reason,
                "pods \"gw-secret-name\" is forbidden: User \"system:sa\" cannot get",
            )),
        );
        let reply = f.get("source=gateway", &admin).await;
        assert_eq!(
            (reply.status, reply.body["error"]["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some(code)),
            "{}",
            reply.body
        );
        assert!(
            !reply.body.to_string().contains("gw-secret-name"),
            "{}",
            reply.body
        );
    }
}
