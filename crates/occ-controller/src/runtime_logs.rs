//! Runtime logs (`GET …/agents/{agt}/deployments/{rev}/runtime/logs`): one bounded page of a
//! revision's gateway output, classified, redacted and paged with a signed cursor.
//!
//! Order of a read: authorize (Agent `read_logs`, `administer` standing in; a denial is
//! audited), resolve the revision within the exact Agent, refuse a source the revision does not
//! have, verify the cursor (bound to caller, Agent, revision and source), spend a token of the
//! caller's rate limit, and — for a new view or a download — append the `access` audit event
//! before anything is read (no audit, no output). Then the Compute Driver reads raw lines; every
//! line is classified and redacted here, so no Driver can leak what it did not redact. Nothing is
//! stored.
//!
//! Redaction removes the exact values the revision was handed (its bound Secrets, the harness
//! credential) and credentials by pattern (bearer tokens, provider keys, JWTs, PEM blocks across
//! lines: the open-block state rides in the cursor so a block split over two pages stays
//! masked). The gateway token never reaches the output as a value occ can name here: the
//! token-shaped patterns catch it where it is printed as a credential.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac as _};
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::compute::{
    LOG_TAIL_MAX_LINES, LogChunk, LogEntry, LogGap, LogPosition, LogQuery, LogWorkload, SecretText,
};
use occ_core::error::DetailCode;
use occ_core::redact::{LineRedactor, Redactor};
use occ_core::resource::{AgentRevision, ExecutionMode, HarnessAuth};
use occ_core::{AgentId, Error, ErrorCode, NamespaceId, ReasonCode, RevisionId, SecretId};
use occ_drivers::DriverError;
use occ_drivers::compute::ComputeError;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::authorization::{audit_in_own_transaction, found};
use crate::worker::revision_target;
use crate::{Controller, Request};

/// Audit action of a new view (and of its denial).
pub const VIEW_AUDIT: &str = "openclaw.agents.runtime_logs.view";
/// Audit action of a download (and of its denial).
pub const DOWNLOAD_AUDIT: &str = "openclaw.agents.runtime_logs.download";

/// Lines of a page when the caller names no `tailLines` (and always for a download).
const DEFAULT_TAIL: usize = 1000;
/// Longest message of a record, in bytes; a longer one is cut and marked.
const MESSAGE_MAX: usize = 8192;
/// Longest subsystem of a record, in bytes.
const SUBSYSTEM_MAX: usize = 512;
/// A cursor older than this starts a new (audited) view.
const CURSOR_LIFETIME_SECS: i64 = 3600;
/// Reads a caller may make in a burst, and how fast the burst refills.
const RATE_BURST: f64 = 30.0;
const RATE_PER_SEC: f64 = 2.0;
/// A page's whole deadline (Driver read included).
const READ_DEADLINE: Duration = Duration::from_secs(10);

/// Where the output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    /// The OpenClaw gateway.
    Gateway,
    /// A dedicated Harness (none for an embedded Agent).
    Agent,
    /// The Harness Sandbox (none without a Sandbox Driver).
    Sandbox,
}

impl LogSource {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Agent => "agent",
            Self::Sandbox => "sandbox",
        }
    }
}

/// A record's severity (`Unknown` for text that says none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Most severe.
    Error,
    /// Warnings.
    Warn,
    /// Information.
    Info,
    /// Debug and trace.
    Debug,
    /// Not stated.
    Unknown,
}

/// What the caller asked for (already validated by the API's query patterns).
#[derive(Debug, Clone, Default)]
pub struct LogRequest {
    /// The source; `None` is refused (the API requires it).
    pub source: Option<LogSource>,
    /// A Pod name (Kubernetes only).
    pub pod: Option<String>,
    /// The previous container instance.
    pub previous: bool,
    /// Lines of a new view (1–1000).
    pub tail_lines: Option<usize>,
    /// Only lines at most this old (by their own time; untimed lines stay).
    pub since_seconds: Option<u64>,
    /// Lines below this level are left out of the page (gaps and unknown-level lines stay).
    pub min_level: Option<LogLevel>,
    /// A cursor of an earlier page of the same view.
    pub cursor: Option<String>,
    /// A download: the same records as text, always a new view.
    pub download: bool,
}

/// The stream a record came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogStream {
    /// The source.
    pub source: LogSource,
}

