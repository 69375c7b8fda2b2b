//! A gateway's private network: its own network namespace (loopback only), reached from the
//! host through a relay on the port it is known by, and reaching out only to the loopback
//! endpoints its rendered configuration names (the credential proxy's capability URLs, a
//! dedicated gateway's Codex app-server, a provider on this machine). The host's other
//! listeners — occ's API, other Agents' gateways, a database on 127.0.0.1 — do not exist for
//! it.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;

use serde_json::Value;

use super::relay::{Forward, RelayEnd};

/// The socket the inside relay listens on for connections to the workload's port.
const INGRESS_SOCKET: &str = "in.sock";

/// A workload's private network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrivateNetwork {
    /// The directory both relays keep their sockets in (read-write inside the sandbox).
    pub socket_dir: PathBuf,
    /// The loopback port the workload listens on inside and the host knows it by outside.
    pub port: u16,
    /// The loopback endpoints (host, port) it may reach.
    pub reaches: BTreeSet<(String, u16)>,
}

impl PrivateNetwork {
    /// The network of a workload listening on `port` whose configuration is `config`.
    pub fn for_config(socket_dir: PathBuf, port: u16, config: &Value) -> Self {
        let mut reaches = loopback_endpoints(config);
        // Its own port is inside the namespace already.
        reaches.retain(|(_, p)| *p != port);
        Self {
            socket_dir,
            port,
            reaches,
        }
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

/// Every loopback endpoint a URL in `config` names (`http`, `https`, `ws`, `wss`), as the
/// host and port a client connects to.
pub(crate) fn loopback_endpoints(config: &Value) -> BTreeSet<(String, u16)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![config];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => {
                if let Some(endpoint) = loopback_endpoint(text) {
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

fn loopback_endpoint(text: &str) -> Option<(String, u16)> {
    if !text.contains("://") {
        return None;
    }
    let url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") {
        return None;
    }
    let port = url.port_or_known_default()?;
    let host = match url.host()? {
        url::Host::Domain(name) if name.eq_ignore_ascii_case("localhost") => "localhost".into(),
        url::Host::Ipv4(ip) if IpAddr::V4(ip).is_loopback() => ip.to_string(),
        url::Host::Ipv6(ip) if ip.is_loopback() => ip.to_string(),
        _ => return None,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_loopback_urls_of_the_configuration_are_reachable() {
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
            "notes": ["see http://127.0.0.2:7/x", "not a url: 127.0.0.1:5", "file:///etc/passwd"],
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
    }
}
