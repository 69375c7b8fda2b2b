//! A gateway's private network: its own network namespace (loopback only), reached from the
//! host through a relay on the port it is known by, and reaching out only to the loopback
//! endpoints its rendered configuration names (the credential proxy's capability URLs, a
//! dedicated gateway's Codex app-server, a provider on this machine). The host's other
//! listeners — occ's API, other Agents' gateways, a database on 127.0.0.1 — do not exist for
//! it. Everything else goes through an egress proxy outside the sandbox
//! ([`super::relay::egress`]), which never connects back to this machine unless the
//! configuration names the endpoint.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;

use serde_json::Value;

use super::relay::egress::{Named, host_of};
use super::relay::{Forward, RelayEnd};

/// The socket the inside relay listens on for connections to the workload's port.
const INGRESS_SOCKET: &str = "in.sock";

/// The socket the outside relay's egress proxy listens on.
const EGRESS_SOCKET: &str = "egress.sock";

/// The first port tried for the egress proxy in the workload's loopback (squid's).
const EGRESS_PORT: u16 = 3128;

/// The variables of [`PrivateNetwork::proxy_environment`], which a launcher passes on to the
/// programs it starts.
pub const PROXY_VARIABLES: [&str; 7] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
];

/// A workload's private network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrivateNetwork {
    /// The directory both relays keep their sockets in (read-write inside the sandbox).
    pub socket_dir: PathBuf,
    /// The loopback port the workload listens on inside and the host knows it by outside.
    pub port: u16,
    /// The loopback endpoints (host, port) it may reach, each relayed to the same address
    /// inside.
    pub reaches: BTreeSet<(String, u16)>,
    /// The other endpoints its configuration names: the egress proxy connects to these even
    /// where they are on this machine.
    pub named: Named,
    /// The port of its own loopback its egress proxy listens on (`HTTP_PROXY`).
    pub egress_port: u16,
}

impl PrivateNetwork {
    /// The network of a workload listening on `port` whose configuration is `config`.
    pub fn for_config(socket_dir: PathBuf, port: u16, config: &Value) -> Self {
        Self::for_endpoints(socket_dir, port, named_endpoints(config))
    }

    /// The network of a workload listening on `port` that connects to `endpoints`.
    pub fn for_endpoints(
        socket_dir: PathBuf,
        port: u16,
        endpoints: BTreeSet<(String, u16)>,
    ) -> Self {
        let (mut reaches, named): (BTreeSet<_>, BTreeSet<_>) = endpoints
            .into_iter()
            .partition(|(host, _)| is_loopback(host));
        // Its own port is inside the namespace already.
        reaches.retain(|(_, p)| *p != port);
        let taken: BTreeSet<u16> = reaches.iter().map(|(_, p)| *p).chain([port]).collect();
        let egress_port = (EGRESS_PORT..)
            .find(|p| !taken.contains(p))
            .unwrap_or(EGRESS_PORT);
        Self {
            socket_dir,
            port,
            reaches,
            named,
            egress_port,
        }
    }

    /// The variables that send the workload's HTTP clients (Node's own with
    /// `NODE_USE_ENV_PROXY`, curl, git) through its egress proxy, and loopback past it.
    pub fn proxy_environment(&self) -> Vec<(&'static str, String)> {
        let proxy = format!("http://127.0.0.1:{}", self.egress_port);
        let direct = "localhost,127.0.0.1,::1";
        PROXY_VARIABLES
            .iter()
            .map(|&name| {
                let value = match name {
                    "NO_PROXY" | "no_proxy" => direct.to_owned(),
                    "NODE_USE_ENV_PROXY" => "1".to_owned(),
                    _ => proxy.clone(),
                };
                (name, value)
            })
            .collect()
    }

    /// The outside relay's forwards: the host's port to the ingress socket, each egress
    /// socket to its endpoint on the host.
    pub fn outside(&self) -> Vec<Forward> {
        let mut forwards = vec![Forward {
            from: RelayEnd::Tcp("127.0.0.1".into(), self.port),
            to: RelayEnd::Unix(INGRESS_SOCKET.into()),
        }];
        forwards.extend(self.egress().map(|(end, socket)| Forward {
            from: socket,
            to: end,
        }));
        forwards.push(Forward {
            from: RelayEnd::Unix(EGRESS_SOCKET.into()),
            to: RelayEnd::EgressProxy,
        });
        forwards
    }

