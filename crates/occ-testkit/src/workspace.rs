//! A test double of [`WorkspaceAccess`]: files kept in memory per Agent, and a queue of outcomes
//! to return instead (missing, unavailable, unknown). It proves what the controller and API do
//! with each native outcome, not anything about a gateway (the real-gateway tests do that).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use occ_controller::workspace_files::{FileRead, FileWrite, WorkspaceAccess};
use occ_core::AgentId;
use occ_core::resource::WorkspaceFileName;
use occ_drivers::compute::AgentTarget;
use tokio::time::Instant;

/// What the next call returns instead of using the stored files.
#[derive(Debug, Clone)]
pub enum Next {
    /// Reads: missing; writes: missing.
    Missing,
    /// Unavailable.
    Unavailable,
    /// Writes: sent, no answer (the file IS changed, as when a reply is lost).
    Unknown,
    /// Never answers (the caller gives up or goes away).
    Hang,
}

/// The double.
#[derive(Default)]
pub struct FakeWorkspace {
    files: Mutex<HashMap<(AgentId, WorkspaceFileName), String>>,
    next: Mutex<VecDeque<Next>>,
}

impl FakeWorkspace {
    /// Queues the outcome of the next call.
    pub fn next(&self, next: Next) {
        self.next.lock().expect("lock").push_back(next);
    }

    /// A file as stored.
    pub fn file(&self, agent: &AgentId, name: WorkspaceFileName) -> Option<String> {
        self.files
            .lock()
            .expect("lock")
            .get(&(agent.clone(), name))
            .cloned()
    }

    fn take(&self) -> Option<Next> {
        self.next.lock().expect("lock").pop_front()
    }
}

#[async_trait::async_trait]
impl WorkspaceAccess for FakeWorkspace {
    async fn read(&self, agent: &AgentTarget, name: WorkspaceFileName, _: Instant) -> FileRead {
        match self.take() {
            Some(Next::Missing) => FileRead::Missing,
            Some(Next::Unavailable | Next::Unknown) => FileRead::Unavailable("scripted".into()),
            Some(Next::Hang) => std::future::pending().await,
            None => match self.file(&agent.agent_id, name) {
                Some(content) => FileRead::Ok(content),
                None => FileRead::Missing,
            },
        }
    }

    async fn write(
        &self,
        agent: &AgentTarget,
        name: WorkspaceFileName,
        content: &str,
        _: Instant,
    ) -> FileWrite {
        let store = || {
            self.files
                .lock()
                .expect("lock")
                .insert((agent.agent_id.clone(), name), content.to_owned());
        };
        match self.take() {
            Some(Next::Missing) => FileWrite::Missing,
            Some(Next::Unavailable) => FileWrite::Unavailable("scripted".into()),
            Some(Next::Unknown) => {
                store();
                FileWrite::Unknown("scripted".into())
            }
            Some(Next::Hang) => std::future::pending().await,
            None => {
                store();
                FileWrite::Ok
            }
        }
    }
}
