//! `codex login` with the credential on stdin, and the probe turn (`codex exec --json`),
//! classified into the launcher's failure codes. Native output is read in memory only, never
//! logged or returned: it may echo what the model endpoint said.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use super::input::{FailureCode, LoginInput, LoginMethod};
use crate::fsutil;

/// Bound on one probe attempt (the plan's 30 s; one retry, only after a timeout).
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before the one retry of a timed-out probe.
const PROBE_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Bound on `codex login` (local: it only writes `auth.json`).
const LOGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the credential file.
const CREDENTIAL_MAX_BYTES: u64 = 16 * 1024;
/// What the probe asks.
const PROBE_PROMPT: &str = "Reply only READY";
/// Bound on one line of the probe's JSONL (longer lines are cut, not kept).
const PROBE_LINE_MAX: usize = 64 * 1024;

/// Where Codex runs for login and probe: the minimal environment (`HOME`, `CODEX_HOME`,
/// `PATH`, `TMPDIR`).
#[derive(Debug, Clone)]
pub(super) struct ProbeSettings {
    pub(super) codex: PathBuf,
    pub(super) path: OsString,
    pub(super) home: PathBuf,
    pub(super) codex_home: PathBuf,
    pub(super) tmp_dir: PathBuf,
    pub(super) workspace: PathBuf,
}

impl ProbeSettings {
    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.codex);
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .env("PATH", &self.path)
            .env("TMPDIR", &self.tmp_dir)
            .current_dir(&self.workspace)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

/// `codex -c cli_auth_credentials_store="file" login --with-api-key|--with-access-token` with
/// the credential (read from its private file, trailing whitespace dropped) written to stdin;
/// the buffer is overwritten after. Any failure is `LOGIN_FAILED`.
pub(super) async fn login(settings: &ProbeSettings, login: &LoginInput) -> Result<(), FailureCode> {
    let mut secret = match fsutil::read_bounded(&login.credential_file, CREDENTIAL_MAX_BYTES) {
        Ok(Some(bytes)) => bytes,
        _ => return Err(FailureCode::LoginFailed),
    };
    let trimmed = secret.trim_ascii().len();
    let start = secret.len() - secret.trim_ascii_start().len();
    let result = login_with(
        settings,
        login.method,
        login.chatgpt_workspace_id.as_deref(),
        &secret[start..start + trimmed],
    )
    .await;
    secret.fill(0);
    std::hint::black_box(&secret);
    result
}

async fn login_with(
    settings: &ProbeSettings,
    method: LoginMethod,
    workspace: Option<&str>,
    secret: &[u8],
) -> Result<(), FailureCode> {
    let flag = match method {
        LoginMethod::ApiKey => "--with-api-key",
        // Codex access tokens start with `at-`; anything else is refused before Codex sees it.
        LoginMethod::CodexPat if secret.starts_with(b"at-") => "--with-access-token",
        LoginMethod::CodexPat => return Err(FailureCode::LoginFailed),
        LoginMethod::ChatgptServiceAccount => "--with-access-token",
    };
    if secret.is_empty() || secret.contains(&b'\n') {
        return Err(FailureCode::LoginFailed);
    }
    let mut cmd = settings.command();
    cmd.args(["-c", "cli_auth_credentials_store=\"file\""]);
    match (method, workspace) {
        // Codex refuses a token of any other workspace (and logs out if it ever changes).
        (LoginMethod::ChatgptServiceAccount, Some(id)) => {
            cmd.arg("-c")
                .arg(format!("forced_chatgpt_workspace_id=\"{id}\""));
        }
        (LoginMethod::ChatgptServiceAccount, None) => return Err(FailureCode::LoginFailed),
        _ => {}
    }
    cmd.args(["login", flag]).stdin(Stdio::piped());
    let mut child = cmd.spawn().map_err(|_| FailureCode::LoginFailed)?;
    let mut stdin = child.stdin.take().ok_or(FailureCode::LoginFailed)?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let write = async {
            let written = stdin.write_all(secret).await;
            drop(stdin);
            written
        };
        let (written, _, _, status) =
            tokio::join!(write, drain(&mut out), drain(&mut err), child.wait());
        (written, status)
    };
    match tokio::time::timeout(LOGIN_TIMEOUT, work).await {
        Ok((Ok(()), Ok(status))) if status.success() => Ok(()),
        _ => Err(FailureCode::LoginFailed),
    }
}

/// Reads a stream to its end and drops it.
async fn drain<R: tokio::io::AsyncRead + Unpin>(stream: &mut Option<R>) {
    if let Some(stream) = stream {
        let mut sink = [0u8; 8192];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    }
}

