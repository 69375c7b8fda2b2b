//! The native Control UI of an Agent's gateway, served to people through occ's proxy.
//!
//! A Configuration opts in with `gateway.controlUi.enabled: true`. The gateway of such a revision
//! is rendered in OpenClaw's trusted-proxy mode: the proxy (occ, connecting from the gateway's
//! loopback: the process and SSH Drivers' forwards and the Kubernetes port-forward all arrive
//! there) names the person's session identity [`PROXY_IDENTITY`] in a header whose *name* holds
//! the revision's secret proxy key ([`identity_header`]), and occ's own clients (readiness,
//! workspace files, chat, enrollment) prove themselves with the gateway credential as
//! `auth.password`, because trusted-proxy mode refuses a shared token. Browser origins are
//! checked by occ; upstream every proxied request carries the one origin the gateway allows,
//! [`UPSTREAM_ORIGIN`].
//!
//! **Why the key is in the header's name.** OpenClaw offers no proxy secret in trusted-proxy
//! mode, and the identity a header carries is logged, shown in presence and stored in the
//! gateway's user profiles, so it cannot be the secret. The header name is none of these, and
//! the rendered `userHeader` is `x-occ-proxy-${OCC_PROXY_KEY}`: a gateway whose environment
//! lacks the key keeps the `${…}` literally, which no HTTP request can name (a header name
//! cannot contain braces), so it admits nobody by header. A local process that reaches the
//! gateway's port without the key (another Agent's tools, a harness, another tenant on a shared
//! host) is refused; the key is derived from the gateway credential and the revision, so every
//! Driver delivers it beside that credential and occ's proxy derives it from the credential it
//! already reads.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use crate::RevisionId;

/// The header occ's proxy used before per-revision keys (refused by every gateway now; the
/// proxy strips it, with every other `x-occ-*` header, from what browsers send).
pub const LEGACY_IDENTITY_HEADER: &str = "x-occ-identity";
/// The prefix of the identity header's name; the revision's proxy key follows it.
pub const IDENTITY_HEADER_PREFIX: &str = "x-occ-proxy-";
/// The variable a Control UI revision's gateway gets its proxy key in.
pub const PROXY_KEY_VARIABLE: &str = "OCC_PROXY_KEY";
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

/// The revision's proxy key: 40 hex digits of an HMAC-SHA256 of the revision id under the
/// gateway credential. Only holders of the credential can derive it, and it differs per
/// revision.
pub fn proxy_key(credential: &str, revision: &RevisionId) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(credential.as_bytes())
        .expect("HMAC takes any key length");
    mac.update(b"occ-control-ui-proxy-key:v1:");
    mac.update(revision.as_str().as_bytes());
    hex::encode(mac.finalize().into_bytes())[..40].to_owned()
}

/// The identity header's name for a proxy key.
pub fn identity_header(proxy_key: &str) -> String {
    format!("{IDENTITY_HEADER_PREFIX}{proxy_key}")
}

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
/// object): `credential` is what occ's own clients present as the password; the identity
/// header's name carries `${OCC_PROXY_KEY}`. The operator terminal is turned off.
pub fn render_auth(gateway: &mut Map<String, Value>, credential: &str) {
    gateway.insert(
        "auth".into(),
        json!({
            "mode": "trusted-proxy",
            "password": credential,
            "trustedProxy": {
                "userHeader": format!("{IDENTITY_HEADER_PREFIX}${{{PROXY_KEY_VARIABLE}}}"),
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
    // The operator terminal (on by default) would hand every admitted person a host shell.
    gateway.insert("terminal".into(), json!({"enabled": false}));
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
        // The identity header's name carries the revision's key, from the environment.
        assert_eq!(
            gateway["auth"]["trustedProxy"]["userHeader"],
            "x-occ-proxy-${OCC_PROXY_KEY}"
        );
        assert_eq!(gateway["terminal"], json!({"enabled": false}));
    }

    #[test]
    fn the_proxy_key_is_per_credential_and_revision() {
        let one = RevisionId::generate();
        let two = RevisionId::generate();
        let key = proxy_key("credential-a", &one);
        assert_eq!(key.len(), 40);
        assert!(
            key.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(key, proxy_key("credential-a", &one));
        assert_ne!(key, proxy_key("credential-b", &one));
        assert_ne!(key, proxy_key("credential-a", &two));
        assert_eq!(identity_header(&key), format!("x-occ-proxy-{key}"));
        assert!(http_token(&identity_header(&key)));
    }

    /// A header name is an RFC 9110 token: `${…}` can never be one, which is why a gateway
    /// without the key admits nobody by header.
    fn http_token(name: &str) -> bool {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    }

    #[test]
    fn an_unsubstituted_header_name_is_no_header_name() {
        assert!(!http_token("x-occ-proxy-${OCC_PROXY_KEY}"));
    }
}
