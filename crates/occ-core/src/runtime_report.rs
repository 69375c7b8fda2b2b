//! What runs for one revision, in the reference's runtime-description shape
//! (`pods[].containers[]` with events), whichever Compute Driver runs it.
//!
//! Kubernetes fills it from the revision's Pods and their Events. The host Drivers (process,
//! SSH) have one workload per Agent, the gateway, which they present as one "Pod" holding one
//! `gateway` container: the Pod's `uid` names the exact process (`<pid>-<start time>`) or the
//! systemd unit, its phase is `Running` while that process (or unit) runs, and restarts, last
//! exit and events come from what occ recorded about the gateway ([`RuntimeReport::with_recorded`]),
//! since those Drivers keep no history of their own.
//!
//! A report leaves occ only through [`RuntimeReport::sanitized`]: every free text redacted,
//! every name checked against the published pattern, every string and list cut to the
//! published bounds.

use crate::Timestamp;
use crate::redact::Redactor;
use crate::resource::AgentRuntime;

/// At most this many Pods, containers per Pod (the published `maxItems`).
pub const MAX_PODS: usize = 16;
/// At most this many events per Pod.
pub const MAX_EVENTS: usize = 100;
const MAX_NAME: usize = 253;
const MAX_UID: usize = 64;
const MAX_PHASE: usize = 64;
const MAX_REASON: usize = 128;
const MAX_MESSAGE: usize = 2048;

/// The runtime of one revision.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeReport {
    /// The revision's workloads.
    pub pods: Vec<RuntimePod>,
    /// Whether the Driver's platform keeps the workloads' history itself (Kubernetes: restart
    /// counts, last termination, Events); otherwise occ's records fill it
    /// ([`RuntimeReport::with_recorded`]).
    #[serde(default)]
    pub history_from_driver: bool,
}

/// Which workload a Pod runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadRole {
    /// The OpenClaw gateway.
    Gateway,
    /// A dedicated Agent's harness.
    Agent,
}

/// Which cluster (plane) runs it: host Drivers and single-cluster Kubernetes run everything
/// on the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plane {
    /// The cluster (or host) occ controls directly.
    Control,
    /// A separate execution cluster.
    Execution,
}

/// One workload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimePod {
    /// What it runs.
    pub role: WorkloadRole,
    /// Where.
    pub cluster: Plane,
    /// DNS-label style name.
    pub name: String,
    /// The exact instance (`[A-Za-z0-9-]+`).
    pub uid: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub phase: String,
    /// Serving: the Kubernetes `Ready` condition, or the gateway answering the handshake.
    pub ready: bool,
    /// When the instance was created.
    pub created_at: Option<Timestamp>,
    /// Its containers.
    pub containers: Vec<RuntimeContainer>,
    /// What happened to it, oldest first.
    pub events: Vec<RuntimeEvent>,
}

/// A container's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// Not started yet (or waiting to be restarted).
    Waiting,
    /// Running.
    Running,
    /// Exited.
    Terminated,
    /// Not known.
    Unknown,
}

/// One container of a workload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeContainer {
    /// DNS-label style name.
    pub name: String,
    /// Its state.
    pub state: ContainerState,
    /// Why it is in that state (`CrashLoopBackOff`, `Error`, a unit's sub-state).
    pub reason: Option<String>,
    /// Serving.
    pub ready: bool,
    /// How often it was started again.
    pub restart_count: u64,
    /// When the current run started.
    pub started_at: Option<Timestamp>,
    /// How the previous run ended.
    pub last_termination: Option<Termination>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Termination {
    /// `Error`, `OOMKilled`, `exit status 1`, `signal 9 (SIGKILL)`.
    pub reason: Option<String>,
    /// The exit code, when it exited (not when signalled).
    pub exit_code: Option<i32>,
    /// When.
    pub finished_at: Option<Timestamp>,
}

/// Whether an event is routine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something went wrong.
    Warning,
}

