//! What a gateway runs with, whoever runs it (the host's detached supervisor, its systemd units,
//! the Kubernetes Driver's Pods): the revision's snapshot (the admitted document plus the
//! settings a Driver owns), the fixed OpenClaw switches of its environment, the variable an
//! `api_key` harness credential is delivered in, and where it listens.

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, RevisionTarget};
use occ_core::native::control_ui;
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

/// The variable a revision's gateway gets its credential in: the shared token, or — when its
/// Control UI is proxied by occ ([`control_ui`]) — the password occ's own clients present, since
/// OpenClaw refuses to start in trusted-proxy mode while `OPENCLAW_GATEWAY_TOKEN` is set.
pub fn credential_variable(rev: &RevisionTarget) -> &'static str {
    if control_ui::enabled(&rev.spec.configuration) {
        "OPENCLAW_GATEWAY_PASSWORD"
    } else {
        "OPENCLAW_GATEWAY_TOKEN"
    }
}

/// The proxy key a Control UI revision's gateway gets in
/// [`control_ui::PROXY_KEY_VARIABLE`], derived from its credential `token`; `None` for other
/// revisions.
pub fn proxy_key(rev: &RevisionTarget, token: &str) -> Option<String> {
    control_ui::enabled(&rev.spec.configuration)
        .then(|| control_ui::proxy_key(token, &rev.revision_id))
}

/// The snapshot a revision runs with: the admitted document plus the settings a Driver owns
/// (listener, authentication by the credential in [`credential_variable`], workspace, log file, no
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
    let credential = format!("${{{}}}", credential_variable(rev));
    if control_ui::enabled(&rev.spec.configuration) {
        control_ui::render_auth(gateway, &credential);
    } else {
        gateway.insert("auth".into(), json!({"mode": "token", "token": credential}));
    }
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

/// Whether two snapshots of one revision differ at most in what the Driver renders around the
/// admitted document and has changed since: where and how output is captured
/// (`logging.file`, `logging.consoleLevel`: before per-revision capture) and a Control UI
/// revision's proxy settings (`gateway.auth`, `gateway.terminal`: before per-revision proxy
/// keys). A snapshot an older occ rendered is then re-rendered instead of being refused as
/// another document.
pub fn same_but_driver_rendering(
    stored: &Map<String, Value>,
    rendered: &Map<String, Value>,
) -> bool {
    let without_driver_parts = |doc: &Map<String, Value>| {
        let mut doc = doc.clone();
        if let Some(logging) = doc.get_mut("logging").and_then(Value::as_object_mut) {
            logging.remove("file");
            logging.remove("consoleLevel");
        }
        if control_ui::enabled(&doc)
            && let Some(gateway) = doc.get_mut("gateway").and_then(Value::as_object_mut)
        {
            gateway.remove("auth");
            gateway.remove("terminal");
        }
        doc
    };
    let (mut stored, mut rendered) = (without_driver_parts(stored), without_driver_parts(rendered));
    // A provider pointed at the credential proxy by either rendering (at a capability URL): its
    // `baseUrl` is the Driver's part too.
    let proxied: Vec<String> = [&stored, &rendered]
        .into_iter()
        .filter_map(|doc| doc.get("models")?.get("providers")?.as_object())
        .flatten()
        .filter(|(_, p)| {
            p.get("baseUrl")
                .and_then(Value::as_str)
                .is_some_and(crate::credential_proxy::is_capability_url)
        })
        .map(|(name, _)| name.clone())
        .collect();
    for doc in [&mut stored, &mut rendered] {
        let providers = doc
            .get_mut("models")
            .and_then(|m| m.get_mut("providers"))
            .and_then(Value::as_object_mut);
        for (name, provider) in providers.into_iter().flat_map(|ps| ps.iter_mut()) {
            if proxied.contains(name)
                && let Some(provider) = provider.as_object_mut()
            {
                provider.remove("baseUrl");
            }
        }
    }
    stored == rendered
}

/// `doc[key]` as an object, replacing anything that is not one.
fn object_at<'a>(doc: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = doc.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(value: Value) -> Map<String, Value> {
        value.as_object().expect("an object").clone()
    }

    #[test]
    fn only_the_log_capture_may_differ_between_renderings_of_a_revision() {
        let before = doc(json!({
            "gateway": {"port": 28000},
            "logging": {"file": "/srv/agent/logs/gateway.log", "level": "debug"},
        }));
        let now = doc(json!({
            "gateway": {"port": 28000},
            "logging": {
                "file": "/srv/agent/logs/rev_1/gateway.log",
                "consoleLevel": "silent",
                "level": "debug",
            },
        }));
        assert!(same_but_driver_rendering(&before, &now));
        let other_level = doc(json!({
            "gateway": {"port": 28000},
            "logging": {"file": "/srv/agent/logs/gateway.log", "level": "info"},
        }));
        assert!(!same_but_driver_rendering(&other_level, &now));
        let other_port = doc(json!({
            "gateway": {"port": 28001},
            "logging": {"file": "/srv/agent/logs/gateway.log", "level": "debug"},
        }));
        assert!(!same_but_driver_rendering(&other_port, &now));
    }

    /// A provider pointed at the credential proxy is the Driver's rendering; any other change
    /// of a provider (or a `baseUrl` elsewhere) is not.
    #[test]
    fn a_provider_pointed_at_the_credential_proxy_is_the_drivers_rendering() {
        let provider = |base: &str, model: &str| {
            doc(json!({"models": {"providers": {"fake": {
                "baseUrl": base, "api": "openai-completions", "apiKey": "${K}",
                "models": [{"id": model}]}}}}))
        };
        let cap = "http://127.0.0.1:28999/".to_owned() + &"ab".repeat(32);
        let admitted = provider("https://models.example/v1", "m");
        assert!(same_but_driver_rendering(&admitted, &provider(&cap, "m")));
        assert!(same_but_driver_rendering(&provider(&cap, "m"), &admitted));
        assert!(!same_but_driver_rendering(
            &admitted,
            &provider(&cap, "other")
        ));
        assert!(!same_but_driver_rendering(
            &admitted,
            &provider("https://elsewhere.example/v1", "m")
        ));
        assert!(!same_but_driver_rendering(&admitted, &doc(json!({}))));
    }
}