/// One record of a page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LogRecord {
    /// A line of output.
    Line {
        /// When the line says it was written (`None` for text without a time).
        time: Option<String>,
        /// Where it came from.
        stream: LogStream,
        /// Always `operational`: occ returns no conversation content.
        #[serde(rename = "contentClass")]
        content_class: &'static str,
        /// `openclaw` (its structured log) or `text`.
        kind: &'static str,
        /// Severity.
        level: LogLevel,
        /// The redacted message.
        message: String,
        /// OpenClaw's subsystem, when it names one.
        #[serde(skip_serializing_if = "Option::is_none")]
        subsystem: Option<String>,
        /// Present (true) when the message was cut.
        #[serde(skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
    },
    /// Output is missing here.
    Gap {
        /// When the gap was noticed.
        time: Option<String>,
        /// Where.
        stream: LogStream,
        /// `stream_replaced`, `window_exceeded`, `cursor_expired`, `buffer_lost`.
        reason: &'static str,
        /// What the reader can do.
        remedy: &'static str,
    },
}

/// One page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    /// The revision (`deploymentId`).
    pub revision_id: RevisionId,
    /// The source read.
    pub source: LogSource,
    /// The stream read (`None` when the workload has no output yet).
    pub stream: Option<LogStream>,
    /// When the page was read (canonical milliseconds).
    pub observed_at: String,
    /// Lines and gaps, oldest first.
    pub records: Vec<LogRecord>,
    /// Lines left out (none are withheld by content today).
    pub withheld: u64,
    /// The read stopped at its byte bound: poll again at once for more.
    pub truncated: bool,
    /// Resumes after this page (`None` when there is nothing to resume).
    pub cursor: Option<String>,
}

impl LogPage {
    /// The records as download text: one line each (`time level [subsystem] message`, gaps as
    /// `-- gap: reason --`).
    pub fn download_text(&self) -> String {
        let mut out = String::new();
        for record in &self.records {
            match record {
                LogRecord::Line {
                    time,
                    level,
                    message,
                    subsystem,
                    ..
                } => {
                    let level = serde_json::to_value(level)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    out.push_str(time.as_deref().unwrap_or("-"));
                    out.push(' ');
                    out.push_str(&level);
                    if let Some(subsystem) = subsystem {
                        out.push_str(&format!(" [{subsystem}]"));
                    }
                    out.push(' ');
                    out.push_str(message);
                }
                LogRecord::Gap { reason, .. } => out.push_str(&format!("-- gap: {reason} --")),
            }
            out.push('\n');
        }
        out
    }
}

/// A per-caller token bucket (replica-local: each API process limits on its own).
#[derive(Debug, Default)]
pub struct LogRateLimiter {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl LogRateLimiter {
    /// Spends a token of `caller`, or says how many seconds until one is back.
    fn spend(&self, caller: &str) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        let now = Instant::now();
        if buckets.len() > 10_000 {
            // Idle callers' buckets are full again: forgetting them changes nothing.
            buckets.retain(|_, (tokens, at)| {
                *tokens + at.elapsed().as_secs_f64() * RATE_PER_SEC < RATE_BURST
            });
        }
        let (tokens, at) = buckets
            .entry(caller.to_owned())
            .or_insert((RATE_BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * RATE_PER_SEC).min(RATE_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / RATE_PER_SEC).ceil().max(1.0) as u64)
        }
    }
}

/// What a cursor carries (signed; opaque to callers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorClaims {
    /// Caller (principal id).
    p: String,
    /// Agent.
    a: String,
    /// Revision.
    r: String,
    /// Source.
    s: LogSource,
    /// Where the next read resumes.
    at: LogPosition,
    /// A PEM block was open at the end of the page.
    pem: bool,
    /// When the view started (unix seconds).
    t: i64,
}

type HmacSha256 = Hmac<Sha256>;

/// `v1.<payload>.<signature>`, both base64url without padding.
fn sign_cursor(key: &[u8], claims: &CursorClaims) -> String {
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
    let signature = URL_SAFE_NO_PAD.encode(cursor_mac(key, &payload));
    format!("v1.{payload}.{signature}")
}

fn cursor_mac(key: &[u8], payload: &str) -> Vec<u8> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(b"occ runtime logs cursor v1\0");
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The claims of a cursor this installation signed, or `None` (altered, foreign, malformed).
fn verify_cursor(key: &[u8], cursor: &str) -> Option<CursorClaims> {
    let rest = cursor.strip_prefix("v1.")?;
    let (payload, signature) = rest.split_once('.')?;
    let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).ok()?;
    mac.update(b"occ runtime logs cursor v1\0");
    mac.update(payload.as_bytes());
    mac.verify_slice(&signature).ok()?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

