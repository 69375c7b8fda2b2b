//! `occ agent logs`: one page, a download, or a follow loop.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use clap::Args;
use reqwest::Method;
use serde_json::Value;

use super::client::{ApiFailure, Client, Output};
use super::revisions::default_runtime_revision;

/// `occ agent logs …`
#[derive(Debug, Args)]
pub struct LogsArgs {
    id: String,
    /// The revision (`rev_…`); default: a newer revision than the active one while it has
    /// workloads, else the active revision, else the latest.
    #[arg(long, value_name = "REVISION")]
    revision: Option<String>,
    /// `gateway` or `agent`.
    #[arg(long, default_value = "gateway")]
    source: String,
    /// Lines of the first page (1–1000).
    #[arg(long)]
    tail: Option<u16>,
    /// Only lines at most this old: `90s`, `10m`, `2h` (up to 24h).
    #[arg(long)]
    since: Option<String>,
    /// Leave out lines below this level: `error`, `warn`, `info`, `debug`.
    #[arg(long)]
    level: Option<String>,
    /// Keep polling for new output (every 2 s) until Ctrl-C.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Write the records as text to FILE instead of printing them.
    #[arg(long, value_name = "FILE", conflicts_with = "follow")]
    download: Option<PathBuf>,
}

/// `--since` as seconds: a number with an `s`, `m` or `h` suffix, up to a day.
pub(super) fn since_seconds(text: &str) -> anyhow::Result<u64> {
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => anyhow::bail!("--since {text}: use a number with s, m or h (e.g. 10m)"),
    };
    let seconds = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|s| (1..=86_400).contains(s))
        .ok_or_else(|| anyhow!("--since {text}: between 1s and 24h"))?;
    Ok(seconds)
}

/// One record as a text line (gaps stand out).
pub(super) fn log_line(record: &Value) -> String {
    if record["type"] == "gap" {
        return format!(
            "-- gap: {} ({}) --",
            record["reason"].as_str().unwrap_or("?"),
            record["remedy"].as_str().unwrap_or("")
        );
    }
    let subsystem = record["subsystem"]
        .as_str()
        .map(|s| format!(" [{s}]"))
        .unwrap_or_default();
    format!(
        "{} {}{subsystem} {}",
        record["time"].as_str().unwrap_or("-"),
        record["level"].as_str().unwrap_or("unknown"),
        record["message"].as_str().unwrap_or("")
    )
}

/// How often `occ agent logs -f` asks for more output when it has caught up.
pub(super) const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// `occ agent logs`: one page, a download, or a follow loop that resumes with the cursor and
/// ends cleanly on Ctrl-C.
pub(super) async fn agent_logs(c: &Client, base: &str, args: LogsArgs) -> anyhow::Result<()> {
    let revision = match args.revision {
        Some(r) => r,
        None => default_runtime_revision(c, &format!("{base}/{}", args.id)).await?,
    };
    let mut query = vec![format!("source={}", args.source)];
    if let Some(tail) = args.tail {
        query.push(format!("tailLines={tail}"));
    }
    if let Some(since) = &args.since {
        query.push(format!("sinceSeconds={}", since_seconds(since)?));
    }
    if let Some(level) = &args.level {
        query.push(format!("minLevel={level}"));
    }
    let path = format!(
        "{base}/{}/deployments/{revision}/runtime/logs?{}",
        args.id,
        query.join("&")
    );
    if let Some(file) = &args.download {
        let text = c
            .fetch(Method::GET, &format!("{path}&download=true"), None)
            .await?
            .unwrap_or_default();
        std::fs::write(file, &text).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("Wrote {} bytes to {}.", text.len(), file.display());
        return Ok(());
    }
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{path}&cursor={cursor}"),
            None => path.clone(),
        };
        let page = tokio::select! {
            page = c.call(Method::GET, &url, None) => page,
            _ = tokio::signal::ctrl_c(), if args.follow => return Ok(()),
        };
        let page = match page {
            Ok(page) => page,
            Err(e) if args.follow => {
                let Some(failure) = e.downcast_ref::<ApiFailure>() else {
                    return Err(e);
                };
                let wait = match (failure.status, failure.code.as_str()) {
                    (429, _) => {
                        let secs = failure.retry_after.unwrap_or(1);
                        eprintln!("notice: rate limited; retrying in {secs} s");
                        Duration::from_secs(secs)
                    }
                    (504, _) => {
                        eprintln!("notice: the read timed out; retrying");
                        FOLLOW_POLL
                    }
                    (400, "RUNTIME_LOGS_CURSOR_INVALID") if cursor.is_some() => {
                        eprintln!("notice: the cursor was refused; starting a new view");
                        cursor = None;
                        continue;
                    }
                    _ => return Err(e),
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = tokio::signal::ctrl_c() => return Ok(()),
                }
            }
            Err(e) => return Err(e),
        };
        match c.output {
            Output::Table => {
                for record in page["records"].as_array().into_iter().flatten() {
                    println!("{}", log_line(record));
                }
            }
            _ => c.print(&page, &[])?,
        }
        if !args.follow {
            return Ok(());
        }
        if let Some(next) = page["cursor"].as_str() {
            cursor = Some(next.to_owned());
        }
        // A page cut at its byte bound has more waiting: ask again at once. Otherwise poll
        // every second, half the route's per-caller refill rate.
        if page["truncated"] != Value::Bool(true) {
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_seconds_minutes_and_hours_up_to_a_day() {
        assert_eq!(since_seconds("90s").unwrap(), 90);
        assert_eq!(since_seconds("10m").unwrap(), 600);
        assert_eq!(since_seconds("24h").unwrap(), 86_400);
        for bad in ["", "10", "0s", "25h", "m", "-1m", "1d"] {
            assert!(since_seconds(bad).is_err(), "{bad}");
        }
    }
}
