//! The client against a real OpenClaw gateway (the pinned runtime, installed once per machine
//! into `target/openclaw-runtime`).
//!
//! One gateway serves the whole binary: a cold start costs ~11 s of CPU and ~1 GB of RAM. The
//! single test spawns it, watches its startup (refused, then `UNAVAILABLE`, then ready through
//! `wait_ready`), runs every case as its own task (a failing case is reported and the others
//! still run), then kills the gateway with SIGKILL while a write is in flight, restarts it, and
//! stops it by PID — also when a case failed.
//!
//! Cases that need the gateway to hold still freeze it with SIGSTOP (by PID): a stopped process
//! cannot answer, but the kernel still accepts what the client writes to its socket, so "the
//! request frame was written and no answer came" is deterministic. A guard sends SIGCONT when
//! the case ends, also when it panics.
#![allow(clippy::print_stderr, reason = "timings for the test log")]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use occ_gateway::{
    Endpoint, FileClient, GatewayError, ReadOutcome, Session, WriteOutcome, content_hash,
    wait_ready,
};
use occ_host::runtime::OPENCLAW_VERSION;
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

/// The next JSON text frame that `wanted` accepts.
async fn next_frame<S>(
    ws: &mut tokio_tungstenite::WebSocketStream<S>,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::StreamExt as _;
    loop {
        let frame = tokio::time::timeout(T, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("frame");
        if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            if wanted(&v) {
                return v;
            }
        }
    }
}

/// What the real gateway does with a token operator that is not `gateway-client`/`backend`: it
/// connects, but its scopes are cleared to `[]` and every file call is refused with
/// `MISSING_SCOPE`. This is the empty grant occ's client treats as a failure before calling
/// (proven against the fake gateway in `fake::file_client::grants_are_checked_per_operation`).
fn another_client_id_gets_an_empty_grant(endpoint: Endpoint) -> Case {
    use futures_util::SinkExt as _;
    use tokio_tungstenite::tungstenite::Message;
    Box::pin(async move {
        let (mut ws, _) = tokio_tungstenite::connect_async(endpoint.url.as_str())
            .await
            .expect("upgrade");
        let challenge = next_frame(&mut ws, |v| v["event"] == "connect.challenge").await;
        assert!(challenge["payload"]["nonce"].is_string(), "{challenge}");
        let connect = serde_json::json!({"type": "req", "id": "c1", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "test", "version": "0.0.0", "platform": "linux", "mode": "test"},
            "role": "operator", "scopes": ["operator.admin", "operator.read"],
            "auth": {"token": endpoint.token().expect("token endpoint")}}});
        ws.send(Message::text(connect.to_string()))
            .await
            .expect("send");
        let hello = next_frame(&mut ws, |v| v["type"] == "res" && v["id"] == "c1").await;
        assert_eq!(hello["ok"], true, "{hello}");
        assert_eq!(
            hello["payload"]["auth"]["scopes"],
            serde_json::json!([]),
            "{hello}"
        );
        let get = serde_json::json!({"type": "req", "id": "g1", "method": "agents.files.get",
            "params": {"agentId": "main", "name": "USER.md"}});
        ws.send(Message::text(get.to_string())).await.expect("send");
        let refused = next_frame(&mut ws, |v| v["type"] == "res" && v["id"] == "g1").await;
        assert_eq!(refused["ok"], false, "{refused}");
        assert_eq!(
            refused["error"]["details"]["code"], "MISSING_SCOPE",
            "{refused}"
        );
        let _ = ws.close(None).await;
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

fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("pid");
    rustix::process::kill_process(pid, sig).expect("signal the gateway");
}

/// Keeps the gateway stopped (SIGSTOP) until dropped (SIGCONT).
struct Frozen(u32);

impl Frozen {
    fn freeze(pid: u32) -> Frozen {
        signal(pid, rustix::process::Signal::STOP);
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, rustix::process::Signal::CONT);
    }
}

fn deadline() -> Instant {
    Instant::now() + T
}

