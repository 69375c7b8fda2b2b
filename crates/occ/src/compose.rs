//! Composition: settings → Drivers → Controller → API state.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use occ_api::{ApiSettings, AppState};
use occ_controller::chat::GatewayChat;
use occ_controller::native_admin::NativeAdminSettings;
use occ_controller::workspace_files::GatewayWorkspace;
use occ_controller::{BackendConfig, Controller, ControllerSettings, WorkspaceDefaults};
use occ_core::NamespaceId;
use occ_drivers::compute::kubernetes::{KubernetesCompute, KubernetesDedicatedSettings};
use occ_drivers::compute::process::{ProcessCompute, ProcessSettings};
use occ_drivers::compute::ssh::{SshCompute, SshHost, SshSettings};
use occ_drivers::compute::{Compute, ComputeSelection, NamespaceHook};
use occ_drivers::configuration::{
    ConfigurationDriver, FilesystemConfigurationDriver, KubernetesConfigurationDriver,
};
use occ_drivers::kubernetes::{KubeClient, TenantAccess, TenantNamespaces};
use occ_drivers::model_catalog::HttpModelCatalog;
use occ_drivers::secret::{KubernetesSecretDriver, LocalSecretDriver, SecretDriver};
use occ_host::runtime::OpenclawRuntime;
use occ_host::sandbox::SandboxSettings;
use occ_host::snapshot::GatewayBind;
use occ_host::wire::HostSettings;
use occ_host::workspace_setup;
use occ_host::{DedicatedSettings, LocalSettings};
use occ_store::{Store, StoreOptions};

use crate::settings::{
    ComputeDriverSettings, ConfigurationStore, KubernetesComputeSettings, PlatformSettings,
    ProcessIsolation, SecretStore, ServerSettings, SshComputeSettings,
};

/// The pinned OpenClaw release.
pub const OPENCLAW_VERSION: &str = "2026.9.6";
/// The pinned Codex harness (`@openai/codex`, brought by `@openclaw/codex` 2026.9.5), frozen
/// into dedicated revisions.
pub const CODEX_VERSION: &str = "0.154.0";

/// Opens the store and checks its schema is current.
pub async fn open_store(url: &str, max_connections: u32) -> anyhow::Result<Store> {
    crate::settings::prepare_database_url(url).context("OCC_DATABASE_URL")?;
    let store = Store::connect(
        url,
        &StoreOptions {
            max_connections,
            ..Default::default()
        },
    )
    .await
    .context("cannot open the database named by OCC_DATABASE_URL")?;
    store.check_schema().await.context("the database schema")?;
    Ok(store)
}

/// Session settings of the API (the worker has none).
pub struct SessionSettings {
    /// Session lifetime.
    pub ttl: Duration,
    /// Session-key secret.
    pub secret: Vec<u8>,
    /// Agent origins for the Control UI, when offered.
    pub native_admin: Option<NativeAdminSettings>,
}

impl SessionSettings {
    /// From the API settings.
    pub fn of(settings: &ServerSettings) -> anyhow::Result<Self> {
        let native_admin = match &settings.native_admin_domain {
            Some(domain) => Some(
                NativeAdminSettings::new(&settings.public_origin, domain)
                    .map_err(|e| anyhow::anyhow!("OCC_AGENT_NATIVE_ADMIN_DOMAIN: {e}"))?,
            ),
            None => None,
        };
        Ok(Self {
            ttl: Duration::from_secs(settings.session_ttl_seconds),
            secret: settings.auth_secret.as_bytes().to_vec(),
            native_admin,
        })
    }

    /// For a process that serves no sessions.
    pub fn none() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            secret: Vec::new(),
            native_admin: None,
        }
    }
}

