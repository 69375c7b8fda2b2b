//! The credential proxy: model keys that never enter an Agent's processes.
//!
//! For each model provider of an embedded revision whose key is a bound Secret
//! (`models.providers.<p>.apiKey` exactly `${VAR}`, `VAR` a Secret binding) and whose API the
//! proxy can serve (OpenAI-compatible: `Authorization: Bearer`; Anthropic: `x-api-key`), the
//! gateway's snapshot names a capability URL on this proxy as the provider's `baseUrl`, and `VAR`
//! holds a placeholder. The proxy, run by occ on the Compute host, forwards each request to the
//! admitted `baseUrl` only, with the real value put on the wire in place of whatever credential
//! the request carried, and streams the answer back. The frozen revision document is unchanged:
//! the substitution is the Driver's rendering.
//!
//! A capability is `sha256(token, revision, provider)` (the Agent's gateway token is a secret
//! only occ and the gateway hold), so a re-render is identical. Routes live in memory: every
//! activation — a deploy and each maintenance pass, which resolves the Secret values afresh —
//! registers the revision's current values, so a rotated Secret reaches the running gateway at
//! the next pass, and a stopped, retired or deleted revision's routes are withdrawn at once
//! (its capability answers 403 from then on). After occ restarts, a route is back at the first
//! maintenance pass; until then the provider's requests are refused, never sent without a key.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use occ_core::compute::{RevisionContext, RevisionTarget, SecretText};
use occ_core::{AgentId, RevisionId};
use serde_json::{Map, Value, json};
use sha2::Digest as _;

/// What a proxied provider's variable holds inside the gateway.
pub const PLACEHOLDER: &str = "occ-credential-proxy";

/// The route of a dedicated revision's harness key (Codex's OpenAI API key). No Configuration
/// provider is named so: the proxy serves only embedded revisions' providers, and a dedicated
/// revision has this one route.
pub const HARNESS_ROUTE: &str = "harness:codex";

/// OpenAI's API: where Codex sends its requests when occ's settings name no model endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Largest request body forwarded (a chat completion with a long history).
const REQUEST_LIMIT: usize = 32 << 20;

/// How the proxy puts a key on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (OpenAI-compatible APIs).
    Bearer,
    /// `x-api-key: <key>` (Anthropic's Messages API).
    XApiKey,
}

/// One provider of a revision that the proxy serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedProvider {
    /// `models.providers.<name>`.
    pub provider: String,
    /// The bound variable its `apiKey` names.
    pub variable: String,
    /// The admitted `baseUrl`: the only place its requests go.
    pub upstream: String,
    /// How the key is sent.
    pub header: KeyHeader,
}

