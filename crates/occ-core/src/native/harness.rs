//! Which harness a Configuration selects, checked against the Agent's execution mode at deploy.
//!
//! The primary model (`agents.defaults.model`, a `"<provider>/<model>"` string or
//! `{primary}`) names its runtime in `agents.defaults.models.<model>.agentRuntime.id`: `codex`
//! runs in a dedicated Codex harness, `openclaw` (also when unset) inside the gateway. A
//! mismatch with the Agent's `executionMode` is a 400 naming the path. The model itself is not
//! checked here: with the pinned gateway and plugin a dedicated Agent's model is
//! `openai/<model>` (served through Codex's own `openai` provider, no `models.providers` entry
//! needed), while the reference's guide writes `codex/<model>` with a placeholder provider. For dedicated Agents the
//! Codex plugin's app-server wiring (`plugins.entries.codex.config.appServer.url`/`authToken`)
//! belongs to the Compute Driver: a user may leave it out or write the reference's placeholders,
//! nothing else.

use serde_json::{Map, Value};

use crate::error::DetailCode;
use crate::resource::ExecutionMode;
use crate::validate::{Problems, child};

/// `agentRuntime.id` of the Codex harness.
pub const CODEX_RUNTIME: &str = "codex";
/// `agentRuntime.id` of OpenClaw's own (embedded) harness.
pub const OPENCLAW_RUNTIME: &str = "openclaw";
/// The placeholders a dedicated Configuration may carry for the Driver-owned app-server wiring.
pub const APP_SERVER_PLACEHOLDERS: [(&str, &str); 2] = [
    ("url", "${APP_SERVER_URL}"),
    ("authToken", "${APP_SERVER_TOKEN}"),
];

/// The model and runtime a Configuration's primary model selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessSelection {
    /// `"<provider>/<model>"`, when the document names one.
    pub primary: Option<String>,
    /// `codex` or `openclaw`.
    pub runtime: &'static str,
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.get(key)
}

/// Checks that `document` (reported under `base`) selects the harness of `mode`; returns what it
/// selects.
pub fn check_harness(
    document: &Map<String, Value>,
    mode: ExecutionMode,
    base: &str,
    problems: &mut Problems,
) -> Option<HarnessSelection> {
    let before = problems.items().len();
    let defaults = document.get("agents").and_then(|a| get(a, "defaults"));
    let model_path = child(&child(&child(base, "agents"), "defaults"), "model");
    let primary = match defaults.and_then(|d| get(d, "model")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(m) => get(m, "primary").and_then(Value::as_str).map(str::to_owned),
        None => None,
    };
    let runtime_path = primary.as_deref().map(|p| {
        child(
            &child(
                &child(&child(&child(base, "agents"), "defaults"), "models"),
                p,
            ),
            "agentRuntime",
        )
    });
    let runtime_id = primary
        .as_deref()
        .and_then(|p| {
            defaults
                .and_then(|d| get(d, "models"))
                .and_then(|m| get(m, p))
        })
        .and_then(|m| get(m, "agentRuntime"))
        .and_then(|r| get(r, "id"))
        .and_then(Value::as_str);
    let runtime = match runtime_id {
        None | Some(OPENCLAW_RUNTIME) => OPENCLAW_RUNTIME,
        Some(CODEX_RUNTIME) => CODEX_RUNTIME,
        Some(_) => {
            problems.push(
                child(runtime_path.as_deref().unwrap_or(&model_path), "id"),
                DetailCode::InvalidValue,
                "must be openclaw or codex",
            );
            return None;
        }
    };
    match (mode, runtime) {
        (ExecutionMode::Embedded, CODEX_RUNTIME) => problems.push(
            child(runtime_path.as_deref().unwrap_or(&model_path), "id"),
            DetailCode::InvalidValue,
            "selects the Codex harness, which runs only for an Agent with executionMode dedicated",
        ),
        (ExecutionMode::Dedicated, OPENCLAW_RUNTIME) => problems.push(
            match (&runtime_path, runtime_id) {
                (Some(path), Some(_)) => child(path, "id"),
                _ => model_path.clone(),
            },
            DetailCode::InvalidValue,
            "must select a Codex model (\"<provider>/<model>\" with agentRuntime.id codex) for an \
             Agent with executionMode dedicated",
        ),
        _ => {}
    }
    if mode == ExecutionMode::Dedicated {
        check_app_server_wiring(document, base, problems);
    }
    (problems.items().len() == before).then_some(HarnessSelection { primary, runtime })
}

fn check_app_server_wiring(document: &Map<String, Value>, base: &str, problems: &mut Problems) {
    let Some(app_server) = document
        .get("plugins")
        .and_then(|p| get(p, "entries"))
        .and_then(|e| get(e, CODEX_RUNTIME))
        .and_then(|c| get(c, "config"))
        .and_then(|c| get(c, "appServer"))
    else {
        return;
    };
    let path = ["plugins", "entries", CODEX_RUNTIME, "config", "appServer"]
        .iter()
        .fold(base.to_owned(), |p, k| child(&p, k));
    for (key, placeholder) in APP_SERVER_PLACEHOLDERS {
        if let Some(value) = get(app_server, key)
            && value.as_str() != Some(placeholder)
        {
            problems.push(
                child(&path, key),
                DetailCode::InvalidValue,
                format!("is set by occ's Compute Driver (leave it out or write {placeholder})"),
            );
        }
    }
    if let Some(transport) = get(app_server, "transport")
        && transport.as_str() != Some("websocket")
    {
        problems.push(
            child(&path, "transport"),
            DetailCode::InvalidValue,
            "must be websocket (the harness serves the app-server over WebSocket)",
        );
    }
}