/// The tenant namespaces of the Kubernetes Drivers with the access the selected ones need.
async fn tenant_namespaces(
    settings: &PlatformSettings,
) -> anyhow::Result<Option<TenantNamespaces>> {
    let Some(k) = &settings.kubernetes else {
        return Ok(None);
    };
    let kube = KubeClient::connect(&k.auth)
        .await
        .context("OCC_KUBERNETES_AUTH")?;
    let secrets = settings.secrets == SecretStore::Kubernetes;
    if secrets
        && k.worker_service_account.is_none()
        && settings.compute.driver.selection().delivers_secrets
    {
        anyhow::bail!(
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT is required: the worker reads Secret values from Kubernetes to deliver them"
        );
    }
    let access = TenantAccess {
        api: k.api_service_account.clone(),
        worker: k.worker_service_account.clone(),
        configurations: settings.configurations == ConfigurationStore::Kubernetes,
        secrets,
        compute: settings.compute.driver.kubernetes().is_some(),
    };
    let quota = settings
        .compute
        .driver
        .kubernetes()
        .and_then(|k| k.tenant_quota.clone());
    Ok(Some(TenantNamespaces::new(kube, access).with_quota(quota)))
}

/// The work other Drivers do around a Namespace's lifecycle (run by the worker): with a
/// Kubernetes Configuration or Secret Driver, the tenant namespace and its access — unless the
/// Kubernetes Compute Driver is selected, which provisions them as part of its own Namespace
/// verbs.
pub async fn namespace_hooks(
    settings: &PlatformSettings,
) -> anyhow::Result<Vec<Arc<dyn NamespaceHook>>> {
    if settings.compute.driver.kubernetes().is_some() {
        return Ok(Vec::new());
    }
    Ok(match tenant_namespaces(settings).await? {
        Some(tenants) => vec![Arc::new(tenants)],
        None => Vec::new(),
    })
}

/// Builds the application from validated settings. With `files_through`, the controller serves
/// live workspace files through that Compute's gateways and describes deployments' runtime
/// through it (the API; the worker needs neither).
pub async fn controller(
    settings: &PlatformSettings,
    sessions: SessionSettings,
    store: Store,
    files_through: Option<Arc<dyn Compute>>,
) -> anyhow::Result<Controller> {
    // Validates the Kubernetes configuration without contacting the API server: tenant objects
    // are checked on first use.
    let kube = match &settings.kubernetes {
        Some(k) => Some(
            KubeClient::connect(&k.auth)
                .await
                .context("OCC_KUBERNETES_AUTH")?,
        ),
        None => None,
    };
    let kube_client = || {
        kube.clone().ok_or_else(|| {
            anyhow::anyhow!("a Kubernetes Driver is selected without OCC_KUBERNETES_AUTH")
        })
    };
    let configurations = match &settings.configurations {
        ConfigurationStore::Filesystem { root } => ConfigurationDriver::Filesystem(
            FilesystemConfigurationDriver::new(root.clone()).context("OCC_CONFIGURATION_ROOT")?,
        ),
        ConfigurationStore::Kubernetes => {
            ConfigurationDriver::Kubernetes(KubernetesConfigurationDriver::new(kube_client()?))
        }
    };
    let secrets = match &settings.secrets {
        SecretStore::Local { root, key_file } => SecretDriver::Local(
            LocalSecretDriver::open(root.clone(), key_file)
                .context("OCC_SECRET_ROOT / OCC_SECRET_KEY_FILE")?,
        ),
        SecretStore::Kubernetes => {
            SecretDriver::Kubernetes(KubernetesSecretDriver::new(kube_client()?))
        }
    };
    let controller_settings = ControllerSettings {
        harness_id: "openclaw".into(),
        harness_version: OPENCLAW_VERSION.into(),
        codex_version: CODEX_VERSION.into(),
        session_ttl: sessions.ttl,
        auth_secret: sessions.secret.clone(),
        backends: settings
            .backends
            .iter()
            .map(|b| BackendConfig {
                id: b.id.clone(),
                kind: b.kind.clone(),
            })
            .collect(),
        workspace_defaults: workspace_defaults(&settings.compute.runtime_root),
    };
    let mut controller = Controller::new(
        store,
        configurations,
        secrets,
        settings.compute.driver.selection(),
        controller_settings,
    );
    if let Some(native_admin) = sessions.native_admin {
        controller = controller.with_native_admin(native_admin);
    }
    if let Some(accounts) = account_driver(settings)? {
        controller = controller.with_account_driver(accounts);
    }
    let discovery = &settings.model_discovery;
    let catalog = HttpModelCatalog::new(&discovery.openai_base_url, &discovery.anthropic_base_url)
        .map_err(|e| anyhow::anyhow!("model discovery: {e}"))?;
    let controller = controller.with_model_catalog(Arc::new(catalog));
    Ok(match files_through {
        Some(compute) => controller
            .with_runtime_access(compute.clone())
            .with_chat(Arc::new(GatewayChat::new(compute.clone())))
            .with_workspace_access(Arc::new(GatewayWorkspace::new(compute))),
        None => controller,
    })
}

