//! The live workspace files of an Agent through its gateway (`agents.files.get`/`set` of the
//! four profile files), with the outcome classification of the reference controller
//! (lifecycle spec §B.5–B.7) and pooled connections.
//!
//! **Outcomes.** A read is [`ReadOutcome::Ok`], [`ReadOutcome::Missing`] or
//! [`ReadOutcome::Unavailable`]; the content is checked (the requested name, ≤ 16 KiB of UTF-8,
//! no NUL, the reported hash matches) before it is returned. A write is
//! [`WriteOutcome::Ok`] only when the gateway answered with the written file;
//! [`WriteOutcome::Unavailable`] (or [`WriteOutcome::Missing`]) when it definitely did not
//! write — it answered with an error, or the request frame never left; and
//! [`WriteOutcome::Unknown`] when the frame was written and no answer came (deadline,
//! connection lost): the file may or may not have changed, and only a read can tell. A write is
//! never retried once its frame was written.
//!
//! **One deadline per operation** (an absolute [`Instant`]) bounds waiting for a pooled
//! connection, connecting, the handshake and the call. An operation abandoned after its request
//! was written — at the deadline, or because the caller dropped the future — is followed by a
//! `cancel` frame (the connection task sends it; see `conn.rs`). The real gateway (2026.9.6)
//! does not act on `cancel`: it answers it with an `INVALID_REQUEST` response carrying the
//! same id, which the client skips, and keeps the connection open.
//!
//! **Connections** are verified once (`hello-ok`: protocol 4, role `operator`) and pooled,
//! keyed by URL and a digest of the credential, so a rotated credential never reuses a session
//! opened with the old one (and the old one is closed once the new one is up). Several
//! operations may share one connection concurrently (responses are matched by id). Pooled
//! connections close after [`FileClientSettings::idle_timeout`] without a request; at most
//! [`FileClientSettings::max_sessions`] are kept (the least recently used idle one is closed
//! to make room; when none is idle the new connection serves its operation and closes). The
//! grant is checked per operation: reads need `operator.read` or `operator.admin`, writes
//! `operator.admin`; an empty grant refuses both.
//!
//! **Retries.** Only failures before the request frame was written are retried, once, within
//! the deadline: a pooled connection that turns out to be closed when the request is handed to
//! it. Connect failures, gateway errors and anything after the frame was written are not.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::time::Instant;

use crate::conn::{CallFailure, Conn, ConnOptions, Counters};
use crate::endpoint::{Auth, Endpoint};
use crate::error::GatewayError;
use crate::handshake::Hello;
use crate::workspace_file::{WorkspaceFile, content_hash};

/// The workspace files occ reads and writes (the native gateway also serves `BOOTSTRAP.md` and
/// `MEMORY.md`, which occ does not expose).
pub const WORKSPACE_FILE_NAMES: [&str; 4] = ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"];
/// Largest workspace file content, in bytes of UTF-8.
pub const MAX_FILE_BYTES: usize = 16 * 1024;
/// Default [`FileClientSettings::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`FileClientSettings::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Longest agent id accepted.
const MAX_AGENT_ID_BYTES: usize = 256;

/// The result of reading a workspace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The file, checked.
    Ok(WorkspaceFile),
    /// The gateway says the file does not exist.
    Missing,
    /// No valid answer: unreachable, refused, an error answer, invalid content, or the
    /// deadline passed. The reason is for logs and never carries file content.
    Unavailable(String),
}

/// The result of writing a workspace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written; `size` is the number of UTF-8 bytes submitted.
    Ok {
        /// Bytes written.
        size: u64,
    },
    /// The gateway refused because the file is missing.
    Missing,
    /// Definitely not written: the request never reached the gateway, or the gateway answered
    /// with an error. The reason is for logs and never carries file content.
    Unavailable(String),
    /// The request was written but no (valid) answer came: the file may or may not have
    /// changed. Never retried; read the file to find out.
    Unknown(String),
}

