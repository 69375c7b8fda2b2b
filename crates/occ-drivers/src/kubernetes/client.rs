//! The Kubernetes client occ's Drivers use, and the request policy around every call.

use occ_core::ReasonCode;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::DriverError;

/// How occ authenticates to the API server (trusted installation settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubernetesAuth {
    /// The Pod's service account (`KUBERNETES_SERVICE_HOST` and the mounted token and CA).
    InCluster,
    /// One named context of an explicit kubeconfig file. There is no fallback to
    /// `$KUBECONFIG` or `~/.kube/config`.
    Kubeconfig {
        /// Absolute path of the kubeconfig file.
        path: PathBuf,
        /// The context to use; it must exist.
        context: String,
    },
}

/// One call's deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts of a call whose failure proves nothing was applied or that is safe to repeat.
const ATTEMPTS: u32 = 3;
/// Backoff unit between attempts (attempt × unit).
const BACKOFF: Duration = Duration::from_millis(100);

/// A classified API answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeFailure {
    /// 404.
    #[error("not found")]
    NotFound,
    /// 409 AlreadyExists on create.
    #[error("already exists")]
    AlreadyExists,
    /// 409 Conflict: a stale resourceVersion or a failed precondition.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 401/403: occ lacks a permission (the message names it).
    #[error("{0}")]
    Forbidden(String),
    /// 400/422: the API server refused the object.
    #[error("invalid: {0}")]
    Invalid(String),
    /// Unreachable, timed out, 429 or 5xx (after the retries the policy allows).
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl KubeFailure {
    /// As a Compute failure: a missing permission or an unavailable or racing API server is
    /// transient (retried with backoff); an object the API server refuses is permanent. `what`
    /// names the call.
    pub fn into_compute(self, what: &str) -> crate::compute::ComputeError {
        use crate::compute::ComputeError;
        match self {
            KubeFailure::Forbidden(m) => {
                ComputeError::transient(ReasonCode::KubernetesForbidden, m)
            }
            KubeFailure::Invalid(m) => ComputeError::permanent(ReasonCode::KubernetesInvalid, m),
            KubeFailure::NotFound => ComputeError::transient(
                ReasonCode::KubernetesUnavailable,
                format!("{what}: not found"),
            ),
            KubeFailure::AlreadyExists | KubeFailure::Conflict(_) => ComputeError::transient(
                ReasonCode::KubernetesConflict,
                format!("{what}: changed concurrently; read again on the next pass"),
            ),
            KubeFailure::Unavailable(m) => {
                ComputeError::transient(ReasonCode::KubernetesUnavailable, m)
            }
        }
    }
}

impl From<KubeFailure> for DriverError {
    fn from(f: KubeFailure) -> Self {
        match f {
            KubeFailure::NotFound => DriverError::NotFound,
            KubeFailure::AlreadyExists => DriverError::Conflict("the object already exists".into()),
            KubeFailure::Conflict(m) => DriverError::Conflict(m),
            KubeFailure::Forbidden(m) | KubeFailure::Unavailable(m) => DriverError::Unavailable(m),
            KubeFailure::Invalid(m) => DriverError::Configuration(m),
        }
    }
}

/// A connected client plus the request policy. Cheap to clone.
#[derive(Clone)]
pub struct KubeClient {
    client: kube::Client,
    /// The same API server without a read timeout, for long-lived streams (port-forwards):
    /// `CALL_TIMEOUT` as a read timeout would cut any forwarded connection idle for longer
    /// (a pooled gateway session, a model turn that takes a while).
    streams: kube::Client,
    /// The tenant namespace of each occ Namespace found so far, shared by the clones (the
    /// Drivers of one process): a Namespace's placement never changes while it exists, so
    /// only the first use pays the label-selected list.
    tenants:
        std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<occ_core::NamespaceId, String>>>,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient").finish_non_exhaustive()
    }
}

