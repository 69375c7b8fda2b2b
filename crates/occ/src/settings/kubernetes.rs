//! The Kubernetes settings (`OCC_KUBERNETES_*`): how occ authenticates to the API server, the
//! ServiceAccounts granted access in tenant namespaces, and the Kubernetes Compute Driver's
//! workloads.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::source::{Env, FileSettings, positive};

/// Settings of the Kubernetes Compute Driver (`OCC_KUBERNETES_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesComputeSettings {
    /// `OCC_KUBERNETES_GATEWAY_IMAGE` (required): the image with occ and the OpenClaw runtime
    /// (pin it by digest).
    pub image: String,
    /// `OCC_KUBERNETES_GATEWAY_RUNTIME_DIR` (`/opt/occ/runtime`): the runtime in that image.
    pub runtime_dir: String,
    /// `OCC_KUBERNETES_GATEWAY_OCC` (`/usr/local/bin/occ`): occ in that image.
    pub occ_binary: String,
    /// `OCC_KUBERNETES_STATE_STORAGE` (`10Gi`): each Agent's state volume.
    pub state_storage: String,
    /// `OCC_KUBERNETES_STORAGE_CLASS`: the volumes' storage class (the cluster default).
    pub storage_class: Option<String>,
    /// `OCC_KUBERNETES_ACTIVATION_TIMEOUT_SECONDS` (300): rollout and handshake wait.
    pub activation_timeout: Duration,
    /// `OCC_KUBERNETES_TENANT_QUOTA` (`resource=quantity,…`; unset: none): the ResourceQuota
    /// `occ-quota` of every tenant namespace.
    pub tenant_quota: Option<occ_drivers::kubernetes::TenantQuota>,
}

/// Settings shared by the Kubernetes Drivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesSettings {
    /// `OCC_KUBERNETES_AUTH` (+ `OCC_KUBECONFIG`, `OCC_KUBERNETES_CONTEXT`).
    pub auth: occ_drivers::kubernetes::KubernetesAuth,
    /// `OCC_KUBERNETES_API_SERVICE_ACCOUNT` (`NAMESPACE/NAME`): granted ConfigMap and Secret
    /// access in tenant namespaces.
    pub api_service_account: occ_drivers::kubernetes::ServiceAccountRef,
    /// `OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT` (`NAMESPACE/NAME`): granted Secret reads in
    /// tenant namespaces (it delivers Secret values to workloads).
    pub worker_service_account: Option<occ_drivers::kubernetes::ServiceAccountRef>,
}

/// The Kubernetes Compute Driver's workload settings.
pub(super) fn kubernetes_compute_settings(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<KubernetesComputeSettings> {
    let pick = |var: &str, from_file: Option<String>| env(var).or(from_file);
    let image = pick(
        "OCC_KUBERNETES_GATEWAY_IMAGE",
        file.kubernetes_gateway_image.take(),
    )
    .ok_or_else(|| {
        anyhow!("OCC_KUBERNETES_GATEWAY_IMAGE is required with OCC_COMPUTE_DRIVER=kubernetes")
    })?;
    if image.trim().is_empty() || image.contains(char::is_whitespace) {
        bail!("OCC_KUBERNETES_GATEWAY_IMAGE: {image:?} is not an image reference");
    }
    let absolute_path = |var: &str, value: String| -> anyhow::Result<String> {
        if !value.starts_with('/') || value.contains(char::is_whitespace) {
            bail!("{var}: {value:?} must be an absolute path in the image");
        }
        Ok(value)
    };
    let runtime_dir = absolute_path(
        "OCC_KUBERNETES_GATEWAY_RUNTIME_DIR",
        pick(
            "OCC_KUBERNETES_GATEWAY_RUNTIME_DIR",
            file.kubernetes_gateway_runtime_dir.take(),
        )
        .unwrap_or_else(|| "/opt/occ/runtime".into()),
    )?;
    let occ_binary = absolute_path(
        "OCC_KUBERNETES_GATEWAY_OCC",
        pick(
            "OCC_KUBERNETES_GATEWAY_OCC",
            file.kubernetes_gateway_occ.take(),
        )
        .unwrap_or_else(|| "/usr/local/bin/occ".into()),
    )?;
    let state_storage = pick(
        "OCC_KUBERNETES_STATE_STORAGE",
        file.kubernetes_state_storage.take(),
    )
    .unwrap_or_else(|| "10Gi".into());
    let quantity = state_storage
        .strip_suffix("Gi")
        .or_else(|| state_storage.strip_suffix("Mi"))
        .or_else(|| state_storage.strip_suffix("Ti"));
    if !quantity.is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit())) {
        bail!("OCC_KUBERNETES_STATE_STORAGE: {state_storage:?} is not a quantity like 10Gi");
    }
    let storage_class = pick(
        "OCC_KUBERNETES_STORAGE_CLASS",
        file.kubernetes_storage_class.take(),
    );
    let timeout = positive(
        env,
        "OCC_KUBERNETES_ACTIVATION_TIMEOUT_SECONDS",
        file.kubernetes_activation_timeout_seconds,
        300,
    )?;
    let tenant_quota = pick(
        "OCC_KUBERNETES_TENANT_QUOTA",
        file.kubernetes_tenant_quota.take(),
    )
    .map(|text| {
        text.parse()
            .map_err(|e| anyhow!("OCC_KUBERNETES_TENANT_QUOTA: {e}"))
    })
    .transpose()?;
    Ok(KubernetesComputeSettings {
        image,
        runtime_dir,
        occ_binary,
        state_storage,
        storage_class,
        activation_timeout: Duration::from_secs(timeout),
        tenant_quota,
    })
}

