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

/// How a revision's gateway is contained, as the report states it.
pub(crate) enum Containment<'a> {
    /// Under bubblewrap with these limits (see [`crate::sandbox`]), in a private network or
    /// on the host's.
    Sandbox {
        limits: &'a crate::sandbox::WorkloadLimits,
        private_network: bool,
    },
    /// As the Agent's own Unix account, without a sandbox.
    Account,
    /// As occ's own user, seeing what it sees (`OCC_PROCESS_ISOLATION=none`).
    None,
}

/// Events that say how the gateway of a revision runs: its containment, and how each model key
/// bound from a Secret reaches the model (`proxied`: the providers occ's credential proxy
/// serves; every other bound variable is in the gateway's environment). Names only, never a
/// value.
pub(crate) fn delivery_events(
    containment: Containment<'_>,
    bound: &std::collections::BTreeSet<String>,
    proxied: &[crate::credential_proxy::ProxiedProvider],
    at: Option<Timestamp>,
) -> Vec<RuntimeEvent> {
    let event = |kind, reason: &str, message: String| RuntimeEvent {
        kind,
        container: Some(GATEWAY_CONTAINER.into()),
        reason: reason.into(),
        message,
        count: 1,
        last_observed_at: at,
    };
    let mut events = vec![match containment {
        Containment::Sandbox {
            limits,
            private_network,
        } => event(
            EventType::Normal,
            "Contained",
            format!(
                "the gateway runs under bubblewrap: its own user, mount, PID, IPC and UTS namespaces, {}, no capabilities, no_new_privs, a seccomp filter; limits (0 = occ's own): data {} MiB, {} processes, {} open files, resident {} MiB (in its own cgroup, where occ can make one)",
                if private_network {
                    "a private network (reached through occ's relay; out only to the loopback endpoints its configuration names)"
                } else {
                    "the host's network"
                },
                limits.memory_mib,
                limits.processes,
                limits.open_files,
                limits.resident_mib
            ),
        ),
        Containment::Account => event(
            EventType::Normal,
            "Contained",
            "the gateway runs as the Agent's own Unix account, without a sandbox".into(),
        ),
        Containment::None => event(
            EventType::Warning,
            "Uncontained",
            "the gateway runs as occ's own user and sees what it sees (OCC_PROCESS_ISOLATION=none)"
                .into(),
        ),
    }];
    for variable in bound {
        let message = match proxied.iter().find(|p| &p.variable == variable) {
            Some(proxied) => format!(
                "{variable} (the key of model provider {}) never enters the gateway: it holds a placeholder and occ's credential proxy adds the key to each request",
                proxied.provider
            ),
            None => format!("{variable} is delivered in the gateway's environment"),
        };
        events.push(event(EventType::Normal, "SecretDelivery", message));
    }
    events
}

/// How a dedicated revision's harness credential reaches the model (names only, never a value).
pub(crate) fn harness_key_event(proxied: bool, at: Option<Timestamp>) -> RuntimeEvent {
    RuntimeEvent {
        kind: EventType::Normal,
        container: Some(HARNESS_CONTAINER.into()),
        reason: "SecretDelivery".into(),
        message: if proxied {
            "the harness's API key never enters the harness: Codex holds a placeholder and occ's credential proxy adds the key to each request"
        } else {
            "the harness's credential is delivered in a private file of its run directory"
        }
        .into(),
        count: 1,
        last_observed_at: at,
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

    /// The report says how the gateway is contained and how each bound key reaches the
    /// model, by name only.
    #[test]
    fn delivery_events_name_the_containment_and_each_bound_keys_path() {
        let limits = crate::sandbox::WorkloadLimits::default();
        let bound = ["OPENAI_API_KEY", "TELEGRAM_TOKEN"]
            .map(str::to_owned)
            .into_iter()
            .collect();
        let proxied = vec![crate::credential_proxy::ProxiedProvider {
            provider: "openai".to_owned(),
            variable: "OPENAI_API_KEY".to_owned(),
            upstream: "https://api.openai.com/v1".to_owned(),
            header: crate::credential_proxy::KeyHeader::Bearer,
        }];
        let contained = Containment::Sandbox {
            limits: &limits,
            private_network: true,
        };
        let events = delivery_events(contained, &bound, &proxied, None);
        let lines: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e.reason.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].0, "Contained");
        assert!(lines[0].1.contains("seccomp filter"), "{lines:?}");
        assert!(lines[0].1.contains("a private network"), "{lines:?}");
        assert!(lines[0].1.contains("data 16384 MiB"), "{lines:?}");
        assert_eq!(lines[1].0, "SecretDelivery");
        assert!(
            lines[1]
                .1
                .starts_with("OPENAI_API_KEY (the key of model provider openai) never enters"),
            "{lines:?}"
        );
        assert_eq!(
            lines[2].1,
            "TELEGRAM_TOKEN is delivered in the gateway's environment"
        );
        let uncontained = delivery_events(Containment::None, &bound, &[], None);
        assert_eq!(uncontained[0].reason, "Uncontained");
        assert!(matches!(uncontained[0].kind, EventType::Warning));
    }
}
