//! The API client every command uses: the options and key file, requests with the service
//! key, output in the chosen format, and API failures as the CLI prints them (with the command
//! that fixes a missing grant).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::{Args, ValueEnum};
use reqwest::Method;
use serde_json::Value;

use super::render::table;

/// Options every client command takes.
#[derive(Debug, Args)]
pub struct ClientOptions {
    /// The API origin, e.g. http://127.0.0.1:3000.
    #[arg(
        long,
        global = true,
        env = "OCC_URL",
        default_value = "http://127.0.0.1:3000"
    )]
    url: String,
    /// The service key file (the JSON written by bootstrap).
    #[arg(long, global = true, env = "OCC_SERVICE_KEY_FILE", value_name = "PATH")]
    service_key_file: Option<PathBuf>,
    /// The Namespace id (for namespaced resources).
    #[arg(long, global = true, env = "OCC_NAMESPACE")]
    namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "table")]
    output: Output,
    /// Per-request timeout.
    #[arg(long, global = true, env = "OCC_TIMEOUT_SECONDS", default_value_t = 30)]
    timeout_seconds: u64,
}

/// Output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Table,
    /// The resource as JSON.
    Json,
    /// The resource as YAML.
    Yaml,
}

/// The API client.
pub struct Client {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) key: Option<String>,
    /// The service principal of the key, when its file names it.
    pub(super) key_principal: Option<String>,
    /// Without a key: the session cookie `occ login` saved for this origin (name, value).
    pub(super) session: Option<(String, String)>,
    pub(super) namespace: Option<String>,
    pub(super) output: Output,
}

/// An API error, printed as the CLI's failure.
#[derive(Debug)]
pub struct ApiFailure {
    pub(super) status: u16,
    pub(super) code: String,
    pub(super) message: String,
    pub(super) request_id: String,
    /// Seconds the API asked to wait (`Retry-After`).
    pub(super) retry_after: Option<u64>,
    /// What the user can do about it, when the CLI knows.
    pub(super) hint: Option<String>,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP {} {}: {} (request {})",
            self.status, self.code, self.message, self.request_id
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  {hint}")?;
        }
        Ok(())
    }
}

pub(super) fn header_text(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A deploy refused because the Agent's service principal may not use a Secret gets the one
/// command that allows it (the API names the principal and the Secret in its 403).
pub(super) fn with_grant_hint(error: anyhow::Error, agent: &str) -> anyhow::Error {
    match error.downcast::<ApiFailure>() {
        Ok(mut failure) => {
            let denied = failure
                .message
                .split_once("is not allowed to operate secret ")
                .map(|(_, rest)| rest.trim_end_matches('.').trim().to_owned())
                .filter(|_| failure.status == 403);
            if let Some(secret) = denied {
                failure.hint = Some(format!(
                    "to let the Agent use the Secret: occ secret grant {secret} --agent {agent}"
                ));
            }
            failure.into()
        }
        Err(other) => other,
    }
}

/// A chat refused for a service key without `use` on the Agent gets the command that allows it.
pub(super) fn with_use_hint(error: anyhow::Error, agent: &str) -> anyhow::Error {
    match error.downcast::<ApiFailure>() {
        Ok(mut failure) => {
            if failure.status == 403 {
                failure.hint = Some(format!(
                    "to let this key talk to the Agent: occ agent grant-use {agent}"
                ));
            }
            failure.into()
        }
        Err(other) => other,
    }
}

impl std::error::Error for ApiFailure {}

/// The key and, when the file names it, its service principal.
pub(super) fn read_key(path: &PathBuf) -> anyhow::Result<(String, Option<String>)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--service-key-file {}", path.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let key = doc["data"]["key"]
        .as_str()
        .ok_or_else(|| anyhow!("{} has no data.key", path.display()))?;
    if key.is_empty() || key.contains(['\n', '\r']) {
        bail!("{} has an invalid data.key", path.display());
    }
    let principal = doc["data"]["servicePrincipalId"]
        .as_str()
        .map(str::to_owned);
    Ok((key.to_owned(), principal))
}

impl Client {
    /// A client from the global options.
    pub fn new(opts: &ClientOptions) -> anyhow::Result<Self> {
        let (base, _) =
            crate::settings::origin_of(&opts.url).map_err(|e| anyhow!("--url/OCC_URL {e}"))?;
        let key_file = opts.service_key_file.as_ref().map(read_key).transpose()?;
        let (key, key_principal) = match key_file {
            Some((key, principal)) => (Some(key), principal),
            None => (None, None),
        };
        // Without a key, the session `occ login` saved for this origin (if any).
        let session = match &key {
            Some(_) => None,
            None => super::session_file::load(&base)?.map(|saved| (saved.cookie_name, saved.token)),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(opts.timeout_seconds))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("HTTP client")?;
        Ok(Self {
            http,
            base,
            key,
            key_principal,
            session,
            namespace: opts.namespace.clone(),
            output: opts.output,
        })
    }

    /// The same client acting with a session cookie instead of any key.
    pub(super) fn with_session(&self, cookie_name: &str, token: &str) -> Client {
        Client {
            http: self.http.clone(),
            base: self.base.clone(),
            key: None,
            key_principal: None,
            session: Some((cookie_name.to_owned(), token.to_owned())),
            namespace: self.namespace.clone(),
            output: self.output,
        }
    }

