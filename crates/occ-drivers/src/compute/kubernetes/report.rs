//! The runtime report of a revision on Kubernetes: its gateway Pods and a dedicated revision's
//! harness Pods (by their Agent label and the revision annotation), their container statuses,
//! and each Pod's own Events (listed by `involvedObject.uid`).

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::api::{Api, ListParams};
use occ_core::Timestamp;
use occ_core::runtime_report::{
    ContainerState, EventType, MAX_PODS, Plane, RuntimeContainer, RuntimeEvent, RuntimePod,
    RuntimeReport, Termination, WorkloadRole,
};

use occ_core::resource::ExecutionMode;

use super::pods::Workload;
use super::workloads::ANNOTATION_REVISION_ID;
use super::{ComputeError, KubernetesCompute, RevisionTarget};
use crate::kubernetes::annotation;

impl KubernetesCompute {
    /// [`super::super::Compute::runtime_report`] on Kubernetes.
    pub(super) async fn revision_report(
        &self,
        rev: &RevisionTarget,
    ) -> Result<RuntimeReport, ComputeError> {
        let of_revision = |p: &Pod| {
            annotation(&p.metadata, ANNOTATION_REVISION_ID) == Some(rev.revision_id.as_str())
        };
        let mut pods: Vec<(Pod, WorkloadRole)> = self
            .agent_pods(&rev.agent)
            .await?
            .into_iter()
            .filter(of_revision)
            .map(|p| (p, WorkloadRole::Gateway))
            .collect();
        if rev.execution_mode() == ExecutionMode::Dedicated {
            pods.extend(
                self.workload_pods(&rev.agent, Workload::Harness)
                    .await?
                    .into_iter()
                    .filter(of_revision)
                    .map(|p| (p, WorkloadRole::Agent)),
            );
        }
        pods.truncate(MAX_PODS);
        if pods.is_empty() {
            return Ok(RuntimeReport::default());
        }
        let names = self.names(&rev.agent).await?;
        let events_api: Api<Event> = self.api(&names.tenant);
        let mut report = RuntimeReport {
            pods: Vec::new(),
            history_from_driver: true,
        };
        for (pod, role) in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
            let events = self
                .kube
                .call("list events", || events_api.list(&params))
                .await
                .map_err(|e| e.into_compute("list events"))?
                .items;
            report.pods.push(pod_report(&pod, role, events));
        }
        Ok(report)
    }
}

fn time(t: &k8s_openapi::jiff::Timestamp) -> Option<Timestamp> {
    Timestamp::from_unix_millis(t.as_millisecond())
}

/// One Pod with its (already listed) Events, oldest first.
fn pod_report(pod: &Pod, role: WorkloadRole, events: Vec<Event>) -> RuntimePod {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let containers = status
        .and_then(|s| s.container_statuses.as_ref())
        .map(|statuses| statuses.iter().map(container).collect())
        .unwrap_or_default();
    let mut events: Vec<RuntimeEvent> = events
        .into_iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid.as_str()))
        .map(event)
        .collect();
    events.sort_by_key(|e| e.last_observed_at);
    RuntimePod {
        role,
        cluster: Plane::Control,
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid,
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into()),
        ready,
        created_at: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| time(&t.0)),
        containers,
        events,
    }
}

fn container(c: &ContainerStatus) -> RuntimeContainer {
    let current = c.state.as_ref();
    let (state, reason, started_at) = match current {
        Some(s) if s.running.is_some() => (
            ContainerState::Running,
            None,
            s.running
                .as_ref()
                .and_then(|r| r.started_at.as_ref())
                .and_then(|t| time(&t.0)),
        ),
        Some(s) if s.terminated.is_some() => {
            let t = s.terminated.as_ref();
            (
                ContainerState::Terminated,
                t.and_then(|t| t.reason.clone()),
                t.and_then(|t| t.started_at.as_ref())
                    .and_then(|t| time(&t.0)),
            )
        }
        Some(s) if s.waiting.is_some() => (
            ContainerState::Waiting,
            s.waiting.as_ref().and_then(|w| w.reason.clone()),
            None,
        ),
        _ => (ContainerState::Unknown, None, None),
    };
    RuntimeContainer {
        name: c.name.clone(),
        state,
        reason,
        ready: c.ready,
        restart_count: u64::try_from(c.restart_count).unwrap_or(0),
        started_at,
        last_termination: c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| Termination {
                reason: t.reason.clone(),
                exit_code: Some(t.exit_code),
                finished_at: t.finished_at.as_ref().and_then(|f| time(&f.0)),
            }),
    }
}

fn event(e: Event) -> RuntimeEvent {
    let series = e.series.as_ref();
    RuntimeEvent {
        kind: if e.type_.as_deref() == Some("Warning") {
            EventType::Warning
        } else {
            EventType::Normal
        },
        container: e
            .involved_object
            .field_path
            .as_deref()
            .and_then(container_of_field_path),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: series
            .and_then(|s| s.count)
            .or(e.count)
            .and_then(|c| u64::try_from(c).ok())
            .unwrap_or(1)
            .max(1),
        last_observed_at: series
            .and_then(|s| s.last_observed_time.as_ref())
            .map(|t| &t.0)
            .or(e.last_timestamp.as_ref().map(|t| &t.0))
            .or(e.event_time.as_ref().map(|t| &t.0))
            .or(e.first_timestamp.as_ref().map(|t| &t.0))
            .and_then(time),
    }
}

/// The container an Event's `fieldPath` names (`spec.containers{gateway}`, or the init or
/// ephemeral form); `None` for Pod-level Events.
fn container_of_field_path(path: &str) -> Option<String> {
    [
        "spec.containers{",
        "spec.initContainers{",
        "spec.ephemeralContainers{",
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(prefix))
    .and_then(|rest| rest.strip_suffix('}'))
    .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_containers_come_from_the_field_path() {
        assert_eq!(
            container_of_field_path("spec.containers{gateway}").as_deref(),
            Some("gateway")
        );
        assert_eq!(
            container_of_field_path("spec.initContainers{setup}").as_deref(),
            Some("setup")
        );
        assert_eq!(container_of_field_path(""), None);
        assert_eq!(container_of_field_path("status"), None);
    }
}
