//! A test double of the [`Compute`] contract, for worker tests and benchmarks: it keeps in memory
//! which revision "serves" each Agent, records every call, and can be told to fail, delay or
//! report pending for a verb. It proves what the worker asks of Compute and when; it does not
//! prove anything about a real runtime (the process Driver's own suite does that).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use occ_core::ReasonCode;
use occ_core::resource::WorkspaceSetup;
use occ_core::runtime_report::{
    ContainerState, EventType, GATEWAY_CONTAINER, Plane, RuntimeContainer, RuntimeEvent,
    RuntimePod, WorkloadRole,
};
use occ_core::{AgentId, NamespaceId, RevisionId};
use occ_drivers::compute::{
    AgentTarget, Compute, ComputeError, ComputeSelection, Convergence, GatewayAccess, GatewayExit,
    LogChunk, LogEntry, LogGap, LogPosition, LogQuery, NamespaceTarget, Readiness, RevisionContext,
    RevisionTarget, RuntimeReport, RuntimeState, SecretText,
};
use tokio::sync::broadcast;

/// A Compute verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `ensure_namespace`
    EnsureNamespace,
    /// `delete_namespace`
    DeleteNamespace,
    /// `prepare_revision`
    Prepare,
    /// `activate_revision`
    Activate,
    /// `restore_revision`
    Restore,
    /// `stop_revision`
    Stop,
    /// `retire_revision`
    Retire,
    /// `delete_agent`
    DeleteAgent,
    /// `runtime_report`
    Report,
    /// `read_logs`
    ReadLogs,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A Namespace verb.
    Namespace(Verb, NamespaceId),
    /// A revision verb.
    Revision(Verb, AgentId, RevisionId),
    /// `delete_agent`
    DeleteAgent(AgentId),
}

/// What a scripted verb does instead of succeeding.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// Fails with this error.
    Fail(ComputeError),
    /// Reports pending (Namespace verbs and prepare).
    Pending,
    /// Sleeps this long, then behaves normally.
    Delay(Duration),
}

/// A revision's output in the double.
#[derive(Default)]
struct FakeOutput {
    stream: u64,
    lines: Vec<String>,
}

/// The double.
pub struct FakeCompute {
    selection: ComputeSelection,
    maintenance: Option<Duration>,
    setup_supported: bool,
    record: bool,
    calls: Mutex<Vec<Call>>,
    serving: Mutex<HashMap<AgentId, RevisionId>>,
    environment: Mutex<HashMap<RevisionId, BTreeMap<String, String>>>,
    documents: Mutex<HashMap<RevisionId, serde_json::Map<String, serde_json::Value>>>,
    setups: Mutex<HashMap<RevisionId, Option<WorkspaceSetup>>>,
    script: Mutex<HashMap<Verb, VecDeque<Scripted>>>,
    /// Each revision's output, one line per entry (a gap where [`FakeCompute::replace_output`]
    /// started it over).
    output: Mutex<HashMap<RevisionId, FakeOutput>>,
    /// Exit reports, when it claims to make them.
    exits: Option<broadcast::Sender<GatewayExit>>,
    /// What [`Compute::gateway_access`] answers for a serving Agent.
    gateway_url: Mutex<String>,
}

impl Default for FakeCompute {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeCompute {
    /// A double with the identity of the process Driver, recording calls.
    pub fn new() -> Self {
        Self {
            selection: occ_drivers::compute::process::selection(false),
            maintenance: None,
            setup_supported: false,
            record: true,
            calls: Mutex::new(Vec::new()),
            serving: Mutex::new(HashMap::new()),
            environment: Mutex::new(HashMap::new()),
            documents: Mutex::new(HashMap::new()),
            setups: Mutex::new(HashMap::new()),
            script: Mutex::new(HashMap::new()),
            output: Mutex::new(HashMap::new()),
            exits: None,
            gateway_url: Mutex::new("ws://127.0.0.1:9/".into()),
        }
    }

    /// Points [`Compute::gateway_access`] at `url` (a test's stand-in gateway).
    pub fn set_gateway_url(&self, url: &str) {
        *self.gateway_url.lock().expect("lock") = url.to_owned();
    }

