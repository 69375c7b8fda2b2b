//! kube-proxy for the test kubelet: each Service port the Pods ask for gets a stable local
//! listener that forwards every connection to a ready Pod matching the Service's selector, at
//! the Pod's registered `targetPort`. Pods address Services by DNS name (`name`,
//! `name.namespace`, `name.namespace.svc[.cluster.local]`); the kubelet rewrites such addresses
//! in what it starts to `127.0.0.1:<listener>`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Inner, get, lock};

/// (namespace, Service, port).
type ServicePort = (String, String, u16);

/// The listeners: local port and accept task, by Service port.
#[derive(Default)]
pub(super) struct ServiceProxies {
    listeners: Mutex<HashMap<ServicePort, (u16, tokio::task::JoinHandle<()>)>>,
}

impl ServiceProxies {
    pub(super) fn abort_all(&self) {
        for (_, (_, task)) in lock(&self.listeners).drain() {
            task.abort();
        }
    }
}

/// The Service a host name in namespace `ns` names, as `(namespace, name)`.
pub(super) fn service_of(host: &str, ns: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        [name] => Some((ns.to_owned(), (*name).to_owned())),
        [name, namespace]
        | [name, namespace, "svc"]
        | [name, namespace, "svc", "cluster", "local"] => {
            Some(((*namespace).to_owned(), (*name).to_owned()))
        }
        _ => None,
    }
}

/// The local port standing for Service `name`'s `port` in `ns` (started on first use), if
/// the Service exists and has that port.
pub(super) fn proxy_port(inner: &Arc<Inner>, ns: &str, name: &str, port: u16) -> Option<u16> {
    {
        let st = lock(&inner.state);
        let service = get(&st, "services", ns, name)?;
        service["spec"]["ports"]
            .as_array()?
            .iter()
            .find(|p| p["port"].as_u64() == Some(u64::from(port)))?;
    }
    let key = (ns.to_owned(), name.to_owned(), port);
    let mut listeners = lock(&inner.services.listeners);
    if let Some((local, _)) = listeners.get(&key) {
        return Some(*local);
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
    listener.set_nonblocking(true).ok()?;
    let local = listener.local_addr().ok()?.port();
    let listener = tokio::net::TcpListener::from_std(listener).ok()?;
    let task = tokio::spawn({
        let inner = inner.clone();
        let (ns, name) = (ns.to_owned(), name.to_owned());
        async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Some(backend) = backend(&inner, &ns, &name, port) else {
                    continue;
                };
                tokio::spawn(async move {
                    if let Ok(mut upstream) =
                        tokio::net::TcpStream::connect(("127.0.0.1", backend)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        }
    });
    listeners.insert(key, (local, task));
    Some(local)
}

/// The local port of a ready Pod behind Service `name`'s `port`.
fn backend(inner: &Inner, ns: &str, name: &str, port: u16) -> Option<u16> {
    let st = lock(&inner.state);
    let service = get(&st, "services", ns, name)?;
    let target = service["spec"]["ports"]
        .as_array()?
        .iter()
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .and_then(|p| p["targetPort"].as_u64().or_else(|| p["port"].as_u64()))
        .and_then(|p| u16::try_from(p).ok())?;
    let selector = service["spec"]["selector"].as_object()?;
    st.objects
        .iter()
        .filter(|((resource, pod_ns, _), _)| resource == "pods" && pod_ns == ns)
        .filter(|(_, pod)| {
            selector
                .iter()
                .all(|(k, v)| pod["metadata"]["labels"].get(k) == Some(v))
                && ready(pod)
        })
        .find_map(|((_, _, pod), _)| {
            st.pod_ports
                .get(&(ns.to_owned(), pod.clone()))?
                .get(&target)
                .copied()
        })
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// `scheme://<service host>:<port><rest>` with a Service host → the same URL to its local
/// listener; anything else unchanged.
pub(super) fn rewrite_url(inner: &Arc<Inner>, ns: &str, url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = authority.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let (svc_ns, name) = service_of(host, ns)?;
    let local = proxy_port(inner, &svc_ns, &name, port)?;
    Some(format!("{scheme}://127.0.0.1:{local}{path}"))
}

/// Rewrites every Service URL among the strings of `value`.
pub(super) fn rewrite_urls(inner: &Arc<Inner>, ns: &str, value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Some(url) = rewrite_url(inner, ns, s) {
                *s = url;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_urls(inner, ns, v)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite_urls(inner, ns, v)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::service_of;

    #[test]
    fn service_names_resolve_like_cluster_dns() {
        let own = |n: &str| Some(("a".to_owned(), n.to_owned()));
        assert_eq!(service_of("hx-1", "a"), own("hx-1"));
        assert_eq!(
            service_of("hx-1.b.svc", "a"),
            Some(("b".into(), "hx-1".into()))
        );
        assert_eq!(
            service_of("hx-1.b.svc.cluster.local", "a"),
            Some(("b".into(), "hx-1".into()))
        );
        assert_eq!(service_of("models.example.com", "a"), None);
    }
}
