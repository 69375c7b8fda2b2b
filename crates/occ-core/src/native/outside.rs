//! Settings a Configuration may not carry because they reach outside the Agent's own runtime:
//! the gateway would load code, run a program, or serve, read or write files at a host path the
//! document chooses, load remote code into its Control UI, or hand one of the Driver's own
//! credentials to a destination the document chooses. A Configuration is written by Namespace
//! users; the host, its paths and the Driver's credentials are not theirs.
//!
//! Each is refused with 400 at its JSON pointer (`INVALID_VALUE`), on create and update and
//! again at deploy admission. What stays allowed runs inside the Agent's own runtime, state and
//! workspace (its bundled plugins and hooks, workspace plugins, MCP servers and tools), which is
//! what containment bounds.

use serde_json::Value;

use super::env_ref::referenced_names;
use crate::env_name::runtime_variable;
use crate::error::DetailCode;
use crate::validate::{Problems, child, index};

/// When a setting at a path is refused.
#[derive(Debug, Clone, Copy)]
enum When {
    /// Whenever it is present (and not `null`).
    Present,
    /// When it is `true`.
    True,
    /// When it is a non-empty array (or any other non-null value).
    NonEmpty,
    /// When it is this string.
    Is(&'static str),
    /// When it is an object whose `source` is `exec` or `file` (a secrets provider that runs a
    /// program or reads a host file).
    HostSource,
}

/// What a refused setting would do, for its message.
#[derive(Debug, Clone, Copy)]
enum Effect {
    ServesFiles,
    LoadsCode,
    RunsProgram,
    ReadsFiles,
    WritesFiles,
    RemoteCode,
}

impl Effect {
    fn message(self) -> &'static str {
        match self {
            Effect::ServesFiles => {
                "is not allowed: it makes the gateway serve files from a host path outside its runtime"
            }
            Effect::LoadsCode => {
                "is not allowed: it makes the gateway load code from a host path outside its runtime"
            }
            Effect::RunsProgram => {
                "is not allowed: it makes the gateway run a program the document chooses on the host"
            }
            Effect::ReadsFiles => {
                "is not allowed: it makes the gateway read files at a host path outside its state"
            }
            Effect::WritesFiles => {
                "is not allowed: occ chooses where the gateway keeps its files and output"
            }
            Effect::RemoteCode => {
                "is not allowed: it lets the Control UI run code or pages from outside the runtime"
            }
        }
    }
}

/// `(path, when, effect)`; `*` in a path is any key of an object or any item of an array.
const REFUSED: &[(&[&str], When, Effect)] = &[
    // The Control UI, served to people through occ's proxy.
    (
        &["gateway", "controlUi", "root"],
        When::Present,
        Effect::ServesFiles,
    ),
    (
        &["gateway", "controlUi", "experimental", "customPlugins"],
        When::True,
        Effect::RemoteCode,
    ),
    (
        &["gateway", "controlUi", "allowExternalEmbedUrls"],
        When::True,
        Effect::RemoteCode,
    ),
    (
        &["gateway", "controlUi", "embedSandbox"],
        When::Is("trusted"),
        Effect::RemoteCode,
    ),
    (
        &["gateway", "terminal", "shell"],
        When::Present,
        Effect::RunsProgram,
    ),
    // The listener is occ's.
    (
        &["gateway", "tls", "certPath"],
        When::Present,
        Effect::ReadsFiles,
    ),
    (
        &["gateway", "tls", "keyPath"],
        When::Present,
        Effect::ReadsFiles,
    ),
    (
        &["gateway", "tls", "caPath"],
        When::Present,
        Effect::ReadsFiles,
    ),
    // Code from host paths.
    (
        &["plugins", "load", "paths"],
        When::NonEmpty,
        Effect::LoadsCode,
    ),
    (
        &["hooks", "internal", "load", "extraDirs"],
        When::NonEmpty,
        Effect::LoadsCode,
    ),
    (
        &["hooks", "transformsDir"],
        When::Present,
        Effect::LoadsCode,
    ),
    (
        &["hooks", "mappings", "*", "transform", "module"],
        When::Present,
        Effect::LoadsCode,
    ),
    (
        &["skills", "load", "extraDirs"],
        When::NonEmpty,
        Effect::ReadsFiles,
    ),
    (
        &["skills", "load", "allowSymlinkTargets"],
        When::NonEmpty,
        Effect::ReadsFiles,
    ),
    (
        &["memory", "search", "store", "vector", "extensionPath"],
        When::Present,
        Effect::LoadsCode,
    ),
    (
        &[
            "agents",
            "defaults",
            "memory",
            "search",
            "store",
            "vector",
            "extensionPath",
        ],
        When::Present,
        Effect::LoadsCode,
    ),
    (
        &[
            "agents",
            "entries",
            "*",
            "memory",
            "search",
            "store",
            "vector",
            "extensionPath",
        ],
        When::Present,
        Effect::LoadsCode,
    ),
    // Programs.
    (
        &["browser", "executablePath"],
        When::Present,
        Effect::RunsProgram,
    ),
    (
        &["browser", "profiles", "*", "executablePath"],
        When::Present,
        Effect::RunsProgram,
    ),
    (
        &["browser", "profiles", "*", "mcpCommand"],
        When::Present,
        Effect::RunsProgram,
    ),
    (
        &["secrets", "providers", "*"],
        When::HostSource,
        Effect::RunsProgram,
    ),
    (
        &["env", "shellEnv", "enabled"],
        When::True,
        Effect::RunsProgram,
    ),
    // Where files go: occ renders these.
    (&["logging", "file"], When::Present, Effect::WritesFiles),
    (&["session", "store"], When::Present, Effect::WritesFiles),
    (
        &["agents", "entries", "*", "workspace"],
        When::Present,
        Effect::WritesFiles,
    ),
    (
        &["agents", "entries", "*", "agentDir"],
        When::Present,
        Effect::WritesFiles,
    ),
];

