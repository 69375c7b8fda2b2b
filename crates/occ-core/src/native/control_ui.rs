//! The native Control UI of an Agent's gateway, served to people through occ's proxy.
//!
//! A Configuration opts in with `gateway.controlUi.enabled: true`. The gateway of such a revision
//! is rendered in OpenClaw's trusted-proxy mode: the proxy (occ, connecting from the gateway's
//! loopback: the process and SSH Drivers' forwards and the Kubernetes port-forward all arrive
//! there) names the person's session identity [`PROXY_IDENTITY`] in [`IDENTITY_HEADER`], and
//! occ's own clients (readiness, workspace files, chat, enrollment) prove themselves with the
//! gateway credential as `auth.password`, because trusted-proxy mode refuses a shared token.
//! Browser origins are checked by occ; upstream every proxied request carries the one origin
//! the gateway allows, [`UPSTREAM_ORIGIN`].

use serde_json::{Map, Value, json};

/// The header the gateway reads the proxied identity from.
pub const IDENTITY_HEADER: &str = "x-occ-identity";
/// The identity occ's proxy presents for a person it admitted.
pub const PROXY_IDENTITY: &str = "occ-native-admin";
/// The runtime role every proxied person holds: stock OpenClaw cannot tell people apart behind
/// one proxy identity, so the only role is the reference's shared administrator.
pub const RUNTIME_ROLE: &str = "platform-administrator";
/// The scopes a proxied session gets (the reference's `platform-administrator` runtime role).
pub const PROXY_SCOPES: [&str; 1] = ["operator.admin"];
/// The browser origin every proxied request carries upstream (occ checks the real one).
pub const UPSTREAM_ORIGIN: &str = "http://occ-native-admin.invalid";
/// The client address occ's proxy reports: the gateway requires a non-loopback client behind a
/// trusted proxy, and a browser on occ's own host is loopback, so occ names the RFC 5737
/// documentation address instead of inventing a real one.
pub const FORWARDED_CLIENT: &str = "192.0.2.10";

/// Whether the document opts into the Control UI.
pub fn enabled(doc: &Map<String, Value>) -> bool {
    control_ui(doc)
        .and_then(|ui| ui.get("enabled"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Why the document's Control UI cannot be offered through occ, when it opts in but also asks
/// for something occ refuses to proxy.
pub fn unsupported_reason(doc: &Map<String, Value>) -> Option<&'static str> {
    let ui = control_ui(doc)?;
    for flag in [
        "dangerouslyDisableDeviceAuth",
        "dangerouslyAllowHostHeaderOriginFallback",
        "allowInsecureAuth",
    ] {
        if ui.get(flag).and_then(Value::as_bool) == Some(true) {
            return Some(flag);
        }
    }
    if ui.get("basePath").is_some_and(|p| p.as_str() != Some("/")) {
        return Some("basePath");
    }
    None
}

/// Renders trusted-proxy authentication into `gateway` (an opted-in document's `gateway`
/// object): `credential` is what occ's own clients present as the password.
pub fn render_auth(gateway: &mut Map<String, Value>, credential: &str) {
    gateway.insert(
        "auth".into(),
        json!({
            "mode": "trusted-proxy",
            "password": credential,
            "trustedProxy": {
                "userHeader": IDENTITY_HEADER,
                "allowLoopback": true,
                "allowUsers": [PROXY_IDENTITY],
                // The browser's device is enrolled on the proxy's word (occ admitted the person),
                // instead of waiting for an approval nobody can give from the UI.
                "deviceAutoApprove": {"enabled": true, "scopes": PROXY_SCOPES},
            },
            "identityScopes": {PROXY_IDENTITY: PROXY_SCOPES},
        }),
    );
    gateway.insert("trustedProxies".into(), json!(["127.0.0.1", "::1"]));
    if let Some(ui) = gateway.get_mut("controlUi").and_then(Value::as_object_mut) {
        ui.insert("allowedOrigins".into(), json!([UPSTREAM_ORIGIN]));
    }
}

fn control_ui(doc: &Map<String, Value>) -> Option<&Map<String, Value>> {
    doc.get("gateway")?.get("controlUi")?.as_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn only_an_explicit_true_opts_in() {
        assert!(enabled(&doc(
            json!({"gateway": {"controlUi": {"enabled": true}}})
        )));
        assert!(!enabled(&doc(
            json!({"gateway": {"controlUi": {"enabled": false}}})
        )));
        assert!(!enabled(&doc(json!({"gateway": {}}))));
        assert!(!enabled(&doc(
            json!({"gateway": {"controlUi": {"enabled": "true"}}})
        )));
    }

    #[test]
    fn dangerous_switches_and_a_base_path_are_not_proxied() {
        let with = |ui: Value| doc(json!({"gateway": {"controlUi": ui}}));
        assert_eq!(
            unsupported_reason(&with(
                json!({"enabled": true, "dangerouslyDisableDeviceAuth": true})
            )),
            Some("dangerouslyDisableDeviceAuth")
        );
        assert_eq!(
            unsupported_reason(&with(json!({"enabled": true, "basePath": "/ui"}))),
            Some("basePath")
        );
        assert_eq!(unsupported_reason(&with(json!({"enabled": true}))), None);
    }

    #[test]
    fn trusted_proxy_replaces_the_token_and_pins_the_allowed_origin() {
        let mut gateway = doc(json!({
            "auth": {"mode": "token", "token": "x"},
            "controlUi": {"enabled": true, "allowedOrigins": ["*"]},
        }));
        render_auth(&mut gateway, "${OPENCLAW_GATEWAY_TOKEN}");
        assert_eq!(gateway["auth"]["mode"], "trusted-proxy");
        assert_eq!(gateway["auth"]["password"], "${OPENCLAW_GATEWAY_TOKEN}");
        assert!(gateway["auth"].get("token").is_none());
        assert_eq!(
            gateway["controlUi"]["allowedOrigins"],
            json!([UPSTREAM_ORIGIN])
        );
        assert_eq!(
            gateway["auth"]["identityScopes"][PROXY_IDENTITY],
            json!(["operator.admin"])
        );
        assert_eq!(
            gateway["auth"]["trustedProxy"]["deviceAutoApprove"],
            json!({"enabled": true, "scopes": ["operator.admin"]})
        );
    }
}
