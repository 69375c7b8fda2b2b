//! A dedicated revision on this host, next to its gateway: the harness's files, its launch, its
//! readiness and the node enrollment that hands the gateway's workspace operations to it.
//!
//! ```text
//! <agent>/app-server-token                 the app-server capability token (64 hex, made once);
//!                                          the gateway gets it as APP_SERVER_TOKEN, the launcher
//!                                          only its SHA-256
//! <agent>/harness/{home,codex-home,tmp}/   the harness's HOME, CODEX_HOME (fresh each start), TMPDIR
//! <agent>/harness/workspace/               the Agent's workspace: Codex's cwd, the node's file root
//! <agent>/harness/node/                    the node host's state (device identity and token)
//! <agent>/harness/node.json                the paired node's device id
//! <agent>/harness/run/<revId>/             per revision: launch.json, credential (0600),
//!                                          workspace-setup.json, setup-code (0600, until used),
//!                                          status.json (the launcher's)
//! <agent>/harness/gateway/<revId>/         openclaw.json: the gateway's runtime copy of the
//!                                          snapshot + node binding (apart from the run
//!                                          directory: a contained gateway sees only this)
//! <agent>/logs/<revId>/harness.log         the launcher's log and its children's output
//! <agent>/harness.json                     the running launcher: pid, start time, revision
//! ```
//!
//! One node identity per Agent: a redeploy's node host reconnects with the saved device token
//! and the new revision's runtime config names it from the start; only the first activation
//! (or one whose node is gone) issues a setup code.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_core::compute::{ComputeError, RevisionContext, RevisionTarget, SecretText};
use occ_gateway::{NodeSetup, Session};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Digest as _;

use super::enroll::{
    NODE_CONNECT_WAIT, held_failure, login_input, login_method, node_ready, pair, primary_model_id,
    wait_binding_applied,
};
use super::input::{
    AppServerInput, LaunchInput, LaunchPhase, LaunchStatus, ModelEndpoint, NodeInput,
};
use super::render::{NodeWorkspace, bind_node_workspace};
use crate::failure::{io_error, unavailable};
use crate::fsutil;
use crate::layout::{create_dir, read_json, remove_dir, remove_file, write_json};
use crate::process::startup_output;
use crate::workspace_setup::SetupInput;

/// Largest snapshot or status read back.
const FILE_LIMIT: u64 = 16 * 1024 * 1024;
/// How long occ's enrollment session may take to connect.
const SESSION_CONNECT: Duration = Duration::from_secs(15);

/// The harness's places under an Agent's directory.
#[derive(Debug, Clone)]
pub(crate) struct HarnessDirs {
    agent_dir: PathBuf,
}

impl HarnessDirs {
    pub(crate) fn of(agent_dir: &Path) -> Self {
        Self {
            agent_dir: agent_dir.to_path_buf(),
        }
    }
    fn root(&self) -> PathBuf {
        self.agent_dir.join("harness")
    }
    /// The Agent's workspace (the node's file root).
    pub(crate) fn workspace(&self) -> PathBuf {
        self.root().join("workspace")
    }
    fn node_state(&self) -> PathBuf {
        self.root().join("node")
    }
    fn node_record(&self) -> PathBuf {
        self.root().join("node.json")
    }
    /// The revision's run directory.
    pub(crate) fn run(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.root().join("run").join(rev.as_str())
    }
    /// The directory of the gateway's runtime config of the revision: its own, apart from the
    /// run directory (which holds the harness's credential), so a contained gateway is shown
    /// this directory and nothing of the harness's.
    pub(crate) fn gateway_config_dir(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.root().join("gateway").join(rev.as_str())
    }
    /// The gateway's runtime config of the revision.
    pub(crate) fn runtime_config(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.gateway_config_dir(rev).join("openclaw.json")
    }
    /// The launch input of the revision.
    pub(crate) fn launch_input(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.run(rev).join("launch.json")
    }
    fn status_file(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.run(rev).join("status.json")
    }
    fn setup_code_file(&self, rev: &occ_core::RevisionId) -> PathBuf {
        self.run(rev).join("setup-code")
    }
    /// The launcher's log of the revision.
    pub(crate) fn log(&self, rev: &occ_core::RevisionId) -> PathBuf {
        crate::logs::GatewayLog::of_harness(&self.agent_dir, rev).current_path()
    }
    /// The harness's home (the launcher's working directory).
    pub(crate) fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    /// What a contained harness sees: the launcher and the runtime read-only; its home, Codex
    /// home, temporary files, workspace, node state, the revision's run directory (launch input,
    /// credential, status, setup code) and the revision's log directory read-write. Not the
    /// gateway's config, token or state, nor anything else of the Agent's or occ's.
    pub(crate) fn sandbox_view(
        &self,
        rev: &occ_core::RevisionId,
        launcher: &Path,
        runtime_root: &Path,
    ) -> crate::sandbox::View {
        let mut read_write: Vec<PathBuf> = ["home", "codex-home", "tmp", "workspace", "node"]
            .iter()
            .map(|sub| self.root().join(sub))
            .collect();
        read_write.push(self.run(rev));
        read_write.extend(self.log(rev).parent().map(Path::to_path_buf));
        crate::sandbox::View {
            read_only: vec![launcher.to_path_buf(), runtime_root.to_path_buf()],
            read_write,
            // Codex runs its tools in a bubblewrap sandbox of its own.
            nests_sandboxes: true,
            uid: None,
            network: None,
        }
    }

