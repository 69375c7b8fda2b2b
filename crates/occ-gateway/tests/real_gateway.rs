//! The client against a real OpenClaw gateway (the pinned runtime, installed once per machine
//! into `target/openclaw-runtime`).
//!
//! One gateway serves the whole binary: a cold start costs ~11 s of CPU and ~1 GB of RAM. The
//! single test spawns it, watches its startup (refused, then `UNAVAILABLE`, then ready through
//! `wait_ready`), runs every case as its own task (a failing case is reported and the others
//! still run), then stops the gateway by PID — also when a case failed.
#![allow(clippy::print_stderr, reason = "timings for the test log")]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use occ_drivers::runtime::OPENCLAW_VERSION;
use occ_gateway::{Endpoint, GatewayError, Session, content_hash, wait_ready};
use occ_testkit::gateway::{TestGateway, process_alive};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);

type Case = Pin<Box<dyn Future<Output = ()> + Send>>;

async fn session(endpoint: &Endpoint) -> Session {
    let (session, _) = Session::connect(endpoint, T).await.expect("connect");
    session
}

fn hello_and_scopes(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let (session, hello) = Session::connect(&endpoint, T).await.expect("connect");
        assert_eq!(hello.protocol, 4);
        assert_eq!(hello.server_version, OPENCLAW_VERSION);
        assert_eq!(hello.role, "operator");
        assert_eq!(hello.auth_method, "token");
        for scope in ["operator.admin", "operator.read"] {
            assert!(hello.scopes.iter().any(|s| s == scope), "{hello:?}");
        }
        session.close().await;
    })
}

fn wrong_token_is_unauthorized(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let wrong = Endpoint::new(endpoint.url.clone(), "not-the-token-0123456789abcdef");
        let err = Session::connect(&wrong, T).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unauthorized(_)), "{err:?}");
        assert!(!format!("{err} {err:?}").contains("not-the-token"));
        // not transient: readiness gives up at once
        let started = Instant::now();
        let err = wait_ready(&wrong, Duration::from_secs(60))
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Unauthorized(_)), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    })
}

fn files_get(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let mut s = session(&endpoint).await;
        let agents = s
            .file_get("main", "AGENTS.md", T)
            .await
            .expect("get AGENTS.md")
            .expect("AGENTS.md seeded by setup");
        assert_eq!(agents.name, "AGENTS.md");
        assert!(
            agents.content.starts_with("# AGENTS.md"),
            "{}",
            agents.content
        );
        assert_eq!(agents.hash, content_hash(&agents.content));
        assert_eq!(agents.size, agents.content.len() as u64);
        assert_eq!(
            s.file_get("main", "MEMORY.md", T)
                .await
                .expect("get MEMORY.md"),
            None
        );
        s.close().await;
    })
}

fn files_set_and_read_back(endpoint: Endpoint, workspace: std::path::PathBuf) -> Case {
    Box::pin(async move {
        let mut s = session(&endpoint).await;
        let content = format!("# USER.md\n\nwritten by occ at {:?}\n", Instant::now());
        let written = s
            .file_set("main", "USER.md", &content, None, T)
            .await
            .expect("set");
        assert_eq!(written.hash, content_hash(&content));
        assert_eq!(written.content, content);
        assert_eq!(written.size, content.len() as u64);
        let read = s
            .file_get("main", "USER.md", T)
            .await
            .expect("get")
            .expect("present");
        assert_eq!(read, written);
        let on_disk = std::fs::read_to_string(workspace.join("USER.md")).expect("on disk");
        assert_eq!(on_disk, content);
        // an empty file is a file
        let empty = s
            .file_set("main", "SOUL.md", "", None, T)
            .await
            .expect("set empty");
        assert_eq!(empty.hash, content_hash(""));
        assert_eq!(
            s.file_get("main", "SOUL.md", T).await.expect("get"),
            Some(empty)
        );
        s.close().await;
    })
}

fn expected_hash_conflict(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let mut s = session(&endpoint).await;
        let first = s
            .file_set("main", "IDENTITY.md", "# IDENTITY.md\n\nv1\n", None, T)
            .await
            .expect("v1");
        let second = s
            .file_set(
                "main",
                "IDENTITY.md",
                "# IDENTITY.md\n\nv2\n",
                Some(&first.hash),
                T,
            )
            .await
            .expect("v2 with the matching hash");
        let err = s
            .file_set("main", "IDENTITY.md", "stale\n", Some(&first.hash), T)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            GatewayError::Conflict {
                current_hash: second.hash.clone()
            }
        );
        let kept = s
            .file_get("main", "IDENTITY.md", T)
            .await
            .expect("get")
            .expect("present");
        assert_eq!(kept, second);
        // a conditional write to a missing file conflicts without a current hash
        let err = s
            .file_set("main", "MEMORY.md", "m\n", Some(&content_hash("x")), T)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            GatewayError::Conflict {
                current_hash: String::new()
            }
        );
        s.close().await;
    })
}