/// Deploy admission's check ([`check_harness`]) of a stored document: a mismatch is the 400 its
/// own pointers describe, led by the Configuration it comes from.
pub fn require_harness(
    document: &Map<String, Value>,
    mode: ExecutionMode,
    configuration: &crate::ConfigurationId,
    generation: crate::resource::Generation,
) -> Result<HarnessSelection, crate::Error> {
    let mut problems = Problems::new();
    match check_harness(document, mode, "/values", &mut problems) {
        Some(selection) => Ok(selection),
        None => Err(problems.into_error_saying(&format!(
            "Configuration {configuration} (generation {generation}) does not fit the Agent's \
             executionMode {}",
            mode.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(doc: Value, mode: ExecutionMode) -> Result<HarnessSelection, Vec<(String, String)>> {
        let mut problems = Problems::new();
        let Value::Object(doc) = doc else { panic!() };
        check_harness(&doc, mode, "/values", &mut problems).ok_or_else(|| {
            problems
                .items()
                .iter()
                .map(|p| (p.path.clone(), p.expectation.clone()))
                .collect()
        })
    }

    fn dedicated_doc() -> Value {
        json!({
            "agents": {"defaults": {"model": "codex/gpt-5.6-sol",
                "models": {"codex/gpt-5.6-sol": {"agentRuntime": {"id": "codex"}}}}},
            "models": {"providers": {"codex": {"baseUrl": "http://127.0.0.1:9",
                "api": "openai-responses", "models": [{"id": "gpt-5.6-sol", "name": "gpt-5.6-sol"}]}}},
            "plugins": {"entries": {"codex": {"config": {"appServer": {"mode": "guardian",
                "transport": "websocket", "url": "${APP_SERVER_URL}", "authToken": "${APP_SERVER_TOKEN}"}}}}}
        })
    }

    #[test]
    fn a_dedicated_configuration_selects_codex() {
        let selected = check(dedicated_doc(), ExecutionMode::Dedicated).unwrap();
        assert_eq!(selected.runtime, CODEX_RUNTIME);
        assert_eq!(selected.primary.as_deref(), Some("codex/gpt-5.6-sol"));
        // the object form of the model and a document without the app-server wiring
        let mut doc = dedicated_doc();
        doc["agents"]["defaults"]["model"] = json!({"primary": "codex/gpt-5.6-sol"});
        doc.as_object_mut().unwrap().remove("plugins");
        assert!(check(doc, ExecutionMode::Dedicated).is_ok());
    }

    #[test]
    fn the_pinned_plugins_openai_form_needs_no_provider_entry() {
        let doc = json!({"agents": {"defaults": {"model": "openai/gpt-5.6-sol",
            "models": {"openai/gpt-5.6-sol": {"agentRuntime": {"id": "codex"}}}}}});
        assert_eq!(
            check(doc, ExecutionMode::Dedicated).unwrap().runtime,
            CODEX_RUNTIME
        );
    }

    #[test]
    fn embedded_and_dedicated_never_mix() {
        let err = check(dedicated_doc(), ExecutionMode::Embedded).unwrap_err();
        assert_eq!(
            err[0].0,
            "/values/agents/defaults/models/codex~1gpt-5.6-sol/agentRuntime/id"
        );
        // an embedded document (no runtime, or openclaw) on a dedicated Agent
        let err = check(
            json!({"agents": {"defaults": {"model": "openai/gpt-5"}}}),
            ExecutionMode::Dedicated,
        )
        .unwrap_err();
        assert_eq!(err[0].0, "/values/agents/defaults/model");
        let err = check(json!({}), ExecutionMode::Dedicated).unwrap_err();
        assert_eq!(err[0].0, "/values/agents/defaults/model");
        assert!(check(json!({}), ExecutionMode::Embedded).is_ok());
        let embedded = json!({"agents": {"defaults": {"model": "openai/gpt-5",
            "models": {"openai/gpt-5": {"agentRuntime": {"id": "openclaw"}}}}}});
        assert_eq!(
            check(embedded, ExecutionMode::Embedded).unwrap().runtime,
            OPENCLAW_RUNTIME
        );
    }

    #[test]
    fn unknown_runtimes_and_foreign_wiring_are_named() {
        let mut doc = dedicated_doc();
        doc["agents"]["defaults"]["models"]["codex/gpt-5.6-sol"]["agentRuntime"]["id"] =
            json!("claude");
        let err = check(doc, ExecutionMode::Dedicated).unwrap_err();
        assert_eq!(
            err,
            vec![(
                "/values/agents/defaults/models/codex~1gpt-5.6-sol/agentRuntime/id".into(),
                "must be openclaw or codex".into()
            )]
        );

        let mut doc = dedicated_doc();
        let wiring = &mut doc["plugins"]["entries"]["codex"]["config"]["appServer"];
        wiring["url"] = json!("ws://10.0.0.9:4500");
        wiring["authToken"] = json!("literal");
        wiring["transport"] = json!("stdio");
        let err = check(doc, ExecutionMode::Dedicated).unwrap_err();
        let paths: Vec<&str> = err.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/values/plugins/entries/codex/config/appServer/url",
                "/values/plugins/entries/codex/config/appServer/authToken",
                "/values/plugins/entries/codex/config/appServer/transport",
            ]
        );
        // messages name the path and the rule, never the value
        assert!(
            err.iter()
                .all(|(_, e)| !e.contains("10.0.0.9") && !e.contains("literal"))
        );
    }
}