fn file_client_read_write_missing(endpoint: Endpoint, workspace: std::path::PathBuf) -> Case {
    Box::pin(async move {
        let client = FileClient::new();
        let ReadOutcome::Ok(agents) = client
            .read(&endpoint, "main", "AGENTS.md", deadline())
            .await
        else {
            panic!("read AGENTS.md")
        };
        assert!(
            agents.content.starts_with("# AGENTS.md"),
            "{}",
            agents.content
        );
        assert_eq!(agents.hash, content_hash(&agents.content));
        assert_eq!(agents.size, agents.content.len() as u64);

        let content = format!(
            "# USER.md\n\nJosé ☕ via FileClient at {:?}\n",
            Instant::now()
        );
        assert_eq!(
            client
                .write(&endpoint, "main", "USER.md", &content, deadline())
                .await,
            WriteOutcome::Ok {
                size: content.len() as u64
            }
        );
        let ReadOutcome::Ok(back) = client.read(&endpoint, "main", "USER.md", deadline()).await
        else {
            panic!("read back")
        };
        assert_eq!(back.content, content);
        assert_eq!(
            std::fs::read_to_string(workspace.join("USER.md")).expect("on disk"),
            content
        );

        // a file removed from the workspace is missing; writing creates it again
        std::fs::remove_file(workspace.join("IDENTITY.md")).expect("remove IDENTITY.md");
        assert_eq!(
            client
                .read(&endpoint, "main", "IDENTITY.md", deadline())
                .await,
            ReadOutcome::Missing
        );
        assert_eq!(
            client
                .write(
                    &endpoint,
                    "main",
                    "IDENTITY.md",
                    "# IDENTITY.md\n",
                    deadline()
                )
                .await,
            WriteOutcome::Ok { size: 14 }
        );
        assert!(matches!(
            client.read(&endpoint, "main", "IDENTITY.md", deadline()).await,
            ReadOutcome::Ok(f) if f.content == "# IDENTITY.md\n"
        ));

        // the gateway's own refusal is a definite failure
        let outcome = client
            .write(&endpoint, "nobody", "USER.md", "x", deadline())
            .await;
        assert!(
            matches!(&outcome, WriteOutcome::Unavailable(r) if r.contains("INVALID_REQUEST")),
            "{outcome:?}"
        );
        // names occ does not expose never reach the gateway
        let before = client.stats().requests_written;
        let outcome = client
            .read(&endpoint, "main", "MEMORY.md", deadline())
            .await;
        assert!(
            matches!(outcome, ReadOutcome::Unavailable(_)),
            "{outcome:?}"
        );
        let stats = client.stats();
        assert_eq!(stats.requests_written, before);
        assert_eq!(stats.connections_opened, 1, "{stats:?}");
        assert_eq!(stats.open_sessions, 1, "{stats:?}");
    })
}

fn file_client_reuses_its_connection(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let client = FileClient::new();
        let mut pooled = Vec::new();
        for _ in 0..50 {
            let started = Instant::now();
            let outcome = client
                .read(&endpoint, "main", "AGENTS.md", deadline())
                .await;
            pooled.push(started.elapsed());
            assert!(matches!(outcome, ReadOutcome::Ok(_)), "{outcome:?}");
        }
        assert_eq!(client.stats().connections_opened, 1);
        let mut fresh = Vec::new();
        for _ in 0..10 {
            let started = Instant::now();
            let mut s = session(&endpoint).await;
            s.file_get("main", "AGENTS.md", T)
                .await
                .expect("get")
                .expect("present");
            s.close().await;
            fresh.push(started.elapsed());
        }
        pooled.sort();
        fresh.sort();
        let (p, f) = (pooled[pooled.len() / 2], fresh[fresh.len() / 2]);
        eprintln!("read p50: pooled {p:?}, fresh connection per read {f:?}");
        assert!(p < f, "pooled {p:?} vs fresh {f:?}");
    })
}

fn file_client_rotated_token(endpoint: Endpoint) -> Case {
    Box::pin(async move {
        let client = FileClient::new();
        assert!(matches!(
            client.read(&endpoint, "main", "SOUL.md", deadline()).await,
            ReadOutcome::Ok(_)
        ));
        // the same gateway URL with another token: the verified session is not reused, the
        // gateway refuses the new credential
        let rotated = Endpoint::new(endpoint.url.clone(), "rotated-token-0123456789abcdef");
        let outcome = client.read(&rotated, "main", "SOUL.md", deadline()).await;
        assert!(
            matches!(&outcome, ReadOutcome::Unavailable(r) if r.contains("refused the credentials")),
            "{outcome:?}"
        );
        assert!(!format!("{outcome:?}").contains("rotated-token"));
        assert!(matches!(
            client.read(&endpoint, "main", "SOUL.md", deadline()).await,
            ReadOutcome::Ok(_)
        ));
        assert_eq!(client.stats().connections_opened, 1);
    })
}

