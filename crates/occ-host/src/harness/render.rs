//! The Driver-owned keys of a dedicated revision's gateway configuration, on top of the
//! rendered snapshot ([`crate::snapshot::render_snapshot`]).
//!
//! A dedicated gateway loads the Codex plugin of the runtime (trusted through its state
//! directory's npm root, [`super::plugin::trust_codex_plugin`]; never installed per Agent and
//! never named in `plugins.load.paths`, which would leave it untrusted) and reaches the harness's app-server over WebSocket with the token the
//! gateway receives as `APP_SERVER_TOKEN` (the value never enters a file). The node host of the
//! harness serves the workspace: the gateway admits exactly the node commands of
//! [`NODE_COMMANDS`] (set before any setup code is issued, so the node pairs with them), and
//! once the node is paired the `file-transfer` plugin routes the `main` agent's workspace files
//! to it ([`bind_node_workspace`]; hot-applied by the gateway, no restart).
//!
//! `plugins.allow` is an exclusive allowlist: besides `codex` it must name `file-transfer`, or
//! that bundled plugin would not load once the list is non-empty.

use serde_json::{Map, Value, json};

use occ_gateway::NODE_COMMANDS;

/// The Codex plugin's id.
pub const CODEX_PLUGIN_ID: &str = "codex";
/// The bundled plugin that routes workspace file operations to a node.
pub const FILE_TRANSFER_PLUGIN_ID: &str = "file-transfer";
/// The app-server token as the gateway's configuration references it (resolved from its
/// environment at load time).
pub const APP_SERVER_TOKEN_REF: &str = "${APP_SERVER_TOKEN}";
/// The agent whose workspace the node serves (occ runs one agent per gateway).
pub const MAIN_AGENT_ID: &str = "main";

/// The paired node that serves the workspace, and the workspace's absolute path on the node's
/// host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeWorkspace<'a> {
    /// The node's id (the paired device id).
    pub node_id: &'a str,
    /// The workspace directory as the node host sees it (absolute POSIX path).
    pub remote_root: &'a str,
}

/// What a dedicated revision's gateway is wired to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedicatedWiring<'a> {
    /// The harness's app-server, e.g. `ws://127.0.0.1:PORT`.
    pub app_server_url: &'a str,
    /// The paired node, once enrollment is done (`None` while preparing).
    pub node: Option<NodeWorkspace<'a>>,
}

/// Sets the Driver-owned keys of a dedicated revision in `snapshot`: the Codex plugin allowed,
/// enabled and pointed at the app-server
/// (the user's other `appServer` keys — `mode`, `approvalPolicy`, `sandbox` — are kept), the
/// node command allowlist, and with a node the workspace binding ([`bind_node_workspace`]).
pub fn render_dedicated(snapshot: &mut Map<String, Value>, wiring: &DedicatedWiring<'_>) {
    let plugins = object_at(snapshot, "plugins");
    push_unique(array_at(plugins, "allow"), CODEX_PLUGIN_ID);
    push_unique(array_at(plugins, "allow"), FILE_TRANSFER_PLUGIN_ID);
    let codex = object_at(object_at(plugins, "entries"), CODEX_PLUGIN_ID);
    codex.insert("enabled".into(), json!(true));
    let app_server = object_at(object_at(codex, "config"), "appServer");
    app_server.insert("transport".into(), json!("websocket"));
    app_server.insert("url".into(), json!(wiring.app_server_url));
    app_server.insert("authToken".into(), json!(APP_SERVER_TOKEN_REF));

    object_at(
        object_at(object_at(snapshot, "gateway"), "nodes"),
        "commands",
    )
    .insert("allow".into(), json!(NODE_COMMANDS));

    if let Some(node) = &wiring.node {
        bind_node_workspace(snapshot, node);
    }
}

/// Routes the `main` agent's workspace files to `node`: the `file-transfer` plugin's workspace
/// mapping (`nodeId` + `remoteRoot`, both required by the 2026.9.6 plugin) and the node's file
/// policy, which the plugin needs as well (deny-by-default): reads of the root and everything
/// under it, writes under it, no prompts, no symlinks followed. The Driver owns the plugin's configuration: an
/// earlier binding (and any user setting of the plugin) is replaced.
pub fn bind_node_workspace(snapshot: &mut Map<String, Value>, node: &NodeWorkspace<'_>) {
    let root = match node.remote_root.trim_end_matches('/') {
        "" => "/",
        trimmed => trimmed,
    };
    let below = format!("{}/**", root.trim_end_matches('/'));
    let file_transfer = object_at(
        object_at(object_at(snapshot, "plugins"), "entries"),
        FILE_TRANSFER_PLUGIN_ID,
    );
    file_transfer.insert("enabled".into(), json!(true));
    file_transfer.insert(
        "config".into(),
        json!({
            "policyVersion": 2,
            "workspaces": {MAIN_AGENT_ID: {"nodeId": node.node_id, "remoteRoot": root}},
            "nodes": {node.node_id: {
                "ask": "off",
                "allowReadPaths": [root, below],
                "allowWritePaths": [below],
                "followSymlinks": false,
            }},
        }),
    );
}

/// `doc[key]` as an object, replacing anything that is not one.
fn object_at<'a>(doc: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = doc.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

/// `doc[key]` as an array, replacing anything that is not one.
fn array_at<'a>(doc: &'a mut Map<String, Value>, key: &str) -> &'a mut Vec<Value> {
    let entry = doc.entry(key.to_owned()).or_insert_with(|| json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    entry.as_array_mut().expect("just made an array")
}

