//! `GET /api/v1/namespaces/{ns}/pods/{name}/log` as the API server and the kubelet answer it,
//! and the container instances whose output it serves.
//!
//! Output belongs to a container *instance* (a container id such as `containerd://…`), as on a
//! node: [`FakeKube::start_container`] starts a new instance of a Pod's container (the one before
//! becomes the last termination, the restart count grows), [`FakeKube::stop_container`] ends the
//! running one (the container then waits in `CrashLoopBackOff`, as under `restartPolicy:
//! Always`), and [`FakeKube::append_pod_log`] writes a line to the running instance, stamped
//! with the current time. Which instance a read returns is decided from the Pod's container
//! status exactly as the kubelet's `validateContainerLogStatus` does: `previous` names the last
//! terminated instance; otherwise the running one, else the terminated one, else the last
//! terminated one; a container waiting with nothing before it has no logs yet (`400`).
//!
//! Parameters: `container` (defaults to the only container; required when there are several;
//! `400` for an unknown one), `previous`, `timestamps` (each line prefixed with its time in the
//! kubelet's fixed nine-digit RFC 3339 form and a space), `tailLines` (the last N lines, applied
//! before the time filter as the kubelet does), `sinceSeconds` or `sinceTime` (lines at or after
//! that time; at most one of them, `422` otherwise), `limitBytes` (the body is cut at that many
//! bytes, mid-line if need be). A Pod not bound to a node yet answers an empty body, as the API
//! server does. `follow` is refused: the fake does not stream. The body is `text/plain`; errors
//! are `metav1.Status` bodies like every other answer of the fake.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{FakeKube, FakeState, now_rfc3339, query_param, status};

/// One line of a container instance's output.
#[derive(Debug, Clone)]
pub(crate) struct LogLine {
    at: DateTime<Utc>,
    text: String,
}

/// A failed `pods/log` read: the status code and its `metav1.Status` body.
pub(super) type Refusal = (u16, Value);

impl FakeState {
    /// Starts a new instance of `container` in Pod `namespace/pod` and returns its container id.
    pub(crate) fn start_container_instance(
        &mut self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> String {
        let id = self.new_container_instance();
        let now = now_rfc3339();
        let version = self.next_version();
        let object = pod_object(self, namespace, pod);
        let image = object["spec"]["containers"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == json!(container)))
            .and_then(|c| c["image"].as_str())
            .unwrap_or("")
            .to_owned();
        if object["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
            object["spec"]["nodeName"] = json!("fake-node");
        }
        let entry = container_status(object, container, &image);
        let before = entry["state"].clone();
        let ran_before = before.get("running").is_some()
            || before.get("terminated").is_some()
            || entry["lastState"].get("terminated").is_some();
        if let Some(running) = before.get("running") {
            // Replaced while running: the old instance was killed.
            entry["lastState"] = json!({"terminated": {
                "exitCode": 137, "reason": "Error",
                "startedAt": running["startedAt"], "finishedAt": now,
                "containerID": entry["containerID"],
            }});
        } else if let Some(terminated) = before.get("terminated") {
            entry["lastState"] = json!({"terminated": terminated});
        }
        if ran_before {
            let restarts = entry["restartCount"].as_i64().unwrap_or(0);
            entry["restartCount"] = json!(restarts + 1);
        }
        entry["state"] = json!({"running": {"startedAt": now}});
        entry["containerID"] = json!(id);
        entry["ready"] = json!(true);
        entry["started"] = json!(true);
        object["status"]["phase"] = json!("Running");
        object["metadata"]["resourceVersion"] = json!(version);
        id
    }

    /// Ends the running instance of `container` with `exit_code`; the container then waits to
    /// be restarted (`CrashLoopBackOff`) with that instance as its last termination.
    pub(crate) fn stop_container_instance(
        &mut self,
        namespace: &str,
        pod: &str,
        container: &str,
        exit_code: i32,
    ) {
        let now = now_rfc3339();
        let version = self.next_version();
        let object = pod_object(self, namespace, pod);
        let entry = container_status(object, container, "");
        let Some(running) = entry["state"].get("running").cloned() else {
            panic!("container {container} of pod {namespace}/{pod} is not running");
        };
        entry["lastState"] = json!({"terminated": {
            "exitCode": exit_code,
            "reason": if exit_code == 0 { "Completed" } else { "Error" },
            "startedAt": running["startedAt"], "finishedAt": now,
            "containerID": entry["containerID"],
        }});
        entry["state"] = json!({"waiting": {
            "reason": "CrashLoopBackOff",
            "message": format!("back-off 10s restarting failed container={container} pod={pod}"),
        }});
        entry["ready"] = json!(false);
        entry["started"] = json!(false);
        object["metadata"]["resourceVersion"] = json!(version);
    }