    /// The harness's private network: reached on its app-server's `port`, reaching its
    /// gateway on `gateway_port` and the endpoints its launch `input` names (the model).
    pub(crate) fn network(
        &self,
        rev: &occ_core::RevisionId,
        port: u16,
        gateway_port: u16,
        input: &Path,
    ) -> Result<crate::sandbox::PrivateNetwork, ComputeError> {
        let input: serde_json::Value = read_json(input)?.ok_or_else(|| {
            crate::failure::unavailable(format!("no launch input at {}", input.display()))
        })?;
        let mut endpoints = crate::sandbox::named_endpoints(&input);
        endpoints.insert(("127.0.0.1".into(), gateway_port));
        let socket_dir = self.run(rev).join("net");
        let _ = std::fs::remove_dir_all(&socket_dir);
        create_dir(&socket_dir)?;
        Ok(crate::sandbox::PrivateNetwork::for_endpoints(
            socket_dir, port, endpoints,
        ))
    }

    /// Creates the harness's directories (0700).
    pub(crate) fn create(&self, rev: &occ_core::RevisionId) -> Result<(), ComputeError> {
        create_dir(&self.root())?;
        for sub in [
            "home",
            "codex-home",
            "tmp",
            "workspace",
            "node",
            "run",
            "gateway",
        ] {
            create_dir(&self.root().join(sub))?;
        }
        create_dir(&self.run(rev))?;
        create_dir(&self.gateway_config_dir(rev))
    }

    /// Removes what only the revision's harness used (its credential, setup code, launch input
    /// and runtime config): a retired revision never runs again.
    pub(crate) fn retire(&self, rev: &occ_core::RevisionId) -> Result<(), ComputeError> {
        remove_dir(&self.run(rev))?;
        remove_dir(&self.gateway_config_dir(rev))
    }
}

/// `node.json`: the node paired for the Agent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeRecord {
    device_id: String,
}

/// The app-server token of the Agent (`app-server-token`, 64 hex), made on first use.
pub(crate) fn app_server_token(agent_dir: &Path) -> Result<SecretText, ComputeError> {
    let path = agent_dir.join("app-server-token");
    if let Some(bytes) = fsutil::read_bounded(&path, 256).map_err(|e| io_error("read", &path, e))? {
        let token = String::from_utf8(bytes)
            .ok()
            .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| crate::failure::ownership(format!("{} is malformed", path.display())))?;
        return Ok(SecretText::new(token));
    }
    let token = hex::encode(rand::random::<[u8; 32]>());
    fsutil::write_atomic(&path, token.as_bytes(), true)
        .map_err(|e| io_error("create", &path, e))?;
    Ok(SecretText::new(token))
}

/// What [`write_launch_files`] needs besides the revision.
pub(crate) struct LaunchFiles<'a> {
    pub runtime_dir: &'a Path,
    pub model_base_url: Option<&'a str>,
    /// The credential proxy's capability URL serving the revision's API key
    /// ([`crate::credential_proxy::CredentialProxy::register_harness`]): Codex is pointed at it
    /// and its credential file holds only the placeholder.
    pub proxied_model: Option<&'a str>,
    pub app_server_port: u16,
    pub app_server_token: &'a SecretText,
    pub gateway_port: u16,
}

