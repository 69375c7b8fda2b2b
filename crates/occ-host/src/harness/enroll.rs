//! What every Driver of a dedicated revision shares, whatever runs the harness: the login method
//! and probe model a revision implies, a held launcher failure as the deployment's error, and
//! node enrollment over an operator session (pairing with a setup code the Driver delivers its
//! own way, the node's readiness, the gateway applying the node binding).

use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, RevisionTarget};
use occ_core::resource::HarnessAuth;
use occ_gateway::{EnrollmentError, NodeEnrollment, NodeSetup, Session};
use serde_json::Value;

use super::input::{FailureCode, LoginInput, LoginMethod};

/// How long a paired node may take to (re)connect with all its commands.
pub const NODE_CONNECT_WAIT: Duration = Duration::from_secs(45);
/// How long the node host may take to use a setup code once delivered.
pub const SETUP_WAIT: Duration = Duration::from_secs(60);
/// How long the gateway may take to apply a rewritten runtime config.
const BINDING_APPLY_WAIT: Duration = Duration::from_secs(60);

/// The `harnessAuth` method the launcher logs in with (permanent `INVALID_HARNESS_AUTH` for
/// any other).
pub fn login_method(rev: &RevisionTarget) -> Result<LoginMethod, ComputeError> {
    match &rev.spec.harness_auth {
        Some(HarnessAuth::ApiKey { .. }) => Ok(LoginMethod::ApiKey),
        Some(HarnessAuth::CodexPat { .. }) => Ok(LoginMethod::CodexPat),
        Some(HarnessAuth::ChatgptServiceAccount { .. })
            if rev.spec.account_credential.is_some() =>
        {
            Ok(LoginMethod::ChatgptServiceAccount)
        }
        other => Err(ComputeError::permanent(
            ReasonCode::InvalidHarnessAuth,
            format!(
                "a dedicated harness logs in with api_key, codex_pat or chatgpt_service_account \
                 (with an issued credential), not {}",
                other.as_ref().map_or("none", HarnessAuth::method)
            ),
        )),
    }
}

/// How the launcher logs in: the method, the credential file the Driver delivers, and for a
/// ChatGPT service account the workspace its revision froze.
pub fn login_input(
    rev: &RevisionTarget,
    credential_file: std::path::PathBuf,
) -> Result<LoginInput, ComputeError> {
    Ok(LoginInput {
        method: login_method(rev)?,
        credential_file,
        chatgpt_workspace_id: rev
            .spec
            .account_credential
            .as_ref()
            .map(|c| c.workspace_id.clone()),
    })
}

/// The model id of the Configuration's primary model (`openai/<id>` → `<id>`), for the probe.
pub fn primary_model_id(rev: &RevisionTarget) -> Option<String> {
    let model = rev
        .spec
        .configuration
        .get("agents")?
        .get("defaults")?
        .get("model")?;
    let primary = model.get("primary").unwrap_or(model).as_str()?;
    let id = primary.split_once('/').map_or(primary, |(_, id)| id);
    (!id.is_empty() && !id.chars().any(|c| c.is_whitespace() || c == '"')).then(|| id.to_owned())
}

/// A held launcher failure as the deployment's (permanent) error.
pub fn held_failure(code: FailureCode) -> ComputeError {
    let (reason, message) = match code {
        FailureCode::WorkspaceSetupFailed => (
            ReasonCode::WorkspaceSetupFailed,
            "the harness could not initialise the Agent's workspace",
        ),
        FailureCode::LoginFailed => (
            ReasonCode::RuntimeLoginFailed,
            "Codex could not log in with the Agent's harness credential",
        ),
        FailureCode::AuthenticationFailed => (
            ReasonCode::RuntimeAuthenticationFailed,
            "the model endpoint refused the Agent's harness credential",
        ),
        FailureCode::ModelProbeFailed => (
            ReasonCode::RuntimeModelProbeFailed,
            "the harness's probe turn against the model endpoint failed",
        ),
        FailureCode::ModelProbeTimeout => (
            ReasonCode::RuntimeModelProbeTimeout,
            "the harness's probe turn got no answer from the model endpoint in time",
        ),
    };
    ComputeError::permanent(reason, message)
}

