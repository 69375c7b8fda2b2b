//! Gateway exits reported by the Compute Driver (as the process Driver reports the gateways it
//! started): logged at WARN, visible on the Agent's runtime route within moments as
//! `restarting`, restarted by the maintenance pass brought forward (long before its interval),
//! counted and audited; an exit of a gateway that should not serve changes nothing.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use occ_controller::worker::Worker;
use occ_core::ReasonCode;
use occ_drivers::compute::{AgentTarget, ComputeError};
use occ_store::Backend;
use occ_testkit::compute::{FakeCompute, Scripted, Verb};
use serde_json::Value;

use super::{Fixture, agent_id, rev_id, settings};

/// Log lines written while it is the thread's default subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

impl Fixture {
    async fn runtime(&self, agent: &str) -> Value {
        let r = self
            .call(
                Method::GET,
                &format!("/namespaces/{}/agents/{agent}/runtime", self.ns),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["data"].clone()
    }

    /// Polls the runtime route until `done` holds (at most `limit`); the last view.
    async fn runtime_until(
        &self,
        agent: &str,
        limit: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let view = self.runtime(agent).await;
            if done(&view) || Instant::now() >= deadline {
                return view;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Crashes `agent`'s gateway without a report, every restart failing with `code` until the
    /// script is cleared (however slow the machine, the test sees the gateway down before it
    /// comes back), and runs passes until the record shows it down; the last view.
    async fn crash_with_failing_restarts(&self, agent: &str, code: ReasonCode) -> Value {
        for _ in 0..1000 {
            self.compute.script(
                Verb::Activate,
                Scripted::Fail(ComputeError::transient(code, "not yet")),
            );
        }
        self.compute.crash(&agent_id(agent));
        self.passes_until(agent, |v| v["state"] != "running").await
    }

    /// Runs the due passes every 100 ms until `done` holds of the runtime view (at most 50
    /// rounds); the last view.
    async fn passes_until(&self, agent: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut view = self.runtime(agent).await;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.drain().await;
            view = self.runtime(agent).await;
            if done(&view) {
                break;
            }
        }
        view
    }

    fn target(&self, agent: &str) -> AgentTarget {
        AgentTarget {
            namespace_id: self.app.default_ns.clone(),
            agent_id: agent_id(agent),
            service_principal_id: format!("service-agent-{agent}").parse().expect("principal"),
        }
    }
}

// Current-thread runtimes: the worker's tasks log on the test's thread, into the capture.
#[tokio::test]
async fn a_reported_exit_is_visible_at_once_restarted_counted_and_audited_sqlite() {
    reported_exit(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_reported_exit_is_visible_at_once_restarted_counted_and_audited_postgres() {
    reported_exit(Backend::Postgres).await;
}

async fn reported_exit(backend: Backend) {
    let logs = Captured::default();
    let _capture = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer({
                let logs = logs.clone();
                move || logs.clone()
            })
            .with_ansi(false)
            .finish(),
    );
    // A maintenance interval far beyond the test: only the exit report can bring the pass on.
    let compute = FakeCompute::new()
        .with_exit_reports()
        .with_maintenance(Duration::from_secs(600));
    let f = Fixture::with(backend, compute, settings()).await;
    let (_, agent) = f.agent("a1").await;
    // Never deployed: nothing runs, nothing is meant to.
    assert_eq!(f.runtime(&agent).await["state"], "stopped");
    let rev = f.deploy(&agent).await;
    // Admitted, not observed yet.
    assert_eq!(f.runtime(&agent).await["state"], "unknown");
    f.drain().await;
    let view = f.runtime(&agent).await;
    assert_eq!(
        (&view["state"], &view["restarts"], &view["revisionId"]),
        (
            &Value::from("running"),
            &Value::from(0),
            &Value::from(rev.as_str())
        ),
        "{view}"
    );

    let worker = Arc::new(Worker::new(
        f.app.controller.clone(),
        f.compute.clone(),
        settings(),
    ));
    let (shutdown, stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));
    // Let it start (and subscribe to exit reports: an exit before that is the maintenance
    // pass's to find).
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The first restart fails, so `restarting` stays visible until the retry succeeds.
    f.compute.script(
        Verb::Activate,
        Scripted::Fail(ComputeError::transient(
            ReasonCode::RuntimeStartupFailed,
            "the gateway exited during startup",
        )),
    );
    let started = Instant::now();
    assert!(f.compute.exit(&f.target(&agent), "signal: 9 (SIGKILL)"));
    let restarting = f
        .runtime_until(&agent, Duration::from_secs(5), |v| {
            v["state"] == "restarting"
        })
        .await;
    assert_eq!(restarting["state"], "restarting", "{restarting}");
    assert_eq!(restarting["lastExitStatus"], "signal: 9 (SIGKILL)");
    assert!(restarting["lastExitAt"].is_string(), "{restarting}");
    let restarted = f
        .runtime_until(&agent, Duration::from_secs(10), |v| {
            v["state"] == "running" && v["restarts"] == 1
        })
        .await;
    assert_eq!(
        (&restarted["state"], &restarted["restarts"]),
        (&Value::from("running"), &Value::from(1)),
        "{restarted}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(restarted["lastExitAt"], restarting["lastExitAt"]);
    assert_eq!(restarted["lastExitStatus"], "signal: 9 (SIGKILL)");
    assert_eq!(f.compute.serving(&agent_id(&agent)), Some(rev_id(&rev)));

    // Logged at WARN with the Agent, its revision and the exit status.
    let text = logs.text();
    let warn = text
        .lines()
        .find(|l| l.contains("WARN") && l.contains("gateway exited unexpectedly"))
        .unwrap_or_else(|| panic!("no WARN for the exit in:\n{text}"));
    for expected in [
        format!("agent_id={agent}"),
        format!("namespace_id={}", f.ns),
        format!("revision_id={rev}"),
        "revision=1".to_owned(),
        "exit_status=signal: 9 (SIGKILL)".to_owned(),
    ] {
        assert!(warn.contains(&expected), "{expected} missing from: {warn}");
    }

    // The restart is audited by the maintenance pass, with the exit it answered.
    let mut tx = f.app.store.begin_read().await.unwrap();
    let restart = tx
        .audit_list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.action == "openclaw.agents.lifecycle.restart")
        .expect("a restart audit event");
    drop(tx);
    assert_eq!(restart.details["reasonCode"], "GATEWAY_RESTARTED");
    assert_eq!(restart.details["agentId"], agent.as_str());
    assert_eq!(restart.details["restarts"], 1);
    assert_eq!(restart.details["lastExitStatus"], "signal: 9 (SIGKILL)");

    // An exit of a gateway that should not serve (the Agent is stopped) is not a crash.
    shutdown.send(true).unwrap();
    running.await.unwrap().unwrap();
    f.stop(&agent).await;
    f.drain().await;
    assert_eq!(f.runtime(&agent).await["state"], "stopped");
    let exit = occ_drivers::compute::GatewayExit {
        agent: f.target(&agent),
        revision_id: rev_id(&rev),
        pid: 1,
        status: "exit status: 0".into(),
        at: occ_core::Timestamp::now(),
    };
    f.worker.gateway_exited(&exit).await.unwrap();
    let after = f.runtime(&agent).await;
    assert_eq!(
        (&after["state"], &after["restarts"]),
        (&Value::from("stopped"), &Value::from(1)),
        "{after}"
    );
}

/// Without exit reports the maintenance pass finds the gateway down: restarting while it
/// cannot start it, then running with the restart counted and the time it was found down.
#[tokio::test]
async fn the_maintenance_pass_records_a_gateway_it_found_down() {
    let f = Fixture::with(
        Backend::Postgres,
        FakeCompute::new().with_maintenance(Duration::from_millis(100)),
        settings(),
    )
    .await;
    let (_, agent) = f.agent("a1").await;
    f.deploy(&agent).await;
    f.drain().await;
    let down = f
        .crash_with_failing_restarts(&agent, ReasonCode::RuntimeStartupFailed)
        .await;
    assert_eq!(
        (&down["state"], &down["restarts"], &down["lastExitStatus"]),
        (&Value::from("restarting"), &Value::from(0), &Value::Null),
        "{down}"
    );
    assert!(down["lastExitAt"].is_string(), "{down}");
    f.compute.clear_script(Verb::Activate);
    let restarted = f.passes_until(&agent, |v| v["restarts"] == 1).await;
    assert_eq!(
        (
            &restarted["state"],
            &restarted["restarts"],
            &restarted["lastExitAt"]
        ),
        (
            &Value::from("running"),
            &Value::from(1),
            &down["lastExitAt"]
        ),
        "{restarted}"
    );
}

/// A restart the pass that made it could not settle (its activation failed after the gateway
/// was started, or its claim was lost) still counts: the next pass finds the gateway serving
/// while the record says it is down, and records the restart, once.
#[tokio::test]
async fn a_restart_an_unsettled_pass_made_is_counted_once() {
    let f = Fixture::with(
        Backend::Sqlite,
        FakeCompute::new().with_maintenance(Duration::from_millis(100)),
        settings(),
    )
    .await;
    let (_, agent) = f.agent("a1").await;
    let rev = f.deploy(&agent).await;
    f.drain().await;
    let down = f
        .crash_with_failing_restarts(&agent, ReasonCode::GatewayNotReady)
        .await;
    assert_eq!(down["state"], "restarting", "{down}");
    // The gateway the failed pass started comes up after all.
    f.compute.assume_serving(&agent_id(&agent), &rev_id(&rev));
    f.compute.clear_script(Verb::Activate);
    let counted = f.passes_until(&agent, |v| v["state"] == "running").await;
    assert_eq!(
        (
            &counted["state"],
            &counted["restarts"],
            &counted["lastExitAt"]
        ),
        (
            &Value::from("running"),
            &Value::from(1),
            &down["lastExitAt"]
        ),
        "{counted}"
    );
    // Later passes find it serving and running: no second count.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        f.drain().await;
    }
    assert_eq!(f.runtime(&agent).await["restarts"], 1);
}
