//! A fake Kubernetes API server, in process, spoken to over real HTTP by the real `kube` client.
//!
//! It implements the slice of the API the Kubernetes Drivers use, for any resource path
//! (`/api/v1/...` and `/apis/<group>/<version>/...`, cluster-scoped `namespaces` or namespaced
//! plurals such as `configmaps`, `secrets`, `serviceaccounts`, `roles`, `rolebindings`,
//! `deployments`, `services`, `networkpolicies`, `persistentvolumeclaims`):
//!
//! - get, list (equality/existence label selectors), create (`generateName`), replace, merge and
//!   apply patches, delete with `uid`/`resourceVersion` preconditions;
//! - one global, monotonically increasing `resourceVersion`; a stale replace and a create of an
//!   existing name are `409` (reasons `Conflict` and `AlreadyExists`), a missing object `404`,
//!   creating in a missing Namespace `404`, in a terminating one `403`, changing an immutable
//!   ConfigMap or Secret `422`; every error is a `metav1.Status` body, so the client sees
//!   `kube::Error::Api` exactly as it would from a real API server;
//! - Secrets' `stringData` folded into base64 `data`, Namespaces born `Active`;
//! - test controls: deny a verb on a resource (`403`, to simulate missing RBAC), inject N
//!   failures (`500`/`429`) optionally matching a verb and resource, add latency, hold Namespace
//!   deletion in `Terminating`, seed or mutate stored objects behind the client's back, and read a
//!   log of every request.
//!
//! It does not implement watches, field managers, admission or garbage collection.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One request as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// Kubernetes verb: get, list, create, update, patch, delete.
    pub verb: String,
    /// Plural resource, e.g. `configmaps`.
    pub resource: String,
    /// Namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// Object name, empty for collection requests.
    pub name: String,
    /// Query string, as sent.
    pub query: String,
    /// Content type of the body, if any.
    pub content_type: String,
    /// The parsed body, if any.
    pub body: Option<Value>,
    /// The status code returned.
    pub status: u16,
}

/// An injected failure.
#[derive(Debug, Clone)]
struct Fault {
    status: u16,
    remaining: usize,
    verb: Option<String>,
    resource: Option<String>,
}

#[derive(Default)]
struct FakeState {
    resource_version: u64,
    /// (resource, namespace, name) → object.
    objects: BTreeMap<(String, String, String), Value>,
    denied: HashSet<(String, String)>,
    faults: Vec<Fault>,
    latency: Duration,
    hold_namespace_deletion: bool,
    log: Vec<LoggedRequest>,
}

impl FakeState {
    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn take_fault(&mut self, verb: &str, resource: &str) -> Option<u16> {
        let fault = self.faults.iter_mut().find(|f| {
            f.remaining > 0
                && f.verb.as_deref().is_none_or(|v| v == verb)
                && f.resource.as_deref().is_none_or(|r| r == resource)
        })?;
        fault.remaining -= 1;
        Some(fault.status)
    }
}

/// A running fake API server. Dropping it stops the server.
pub struct FakeKube {
    url: String,
    state: Arc<Mutex<FakeState>>,
    server: tokio::task::JoinHandle<()>,
    ca_pem: Option<String>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeKube {
    /// Starts a fake on an ephemeral loopback port.
    pub async fn start() -> FakeKube {
        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Kubernetes API server");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeKube {
            url,
            state,
            server,
            ca_pem: None,
        }
    }

