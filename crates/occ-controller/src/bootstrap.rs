//! First-run bootstrap: the Installation, the human administrator, the bootstrap service
//! principal, the administrator Role bound to both, the bootstrap service key, and the Namespace
//! `default` (provisioning, with its work queued) — one transaction. The key is handed to a
//! [`KeySink`] (which writes it to a private file) *before* the commit, and discarded if the
//! commit fails. Re-running on a bootstrapped database verifies and never reissues a key.

use occ_core::audit::{AuditEvent, AuditKind, AuditOutcome};
use occ_core::authz::{Evidence, ResourceRef, administrator_permissions};
use occ_core::iam::{
    AccessBinding, Identity, IdentityKind, Role, ServiceKey, ServicePrincipal, UserAccount,
};
use occ_core::resource::{Installation, Namespace, NamespaceStatus};
use occ_core::work::NewWork;
use occ_core::{Error, IamId, InstallationId, Name, NamespaceId, Timestamp};

use crate::auth::{
    DEFAULT_KEY_TTL, IssuedKey, PASSWORD_CHARS, credential_hash, hash_password, new_service_key,
};
use occ_store::Authorized;

use crate::Controller;

/// The name of the Installation service administrator bootstrap creates.
pub const BOOTSTRAP_SERVICE_PRINCIPAL: &str = "installation-administrator";

/// What bootstrap creates.
#[derive(Debug, Clone)]
pub struct BootstrapInput {
    /// Installation display name.
    pub installation_name: Name,
    /// The administrator's email.
    pub admin_email: String,
    /// The administrator's password (12..128 characters).
    pub admin_password: String,
}

/// Where the bootstrap key goes (a private file), before the commit.
pub trait KeySink {
    /// Persists the key durably; an error aborts the bootstrap.
    fn persist(&self, key: &IssuedKey, installation: &Installation) -> Result<(), Error>;
    /// Removes what `persist` wrote (the commit failed).
    fn discard(&self);
}

/// The outcome of a bootstrap.
#[derive(Debug, Clone)]
pub enum BootstrapOutcome {
    /// A fresh Installation.
    Created {
        /// The Installation.
        installation: Installation,
        /// The administrator account.
        admin: Box<UserAccount>,
        /// The bootstrap service principal.
        service_principal_id: IamId,
        /// The Namespace `default`.
        namespace: Box<Namespace>,
    },
    /// It already existed; nothing was created or reissued.
    Existing {
        /// The Installation.
        installation: Installation,
    },
}

impl Controller {
    /// Bootstraps the Installation (idempotent); see [`bootstrap`].
    pub async fn bootstrap(
        &self,
        input: &BootstrapInput,
        sink: &dyn KeySink,
    ) -> Result<BootstrapOutcome, Error> {
        let outcome = bootstrap(&self.store, input, sink).await?;
        self.bootstrapped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(outcome)
    }
}

