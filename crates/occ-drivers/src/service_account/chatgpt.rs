//! ChatGPT's workspace Admin API as a ServiceAccount Driver: accounts under
//! `/manage/workspaces/{workspace}/service-accounts`, credentials scoped to Codex local access
//! with a bounded lifetime. Every reply is checked against what was asked (workspace, account,
//! scope); a reply that names something occ made but is otherwise wrong has that thing removed
//! again, so nothing unaccounted for stays live upstream.

use std::time::Duration;

use async_trait::async_trait;
use occ_core::compute::SecretText;
use serde_json::{Value, json};

use super::{AccountDriver, AccountDriverError, IssuedToken};

/// The scope a Codex harness needs.
pub const CODEX_LOCAL_ACCESS_SCOPE: &str =
    "chatgpt.workspace.feature.allow-codex-local-access.access";
/// The longest credential lifetime the API grants (30 days), also the default.
pub const MAX_CREDENTIAL_TTL_SECONDS: u64 = 30 * 24 * 60 * 60;
/// The public API.
pub const DEFAULT_API_BASE: &str = "https://api.chatgpt.com/v1";
/// Bound on one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a reply body.
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// What the Backend is configured with.
#[derive(Clone)]
pub struct ChatgptSettings {
    /// The Backend id (`backends[].id`).
    pub backend_id: String,
    /// The ChatGPT workspace (a UUID).
    pub workspace_id: String,
    /// The workspace admin key.
    pub admin_key: SecretText,
    /// Lifetime of issued credentials, 1 s … 30 days.
    pub credential_ttl_seconds: u64,
    /// The API base (`https://api.chatgpt.com/v1`; tests point it at a local server).
    pub api_base: String,
}

impl std::fmt::Debug for ChatgptSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatgptSettings")
            .field("backend_id", &self.backend_id)
            .field("workspace_id", &self.workspace_id)
            .field("credential_ttl_seconds", &self.credential_ttl_seconds)
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

/// Whether `s` is a UUID in its canonical text form (any version).
pub fn is_workspace_id(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The ChatGPT Admin API client.
pub struct ChatgptAccounts {
    settings: ChatgptSettings,
    http: reqwest::Client,
}

impl ChatgptAccounts {
    /// A client; refuses settings the API would refuse.
    pub fn new(settings: ChatgptSettings) -> Result<Self, String> {
        if !is_workspace_id(&settings.workspace_id) {
            return Err("workspaceId must be a UUID".into());
        }
        let key = settings.admin_key.expose();
        if key.is_empty() || key.trim() != key || key.contains(['\r', '\n']) {
            return Err("the admin key must be one line without surrounding whitespace".into());
        }
        if !(1..=MAX_CREDENTIAL_TTL_SECONDS).contains(&settings.credential_ttl_seconds) {
            return Err("credentialTtlSeconds must be between 1 and 2592000 (30 days)".into());
        }
        if !(settings.api_base.starts_with("https://") || settings.api_base.starts_with("http://"))
        {
            return Err("apiBaseUrl must be an http(s) URL".into());
        }
        let http = crate::http_client(CALL_TIMEOUT)?;
        Ok(Self { settings, http })
    }

    fn accounts_path(&self) -> String {
        format!(
            "{}/manage/workspaces/{}/service-accounts",
            self.settings.api_base.trim_end_matches('/'),
            self.settings.workspace_id
        )
    }

    fn account_path(&self, account_id: &str) -> Result<String, AccountDriverError> {
        Ok(format!("{}/{}", self.accounts_path(), segment(account_id)?))
    }

    /// One call. `absent_codes`: on a DELETE, a 404 with one of these error codes means the
    /// thing is already gone.
    async fn call(
        &self,
        method: reqwest::Method,
        url: String,
        body: Option<Value>,
        absent_codes: &[&str],
    ) -> Result<Value, AccountDriverError> {
        let what = format!("ChatGPT Admin API {method}");
        let mut request = self
            .http
            .request(method.clone(), url)
            .bearer_auth(self.settings.admin_key.expose())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|_| AccountDriverError(format!("{what} request was unavailable")))?;
        let status = response.status();
        let body = read_body(response).await;
        if status.is_success() {
            return body
                .ok_or_else(|| AccountDriverError(format!("{what} returned an invalid response")));
        }
        let code = body
            .as_ref()
            .and_then(|b| b.get("error"))
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str);
        if method == reqwest::Method::DELETE
            && status == reqwest::StatusCode::NOT_FOUND
            && code.is_some_and(|c| absent_codes.contains(&c))
        {
            return Ok(json!({"deleted": true, "absent": true}));
        }
        Err(AccountDriverError(format!(
            "{what} request failed with HTTP {}",
            status.as_u16()
        )))
    }
}

/// A path segment (ids are opaque provider strings).
fn segment(id: &str) -> Result<String, AccountDriverError> {
    if id.is_empty() || id.trim() != id {
        return Err(AccountDriverError(
            "the ChatGPT account identity is invalid".into(),
        ));
    }
    Ok(id
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect())
}

async fn read_body(response: reqwest::Response) -> Option<Value> {
    if response
        .content_length()
        .is_some_and(|n| n as usize > MAX_RESPONSE_BYTES)
    {
        return None;
    }
    let bytes = response.bytes().await.ok()?;
    if bytes.len() > MAX_RESPONSE_BYTES {
        return None;
    }
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(Value::is_object)
}

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.trim() == *s)
}

#[async_trait]
impl AccountDriver for ChatgptAccounts {
    fn backend_id(&self) -> &str {
        &self.settings.backend_id
    }