    /// Starts a fake that speaks HTTPS with a fresh self-signed certificate for `127.0.0.1`
    /// (its PEM is [`FakeKube::ca_pem`]), for clients configured like real ones (a kubeconfig
    /// with `certificate-authority-data`).
    pub async fn start_tls() -> FakeKube {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::service::TowerToHyperService;

        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let key = rcgen::KeyPair::generate().expect("key pair");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("certificate parameters");
        let cert = params.self_signed(&key).expect("self-signed certificate");
        let ca_pem = cert.pem();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server certificate");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Kubernetes API server");
        let url = format!("https://{}", listener.local_addr().expect("local address"));
        let server = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        FakeKube {
            url,
            state,
            server,
            ca_pem: Some(ca_pem),
        }
    }

    /// The certificate of a TLS fake (PEM).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// A kubeconfig naming this fake as cluster `fake`, context `fake`, with a bearer token
    /// (the fake does not check it) and, for a TLS fake, its certificate as the authority.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        let ca = self
            .ca_pem
            .as_deref()
            .map(|pem| {
                format!(
                    "    certificate-authority-data: {}\n",
                    base64::engine::general_purpose::STANDARD.encode(pem)
                )
            })
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n{ca}contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: occ\nusers:\n- name: occ\n  user:\n    token: fake-token\n",
            url = self.url
        )
    }

    /// The server's base URL (`http://127.0.0.1:port`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers `verb` on `resource` with 403 Forbidden from now on.
    pub fn deny(&self, verb: &str, resource: &str) {
        self.state().denied.insert((verb.into(), resource.into()));
    }

    /// Lifts every denial.
    pub fn allow_all(&self) {
        self.state().denied.clear();
    }

    /// The next `count` requests (matching `verb` and `resource` when given) fail with `status`
    /// before having any effect.
    pub fn fail_next(&self, count: usize, status: u16, verb: Option<&str>, resource: Option<&str>) {
        self.state().faults.push(Fault {
            status,
            remaining: count,
            verb: verb.map(str::to_owned),
            resource: resource.map(str::to_owned),
        });
    }

    /// Delays every response by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    /// Keeps deleted Namespaces in `Terminating` until [`FakeKube::finish_namespace_deletion`].
    pub fn hold_namespace_deletion(&self, hold: bool) {
        self.state().hold_namespace_deletion = hold;
    }

    /// Removes a terminating Namespace and everything in it.
    pub fn finish_namespace_deletion(&self, name: &str) {
        remove_namespace(&mut self.state(), name);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state().log.clone()
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        self.state().log.clear();
    }

    /// A stored object (`namespace` empty for cluster-scoped ones).
    pub fn object(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.state()
            .objects
            .get(&(resource.into(), namespace.into(), name.into()))
            .cloned()
    }

    /// Names of the stored objects of a resource in a namespace (`""`: cluster-scoped).
    pub fn names(&self, resource: &str, namespace: &str) -> Vec<String> {
        self.state()
            .objects
            .keys()
            .filter(|(r, n, _)| r == resource && n == namespace)
            .map(|(_, _, name)| name.clone())
            .collect()
    }

    /// Stores an object as if someone else had created it (uid, resourceVersion and creation
    /// time assigned when missing). Returns the stored object.
    pub fn seed(&self, resource: &str, namespace: &str, mut object: Value) -> Value {
        let mut st = self.state();
        let name = object["metadata"]["name"]
            .as_str()
            .expect("seeded objects have a name")
            .to_owned();
        let version = st.next_version();
        stamp_new(&mut object, resource, namespace, version);
        st.objects
            .insert((resource.into(), namespace.into(), name), object.clone());
        object
    }

    /// Changes a stored object behind the client's back (its resourceVersion advances).
    pub fn mutate(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) {
        let mut st = self.state();
        let version = st.next_version();
        let object = st
            .objects
            .get_mut(&(resource.into(), namespace.into(), name.into()))
            .expect("mutate an existing object");
        change(object);
        object["metadata"]["resourceVersion"] = json!(version);
    }

    /// Removes a stored object behind the client's back.
    pub fn remove(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.state()
            .objects
            .remove(&(resource.into(), namespace.into(), name.into()))
    }
}

