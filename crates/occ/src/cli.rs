//! The CLI client: resource commands that speak the HTTP API with a service key.
//!
//! Output is a table by default (`-` for unset values), or the resource without its envelope
//! as JSON or YAML. Errors go to stderr with the HTTP status, API code, message and request id,
//! and exit non-zero.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the terminal is the CLI's interface"
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::{Value, json};

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

/// `occ installation …`
#[derive(Debug, Subcommand)]
pub enum InstallationCmd {
    /// Show the Installation.
    Get,
}

/// `occ namespace …`
#[derive(Debug, Subcommand)]
pub enum NamespaceCmd {
    /// List Namespaces.
    List,
    /// Show one Namespace.
    Get { id: String },
    /// Create a Namespace.
    Create {
        name: String,
        /// Adopt an existing Kubernetes namespace the operator prepared (Kubernetes Compute).
        #[arg(long)]
        existing_namespace: Option<String>,
    },
    /// Delete an empty Namespace.
    Delete { id: String },
}

/// `occ configuration …`
#[derive(Debug, Subcommand)]
pub enum ConfigurationCmd {
    /// Create from a JSON file `{kind:"agent", values, secretBindings?}`.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Replace from a JSON file `{values, secretBindings?}`.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Show one Configuration with its document.
    Get { id: String },
    /// Delete a Configuration no Agent references.
    Delete { id: String },
}

/// `occ secret …`
#[derive(Debug, Subcommand)]
pub enum SecretCmd {
    /// List Secrets (metadata only).
    List,
    /// Create from a JSON file `{name, value}`.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Replace the value from a JSON file `{value}`.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Show one Secret's metadata.
    Get { id: String },
    /// Delete a Secret.
    Delete { id: String },
    /// Let an Agent use this Secret (what its deploy needs when its Configuration binds the
    /// Secret or its harness logs in with it): binds a Role with `operate` on Secrets to the
    /// Agent's service principal on this one Secret, creating the Role `secret-user` if the
    /// Namespace has none. Idempotent.
    Grant {
        /// The Secret (`sec_…`).
        id: String,
        /// The Agent (`agt_…`).
        #[arg(long)]
        agent: String,
    },
}

/// `occ service-account …`
#[derive(Debug, Subcommand)]
pub enum ServiceAccountCmd {
    /// List ServiceAccounts.
    List,
    /// Create a ServiceAccount.
    Create { name: String },
    /// Show one ServiceAccount.
    Get { id: String },
    /// Issue the ServiceAccount a credential through the installation's Backend (ChatGPT):
    /// once; its value goes to the Secret Driver and is never shown.
    IssueCredential { id: String },
    /// Set a native ServiceAccount's credential reference (a Secret name and key you keep).
    SetCredential {
        id: String,
        /// `api_key` or `oauth_access_token`.
        #[arg(long)]
        kind: String,
        /// The Secret's name.
        #[arg(long)]
        secret: String,
        /// The key within it.
        #[arg(long)]
        key: String,
    },
    /// Delete a ServiceAccount.
    Delete { id: String },
}

/// `occ agent …`
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// List Agents.
    List,
    /// Show one Agent.
    Get { id: String },
    /// Create from a JSON file.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Update the draft from a JSON file.
    Update {
        id: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Admit a new revision from the Agent's Configuration and deploy it.
    Deploy {
        id: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Roll back on purpose: admit a new revision made from an earlier revision's frozen
    /// document and identities, and deploy it.
    Rollback {
        id: String,
        /// The earlier revision to return to (its `rev_…` id; `occ agent revisions` lists them).
        #[arg(long = "to", value_name = "REVISION")]
        to: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Show a deployment's status.
    DeploymentStatus { id: String, deployment_id: String },
    /// List the Agent's revisions.
    Revisions { id: String },
    /// Show one revision (the frozen document and identities).
    Revision { id: String, revision_id: String },
    /// Stop the Agent.
    Stop { id: String },
    /// Delete the Agent.
    Delete { id: String },
    /// The Agent's live workspace files (AGENTS.md, SOUL.md, IDENTITY.md, USER.md).
    #[command(subcommand)]
    Files(FilesCmd),
    /// What runs for a revision: its workloads (Pods; the gateway process or unit on the
    /// process and SSH Drivers), their containers, restarts, last exit and events.
    Runtime {
        id: String,
        /// The revision (`rev_…`); default: a newer revision than the active one while it has
        /// workloads, else the active revision, else the latest.
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
    },
    /// Print a revision's runtime output (redacted by occ).
    Logs(LogsArgs),
    /// Let a principal talk to this Agent (`occ agent chat`; service keys need this grant):
    /// binds a Role with exactly `use` on Agents on this one Agent, creating the Role
    /// `agent-user` if the Namespace has none. Idempotent.
    GrantUse {
        id: String,
        /// The identity to allow (default: the service principal of the CLI's key).
        #[arg(long, value_name = "ID")]
        principal: Option<String>,
    },
    /// Let a person open the Agent's native Control UI: their `use` binding on this Agent (as
    /// grant-use makes it) carrying a runtime role. Idempotent; Installation administrators.
    GrantControlUi {
        id: String,
        /// The person's IAM principal (`prn_…`, as account creation answers it).
        #[arg(long, value_name = "ID")]
        principal: String,
        /// The runtime role (the only one occ's runtime enforces is the default).
        #[arg(long, default_value = "platform-administrator")]
        runtime_role: String,
    },
    /// Send the Agent a message and print its reply as it is produced. Without MESSAGE, an
    /// interactive conversation: one message per line, Ctrl-D ends it.
    Chat {
        id: String,
        message: Option<String>,
        /// Continue this conversation (1-64 lowercase letters, digits, '-' or '_'; default
        /// `occ-chat`).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
    },
    /// Why a deployment failed or is stuck: its checks, its error and the gateway's last
    /// output lines (redacted by occ).
    Diagnose {
        id: String,
        /// The deployment's revision (`rev_…`); default: the latest revision.
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
    },
}

/// `occ agent logs …`
#[derive(Debug, Args)]
pub struct LogsArgs {
    id: String,
    /// The revision (`rev_…`); default: a newer revision than the active one while it has
    /// workloads, else the active revision, else the latest.
    #[arg(long, value_name = "REVISION")]
    revision: Option<String>,
    /// `gateway` or `agent`.
    #[arg(long, default_value = "gateway")]
    source: String,
    /// Lines of the first page (1–1000).
    #[arg(long)]
    tail: Option<u16>,
    /// Only lines at most this old: `90s`, `10m`, `2h` (up to 24h).
    #[arg(long)]
    since: Option<String>,
    /// Leave out lines below this level: `error`, `warn`, `info`, `debug`.
    #[arg(long)]
    level: Option<String>,
    /// Keep polling for new output (every 2 s) until Ctrl-C.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Write the records as text to FILE instead of printing them.
    #[arg(long, value_name = "FILE", conflicts_with = "follow")]
    download: Option<PathBuf>,
}

/// `--since` as seconds: a number with an `s`, `m` or `h` suffix, up to a day.
fn since_seconds(text: &str) -> anyhow::Result<u64> {
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => anyhow::bail!("--since {text}: use a number with s, m or h (e.g. 10m)"),
    };
    let seconds = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|s| (1..=86_400).contains(s))
        .ok_or_else(|| anyhow!("--since {text}: between 1s and 24h"))?;
    Ok(seconds)
}

