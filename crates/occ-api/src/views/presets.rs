//! Presets and credential sources: what a Namespace keeps for making new Agents (templates,
//! saved provider connections), never a credential's value.

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

/// A Preset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresetView {
    id: String,
    namespace_id: String,
    name: String,
    #[schema(value_type = Object)]
    template: serde_json::Value,
    created_at: String,
}

impl From<&occ_core::preset::Preset> for PresetView {
    fn from(p: &occ_core::preset::Preset) -> Self {
        Self {
            id: p.id.to_string(),
            namespace_id: p.namespace_id.to_string(),
            name: p.name.to_string(),
            template: p.template.clone(),
            created_at: p.created_at.to_string(),
        }
    }
}

/// A credential source: its type, settings and the Secrets it names (never a value).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSourceView {
    id: String,
    namespace_id: String,
    name: String,
    #[serde(rename = "type")]
    source_type: String,
    #[schema(value_type = Object)]
    config: Value,
    #[schema(value_type = Object)]
    secrets: Value,
    /// `registering` | `ready` | `deleting` (occ's built-in gateway: always `ready`).
    state: &'static str,
    #[schema(value_type = Object)]
    r#ref: Value,
    /// The Credential Gateway's view of it.
    #[schema(value_type = Object)]
    status: Value,
}

impl From<&occ_core::credential_source::CredentialSource> for CredentialSourceView {
    fn from(s: &occ_core::credential_source::CredentialSource) -> Self {
        let state = s.state().as_str();
        Self {
            id: s.id.to_string(),
            namespace_id: s.namespace_id.to_string(),
            name: s.name.to_string(),
            source_type: s.source_type.clone(),
            config: json!(s.config),
            secrets: json!(s.secrets),
            state,
            r#ref: json!({"kind": "credential_source", "namespaceId": s.namespace_id, "id": s.id}),
            status: json!({ "state": state }),
        }
    }
}
