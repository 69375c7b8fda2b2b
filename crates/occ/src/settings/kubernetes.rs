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
    /// `OCC_KUBERNETES_RUNTIME_CLASS`: the RuntimeClass of Agent Pods (gateway and harness),
    /// e.g. a gVisor or Kata class the cluster offers; unset: the cluster's default runtime.
    pub runtime_class: Option<String>,
    /// `OCC_KUBERNETES_ACTIVATION_TIMEOUT_SECONDS` (300): rollout and handshake wait.
    pub activation_timeout: Duration,
    /// `OCC_KUBERNETES_TENANT_QUOTA` (`resource=quantity,…`; unset: none): the ResourceQuota
    /// `occ-quota` of every tenant namespace.
    pub tenant_quota: Option<occ_drivers::kubernetes::TenantQuota>,
    /// `OCC_KUBERNETES_HARNESS_STORAGE` (default `10Gi`): each dedicated Agent's harness claim
    /// (workspace, Codex home, node identity).
    pub harness_storage: String,
    /// `OCC_KUBERNETES_HARNESS_TOKEN_AUDIENCE` (default `occ`): the audience of the projected
    /// service-principal token only harness Pods mount.
    pub harness_token_audience: String,
    /// `OCC_KUBERNETES_MODEL_EGRESS` (`CIDR:PORT,…`; unset: any public IPv4 address on 443):
    /// where harness Pods may send model calls (their NetworkPolicy).
    pub model_egress: Vec<occ_drivers::compute::kubernetes::ModelEgress>,
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
    storage_quantity("OCC_KUBERNETES_STATE_STORAGE", &state_storage)?;
    let harness_storage = pick(
        "OCC_KUBERNETES_HARNESS_STORAGE",
        file.kubernetes_harness_storage.take(),
    )
    .unwrap_or_else(|| "10Gi".into());
    storage_quantity("OCC_KUBERNETES_HARNESS_STORAGE", &harness_storage)?;
    let harness_token_audience = pick(
        "OCC_KUBERNETES_HARNESS_TOKEN_AUDIENCE",
        file.kubernetes_harness_token_audience.take(),
    )
    .unwrap_or_else(|| "occ".into());
    if harness_token_audience.is_empty()
        || harness_token_audience
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        bail!(
            "OCC_KUBERNETES_HARNESS_TOKEN_AUDIENCE: {harness_token_audience:?} is not an audience"
        );
    }
    let model_egress = pick(
        "OCC_KUBERNETES_MODEL_EGRESS",
        file.kubernetes_model_egress.take(),
    )
    .map(|text| model_egress(&text).map_err(|e| anyhow!("OCC_KUBERNETES_MODEL_EGRESS: {e}")))
    .transpose()?
    .unwrap_or_default();
    let storage_class = pick(
        "OCC_KUBERNETES_STORAGE_CLASS",
        file.kubernetes_storage_class.take(),
    );
    let runtime_class = pick(
        "OCC_KUBERNETES_RUNTIME_CLASS",
        file.kubernetes_runtime_class.take(),
    )
    .filter(|v| !v.is_empty());
    if let Some(class) = &runtime_class
        && !occ_drivers::kubernetes::is_dns_subdomain(class)
    {
        bail!(
            "OCC_KUBERNETES_RUNTIME_CLASS: {class:?} is not a RuntimeClass name (a DNS subdomain: lower-case letters, digits, '-' and '.', at most 253)"
        );
    }
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
        runtime_class,
        activation_timeout: Duration::from_secs(timeout),
        tenant_quota,
        harness_storage,
        harness_token_audience,
        model_egress,
    })
}

/// A storage quantity like `10Gi` (`Mi`, `Gi`, `Ti`).
fn storage_quantity(var: &str, value: &str) -> anyhow::Result<()> {
    let quantity = value
        .strip_suffix("Gi")
        .or_else(|| value.strip_suffix("Mi"))
        .or_else(|| value.strip_suffix("Ti"));
    if !quantity.is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit())) {
        bail!("{var}: {value:?} is not a quantity like 10Gi");
    }
    Ok(())
}

/// `CIDR:PORT[,CIDR:PORT…]`: where dedicated harnesses may send model calls.
fn model_egress(text: &str) -> Result<Vec<occ_drivers::compute::kubernetes::ModelEgress>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (cidr, port) = item
                .rsplit_once(':')
                .ok_or_else(|| format!("{item:?} is not CIDR:PORT"))?;
            let (address, bits) = cidr
                .split_once('/')
                .ok_or_else(|| format!("{cidr:?} is not a CIDR block"))?;
            let address: std::net::IpAddr = address
                .parse()
                .map_err(|_| format!("{cidr:?} is not a CIDR block"))?;
            let max = if address.is_ipv4() { 32 } else { 128 };
            if !bits.parse::<u8>().is_ok_and(|b| b <= max) {
                return Err(format!("{cidr:?} is not a CIDR block"));
            }
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{port:?} is not a port"))?;
            Ok(occ_drivers::compute::kubernetes::ModelEgress {
                cidr: cidr.to_owned(),
                port,
            })
        })
        .collect()
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