/// One record as a text line (gaps stand out).
fn log_line(record: &Value) -> String {
    if record["type"] == "gap" {
        return format!(
            "-- gap: {} ({}) --",
            record["reason"].as_str().unwrap_or("?"),
            record["remedy"].as_str().unwrap_or("")
        );
    }
    let subsystem = record["subsystem"]
        .as_str()
        .map(|s| format!(" [{s}]"))
        .unwrap_or_default();
    format!(
        "{} {}{subsystem} {}",
        record["time"].as_str().unwrap_or("-"),
        record["level"].as_str().unwrap_or("unknown"),
        record["message"].as_str().unwrap_or("")
    )
}

/// How long the CLI waits for a chat turn (the API's own deadline is 120 s).
const CHAT_WAIT: Duration = Duration::from_secs(150);

/// `occ agent chat`: one turn, or a conversation read line by line from stdin.
async fn agent_chat(
    c: &Client,
    path: &str,
    message: Option<String>,
    session: Option<String>,
) -> anyhow::Result<()> {
    if let Some(message) = message {
        return chat_turn(c, path, &message, session.as_deref()).await;
    }
    let session = session.unwrap_or_else(|| "occ-chat".into());
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    loop {
        if interactive {
            use std::io::Write as _;
            print!("> ");
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next_line().await? else {
            return Ok(());
        };
        if line.trim().is_empty() {
            continue;
        }
        chat_turn(c, path, &line, Some(&session)).await?;
    }
}

/// One turn: streamed to stdout for people, the whole answer for `-o json|yaml`.
async fn chat_turn(
    c: &Client,
    path: &str,
    message: &str,
    session: Option<&str>,
) -> anyhow::Result<()> {
    let mut body = serde_json::json!({"message": message});
    if let Some(session) = session {
        body["sessionKey"] = session.into();
    }
    if !matches!(c.output, Output::Table) {
        let answer = c
            .call_with(Method::POST, path, Some(body), CHAT_WAIT)
            .await?;
        return c.print(&answer, &[]);
    }
    let mut streamed = String::new();
    let answer = c
        .stream_events(path, body, CHAT_WAIT, |event, data| {
            if event == "delta"
                && let Some(text) = data["text"].as_str()
            {
                use std::io::Write as _;
                print!("{text}");
                let _ = std::io::stdout().flush();
                streamed.push_str(text);
            }
        })
        .await?;
    let reply = answer["reply"].as_str().unwrap_or_default();
    if streamed.is_empty() {
        print!("{reply}");
    }
    println!();
    eprintln!(
        "({}, {} ms, session {})",
        answer["model"].as_str().unwrap_or("model unknown"),
        answer["durationMs"],
        answer["sessionKey"].as_str().unwrap_or("-")
    );
    Ok(())
}

/// How often `occ agent logs -f` asks for more output when it has caught up.
const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// `occ agent logs`: one page, a download, or a follow loop that resumes with the cursor and
/// ends cleanly on Ctrl-C.
async fn agent_logs(c: &Client, base: &str, args: LogsArgs) -> anyhow::Result<()> {
    let revision = match args.revision {
        Some(r) => r,
        None => default_runtime_revision(c, &format!("{base}/{}", args.id)).await?,
    };
    let mut query = vec![format!("source={}", args.source)];
    if let Some(tail) = args.tail {
        query.push(format!("tailLines={tail}"));
    }
    if let Some(since) = &args.since {
        query.push(format!("sinceSeconds={}", since_seconds(since)?));
    }
    if let Some(level) = &args.level {
        query.push(format!("minLevel={level}"));
    }
    let path = format!(
        "{base}/{}/deployments/{revision}/runtime/logs?{}",
        args.id,
        query.join("&")
    );
    if let Some(file) = &args.download {
        let text = c
            .fetch(Method::GET, &format!("{path}&download=true"), None)
            .await?
            .unwrap_or_default();
        std::fs::write(file, &text).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("Wrote {} bytes to {}.", text.len(), file.display());
        return Ok(());
    }
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{path}&cursor={cursor}"),
            None => path.clone(),
        };
        let page = tokio::select! {
            page = c.call(Method::GET, &url, None) => page,
            _ = tokio::signal::ctrl_c(), if args.follow => return Ok(()),
        };
        let page = match page {
            Ok(page) => page,
            Err(e) if args.follow => {
                let Some(failure) = e.downcast_ref::<ApiFailure>() else {
                    return Err(e);
                };
                let wait = match (failure.status, failure.code.as_str()) {
                    (429, _) => {
                        let secs = failure.retry_after.unwrap_or(1);
                        eprintln!("notice: rate limited; retrying in {secs} s");
                        Duration::from_secs(secs)
                    }
                    (504, _) => {
                        eprintln!("notice: the read timed out; retrying");
                        FOLLOW_POLL
                    }
                    (400, "RUNTIME_LOGS_CURSOR_INVALID") if cursor.is_some() => {
                        eprintln!("notice: the cursor was refused; starting a new view");
                        cursor = None;
                        continue;
                    }
                    _ => return Err(e),
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = tokio::signal::ctrl_c() => return Ok(()),
                }
            }
            Err(e) => return Err(e),
        };
        match c.output {
            Output::Table => {
                for record in page["records"].as_array().into_iter().flatten() {
                    println!("{}", log_line(record));
                }
            }
            _ => c.print(&page, &[])?,
        }
        if !args.follow {
            return Ok(());
        }
        if let Some(next) = page["cursor"].as_str() {
            cursor = Some(next.to_owned());
        }
        // A page cut at its byte bound has more waiting: ask again at once. Otherwise poll
        // every second, half the route's per-caller refill rate.
        if page["truncated"] != Value::Bool(true) {
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    }
}

