//! `occ compute-host`: the host side of the SSH Compute Driver. Reads one JSON request
//! ([`occ_host::wire::HostRequest`]) from stdin, runs it against the host's layout with the
//! host layer the process Driver runs in process ([`occ_host::serve`]) and prints one JSON
//! reply line on stdout. It needs no occ settings: the request carries them.
//!
//! - **Version.** A request from another occ build (version or wire protocol) is refused with a
//!   permanent `HOST_VERSION_MISMATCH` naming both, before anything else is done; a request that
//!   is not JSON is `HOST_REQUEST_INVALID`.
//! - **Heartbeat.** While the operation runs, an empty line is written to stdout every second
//!   (the Driver takes the last non-empty line as the reply). The ssh session ending does not
//!   signal the remote command, but the next heartbeat write fails (EPIPE: Rust programs start
//!   with SIGPIPE ignored, so the write returns the error instead of killing the process): the
//!   operation is then abandoned — its future is dropped, which kills the children it waits for
//!   (`kill_on_drop`) and releases the host lock — and the process exits 1. If the operation
//!   cannot be dropped promptly (a blocking call), the process exits anyway after a short grace
//!   period and the kernel releases the lock.
//! - **Deadline.** The request's `deadlineMs` (below the Driver's own bound): past it the
//!   operation is abandoned the same way after a transient `HOST_OPERATION_TIMEOUT` reply.
//!
//! Exit status 0 when the operation finished and its reply was printed (the reply carries the
//! failure class); 1 when it was abandoned.
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use occ_core::ReasonCode;
use occ_core::compute::ComputeError;
use occ_host::serve::{self, HostProcess};
use occ_host::wire::{self, HostReply, HostRequest, REQUEST_MAX_BYTES};

/// How often the heartbeat is written.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// How long an abandoned operation may take to unwind before the process exits regardless.
const ABANDON_GRACE: Duration = Duration::from_secs(2);

/// stdout, shared by the heartbeat and the reply so lines never interleave.
struct Output {
    lock: Mutex<()>,
    /// The reply was written: no heartbeat after it.
    finished: AtomicBool,
}

impl Output {
    /// Writes the reply (once); the heartbeat stops.
    fn reply(&self, reply: &HostReply) -> std::io::Result<()> {
        let line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
        let _turn = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.finished.store(true, Ordering::SeqCst);
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()
    }

    fn heartbeat(&self) -> std::io::Result<bool> {
        let _turn = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.finished.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(b"\n")?;
        stdout.flush()?;
        Ok(true)
    }
}

/// Runs `occ compute-host`.
pub async fn run() -> anyhow::Result<()> {
    let output = Arc::new(Output {
        lock: Mutex::new(()),
        finished: AtomicBool::new(false),
    });
    let request = match read_request() {
        Ok(request) => request,
        Err(error) => {
            // The session may be gone: nothing was done either way.
            let _ = output.reply(&HostReply::Failed { error });
            return Ok(());
        }
    };
    let program = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot locate the occ binary: {e}"))?;
    let deadline = Duration::from_millis(request.deadline_ms.max(1));
    let hard_stop = Instant::now() + deadline + ABANDON_GRACE;
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<std::io::Error>();
    // A thread of its own, so the heartbeat (and the exit after a lost session) does not depend
    // on the operation's tasks getting scheduled.
    let beat = Arc::clone(&output);
    std::thread::Builder::new()
        .name("heartbeat".into())
        .spawn(move || heartbeat(&beat, lost_tx, hard_stop))?;
    let process = HostProcess {
        setup_program: program,
        path: crate::settings::program_path(),
    };
    let mut operation = Box::pin(serve::execute(request, process));
    let abandoned = tokio::select! {
        reply = &mut operation => {
            // The session may be gone (the Driver gave up): the operation is done either way,
            // and the next one starts from what is on the host.
            let _ = output.reply(&reply);
            return Ok(());
        }
        lost = lost_rx => match lost {
            Ok(e) => format!("the session is gone (heartbeat: {e})"),
            Err(_) => "the heartbeat stopped".to_owned(),
        },
        () = tokio::time::sleep(deadline) => {
            let _ = output.reply(&HostReply::Failed {
                error: ComputeError::transient(
                    ReasonCode::HostOperationTimeout,
                    format!("the operation did not finish in {deadline:?} on the host and was abandoned"),
                ),
            });
            format!("the deadline of {deadline:?} passed")
        }
    };
    tracing::warn!(reason = %abandoned, "abandoning the operation");
    // Kills the children it waits for and releases the host lock.
    drop(operation);
    std::process::exit(1);
}

/// Writes the heartbeat until the reply is written; reports a failed write (the session is
/// gone) and, if the process is still alive after the grace period (or past `hard_stop`),
/// exits it.
fn heartbeat(
    output: &Output,
    lost: tokio::sync::oneshot::Sender<std::io::Error>,
    hard_stop: Instant,
) {
    loop {
        std::thread::sleep(HEARTBEAT_INTERVAL);
        if Instant::now() >= hard_stop {
            // The operation is stuck where it cannot be dropped: say so and go.
            let _ = output.reply(&HostReply::Failed {
                error: ComputeError::transient(
                    ReasonCode::HostOperationTimeout,
                    "the operation did not finish by its deadline on the host and was abandoned",
                ),
            });
            std::process::exit(1);
        }
        match output.heartbeat() {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                let _ = lost.send(e);
                std::thread::sleep(ABANDON_GRACE);
                std::process::exit(1);
            }
        }
    }
}

fn read_request() -> Result<HostRequest, ComputeError> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(REQUEST_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            ComputeError::transient(
                ReasonCode::HostRequestInvalid,
                format!("cannot read stdin: {e}"),
            )
        })?;
    if bytes.len() as u64 > REQUEST_MAX_BYTES {
        return Err(ComputeError::permanent(
            ReasonCode::HostRequestInvalid,
            format!("the request is larger than {REQUEST_MAX_BYTES} bytes"),
        ));
    }
    wire::parse_request(&bytes)
}