/// The probe: `codex exec --ephemeral --skip-git-repo-check --sandbox read-only --json
/// "Reply only READY"` in the workspace. A timeout is retried once after a pause; a second
/// timeout is `MODEL_PROBE_TIMEOUT`.
pub(super) async fn probe(
    settings: &ProbeSettings,
    model: Option<&str>,
) -> Result<(), FailureCode> {
    match probe_once(settings, model, PROBE_TIMEOUT).await {
        Err(FailureCode::ModelProbeTimeout) => {
            tokio::time::sleep(PROBE_RETRY_PAUSE).await;
            probe_once(settings, model, PROBE_TIMEOUT).await
        }
        other => other,
    }
}

async fn probe_once(
    settings: &ProbeSettings,
    model: Option<&str>,
    timeout: Duration,
) -> Result<(), FailureCode> {
    let mut cmd = settings.command();
    cmd.args([
        "exec",
        "--ephemeral",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "--json",
    ]);
    if let Some(model) = model {
        cmd.args(["--model", model]);
    }
    cmd.arg(PROBE_PROMPT).stdin(Stdio::null());
    let mut child = cmd.spawn().map_err(|_| FailureCode::ModelProbeFailed)?;
    let stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let work = async {
        let mut verdict = ProbeVerdict::default();
        if let Some(stdout) = stdout {
            let mut lines = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match (&mut lines)
                    .take(PROBE_LINE_MAX as u64)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        // An authentication refusal is final: Codex would only retry it.
                        if verdict.observe(&line) == Some(FailureCode::AuthenticationFailed) {
                            return verdict;
                        }
                    }
                }
            }
        }
        drain(&mut stderr).await;
        verdict
    };
    let verdict = match tokio::time::timeout(timeout, work).await {
        Ok(verdict) => verdict,
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(FailureCode::ModelProbeTimeout);
        }
    };
    let _ = child.start_kill();
    let status = child.wait().await.ok();
    verdict.outcome(status.is_some_and(|s| s.success()))
}

/// What the probe's JSONL said so far.
#[derive(Debug, Default)]
pub(super) struct ProbeVerdict {
    agent_message: bool,
    turn_completed: bool,
    auth_refused: bool,
    failed: bool,
}

impl ProbeVerdict {
    /// Takes one JSONL line; returns `AUTHENTICATION_FAILED` as soon as the endpoint refused
    /// the credential (401/403 in an `error` or `turn.failed` message).
    pub(super) fn observe(&mut self, line: &[u8]) -> Option<FailureCode> {
        let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
            return None;
        };
        match event["type"].as_str().unwrap_or_default() {
            "item.completed" if event["item"]["type"] == "agent_message" => {
                self.agent_message = true;
            }
            "turn.completed" => self.turn_completed = true,
            kind @ ("error" | "turn.failed") => {
                let message = event["message"]
                    .as_str()
                    .or_else(|| event["error"]["message"].as_str())
                    .unwrap_or_default();
                if is_auth_refusal(message) {
                    self.auth_refused = true;
                    return Some(FailureCode::AuthenticationFailed);
                }
                if kind == "turn.failed" {
                    self.failed = true;
                }
            }
            _ => {}
        }
        None
    }

    /// The verdict once Codex exited (`exited_ok`: status 0).
    pub(super) fn outcome(&self, exited_ok: bool) -> Result<(), FailureCode> {
        if self.auth_refused {
            Err(FailureCode::AuthenticationFailed)
        } else if exited_ok && self.agent_message && self.turn_completed && !self.failed {
            Ok(())
        } else {
            Err(FailureCode::ModelProbeFailed)
        }
    }
}