    /// A 401 gets what to do about it: the credential this client used (or lacked) is named.
    fn explain(&self, error: anyhow::Error) -> anyhow::Error {
        match error.downcast::<ApiFailure>() {
            Ok(mut failure) if failure.status == 401 && failure.hint.is_none() => {
                failure.hint = Some(match (&self.key, &self.session) {
                    (Some(_), _) => {
                        "the service key was refused (expired, revoked or disabled)".into()
                    }
                    (None, Some(_)) => format!(
                        "the session ended (signed out, expired, or ended by an administrator): occ login --url {} --email …",
                        self.base
                    ),
                    (None, None) => format!(
                        "no credential: pass --service-key-file (OCC_SERVICE_KEY_FILE) or sign in with occ login --url {} --email …",
                        self.base
                    ),
                });
                failure.into()
            }
            Ok(failure) => failure.into(),
            Err(other) => other,
        }
    }

    pub(super) fn ns(&self) -> anyhow::Result<&str> {
        self.namespace
            .as_deref()
            .ok_or_else(|| anyhow!("--namespace / OCC_NAMESPACE is required for this command"))
    }

    /// Sends a request; returns `data` of the envelope (`Null` for 204).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let Some(bytes) = self.fetch(method, path, body).await? else {
            return Ok(Value::Null);
        };
        let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(doc.get("data").cloned().unwrap_or(Value::Null))
    }

    /// [`Client::call`] with its own time limit.
    pub(super) async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        wait: Duration,
    ) -> anyhow::Result<Value> {
        let resp = self.send(method, path, body, Some(wait), None).await?;
        let bytes = Self::success(resp)
            .await
            .map_err(|e| self.explain(e))?
            .unwrap_or_default();
        let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(doc.get("data").cloned().unwrap_or(Value::Null))
    }

    /// POSTs `body` asking for server-sent events; hands each `delta`-like event to `on_event`
    /// and returns the data of the `final` event (an `error` event is the API's error).
    pub(super) async fn stream_events(
        &self,
        path: &str,
        body: Value,
        wait: Duration,
        mut on_event: impl FnMut(&str, &Value),
    ) -> anyhow::Result<Value> {
        let resp = self
            .send(
                Method::POST,
                path,
                Some(body),
                Some(wait),
                Some("text/event-stream"),
            )
            .await?;
        let request_id = header_text(&resp, "x-request-id").unwrap_or_else(|| "-".into());
        if !resp.status().is_success() {
            Self::success(resp).await?;
            bail!("the API refused the request");
        }
        let mut resp = resp;
        let mut buffer = Vec::new();
        let (mut event, mut data) = (String::from("message"), String::new());
        while let Some(chunk) = resp.chunk().await.context("reading the reply")? {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if let Some(name) = line.strip_prefix("event:") {
                    event = name.trim().to_owned();
                } else if let Some(more) = line.strip_prefix("data:") {
                    data.push_str(more.strip_prefix(' ').unwrap_or(more));
                } else if line.is_empty() && !data.is_empty() {
                    let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                    match event.as_str() {
                        "final" => return Ok(value),
                        "error" => {
                            return Err(ApiFailure {
                                status: 0,
                                code: value["error"]["code"]
                                    .as_str()
                                    .unwrap_or("UNKNOWN")
                                    .to_owned(),
                                message: value["error"]["message"]
                                    .as_str()
                                    .unwrap_or("(no message)")
                                    .to_owned(),
                                request_id,
                                retry_after: None,
                                hint: None,
                            }
                            .into());
                        }
                        other => on_event(other, &value),
                    }
                    event = "message".into();
                    data.clear();
                }
            }
        }
        bail!("the reply ended before the turn finished (request {request_id})")
    }

    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        wait: Option<Duration>,
        accept: Option<&str>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            req = req.header("x-api-key", key);
        } else if let Some((name, token)) = &self.session {
            // A session writes only from the API's own origin (its CSRF rule): the CLI is.
            req = req
                .header("cookie", format!("{name}={token}"))
                .header("origin", &self.base);
        }
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        if let Some(wait) = wait {
            req = req.timeout(wait);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send()
            .await
            .with_context(|| format!("cannot reach {}", self.base))
    }

    /// Sends a request; returns the body of a success (`None` for 204), or the API's error.
    pub(super) async fn fetch(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let resp = self.send(method, path, body, None, None).await?;
        Self::success(resp).await.map_err(|e| self.explain(e))
    }

    /// The body of a success (`None` for 204), or the API's error.
    pub(super) async fn success(resp: reqwest::Response) -> anyhow::Result<Option<Vec<u8>>> {
        let status = resp.status();
        let request_id = resp
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let bytes = resp.bytes().await.context("reading the response")?;
        if status.as_u16() == 204 {
            return Ok(None);
        }
        if !status.is_success() {
            let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(ApiFailure {
                status: status.as_u16(),
                code: doc["error"]["code"]
                    .as_str()
                    .unwrap_or("UNKNOWN")
                    .to_owned(),
                message: doc["error"]["message"]
                    .as_str()
                    .unwrap_or("(no message)")
                    .to_owned(),
                request_id,
                retry_after,
                hint: None,
            }
            .into());
        }
        Ok(Some(bytes.to_vec()))
    }

    /// Reports a deletion that returned no body: a sentence for tables, `{id, deleted}` for
    /// machine-readable output.
    pub(super) fn deleted(&self, kind: &str, id: &str) -> anyhow::Result<()> {
        match self.output {
            Output::Table => {
                println!("{kind} {id} deleted.");
                Ok(())
            }
            _ => self.print(&serde_json::json!({"id": id, "deleted": true}), &[]),
        }
    }

    /// Whether the output is the human-readable table.
    pub(super) fn is_table(&self) -> bool {
        matches!(self.output, Output::Table)
    }

    pub(super) fn print(&self, value: &Value, columns: &[&str]) -> anyhow::Result<()> {
        let text = match self.output {
            Output::Json => serde_json::to_string_pretty(value)?,
            Output::Yaml => serde_yaml_ng::to_string(value)?,
            Output::Table => table(value, columns),
        };
        println!("{}", text.trim_end());
        Ok(())
    }
}
