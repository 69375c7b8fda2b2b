#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Chat-turn latency through occ next to the same turn sent directly to the gateway, in the
//! same run, on one real OpenClaw gateway (process Compute Driver) whose model is the test
//! kit's fake OpenAI-compatible provider (in this process, so the model's own time is small and
//! the same for both ways).
//!
//! The real `occ serve` and `occ worker` binaries run as processes on a throwaway SQLite
//! database; one Agent is deployed with the fake's key bound from a Secret. Then, per round,
//! each way runs one turn in a fresh session, in an order that rotates every round:
//!
//! - `occ API`: `POST /namespaces/{ns}/agents/{agt}/chat` with a service key granted `use`, over
//!   one keep-alive HTTP/1.1 connection (authentication, authorization, the Agent read, the
//!   gateway connection and `agent` call, the audit record);
//! - `direct`: [`occ_gateway::chat_turn`] against the gateway from this process — the same
//!   native call occ makes, without occ.
//!
//! occ's overhead = occ p50 − direct p50 (goal ≤ 5 ms).
//!
//! Run: `cargo bench -p occ --bench chat` (optionally `-- --turns 40 --warmup 5`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use occ_gateway::{ChatTurn, Endpoint, chat_turn};
use occ_store::Backend;
use occ_testkit::fake_model::FakeModel;
use reqwest::Method;
use serde_json::{Value, json};
use support::Stack;

/// The gateway ports of this bench's process Driver (no test uses them).
const PORTS: &str = "29980-29999";
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
const KEY: &str = "sk-chat-bench-0123456789abcdef";
const REPLY: &str = "A short answer from the fake model.";
const GOAL_MS: f64 = 5.0;

fn arg_usize(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn gateway_endpoint(agent_dir: &Path) -> Endpoint {
    let record: Value = serde_json::from_slice(
        &std::fs::read(agent_dir.join("gateway.json")).expect("gateway.json"),
    )
    .expect("gateway.json is JSON");
    let port = u16::try_from(record["port"].as_u64().expect("port")).expect("port");
    let token = std::fs::read_to_string(agent_dir.join("gateway-token")).expect("gateway-token");
    Endpoint::loopback(port, token.trim())
}

/// Deploys one Agent whose model is `fake`, and lets the stack's key talk to it.
async fn deploy(stack: &Stack, fake: &FakeModel) -> String {
    let ns = stack.ns.clone();
    let id = |v: Value| v["data"]["id"].as_str().expect("id").to_owned();
    let secret = id(stack
        .send(
            Method::POST,
            &format!("/namespaces/{ns}/secrets"),
            Some(json!({"name": "bench-key", "value": KEY})),
        )
        .await);
    let cfg = id(stack
        .send(
            Method::POST,
            &format!("/namespaces/{ns}/configurations"),
            Some(json!({
                "kind": "agent",
                "values": {
                    "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}},
                    "models": {"providers": {"fake": {"baseUrl": fake.base_url(),
                        "api": "openai-completions", "apiKey": "${FAKE_API_KEY}",
                        "models": [{"id": "fake-model", "name": "Fake model"}]}}},
                    "plugins": {"enabled": false},
                },
                "secretBindings": {"FAKE_API_KEY": {"source": {"kind": "secret", "namespaceId": ns, "id": secret}}},
            })),
        )
        .await);
    let agent = stack.agent("chat-bench", &cfg).await;
    let principal = stack.agent_state(&agent).await["servicePrincipalId"]
        .as_str()
        .expect("servicePrincipalId")
        .to_owned();
    let key_principal: Value = serde_json::from_slice(
        &std::fs::read(stack.dir.path().join("key.json")).expect("key.json"),
    )
    .expect("key.json is JSON");
    let key_principal = key_principal["data"]["servicePrincipalId"]
        .as_str()
        .expect("the key's principal")
        .to_owned();
    for (permission, subject, kind, resource) in [
        ("operate", principal.as_str(), "secret", secret.as_str()),
        ("use", key_principal.as_str(), "agent", agent.as_str()),
    ] {
        let role = id(stack
            .send(
                Method::POST,
                &format!("/namespaces/{ns}/iam/roles"),
                Some(json!({"permissions": [{"action": permission, "resourceKind": kind}]})),
            )
            .await);
        stack
            .send(
                Method::POST,
                &format!("/namespaces/{ns}/iam/access-bindings"),
                Some(
                    json!({"subjectKind": "identity", "subjectId": subject, "roleId": role,
                            "resourceKind": kind, "resourceId": resource}),
                ),
            )
            .await;
    }
    let rev = stack.deploy(&agent).await;
    let d = stack.settled(&agent, &rev).await;
    assert_eq!(d["status"], "succeeded", "deployment failed: {d}");
    agent
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Occ,
    Direct,
}

impl Way {
    const ALL: [Way; 2] = [Way::Occ, Way::Direct];

    fn key(self) -> &'static str {
        match self {
            Way::Occ => "occ_api",
            Way::Direct => "direct_gateway",
        }
    }
}