/// The installation's ServiceAccount Driver: the `chatgpt` Backend with a workspace and an
/// admin key, if one is configured (its key file is read once, here).
fn account_driver(
    settings: &PlatformSettings,
) -> anyhow::Result<Option<Arc<dyn occ_drivers::service_account::AccountDriver>>> {
    use occ_drivers::service_account::chatgpt::{
        ChatgptAccounts, ChatgptSettings, DEFAULT_API_BASE, MAX_CREDENTIAL_TTL_SECONDS,
    };
    let Some(b) = settings.backends.iter().find(|b| b.manages_accounts()) else {
        return Ok(None);
    };
    let (Some(workspace), Some(key_file)) = (&b.workspace_id, &b.admin_key_file) else {
        anyhow::bail!(
            "backends[{:?}]: workspaceId and adminKeyFile go together",
            b.id
        );
    };
    let key = std::fs::read_to_string(key_file)
        .with_context(|| format!("backends[{:?}].adminKeyFile: cannot read it", b.id))?;
    let accounts = ChatgptAccounts::new(ChatgptSettings {
        backend_id: b.id.clone(),
        workspace_id: workspace.clone(),
        admin_key: occ_drivers::compute::SecretText::new(key.trim_end().to_owned()),
        credential_ttl_seconds: b
            .credential_ttl_seconds
            .unwrap_or(MAX_CREDENTIAL_TTL_SECONDS),
        api_base: b
            .api_base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_API_BASE.to_owned()),
    })
    .map_err(|e| anyhow::anyhow!("backends[{:?}]: {e}", b.id))?;
    Ok(Some(Arc::new(accounts)))
}

/// The stock workspace files of the installed runtime; without a runtime (or with one whose
/// templates are not the pinned ones) there are none and forms cannot be offered defaults.
fn workspace_defaults(runtime_root: &Path) -> Option<WorkspaceDefaults> {
    let runtime = OpenclawRuntime::locate(runtime_root, &crate::settings::program_path()).ok()?;
    match workspace_setup::stock_defaults(&runtime) {
        Ok(defaults) => Some(WorkspaceDefaults {
            id: defaults.id,
            files: defaults.files,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "no workspace defaults");
            None
        }
    }
}

/// The router state.
pub fn app_state(
    settings: &ServerSettings,
    controller: Arc<Controller>,
    metrics: Option<Arc<occ_controller::metrics::Metrics>>,
) -> AppState {
    AppState {
        controller,
        settings: Arc::new(ApiSettings {
            public_origin: settings.public_origin.clone(),
            secure_cookies: settings.secure_cookies(),
        }),
        metrics,
    }
}

/// How long a starting gateway may take to answer the native handshake (a cold start takes
/// ~11 s on two idle cores, several times that on a loaded machine).
const GATEWAY_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a dedicated Agent's harness may take to run its app-server: workspace setup, Codex
/// login and a probe turn (two bounded attempts against the model endpoint).
const HARNESS_READY_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a stopping gateway may take before it is killed.
const GATEWAY_STOP_TIMEOUT: Duration = Duration::from_secs(15);

impl ComputeDriverSettings {
    /// What admission needs to know about the selected Compute Driver: the Driver module's own
    /// selection, as the Driver built by [`ComputeDriverSettings::build`] reports it (the
    /// process and Kubernetes Drivers are always given their dedicated harness: this binary).
    fn selection(&self) -> ComputeSelection {
        match self {
            Self::Process => occ_drivers::compute::process::selection(true),
            Self::Ssh(_) => occ_drivers::compute::ssh::selection(),
            Self::Kubernetes(_) => occ_drivers::compute::kubernetes::selection(true),
        }
    }

