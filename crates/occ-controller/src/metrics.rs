//! Prometheus metrics (lifecycle.md §E.1), served on a private listener by the `occ` binary.
//!
//! Families carry `service="api|worker"` (`occ dev` serves both sides, each with its own label)
//! and never tenant, Agent or request labels. Counters
//! and histograms are recorded in process; the worker's gauges (pending work, oldest pending
//! age, Agents per lifecycle state) are read from the database at scrape time by one
//! read-only statement, and a scrape fails rather than report stale values.

use std::sync::Mutex;
use std::time::Duration;

use occ_core::work::WorkTarget;
use occ_store::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Which process reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `occ serve`
    Api,
    /// `occ worker`
    Worker,
    /// `occ dev`: the API and the worker in one process, each family labelled with the side
    /// that records it, so a dashboard built on `occ dev` works unchanged in production.
    Dev,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: String,
    status_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    work_kind: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    work_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    lifecycle_state: String,
}

const WORK_KINDS: [&str; 5] = [
    "namespace_ensure",
    "namespace_delete",
    "agent_revision",
    "agent_stop",
    "agent_delete",
];
const OUTCOMES: [&str; 6] = [
    "success",
    "pending",
    "retry",
    "permanent",
    "claim_lost",
    "error",
];
/// The lifecycle states of the `occ_agents` gauge.
pub const LIFECYCLE_STATES: [&str; 6] = [
    "draft",
    "deploying",
    "running",
    "stopping",
    "stopped",
    "failed",
];

/// The metric label of a work kind.
pub fn work_kind(target: WorkTarget) -> &'static str {
    match target {
        WorkTarget::NamespaceReady => "namespace_ensure",
        WorkTarget::NamespaceDeleted => "namespace_delete",
        WorkTarget::RevisionReconcile | WorkTarget::RevisionMaintenance => "agent_revision",
        WorkTarget::AgentStopped => "agent_stop",
        WorkTarget::AgentDeleted => "agent_delete",
        WorkTarget::AgentProvisioning => "agent_provisioning",
    }
}

/// One process's metrics.
pub struct Metrics {
    service: Service,
    registry: Mutex<Registry>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabels, Histogram>,
    attempts: Family<AttemptLabels, Counter>,
    attempt_duration: Family<KindLabels, Histogram>,
    operation_duration: Family<OperationLabels, Histogram>,
    gateway_restarts: Counter,
    rollbacks: Counter,
    work_pending: Gauge,
    oldest_pending: Gauge<f64, std::sync::atomic::AtomicU64>,
    agents: Family<StateLabels, Gauge>,
}

