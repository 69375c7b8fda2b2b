//! Presets beyond the table-driven rows of `resources.rs`: every Namespace starts with the
//! built-in Presets; they are ordinary Presets (editable, deletable, readable only with
//! `preset:read`); a Namespace holding them as occ wrote them can be deleted (they go with it),
//! while one somebody changed, or any other Preset, keeps it with `NAMESPACE_NOT_EMPTY` naming
//! it; and the audit records never hold a template.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::preset::BuiltinPreset;
use occ_store::audit::AuditFilter;
use occ_testkit::app::TestApp;
use serde_json::{Value, json};

use crate::common::{Who, expect};

async fn presets(app: &TestApp, ns: &str, who: &Who) -> Vec<Value> {
    expect(
        app.call(Method::GET, &format!("/namespaces/{ns}/presets"), who, None)
            .await,
        StatusCode::OK,
    )
    .data()
    .as_array()
    .unwrap()
    .clone()
}

fn names(list: &[Value]) -> Vec<&str> {
    list.iter().map(|p| p["name"].as_str().unwrap()).collect()
}

async fn new_namespace(app: &TestApp, name: &str) -> String {
    let ns = expect(
        app.call(
            Method::POST,
            "/namespaces",
            &app.admin(),
            Some(json!({"name": name})),
        )
        .await,
        StatusCode::CREATED,
    )
    .created_id();
    app.set_namespace_status(
        &ns.parse().unwrap(),
        occ_core::resource::NamespaceStatus::Ready,
    )
    .await;
    ns
}

#[tokio::test]
async fn every_namespace_starts_with_the_built_in_presets() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let builtins: Vec<String> = BuiltinPreset::ALL
        .iter()
        .map(|b| b.name().to_string())
        .collect();
    // The bootstrap Namespace and a new one.
    for ns in [
        app.default_ns.to_string(),
        new_namespace(&app, "team-b").await,
    ] {
        let list = presets(&app, &ns, &admin).await;
        assert_eq!(names(&list), builtins, "{ns}");
        let codex = &list[1];
        assert_eq!(codex["template"]["agent"]["executionMode"], "dedicated");
        assert_eq!(
            codex["template"]["variables"]["modelSecret"]["type"],
            "password"
        );
        // Secret references are completed with their Namespace.
        assert_eq!(
            list[0]["template"]["configuration"]["secretBindings"]["MODEL_API_KEY"]["source"]["namespaceId"],
            json!(ns)
        );
    }
    // Each built-in passes the checks of an ordinary Preset (its document, each default filled
    // in, against the pinned runtime's schema): an administrator could have written it.
    for builtin in BuiltinPreset::ALL {
        expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{}/presets", app.default_ns),
                &admin,
                Some(json!({"name": format!("copy of {}", builtin.name()), "template": builtin.template()})),
            )
            .await,
            StatusCode::CREATED,
        );
    }
    // Reading them needs preset:read, like any Preset.
    let (_, no_preset_read) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Namespace)],
            None,
            None,
            None,
        )
        .await;
    let ns = app.default_ns.to_string();
    assert!(
        presets(&app, &ns, &Who::Key(no_preset_read))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn unchanged_built_ins_go_with_their_namespace_and_changed_ones_keep_it() {
    let app = TestApp::new().await;
    let admin = app.admin();
    // Nothing but unchanged built-ins: the Namespace is deleted, and they with it.
    let plain = new_namespace(&app, "plain").await;
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{plain}"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    let mut tx = app.store.begin_read().await.unwrap();
    assert!(
        tx.preset_list(&plain.parse().unwrap())
            .await
            .unwrap()
            .is_empty()
    );
    drop(tx);

    // An edited built-in is somebody's Preset now.
    let edited = new_namespace(&app, "edited").await;
    let list = presets(&app, &edited, &admin).await;
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let mut template = list[0]["template"].clone();
    template["agent"]["name"] = json!("support-{{ vars.name }}");
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{edited}/presets/{id}"),
            &admin,
            Some(json!({"template": template})),
        )
        .await,
        StatusCode::OK,
    );
    let refused = expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{edited}"),
            &admin,
            None,
        )
        .await,
        StatusCode::CONFLICT,
    );
    assert_eq!(refused.code(), "NAMESPACE_NOT_EMPTY");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&id), "{message}");
    let untouched = list[1]["id"].as_str().unwrap();
    assert!(!message.contains(untouched), "{message}");
    // Still both: a refused deletion removes nothing.
    assert_eq!(presets(&app, &edited, &admin).await.len(), 2);
    // A renamed copy with the original template again is the user's too.
    expect(
        app.call(
            Method::PATCH,
            &format!("/namespaces/{edited}/presets/{id}"),
            &admin,
            Some(json!({"name": "Ours", "template": list[0]["template"]})),
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{edited}"),
            &admin,
            None
        )
        .await
        .status,
        StatusCode::CONFLICT
    );
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{edited}/presets/{id}"),
            &admin,
            None,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{edited}"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );

    // No audit record holds a template.
    let mut tx = app.store.begin_read().await.unwrap();
    let audit = serde_json::to_string(
        &tx.audit_list(&AuditFilter::default())
            .await
            .unwrap()
            .iter()
            .map(|e| json!({"action": e.action, "details": e.details}))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(audit.contains("openclaw.presets.update"));
    assert!(!audit.contains("vars."), "{audit}");
}
