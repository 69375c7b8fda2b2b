//! Redaction of workload output before it leaves occ (deployment errors, runtime logs).
//!
//! Two layers: the exact values occ handed the workload (bound Secret values, the harness
//! credential, the gateway token), which are removed wherever they appear, and patterns of
//! credentials occ did not hand out but a workload may print anyway: `Authorization: Bearer …`,
//! provider API keys (`sk-…`, `ghp_…`, `AKIA…`, …), `key=value` pairs whose key names a secret,
//! JSON Web Tokens, and PEM private-key blocks, which span lines and are removed whole.
//!
//! Redaction is by replacement with [`REDACTED`], never by truncation, so a reader sees that
//! something was there. It errs on the side of removing too much.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest exact value worth matching: shorter ones would erase ordinary words.
const MIN_EXACT_LEN: usize = 6;

/// Credential shapes found by pattern, each replaced whole.
static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // Provider and platform keys.
        r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}",
        r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\bAIza[0-9A-Za-z_\-]{35}\b",
        r"\bat-[A-Za-z0-9_\-]{20,}",
        r"\bocc_[0-9a-f]{64}\b",
        // JSON Web Tokens (three base64url segments, the first a JSON header).
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("redaction pattern"))
    .collect()
});

/// `Bearer <token>` / `Basic <token>` (the scheme stays, the credential goes).
static AUTH_SCHEME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=\-]{8,}").expect("auth pattern")
});

/// `apiKey: …`, `"token": "…"`, `password=…`: the key stays, the value goes.
static SECRET_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)((?:api[_\-]?key|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|client[_\-]?secret|secret|password|passwd|token|authorization|x-api-key)["']?\s*[:=]\s*["']?)([^\s"',;}]{4,})"#,
    )
    .expect("field pattern")
});

static PEM_BEGIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----").expect("pem begin")
});
static PEM_END: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----").expect("pem end")
});

/// Removes secrets from text a workload printed.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Exact values, longest first (so a value containing another is removed whole).
    exact: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("exact_values", &self.exact.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for the values occ handed the workload, besides the patterns.
    pub fn new<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut exact: Vec<String> = values
            .into_iter()
            .map(|v| v.as_ref().to_owned())
            .filter(|v| v.len() >= MIN_EXACT_LEN)
            .collect();
        exact.sort_by_key(|v| std::cmp::Reverse(v.len()));
        exact.dedup();
        Self { exact }
    }

    /// One line (or any text without PEM blocks to track across calls).
    pub fn line(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for value in &self.exact {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out = AUTH_SCHEME
            .replace_all(&out, |c: &regex::Captures<'_>| {
                format!("{}{}{REDACTED}", &c[1], &c[2])
            })
            .into_owned();
        out = SECRET_FIELD
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let value = &c[2];
                // `Authorization: Bearer …` was handled above: the scheme is not the secret.
                let scheme = ["bearer", "basic", "token"]
                    .iter()
                    .any(|s| value.eq_ignore_ascii_case(s));
                if value.starts_with(REDACTED) || scheme {
                    c[0].to_owned()
                } else {
                    format!("{}{REDACTED}", &c[1])
                }
            })
            .into_owned();
        for pattern in PATTERNS.iter() {
            out = pattern.replace_all(&out, REDACTED).into_owned();
        }
        if let Some(begin) = PEM_BEGIN.find(&out) {
            // A key block inside one line: everything from its start goes.
            let end = PEM_END
                .find_at(&out, begin.end())
                .map_or(out.len(), |m| m.end());
            out.replace_range(begin.start()..end, REDACTED);
        }
        out
    }

    /// Consecutive lines: a PEM private-key block is removed from its BEGIN line to its END
    /// line (or to the end of the input when it never ends), each such line becoming one
    /// [`REDACTED`] line.
    pub fn lines<I, S>(&self, lines: I) -> Vec<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut tracker = PemTracker::default();
        lines
            .into_iter()
            .map(|line| tracker.redact(self, line.as_ref()))
            .collect()
    }

    /// A stateful view for a stream of lines (follow mode): the PEM state carries from one
    /// call to the next.
    pub fn stream(&self) -> LineRedactor<'_> {
        self.stream_resumed(false)
    }

    /// [`Redactor::stream`] resumed where an earlier stream stopped (a follow read of runtime
    /// logs carries whether a PEM block was still open in its cursor).
    pub fn stream_resumed(&self, inside_key_block: bool) -> LineRedactor<'_> {
        LineRedactor {
            redactor: self,
            pem: PemTracker {
                inside: inside_key_block,
            },
        }
    }
}

/// Redacts a stream of lines one at a time, carrying PEM blocks across calls.
#[derive(Debug)]
pub struct LineRedactor<'a> {
    redactor: &'a Redactor,
    pem: PemTracker,
}

