//! Facts about processes and ports on this machine, as the supervisors need them: a process's
//! start time (so a recycled pid is never mistaken for a gateway), signals to a gateway's process
//! group, whether a loopback port is free, and the tail of a log for failure messages.

use std::path::Path;

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

/// Whether nothing listens on `127.0.0.1:<port>` now.
pub(crate) fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The last lines of a log file (bounded; for startup failures).
pub(crate) fn log_tail(path: &Path) -> String {
    let Ok(text) = std::fs::read(path) else {
        return String::new();
    };
    let start = text.len().saturating_sub(16 * 1024);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// `message`, followed by the log's tail when there is one.
pub(crate) fn with_log_tail(message: String, log: &Path) -> String {
    let tail = log_tail(log);
    if tail.is_empty() {
        message
    } else {
        format!("{message}; log tail:\n{tail}")
    }
}
