//! Facts about processes and ports on this machine, as the supervisors need them: a process's
//! start time (so a recycled pid is never mistaken for a gateway), signals to a gateway's process
//! group, whether a loopback port is free, the hold that keeps a workload from running before
//! its spawner recorded it, and the tail of a log for failure messages (redacted when it is a
//! gateway's, which was handed secrets).

use std::os::fd::AsFd;
use std::path::Path;
use std::process::Stdio;

use occ_core::compute::{OUTPUT_LINES, RevisionContext};

/// How many log lines a startup failure reports.
const LOG_TAIL_LINES: usize = 12;

/// The process start time (clock ticks since boot, `/proc/<pid>/stat` field 22) of a live,
/// non-zombie process.
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` may contain spaces and parentheses: the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether `pid` is still the process started at `start_time`.
pub(crate) fn is_same_process(pid: u32, start_time: u64) -> bool {
    process_start_time(pid).is_some_and(|t| start_time == 0 || t == start_time)
}

/// A signal to a gateway.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    /// Stop, cleanly.
    Term,
    /// Stop, now.
    Kill,
}

/// Signals the process group led by `pid` (the gateway runs as its own group leader).
pub(crate) fn signal_group(pid: u32, signal: Signal) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    let sig = match signal {
        Signal::Term => nix::sys::signal::Signal::SIGTERM,
        Signal::Kill => nix::sys::signal::Signal::SIGKILL,
    };
    if let Err(e) = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), sig) {
        tracing::debug!(pid, error = %e, "signal not delivered (the process may be gone)");
    }
}

/// Whether the group once led by the process `pid` still has members after that leader is
/// gone (a contained workload's outer `bwrap` killed alone, say). Only while no
/// process holds the pid: the kernel never hands out a pid that is still a group's id, so then
/// the members are the group's own; a live process with that pid and another start time is a
/// stranger whose group is not ours.
fn orphaned_group_alive(pid: u32) -> bool {
    process_start_time(pid).is_none() && group_is_alive(pid)
}

/// Whether a recorded workload `(pid, start_time)` still runs: its leader, or what is left of
/// its group ([`orphaned_group_alive`]).
pub(crate) fn workload_alive(pid: u32, start_time: u64) -> bool {
    is_same_process(pid, start_time) || orphaned_group_alive(pid)
}

/// Whether any process is still in the group `pgid`.
fn group_is_alive(pgid: u32) -> bool {
    i32::try_from(pgid)
        .is_ok_and(|pgid| nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok())
}

/// Stops the process group led by `(pid, start_time)` (occ started it with `process_group(0)`):
/// SIGTERM, wait, SIGKILL after `stop_timeout`, wait. `what` names it in logs and errors.
pub(crate) async fn stop_group(
    pid: u32,
    start_time: u64,
    stop_timeout: std::time::Duration,
    what: &str,
) -> Result<(), occ_core::compute::ComputeError> {
    use std::time::Duration;
    use tokio::time::Instant;
    signal_group(pid, Signal::Term);
    let deadline = Instant::now() + stop_timeout;
    // A contained workload's leader (`bwrap`) exits at the signal while the workload it runs
    // is still stopping: wait for the whole group.
    while workload_alive(pid, start_time) {
        if Instant::now() >= deadline {
            tracing::warn!(pid, "{what} did not stop in time; killing it");
            signal_group(pid, Signal::Kill);
            let kill_deadline = Instant::now() + Duration::from_secs(5);
            while workload_alive(pid, start_time) {
                if Instant::now() >= kill_deadline {
                    return Err(crate::failure::unavailable(format!(
                        "{what} process {pid} does not exit"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The shell line of [`held_until_recorded`]: one line `start` on stdin runs the workload in
/// place (same pid, stdin back to `/dev/null`); end of input (its spawner died) ends it.
const HOLD: &str = r#"read -r go && [ "$go" = start ] && exec "$@" </dev/null"#;

/// `inner` (a program started from an empty environment, with its arguments, environment and
/// working directory) held in a shell until [`release`]. A supervisor records a workload's pid
/// right after the spawn; a supervisor killed between the two would leave a workload nobody
/// can find (one holding the Agent's port, say). Held, such a workload sees its stdin close
/// and exits without having run. The caller sets the other stdio, the group and the user.
pub(crate) fn held_until_recorded(inner: &tokio::process::Command) -> tokio::process::Command {
    let inner = inner.as_std();
    let mut held = tokio::process::Command::new("/bin/sh");
    held.arg("-c")
        .arg(HOLD)
        .arg("occ-held")
        .arg(inner.get_program())
        .args(inner.get_args())
        .env_clear();
    for (name, value) in inner.get_envs() {
        if let Some(value) = value {
            held.env(name, value);
        }
    }
    if let Some(dir) = inner.get_current_dir() {
        held.current_dir(dir);
    }
    held.stdin(Stdio::piped());
    held
}

/// Lets a workload started by [`held_until_recorded`] run, once its record is written. An error
/// means it is gone already (its exit is reported as any other).
pub(crate) fn release(child: &mut tokio::process::Child) -> std::io::Result<()> {
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the held workload has no stdin"))?;
    // Six bytes into an empty pipe: never blocks.
    nix::unistd::write(stdin.as_fd(), b"start\n")?;
    Ok(())
}

/// Whether nothing listens on `127.0.0.1:<port>` now.
pub(crate) fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The last `count` lines of a log file (reading at most its last 16 KiB).
fn log_lines(path: &Path, count: usize) -> Vec<String> {
    let Ok(text) = std::fs::read(path) else {
        return Vec::new();
    };
    let start = text.len().saturating_sub(16 * 1024);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect()
}

/// The last lines of a log file (bounded; for failure messages of commands that were handed no
/// secret).
pub(crate) fn log_tail(path: &Path) -> String {
    log_lines(path, LOG_TAIL_LINES).join("\n")
}

/// The last lines of a gateway's log for a failed deployment's `error.data.output`: without
/// anything occ handed the gateway (bound Secret values, the harness credential, the gateway
/// token) or any other credential shape [`Redactor`] knows.
pub(crate) fn startup_output(log: &Path, ctx: &RevisionContext, token: &str) -> Vec<String> {
    ctx.output_redactor(token)
        .lines(log_lines(log, OUTPUT_LINES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_core::compute::SecretText;

    /// A `sh` workload that leaves `ran` (its environment's `MARK` and working directory) in
    /// `dir` when it runs, held.
    fn held_marker(dir: &Path) -> tokio::process::Command {
        let mut inner = tokio::process::Command::new("/bin/sh");
        inner
            .args(["-c", r#"echo "$MARK $(pwd)" > ran; cat"#])
            .env_clear()
            .env("MARK", "m1")
            .current_dir(dir);
        let mut held = held_until_recorded(&inner);
        held.stdout(Stdio::null()).kill_on_drop(true);
        held
    }

    /// Released, the workload runs as it was described (environment, working directory) with
    /// stdin at `/dev/null` (so `cat` ends at once); its spawner dying first (its end of the
    /// pipe closes) ends it without its having run.
    #[tokio::test]
    async fn a_held_workload_runs_only_once_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = held_marker(dir.path()).spawn().expect("spawn");
        release(&mut child).expect("release");
        assert!(child.wait().await.expect("wait").success());
        let ran = std::fs::read_to_string(dir.path().join("ran")).expect("it ran");
        assert_eq!(ran.trim(), format!("m1 {}", dir.path().display()));

        let other = tempfile::tempdir().expect("tempdir");
        let mut child = held_marker(other.path()).spawn().expect("spawn");
        drop(child.stdin.take());
        let status = child.wait().await.expect("wait");
        assert!(!status.success(), "{status}");
        assert!(!other.path().join("ran").exists(), "it never ran");
    }

    #[test]
    fn startup_output_is_the_redacted_end_of_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("gateway.log");
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("provider key hunter2-bound-value rejected\n");
        text.push_str("credential HARNESS-credential-1 and token gw-token-123456\n");
        text.push_str("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n");
        text.push_str("Error: ENOENT /nonexistent/cert.pem\n");
        std::fs::write(&log, text).expect("write log");
        let ctx = RevisionContext {
            environment: [(
                "PROVIDER_KEY".to_owned(),
                SecretText::new("hunter2-bound-value".into()),
            )]
            .into(),
            harness_credential: Some(SecretText::new("HARNESS-credential-1".into())),
            workspace_setup: None,
        };
        let output = startup_output(&log, &ctx, "gw-token-123456");
        assert_eq!(output.len(), OUTPUT_LINES);
        assert_eq!(
            output.last().map(String::as_str),
            Some("Error: ENOENT /nonexistent/cert.pem")
        );
        let joined = output.join("\n");
        for secret in [
            "hunter2-bound-value",
            "HARNESS-credential-1",
            "gw-token-123456",
            "MIIEvQIBADANBg",
        ] {
            assert!(!joined.contains(secret), "{secret} leaked: {joined}");
        }
        assert!(
            joined.contains("provider key [REDACTED] rejected"),
            "{joined}"
        );
        assert!(startup_output(&dir.path().join("missing.log"), &ctx, "x").is_empty());
    }

    /// A contained workload's leader (the outer `bwrap`) can die alone; what it ran is still in
    /// its group and a stop still ends it.
    #[tokio::test]
    async fn a_group_whose_leader_is_gone_is_stopped_too() {
        let mut leader = tokio::process::Command::new("sh")
            .args(["-c", "sleep 300 & wait"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pid = leader.id().expect("pid");
        let start_time = process_start_time(pid).expect("start time");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid")),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill the leader");
        leader.wait().await.expect("reaped");
        assert!(!is_same_process(pid, start_time));
        assert!(orphaned_group_alive(pid), "its child is still in the group");
        stop_group(pid, start_time, std::time::Duration::from_secs(5), "test")
            .await
            .expect("stopped");
        assert!(!orphaned_group_alive(pid), "nothing of the group is left");
    }
}
