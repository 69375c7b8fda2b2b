//! An in-process occ API on a fresh database, for router tests: the real store, the real
//! filesystem Configuration Driver and local Secret Driver in temporary directories, the real
//! controller and router, driven with `tower::ServiceExt::oneshot` (no sockets).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use occ_api::{ApiSettings, AppState};
use occ_controller::auth::{credential_hash, new_service_key};
use occ_controller::bootstrap::{BootstrapInput, BootstrapOutcome, KeySink};
use occ_controller::{Controller, ControllerSettings, FaultHooks};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::iam::{AccessBinding, BoundResource, Role, ServiceKey};
use occ_core::resource::{Installation, NamespaceStatus};
use occ_core::{IamId, Name, NamespaceId, Timestamp};
use occ_drivers::compute::ComputeSelection;
use occ_drivers::configuration::{ConfigurationDriver, FilesystemConfigurationDriver};
use occ_drivers::secret::{LocalSecretDriver, SecretDriver};
use occ_store::{Backend, Store};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::TestDb;

/// The public origin test apps use.
pub const ORIGIN: &str = "http://127.0.0.1:3000";
/// The administrator's password.
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";
/// The administrator's email.
pub const ADMIN_EMAIL: &str = "admin@openclaw.local";

struct NoSink;
impl KeySink for NoSink {
    fn persist(
        &self,
        _: &occ_controller::auth::IssuedKey,
        _: &Installation,
    ) -> Result<(), occ_core::Error> {
        Ok(())
    }
    fn discard(&self) {}
}

/// What a principal needs to deploy an Agent: the Agent's `deploy` and its Configuration's
/// `read`.
pub const DEPLOYER: [Permission; 2] = [
    Permission::new(Action::Deploy, ResourceKind::Agent),
    Permission::new(Action::Read, ResourceKind::Configuration),
];

/// A response, decoded.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// JSON body (`Null` when empty or not JSON).
    pub body: Value,
    /// The body as text (for the routes that answer text).
    pub text: String,
}

impl Reply {
    /// `body.data`.
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
    /// `body.error.code`.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The id of the resource a create returned; panics unless the status is 201.
    #[track_caller]
    pub fn created_id(&self) -> String {
        assert_eq!(self.status, StatusCode::CREATED, "create: {}", self.body);
        self.data()["id"].as_str().expect("id").to_owned()
    }
}

/// A caller credential.
#[derive(Debug, Clone)]
pub enum Credential {
    /// No credential.
    Anonymous,
    /// A service key.
    Key(String),
    /// A session cookie token (sent with the trusted Origin on mutations).
    Session(String),
}

/// An in-process API.
pub struct TestApp {
    /// The router.
    pub router: Router,
    /// The store (for setup that the API cannot do, e.g. simulating the worker).
    pub store: Store,
    /// The database.
    pub db: TestDb,
    /// The application.
    pub controller: Arc<Controller>,
    /// The Installation.
    pub installation: Installation,
    /// The bootstrap administrator key.
    pub admin_key: String,
    /// The bootstrap service principal.
    pub admin_principal: IamId,
    /// The Namespace `default` (ready).
    pub default_ns: NamespaceId,
    _dirs: tempfile::TempDir,
}

/// Options of a test app.
#[derive(Default)]
pub struct TestAppOptions {
    /// Fault hooks.
    pub hooks: FaultHooks,
    /// Configuration root override (to make the Driver fail).
    pub configuration_root: Option<std::path::PathBuf>,
    /// Skip bootstrap.
    pub unbootstrapped: bool,
    /// The Configuration Driver (default: filesystem in a temporary directory).
    pub configurations: Option<ConfigurationDriver>,
    /// The Secret Driver (default: local in a temporary directory).
    pub secrets: Option<SecretDriver>,
    /// How the controller reaches live workspaces (none: the file routes answer 503).
    pub workspace: Option<Arc<dyn occ_controller::workspace_files::WorkspaceAccess>>,
    /// How the controller talks to Agents (none: the chat route answers 503 once admitted).
    pub chat: Option<Arc<dyn occ_controller::chat::AgentChat>>,
    /// What the selected Compute Driver supports (default: the process Driver's).
    pub compute: Option<ComputeSelection>,
    /// The Compute Driver the runtime routes describe deployments and read logs through (none:
    /// the runtime route answers 503, the logs route 501).
    pub runtime: Option<Arc<dyn occ_drivers::compute::Compute>>,
    /// The Backend's ServiceAccount Driver (none: accounts are native, issuing credentials
    /// answers 503).
    pub accounts: Option<Arc<dyn occ_drivers::service_account::AccountDriver>>,
    /// Where model discovery reads model lists (none: discovery answers 503).
    pub models: Option<Arc<dyn occ_drivers::model_catalog::ModelCatalog>>,
    /// Offers Agents' Control UIs at Agent origins.
    pub native_admin: Option<occ_controller::native_admin::NativeAdminSettings>,
}

