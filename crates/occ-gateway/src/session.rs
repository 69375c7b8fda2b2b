//! One connection to a gateway as a sequential API: handshake, requests, `agents.files.*`.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::conn::{Conn, ConnOptions};
use crate::endpoint::Endpoint;
use crate::error::GatewayError;
use crate::handshake::{Hello, REQUIRED_SCOPES, require_scopes};
use crate::workspace_file::{WorkspaceFile, content_hash};

/// One authenticated connection to a gateway.
///
/// Requests are sequential (`&mut self`). The connection is driven by its own task, which
/// answers the gateway's pings and notices a closed connection even between calls. A call that
/// times out after its request was written is followed by a `cancel` frame, and its late
/// response (recognised by its id) is skipped. Once the connection has failed, every later call
/// fails with the same error; dropping the session closes the connection.
pub struct Session {
    conn: Conn,
    url: String,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("url", &self.url)
            .field("broken", &self.conn.dead())
            .finish_non_exhaustive()
    }
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Session {
    /// One attempt: opens the WebSocket, waits for `connect.challenge`, sends `connect` and
    /// requires `hello-ok` with protocol 4, role `operator` and both [`REQUIRED_SCOPES`]
    /// granted. The whole handshake is bounded by `timeout`.
    pub async fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<(Session, Hello), GatewayError> {
        let deadline = Instant::now() + timeout;
        let (conn, hello) = Conn::open(endpoint, deadline, ConnOptions::default()).await?;
        if let Err(err) = require_scopes(&hello, &REQUIRED_SCOPES) {
            conn.close_now();
            return Err(err);
        }
        Ok((
            Session {
                conn,
                url: endpoint.url.clone(),
            },
            hello,
        ))
    }

    /// The URL this session is connected to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one request and waits for its response (matched by id) until `timeout`; events
    /// and responses to other ids are skipped. Returns the `payload` (`null` when absent).
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, GatewayError> {
        self.conn
            .call(method, params, Instant::now() + timeout)
            .await
            .map_err(|failure| failure.into_error())
    }

    /// `agents.files.get`: the file, or `None` when the gateway reports it `missing`.
    pub async fn file_get(
        &mut self,
        agent_id: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<WorkspaceFile>, GatewayError> {
        let payload = self
            .call(
                "agents.files.get",
                json!({"agentId": agent_id, "name": name}),
                timeout,
            )
            .await?;
        let file = payload_file(&payload, "agents.files.get")?;
        if file.get("missing").and_then(Value::as_bool) == Some(true) {
            return Ok(None);
        }
        let content = file
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| GatewayError::Protocol("agents.files.get: file without content".into()))?
            .to_owned();
        workspace_file(file, name, content, "agents.files.get").map(Some)
    }

    /// `agents.files.set`: writes `content`; with `expected_hash`, only if the file's current
    /// hash matches ([`GatewayError::Conflict`] otherwise).
    pub async fn file_set(
        &mut self,
        agent_id: &str,
        name: &str,
        content: &str,
        expected_hash: Option<&str>,
        timeout: Duration,
    ) -> Result<WorkspaceFile, GatewayError> {
        let mut params = Map::new();
        params.insert("agentId".into(), agent_id.into());
        params.insert("name".into(), name.into());
        params.insert("content".into(), content.into());
        if let Some(hash) = expected_hash {
            if !is_hex64(hash) {
                return Err(GatewayError::InvalidRequest(
                    "expectedHash must be 64 hex characters".into(),
                ));
            }
            params.insert("expectedHash".into(), hash.to_ascii_lowercase().into());
        }
        let payload = self
            .call("agents.files.set", Value::Object(params), timeout)
            .await?;
        let file = payload_file(&payload, "agents.files.set")?;
        let echoed = file
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or(content)
            .to_owned();
        workspace_file(file, name, echoed, "agents.files.set")
    }

    /// Closes the connection politely (close frame, bounded wait for the gateway's answer).
    pub async fn close(self) {
        self.conn.close().await;
    }
}

fn payload_file<'a>(payload: &'a Value, method: &str) -> Result<&'a Value, GatewayError> {
    payload
        .get("file")
        .filter(|f| f.is_object())
        .ok_or_else(|| GatewayError::Protocol(format!("{method}: payload without a file object")))
}

fn workspace_file(
    file: &Value,
    requested: &str,
    content: String,
    method: &str,
) -> Result<WorkspaceFile, GatewayError> {
    let hash = match file.get("hash").and_then(Value::as_str) {
        Some(h) if is_hex64(h) => h.to_ascii_lowercase(),
        Some(_) => {
            return Err(GatewayError::Protocol(format!(
                "{method}: hash is not 64 hex characters"
            )));
        }
        // Gateways before 2026.9 do not report hashes.
        None => content_hash(&content),
    };
    let size = file
        .get("size")
        .and_then(Value::as_u64)
        .unwrap_or(content.len() as u64);
    let name = file
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_owned();
    Ok(WorkspaceFile {
        name,
        content,
        hash,
        size,
    })
}