    /// The inside relay's forwards: the ingress socket to the workload's port, each named
    /// endpoint (the same address inside) to its egress socket.
    pub fn inside(&self) -> Vec<Forward> {
        let mut forwards = vec![Forward {
            from: RelayEnd::Unix(INGRESS_SOCKET.into()),
            to: RelayEnd::Tcp("127.0.0.1".into(), self.port),
        }];
        forwards.extend(self.egress().map(|(end, socket)| Forward {
            from: end,
            to: socket,
        }));
        forwards.push(Forward {
            from: RelayEnd::Tcp("127.0.0.1".into(), self.egress_port),
            to: RelayEnd::Unix(EGRESS_SOCKET.into()),
        });
        forwards
    }

    fn egress(&self) -> impl Iterator<Item = (RelayEnd, RelayEnd)> + '_ {
        self.reaches.iter().enumerate().map(|(i, (host, port))| {
            (
                RelayEnd::Tcp(host.clone(), *port),
                RelayEnd::Unix(format!("out-{i}.sock")),
            )
        })
    }
}

/// Every endpoint a URL in `config` names (`http`, `https`, `ws`, `wss`), as the host (lower
/// case, IPv6 without brackets) and port a client connects to.
pub(crate) fn named_endpoints(config: &Value) -> BTreeSet<(String, u16)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![config];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => {
                if let Some(endpoint) = endpoint(text) {
                    out.insert(endpoint);
                }
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    out
}

fn endpoint(text: &str) -> Option<(String, u16)> {
    if !text.contains("://") {
        return None;
    }
    let url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") {
        return None;
    }
    Some((host_of(&url)?, url.port_or_known_default()?))
}

/// Whether a client reaches `host` on its own machine's loopback.
fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loopback_endpoints_are_relayed_and_the_others_named_for_the_egress_proxy() {
        let config = json!({
            "models": {"providers": {
                "proxied": {"baseUrl": "http://127.0.0.1:29199/p/abc/v1"},
                "local": {"baseUrl": "http://localhost:11434"},
                "v6": {"baseUrl": "https://[::1]/v1"},
                "public": {"baseUrl": "https://api.openai.com/v1"},
                "lan": {"baseUrl": "http://192.0.2.2:8080"},
            }},
            "plugins": {"entries": {"codex": {"config": {"appServer": {"url": "ws://127.0.0.1:41000"}}}}},
            "gateway": {"port": 29100, "self": "http://127.0.0.1:29100/"},
            "notes": ["http://127.0.0.2:7/x", "see http://127.0.0.3:9/", "not a url: 127.0.0.1:5", "file:///etc/passwd"],
        });
        let network = PrivateNetwork::for_config("/net".into(), 29100, &config);
        let reaches: Vec<(String, u16)> = network.reaches.iter().cloned().collect();
        assert_eq!(
            reaches,
            vec![
                ("127.0.0.1".to_owned(), 29199),
                ("127.0.0.1".to_owned(), 41000),
                ("127.0.0.2".to_owned(), 7),
                ("::1".to_owned(), 443),
                ("localhost".to_owned(), 11434),
            ]
        );
        let named: Vec<(String, u16)> = network.named.iter().cloned().collect();
        assert_eq!(
            named,
            vec![
                ("192.0.2.2".to_owned(), 8080),
                ("api.openai.com".to_owned(), 443)
            ]
        );
        assert_eq!(network.egress_port, 3128);
        let outside: Vec<String> = network.outside().iter().map(Forward::arg).collect();
        assert_eq!(outside[0], "tcp:127.0.0.1:29100=unix:in.sock");
        assert!(
            outside.contains(&"unix:out-3.sock=tcp:[::1]:443".to_owned()),
            "{outside:?}"
        );
        let inside: Vec<String> = network.inside().iter().map(Forward::arg).collect();
        assert_eq!(inside[0], "unix:in.sock=tcp:127.0.0.1:29100");
        assert!(
            inside.contains(&"tcp:localhost:11434=unix:out-4.sock".to_owned()),
            "{inside:?}"
        );
        assert_eq!(
            inside.last().expect("egress"),
            "tcp:127.0.0.1:3128=unix:egress.sock"
        );
        assert_eq!(
            outside.last().expect("egress"),
            "unix:egress.sock=egress-proxy"
        );
    }
}
