//! The relays of a workload in a private network namespace (`occ sandbox-relay`): byte copies
//! between TCP ports and Unix sockets in one directory both sides of the sandbox see, around
//! a child program whose exit they take as their own.
//!
//! Outside the sandbox one relay listens on the host's `127.0.0.1:<port>` the workload is
//! known by and on one socket per loopback endpoint the workload may reach; inside, a second
//! relay listens on the same TCP ports in the workload's own loopback and on the ingress
//! socket. Nothing else crosses: the workload's namespace has no route to the host.
//!
//! A relay starts its child only once every listener is bound, ignores the termination
//! signals a stop sends to the whole process group (the child gets them too and decides when
//! to exit), and ends with its child's status: the same exit code, or the same signal.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

pub mod egress;

/// One side of a forward: a loopback TCP address (`tcp:127.0.0.1:18789`, `tcp:[::1]:80`,
/// `tcp:localhost:8080`) or a socket in the relay's socket directory (`unix:in.sock`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelayEnd {
    /// A host name or IP literal (without brackets) and a port.
    Tcp(String, u16),
    /// A socket's file name in the socket directory.
    Unix(String),
    /// The egress proxy ([`egress`]): only as the far end of a forward.
    EgressProxy,
}

impl RelayEnd {
    /// The end as `occ sandbox-relay --forward` writes it.
    pub fn arg(&self) -> String {
        match self {
            Self::Tcp(host, port) if host.contains(':') => format!("tcp:[{host}]:{port}"),
            Self::Tcp(host, port) => format!("tcp:{host}:{port}"),
            Self::Unix(name) => format!("unix:{name}"),
            Self::EgressProxy => "egress-proxy".into(),
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        if text == "egress-proxy" {
            return Ok(Self::EgressProxy);
        }
        if let Some(name) = text.strip_prefix("unix:") {
            let plain = !name.is_empty()
                && !name.contains('/')
                && name != "."
                && name != ".."
                && name.len() <= 64;
            return plain
                .then(|| Self::Unix(name.to_owned()))
                .ok_or_else(|| format!("`{text}`: a socket is a plain file name"));
        }
        let address = text
            .strip_prefix("tcp:")
            .ok_or_else(|| format!("`{text}`: an end is tcp:HOST:PORT or unix:NAME"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("`{text}`: no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("`{text}`: the port is not a number in 1..=65535"))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || port == 0 {
            return Err(format!("`{text}`: needs a host and a port"));
        }
        Ok(Self::Tcp(host.to_owned(), port))
    }
}

/// Listen on `from`, and for each connection open one to `to` and copy both ways.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Forward {
    pub from: RelayEnd,
    pub to: RelayEnd,
}

impl Forward {
    /// `FROM=TO`, as `--forward` takes it.
    pub fn arg(&self) -> String {
        format!("{}={}", self.from.arg(), self.to.arg())
    }

    /// Parses `FROM=TO`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (from, to) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: a forward is FROM=TO"))?;
        let from = RelayEnd::parse(from)?;
        if from == RelayEnd::EgressProxy {
            return Err(format!(
                "`{text}`: the egress proxy is not a place to listen"
            ));
        }
        Ok(Self {
            from,
            to: RelayEnd::parse(to)?,
        })
    }
}

/// What one relay does: where its sockets live, what it forwards, and the program it runs.
#[derive(Debug, Clone)]
pub struct RelayPlan {
    pub socket_dir: PathBuf,
    pub forwards: Vec<Forward>,
    /// The endpoints (host, port) the egress proxy connects to whatever their address.
    pub named: egress::Named,
    pub program: OsString,
    pub args: Vec<OsString>,
}

enum Listener {
    Tcp(Vec<TcpListener>),
    Unix(UnixListener),
}

/// Runs `plan` until its child exits, then exits the process the way the child did. Returns
/// only when the relay cannot start (a listener cannot be bound, the child cannot start).
pub async fn run(plan: RelayPlan) -> Result<std::convert::Infallible, String> {
    // Socket paths are relative to the socket directory: an Agent's directory can be longer
    // than a socket address may be (108 bytes).
    let child_dir = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    std::env::set_current_dir(&plan.socket_dir)
        .map_err(|e| format!("cannot enter {}: {e}", plan.socket_dir.display()))?;
    let mut listeners = Vec::new();
    for forward in &plan.forwards {
        listeners.push((bind(&forward.from).await?, forward.to.clone()));
    }
    let mut terminations = Vec::new();
    for kind in [
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::interrupt(),
        tokio::signal::unix::SignalKind::hangup(),
    ] {
        terminations.push(
            tokio::signal::unix::signal(kind).map_err(|e| format!("cannot take signals: {e}"))?,
        );
    }
    let mut command = tokio::process::Command::new(&plan.program);
    command.args(&plan.args).kill_on_drop(false);
    // Where its starter was, if this relay's user may be there (an Agent's account may not
    // enter the directory of the occ that started it; bubblewrap sets the workload's own).
    if nix::unistd::access(&child_dir, nix::unistd::AccessFlags::X_OK).is_ok() {
        command.current_dir(&child_dir);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", plan.program.to_string_lossy()))?;
    for mut signals in terminations {
        tokio::spawn(async move { while signals.recv().await.is_some() {} });
    }
    let named = std::sync::Arc::new(plan.named);
    for (listener, to) in listeners {
        let named = named.clone();
        match listener {
            Listener::Unix(listener) => {
                tokio::spawn(async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        tokio::spawn(copy_to(stream, to.clone(), named.clone()));
                    }
                });
            }
            Listener::Tcp(listeners) => {
                for listener in listeners {
                    let to = to.clone();
                    let named = named.clone();
                    tokio::spawn(async move {
                        while let Ok((stream, _)) = listener.accept().await {
                            let _ = stream.set_nodelay(true);
                            tokio::spawn(copy_to(stream, to.clone(), named.clone()));
                        }
                    });
                }
            }
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for the child: {e}"))?;
    use std::os::unix::process::ExitStatusExt as _;
    if let Some(signal) = status.signal() {
        signal_hook::low_level::emulate_default_handler(signal)
            .map_err(|e| format!("cannot end like the child (signal {signal}): {e}"))?;
        std::process::exit(128 + signal);
    }
    std::process::exit(status.code().unwrap_or(1));
}

async fn bind(end: &RelayEnd) -> Result<Listener, String> {
    match end {
        RelayEnd::EgressProxy => Err("the egress proxy is not a place to listen".into()),
        RelayEnd::Unix(name) => {
            // A socket left by an earlier run of the same revision.
            let _ = std::fs::remove_file(name);
            UnixListener::bind(name)
                .map(Listener::Unix)
                .map_err(|e| format!("cannot listen on {name}: {e}"))
        }
        RelayEnd::Tcp(host, port) => {
            let addresses: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), *port))
                    .await
                    .map_err(|e| format!("cannot resolve {host}: {e}"))?
                    .collect();
            let mut listeners = Vec::new();
            let mut last_error = None;
            for address in addresses {
                match TcpListener::bind(address).await {
                    Ok(listener) => listeners.push(listener),
                    Err(e) => last_error = Some(format!("cannot listen on {address}: {e}")),
                }
            }
            if listeners.is_empty() {
                return Err(last_error.unwrap_or_else(|| format!("{host} has no address")));
            }
            Ok(Listener::Tcp(listeners))
        }
    }
}

