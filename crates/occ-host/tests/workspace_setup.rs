//! The workspace setup runtime against the real pinned OpenClaw: stock defaults as native setup
//! writes them, application, replay, completed-mode verification and every refusal on a real
//! workspace. Native setup takes a few seconds per run; these tests run it 6 times in all.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_core::{AgentId, NamespaceId};
use occ_host::runtime::OpenclawRuntime;
use occ_host::workspace_setup::{
    self, MARKER_FILE, STOCK_DEFAULTS_ID, SetupEnv, SetupError, SetupInput, SetupOutcome, TEMP_FILE,
};

const CANARY: &str = "CANARY-only-in-file-contents-4b1d";
const NAMES: [&str; 4] = ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"];

fn runtime() -> OpenclawRuntime {
    occ_testkit::runtime::shared_runtime().clone()
}

/// A private temp dir with a workspace path (not created yet), a scratch dir and a TMPDIR.
struct Fixture {
    dir: tempfile::TempDir,
    workspace: PathBuf,
    input: PathBuf,
    env: SetupEnv,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let env = SetupEnv::new(runtime(), root.join("scratch/setup"), root.join("tmp"));
        Fixture {
            workspace: root.join("agent/state/workspace"),
            input: root.join("setup-input.json"),
            env,
            dir,
        }
    }

    /// An environment whose TMPDIR proves, by its absence, that native setup never ran.
    fn untouched_env(&self, label: &str) -> SetupEnv {
        SetupEnv::new(
            self.env.runtime.clone(),
            self.dir.path().join(format!("scratch-{label}")),
            self.dir.path().join(format!("tmp-{label}")),
        )
    }

    fn write_input(&self, input: &SetupInput) {
        workspace_setup::write_input_file(&self.input, input).expect("write input");
    }

    fn write_raw_input(&self, bytes: &[u8]) {
        let _ = fs::remove_file(&self.input);
        fs::write(&self.input, bytes).expect("write raw input");
    }

    fn file(&self, name: &str) -> PathBuf {
        self.workspace.join(name)
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.file(name)).expect("read workspace file")
    }
}

fn setup_input(files: &[(&str, &str)], completed: bool) -> SetupInput {
    SetupInput {
        id: format!(
            "wss_{}",
            AgentId::generate().as_str().trim_start_matches("agt_")
        ),
        namespace_id: NamespaceId::generate().to_string(),
        agent_id: AgentId::generate().to_string(),
        defaults_id: Some(STOCK_DEFAULTS_ID.to_owned()),
        files: (!completed).then(|| {
            files
                .iter()
                .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                .collect()
        }),
        completed,
    }
}

/// The same identity, completed (as the record is after activation).
fn completed(input: &SetupInput) -> SetupInput {
    SetupInput {
        files: None,
        completed: true,
        ..input.clone()
    }
}

/// Every top-level regular file of the workspace with its bytes.
fn snapshot(workspace: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(workspace)
        .expect("list workspace")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_type().expect("type").is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

/// The error, checked to never show file contents (Display and Debug).
fn refused(result: Result<SetupOutcome, SetupError>) -> SetupError {
    let err = result.expect_err("the setup must be refused");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(CANARY), "file contents leaked: {shown}");
    assert!(!shown.contains("CANARY"), "file contents leaked: {shown}");
    err
}

#[tokio::test]
async fn stock_defaults_are_what_native_setup_writes() {
    let fx = Fixture::new();
    let defaults = workspace_setup::stock_defaults(&fx.env.runtime).expect("defaults");
    assert_eq!(defaults.id, STOCK_DEFAULTS_ID);
    assert_eq!(defaults.files.len(), 4);
    let ordered: Vec<(String, String)> = NAMES
        .iter()
        .map(|n| ((*n).to_owned(), defaults.files[*n].clone()))
        .collect();
    assert_eq!(workspace_setup::defaults_id(&ordered), defaults.id);

    // A fresh workspace whose parents do not exist yet.
    workspace_setup::native_setup(&fx.workspace, &fx.env)
        .await
        .expect("native setup");
    for name in NAMES {
        assert_eq!(fx.read(name), defaults.files[name], "{name}");
    }
    assert!(fx.file("BOOTSTRAP.md").is_file());
    assert!(fx.workspace.join(".git").is_dir());
    for dir in [
        fx.workspace.clone(),
        fx.dir.path().join("agent"),
        fx.dir.path().join("agent/state"),
    ] {
        assert_eq!(
            fs::metadata(&dir).expect("stat").mode() & 0o777,
            0o700,
            "{dir:?}"
        );
    }
    assert!(!fx.env.scratch.exists(), "the scratch directory is removed");
    assert!(!fx.file(MARKER_FILE).exists());
}

