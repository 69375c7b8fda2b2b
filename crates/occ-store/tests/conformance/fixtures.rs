//! Builders for the rows the conformance tests need.

use occ_core::resource::{
    AdmittedSpec, Agent, AgentRevision, AgentStatus, ComputeIdentity, ConfigurationMeta,
    DesiredRuntimeState, ExecutionMode, Generation, HarnessDescriptor, Namespace, NamespaceStatus,
};
use occ_core::{AgentId, ConfigurationId, IamId, Name, NamespaceId, RevisionId, Timestamp};
use occ_store::Store;
use serde_json::json;

pub fn namespace(name: &str) -> Namespace {
    Namespace {
        id: NamespaceId::generate(),
        name: Name::parse(name).unwrap(),
        existing_namespace: None,
        status: NamespaceStatus::Provisioning,
        created_at: Timestamp::now(),
        deleted_at: None,
    }
}

pub fn configuration(ns: &NamespaceId) -> ConfigurationMeta {
    ConfigurationMeta {
        id: ConfigurationId::generate(),
        namespace_id: ns.clone(),
        generation: Generation::FIRST,
        secret_bindings: Default::default(),
        created_at: Timestamp::now(),
    }
}

pub fn agent(ns: &NamespaceId, cfg: &ConfigurationId, name: &str) -> Agent {
    let id = AgentId::generate();
    Agent {
        service_principal_id: IamId::agent_service_principal(&id),
        id,
        namespace_id: ns.clone(),
        name: Name::parse(name).unwrap(),
        configuration_id: cfg.clone(),
        backend_id: None,
        execution_mode: ExecutionMode::Embedded,
        harness_auth: None,
        active_revision_id: None,
        desired_runtime_state: DesiredRuntimeState::Stopped,
        status: AgentStatus::Active,
        created_at: Timestamp::now(),
    }
}

pub fn revision(agent: &Agent, number: u64) -> AgentRevision {
    let mut configuration = serde_json::Map::new();
    configuration.insert(
        "agents".into(),
        json!({"defaults": {"model": "openai/gpt-5"}}),
    );
    AgentRevision {
        id: RevisionId::generate(),
        namespace_id: agent.namespace_id.clone(),
        agent_id: agent.id.clone(),
        revision: number,
        backend_id: None,
        spec: AdmittedSpec {
            configuration_id: agent.configuration_id.clone(),
            configuration_kind: "agent".into(),
            configuration_generation: Generation::FIRST,
            configuration,
            harness: HarnessDescriptor {
                id: "openclaw".into(),
                version: "2026.9.6".into(),
                mode: ExecutionMode::Embedded,
            },
            compute: ComputeIdentity {
                id: "compute-test".into(),
                implementation: "test".into(),
            },
            service_principal_id: agent.service_principal_id.clone(),
            harness_auth: None,
            secret_driver_id: None,
            secret_bindings: None,
            account_credential: None,
        },
        source_revision_id: None,
        created_at: Timestamp::now(),
    }
}

/// A Namespace with one Configuration and one Agent, committed.
pub struct World {
    pub ns: Namespace,
    pub cfg: ConfigurationMeta,
    pub agent: Agent,
}

pub async fn world(store: &Store) -> World {
    let ns = namespace(&format!("ns-{}", uuid::Uuid::new_v4()));
    let cfg = configuration(&ns.id);
    let agent = agent(&ns.id, &cfg.id, "agent-1");
    let mut tx = occ_testkit::begin_setup(store).await;
    tx.namespace_insert(&ns).await.unwrap();
    tx.configuration_insert(&cfg).await.unwrap();
    tx.agent_insert(&agent).await.unwrap();
    tx.commit().await.unwrap();
    World { ns, cfg, agent }
}

/// Inserts revision `number` of the world's Agent, committed.
pub async fn add_revision(store: &Store, w: &World, number: u64) -> AgentRevision {
    let rev = revision(&w.agent, number);
    let mut tx = occ_testkit::begin_setup(store).await;
    tx.revision_insert(&rev).await.unwrap();
    tx.commit().await.unwrap();
    rev
}
