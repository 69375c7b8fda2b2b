//! `occ compute-host`: the host side of the SSH Compute Driver. Reads one JSON request
//! ([`occ_drivers::compute::host::HostRequest`]) from stdin, runs it against the host's layout
//! with the process Driver's code and prints one JSON reply line on stdout. It needs no occ
//! settings: the request carries them. Exit status 0 whenever a reply was printed (the reply
//! carries the failure class).
use std::io::{Read as _, Write as _};

use occ_drivers::compute::ComputeError;
use occ_drivers::compute::host::{self, HostReply, HostRequest, REQUEST_MAX_BYTES};

/// Runs `occ compute-host`.
pub async fn run() -> anyhow::Result<()> {
    let reply = match read_request() {
        Ok(request) => {
            let program = std::env::current_exe()
                .map_err(|e| anyhow::anyhow!("cannot locate the occ binary: {e}"))?;
            host::execute(request, program).await
        }
        Err(error) => HostReply::Failed { error },
    };
    // The session may be gone (the Driver gave up): the operation is done either way, and the
    // next one starts from what is on the host.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", serde_json::to_string(&reply)?);
    let _ = stdout.flush();
    Ok(())
}

fn read_request() -> Result<HostRequest, ComputeError> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(REQUEST_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            ComputeError::transient("HOST_REQUEST_INVALID", format!("cannot read stdin: {e}"))
        })?;
    if bytes.len() as u64 > REQUEST_MAX_BYTES {
        return Err(ComputeError::permanent(
            "HOST_REQUEST_INVALID",
            format!("the request is larger than {REQUEST_MAX_BYTES} bytes"),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        // An older or newer occ on the host: the operator installs the matching binary.
        ComputeError::permanent(
            "HOST_REQUEST_INVALID",
            format!("the host's occ cannot read the request: {e}"),
        )
    })
}
