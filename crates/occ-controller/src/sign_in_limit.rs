//! The bounds on password sign-in (per API process).
//!
//! - **Per email**: at most [`MAX_GUESSES`] wrong passwords per [`GUESS_WINDOW`]. An attempt
//!   takes its place *before* its password is verified (reserve, then verify), so concurrent
//!   guesses cannot all be verified before the first failure is counted: at most
//!   [`MAX_GUESSES`] passwords of one email are ever verified per window. A success gives the
//!   email its places back; a failure (or an attempt abandoned mid-check) keeps its place until
//!   the window passes.
//! - **Globally**: at most [`MAX_CONCURRENT_CHECKS`] password verifications run at once. Each
//!   argon2id verification holds ~19 MiB, and distinct emails pass a per-email limit, so without
//!   this bound unauthenticated requests could exhaust memory.
//!
//! Excess attempts are refused at once with 429 and a `Retry-After`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use occ_core::{Error, ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Wrong passwords one email may try per [`GUESS_WINDOW`].
pub const MAX_GUESSES: usize = 10;
/// The window of [`MAX_GUESSES`].
pub const GUESS_WINDOW: Duration = Duration::from_secs(60);
/// Password verifications running at once, over all emails.
pub const MAX_CONCURRENT_CHECKS: usize = 8;
/// What a caller refused by the global bound is told to wait, in seconds.
const BUSY_RETRY_AFTER_SECS: u64 = 1;
/// Emails tracked before expired entries are swept.
const SWEEP_ABOVE: usize = 100_000;

/// One email's recent failures and its attempts being verified now.
#[derive(Debug, Default)]
struct Guesses {
    failures: Vec<Instant>,
    in_flight: usize,
}

/// The sign-in bounds (see the module documentation).
#[derive(Debug)]
pub struct SignInLimiter {
    emails: Arc<Mutex<HashMap<String, Guesses>>>,
    checks: Arc<Semaphore>,
}

impl Default for SignInLimiter {
    fn default() -> Self {
        Self::with_concurrency(MAX_CONCURRENT_CHECKS)
    }
}

impl SignInLimiter {
    /// A limiter allowing `checks` concurrent password verifications.
    pub fn with_concurrency(checks: usize) -> Self {
        Self {
            emails: Arc::default(),
            checks: Arc::new(Semaphore::new(checks)),
        }
    }

    /// A place for one attempt of `email`, taken before its password is verified; a 429 with
    /// `Retry-After` when the email is at its limit or every verification slot is busy.
    pub fn reserve(&self, email: &str) -> Result<SignInAttempt, Error> {
        let now = Instant::now();
        {
            let mut emails = self.emails.lock().unwrap_or_else(PoisonError::into_inner);
            if emails.len() > SWEEP_ABOVE {
                emails.retain(|_, g| {
                    g.in_flight > 0 || g.failures.iter().any(|t| now - *t < GUESS_WINDOW)
                });
            }
            let guesses = emails.entry(email.to_owned()).or_default();
            guesses.failures.retain(|t| now - *t < GUESS_WINDOW);
            if guesses.failures.len() + guesses.in_flight >= MAX_GUESSES {
                let wait = guesses
                    .failures
                    .iter()
                    .min()
                    .map_or(GUESS_WINDOW, |oldest| {
                        GUESS_WINDOW.saturating_sub(now - *oldest)
                    })
                    .as_secs()
                    .max(1);
                return Err(Error::new(
                    ErrorCode::RateLimited,
                    "Too many failed sign-in attempts; try again later",
                )
                .with_retry_after(wait));
            }
            guesses.in_flight += 1;
        }
        let attempt = SignInAttempt {
            emails: self.emails.clone(),
            email: email.to_owned(),
            permit: None,
            settled: false,
        };
        // Taken after the email's place, so a refusal here gives that place back (drop).
        let permit = self.checks.clone().try_acquire_owned().map_err(|_| {
            Error::new(
                ErrorCode::RateLimited,
                "Too many sign-in attempts are being checked right now; try again shortly",
            )
            .with_retry_after(BUSY_RETRY_AFTER_SECS)
        });
        let mut attempt = attempt;
        match permit {
            Ok(permit) => {
                attempt.permit = Some(permit);
                Ok(attempt)
            }
            Err(busy) => {
                attempt.release();
                Err(busy)
            }
        }
    }
}

