//! A local ChatGPT workspace Admin API for tests: a real HTTP server on 127.0.0.1 answering the
//! calls occ's ChatGPT ServiceAccount Driver makes — create and delete service accounts under
//! `/v1/manage/workspaces/{workspace}/service-accounts`, issue and revoke their credentials —
//! for one workspace and one admin key. It keeps the accounts and credentials it made, so a
//! test can prove what occ created and removed, and records every request (method, path,
//! `Authorization`, JSON body). It can be told to refuse the next calls (HTTP 500) or to answer
//! a credential for the wrong workspace, the shapes occ must refuse and clean up after.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The workspace the fake serves.
pub const WORKSPACE_ID: &str = "7d0a9c1e-3b5f-4e21-9a8c-2f6b4d1e0c3a";
/// The admin key it accepts.
pub const ADMIN_KEY: &str = "chatgpt-admin-key-for-tests";

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct AdminRequest {
    /// `POST`, `DELETE`.
    pub method: &'static str,
    /// The path.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The JSON body (`Null` without one).
    pub body: Value,
}

/// What the fake misbehaves with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Answers normally.
    #[default]
    None,
    /// Every call fails with HTTP 500.
    Unavailable,
    /// Credentials are issued, but the reply names another workspace.
    WrongWorkspace,
}

#[derive(Default)]
struct Shared {
    requests: Vec<AdminRequest>,
    /// account id → its live credential ids.
    accounts: BTreeMap<String, Vec<String>>,
    /// credential id → token.
    tokens: BTreeMap<String, String>,
    next: u64,
    fault: Fault,
}

/// The running fake. Stops when dropped.
pub struct FakeChatgpt {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeChatgpt {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeChatgpt {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> FakeChatgpt {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind fake ChatGPT");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let accounts = "/v1/manage/workspaces/{ws}/service-accounts";
        let app = axum::Router::new()
            .route(accounts, post(create_account))
            .route(&format!("{accounts}/{{account}}"), delete(delete_account))
            .route(
                &format!("{accounts}/{{account}}/credentials"),
                post(create_credential),
            )
            .route(
                &format!("{accounts}/{{account}}/credentials/{{credential}}"),
                delete(delete_credential),
            )
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeChatgpt {
            addr,
            shared,
            server,
        }
    }

    /// `http://127.0.0.1:<port>/v1`, the Backend's `apiBaseUrl`.
    pub fn api_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<AdminRequest> {
        self.shared.lock().expect("lock").requests.clone()
    }

    /// The live accounts and their live credential ids.
    pub fn accounts(&self) -> BTreeMap<String, Vec<String>> {
        self.shared.lock().expect("lock").accounts.clone()
    }

    /// The token of a live credential.
    pub fn token(&self, credential: &str) -> Option<String> {
        self.shared
            .lock()
            .expect("lock")
            .tokens
            .get(credential)
            .cloned()
    }

    /// Every token issued and still live.
    pub fn live_tokens(&self) -> Vec<String> {
        self.shared
            .lock()
            .expect("lock")
            .tokens
            .values()
            .cloned()
            .collect()
    }