/// The real gateway does not act on `cancel`: it answers the frame with an `INVALID_REQUEST`
/// response under the cancelled id (skipped) and keeps the connection; the abandoned write is
/// applied after all — which is why it is `Unknown`.
fn file_client_cancel_on_the_real_gateway(endpoint: Endpoint, pid: u32) -> Case {
    Box::pin(async move {
        let client = FileClient::new();
        assert!(matches!(
            client.read(&endpoint, "main", "USER.md", deadline()).await,
            ReadOutcome::Ok(_)
        ));
        let content = format!("# USER.md\n\nabandoned at {:?}\n", Instant::now());
        {
            let _frozen = Frozen::freeze(pid);
            let outcome = client
                .write(
                    &endpoint,
                    "main",
                    "USER.md",
                    &content,
                    Instant::now() + Duration::from_millis(500),
                )
                .await;
            assert!(
                matches!(&outcome, WriteOutcome::Unknown(r) if r.contains("deadline")),
                "{outcome:?}"
            );
            let until = Instant::now() + Duration::from_secs(5);
            while client.stats().cancels_sent == 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(client.stats().cancels_sent, 1);
        }
        // thawed: the set, then the cancel frame, reach the gateway
        let until = Instant::now() + T;
        loop {
            match client.read(&endpoint, "main", "USER.md", deadline()).await {
                ReadOutcome::Ok(f) if f.content == content => break,
                other => {
                    assert!(
                        Instant::now() < until,
                        "the abandoned write never landed: {other:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        let stats = client.stats();
        assert_eq!(
            stats.connections_opened, 1,
            "the cancel kept the connection: {stats:?}"
        );
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
        (
            "another_client_id_gets_an_empty_grant",
            another_client_id_gets_an_empty_grant(ep.clone()),
        ),
        ("files_get", files_get(ep.clone())),
        (
            "files_set_and_read_back",
            files_set_and_read_back(ep.clone(), gw.workspace.clone()),
        ),
        ("expected_hash_conflict", expected_hash_conflict(ep.clone())),
        ("invalid_requests", invalid_requests(ep.clone())),
        (
            "file_client_read_write_missing",
            file_client_read_write_missing(ep.clone(), gw.workspace.clone()),
        ),
        (
            "file_client_reuses_its_connection",
            file_client_reuses_its_connection(ep.clone()),
        ),
        (
            "file_client_rotated_token",
            file_client_rotated_token(ep.clone()),
        ),
        (
            "file_client_cancel_on_the_real_gateway",
            file_client_cancel_on_the_real_gateway(ep.clone(), gw.pid),
        ),
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

    // The gateway SIGKILLed while a write is in flight: frozen (SIGSTOP) before the write,
    // so it cannot answer, and killed as soon as the client reports the request frame written.
    // The client sees the connection reset after the frame was written: Unknown, at once (not
    // at the deadline). The gateway never read the frame, so after a restart the file is
    // unchanged, and the client reconnects transparently.
    let started = Instant::now();
    let killed_write = async {
        let client = FileClient::new();
        let ReadOutcome::Ok(before) = client.read(&ep, "main", "USER.md", deadline()).await else {
            panic!("read before the kill")
        };
        let written = client.stats().requests_written;
        let frozen = Frozen::freeze(gw.pid);
        let write = {
            let client = client.clone();
            let ep = ep.clone();
            tokio::spawn(async move {
                client
                    .write(
                        &ep,
                        "main",
                        "USER.md",
                        "# USER.md\n\nnever\n",
                        Instant::now() + Duration::from_secs(60),
                    )
                    .await
            })
        };
        let until = Instant::now() + Duration::from_secs(5);
        while client.stats().requests_written == written {
            assert!(Instant::now() < until, "the write was never sent");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        signal(gw.pid, rustix::process::Signal::KILL);
        std::mem::forget(frozen); // nothing left to continue
        let sent_to_outcome = Instant::now();
        let outcome = write.await.expect("write task");
        let took = sent_to_outcome.elapsed();
        assert!(
            matches!(&outcome, WriteOutcome::Unknown(r) if !r.contains("deadline")),
            "{outcome:?}"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
        eprintln!("write in flight at SIGKILL: {outcome:?} after {took:?}");
        (client, before)
    }
    .await;
    let (client, before) = killed_write;
    gw.respawn(runtime);
    gw.ready(Duration::from_secs(120)).await;
    let ReadOutcome::Ok(after) = client.read(&ep, "main", "USER.md", deadline()).await else {
        panic!("read after the restart")
    };
    assert_eq!(after, before, "the killed gateway never applied the write");
    assert_eq!(client.stats().connections_opened, 2);
    eprintln!(
        "kill mid-write, restart and read back in {:.1} s",
        started.elapsed().as_secs_f64()
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
