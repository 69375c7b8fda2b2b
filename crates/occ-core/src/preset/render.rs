//! Variable references in template strings (`{{ vars.NAME }}`) and rendering.

use std::collections::BTreeMap;

use serde_json::Value;

/// One piece of a template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (escapes already undone).
    Text(String),
    /// A reference to the named variable.
    Variable(String),
}

/// A malformed variable reference (`{{ vars.` not followed by a name and `}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedReference;

/// Splits a template string into literal text and variable references.
pub fn pieces(s: &str) -> Result<Vec<Piece>, MalformedReference> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("\\{{") {
            text.push_str("{{");
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("{{") {
            let inner = after.trim_start_matches(' ');
            if let Some(name_on) = inner.strip_prefix("vars.") {
                let end = name_on
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(name_on.len());
                let name = &name_on[..end];
                let tail = name_on[end..].trim_start_matches(' ');
                let Some(after_ref) = tail.strip_prefix("}}") else {
                    return Err(MalformedReference);
                };
                if !is_variable_name(name) {
                    return Err(MalformedReference);
                }
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Variable(name.to_owned()));
                rest = after_ref;
                continue;
            }
            text.push_str("{{");
            rest = after;
            continue;
        }
        let next = rest.chars().next().map_or(1, char::len_utf8);
        text.push_str(&rest[..next]);
        rest = &rest[next..];
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// Whether `name` is a variable name (`^[A-Za-z_][A-Za-z0-9_]*$`).
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The name of the variable `s` consists of, when it is exactly one reference.
pub(super) fn whole_reference(s: &str) -> Option<String> {
    match pieces(s).ok()?.as_slice() {
        [Piece::Variable(name)] => Some(name.clone()),
        _ => None,
    }
}

/// Fills `values` into every reference of `v` whose variable has one (one pass: what is filled
/// in is not read again); references without a value stay as they are written.
pub fn render(v: &Value, values: &BTreeMap<String, Value>) -> Value {
    match v {
        Value::String(s) => render_string(s, values),
        Value::Array(items) => Value::Array(items.iter().map(|i| render(i, values)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match render_string(k, values) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, render(v, values))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn render_string(s: &str, values: &BTreeMap<String, Value>) -> Value {
    let Ok(parts) = pieces(s) else {
        return Value::String(s.to_owned());
    };
    if let [Piece::Variable(name)] = parts.as_slice()
        && let Some(value) = values.get(name)
    {
        return value.clone();
    }
    let mut out = String::new();
    for part in parts {
        match part {
            Piece::Text(t) => out.push_str(&t),
            Piece::Variable(name) => match values.get(&name) {
                Some(Value::String(s)) => out.push_str(s),
                Some(other) => out.push_str(&other.to_string()),
                None => {
                    out.push_str("{{ vars.");
                    out.push_str(&name);
                    out.push_str(" }}");
                }
            },
        }
    }
    Value::String(out)
}