/// Following an admitted deployment.
#[derive(Debug, Args)]
pub struct FollowArgs {
    /// Follow the deployment until it succeeds or fails.
    #[arg(long)]
    wait: bool,
    /// How long to wait, in seconds.
    #[arg(long, default_value_t = 900)]
    wait_timeout_seconds: u64,
}

/// `occ agent files …`
#[derive(Debug, Subcommand)]
pub enum FilesCmd {
    /// Print a file (its content as is; `-o json|yaml` for `{name, content}`).
    Get { id: String, name: String },
    /// Replace a file with the content of a local file (UTF-8, at most 16 KiB).
    Put {
        id: String,
        name: String,
        #[arg(long)]
        file: PathBuf,
    },
}

/// `occ iam …`
#[derive(Debug, Subcommand)]
pub enum IamCmd {
    /// Roles.
    #[command(subcommand)]
    Role(IamResourceCmd),
    /// AccessBindings.
    #[command(subcommand)]
    AccessBinding(IamResourceCmd),
}

/// `occ iam role|access-binding …`
#[derive(Debug, Subcommand)]
pub enum IamResourceCmd {
    /// List.
    List,
    /// Show one.
    Get { id: String },
    /// Create from a JSON file.
    Create {
        #[arg(long)]
        file: PathBuf,
    },
    /// Delete one.
    Delete { id: String },
}

/// The API client.
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    /// The service principal of the key, when its file names it.
    key_principal: Option<String>,
    namespace: Option<String>,
    output: Output,
}

