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
//!   ConfigMap or Secret or a RoleBinding's roleRef `422`; every error is a `metav1.Status` body, so the client sees
//!   `kube::Error::Api` exactly as it would from a real API server;
//! - Secrets' `stringData` folded into base64 `data`, Namespaces born `Active`;
//! - test controls: deny a verb on a resource (`403`, to simulate missing RBAC), inject N
//!   failures (`500`/`429`) optionally matching a verb and resource, add latency, hold Namespace
//!   deletion in `Terminating`, seed or mutate stored objects behind the client's back, and read a
//!   log of every request.
//!
//! Deployments (and the other workload kinds) get `metadata.generation`: 1 on create, bumped
//! whenever `spec` changes, never for status-only changes; their `status` is the status
//! subresource's, so writes to the main resource keep it (only [`FakeKube::mutate`] and the
//! test kubelet change it).
//!
//! `GET /api/v1/namespaces/{ns}/pods/{name}/portforward?ports=P[,Q…]` upgrades to a WebSocket
//! with subprotocol `v4.channel.k8s.io` (what the real kubelet's WebSocket port forwarding
//! speaks, and what kube's `Api::<Pod>::portforward` accepts): per requested port `i`, data
//! channel `2i` and error channel `2i+1`, each opened by a frame carrying the port (2 bytes
//! little-endian). The data channel is bridged to `127.0.0.1:<local port>` registered for the
//! Pod's container port ([`FakeKube::register_pod_port`], which [`crate::kubelet::FakeKubelet`]
//! does for the gateways it runs); an unregistered or refused port gets an error-channel
//! message, as from the real kubelet. It is logged as verb `create` on resource
//! `pods/portforward` and obeys [`FakeKube::deny`] and [`FakeKube::fail_next`] for them.
//!
//! `GET /api/v1/namespaces/{ns}/pods/{name}/log` answers like the API server and kubelet, from
//! container instances the test (or the test kubelet) starts and writes to: see the `pod_log`
//! module ([`FakeKube::start_container`], [`FakeKube::append_pod_log`]). It is logged as verb
//! `get` on resource `pods/log` and obeys [`FakeKube::deny`] and [`FakeKube::fail_next`].
//!
//! It does not implement watches, field managers, admission or garbage collection.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

mod pod_log;

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

/// Resources whose objects carry `metadata.generation` and a status subresource.
const WORKLOADS: [&str; 4] = ["deployments", "statefulsets", "daemonsets", "replicasets"];

/// The state behind a fake; the test kubelet works on it in process.
#[derive(Default)]
pub(crate) struct FakeState {
    resource_version: u64,
    /// (resource, namespace, name) → object.
    pub(crate) objects: BTreeMap<(String, String, String), Value>,
    /// (namespace, pod) → container port → local loopback port, for portforward.
    pub(crate) pod_ports: BTreeMap<(String, String), BTreeMap<u16, u16>>,
    /// Container id → that container instance's output, oldest line first (`pods/log`).
    pub(crate) container_logs: BTreeMap<String, Vec<pod_log::LogLine>>,
    denied: HashSet<(String, String)>,
    faults: Vec<Fault>,
    latency: Duration,
    hold_namespace_deletion: bool,
    log: Vec<LoggedRequest>,
}

