//! The Presets occ seeds into every Namespace.

use serde_json::Value;

use super::{Preset, parse_template, seed_digest};
use crate::id::{NamespaceId, PresetId};
use crate::validate::Problems;
use crate::{Name, Timestamp};

/// The Presets every Namespace starts with: editable and deletable like any other; a Namespace
/// that still holds one as occ wrote it can be deleted (the copy goes with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinPreset {
    /// An embedded OpenClaw Agent on an OpenAI-compatible endpoint (OpenAI's by default), its
    /// key given when it is used and kept as a Secret bound as `MODEL_API_KEY`.
    StandardOpenclaw,
    /// A dedicated Codex Agent, signing in with an OpenAI API key given when it is used.
    StandardCodex,
}

impl BuiltinPreset {
    /// Every built-in Preset, in the order they are listed.
    pub const ALL: [BuiltinPreset; 2] = [Self::StandardOpenclaw, Self::StandardCodex];

    /// Its name.
    pub fn name(self) -> Name {
        let name = match self {
            Self::StandardOpenclaw => "Standard OpenClaw",
            Self::StandardCodex => "Standard Codex",
        };
        name.parse().expect("a valid name")
    }

    /// Its template (admitted by [`parse_template`]; a unit test holds it to that).
    pub fn template(self) -> Value {
        let name = serde_json::json!({"type": "string", "description": "The new Agent's name"});
        match self {
            Self::StandardOpenclaw => serde_json::json!({
                "variables": {
                    "name": name,
                    "model": {"type": "string", "description": "A model id the endpoint serves, e.g. gpt-5.6-sol"},
                    "baseUrl": {"type": "string", "default": "https://api.openai.com/v1",
                        "description": "The OpenAI-compatible endpoint (OpenAI's, or your own, e.g. http://127.0.0.1:8000/v1)"},
                    "modelKey": {"type": "password",
                        "description": "The endpoint's API key (kept as a Secret of the Namespace)"}
                },
                "agent": {"name": "{{ vars.name }}", "executionMode": "embedded",
                          "harnessAuth": {"method": "runtime"}},
                "configuration": {
                    "values": {
                        "agents": {"defaults": {"model": {"primary": "openai-compatible/{{ vars.model }}"}}},
                        "models": {"providers": {"openai-compatible": {
                            "baseUrl": "{{ vars.baseUrl }}", "api": "openai-completions",
                            "apiKey": "${MODEL_API_KEY}",
                            "models": [{"id": "{{ vars.model }}", "name": "{{ vars.model }}"}]}}}
                    },
                    "secretBindings": {"MODEL_API_KEY":
                        {"source": {"kind": "secret", "id": "{{ vars.modelKey }}"}}}
                }
            }),
            Self::StandardCodex => serde_json::json!({
                "variables": {
                    "name": name,
                    "model": {"type": "string", "description": "A model id Codex serves, e.g. gpt-5.6-sol"},
                    "modelSecret": {"type": "password",
                        "description": "The OpenAI API key Codex signs in with (kept as a Secret of the Namespace)"}
                },
                "agent": {"name": "{{ vars.name }}", "executionMode": "dedicated",
                          "harnessAuth": {"method": "api_key", "secret": "{{ vars.modelSecret }}"}},
                "configuration": {
                    "values": {
                        "agents": {"defaults": {"model": "openai/{{ vars.model }}",
                            "models": {"openai/{{ vars.model }}": {"agentRuntime": {"id": "codex"}}}}}
                    }
                }
            }),
        }
    }

    /// The built-in as a new Preset of Namespace `ns` seeded at `seeded_at` (each a millisecond
    /// after the one before, so lists show them in [`Self::ALL`]'s order).
    pub fn preset(self, ns: &NamespaceId, seeded_at: Timestamp) -> Preset {
        let name = self.name();
        // As admission stores it (Secret references completed with the Namespace).
        let template = parse_template(&self.template(), ns, &mut Problems::new())
            .expect("a built-in Preset is admitted as written");
        let rank = Self::ALL.iter().position(|b| *b == self).unwrap_or(0) as u64;
        Preset {
            id: PresetId::generate(),
            namespace_id: ns.clone(),
            seed_digest: Some(seed_digest(&name, &template)),
            name,
            template,
            created_at: seeded_at.plus(std::time::Duration::from_millis(rank)),
        }
    }
}
