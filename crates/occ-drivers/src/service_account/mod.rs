//! ServiceAccount Drivers: a Backend that makes provider accounts for occ's ServiceAccounts and
//! issues their credentials. The only one is ChatGPT's workspace Admin API ([`chatgpt`]).

pub mod chatgpt;

use async_trait::async_trait;
use occ_core::compute::SecretText;

pub use chatgpt::{ChatgptAccounts, ChatgptSettings};

/// A credential the provider issued: its id and the access token (which goes straight to the
/// Secret Driver; it is never logged or returned).
pub struct IssuedToken {
    /// The provider's id of the credential.
    pub id: String,
    /// The access token.
    pub access_token: SecretText,
}

/// Why a provider call failed (a message safe to log: no credential, no response body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AccountDriverError(pub String);

/// A Backend's ServiceAccount Driver.
#[async_trait]
pub trait AccountDriver: Send + Sync {
    /// The Backend id Agents select (`backendId`) to run with its accounts' credentials.
    fn backend_id(&self) -> &str;
    /// The provider workspace the accounts belong to.
    fn workspace_id(&self) -> &str;
    /// Makes a provider account; returns its id.
    async fn create_account(&self, name: &str) -> Result<String, AccountDriverError>;
    /// Removes a provider account (already gone is fine).
    async fn delete_account(&self, account_id: &str) -> Result<(), AccountDriverError>;
    /// Issues a credential to a provider account.
    async fn issue_credential(
        &self,
        account_id: &str,
        name: &str,
    ) -> Result<IssuedToken, AccountDriverError>;
    /// Revokes a credential (already gone is fine).
    async fn delete_credential(
        &self,
        account_id: &str,
        credential_id: &str,
    ) -> Result<(), AccountDriverError>;
}
