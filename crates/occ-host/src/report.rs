//! The runtime report of a revision on this host ([`crate::Host::runtime_report`]): the one
//! gateway of the Agent presented as one Pod with one `gateway` container (see
//! `occ_core::runtime_report` for the mapping). Only what runs now is read here; restarts and
//! the last exit are what occ recorded, added by the controller.

use occ_core::runtime_report::{
    ContainerState, EventType, GATEWAY_CONTAINER, Plane, RuntimeContainer, RuntimeEvent,
    RuntimePod, WorkloadRole,
};
use occ_core::{RevisionId, Timestamp};

use crate::detached::RecordedGateway;

/// What the host knows of a revision's gateway, whichever supervisor runs it.
pub(crate) enum Observed {
    /// A process occ started (detached supervision).
    Process(RecordedGateway),
    /// A systemd unit and its `systemctl is-active` state.
    Unit {
        /// `occ-gateway-….service`
        name: String,
        /// `active`, `activating`, `failed`, `inactive`, …
        state: String,
        /// When the unit file was last written.
        installed_at: Option<Timestamp>,
    },
}

/// The gateway Pod of `rev` as observed; `ready` is whether it answers the handshake.
pub(crate) fn gateway_pod(rev: &RevisionId, observed: Observed, ready: bool) -> RuntimePod {
    let (uid, phase, state, reason, started_at, event) = match observed {
        Observed::Process(g) => {
            let (phase, state, reason) = match (g.live, g.stop_requested) {
                (true, _) => ("Running", ContainerState::Running, None),
                (false, true) => ("Succeeded", ContainerState::Terminated, Some("Stopped")),
                (false, false) => ("Failed", ContainerState::Terminated, Some("Exited")),
            };
            let event = RuntimeEvent {
                kind: EventType::Normal,
                container: Some(GATEWAY_CONTAINER.into()),
                reason: "Started".into(),
                message: format!("occ started the gateway as process {}", g.pid),
                count: 1,
                last_observed_at: g.started_at,
            };
            (
                format!("{}-{}", g.pid, g.start_time),
                phase,
                state,
                reason.map(str::to_owned),
                g.started_at,
                event,
            )
        }
        Observed::Unit {
            name,
            state: unit_state,
            installed_at,
        } => {
            let (phase, state) = match unit_state.as_str() {
                "active" | "reloading" => ("Running", ContainerState::Running),
                "activating" => ("Pending", ContainerState::Waiting),
                "failed" => ("Failed", ContainerState::Terminated),
                "inactive" | "deactivating" => ("Succeeded", ContainerState::Terminated),
                _ => ("Unknown", ContainerState::Unknown),
            };
            let event = RuntimeEvent {
                kind: if phase == "Failed" {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                container: Some(GATEWAY_CONTAINER.into()),
                reason: "UnitState".into(),
                message: format!("systemd unit {name} is {unit_state}"),
                count: 1,
                last_observed_at: Some(Timestamp::now()),
            };
            let uid = name.trim_end_matches(".service").replace('.', "-");
            (uid, phase, state, Some(unit_state), installed_at, event)
        }
    };
    RuntimePod {
        role: WorkloadRole::Gateway,
        cluster: Plane::Control,
        name: pod_name(rev),
        uid,
        phase: phase.into(),
        ready,
        created_at: started_at,
        containers: vec![RuntimeContainer {
            name: GATEWAY_CONTAINER.into(),
            state,
            reason,
            ready,
            restart_count: 0,
            started_at,
            last_termination: None,
        }],
        events: vec![event],
    }
}

/// The container name of a dedicated revision's harness.
pub const HARNESS_CONTAINER: &str = "harness";

/// The harness Pod of a dedicated `rev` (its `occ harness-launch` process as occ recorded it):
/// role `agent`, one `harness` container; `ready` is whether it runs its app-server and node.
pub(crate) fn harness_pod(rev: &RevisionId, harness: RecordedGateway, ready: bool) -> RuntimePod {
    let pid = harness.pid;
    let mut pod = gateway_pod(rev, Observed::Process(harness), ready);
    pod.role = WorkloadRole::Agent;
    pod.name = format!("{}-harness", pod_name(rev));
    for container in &mut pod.containers {
        container.name = HARNESS_CONTAINER.into();
    }
    for event in &mut pod.events {
        event.container = Some(HARNESS_CONTAINER.into());
        event.message = format!("occ started the harness as process {pid}");
    }
    pod
}

/// `rev_…` as a DNS-label style name (`rev-…`).
fn pod_name(rev: &RevisionId) -> String {
    rev.as_str().replace('_', "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::runtime_report::dns_name;

    #[test]
    fn a_crashed_process_is_a_failed_pod_and_a_unit_maps_its_state() {
        let rev = RevisionId::generate();
        let crashed = gateway_pod(
            &rev,
            Observed::Process(RecordedGateway {
                pid: 42,
                start_time: 7,
                live: false,
                stop_requested: false,
                started_at: None,
            }),
            false,
        );
        assert!(dns_name(&crashed.name), "{}", crashed.name);
        assert_eq!(
            (crashed.uid.as_str(), crashed.phase.as_str()),
            ("42-7", "Failed")
        );
        assert_eq!(crashed.containers[0].state, ContainerState::Terminated);
        let unit = gateway_pod(
            &rev,
            Observed::Unit {
                name: "occ-gateway-0123456789ab.service".into(),
                state: "activating".into(),
                installed_at: None,
            },
            false,
        );
        assert_eq!(unit.uid, "occ-gateway-0123456789ab");
        assert_eq!(unit.phase, "Pending");
        assert_eq!(unit.containers[0].reason.as_deref(), Some("activating"));
    }
}