/// Something that happened to a workload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeEvent {
    /// Routine or not.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The container it concerns (`None`: the whole workload).
    pub container: Option<String>,
    /// A short machine-readable reason (`Started`, `BackOff`, `GatewayExited`).
    pub reason: String,
    /// What happened.
    pub message: String,
    /// How many times (at least 1).
    pub count: u64,
    /// When it was last seen.
    pub last_observed_at: Option<Timestamp>,
}

/// The container name the host Drivers give the gateway process.
pub const GATEWAY_CONTAINER: &str = "gateway";

impl RuntimeReport {
    /// Adds what occ recorded about the Agent's gateway (restarts, last exit) to the host
    /// Drivers' gateway Pod of the same revision: they report only what runs now. A report
    /// whose history comes from the Driver is left as it is.
    pub fn with_recorded(mut self, recorded: Option<&AgentRuntime>, revision_id: &str) -> Self {
        if self.history_from_driver {
            return self;
        }
        let Some(recorded) = recorded.filter(|r| r.revision_id.as_str() == revision_id) else {
            return self;
        };
        for pod in &mut self.pods {
            if pod.role != WorkloadRole::Gateway {
                continue;
            }
            for container in &mut pod.containers {
                container.restart_count = recorded.restarts;
                container.last_termination = recorded.last_exit_at.map(|at| Termination {
                    reason: recorded.last_exit_status.clone(),
                    exit_code: recorded
                        .last_exit_status
                        .as_deref()
                        .and_then(|s| s.strip_prefix("exit status "))
                        .and_then(|code| code.trim().parse().ok()),
                    finished_at: Some(at),
                });
            }
            if let Some(at) = recorded.last_exit_at {
                pod.events.push(RuntimeEvent {
                    kind: EventType::Warning,
                    container: Some(GATEWAY_CONTAINER.into()),
                    reason: "GatewayExited".into(),
                    message: match &recorded.last_exit_status {
                        Some(status) => format!("the gateway exited ({status})"),
                        None => "the gateway was found down".into(),
                    },
                    count: 1,
                    last_observed_at: Some(at),
                });
            }
            if recorded.restarts > 0 {
                pod.events.push(RuntimeEvent {
                    kind: EventType::Normal,
                    container: Some(GATEWAY_CONTAINER.into()),
                    reason: "GatewayRestarted".into(),
                    message: "occ started the gateway again after finding it down".into(),
                    count: recorded.restarts,
                    last_observed_at: Some(recorded.observed_at),
                });
            }
            pod.events.sort_by_key(|e| e.last_observed_at);
        }
        self
    }

    /// The report as it may leave occ: free text redacted, names that do not match the
    /// published patterns dropped (a Pod) or cleared (an event's container), every string and
    /// list cut to the published bounds (the newest events kept).
    pub fn sanitized(self, redactor: &Redactor) -> Self {
        let text = |s: String, max: usize| bounded(&redactor.line(&s), max);
        let pods = self
            .pods
            .into_iter()
            .filter(|p| dns_name(&p.name) && uid(&p.uid))
            .take(MAX_PODS)
            .map(|pod| {
                let skip = pod.events.len().saturating_sub(MAX_EVENTS);
                RuntimePod {
                    phase: bounded(&pod.phase, MAX_PHASE),
                    containers: pod
                        .containers
                        .into_iter()
                        .filter(|c| dns_name(&c.name))
                        .take(MAX_PODS)
                        .map(|c| RuntimeContainer {
                            reason: c.reason.map(|r| text(r, MAX_REASON)),
                            last_termination: c.last_termination.map(|t| Termination {
                                reason: t.reason.map(|r| text(r, MAX_REASON)),
                                ..t
                            }),
                            ..c
                        })
                        .collect(),
                    events: pod
                        .events
                        .into_iter()
                        .skip(skip)
                        .map(|e| RuntimeEvent {
                            container: e.container.filter(|c| dns_name(c)),
                            reason: text(e.reason, MAX_REASON),
                            message: text(e.message, MAX_MESSAGE),
                            count: e.count.max(1),
                            ..e
                        })
                        .collect(),
                    ..pod
                }
            })
            .collect();
        Self {
            pods,
            history_from_driver: self.history_from_driver,
        }
    }
}