/// An API error, printed as the CLI's failure.
#[derive(Debug)]
pub struct ApiFailure {
    status: u16,
    code: String,
    message: String,
    request_id: String,
    /// Seconds the API asked to wait (`Retry-After`).
    retry_after: Option<u64>,
    /// What the user can do about it, when the CLI knows.
    hint: Option<String>,
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

fn header_text(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A deploy refused because the Agent's service principal may not use a Secret gets the one
/// command that allows it (the API names the principal and the Secret in its 403).
fn with_grant_hint(error: anyhow::Error, agent: &str) -> anyhow::Error {
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
fn with_use_hint(error: anyhow::Error, agent: &str) -> anyhow::Error {
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
fn read_key(path: &PathBuf) -> anyhow::Result<(String, Option<String>)> {
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
            namespace: opts.namespace.clone(),
            output: opts.output,
        })
    }

    fn ns(&self) -> anyhow::Result<&str> {
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
    async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        wait: Duration,
    ) -> anyhow::Result<Value> {
        let resp = self.send(method, path, body, Some(wait), None).await?;
        let bytes = Self::success(resp).await?.unwrap_or_default();
        let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(doc.get("data").cloned().unwrap_or(Value::Null))
    }

    /// POSTs `body` asking for server-sent events; hands each `delta`-like event to `on_event`
    /// and returns the data of the `final` event (an `error` event is the API's error).
    async fn stream_events(
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

    async fn send(
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
    async fn fetch(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let resp = self.send(method, path, body, None, None).await?;
        Self::success(resp).await
    }

    /// The body of a success (`None` for 204), or the API's error.
    async fn success(resp: reqwest::Response) -> anyhow::Result<Option<Vec<u8>>> {
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
    fn deleted(&self, kind: &str, id: &str) -> anyhow::Result<()> {
        match self.output {
            Output::Table => {
                println!("{kind} {id} deleted.");
                Ok(())
            }
            _ => self.print(&serde_json::json!({"id": id, "deleted": true}), &[]),
        }
    }

    fn print(&self, value: &Value, columns: &[&str]) -> anyhow::Result<()> {
        let text = match self.output {
            Output::Json => serde_json::to_string_pretty(value)?,
            Output::Yaml => serde_yaml_ng::to_string(value)?,
            Output::Table => table(value, columns),
        };
        println!("{}", text.trim_end());
        Ok(())
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders a list as columns, a single resource as `key: value` lines.
fn table(value: &Value, columns: &[&str]) -> String {
    match value {
        Value::Array(items) if items.is_empty() => "No resources found.".into(),
        Value::Array(items) => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|i| {
                    columns
                        .iter()
                        .map(|c| cell(i.get(*c).unwrap_or(&Value::Null)))
                        .collect()
                })
                .collect();
            let widths: Vec<usize> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([c.len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let mut out = String::new();
            let line = |cells: Vec<String>| {
                let padded: Vec<_> = cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
                    .collect();
                padded.join("  ").trim_end().to_owned()
            };
            out.push_str(&line(columns.iter().map(|c| c.to_uppercase()).collect()));
            for r in rows {
                out.push('\n');
                out.push_str(&line(r));
            }
            out
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                Value::Object(_) | Value::Array(_) => {
                    format!("{k}: {}", serde_json::to_string(v).unwrap_or_default())
                }
                other => format!("{k}: {}", cell(other)),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => cell(other),
    }
}

fn read_json(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("--file {} is not JSON", path.display()))
}

const NS_COLUMNS: &[&str] = &["id", "name", "status", "createdAt"];
const AGENT_COLUMNS: &[&str] = &[
    "id",
    "name",
    "desiredRuntimeState",
    "status",
    "activeRevisionId",
    "configurationId",
];
const REVISION_COLUMNS: &[&str] = &["id", "revision", "configurationGeneration", "createdAt"];

/// `occ installation …`
pub async fn installation(c: &Client, cmd: InstallationCmd) -> anyhow::Result<()> {
    match cmd {
        InstallationCmd::Get => c.print(&c.call(Method::GET, "/installation", None).await?, &[]),
    }
}

/// `occ namespace …`
pub async fn namespace(c: &Client, cmd: NamespaceCmd) -> anyhow::Result<()> {
    let v = match cmd {
        NamespaceCmd::List => c.call(Method::GET, "/namespaces", None).await?,
        NamespaceCmd::Get { id } => {
            c.call(Method::GET, &format!("/namespaces/{id}"), None)
                .await?
        }
        NamespaceCmd::Create {
            name,
            existing_namespace,
        } => {
            let mut body = json!({"name": name});
            if let Some(e) = existing_namespace {
                body["existingNamespace"] = json!(e);
            }
            c.call(Method::POST, "/namespaces", Some(body)).await?
        }
        NamespaceCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("/namespaces/{id}"), None)
                .await?
        }
    };
    c.print(&v, NS_COLUMNS)
}

/// `occ configuration …`
pub async fn configuration(c: &Client, cmd: ConfigurationCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/configurations", c.ns()?);
    let v = match cmd {
        ConfigurationCmd::Create { file } => {
            c.call(Method::POST, &base, Some(read_json(&file)?)).await?
        }
        ConfigurationCmd::Update { id, file } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?
        }
        ConfigurationCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        ConfigurationCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Configuration", &id);
        }
    };
    c.print(&v, &[])
}

/// `occ secret …`
pub async fn secret(c: &Client, cmd: SecretCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/secrets", c.ns()?);
    let v = match cmd {
        SecretCmd::List => c.call(Method::GET, &base, None).await?,
        SecretCmd::Create { file } => c.call(Method::POST, &base, Some(read_json(&file)?)).await?,
        SecretCmd::Update { id, file } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?
        }
        SecretCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        SecretCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("Secret", &id);
        }
        SecretCmd::Grant { id, agent } => {
            let binding = grant_secret(c, &id, &agent).await?;
            return c.print(
                &binding,
                &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
            );
        }
    };
    c.print(&v, &["id", "name"])
}

/// The name of the Role `occ secret grant` creates when the Namespace has none that grants
/// exactly `operate` on Secrets.
const SECRET_USER_ROLE: &str = "secret-user";

/// Binds a Role with exactly `operate` on Secrets to Agent `agent`'s service principal on
/// Secret `secret` (reusing such a Role and an existing identical binding); returns the binding.
async fn grant_secret(c: &Client, secret: &str, agent: &str) -> anyhow::Result<Value> {
    let ns = c.ns()?;
    // Both must exist (a clear 404 otherwise); the principal is the Agent's own.
    c.call(
        Method::GET,
        &format!("/namespaces/{ns}/secrets/{secret}"),
        None,
    )
    .await?;
    let principal = c
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{agent}"),
            None,
        )
        .await?
        .get("servicePrincipalId")
        .and_then(Value::as_str)
        .map_or_else(|| format!("service-agent-{agent}"), str::to_owned);
    grant_exact(
        c,
        &principal,
        json!([{"action": "operate", "resourceKind": "secret"}]),
        SECRET_USER_ROLE,
        ("secret", secret),
    )
    .await
}

