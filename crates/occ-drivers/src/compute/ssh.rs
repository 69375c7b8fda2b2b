//! The SSH Compute Driver: each Agent's OpenClaw gateway runs on an operator-provisioned Linux
//! host, laid out and operated by the process Driver's own code, which `occ compute-host` runs
//! on the host (see [`super::host`]). Only the transport differs.
//!
//! Each verb is one `ssh` run of the system client with strict host-key checking against the
//! operator's `known_hosts` file, key authentication only and no user configuration:
//!
//! ```text
//! ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=<file>
//!     -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o IdentityAgent=none
//!     -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o ConnectTimeout=<n>
//!     -o LogLevel=ERROR -i <key> -p <port> -l <user> -- <address> <remote occ> compute-host
//! ```
//!
//! The request (settings, targets, staged workspace files) goes on stdin, never argv; the reply
//! is the last stdout line. A host that cannot be reached, a lost session, an unparsable reply or
//! a timeout is transient (the worker retries); an unknown or changed host key, refused
//! authentication and the host's own permanent failures (ownership, configuration) are
//! permanent. Secrets are never delivered to a host: a revision that needs one is refused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use occ_core::NamespaceId;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::host::{
    HostOp, HostReply, HostRequest, HostSettings, HostValue, WireSetup, WireVersion, safe_path,
};
use super::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, GatewayAccess,
    NamespaceTarget, Readiness, RevisionContext, RevisionTarget, RuntimeState, SecretText,
};

/// One host, as the operator configured it (trusted settings).
#[derive(Debug, Clone)]
pub struct SshHost {
    /// Host name or address (`[A-Za-z0-9:][A-Za-z0-9.:-]*`).
    pub address: String,
    /// SSH port.
    pub port: u16,
    /// The login user (root: the host side creates one Unix user per Agent).
    pub user: String,
    /// The private key (key authentication only).
    pub identity_file: PathBuf,
    /// The `known_hosts` file holding the host's key (strict checking).
    pub known_hosts_file: PathBuf,
    /// The `occ` binary on the host.
    pub remote_occ: PathBuf,
    /// The layout, runtime, ports and accounts on the host.
    pub host: HostSettings,
}

/// Settings of the SSH Driver.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// The host Agents run on unless their Namespace has its own.
    pub host: SshHost,
    /// Hosts of particular Namespaces, by Namespace id.
    pub namespace_hosts: BTreeMap<NamespaceId, SshHost>,
    /// `ConnectTimeout` of each `ssh` run.
    pub connect_timeout: Duration,
    /// Bound on one operation end to end (then the `ssh` client is killed: transient).
    pub operation_timeout: Duration,
    /// Maintenance passes (crash detection and restart by the worker), if any.
    pub maintenance_interval: Option<Duration>,
}

/// The SSH Compute Driver.
pub struct SshCompute {
    selection: ComputeSelection,
    settings: SshSettings,
    /// Local forwards to hosts' gateway ports, for the native protocol (workspace files).
    tunnels: tokio::sync::Mutex<BTreeMap<TunnelKey, Tunnel>>,
}

/// One host's gateway port: `(user, address, ssh port, gateway port)`.
type TunnelKey = (String, String, u16, u16);

/// `ssh -L 127.0.0.1:<local>:127.0.0.1:<gateway port>` kept open to one host. Its remote
/// command reads stdin, so the tunnel ends when this process ends (the pipe closes), even
/// when it is killed.
struct Tunnel {
    local_port: u16,
    child: tokio::process::Child,
    _stdin: tokio::process::ChildStdin,
}

/// Largest reply read from the host.
const STDOUT_LIMIT: usize = 64 * 1024;
/// How much of ssh's stderr is kept for messages.
const STDERR_LIMIT: usize = 4 * 1024;

fn invalid(message: impl Into<String>) -> ComputeError {
    ComputeError::permanent("INVALID_HOST_SETTINGS", message)
}

/// Whether `address` is a plain host name or address (it cannot be read as an ssh option).
pub fn valid_address(address: &str) -> bool {
    let mut bytes = address.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b':' || b == b'-')
}

