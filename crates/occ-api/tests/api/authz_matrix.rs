//! The authorization matrix: every operation of the served OpenAPI document × six callers, with
//! the exact status each must get. An operation missing from the table fails the test, so a new
//! route cannot ship without deciding who may call it.
//!
//! Callers, in the order they call (only the last ones may change state):
//! anonymous; a valid key whose principal has no grant; an administrator key scoped to another
//! Namespace; a read-only role (read on every kind, Installation-wide); an operator (read +
//! agent deploy/operate); a CI key (a service principal of the fixture's Namespace holding the
//! built-in `operator` Role on the whole Namespace, its key limited to that Namespace); the
//! bootstrap administrator.

use std::collections::BTreeSet;

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind, administrator_permissions};
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect, secret};

struct Fixture {
    app: TestApp,
    ns: String,
    spare_ns: String,
    cfg: String,
    spare_cfg: String,
    agt: String,
    rev: String,
    sec: String,
    pre: String,
    /// A credential source naming `cs_sec` (not `sec`, which a row deletes).
    cs: String,
    cs_sec: String,
    /// A provisioning job the administrator admitted (queued: no worker runs here).
    work: String,
    sa: String,
    role: String,
    binding: String,
    key_id: String,
    target_sp: String,
    /// A service principal the administrator disables, enables and deletes.
    doomed_sp: String,
    callers: Vec<Credential>,
    /// See [`Row::ci`].
    ci: Credential,
}