/// The Kubernetes Drivers' settings: authentication and the ServiceAccounts granted access in
/// tenant namespaces.
pub(super) fn kubernetes_settings(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<KubernetesSettings> {
    let auth = kubernetes_auth(env, file)?;
    let account = |var: &str, from_file: Option<String>| -> anyhow::Result<Option<_>> {
        env(var)
            .or(from_file)
            .map(|text| text.parse().map_err(|e| anyhow!("{var}: {e}")))
            .transpose()
    };
    let api_service_account = account(
        "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
        file.kubernetes_api_service_account.take(),
    )?
    .ok_or_else(|| {
        anyhow!("OCC_KUBERNETES_API_SERVICE_ACCOUNT (NAMESPACE/NAME) is required by the Kubernetes Drivers")
    })?;
    let worker_service_account = account(
        "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
        file.kubernetes_worker_service_account.take(),
    )?;
    Ok(KubernetesSettings {
        auth,
        api_service_account,
        worker_service_account,
    })
}

/// How the Kubernetes Drivers authenticate: `OCC_KUBERNETES_AUTH` = `in-cluster` (the Pod's
/// service account) or `kubeconfig` (`OCC_KUBECONFIG`, an absolute path, and
/// `OCC_KUBERNETES_CONTEXT`, both required; no fallback to `$KUBECONFIG` or `~/.kube`).
fn kubernetes_auth(
    env: Env<'_>,
    file: &mut FileSettings,
) -> anyhow::Result<occ_drivers::kubernetes::KubernetesAuth> {
    use occ_drivers::kubernetes::KubernetesAuth;
    let mode = env("OCC_KUBERNETES_AUTH")
        .or(file.kubernetes_auth.take())
        .ok_or_else(|| {
            anyhow!(
                "OCC_KUBERNETES_AUTH is required by the Kubernetes Drivers (in-cluster, kubeconfig)"
            )
        })?;
    match mode.as_str() {
        "in-cluster" => Ok(KubernetesAuth::InCluster),
        "kubeconfig" => {
            let path = env("OCC_KUBECONFIG")
                .map(PathBuf::from)
                .or(file.kubeconfig.take())
                .ok_or_else(|| {
                    anyhow!("OCC_KUBECONFIG is required with OCC_KUBERNETES_AUTH=kubeconfig")
                })?;
            if !path.is_absolute() {
                bail!("OCC_KUBECONFIG must be an absolute path");
            }
            let context = env("OCC_KUBERNETES_CONTEXT")
                .or(file.kubernetes_context.take())
                .ok_or_else(|| {
                    anyhow!(
                        "OCC_KUBERNETES_CONTEXT is required with OCC_KUBERNETES_AUTH=kubeconfig"
                    )
                })?;
            Ok(KubernetesAuth::Kubeconfig { path, context })
        }
        other => bail!("OCC_KUBERNETES_AUTH: {other:?} is not one of in-cluster, kubeconfig"),
    }
}