/// How long a relay holds a connection while the other side is not listening yet (a gateway
/// starting behind the inside relay, the inside relay starting behind the outside one): the
/// client sees a slow connection rather than one closed during its handshake.
const CONNECT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

async fn copy_to<S>(mut inbound: S, to: RelayEnd, named: std::sync::Arc<egress::Named>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let started = tokio::time::Instant::now();
    loop {
        let copied = match &to {
            RelayEnd::EgressProxy => return egress::serve(inbound, &named).await,
            RelayEnd::Unix(name) => match UnixStream::connect(Path::new(name)).await {
                Ok(mut outbound) => {
                    tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await
                }
                Err(e) => Err(e),
            },
            RelayEnd::Tcp(host, port) => match TcpStream::connect((host.as_str(), *port)).await {
                Ok(mut outbound) => {
                    let _ = outbound.set_nodelay(true);
                    tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await
                }
                Err(e) => Err(e),
            },
        };
        match copied {
            Ok(_) => return,
            // Not listening (yet): wait for it a while.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) && started.elapsed() < CONNECT_PATIENCE =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_round_trip_through_their_argument() {
        for text in [
            "tcp:127.0.0.1:18789=unix:in.sock",
            "unix:out-1.sock=tcp:[::1]:8080",
            "tcp:localhost:80=unix:out-2.sock",
            "unix:egress.sock=egress-proxy",
        ] {
            assert_eq!(Forward::parse(text).expect(text).arg(), text);
        }
        for bad in [
            "tcp:127.0.0.1:18789",
            "tcp:127.0.0.1=unix:a",
            "tcp:127.0.0.1:0=unix:a",
            "tcp:127.0.0.1:70000=unix:a",
            "unix:../x=tcp:127.0.0.1:1",
            "unix:a/b=tcp:127.0.0.1:1",
            "udp:1.2.3.4:5=unix:a",
            "egress-proxy=unix:a",
        ] {
            assert!(Forward::parse(bad).is_err(), "{bad}");
        }
    }
}