    /// Builds the selected Compute Driver.
    async fn build(
        &self,
        settings: &PlatformSettings,
        role: ComputeRole,
    ) -> anyhow::Result<Arc<dyn Compute>> {
        Ok(match self {
            Self::Process => Arc::new(process_compute(settings, role)?),
            Self::Ssh(ssh) => Arc::new(ssh_compute(settings, ssh)?),
            Self::Kubernetes(k) => Arc::new(kubernetes_compute(settings, k).await?),
        })
    }
}

/// How long one operation on an SSH host may take end to end (workspace setup and a gateway
/// cold start included).
const SSH_OPERATION_TIMEOUT: Duration = Duration::from_secs(600);
/// How long an operation on an SSH host waits for another one to release the host lock.
const SSH_LOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// One SSH host as the Driver takes it.
fn ssh_host(ssh: &SshComputeSettings) -> SshHost {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    SshHost {
        address: ssh.address.clone(),
        port: ssh.port,
        user: ssh.user.clone(),
        identity_file: ssh.identity_file.clone(),
        known_hosts_file: ssh.known_hosts_file.clone(),
        remote_occ: ssh.remote_occ.clone(),
        host: HostSettings {
            root: ssh.remote_root.clone(),
            runtime_root: ssh.remote_runtime.clone(),
            port_start: *ssh.port_range.start(),
            port_end: *ssh.port_range.end(),
            bind: if ssh.bind_lan {
                GatewayBind::Lan
            } else {
                GatewayBind::Loopback
            },
            account_prefix: ssh.account_prefix.clone(),
            ready_timeout_ms: millis(GATEWAY_READY_TIMEOUT),
            stop_timeout_ms: millis(GATEWAY_STOP_TIMEOUT),
            lock_timeout_ms: millis(SSH_LOCK_TIMEOUT),
            supervisor: ssh.supervisor,
            systemd_unit_dir: ssh.systemd_unit_dir.clone(),
        },
    }
}

/// The Compute Driver the settings select.
pub async fn compute(
    settings: &PlatformSettings,
    role: ComputeRole,
) -> anyhow::Result<Arc<dyn Compute>> {
    settings.compute.driver.build(settings, role).await
}

async fn kubernetes_compute(
    settings: &PlatformSettings,
    k: &KubernetesComputeSettings,
) -> anyhow::Result<KubernetesCompute> {
    let auth = &settings
        .kubernetes
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("OCC_KUBERNETES_AUTH is required"))?
        .auth;
    let kube = KubeClient::connect(auth)
        .await
        .context("OCC_KUBERNETES_AUTH")?;
    let tenants = tenant_namespaces(settings)
        .await?
        .ok_or_else(|| anyhow::anyhow!("OCC_KUBERNETES_AUTH is required"))?;
    Ok(KubernetesCompute::new(
        kube,
        occ_drivers::compute::kubernetes::KubernetesComputeSettings {
            image: k.image.clone(),
            runtime_dir: k.runtime_dir.clone(),
            occ_binary: k.occ_binary.clone(),
            state_storage: k.state_storage.clone(),
            storage_class: k.storage_class.clone(),
            runtime_class: k.runtime_class.clone(),
            activation_timeout: k.activation_timeout,
            // Includes the Pod's termination grace period.
            stop_timeout: GATEWAY_STOP_TIMEOUT * 4,
            dedicated: Some(KubernetesDedicatedSettings {
                model_base_url: settings.compute.codex_base_url.clone(),
                harness_storage: k.harness_storage.clone(),
                token_audience: k.harness_token_audience.clone(),
                model_egress: k.model_egress.clone(),
                ready_timeout: HARNESS_READY_TIMEOUT,
            }),
        },
        tenants,
    ))
}

