//! Reaching an Agent's gateway: a local listener per Agent bridging each accepted connection to
//! a `pods/portforward` stream of its ready Pod (kube's WebSocket client), replaced when the Pod
//! changes. The gateway client sends a token over plain `ws://` to loopback only, so the token
//! never crosses the network in clear.

use occ_core::ReasonCode;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::workloads::GATEWAY_PORT;
use crate::compute::ComputeError;

/// A local listener bridged to one Pod's gateway port through `pods/portforward`.
struct Forward {
    pod: String,
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Driver's forwards, by `(tenant namespace, gateway name)`.
#[derive(Default)]
pub(super) struct Forwards(tokio::sync::Mutex<BTreeMap<(String, String), Forward>>);

impl Forwards {
    /// A local port forwarded to the gateway of Pod `pod` (of `pods`' namespace) through the API
    /// server, for the Agent `key` names (one listener per Agent, reused while the Pod is the
    /// same; each accepted connection opens its own port-forward stream).
    pub(super) async fn open(
        &self,
        pods: Api<Pod>,
        key: (String, String),
        pod: &str,
    ) -> Result<u16, ComputeError> {
        let mut forwards = self.0.lock().await;
        if let Some(f) = forwards.get(&key)
            && f.pod == pod
            && !f.task.is_finished()
        {
            return Ok(f.port);
        }
        forwards.remove(&key);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| {
                ComputeError::transient(
                    ReasonCode::DependencyUnavailable,
                    format!("no local port: {e}"),
                )
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| ComputeError::transient(ReasonCode::DependencyUnavailable, e.to_string()))?
            .port();
        let pod_name = pod.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let pods = pods.clone();
                let pod_name = pod_name.clone();
                tokio::spawn(async move {
                    let Ok(mut forwarder) = pods.portforward(&pod_name, &[GATEWAY_PORT]).await
                    else {
                        return;
                    };
                    let Some(mut upstream) = forwarder.take_stream(GATEWAY_PORT) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
                    drop(upstream);
                    let _ = forwarder.join().await;
                });
            }
        });
        forwards.insert(
            key,
            Forward {
                pod: pod.to_owned(),
                port,
                task,
            },
        );
        Ok(port)
    }

    /// Closes the forward of the Agent whose gateway is `gateway`, or of every Agent of a tenant
    /// namespace (`None`).
    pub(super) async fn close(&self, tenant: &str, gateway: Option<&str>) {
        self.0
            .lock()
            .await
            .retain(|(t, g), _| !(t == tenant && gateway.is_none_or(|name| name == g)));
    }
}
