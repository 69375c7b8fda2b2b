//! Model discovery (`POST /namespaces/{ns}/agents/models`): the models a provider offers to a
//! key, for someone choosing an Agent's model. It needs `agent:create` in the Namespace (who
//! may create an Agent may look up what it could use); the key goes to the configured provider
//! only and is never stored, logged or audited.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::{Error, ErrorCode, NamespaceId};
use occ_drivers::model_catalog::CatalogError;
pub use occ_drivers::model_catalog::{ModelInfo, ModelProvider};

use crate::namespaces::live_namespace;
use crate::{Controller, Request};

/// How the key authenticates to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryAuth {
    /// A provider API key.
    ApiKey,
    /// A ChatGPT personal access token (Codex): not readable here.
    CodexPat,
}

/// The validated body of model discovery.
#[derive(Debug, Clone)]
pub struct DiscoveryInput {
    /// Whose models.
    pub provider: ModelProvider,
    /// How the key authenticates.
    pub auth: DiscoveryAuth,
    /// The key (never kept).
    pub api_key: String,
}

impl Controller {
    /// The models `input.provider` offers to `input.api_key`, sorted by id.
    pub async fn discover_models(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: DiscoveryInput,
    ) -> Result<Vec<ModelInfo>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Create,
                &ResourceRef::collection(ResourceKind::Agent, ns),
                "openclaw.agents.models.discover",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        drop(tx);
        if input.auth == DiscoveryAuth::CodexPat {
            return Err(Error::new(
                ErrorCode::NotImplemented,
                "Listing the models of a ChatGPT personal access token is not available; use an API key",
            ));
        }
        let catalog = self.model_catalog.as_ref().ok_or_else(|| {
            Error::new(
                ErrorCode::DependencyUnavailable,
                "Model discovery is not configured on this installation",
            )
        })?;
        let provider = input.provider.as_str();
        catalog
            .models(input.provider, &input.api_key)
            .await
            .map_err(|e| match e {
                CatalogError::Rejected => Error::new(
                    ErrorCode::ModelDiscoveryCredentialsRejected,
                    format!("The {provider} API refused the key"),
                ),
                CatalogError::RateLimited(after) => {
                    let error = Error::new(
                        ErrorCode::ModelDiscoveryRateLimited,
                        format!("The {provider} API is rate limiting; try again later"),
                    );
                    error.with_retry_after(after.unwrap_or(30))
                }
                CatalogError::Unavailable(why) => Error::new(
                    ErrorCode::ModelDiscoveryUnavailable,
                    format!("The {provider} API is unavailable: {why}"),
                ),
                CatalogError::InvalidResponse(why) => Error::new(
                    ErrorCode::ModelDiscoveryInvalidResponse,
                    format!("The {provider} API's answer is not a model list: {why}"),
                ),
            })
    }
}