/// An enrollment call's failure: transient `WORKSPACE_NODE_PENDING` or permanent
/// `WORKSPACE_NODE_ENROLLMENT_FAILED`.
pub fn enrollment_error(e: EnrollmentError) -> ComputeError {
    if e.is_transient() {
        ComputeError::transient(ReasonCode::WorkspaceNodePending, e.to_string())
    } else {
        ComputeError::permanent(ReasonCode::WorkspaceNodeEnrollmentFailed, e.to_string())
    }
}

/// Pairs the harness's node host: asks the gateway for a setup code, hands it to `deliver`
/// (the Driver's private way to the launcher), waits up to [`SETUP_WAIT`] for the gateway to
/// report the pairing, and calls `withdraw` (the code is single-use; also on failure). Returns
/// the paired device id.
pub async fn pair(
    session: &mut Session,
    public_url: &str,
    deliver: impl AsyncFnOnce(&NodeSetup) -> Result<(), ComputeError>,
    withdraw: impl AsyncFnOnce() -> Result<(), ComputeError>,
) -> Result<String, ComputeError> {
    let mut enrollment = NodeEnrollment::new(session);
    let setup = enrollment
        .create_setup(public_url)
        .await
        .map_err(enrollment_error)?;
    let paired = async {
        deliver(&setup).await?;
        let deadline = Instant::now() + SETUP_WAIT;
        loop {
            if let Some(done) = enrollment
                .setup_status(&setup.setup_id)
                .await
                .map_err(enrollment_error)?
            {
                return Ok(done.device_id);
            }
            if Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    ReasonCode::WorkspaceNodePending,
                    format!("the harness's node did not pair in {SETUP_WAIT:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    .await;
    let withdrawn = withdraw().await;
    let device_id = paired?;
    withdrawn?;
    Ok(device_id)
}

/// Polls `node.describe` until the node is connected with every command, up to `wait`.
pub async fn node_ready(
    session: &mut Session,
    device_id: &str,
    wait: Duration,
) -> Result<bool, ComputeError> {
    let deadline = Instant::now() + wait;
    loop {
        match NodeEnrollment::new(session).describe(device_id).await {
            Ok(status) if status.is_ready() => return Ok(true),
            Ok(_) => {}
            // An unknown node is an error answer: not (yet) known, keep looking until the bound.
            Err(EnrollmentError::Gateway(e)) if !e.is_transient() => {
                tracing::debug!(error = %e, "node.describe");
            }
            Err(e) => return Err(enrollment_error(e)),
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the gateway runs with the runtime config that binds `device_id`: `config.get`
/// reports the file it applied naming the node.
pub async fn wait_binding_applied(
    session: &mut Session,
    device_id: &str,
) -> Result<(), ComputeError> {
    let deadline = Instant::now() + BINDING_APPLY_WAIT;
    loop {
        let reply = session
            .call("config.get", serde_json::json!({}), Duration::from_secs(10))
            .await;
        match reply {
            Ok(reply) if binding_applied(&reply, device_id) => return Ok(()),
            Ok(_) => {}
            // While the gateway reloads the plugins the binding touches it answers `UNAVAILABLE`
            // (or, on a busy machine, late): not yet, until the bound.
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tracing::debug!(error = %e, "config.get while the binding applies");
            }
            Err(e) => {
                return Err(ComputeError::transient(
                    ReasonCode::WorkspaceNodeBindingPending,
                    e.to_string(),
                ));
            }
        }
        if Instant::now() >= deadline {
            return Err(ComputeError::transient(
                ReasonCode::WorkspaceNodeBindingPending,
                format!("the gateway did not apply the node binding in {BINDING_APPLY_WAIT:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether a `config.get` reply shows the applied config binding the workspace to `device_id`.
fn binding_applied(reply: &Value, device_id: &str) -> bool {
    let applied = reply.get("appliedConfigHash").and_then(Value::as_str);
    let on_disk = reply.get("configRevisionHash").and_then(Value::as_str);
    let names_node = ["config", "resolved", "parsed"].iter().any(|key| {
        reply
            .get(*key)
            .and_then(|c| c.pointer("/plugins/entries/file-transfer/config/workspaces/main/nodeId"))
            .and_then(Value::as_str)
            == Some(device_id)
    });
    names_node && applied.is_some() && applied == on_disk
}