impl Metrics {
    /// Families for `service`, label sets pre-initialized at zero where bounded.
    pub fn new(service: Service) -> Self {
        let mut registry = Registry::with_prefix("occ");
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_duration = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        let attempts = Family::<AttemptLabels, Counter>::default();
        let attempt_duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0,
            ])
        });
        let operation_duration = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0,
                240.0, 300.0, 450.0, 600.0, 900.0, 1800.0,
            ])
        });
        let gateway_restarts = Counter::default();
        let rollbacks = Counter::default();
        let work_pending = Gauge::default();
        let oldest_pending = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        let agents = Family::<StateLabels, Gauge>::default();
        if service != Service::Worker {
            let registry = registry.sub_registry_with_label(("service".into(), "api".into()));
            registry.register(
                "http_requests",
                "HTTP requests by route template, method and status class",
                http_requests.clone(),
            );
            registry.register(
                "http_request_duration_seconds",
                "HTTP request duration by route template and method",
                http_duration.clone(),
            );
        }
        if service != Service::Api {
            let registry = registry.sub_registry_with_label(("service".into(), "worker".into()));
            for kind in WORK_KINDS {
                for outcome in OUTCOMES {
                    let _ = attempts.get_or_create(&AttemptLabels {
                        work_kind: kind.into(),
                        outcome: outcome.into(),
                    });
                }
            }
            for state in LIFECYCLE_STATES {
                let _ = agents.get_or_create(&StateLabels {
                    lifecycle_state: state.into(),
                });
            }
            registry.register(
                "reconciliation_attempts",
                "Claimed work passes by work kind and outcome",
                attempts.clone(),
            );
            registry.register(
                "reconciliation_attempt_duration_seconds",
                "Duration of claimed work passes",
                attempt_duration.clone(),
            );
            registry.register(
                "agent_operation_duration_seconds",
                "Deploy and stop duration from admission to completion",
                operation_duration.clone(),
            );
            registry.register(
                "gateway_restarts",
                "Crashed active gateways restarted by maintenance passes",
                gateway_restarts.clone(),
            );
            registry.register(
                "revision_rollbacks",
                "Failed activations after which the previous revision was restored",
                rollbacks.clone(),
            );
            registry.register(
                "work_pending",
                "Queued and claimed work items, delayed ones included",
                work_pending.clone(),
            );
            registry.register(
                "work_oldest_pending_age_seconds",
                "Age since admission of the oldest pending work item",
                oldest_pending.clone(),
            );
            registry.register("agents", "Agents by lifecycle state", agents.clone());
        }
        Self {
            service,
            registry: Mutex::new(registry),
            http_requests,
            http_duration,
            attempts,
            attempt_duration,
            operation_duration,
            gateway_restarts,
            rollbacks,
            work_pending,
            oldest_pending,
            agents,
        }
    }

    /// Records one HTTP request (`route` is the matched template, or `unmatched`).
    pub fn record_http(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let method = match method {
            "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => method,
            _ => "OTHER",
        };
        let status_class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            500..=599 => "5xx",
            _ => "other",
        };
        self.http_requests
            .get_or_create(&HttpLabels {
                route: route.into(),
                method: method.into(),
                status_class: status_class.into(),
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                route: route.into(),
                method: method.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records one claimed worker pass.
    pub fn record_pass(&self, target: WorkTarget, outcome: &str, elapsed: Duration) {
        let kind = work_kind(target);
        self.attempts
            .get_or_create(&AttemptLabels {
                work_kind: kind.into(),
                outcome: outcome.into(),
            })
            .inc();
        self.attempt_duration
            .get_or_create(&KindLabels {
                work_kind: kind.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records a completed deploy or stop, measured from its admission.
    pub fn record_agent_operation(&self, operation: &str, since_admission: Duration) {
        self.operation_duration
            .get_or_create(&OperationLabels {
                operation: operation.into(),
            })
            .observe(since_admission.as_secs_f64());
    }

    /// Records a failed activation after which the previous revision was restored.
    pub fn record_rollback(&self) {
        self.rollbacks.inc();
    }

    /// Records a crashed gateway restarted by maintenance.
    pub fn record_gateway_restart(&self) {
        self.gateway_restarts.inc();
    }

    /// The current exposition (OpenMetrics text). The worker reads its gauges from `store`
    /// first; if that fails the scrape fails.
    pub async fn render(&self, store: Option<&Store>) -> Result<String, occ_core::Error> {
        if self.service != Service::Api
            && let Some(store) = store
        {
            let snapshot = store
                .metrics_snapshot()
                .await
                .map_err(|e| occ_core::Error::unavailable(e.to_string()))?;
            self.work_pending
                .set(i64::try_from(snapshot.pending).unwrap_or(i64::MAX));
            self.oldest_pending
                .set(snapshot.oldest_pending_age.as_secs_f64());
            for state in LIFECYCLE_STATES {
                let n = snapshot.agents.get(state).copied().unwrap_or(0);
                self.agents
                    .get_or_create(&StateLabels {
                        lifecycle_state: state.into(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        let registry = self
            .registry
            .lock()
            .map_err(|_| occ_core::Error::unavailable("metrics registry poisoned"))?;
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .map_err(|e| occ_core::Error::unavailable(e.to_string()))?;
        Ok(out)
    }
}