fn stamp_new(object: &mut Value, resource: &str, namespace: &str, version: String) {
    if !object.is_object() {
        *object = json!({});
    }
    let meta = object
        .as_object_mut()
        .expect("object")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let meta = meta.as_object_mut().expect("metadata object");
    meta.entry("uid")
        .or_insert_with(|| json!(uuid::Uuid::new_v4().to_string()));
    meta.entry("creationTimestamp")
        .or_insert_with(|| json!(now_rfc3339()));
    meta.insert("resourceVersion".into(), json!(version));
    if !namespace.is_empty() {
        meta.insert("namespace".into(), json!(namespace));
    }
    if resource == "namespaces" && object.get("status").is_none() {
        object["status"] = json!({"phase": "Active"});
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn remove_namespace(st: &mut FakeState, name: &str) {
    st.objects
        .retain(|(resource, ns, n), _| !(ns == name || (resource == "namespaces" && n == name)));
}

/// A `metav1.Status` failure body.
fn status(code: u16, reason: &str, message: String) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

fn respond(code: u16, body: Value) -> Response {
    let mut response = (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response();
    if code == 429 {
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
    }
    response
}

/// `(resource, namespace, name)` of a request path.
fn route(path: &str) -> Option<(String, String, String)> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return None,
    };
    let owned = |s: &&str| s.to_string();
    match rest {
        ["namespaces"] => Some(("namespaces".into(), String::new(), String::new())),
        ["namespaces", name] => Some(("namespaces".into(), String::new(), owned(name))),
        ["namespaces", ns, plural] => Some((owned(plural), owned(ns), String::new())),
        ["namespaces", ns, plural, name] => Some((owned(plural), owned(ns), owned(name))),
        [plural] => Some((owned(plural), String::new(), String::new())),
        [plural, name] => Some((owned(plural), String::new(), owned(name))),
        _ => None,
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Whether an object's labels satisfy an equality/existence selector (`a=b,c!=d,e,!f`).
fn selector_matches(selector: &str, object: &Value) -> bool {
    let labels = object["metadata"]["labels"].as_object();
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    selector
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .all(|requirement| {
            if let Some((k, v)) = requirement.split_once("!=") {
                label(k.trim()) != Some(v.trim())
            } else if let Some((k, v)) = requirement
                .split_once("==")
                .or_else(|| requirement.split_once('='))
            {
                label(k.trim()) == Some(v.trim())
            } else if let Some(k) = requirement.strip_prefix('!') {
                label(k.trim()).is_none()
            } else {
                label(requirement).is_some()
            }
        })
}

fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = json!({});
        }
        let t = target.as_object_mut().expect("object");
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    } else {
        *target = patch.clone();
    }
}

/// Folds a Secret's `stringData` into base64 `data`, as the API server does.
fn fold_string_data(resource: &str, object: &mut Value) {
    if resource != "secrets" {
        return;
    }
    use base64::Engine as _;
    let Some(obj) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = obj.remove("stringData") {
        let data = obj.entry("data").or_insert_with(|| json!({}));
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let text = v.as_str().unwrap_or_default();
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
}

fn immutable_change(resource: &str, current: &Value, next: &Value) -> bool {
    (resource == "configmaps" || resource == "secrets")
        && current["immutable"] == json!(true)
        && (current["data"] != next["data"]
            || current["binaryData"] != next["binaryData"]
            || next["immutable"] != json!(true))
}

fn verb_of(method: &Method, name: &str) -> &'static str {
    match (method, name.is_empty()) {
        (&Method::GET, true) => "list",
        (&Method::GET, false) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, _) => "delete",
        _ => "unsupported",
    }
}

async fn handle(
    State(state): State<Arc<Mutex<FakeState>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let latency = state.lock().map(|s| s.latency).unwrap_or_default();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let query = uri.query().unwrap_or("").to_owned();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let parsed_body: Option<Value> = (!body.is_empty())
        .then(|| serde_json::from_slice(&body).ok())
        .flatten();
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    let Some((resource, namespace, name)) = route(uri.path()) else {
        return respond(
            404,
            status(404, "NotFound", format!("no route for {}", uri.path())),
        );
    };
    let verb = verb_of(&method, &name);
    let response_code;
    let response = if let Some(code) = st.take_fault(verb, &resource) {
        response_code = code;
        let reason = if code == 429 {
            "TooManyRequests"
        } else {
            "InternalError"
        };
        status(code, reason, format!("injected failure {code}"))
    } else if st.denied.contains(&(verb.to_owned(), resource.clone())) {
        response_code = 403;
        status(
            403,
            "Forbidden",
            format!(
                "{resource} is forbidden: User \"test\" cannot {verb} resource \"{resource}\" in namespace \"{namespace}\""
            ),
        )
    } else {
        let (code, resp) = serve(
            &mut st,
            verb,
            &resource,
            &namespace,
            &name,
            &query,
            &content_type,
            &body,
        );
        response_code = code;
        resp
    };
    st.log.push(LoggedRequest {
        verb: verb.to_owned(),
        resource,
        namespace,
        name,
        query,
        content_type,
        body: parsed_body,
        status: response_code,
    });
    respond(response_code, response)
}