/// Bootstraps the Installation on `store` (idempotent: an existing Installation is verified and
/// nothing is created or reissued).
///
/// No identity exists yet, so nothing can be decided: the operator running it is the authority,
/// and its writes carry [`Evidence::bootstrap`].
#[expect(
    clippy::disallowed_methods,
    reason = "bootstrap creates the first identities and policy; there is no caller to authorize"
)]
pub async fn bootstrap(
    store: &occ_store::Store,
    input: &BootstrapInput,
    sink: &dyn KeySink,
) -> Result<BootstrapOutcome, Error> {
    {
        let pw_len = input.admin_password.chars().count();
        if !(PASSWORD_CHARS.0..=PASSWORD_CHARS.1).contains(&pw_len) {
            return Err(Error::invalid_request(
                "The administrator password must have 12 to 128 characters",
            ));
        }
        let email = input.admin_email.trim().to_lowercase();
        if !(3..=320).contains(&email.len()) || !email.contains('@') {
            return Err(Error::invalid_request(
                "The administrator email is not valid",
            ));
        }
        let password = input.admin_password.clone();
        let phc = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(|e| Error::internal(format!("password hashing: {e}")))??;

        let mut tx = Authorized::new(store.begin().await?, Evidence::bootstrap())?;
        if let Some(installation) = tx.installation_get().await? {
            // verify what a previous bootstrap left
            if tx.user_by_email(&email).await?.is_none() {
                tracing::warn!(
                    "the Installation exists but the configured administrator email has no account"
                );
            }
            return Ok(BootstrapOutcome::Existing { installation });
        }
        let now = Timestamp::now();
        let installation = Installation {
            id: InstallationId::generate(),
            name: input.installation_name.clone(),
            created_at: now,
        };
        let user_id = IamId::generate_user();
        let human = Identity {
            id: IamId::generate_principal(),
            kind: IdentityKind::Principal,
            namespace_id: None,
            agent_id: None,
            issuer: Some(format!("occ:installation:{}:password", installation.id)),
            subject: Some(user_id.to_string()),
            created_at: now,
        };
        let admin = UserAccount {
            id: user_id,
            email,
            name: "Administrator".into(),
            principal_id: human.id.clone(),
            version: 1,
            disabled_at: None,
            created_at: now,
        };
        let service = ServicePrincipal {
            id: IamId::generate_service_principal(),
            namespace_id: None,
            name: Some(BOOTSTRAP_SERVICE_PRINCIPAL.into()),
            disabled_at: None,
            created_at: now,
        };
        let role = Role {
            id: IamId::generate_role(true),
            namespace_id: None,
            name: Some("Installation administrator".into()),
            permissions: administrator_permissions(),
            created_at: now,
        };
        let bind = |subject: &IamId, infix: &str| AccessBinding {
            id: IamId::generate_binding(infix),
            namespace_id: None,
            subject_id: subject.clone(),
            role_id: role.id.clone(),
            resource: None,
            runtime_role: None,
            created_at: now,
        };
        let key = IssuedKey {
            key: ServiceKey {
                id: IamId::generate_service_key(),
                service_principal_id: service.id.clone(),
                namespace_id: None,
                name: "bootstrap-admin".into(),
                expires_at: now.plus(DEFAULT_KEY_TTL),
                created_at: now,
            },
            plaintext: new_service_key(),
        };
        let namespace = Namespace {
            id: NamespaceId::generate(),
            name: Name::parse("default").map_err(|e| Error::internal(e.to_string()))?,
            existing_namespace: None,
            status: NamespaceStatus::Provisioning,
            created_at: now,
            deleted_at: None,
        };
        tx.installation_insert(&installation).await?;
        tx.identity_insert(&human).await?;
        tx.user_insert(&admin, &phc).await?;
        tx.service_principal_insert(&service).await?;
        tx.role_insert(&role).await?;
        tx.binding_insert(&bind(&human.id, "admin_")).await?;
        tx.binding_insert(&bind(&service.id, "bootstrap_service_admin_"))
            .await?;
        tx.service_key_insert(&key.key, &credential_hash(&key.plaintext))
            .await?;
        tx.namespace_insert(&namespace).await?;
        tx.namespace_seed_presets(&namespace).await?;
        tx.work_enqueue(&NewWork::namespace_ready(&namespace.id, &service.id))
            .await?;
        let event = |action: &str, resource: &ResourceRef| {
            AuditEvent::new(
                AuditKind::Bootstrap,
                service.id.as_str(),
                action,
                resource,
                AuditOutcome::Success,
            )
            .metadata("source", "occ")
            .metadata("schemaVersion", 1)
        };
        tx.audit_append(
            &event(
                "openclaw.installation.bootstrap",
                &ResourceRef::installation(&installation.id),
            )
            .detail("administratorPrincipalId", human.id.as_str())
            .detail("servicePrincipalId", service.id.as_str())
            .detail("roleId", role.id.as_str())
            .detail("serviceKeyId", key.key.id.as_str()),
        )
        .await?;
        tx.audit_append(&event(
            "openclaw.namespaces.create",
            &ResourceRef::namespace(&namespace.id),
        ))
        .await?;
        sink.persist(&key, &installation)?;
        if let Err(e) = tx.commit().await {
            if !matches!(e, occ_store::StoreError::CommitOutcomeUnknown(_)) {
                sink.discard();
            }
            return Err(e.into());
        }
        Ok(BootstrapOutcome::Created {
            installation,
            admin: Box::new(admin),
            service_principal_id: service.id,
            namespace: Box::new(namespace),
        })
    }
}
