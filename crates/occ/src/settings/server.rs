//! The API server's settings: the shared ones, its listener, public origin and sessions.

use std::net::IpAddr;

use anyhow::{anyhow, bail};

use super::platform::PlatformSettings;
use super::source::{Env, load_file, origin_of, port_number};

/// Validated settings of the API server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Shared settings.
    pub platform: PlatformSettings,
    /// Listen address.
    pub host: IpAddr,
    /// Listen port.
    pub port: u16,
    /// The origin of `auth_base_url`.
    pub public_origin: String,
    /// Session-key secret.
    pub auth_secret: String,
    /// Session lifetime.
    pub session_ttl_seconds: u64,
    /// The DNS suffix of Agent origins when Agents' Control UIs are offered through occ
    /// (`OCC_AGENT_NATIVE_ADMIN_DOMAIN`; unset: not offered).
    pub native_admin_domain: Option<String>,
}

impl ServerSettings {
    /// Loads and validates the server settings.
    pub fn load(env: Env<'_>) -> anyhow::Result<Self> {
        let mut file = load_file(env)?;
        let platform = PlatformSettings::load(env, &mut file)?;
        let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
        let host_text = pick("OCC_HOST", file.host.take()).unwrap_or_else(|| "127.0.0.1".into());
        let host: IpAddr = host_text
            .parse()
            .map_err(|_| anyhow!("OCC_HOST: {host_text:?} is not an IP address"))?;
        let port = match env("OCC_PORT") {
            Some(p) => port_number(&p)
                .ok_or_else(|| anyhow!("OCC_PORT: {p:?} is not a port (1..65535)"))?,
            None => file.port.unwrap_or(3000),
        };
        if platform.metrics.is_some_and(|m| m.port() == port) {
            bail!("OCC_METRICS_PORT must differ from OCC_PORT");
        }
        let auth_base_url = pick("OCC_AUTH_BASE_URL", file.auth_base_url.take())
            .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
        let (public_origin, _) =
            origin_of(&auth_base_url).map_err(|e| anyhow!("OCC_AUTH_BASE_URL: {e}"))?;
        let auth_secret = pick("OCC_AUTH_SECRET", file.auth_secret.take()).ok_or_else(|| {
            anyhow!(
                "OCC_AUTH_SECRET is required (at least 32 characters, e.g. `openssl rand -hex 32`)"
            )
        })?;
        if auth_secret.len() < 32 {
            bail!("OCC_AUTH_SECRET must have at least 32 characters");
        }
        let session_ttl_seconds = file.session_ttl_seconds.unwrap_or(12 * 3600);
        if !(60..=30 * 24 * 3600).contains(&session_ttl_seconds) {
            bail!("session_ttl_seconds must be between 60 and 2592000");
        }
        let native_admin_domain = pick(
            "OCC_AGENT_NATIVE_ADMIN_DOMAIN",
            file.agent_native_admin_domain.take(),
        )
        .filter(|d| !d.is_empty());
        if let Some(domain) = &native_admin_domain {
            occ_controller::native_admin::NativeAdminSettings::new(&public_origin, domain)
                .map_err(|e| anyhow!("OCC_AGENT_NATIVE_ADMIN_DOMAIN: {e}"))?;
        }
        Ok(Self {
            platform,
            host,
            port,
            public_origin,
            auth_secret,
            session_ttl_seconds,
            native_admin_domain,
        })
    }

    /// Whether cookies are `Secure` (https base URL).
    pub fn secure_cookies(&self) -> bool {
        self.public_origin.starts_with("https://")
    }
}