/// Nearest-rank percentile, in milliseconds.
fn percentile(samples: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
    ms[i]
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn main() {
    let turns = arg_usize("--turns", 30).max(1);
    let warmup = arg_usize("--warmup", 3);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fake = FakeModel::start().await;
        fake.reply(REPLY);
        let stack = Stack::start(Backend::Sqlite, PORTS).await;
        let agent = deploy(&stack, &fake).await;
        let endpoint = gateway_endpoint(&stack.agent_dir(&agent));
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let url = format!("{}/namespaces/{}/agents/{agent}/chat", stack.url, stack.ns);
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(), Vec::new()];
        for round in 0..warmup + turns {
            for k in 0..Way::ALL.len() {
                let w = (round + k) % Way::ALL.len();
                let way = Way::ALL[w];
                let session = format!("bench-{}-{round}", way.key().replace('_', "-"));
                let started = Instant::now();
                let reply = match way {
                    Way::Occ => {
                        let res = http
                            .post(&url)
                            .header("x-api-key", &stack.key)
                            .json(&json!({"message": "Say something short.", "sessionKey": session}))
                            .send()
                            .await
                            .expect("occ chat");
                        let status = res.status();
                        let body: Value = res.json().await.expect("occ chat body");
                        assert!(status.is_success(), "occ chat: {status} {body}");
                        body["data"]["reply"].as_str().unwrap_or_default().to_owned()
                    }
                    Way::Direct => {
                        let turn = ChatTurn {
                            agent_id: "main",
                            session_key: &session,
                            message: "Say something short.",
                        };
                        chat_turn(
                            &endpoint,
                            turn,
                            tokio::time::Instant::now() + TURN_TIMEOUT,
                            None,
                        )
                        .await
                        .expect("direct chat")
                        .text
                    }
                };
                let elapsed = started.elapsed();
                assert_eq!(reply, REPLY);
                if round >= warmup {
                    samples[w].push(elapsed);
                }
            }
        }
        let occ = &samples[0];
        let direct = &samples[1];
        for (way, s) in [(Way::Occ, occ), (Way::Direct, direct)] {
            println!(
                "{}",
                json!({"way": way.key(), "turns": s.len(),
                       "p50_ms": round2(percentile(s, 0.5)), "p90_ms": round2(percentile(s, 0.9)),
                       "max_ms": round2(percentile(s, 1.0))})
            );
        }
        let overhead = percentile(occ, 0.5) - percentile(direct, 0.5);
        println!(
            "{}",
            json!({"overhead_p50_ms": round2(overhead), "goal_ms": GOAL_MS,
                   "goal_met": overhead <= GOAL_MS,
                   "model_requests": fake.requests_to("/v1/chat/completions").len()})
        );
        println!(
            "occ overhead at p50: {:.2} − {:.2} = {overhead:.2} ms over {turns} turns each (goal ≤ {GOAL_MS:.0} ms: {})",
            percentile(occ, 0.5),
            percentile(direct, 0.5),
            if overhead <= GOAL_MS { "met" } else { "not met" }
        );
        drop(stack);
    });
}