    /// A new container id with an empty log, for a caller that writes the Pod's status itself
    /// (the test kubelet).
    pub(crate) fn new_container_instance(&mut self) -> String {
        let id = format!("containerd://{}", uuid::Uuid::new_v4().simple());
        self.container_logs.insert(id.clone(), Vec::new());
        id
    }

    /// Appends a line, stamped now, to the log of container instance `id`.
    pub(crate) fn append_instance_log(&mut self, id: &str, line: &str) {
        self.container_logs
            .entry(id.to_owned())
            .or_default()
            .push(LogLine {
                at: Utc::now(),
                text: line.to_owned(),
            });
    }

    /// Appends a line to the running instance of `container` (its time: `at`).
    pub(crate) fn append_container_log(
        &mut self,
        namespace: &str,
        pod: &str,
        container: &str,
        at: DateTime<Utc>,
        line: &str,
    ) {
        let object = pod_object(self, namespace, pod);
        let id = object["status"]["containerStatuses"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == json!(container)))
            .filter(|c| c["state"].get("running").is_some())
            .and_then(|c| c["containerID"].as_str())
            .unwrap_or_else(|| {
                panic!("container {container} of pod {namespace}/{pod} is not running")
            })
            .to_owned();
        self.container_logs.entry(id).or_default().push(LogLine {
            at,
            text: line.to_owned(),
        });
    }
}

impl FakeKube {
    /// Starts a new instance of `container` in Pod `namespace/pod` (binding the Pod to a node if
    /// it is not yet): the running one, if any, is killed and becomes the last termination, and
    /// the restart count grows whenever an instance ran before. Returns the new container id.
    pub fn start_container(&self, namespace: &str, pod: &str, container: &str) -> String {
        self.state()
            .start_container_instance(namespace, pod, container)
    }

    /// Ends the running instance of `container` with `exit_code`: it becomes the last
    /// termination and the container waits in `CrashLoopBackOff` (the restart count grows only
    /// when the next instance starts, as with the kubelet).
    pub fn stop_container(&self, namespace: &str, pod: &str, container: &str, exit_code: i32) {
        self.state()
            .stop_container_instance(namespace, pod, container, exit_code);
    }

    /// Writes `line` (without its newline) to the running instance of `container`, stamped now.
    pub fn append_pod_log(&self, namespace: &str, pod: &str, container: &str, line: &str) {
        self.append_pod_log_at(namespace, pod, container, Utc::now(), line);
    }

    /// Writes `line` to the running instance of `container` with the time `at` (several lines
    /// may share one time, as lines written within the runtime's clock resolution do).
    pub fn append_pod_log_at(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        at: DateTime<Utc>,
        line: &str,
    ) {
        self.state()
            .append_container_log(namespace, pod, container, at, line);
    }
}

/// The stored Pod, which a test control must name correctly.
fn pod_object<'a>(st: &'a mut FakeState, namespace: &str, pod: &str) -> &'a mut Value {
    st.objects
        .get_mut(&("pods".into(), namespace.into(), pod.into()))
        .unwrap_or_else(|| panic!("no pod {namespace}/{pod}"))
}

/// The Pod's status entry of `container`, created (waiting, never started) when missing.
fn container_status<'a>(object: &'a mut Value, container: &str, image: &str) -> &'a mut Value {
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["containerStatuses"].is_array() {
        object["status"]["containerStatuses"] = json!([]);
    }
    let statuses = object["status"]["containerStatuses"]
        .as_array_mut()
        .expect("an array");
    let index = match statuses.iter().position(|c| c["name"] == json!(container)) {
        Some(index) => index,
        None => {
            statuses.push(json!({
                "name": container, "image": image, "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}},
            }));
            statuses.len() - 1
        }
    };
    &mut statuses[index]
}

/// What a read asked for.
struct LogOptions {
    container: Option<String>,
    previous: bool,
    timestamps: bool,
    tail_lines: Option<usize>,
    since: Option<DateTime<Utc>>,
    limit_bytes: Option<usize>,
}

fn bad_request(message: String) -> Refusal {
    (400, status(400, "BadRequest", message))
}

fn invalid(pod: &str, field: &str, value: &str, why: &str) -> Refusal {
    (
        422,
        status(
            422,
            "Invalid",
            format!("PodLogOptions \"{pod}\" is invalid: {field}: Invalid value: {value}: {why}"),
        ),
    )
}

fn flag(query: &str, key: &str) -> Result<bool, Refusal> {
    match query_param(query, key).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad_request(format!(
            "{key}: invalid boolean value \"{other}\""
        ))),
    }
}

fn number(query: &str, key: &str) -> Result<Option<i64>, Refusal> {
    query_param(query, key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| bad_request(format!("{key}: invalid integer value \"{v}\"")))
        })
        .transpose()
}