    /// Appends lines to the revision's output ([`Compute::read_logs`]).
    pub fn write_output(&self, rev: &RevisionId, lines: &[&str]) {
        let mut output = self.output.lock().expect("lock");
        let entry = output.entry(rev.clone()).or_default();
        entry.lines.extend(lines.iter().map(|l| (*l).to_owned()));
    }

    /// Starts the revision's output over (a new stream: a follow read reports the gap).
    pub fn replace_output(&self, rev: &RevisionId) {
        let mut output = self.output.lock().expect("lock");
        let entry = output.entry(rev.clone()).or_default();
        entry.stream += 1;
        entry.lines.clear();
    }

    /// Reports gateway exits ([`Compute::gateway_exits`]), as the process Driver does.
    pub fn with_exit_reports(mut self) -> Self {
        self.exits = Some(broadcast::channel(64).0);
        self
    }

    /// Schedules maintenance passes every `interval`.
    pub fn with_maintenance(mut self, interval: Duration) -> Self {
        self.maintenance = Some(interval);
        self
    }

    /// The workspace setup the last `prepare_revision` of `rev` was given (`None` if never
    /// prepared; `Some(None)` if prepared without one).
    pub fn setup_seen(&self, rev: &RevisionId) -> Option<Option<WorkspaceSetup>> {
        self.setups.lock().expect("lock").get(rev).cloned()
    }

    /// Claims workspace setup support.
    pub fn with_workspace_setup(mut self) -> Self {
        self.setup_supported = true;
        self
    }

    /// Does not record calls (benchmarks).
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// The next call of `verb` behaves as `what` (queued per verb, first in first out).
    pub fn script(&self, verb: Verb, what: Scripted) {
        self.script
            .lock()
            .expect("lock")
            .entry(verb)
            .or_default()
            .push_back(what);
    }

    /// Drops every queued script of `verb` (its calls behave normally again).
    pub fn clear_script(&self, verb: Verb) {
        self.script.lock().expect("lock").remove(&verb);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("lock").clone()
    }

    /// The revision serving `agent`, if any.
    pub fn serving(&self, agent: &AgentId) -> Option<RevisionId> {
        self.serving.lock().expect("lock").get(agent).cloned()
    }

    /// The environment `rev` was last activated with (values included: tests check delivery).
    pub fn environment_of(&self, rev: &RevisionId) -> Option<BTreeMap<String, String>> {
        self.environment.lock().expect("lock").get(rev).cloned()
    }

    /// The configuration document `rev` was last activated or restored with.
    pub fn document_of(
        &self,
        rev: &RevisionId,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.documents.lock().expect("lock").get(rev).cloned()
    }

    /// Makes `rev` the revision serving `agent`, as if it had been activated (tests that set
    /// platform state directly).
    pub fn assume_serving(&self, agent: &AgentId, rev: &RevisionId) {
        self.serving
            .lock()
            .expect("lock")
            .insert(agent.clone(), rev.clone());
    }

    /// Simulates a crash of `agent`'s gateway that nothing reports (the maintenance pass finds
    /// it).
    pub fn crash(&self, agent: &AgentId) {
        self.serving.lock().expect("lock").remove(agent);
    }

    /// Simulates the gateway of `agent` exiting with `status`, reported as the process Driver
    /// reports the exit of a gateway it started (needs [`FakeCompute::with_exit_reports`]).
    /// Returns whether a revision was serving (and so exited).
    pub fn exit(&self, agent: &AgentTarget, status: &str) -> bool {
        let Some(revision_id) = self.serving.lock().expect("lock").remove(&agent.agent_id) else {
            return false;
        };
        let exits = self.exits.as_ref().expect("FakeCompute::with_exit_reports");
        let _ = exits.send(GatewayExit {
            agent: agent.clone(),
            revision_id,
            pid: 4242,
            status: status.to_owned(),
            at: occ_core::Timestamp::now(),
        });
        true
    }

    fn record(&self, call: Call) {
        if self.record {
            self.calls.lock().expect("lock").push(call);
        }
    }