#[allow(clippy::too_many_arguments)]
fn serve(
    st: &mut FakeState,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    query: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let key = |n: &str| (resource.to_owned(), namespace.to_owned(), n.to_owned());
    let not_found = |n: &str| {
        (
            404,
            status(404, "NotFound", format!("{resource} \"{n}\" not found")),
        )
    };
    let parse_body = || -> Result<Value, (u16, Value)> {
        serde_json::from_slice::<Value>(body)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                (
                    400,
                    status(400, "BadRequest", "the body is not a JSON object".into()),
                )
            })
    };
    // Namespaced writes need a live Namespace.
    if !namespace.is_empty() && matches!(verb, "create") {
        match st
            .objects
            .get(&("namespaces".into(), String::new(), namespace.to_owned()))
        {
            None => {
                return (
                    404,
                    status(
                        404,
                        "NotFound",
                        format!("namespaces \"{namespace}\" not found"),
                    ),
                );
            }
            Some(ns) if ns["status"]["phase"] == json!("Terminating") => {
                return (
                    403,
                    status(
                        403,
                        "Forbidden",
                        format!(
                            "unable to create new content in namespace {namespace} because it is being terminated"
                        ),
                    ),
                );
            }
            Some(_) => {}
        }
    }
    match verb {
        "list" => {
            let selector = query_param(query, "labelSelector").unwrap_or_default();
            let items: Vec<Value> = st
                .objects
                .iter()
                .filter(|((r, n, _), o)| {
                    r == resource
                        && (namespace.is_empty() || n == namespace)
                        && selector_matches(&selector, o)
                })
                .map(|(_, o)| o.clone())
                .collect();
            (
                200,
                json!({
                    "apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": st.resource_version.to_string()},
                    "items": items,
                }),
            )
        }
        "get" => match st.objects.get(&key(name)) {
            Some(o) => (200, o.clone()),
            None => not_found(name),
        },
        "create" => {
            let mut object = match parse_body() {
                Ok(o) => o,
                Err(e) => return e,
            };
            let mut object_name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
            if object_name.is_empty() {
                let Some(prefix) = object["metadata"]["generateName"].as_str() else {
                    return (
                        422,
                        status(422, "Invalid", "metadata.name: Required value".into()),
                    );
                };
                object_name = format!(
                    "{prefix}{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..5]
                );
                object["metadata"]["name"] = json!(object_name);
            }
            if st.objects.contains_key(&key(&object_name)) {
                return (
                    409,
                    status(
                        409,
                        "AlreadyExists",
                        format!("{resource} \"{object_name}\" already exists"),
                    ),
                );
            }
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.remove("uid");
                meta.remove("resourceVersion");
                meta.remove("creationTimestamp");
            }
            fold_string_data(resource, &mut object);
            let version = st.next_version();
            stamp_new(&mut object, resource, namespace, version);
            st.objects.insert(key(&object_name), object.clone());
            (201, object)
        }
        "update" => {
            let mut object = match parse_body() {
                Ok(o) => o,
                Err(e) => return e,
            };
            if object["metadata"]["name"].as_str() != Some(name) {
                return (
                    400,
                    status(
                        400,
                        "BadRequest",
                        "the name of the object does not match the URL".into(),
                    ),
                );
            }
            let Some(current) = st.objects.get(&key(name)).cloned() else {
                return not_found(name);
            };
            if let Some(wanted) = object["metadata"]["resourceVersion"].as_str()
                && Some(wanted) != current["metadata"]["resourceVersion"].as_str()
            {
                return (
                    409,
                    status(
                        409,
                        "Conflict",
                        format!(
                            "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                        ),
                    ),
                );
            }
            fold_string_data(resource, &mut object);
            if immutable_change(resource, &current, &object) {
                return (
                    422,
                    status(
                        422,
                        "Invalid",
                        format!("{resource} \"{name}\" is immutable"),
                    ),
                );
            }
            let version = st.next_version();
            let meta = &mut object["metadata"];
            meta["uid"] = current["metadata"]["uid"].clone();
            meta["creationTimestamp"] = current["metadata"]["creationTimestamp"].clone();
            meta["resourceVersion"] = json!(version);
            if !namespace.is_empty() {
                meta["namespace"] = json!(namespace);
            }
            if resource == "namespaces" {
                object["status"] = current["status"].clone();
            }
            st.objects.insert(key(name), object.clone());
            (200, object)
        }
        "patch" => {
            let patch = match parse_body() {
                Ok(o) => o,
                Err(e) => return e,
            };
            let is_apply = content_type.starts_with("application/apply-patch");
            if !(is_apply
                || content_type.starts_with("application/merge-patch+json")
                || content_type.starts_with("application/strategic-merge-patch+json"))
            {
                return (
                    415,
                    status(
                        415,
                        "UnsupportedMediaType",
                        format!("the fake does not support patch type {content_type}"),
                    ),
                );
            }
            let current = st.objects.get(&key(name)).cloned();
            let mut object = match (&current, is_apply) {
                (Some(o), _) => o.clone(),
                (None, true) => json!({"metadata": {"name": name}}),
                (None, false) => return not_found(name),
            };
            merge_patch(&mut object, &patch);
            fold_string_data(resource, &mut object);
            if let Some(current) = &current
                && immutable_change(resource, current, &object)
            {
                return (
                    422,
                    status(
                        422,
                        "Invalid",
                        format!("{resource} \"{name}\" is immutable"),
                    ),
                );
            }
            let version = st.next_version();
            if current.is_none() {
                stamp_new(&mut object, resource, namespace, version);
            } else {
                object["metadata"]["resourceVersion"] = json!(version);
            }
            st.objects.insert(key(name), object.clone());
            (200, object)
        }
        "delete" => {
            let Some(current) = st.objects.get(&key(name)).cloned() else {
                return not_found(name);
            };
            let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let preconditions = &options["preconditions"];
            for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
                if let Some(wanted) = preconditions[field].as_str()
                    && Some(wanted) != current["metadata"][field].as_str()
                {
                    return (
                        409,
                        status(
                            409,
                            "Conflict",
                            format!(
                                "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {}",
                                current["metadata"][field].as_str().unwrap_or("")
                            ),
                        ),
                    );
                }
            }
            if resource == "namespaces" {
                if st.hold_namespace_deletion {
                    let version = st.next_version();
                    let ns = st.objects.get_mut(&key(name)).expect("present");
                    ns["status"] = json!({"phase": "Terminating"});
                    ns["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
                    ns["metadata"]["resourceVersion"] = json!(version);
                    return (200, ns.clone());
                }
                remove_namespace(st, name);
            } else {
                st.objects.remove(&key(name));
            }
            (200, current)
        }
        other => (
            405,
            status(
                405,
                "MethodNotAllowed",
                format!("{other} is not supported by the fake"),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_like_the_api_server() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        assert!(selector_matches("a=1", &o));
        assert!(selector_matches("a==1,b=2", &o));
        assert!(selector_matches("a,!c", &o));
        assert!(selector_matches("a!=2", &o));
        assert!(!selector_matches("a=2", &o));
        assert!(!selector_matches("c", &o));
        assert!(!selector_matches("!a", &o));
        assert!(selector_matches("", &o));
    }

    #[test]
    fn routes_cover_core_and_group_paths() {
        assert_eq!(
            route("/api/v1/namespaces/x/configmaps/y"),
            Some(("configmaps".into(), "x".into(), "y".into()))
        );
        assert_eq!(
            route("/apis/apps/v1/namespaces/x/deployments"),
            Some(("deployments".into(), "x".into(), String::new()))
        );
        assert_eq!(
            route("/api/v1/namespaces/n"),
            Some(("namespaces".into(), String::new(), "n".into()))
        );
        assert_eq!(route("/healthz"), None);
    }

    #[test]
    fn query_parameters_are_decoded() {
        assert_eq!(
            query_param("labelSelector=a%3Db%2Cc&x=1", "labelSelector").as_deref(),
            Some("a=b,c")
        );
        assert_eq!(query_param("x=1", "labelSelector"), None);
    }
}