impl SshCompute {
    /// The Driver over `settings`, checked (nothing is contacted yet).
    pub fn new(settings: SshSettings) -> Result<Self, ComputeError> {
        Self::check(&settings.host)?;
        for (ns, host) in &settings.namespace_hosts {
            Self::check(host).map_err(|e| invalid(format!("the host of {ns}: {}", e.message)))?;
        }
        Ok(Self {
            selection: ComputeSelection::ssh(),
            settings,
            tunnels: tokio::sync::Mutex::new(BTreeMap::new()),
        })
    }

    fn check(host: &SshHost) -> Result<(), ComputeError> {
        if !valid_address(&host.address) {
            return Err(invalid(format!(
                "host address {:?} is not a host name or address",
                host.address
            )));
        }
        if host.user.is_empty()
            || !host
                .user
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            || host.user.starts_with('-')
        {
            return Err(invalid(format!(
                "ssh user {:?} is not a user name",
                host.user
            )));
        }
        for (name, path) in [
            ("identity file", &host.identity_file),
            ("known_hosts file", &host.known_hosts_file),
        ] {
            if !path.is_absolute() {
                return Err(invalid(format!(
                    "the {name} {} must be absolute",
                    path.display()
                )));
            }
        }
        if !safe_path(&host.remote_occ) {
            return Err(invalid(format!(
                "the remote occ path {} must be absolute, without whitespace, quotes or `..`",
                host.remote_occ.display()
            )));
        }
        if let Some(problem) = host.host.problem() {
            return Err(invalid(problem));
        }
        Ok(())
    }

    /// The host of Namespace `ns`.
    pub fn host_of(&self, ns: &NamespaceId) -> &SshHost {
        self.settings
            .namespace_hosts
            .get(ns)
            .unwrap_or(&self.settings.host)
    }

    /// The settings.
    pub fn settings(&self) -> &SshSettings {
        &self.settings
    }

    fn command(&self, host: &SshHost) -> tokio::process::Command {
        let mut cmd = self.ssh(host);
        cmd.arg("--")
            .arg(&host.address)
            .arg(&host.remote_occ)
            .arg("compute-host")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// `ssh` with occ's fixed options for `host`, up to the destination.
    fn ssh(&self, host: &SshHost) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("ssh");
        cmd.arg("-F").arg("/dev/null");
        for option in [
            "BatchMode=yes".to_owned(),
            "StrictHostKeyChecking=yes".to_owned(),
            format!("UserKnownHostsFile={}", host.known_hosts_file.display()),
            "GlobalKnownHostsFile=/dev/null".to_owned(),
            "IdentitiesOnly=yes".to_owned(),
            "IdentityAgent=none".to_owned(),
            "PasswordAuthentication=no".to_owned(),
            "KbdInteractiveAuthentication=no".to_owned(),
            "PubkeyAuthentication=yes".to_owned(),
            format!(
                "ConnectTimeout={}",
                self.settings.connect_timeout.as_secs().max(1)
            ),
            "ServerAliveInterval=15".to_owned(),
            "ServerAliveCountMax=4".to_owned(),
            "LogLevel=ERROR".to_owned(),
        ] {
            cmd.arg("-o").arg(option);
        }
        cmd.arg("-i")
            .arg(&host.identity_file)
            .arg("-p")
            .arg(host.port.to_string())
            .arg("-l")
            .arg(&host.user)
            .env_remove("SSH_AUTH_SOCK");
        cmd
    }