    fn workspace_id(&self) -> &str {
        &self.settings.workspace_id
    }

    async fn create_account(&self, name: &str) -> Result<String, AccountDriverError> {
        let reply = self
            .call(
                reqwest::Method::POST,
                self.accounts_path(),
                Some(json!({"name": name})),
                &[],
            )
            .await?;
        let id = text(&reply, "id");
        let ours = text(&reply, "workspace_id") == Some(self.settings.workspace_id.as_str());
        match (id, ours, reply.get("enabled") == Some(&Value::Bool(true))) {
            (Some(id), true, true) => Ok(id.to_owned()),
            // It applied and names an account of this workspace: that one is this request's.
            (Some(id), true, false) => {
                self.delete_account(id).await.map_err(|_| {
                    AccountDriverError(
                        "ChatGPT returned an invalid service account that could not be removed"
                            .into(),
                    )
                })?;
                Err(AccountDriverError(
                    "ChatGPT returned an invalid service account".into(),
                ))
            }
            _ => Err(AccountDriverError(
                "ChatGPT returned an invalid service account".into(),
            )),
        }
    }

    async fn delete_account(&self, account_id: &str) -> Result<(), AccountDriverError> {
        let reply = self
            .call(
                reqwest::Method::DELETE,
                self.account_path(account_id)?,
                None,
                &["service_account_not_found"],
            )
            .await?;
        let confirmed = reply.get("absent").is_some()
            || (text(&reply, "id") == Some(account_id)
                && reply.get("deleted") == Some(&Value::Bool(true)));
        confirmed.then_some(()).ok_or_else(|| {
            AccountDriverError("ChatGPT did not confirm service-account deletion".into())
        })
    }

    async fn issue_credential(
        &self,
        account_id: &str,
        name: &str,
    ) -> Result<IssuedToken, AccountDriverError> {
        let reply = self
            .call(
                reqwest::Method::POST,
                format!("{}/credentials", self.account_path(account_id)?),
                Some(json!({
                    "name": name,
                    "ttl": self.settings.credential_ttl_seconds,
                    "scopes": [CODEX_LOCAL_ACCESS_SCOPE],
                })),
                &[],
            )
            .await?;
        let id = text(&reply, "id");
        let ours = text(&reply, "workspace_id") == Some(self.settings.workspace_id.as_str())
            && text(&reply, "service_account_id") == Some(account_id);
        let scoped = reply.get("scopes") == Some(&json!([CODEX_LOCAL_ACCESS_SCOPE]));
        let expires = reply.get("expires_at").is_some_and(Value::is_i64);
        match (id, text(&reply, "access_token")) {
            (Some(id), Some(token)) if ours && scoped && expires => Ok(IssuedToken {
                id: id.to_owned(),
                access_token: SecretText::new(token.to_owned()),
            }),
            // A credential of this account stays live until revoked: revoke this one.
            (Some(id), _) if ours => {
                self.delete_credential(account_id, id).await.map_err(|_| {
                    AccountDriverError(
                        "ChatGPT returned an invalid credential that could not be revoked".into(),
                    )
                })?;
                Err(AccountDriverError(
                    "ChatGPT returned an invalid credential".into(),
                ))
            }
            _ => Err(AccountDriverError(
                "ChatGPT returned an invalid credential".into(),
            )),
        }
    }

    async fn delete_credential(
        &self,
        account_id: &str,
        credential_id: &str,
    ) -> Result<(), AccountDriverError> {
        let reply = self
            .call(
                reqwest::Method::DELETE,
                format!(
                    "{}/credentials/{}",
                    self.account_path(account_id)?,
                    segment(credential_id)?
                ),
                None,
                &["credential_not_found", "service_account_not_found"],
            )
            .await?;
        let confirmed = reply.get("absent").is_some()
            || (text(&reply, "id") == Some(credential_id)
                && reply.get("deleted") == Some(&Value::Bool(true)));
        confirmed
            .then_some(())
            .ok_or_else(|| AccountDriverError("ChatGPT did not confirm credential deletion".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_ids_are_canonical_uuids() {
        assert!(is_workspace_id("11111111-2222-4333-8444-555555555555"));
        assert!(!is_workspace_id("11111111-2222-4333-8444-55555555555"));
        assert!(!is_workspace_id("workspace"));
        assert!(!is_workspace_id("11111111222243338444555555555555"));
    }

    #[test]
    fn ids_are_escaped_as_one_segment() {
        assert_eq!(segment("sa_1").unwrap(), "sa_1");
        assert_eq!(segment("a/b?c").unwrap(), "a%2Fb%3Fc");
        assert!(segment("").is_err());
        assert!(segment(" x").is_err());
    }

    #[test]
    fn settings_the_api_would_refuse_are_refused() {
        let good = ChatgptSettings {
            backend_id: "chatgpt".into(),
            workspace_id: "11111111-2222-4333-8444-555555555555".into(),
            admin_key: SecretText::new("admin-key".into()),
            credential_ttl_seconds: 3600,
            api_base: "http://127.0.0.1:9/v1".into(),
        };
        assert!(ChatgptAccounts::new(good.clone()).is_ok());
        let mut bad = good.clone();
        bad.credential_ttl_seconds = MAX_CREDENTIAL_TTL_SECONDS + 1;
        assert!(ChatgptAccounts::new(bad).is_err());
        let mut bad = good.clone();
        bad.admin_key = SecretText::new("key\n".into());
        assert!(ChatgptAccounts::new(bad).is_err());
        let mut bad = good;
        bad.workspace_id = "nope".into();
        assert!(ChatgptAccounts::new(bad).is_err());
    }
}