fn cursor_invalid() -> Error {
    Error::new(
        ErrorCode::RuntimeLogsCursorInvalid,
        "The runtime log cursor is invalid for this caller and view. Start a new view.",
    )
    .with_detail("/query/cursor", DetailCode::InvalidValue)
}

fn source_unavailable() -> Error {
    Error::new(
        ErrorCode::RuntimeLogsSourceUnavailable,
        "This Agent version has no such runtime log source.",
    )
    .with_detail("/query/source", DetailCode::InvalidValue)
}

fn pod_invalid() -> Error {
    Error::new(
        ErrorCode::RuntimeLogsPodInvalid,
        "The Pod is not a current Pod of this Agent version and source.",
    )
    .with_detail("/query/pod", DetailCode::InvalidValue)
}

/// A Driver failure as the caller sees it: fixed messages, never the Driver's text.
fn read_failure(e: ComputeError) -> Error {
    let error = match e.code {
        ReasonCode::RuntimeLogsClusterRbac => Error::new(
            ErrorCode::RuntimeLogsClusterRbac,
            "The cluster denied the runtime log read. Ask a platform operator to grant occ pods/log.",
        ),
        ReasonCode::RuntimeLogsSourceUnavailable => return source_unavailable(),
        _ => Error::new(
            ErrorCode::RuntimeLogsUnavailable,
            "The runtime cannot be reached for its logs. Try again shortly.",
        ),
    };
    error.with_internal(e.to_string())
}

impl Controller {
    /// One page of a revision's runtime output (see the module documentation).
    pub async fn runtime_logs(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent_id: &AgentId,
        revision_id: &RevisionId,
        ask: &LogRequest,
    ) -> Result<LogPage, Error> {
        tokio::time::timeout(
            READ_DEADLINE,
            self.runtime_logs_now(req, ns, agent_id, revision_id, ask),
        )
        .await
        .map_err(|_| {
            Error::new(
                ErrorCode::RuntimeLogsTimeout,
                "The runtime log read did not finish in time. Try again or read fewer lines.",
            )
        })?
    }