    /// A local address forwarded to `gateway_port` on the host's loopback, through an `ssh`
    /// session with the same host-key and key checks as every operation: the gateway's token
    /// never crosses the network in clear and the gateway need not listen beyond loopback.
    /// One forward per host and port, reused while its `ssh` runs.
    async fn tunnel(&self, host: &SshHost, gateway_port: u16) -> Result<u16, ComputeError> {
        let key = (
            host.user.clone(),
            host.address.clone(),
            host.port,
            gateway_port,
        );
        let mut tunnels = self.tunnels.lock().await;
        if let Some(tunnel) = tunnels.get_mut(&key) {
            if matches!(tunnel.child.try_wait(), Ok(None)) {
                return Ok(tunnel.local_port);
            }
            tunnels.remove(&key);
        }
        let local_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| {
                ComputeError::transient("DEPENDENCY_UNAVAILABLE", format!("no local port: {e}"))
            })?;
        let mut cmd = self.ssh(host);
        cmd.arg("-o")
            .arg("ExitOnForwardFailure=yes")
            .arg("-T")
            .arg("-L")
            .arg(format!("127.0.0.1:{local_port}:127.0.0.1:{gateway_port}"))
            .arg("--")
            .arg(&host.address)
            .arg("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            ComputeError::transient(
                "DEPENDENCY_UNAVAILABLE",
                format!("cannot run the ssh client: {e}"),
            )
        })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let deadline =
            tokio::time::Instant::now() + self.settings.connect_timeout + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut err) = child.stderr.take() {
                    let _ = (&mut err)
                        .take(STDERR_LIMIT as u64)
                        .read_to_string(&mut stderr)
                        .await;
                }
                return Err(transport_failure(
                    host,
                    "gateway-tunnel",
                    status.code(),
                    &stderr,
                ));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", local_port))
                .await
                .is_ok()
            {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    "HOST_UNAVAILABLE",
                    format!(
                        "the forward to the gateway on {} did not open in time",
                        target(host)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Keep ssh's stderr drained so it never blocks.
        if let Some(mut err) = child.stderr.take() {
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut err, &mut tokio::io::sink()).await;
            });
        }
        tunnels.insert(
            key,
            Tunnel {
                local_port,
                child,
                _stdin: stdin,
            },
        );
        Ok(local_port)
    }

    /// Runs one operation on the host.
    async fn call(&self, operation: HostOp) -> Result<HostValue, ComputeError> {
        let name = operation.name();
        let host = self.host_of(operation.namespace_id());
        let request = HostRequest {
            version: WireVersion::current(),
            deadline_ms: host_deadline_ms(self.settings.operation_timeout),
            settings: host.host.clone(),
            driver_id: self.selection.identity.id.clone(),
            operation,
        };
        let body = serde_json::to_vec(&request)
            .map_err(|e| ComputeError::permanent("INVALID_HOST_REQUEST", e.to_string()))?;
        let outcome =
            tokio::time::timeout(self.settings.operation_timeout, self.exchange(host, &body))
                .await
                .map_err(|_| {
                    ComputeError::transient(
                        "HOST_OPERATION_TIMEOUT",
                        format!(
                            "{name} on {} did not finish in {:?}",
                            target(host),
                            self.settings.operation_timeout
                        ),
                    )
                })?;
        let (status, stdout, stderr) = outcome?;
        interpret(host, name, status.code(), &stdout, &stderr)
    }

    /// Writes the request, reads bounded stdout and stderr, waits for `ssh`.
    async fn exchange(
        &self,
        host: &SshHost,
        body: &[u8],
    ) -> Result<(std::process::ExitStatus, Vec<u8>, String), ComputeError> {
        let mut child = self.command(host).spawn().map_err(|e| {
            ComputeError::transient(
                "DEPENDENCY_UNAVAILABLE",
                format!("cannot run the ssh client: {e}"),
            )
        })?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let write = async {
            // A host that closes early makes this fail; the reply (or its absence) says why.
            let _ = stdin.write_all(body).await;
            drop(stdin);
        };
        let read_out = async {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => break Ok(buf),
                    Ok(n) => {
                        if buf.len() + n > STDOUT_LIMIT {
                            break Err(ComputeError::transient(
                                "HOST_REPLY_INVALID",
                                format!("the host's reply exceeds {STDOUT_LIMIT} bytes"),
                            ));
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                }
            }
        };
        let read_err = async {
            let mut buf = Vec::new();
            let _ = (&mut stderr)
                .take(STDERR_LIMIT as u64)
                .read_to_end(&mut buf)
                .await;
            // Drain the rest so ssh never blocks on a full pipe.
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            String::from_utf8_lossy(&buf).into_owned()
        };
        let ((), out, err) = tokio::join!(write, read_out, read_err);
        let out = out?;
        let status = child
            .wait()
            .await
            .map_err(|e| ComputeError::transient("DEPENDENCY_UNAVAILABLE", format!("ssh: {e}")))?;
        Ok((status, out, err))
    }

    /// A revision that needs something delivered to the host that this Driver never delivers.
    fn refuse_secrets(rev: &RevisionTarget, ctx: &RevisionContext) -> Result<(), ComputeError> {
        if !ctx.environment.is_empty()
            || ctx.harness_credential.is_some()
            || rev.spec.secret_bindings.is_some()
        {
            return Err(ComputeError::permanent(
                "SECRET_DELIVERY_UNSUPPORTED",
                "the SSH Compute Driver does not deliver Secrets to hosts: remove the \
                 Configuration's Secret bindings and use harnessAuth runtime with credentials \
                 provisioned on the host",
            ));
        }
        Ok(())
    }
}