/// Every entry under `root` (directories, files) with its permission bits and, for a file,
/// its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("list") {
            let entry = entry.expect("entry");
            let meta = fs::symlink_metadata(entry.path()).expect("stat");
            let relative = entry
                .path()
                .strip_prefix(root)
                .expect("under root")
                .to_owned();
            let content = if meta.is_dir() {
                pending.push(entry.path());
                None
            } else {
                Some(fs::read(entry.path()).expect("read"))
            };
            entries.insert(relative, (meta.mode() & 0o7777, content));
        }
    }
    entries
}

/// The runtime's stock workspace (made once by the install) seeds an empty workspace with
/// exactly what native setup writes into a new one: every file, directory (`.git` included),
/// byte and permission bit. A workspace that is not empty, or missing, is left to native setup.
#[tokio::test]
async fn the_runtimes_stock_workspace_is_what_native_setup_writes() {
    let fx = Fixture::new();
    workspace_setup::native_setup(&fx.workspace, &fx.env)
        .await
        .expect("native setup");
    let runtime = &fx.env.runtime;
    assert!(
        runtime.baseline_workspace().is_some(),
        "the install made the stock workspace at {}",
        runtime.root.display()
    );
    let copied = fx.dir.path().join("copied");
    fs::create_dir(&copied).expect("mkdir");
    assert!(runtime.seed_from_baseline(&copied).expect("seed"));
    assert_eq!(tree(&copied), tree(&fx.workspace));
    assert!(tree(&copied).contains_key(Path::new(".git/HEAD")));

    let started = fx.dir.path().join("started");
    fs::create_dir(&started).expect("mkdir");
    fs::write(started.join("USER.md"), "mine\n").expect("write");
    assert!(!runtime.seed_from_baseline(&started).expect("seed"));
    assert_eq!(fs::read_dir(&started).expect("list").count(), 1);
    let missing = fx.dir.path().join("missing");
    assert!(!runtime.seed_from_baseline(&missing).expect("seed"));
    assert!(!missing.exists());
}