/// Whether Codex's error message reports an HTTP 401 or 403 from the model endpoint (Codex
/// words it `unexpected status 401 Unauthorized: …`).
fn is_auth_refusal(message: &str) -> bool {
    [
        "status 401",
        "status 403",
        "401 Unauthorized",
        "403 Forbidden",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(lines: &[&str]) -> (Option<FailureCode>, ProbeVerdict) {
        let mut v = ProbeVerdict::default();
        let mut early = None;
        for line in lines {
            early = early.or(v.observe(line.as_bytes()));
        }
        (early, v)
    }

    /// What Codex 0.154.0 printed here for a completed probe against the fake model.
    #[test]
    fn a_completed_turn_with_a_message_is_ready() {
        let (early, v) = verdict(&[
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"READY"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#,
        ]);
        assert_eq!(early, None);
        assert_eq!(v.outcome(true), Ok(()));
        assert_eq!(v.outcome(false), Err(FailureCode::ModelProbeFailed));
    }

    /// What Codex 0.154.0 printed here for a 401 from the fake model: five reconnect errors,
    /// then `turn.failed`; the first one decides.
    #[test]
    fn a_401_is_an_authentication_failure_at_the_first_error() {
        let (early, v) = verdict(&[
            r#"{"type":"turn.started"}"#,
            r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:1/v1/responses)"}"#,
        ]);
        assert_eq!(early, Some(FailureCode::AuthenticationFailed));
        assert_eq!(v.outcome(false), Err(FailureCode::AuthenticationFailed));
        let (early, _) = verdict(&[
            r#"{"type":"turn.failed","error":{"message":"unexpected status 403 Forbidden: no"}}"#,
        ]);
        assert_eq!(early, Some(FailureCode::AuthenticationFailed));
    }

    #[test]
    fn other_failures_are_probe_failures() {
        for lines in [
            &[
                r#"{"type":"turn.failed","error":{"message":"unexpected status 500 Internal Server Error"}}"#,
            ][..],
            &[r#"{"type":"turn.completed"}"#][..],
            &[
                "not json",
                r#"{"type":"item.completed","item":{"type":"reasoning"}}"#,
            ][..],
            &[][..],
        ] {
            let (early, v) = verdict(lines);
            assert_eq!(early, None, "{lines:?}");
            assert_eq!(
                v.outcome(true),
                Err(FailureCode::ModelProbeFailed),
                "{lines:?}"
            );
        }
        let (_, v) = verdict(&[
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"x"}}"#,
            r#"{"type":"turn.failed","error":{"message":"stream closed"}}"#,
            r#"{"type":"turn.completed"}"#,
        ]);
        assert_eq!(v.outcome(true), Err(FailureCode::ModelProbeFailed));
    }

    /// With a stand-in `codex` that records its arguments and standard input: a ChatGPT
    /// service account logs in with its token on stdin only, held to its workspace.
    #[tokio::test]
    async fn a_service_account_logs_in_held_to_its_workspace() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().expect("tmp");
        let codex = tmp.path().join("codex");
        let record = tmp.path().join("record");
        std::fs::write(
            &codex,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > {0}.args\ncat > {0}.stdin\n",
                record.display()
            ),
        )
        .expect("write");
        std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let settings = ProbeSettings {
            codex,
            path: "/usr/bin:/bin".into(),
            home: tmp.path().into(),
            codex_home: tmp.path().into(),
            tmp_dir: tmp.path().into(),
            workspace: tmp.path().into(),
        };
        let credential = tmp.path().join("credential");
        std::fs::write(&credential, "sa-token-0123\n").expect("write");
        let input = LoginInput {
            method: LoginMethod::ChatgptServiceAccount,
            credential_file: credential,
            chatgpt_workspace_id: Some("11111111-2222-4333-8444-555555555555".into()),
        };
        assert_eq!(login(&settings, &input).await, Ok(()));
        let args = std::fs::read_to_string(tmp.path().join("record.args")).expect("args");
        assert_eq!(
            args.lines().collect::<Vec<_>>(),
            [
                "-c",
                "cli_auth_credentials_store=\"file\"",
                "-c",
                "forced_chatgpt_workspace_id=\"11111111-2222-4333-8444-555555555555\"",
                "login",
                "--with-access-token"
            ]
        );
        let stdin = std::fs::read_to_string(tmp.path().join("record.stdin")).expect("stdin");
        assert_eq!(stdin, "sa-token-0123");
        // Without its workspace it does not log in at all.
        let input = LoginInput {
            chatgpt_workspace_id: None,
            ..input
        };
        assert_eq!(
            login(&settings, &input).await,
            Err(FailureCode::LoginFailed)
        );
    }

    #[tokio::test]
    async fn a_codex_pat_must_be_an_access_token() {
        let tmp = tempfile::tempdir().expect("tmp");
        let settings = ProbeSettings {
            codex: tmp.path().join("no-codex"),
            path: "/usr/bin:/bin".into(),
            home: tmp.path().into(),
            codex_home: tmp.path().into(),
            tmp_dir: tmp.path().into(),
            workspace: tmp.path().into(),
        };
        assert_eq!(
            login_with(&settings, LoginMethod::CodexPat, None, b"sk-not-a-token").await,
            Err(FailureCode::LoginFailed)
        );
        assert_eq!(
            login_with(&settings, LoginMethod::ApiKey, None, b"").await,
            Err(FailureCode::LoginFailed)
        );
        // A missing credential file is a login failure too.
        let input = LoginInput {
            method: LoginMethod::ApiKey,
            credential_file: tmp.path().join("missing"),
            chatgpt_workspace_id: None,
        };
        assert_eq!(
            login(&settings, &input).await,
            Err(FailureCode::LoginFailed)
        );
    }
}