    async fn runtime_logs_now(
        &self,
        req: &Request,
        ns: &NamespaceId,
        agent_id: &AgentId,
        revision_id: &RevisionId,
        ask: &LogRequest,
    ) -> Result<LogPage, Error> {
        let audit_action = if ask.download {
            DOWNLOAD_AUDIT
        } else {
            VIEW_AUDIT
        };
        let target = ResourceRef::exact(ResourceKind::Agent, ns, agent_id);
        let (mut tx, _) = self
            .read_authorized_either(
                req,
                [Action::ReadLogs, Action::Administer],
                &target,
                audit_action,
            )
            .await?;
        let agent = found(tx.agent_get(ns, agent_id).await?)?;
        let revision = found(tx.revision_get(ns, agent_id, revision_id).await?)?;
        let secrets = handed_secret_metas(&mut tx, ns, &revision).await?;
        drop(tx);
        let Some(compute) = &self.runtime else {
            return Err(Error::new(
                ErrorCode::NotImplemented,
                "The Compute Driver does not expose runtime logs here",
            ));
        };
        let source = ask.source.unwrap_or(LogSource::Gateway);
        let workload = match (source, revision.spec.harness.mode) {
            (LogSource::Gateway, _) => LogWorkload::Gateway,
            // A dedicated revision's Codex harness; an embedded Agent runs in its gateway.
            (LogSource::Agent, ExecutionMode::Dedicated) => LogWorkload::Harness,
            // No Sandbox Driver.
            _ => return Err(source_unavailable()),
        };
        if ask.pod.is_some() {
            // occ reads the revision's newest Pod (on the hosts its one gateway): no other Pod is
            // a current Pod of the revision's source.
            return Err(pod_invalid());
        }
        let now = chrono_now();
        let resumed = match (&ask.cursor, ask.download) {
            (Some(_), true) => return Err(cursor_invalid()),
            (Some(cursor), false) => {
                let claims = verify_cursor(&self.settings.auth_secret, cursor)
                    .filter(|c| {
                        c.p == req.caller.principal_id.as_str()
                            && c.a == agent_id.as_str()
                            && c.r == revision_id.as_str()
                            && c.s == source
                    })
                    .ok_or_else(cursor_invalid)?;
                Some(claims)
            }
            (None, _) => None,
        };
        let expired = resumed
            .as_ref()
            .is_some_and(|c| now.0 - c.t > CURSOR_LIFETIME_SECS);
        let resumed = resumed.filter(|_| !expired);
        if let Err(wait) = self
            .runtime_log_limiter
            .spend(req.caller.principal_id.as_str())
        {
            return Err(Error::new(
                ErrorCode::RuntimeLogsRateLimited,
                "Too many runtime log requests. Wait for Retry-After and try again.",
            )
            .with_retry_after(wait));
        }
        if resumed.is_none() {
            let event = self
                .event(
                    req,
                    AuditKind::Access,
                    audit_action,
                    &target,
                    AuditOutcome::Success,
                )
                .detail("revisionId", revision_id.as_str())
                .detail("source", source.as_str());
            audit_in_own_transaction(&self.store, &event)
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorCode::RuntimeLogsAuditUnavailable,
                        "The view could not be audited, so no output was read. Try again.",
                    )
                    .with_internal(e.to_string())
                })?;
        }
        let redactor = Redactor::new(
            self.handed_values(ns, agent_id, revision_id, &secrets)
                .await?,
        );
        let tail = if ask.download {
            DEFAULT_TAIL
        } else {
            ask.tail_lines.unwrap_or(DEFAULT_TAIL)
        }
        .clamp(1, LOG_TAIL_MAX_LINES);
        let query = LogQuery {
            workload,
            after: resumed.as_ref().map(|c| c.at.clone()),
            tail_lines: tail,
            previous: ask.previous,
        };
        let chunk = compute
            .read_logs(&revision_target(&agent, &revision), &query)
            .await
            .map_err(read_failure)?;
        let mut stream = redactor.stream_resumed(resumed.as_ref().is_some_and(|c| c.pem));
        let observed = now.1.clone();
        let mut records = Vec::new();
        if expired {
            records.push(gap(LogGap::WindowExceeded, &observed, source));
            if let Some(LogRecord::Gap { reason, remedy, .. }) = records.last_mut() {
                *reason = "cursor_expired";
                *remedy = "The cursor was more than an hour old; this page starts a new view.";
            }
        }
        records.extend(classify_chunk(&chunk, &mut stream, &observed, source));
        let since_cutoff = ask
            .since_seconds
            .map(|s| occ_core::Timestamp::now().unix_millis() - (s as i64) * 1000);
        records.retain(|r| keep(r, ask.min_level, since_cutoff));
        let cursor = chunk.position.as_ref().map(|at| {
            sign_cursor(
                &self.settings.auth_secret,
                &CursorClaims {
                    p: req.caller.principal_id.to_string(),
                    a: agent_id.to_string(),
                    r: revision_id.to_string(),
                    s: source,
                    at: at.clone(),
                    pem: stream.inside_key_block(),
                    t: resumed.as_ref().map_or(now.0, |c| c.t),
                },
            )
        });
        Ok(LogPage {
            revision_id: revision_id.clone(),
            source,
            stream: chunk.position.as_ref().map(|_| LogStream { source }),
            observed_at: observed,
            records,
            withheld: 0,
            truncated: chunk.truncated,
            cursor: if ask.download { None } else { cursor },
        })
    }

    /// The exact values the revision's workloads hold: what the worker recorded handing them
    /// (so a Secret rotated or deleted since stays redacted), and the current values of the
    /// Secrets the revision binds (a value a rotation is about to hand them), read through the
    /// Secret Driver. Anything that cannot be read now refuses the page (fail closed).
    pub(crate) async fn handed_values(
        &self,
        ns: &NamespaceId,
        agent: &AgentId,
        revision: &RevisionId,
        secrets: &[occ_core::resource::SecretMeta],
    ) -> Result<Vec<String>, Error> {
        let mut values = self
            .secrets
            .handed(ns, agent, revision)
            .await
            .map_err(|e| {
                Error::new(
                    ErrorCode::RuntimeLogsUnavailable,
                    "Runtime logs are unavailable. Try again shortly.",
                )
                .with_internal(format!("handed values: {e}"))
            })?;
        for meta in secrets {
            let value = self
                .secrets
                .with_value(ns, &meta.id, &meta.locator, |v| {
                    SecretText::new(v.to_owned())
                })
                .await;
            match value {
                Ok(v) => values.push(v.expose().to_owned()),
                // A deleted Secret's value can no longer be named; patterns still apply.
                Err(DriverError::NotFound) => {}
                Err(e) => {
                    // Without the values redaction is incomplete: read nothing.
                    return Err(Error::new(
                        ErrorCode::RuntimeLogsUnavailable,
                        "Runtime logs are unavailable. Try again shortly.",
                    )
                    .with_internal(format!("secret driver: {e}")));
                }
            }
        }
        Ok(values)
    }
}

