#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Loading an Agent's native Control UI through occ's Agent-origin proxy next to loading it
//! straight from the gateway, in the same run, on one real OpenClaw gateway (process Compute
//! Driver) in trusted-proxy mode.
//!
//! The real `occ serve` and `occ worker` binaries run as processes on a throwaway SQLite
//! database; one Agent with `gateway.controlUi.enabled` is deployed, the bootstrap
//! administrator signs in and takes the launch ticket for the Agent's origin. A page load is the
//! UI's HTML plus every script and stylesheet it names, fetched one after another over one
//! keep-alive connection per way; the order of the two ways rotates every round:
//!
//! - `occ_proxy`: `http://agent-<opaque>.localhost:<occ port>/…` with the origin's pass (each
//!   request: the pass checked, the session read, `use` decided, the Agent and revision read, the
//!   gateway located, a fresh upstream connection, headers rewritten);
//! - `direct_gateway`: `http://127.0.0.1:<gateway port>/…` (the gateway serves these files
//!   without authentication).
//!
//! occ's overhead = proxy p50 − direct p50 per page load.
//!
//! Run: `cargo bench -p occ --bench native_admin` (optionally `-- --loads 40 --warmup 5`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use occ_store::Backend;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::Stack;

/// The gateway ports of this bench's process Driver (no test uses them).
const PORTS: &str = "29240-29259";

fn arg_usize(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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

/// The same-origin scripts and stylesheets an HTML page names (`src="/…"`, `href="/…"`).
fn assets(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attribute) {
            rest = &rest[i + attribute.len()..];
            let Some(end) = rest.find('"') else { break };
            let value = &rest[..end];
            let wanted = value.ends_with(".js") || value.ends_with(".css");
            if wanted && !value.contains("://") && !value.starts_with("//") {
                let path = if value.starts_with('/') {
                    value.to_owned()
                } else {
                    format!("/{}", value.trim_start_matches("./"))
                };
                if !found.contains(&path) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// One page load: the HTML and every asset, in order; the bytes fetched.
async fn load(http: &reqwest::Client, base: &str, paths: &[String], pass: Option<&str>) -> usize {
    let mut bytes = 0;
    for path in std::iter::once(&"/".to_owned()).chain(paths) {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(pass) = pass {
            request = request.header("cookie", pass);
        }
        let res = request.send().await.expect("request");
        assert_eq!(res.status(), StatusCode::OK, "{base}{path}");
        bytes += res.bytes().await.expect("body").len();
    }
    bytes
}

fn main() {
    let loads = arg_usize("--loads", 30).max(1);
    let warmup = arg_usize("--warmup", 3);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stack = Stack::start_with(
            Backend::Sqlite,
            PORTS,
            &[("OCC_AGENT_NATIVE_ADMIN_DOMAIN", "localhost".into())],
        )
        .await;
        let cfg = stack
            .configuration(json!({"gateway": {"controlUi": {"enabled": true}}}))
            .await;
        let agent = stack.agent("ui-bench", &cfg).await;
        let rev = stack.deploy(&agent).await;
        let d = stack.settled(&agent, &rev).await;
        assert_eq!(d["status"], "succeeded", "deployment failed: {d}");

        // Sign in and take the origin's pass, as a browser would.
        let plain = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let session = stack.admin_session().await;
        // The administrator's runtime role on the Agent (entry needs one).
        let principal = stack.session_principal(&session).await;
        let (code, role) = stack
            .call(
                reqwest::Method::POST,
                &format!("/namespaces/{}/iam/roles", stack.ns),
                Some(
                    serde_json::to_vec(
                        &json!({"permissions": [{"action": "use", "resourceKind": "agent"}]}),
                    )
                    .unwrap(),
                ),
            )
            .await;
        assert_eq!(code.as_u16(), 201, "{role}");
        let (code, binding) = stack
            .call(
                reqwest::Method::POST,
                &format!("/namespaces/{}/iam/access-bindings", stack.ns),
                Some(
                    serde_json::to_vec(&json!({
                        "subjectKind": "identity", "subjectId": principal,
                        "roleId": role["data"]["id"], "resourceKind": "agent",
                        "resourceId": agent, "runtimeRole": "platform-administrator"}))
                    .unwrap(),
                ),
            )
            .await;
        assert_eq!(code.as_u16(), 201, "{binding}");
        let status: Value = plain
            .get(format!(
                "{}/namespaces/{}/agents/{agent}/native-admin",
                stack.url, stack.ns
            ))
            .header("cookie", &session)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let host = status["data"]["host"].as_str().expect("host").to_owned();
        let origin = status["data"]["origin"].as_str().expect("origin").to_owned();
        let occ_port: u16 = stack.url.rsplit(':').next().unwrap().parse().unwrap();
        let occ_addr: SocketAddr = format!("127.0.0.1:{occ_port}").parse().unwrap();
        let browser = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, occ_addr)
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        // The origin binds the launch to this browser with a nonce cookie.
        let start = browser.get(format!("{origin}/")).send().await.unwrap();
        let nonce = start.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let launch_url = start.headers()["location"].to_str().unwrap().to_owned();
        let launch = plain
            .get(launch_url)
            .header("cookie", &session)
            .send()
            .await
            .unwrap();
        let callback = launch.headers()["location"].to_str().unwrap().to_owned();
        let res = browser
            .get(&callback)
            .header("cookie", &nonce)
            .send()
            .await
            .unwrap();
        let pass = res.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();

        let record: Value = serde_json::from_slice(
            &std::fs::read(stack.agent_dir(&agent).join("gateway.json")).expect("gateway.json"),
        )
        .expect("gateway.json is JSON");
        let direct_base = format!("http://127.0.0.1:{}", record["port"]);
        let direct = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let html = direct
            .get(format!("{direct_base}/"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let paths = assets(&html);

        let mut samples: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut bytes = [0usize; 2];
        for round in 0..warmup + loads {
            for k in 0..2 {
                let way = (round + k) % 2;
                let started = Instant::now();
                let fetched = if way == 0 {
                    load(&browser, &origin, &paths, Some(&pass)).await
                } else {
                    load(&direct, &direct_base, &paths, None).await
                };
                let elapsed = started.elapsed();
                if round >= warmup {
                    samples[way].push(elapsed);
                    bytes[way] = fetched;
                }
            }
        }
        for (way, name) in [(0, "occ_proxy"), (1, "direct_gateway")] {
            let s = &samples[way];
            println!(
                "{}",
                json!({"way": name, "page_loads": s.len(), "requests_per_load": paths.len() + 1,
                       "bytes_per_load": bytes[way],
                       "p50_ms": round2(percentile(s, 0.5)), "p90_ms": round2(percentile(s, 0.9)),
                       "max_ms": round2(percentile(s, 1.0))})
            );
        }
        let overhead = percentile(&samples[0], 0.5) - percentile(&samples[1], 0.5);
        let ratio = percentile(&samples[0], 0.5) / percentile(&samples[1], 0.5);
        println!(
            "{}",
            json!({"overhead_p50_ms": round2(overhead), "ratio_p50": round2(ratio),
                   "overhead_per_request_ms": round2(overhead / (paths.len() + 1) as f64)})
        );
        println!(
            "Control UI page load ({} requests) through occ: {:.2} ms vs direct {:.2} ms at p50 over {loads} loads each (+{overhead:.2} ms, {ratio:.2}×)",
            paths.len() + 1,
            percentile(&samples[0], 0.5),
            percentile(&samples[1], 0.5),
        );
        drop(stack);
    });
}