/// Binds a Role with exactly `permissions` to `principal` on one resource `(kind, id)`,
/// reusing such a Role (else creating `role_name`) and an identical binding; returns the binding.
async fn grant_exact(
    c: &Client,
    principal: &str,
    permissions: Value,
    role_name: &str,
    (kind, id): (&str, &str),
) -> anyhow::Result<Value> {
    let ns = c.ns()?;
    let roles_path = format!("/namespaces/{ns}/iam/roles");
    let roles = c.call(Method::GET, &roles_path, None).await?;
    let existing = roles
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["permissions"] == permissions);
    let role_id = match existing {
        Some(role) => role["id"].as_str().unwrap_or_default().to_owned(),
        None => c
            .call(
                Method::POST,
                &roles_path,
                Some(json!({"name": role_name, "permissions": permissions})),
            )
            .await?["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    let bindings_path = format!("/namespaces/{ns}/iam/access-bindings");
    let wanted = json!({"subjectKind": "identity", "subjectId": principal, "roleId": role_id,
                        "resourceKind": kind, "resourceId": id});
    let bindings = c.call(Method::GET, &bindings_path, None).await?;
    if let Some(found) = bindings.as_array().into_iter().flatten().find(|b| {
        ["subjectId", "roleId", "resourceKind", "resourceId"]
            .iter()
            .all(|k| b[*k] == wanted[*k])
    }) {
        return Ok(found.clone());
    }
    c.call(Method::POST, &bindings_path, Some(wanted)).await
}

/// The name of the Role `occ agent grant-use` creates when the Namespace has none that grants
/// exactly `use` on Agents.
const AGENT_USER_ROLE: &str = "agent-user";

/// `occ agent grant-use`: lets `principal` (default: the CLI key's own) talk to one Agent.
async fn grant_use(c: &Client, agent: &str, principal: Option<String>) -> anyhow::Result<Value> {
    let principal = principal
        .or_else(|| c.key_principal.clone())
        .ok_or_else(|| {
            anyhow!("--principal is required: the service key file names no servicePrincipalId")
        })?;
    // The Agent must exist (a clear 404 otherwise).
    c.call(
        Method::GET,
        &format!("/namespaces/{}/agents/{agent}", c.ns()?),
        None,
    )
    .await?;
    grant_exact(
        c,
        &principal,
        json!([{"action": "use", "resourceKind": "agent"}]),
        AGENT_USER_ROLE,
        ("agent", agent),
    )
    .await
}

/// `occ agent grant-control-ui`: the person's `use` binding on the Agent, then its runtime role.
async fn grant_control_ui(
    c: &Client,
    agent: &str,
    principal: String,
    runtime_role: &str,
) -> anyhow::Result<Value> {
    let binding = grant_use(c, agent, Some(principal)).await?;
    if binding["runtimeRole"] == runtime_role {
        return Ok(binding);
    }
    let id = binding["id"].as_str().unwrap_or_default();
    c.call(
        Method::PATCH,
        &format!(
            "/namespaces/{}/iam/access-bindings/{id}/runtime-role",
            c.ns()?
        ),
        Some(json!({ "runtimeRole": runtime_role })),
    )
    .await
}

/// `occ service-account …`
pub async fn service_account(c: &Client, cmd: ServiceAccountCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/service-accounts", c.ns()?);
    let v = match cmd {
        ServiceAccountCmd::List => c.call(Method::GET, &base, None).await?,
        ServiceAccountCmd::Create { name } => {
            c.call(Method::POST, &base, Some(json!({"name": name})))
                .await?
        }
        ServiceAccountCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        ServiceAccountCmd::IssueCredential { id } => {
            c.call(
                Method::POST,
                &format!("{base}/{id}/credentials"),
                Some(json!({})),
            )
            .await?
        }
        ServiceAccountCmd::SetCredential {
            id,
            kind,
            secret,
            key,
        } => {
            c.call(
                Method::PATCH,
                &format!("{base}/{id}/credential"),
                Some(json!({"kind": kind, "secretRef": {"name": secret, "key": key}})),
            )
            .await?
        }
        ServiceAccountCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted("ServiceAccount", &id);
        }
    };
    c.print(&v, &["id", "name", "credential"])
}