fn ssh_compute(
    settings: &PlatformSettings,
    ssh: &SshComputeSettings,
) -> anyhow::Result<SshCompute> {
    let mut namespace_hosts = BTreeMap::new();
    for (ns, host) in &ssh.namespace_hosts {
        let id = ns
            .parse::<NamespaceId>()
            .map_err(|e| anyhow::anyhow!("ssh_namespace_hosts.{ns}: {e}"))?;
        namespace_hosts.insert(id, ssh_host(host));
    }
    SshCompute::new(SshSettings {
        host: ssh_host(ssh),
        namespace_hosts,
        connect_timeout: ssh.connect_timeout,
        operation_timeout: SSH_OPERATION_TIMEOUT,
        maintenance_interval: Some(settings.compute.maintenance_interval),
    })
    .map_err(|e| anyhow::anyhow!("OCC_SSH_*: {}", e.message))
}

/// The process Driver's containment: the sandbox's programs found and checked, `None` when it
/// is turned off. A missing prerequisite is an error naming what to install, so `occ dev` and
/// `occ worker` call it first and stop before they change anything.
pub fn process_sandbox(settings: &PlatformSettings) -> anyhow::Result<Option<SandboxSettings>> {
    if !matches!(settings.compute.driver, ComputeDriverSettings::Process) {
        return Ok(None);
    }
    sandbox_for(settings.compute.isolation)
}

/// The sandbox `isolation` asks for, its programs found and checked (`None`: turned off).
pub fn sandbox_for(isolation: ProcessIsolation) -> anyhow::Result<Option<SandboxSettings>> {
    match isolation {
        ProcessIsolation::Sandbox(limits) => {
            SandboxSettings::locate(&crate::settings::program_path(), limits)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("OCC_PROCESS_ISOLATION=sandbox: {e}"))
        }
        ProcessIsolation::None => Ok(None),
    }
}

/// What a process does with its Compute Driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeRole {
    /// Runs workloads (`occ worker`, `occ dev`): the process Driver's credential proxy lives
    /// here, beside the gateways it serves.
    Workloads,
    /// Only reaches them (`occ serve`: chat, files, the Control UI).
    Access,
}

fn process_compute(
    settings: &PlatformSettings,
    role: ComputeRole,
) -> anyhow::Result<ProcessCompute> {
    let sandbox = process_sandbox(settings)?;
    if sandbox.is_none() {
        tracing::warn!(
            "OCC_PROCESS_ISOLATION=none: Agents' gateways run uncontained, as occ's own user, and can read everything it can (its data directory and keys, other Agents' workspaces); use it for development only"
        );
    }
    // The range's last port is the credential proxy's (it must stay the same across restarts:
    // gateways' snapshots name it); gateways and harnesses get the others.
    let range = settings.compute.port_range.clone();
    if range.start() >= range.end() {
        anyhow::bail!(
            "OCC_PROCESS_PORT_RANGE: needs at least two ports (the last one is the credential proxy's)"
        );
    }
    let proxy_port = *range.end();
    let occ = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot locate the occ binary: {e}"))?;
    // Staged workspace files are applied by this binary's `workspace-setup` inside the Agent's
    // sandbox, never in this process.
    let sandbox = sandbox.map(|sandbox| sandbox.with_occ_program(occ.clone()));
    ProcessCompute::new(ProcessSettings {
        host: LocalSettings {
            root: settings.compute.root.clone(),
            runtime_root: settings.compute.runtime_root.clone(),
            port_range: *range.start()..=proxy_port - 1,
            ready_timeout: GATEWAY_READY_TIMEOUT,
            stop_timeout: GATEWAY_STOP_TIMEOUT,
            path: crate::settings::program_path(),
        },
        maintenance_interval: Some(settings.compute.maintenance_interval),
        // Dedicated Agents' harnesses are this binary's `harness-launch`.
        dedicated: Some(DedicatedSettings {
            launcher: occ,
            model_base_url: settings.compute.codex_base_url.clone(),
            ready_timeout: HARNESS_READY_TIMEOUT,
        }),
        sandbox,
        credential_proxy_port: (role == ComputeRole::Workloads).then_some(proxy_port),
    })
    .map_err(|e| anyhow::anyhow!("OCC_PROCESS_ROOT: {e}"))
}