impl FakeState {
    pub(crate) fn next_version(&mut self) -> String {
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

    /// The shared state, for in-process helpers such as the test kubelet.
    pub(crate) fn shared(&self) -> Arc<Mutex<FakeState>> {
        self.state.clone()
    }

    /// Makes portforward to `container_port` of Pod `namespace/pod` reach
    /// `127.0.0.1:local_port`.
    pub fn register_pod_port(
        &self,
        namespace: &str,
        pod: &str,
        container_port: u16,
        local_port: u16,
    ) {
        self.state()
            .pod_ports
            .entry((namespace.into(), pod.into()))
            .or_default()
            .insert(container_port, local_port);
    }

    /// Forgets every port of Pod `namespace/pod`.
    pub fn unregister_pod(&self, namespace: &str, pod: &str) {
        self.state()
            .pod_ports
            .remove(&(namespace.to_owned(), pod.to_owned()));
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

    /// occ's Kubernetes client for this server (plain HTTP: the `start` flavour).
    pub fn occ_client(&self) -> occ_drivers::kubernetes::KubeClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        occ_drivers::kubernetes::KubeClient::from_config(kube::Config::new(
            self.url().parse().expect("url"),
        ))
        .expect("client")
    }

    /// The first logged request with `verb` (on `resource`, when given); panics naming what
    /// was expected when there is none.
    pub fn sent(&self, verb: &str, resource: Option<&str>) -> LoggedRequest {
        let log = self.requests();
        log.iter()
            .find(|r| r.verb == verb && resource.is_none_or(|res| r.resource == res))
            .cloned()
            .unwrap_or_else(|| panic!("no {verb} of {resource:?} was sent: {log:?}"))
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

    /// Names of the stored objects of a resource in every namespace.
    pub fn all_names(&self, resource: &str) -> Vec<String> {
        self.state()
            .objects
            .keys()
            .filter(|(r, _, _)| r == resource)
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
        if WORKLOADS.contains(&resource) && object["metadata"].get("generation").is_none() {
            object["metadata"]["generation"] = json!(1);
        }
        st.objects
            .insert((resource.into(), namespace.into(), name), object.clone());
        object
    }

    /// Changes a stored object behind the client's back (its resourceVersion advances; a
    /// workload's generation advances when its `spec` changed, not for `status`).
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
        let before = object.clone();
        change(object);
        track_generation(resource, Some(&before), object);
        object["metadata"]["resourceVersion"] = json!(version);
    }

    /// Removes a stored object behind the client's back.
    pub fn remove(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.state()
            .objects
            .remove(&(resource.into(), namespace.into(), name.into()))
    }
}

/// Sets a workload's `metadata.generation` as the API server does: 1 when created, the current
/// one plus 1 when `spec` changed, else unchanged.
pub(crate) fn track_generation(resource: &str, current: Option<&Value>, next: &mut Value) {
    if !WORKLOADS.contains(&resource) {
        return;
    }
    let generation = match current {
        None => 1,
        Some(current) => {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
            if current.get("spec") != next.get("spec") {
                generation + 1
            } else {
                generation
            }
        }
    };
    if next["metadata"].is_object() {
        next["metadata"]["generation"] = json!(generation);
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

pub(crate) fn now_rfc3339() -> String {
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
        // The one subresource served through the common path (portforward upgrades apart).
        ["namespaces", ns, "pods", name, "log"] => {
            Some(("pods/log".into(), owned(ns), owned(name)))
        }
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

/// Whether an object satisfies an equality field selector (`involvedObject.uid=…`, dotted
/// paths into the object; `!=` for inequality).
fn field_selector_matches(selector: &str, object: &Value) -> bool {
    let field = |path: &str| {
        path.split('.')
            .try_fold(object, |v, key| v.get(key))
            .and_then(Value::as_str)
    };
    selector
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .all(|requirement| {
            if let Some((k, v)) = requirement.split_once("!=") {
                field(k.trim()) != Some(v.trim())
            } else if let Some((k, v)) = requirement
                .split_once("==")
                .or_else(|| requirement.split_once('='))
            {
                field(k.trim()) == Some(v.trim())
            } else {
                false
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
    let sealed_data = (resource == "configmaps" || resource == "secrets")
        && current["immutable"] == json!(true)
        && (current["data"] != next["data"]
            || current["binaryData"] != next["binaryData"]
            || next["immutable"] != json!(true));
    // A RoleBinding's roleRef cannot change (the binding must be deleted and recreated).
    let role_ref = matches!(resource, "rolebindings" | "clusterrolebindings")
        && current["roleRef"] != next["roleRef"];
    sealed_data || role_ref
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

async fn handle(State(state): State<Arc<Mutex<FakeState>>>, request: Request) -> Response {
    let latency = state.lock().map(|s| s.latency).unwrap_or_default();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some((namespace, pod)) = portforward_route(request.uri().path()) {
        return portforward(&state, namespace, pod, request);
    }
    let (parts, body) = request.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        return respond(
            413,
            status(413, "RequestEntityTooLarge", "the body is too large".into()),
        );
    };
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
    let mut text_body = None;
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
    } else if resource == "pods/log" && verb == "get" {
        match pod_log::read(&st, &namespace, &name, &query) {
            Ok(text) => {
                response_code = 200;
                text_body = Some(text);
                Value::Null
            }
            Err((code, refusal)) => {
                response_code = code;
                refusal
            }
        }
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
    match text_body {
        Some(text) => ([(axum::http::header::CONTENT_TYPE, "text/plain")], text).into_response(),
        None => respond(response_code, response),
    }
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
            let fields = query_param(query, "fieldSelector").unwrap_or_default();
            let items: Vec<Value> = st
                .objects
                .iter()
                .filter(|((r, n, _), o)| {
                    r == resource
                        && (namespace.is_empty() || n == namespace)
                        && selector_matches(&selector, o)
                        && field_selector_matches(&fields, o)
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
            if WORKLOADS.contains(&resource) {
                object["status"] = json!({});
            }
            track_generation(resource, None, &mut object);
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
            if WORKLOADS.contains(&resource) {
                object["status"] = current.get("status").cloned().unwrap_or(json!({}));
            }
            track_generation(resource, Some(&current), &mut object);
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
            if WORKLOADS.contains(&resource) {
                object["status"] = current
                    .as_ref()
                    .and_then(|c| c.get("status").cloned())
                    .unwrap_or(json!({}));
            }
            track_generation(resource, current.as_ref(), &mut object);
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

/// `(namespace, pod)` of a `/api/v1/namespaces/{ns}/pods/{name}/portforward` path.
fn portforward_route(path: &str) -> Option<(String, String)> {
    match path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["api", "v1", "namespaces", ns, "pods", name, "portforward"] => {
            Some((ns.to_string(), name.to_string()))
        }
        _ => None,
    }
}

/// Requested ports and the local ports registered for them.
type Targets = Vec<(u16, Option<u16>)>;

/// The WebSocket subprotocol the real kubelet's port forwarding speaks (it offers no v5).
const PORTFORWARD_PROTOCOL: &str = "v4.channel.k8s.io";

/// Checks a portforward request like the API server and kubelet do, logs it, and on success
/// answers `101 Switching Protocols` and bridges the upgraded connection in the background.
fn portforward(
    state: &Arc<Mutex<FakeState>>,
    namespace: String,
    pod: String,
    mut request: Request,
) -> Response {
    let (verb, resource) = ("create", "pods/portforward");
    let query = request.uri().query().unwrap_or("").to_owned();
    let headers = request.headers();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let key = header("sec-websocket-key");
    let upgrade = header("upgrade");
    let offered = header("sec-websocket-protocol");
    let ports: Result<Vec<u16>, String> = query_param(&query, "ports")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u16>().map_err(|_| p.to_owned()))
        .collect();
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    let outcome: Result<(Targets, String), (u16, Value)> = (|| {
        if let Some(code) = st.take_fault(verb, resource) {
            let reason = if code == 429 {
                "TooManyRequests"
            } else {
                "InternalError"
            };
            return Err((
                code,
                status(code, reason, format!("injected failure {code}")),
            ));
        }
        if st.denied.contains(&(verb.to_owned(), resource.to_owned())) {
            return Err((
                403,
                status(
                    403,
                    "Forbidden",
                    format!(
                        "pods \"{pod}\" is forbidden: User \"test\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"{namespace}\""
                    ),
                ),
            ));
        }
        let ports = match ports {
            Ok(ports) if !ports.is_empty() && !ports.contains(&0) => ports,
            Ok(_) => {
                return Err((
                    400,
                    status(
                        400,
                        "BadRequest",
                        "at least one port must be specified".into(),
                    ),
                ));
            }
            Err(bad) => {
                return Err((
                    400,
                    status(400, "BadRequest", format!("invalid port \"{bad}\"")),
                ));
            }
        };
        let Some(object) = st
            .objects
            .get(&("pods".into(), namespace.clone(), pod.clone()))
        else {
            return Err((
                404,
                status(404, "NotFound", format!("pods \"{pod}\" not found")),
            ));
        };
        let phase = object["status"]["phase"].as_str().unwrap_or("Pending");
        if phase != "Running" {
            return Err((
                400,
                status(
                    400,
                    "BadRequest",
                    format!(
                        "pod {pod} is not running (phase {phase}): unable to upgrade connection"
                    ),
                ),
            ));
        }
        if !upgrade.eq_ignore_ascii_case("websocket") || key.is_empty() {
            return Err((
                400,
                status(400, "BadRequest", "upgrade request required".into()),
            ));
        }
        if !offered.split(',').any(|p| p.trim() == PORTFORWARD_PROTOCOL) {
            return Err((
                400,
                status(
                    400,
                    "BadRequest",
                    format!(
                        "none of the offered subprotocols ({offered}) is supported; use {PORTFORWARD_PROTOCOL}"
                    ),
                ),
            ));
        }
        let uid = object["metadata"]["uid"].as_str().unwrap_or("").to_owned();
        let registered = st.pod_ports.get(&(namespace.clone(), pod.clone()));
        Ok((
            ports
                .iter()
                .map(|p| (*p, registered.and_then(|m| m.get(p).copied())))
                .collect(),
            uid,
        ))
    })();
    let code = match &outcome {
        Ok(_) => 101,
        Err((code, _)) => *code,
    };
    st.log.push(LoggedRequest {
        verb: verb.to_owned(),
        resource: resource.to_owned(),
        namespace,
        name: pod,
        query,
        content_type: String::new(),
        body: None,
        status: code,
    });
    drop(st);
    let (targets, uid) = match outcome {
        Ok(ok) => ok,
        Err((code, body)) => return respond(code, body),
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        if let Ok(upgraded) = on_upgrade.await {
            bridge(upgraded, targets, uid).await;
        }
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", accept)
        .header("sec-websocket-protocol", PORTFORWARD_PROTOCOL)
        .body(axum::body::Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// What the TCP side of a forwarded port sends to the WebSocket side.
enum FromPod {
    Frame(Vec<u8>),
    Eof,
}

/// Runs one upgraded portforward connection: the opening frames, then bytes between the data
/// channels and TCP connections to the registered local ports.
async fn bridge(upgraded: hyper::upgrade::Upgraded, targets: Vec<(u16, Option<u16>)>, uid: String) {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::Role;

    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        hyper_util::rt::TokioIo::new(upgraded),
        Role::Server,
        None,
    )
    .await;
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<FromPod>(16);
    let mut writers: Vec<Option<tokio::net::tcp::OwnedWriteHalf>> = Vec::new();
    let mut readers = Vec::new();
    let mut live = 0usize;
    for (i, (port, local)) in targets.iter().enumerate() {
        let data = 2 * i as u8;
        let [lo, hi] = port.to_le_bytes();
        for channel in [data, data + 1] {
            if sink
                .send(Message::binary(vec![channel, lo, hi]))
                .await
                .is_err()
            {
                return;
            }
        }
        let connected = match local {
            Some(local) => tokio::net::TcpStream::connect(("127.0.0.1", *local))
                .await
                .map_err(|e| e.to_string()),
            None => Err("connect: connection refused".into()),
        };
        match connected {
            Ok(tcp) => {
                let (mut read, write) = tcp.into_split();
                writers.push(Some(write));
                live += 1;
                let tx = tx.clone();
                readers.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 32 * 1024];
                    loop {
                        match read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                let mut frame = Vec::with_capacity(n + 1);
                                frame.push(data);
                                frame.extend_from_slice(&buf[..n]);
                                if tx.send(FromPod::Frame(frame)).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    let _ = tx.send(FromPod::Eof).await;
                }));
            }
            Err(reason) => {
                writers.push(None);
                let mut frame = vec![data + 1];
                frame.extend_from_slice(
                    format!(
                        "error forwarding port {port} to pod {uid}, uid : failed to connect to localhost:{port} inside the pod: dial tcp4 127.0.0.1:{port}: {reason}"
                    )
                    .as_bytes(),
                );
                if sink.send(Message::binary(frame)).await.is_err() {
                    return;
                }
            }
        }
    }
    drop(tx);
    if live > 0 {
        loop {
            tokio::select! {
                incoming = stream.next() => match incoming {
                    Some(Ok(Message::Binary(bytes))) if !bytes.is_empty() => {
                        let channel = bytes[0] as usize;
                        if channel.is_multiple_of(2)
                            && let Some(Some(writer)) = writers.get_mut(channel / 2)
                            && writer.write_all(&bytes[1..]).await.is_err()
                        {
                            writers[channel / 2] = None;
                        }
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
                outgoing = rx.recv() => match outgoing {
                    Some(FromPod::Frame(frame)) => {
                        if sink.send(Message::binary(frame)).await.is_err() {
                            break;
                        }
                    }
                    Some(FromPod::Eof) => {
                        live -= 1;
                        if live == 0 {
                            break;
                        }
                    }
                    None => break,
                },
            }
        }
    }
    for reader in readers {
        reader.abort();
    }
    let _ = sink.send(Message::Close(None)).await;
    let _ = sink.close().await;
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
    fn field_selectors_match_dotted_paths() {
        let event = json!({"involvedObject": {"uid": "u-1", "kind": "Pod"}});
        assert!(field_selector_matches("", &event));
        assert!(field_selector_matches("involvedObject.uid=u-1", &event));
        assert!(field_selector_matches(
            "involvedObject.uid=u-1,involvedObject.kind!=Node",
            &event
        ));
        assert!(!field_selector_matches("involvedObject.uid=u-2", &event));
        assert!(!field_selector_matches("involvedObject.name=u-1", &event));
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
        assert_eq!(
            route("/api/v1/namespaces/x/pods/p/log"),
            Some(("pods/log".into(), "x".into(), "p".into()))
        );
        assert_eq!(route("/api/v1/namespaces/x/pods/p/exec"), None);
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

#[cfg(test)]
mod client_tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn client(fake: &FakeKube) -> kube::Client {
        kube::Client::try_from(kube::Config::new(fake.url().parse().expect("url"))).expect("client")
    }

    fn seed_namespace(fake: &FakeKube, ns: &str) {
        fake.seed("namespaces", "", json!({"metadata": {"name": ns}}));
    }

    fn deployment(name: &str, image: &str) -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "gateway", "image": image}]},
                },
            },
        }))
        .expect("deployment")
    }

    #[tokio::test]
    async fn deployment_generation_follows_spec_changes_only() {
        let fake = FakeKube::start().await;
        seed_namespace(&fake, "ns");
        let api: Api<Deployment> = Api::namespaced(client(&fake), "ns");
        let created = api
            .create(&PostParams::default(), &deployment("d", "a"))
            .await
            .expect("create");
        assert_eq!(created.metadata.generation, Some(1));

        // A metadata-only patch keeps it.
        let patched = api
            .patch(
                "d",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .expect("label patch");
        assert_eq!(patched.metadata.generation, Some(1));

        // A spec patch bumps it.
        let patched = api
            .patch(
                "d",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .expect("spec patch");
        assert_eq!(patched.metadata.generation, Some(2));

        // A replace with a new template bumps it; the status written by someone else survives.
        fake.mutate("deployments", "ns", "d", |o| {
            o["status"] = json!({"observedGeneration": 2, "replicas": 0});
        });
        let current = api.get("d").await.expect("get");
        assert_eq!(current.metadata.generation, Some(2), "status is not spec");
        let mut next = deployment("d", "b");
        next.metadata.resource_version = current.metadata.resource_version.clone();
        let replaced = api
            .replace("d", &PostParams::default(), &next)
            .await
            .expect("replace");
        assert_eq!(replaced.metadata.generation, Some(3));
        assert_eq!(
            replaced.status.and_then(|s| s.observed_generation),
            Some(2),
            "the main resource does not write status"
        );

        // An identical replace keeps it; an apply patch changing spec bumps it.
        let same = api
            .replace("d", &PostParams::default(), &deployment("d", "b"))
            .await
            .expect("same replace");
        assert_eq!(same.metadata.generation, Some(3));
        let applied = api
            .patch(
                "d",
                &PatchParams::apply("test").force(),
                &Patch::Apply(json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "d"}, "spec": {"replicas": 2},
                })),
            )
            .await
            .expect("apply");
        assert_eq!(applied.metadata.generation, Some(4));

        // mutate: a spec change bumps, seeding starts at 1.
        fake.mutate("deployments", "ns", "d", |o| {
            o["spec"]["replicas"] = json!(0)
        });
        assert_eq!(
            fake.object("deployments", "ns", "d").unwrap()["metadata"]["generation"],
            json!(5)
        );
        fake.seed(
            "deployments",
            "ns",
            json!({"metadata": {"name": "seeded"}, "spec": {"replicas": 1}}),
        );
        assert_eq!(
            fake.object("deployments", "ns", "seeded").unwrap()["metadata"]["generation"],
            json!(1)
        );
        // Other kinds carry no generation.
        fake.seed(
            "configmaps",
            "ns",
            json!({"metadata": {"name": "c"}, "data": {"a": "b"}}),
        );
        assert!(
            fake.object("configmaps", "ns", "c").unwrap()["metadata"]
                .get("generation")
                .is_none()
        );
    }

