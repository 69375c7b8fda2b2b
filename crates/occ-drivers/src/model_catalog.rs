//! Model discovery: which models a provider offers to a key (`GET {baseUrl}/models`), so a
//! person picking an Agent's model chooses from the provider's own list. The key is sent to
//! the configured provider only, in its header, and never kept, logged or echoed; a call is
//! bounded in time and in the size of the answer.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

/// The providers whose model lists occ can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelProvider {
    /// OpenAI's API (or an OpenAI-compatible endpoint): `Authorization: Bearer`.
    OpenAi,
    /// Anthropic's API: `x-api-key` and `anthropic-version`.
    Anthropic,
}

impl ModelProvider {
    /// The provider a wire name (a discovery request's `provider`, a credential source's
    /// `type`) names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(ModelProvider::OpenAi),
            "anthropic" => Some(ModelProvider::Anthropic),
            _ => None,
        }
    }
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelProvider::OpenAi => "openai",
            ModelProvider::Anthropic => "anthropic",
        }
    }
}

/// One model a provider offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The id a Configuration names (`gpt-5`, `claude-…`).
    pub id: String,
    /// A display name (the id when the provider gives none).
    pub name: String,
}

/// Why a model list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// The provider refused the key (401/403).
    #[error("the provider refused the key")]
    Rejected,
    /// The provider asked to slow down (429), with its `Retry-After` seconds.
    #[error("the provider is rate limiting")]
    RateLimited(Option<u64>),
    /// The provider could not be reached in time, or failed (5xx, other statuses).
    #[error("the provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider answered something that is not a model list (or too much of it).
    #[error("the provider's answer is not a model list: {0}")]
    InvalidResponse(String),
}

/// Reads providers' model lists.
#[async_trait]
pub trait ModelCatalog: Send + Sync {
    /// The models `provider` offers to `api_key`, sorted by id: at `base_url` (a saved
    /// connection's own endpoint) when given, else at the provider's configured one.
    async fn models(
        &self,
        provider: ModelProvider,
        base_url: Option<&str>,
        api_key: &str,
    ) -> Result<Vec<ModelInfo>, CatalogError>;
}

/// The longest a discovery call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest model list read (the public providers answer in well under 1 MiB).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// The Anthropic API version the request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The HTTP model catalog: each provider at its configured base URL.
#[derive(Debug, Clone)]
pub struct HttpModelCatalog {
    http: reqwest::Client,
    openai_base_url: String,
    anthropic_base_url: String,
}

impl HttpModelCatalog {
    /// A catalog reading `{base}/models` of each provider (e.g. `https://api.openai.com/v1`).
    pub fn new(openai_base_url: &str, anthropic_base_url: &str) -> Result<Self, String> {
        let http = crate::http_client(CALL_TIMEOUT)?;
        Ok(Self {
            http,
            openai_base_url: openai_base_url.trim_end_matches('/').to_owned(),
            anthropic_base_url: anthropic_base_url.trim_end_matches('/').to_owned(),
        })
    }
}

#[async_trait]
impl ModelCatalog for HttpModelCatalog {
    async fn models(
        &self,
        provider: ModelProvider,
        base_url: Option<&str>,
        api_key: &str,
    ) -> Result<Vec<ModelInfo>, CatalogError> {
        let base = base_url.map_or_else(
            || match provider {
                ModelProvider::OpenAi => self.openai_base_url.as_str(),
                ModelProvider::Anthropic => self.anthropic_base_url.as_str(),
            },
            |url| url.trim_end_matches('/'),
        );
        let request = match provider {
            ModelProvider::OpenAi => self.http.get(format!("{base}/models")).bearer_auth(api_key),
            ModelProvider::Anthropic => self
                .http
                .get(format!("{base}/models?limit=1000"))
                .header("x-api-key", api_key)
                .header("anthropic-version", ANTHROPIC_VERSION),
        };
        // Transport errors are described without their URL or headers.
        let mut response = request.send().await.map_err(|e| {
            CatalogError::Unavailable(if e.is_timeout() {
                "no answer within 10 s".into()
            } else {
                "the provider could not be reached".into()
            })
        })?;
        let status = response.status();
        match status.as_u16() {
            200 => {}
            401 | 403 => return Err(CatalogError::Rejected),
            429 => {
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok());
                return Err(CatalogError::RateLimited(retry_after));
            }
            other => return Err(CatalogError::Unavailable(format!("HTTP {other}"))),
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|_| CatalogError::Unavailable("the answer was cut off".into()))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(CatalogError::InvalidResponse("larger than 1 MiB".into()));
            }
            body.extend_from_slice(&chunk);
        }
        parse_models(&body)
    }
}

/// `{data: [{id, display_name?}…]}` (both providers' shape) → models sorted by id.
fn parse_models(body: &[u8]) -> Result<Vec<ModelInfo>, CatalogError> {
    let doc: Value = serde_json::from_slice(body)
        .map_err(|_| CatalogError::InvalidResponse("not JSON".into()))?;
    let items = doc["data"]
        .as_array()
        .ok_or_else(|| CatalogError::InvalidResponse("no data array".into()))?;
    let mut models = items
        .iter()
        .map(|item| {
            let id = item["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| CatalogError::InvalidResponse("a model without an id".into()))?;
            let name = item["display_name"].as_str().unwrap_or(id);
            Ok(ModelInfo {
                id: id.to_owned(),
                name: name.to_owned(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models.dedup_by(|a, b| a.id == b.id);
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_of_both_providers_parse_and_junk_does_not() {
        let openai =
            br#"{"object":"list","data":[{"id":"gpt-5","object":"model"},{"id":"gpt-4.1"}]}"#;
        assert_eq!(
            parse_models(openai).unwrap(),
            vec![
                ModelInfo {
                    id: "gpt-4.1".into(),
                    name: "gpt-4.1".into()
                },
                ModelInfo {
                    id: "gpt-5".into(),
                    name: "gpt-5".into()
                },
            ]
        );
        let anthropic = br#"{"data":[{"id":"claude-x","display_name":"Claude X","type":"model"}],"has_more":false}"#;
        assert_eq!(
            parse_models(anthropic).unwrap(),
            vec![ModelInfo {
                id: "claude-x".into(),
                name: "Claude X".into()
            }]
        );
        for junk in [
            &b"<html>"[..],
            br#"{"models":[]}"#,
            br#"{"data":[{"name":"x"}]}"#,
        ] {
            assert!(matches!(
                parse_models(junk),
                Err(CatalogError::InvalidResponse(_))
            ));
        }
    }
}
