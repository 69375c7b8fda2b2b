#![expect(
    clippy::print_stdout,
    reason = "a benchmark reports its figures on stdout"
)]

//! Native validation of `openclaw.json` (occ's rules and the pinned runtime's schema), in
//! process:
//!
//! - compiling the embedded schema, which happens per top-level section on first use (wall time,
//!   and the process's resident set from `/proc/self/status`: before, after the top level, after
//!   the sections the realistic document uses, after every section);
//! - `validate_document` on the README's example and on a larger realistic document
//!   (`testdata/openclaw-documents.json`), p50/p99 over many runs, next to the baseline measured
//!   in the same run: parsing the same document's request body, which every create already
//!   pays; and the realistic document wrapped in a free-form plugin section, which the API
//!   benchmark's baseline creates (the schema does not descend into it).
//!
//! Run: `cargo bench -p occ-core --bench native_schema` (optionally `-- --runs 20000`).

use std::time::{Duration, Instant};

use occ_core::native::{schema, validate_document};
use occ_core::validate::Problems;
use serde_json::{Value, json};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process's resident set (VmRSS) in MiB.
fn resident_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// p50 and p99 of `runs` timed calls of `f`, in microseconds.
fn measure(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..runs / 10 {
        f();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    let pct = |p: f64| {
        times[((times.len() as f64 * p) as usize).min(times.len() - 1)].as_secs_f64() * 1e6
    };
    (pct(0.50), pct(0.99))
}

fn document(name: &str) -> Value {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("../testdata/openclaw-documents.json")).expect("json");
    cases
        .into_iter()
        .find(|c| c["name"] == name)
        .map(|c| c["document"].clone())
        .unwrap_or_else(|| panic!("no document {name}"))
}

fn main() {
    let runs = arg("--runs", 5000);

    // Compilation happens per top-level section on first use: the resident set after the top
    // level alone, after the sections the realistic document uses, and after every section.
    let before = resident_mib();
    let timed = |f: &dyn Fn()| {
        let started = Instant::now();
        f();
        (started.elapsed(), resident_mib())
    };
    let (frame_time, after_frame) = timed(&schema::warm);
    let (used_time, after_used) = timed(&|| {
        let mut problems = Problems::new();
        validate_document(&document("realistic"), "/values", &mut problems);
    });
    let (all_time, after_all) = timed(&schema::compile_all);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{}",
        json!({"rss_before_mib": before,
               "frame_ms": ms(frame_time), "rss_after_frame_mib": after_frame,
               "realistic_sections_ms": ms(used_time), "rss_after_realistic_sections_mib": after_used,
               "all_sections_ms": ms(all_time), "rss_after_all_sections_mib": after_all,
               "embedded_schema_bytes": schema::PINNED_SCHEMA.len()})
    );

    let realistic = document("realistic");
    let wrapped = json!({"plugins": {"entries": {"occ-bench": {"config": realistic.clone()}}}});
    let mut rows = Vec::new();
    for (name, doc) in [
        ("README example", document("readme")),
        ("realistic", realistic),
        ("realistic in a free-form plugin section", wrapped),
    ] {
        let body = json!({"kind": "agent", "values": doc}).to_string();
        let parse = measure(runs, || {
            let parsed: Value = serde_json::from_str(&body).expect("json");
            std::hint::black_box(parsed);
        });
        let validate = measure(runs, || {
            let mut problems = Problems::new();
            validate_document(&doc, "/values", &mut problems);
            assert!(problems.is_empty(), "{name}: {:?}", problems.items());
        });
        println!(
            "{}",
            json!({"document": name, "bytes": body.len(), "runs": runs,
                   "parse_p50_us": parse.0, "parse_p99_us": parse.1,
                   "validate_p50_us": validate.0, "validate_p99_us": validate.1})
        );
        rows.push((name, body.len(), parse, validate));
    }

    println!();
    println!(
        "compile on first use — top level: {:.1} ms, resident set {before:.1} → {after_frame:.1} MiB; \
         the realistic document's sections: +{:.0} ms → {after_used:.1} MiB; every section: \
         +{:.0} ms → {after_all:.1} MiB",
        ms(frame_time),
        ms(used_time),
        ms(all_time)
    );
    println!();
    println!(
        "| document | body bytes | parse body p50 µs | validate p50 µs | validate p99 µs | validate vs parse (p50) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, bytes, parse, validate) in rows {
        println!(
            "| {name} | {bytes} | {:.1} | {:.1} | {:.1} | {:.1}× |",
            parse.0,
            validate.0,
            validate.1,
            validate.0 / parse.0
        );
    }
}
