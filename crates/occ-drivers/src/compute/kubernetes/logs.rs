//! Reading a revision's gateway output through `pods/log` (current or `previous` container),
//! with timestamps so a follow read resumes after the last delivered line.
//!
//! `pods/log` has no byte offsets: a [`LogPosition`] names the Pod's uid and the container
//! instance the read returned (`stream`, from the container id the kubelet serves, chosen from
//! the Pod's container status as the kubelet chooses it), the time of the last delivered line in
//! nanoseconds (`offset`) and how many delivered lines carry exactly that time (`generation`). A
//! follow read asks for a window from a second before that time and drops what it already
//! delivered. A container that crashed and waits to restart still serves the instance that
//! crashed, so a follow read finishes that instance's output before the next instance's
//! `stream_replaced` gap.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, LogParams};
use occ_core::ReasonCode;

use super::pods::Workload;
use super::workloads::ANNOTATION_REVISION_ID;
use super::{
    ComputeError, KubernetesCompute, LOG_READ_MAX_BYTES, LogChunk, LogEntry, LogGap, LogPosition,
    LogQuery, RevisionContext, RevisionTarget,
};
use crate::kubernetes::{KubeFailure, annotation};
use occ_core::compute::OUTPUT_LINES;

impl KubernetesCompute {
    /// One bounded read of the revision's newest `workload` Pod's container.
    pub(super) async fn read_pod_logs(
        &self,
        rev: &RevisionTarget,
        query: &LogQuery,
        workload: Workload,
    ) -> Result<LogChunk, ComputeError> {
        let nothing_yet = LogChunk {
            entries: Vec::new(),
            position: None,
            truncated: false,
        };
        let pods = self.workload_pods(&rev.agent, workload).await?;
        let Some(pod) = newest_pod_of(&pods, rev.revision_id.as_str()) else {
            return Ok(nothing_yet);
        };
        let (Some(name), Some(uid)) = (&pod.metadata.name, &pod.metadata.uid) else {
            return Err(unavailable("the revision's Pod has no name or uid yet"));
        };
        let Some(instance) = served_instance(container_status(pod, workload), query.previous)?
        else {
            return Ok(nothing_yet);
        };
        let stream = format!("{uid}:{instance}");
        let resume = query.after.as_ref().filter(|p| p.stream == stream);
        let mut params = LogParams {
            container: Some(workload.container().into()),
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
        let read = |params: LogParams| {
            let api = api.clone();
            async move {
                self.kube
                    .call("get pods/log", || api.logs(name, &params))
                    .await
                    .map_err(|e| match e {
                        KubeFailure::Forbidden(m) => {
                            ComputeError::transient(ReasonCode::RuntimeLogsClusterRbac, m)
                        }
                        // The kubelet refuses a container whose state changed since the Pod
                        // was listed (it is starting, or its instance was replaced): read again.
                        KubeFailure::Invalid(m) => unavailable(&m),
                        other => other.into_compute("get pods/log"),
                    })
            }
        };
        let text = read(params.clone()).await?;
        let mut entries = Vec::new();
        if query.after.is_some() && resume.is_none() {
            entries.push(LogEntry::Gap(LogGap::StreamReplaced));
        }
        let mut cut = text.len() as u64 >= LOG_READ_MAX_BYTES;
        let (mut lines, mut last) = new_lines(&text, resume, cut);
        if let Some(resumed) = resume
            && cut
            && lines.is_empty()
        {
            // The window since the last delivered line holds more than one read, all of it
            // delivered already: a time window cannot get past it. Read the newest lines
            // instead (fewer until they fit one read), and say output is missing when they
            // start after the last delivered line.
            params.since_seconds = None;
            let mut tail_lines = query.tail_lines.max(1);
            let tail = loop {
                params.tail_lines = Some(tail_lines as i64);
                let tail = read(params.clone()).await?;
                if (tail.len() as u64) < LOG_READ_MAX_BYTES || tail_lines == 1 {
                    break tail;
                }
                tail_lines = tail_lines.div_ceil(2);
            };
            cut = tail.len() as u64 >= LOG_READ_MAX_BYTES;
            let first = tail.lines().find_map(|line| split_timestamp(line).0);
            if first.is_none_or(|at| at > resumed.offset) {
                entries.push(LogEntry::Gap(LogGap::WindowExceeded));
            }
            (lines, last) = new_lines(&tail, resume, cut);
        }
        entries.extend(lines.into_iter().map(LogEntry::Line));
        let position = last.map(|(at, count)| LogPosition {
            stream: stream.clone(),
            generation: count,
            offset: at,
        });
        let token = self.token(&rev.agent).await?;
        let proxy_key = occ_host::snapshot::proxy_key(rev, token.expose());
        let chunk = LogChunk {
            entries,
            position: position.or_else(|| resume.cloned()).or(Some(LogPosition {
                stream,
                generation: 0,
                offset: 0,
            })),
            truncated: cut,
        }
        // The gateway token (and the proxy key derived from it) are the Driver's own
        // credentials: they never leave the Driver.
        .without_value(token.expose());
        Ok(match proxy_key {
            Some(key) => chunk.without_value(&key),
            None => chunk,
        })
    }
}

impl KubernetesCompute {
    /// The last output lines of a `workload` container that failed during startup (the instance
    /// that exited: a container waiting to restart still serves it), redacted, for the
    /// activation's error. Best effort: a failure to read them leaves the error without output.
    pub(super) async fn startup_output(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        workload: Workload,
    ) -> Vec<String> {
        let query = LogQuery {
            workload: Default::default(),
            after: None,
            tail_lines: OUTPUT_LINES,
            previous: false,
        };
        let chunk = match self.read_pod_logs(rev, &query, workload).await {
            Ok(chunk) => chunk,
            Err(e) => {
                tracing::debug!(revision = %rev.revision_id, code = ?e.code, "no startup output");
                return Vec::new();
            }
        };
        // The Driver already removed the gateway token from the lines.
        ctx.output_redactor("").lines(chunk.lines())
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

fn container_status(pod: &Pod, workload: Workload) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == workload.container()))
}