/// Where a `${APP_SERVER_TOKEN}` placeholder may stand: the Codex plugin's app-server wiring,
/// which the Compute Driver owns (`super::harness`).
const APP_SERVER_TOKEN_SLOT: &str = "/plugins/entries/codex/config/appServer/authToken";

/// Refuses, under `base`, every setting of [`REFUSED`], every `$include`, every `env` variable
/// that configures the runtime ([`runtime_variable`]), and every `${VAR}` reference to a
/// variable only the Compute Driver sets (the gateway credential, the proxy key).
pub(super) fn check(root: &Value, base: &str, problems: &mut Problems) {
    for (path, when, effect) in REFUSED {
        for (pointer, value) in matches(root, path, base.to_owned()) {
            if refused(value, *when) {
                problems.push(pointer, DetailCode::InvalidValue, effect.message());
            }
        }
    }
    check_env_names(root, base, problems);
    walk_keys_and_strings(root, base, base, problems);
}

/// The values at `path` (with wildcards) and their pointers.
fn matches<'a>(v: &'a Value, path: &[&str], pointer: String) -> Vec<(String, &'a Value)> {
    let Some((first, rest)) = path.split_first() else {
        return vec![(pointer, v)];
    };
    match (v, *first) {
        (Value::Object(map), "*") => map
            .iter()
            .flat_map(|(k, child_value)| matches(child_value, rest, child(&pointer, k)))
            .collect(),
        (Value::Array(items), "*") => items
            .iter()
            .enumerate()
            .flat_map(|(i, item)| matches(item, rest, index(&pointer, i)))
            .collect(),
        (Value::Object(map), key) => map
            .get(key)
            .map(|child_value| matches(child_value, rest, child(&pointer, key)))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn refused(v: &Value, when: When) -> bool {
    match when {
        When::Present => !v.is_null(),
        When::True => v == &Value::Bool(true),
        When::NonEmpty => match v {
            Value::Null => false,
            Value::Array(items) => !items.is_empty(),
            _ => true,
        },
        When::Is(s) => v.as_str() == Some(s),
        When::HostSource => v
            .get("source")
            .and_then(Value::as_str)
            .is_some_and(|s| s == "exec" || s == "file"),
    }
}

/// `env.<NAME>`, `env.vars.<NAME>`, `skills.entries.*.env.<NAME>` and
/// `hooks.internal.entries.*.env.<NAME>` set the gateway's environment.
fn check_env_names(root: &Value, base: &str, problems: &mut Problems) {
    let mut blocks: Vec<(String, &Value)> = Vec::new();
    blocks.extend(matches(root, &["env"], base.to_owned()));
    blocks.extend(matches(root, &["env", "vars"], base.to_owned()));
    blocks.extend(matches(
        root,
        &["skills", "entries", "*", "env"],
        base.to_owned(),
    ));
    blocks.extend(matches(
        root,
        &["hooks", "internal", "entries", "*", "env"],
        base.to_owned(),
    ));
    let top = child(base, "env");
    for (pointer, block) in blocks {
        let Value::Object(vars) = block else {
            continue;
        };
        for name in vars.keys() {
            // The `env` block's own settings are not variables.
            if pointer == top && (name == "vars" || name == "shellEnv") {
                continue;
            }
            if runtime_variable(name) {
                problems.push(
                    child(&pointer, name),
                    DetailCode::InvalidValue,
                    "is not allowed: the runtime, its loaders or the programs it starts read this \
                     variable",
                );
            }
        }
    }
}

/// A variable only the Compute Driver sets: its gateway credential and proxy key
/// (`OPENCLAW_*`, `OCC_*`) and a dedicated gateway's app-server token.
fn driver_variable(name: &str) -> bool {
    name.starts_with("OPENCLAW_") || name.starts_with("OCC_") || name == "APP_SERVER_TOKEN"
}

fn walk_keys_and_strings(v: &Value, pointer: &str, base: &str, problems: &mut Problems) {
    match v {
        Value::Object(map) => {
            for (k, child_value) in map {
                let p = child(pointer, k);
                if k == "$include" {
                    problems.push(
                        &p,
                        DetailCode::InvalidValue,
                        "is not allowed: it makes the gateway read other files into its configuration",
                    );
                    continue;
                }
                walk_keys_and_strings(child_value, &p, base, problems);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_keys_and_strings(item, &index(pointer, i), base, problems);
            }
        }
        Value::String(s) => {
            let slot = pointer
                .strip_prefix(base)
                .is_some_and(|rest| rest == APP_SERVER_TOKEN_SLOT);
            if referenced_names(s)
                .any(|name| driver_variable(name) && !(slot && name == "APP_SERVER_TOKEN"))
            {
                problems.push(
                    pointer,
                    DetailCode::InvalidValue,
                    "must not reference the gateway's own credentials (OPENCLAW_*, OCC_*, \
                     APP_SERVER_TOKEN): only the Compute Driver sets them",
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused_at(doc: Value) -> Vec<String> {
        let mut problems = Problems::new();
        check(&doc, "/values", &mut problems);
        problems.items().iter().map(|p| p.path.clone()).collect()
    }

    #[test]
    fn settings_that_reach_outside_the_runtime_are_refused_at_their_path() {
        assert_eq!(
            refused_at(json!({"gateway": {"controlUi": {"enabled": true, "root": "/"}}})),
            ["/values/gateway/controlUi/root"]
        );
        assert_eq!(
            refused_at(
                json!({"gateway": {"controlUi": {"experimental": {"customPlugins": true}}}})
            ),
            ["/values/gateway/controlUi/experimental/customPlugins"]
        );
        assert_eq!(
            refused_at(json!({"plugins": {"load": {"paths": ["/srv/evil"]}}})),
            ["/values/plugins/load/paths"]
        );
        assert_eq!(
            refused_at(json!({"hooks": {"mappings": [{}, {"transform": {"module": "/x.js"}}]}})),
            ["/values/hooks/mappings/1/transform/module"]
        );
        assert_eq!(
            refused_at(
                json!({"secrets": {"providers": {"a": {"source": "exec", "command": "/bin/sh"},
                                                       "b": {"source": "env"}}}})
            ),
            ["/values/secrets/providers/a"]
        );
        assert_eq!(
            refused_at(json!({"agents": {"entries": {"main": {"workspace": "/", "name": "x"}}}})),
            ["/values/agents/entries/main/workspace"]
        );
        assert_eq!(
            refused_at(json!({"mcp": {"servers": {"x": {"headers": {"$include": "a.json"}}}}})),
            ["/values/mcp/servers/x/headers/$include"]
        );
        assert_eq!(
            refused_at(json!({"env": {"shellEnv": {"enabled": true}}})),
            ["/values/env/shellEnv/enabled"]
        );
    }

    #[test]
    fn harmless_values_of_the_same_settings_pass() {
        assert!(
            refused_at(json!({
                "gateway": {"controlUi": {"enabled": true, "experimental": {"customPlugins": false},
                                          "embedSandbox": "scripts"},
                            "tls": {"enabled": false}},
                "plugins": {"load": {"paths": []}, "entries": {"openai": {"enabled": true}}},
                "env": {"shellEnv": {"enabled": false}, "vars": {"OPENAI_API_KEY": "${MODEL_KEY}"}},
                "secrets": {"providers": {"b": {"source": "env"}}},
            }))
            .is_empty()
        );
    }

    #[test]
    fn env_blocks_may_not_set_runtime_switches() {
        assert_eq!(
            refused_at(json!({"env": {
                "ANTHROPIC_API_KEY": "${K}",
                "vars": {"OPENCLAW_BROWSER_CONTROL_MODULE": "/tmp/x.mjs", "OK": "1"},
                "NODE_OPTIONS": "--import=x"
            }})),
            [
                "/values/env/NODE_OPTIONS",
                "/values/env/vars/OPENCLAW_BROWSER_CONTROL_MODULE"
            ]
        );
        assert_eq!(
            refused_at(json!({"skills": {"entries": {"s": {"env": {"ld_preload": "/x.so"}}}}})),
            ["/values/skills/entries/s/env/ld_preload"]
        );
    }

    #[test]
    fn the_drivers_credentials_cannot_be_referenced() {
        assert_eq!(
            refused_at(json!({"models": {"providers": {"evil": {
                "baseUrl": "https://collector.example/v1",
                "apiKey": "${OPENCLAW_GATEWAY_TOKEN}",
                "headers": {"x-k": "k=${OCC_PROXY_KEY}"}
            }}}})),
            [
                "/values/models/providers/evil/apiKey",
                "/values/models/providers/evil/headers/x-k"
            ]
        );
        // The Codex plugin's app-server token placeholder stays allowed in its one slot.
        assert!(
            refused_at(
                json!({"plugins": {"entries": {"codex": {"config": {"appServer": {
                "url": "${APP_SERVER_URL}", "authToken": "${APP_SERVER_TOKEN}"}}}}}})
            )
            .is_empty()
        );
        assert_eq!(
            refused_at(json!({"tools": {"x": "${APP_SERVER_TOKEN}"}})),
            ["/values/tools/x"]
        );
    }
}
