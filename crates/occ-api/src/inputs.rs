//! Request bodies → controller inputs. Each body is declared once with
//! [`request_body!`](crate::body): its typed fields, its parser and its OpenAPI schema. The value
//! types of their fields, each with its rule and its schema side by side, are in `fields.rs`;
//! the rules several requests share (Secret bindings, harness auth, workspace files, Secret values,
//! the native `openclaw.json` checks) live in `occ-core`.

mod account_fields;
mod fields;
mod model_fields;

pub use account_fields::*;
pub use fields::*;
pub use model_fields::*;

use occ_controller::agents::{AgentInput, AgentUpdate, Patch};
use occ_controller::auth::{AccountInput, ServiceKeyInput};
use occ_controller::configurations::ConfigurationInput;
use occ_controller::iam::{BindingInput, BindingTarget, RoleInput};
use occ_controller::models::DiscoveryInput;
use occ_controller::provisioning::ProvisionInput;
use occ_controller::service_principals::ServicePrincipalInput;
use occ_core::authz::{Action, ResourceKind};
use occ_core::provisioning::ProvisionSpec;
use occ_core::resource::{ExecutionMode, HarnessAuth, SecretBindings, WorkspaceFiles};
use occ_core::{ConfigurationId, IamId, Name, NamespaceId, RequestId};

use crate::body::request_body;

// --- bodies ----------------------------------------------------------------------------------