/// Pool settings of a [`FileClient`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileClientSettings {
    /// A pooled connection without a request for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections kept open at once.
    pub max_sessions: usize,
}

impl Default for FileClientSettings {
    fn default() -> FileClientSettings {
        FileClientSettings {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }
}

/// Counters of a [`FileClient`] since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileClientStats {
    /// Connections opened and verified (`hello-ok`).
    pub connections_opened: u64,
    /// Request frames written (`agents.files.*`).
    pub requests_written: u64,
    /// `cancel` frames sent for abandoned requests.
    pub cancels_sent: u64,
    /// Operations retried on a new connection because the pooled one was found closed before
    /// the request was written.
    pub stale_retries: u64,
    /// Pooled connections currently open.
    pub open_sessions: usize,
}

/// Reads and writes Agents' workspace files through their gateways, reusing verified
/// connections. Cheap to clone (clones share the pool); dropping the last clone closes the
/// idle connections.
#[derive(Clone)]
pub struct FileClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for FileClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileClient")
            .field("settings", &self.inner.settings)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for FileClient {
    fn default() -> FileClient {
        FileClient::new()
    }
}

struct Inner {
    settings: FileClientSettings,
    entries: Mutex<HashMap<PoolKey, Entry>>,
    counters: Arc<Counters>,
}

/// The URL and a digest of the credential (the secret itself is not kept in the key).
#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    url: String,
    credential: [u8; 32],
}

impl PoolKey {
    fn of(endpoint: &Endpoint) -> PoolKey {
        let mut hasher = sha2::Sha256::new();
        match &endpoint.auth {
            Auth::Token(token) => {
                hasher.update(b"token\0");
                hasher.update(token.as_bytes());
            }
            Auth::EdgeHeader { name, value } => {
                hasher.update(b"edge\0");
                hasher.update(name.to_ascii_lowercase().as_bytes());
                hasher.update(b"\0");
                hasher.update(value.as_bytes());
            }
        }
        PoolKey {
            url: endpoint.url.clone(),
            credential: hasher.finalize().into(),
        }
    }
}

#[derive(Default)]
struct Entry {
    conn: Option<Conn>,
    /// Held while a connection for this key is being opened, so concurrent operations wait for
    /// it rather than open their own.
    connecting: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Read,
    Write,
}

/// How an operation failed.
enum Failure {
    /// Before the request frame was written (including validation, connect, handshake, grant).
    NotSent(GatewayError),
    /// The gateway answered with an error.
    Refused { error: GatewayError, missing: bool },
    /// Written, no answer.
    NoAnswer(GatewayError),
}

fn invalid_content(why: &str) -> ReadOutcome {
    ReadOutcome::Unavailable(format!("invalid content from the gateway: {why}"))
}

