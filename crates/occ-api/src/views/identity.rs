//! Views of who signs in: accounts, issued service keys and service principals.

use occ_core::iam::UserAccount;
use serde::Serialize;
use utoipa::ToSchema;

/// An account.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    id: String,
    email: String,
    name: String,
    principal_id: String,
}

impl From<&UserAccount> for AccountView {
    fn from(u: &UserAccount) -> Self {
        Self {
            id: u.id.to_string(),
            email: u.email.clone(),
            name: u.name.clone(),
            principal_id: u.principal_id.to_string(),
        }
    }
}

/// An account as its administrators see it (`getAuthAccount`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountStateView {
    user_id: String,
    principal_id: String,
    /// Send it back as `expectedVersion` to change the account.
    version: i64,
    disabled: bool,
    /// How the account signs in (occ: its password).
    methods: Vec<SignInMethodView>,
}

/// An account in the list of accounts (occ extension): the account and its state.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountListItemView {
    #[serde(flatten)]
    account: AccountView,
    version: i64,
    disabled: bool,
    created_at: String,
}

impl From<&UserAccount> for AccountListItemView {
    fn from(u: &UserAccount) -> Self {
        Self {
            account: AccountView::from(u),
            version: u.version,
            disabled: u.disabled_at.is_some(),
            created_at: u.created_at.to_string(),
        }
    }
}

/// One way an account signs in.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignInMethodView {
    method_id: String,
    provider_id: String,
    subject: String,
}

impl From<&UserAccount> for AccountStateView {
    fn from(u: &UserAccount) -> Self {
        Self {
            user_id: u.id.to_string(),
            principal_id: u.principal_id.to_string(),
            version: u.version,
            disabled: u.disabled_at.is_some(),
            methods: vec![SignInMethodView {
                method_id: format!("credential-{}", u.id),
                provider_id: "credential".into(),
                subject: u.id.to_string(),
            }],
        }
    }
}

/// A newly issued service key (the key appears only here).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuedKeyView {
    pub(crate) id: String,
    pub(crate) service_principal_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) namespace_id: Option<String>,
    pub(crate) name: String,
    pub(crate) expires_at: String,
    pub(crate) key: String,
}

impl From<&occ_controller::auth::IssuedKey> for IssuedKeyView {
    fn from(k: &occ_controller::auth::IssuedKey) -> Self {
        Self {
            id: k.key.id.to_string(),
            service_principal_id: k.key.service_principal_id.to_string(),
            namespace_id: k.key.namespace_id.as_ref().map(ToString::to_string),
            name: k.key.name.clone(),
            expires_at: k.key.expires_at.to_string(),
            key: k.plaintext.clone(),
        }
    }
}

/// A non-Agent service principal (occ extension).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePrincipalView {
    id: String,
    /// Absent for principals made before names existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Absent: Installation-wide.
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_id: Option<String>,
    /// Whether its keys are refused.
    disabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    disabled_at: Option<String>,
    created_at: String,
}

impl From<&occ_core::iam::ServicePrincipal> for ServicePrincipalView {
    fn from(p: &occ_core::iam::ServicePrincipal) -> Self {
        Self {
            id: p.id.to_string(),
            name: p.name.clone(),
            namespace_id: p.namespace_id.as_ref().map(ToString::to_string),
            disabled: p.disabled_at.is_some(),
            disabled_at: p.disabled_at.map(|t| t.to_string()),
            created_at: p.created_at.to_string(),
        }
    }
}
