//! `occ agent diagnose` and `occ agent runtime` as text.

use reqwest::Method;
use serde_json::Value;

use super::client::{Client, Output};
use super::render::{cell, table};
use super::revisions::latest_revision;

/// `occ agent diagnose`: the diagnostics of a deployment (an audited `POST`) next to the
/// deployment's own state and error.
pub(super) async fn agent_diagnose(
    c: &Client,
    base: &str,
    id: &str,
    revision: Option<String>,
) -> anyhow::Result<()> {
    let agent = format!("{base}/{id}");
    let revision = match revision {
        Some(revision) => revision,
        None => latest_revision(c, &agent).await?,
    };
    let deployment_path = format!("{agent}/deployments/{revision}");
    let diagnostics = c
        .call(
            Method::POST,
            &format!("{deployment_path}/diagnostics"),
            None,
        )
        .await?;
    let deployment = c.call(Method::GET, &deployment_path, None).await?;
    match c.output {
        Output::Table => {
            println!(
                "{}",
                diagnosis_text(id, &revision, &diagnostics, &deployment).trim_end()
            );
            Ok(())
        }
        _ => c.print(
            &serde_json::json!({"diagnostics": diagnostics, "deployment": deployment}),
            &[],
        ),
    }
}

/// `occ agent diagnose` as text: the deployment's state, the first failed check (the step it
/// stopped at), its error and output lines, every check, and where to read more.
pub(super) fn diagnosis_text(
    agent: &str,
    revision: &str,
    diagnostics: &Value,
    deployment: &Value,
) -> String {
    let checks = diagnostics["checks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = format!(
        "Deployment {revision}: {}\n",
        deployment["status"].as_str().unwrap_or("unknown")
    );
    match checks.iter().find(|c| c["state"] == "failed") {
        Some(failed) => out.push_str(&format!(
            "Failing step: {}/{} ({})\n",
            cell(&failed["component"]),
            cell(&failed["check"]),
            cell(&failed["code"])
        )),
        None => out.push_str("No check failed.\n"),
    }
    let error = &deployment["error"];
    if error.is_object() {
        out.push_str(&format!(
            "Error: {} {}\n",
            cell(&error["code"]),
            cell(&error["message"])
        ));
        if error["data"]["rolledBack"] == true {
            out.push_str("The revision that served before was restored and keeps serving.\n");
        }
        let output = error["data"]["output"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !output.is_empty() {
            out.push_str("\nLast output lines:\n");
            for line in output {
                out.push_str(&format!("  {}\n", line.as_str().unwrap_or_default()));
            }
        }
    }
    out.push_str("\nChecks:\n");
    out.push_str(&table(
        &Value::Array(checks.to_vec()),
        &["component", "check", "state", "code", "checkedAt"],
    ));
    out.push_str(&format!(
        "\n\nMore: occ agent logs {agent} --revision {revision}; occ agent runtime {agent} \
         --revision {revision}\n"
    ));
    out
}

/// `occ agent runtime` as text: the revision, then one line per container of each workload and
/// the workload's events.
pub(super) fn runtime_table(runtime: &Value) -> String {
    let mut out = format!(
        "Revision {} observed at {}\n",
        cell(&runtime["revisionId"]),
        cell(&runtime["observedAt"])
    );
    let pods = runtime["pods"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if pods.is_empty() {
        out.push_str("No workload runs for this revision.\n");
        return out;
    }
    let rows: Vec<Value> = pods
        .iter()
        .flat_map(|pod| {
            pod["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| {
                    serde_json::json!({
                        "pod": pod["name"], "phase": pod["phase"], "ready": pod["ready"],
                        "container": c["name"], "state": c["state"], "reason": c["reason"],
                        "restarts": c["restartCount"], "startedAt": c["startedAt"],
                        "lastExit": c["lastTermination"]["reason"],
                    })
                })
        })
        .collect();
    out.push_str(&table(
        &Value::Array(rows),
        &[
            "pod",
            "phase",
            "ready",
            "container",
            "state",
            "reason",
            "restarts",
            "startedAt",
            "lastExit",
        ],
    ));
    let events: Vec<Value> = pods
        .iter()
        .flat_map(|pod| pod["events"].as_array().into_iter().flatten().cloned())
        .collect();
    if !events.is_empty() {
        out.push_str("\n\nEvents:\n");
        out.push_str(&table(
            &Value::Array(events),
            &["lastObservedAt", "type", "reason", "count", "message"],
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_tables_list_containers_and_events() {
        let runtime = serde_json::json!({
            "revisionId": "rev_1", "observedAt": "2026-01-01T00:00:00.000Z",
            "pods": [{"name": "rev-1", "phase": "Running", "ready": true, "containers": [
                {"name": "gateway", "state": "running", "reason": null, "restartCount": 2,
                 "startedAt": "2026-01-01T00:00:00.000Z",
                 "lastTermination": {"reason": "exit status 1", "exitCode": 1, "finishedAt": null}}],
              "events": [{"type": "Warning", "reason": "GatewayExited", "count": 1,
                          "message": "the gateway exited (exit status 1)", "lastObservedAt": null}]}],
            "sources": []
        });
        let text = runtime_table(&runtime);
        assert!(text.starts_with("Revision rev_1 observed at 2026-01-01T00:00:00.000Z\n"));
        assert!(
            text.contains("rev-1  Running  true   gateway    running  -       2"),
            "{text}"
        );
        assert!(text.contains("exit status 1"), "{text}");
        assert!(text.contains("GatewayExited"), "{text}");
        let empty = serde_json::json!({"revisionId": "rev_1", "observedAt": "x", "pods": []});
        assert!(runtime_table(&empty).contains("No workload runs"));
    }

    #[test]
    fn a_diagnosis_names_the_failing_step_the_error_and_the_output() {
        let diagnostics = serde_json::json!({"revisionId": "rev_2", "observedAt": "x", "checks": [
            {"component": "deployment", "check": "reconcile", "state": "failed",
             "code": "RUNTIME_STARTUP_FAILED", "checkedAt": null},
            {"component": "runtime", "check": "workload", "state": "succeeded",
             "checkedAt": null},
        ]});
        let deployment = serde_json::json!({"status": "failed", "error": {
            "code": "RUNTIME_STARTUP_FAILED", "message": "the gateway exited during startup",
            "data": {"rolledBack": true, "output": ["Error: ENOENT cert.pem"]}}});
        let text = diagnosis_text("agt_1", "rev_2", &diagnostics, &deployment);
        assert!(text.starts_with("Deployment rev_2: failed\n"), "{text}");
        assert!(
            text.contains("Failing step: deployment/reconcile (RUNTIME_STARTUP_FAILED)"),
            "{text}"
        );
        assert!(
            text.contains("Error: RUNTIME_STARTUP_FAILED the gateway exited during startup"),
            "{text}"
        );
        assert!(text.contains("restored"), "{text}");
        assert!(text.contains("  Error: ENOENT cert.pem\n"), "{text}");
        assert!(
            text.lines().any(|l| l.split_whitespace().take(3).eq([
                "runtime",
                "workload",
                "succeeded"
            ])),
            "{text}"
        );
        assert!(
            text.contains("occ agent logs agt_1 --revision rev_2"),
            "{text}"
        );
        let healthy = diagnosis_text(
            "agt_1",
            "rev_1",
            &serde_json::json!({"checks": []}),
            &serde_json::json!({"status": "succeeded"}),
        );
        assert!(healthy.contains("No check failed."), "{healthy}");
        assert!(!healthy.contains("Error:"), "{healthy}");
    }
}