/// One reserved sign-in attempt: say how it ended with [`SignInAttempt::succeeded`] or
/// [`SignInAttempt::failed`]; dropped without either (the caller went away mid-check), it
/// counts as a failure.
#[derive(Debug)]
pub struct SignInAttempt {
    emails: Arc<Mutex<HashMap<String, Guesses>>>,
    email: String,
    permit: Option<OwnedSemaphorePermit>,
    settled: bool,
}

impl SignInAttempt {
    /// The password was right: the email's failures are forgotten.
    pub fn succeeded(mut self) {
        self.settled = true;
        self.permit = None;
        let mut emails = self.emails.lock().unwrap_or_else(PoisonError::into_inner);
        emails.remove(&self.email);
    }

    /// The password (or email) was wrong: the attempt keeps its place for the window.
    pub fn failed(mut self) {
        self.settle_as_failure();
    }

    /// Gives the place back without counting anything (the attempt was refused before any
    /// verification).
    fn release(&mut self) {
        self.settled = true;
        let mut emails = self.emails.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(guesses) = emails.get_mut(&self.email) {
            guesses.in_flight = guesses.in_flight.saturating_sub(1);
            if guesses.in_flight == 0 && guesses.failures.is_empty() {
                emails.remove(&self.email);
            }
        }
    }

    fn settle_as_failure(&mut self) {
        if self.settled {
            return;
        }
        self.settled = true;
        self.permit = None;
        let mut emails = self.emails.lock().unwrap_or_else(PoisonError::into_inner);
        let guesses = emails.entry(self.email.clone()).or_default();
        guesses.in_flight = guesses.in_flight.saturating_sub(1);
        guesses.failures.push(Instant::now());
    }
}

impl Drop for SignInAttempt {
    fn drop(&mut self) {
        self.settle_as_failure();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(l: &SignInLimiter, email: &str) -> Option<u64> {
        match l.reserve(email) {
            Ok(attempt) => {
                attempt.release_for_test();
                None
            }
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::RateLimited);
                Some(e.retry_after_secs().expect("Retry-After"))
            }
        }
    }

    impl SignInAttempt {
        fn release_for_test(mut self) {
            self.release();
        }
    }

    #[test]
    fn ten_failures_close_the_email_for_the_window() {
        let l = SignInLimiter::default();
        for _ in 0..9 {
            l.reserve("a@b.c").expect("a place").failed();
        }
        assert_eq!(refused(&l, "a@b.c"), None);
        l.reserve("a@b.c").expect("the tenth").failed();
        assert!(refused(&l, "a@b.c").is_some_and(|s| (1..=60).contains(&s)));
        assert_eq!(refused(&l, "other@b.c"), None);
    }

    #[test]
    fn a_success_gives_the_places_back() {
        let l = SignInLimiter::default();
        for _ in 0..9 {
            l.reserve("a@b.c").expect("a place").failed();
        }
        l.reserve("a@b.c").expect("a place").succeeded();
        for _ in 0..9 {
            l.reserve("a@b.c").expect("a place again").failed();
        }
    }

    /// The reproduction: many guesses at once. Places are taken before any verification, so
    /// only ten of sixty concurrent attempts are ever let through to a password check.
    #[test]
    fn concurrent_guesses_reserve_before_they_are_verified() {
        let l = SignInLimiter::with_concurrency(64);
        let admitted: Vec<SignInAttempt> =
            (0..60).filter_map(|_| l.reserve("a@b.c").ok()).collect();
        assert_eq!(admitted.len(), MAX_GUESSES);
        // Abandoned attempts count as failures.
        drop(admitted);
        assert!(refused(&l, "a@b.c").is_some());
    }

    #[test]
    fn the_global_bound_refuses_while_every_check_slot_is_busy() {
        let l = SignInLimiter::with_concurrency(2);
        let first = l.reserve("one@b.c").expect("slot 1");
        let second = l.reserve("two@b.c").expect("slot 2");
        let busy = l.reserve("three@b.c").expect_err("no slot");
        assert_eq!(busy.retry_after_secs(), Some(1));
        // The refused email kept nothing: it still has all its places.
        first.failed();
        for _ in 0..MAX_GUESSES - 1 {
            l.reserve("three@b.c").expect("a place").failed();
        }
        drop(second);
    }
}