/// `occ agent …`
pub async fn agent(c: &Client, cmd: AgentCmd) -> anyhow::Result<()> {
    let base = format!("/namespaces/{}/agents", c.ns()?);
    match cmd {
        AgentCmd::Files(FilesCmd::Get { id, name }) => {
            let file = c
                .call(
                    Method::GET,
                    &format!("{base}/{id}/workspace/files/{name}"),
                    None,
                )
                .await?;
            match c.output {
                Output::Table => {
                    print!("{}", file["content"].as_str().unwrap_or_default());
                    Ok(())
                }
                _ => c.print(&file, &[]),
            }
        }
        AgentCmd::Files(FilesCmd::Put { id, name, file }) => {
            let content = std::fs::read_to_string(&file)
                .with_context(|| format!("--file {} (UTF-8 text)", file.display()))?;
            c.print(
                &c.call(
                    Method::PUT,
                    &format!("{base}/{id}/workspace/files/{name}"),
                    Some(serde_json::json!({"content": content})),
                )
                .await?,
                &[],
            )
        }
        AgentCmd::Logs(args) => agent_logs(c, &base, args).await,
        AgentCmd::GrantUse { id, principal } => {
            let binding = grant_use(c, &id, principal).await?;
            c.print(
                &binding,
                &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
            )
        }
        AgentCmd::GrantControlUi {
            id,
            principal,
            runtime_role,
        } => {
            let binding = grant_control_ui(c, &id, principal, &runtime_role).await?;
            c.print(&binding, &["id", "subjectId", "resourceId", "runtimeRole"])
        }
        AgentCmd::Chat {
            id,
            message,
            session,
        } => agent_chat(c, &format!("{base}/{id}/chat"), message, session)
            .await
            .map_err(|e| with_use_hint(e, &id)),
        AgentCmd::Diagnose { id, revision } => agent_diagnose(c, &base, &id, revision).await,
        AgentCmd::List => c.print(&c.call(Method::GET, &base, None).await?, AGENT_COLUMNS),
        AgentCmd::Get { id } => c.print(
            &c.call(Method::GET, &format!("{base}/{id}"), None).await?,
            &[],
        ),
        AgentCmd::Create { file } => c.print(
            &c.call(Method::POST, &base, Some(read_json(&file)?)).await?,
            &[],
        ),
        AgentCmd::Update { id, file } => c.print(
            &c.call(
                Method::PATCH,
                &format!("{base}/{id}"),
                Some(read_json(&file)?),
            )
            .await?,
            &[],
        ),
        AgentCmd::Revisions { id } => c.print(
            &c.call(Method::GET, &format!("{base}/{id}/revisions"), None)
                .await?,
            REVISION_COLUMNS,
        ),
        AgentCmd::Revision { id, revision_id } => c.print(
            &c.call(
                Method::GET,
                &format!("{base}/{id}/revisions/{revision_id}"),
                None,
            )
            .await?,
            REVISION_COLUMNS,
        ),
        AgentCmd::DeploymentStatus { id, deployment_id } => c.print(
            &c.call(
                Method::GET,
                &format!("{base}/{id}/deployments/{deployment_id}"),
                None,
            )
            .await?,
            &[],
        ),
        AgentCmd::Stop { id } => c.print(
            &c.call(Method::POST, &format!("{base}/{id}/stop"), None)
                .await?,
            &[],
        ),
        AgentCmd::Delete { id } => c.print(
            &c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?,
            &[],
        ),
        AgentCmd::Runtime { id, revision } => {
            let agent = format!("{base}/{id}");
            let revision = match revision {
                Some(revision) => revision,
                None => default_runtime_revision(c, &agent).await?,
            };
            let runtime = c
                .call(
                    Method::GET,
                    &format!("{agent}/deployments/{revision}/runtime"),
                    None,
                )
                .await?;
            match c.output {
                Output::Table => {
                    println!("{}", runtime_table(&runtime).trim_end());
                    Ok(())
                }
                _ => c.print(&runtime, &[]),
            }
        }
        AgentCmd::Deploy { id, follow } => {
            let rev = c
                .call(Method::POST, &format!("{base}/{id}/deploy"), None)
                .await
                .map_err(|e| with_grant_hint(e, &id))?;
            admitted(c, &format!("{base}/{id}"), &rev, &follow).await
        }
        AgentCmd::Rollback { id, to, follow } => {
            let rev = c
                .call(
                    Method::POST,
                    &format!("{base}/{id}/revisions/{to}/redeploy"),
                    None,
                )
                .await?;
            admitted(c, &format!("{base}/{id}"), &rev, &follow).await
        }
    }
}

/// The revision `occ agent runtime` describes without `--revision`, as the reference's CLI
/// chooses it: the latest revision while it is newer than the active one and has workloads
/// (a deployment in progress or failing), else the active revision, else the latest.
async fn default_runtime_revision(c: &Client, agent: &str) -> anyhow::Result<String> {
    let active = c.call(Method::GET, agent, None).await?["activeRevisionId"]
        .as_str()
        .map(str::to_owned);
    let latest = latest_revision(c, agent).await?;
    match active {
        Some(active) if latest != active => {
            let runtime = c
                .call(
                    Method::GET,
                    &format!("{agent}/deployments/{latest}/runtime"),
                    None,
                )
                .await?;
            let has_workloads = runtime["pods"].as_array().is_some_and(|p| !p.is_empty());
            Ok(if has_workloads { latest } else { active })
        }
        Some(active) => Ok(active),
        None => Ok(latest),
    }
}

/// `occ agent diagnose`: the diagnostics of a deployment (an audited `POST`) next to the
/// deployment's own state and error.
async fn agent_diagnose(
    c: &Client,
    base: &str,
    id: &str,
    revision: Option<String>,
) -> anyhow::Result<()> {
    let agent = format!("{base}/{id}");
    let revision = match revision {
        Some(revision) => revision,
        None => latest_revision(c, &agent).await?,
    };
    let deployment_path = format!("{agent}/deployments/{revision}");
    let diagnostics = c
        .call(
            Method::POST,
            &format!("{deployment_path}/diagnostics"),
            None,
        )
        .await?;
    let deployment = c.call(Method::GET, &deployment_path, None).await?;
    match c.output {
        Output::Table => {
            println!(
                "{}",
                diagnosis_text(id, &revision, &diagnostics, &deployment).trim_end()
            );
            Ok(())
        }
        _ => c.print(
            &serde_json::json!({"diagnostics": diagnostics, "deployment": deployment}),
            &[],
        ),
    }
}