#[tokio::test]
async fn applies_once_then_replays_and_verifies() {
    let fx = Fixture::new();
    let defaults = workspace_setup::stock_defaults(&fx.env.runtime).expect("defaults");
    let user = format!("# USER.md\n\nName: Ada {CANARY}\n  trailing spaces kept  \n");
    let input = setup_input(
        &[
            ("USER.md", &user),
            ("SOUL.md", ""),
            ("AGENTS.md", &defaults.files["AGENTS.md"]),
        ],
        false,
    );
    fx.write_input(&input);
    assert_eq!(fs::metadata(&fx.input).expect("stat").mode() & 0o777, 0o600);

    let outcome = workspace_setup::run(&fx.input, &fx.workspace, &fx.env)
        .await
        .expect("setup");
    assert_eq!(outcome, SetupOutcome::Applied);
    assert_eq!(fx.read("USER.md"), user);
    assert_eq!(fx.read("SOUL.md"), "");
    assert_eq!(fx.read("AGENTS.md"), defaults.files["AGENTS.md"]);
    // Untouched by occ, and not renamed by first-agent onboarding either.
    assert_eq!(fx.read("IDENTITY.md"), defaults.files["IDENTITY.md"]);
    // The second native run saw the profile and completed onboarding.
    assert!(!fx.file("BOOTSTRAP.md").exists());
    let marker = fs::read_to_string(fx.file(MARKER_FILE)).expect("marker");
    assert_eq!(
        marker,
        format!(
            r#"{{"id":"{}","namespaceId":"{}","agentId":"{}","defaultsId":"{STOCK_DEFAULTS_ID}"}}"#,
            input.id, input.namespace_id, input.agent_id
        )
    );
    for name in [MARKER_FILE, "USER.md", "SOUL.md"] {
        assert_eq!(
            fs::metadata(fx.file(name)).expect("stat").mode() & 0o777,
            0o600,
            "{name}"
        );
    }
    assert!(!fx.input.exists(), "the input file is deleted");
    assert!(!fx.file(TEMP_FILE).exists());
    assert!(!fx.env.scratch.exists());
    let applied = snapshot(&fx.workspace);

    // A lost acknowledgement: the same input again changes nothing and needs no runtime run.
    let quiet = fx.untouched_env("replay");
    fx.write_input(&input);
    let outcome = workspace_setup::run(&fx.input, &fx.workspace, &quiet)
        .await
        .expect("replay");
    assert_eq!(outcome, SetupOutcome::AlreadyApplied);
    assert_eq!(snapshot(&fx.workspace), applied);
    assert!(!fx.input.exists());

    // Live edits survive a replay and completed-mode verification.
    let edited = format!("edited by the user {CANARY}\n");
    fs::write(fx.file("USER.md"), &edited).expect("edit");
    fx.write_input(&input);
    assert_eq!(
        workspace_setup::run(&fx.input, &fx.workspace, &quiet)
            .await
            .expect("replay after edit"),
        SetupOutcome::AlreadyApplied
    );
    let done = completed(&input);
    fx.write_input(&done);
    assert_eq!(
        workspace_setup::run(&fx.input, &fx.workspace, &quiet)
            .await
            .expect("verify"),
        SetupOutcome::AlreadyApplied
    );
    assert!(fx.input.exists(), "a completed record's input is kept");
    assert_eq!(fx.read("USER.md"), edited);
    assert!(!quiet.tmpdir.exists(), "native setup never ran");

    // Another identity (not completed, or completed) is refused and touches nothing.
    let before = snapshot(&fx.workspace);
    let other = setup_input(&[("USER.md", CANARY)], false);
    for other in [other.clone(), completed(&other)] {
        fx.write_input(&other);
        let err = refused(workspace_setup::run(&fx.input, &fx.workspace, &quiet).await);
        assert!(matches!(err, SetupError::MarkerMismatch), "{err:?}");
        assert!(fx.input.exists(), "a refused input is kept");
    }
    // The same ids without the defaults id are another identity too.
    let no_defaults = SetupInput {
        defaults_id: None,
        ..done.clone()
    };
    fx.write_input(&no_defaults);
    let err = refused(workspace_setup::run(&fx.input, &fx.workspace, &quiet).await);
    assert!(matches!(err, SetupError::MarkerMismatch), "{err:?}");
    assert_eq!(snapshot(&fx.workspace), before);
    assert!(!quiet.tmpdir.exists());
}

