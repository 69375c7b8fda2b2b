//! A provisioning job (`provisionAgent`, `getAgentProvisioning`): what it created so far and
//! why it failed, never its request's values.

use serde::Serialize;
use utoipa::ToSchema;

/// An Agent provisioning job (`getAgentProvisioning`): what it created so far, never its
/// request's values.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningView {
    work_id: String,
    status: &'static str,
    phase: &'static str,
    attempt_count: u32,
    updated_at: String,
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    configuration_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ProvisioningErrorView>,
}

/// Why a provisioning job failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProvisioningErrorView {
    code: String,
    message: String,
}

impl From<&occ_core::provisioning::Provisioning> for ProvisioningView {
    fn from(job: &occ_core::provisioning::Provisioning) -> Self {
        Self {
            work_id: job.id.to_string(),
            status: job.status.as_str(),
            phase: job.phase.as_str(),
            attempt_count: job.attempt_count,
            updated_at: job.updated_at.to_string(),
            url: job.url(),
            configuration_id: job.configuration_id.as_ref().map(|c| c.to_string()),
            agent_id: job.agent_id.as_ref().map(|a| a.to_string()),
            revision_id: job.revision_id.as_ref().map(|r| r.to_string()),
            error: job.error.as_ref().map(|e| ProvisioningErrorView {
                code: e.code.clone(),
                message: e.message.clone(),
            }),
        }
    }
}

/// `provisionAgent`'s answer: `{provisioning: …}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProvisionedView {
    provisioning: ProvisioningView,
}

impl From<&occ_core::provisioning::Provisioning> for ProvisionedView {
    fn from(job: &occ_core::provisioning::Provisioning) -> Self {
        Self {
            provisioning: ProvisioningView::from(job),
        }
    }
}