fn invalid_requests(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let mut s = session(&endpoint).await;
        for name in ["notes.txt", "TOOLS.md", "agents.md", "../AGENTS.md"] {
            let err = s.file_get("main", name, T).await.unwrap_err();
            assert!(
                matches!(&err, GatewayError::InvalidRequest(m) if m.contains("unsupported file")),
                "{name}: {err:?}"
            );
        }
        let err = s
            .file_set("main", "notes.txt", "x", None, T)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
        let err = s.file_get("nobody", "AGENTS.md", T).await.unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
        let err = s
            .call("no.such.method", serde_json::json!({}), T)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)), "{err:?}");
        // the connection survives refused requests
        assert!(
            s.file_get("main", "AGENTS.md", T)
                .await
                .expect("get")
                .is_some()
        );
        s.close().await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gateway() {
    let runtime = tokio::task::spawn_blocking(occ_testkit::runtime::shared_runtime)
        .await
        .expect("runtime");
    let spawned = Instant::now();
    let mut gw = TestGateway::spawn(runtime).await;
    let config_before = std::fs::read(&gw.config_path).expect("config");

    // Startup: single attempts are refused while the gateway loads, then answered with a
    // retryable UNAVAILABLE; wait_ready retries through that to hello-ok.
    let mut seen: Vec<GatewayError> = Vec::new();
    loop {
        assert!(
            gw.is_running(),
            "gateway exited during startup:\n{}",
            gw.output_tail()
        );
        assert!(
            spawned.elapsed() < Duration::from_secs(180),
            "no UNAVAILABLE within 180 s: {seen:?}\n{}",
            gw.output_tail()
        );
        match Session::connect(&gw.endpoint, T).await {
            Ok((s, _)) => {
                s.close().await;
                break;
            }
            Err(e @ GatewayError::Unavailable { .. }) => {
                seen.push(e);
                break;
            }
            Err(e) if e.is_transient() => {
                if seen.last() != Some(&e) {
                    seen.push(e);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("non-transient error during startup: {e:?}"),
        }
    }
    let hello = gw.ready(Duration::from_secs(120)).await;
    let ready_after = spawned.elapsed();
    eprintln!(
        "gateway {} ready after {:.1} s; startup errors seen: {seen:?}",
        hello.server_version,
        ready_after.as_secs_f64()
    );
    assert!(
        matches!(seen.first(), Some(GatewayError::Unreachable(_))),
        "first attempt while loading: {seen:?}"
    );
    assert!(
        matches!(seen.last(), Some(GatewayError::Unavailable { .. })),
        "UNAVAILABLE before ready: {seen:?}"
    );

    let ep = gw.endpoint.clone();
    let cases: Vec<(&str, Case)> = vec![
        ("hello_and_scopes", hello_and_scopes(ep.clone())),
        (
            "wrong_token_is_unauthorized",
            wrong_token_is_unauthorized(ep.clone()),
        ),
        ("files_get", files_get(ep.clone())),
        (
            "files_set_and_read_back",
            files_set_and_read_back(ep.clone(), gw.workspace.clone()),
        ),
        ("expected_hash_conflict", expected_hash_conflict(ep.clone())),
        ("invalid_requests", invalid_requests(ep.clone())),
    ];
    let mut failed = Vec::new();
    for (name, case) in cases {
        let started = Instant::now();
        let outcome = tokio::spawn(case).await;
        eprintln!(
            "case {name}: {} in {} ms",
            if outcome.is_ok() { "ok" } else { "FAILED" },
            started.elapsed().as_millis()
        );
        if outcome.is_err() {
            failed.push(name);
        }
    }

    // The gateway never wrote its (read-only) config.
    assert_eq!(
        std::fs::read(&gw.config_path).expect("config"),
        config_before
    );

    // Stop by PID: SIGTERM, clean exit, helpers gone.
    let helpers = gw.helper_pids();
    let report = gw.stop().expect("was running");
    eprintln!("gateway stopped: {report:?}; helpers {helpers:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while helpers.iter().any(|&p| process_alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir = gw.dir.path().to_path_buf();
    drop(gw);
    assert!(!dir.exists(), "gateway directory removed");
    assert!(failed.is_empty(), "failed cases: {failed:?}");
    assert!(!report.killed, "needed SIGKILL: {report:?}");
    assert_eq!(report.code, Some(0), "{report:?}");
    let alive: Vec<u32> = helpers.into_iter().filter(|&p| process_alive(p)).collect();
    assert!(alive.is_empty(), "helpers still running: {alive:?}");
}
