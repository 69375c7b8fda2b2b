//! What a gateway runs with, whoever runs it (the host's detached supervisor, its systemd units,
//! the Kubernetes Driver's Pods): the revision's snapshot (the admitted document plus the
//! settings a Driver owns), the fixed OpenClaw switches of its environment, the variable an
//! `api_key` harness credential is delivered in, and where it listens.

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, RevisionTarget};
use occ_core::resource::HarnessAuth;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Where a gateway listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayBind {
    /// 127.0.0.1 only (occ runs on the same machine).
    Loopback,
    /// Every interface (`0.0.0.0`; occ reaches the gateway over the network, token auth).
    Lan,
}

impl GatewayBind {
    /// The value of `gateway run --bind` and of the snapshot's `gateway.bind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Lan => "lan",
        }
    }
}

/// The variables every gateway gets besides its paths and token, under either supervisor.
pub const GATEWAY_FIXED_ENV: [(&str, &str); 7] = [
    ("OPENCLAW_DISABLE_BONJOUR", "1"),
    ("OPENCLAW_EXEC_SHELL_SNAPSHOT", "0"),
    ("OPENCLAW_NO_RESPAWN", "1"),
    ("OPENCLAW_SKIP_CHANNELS", "1"),
    ("OPENCLAW_NO_AUTO_UPDATE", "1"),
    ("DO_NOT_TRACK", "1"),
    // Gateways never install packages at run time: a plugin the configuration implies but
    // the pinned runtime lacks fails fast instead of stalling startup on npm.
    ("npm_config_offline", "true"),
];

/// The variable an `api_key` harness credential is delivered in, by the provider of the
/// Agent's primary model (`agents.defaults.model.primary = "<provider>/<model>"`).
pub fn harness_key_variable(rev: &RevisionTarget) -> Result<&'static str, ComputeError> {
    if !matches!(rev.spec.harness_auth, Some(HarnessAuth::ApiKey { .. })) {
        return Err(ComputeError::permanent(
            ReasonCode::InvalidHarnessAuth,
            "a harness credential without an api_key harnessAuth",
        ));
    }
    let primary = rev
        .spec
        .configuration
        .get("agents")
        .and_then(|a| a.get("defaults"))
        .and_then(|d| d.get("model"))
        .and_then(|m| m.get("primary").or(Some(m)))
        .and_then(Value::as_str)
        .unwrap_or("");
    match primary.split('/').next().unwrap_or("") {
        "openai" => Ok("OPENAI_API_KEY"),
        "anthropic" => Ok("ANTHROPIC_API_KEY"),
        _ => Err(ComputeError::permanent(
            ReasonCode::InvalidHarnessAuth,
            "an api_key harnessAuth needs agents.defaults.model.primary with provider openai or anthropic",
        )),
    }
}

/// The snapshot a revision runs with: the admitted document plus the settings a Driver owns
/// (listener, token authentication from `OPENCLAW_GATEWAY_TOKEN`, workspace, log file, no
/// update checks or catalog refreshes). With a `log_file` the Driver also captures the
/// gateway's stdout and stderr into that file, so OpenClaw's console logger is silenced
/// (`logging.consoleLevel: "silent"`): each message lands once, as the file's JSON line, while
/// what bypasses the logger (fatal errors, crash traces, Node's warnings) still lands as text.
pub fn render_snapshot(
    rev: &RevisionTarget,
    port: u16,
    bind: &str,
    workspace: &str,
    log_file: Option<&str>,
) -> Map<String, Value> {
    let mut doc = rev.spec.configuration.clone();
    let gateway = object_at(&mut doc, "gateway");
    gateway.insert("mode".into(), json!("local"));
    gateway.insert("port".into(), json!(port));
    gateway.insert("bind".into(), json!(bind));
    gateway.insert(
        "auth".into(),
        json!({"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"}),
    );
    if let Some(file) = log_file {
        let logging = object_at(&mut doc, "logging");
        logging.insert("file".into(), json!(file));
        logging.insert("consoleLevel".into(), json!("silent"));
    }
    object_at(&mut doc, "update").insert("checkOnStart".into(), json!(false));
    object_at(object_at(&mut doc, "models"), "catalogRefresh")
        .insert("enabled".into(), json!(false));
    object_at(object_at(&mut doc, "agents"), "defaults")
        .insert("workspace".into(), json!(workspace));
    doc
}

/// `doc[key]` as an object, replacing anything that is not one.
fn object_at<'a>(doc: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = doc.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}