/// The deadline `occ compute-host` gets: below the Driver's own bound, so the host abandons the
/// operation (and says so) before the client gives up on it.
fn host_deadline_ms(operation_timeout: Duration) -> u64 {
    let margin = (operation_timeout / 10).min(Duration::from_secs(10));
    u64::try_from(operation_timeout.saturating_sub(margin).as_millis())
        .unwrap_or(u64::MAX)
        .max(1_000)
}

/// What one `ssh` run answered: the last non-empty stdout line is the reply (the empty lines
/// before it are the host's heartbeats).
fn interpret(
    host: &SshHost,
    op: &str,
    code: Option<i32>,
    stdout: &[u8],
    stderr: &str,
) -> Result<HostValue, ComputeError> {
    let text = String::from_utf8_lossy(stdout);
    let last = text.lines().rev().find(|l| !l.trim().is_empty());
    match last.map(serde_json::from_str::<HostReply>) {
        Some(Ok(HostReply::Ok { value })) => Ok(value),
        Some(Ok(HostReply::Failed { mut error })) => {
            if error.code == "HOST_REQUEST_INVALID" {
                // An older occ on the host rejects fields it does not know.
                error.message = format!(
                    "{} (is the host's occ the same build as this {}?)",
                    error.message,
                    WireVersion::current()
                );
            }
            tracing::debug!(op, error = %error, "host operation failed");
            Err(error)
        }
        // A complete line the host's occ printed that this build cannot read (ssh itself ends
        // with 255 when the session is lost, possibly mid-line).
        Some(Err(_)) if code != Some(255) => {
            Err(version_mismatch(host, "its reply cannot be read"))
        }
        // An occ without `compute-host` (clap's usage error).
        _ if stderr.contains("unrecognized subcommand") && stderr.contains("compute-host") => Err(
            version_mismatch(host, "it does not know the compute-host command"),
        ),
        _ => Err(transport_failure(host, op, code, stderr)),
    }
}

/// The host's occ is another build (its reply is not shown: it may hold a token).
fn version_mismatch(host: &SshHost, why: &str) -> ComputeError {
    ComputeError::permanent(
        "HOST_VERSION_MISMATCH",
        format!(
            "{} on {} is not the same build as this {}: {why}; install this occ build on the host",
            host.remote_occ.display(),
            target(host),
            WireVersion::current()
        ),
    )
}

fn target(host: &SshHost) -> String {
    format!("{}@{}:{}", host.user, host.address, host.port)
}

/// A run without a reply: the host key, authentication, the connection or the remote
/// command failed.
fn transport_failure(host: &SshHost, op: &str, code: Option<i32>, stderr: &str) -> ComputeError {
    let detail: String = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
        .chars()
        .take(600)
        .collect();
    if stderr.contains("Host key verification failed")
        || stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || stderr.contains("host key is known")
    {
        return ComputeError::permanent(
            "HOST_KEY_VERIFICATION_FAILED",
            format!(
                "the host key of {} is not the one recorded in {} (unknown or changed); the host is refused: {detail}",
                target(host),
                host.known_hosts_file.display()
            ),
        );
    }
    if stderr.contains("Permission denied") {
        return ComputeError::permanent(
            "HOST_AUTHENTICATION_FAILED",
            format!(
                "{} refused the key {}: {detail}",
                target(host),
                host.identity_file.display()
            ),
        );
    }
    if code == Some(127) || code == Some(126) {
        return ComputeError::permanent(
            "INVALID_HOST_SETTINGS",
            format!(
                "{} cannot run {} compute-host (exit {}): {detail}",
                target(host),
                host.remote_occ.display(),
                code.unwrap_or_default()
            ),
        );
    }
    ComputeError::transient(
        "HOST_UNAVAILABLE",
        format!(
            "{op} on {}: ssh ended without a reply (exit {}): {detail}",
            target(host),
            code.map_or_else(|| "by signal".to_owned(), |c| c.to_string())
        ),
    )
}