/// The metadata of the Secrets whose values a revision hands its runtime (a deleted one is
/// skipped: its value can no longer be named).
pub(crate) async fn handed_secret_metas(
    tx: &mut occ_store::Tx,
    ns: &NamespaceId,
    revision: &AgentRevision,
) -> Result<Vec<occ_core::resource::SecretMeta>, Error> {
    let mut secrets = Vec::new();
    for id in handed_secrets(revision) {
        if let Some(meta) = tx.secret_get(ns, &id).await? {
            secrets.push(meta);
        }
    }
    Ok(secrets)
}

/// The Secrets whose values a revision hands its runtime.
fn handed_secrets(rev: &AgentRevision) -> Vec<SecretId> {
    let mut ids: Vec<SecretId> = rev
        .spec
        .secret_bindings
        .iter()
        .flat_map(|b| b.values().map(|binding| binding.source.id.clone()))
        .collect();
    if let Some(source) = rev
        .spec
        .harness_auth
        .as_ref()
        .and_then(HarnessAuth::secret_source)
    {
        ids.push(source.id.clone());
    }
    ids
}

/// Now as unix seconds and canonical text.
fn chrono_now() -> (i64, String) {
    let now = occ_core::Timestamp::now();
    (now.unix_millis() / 1000, now.to_canonical())
}

fn gap(reason: LogGap, observed: &str, source: LogSource) -> LogRecord {
    let (reason, remedy) = match reason {
        LogGap::StreamReplaced => (
            "stream_replaced",
            "The log was replaced (a new instance or a recreated file); reading starts over.",
        ),
        LogGap::WindowExceeded => (
            "window_exceeded",
            "More output was written and rotated away than is kept; lines are missing here.",
        ),
        LogGap::BufferLost => (
            "buffer_lost",
            "The log rotated; lines written while it was copied may be missing.",
        ),
    };
    LogRecord::Gap {
        time: Some(observed.to_owned()),
        stream: LogStream { source },
        reason,
        remedy,
    }
}

/// The records of a chunk: lines classified and redacted in order, gaps as they came.
fn classify_chunk(
    chunk: &LogChunk,
    redactor: &mut LineRedactor<'_>,
    observed: &str,
    source: LogSource,
) -> Vec<LogRecord> {
    chunk
        .entries
        .iter()
        .map(|entry| match entry {
            LogEntry::Gap(g) => gap(*g, observed, source),
            LogEntry::Line(line) => classify_line(line, redactor, source),
        })
        .collect()
}

/// One line: OpenClaw's structured log (JSON with `_meta`) gives level, time, subsystem and
/// message; anything else is text of unknown level. The message is redacted; the rest of a
/// structured line (its argument objects) is dropped.
fn classify_line(line: &str, redactor: &mut LineRedactor<'_>, source: LogSource) -> LogRecord {
    let structured = line
        .trim_start()
        .starts_with('{')
        .then(|| serde_json::from_str::<serde_json::Value>(line).ok())
        .flatten()
        .filter(|v| v.get("_meta").is_some_and(serde_json::Value::is_object));
    let (kind, level, time, subsystem, message) = match &structured {
        Some(v) => {
            let meta = &v["_meta"];
            let level = match meta["logLevelName"]
                .as_str()
                .unwrap_or("")
                .to_ascii_lowercase()
                .as_str()
            {
                "fatal" | "error" => LogLevel::Error,
                "warn" => LogLevel::Warn,
                "info" => LogLevel::Info,
                "debug" | "trace" | "silly" => LogLevel::Debug,
                _ => LogLevel::Unknown,
            };
            let time = v["time"]
                .as_str()
                .or(meta["date"].as_str())
                .and_then(canonical_time);
            let subsystem = meta["name"]
                .as_str()
                .and_then(|n| serde_json::from_str::<serde_json::Value>(n).ok())
                .and_then(|n| n["subsystem"].as_str().map(str::to_owned));
            let message = v["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| line.to_owned());
            ("openclaw", level, time, subsystem, message)
        }
        None => ("text", LogLevel::Unknown, None, None, line.to_owned()),
    };
    let mut message = redactor.next_line(&message);
    let truncated = cut(&mut message, MESSAGE_MAX);
    let subsystem = subsystem.map(|s| {
        let mut s = redactor_free_line(&s);
        cut(&mut s, SUBSYSTEM_MAX);
        s
    });
    LogRecord::Line {
        time,
        stream: LogStream { source },
        content_class: "operational",
        kind,
        level,
        message,
        subsystem,
        truncated: truncated.then_some(true),
    }
}

/// A subsystem name keeps only characters a name has (it is never a place for a secret).
fn redactor_free_line(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "/-_.:".contains(*c))
        .collect()
}