fn options(pod: &str, query: &str, now: DateTime<Utc>) -> Result<LogOptions, Refusal> {
    if flag(query, "follow")? {
        return Err(bad_request(
            "the fake API server does not stream pods/log (follow)".into(),
        ));
    }
    let tail = number(query, "tailLines")?;
    let since_seconds = number(query, "sinceSeconds")?;
    let since_time = query_param(query, "sinceTime");
    let limit = number(query, "limitBytes")?;
    if since_seconds.is_some() && since_time.is_some() {
        return Err(invalid(
            pod,
            "sinceSeconds",
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    let tail_lines = match tail {
        Some(n) if n < 0 => {
            return Err(invalid(
                pod,
                "tailLines",
                &n.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        other => other.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let since = match (since_seconds, since_time) {
        (Some(s), _) if s < 1 => {
            return Err(invalid(
                pod,
                "sinceSeconds",
                &s.to_string(),
                "must be greater than 0",
            ));
        }
        (Some(s), _) => Some(now - chrono::Duration::seconds(s)),
        (None, Some(t)) => Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|_| bad_request(format!("sinceTime: invalid time \"{t}\"")))?
                .with_timezone(&Utc),
        ),
        (None, None) => None,
    };
    let limit_bytes = match limit {
        Some(n) if n < 1 => {
            return Err(invalid(
                pod,
                "limitBytes",
                &n.to_string(),
                "must be greater than 0",
            ));
        }
        other => other.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    Ok(LogOptions {
        container: query_param(query, "container"),
        previous: flag(query, "previous")?,
        timestamps: flag(query, "timestamps")?,
        tail_lines,
        since,
        limit_bytes,
    })
}

/// The body of a `pods/log` read of Pod `namespace/pod`, or why it is refused.
pub(super) fn read(
    st: &FakeState,
    namespace: &str,
    pod: &str,
    query: &str,
) -> Result<String, Refusal> {
    let now = Utc::now();
    let Some(object) = st
        .objects
        .get(&("pods".into(), namespace.into(), pod.into()))
    else {
        return Err((
            404,
            status(404, "NotFound", format!("pods \"{pod}\" not found")),
        ));
    };
    let opts = options(pod, query, now)?;
    let names = |key: &str| -> Vec<String> {
        object["spec"][key]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (containers, init) = (names("containers"), names("initContainers"));
    let container = match opts.container {
        Some(c) if containers.contains(&c) || init.contains(&c) => c,
        Some(c) => {
            return Err(bad_request(format!(
                "container {c} is not valid for pod {pod}"
            )));
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(bad_request(format!(
                "a container name must be specified for pod {pod}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    // Not bound to a node yet: the API server has no kubelet to ask and answers nothing.
    if object["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
        return Ok(String::new());
    }
    let id = instance(object, pod, &container, opts.previous)?;
    let lines = st.container_logs.get(&id).map_or(&[][..], Vec::as_slice);
    let from = opts.tail_lines.map_or(0, |n| lines.len().saturating_sub(n));
    let mut body = String::new();
    for line in &lines[from..] {
        if opts.since.is_some_and(|since| line.at < since) {
            continue;
        }
        if opts.timestamps {
            body.push_str(&line.at.to_rfc3339_opts(SecondsFormat::Nanos, true));
            body.push(' ');
        }
        body.push_str(&line.text);
        body.push('\n');
    }
    if let Some(limit) = opts.limit_bytes
        && body.len() > limit
    {
        let mut cut = limit;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
    }
    Ok(body)
}

/// The container id whose output a read returns, chosen from the Pod's status as the kubelet
/// does, or the kubelet's refusal.
fn instance(object: &Value, pod: &str, container: &str, previous: bool) -> Result<String, Refusal> {
    let find = |key: &str| {
        object["status"][key]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == json!(container)))
    };
    let Some(cs) = find("containerStatuses").or_else(|| find("initContainerStatuses")) else {
        return Err(bad_request(format!(
            "container \"{container}\" in pod \"{pod}\" is not available"
        )));
    };
    let id_of = |v: &Value| {
        v["containerID"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
    };
    let last = cs["lastState"].get("terminated").and_then(id_of);
    let state = &cs["state"];
    let terminated_message = || {
        bad_request(format!(
            "container \"{container}\" in pod \"{pod}\" is terminated"
        ))
    };
    if previous {
        return last.ok_or_else(|| {
            bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{pod}\" not found"
            ))
        });
    }
    if state.get("running").is_some() {
        return id_of(cs).ok_or_else(terminated_message);
    }
    if let Some(terminated) = state.get("terminated") {
        return id_of(terminated).or(last).ok_or_else(terminated_message);
    }
    if cs["lastState"].get("terminated").is_some() {
        return last.ok_or_else(terminated_message);
    }
    let reason = state["waiting"]["reason"].as_str();
    Err(bad_request(match reason {
        Some(reason) => {
            format!("container \"{container}\" in pod \"{pod}\" is waiting to start: {reason}")
        }
        None => {
            format!("container \"{container}\" in pod \"{pod}\" is waiting to start - no logs yet")
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with_pod(containers: &[&str]) -> FakeState {
        let mut st = FakeState::default();
        let specs: Vec<Value> = containers
            .iter()
            .map(|c| json!({"name": c, "image": "i"}))
            .collect();
        st.objects.insert(
            ("pods".into(), "ns".into(), "p".into()),
            json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": specs}}),
        );
        st
    }

    fn at(second: u32, nanos: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_225_600 + i64::from(second), nanos).expect("time")
    }

    #[test]
    fn a_read_serves_the_instance_the_kubelet_would() {
        let mut st = state_with_pod(&["gateway"]);
        assert_eq!(read(&st, "ns", "p", "").as_deref(), Ok(""), "unscheduled");
        st.start_container_instance("ns", "p", "gateway");
        st.append_container_log("ns", "p", "gateway", at(1, 5), "one");
        st.append_container_log("ns", "p", "gateway", at(2, 0), "two");
        assert_eq!(read(&st, "ns", "p", "").as_deref(), Ok("one\ntwo\n"));
        assert_eq!(
            read(&st, "ns", "p", "timestamps=true&tailLines=1").as_deref(),
            Ok("2026-01-01T00:00:02.000000000Z two\n")
        );
        let (code, body) = read(&st, "ns", "p", "previous=true").expect_err("no previous");
        assert_eq!(code, 400);
        assert_eq!(
            body["message"],
            "previous terminated container \"gateway\" in pod \"p\" not found"
        );

        // A crash: the dead instance is both the current read and the previous one.
        st.stop_container_instance("ns", "p", "gateway", 1);
        assert_eq!(read(&st, "ns", "p", "").as_deref(), Ok("one\ntwo\n"));
        assert_eq!(
            read(&st, "ns", "p", "previous=true").as_deref(),
            Ok("one\ntwo\n")
        );
        // The next instance: current is new, previous the dead one; the restart is counted.
        st.start_container_instance("ns", "p", "gateway");
        st.append_container_log("ns", "p", "gateway", at(3, 0), "three");
        assert_eq!(read(&st, "ns", "p", "").as_deref(), Ok("three\n"));
        assert_eq!(
            read(&st, "ns", "p", "previous=true").as_deref(),
            Ok("one\ntwo\n")
        );
        let pod = &st.objects[&("pods".into(), "ns".into(), "p".into())];
        assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 1);
    }

    #[test]
    fn parameters_behave_like_the_real_ones() {
        let mut st = state_with_pod(&["gateway", "sidecar"]);
        st.start_container_instance("ns", "p", "gateway");
        for (i, line) in ["a", "b", "c", "d"].into_iter().enumerate() {
            st.append_container_log("ns", "p", "gateway", at(i as u32, 0), line);
        }
        let read = |q: &str| read(&st, "ns", "p", q);
        assert_eq!(read("").expect_err("two containers").0, 400);
        assert_eq!(read("container=nope").expect_err("unknown").0, 400);
        assert_eq!(
            read("container=sidecar").expect_err("never started").1["message"],
            "container \"sidecar\" in pod \"p\" is not available"
        );
        let since = at(2, 0).to_rfc3339_opts(SecondsFormat::Secs, true);
        assert_eq!(
            read(&format!("container=gateway&sinceTime={since}")).as_deref(),
            Ok("c\nd\n")
        );
        // tailLines first, then the time filter.
        assert_eq!(
            read(&format!("container=gateway&tailLines=3&sinceTime={since}")).as_deref(),
            Ok("c\nd\n")
        );
        assert_eq!(read("container=gateway&tailLines=1").as_deref(), Ok("d\n"));
        assert_eq!(
            read("container=gateway&limitBytes=3").as_deref(),
            Ok("a\nb")
        );
        assert_eq!(
            read("container=gateway&sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z")
                .expect_err("both")
                .0,
            422
        );
        assert_eq!(
            read("container=gateway&sinceSeconds=0")
                .expect_err("zero")
                .0,
            422
        );
        assert_eq!(
            read("container=gateway&limitBytes=0").expect_err("zero").0,
            422
        );
        assert_eq!(
            read("container=gateway&follow=true").expect_err("follow").0,
            400
        );
        // Every line is far older than a minute.
        assert_eq!(read("container=gateway&sinceSeconds=60").as_deref(), Ok(""));
        assert_eq!(
            read("container=gateway&previous=false&timestamps=false").as_deref(),
            Ok("a\nb\nc\nd\n")
        );
    }
}
