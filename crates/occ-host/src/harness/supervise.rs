//! The launcher's long-running children: each started when it may start, its output written
//! to the launcher's log with its name as prefix, restarted after it exits with backoff
//! (1 s doubling to 30 s, back to 1 s after a run of at least a minute), and stopped on
//! shutdown (SIGTERM to its process group, 10 s, SIGKILL). Children are bound to the launcher's life: started
//! through `setpriv --pdeathsig KILL` when the host has it (util-linux; occ forbids the unsafe
//! `pre_exec` a direct `prctl` would need), killed when their handle drops, and the node host
//! also exits when its stdin (held by the launcher) closes.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::sync::watch;

const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A run this long resets the backoff.
const STABLE_RUN: Duration = Duration::from_secs(60);
/// How long a child may take to exit after SIGTERM.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often a child that may not start yet is checked again.
const READY_POLL: Duration = Duration::from_secs(1);
/// Bound on one logged output line (the rest of the line is dropped).
const LINE_MAX: u64 = 16 * 1024;

/// The launcher's log file: its own lines and its children's, each prefixed. Shared by the
/// supervisors; `O_APPEND`, so a supervisor that also captures the launcher's stdout may
/// write the same file.
#[derive(Debug, Clone)]
pub(super) struct HarnessLog {
    file: Arc<Mutex<std::fs::File>>,
    tee_stdout: bool,
}

impl HarnessLog {
    /// Opens (creates 0600, appends; never through a symbolic link) the log file; with
    /// `tee_stdout` each line also goes to standard output.
    pub(super) fn open(path: &Path, tee_stdout: bool) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Self {
            file: Arc::new(Mutex::new(file)),
            tee_stdout,
        })
    }

    /// Appends `<prefix>: <line>`; a failing write is dropped (the log must not stop the
    /// harness).
    pub(super) fn line(&self, prefix: &str, line: &str) {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(file, "{prefix}: {line}");
        if self.tee_stdout {
            // Under the file's lock, so lines from different children do not interleave.
            let _ = writeln!(std::io::stdout().lock(), "{prefix}: {line}");
        }
    }
}

/// One supervised program.
pub(super) struct Child {
    /// The log prefix (`app-server`, `node`).
    pub(super) name: &'static str,
    pub(super) program: PathBuf,
    pub(super) args: Vec<OsString>,
    /// The whole environment (nothing is inherited).
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) cwd: PathBuf,
    /// Give it a stdin pipe the launcher holds open while it runs.
    pub(super) parent_stdin: bool,
    /// Whether it may start now (checked before each start).
    pub(super) ready: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    /// Where `setpriv` is looked for.
    pub(super) search_path: OsString,
}

/// Supervises `children` until `shutdown` turns true, then stops them all and returns.
pub(super) async fn supervise(
    children: Vec<Child>,
    log: &HarnessLog,
    shutdown: watch::Receiver<bool>,
) {
    let tasks: Vec<_> = children
        .into_iter()
        .map(|child| {
            let log = log.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { keep_running(child, log, shutdown).await })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

async fn keep_running(child: Child, log: HarnessLog, mut shutdown: watch::Receiver<bool>) {
    let setpriv = find_program(&child.search_path, "setpriv");
    if setpriv.is_none() {
        log.line(
            "harness",
            &format!(
                "setpriv not found: {} is not killed with the launcher",
                child.name
            ),
        );
    }
    let mut backoff = BACKOFF_FIRST;
    let mut waiting_logged = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if let Some(ready) = &child.ready
            && !ready()
        {
            if !waiting_logged {
                log.line(child.name, "waiting for a setup code or a paired state");
                waiting_logged = true;
            }
            if stopped_during(&mut shutdown, READY_POLL).await {
                return;
            }
            continue;
        }
        let started = Instant::now();
        match spawn(&child, setpriv.as_deref(), &log) {
            Err(e) => log.line(child.name, &format!("cannot start: {}", e.kind())),
            Ok(mut process) => {
                log.line(
                    child.name,
                    &format!("started pid={}", process.id().unwrap_or_default()),
                );
                // Held open while it runs (the node host exits when it closes).
                let _stdin = process.stdin.take();
                tokio::select! {
                    status = process.wait() => {
                        let shown = status.map(|s| s.to_string()).unwrap_or_else(|e| e.kind().to_string());
                        log.line(child.name, &format!("exited: {shown}"));
                    }
                    () = until_stopped(&mut shutdown) => {
                        stop(&mut process, child.name, &log).await;
                        return;
                    }
                }
            }
        }
        if started.elapsed() >= STABLE_RUN {
            backoff = BACKOFF_FIRST;
        }
        log.line(
            child.name,
            &format!("restarting in {} ms", backoff.as_millis()),
        );
        if stopped_during(&mut shutdown, backoff).await {
            return;
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Sleeps `wait`; true when shutdown came first.
async fn stopped_during(shutdown: &mut watch::Receiver<bool>, wait: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = until_stopped(shutdown) => return true,
    }
    *shutdown.borrow()
}

/// Returns once shutdown is asked (or its sender is gone).
pub(super) async fn until_stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

fn spawn(
    child: &Child,
    setpriv: Option<&Path>,
    log: &HarnessLog,
) -> std::io::Result<tokio::process::Child> {
    let mut cmd = match setpriv {
        Some(setpriv) => {
            let mut cmd = tokio::process::Command::new(setpriv);
            cmd.args(["--pdeathsig", "KILL", "--"]).arg(&child.program);
            cmd
        }
        None => tokio::process::Command::new(&child.program),
    };
    cmd.args(&child.args)
        .env_clear()
        .envs(child.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&child.cwd)
        .stdin(if child.parent_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: the node host runs a second process (`openclaw-node`), and a stop
        // must reach both.
        .process_group(0)
        .kill_on_drop(true);
    let mut process = cmd.spawn()?;
    if let Some(out) = process.stdout.take() {
        tokio::spawn(copy_lines(out, child.name, log.clone()));
    }
    if let Some(err) = process.stderr.take() {
        tokio::spawn(copy_lines(err, child.name, log.clone()));
    }
    Ok(process)
}

/// Copies a child's output into the log, line by line with its prefix.
async fn copy_lines<R: tokio::io::AsyncRead + Unpin>(
    stream: R,
    name: &'static str,
    log: HarnessLog,
) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(LINE_MAX)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                log.line(name, text.trim_end_matches(['\n', '\r']));
            }
        }
    }
}

/// SIGTERM to the child's process group, up to [`STOP_GRACE`] for the child to exit, then
/// SIGKILL to the group; waits for the exit either way. What is left in the group after the
/// child exited is killed too.
async fn stop(process: &mut tokio::process::Child, name: &str, log: &HarnessLog) {
    use nix::sys::signal::{Signal, killpg};
    let group = process
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(nix::unistd::Pid::from_raw);
    if let Some(group) = group {
        let _ = killpg(group, Signal::SIGTERM);
    }
    match tokio::time::timeout(STOP_GRACE, process.wait()).await {
        Ok(_) => log.line(name, "stopped"),
        Err(_) => {
            let _ = process.start_kill();
            let _ = process.wait().await;
            log.line(name, "killed after the stop grace");
        }
    }
    if let Some(group) = group {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// The first executable `name` in `search_path`.
fn find_program(search_path: &OsString, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::split_paths(search_path)
        .map(|dir| dir.join(name))
        .find(|path| {
            std::fs::metadata(path)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