    /// Records `rev` as serving its Agent with its document and `ctx`'s environment.
    fn serve(&self, rev: &RevisionTarget, ctx: &RevisionContext) {
        let env: BTreeMap<String, String> = ctx
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .chain(
                ctx.harness_credential
                    .iter()
                    .map(|v| ("HARNESS_CREDENTIAL".to_owned(), v.expose().to_owned())),
            )
            .collect();
        if self.record {
            self.environment
                .lock()
                .expect("lock")
                .insert(rev.revision_id.clone(), env);
            self.documents
                .lock()
                .expect("lock")
                .insert(rev.revision_id.clone(), rev.spec.configuration.clone());
        }
        self.serving
            .lock()
            .expect("lock")
            .insert(rev.agent.agent_id.clone(), rev.revision_id.clone());
    }

    /// Applies the script of `verb`: `Ok(true)` pending, `Ok(false)` proceed, `Err` fail.
    async fn scripted(&self, verb: Verb) -> Result<bool, ComputeError> {
        let next = self
            .script
            .lock()
            .expect("lock")
            .get_mut(&verb)
            .and_then(VecDeque::pop_front);
        match next {
            None => Ok(false),
            Some(Scripted::Fail(e)) => Err(e),
            Some(Scripted::Pending) => Ok(true),
            Some(Scripted::Delay(d)) => {
                tokio::time::sleep(d).await;
                Ok(false)
            }
        }
    }
}

#[async_trait::async_trait]
impl Compute for FakeCompute {
    fn selection(&self) -> &ComputeSelection {
        &self.selection
    }

    fn supports_workspace_setup(&self) -> bool {
        self.setup_supported
    }

    fn maintenance_interval(&self) -> Option<Duration> {
        self.maintenance
    }

    fn gateway_exits(&self) -> Option<broadcast::Receiver<GatewayExit>> {
        self.exits.as_ref().map(broadcast::Sender::subscribe)
    }

    async fn ensure_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        self.record(Call::Namespace(Verb::EnsureNamespace, ns.id.clone()));
        Ok(if self.scripted(Verb::EnsureNamespace).await? {
            Convergence::Pending
        } else {
            Convergence::Done
        })
    }

    async fn delete_namespace(&self, ns: &NamespaceTarget) -> Result<Convergence, ComputeError> {
        self.record(Call::Namespace(Verb::DeleteNamespace, ns.id.clone()));
        Ok(if self.scripted(Verb::DeleteNamespace).await? {
            Convergence::Pending
        } else {
            Convergence::Done
        })
    }