/// The Agent's latest revision (the newest deployment).
async fn latest_revision(c: &Client, agent: &str) -> anyhow::Result<String> {
    let revisions = c
        .call(Method::GET, &format!("{agent}/revisions"), None)
        .await?;
    revisions
        .as_array()
        .into_iter()
        .flatten()
        .max_by_key(|r| r["revision"].as_u64().unwrap_or(0))
        .and_then(|r| r["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the Agent has no revision; deploy it first"))
}

/// `occ agent diagnose` as text: the deployment's state, the first failed check (the step it
/// stopped at), its error and output lines, every check, and where to read more.
fn diagnosis_text(agent: &str, revision: &str, diagnostics: &Value, deployment: &Value) -> String {
    let checks = diagnostics["checks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = format!(
        "Deployment {revision}: {}\n",
        deployment["status"].as_str().unwrap_or("unknown")
    );
    match checks.iter().find(|c| c["state"] == "failed") {
        Some(failed) => out.push_str(&format!(
            "Failing step: {}/{} ({})\n",
            cell(&failed["component"]),
            cell(&failed["check"]),
            cell(&failed["code"])
        )),
        None => out.push_str("No check failed.\n"),
    }
    let error = &deployment["error"];
    if error.is_object() {
        out.push_str(&format!(
            "Error: {} {}\n",
            cell(&error["code"]),
            cell(&error["message"])
        ));
        if error["data"]["rolledBack"] == true {
            out.push_str("The revision that served before was restored and keeps serving.\n");
        }
        let output = error["data"]["output"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !output.is_empty() {
            out.push_str("\nLast output lines:\n");
            for line in output {
                out.push_str(&format!("  {}\n", line.as_str().unwrap_or_default()));
            }
        }
    }
    out.push_str("\nChecks:\n");
    out.push_str(&table(
        &Value::Array(checks.to_vec()),
        &["component", "check", "state", "code", "checkedAt"],
    ));
    out.push_str(&format!(
        "\n\nMore: occ agent logs {agent} --revision {revision}; occ agent runtime {agent} \
         --revision {revision}\n"
    ));
    out
}

/// `occ agent runtime` as text: the revision, then one line per container of each workload and
/// the workload's events.
fn runtime_table(runtime: &Value) -> String {
    let mut out = format!(
        "Revision {} observed at {}\n",
        cell(&runtime["revisionId"]),
        cell(&runtime["observedAt"])
    );
    let pods = runtime["pods"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if pods.is_empty() {
        out.push_str("No workload runs for this revision.\n");
        return out;
    }
    let rows: Vec<Value> = pods
        .iter()
        .flat_map(|pod| {
            pod["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| {
                    serde_json::json!({
                        "pod": pod["name"], "phase": pod["phase"], "ready": pod["ready"],
                        "container": c["name"], "state": c["state"], "reason": c["reason"],
                        "restarts": c["restartCount"], "startedAt": c["startedAt"],
                        "lastExit": c["lastTermination"]["reason"],
                    })
                })
        })
        .collect();
    out.push_str(&table(
        &Value::Array(rows),
        &[
            "pod",
            "phase",
            "ready",
            "container",
            "state",
            "reason",
            "restarts",
            "startedAt",
            "lastExit",
        ],
    ));
    let events: Vec<Value> = pods
        .iter()
        .flat_map(|pod| pod["events"].as_array().into_iter().flatten().cloned())
        .collect();
    if !events.is_empty() {
        out.push_str("\n\nEvents:\n");
        out.push_str(&table(
            &Value::Array(events),
            &["lastObservedAt", "type", "reason", "count", "message"],
        ));
    }
    out
}

/// Prints an admitted revision, or follows its deployment with `--wait`.
async fn admitted(c: &Client, agent: &str, rev: &Value, follow: &FollowArgs) -> anyhow::Result<()> {
    if !follow.wait {
        return c.print(rev, &[]);
    }
    let rev_id = rev["id"]
        .as_str()
        .ok_or_else(|| anyhow!("the response has no revision id"))?;
    eprintln!(
        "Deployment {rev_id} (revision {}) admitted.",
        cell(&rev["revision"])
    );
    follow_deployment(
        c,
        &format!("{agent}/deployments/{rev_id}"),
        Duration::from_secs(follow.wait_timeout_seconds),
    )
    .await
}

/// Polls a deployment until it ends, printing each change of state or progress.
async fn follow_deployment(c: &Client, path: &str, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let status = c.call(Method::GET, path, None).await?;
        let state = status["status"].as_str().unwrap_or("unknown").to_owned();
        let progress = status["progress"]["lastAttempt"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let line = if progress.is_empty() {
            state.clone()
        } else {
            format!("{state} ({progress})")
        };
        if line != last {
            eprintln!("[{:>4}s] {line}", started.elapsed().as_secs());
            last = line;
        }
        match state.as_str() {
            "succeeded" => return c.print(&status, &[]),
            "failed" => {
                c.print(&status, &[])?;
                bail!(
                    "the deployment failed: {} {}",
                    status["error"]["code"].as_str().unwrap_or("UNKNOWN"),
                    status["error"]["message"].as_str().unwrap_or("")
                );
            }
            _ => {}
        }
        if started.elapsed() > limit {
            bail!(
                "the deployment did not finish within {} seconds (it continues)",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `occ iam …`
pub async fn iam(c: &Client, cmd: IamCmd) -> anyhow::Result<()> {
    let ns = c.ns()?;
    let (kind, base, cmd, columns): (&str, String, IamResourceCmd, &[&str]) = match cmd {
        IamCmd::Role(cmd) => (
            "Role",
            format!("/namespaces/{ns}/iam/roles"),
            cmd,
            &["id", "name"],
        ),
        IamCmd::AccessBinding(cmd) => (
            "AccessBinding",
            format!("/namespaces/{ns}/iam/access-bindings"),
            cmd,
            &["id", "subjectId", "roleId", "resourceKind", "resourceId"],
        ),
    };
    let v = match cmd {
        IamResourceCmd::List => c.call(Method::GET, &base, None).await?,
        IamResourceCmd::Get { id } => c.call(Method::GET, &format!("{base}/{id}"), None).await?,
        IamResourceCmd::Create { file } => {
            c.call(Method::POST, &base, Some(read_json(&file)?)).await?
        }
        IamResourceCmd::Delete { id } => {
            c.call(Method::DELETE, &format!("{base}/{id}"), None)
                .await?;
            return c.deleted(kind, &id);
        }
    };
    c.print(&v, columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_tables_list_containers_and_events() {
        let runtime = serde_json::json!({
            "revisionId": "rev_1", "observedAt": "2026-01-01T00:00:00.000Z",
            "pods": [{"name": "rev-1", "phase": "Running", "ready": true, "containers": [
                {"name": "gateway", "state": "running", "reason": null, "restartCount": 2,
                 "startedAt": "2026-01-01T00:00:00.000Z",
                 "lastTermination": {"reason": "exit status 1", "exitCode": 1, "finishedAt": null}}],
              "events": [{"type": "Warning", "reason": "GatewayExited", "count": 1,
                          "message": "the gateway exited (exit status 1)", "lastObservedAt": null}]}],
            "sources": []
        });
        let text = runtime_table(&runtime);
        assert!(text.starts_with("Revision rev_1 observed at 2026-01-01T00:00:00.000Z\n"));
        assert!(
            text.contains("rev-1  Running  true   gateway    running  -       2"),
            "{text}"
        );
        assert!(text.contains("exit status 1"), "{text}");
        assert!(text.contains("GatewayExited"), "{text}");
        let empty = serde_json::json!({"revisionId": "rev_1", "observedAt": "x", "pods": []});
        assert!(runtime_table(&empty).contains("No workload runs"));
    }

    #[test]
    fn a_diagnosis_names_the_failing_step_the_error_and_the_output() {
        let diagnostics = serde_json::json!({"revisionId": "rev_2", "observedAt": "x", "checks": [
            {"component": "deployment", "check": "reconcile", "state": "failed",
             "code": "RUNTIME_STARTUP_FAILED", "checkedAt": null},
            {"component": "runtime", "check": "workload", "state": "succeeded",
             "checkedAt": null},
        ]});
        let deployment = serde_json::json!({"status": "failed", "error": {
            "code": "RUNTIME_STARTUP_FAILED", "message": "the gateway exited during startup",
            "data": {"rolledBack": true, "output": ["Error: ENOENT cert.pem"]}}});
        let text = diagnosis_text("agt_1", "rev_2", &diagnostics, &deployment);
        assert!(text.starts_with("Deployment rev_2: failed\n"), "{text}");
        assert!(
            text.contains("Failing step: deployment/reconcile (RUNTIME_STARTUP_FAILED)"),
            "{text}"
        );
        assert!(
            text.contains("Error: RUNTIME_STARTUP_FAILED the gateway exited during startup"),
            "{text}"
        );
        assert!(text.contains("restored"), "{text}");
        assert!(text.contains("  Error: ENOENT cert.pem\n"), "{text}");
        assert!(
            text.lines().any(|l| l.split_whitespace().take(3).eq([
                "runtime",
                "workload",
                "succeeded"
            ])),
            "{text}"
        );
        assert!(
            text.contains("occ agent logs agt_1 --revision rev_2"),
            "{text}"
        );
        let healthy = diagnosis_text(
            "agt_1",
            "rev_1",
            &serde_json::json!({"checks": []}),
            &serde_json::json!({"status": "succeeded"}),
        );
        assert!(healthy.contains("No check failed."), "{healthy}");
        assert!(!healthy.contains("Error:"), "{healthy}");
    }

    #[test]
    fn since_takes_seconds_minutes_and_hours_up_to_a_day() {
        assert_eq!(since_seconds("90s").unwrap(), 90);
        assert_eq!(since_seconds("10m").unwrap(), 600);
        assert_eq!(since_seconds("24h").unwrap(), 86_400);
        for bad in ["", "10", "0s", "25h", "m", "-1m", "1d"] {
            assert!(since_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tables() {
        assert_eq!(table(&json!([]), &["id"]), "No resources found.");
        let t = table(
            &json!([{"id": "ns_1", "name": "default", "status": null}]),
            &["id", "name", "status"],
        );
        assert!(t.starts_with("ID    NAME     STATUS"));
        assert!(t.ends_with("ns_1  default  -"));
        assert_eq!(table(&json!({"a": 1, "b": null}), &[]), "a: 1\nb: -");
    }
}
