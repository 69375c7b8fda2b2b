//! Readiness: a gateway is ready when an authenticated `connect` returns `hello-ok`.
//!
//! While it starts, a gateway first refuses TCP connections (module loading, 5–12 s), then
//! accepts the WebSocket and sends `connect.challenge` but answers `connect` with a retryable
//! `UNAVAILABLE` (`startup-sidecars`, `retryAfterMs: 500`) and closes with 1013, and finally
//! answers `hello-ok`. Its HTTP `/readyz` turns 200 at the same moment.

use std::time::Duration;

use tokio::time::Instant;

use crate::endpoint::Endpoint;
use crate::error::{DEFAULT_RETRY_AFTER, GatewayError};
use crate::handshake::Hello;
use crate::session::Session;

/// Longest single connect attempt inside [`wait_ready`].
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Retries [`Session::connect`] on transient errors (honouring `retryAfterMs`, else 250 ms)
/// until `deadline` (from now) elapses, and returns the [`Hello`] of the first success (that
/// session is closed). A non-transient error (wrong token, missing scope, protocol mismatch)
/// is returned at once; when the deadline passes, [`GatewayError::Timeout`].
pub async fn wait_ready(endpoint: &Endpoint, deadline: Duration) -> Result<Hello, GatewayError> {
    let started = Instant::now();
    let until = started + deadline;
    let mut attempts: u32 = 0;
    loop {
        let now = Instant::now();
        if now >= until {
            return Err(GatewayError::Timeout);
        }
        attempts += 1;
        let attempt = (until - now).min(ATTEMPT_TIMEOUT);
        let err = match Session::connect(endpoint, attempt).await {
            Ok((session, hello)) => {
                session.close().await;
                tracing::debug!(
                    url = %endpoint.url,
                    attempts,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "gateway ready"
                );
                return Ok(hello);
            }
            Err(err) if err.is_transient() => err,
            Err(err) => return Err(err),
        };
        let pause = err.retry_after().unwrap_or(DEFAULT_RETRY_AFTER);
        tracing::trace!(url = %endpoint.url, attempts, error = %err, "gateway not ready yet");
        let remaining = until.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(GatewayError::Timeout);
        }
        tokio::time::sleep(pause.min(remaining)).await;
    }
}
