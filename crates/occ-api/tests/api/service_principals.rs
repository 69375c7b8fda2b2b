//! Automation identities and access for a team in one step (occ extensions): non-Agent service
//! principals under `/api/auth/service-principals`, Namespace-wide AccessBindings
//! (`scope: namespace`) with the coverage rule, and the built-in viewer / operator / admin
//! Roles every Namespace has. Real router, controller and SQLite store.

use http::{Method, StatusCode};
use occ_core::NamespaceId;
use occ_core::audit::METADATA_KEY;
use occ_core::authz::{Action, Permission, ResourceKind, administrator_permissions};
use occ_core::iam::BuiltinRole;
use occ_core::resource::NamespaceStatus;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect};

async fn create_principal(app: &TestApp, who: &Credential, body: Value) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        "/api/auth/service-principals",
        who,
        Some(body),
    )
    .await
}

async fn issue_key(app: &TestApp, principal: &str, ns: Option<&str>) -> Credential {
    let mut body = json!({"servicePrincipalId": principal, "name": "ci"});
    if let Some(ns) = ns {
        body["namespaceId"] = json!(ns);
    }
    let reply = expect(
        app.call(
            Method::POST,
            "/api/auth/service-keys",
            &app.admin(),
            Some(body),
        )
        .await,
        StatusCode::CREATED,
    );
    Credential::Key(reply.data()["key"].as_str().unwrap().to_owned())
}

async fn bind_namespace_wide(
    app: &TestApp,
    who: &Credential,
    ns: &str,
    subject: &str,
    role: &str,
) -> occ_testkit::app::Reply {
    app.call(
        Method::POST,
        &format!("/namespaces/{ns}/iam/namespace-bindings"),
        who,
        Some(json!({"subjectKind": "identity", "subjectId": subject, "roleId": role})),
    )
    .await
}

/// `(action, details)` of the audit records whose action starts with `prefix` (records of one
/// millisecond come in any order).
async fn audited(app: &TestApp, prefix: &str) -> Vec<(String, Value)> {
    let mut tx = app.store.begin_read().await.unwrap();
    tx.audit_list(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action.starts_with(prefix))
        .map(|e| (e.action, Value::Object(e.details)))
        .collect()
}