impl TestApp {
    /// A bootstrapped app on SQLite.
    pub async fn new() -> TestApp {
        Self::with(Backend::Sqlite, TestAppOptions::default()).await
    }

    /// A bootstrapped app on the given backend.
    pub async fn on(backend: Backend) -> TestApp {
        Self::with(backend, TestAppOptions::default()).await
    }

    /// A test app with options.
    pub async fn with(backend: Backend, options: TestAppOptions) -> TestApp {
        let db = TestDb::new(backend).await;
        let store = db.store().await;
        let dirs = tempfile::tempdir().expect("tempdir");
        let configurations = options.configurations.clone().unwrap_or_else(|| {
            ConfigurationDriver::Filesystem(
                FilesystemConfigurationDriver::new(
                    options
                        .configuration_root
                        .clone()
                        .unwrap_or_else(|| dirs.path().join("configurations")),
                )
                .expect("configuration driver"),
            )
        });
        let secrets = options.secrets.clone().unwrap_or_else(|| {
            SecretDriver::Local(
                LocalSecretDriver::open(
                    dirs.path().join("secrets"),
                    &dirs.path().join("secret.key"),
                )
                .expect("secret driver"),
            )
        });
        let settings = ControllerSettings {
            harness_id: "openclaw".into(),
            harness_version: "2026.9.6".into(),
            codex_version: "0.154.0".into(),
            session_ttl: Duration::from_secs(3600),
            auth_secret: b"test-secret-test-secret-test-secret".to_vec(),
            backends: vec![occ_controller::BackendConfig {
                id: "chatgpt-main".into(),
                kind: "chatgpt".into(),
            }],
            workspace_defaults: Some(occ_controller::WorkspaceDefaults {
                id: "a".repeat(64),
                files: occ_core::resource::WorkspaceFileName::ALL
                    .iter()
                    .map(|n| (n.as_str().to_owned(), format!("# {} stock\n", n.as_str())))
                    .collect(),
            }),
        };
        let controller = Arc::new(
            Controller::new(
                store.clone(),
                configurations,
                secrets,
                options
                    .compute
                    .clone()
                    .unwrap_or_else(|| occ_drivers::compute::process::selection(false)),
                settings,
            )
            .with_hooks(options.hooks),
        );
        let controller = match options.chat {
            Some(chat) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_chat(chat),
            ),
            None => controller,
        };
        let controller = match options.workspace {
            Some(access) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_workspace_access(access),
            ),
            None => controller,
        };
        let controller = match options.runtime {
            Some(compute) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_runtime_access(compute),
            ),
            None => controller,
        };
        let controller = match options.native_admin {
            Some(settings) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_native_admin(settings),
            ),
            None => controller,
        };
        let controller = match options.accounts {
            Some(accounts) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_account_driver(accounts),
            ),
            None => controller,
        };
        let controller = match options.models {
            Some(catalog) => Arc::new(
                Arc::into_inner(controller)
                    .expect("not shared yet")
                    .with_model_catalog(catalog),
            ),
            None => controller,
        };
        let state = AppState {
            controller: controller.clone(),
            settings: Arc::new(ApiSettings {
                public_origin: ORIGIN.into(),
                secure_cookies: false,
            }),
            metrics: None,
        };
        let router = occ_api::router(state);
        let mut app = TestApp {
            router,
            store,
            db,
            controller,
            installation: Installation {
                id: occ_core::InstallationId::generate(),
                name: Name::parse("unbootstrapped").expect("name"),
                created_at: Timestamp::now(),
            },
            admin_key: String::new(),
            admin_principal: IamId::generate_service_principal(),
            default_ns: NamespaceId::generate(),
            _dirs: dirs,
        };
        if !options.unbootstrapped {
            app.bootstrap().await;
        }
        app
    }

    /// Bootstraps and makes `default` ready (as the worker would).
    pub async fn bootstrap(&mut self) {
        let input = BootstrapInput {
            installation_name: Name::parse("Test Installation").expect("name"),
            admin_email: ADMIN_EMAIL.into(),
            admin_password: ADMIN_PASSWORD.into(),
        };
        let BootstrapOutcome::Created {
            installation,
            service_principal_id,
            namespace,
            ..
        } = self
            .controller
            .bootstrap(&input, &NoSink)
            .await
            .expect("bootstrap")
        else {
            panic!("already bootstrapped");
        };
        self.installation = installation;
        self.admin_principal = service_principal_id.clone();
        self.default_ns = namespace.id.clone();
        self.admin_key = self.issue_key(&service_principal_id, None).await;
        self.set_namespace_status(&namespace.id, NamespaceStatus::Ready)
            .await;
    }

    /// Publishes `rev` as the Agent's active revision, as the worker would after activating it.
    pub async fn activate(&self, agent: &occ_core::AgentId, rev: &occ_core::RevisionId) {
        let mut tx = crate::begin_setup(&self.store).await;
        let current = tx
            .agent_get(&self.default_ns, agent)
            .await
            .expect("get")
            .expect("agent")
            .active_revision_id;
        assert!(
            tx.agent_swap_active_revision(&self.default_ns, agent, current.as_ref(), Some(rev))
                .await
                .expect("swap")
        );
        tx.commit().await.expect("commit");
    }

    /// Moves a Namespace's status as the worker would.
    pub async fn set_namespace_status(&self, ns: &NamespaceId, status: NamespaceStatus) {
        let mut tx = crate::begin_setup(&self.store).await;
        let current = tx
            .namespace_get(ns)
            .await
            .expect("get")
            .expect("namespace")
            .status;
        assert!(
            tx.namespace_set_status(ns, current, status)
                .await
                .expect("status")
        );
        tx.commit().await.expect("commit");
    }

    /// Issues a service key for `principal` directly in the store; returns the plaintext.
    pub async fn issue_key(&self, principal: &IamId, namespace: Option<&NamespaceId>) -> String {
        let plaintext = new_service_key();
        let now = Timestamp::now();
        let key = ServiceKey {
            id: IamId::generate_service_key(),
            service_principal_id: principal.clone(),
            namespace_id: namespace.cloned(),
            name: "test".into(),
            expires_at: now.plus(Duration::from_secs(3600)),
            created_at: now,
        };
        let mut tx = crate::begin_setup(&self.store).await;
        tx.service_key_insert(&key, &credential_hash(&plaintext))
            .await
            .expect("key");
        tx.commit().await.expect("commit");
        plaintext
    }

    /// A new service principal granted `permissions` at a scope (`None` namespace: Installation;
    /// a resource: exact), with a key. Returns (principal, key).
    pub async fn principal_with(
        &self,
        permissions: &[Permission],
        namespace: Option<&NamespaceId>,
        resource: Option<(ResourceKind, String)>,
        key_namespace: Option<&NamespaceId>,
    ) -> (IamId, String) {
        let now = Timestamp::now();
        let identity = crate::setup::service_principal(now);
        let mut tx = crate::begin_setup(&self.store).await;
        tx.identity_insert(&identity).await.expect("identity");
        if !permissions.is_empty() {
            let role = Role {
                id: IamId::generate_role(false),
                namespace_id: None,
                name: None,
                permissions: permissions.to_vec(),
                created_at: now,
            };
            tx.role_insert(&role).await.expect("role");
            tx.binding_insert(&AccessBinding {
                id: IamId::generate_binding(""),
                namespace_id: namespace.cloned(),
                subject_id: identity.id.clone(),
                role_id: role.id.clone(),
                resource: resource.map(|(kind, id)| BoundResource { kind, id }),
                runtime_role: None,
                created_at: now,
            })
            .await
            .expect("binding");
        }
        tx.commit().await.expect("commit");
        let key = self.issue_key(&identity.id, key_namespace).await;
        (identity.id, key)
    }

    /// Grants an existing principal `permissions` on one exact resource.
    pub async fn grant(
        &self,
        principal: &IamId,
        permissions: &[Permission],
        ns: &NamespaceId,
        resource: Option<(ResourceKind, String)>,
    ) {
        self.bind(principal, permissions, Some(ns), resource).await;
    }

    /// Grants an existing principal `permissions` Installation-wide; returns the binding's id.
    pub async fn grant_installation(&self, principal: &IamId, permissions: &[Permission]) -> IamId {
        self.bind(principal, permissions, None, None).await
    }

    async fn bind(
        &self,
        principal: &IamId,
        permissions: &[Permission],
        ns: Option<&NamespaceId>,
        resource: Option<(ResourceKind, String)>,
    ) -> IamId {
        let now = Timestamp::now();
        let role = Role {
            id: IamId::generate_role(false),
            namespace_id: None,
            name: None,
            permissions: permissions.to_vec(),
            created_at: now,
        };
        let binding = IamId::generate_binding("");
        let mut tx = crate::begin_setup(&self.store).await;
        tx.role_insert(&role).await.expect("role");
        tx.binding_insert(&AccessBinding {
            id: binding.clone(),
            namespace_id: ns.cloned(),
            subject_id: principal.clone(),
            role_id: role.id,
            resource: resource.map(|(kind, id)| BoundResource { kind, id }),
            runtime_role: None,
            created_at: now,
        })
        .await
        .expect("binding");
        tx.commit().await.expect("commit");
        binding
    }

    /// A new principal that may deploy the Agents of `default` and nothing more (`agent:deploy`
    /// and `configuration:read` there, which deploy admission and the worker ask for); returns
    /// it and its key, to pass to [`TestApp::deploy_as`].
    pub async fn deployer(&self) -> (IamId, Credential) {
        let (principal, key) = self
            .principal_with(&DEPLOYER, Some(&self.default_ns), None, None)
            .await;
        (principal, Credential::Key(key))
    }

    /// A Configuration (`{"gateway": {"mode": "local"}}`) and an Agent using it with
    /// `{method: "runtime"}` auth, created in `default` by the administrator; returns their ids
    /// (Configuration, Agent).
    pub async fn draft_agent(&self, name: &str) -> (String, String) {
        let ns = &self.default_ns;
        let admin = self.admin();
        let cfg = self
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/configurations"),
                &admin,
                Some(json!({"kind": "agent", "values": {"gateway": {"mode": "local"}}})),
            )
            .await
            .created_id();
        let agent = self
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/agents"),
                &admin,
                Some(json!({"name": name, "configurationId": cfg, "harnessAuth": {"method": "runtime"}})),
            )
            .await
            .created_id();
        (cfg, agent)
    }

    /// Deploys Agent `agent` of `default` as `who`; asserts the 202 and returns the revision id.
    pub async fn deploy_as(&self, who: &Credential, agent: &str) -> String {
        let reply = self
            .call(
                Method::POST,
                &format!("/namespaces/{}/agents/{agent}/deploy", self.default_ns),
                who,
                None,
            )
            .await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "deploy: {}", reply.body);
        reply.data()["id"].as_str().expect("revision id").to_owned()
    }

    /// Sends a request.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        who: &Credential,
        body: Option<Value>,
    ) -> Reply {
        let mut builder = Request::builder().method(method.clone()).uri(path);
        match who {
            Credential::Anonymous => {}
            Credential::Key(k) => builder = builder.header("x-api-key", k),
            Credential::Session(t) => {
                builder =
                    builder.header("cookie", format!("{}={t}", occ_api::state::SESSION_COOKIE));
                if !matches!(method, Method::GET | Method::HEAD) {
                    builder = builder.header("origin", ORIGIN);
                }
            }
        }
        let request = match body {
            Some(b) => builder
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&b).expect("json"))),
            None => builder.body(Body::empty()),
        }
        .expect("request");
        self.send(request).await
    }

    /// Sends a prepared request.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Reply {
            status,
            headers,
            body,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// The admin credential.
    pub fn admin(&self) -> Credential {
        Credential::Key(self.admin_key.clone())
    }

    /// Signs in the bootstrap administrator; returns the session credential.
    pub async fn admin_session(&self) -> Credential {
        let reply = self
            .call(
                Method::POST,
                "/api/auth/sign-in/email",
                &Credential::Anonymous,
                Some(serde_json::json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        let cookie = reply
            .headers
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .expect("cookie");
        let token = cookie
            .split(';')
            .next()
            .and_then(|kv| kv.split_once('='))
            .map(|(_, v)| v.to_owned())
            .expect("token");
        Credential::Session(token)
    }
}
