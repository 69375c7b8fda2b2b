//! Running the system `ssh` client for the SSH Compute Driver: one `ssh` run per operation
//! (request on stdin, bounded stdout and stderr), local forwards to a host's gateway ports, and
//! what a run without a usable reply means (host key, authentication, remote command, session).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_host::wire::{HostReply, HostValue, WireVersion};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::settings::SshHost;
use crate::compute::ComputeError;

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

/// Largest reply read from the host: a log read carries up to 1 MiB of output, which JSON
/// escaping can grow several times.
const STDOUT_LIMIT: usize = 8 * 1024 * 1024;
/// How much of ssh's stderr is kept for messages.
const STDERR_LIMIT: usize = 4 * 1024;

/// The `ssh` client with occ's fixed options, and the forwards it keeps open.
pub(super) struct Transport {
    /// `ConnectTimeout` of each `ssh` run.
    connect_timeout: Duration,
    /// Local forwards to hosts' gateway ports, for the native protocol (workspace files).
    tunnels: tokio::sync::Mutex<BTreeMap<TunnelKey, Tunnel>>,
}

impl Transport {
    /// A transport whose runs give up connecting after `connect_timeout`.
    pub(super) fn new(connect_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            tunnels: tokio::sync::Mutex::new(BTreeMap::new()),
        }
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
            format!("ConnectTimeout={}", self.connect_timeout.as_secs().max(1)),
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
    pub(super) async fn tunnel(
        &self,
        host: &SshHost,
        gateway_port: u16,
    ) -> Result<u16, ComputeError> {
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
                ComputeError::transient(
                    ReasonCode::DependencyUnavailable,
                    format!("no local port: {e}"),
                )
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
        let mut child = cmd.spawn().map_err(client_failed)?;
        let stdin = child.stdin.take().expect("piped stdin");
        let deadline = tokio::time::Instant::now() + self.connect_timeout + Duration::from_secs(5);
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
                    ReasonCode::HostUnavailable,
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

    /// Writes the request, reads bounded stdout and stderr, waits for `ssh`.
    pub(super) async fn exchange(
        &self,
        host: &SshHost,
        body: &[u8],
    ) -> Result<(std::process::ExitStatus, Vec<u8>, String), ComputeError> {
        let mut child = self.command(host).spawn().map_err(client_failed)?;
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
                                ReasonCode::HostReplyInvalid,
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
        let status = child.wait().await.map_err(|e| {
            ComputeError::transient(ReasonCode::DependencyUnavailable, format!("ssh: {e}"))
        })?;
        Ok((status, out, err))
    }
}

/// What one `ssh` run answered: the last non-empty stdout line is the reply (the empty lines
/// before it are the host's heartbeats).
pub(super) fn interpret(
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
            if error.code == ReasonCode::HostRequestInvalid {
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

/// The `ssh` client could not be started here.
fn client_failed(e: std::io::Error) -> ComputeError {
    ComputeError::transient(
        ReasonCode::DependencyUnavailable,
        format!("cannot run the ssh client: {e}"),
    )
}

/// The host's occ is another build (its reply is not shown: it may hold a token).
fn version_mismatch(host: &SshHost, why: &str) -> ComputeError {
    ComputeError::permanent(
        ReasonCode::HostVersionMismatch,
        format!(
            "{} on {} is not the same build as this {}: {why}; install this occ build on the host",
            host.remote_occ.display(),
            target(host),
            WireVersion::current()
        ),
    )
}

pub(super) fn target(host: &SshHost) -> String {
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
            ReasonCode::HostKeyVerificationFailed,
            format!(
                "the host key of {} is not the one recorded in {} (unknown or changed); the host is refused: {detail}",
                target(host),
                host.known_hosts_file.display()
            ),
        );
    }
    if stderr.contains("Permission denied") {
        return ComputeError::permanent(
            ReasonCode::HostAuthenticationFailed,
            format!(
                "{} refused the key {}: {detail}",
                target(host),
                host.identity_file.display()
            ),
        );
    }
    if code == Some(127) || code == Some(126) {
        return ComputeError::permanent(
            ReasonCode::InvalidHostSettings,
            format!(
                "{} cannot run {} compute-host (exit {}): {detail}",
                target(host),
                host.remote_occ.display(),
                code.unwrap_or_default()
            ),
        );
    }
    ComputeError::transient(
        ReasonCode::HostUnavailable,
        format!(
            "{op} on {}: ssh ended without a reply (exit {}): {detail}",
            target(host),
            code.map_or_else(|| "by signal".to_owned(), |c| c.to_string())
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_host::snapshot::GatewayBind;
    use occ_host::wire::{HostSettings, OCC_VERSION, SupervisorChoice, default_unit_dir};

    use crate::compute::FailureClass;

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
                supervisor: SupervisorChoice::Auto,
                systemd_unit_dir: default_unit_dir(),
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
            (err.class, err.code),
            (FailureClass::Transient, ReasonCode::HostUnavailable)
        );
    }

    #[test]
    fn a_reply_of_another_build_is_a_version_mismatch() {
        // A complete line this build cannot read (e.g. an older occ's reply, which may hold a
        // token): permanent, and the line is not repeated.
        let older = br#"{"result":"ok","token":"0123456789abcdef"}"#;
        let err = interpret(&host(), "op", Some(0), older, "").expect_err("older");
        assert_eq!(
            (err.class, err.code),
            (FailureClass::Permanent, ReasonCode::HostVersionMismatch)
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
        assert_eq!(err.code, ReasonCode::HostVersionMismatch);
        // A line cut by a lost session is not a version problem.
        let err = interpret(&host(), "op", Some(255), br#"{"status":"o"#, "").expect_err("cut");
        assert_eq!(err.code, ReasonCode::HostUnavailable);
        // An older host refusing the request's new fields points at the build too.
        let refused = serde_json::to_string(&HostReply::Failed {
            error: ComputeError::permanent(
                ReasonCode::HostRequestInvalid,
                "unknown field `version`",
            ),
        })
        .expect("json");
        let err = interpret(&host(), "op", Some(0), refused.as_bytes(), "").expect_err("refused");
        assert_eq!(err.code, ReasonCode::HostRequestInvalid);
        assert!(err.message.contains("same build"), "{}", err.message);
    }
}