/// Checks the target before anything is sent.
fn check_target(agent_id: &str, name: &str) -> Result<(), String> {
    if agent_id.is_empty() || agent_id.len() > MAX_AGENT_ID_BYTES {
        return Err(format!(
            "invalid request: agent id must be 1 to {MAX_AGENT_ID_BYTES} bytes"
        ));
    }
    if agent_id.chars().any(char::is_control) {
        return Err("invalid request: agent id contains control characters".into());
    }
    if !WORKSPACE_FILE_NAMES.contains(&name) {
        return Err(format!(
            "invalid request: file name is not one of {}",
            WORKSPACE_FILE_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// Checks content (submitted or received): ≤ [`MAX_FILE_BYTES`], no NUL. (`&str` is already
/// well-formed UTF-8.)
fn check_content(content: &str) -> Result<(), String> {
    if content.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes exceed the limit of {MAX_FILE_BYTES}",
            content.len()
        ));
    }
    if content.contains('\0') {
        return Err("contains a NUL character".into());
    }
    Ok(())
}

fn check_grant(hello: &Hello, need: Need) -> Result<(), GatewayError> {
    let has = |scope: &str| hello.scopes.iter().any(|s| s == scope);
    let allowed = match need {
        Need::Read => has("operator.read") || has("operator.admin"),
        Need::Write => has("operator.admin"),
    };
    if allowed {
        Ok(())
    } else {
        let wanted = match need {
            Need::Read => "operator.read or operator.admin",
            Need::Write => "operator.admin",
        };
        Err(GatewayError::MissingScope(format!(
            "hello-ok granted [{}], the operation needs {wanted}",
            hello.scopes.join(", ")
        )))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Classifies a successful `agents.files.get` answer.
fn classify_read(payload: &Value, name: &str) -> ReadOutcome {
    if payload.get("missing").and_then(Value::as_bool) == Some(true) {
        return ReadOutcome::Missing;
    }
    let Some(file) = payload.get("file").filter(|f| f.is_object()) else {
        return invalid_content("no file in the answer");
    };
    if file.get("missing").and_then(Value::as_bool) == Some(true) {
        return ReadOutcome::Missing;
    }
    if file.get("name").and_then(Value::as_str) != Some(name) {
        return invalid_content("the answer names another file");
    }
    let Some(content) = file.get("content").and_then(Value::as_str) else {
        return invalid_content("no content");
    };
    if let Err(why) = check_content(content) {
        return invalid_content(&why);
    }
    let hash = match file.get("hash") {
        None | Some(Value::Null) => content_hash(content),
        Some(Value::String(reported)) => {
            let computed = content_hash(content);
            if !reported.eq_ignore_ascii_case(&computed) {
                return invalid_content("the reported hash does not match the content");
            }
            computed
        }
        Some(_) => return invalid_content("the hash is not a string"),
    };
    ReadOutcome::Ok(WorkspaceFile {
        name: name.to_owned(),
        content: content.to_owned(),
        hash,
        size: content.len() as u64,
    })
}

impl FileClient {
    /// A client with the default settings (30 s idle timeout, 64 connections).
    pub fn new() -> FileClient {
        FileClient::with_settings(FileClientSettings::default())
    }

    /// A client with its own pool settings.
    pub fn with_settings(settings: FileClientSettings) -> FileClient {
        FileClient {
            inner: Arc::new(Inner {
                settings: FileClientSettings {
                    max_sessions: settings.max_sessions.max(1),
                    ..settings
                },
                entries: Mutex::new(HashMap::new()),
                counters: Arc::new(Counters::default()),
            }),
        }
    }

    /// Counters since the client was created.
    pub fn stats(&self) -> FileClientStats {
        let c = &self.inner.counters;
        let open_sessions = lock(&self.inner.entries)
            .values()
            .filter(|e| e.conn.as_ref().is_some_and(Conn::is_alive))
            .count();
        FileClientStats {
            connections_opened: c.connections_opened.load(Ordering::Relaxed),
            requests_written: c.requests_written.load(Ordering::Relaxed),
            cancels_sent: c.cancels_sent.load(Ordering::Relaxed),
            stale_retries: c.stale_retries.load(Ordering::Relaxed),
            open_sessions,
        }
    }

    /// Reads `name` of `agent_id` (the native agent, `main` for occ's gateways) before
    /// `deadline`.
    pub async fn read(
        &self,
        endpoint: &Endpoint,
        agent_id: &str,
        name: &str,
        deadline: Instant,
    ) -> ReadOutcome {
        if let Err(reason) = check_target(agent_id, name) {
            return ReadOutcome::Unavailable(reason);
        }
        let params = json!({"agentId": agent_id, "name": name});
        match self
            .run(endpoint, "agents.files.get", params, deadline, Need::Read)
            .await
        {
            Ok(payload) => classify_read(&payload, name),
            Err(Failure::Refused { missing: true, .. }) => ReadOutcome::Missing,
            Err(
                Failure::Refused { error, .. } | Failure::NotSent(error) | Failure::NoAnswer(error),
            ) => ReadOutcome::Unavailable(error.to_string()),
        }
    }

    /// Writes `content` to `name` of `agent_id` before `deadline` (last writer wins).
    pub async fn write(
        &self,
        endpoint: &Endpoint,
        agent_id: &str,
        name: &str,
        content: &str,
        deadline: Instant,
    ) -> WriteOutcome {
        if let Err(reason) = check_target(agent_id, name) {
            return WriteOutcome::Unavailable(reason);
        }
        if let Err(why) = check_content(content) {
            return WriteOutcome::Unavailable(format!("invalid request: content {why}"));
        }
        let params = json!({"agentId": agent_id, "name": name, "content": content});
        match self
            .run(endpoint, "agents.files.set", params, deadline, Need::Write)
            .await
        {
            Ok(payload) => {
                if payload.pointer("/file/name").and_then(Value::as_str) == Some(name) {
                    WriteOutcome::Ok {
                        size: content.len() as u64,
                    }
                } else {
                    WriteOutcome::Unknown("the gateway answered without the written file".into())
                }
            }
            Err(Failure::Refused { missing: true, .. }) => WriteOutcome::Missing,
            Err(Failure::Refused { error, .. } | Failure::NotSent(error)) => {
                WriteOutcome::Unavailable(error.to_string())
            }
            Err(Failure::NoAnswer(error)) => WriteOutcome::Unknown(match error {
                GatewayError::Timeout => {
                    "the request was sent but the gateway did not answer before the deadline".into()
                }
                other => format!("the request was sent, then: {other}"),
            }),
        }
    }

    /// One request through a pooled connection, retried once on a fresh connection when the
    /// pooled one is found closed before the request was written.
    async fn run(
        &self,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        deadline: Instant,
        need: Need,
    ) -> Result<Value, Failure> {
        let key = PoolKey::of(endpoint);
        let mut retried = false;
        loop {
            let (conn, reused) = self
                .checkout(&key, endpoint, deadline)
                .await
                .map_err(Failure::NotSent)?;
            if let Err(err) = check_grant(conn.hello(), need) {
                // A later connection may be granted more (the gateway's policy changed).
                self.discard(&key, &conn);
                return Err(Failure::NotSent(err));
            }
            match conn.call(method, params.clone(), deadline).await {
                Ok(payload) => return Ok(payload),
                Err(CallFailure::Refused { error, missing }) => {
                    return Err(Failure::Refused { error, missing });
                }
                Err(CallFailure::NoAnswer(error)) => return Err(Failure::NoAnswer(error)),
                Err(CallFailure::NotSent(error)) => {
                    let stale = matches!(error, GatewayError::Unreachable(_));
                    self.discard(&key, &conn);
                    if reused && stale && !retried && Instant::now() < deadline {
                        retried = true;
                        self.inner
                            .counters
                            .stale_retries
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(url = %endpoint.url, error = %error, "pooled gateway connection was closed; reconnecting");
                        continue;
                    }
                    return Err(Failure::NotSent(error));
                }
            }
        }
    }

    /// A live pooled connection for `key` (`reused == true`), or a new one.
    async fn checkout(
        &self,
        key: &PoolKey,
        endpoint: &Endpoint,
        deadline: Instant,
    ) -> Result<(Conn, bool), GatewayError> {
        let connecting = {
            let mut entries = lock(&self.inner.entries);
            let entry = entries.entry(key.clone()).or_default();
            match &entry.conn {
                Some(conn) if conn.is_alive() => return Ok((conn.clone(), true)),
                Some(_) => entry.conn = None,
                None => {}
            }
            entry.connecting.clone()
        };
        let _connecting = tokio::time::timeout_at(deadline, connecting.lock_owned())
            .await
            .map_err(|_| GatewayError::Timeout)?;
        // Someone else may have connected while this operation waited.
        if let Some(conn) = lock(&self.inner.entries)
            .get(key)
            .and_then(|e| e.conn.as_ref())
            .filter(|c| c.is_alive())
        {
            return Ok((conn.clone(), true));
        }
        let options = ConnOptions {
            idle_timeout: Some(self.inner.settings.idle_timeout),
            counters: Some(self.inner.counters.clone()),
            events: None,
        };
        let (conn, _hello) = Conn::open(endpoint, deadline, options).await?;
        self.inner
            .counters
            .connections_opened
            .fetch_add(1, Ordering::Relaxed);
        let to_close = self.admit(key, &conn);
        for old in to_close {
            old.close_now();
        }
        Ok((conn, false))
    }

    /// Puts a new connection into the pool; returns the connections to close: those of the
    /// same URL with another credential (rotation) and, at capacity, the least recently used
    /// idle one. When every pooled connection is busy the new one is not pooled (it closes
    /// when its operation drops it).
    fn admit(&self, key: &PoolKey, conn: &Conn) -> Vec<Conn> {
        let mut to_close = Vec::new();
        let mut entries = lock(&self.inner.entries);
        for (k, e) in entries.iter_mut() {
            let rotated = k.url == key.url && k.credential != key.credential;
            let dead = e.conn.as_ref().is_some_and(|c| !c.is_alive());
            if (rotated || dead)
                && let Some(old) = e.conn.take()
            {
                to_close.push(old);
            }
        }
        // Forget entries nobody is connecting for.
        entries.retain(|k, e| k == key || e.conn.is_some() || Arc::strong_count(&e.connecting) > 1);
        let live = entries.values().filter(|e| e.conn.is_some()).count();
        if live >= self.inner.settings.max_sessions {
            let victim = entries
                .iter()
                .filter(|(k, _)| *k != key)
                .filter_map(|(k, e)| e.conn.as_ref().map(|c| (k, c)))
                .filter(|(_, c)| c.in_flight() == 0)
                .min_by_key(|(_, c)| c.last_used())
                .map(|(k, _)| k.clone());
            match victim.and_then(|k| entries.get_mut(&k).and_then(|e| e.conn.take())) {
                Some(old) => to_close.push(old),
                None => {
                    tracing::debug!(url = %key.url, "gateway connection pool full of busy connections; not pooling");
                    return to_close;
                }
            }
        }
        entries.entry(key.clone()).or_default().conn = Some(conn.clone());
        to_close
    }

    /// Removes `conn` from the pool (if it is the pooled one for `key`) and closes it.
    fn discard(&self, key: &PoolKey, conn: &Conn) {
        let removed = {
            let mut entries = lock(&self.inner.entries);
            match entries.get_mut(key) {
                Some(e) if e.conn.as_ref().is_some_and(|c| c.same(conn)) => e.conn.take(),
                _ => None,
            }
        };
        if let Some(old) = removed {
            old.close_now();
        }
    }

    #[cfg(test)]
    pub(crate) fn pooled(&self, endpoint: &Endpoint) -> Option<Conn> {
        lock(&self.inner.entries)
            .get(&PoolKey::of(endpoint))
            .and_then(|e| e.conn.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(scopes: &[&str]) -> Hello {
        Hello {
            protocol: 4,
            server_version: "2026.9.6".into(),
            role: "operator".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            auth_method: "token".into(),
        }
    }

    #[test]
    fn grants() {
        let admin = hello(&["operator.admin"]);
        let read = hello(&["operator.read"]);
        let none = hello(&[]);
        assert!(check_grant(&admin, Need::Read).is_ok());
        assert!(check_grant(&admin, Need::Write).is_ok());
        assert!(check_grant(&read, Need::Read).is_ok());
        assert!(matches!(
            check_grant(&read, Need::Write),
            Err(GatewayError::MissingScope(_))
        ));
        assert!(check_grant(&none, Need::Read).is_err());
        assert!(check_grant(&none, Need::Write).is_err());
        let other = hello(&["operator.write", "operator.approvals"]);
        assert!(check_grant(&other, Need::Read).is_err());
    }

    #[test]
    fn targets_and_content() {
        for name in WORKSPACE_FILE_NAMES {
            assert!(check_target("main", name).is_ok());
        }
        for name in ["BOOTSTRAP.md", "MEMORY.md", "agents.md", "../AGENTS.md", ""] {
            assert!(check_target("main", name).is_err(), "{name}");
        }
        assert!(check_target("", "AGENTS.md").is_err());
        assert!(check_target("a\nb", "AGENTS.md").is_err());
        assert!(check_target(&"a".repeat(257), "AGENTS.md").is_err());
        assert!(check_content(&"é".repeat(MAX_FILE_BYTES / 2)).is_ok());
        assert!(check_content(&"é".repeat(MAX_FILE_BYTES / 2 + 1)).is_err());
        assert!(check_content("a\0b").is_err());
        assert!(check_content("").is_ok());
    }

    #[test]
    fn read_answers_are_classified() {
        let file = |name: &str, content: &str| {
            json!({"agentId":"main","workspace":"/w","file":{"name":name,"path":"/w/x",
                "missing":false,"size":content.len(),"hash":content_hash(content),"content":content}})
        };
        assert_eq!(
            classify_read(&file("USER.md", "hé"), "USER.md"),
            ReadOutcome::Ok(WorkspaceFile {
                name: "USER.md".into(),
                content: "hé".into(),
                hash: content_hash("hé"),
                size: 3,
            })
        );
        assert_eq!(
            classify_read(
                &json!({"file":{"name":"USER.md","path":"/w/USER.md","missing":true}}),
                "USER.md"
            ),
            ReadOutcome::Missing
        );
        assert_eq!(
            classify_read(&json!({"missing":true}), "USER.md"),
            ReadOutcome::Missing
        );
        let invalid = |outcome: ReadOutcome| matches!(&outcome, ReadOutcome::Unavailable(r) if r.starts_with("invalid content from the gateway"));
        assert!(invalid(classify_read(&file("SOUL.md", "x"), "USER.md")));
        let too_long = "x".repeat(MAX_FILE_BYTES + 1);
        let outcome = classify_read(&file("USER.md", &too_long), "USER.md");
        assert!(invalid(outcome.clone()));
        assert!(
            !format!("{outcome:?}").contains("xxxx"),
            "no content in reasons"
        );
        assert!(invalid(classify_read(&file("USER.md", "a\0b"), "USER.md")));
        let mut wrong_hash = file("USER.md", "abc");
        wrong_hash["file"]["hash"] = json!(content_hash("abd"));
        assert!(invalid(classify_read(&wrong_hash, "USER.md")));
        let mut no_content = file("USER.md", "abc");
        no_content["file"]
            .as_object_mut()
            .expect("object")
            .remove("content");
        assert!(invalid(classify_read(&no_content, "USER.md")));
        assert!(invalid(classify_read(&json!({"ok":true}), "USER.md")));
        // an older gateway without hashes: computed
        let mut no_hash = file("USER.md", "abc");
        no_hash["file"]
            .as_object_mut()
            .expect("object")
            .remove("hash");
        assert!(
            matches!(classify_read(&no_hash, "USER.md"), ReadOutcome::Ok(f) if f.hash == content_hash("abc"))
        );
    }

    #[test]
    fn pool_keys_separate_credentials() {
        let a = PoolKey::of(&Endpoint::new("ws://127.0.0.1:1", "one"));
        let b = PoolKey::of(&Endpoint::new("ws://127.0.0.1:1", "two"));
        let c = PoolKey::of(&Endpoint::edge("ws://127.0.0.1:1", "x-api-key", "one"));
        let d = PoolKey::of(&Endpoint::edge("ws://127.0.0.1:1", "X-Api-Key", "one"));
        assert!(a != b && a != c && b != c);
        assert!(c == d);
        assert!(a == PoolKey::of(&Endpoint::new("ws://127.0.0.1:1", "one")));
    }
}