    /// A TCP echo server; returns its port.
    async fn echo_server() -> (u16, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = tcp.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (port, task)
    }

    fn seed_pod(fake: &FakeKube, ns: &str, name: &str, phase: &str) {
        fake.seed(
            "pods",
            ns,
            json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase},
            }),
        );
    }

    async fn round_trip(api: &Api<Pod>, pod: &str, port: u16, payload: &[u8]) -> Vec<u8> {
        let mut forwarder = api.portforward(pod, &[port]).await.expect("portforward");
        let mut stream = forwarder.take_stream(port).expect("stream");
        stream.write_all(payload).await.unwrap();
        let mut got = vec![0u8; payload.len()];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut got))
            .await
            .expect("echo in time")
            .expect("echo");
        drop(stream);
        forwarder.abort();
        got
    }

    #[tokio::test]
    async fn portforward_reaches_the_registered_port() {
        let fake = FakeKube::start().await;
        seed_namespace(&fake, "ns");
        let (echo, _server) = echo_server().await;
        seed_pod(&fake, "ns", "p", "Running");
        fake.register_pod_port("ns", "p", 8080, echo);
        let api: Api<Pod> = Api::namespaced(client(&fake), "ns");

        assert_eq!(
            round_trip(&api, "p", 8080, b"hello pod").await,
            b"hello pod"
        );

        // Two forwards at once, each with a larger payload.
        let a: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..150_000u32).map(|i| (i % 13) as u8).collect();
        let (ga, gb) = tokio::join!(
            round_trip(&api, "p", 8080, &a),
            round_trip(&api, "p", 8080, &b)
        );
        assert_eq!(ga, a);
        assert_eq!(gb, b);

        let logged: Vec<LoggedRequest> = fake
            .requests()
            .into_iter()
            .filter(|r| r.resource == "pods/portforward")
            .collect();
        assert_eq!(logged.len(), 3);
        assert!(logged.iter().all(|r| r.verb == "create"
            && r.namespace == "ns"
            && r.name == "p"
            && r.status == 101
            && r.query.contains("ports=8080")));
    }

    #[tokio::test]
    async fn pod_logs_reach_the_client_as_text_and_are_logged_and_deniable() {
        let fake = FakeKube::start().await;
        seed_namespace(&fake, "ns");
        seed_pod(&fake, "ns", "p", "Pending");
        let api: Api<Pod> = Api::namespaced(client(&fake), "ns");
        let params = kube::api::LogParams {
            timestamps: true,
            limit_bytes: Some(1000),
            ..Default::default()
        };
        assert_eq!(api.logs("p", &params).await.expect("unscheduled"), "");
        fake.start_container("ns", "p", "c");
        fake.append_pod_log("ns", "p", "c", "hello ünïcode");
        let text = api.logs("p", &params).await.expect("logs");
        let (time, line) = text.split_once(' ').expect("timestamped");
        assert!(
            chrono::DateTime::parse_from_rfc3339(time).is_ok() && time.len() == 30,
            "{time}"
        );
        assert_eq!(line, "hello ünïcode\n");
        let logged = fake.requests().pop().expect("logged");
        assert_eq!(
            (
                logged.verb.as_str(),
                logged.resource.as_str(),
                logged.name.as_str()
            ),
            ("get", "pods/log", "p")
        );
        assert!(logged.query.contains("limitBytes=1000"), "{logged:?}");
        let status = |r: Result<String, kube::Error>| match r {
            Err(kube::Error::Api(status)) => (status.code, status.message),
            other => panic!("expected an API error, got {other:?}"),
        };
        let previous = kube::api::LogParams {
            previous: true,
            ..Default::default()
        };
        assert_eq!(status(api.logs("p", &previous).await).0, 400);
        assert_eq!(status(api.logs("missing", &params).await).0, 404);
        fake.deny("get", "pods/log");
        assert_eq!(status(api.logs("p", &params).await).0, 403);
        assert_eq!(fake.requests().pop().expect("logged").status, 403);
    }

    #[tokio::test]
    async fn portforward_refusals_look_like_the_real_server() {
        let fake = FakeKube::start().await;
        seed_namespace(&fake, "ns");
        let api: Api<Pod> = Api::namespaced(client(&fake), "ns");
        let code = |r: Result<kube::api::Portforwarder, kube::Error>| match r {
            Err(kube::Error::Api(status)) => status.code,
            Err(other) => panic!("expected an API error, got {other}"),
            Ok(_) => panic!("expected an API error"),
        };
        assert_eq!(code(api.portforward("missing", &[80]).await), 404);
        seed_pod(&fake, "ns", "pending", "Pending");
        assert_eq!(code(api.portforward("pending", &[80]).await), 400);

        // Running but nothing listens on the port: the error channel says so.
        seed_pod(&fake, "ns", "p", "Running");
        let mut forwarder = api.portforward("p", &[80]).await.expect("upgrade");
        let error = forwarder.take_error(80).expect("error future");
        let message = tokio::time::timeout(Duration::from_secs(10), error)
            .await
            .expect("error in time");
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("error forwarding port 80")),
            "{message:?}"
        );

        fake.deny("create", "pods/portforward");
        assert_eq!(code(api.portforward("p", &[80]).await), 403);
        let last = fake.requests().pop().expect("logged");
        assert_eq!(
            (last.verb.as_str(), last.resource.as_str(), last.status),
            ("create", "pods/portforward", 403)
        );
    }
}