#[tokio::test]
async fn a_ci_key_with_the_built_in_operator_role_deploys_in_its_namespace_and_nowhere_else() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let ci = expect(
        create_principal(&app, &admin, json!({"name": "ci", "namespaceId": ns})).await,
        StatusCode::CREATED,
    );
    let ci = ci.data()["id"].as_str().unwrap().to_owned();
    let operator = BuiltinRole::Operator.id(&app.default_ns);
    let binding = expect(
        bind_namespace_wide(&app, &admin, &ns, &ci, operator.as_str()).await,
        StatusCode::CREATED,
    );
    assert_eq!(binding.data()["roleId"], operator.as_str());
    assert!(binding.data().get("resourceKind").is_none());
    assert!(binding.data().get("resourceId").is_none());
    let key = issue_key(&app, &ci, Some(&ns)).await;

    // An Agent created after the binding is covered by it.
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "built-later", &admin).await;
    let at = |path: &str| format!("/namespaces/{ns}{path}");
    for path in [
        at(&format!("/agents/{agt}")),
        at("/agents"),
        at(&format!("/configurations/{cfg}")),
        format!("/namespaces/{ns}"),
    ] {
        expect(
            app.call(Method::GET, &path, &key, None).await,
            StatusCode::OK,
        );
    }
    let listed = expect(
        app.call(Method::GET, &at("/agents"), &key, None).await,
        StatusCode::OK,
    );
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    expect(
        app.call(
            Method::POST,
            &at(&format!("/agents/{agt}/deploy")),
            &key,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    // What the operator Role does not grant.
    expect(
        app.call(
            Method::POST,
            &at("/configurations"),
            &key,
            Some(json!({"kind": "agent", "values": crate::common::document()})),
        )
        .await,
        StatusCode::FORBIDDEN,
    );
    expect(
        app.call(Method::DELETE, &at(&format!("/agents/{agt}")), &key, None)
            .await,
        StatusCode::FORBIDDEN,
    );
    // Nothing outside its Namespace.
    let other = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "other"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let other_ns: NamespaceId = other.data()["id"].as_str().unwrap().parse().unwrap();
    app.set_namespace_status(&other_ns, NamespaceStatus::Ready)
        .await;
    let other_cfg = configuration(&app, other_ns.as_str(), &admin).await;
    let other_agt = agent(&app, other_ns.as_str(), &other_cfg, "elsewhere", &admin).await;
    for (method, path) in [
        (
            Method::GET,
            format!("/namespaces/{other_ns}/agents/{other_agt}"),
        ),
        (Method::GET, format!("/namespaces/{other_ns}/agents")),
        (
            Method::POST,
            format!("/namespaces/{other_ns}/agents/{other_agt}/deploy"),
        ),
        (Method::GET, "/installation".to_owned()),
        (Method::GET, "/api/auth/service-principals".to_owned()),
    ] {
        expect(
            app.call(method, &path, &key, None).await,
            StatusCode::FORBIDDEN,
        );
    }
    // The binding is audited as Namespace-wide; deleting it takes the access away at once.
    let created = audited(&app, "openclaw.iam.access_bindings.create").await;
    let (_, details) = created
        .iter()
        .find(|(_, d)| d["bindingId"] == binding.data()["id"])
        .expect("the binding's record");
    assert_eq!(details["scope"], "namespace");
    assert_eq!(details["subjectId"], ci.as_str());
    let binding_id = binding.data()["id"].as_str().unwrap();
    expect(
        app.call(
            Method::DELETE,
            &at(&format!("/iam/access-bindings/{binding_id}")),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    expect(
        app.call(Method::GET, &at(&format!("/agents/{agt}")), &key, None)
            .await,
        StatusCode::FORBIDDEN,
    );
}

#[tokio::test]
async fn service_principals_are_created_listed_disabled_enabled_and_deleted() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();

    // Validation: each problem names its field, nothing is created.
    for (body, path) in [
        (json!({}), "/name"),
        (json!({"name": "x".repeat(65)}), "/name"),
        (json!({"name": " padded"}), "/name"),
        (
            json!({"name": "ok", "namespaceId": "ns_nope"}),
            "/namespaceId",
        ),
        (
            json!({"name": "ok", "namespaceId": NamespaceId::generate().to_string()}),
            "/namespaceId",
        ),
        (json!({"name": "ok", "extra": 1}), "/extra"),
    ] {
        let reply = expect(
            create_principal(&app, &admin, body.clone()).await,
            StatusCode::BAD_REQUEST,
        );
        assert_eq!(reply.code(), "INVALID_REQUEST", "{body}");
        assert!(
            reply.body.to_string().contains(path),
            "{body}: {}",
            reply.body
        );
    }

    let made = expect(
        create_principal(&app, &admin, json!({"name": "nightly"})).await,
        StatusCode::CREATED,
    );
    let sp = made.data()["id"].as_str().unwrap().to_owned();
    assert!(sp.starts_with("spn_"));
    assert_eq!(made.data()["name"], "nightly");
    assert_eq!(made.data()["disabled"], false);
    assert!(made.data().get("namespaceId").is_none());
    let reply = expect(
        create_principal(&app, &admin, json!({"name": "nightly", "namespaceId": ns})).await,
        StatusCode::CONFLICT,
    );
    assert_eq!(reply.code(), "RESOURCE_CONFLICT");
    let scoped = expect(
        create_principal(&app, &admin, json!({"name": "scoped", "namespaceId": ns})).await,
        StatusCode::CREATED,
    );
    assert_eq!(scoped.data()["namespaceId"], ns.as_str());

    let all = expect(
        app.call(Method::GET, "/api/auth/service-principals", &admin, None)
            .await,
        StatusCode::OK,
    );
    let names: Vec<&str> = all
        .data()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["installation-administrator", "nightly", "scoped"]);
    let in_ns = expect(
        app.call(
            Method::GET,
            &format!("/api/auth/service-principals?namespaceId={ns}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(in_ns.data().as_array().unwrap().len(), 1);
    assert_eq!(in_ns.data()[0]["name"], "scoped");
    expect(
        app.call(
            Method::GET,
            "/api/auth/service-principals?namespaceId=nope",
            &admin,
            None,
        )
        .await,
        StatusCode::BAD_REQUEST,
    );
    // Agent principals and unknown ids are not service principals of this API.
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "a", &admin).await;
    for id in [format!("service-agent-{agt}"), "spn_unknown".to_owned()] {
        expect(
            app.call(
                Method::GET,
                &format!("/api/auth/service-principals/{id}"),
                &admin,
                None,
            )
            .await,
            StatusCode::NOT_FOUND,
        );
    }

    // A key of the principal works while it is enabled.
    app.grant_installation(
        &sp.parse().unwrap(),
        &[Permission::new(Action::Read, ResourceKind::Installation)],
    )
    .await;
    let key = issue_key(&app, &sp, None).await;
    expect(
        app.call(Method::GET, "/installation", &key, None).await,
        StatusCode::OK,
    );
    let path = format!("/api/auth/service-principals/{sp}");
    let disabled = expect(
        app.call(Method::POST, &format!("{path}/disable"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(disabled.data()["disabled"], true);
    assert!(disabled.data()["disabledAt"].is_string());
    expect(
        app.call(Method::GET, "/installation", &key, None).await,
        StatusCode::UNAUTHORIZED,
    );
    let refused = expect(
        app.call(
            Method::POST,
            "/api/auth/service-keys",
            &admin,
            Some(json!({"servicePrincipalId": sp, "name": "again"})),
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert!(refused.body.to_string().contains("disabled"));
    // Disabling twice changes (and records) nothing.
    expect(
        app.call(Method::POST, &format!("{path}/disable"), &admin, None)
            .await,
        StatusCode::OK,
    );
    let enabled = expect(
        app.call(Method::POST, &format!("{path}/enable"), &admin, None)
            .await,
        StatusCode::OK,
    );
    assert_eq!(enabled.data()["disabled"], false);
    assert!(enabled.data().get("disabledAt").is_none());
    expect(
        app.call(Method::GET, "/installation", &key, None).await,
        StatusCode::OK,
    );
    expect(
        app.call(
            Method::POST,
            &format!("{path}/enable"),
            &admin,
            Some(json!({})),
        )
        .await,
        StatusCode::BAD_REQUEST,
    );

    // Nobody disables or deletes the principal it authenticates as.
    let own = all.data()[0]["id"].as_str().unwrap().to_owned();
    for (method, suffix) in [(Method::POST, "/disable"), (Method::DELETE, "")] {
        expect(
            app.call(
                method,
                &format!("/api/auth/service-principals/{own}{suffix}"),
                &admin,
                None,
            )
            .await,
            StatusCode::CONFLICT,
        );
    }

    // Deleting it deletes its keys and bindings.
    let deleted = expect(
        app.call(Method::DELETE, &path, &admin, None).await,
        StatusCode::OK,
    );
    assert_eq!(deleted.data(), &json!({"id": sp, "deleted": true}));
    expect(
        app.call(Method::GET, "/installation", &key, None).await,
        StatusCode::UNAUTHORIZED,
    );
    expect(
        app.call(Method::GET, &path, &admin, None).await,
        StatusCode::NOT_FOUND,
    );
    expect(
        app.call(Method::DELETE, &path, &admin, None).await,
        StatusCode::NOT_FOUND,
    );

    let mut actions: Vec<String> = audited(&app, "openclaw.auth.service-principals.")
        .await
        .into_iter()
        .map(|(action, details)| {
            if action != "openclaw.auth.service-principals.create" {
                assert_eq!(details["servicePrincipalId"], sp.as_str());
            }
            action
                .trim_start_matches("openclaw.auth.service-principals.")
                .to_owned()
        })
        .collect();
    actions.sort();
    assert_eq!(actions, ["create", "create", "delete", "disable", "enable"]);
}

#[tokio::test]
async fn only_a_caller_holding_a_principals_grants_may_disable_or_delete_it() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let powerful = expect(
        create_principal(&app, &admin, json!({"name": "powerful"})).await,
        StatusCode::CREATED,
    );
    let powerful = powerful.data()["id"].as_str().unwrap().to_owned();
    app.grant_installation(&powerful.parse().unwrap(), &administrator_permissions())
        .await;
    // Administers the Installation, but holds none of the other grants.
    let (_, lesser) = app
        .principal_with(
            &[
                Permission::new(Action::Administer, ResourceKind::Installation),
                Permission::new(Action::Read, ResourceKind::Installation),
            ],
            None,
            None,
            None,
        )
        .await;
    let lesser = Credential::Key(lesser);
    let path = format!("/api/auth/service-principals/{powerful}");
    expect(
        app.call(Method::GET, &path, &lesser, None).await,
        StatusCode::OK,
    );
    for (method, suffix) in [(Method::POST, "/disable"), (Method::DELETE, "")] {
        let reply = expect(
            app.call(method, &format!("{path}{suffix}"), &lesser, None)
                .await,
            StatusCode::FORBIDDEN,
        );
        assert_eq!(reply.code(), "FORBIDDEN");
    }
    let denials: Vec<Value> = audited(&app, "openclaw.auth.service-principals.")
        .await
        .into_iter()
        .filter(|(action, _)| !action.ends_with(".create"))
        .map(|(_, d)| d)
        .collect();
    assert_eq!(denials.len(), 2, "{denials:?}");
    for details in &denials {
        assert_eq!(details[METADATA_KEY]["decisionReason"], "coverage");
        assert_eq!(details["servicePrincipalId"], powerful.as_str());
    }
    expect(
        app.call(Method::POST, &format!("{path}/disable"), &admin, None)
            .await,
        StatusCode::OK,
    );
}

#[tokio::test]
async fn namespace_wide_bindings_are_validated_and_need_the_callers_coverage() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let bindings = format!("/namespaces/{ns}/iam/access-bindings");
    let namespace_bindings = format!("/namespaces/{ns}/iam/namespace-bindings");
    let (subject, subject_key) = app.principal_with(&[], None, None, None).await;
    let viewer = BuiltinRole::Viewer.id(&app.default_ns);
    let base = json!({"subjectKind": "identity", "subjectId": subject, "roleId": viewer});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (body, path) in [
        (
            json!({"subjectKind": "identity", "subjectId": subject}),
            "/roleId",
        ),
        (
            with(json!({"resourceKind": "agent", "resourceId": "agt_x"})),
            "/resourceKind",
        ),
        (with(json!({"runtimeRole": "operator"})), "/runtimeRole"),
        (with(json!({"subjectKind": "group"})), "/subjectKind"),
        (with(json!({"roleId": "role_nope"})), "/roleId"),
        (with(json!({"subjectId": "spn_nobody"})), "/subjectId"),
    ] {
        let reply = expect(
            app.call(
                Method::POST,
                &namespace_bindings,
                &admin,
                Some(body.clone()),
            )
            .await,
            StatusCode::BAD_REQUEST,
        );
        assert!(
            reply.body.to_string().contains(path),
            "{body}: {}",
            reply.body
        );
    }
    // A Role of another Namespace is not this Namespace's.
    let other = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "other"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let other_ns: NamespaceId = other.data()["id"].as_str().unwrap().parse().unwrap();
    let foreign = BuiltinRole::Viewer.id(&other_ns);
    expect(
        bind_namespace_wide(&app, &admin, &ns, subject.as_str(), foreign.as_str()).await,
        StatusCode::BAD_REQUEST,
    );

    // The viewer Role on the whole Namespace: every resource, present and future, readable.
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "seen", &admin).await;
    let subject_key = Credential::Key(subject_key);
    let agent_path = format!("/namespaces/{ns}/agents/{agt}");
    expect(
        app.call(Method::GET, &agent_path, &subject_key, None).await,
        StatusCode::FORBIDDEN,
    );
    let made = expect(
        app.call(
            Method::POST,
            &namespace_bindings,
            &admin,
            Some(base.clone()),
        )
        .await,
        StatusCode::CREATED,
    );
    expect(
        app.call(Method::GET, &agent_path, &subject_key, None).await,
        StatusCode::OK,
    );
    expect(
        app.call(
            Method::PATCH,
            &agent_path,
            &subject_key,
            Some(json!({"configurationId": cfg})),
        )
        .await,
        StatusCode::FORBIDDEN,
    );
    let listed = expect(
        app.call(Method::GET, &bindings, &admin, None).await,
        StatusCode::OK,
    );
    assert!(
        listed
            .data()
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["id"] == made.data()["id"])
    );

    // A Role granting `use` on the whole Namespace: the bootstrap administrator does not hold
    // `use`. Its key is refused (and the refusal recorded); a person who administers Agents
    // talks to them already, so the administrator's session may hand it out.
    let talk = expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/roles"),
            &admin,
            Some(json!({"name": "talk", "permissions": [{"action": "use", "resourceKind": "agent"}]})),
        )
        .await,
        StatusCode::CREATED,
    );
    let talk = talk.data()["id"].as_str().unwrap().to_owned();
    let reply = expect(
        bind_namespace_wide(&app, &admin, &ns, subject.as_str(), &talk).await,
        StatusCode::FORBIDDEN,
    );
    assert!(
        reply.body.to_string().contains("agent:use"),
        "{}",
        reply.body
    );
    let denials: Vec<Value> = audited(&app, "openclaw.iam.access_bindings.create")
        .await
        .into_iter()
        .filter(|(_, d)| d[METADATA_KEY]["decisionReason"] == "coverage")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0]["roleId"], talk.as_str());
    let session = app.admin_session().await;
    expect(
        bind_namespace_wide(&app, &session, &ns, subject.as_str(), &talk).await,
        StatusCode::CREATED,
    );
    // A caller who administers the Installation but holds no grant in the Namespace hands out
    // nothing there.
    let (_, narrow) = app
        .principal_with(
            &[
                Permission::new(Action::Administer, ResourceKind::Installation),
                Permission::new(Action::Read, ResourceKind::Namespace),
                Permission::new(Action::Read, ResourceKind::Agent),
            ],
            None,
            None,
            None,
        )
        .await;
    expect(
        bind_namespace_wide(
            &app,
            &Credential::Key(narrow),
            &ns,
            subject.as_str(),
            viewer.as_str(),
        )
        .await,
        StatusCode::FORBIDDEN,
    );
}

#[tokio::test]
async fn every_namespace_has_the_built_in_roles() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let created = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "fresh"})),
        )
        .await,
        StatusCode::CREATED,
    );
    let fresh: NamespaceId = created.data()["id"].as_str().unwrap().parse().unwrap();
    for ns in [app.default_ns.clone(), fresh.clone()] {
        let roles = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/iam/roles"),
                &admin,
                None,
            )
            .await,
            StatusCode::OK,
        );
        for role in BuiltinRole::ALL {
            let found = roles
                .data()
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == role.id(&ns).as_str())
                .unwrap_or_else(|| panic!("{role:?} in {ns}: {}", roles.body));
            assert_eq!(found["name"], role.name());
            let granted: Vec<Permission> =
                serde_json::from_value(found["permissions"].clone()).unwrap();
            assert_eq!(granted, role.permissions());
        }
    }
    // Ordinary Roles: an administrator may delete one no binding uses.
    expect(
        app.call(
            Method::DELETE,
            &format!(
                "/namespaces/{fresh}/iam/roles/{}",
                BuiltinRole::Viewer.id(&fresh)
            ),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
}
