//! The Installation's own views for its administrators: the deployment inventory and the
//! configured Backends. Real router, controller and SQLite.

use http::{Method, StatusCode};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_testkit::app::{Credential, TestApp};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect};

fn namespace<'a>(inventory: &'a Value, ns: &str) -> &'a Value {
    inventory["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == ns)
        .unwrap_or_else(|| panic!("{ns} in {inventory}"))
}

#[tokio::test]
async fn the_inventory_lists_what_the_caller_may_read_with_each_agents_deployment_state() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let idle = agent(&app, &ns, &cfg, "idle", &admin).await;
    let deploying = agent(&app, &ns, &cfg, "deploying", &admin).await;
    expect(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{deploying}/deploy"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    let inventory = expect(
        app.call(
            Method::GET,
            "/installation/deployment-inventory",
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    );
    let installation = expect(
        app.call(Method::GET, "/installation", &admin, None).await,
        StatusCode::OK,
    );
    assert_eq!(
        inventory.data()["installationId"],
        installation.data()["id"]
    );
    let default = namespace(inventory.data(), &ns);
    assert_eq!(default["status"], "ready");
    assert_eq!(
        default["agents"],
        json!([
            {"id": idle, "status": "active", "desiredRuntimeState": "stopped", "executionMode": "embedded",
             "deploymentInProgress": false},
            {"id": deploying, "status": "active", "desiredRuntimeState": "running", "executionMode": "embedded",
             "deploymentInProgress": true},
        ])
    );

    // An administrator of the Installation who may read one Agent sees that Agent only; the
    // Namespace itself needs `namespace:read`.
    let (_, narrow) = app
        .principal_with(
            &[Permission::new(
                Action::Administer,
                ResourceKind::Installation,
            )],
            None,
            None,
            None,
        )
        .await;
    let narrow = Credential::Key(narrow);
    let seen = expect(
        app.call(
            Method::GET,
            "/installation/deployment-inventory",
            &narrow,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(seen.data()["namespaces"], json!([]));
    let (principal, reader) = app
        .principal_with(
            &[
                Permission::new(Action::Administer, ResourceKind::Installation),
                Permission::new(Action::Read, ResourceKind::Namespace),
            ],
            None,
            None,
            None,
        )
        .await;
    app.grant(
        &principal,
        &[Permission::new(Action::Read, ResourceKind::Agent)],
        &app.default_ns,
        Some((ResourceKind::Agent, idle.clone())),
    )
    .await;
    let seen = expect(
        app.call(
            Method::GET,
            "/installation/deployment-inventory",
            &Credential::Key(reader),
            None,
        )
        .await,
        StatusCode::OK,
    );
    let agents: Vec<&Value> = namespace(seen.data(), &ns)["agents"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["id"], idle.as_str());
}

#[tokio::test]
async fn backends_are_listed_without_credentials() {
    let app = TestApp::new().await;
    let reply = expect(
        app.call(Method::GET, "/backends", &app.admin(), None).await,
        StatusCode::OK,
    );
    assert_eq!(
        reply.data(),
        &json!([{"id": "chatgpt-main", "type": "chatgpt"}])
    );
    let (_, reader) = app
        .principal_with(
            &[Permission::new(Action::Read, ResourceKind::Installation)],
            None,
            None,
            None,
        )
        .await;
    expect(
        app.call(Method::GET, "/backends", &Credential::Key(reader), None)
            .await,
        StatusCode::FORBIDDEN,
    );
}