/// Cuts `s` to at most `max` bytes at a character boundary; whether it cut.
fn cut(s: &mut String, max: usize) -> bool {
    if s.len() <= max {
        return false;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    true
}

/// An RFC 3339 time as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
fn canonical_time(text: &str) -> Option<String> {
    occ_core::Timestamp::parse_rfc3339(text).map(|t| t.to_canonical())
}

/// Whether a record stays on the page under the level and age filters.
fn keep(record: &LogRecord, min_level: Option<LogLevel>, since_millis: Option<i64>) -> bool {
    let LogRecord::Line { level, time, .. } = record else {
        return true;
    };
    if let (Some(min), true) = (min_level, *level != LogLevel::Unknown)
        && *level > min
    {
        return false;
    }
    if let (Some(cutoff), Some(time)) = (since_millis, time)
        && let Some(t) = occ_core::Timestamp::parse_rfc3339(time)
        && t.unix_millis() < cutoff
    {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn claims() -> CursorClaims {
        CursorClaims {
            p: "usr_1".into(),
            a: "agt_1".into(),
            r: "rev_1".into(),
            s: LogSource::Gateway,
            at: LogPosition {
                stream: "12".into(),
                generation: 0,
                offset: 40,
            },
            pem: false,
            t: 1,
        }
    }

    #[test]
    fn a_cursor_verifies_only_unaltered_and_with_the_same_key() {
        let cursor = sign_cursor(KEY, &claims());
        let re = regex_lite(&cursor);
        assert!(re, "cursor shape: {cursor}");
        assert_eq!(verify_cursor(KEY, &cursor), Some(claims()));
        assert_eq!(verify_cursor(b"another key", &cursor), None);
        let (head, signature) = cursor.rsplit_once('.').unwrap();
        let mut forged = claims();
        forged.p = "usr_2".into();
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            verify_cursor(KEY, &format!("v1.{forged_payload}.{signature}")),
            None
        );
        let mut flipped = signature.to_owned().into_bytes();
        flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            verify_cursor(
                KEY,
                &format!("{head}.{}", String::from_utf8(flipped).unwrap())
            ),
            None
        );
        assert_eq!(verify_cursor(KEY, "v2.abc.def"), None);
    }

    /// `^v1\.[A-Za-z0-9_-]{1,1900}\.[A-Za-z0-9_-]{43}$`
    fn regex_lite(cursor: &str) -> bool {
        let parts: Vec<&str> = cursor.split('.').collect();
        let b64 = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        parts.len() == 3
            && parts[0] == "v1"
            && (1..=1900).contains(&parts[1].len())
            && b64(parts[1])
            && parts[2].len() == 43
            && b64(parts[2])
    }

    fn line_of(record: &LogRecord) -> (&'static str, LogLevel, Option<String>, String) {
        match record {
            LogRecord::Line {
                kind,
                level,
                subsystem,
                message,
                ..
            } => (kind, *level, subsystem.clone(), message.clone()),
            LogRecord::Gap { .. } => panic!("a gap"),
        }
    }

    #[test]
    fn openclaw_structured_lines_are_classified_and_text_is_unknown() {
        let redactor = Redactor::new(Vec::<String>::new());
        let mut stream = redactor.stream();
        let json = r#"{"0":"{\"subsystem\":\"gateway\"}","1":"starting...","_meta":{"date":"2026-12-01T14:31:37.222Z","logLevelId":4,"logLevelName":"WARN","name":"{\"subsystem\":\"gateway\"}"},"time":"2026-12-01T14:31:37.222+00:00","message":"starting..."}"#;
        let record = classify_line(json, &mut stream, LogSource::Gateway);
        assert_eq!(
            line_of(&record),
            (
                "openclaw",
                LogLevel::Warn,
                Some("gateway".into()),
                "starting...".into()
            )
        );
        let LogRecord::Line { time, .. } = &record else {
            unreachable!()
        };
        assert_eq!(time.as_deref(), Some("2026-12-01T14:31:37.222Z"));
        let text = classify_line("plain output", &mut stream, LogSource::Gateway);
        assert_eq!(
            line_of(&text),
            ("text", LogLevel::Unknown, None, "plain output".into())
        );
        let long = "x".repeat(MESSAGE_MAX + 10);
        let LogRecord::Line {
            message, truncated, ..
        } = classify_line(&long, &mut stream, LogSource::Gateway)
        else {
            unreachable!()
        };
        assert_eq!(message.len(), MESSAGE_MAX);
        assert_eq!(truncated, Some(true));
    }

    #[test]
    fn min_level_keeps_more_severe_unknown_and_gaps() {
        let redactor = Redactor::new(Vec::<String>::new());
        let mut stream = redactor.stream();
        let mut at = |level: &str| {
            classify_line(
                &format!(r#"{{"_meta":{{"logLevelName":"{level}"}},"message":"m"}}"#),
                &mut stream,
                LogSource::Gateway,
            )
        };
        let error = at("ERROR");
        let debug = at("DEBUG");
        let text = LogRecord::Line {
            time: None,
            stream: LogStream {
                source: LogSource::Gateway,
            },
            content_class: "operational",
            kind: "text",
            level: LogLevel::Unknown,
            message: "t".into(),
            subsystem: None,
            truncated: None,
        };
        let gap = gap(LogGap::BufferLost, "x", LogSource::Gateway);
        assert!(keep(&error, Some(LogLevel::Info), None));
        assert!(!keep(&debug, Some(LogLevel::Info), None));
        assert!(keep(&text, Some(LogLevel::Error), None));
        assert!(keep(&gap, Some(LogLevel::Error), None));
    }

    #[test]
    fn canaries_never_come_back_even_across_pages() {
        let bound = "bound-secret-value-4242";
        let redactor = Redactor::new([bound]);
        let first = LogChunk {
            entries: vec![
                LogEntry::Line(format!("using {bound} now")),
                LogEntry::Line("key sk-live-abcdefghijklmnopqrstuvwx1234".into()),
                LogEntry::Line("Authorization: Bearer abc.def.ghi-token-value".into()),
                LogEntry::Line("-----BEGIN PRIVATE KEY-----".into()),
                LogEntry::Line("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC".into()),
            ],
            position: None,
            truncated: false,
        };
        let mut stream = redactor.stream();
        let page = classify_chunk(&first, &mut stream, "now", LogSource::Gateway);
        let open = stream.inside_key_block();
        assert!(open, "the PEM block is still open at the end of the page");
        // The next page resumes with the cursor's state.
        let second = LogChunk {
            entries: vec![
                LogEntry::Line("aW5zaWRlIHRoZSBrZXkgYm9keQ==".into()),
                LogEntry::Line("-----END PRIVATE KEY-----".into()),
                LogEntry::Line("after the key".into()),
            ],
            position: None,
            truncated: false,
        };
        let mut resumed = redactor.stream_resumed(open);
        let page2 = classify_chunk(&second, &mut resumed, "now", LogSource::Gateway);
        let text = serde_json::to_string(&[page, page2].concat()).unwrap();
        for canary in [
            bound,
            "sk-live-abcdefghijklmnopqrstuvwx1234",
            "abc.def.ghi-token-value",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "aW5zaWRlIHRoZSBrZXkgYm9keQ==",
        ] {
            assert!(!text.contains(canary), "{canary} leaked: {text}");
        }
        assert!(text.contains("after the key"));
    }

    #[test]
    fn the_limiter_refuses_a_burst_and_says_when_to_return() {
        let limiter = LogRateLimiter::default();
        for _ in 0..RATE_BURST as usize {
            assert!(limiter.spend("usr_a").is_ok());
        }
        let wait = limiter.spend("usr_a").unwrap_err();
        assert!(wait >= 1);
        assert!(
            limiter.spend("usr_b").is_ok(),
            "another caller has its own bucket"
        );
    }
}
