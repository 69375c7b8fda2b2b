//! Where Agent origins live: `agent-<opaque>.<domain>` with the public origin's scheme and port,
//! the console's launch URL, and which `Host` names an Agent origin.

use std::time::Duration;

use super::{LAUNCH_PATH, LEASE_INTERVAL};

/// Where Agent origins live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeAdminSettings {
    /// `https` or `http` (the public origin's).
    scheme: String,
    /// The DNS suffix of Agent hosts (`agents.example.com`; `occ dev`: `localhost`).
    pub(super) domain: String,
    /// The public origin's explicit port, if any.
    port: Option<u16>,
    /// The console's origin (where launches happen).
    console_origin: String,
    /// How often open sockets are re-admitted.
    lease_interval: Duration,
}

impl NativeAdminSettings {
    /// Agent origins under `domain`, with the scheme and port of `public_origin`.
    pub fn new(public_origin: &str, domain: &str) -> Result<Self, String> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let labels_ok = !domain.is_empty()
            && domain.len() <= 200
            && domain.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !labels_ok {
            return Err(format!("{domain:?} is not a DNS name"));
        }
        let (scheme, rest) = public_origin
            .split_once("://")
            .ok_or_else(|| format!("{public_origin:?} is not an origin"))?;
        if scheme != "http" && scheme != "https" {
            return Err(format!("{public_origin:?} is not an http(s) origin"));
        }
        let rest = rest.trim_end_matches('/');
        let port = match rest.rsplit_once(':') {
            // `[v6]` alone has colons but no port
            Some(_) if rest.ends_with(']') => None,
            Some((_, port)) => Some(
                port.parse::<u16>()
                    .map_err(|_| format!("{public_origin:?} has no valid port"))?,
            ),
            None => None,
        };
        Ok(Self {
            scheme: scheme.to_owned(),
            domain,
            port,
            console_origin: public_origin.trim_end_matches('/').to_owned(),
            lease_interval: LEASE_INTERVAL,
        })
    }

    /// Re-admits open sockets every `interval` instead (tests).
    pub fn with_lease_interval(mut self, interval: Duration) -> Self {
        self.lease_interval = interval;
        self
    }

    /// How often open sockets are re-admitted.
    pub fn lease_interval(&self) -> Duration {
        self.lease_interval
    }

    /// The origin serving `host`.
    pub fn origin_of(&self, host: &str) -> String {
        match self.port {
            Some(port) => format!("{}://{host}:{port}", self.scheme),
            None => format!("{}://{host}", self.scheme),
        }
    }

    /// Whether cookies must be `Secure`.
    pub fn secure(&self) -> bool {
        self.scheme == "https"
    }

    /// The console's launch URL for an Agent host, bound to the browser that holds the launch
    /// nonce whose [`launch_binding`] is `binding`.
    pub fn launch_url(&self, host: &str, binding: &str) -> String {
        format!(
            "{}{LAUNCH_PATH}?host={host}&binding={binding}",
            self.console_origin
        )
    }

    /// The Agent host named by a request's `Host` header, if it is one (the port is ignored:
    /// one listener serves the console and every Agent origin).
    pub fn agent_host_of<'a>(&self, authority: &'a str) -> Option<&'a str> {
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => authority,
        };
        let label = host.strip_suffix(&self.domain)?.strip_suffix('.')?;
        (label.starts_with("agent-") && !label.contains('.')).then_some(host)
    }
}
