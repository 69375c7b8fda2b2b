//! The grants the CLI hands out in one step (`occ secret grant`, `occ agent grant-use`,
//! `occ agent grant-control-ui`): a Role with exactly the needed permission, reused when one
//! exists, bound on exactly one resource.

use anyhow::anyhow;
use reqwest::Method;
use serde_json::{Value, json};

use super::client::Client;

/// The name of the Role `occ secret grant` creates when the Namespace has none that grants
/// exactly `operate` on Secrets.
pub(super) const SECRET_USER_ROLE: &str = "secret-user";

/// Binds a Role with exactly `operate` on Secrets to Agent `agent`'s service principal on
/// Secret `secret` (reusing such a Role and an existing identical binding); returns the binding.
pub(super) async fn grant_secret(c: &Client, secret: &str, agent: &str) -> anyhow::Result<Value> {
    let ns = c.ns()?;
    // Both must exist (a clear 404 otherwise); the principal is the Agent's own.
    c.call(
        Method::GET,
        &format!("/namespaces/{ns}/secrets/{secret}"),
        None,
    )
    .await?;
    let principal = c
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{agent}"),
            None,
        )
        .await?
        .get("servicePrincipalId")
        .and_then(Value::as_str)
        .map_or_else(|| format!("service-agent-{agent}"), str::to_owned);
    grant_exact(
        c,
        &principal,
        json!([{"action": "operate", "resourceKind": "secret"}]),
        SECRET_USER_ROLE,
        ("secret", secret),
    )
    .await
}

/// Binds a Role with exactly `permissions` to `principal` on one resource `(kind, id)`,
/// reusing such a Role (else creating `role_name`) and an identical binding; returns the binding.
pub(super) async fn grant_exact(
    c: &Client,
    principal: &str,
    permissions: Value,
    role_name: &str,
    (kind, id): (&str, &str),
) -> anyhow::Result<Value> {
    let ns = c.ns()?;
    let roles_path = format!("/namespaces/{ns}/iam/roles");
    let roles = c.call(Method::GET, &roles_path, None).await?;
    let existing = roles
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["permissions"] == permissions);
    let role_id = match existing {
        Some(role) => role["id"].as_str().unwrap_or_default().to_owned(),
        None => c
            .call(
                Method::POST,
                &roles_path,
                Some(json!({"name": role_name, "permissions": permissions})),
            )
            .await?["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    let bindings_path = format!("/namespaces/{ns}/iam/access-bindings");
    let wanted = json!({"subjectKind": "identity", "subjectId": principal, "roleId": role_id,
                        "resourceKind": kind, "resourceId": id});
    let bindings = c.call(Method::GET, &bindings_path, None).await?;
    if let Some(found) = bindings.as_array().into_iter().flatten().find(|b| {
        ["subjectId", "roleId", "resourceKind", "resourceId"]
            .iter()
            .all(|k| b[*k] == wanted[*k])
    }) {
        return Ok(found.clone());
    }
    c.call(Method::POST, &bindings_path, Some(wanted)).await
}

/// The name of the Role `occ agent grant-use` creates when the Namespace has none that grants
/// exactly `use` on Agents.
pub(super) const AGENT_USER_ROLE: &str = "agent-user";

/// `occ agent grant-use`: lets `principal` (default: the CLI key's own) talk to one Agent.
pub(super) async fn grant_use(
    c: &Client,
    agent: &str,
    principal: Option<String>,
) -> anyhow::Result<Value> {
    let principal = principal
        .or_else(|| c.key_principal.clone())
        .ok_or_else(|| {
            anyhow!("--principal is required: the service key file names no servicePrincipalId")
        })?;
    // The Agent must exist (a clear 404 otherwise).
    c.call(
        Method::GET,
        &format!("/namespaces/{}/agents/{agent}", c.ns()?),
        None,
    )
    .await?;
    grant_exact(
        c,
        &principal,
        json!([{"action": "use", "resourceKind": "agent"}]),
        AGENT_USER_ROLE,
        ("agent", agent),
    )
    .await
}

/// `occ agent grant-control-ui`: the person's `use` binding on the Agent, then its runtime role.
pub(super) async fn grant_control_ui(
    c: &Client,
    agent: &str,
    principal: String,
    runtime_role: &str,
) -> anyhow::Result<Value> {
    let binding = grant_use(c, agent, Some(principal)).await?;
    if binding["runtimeRole"] == runtime_role {
        return Ok(binding);
    }
    let id = binding["id"].as_str().unwrap_or_default();
    c.call(
        Method::PATCH,
        &format!(
            "/namespaces/{}/iam/access-bindings/{id}/runtime-role",
            c.ns()?
        ),
        Some(json!({ "runtimeRole": runtime_role })),
    )
    .await
}