#[tokio::test]
async fn refusals_on_a_seeded_workspace_never_touch_it() {
    let fx = Fixture::new();
    let defaults = workspace_setup::stock_defaults(&fx.env.runtime).expect("defaults");
    workspace_setup::native_setup(&fx.workspace, &fx.env)
        .await
        .expect("seed");
    let quiet = fx.untouched_env("refusals");
    let run = |env: SetupEnv| {
        let input = fx.input.clone();
        let workspace = fx.workspace.clone();
        async move { workspace_setup::run(&input, &workspace, &env).await }
    };

    // A divergent existing file is never overwritten.
    let user_text = format!("the user's own profile {CANARY}\n");
    fs::write(fx.file("USER.md"), &user_text).expect("user edit");
    let before = snapshot(&fx.workspace);
    let input = setup_input(
        &[
            ("USER.md", &format!("submitted {CANARY}")),
            ("SOUL.md", "x"),
        ],
        false,
    );
    fx.write_input(&input);
    let err = refused(run(quiet.clone()).await);
    assert!(
        matches!(&err, SetupError::Divergent { name } if name == "USER.md"),
        "{err:?}"
    );
    assert_eq!(err.kind(), "FILE_DIVERGENT");
    assert!(!err.is_retryable());
    assert_eq!(snapshot(&fx.workspace), before);
    assert!(fx.input.exists());

    // Completed, but the marker is gone: operator recovery.
    fx.write_input(&completed(&input));
    let err = refused(run(quiet.clone()).await);
    assert!(matches!(err, SetupError::MarkerMissing), "{err:?}");
    assert!(
        err.to_string().contains("operator recovery needed"),
        "{err}"
    );

    // A form built on other defaults.
    let stale = SetupInput {
        defaults_id: Some("0".repeat(64)),
        ..setup_input(&[("SOUL.md", CANARY)], false)
    };
    fx.write_input(&stale);
    let err = refused(run(quiet.clone()).await);
    assert!(
        matches!(&err, SetupError::StaleDefaults { current, .. } if current == STOCK_DEFAULTS_ID),
        "{err:?}"
    );

    // Workspace files that are not plain files.
    fs::write(fx.dir.path().join("elsewhere.md"), CANARY).expect("write");
    fs::remove_file(fx.file("SOUL.md")).expect("rm");
    std::os::unix::fs::symlink(fx.dir.path().join("elsewhere.md"), fx.file("SOUL.md"))
        .expect("symlink");
    fx.write_input(&setup_input(&[("SOUL.md", CANARY)], false));
    let err = refused(run(quiet.clone()).await);
    assert!(
        matches!(&err, SetupError::UnsafeFile { name, .. } if name == "SOUL.md"),
        "{err:?}"
    );
    fs::hard_link(fx.file("IDENTITY.md"), fx.dir.path().join("identity-link")).expect("link");
    fx.write_input(&setup_input(&[("IDENTITY.md", CANARY)], false));
    let err = refused(run(quiet.clone()).await);
    assert!(
        matches!(&err, SetupError::UnsafeFile { name, .. } if name == "IDENTITY.md"),
        "{err:?}"
    );
    fs::remove_file(fx.dir.path().join("identity-link")).expect("unlink");
    fs::remove_file(fx.file("SOUL.md")).expect("rm link");
    fs::write(fx.file("SOUL.md"), &defaults.files["SOUL.md"]).expect("restore");
    fs::write(fx.file("USER.md"), &defaults.files["USER.md"]).expect("restore");

    // A leftover temp file that is not a plain file.
    fs::create_dir(fx.file(TEMP_FILE)).expect("mkdir");
    let input = setup_input(&[("USER.md", CANARY)], false);
    fx.write_input(&input);
    let err = refused(run(quiet.clone()).await);
    assert!(
        matches!(&err, SetupError::UnsafeFile { name, .. } if name == TEMP_FILE),
        "{err:?}"
    );
    fs::remove_dir(fx.file(TEMP_FILE)).expect("rmdir");

    // Markers that are not small plain files.
    let marker = fx.file(MARKER_FILE);
    std::os::unix::fs::symlink(fx.dir.path().join("elsewhere.md"), &marker).expect("symlink");
    let err = refused(run(quiet.clone()).await);
    assert!(matches!(err, SetupError::MarkerInvalid(_)), "{err:?}");
    fs::remove_file(&marker).expect("rm");
    fs::write(&marker, "x".repeat(4097)).expect("big marker");
    let err = refused(run(quiet.clone()).await);
    assert!(matches!(err, SetupError::MarkerInvalid(_)), "{err:?}");
    fs::remove_file(&marker).expect("rm");
    fs::create_dir(&marker).expect("dir marker");
    let err = refused(run(quiet.clone()).await);
    assert!(matches!(err, SetupError::MarkerInvalid(_)), "{err:?}");
    fs::remove_dir(&marker).expect("rm");

    // A scratch directory inside the workspace (it is removed after each run) is refused.
    let inside = SetupEnv::new(
        fx.env.runtime.clone(),
        fx.workspace.join("scratch"),
        quiet.tmpdir.clone(),
    );
    let err = refused(run(inside).await);
    assert!(matches!(err, SetupError::Workspace(_)), "{err:?}");

    assert!(!quiet.tmpdir.exists(), "native setup never ran");
    assert!(fx.input.exists(), "refused inputs are kept");

    // Resuming after a crash between a replacement and the marker: the file already holds its
    // value and a leftover temp file is cleaned up.
    fs::write(fx.file("USER.md"), CANARY).expect("as if replaced");
    fs::write(fx.file(TEMP_FILE), "half-written").expect("leftover temp");
    let outcome = workspace_setup::run(&fx.input, &fx.workspace, &fx.env)
        .await
        .expect("resume");
    assert_eq!(outcome, SetupOutcome::Applied);
    assert_eq!(fx.read("USER.md"), CANARY);
    assert!(!fx.file(TEMP_FILE).exists());
    assert_eq!(fs::read(&marker).expect("marker"), input.marker());
}