/// Writes the revision's launch input, its credential (0600) and its staged workspace setup,
/// and removes a previous start's status and unused setup code.
pub(crate) fn write_launch_files(
    dirs: &HarnessDirs,
    rev: &RevisionTarget,
    ctx: &RevisionContext,
    files: &LaunchFiles<'_>,
) -> Result<PathBuf, ComputeError> {
    login_method(rev)?;
    let credential = ctx.harness_credential.as_ref().ok_or_else(|| {
        ComputeError::permanent(
            ReasonCode::InvalidHarnessAuth,
            "the revision has no harness credential",
        )
    })?;
    dirs.create(&rev.revision_id)?;
    let run = dirs.run(&rev.revision_id);
    let credential_file = run.join("credential");
    // Proxied, the key never reaches the harness: Codex logs in with the placeholder, which the
    // proxy replaces on the wire.
    let (credential, model_base_url) = match files.proxied_model {
        Some(url) => (crate::credential_proxy::PLACEHOLDER, Some(url)),
        None => (credential.expose(), files.model_base_url),
    };
    fsutil::write_atomic(&credential_file, credential.as_bytes(), false)
        .map_err(|e| io_error("write", &credential_file, e))?;
    let workspace_setup = match &ctx.workspace_setup {
        Some(setup) => {
            let path = run.join("workspace-setup.json");
            fsutil::write_atomic(&path, &SetupInput::from(setup).to_json(), false)
                .map_err(|e| io_error("write", &path, e))?;
            Some(path)
        }
        None => None,
    };
    let root = dirs.root();
    let input = LaunchInput {
        runtime_dir: files.runtime_dir.to_path_buf(),
        workspace: dirs.workspace(),
        home: root.join("home"),
        codex_home: root.join("codex-home"),
        tmp_dir: root.join("tmp"),
        log_file: dirs.log(&rev.revision_id),
        log_stdout: false,
        status_file: dirs.status_file(&rev.revision_id),
        workspace_setup,
        login: login_input(rev, credential_file)?,
        model: model_base_url.map(|base_url| ModelEndpoint {
            base_url: base_url.to_owned(),
            model: primary_model_id(rev),
        }),
        app_server: AppServerInput {
            host: std::net::Ipv4Addr::LOCALHOST.into(),
            port: files.app_server_port,
            token_sha256: hex::encode(sha2::Sha256::digest(
                files.app_server_token.expose().as_bytes(),
            )),
        },
        node: NodeInput {
            gateway_host: "127.0.0.1".into(),
            gateway_port: files.gateway_port,
            state_dir: dirs.node_state(),
            setup_code_file: dirs.setup_code_file(&rev.revision_id),
        },
    };
    input
        .validate()
        .map_err(|m| ComputeError::permanent(ReasonCode::InvalidHostSettings, m))?;
    remove_file(&input.status_file)?;
    remove_file(&input.node.setup_code_file)?;
    let path = dirs.launch_input(&rev.revision_id);
    write_json(&path, &input)?;
    Ok(path)
}

/// Writes the gateway's runtime config of the revision: its stored snapshot, bound to the
/// Agent's paired node when there is one.
pub(crate) fn write_runtime_config(
    dirs: &HarnessDirs,
    snapshot: &Path,
    rev: &RevisionTarget,
) -> Result<Option<String>, ComputeError> {
    let node = read_json::<NodeRecord>(&dirs.node_record())?.map(|n| n.device_id);
    write_bound_config(dirs, snapshot, rev, node.as_deref())?;
    Ok(node)
}

fn write_bound_config(
    dirs: &HarnessDirs,
    snapshot: &Path,
    rev: &RevisionTarget,
    node: Option<&str>,
) -> Result<(), ComputeError> {
    let bytes = fsutil::read_bounded(snapshot, FILE_LIMIT)
        .map_err(|e| io_error("read", snapshot, e))?
        .ok_or_else(|| unavailable(format!("{} is missing", snapshot.display())))?;
    let mut doc: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|e| {
        ComputeError::permanent(
            ReasonCode::SnapshotInvalid,
            format!("{}: {e}", snapshot.display()),
        )
    })?;
    if let Some(node_id) = node {
        // Canonical, as the node host compares it with its own configuration's workspace.
        let workspace = dirs.workspace();
        let remote_root = std::fs::canonicalize(&workspace)
            .map_err(|e| io_error("resolve", &workspace, e))?
            .display()
            .to_string();
        bind_node_workspace(
            &mut doc,
            &NodeWorkspace {
                node_id,
                remote_root: &remote_root,
            },
        );
    }
    let out = serde_json::to_vec_pretty(&doc).map_err(|e| unavailable(e.to_string()))?;
    let path = dirs.runtime_config(&rev.revision_id);
    fsutil::write_atomic(&path, &out, false).map_err(|e| io_error("write", &path, e))
}