/// `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`, at most 253 characters.
pub fn dns_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-' || *b == b'.')
}

/// `^[A-Za-z0-9-]+$`, at most 64 characters.
fn uid(uid: &str) -> bool {
    !uid.is_empty()
        && uid.len() <= MAX_UID
        && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `text` cut to at most `max` characters (on a character boundary).
fn bounded(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ObservedRuntimeState;
    use crate::{AgentId, NamespaceId, RevisionId};

    fn pod(name: &str) -> RuntimePod {
        RuntimePod {
            role: WorkloadRole::Gateway,
            cluster: Plane::Control,
            name: name.into(),
            uid: "123-456".into(),
            phase: "Running".into(),
            ready: true,
            created_at: None,
            containers: vec![RuntimeContainer {
                name: GATEWAY_CONTAINER.into(),
                state: ContainerState::Running,
                reason: None,
                ready: true,
                restart_count: 0,
                started_at: None,
                last_termination: None,
            }],
            events: Vec::new(),
        }
    }

    #[test]
    fn names_follow_the_published_pattern() {
        assert!(dns_name("rev-1.gateway"));
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(254)] {
            assert!(!dns_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn sanitizing_redacts_bounds_and_drops_invalid_names() {
        let mut good = pod("gw");
        good.events = (0..150)
            .map(|i| RuntimeEvent {
                kind: EventType::Warning,
                container: Some("Bad_Name".into()),
                reason: "r".repeat(300),
                message: format!("{i} token=hunter2hunter2 Bearer abcdefghijklmnop"),
                count: 0,
                last_observed_at: None,
            })
            .collect();
        let report = RuntimeReport {
            pods: vec![good, pod("Not_A_Name")],
            history_from_driver: false,
        }
        .sanitized(&Redactor::new(["hunter2hunter2"]));
        assert_eq!(report.pods.len(), 1);
        let events = &report.pods[0].events;
        assert_eq!(events.len(), MAX_EVENTS);
        assert!(events[0].message.starts_with("50 "), "newest kept");
        for e in events {
            assert!(!e.message.contains("hunter2"), "{}", e.message);
            assert!(!e.message.contains("abcdefghijklmnop"), "{}", e.message);
            assert_eq!(e.reason.chars().count(), MAX_REASON);
            assert_eq!((e.count, e.container.as_deref()), (1, None));
        }
    }

    #[test]
    fn recorded_restarts_and_exits_fill_the_gateway_of_the_same_revision() {
        let revision_id = RevisionId::generate();
        let at = Timestamp::from_unix_millis(1_764_431_784_000).unwrap();
        let recorded = AgentRuntime {
            namespace_id: NamespaceId::generate(),
            agent_id: AgentId::generate(),
            revision_id: revision_id.clone(),
            state: ObservedRuntimeState::Running,
            restarts: 2,
            last_exit_at: Some(at),
            last_exit_status: Some("exit status 3".into()),
            observed_at: at,
        };
        let report = RuntimeReport {
            pods: vec![pod("gw")],
            history_from_driver: false,
        };
        let kubernetes = RuntimeReport {
            history_from_driver: true,
            ..report.clone()
        };
        assert_eq!(
            kubernetes
                .clone()
                .with_recorded(Some(&recorded), revision_id.as_str()),
            kubernetes,
            "the Driver's own history is not replaced"
        );
        let other = report
            .clone()
            .with_recorded(Some(&recorded), RevisionId::generate().as_str());
        assert_eq!(other, report, "another revision's record is not this one's");
        let filled = report.with_recorded(Some(&recorded), revision_id.as_str());
        let container = &filled.pods[0].containers[0];
        assert_eq!(container.restart_count, 2);
        let last = container.last_termination.as_ref().expect("last exit");
        assert_eq!((last.exit_code, last.finished_at), (Some(3), Some(at)));
        let reasons: Vec<_> = filled.pods[0].events.iter().map(|e| &e.reason).collect();
        assert_eq!(reasons, ["GatewayExited", "GatewayRestarted"]);
    }
}
