//! Rendering: tables of lists, `key: value` lines of one resource, and request bodies read
//! from `--file`.

use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::Value;

pub(super) fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders a list as columns, a single resource as `key: value` lines.
pub(super) fn table(value: &Value, columns: &[&str]) -> String {
    match value {
        Value::Array(items) if items.is_empty() => "No resources found.".into(),
        Value::Array(items) => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|i| {
                    columns
                        .iter()
                        .map(|c| cell(i.get(*c).unwrap_or(&Value::Null)))
                        .collect()
                })
                .collect();
            let widths: Vec<usize> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([c.len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let mut out = String::new();
            let line = |cells: Vec<String>| {
                let padded: Vec<_> = cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
                    .collect();
                padded.join("  ").trim_end().to_owned()
            };
            out.push_str(&line(columns.iter().map(|c| c.to_uppercase()).collect()));
            for r in rows {
                out.push('\n');
                out.push_str(&line(r));
            }
            out
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                Value::Object(_) | Value::Array(_) => {
                    format!("{k}: {}", serde_json::to_string(v).unwrap_or_default())
                }
                other => format!("{k}: {}", cell(other)),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => cell(other),
    }
}

pub(super) fn read_json(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("--file {} is not JSON", path.display()))
}

pub(super) const NS_COLUMNS: &[&str] = &["id", "name", "status", "createdAt"];
pub(super) const AGENT_COLUMNS: &[&str] = &[
    "id",
    "name",
    "desiredRuntimeState",
    "status",
    "activeRevisionId",
    "configurationId",
];
pub(super) const REVISION_COLUMNS: &[&str] =
    &["id", "revision", "configurationGeneration", "createdAt"];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tables() {
        assert_eq!(table(&json!([]), &["id"]), "No resources found.");
        let t = table(
            &json!([{"id": "ns_1", "name": "default", "status": null}]),
            &["id", "name", "status"],
        );
        assert!(t.starts_with("ID    NAME     STATUS"));
        assert!(t.ends_with("ns_1  default  -"));
        assert_eq!(table(&json!({"a": 1, "b": null}), &[]), "a: 1\nb: -");
    }
}