    async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        self.record(Call::Revision(
            Verb::Prepare,
            rev.agent.agent_id.clone(),
            rev.revision_id.clone(),
        ));
        if self.record {
            self.setups
                .lock()
                .expect("lock")
                .insert(rev.revision_id.clone(), ctx.workspace_setup.clone());
        }
        Ok(if self.scripted(Verb::Prepare).await? {
            Readiness::Pending {
                code: ReasonCode::RevisionIncomplete,
            }
        } else {
            Readiness::Ready
        })
    }

    async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        self.record(Call::Revision(
            Verb::Activate,
            rev.agent.agent_id.clone(),
            rev.revision_id.clone(),
        ));
        if let Err(e) = self.scripted(Verb::Activate).await {
            // Like a real Driver that stopped what served to start the candidate, which then
            // failed: nothing serves until the worker restores the predecessor.
            self.serving
                .lock()
                .expect("lock")
                .remove(&rev.agent.agent_id);
            return Err(e);
        }
        self.serve(rev, ctx);
        Ok(())
    }

    async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        self.record(Call::Revision(
            Verb::Restore,
            previous.agent.agent_id.clone(),
            previous.revision_id.clone(),
        ));
        self.scripted(Verb::Restore).await?;
        let installed = self.serving(&previous.agent.agent_id);
        if installed
            .as_ref()
            .is_some_and(|r| r != &failed.revision_id && r != &previous.revision_id)
        {
            return Err(ComputeError::permanent(
                ReasonCode::ActiveRevisionChanged,
                "another revision is installed",
            ));
        }
        self.serve(previous, ctx);
        Ok(())
    }

    async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.record(Call::Revision(
            Verb::Stop,
            rev.agent.agent_id.clone(),
            rev.revision_id.clone(),
        ));
        self.scripted(Verb::Stop).await?;
        let mut serving = self.serving.lock().expect("lock");
        if serving.get(&rev.agent.agent_id) == Some(&rev.revision_id) {
            serving.remove(&rev.agent.agent_id);
        }
        Ok(())
    }

    async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        self.record(Call::Revision(
            Verb::Retire,
            rev.agent.agent_id.clone(),
            rev.revision_id.clone(),
        ));
        self.scripted(Verb::Retire).await?;
        let mut serving = self.serving.lock().expect("lock");
        if serving.get(&rev.agent.agent_id) == Some(&rev.revision_id) {
            serving.remove(&rev.agent.agent_id);
        }
        Ok(())
    }

    async fn delete_agent(&self, agent: &AgentTarget) -> Result<(), ComputeError> {
        self.record(Call::DeleteAgent(agent.agent_id.clone()));
        self.scripted(Verb::DeleteAgent).await?;
        self.serving.lock().expect("lock").remove(&agent.agent_id);
        Ok(())
    }

    async fn observe(&self, rev: &RevisionTarget) -> Result<RuntimeState, ComputeError> {
        Ok(match self.serving(&rev.agent.agent_id) {
            Some(r) if r == rev.revision_id => RuntimeState::Serving,
            Some(_) => RuntimeState::NotCurrent,
            None => RuntimeState::NotRunning,
        })
    }

    async fn gateway_access(
        &self,
        agent: &AgentTarget,
    ) -> Result<Option<GatewayAccess>, ComputeError> {
        let url = self.gateway_url.lock().expect("lock").clone();
        Ok(self.serving(&agent.agent_id).map(|_| GatewayAccess {
            url,
            token: SecretText::new("fake".into()),
        }))
    }

    /// The serving revision as one running gateway Pod whose one event's message is
    /// [`FAKE_EVENT_MESSAGE`] (nothing for another revision).
    async fn runtime_report(&self, rev: &RevisionTarget) -> Result<RuntimeReport, ComputeError> {
        self.scripted(Verb::Report).await?;
        if self.serving(&rev.agent.agent_id).as_ref() != Some(&rev.revision_id) {
            return Ok(RuntimeReport::default());
        }
        let started = occ_core::Timestamp::now();
        Ok(RuntimeReport {
            pods: vec![RuntimePod {
                role: WorkloadRole::Gateway,
                cluster: Plane::Control,
                name: rev.revision_id.as_str().replace('_', "-"),
                uid: "4242-1".into(),
                phase: "Running".into(),
                ready: true,
                created_at: Some(started),
                containers: vec![RuntimeContainer {
                    name: GATEWAY_CONTAINER.into(),
                    state: ContainerState::Running,
                    reason: None,
                    ready: true,
                    restart_count: 0,
                    started_at: Some(started),
                    last_termination: None,
                }],
                events: vec![RuntimeEvent {
                    kind: EventType::Normal,
                    container: Some(GATEWAY_CONTAINER.into()),
                    reason: "Started".into(),
                    message: FAKE_EVENT_MESSAGE.into(),
                    count: 1,
                    last_observed_at: Some(started),
                }],
            }],
            history_from_driver: false,
        })
    }

    /// Positions count lines; the stream is the number of replacements.
    async fn read_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        self.scripted(Verb::ReadLogs).await?;
        let output = self.output.lock().expect("lock");
        let Some(log) = output.get(&rev.revision_id) else {
            return Ok(LogChunk {
                entries: Vec::new(),
                position: None,
                truncated: false,
            });
        };
        let stream = log.stream.to_string();
        let mut entries = Vec::new();
        let start = match &query.after {
            None => log.lines.len().saturating_sub(query.tail_lines),
            Some(p) if p.stream == stream => (p.offset as usize).min(log.lines.len()),
            Some(_) => {
                entries.push(LogEntry::Gap(LogGap::StreamReplaced));
                0
            }
        };
        entries.extend(log.lines[start..].iter().cloned().map(LogEntry::Line));
        Ok(LogChunk {
            entries,
            position: Some(LogPosition {
                stream,
                generation: 0,
                offset: log.lines.len() as u64,
            }),
            truncated: false,
        })
    }
}

/// The message of the fake gateway's event: it carries a credential-shaped value, which must
/// never come back through the API.
pub const FAKE_EVENT_MESSAGE: &str =
    "started with Authorization: Bearer fake-bearer-0123456789abcdef and sk-fakefakefakefakefake01";