/// The launcher's status, if it wrote one.
fn read_status(dirs: &HarnessDirs, rev: &occ_core::RevisionId) -> Option<LaunchStatus> {
    let bytes = fsutil::read_bounded(&dirs.status_file(rev), FILE_LIMIT).ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// Whether the launcher of `rev` reports its children running (no held failure).
pub(crate) fn reports_running(dirs: &HarnessDirs, rev: &occ_core::RevisionId) -> bool {
    matches!(
        read_status(dirs, rev),
        Some(LaunchStatus {
            phase: LaunchPhase::Running,
            code: None
        })
    )
}

/// Waits until the launcher of `rev` runs its children and the app-server accepts connections:
/// a held failure is its permanent error; a launcher that exits or takes longer than `wait` is
/// transient `HARNESS_NOT_READY`. Each error carries the log's redacted tail.
pub(crate) async fn wait_running(
    dirs: &HarnessDirs,
    rev: &RevisionTarget,
    ctx: &RevisionContext,
    redact_token: &str,
    app_server_port: u16,
    alive: impl Fn() -> bool,
    wait: Duration,
) -> Result<(), ComputeError> {
    let deadline = Instant::now() + wait;
    let output = || startup_output(&dirs.log(&rev.revision_id), ctx, redact_token);
    loop {
        match read_status(dirs, &rev.revision_id) {
            Some(LaunchStatus {
                code: Some(code), ..
            }) => return Err(held_failure(code).with_output(output())),
            Some(LaunchStatus {
                phase: LaunchPhase::Running,
                code: None,
            }) if tokio::net::TcpStream::connect(("127.0.0.1", app_server_port))
                .await
                .is_ok() =>
            {
                return Ok(());
            }
            _ => {}
        }
        if !alive() {
            return Err(ComputeError::transient(
                ReasonCode::HarnessNotReady,
                "the harness exited while starting",
            )
            .with_output(output()));
        }
        if Instant::now() >= deadline {
            return Err(ComputeError::transient(
                ReasonCode::HarnessNotReady,
                format!("the harness did not start its app-server in {wait:?}"),
            )
            .with_output(output()));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Makes the gateway serve the workspace from the harness's node: a node already paired (named in
/// the runtime config from the start) only has to connect with its commands; otherwise a setup
/// code goes to the launcher's private file, the paired device is recorded and bound into the
/// runtime config, and the gateway applies it.
pub(crate) async fn enroll(
    dirs: &HarnessDirs,
    rev: &RevisionTarget,
    snapshot: &Path,
    endpoint: &occ_gateway::Endpoint,
    paired: Option<String>,
) -> Result<(), ComputeError> {
    let (mut session, _) = Session::connect(endpoint, SESSION_CONNECT)
        .await
        .map_err(|e| {
            ComputeError::transient(
                ReasonCode::AgentGatewayUnavailable,
                format!("enrollment session: {e}"),
            )
        })?;
    let result = enroll_over(&mut session, dirs, rev, snapshot, endpoint, paired).await;
    session.close().await;
    result
}

async fn enroll_over(
    session: &mut Session,
    dirs: &HarnessDirs,
    rev: &RevisionTarget,
    snapshot: &Path,
    endpoint: &occ_gateway::Endpoint,
    paired: Option<String>,
) -> Result<(), ComputeError> {
    if let Some(device_id) = paired {
        if node_ready(session, &device_id, NODE_CONNECT_WAIT).await? {
            return wait_binding_applied(session, &device_id).await;
        }
        // The gateway no longer knows the node (or it cannot reconnect): pair anew.
        tracing::warn!(device_id = %device_id, "the recorded node did not reconnect; pairing again");
    }
    let code_file = dirs.setup_code_file(&rev.revision_id);
    let device_id = pair(
        session,
        &endpoint.url,
        async |setup: &NodeSetup| {
            fsutil::write_atomic(
                &code_file,
                setup.setup_code.expose_secret().as_bytes(),
                false,
            )
            .map_err(|e| io_error("write", &code_file, e))
        },
        async || remove_file(&code_file),
    )
    .await?;
    write_json(
        &dirs.node_record(),
        &NodeRecord {
            device_id: device_id.clone(),
        },
    )?;
    tracing::info!(device_id = %device_id, revision = %rev.revision_id, "harness node paired");
    write_bound_config(dirs, snapshot, rev, Some(&device_id))?;
    if !node_ready(session, &device_id, NODE_CONNECT_WAIT).await? {
        return Err(ComputeError::transient(
            ReasonCode::WorkspaceNodePending,
            "the paired node did not connect with its commands",
        ));
    }
    wait_binding_applied(session, &device_id).await
}
