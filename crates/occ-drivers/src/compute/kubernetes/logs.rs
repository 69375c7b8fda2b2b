//! Reading a revision's gateway output through `pods/log` (current or `previous` container),
//! with timestamps so a follow read resumes after the last delivered line.
//!
//! `pods/log` has no byte offsets: a [`LogPosition`] names the Pod's uid and the container's
//! restart count (`stream`), the time of the last delivered line in nanoseconds (`offset`) and
//! how many delivered lines carry exactly that time (`generation`). A follow read asks for a
//! window from a second before that time and drops what it already delivered.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use occ_core::ReasonCode;

use super::objects::{ANNOTATION_REVISION_ID, GATEWAY_CONTAINER};
use super::{
    ComputeError, KubernetesCompute, LOG_READ_MAX_BYTES, LogChunk, LogEntry, LogGap, LogPosition,
    LogQuery, RevisionTarget,
};
use crate::kubernetes::{KubeFailure, annotation};

impl KubernetesCompute {
    /// One bounded read of the revision's newest Pod's gateway container.
    pub(super) async fn read_pod_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
    ) -> Result<LogChunk, ComputeError> {
        let pods = self.agent_pods(&rev.agent).await?;
        let Some(pod) = newest_pod_of(&pods, rev.revision_id.as_str()) else {
            return Ok(LogChunk {
                entries: Vec::new(),
                position: None,
                truncated: false,
            });
        };
        let (Some(name), Some(uid)) = (&pod.metadata.name, &pod.metadata.uid) else {
            return Err(unavailable("the revision's Pod has no name or uid yet"));
        };
        let restarts = restart_count(pod);
        let instance = if query.previous {
            restarts.checked_sub(1).ok_or_else(|| {
                ComputeError::transient(
                    ReasonCode::RuntimeLogsSourceUnavailable,
                    "the gateway container has not restarted: there is no previous output",
                )
            })?
        } else {
            restarts
        };
        let stream = format!("{uid}:{instance}");
        let resume = query.after.as_ref().filter(|p| p.stream == stream);
        let mut params = LogParams {
            container: Some(GATEWAY_CONTAINER.into()),
            previous: query.previous,
            timestamps: true,
            limit_bytes: Some(LOG_READ_MAX_BYTES as i64),
            ..LogParams::default()
        };
        match resume {
            Some(p) => params.since_seconds = Some(seconds_since(p.offset)),
            None => params.tail_lines = Some(query.tail_lines as i64),
        }
        let names = self.names(&rev.agent).await?;
        let api: Api<Pod> = self.api(&names.tenant);
        let text = self
            .kube
            .call("get pods/log", || api.logs(name, &params))
            .await
            .map_err(|e| match e {
                KubeFailure::Forbidden(m) => {
                    ComputeError::transient(ReasonCode::RuntimeLogsClusterRbac, m)
                }
                other => other.into_compute("get pods/log"),
            })?;
        let mut entries = Vec::new();
        if query.after.is_some() && resume.is_none() {
            entries.push(LogEntry::Gap(LogGap::StreamReplaced));
        }
        let cut = text.len() as u64 >= LOG_READ_MAX_BYTES;
        let (lines, last) = new_lines(&text, resume, cut);
        if resume.is_some() && cut && lines.is_empty() {
            // The window since the last delivered line holds more than one read: what lies
            // between is not reachable any more through a time window.
            entries.push(LogEntry::Gap(LogGap::WindowExceeded));
        }
        entries.extend(lines.into_iter().map(LogEntry::Line));
        let position = last.map(|(at, count)| LogPosition {
            stream: stream.clone(),
            generation: count,
            offset: at,
        });
        let token = self.token(&rev.agent).await?;
        Ok(LogChunk {
            entries,
            position: position.or_else(|| resume.cloned()).or(Some(LogPosition {
                stream,
                generation: 0,
                offset: 0,
            })),
            truncated: cut,
        }
        // The gateway token is the Driver's own credential: it never leaves the Driver.
        .without_value(token.expose()))
    }
}