fn push_unique(list: &mut Vec<Value>, item: &str) {
    if !list.iter().any(|v| v.as_str() == Some(item)) {
        list.push(json!(item));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIRING: DedicatedWiring<'static> = DedicatedWiring {
        app_server_url: "ws://127.0.0.1:41000",
        node: None,
    };

    fn doc(value: Value) -> Map<String, Value> {
        value.as_object().expect("an object").clone()
    }

    #[test]
    fn an_empty_snapshot_gets_every_driver_key() {
        let mut snapshot = Map::new();
        render_dedicated(&mut snapshot, &WIRING);
        assert_eq!(
            Value::Object(snapshot),
            json!({
                "plugins": {
                    "allow": ["codex", "file-transfer"],
                    "entries": {"codex": {"enabled": true, "config": {"appServer": {
                        "transport": "websocket", "url": "ws://127.0.0.1:41000",
                        "authToken": "${APP_SERVER_TOKEN}"}}}},
                },
                "gateway": {"nodes": {"commands": {"allow": NODE_COMMANDS}}},
            })
        );
    }

    #[test]
    fn user_keys_are_kept_and_driver_keys_win() {
        let mut snapshot = doc(json!({
            "gateway": {"port": 18789, "nodes": {"commands": {"allow": ["system.run"],
                "deny": ["camera.snap"]}}},
            "plugins": {
                "allow": ["codex", "memory-core"],
                "load": {"paths": ["/rt/codex/node_modules/@openclaw/codex", "/extra"]},
                "entries": {
                    "codex": {"enabled": false, "config": {"appServer": {
                        "mode": "guardian", "approvalPolicy": "on-request", "sandbox": "read-only",
                        "transport": "stdio", "url": "${APP_SERVER_URL}", "authToken": "${APP_SERVER_TOKEN}"}}},
                    "memory-core": {"enabled": true},
                },
            },
        }));
        render_dedicated(&mut snapshot, &WIRING);
        let plugins = &snapshot["plugins"];
        assert_eq!(
            plugins["allow"],
            json!(["codex", "memory-core", "file-transfer"])
        );
        assert_eq!(
            plugins["load"]["paths"],
            json!(["/rt/codex/node_modules/@openclaw/codex", "/extra"]),
            "a user's own load paths are kept"
        );
        assert_eq!(plugins["entries"]["memory-core"], json!({"enabled": true}));
        assert_eq!(plugins["entries"]["codex"]["enabled"], json!(true));
        assert_eq!(
            plugins["entries"]["codex"]["config"]["appServer"],
            json!({"mode": "guardian", "approvalPolicy": "on-request", "sandbox": "read-only",
                "transport": "websocket", "url": "ws://127.0.0.1:41000",
                "authToken": "${APP_SERVER_TOKEN}"})
        );
        assert_eq!(
            snapshot["gateway"],
            json!({"port": 18789, "nodes": {"commands": {"allow": NODE_COMMANDS,
                "deny": ["camera.snap"]}}})
        );
    }

    #[test]
    fn values_of_the_wrong_type_are_replaced() {
        let mut snapshot = doc(json!({"plugins": {"allow": "codex", "load": [],
            "entries": {"codex": {"config": "x"}}}, "gateway": {"nodes": null}}));
        render_dedicated(&mut snapshot, &WIRING);
        assert_eq!(
            snapshot["plugins"]["allow"],
            json!(["codex", "file-transfer"])
        );
        assert_eq!(
            snapshot["plugins"]["entries"]["codex"]["config"]["appServer"]["transport"],
            "websocket"
        );
        assert_eq!(
            snapshot["gateway"]["nodes"]["commands"]["allow"],
            json!(NODE_COMMANDS)
        );
    }

    #[test]
    fn rendering_twice_changes_nothing() {
        let mut once = Map::new();
        render_dedicated(&mut once, &WIRING);
        let mut twice = once.clone();
        render_dedicated(&mut twice, &WIRING);
        assert_eq!(once, twice);
    }

    #[test]
    fn the_node_binding_maps_main_and_grants_the_root_only() {
        let node = NodeWorkspace {
            node_id: "b5fadac9",
            remote_root: "/agents/a1/harness/workspace/",
        };
        let mut with_node = Map::new();
        render_dedicated(
            &mut with_node,
            &DedicatedWiring {
                node: Some(node),
                ..WIRING
            },
        );
        let mut bound_later = Map::new();
        render_dedicated(&mut bound_later, &WIRING);
        bind_node_workspace(&mut bound_later, &node);
        assert_eq!(
            with_node, bound_later,
            "render with a node = bind afterwards"
        );
        assert_eq!(
            with_node["plugins"]["entries"]["file-transfer"],
            json!({"enabled": true, "config": {
                "policyVersion": 2,
                "workspaces": {"main": {"nodeId": "b5fadac9",
                    "remoteRoot": "/agents/a1/harness/workspace"}},
                "nodes": {"b5fadac9": {"ask": "off",
                    "allowReadPaths": ["/agents/a1/harness/workspace", "/agents/a1/harness/workspace/**"],
                    "allowWritePaths": ["/agents/a1/harness/workspace/**"],
                    "followSymlinks": false}},
            }})
        );

        // A new node (next revision) replaces the earlier binding and its grants.
        bind_node_workspace(
            &mut with_node,
            &NodeWorkspace {
                node_id: "c0ffee",
                remote_root: "/w",
            },
        );
        let config = &with_node["plugins"]["entries"]["file-transfer"]["config"];
        assert_eq!(config["workspaces"]["main"]["nodeId"], "c0ffee");
        assert_eq!(
            config["nodes"].as_object().map(|n| n.len()),
            Some(1),
            "{config}"
        );
    }
}
