//! Settings: a YAML file (`OCC_CONFIG_PATH`) overlaid by `OCC_*` environment variables. The only
//! place occ reads its environment for configuration. Invalid or contradictory settings fail at
//! startup with a message naming the setting.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use occ_store::Backend;
use serde::Deserialize;

/// Raw settings as written in the file (every field optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    host: Option<String>,
    port: Option<u16>,
    database_url: Option<String>,
    data_dir: Option<PathBuf>,
    configuration_driver: Option<String>,
    configuration_root: Option<PathBuf>,
    secret_driver: Option<String>,
    secret_root: Option<PathBuf>,
    secret_key_file: Option<PathBuf>,
    compute_driver: Option<String>,
    auth_base_url: Option<String>,
    auth_secret: Option<String>,
    session_ttl_seconds: Option<u64>,
    backends: Option<Vec<BackendSetting>>,
}

/// A configured Backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSetting {
    /// Id agents select with `backendId`.
    pub id: String,
    /// Type, e.g. `chatgpt`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// Validated settings of the API server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Listen address.
    pub host: IpAddr,
    /// Listen port.
    pub port: u16,
    /// `postgres://…` or `sqlite://PATH`.
    pub database_url: String,
    /// Root of the filesystem Configuration Driver.
    pub configuration_root: PathBuf,
    /// Root of the local Secret Driver.
    pub secret_root: PathBuf,
    /// Key file of the local Secret Driver.
    pub secret_key_file: PathBuf,
    /// The origin of `auth_base_url`.
    pub public_origin: String,
    /// Session-key secret.
    pub auth_secret: String,
    /// Session lifetime.
    pub session_ttl_seconds: u64,
    /// Configured Backends.
    pub backends: Vec<BackendSetting>,
}

/// The environment, as a lookup function (tests pass their own).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn load_file(env: Env<'_>) -> anyhow::Result<FileSettings> {
    let Some(path) = env("OCC_CONFIG_PATH") else {
        return Ok(FileSettings::default());
    };
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        bail!("OCC_CONFIG_PATH must be an absolute path");
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("OCC_CONFIG_PATH: cannot read {}", path.display()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| anyhow!("OCC_CONFIG_PATH {}: {e}", path.display()))
}

fn absolute(name: &str, path: PathBuf) -> anyhow::Result<PathBuf> {
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .context("current directory")?
            .join(path)
    };
    if path.exists() && !path.is_dir() && !name.ends_with("KEY_FILE") {
        bail!("{name}: {} exists and is not a directory", path.display());
    }
    Ok(path)
}

/// The origin (`scheme://host[:port]`) of an http(s) URL, or why it is not one.
pub fn origin_of(url: &str) -> Result<(String, bool), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be an absolute http or https URL")?;
    let secure = match scheme {
        "http" => false,
        "https" => true,
        _ => return Err("must use http or https".into()),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') || authority.contains(char::is_whitespace) {
        return Err("must name a host without credentials".into());
    }
    let path = &rest[authority.len()..];
    if !(path.is_empty() || path == "/") {
        return Err("must not have a path, query or fragment".into());
    }
    Ok((format!("{scheme}://{authority}"), secure))
}