/// The container id of the instance a `pods/log` read returns, chosen as the kubelet chooses it
/// (`validateContainerLogStatus`): `previous` is the last terminated instance; otherwise the
/// running one, else the terminated one, else the last terminated one (a container waiting to
/// restart after a crash). `None`: the gateway has not started yet, there is no output. A
/// `previous` read without a terminated instance is refused.
fn served_instance(
    status: Option<&ContainerStatus>,
    previous: bool,
) -> Result<Option<String>, ComputeError> {
    let id = |id: Option<&String>| id.filter(|id| !id.is_empty()).cloned();
    let state = status.and_then(|s| s.state.as_ref());
    let last = status
        .and_then(|s| s.last_state.as_ref())
        .and_then(|l| l.terminated.as_ref())
        .and_then(|t| id(t.container_id.as_ref()));
    if previous {
        return last.map(Some).ok_or_else(|| {
            ComputeError::transient(
                ReasonCode::RuntimeLogsSourceUnavailable,
                "the container has not terminated before: there is no previous output",
            )
        });
    }
    if state.is_some_and(|s| s.running.is_some()) {
        return Ok(status.and_then(|s| id(s.container_id.as_ref())));
    }
    if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
        return Ok(id(terminated.container_id.as_ref()).or(last));
    }
    Ok(last)
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

    fn status(value: serde_json::Value) -> ContainerStatus {
        let mut status = serde_json::json!({
            "name": "gateway", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        });
        status
            .as_object_mut()
            .expect("object")
            .extend(value.as_object().expect("object").clone());
        serde_json::from_value(status).expect("container status")
    }

    #[test]
    fn the_instance_read_is_the_one_the_kubelet_serves() {
        let running = status(serde_json::json!({"containerID": "c://2",
            "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "c://1"}}}));
        assert_eq!(
            served_instance(Some(&running), false).unwrap().as_deref(),
            Some("c://2")
        );
        assert_eq!(
            served_instance(Some(&running), true).unwrap().as_deref(),
            Some("c://1")
        );
        // Crashed on its first run and waiting to restart (restartCount still 0): both reads
        // serve the instance that crashed.
        let crashed = status(serde_json::json!({"containerID": "c://1",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "c://1"}}}));
        assert_eq!(
            served_instance(Some(&crashed), false).unwrap().as_deref(),
            Some("c://1")
        );
        assert_eq!(
            served_instance(Some(&crashed), true).unwrap().as_deref(),
            Some("c://1")
        );
        let starting =
            status(serde_json::json!({"state": {"waiting": {"reason": "ContainerCreating"}}}));
        assert_eq!(served_instance(Some(&starting), false).unwrap(), None);
        assert_eq!(served_instance(None, false).unwrap(), None);
        let refused = served_instance(Some(&starting), true).expect_err("no previous");
        assert_eq!(refused.code, ReasonCode::RuntimeLogsSourceUnavailable);
    }

    #[test]
    fn a_cut_answer_keeps_its_partial_last_line_for_later() {
        let text = "2026-01-01T00:00:01Z whole\n2026-01-01T00:00:02Z par";
        let (lines, last) = new_lines(text, None, true);
        assert_eq!(lines, ["whole"]);
        assert_eq!(last.unwrap().1, 1);
    }
}