/// The providers of `config` the proxy serves: a `baseUrl` over http(s), an API it knows, and an
/// `apiKey` that is exactly one of the `bound` variables.
pub fn proxied_providers(
    config: &Map<String, Value>,
    bound: &BTreeSet<String>,
) -> Vec<ProxiedProvider> {
    let Some(providers) = config
        .get("models")
        .and_then(|m| m.get("providers"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, provider) in providers {
        let header = match provider.get("api").and_then(Value::as_str) {
            Some("openai-completions" | "openai-responses") => KeyHeader::Bearer,
            Some("anthropic-messages") => KeyHeader::XApiKey,
            _ => continue,
        };
        let Some(upstream) = provider
            .get("baseUrl")
            .and_then(Value::as_str)
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        else {
            continue;
        };
        let Some(variable) = provider
            .get("apiKey")
            .and_then(Value::as_str)
            .and_then(|k| k.strip_prefix("${"))
            .and_then(|k| k.strip_suffix('}'))
            .filter(|v| bound.contains(*v))
        else {
            continue;
        };
        out.push(ProxiedProvider {
            provider: name.clone(),
            variable: variable.to_owned(),
            upstream: upstream.trim_end_matches('/').to_owned(),
            header,
        });
    }
    out
}

/// The variables that may hold the placeholder: those every use of which in `config` is a
/// proxied provider's `apiKey` (a variable also used elsewhere keeps its value).
pub fn placeholder_variables(
    config: &Map<String, Value>,
    proxied: &[ProxiedProvider],
) -> BTreeSet<String> {
    if proxied.is_empty() {
        return BTreeSet::new();
    }
    let text = Value::Object(config.clone()).to_string();
    proxied
        .iter()
        .map(|p| p.variable.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|variable| {
            let uses = text.matches(&format!("${{{variable}}}")).count();
            uses == proxied.iter().filter(|p| &p.variable == variable).count()
        })
        .collect()
}

/// The bound variable names of a revision.
pub fn bound_variables(rev: &RevisionTarget) -> BTreeSet<String> {
    rev.spec
        .secret_bindings
        .as_ref()
        .map(|b| b.keys().cloned().collect())
        .unwrap_or_default()
}

/// The capability of one provider of one revision of the Agent whose gateway token is `token`.
pub fn capability(token: &str, revision: &RevisionId, provider: &str) -> String {
    let mut hash = sha2::Sha256::new();
    for part in ["occ-credential-proxy", token, revision.as_str(), provider] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// Points each proxied provider of `doc` at its capability URL under `base_url`.
pub fn point_at_proxy(
    doc: &mut Map<String, Value>,
    proxied: &[ProxiedProvider],
    base_url: &str,
    token: &str,
    revision: &RevisionId,
) {
    let Some(providers) = doc
        .get_mut("models")
        .and_then(|m| m.get_mut("providers"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for p in proxied {
        if let Some(provider) = providers
            .get_mut(&p.provider)
            .and_then(Value::as_object_mut)
        {
            let cap = capability(token, revision, &p.provider);
            provider.insert("baseUrl".into(), json!(format!("{base_url}/{cap}")));
        }
    }
}

/// Whether `url` is a capability URL of a credential proxy (`http://127.0.0.1:<port>/<64 hex>`).
pub fn is_capability_url(url: &str) -> bool {
    url.strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(port, cap)| {
            port.parse::<u16>().is_ok()
                && cap.len() == 64
                && cap.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

#[derive(Clone)]
struct Route {
    upstream: String,
    header: KeyHeader,
    secret: SecretText,
    revision_id: RevisionId,
    agent_id: AgentId,
}

struct Inner {
    routes: RwLock<HashMap<String, Route>>,
    http: reqwest::Client,
}

/// The running proxy (stops when the last handle is dropped).
#[derive(Clone)]
pub struct CredentialProxy {
    inner: Arc<Inner>,
    base_url: String,
    _server: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for CredentialProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialProxy")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl CredentialProxy {
    /// Listens on `127.0.0.1:port` (0: any free port). Needs a tokio runtime.
    pub fn start(port: u16) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let addr: SocketAddr = listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        // Providers are reached over TLS with the process's provider (ring, as occ installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            // Upstream redirects would leave the admitted baseUrl.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(std::io::Error::other)?;
        let inner = Arc::new(Inner {
            routes: RwLock::new(HashMap::new()),
            http,
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the credential proxy stopped");
            }
        });
        Ok(Self {
            inner,
            base_url: format!("http://{addr}"),
            _server: Arc::new(AbortOnDrop(server.abort_handle())),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Serves `rev`'s proxied providers with the values in `ctx` (replacing what an earlier
    /// activation registered for it). A provider whose variable has no value gets no route.
    pub fn register(
        &self,
        rev: &RevisionTarget,
        token: &str,
        ctx: &RevisionContext,
        proxied: &[ProxiedProvider],
    ) {
        let mut routes = self.inner.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|_, r| r.revision_id != rev.revision_id);
        for p in proxied {
            let Some(secret) = ctx.environment.get(&p.variable) else {
                continue;
            };
            routes.insert(
                capability(token, &rev.revision_id, &p.provider),
                Route {
                    upstream: p.upstream.clone(),
                    header: p.header,
                    secret: secret.clone(),
                    revision_id: rev.revision_id.clone(),
                    agent_id: rev.agent.agent_id.clone(),
                },
            );
        }
    }

    /// Serves dedicated `rev`'s harness key towards `upstream` (replacing what an earlier
    /// activation registered for the revision) and returns the capability URL Codex is pointed
    /// at in place of `upstream`.
    pub fn register_harness(
        &self,
        rev: &RevisionTarget,
        token: &str,
        upstream: &str,
        key: &SecretText,
    ) -> String {
        let cap = capability(token, &rev.revision_id, HARNESS_ROUTE);
        let mut routes = self.inner.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|_, r| r.revision_id != rev.revision_id);
        routes.insert(
            cap.clone(),
            Route {
                upstream: upstream.trim_end_matches('/').to_owned(),
                header: KeyHeader::Bearer,
                secret: key.clone(),
                revision_id: rev.revision_id.clone(),
                agent_id: rev.agent.agent_id.clone(),
            },
        );
        format!("{}/{cap}", self.base_url)
    }

    /// Withdraws every route of revision `rev`.
    pub fn withdraw_revision(&self, rev: &RevisionId) {
        let mut routes = self.inner.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|_, r| &r.revision_id != rev);
    }

    /// Withdraws every route of the Agent.
    pub fn withdraw_agent(&self, agent: &AgentId) {
        let mut routes = self.inner.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|_, r| &r.agent_id != agent);
    }

    /// How many routes it serves (for tests and metrics).
    pub fn route_count(&self) -> usize {
        self.inner
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// An OpenAI-style error, which both kinds of clients show.
fn refusal(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"error": {"message": message, "type": "credential_proxy",
                                    "code": "credential_unavailable"}}),
        ),
    )
        .into_response()
}

/// Request headers never forwarded: the caller's credentials (the proxy sets the key),
/// hop-by-hop headers and what the client recomputes.
fn forwarded(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "authorization"
            | "x-api-key"
            | "api-key"
            | "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

async fn forward(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let (cap, rest) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or((path.trim_start_matches('/'), ""));
    let route = inner
        .routes
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(cap)
        .cloned();
    let Some(route) = route else {
        return refusal(
            StatusCode::FORBIDDEN,
            "this credential is not available to the Agent (withdrawn, or not yet registered since occ started)",
        );
    };
    if rest
        .split('/')
        .any(|segment| segment == ".." || segment == ".")
    {
        return refusal(
            StatusCode::BAD_REQUEST,
            "the path leaves the provider's baseUrl",
        );
    }
    let mut url = format!("{}/{rest}", route.upstream);
    if let Some(query) = parts.uri.query() {
        url.push('?');
        url.push_str(query);
    }
    let Ok(bytes) = axum::body::to_bytes(body, REQUEST_LIMIT).await else {
        return refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is too large",
        );
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if forwarded(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let key = route.secret.expose();
    let (name, value) = match route.header {
        KeyHeader::Bearer => (header::AUTHORIZATION, format!("Bearer {key}")),
        KeyHeader::XApiKey => (HeaderName::from_static("x-api-key"), key.to_owned()),
    };
    let Ok(mut value) = HeaderValue::from_str(&value) else {
        return refusal(
            StatusCode::BAD_GATEWAY,
            "the bound credential is not a header value",
        );
    };
    value.set_sensitive(true);
    headers.insert(name, value);
    let upstream = inner
        .http
        .request(parts.method.clone(), &url)
        .headers(headers)
        .body(bytes)
        .send()
        .await;
    let upstream = match upstream {
        Ok(response) => response,
        Err(e) => {
            // reqwest's error names the URL, never a header.
            tracing::info!(error = %e, "the credential proxy could not reach the provider");
            return refusal(StatusCode::BAD_GATEWAY, "the provider could not be reached");
        }
    };
    let mut response = Response::builder().status(upstream.status());
    for (name, value) in upstream.headers() {
        if forwarded(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| {
            refusal(
                StatusCode::BAD_GATEWAY,
                "the provider's answer was malformed",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Map<String, Value> {
        json!({
            "models": {"providers": {
                "fake": {"baseUrl": "http://127.0.0.1:9/v1/", "api": "openai-completions",
                         "apiKey": "${FAKE_KEY}"},
                "claude": {"baseUrl": "https://api.anthropic.com", "api": "anthropic-messages",
                           "apiKey": "${ANTHROPIC}"},
                "literal": {"baseUrl": "https://x.example/v1", "api": "openai-completions",
                            "apiKey": "sk-literal"},
                "unbound": {"baseUrl": "https://x.example/v1", "api": "openai-completions",
                            "apiKey": "${NOT_BOUND}"},
                "other-api": {"baseUrl": "https://x.example/v1", "api": "google-generative-ai",
                              "apiKey": "${FAKE_KEY}"},
                "shared": {"baseUrl": "https://y.example/v1", "api": "openai-responses",
                           "apiKey": "${SHARED}"},
            }},
            "channels": {"slack": {"botToken": "${SHARED}"}},
        })
        .as_object()
        .cloned()
        .expect("object")
    }

    #[test]
    fn only_bound_keys_of_apis_it_can_serve_are_proxied() {
        let bound: BTreeSet<String> = ["FAKE_KEY", "ANTHROPIC", "SHARED"]
            .map(str::to_owned)
            .into();
        let proxied = proxied_providers(&config(), &bound);
        let names: Vec<(&str, &str, KeyHeader)> = proxied
            .iter()
            .map(|p| (p.provider.as_str(), p.upstream.as_str(), p.header))
            .collect();
        assert_eq!(
            names,
            vec![
                ("claude", "https://api.anthropic.com", KeyHeader::XApiKey),
                ("fake", "http://127.0.0.1:9/v1", KeyHeader::Bearer),
                ("shared", "https://y.example/v1", KeyHeader::Bearer),
            ]
        );
        // FAKE_KEY is also the key of a provider the proxy cannot serve, SHARED a channel's
        // token: both keep their values; only ANTHROPIC becomes the placeholder.
        assert_eq!(
            placeholder_variables(&config(), &proxied),
            BTreeSet::from(["ANTHROPIC".to_owned()])
        );
    }

    #[test]
    fn capabilities_are_stable_and_distinct() {
        let rev: RevisionId = RevisionId::generate();
        let a = capability("token", &rev, "fake");
        assert_eq!(a, capability("token", &rev, "fake"));
        assert_ne!(a, capability("token", &rev, "claude"));
        assert_ne!(a, capability("other", &rev, "fake"));
        assert_ne!(a, capability("token", &RevisionId::generate(), "fake"));
        let mut doc = config();
        let bound: BTreeSet<String> = ["FAKE_KEY".to_owned()].into();
        let proxied = proxied_providers(&doc, &bound);
        point_at_proxy(&mut doc, &proxied, "http://127.0.0.1:28999", "token", &rev);
        let url = doc["models"]["providers"]["fake"]["baseUrl"]
            .as_str()
            .expect("url");
        assert_eq!(url, format!("http://127.0.0.1:28999/{a}"));
        assert!(is_capability_url(url));
        assert!(!is_capability_url("http://127.0.0.1:9/v1"));
        assert_eq!(
            doc["models"]["providers"]["literal"]["baseUrl"],
            "https://x.example/v1"
        );
    }
}
