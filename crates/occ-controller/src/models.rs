//! Model discovery (`POST /namespaces/{ns}/agents/models`): the models a provider offers to a
//! key, for someone choosing an Agent's model. It needs `agent:create` in the Namespace (who
//! may create an Agent may look up what it could use); the key goes to the configured provider
//! only and is never stored, logged or audited. A saved connection (credential source) can be
//! asked the same way without the caller ever holding its key.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::compute::SecretText;
use occ_core::credential_source::{API_KEY_FIELD, BASE_URL_FIELD};
use occ_core::{CredentialSourceId, Error, ErrorCode, NamespaceId};
use occ_drivers::model_catalog::CatalogError;
pub use occ_drivers::model_catalog::{ModelInfo, ModelProvider};

use crate::authorization::found;
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
        self.catalog_models(input.provider, None, &input.api_key)
            .await
    }

    /// The models a saved connection's key is offered, at the connection's own endpoint when
    /// it names one (occ extension: the key never leaves the server, so the console can list
    /// models for a connection it cannot read). Needs `credential_source:operate`, as using
    /// the connection anywhere does.
    pub async fn credential_source_models(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &CredentialSourceId,
    ) -> Result<Vec<ModelInfo>, Error> {
        let target = ResourceRef::exact(ResourceKind::CredentialSource, ns, id);
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Operate,
                &target,
                "openclaw.credential_sources.models",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let source = found(tx.credential_source_get(ns, id).await?)?;
        let provider = ModelProvider::parse(&source.source_type).ok_or_else(|| {
            Error::new(
                ErrorCode::NotImplemented,
                format!(
                    "Listing the models of a {} credential source is not available",
                    source.source_type
                ),
            )
        })?;
        let key_ref = source
            .secrets
            .get(API_KEY_FIELD)
            .ok_or_else(|| Error::conflict("The credential source names no api_key Secret"))?;
        let meta = tx.secret_get(ns, &key_ref.id).await?.ok_or_else(|| {
            Error::conflict(format!(
                "The credential source's api_key Secret {} no longer exists",
                key_ref.id
            ))
        })?;
        drop(tx);
        let key = self
            .secrets
            .with_value(ns, &key_ref.id, &meta.locator, |v| {
                SecretText::new(v.to_owned())
            })
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "secret driver unavailable");
                Error::new(
                    ErrorCode::DependencyUnavailable,
                    "The credential source's key could not be read; try again",
                )
            })?;
        let base_url = source.config.get(BASE_URL_FIELD).map(String::as_str);
        self.catalog_models(provider, base_url, key.expose()).await
    }

    /// Asks the catalog, mapping its failures to the reference's codes (never the key).
    async fn catalog_models(
        &self,
        provider: ModelProvider,
        base_url: Option<&str>,
        api_key: &str,
    ) -> Result<Vec<ModelInfo>, Error> {
        let catalog = self.model_catalog.as_ref().ok_or_else(|| {
            Error::new(
                ErrorCode::DependencyUnavailable,
                "Model discovery is not configured on this installation",
            )
        })?;
        let name = provider.as_str();
        catalog
            .models(provider, base_url, api_key)
            .await
            .map_err(|e| match e {
                CatalogError::Rejected => Error::new(
                    ErrorCode::ModelDiscoveryCredentialsRejected,
                    format!("The {name} API refused the key"),
                ),
                CatalogError::RateLimited(after) => {
                    let error = Error::new(
                        ErrorCode::ModelDiscoveryRateLimited,
                        format!("The {name} API is rate limiting; try again later"),
                    );
                    error.with_retry_after(after.unwrap_or(30))
                }
                CatalogError::Unavailable(why) => Error::new(
                    ErrorCode::ModelDiscoveryUnavailable,
                    format!("The {name} API is unavailable: {why}"),
                ),
                CatalogError::InvalidResponse(why) => Error::new(
                    ErrorCode::ModelDiscoveryInvalidResponse,
                    format!("The {name} API's answer is not a model list: {why}"),
                ),
            })
    }
}