request_body! {
    /// `POST /namespaces`.
    pub struct NamespaceCreateBody {
        /// 1..200 characters, no outer whitespace or control characters.
        required "name" => name: Name,
        /// An operator-prepared Kubernetes namespace to adopt instead of provisioning one
        /// (Kubernetes Compute only, else 409; needs `installation:administer`, else 403).
        optional "existingNamespace" => existing_namespace: KubernetesNamespaceName,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/configurations`.
    pub struct ConfigurationCreateBody in NamespaceId {
        /// Always `agent`.
        required "kind" => kind: AgentKind,
        /// The native `openclaw.json` document. It must validate against the pinned OpenClaw
        /// runtime's own JSON Schema (what `occ runtime schema` prints) and occ's rules; every
        /// problem is a detail at its pointer under `/values`.
        required "values" => values: OpenclawDocument,
        /// Environment variable name → a Secret of this Namespace, at most 64.
        optional "secretBindings" => secret_bindings: SecretBindings,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/configurations/{configurationId}` (kind, generation and
    /// ids are unknown fields).
    pub struct ConfigurationUpdateBody in NamespaceId {
        /// The whole new document, validated as on create.
        required "values" => values: OpenclawDocument,
        /// Omitted keeps the bindings; `{}` clears them.
        optional "secretBindings" => secret_bindings: SecretBindings,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/presets`.
    pub struct PresetCreateBody in NamespaceId {
        /// Unique per Namespace.
        required "name" => name: Name,
        /// The template (`occ_core::preset`).
        required "template" => template: PresetTemplate,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/presets/{presetId}`: what is given replaces what is
    /// stored (a template wholesale); at least one of them.
    pub struct PresetUpdateBody in NamespaceId {
        /// A new name, unique per Namespace.
        optional "name" => name: Name,
        /// A new template.
        optional "template" => template: PresetTemplate,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/credential-sources`.
    pub struct CredentialSourceCreateBody in NamespaceId {
        /// Unique per Namespace.
        required "name" => name: Name,
        /// A type the Credential Gateway's catalog offers (`openai`, `anthropic`).
        required "type" => source_type: SourceTypeName,
        /// The type's non-secret settings (`base_url`), at most 32.
        optional "config" => config: SourceConfig,
        /// The type's Secret fields (`api_key`) → Secrets of this Namespace, at most 16.
        optional "secrets" => secrets: SourceSecrets,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/credential-sources/{credentialSourceId}`: the source's
    /// Secrets, replaced as a whole.
    pub struct CredentialSourceUpdateBody in NamespaceId {
        /// The type's Secret fields → Secrets of this Namespace (the reference's schema makes
        /// it optional; a PATCH without it changes nothing and is refused with 400).
        optional "secrets" => secrets: SourceSecrets,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/secrets`.
    pub struct SecretCreateBody {
        /// Unique per Namespace.
        required "name" => name: Name,
        /// Write-only value: non-empty UTF-8 without NUL, at most 65 536 bytes.
        required "value" => value: SecretValue,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/secrets/{secretId}`.
    pub struct SecretUpdateBody {
        /// The new value: non-empty UTF-8 without NUL, at most 65 536 bytes.
        required "value" => value: SecretValue,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/service-accounts`.
    pub struct ServiceAccountCreateBody {
        /// Unique per Namespace.
        required "name" => name: Name,
    }
}

request_body! {
    /// A Secret and a key within it.
    pub struct CredentialSecretRef {
        /// The Secret's name.
        required "name" => name: CredentialSecretName,
        /// The key.
        required "key" => key: CredentialSecretKey,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/service-accounts/{serviceAccountId}/credential`: a native
    /// account's credential reference.
    pub struct ServiceAccountCredentialBody {
        /// `api_key` | `oauth_access_token`.
        required "kind" => kind: ReferenceCredentialKind,
        /// Where the operator keeps it.
        required "secretRef" => secret_ref: CredentialSecretRef,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/service-accounts/{serviceAccountId}/credentials`: `{}`.
    pub struct ServiceAccountCredentialIssueBody {
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/agents`.
    pub struct AgentCreateBody in NamespaceId {
        /// Unique per Namespace.
        required "name" => name: Name,
        /// A Configuration of this Namespace.
        required "configurationId" => configuration_id: ConfigurationId,
        /// `embedded` (default) | `dedicated`.
        optional "executionMode" => execution_mode: ExecutionMode,
        /// A configured Backend, or null.
        nullable "backendId" => backend_id: Name,
        /// How the harness authenticates, or null.
        nullable "harnessAuth" => harness_auth: HarnessAuth,
        /// Any of AGENTS.md, SOUL.md, IDENTITY.md, USER.md → content (≤ 16 KiB UTF-8, no NUL);
        /// `{}` stages nothing.
        optional "initialWorkspaceFiles" => initial_workspace_files: WorkspaceFiles,
        /// The 64-hex defaults identity the form was rendered with.
        optional "workspaceDefaultsId" => workspace_defaults_id: WorkspaceDefaultsId,
    }
}

request_body! {
    /// The new Configuration of `provisionAgent`, as `POST …/configurations` takes it.
    pub struct ProvisionConfiguration in NamespaceId {
        /// Always `agent`.
        required "kind" => kind: AgentKind,
        /// The native `openclaw.json` document, validated as on Configuration create.
        required "values" => values: OpenclawDocument,
        /// Environment variable name → a Secret of this Namespace, at most 64.
        optional "secretBindings" => secret_bindings: SecretBindings,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/agents/provision`: a Configuration and an Agent to create
    /// and deploy as one job.
    pub struct AgentProvisionBody in NamespaceId {
        /// The caller's idempotency key (`req_<uuid>`): resending the same request returns the
        /// same job.
        required "requestId" => request_id: RequestId,
        /// The Agent's name, unique per Namespace.
        required "name" => name: Name,
        /// The Configuration to create.
        required "configuration" => configuration: ProvisionConfiguration,
        /// `embedded` (default) | `dedicated`.
        optional "executionMode" => execution_mode: ExecutionMode,
        /// A configured Backend, or null.
        nullable "backendId" => backend_id: Name,
        /// How the harness authenticates, or null.
        nullable "harnessAuth" => harness_auth: HarnessAuth,
        /// Any of AGENTS.md, SOUL.md, IDENTITY.md, USER.md → content; `{}` stages nothing.
        optional "initialWorkspaceFiles" => initial_workspace_files: WorkspaceFiles,
        /// The 64-hex defaults identity the form was rendered with.
        optional "workspaceDefaultsId" => workspace_defaults_id: WorkspaceDefaultsId,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/agents/{agentId}`: omitted keeps, `null` clears.
    pub struct AgentUpdateBody in NamespaceId {
        /// A Configuration of this Namespace (always sent).
        required "configurationId" => configuration_id: ConfigurationId,
        /// Omitted keeps.
        optional "executionMode" => execution_mode: ExecutionMode,
        /// Omitted keeps; null clears.
        patch "backendId" => backend_id: Name,
        /// Omitted keeps; null clears.
        patch "harnessAuth" => harness_auth: HarnessAuth,
    }
}

request_body! {
    /// One Role permission.
    pub struct PermissionGrant {
        /// An action.
        required "action" => action: Action,
        /// A resource kind.
        required "resourceKind" => resource_kind: ResourceKind,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/iam/roles`.
    pub struct RoleCreateBody {
        /// Optional display name.
        optional "name" => name: Name,
        /// 1..64 permissions.
        required "permissions" => permissions: Permissions,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/iam/access-bindings`.
    pub struct BindingCreateBody {
        /// Always `identity`.
        required "subjectKind" => subject_kind: IdentityKind,
        /// The identity.
        required "subjectId" => subject_id: IamId,
        /// The Role.
        required "roleId" => role_id: IamId,
        /// The exact target's kind.
        required "resourceKind" => resource_kind: ResourceKind,
        /// The exact target.
        required "resourceId" => resource_id: ResourceId,
        /// The runtime role the person holds in the Agent's native Control UI.
        optional "runtimeRole" => runtime_role: RuntimeRoleName,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/iam/namespace-bindings` (occ extension): a Role on the
    /// whole Namespace.
    pub struct NamespaceBindingCreateBody {
        /// Always `identity`.
        required "subjectKind" => subject_kind: IdentityKind,
        /// The identity.
        required "subjectId" => subject_id: IamId,
        /// The Role (one of the Namespace's, e.g. its built-in viewer, operator or admin).
        required "roleId" => role_id: IamId,
    }
}

request_body! {
    /// `PATCH /namespaces/{namespaceId}/iam/access-bindings/{bindingId}/runtime-role`.
    pub struct RuntimeRoleBody {
        /// The runtime role to assign.
        required "runtimeRole" => runtime_role: RuntimeRoleName,
    }
}

request_body! {
    /// `POST /api/auth/sign-in/email`.
    pub struct SignInBody {
        /// Account email.
        required "email" => email: Email,
        /// 12..128 characters.
        required "password" => password: Password,
    }
}

request_body! {
    /// `POST /api/auth/accounts`.
    pub struct AccountCreateBody {
        /// Email.
        required "email" => email: Email,
        /// 12..128 characters.
        required "password" => password: Password,
        /// Display name.
        optional "name" => name: Name,
        /// An Installation-scoped Role to bind.
        optional "roleId" => role_id: IamId,
    }
}

request_body! {
    /// `PUT …/workspace/files/{name}`: exactly `{content}`.
    pub struct WorkspaceFileBody {
        /// At most 16 KiB of UTF-8, no NUL.
        required "content" => content: WorkspaceContent,
    }
}

request_body! {
    /// `POST …/agents/{agentId}/chat`: `{message, sessionKey?}`.
    pub struct ChatBody {
        /// 1..16 KiB of UTF-8, not blank.
        required "message" => message: ChatMessage,
        /// The conversation to continue (default `occ-chat`).
        optional "sessionKey" => session_key: ChatSessionKey,
    }
}

request_body! {
    /// `POST /api/auth/service-keys`.
    pub struct ServiceKeyCreateBody {
        /// A non-Agent service principal.
        required "servicePrincipalId" => service_principal_id: IamId,
        /// Restrict the key to one Namespace.
        optional "namespaceId" => namespace_id: NamespaceId,
        /// 1..32 characters, not blank.
        required "name" => name: KeyName,
        /// Seconds, 86400..31536000 (default 30 days).
        optional "expiresIn" => expires_in: KeyLifetime,
    }
}

request_body! {
    /// `POST /api/auth/accounts/{userId}/disable|enable|revoke`: the version the caller read.
    pub struct AccountVersionBody {
        /// The account's `version` as last read.
        required "expectedVersion" => expected_version: AccountVersion,
    }
}

request_body! {
    /// `POST /namespaces/{namespaceId}/agents/models`: which models a provider offers to a key.
    pub struct ModelDiscoveryBody {
        /// `openai` | `anthropic`.
        required "provider" => provider: DiscoveryProvider,
        /// `api_key` | `codex_pat`.
        required "authMethod" => auth_method: DiscoveryAuthMethod,
        /// The key, sent to the provider only and never kept.
        required "apiKey" => api_key: DiscoveryKey,
    }
}

request_body! {
    /// `POST /api/auth/service-principals` (occ extension).
    pub struct ServicePrincipalCreateBody {
        /// 1..64 characters, unique in the Installation.
        required "name" => name: PrincipalName,
        /// Limit the principal (and every key issued to it) to one Namespace.
        optional "namespaceId" => namespace_id: NamespaceId,
    }
}

// --- bodies → controller inputs --------------------------------------------------------------

impl From<ConfigurationCreateBody> for ConfigurationInput {
    fn from(body: ConfigurationCreateBody) -> Self {
        ConfigurationInput {
            values: body.values.0,
            secret_bindings: body.secret_bindings,
        }
    }
}

impl From<ConfigurationUpdateBody> for ConfigurationInput {
    fn from(body: ConfigurationUpdateBody) -> Self {
        ConfigurationInput {
            values: body.values.0,
            secret_bindings: body.secret_bindings,
        }
    }
}

impl From<AgentCreateBody> for AgentInput {
    fn from(body: AgentCreateBody) -> Self {
        AgentInput {
            name: body.name,
            configuration_id: body.configuration_id,
            execution_mode: body.execution_mode.unwrap_or(ExecutionMode::Embedded),
            backend_id: body.backend_id.map(|n| n.to_string()),
            harness_auth: body.harness_auth,
            // an empty object stages nothing
            initial_workspace_files: body.initial_workspace_files.filter(|f| !f.is_empty()),
            workspace_defaults_id: body.workspace_defaults_id.map(|d| d.0),
        }
    }
}

impl From<AgentProvisionBody> for ProvisionInput {
    fn from(body: AgentProvisionBody) -> Self {
        ProvisionInput {
            request_id: body.request_id,
            spec: ProvisionSpec {
                name: body.name.to_string(),
                configuration_values: body.configuration.values.0,
                secret_bindings: body.configuration.secret_bindings.unwrap_or_default(),
                execution_mode: body.execution_mode.unwrap_or(ExecutionMode::Embedded),
                backend_id: body.backend_id.map(|n| n.to_string()),
                harness_auth: body.harness_auth,
                // an empty object stages nothing
                initial_workspace_files: body.initial_workspace_files.filter(|f| !f.is_empty()),
                workspace_defaults_id: body.workspace_defaults_id.map(|d| d.0),
            },
        }
    }
}

impl From<AgentUpdateBody> for AgentUpdate {
    fn from(body: AgentUpdateBody) -> Self {
        AgentUpdate {
            configuration_id: body.configuration_id,
            execution_mode: body.execution_mode,
            backend_id: match body.backend_id {
                Patch::Keep => Patch::Keep,
                Patch::Clear => Patch::Clear,
                Patch::Set(name) => Patch::Set(name.to_string()),
            },
            harness_auth: body.harness_auth,
        }
    }
}

impl From<RoleCreateBody> for RoleInput {
    fn from(body: RoleCreateBody) -> Self {
        RoleInput {
            name: body.name.map(|n| n.to_string()),
            permissions: body.permissions.0,
        }
    }
}

impl From<BindingCreateBody> for BindingInput {
    fn from(body: BindingCreateBody) -> Self {
        BindingInput {
            subject_id: body.subject_id,
            role_id: body.role_id,
            target: BindingTarget::Resource {
                kind: body.resource_kind,
                id: body.resource_id.0,
            },
            runtime_role: body.runtime_role.map(|r| r.0),
        }
    }
}

impl From<NamespaceBindingCreateBody> for BindingInput {
    fn from(body: NamespaceBindingCreateBody) -> Self {
        BindingInput {
            subject_id: body.subject_id,
            role_id: body.role_id,
            target: BindingTarget::Namespace,
            runtime_role: None,
        }
    }
}

impl From<ModelDiscoveryBody> for DiscoveryInput {
    fn from(body: ModelDiscoveryBody) -> Self {
        DiscoveryInput {
            provider: body.provider.0,
            auth: body.auth_method.0,
            api_key: body.api_key.0,
        }
    }
}

impl From<ServicePrincipalCreateBody> for ServicePrincipalInput {
    fn from(body: ServicePrincipalCreateBody) -> Self {
        ServicePrincipalInput {
            name: body.name.0,
            namespace_id: body.namespace_id,
        }
    }
}

impl From<AccountCreateBody> for AccountInput {
    fn from(body: AccountCreateBody) -> Self {
        AccountInput {
            email: body.email.0,
            password: body.password.0,
            name: body.name.map(|n| n.to_string()),
            role_id: body.role_id,
        }
    }
}

impl From<ServiceKeyCreateBody> for ServiceKeyInput {
    fn from(body: ServiceKeyCreateBody) -> Self {
        ServiceKeyInput {
            service_principal_id: body.service_principal_id,
            namespace_id: body.namespace_id,
            name: body.name.0,
            expires_in: body.expires_in.map(|l| l.0),
        }
    }
}

#[cfg(test)]
mod fuzz;