/// The revision's newest Pod that is not being deleted.
fn newest_pod_of<'a>(pods: &'a [Pod], revision_id: &str) -> Option<&'a Pod> {
    pods.iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && annotation(&p.metadata, ANNOTATION_REVISION_ID) == Some(revision_id)
        })
        .max_by_key(|p| p.metadata.creation_timestamp.clone())
}

fn restart_count(pod: &Pod) -> u64 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == GATEWAY_CONTAINER))
        .map_or(0, |c| u64::try_from(c.restart_count).unwrap_or(0))
}

/// Seconds back to (and a little before) `nanos`, as `sinceSeconds` wants them.
fn seconds_since(nanos: u64) -> i64 {
    let now = Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let back = now.saturating_sub(i64::try_from(nanos).unwrap_or(i64::MAX));
    (back / 1_000_000_000).max(0) + 2
}

/// The lines of a timestamped `pods/log` answer not delivered before `resume`, and the time and
/// count of the last delivered one. A `cut` answer's last line may be partial: it waits.
fn new_lines(
    text: &str,
    resume: Option<&LogPosition>,
    cut: bool,
) -> (Vec<String>, Option<(u64, u64)>) {
    let mut raw: Vec<&str> = text.lines().collect();
    if cut && !text.ends_with('\n') {
        raw.pop();
    }
    let (mut seen_at, mut skip) = resume.map_or((0, 0), |p| (p.offset, p.generation));
    let mut last = resume.map(|p| (p.offset, p.generation));
    let mut lines = Vec::new();
    for line in raw {
        let (at, message) = split_timestamp(line);
        let Some(at) = at else {
            lines.push(message.to_owned());
            continue;
        };
        if resume.is_some() && at < seen_at {
            continue;
        }
        if resume.is_some() && at == seen_at && skip > 0 {
            skip -= 1;
            continue;
        }
        last = Some(match last {
            Some((t, n)) if t == at => (t, n + 1),
            _ => (at, 1),
        });
        seen_at = at;
        lines.push(message.to_owned());
    }
    (lines, last)
}

/// `"<RFC 3339 time> <message>"` as the time in nanoseconds and the message.
fn split_timestamp(line: &str) -> (Option<u64>, &str) {
    let Some((time, message)) = line.split_once(' ') else {
        return (None, line);
    };
    match DateTime::parse_from_rfc3339(time) {
        Ok(t) => (
            t.with_timezone(&Utc)
                .timestamp_nanos_opt()
                .and_then(|n| u64::try_from(n).ok()),
            message,
        ),
        Err(_) => (None, line),
    }
}

fn unavailable(message: &str) -> ComputeError {
    ComputeError::transient(ReasonCode::RuntimeLogsUnavailable, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_read_drops_what_was_delivered_and_counts_equal_times() {
        let text = "2026-01-01T00:00:01.000000001Z a\n\
                    2026-01-01T00:00:02.000000000Z b\n\
                    2026-01-01T00:00:02.000000000Z c\n";
        let (lines, last) = new_lines(text, None, false);
        assert_eq!(lines, ["a", "b", "c"]);
        let (at, count) = last.unwrap();
        assert_eq!(count, 2);
        let resume = LogPosition {
            stream: "uid:0".into(),
            generation: 1,
            offset: at,
        };
        let (lines, last) = new_lines(text, Some(&resume), false);
        assert_eq!(lines, ["c"]);
        assert_eq!(last, Some((at, 2)));
        let resume = LogPosition {
            generation: 2,
            ..resume
        };
        assert_eq!(
            new_lines(text, Some(&resume), false).0,
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_cut_answer_keeps_its_partial_last_line_for_later() {
        let text = "2026-01-01T00:00:01Z whole\n2026-01-01T00:00:02Z par";
        let (lines, last) = new_lines(text, None, true);
        assert_eq!(lines, ["whole"]);
        assert_eq!(last.unwrap().1, 1);
    }
}