#[tokio::test]
async fn unsafe_workspace_paths_are_refused() {
    let fx = Fixture::new();
    let real = fx.dir.path().join("real");
    fs::create_dir(&real).expect("mkdir");
    let link = fx.dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let file = fx.dir.path().join("file");
    fs::write(&file, "x").expect("file");
    let input = setup_input(&[("USER.md", CANARY)], false);
    let root = fx.dir.path().to_str().expect("utf-8").to_owned();
    for workspace in [
        link.join("ws"),
        link.clone(),
        file.join("ws"),
        PathBuf::from("relative/ws"),
        PathBuf::from(format!("{root}/real/../ws")),
        PathBuf::from(format!("{root}/./ws")),
        PathBuf::from(format!("{root}//ws")),
        PathBuf::from(format!("{root}/ws/")),
        PathBuf::from("/"),
    ] {
        fx.write_input(&input);
        let err = refused(workspace_setup::run(&fx.input, &workspace, &fx.env).await);
        assert!(
            matches!(err, SetupError::Workspace(_)),
            "{workspace:?}: {err:?}"
        );
        assert_eq!(err.kind(), "WORKSPACE_UNSAFE");
        assert!(fx.input.exists());
    }
    assert_eq!(
        fs::read_dir(&real).expect("ls").count(),
        0,
        "nothing created"
    );
    assert!(!fx.dir.path().join("ws").exists());
    assert!(!fx.env.tmpdir.exists(), "native setup never ran");
}