async fn fixture() -> Fixture {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let spare = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "spare"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let spare_ns = spare.data()["id"].as_str().unwrap().to_owned();
    let cfg = configuration(&app, &ns, &admin).await;
    let spare_cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "alpha", &admin).await;
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
    let sec = secret(&app, &ns, "token", &admin).await;
    let pre = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/presets"),
            &admin,
            Some(json!({"name": "standard", "template": {}})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    let cs_sec = secret(&app, &ns, "provider-key", &admin).await;
    let cs = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/credential-sources"),
            &admin,
            Some(json!({"name": "provider", "type": "openai",
                "secrets": {"api_key": {"kind": "secret", "namespaceId": ns, "id": cs_sec}}})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    let work = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/provision"),
            &admin,
            Some(json!({"requestId": "req_00000000-0000-4000-8000-000000000001", "name": "provisioned",
                "configuration": {"kind": "agent", "values": crate::common::document()},
                "harnessAuth": {"method": "runtime"}})),
        )
        .await,
        StatusCode::ACCEPTED,
    )
    .data()["provisioning"]["workId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sa = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/service-accounts"),
            &admin,
            Some(json!({"name": "sa"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let role = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/roles"),
            &admin,
            Some(json!({"permissions": [{"action": "read", "resourceKind": "agent"}]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (target, _) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Agent)],
            None,
            None,
            None,
        )
        .await;
    let binding = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/access-bindings"),
            &admin,
            Some(json!({"subjectKind": "identity", "subjectId": target, "roleId": role, "resourceKind": "agent", "resourceId": agt})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
    .as_str()
    .unwrap()
    .to_owned();
    let key_id = expect(
        app.call(
            Method::POST,
            "/api/auth/service-keys",
            &admin,
            Some(json!({"servicePrincipalId": target, "name": "victim"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let doomed_sp = expect(
        app.call(
            Method::POST,
            "/api/auth/service-principals",
            &admin,
            Some(json!({"name": "doomed"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // a role for the role-delete row must be unused: create another
    let read_all: Vec<Permission> = [
        ResourceKind::Installation,
        ResourceKind::Namespace,
        ResourceKind::Configuration,
        ResourceKind::Secret,
        ResourceKind::ServiceAccount,
        ResourceKind::Preset,
        ResourceKind::CredentialSource,
        ResourceKind::Agent,
        ResourceKind::AgentRevision,
    ]
    .into_iter()
    .map(|k| Permission::new(Action::Read, k))
    .collect();
    let mut operate = read_all.clone();
    operate.push(Permission::new(Action::Deploy, ResourceKind::Agent));
    operate.push(Permission::new(Action::Operate, ResourceKind::Agent));
    let (_, no_grant) = app.principal_with(&[], None, None, None).await;
    let other_ns: occ_core::NamespaceId = spare_ns.parse().unwrap();
    let (_, scoped_other) = app
        .principal_with(&administrator_permissions(), None, None, Some(&other_ns))
        .await;
    let (_, reader) = app.principal_with(&read_all, None, None, None).await;
    let (_, operator) = app.principal_with(&operate, None, None, None).await;
    // The CI key: made the way an operator would, through the API.
    let ci_sp = expect(
        app.call(
            Method::POST,
            "/api/auth/service-principals",
            &admin,
            Some(json!({"name": "ci-key", "namespaceId": ns})),
        )
        .await,
        StatusCode::CREATED,
    )
    .data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let operator_role = occ_core::iam::BuiltinRole::Operator.id(&app.default_ns);
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/namespace-bindings"),
            &admin,
            Some(json!({"subjectKind": "identity", "subjectId": ci_sp, "roleId": operator_role})),
        )
        .await,
        StatusCode::CREATED,
    );
    let ci = Credential::Key(
        expect(
            app.call(
                Method::POST,
                "/api/auth/service-keys",
                &admin,
                Some(json!({"servicePrincipalId": ci_sp, "namespaceId": ns, "name": "ci"})),
            )
            .await,
            StatusCode::CREATED,
        )
        .data()["key"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let callers = vec![
        Credential::Anonymous,
        Credential::Key(no_grant),
        Credential::Key(scoped_other),
        Credential::Key(reader),
        Credential::Key(operator),
        admin,
    ];
    Fixture {
        app,
        ns,
        spare_ns,
        cfg,
        spare_cfg,
        agt,
        rev,
        sec,
        pre,
        cs,
        cs_sec,
        work,
        sa,
        role,
        binding,
        key_id,
        target_sp: target.to_string(),
        doomed_sp,
        callers,
        ci,
    }
}

type PathFn = fn(&Fixture) -> String;
type BodyFn = fn(&Fixture) -> Option<Value>;

struct Row {
    op: &'static str,
    method: Method,
    path: PathFn,
    body: BodyFn,
    /// anonymous, no grant, other-Namespace key, reader, operator, admin
    expect: [u16; 6],
    /// The CI key: a service principal limited to the fixture's Namespace, holding the built-in
    /// `operator` Role on the whole Namespace, with a key limited to it (called between the
    /// operator and the administrator).
    ci: u16,
}

fn none(_: &Fixture) -> Option<Value> {
    None
}

fn rows() -> Vec<Row> {
    const R: [u16; 6] = [401, 403, 403, 200, 200, 200];
    const ADMIN_ONLY: fn(u16) -> [u16; 6] = |s| [401, 403, 403, 403, 403, s];
    vec![
        Row {
            op: "getInstallation",
            method: Method::GET,
            path: |_| "/installation".into(),
            body: none,
            expect: R,
            ci: 403,
        },
        Row {
            op: "getInstallationDeploymentInventory",
            method: Method::GET,
            path: |_| "/installation/deployment-inventory".into(),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "listInstallationRoles",
            method: Method::GET,
            path: |_| "/iam/roles".into(),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "listBackends",
            method: Method::GET,
            path: |_| "/backends".into(),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "listNamespaces",
            method: Method::GET,
            path: |_| "/namespaces".into(),
            body: none,
            expect: [401, 200, 200, 200, 200, 200],
            ci: 200,
        },
        Row {
            op: "createNamespace",
            method: Method::POST,
            path: |_| "/namespaces".into(),
            body: |_| Some(json!({"name": "created"})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getNamespace",
            method: Method::GET,
            path: |f| format!("/namespaces/{}", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "deleteNamespace",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}", f.spare_ns),
            body: none,
            expect: [401, 403, 202, 403, 403, 202],
            ci: 403,
        },
        Row {
            op: "createConfiguration",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/configurations", f.ns),
            body: |_| Some(json!({"kind": "agent", "values": {}})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getConfiguration",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/configurations/{}", f.ns, f.cfg),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updateConfiguration",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/configurations/{}", f.ns, f.cfg),
            body: |_| Some(json!({"values": {}})),
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteConfiguration",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/configurations/{}", f.ns, f.spare_cfg),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        Row {
            op: "listSecrets",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/secrets", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "createSecret",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/secrets", f.ns),
            body: |_| Some(json!({"name": "new", "value": "v"})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getSecret",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/secrets/{}", f.ns, f.sec),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updateSecret",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/secrets/{}", f.ns, f.sec),
            body: |_| Some(json!({"value": "v2"})),
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteSecret",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/secrets/{}", f.ns, f.sec),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        Row {
            op: "listPresets",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/presets", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "createPreset",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/presets", f.ns),
            body: |_| Some(json!({"name": "new", "template": {}})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getPreset",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/presets/{}", f.ns, f.pre),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updatePreset",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/presets/{}", f.ns, f.pre),
            body: |_| Some(json!({"name": "renamed"})),
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deletePreset",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/presets/{}", f.ns, f.pre),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        Row {
            op: "listCredentialSources",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/credential-sources", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "createCredentialSource",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/credential-sources", f.ns),
            body: |f| {
                Some(json!({"name": "another", "type": "anthropic",
                    "secrets": {"api_key": {"kind": "secret", "namespaceId": f.ns, "id": f.cs_sec}}}))
            },
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getCredentialSource",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/credential-sources/{}", f.ns, f.cs),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updateCredentialSource",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/credential-sources/{}", f.ns, f.cs),
            body: |f| {
                Some(
                    json!({"secrets": {"api_key": {"kind": "secret", "namespaceId": f.ns, "id": f.cs_sec}}}),
                )
            },
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        // Using a source needs `credential_source:operate` (the CI key's operator Role has
        // it); no model catalog is configured here, so an allowed caller learns that (503).
        Row {
            op: "listCredentialSourceModels",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/credential-sources/{}/models", f.ns, f.cs),
            body: none,
            expect: ADMIN_ONLY(503),
            ci: 503,
        },
        Row {
            op: "deleteCredentialSource",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/credential-sources/{}", f.ns, f.cs),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        Row {
            op: "listServiceAccounts",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/service-accounts", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "createServiceAccount",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/service-accounts", f.ns),
            body: |_| Some(json!({"name": "new"})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getServiceAccount",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/service-accounts/{}", f.ns, f.sa),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updateServiceAccountCredential",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/service-accounts/{}/credential", f.ns, f.sa),
            body: |_| {
                Some(
                    json!({"kind": "api_key", "secretRef": {"name": "provider-key", "key": "api-key"}}),
                )
            },
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        // Authorized before anything else: without a ServiceAccount Driver the administrator
        // then learns issuing is unavailable.
        Row {
            op: "createServiceAccountCredential",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/service-accounts/{}/credentials", f.ns, f.sa),
            body: |_| Some(json!({})),
            expect: ADMIN_ONLY(503),
            ci: 403,
        },
        Row {
            op: "deleteServiceAccount",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/service-accounts/{}", f.ns, f.sa),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        Row {
            op: "listAgents",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "createAgent",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents", f.ns),
            body: |f| Some(json!({"name": "new", "configurationId": f.cfg})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        // No model catalog is configured here: an allowed caller learns that (503).
        Row {
            op: "discoverAgentModels",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/models", f.ns),
            body: |_| {
                Some(json!({"provider": "openai", "authMethod": "api_key", "apiKey": "sk-test"}))
            },
            expect: ADMIN_ONLY(503),
            ci: 403,
        },
        // Provisioning needs Installation administration; the job in the fixture is the
        // administrator's, still queued, so a retry conflicts.
        Row {
            op: "provisionAgent",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/provision", f.ns),
            body: |_| {
                Some(
                    json!({"requestId": "req_00000000-0000-4000-8000-000000000002", "name": "provisioned-2",
                    "configuration": {"kind": "agent", "values": crate::common::document()},
                "harnessAuth": {"method": "runtime"}}),
                )
            },
            expect: ADMIN_ONLY(202),
            ci: 403,
        },
        Row {
            op: "getAgentProvisioning",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/provision/{}", f.ns, f.work),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "retryAgentProvisioning",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/provision/{}/retry", f.ns, f.work),
            body: none,
            expect: ADMIN_ONLY(409),
            ci: 403,
        },
        Row {
            op: "getAgent",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}", f.ns, f.agt),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "updateAgent",
            method: Method::PATCH,
            path: |f| format!("/namespaces/{}/agents/{}", f.ns, f.agt),
            body: |f| Some(json!({"configurationId": f.cfg})),
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteAgent",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/agents/{}", f.ns, f.agt),
            body: none,
            expect: ADMIN_ONLY(202),
            ci: 403,
        },
        Row {
            op: "deployAgent",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/{}/deploy", f.ns, f.agt),
            body: none,
            expect: [401, 403, 403, 403, 202, 202],
            ci: 202,
        },
        Row {
            op: "stopAgent",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/{}/stop", f.ns, f.agt),
            body: none,
            expect: [401, 403, 403, 403, 202, 202],
            ci: 202,
        },
        Row {
            op: "listAgentRevisions",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}/revisions", f.ns, f.agt),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "getAgentRevision",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}/revisions/{}", f.ns, f.agt, f.rev),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "redeployAgentRevision",
            method: Method::POST,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/revisions/{}/redeploy",
                    f.ns, f.agt, f.rev
                )
            },
            body: none,
            expect: [401, 403, 403, 403, 202, 202],
            ci: 202,
        },
        Row {
            op: "getAgentDeployment",
            method: Method::GET,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/deployments/{}",
                    f.ns, f.agt, f.rev
                )
            },
            body: none,
            expect: R,
            ci: 200,
        },
        // No Compute Driver is wired to this app: an authorized caller gets 503 for the
        // runtime, and diagnostics whose runtime checks are `unknown`.
        Row {
            op: "getAgentDeploymentRuntime",
            method: Method::GET,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/deployments/{}/runtime",
                    f.ns, f.agt, f.rev
                )
            },
            body: none,
            expect: [401, 403, 403, 403, 503, 503],
            ci: 503,
        },
        Row {
            op: "diagnoseAgentDeployment",
            method: Method::POST,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/deployments/{}/diagnostics",
                    f.ns, f.agt, f.rev
                )
            },
            body: none,
            expect: [401, 403, 403, 403, 200, 200],
            ci: 200,
        },
        // Log text needs read_logs (administer stands in): read or operate are not enough. No
        // Compute reads logs in this app, so the administrator gets 501 after the decision.
        Row {
            op: "getAgentDeploymentRuntimeLogs",
            method: Method::GET,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/deployments/{}/runtime/logs?source=gateway",
                    f.ns, f.agt, f.rev
                )
            },
            body: none,
            expect: [401, 403, 403, 403, 403, 501],
            ci: 501,
        },
        Row {
            op: "getAgentRuntime",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}/runtime", f.ns, f.agt),
            body: none,
            expect: R,
            ci: 200,
        },
        // No worker runs here, so the Agent has no active revision: an authorized caller gets
        // 503 DEPENDENCY_UNAVAILABLE, after the authorization decision.
        Row {
            op: "getAgentWorkspaceFile",
            method: Method::GET,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/workspace/files/USER.md",
                    f.ns, f.agt
                )
            },
            body: none,
            expect: [401, 403, 403, 503, 503, 503],
            ci: 503,
        },
        Row {
            op: "putAgentWorkspaceFile",
            method: Method::PUT,
            path: |f| {
                format!(
                    "/namespaces/{}/agents/{}/workspace/files/USER.md",
                    f.ns, f.agt
                )
            },
            body: |_| Some(json!({"content": "# USER.md\n"})),
            expect: [401, 403, 403, 403, 503, 503],
            ci: 503,
        },
        // Talking to an Agent needs use; administer stands in only for people, and every
        // caller here is a key: all are refused (the chat tests cover who may).
        Row {
            op: "chatWithAgent",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/agents/{}/chat", f.ns, f.agt),
            body: |_| Some(json!({"message": "hello"})),
            expect: [401, 403, 403, 403, 403, 403],
            ci: 403,
        },
        // The Control UI is for people: every key is refused, whatever it holds (the
        // native-admin tests cover who may).
        Row {
            op: "getAgentNativeAdmin",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}/native-admin", f.ns, f.agt),
            body: none,
            expect: [401, 403, 403, 403, 403, 403],
            ci: 403,
        },
        // Installation administrators only; the Agent here has no active revision (no worker
        // runs), so the administrator gets 503 after the decision.
        Row {
            op: "listAgentRuntimeRoles",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/agents/{}/runtime-roles", f.ns, f.agt),
            body: none,
            expect: ADMIN_ONLY(503),
            ci: 403,
        },
        Row {
            op: "getWorkspaceDefaults",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/workspace-defaults", f.ns),
            body: none,
            expect: [401, 403, 403, 403, 403, 200],
            ci: 403,
        },
        // occ's own question route: anyone who may read the Namespace may ask
        Row {
            op: "getNamespacePermissions",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/iam/permissions", f.ns),
            body: none,
            expect: R,
            ci: 200,
        },
        Row {
            op: "listIAMRoles",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/iam/roles", f.ns),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "createIAMRole",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/iam/roles", f.ns),
            body: |_| Some(json!({"permissions": [{"action": "read", "resourceKind": "secret"}]})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getIAMRole",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/iam/roles/{}", f.ns, f.role),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteIAMRole",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/iam/roles/{}", f.ns, f.role),
            body: none,
            expect: ADMIN_ONLY(409),
            ci: 403,
        },
        Row {
            op: "listIAMAccessBindings",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/iam/access-bindings", f.ns),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "createIAMAccessBinding",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/iam/access-bindings", f.ns),
            body: |f| {
                Some(
                    json!({"subjectKind": "identity", "subjectId": f.target_sp, "roleId": f.role, "resourceKind": "agent", "resourceId": f.agt}),
                )
            },
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "getIAMAccessBinding",
            method: Method::GET,
            path: |f| format!("/namespaces/{}/iam/access-bindings/{}", f.ns, f.binding),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteIAMAccessBinding",
            method: Method::DELETE,
            path: |f| format!("/namespaces/{}/iam/access-bindings/{}", f.ns, f.binding),
            body: none,
            expect: ADMIN_ONLY(204),
            ci: 403,
        },
        // The fixture's binding is a service principal's, which holds no runtime role: the
        // administrator passes authorization and is told so (409).
        Row {
            op: "updateIAMRuntimeRole",
            method: Method::PATCH,
            path: |f| {
                format!(
                    "/namespaces/{}/iam/access-bindings/{}/runtime-role",
                    f.ns, f.binding
                )
            },
            body: |_| Some(json!({"runtimeRole": "platform-administrator"})),
            expect: ADMIN_ONLY(409),
            ci: 403,
        },
        Row {
            op: "createServiceKey",
            method: Method::POST,
            path: |_| "/api/auth/service-keys".into(),
            body: |f| Some(json!({"servicePrincipalId": f.target_sp, "name": "k"})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "revokeServiceKey",
            method: Method::DELETE,
            path: |f| format!("/api/auth/service-keys/{}", f.key_id),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        // A Role on the whole Namespace (occ extension): Installation administrators whose own
        // grants cover it.
        Row {
            op: "createIAMNamespaceAccessBinding",
            method: Method::POST,
            path: |f| format!("/namespaces/{}/iam/namespace-bindings", f.ns),
            body: |f| {
                let viewer = occ_core::iam::BuiltinRole::Viewer.id(&f.ns.parse().unwrap());
                Some(json!({"subjectKind": "identity", "subjectId": f.target_sp, "roleId": viewer}))
            },
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        // Service principals (occ extension): Installation administrators only.
        Row {
            op: "createServicePrincipal",
            method: Method::POST,
            path: |_| "/api/auth/service-principals".into(),
            body: |f| Some(json!({"name": "ci", "namespaceId": f.ns})),
            expect: ADMIN_ONLY(201),
            ci: 403,
        },
        Row {
            op: "listServicePrincipals",
            method: Method::GET,
            path: |_| "/api/auth/service-principals".into(),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "getServicePrincipal",
            method: Method::GET,
            path: |f| format!("/api/auth/service-principals/{}", f.doomed_sp),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "disableServicePrincipal",
            method: Method::POST,
            path: |f| format!("/api/auth/service-principals/{}/disable", f.doomed_sp),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "enableServicePrincipal",
            method: Method::POST,
            path: |f| format!("/api/auth/service-principals/{}/enable", f.doomed_sp),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        Row {
            op: "deleteServicePrincipal",
            method: Method::DELETE,
            path: |f| format!("/api/auth/service-principals/{}", f.doomed_sp),
            body: none,
            expect: ADMIN_ONLY(200),
            ci: 403,
        },
        // Session-only routes: service keys are not sessions.
        Row {
            op: "createAuthAccount",
            method: Method::POST,
            path: |_| "/api/auth/accounts".into(),
            body: |_| Some(json!({"email": "a@b.c", "password": "long enough password"})),
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "listAuthAccounts",
            method: Method::GET,
            path: |_| "/api/auth/accounts".into(),
            body: none,
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "getAuthAccount",
            method: Method::GET,
            path: |_| "/api/auth/accounts/usr_someone".into(),
            body: none,
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "disableAuthAccount",
            method: Method::POST,
            path: |_| "/api/auth/accounts/usr_someone/disable".into(),
            body: |_| Some(json!({"expectedVersion": 1})),
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "enableAuthAccount",
            method: Method::POST,
            path: |_| "/api/auth/accounts/usr_someone/enable".into(),
            body: |_| Some(json!({"expectedVersion": 1})),
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "revokeAuthAccountSessions",
            method: Method::POST,
            path: |_| "/api/auth/accounts/usr_someone/revoke".into(),
            body: |_| Some(json!({"expectedVersion": 1})),
            expect: [401; 6],
            ci: 401,
        },
        Row {
            op: "signOut",
            method: Method::POST,
            path: |_| "/api/auth/sign-out".into(),
            body: none,
            expect: [401; 6],
            ci: 401,
        },
        // Public routes.
        Row {
            op: "getAuthProviders",
            method: Method::GET,
            path: |_| "/api/auth/providers".into(),
            body: none,
            expect: [200; 6],
            ci: 200,
        },
        Row {
            op: "getAuthSession",
            method: Method::GET,
            path: |_| "/api/auth/session".into(),
            body: none,
            expect: [200; 6],
            ci: 200,
        },
        Row {
            op: "signInEmail",
            method: Method::POST,
            path: |_| "/api/auth/sign-in/email".into(),
            body: |_| {
                Some(json!({"email": "nobody@example.com", "password": "long enough password"}))
            },
            expect: [401; 6],
            ci: 401,
        },
    ]
}

#[tokio::test]
async fn every_operation_has_a_row() {
    let app = TestApp::new().await;
    let doc = expect(
        app.call(Method::GET, "/openapi.json", &Credential::Anonymous, None)
            .await,
        StatusCode::OK,
    )
    .body;
    let served: BTreeSet<String> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str().map(str::to_owned))
        .collect();
    let covered: BTreeSet<String> = rows().iter().map(|r| r.op.to_owned()).collect();
    let missing: Vec<_> = served.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "operations without an authorization row: {missing:?}"
    );
    let stale: Vec<_> = covered.difference(&served).collect();
    assert!(
        stale.is_empty(),
        "rows for operations the router does not serve: {stale:?}"
    );
}

#[tokio::test]
async fn matrix() {
    let names = [
        "anonymous",
        "no grant",
        "other-Namespace key",
        "reader",
        "operator",
        "admin",
    ];
    let mut failures = Vec::new();
    for row in rows() {
        let f = fixture().await;
        // In calling order: the first five, the CI key, the administrator last.
        let mut order: Vec<(&str, &Credential, u16)> = (0..5)
            .map(|i| (names[i], &f.callers[i], row.expect[i]))
            .collect();
        order.push(("CI key", &f.ci, row.ci));
        order.push((names[5], &f.callers[5], row.expect[5]));
        for (name, who, expected) in order {
            let reply = f
                .app
                .call(row.method.clone(), &(row.path)(&f), who, (row.body)(&f))
                .await;
            if reply.status.as_u16() != expected {
                failures.push(format!(
                    "{} as {}: expected {}, got {} {}",
                    row.op,
                    name,
                    expected,
                    reply.status.as_u16(),
                    reply.body
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "authorization matrix mismatches:\n{}",
        failures.join("\n")
    );
}