impl KubeClient {
    /// Builds a client from the installation's settings. Validates the configuration only: it
    /// does not contact the API server (the first Driver call does).
    pub async fn connect(auth: &KubernetesAuth) -> Result<Self, DriverError> {
        let config = match auth {
            KubernetesAuth::InCluster => kube::Config::incluster().map_err(|e| {
                DriverError::Configuration(format!("in-cluster Kubernetes configuration: {e}"))
            })?,
            KubernetesAuth::Kubeconfig { path, context } => {
                let kubeconfig = checked_kubeconfig(path, context)?;
                kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &KubeConfigOptions {
                        context: Some(context.clone()),
                        cluster: None,
                        user: None,
                    },
                )
                .await
                .map_err(|e| {
                    DriverError::Configuration(format!(
                        "kubeconfig {} context {context}: {e}",
                        path.display()
                    ))
                })?
            }
        };
        Self::from_config(config)
    }

    /// A client for an already built configuration (tests point it at a fake API server).
    pub fn from_config(mut config: kube::Config) -> Result<Self, DriverError> {
        config.connect_timeout = Some(CALL_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        config.write_timeout = Some(CALL_TIMEOUT);
        // One retry policy, ours (`call`): it also covers 500 and transport failures and keeps
        // each call's attempts bounded and visible.
        config.default_retry = false;
        let mut streams_config = config.clone();
        streams_config.read_timeout = None;
        let client = kube::Client::try_from(config)
            .map_err(|e| DriverError::Configuration(format!("Kubernetes client: {e}")))?;
        let streams = kube::Client::try_from(streams_config)
            .map_err(|e| DriverError::Configuration(format!("Kubernetes client: {e}")))?;
        Ok(Self {
            client,
            streams,
            tenants: Default::default(),
        })
    }

    /// The remembered tenant namespace of `ns`, if any.
    pub(crate) fn known_tenant(&self, ns: &occ_core::NamespaceId) -> Option<String> {
        self.tenant_map().get(ns).cloned()
    }

    /// Remembers (`Some`) or forgets (`None`) the tenant namespace of `ns`.
    pub(crate) fn remember_tenant(&self, ns: &occ_core::NamespaceId, tenant: Option<String>) {
        let mut map = self.tenant_map();
        match tenant {
            Some(name) => map.insert(ns.clone(), name),
            None => map.remove(ns),
        };
    }

    fn tenant_map(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<occ_core::NamespaceId, String>> {
        self.tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `GET` of one object under the request policy; absent is `None`.
    pub async fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        what: &str,
    ) -> Result<Option<K>, KubeFailure>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match self.call(what, || api.get(name)).await {
            Ok(o) => Ok(Some(o)),
            Err(KubeFailure::NotFound) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// [`Self::get_opt`] for the Compute verbs: a failure is a Compute failure
    /// ([`KubeFailure::into_compute`]) naming `what`.
    pub async fn find<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        what: &str,
    ) -> Result<Option<K>, crate::compute::ComputeError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        self.get_opt(api, name, what)
            .await
            .map_err(|e| e.into_compute(what))
    }

    /// `DELETE` of exactly the object that was read: its uid (and, when given, its
    /// resourceVersion) as preconditions, so an object recreated or changed since is never
    /// deleted; absent is done.
    pub async fn delete_exact<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        uid: Option<String>,
        resource_version: Option<String>,
        what: &str,
    ) -> Result<(), KubeFailure>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid,
                resource_version,
            }),
            ..kube::api::DeleteParams::default()
        };
        match self.call(what, || api.delete(name, &params)).await {
            Ok(_) | Err(KubeFailure::NotFound) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// [`Self::delete_exact`] of the object at `name` as it was just read (`found`), guarded by
    /// its uid.
    pub async fn delete_read<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        found: &ObjectMeta,
        what: &str,
    ) -> Result<(), KubeFailure>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        self.delete_exact(api, name, found.uid.clone(), None, what)
            .await
    }

    /// The underlying client, for typed `Api`s.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The client for long-lived streams (port-forwards): no read timeout.
    pub fn stream_client(&self) -> kube::Client {
        self.streams.clone()
    }

    /// Runs one API call under the policy: a deadline per attempt; up to three attempts when the
    /// answer is 429, 5xx, a timeout or a transport failure. Callers only route calls here that
    /// are safe to repeat (reads, creates whose repeat is detected by `AlreadyExists`, writes
    /// guarded by a resourceVersion or uid precondition); they resolve an ambiguous outcome by
    /// reading back. `what` names the verb, resource and namespace for error messages.
    pub async fn call<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, KubeFailure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let mut attempt = 1;
        loop {
            let outcome = match tokio::time::timeout(CALL_TIMEOUT, op()).await {
                Ok(result) => result.map_err(|e| classify(what, e)),
                Err(_) => Err(KubeFailure::Unavailable(format!(
                    "{what}: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                ))),
            };
            match outcome {
                Err(KubeFailure::Unavailable(message)) if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, %message, "Kubernetes call failed; retrying");
                    tokio::time::sleep(BACKOFF * attempt).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

fn classify(what: &str, err: kube::Error) -> KubeFailure {
    match err {
        kube::Error::Api(status) => match status.code {
            404 => KubeFailure::NotFound,
            409 if status.reason == "AlreadyExists" => KubeFailure::AlreadyExists,
            409 => KubeFailure::Conflict(format!("{what}: {}", status.message)),
            401 => KubeFailure::Forbidden(format!(
                "{what}: the Kubernetes API server did not accept occ's credentials (401)"
            )),
            403 => KubeFailure::Forbidden(format!(
                "{what}: permission missing (403): grant occ's service account this verb on this resource"
            )),
            400 | 422 => KubeFailure::Invalid(format!("{what}: {}", status.message)),
            code => KubeFailure::Unavailable(format!("{what}: API server answered {code}")),
        },
        other => KubeFailure::Unavailable(format!("{what}: {other}")),
    }
}

/// Reads a kubeconfig and refuses what would weaken the connection: a missing context, a
/// context without exactly one known cluster and user, a server that is not plain `https://host`
/// (userinfo, path, query, fragment), or disabled TLS verification.
fn checked_kubeconfig(path: &std::path::Path, context: &str) -> Result<Kubeconfig, DriverError> {
    let bad =
        |why: String| DriverError::Configuration(format!("kubeconfig {}: {why}", path.display()));
    if !path.is_absolute() {
        return Err(bad("the path must be absolute".into()));
    }
    if context.trim().is_empty() {
        return Err(bad("a context name is required".into()));
    }
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| bad(e.to_string()))?;
    let contexts: Vec<_> = kubeconfig
        .contexts
        .iter()
        .filter(|c| c.name == context)
        .collect();
    let [named] = contexts.as_slice() else {
        return Err(bad(format!(
            "context {context} must appear exactly once (found {})",
            contexts.len()
        )));
    };
    let ctx = named
        .context
        .as_ref()
        .ok_or_else(|| bad(format!("context {context} is empty")))?;
    let clusters: Vec<_> = kubeconfig
        .clusters
        .iter()
        .filter(|c| c.name == ctx.cluster)
        .collect();
    let [cluster] = clusters.as_slice() else {
        return Err(bad(format!(
            "context {context} must name exactly one defined cluster"
        )));
    };
    let cluster = cluster
        .cluster
        .as_ref()
        .ok_or_else(|| bad(format!("cluster {} is empty", ctx.cluster)))?;
    let user = ctx
        .user
        .as_deref()
        .ok_or_else(|| bad(format!("context {context} names no user")))?;
    if kubeconfig
        .auth_infos
        .iter()
        .filter(|u| u.name == user)
        .count()
        != 1
    {
        return Err(bad(format!("user {user} must be defined exactly once")));
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(bad("insecure-skip-tls-verify is not allowed".into()));
    }
    let server = cluster
        .server
        .as_deref()
        .ok_or_else(|| bad("the cluster has no server".into()))?;
    let uri: http::Uri = server
        .parse()
        .map_err(|_| bad("the server is not a URL".into()))?;
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    if uri.scheme_str() != Some("https")
        || authority.is_empty()
        || authority.contains('@')
        || !matches!(uri.path(), "" | "/")
        || uri.query().is_some()
        || server.contains('#')
    {
        return Err(bad(
            "the server must be https://host[:port] without credentials, path, query or fragment"
                .into(),
        ));
    }
    Ok(kubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(server: &str, extra_cluster: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{extra_cluster}contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        )
    }

    fn check(text: &str, context: &str) -> Result<(), String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config");
        std::fs::write(&path, text).expect("write");
        checked_kubeconfig(&path, context)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_plain_https_context_is_accepted() {
        check(&kubeconfig("https://k8s.example:6443", ""), "ctx").expect("accepted");
        check(&kubeconfig("https://k8s.example/", ""), "ctx").expect("accepted");
    }

    #[test]
    fn weakened_or_ambiguous_kubeconfigs_are_refused() {
        let cases = [
            (kubeconfig("http://k8s.example", ""), "ctx", "https"),
            (
                kubeconfig("https://user:pw@k8s.example", ""),
                "ctx",
                "credentials",
            ),
            (kubeconfig("https://k8s.example/api", ""), "ctx", "path"),
            (kubeconfig("https://k8s.example/?a=b", ""), "ctx", "query"),
            (
                kubeconfig(
                    "https://k8s.example",
                    "    insecure-skip-tls-verify: true\n",
                ),
                "ctx",
                "insecure",
            ),
            (
                kubeconfig("https://k8s.example", ""),
                "other",
                "exactly once",
            ),
            (kubeconfig("https://k8s.example", ""), " ", "context name"),
            (
                kubeconfig("https://k8s.example", "").replace("user: u\n", ""),
                "ctx",
                "no user",
            ),
            (
                kubeconfig("https://k8s.example", "").replace("- name: u\n", "- name: v\n"),
                "ctx",
                "user u",
            ),
        ];
        for (text, context, expected) in cases {
            let err = check(&text, context).expect_err(expected);
            assert!(err.contains(expected), "{err} should mention {expected}");
            assert!(!err.contains("pw@"), "no credentials in errors: {err}");
        }
    }

    #[test]
    fn a_relative_path_is_refused() {
        let err = checked_kubeconfig(std::path::Path::new("config"), "ctx").expect_err("relative");
        assert!(err.to_string().contains("absolute"));
    }
}