#[tokio::test]
async fn malformed_inputs_are_refused_without_quoting_them() {
    let fx = Fixture::new();
    let ns = NamespaceId::generate();
    let agt = AgentId::generate();
    let head = format!(r#""id":"wss_1","namespaceId":"{ns}","agentId":"{agt}""#);
    let big = "x".repeat(16 * 1024 + 1);
    let cases: Vec<(&str, String)> = vec![
        ("not JSON", format!("{{{CANARY}")),
        (
            "truncated",
            format!(r#"{{{head},"files":{{"USER.md":"{CANARY}"#),
        ),
        ("not an object", format!(r#"["{CANARY}"]"#)),
        (
            "unknown key",
            format!(r#"{{{head},"completed":true,"{CANARY}":1}}"#),
        ),
        (
            "missing completed",
            format!(r#"{{{head},"files":{{"USER.md":"{CANARY}"}}}}"#),
        ),
        (
            "completed not a boolean",
            format!(r#"{{{head},"completed":"{CANARY}"}}"#),
        ),
        (
            "files null",
            format!(r#"{{{head},"completed":false,"files":null}}"#),
        ),
        (
            "defaultsId null",
            format!(r#"{{{head},"completed":true,"defaultsId":null}}"#),
        ),
        (
            "completed with files",
            format!(r#"{{{head},"completed":true,"files":{{"USER.md":"{CANARY}"}}}}"#),
        ),
        ("no files", format!(r#"{{{head},"completed":false}}"#)),
        (
            "empty files",
            format!(r#"{{{head},"completed":false,"files":{{}}}}"#),
        ),
        (
            "bad name",
            format!(r#"{{{head},"completed":false,"files":{{"NOTES.md":"{CANARY}"}}}}"#),
        ),
        (
            "path name",
            format!(r#"{{{head},"completed":false,"files":{{"../USER.md":"{CANARY}"}}}}"#),
        ),
        (
            "NUL",
            format!(r#"{{{head},"completed":false,"files":{{"USER.md":"{CANARY}\u0000"}}}}"#),
        ),
        (
            "oversized content",
            format!(r#"{{{head},"completed":false,"files":{{"USER.md":"{CANARY}{big}"}}}}"#),
        ),
        (
            "non-string content",
            format!(r#"{{{head},"completed":false,"files":{{"USER.md":["{CANARY}"]}}}}"#),
        ),
        (
            "duplicate file",
            format!(
                r#"{{{head},"completed":false,"files":{{"USER.md":"a","USER.md":"{CANARY}"}}}}"#
            ),
        ),
        (
            "duplicate key",
            format!(r#"{{{head},"completed":false,"completed":true}}"#),
        ),
        (
            "lone surrogate",
            format!(r#"{{{head},"completed":false,"files":{{"USER.md":"{CANARY}\ud800"}}}}"#),
        ),
        (
            "empty id",
            format!(r#"{{"id":"","namespaceId":"{ns}","agentId":"{agt}","completed":true}}"#),
        ),
        (
            "long id",
            format!(
                r#"{{"id":"{}","namespaceId":"{ns}","agentId":"{agt}","completed":true}}"#,
                "i".repeat(257)
            ),
        ),
        (
            "control in id",
            format!(r#"{{"id":"a\nb","namespaceId":"{ns}","agentId":"{agt}","completed":true}}"#),
        ),
        (
            "bad namespace id",
            format!(r#"{{"id":"x","namespaceId":"{CANARY}","agentId":"{agt}","completed":true}}"#),
        ),
        (
            "agent id of another kind",
            format!(r#"{{"id":"x","namespaceId":"{ns}","agentId":"{ns}","completed":true}}"#),
        ),
        (
            "bad defaultsId",
            format!(
                r#"{{{head},"completed":true,"defaultsId":"{}"}}"#,
                "A".repeat(64)
            ),
        ),
        (
            "oversized input",
            format!(
                r#"{{{head},"completed":true,"x":"{CANARY}{}"}}"#,
                "y".repeat(400_000)
            ),
        ),
    ];
    for (label, bytes) in &cases {
        fx.write_raw_input(bytes.as_bytes());
        let err = refused(workspace_setup::run(&fx.input, &fx.workspace, &fx.env).await);
        assert!(matches!(err, SetupError::Input(_)), "{label}: {err:?}");
        assert_eq!(err.kind(), "INPUT_INVALID", "{label}");
        assert!(fx.input.exists(), "{label}: a refused input is kept");
    }
    // The id limit is 256 characters, not bytes.
    let ok = format!(
        r#"{{"id":"{}","namespaceId":"{ns}","agentId":"{agt}","completed":true}}"#,
        "é".repeat(256)
    );
    assert!(workspace_setup::parse_input(ok.as_bytes()).is_ok());

    // Input files that are not private regular files.
    let good = setup_input(&[("USER.md", CANARY)], false);
    let target = fx.dir.path().join("target.json");
    workspace_setup::write_input_file(&target, &good).expect("write");
    let link = fx.dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let hard = fx.dir.path().join("hard.json");
    workspace_setup::write_input_file(&hard, &good).expect("write");
    fs::hard_link(&hard, fx.dir.path().join("hard-2.json")).expect("link");
    let fifo = fx.dir.path().join("fifo.json");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let dir = fx.dir.path().join("dir.json");
    fs::create_dir(&dir).expect("mkdir");
    for path in [
        &link,
        &hard,
        &fifo,
        &dir,
        &fx.dir.path().join("missing.json"),
    ] {
        let err = refused(workspace_setup::run(path, &fx.workspace, &fx.env).await);
        assert!(matches!(err, SetupError::Input(_)), "{path:?}: {err:?}");
    }
    assert!(target.exists() && hard.exists());
    assert!(
        !fx.workspace.exists(),
        "nothing is created for a refused input"
    );
    assert!(!fx.env.tmpdir.exists());
}

#[tokio::test]
async fn a_native_setup_past_its_deadline_is_stopped() {
    let fx = Fixture::new();
    let env = SetupEnv {
        timeout: Duration::from_millis(200),
        ..fx.env.clone()
    };
    let err = workspace_setup::native_setup(&fx.workspace, &env)
        .await
        .expect_err("too slow");
    assert!(matches!(err, SetupError::NativeSetup(_)), "{err:?}");
    assert!(err.is_retryable());
    assert!(!env.scratch.exists(), "the scratch directory is removed");
    // Nothing of it is left running.
    let needle = fx.workspace.to_string_lossy().into_owned();
    let survivors: Vec<_> = fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .map(|e| {
            let cmdline = fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            format!(
                "{stat} :: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            )
        })
        .collect();
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}
