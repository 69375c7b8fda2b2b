//! `occ` processes for end-to-end tests: spawned with a clean environment and a log file,
//! awaited until a log line says they are ready, killed by PID (and reaped) when dropped — also
//! when the test panics, after printing the log tail.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `occ` subcommand.
pub struct OccProcess {
    child: Child,
    name: String,
    log: PathBuf,
}

impl OccProcess {
    /// Spawns `bin args…` with exactly `env` (plus `NO_COLOR`), stdout and stderr in `log`,
    /// and waits until the log contains `ready` (if given) within `timeout`.
    pub fn spawn(
        bin: &str,
        args: &[&str],
        env: &[(String, String)],
        log: PathBuf,
        ready: Option<&str>,
        timeout: Duration,
    ) -> OccProcess {
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .env_clear()
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn occ");
        let mut process = OccProcess {
            child,
            name: format!("occ {}", args.first().copied().unwrap_or_default()),
            log,
        };
        if let Some(ready) = ready {
            let deadline = Instant::now() + timeout;
            loop {
                let text = process.log_text();
                if text.contains(ready) {
                    break;
                }
                if let Some(status) = process.child.try_wait().expect("try_wait") {
                    panic!(
                        "{} exited with {status} before it was ready:\n{text}",
                        process.name
                    );
                }
                assert!(
                    Instant::now() < deadline,
                    "{} was not ready within {timeout:?}:\n{text}",
                    process.name
                );
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        process
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// SIGKILL (a crash) and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a graceful stop); waits up to `timeout`, then kills. Returns whether it exited
    /// on its own.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        if let Some(pid) = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        self.kill();
        false
    }
}

impl Drop for OccProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: String = text
                .lines()
                .rev()
                .take(60)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            #[allow(clippy::print_stderr, reason = "the log helps debug a failure")]
            {
                eprintln!(
                    "---- {} log ({}) ----\n{tail}",
                    self.name,
                    self.log.display()
                );
            }
        }
    }
}

/// Processes whose environment mentions `needle` (e.g. a directory only one test uses), as
/// `(pid, parent pid)`. Lets a test find, and kill by PID, everything its Drivers started.
pub fn processes_with_env(needle: &str) -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| String::from_utf8_lossy(&env).contains(needle))
                && crate::gateway::process_alive(*pid)
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// SIGKILLs every process whose environment mentions `needle`, by PID, and waits for them.
pub fn kill_processes_with_env(needle: &str) {
    for _ in 0..50 {
        let found = processes_with_env(needle);
        if found.is_empty() {
            return;
        }
        for (pid, _) in found {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