    /// Makes the next calls misbehave.
    pub fn set_fault(&self, fault: Fault) {
        self.shared.lock().expect("lock").fault = fault;
    }
}

/// An OpenAI-style error answer.
struct AdminError(StatusCode, &'static str);

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        (
            self.0,
            Json(json!({"error": {"code": self.1, "message": self.1}})),
        )
            .into_response()
    }
}

type Reply = Result<Response, AdminError>;

/// Records the call and checks the workspace and the admin key.
fn admit(
    shared: &Arc<Mutex<Shared>>,
    method: &'static str,
    path: String,
    ws: &str,
    headers: &HeaderMap,
    body: Value,
) -> Result<Fault, AdminError> {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut s = shared.lock().expect("lock");
    let authorized = authorization.as_deref() == Some(&format!("Bearer {ADMIN_KEY}"));
    s.requests.push(AdminRequest {
        method,
        path,
        authorization,
        body,
    });
    if !authorized {
        return Err(error(StatusCode::UNAUTHORIZED, "invalid_api_key"));
    }
    if ws != WORKSPACE_ID {
        return Err(error(StatusCode::NOT_FOUND, "workspace_not_found"));
    }
    if s.fault == Fault::Unavailable {
        return Err(error(StatusCode::INTERNAL_SERVER_ERROR, "server_error"));
    }
    Ok(s.fault)
}

fn error(status: StatusCode, code: &'static str) -> AdminError {
    AdminError(status, code)
}

fn next_id(s: &mut Shared, prefix: &str) -> String {
    s.next += 1;
    format!("{prefix}-{:04}", s.next)
}

async fn create_account(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path(ws): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Reply {
    let path = format!("/v1/manage/workspaces/{ws}/service-accounts");
    admit(&shared, "POST", path, &ws, &headers, body.clone())?;
    let Some(name) = body.get("name").and_then(Value::as_str) else {
        return Err(error(StatusCode::BAD_REQUEST, "invalid_request"));
    };
    let mut s = shared.lock().expect("lock");
    let id = next_id(&mut s, "svcacct");
    s.accounts.insert(id.clone(), Vec::new());
    Ok(Json(json!({"id": id, "name": name, "workspace_id": ws, "enabled": true})).into_response())
}

async fn delete_account(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((ws, account)): Path<(String, String)>,
    headers: HeaderMap,
) -> Reply {
    let path = format!("/v1/manage/workspaces/{ws}/service-accounts/{account}");
    admit(&shared, "DELETE", path, &ws, &headers, Value::Null)?;
    let mut s = shared.lock().expect("lock");
    let Some(credentials) = s.accounts.remove(&account) else {
        return Err(error(StatusCode::NOT_FOUND, "service_account_not_found"));
    };
    for c in credentials {
        s.tokens.remove(&c);
    }
    Ok(Json(json!({"id": account, "deleted": true})).into_response())
}

async fn create_credential(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((ws, account)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Reply {
    let path = format!("/v1/manage/workspaces/{ws}/service-accounts/{account}/credentials");
    let fault = admit(&shared, "POST", path, &ws, &headers, body.clone())?;
    let mut s = shared.lock().expect("lock");
    if !s.accounts.contains_key(&account) {
        return Err(error(StatusCode::NOT_FOUND, "service_account_not_found"));
    }
    let id = next_id(&mut s, "cred");
    let token = format!("chatgpt-sa-token-{id}-{}", s.next * 7919);
    s.accounts
        .get_mut(&account)
        .expect("account")
        .push(id.clone());
    s.tokens.insert(id.clone(), token.clone());
    let workspace = match fault {
        Fault::WrongWorkspace => "00000000-0000-4000-8000-000000000000".to_owned(),
        _ => ws,
    };
    let ttl = body.get("ttl").and_then(Value::as_i64).unwrap_or(0);
    Ok(Json(json!({
        "id": id,
        "access_token": token,
        "workspace_id": workspace,
        "service_account_id": account,
        "scopes": body.get("scopes").cloned().unwrap_or(Value::Null),
        "expires_at": 1_900_000_000 + ttl,
    }))
    .into_response())
}

async fn delete_credential(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((ws, account, credential)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Reply {
    let path =
        format!("/v1/manage/workspaces/{ws}/service-accounts/{account}/credentials/{credential}");
    admit(&shared, "DELETE", path, &ws, &headers, Value::Null)?;
    let mut s = shared.lock().expect("lock");
    let Some(credentials) = s.accounts.get_mut(&account) else {
        return Err(error(StatusCode::NOT_FOUND, "service_account_not_found"));
    };
    let before = credentials.len();
    credentials.retain(|c| *c != credential);
    if credentials.len() == before {
        return Err(error(StatusCode::NOT_FOUND, "credential_not_found"));
    }
    s.tokens.remove(&credential);
    Ok(Json(json!({"id": credential, "deleted": true})).into_response())
}

/// occ's real ChatGPT ServiceAccount Driver pointed at `fake`, as Backend `backend_id` with a
/// one-hour credential lifetime.
pub fn accounts_driver(
    fake: &FakeChatgpt,
    backend_id: &str,
) -> Arc<dyn occ_drivers::service_account::AccountDriver> {
    use occ_drivers::service_account::{ChatgptAccounts, ChatgptSettings};
    Arc::new(
        ChatgptAccounts::new(ChatgptSettings {
            backend_id: backend_id.into(),
            workspace_id: WORKSPACE_ID.into(),
            admin_key: occ_core::compute::SecretText::new(ADMIN_KEY.into()),
            credential_ttl_seconds: 3600,
            api_base: fake.api_base(),
        })
        .expect("ChatGPT settings"),
    )
}

/// A native document for a dedicated Agent (Codex model, app-server placeholders).
pub fn dedicated_document() -> Value {
    json!({
        "agents": {"defaults": {"model": "codex/gpt-5.6-sol",
            "models": {"codex/gpt-5.6-sol": {"agentRuntime": {"id": "codex"}}}}},
        "models": {"providers": {"codex": {"baseUrl": "http://127.0.0.1:9",
            "api": "openai-responses", "models": [{"id": "gpt-5.6-sol", "name": "gpt-5.6-sol"}]}}},
        "plugins": {"entries": {"codex": {"config": {"appServer": {"mode": "guardian",
            "transport": "websocket", "url": "${APP_SERVER_URL}", "authToken": "${APP_SERVER_TOKEN}"}}}}}
    })
}