impl ServerSettings {
    /// Loads and validates the server settings.
    pub fn load(env: Env<'_>) -> anyhow::Result<Self> {
        let file = load_file(env)?;
        let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
        let host_text = pick("OCC_HOST", file.host).unwrap_or_else(|| "127.0.0.1".into());
        let host: IpAddr = host_text
            .parse()
            .map_err(|_| anyhow!("OCC_HOST: {host_text:?} is not an IP address"))?;
        let port = match env("OCC_PORT") {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| anyhow!("OCC_PORT: {p:?} is not a port (1..65535)"))?,
            None => file.port.unwrap_or(3000),
        };
        let database_url = pick("OCC_DATABASE_URL", file.database_url).ok_or_else(|| {
            anyhow!("OCC_DATABASE_URL is required (postgres://… or sqlite://PATH)")
        })?;
        occ_store::backend_of(&database_url).map_err(|e| anyhow!("OCC_DATABASE_URL: {e}"))?;
        let data_dir = env("OCC_DATA_DIR").map(PathBuf::from).or(file.data_dir);
        let driver = pick("OCC_CONFIGURATION_DRIVER", file.configuration_driver)
            .unwrap_or_else(|| "filesystem".into());
        if driver != "filesystem" {
            bail!("OCC_CONFIGURATION_DRIVER: {driver:?} is not available (filesystem)");
        }
        let from_data = |sub: &str| data_dir.as_ref().map(|d| d.join(sub));
        let configuration_root = env("OCC_CONFIGURATION_ROOT")
            .map(PathBuf::from)
            .or(file.configuration_root)
            .or_else(|| from_data("configurations"))
            .ok_or_else(|| anyhow!("OCC_CONFIGURATION_ROOT is required by the filesystem Configuration Driver (or set OCC_DATA_DIR)"))?;
        let secret_driver =
            pick("OCC_SECRET_DRIVER", file.secret_driver).unwrap_or_else(|| "local".into());
        if secret_driver != "local" {
            bail!("OCC_SECRET_DRIVER: {secret_driver:?} is not available (local)");
        }
        let secret_root = env("OCC_SECRET_ROOT")
            .map(PathBuf::from)
            .or(file.secret_root)
            .or_else(|| from_data("secrets"))
            .ok_or_else(|| {
                anyhow!(
                    "OCC_SECRET_ROOT is required by the local Secret Driver (or set OCC_DATA_DIR)"
                )
            })?;
        let secret_key_file = env("OCC_SECRET_KEY_FILE")
            .map(PathBuf::from)
            .or(file.secret_key_file)
            .or_else(|| from_data("secret.key"))
            .ok_or_else(|| anyhow!("OCC_SECRET_KEY_FILE is required by the local Secret Driver (or set OCC_DATA_DIR)"))?;
        let compute =
            pick("OCC_COMPUTE_DRIVER", file.compute_driver).unwrap_or_else(|| "process".into());
        if compute != "process" {
            bail!("OCC_COMPUTE_DRIVER: {compute:?} is not available (process)");
        }
        let auth_base_url = pick("OCC_AUTH_BASE_URL", file.auth_base_url)
            .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
        let (public_origin, _) =
            origin_of(&auth_base_url).map_err(|e| anyhow!("OCC_AUTH_BASE_URL: {e}"))?;
        let auth_secret = pick("OCC_AUTH_SECRET", file.auth_secret).ok_or_else(|| {
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
        let backends = file.backends.unwrap_or_default();
        let mut seen = BTreeMap::new();
        for b in &backends {
            if seen.insert(b.id.clone(), ()).is_some() {
                bail!("backends: the id {:?} appears twice", b.id);
            }
        }
        Ok(Self {
            host,
            port,
            database_url,
            configuration_root: absolute("OCC_CONFIGURATION_ROOT", configuration_root)?,
            secret_root: absolute("OCC_SECRET_ROOT", secret_root)?,
            secret_key_file: absolute("OCC_SECRET_KEY_FILE", secret_key_file)?,
            public_origin,
            auth_secret,
            session_ttl_seconds,
            backends,
        })
    }

    /// Whether cookies are `Secure` (https base URL).
    pub fn secure_cookies(&self) -> bool {
        self.public_origin.starts_with("https://")
    }
}

/// Checks a database URL and, for SQLite, creates the file's parent directory (0700) so a
/// first run on a fresh machine just works.
pub fn prepare_database_url(url: &str) -> anyhow::Result<Backend> {
    let backend = occ_store::backend_of(url)?;
    if backend == Backend::Sqlite {
        let path = url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:")
            .split('?')
            .next()
            .unwrap_or_default();
        if path.is_empty() || path.starts_with(':') {
            anyhow::bail!("an SQLite URL must name a file, e.g. sqlite://./.occ/occ.db");
        }
        let parent = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.exists()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
            }
        }
    }
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn minimal_settings_with_a_data_dir() {
        let env = env_of(&[
            ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
            ("OCC_DATA_DIR", "/tmp/occ-settings-test"),
            ("OCC_AUTH_SECRET", SECRET),
        ]);
        let s = ServerSettings::load(&env).unwrap();
        assert_eq!(s.port, 3000);
        assert_eq!(s.public_origin, "http://127.0.0.1:3000");
        assert_eq!(
            s.configuration_root,
            PathBuf::from("/tmp/occ-settings-test/configurations")
        );
        assert!(!s.secure_cookies());
    }

    #[test]
    fn errors_name_the_setting() {
        let cases: [(&[(&str, &str)], &str); 7] = [
            (&[], "OCC_DATABASE_URL"),
            (&[("OCC_DATABASE_URL", "mysql://x")], "OCC_DATABASE_URL"),
            (
                &[("OCC_DATABASE_URL", "sqlite:///x"), ("OCC_PORT", "70000")],
                "OCC_PORT",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_HOST", "localhost!"),
                ],
                "OCC_HOST",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_AUTH_SECRET", "short"),
                ],
                "OCC_AUTH_SECRET",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_DATA_DIR", "/tmp/d"),
                    ("OCC_AUTH_SECRET", SECRET),
                    ("OCC_AUTH_BASE_URL", "ftp://x"),
                ],
                "OCC_AUTH_BASE_URL",
            ),
            (
                &[
                    ("OCC_DATABASE_URL", "sqlite:///x"),
                    ("OCC_CONFIGURATION_DRIVER", "kubernetes"),
                ],
                "OCC_CONFIGURATION_DRIVER",
            ),
        ];
        for (pairs, name) in cases {
            let err = ServerSettings::load(&env_of(pairs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn yaml_file_is_closed_and_env_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("occ.yaml");
        std::fs::write(&path, format!("database_url: sqlite:///tmp/f.db\nport: 4000\ndata_dir: /tmp/d\nauth_secret: {SECRET}\n")).unwrap();
        let p = path.to_str().unwrap().to_owned();
        let s = ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p), ("OCC_PORT", "4001")]))
            .unwrap();
        assert_eq!(s.port, 4001);
        std::fs::write(&path, "database_url: sqlite:///tmp/f.db\nprot: 4000\n").unwrap();
        let err = ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("prot"), "{err}");
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("https://occ.example.com").unwrap(),
            ("https://occ.example.com".into(), true)
        );
        assert_eq!(
            origin_of("http://127.0.0.1:3000/").unwrap().0,
            "http://127.0.0.1:3000"
        );
        assert!(origin_of("http://x/console").is_err());
        assert!(origin_of("http://u:p@x").is_err());
    }
}