impl LineRedactor<'_> {
    /// The next line, redacted.
    pub fn next_line(&mut self, line: &str) -> String {
        self.pem.redact(self.redactor, line)
    }

    /// Whether a PEM block is open (its END line not seen yet).
    pub fn inside_key_block(&self) -> bool {
        self.pem.inside
    }
}

#[derive(Debug, Default)]
struct PemTracker {
    inside: bool,
}

impl PemTracker {
    fn redact(&mut self, redactor: &Redactor, line: &str) -> String {
        if self.inside {
            if let Some(end) = PEM_END.find(line) {
                self.inside = false;
                let rest = &line[end.end()..];
                return format!("{REDACTED}{}", redactor.line(rest));
            }
            return REDACTED.to_owned();
        }
        if let Some(begin) = PEM_BEGIN.find(line)
            && PEM_END.find_at(line, begin.end()).is_none()
        {
            self.inside = true;
            return format!("{}{REDACTED}", redactor.line(&line[..begin.start()]));
        }
        redactor.line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values_are_removed_wherever_they_appear() {
        let r = Redactor::new(["s3cr3t-value-123", "tok"]);
        assert_eq!(
            r.line("connecting with s3cr3t-value-123 to host (tok stays: too short)"),
            "connecting with [REDACTED] to host (tok stays: too short)"
        );
        assert_eq!(r.line("xs3cr3t-value-123y"), "x[REDACTED]y");
    }

    #[test]
    fn longer_values_win_over_values_they_contain() {
        let r = Redactor::new(["abcdef", "abcdefghij"]);
        assert_eq!(r.line("key=abcdefghij!"), "key=[REDACTED]!");
        assert_eq!(r.line("v abcdefghij"), "v [REDACTED]");
    }

    #[test]
    fn bearer_headers_and_secret_fields_keep_their_names() {
        let r = Redactor::default();
        assert_eq!(
            r.line("Authorization: Bearer abc.DEF-123_456"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(
            r.line(r#"{"apiKey": "plainvalue99", "model": "gpt"}"#),
            r#"{"apiKey": "[REDACTED]", "model": "gpt"}"#
        );
        assert_eq!(
            r.line("password=hunter22 user=ada"),
            "password=[REDACTED] user=ada"
        );
        assert_eq!(r.line("access_token: zzzzzzzz"), "access_token: [REDACTED]");
    }

    #[test]
    fn provider_keys_are_found_by_shape() {
        let r = Redactor::default();
        for key in [
            "sk-abcdefghijklmnopqrstuvwx",
            "sk-proj-AbCdEfGhIjKlMnOpQrStUv_-12",
            "ghp_0123456789abcdefghijABCDEFGHIJ",
            "AKIAABCDEFGHIJKLMNOP",
            "at-0123456789abcdefghijklmn",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz",
        ] {
            let out = r.line(&format!("using {key} now"));
            assert_eq!(out, "using [REDACTED] now", "{key}");
        }
        assert_eq!(r.line("task-runner started"), "task-runner started");
    }

    #[test]
    fn pem_blocks_are_removed_across_lines() {
        let r = Redactor::default();
        let lines = [
            "loading key",
            "-----BEGIN RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA0",
            "abcdEFGH",
            "-----END RSA PRIVATE KEY----- done",
            "after",
        ];
        assert_eq!(
            r.lines(lines),
            vec![
                "loading key",
                "[REDACTED]",
                "[REDACTED]",
                "[REDACTED]",
                "[REDACTED] done",
                "after"
            ]
        );
        // A block that never ends hides everything after it.
        assert_eq!(
            r.lines(["-----BEGIN PRIVATE KEY-----", "MIIB", "more"]),
            vec!["[REDACTED]", "[REDACTED]", "[REDACTED]"]
        );
        // Inside one line.
        assert_eq!(
            r.line("k=-----BEGIN EC PRIVATE KEY-----MHcC-----END EC PRIVATE KEY----- ok"),
            "k=[REDACTED] ok"
        );
    }

    #[test]
    fn a_stream_carries_the_pem_state_between_calls() {
        let r = Redactor::default();
        let mut s = r.stream();
        assert_eq!(
            s.next_line("-----BEGIN OPENSSH PRIVATE KEY-----"),
            "[REDACTED]"
        );
        assert!(s.inside_key_block());
        assert_eq!(s.next_line("b3BlbnNzaC1rZXk"), "[REDACTED]");
        assert_eq!(
            s.next_line("-----END OPENSSH PRIVATE KEY-----"),
            "[REDACTED]"
        );
        assert!(!s.inside_key_block());
        assert_eq!(s.next_line("plain"), "plain");
    }

    #[test]
    fn debug_never_prints_values() {
        let r = Redactor::new(["very-secret-value"]);
        assert!(!format!("{r:?}").contains("very-secret"));
    }
}