fn unexpected(op: &str, value: &HostValue) -> ComputeError {
    ComputeError::transient(
        "HOST_REPLY_INVALID",
        format!("{op}: unexpected reply {value:?}"),
    )
}

fn convergence(value: HostValue) -> Result<Convergence, ComputeError> {
    match value {
        HostValue::Convergence { pending: false } => Ok(Convergence::Done),
        HostValue::Convergence { pending: true } => Ok(Convergence::Pending),
        other => Err(unexpected("namespace", &other)),
    }
}

fn done(op: &str, value: HostValue) -> Result<(), ComputeError> {
    match value {
        HostValue::Done => Ok(()),
        other => Err(unexpected(op, &other)),
    }
}

#[async_trait::async_trait]
impl Compute for SshCompute {
    fn selection(&self) -> &ComputeSelection {
        &self.selection
    }

    fn supports_workspace_setup(&self) -> bool {
        true
    }

    fn maintenance_interval(&self) -> Option<Duration> {
        self.settings.maintenance_interval
    }

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        convergence(
            self.call(HostOp::EnsureNamespace {
                namespace: ns.clone(),
            })
            .await?,
        )
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        convergence(
            self.call(HostOp::DeleteNamespace {
                namespace: ns.clone(),
            })
            .await?,
        )
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        Self::refuse_secrets(rev, ctx)?;
        match self
            .call(HostOp::PrepareRevision {
                revision: Box::new(rev.clone()),
                workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
            })
            .await?
        {
            HostValue::Readiness { ready: true, .. } => Ok(Readiness::Ready),
            HostValue::Readiness { ready: false, code } => Ok(Readiness::Pending {
                code: code.unwrap_or_else(|| "REVISION_INCOMPLETE".into()),
            }),
            other => Err(unexpected("prepare-revision", &other)),
        }
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        Self::refuse_secrets(rev, ctx)?;
        done(
            "activate-revision",
            self.call(HostOp::ActivateRevision {
                revision: Box::new(rev.clone()),
                workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
            })
            .await?,
        )
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        Self::refuse_secrets(previous, ctx)?;
        done(
            "restore-revision",
            self.call(HostOp::RestoreRevision {
                previous: Box::new(previous.clone()),
                failed: Box::new(failed.clone()),
                workspace_setup: ctx.workspace_setup.as_ref().map(WireSetup::from),
            })
            .await?,
        )
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        done(
            "stop-revision",
            self.call(HostOp::StopRevision {
                revision: Box::new(rev.clone()),
            })
            .await?,
        )
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        done(
            "retire-revision",
            self.call(HostOp::RetireRevision {
                revision: Box::new(rev.clone()),
            })
            .await?,
        )
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        done(
            "delete-agent",
            self.call(HostOp::DeleteAgent {
                agent: agent.clone(),
            })
            .await?,
        )
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        match self
            .call(HostOp::Observe {
                revision: Box::new(rev.clone()),
            })
            .await?
        {
            HostValue::Runtime { state } => match state.as_str() {
                "serving" => Ok(RuntimeState::Serving),
                "not-running" => Ok(RuntimeState::NotRunning),
                "not-current" => Ok(RuntimeState::NotCurrent),
                _ => Err(ComputeError::transient(
                    "HOST_REPLY_INVALID",
                    format!("observe: unknown state {state:?}"),
                )),
            },
            other => Err(unexpected("observe", &other)),
        }
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        match self
            .call(HostOp::GatewayAccess {
                agent: agent.clone(),
            })
            .await?
        {
            HostValue::Gateway { port, token } => {
                let local = self.tunnel(self.host_of(&agent.namespace_id), port).await?;
                Ok(Some(GatewayAccess {
                    url: format!("ws://127.0.0.1:{local}"),
                    token: SecretText::new(token),
                }))
            }
            HostValue::NoGateway => Ok(None),
            other => Err(unexpected("gateway-access", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::FailureClass;
    use crate::compute::host::OCC_VERSION;
    use crate::compute::process::GatewayBind;

    fn host() -> SshHost {
        SshHost {
            address: "h.example.com".into(),
            port: 22,
            user: "root".into(),
            identity_file: "/id".into(),
            known_hosts_file: "/kh".into(),
            remote_occ: "/usr/local/bin/occ".into(),
            host: HostSettings {
                root: "/var/lib/occ/compute".into(),
                runtime_root: "/var/lib/occ/runtime".into(),
                port_start: 28000,
                port_end: 28999,
                bind: GatewayBind::Lan,
                account_prefix: "occ-agent".into(),
                ready_timeout_ms: 1,
                stop_timeout_ms: 1,
                lock_timeout_ms: 1,
                supervisor: super::super::host::SupervisorChoice::Auto,
                systemd_unit_dir: super::super::host::default_unit_dir(),
            },
        }
    }

    #[test]
    fn the_reply_is_the_last_line_after_the_heartbeats() {
        let reply = serde_json::to_string(&HostReply::Ok {
            value: HostValue::Done,
        })
        .expect("json");
        let out = format!("\n\n\n{reply}\n");
        assert_eq!(
            interpret(&host(), "op", Some(0), out.as_bytes(), "").expect("ok"),
            HostValue::Done
        );
        // Heartbeats, then the session was lost: transient.
        let err =
            interpret(&host(), "op", Some(255), b"\n\n", "Connection closed").expect_err("lost");
        assert_eq!(
            (err.class, err.code.as_str()),
            (FailureClass::Transient, "HOST_UNAVAILABLE")
        );
    }

    #[test]
    fn a_reply_of_another_build_is_a_version_mismatch() {
        // A complete line this build cannot read (e.g. an older occ's reply, which may hold a
        // token): permanent, and the line is not repeated.
        let older = br#"{"result":"ok","token":"0123456789abcdef"}"#;
        let err = interpret(&host(), "op", Some(0), older, "").expect_err("older");
        assert_eq!(
            (err.class, err.code.as_str()),
            (FailureClass::Permanent, "HOST_VERSION_MISMATCH")
        );
        assert!(err.message.contains(OCC_VERSION), "{}", err.message);
        assert!(!err.message.contains("0123456789abcdef"));
        // An occ that has no compute-host command.
        let err = interpret(
            &host(),
            "op",
            Some(2),
            b"",
            "error: unrecognized subcommand 'compute-host'\n\nUsage: occ <COMMAND>",
        )
        .expect_err("no subcommand");
        assert_eq!(err.code, "HOST_VERSION_MISMATCH");
        // A line cut by a lost session is not a version problem.
        let err = interpret(&host(), "op", Some(255), br#"{"status":"o"#, "").expect_err("cut");
        assert_eq!(err.code, "HOST_UNAVAILABLE");
        // An older host refusing the request's new fields points at the build too.
        let refused = serde_json::to_string(&HostReply::Failed {
            error: ComputeError::permanent("HOST_REQUEST_INVALID", "unknown field `version`"),
        })
        .expect("json");
        let err = interpret(&host(), "op", Some(0), refused.as_bytes(), "").expect_err("refused");
        assert_eq!(err.code, "HOST_REQUEST_INVALID");
        assert!(err.message.contains("same build"), "{}", err.message);
    }

    #[test]
    fn the_host_deadline_is_below_the_client_bound() {
        assert_eq!(host_deadline_ms(Duration::from_secs(600)), 590_000);
        assert_eq!(host_deadline_ms(Duration::from_secs(60)), 54_000);
        assert_eq!(host_deadline_ms(Duration::from_millis(10)), 1_000);
    }

    #[test]
    fn addresses_cannot_be_options() {
        for good in ["127.0.0.1", "host-1.example.com", "::1", "fe80::1"] {
            assert!(valid_address(good), "{good}");
        }
        for bad in ["", "-oProxyCommand=x", "a b", "a;b", "a/b", ".x"] {
            assert!(!valid_address(bad), "{bad}");
        }
    }
}
