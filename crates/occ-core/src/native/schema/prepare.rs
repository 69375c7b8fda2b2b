//! The pinned runtime schema turned into what occ compiles, once, when occ-core is built.
//!
//! `build.rs` compiles this file on its own (it depends on nothing else in the crate) and
//! embeds the result: a frame and one compact document per top-level section (≈ 0.5 MB in all
//! instead of 2.4 MB), each compiled on first use. What it does, each step preserving what the
//! runtime means:
//! - bundled plugins' configuration schemas are embedded documents whose `$ref`s (`#/$defs/…`)
//!   point into themselves (the runtime validates each plugin's configuration with its own
//!   schema), so each local `$ref` is re-rooted at the nearest enclosing object with
//!   `$defs`/`definitions` that resolves it;
//! - ECMAScript's `\0` in a `pattern` is written `\x00`, which the `jsonschema` crate's regex
//!   translation understands and which matches the same character;
//! - repeated subschemas are compiled once. The runtime's schema repeats large subschemas
//!   verbatim (every bundled plugin's entry shape, every channel's account shape, …): of its
//!   13 585 schema objects most are copies, and the validator compiles each copy into a tree of
//!   its own. A `$ref` target is compiled once and shared by every `$ref` to it, so every later
//!   copy of a subschema that occurs more than once (and is large enough to matter) becomes a
//!   `$ref` to its first occurrence. Draft 7 ignores a `$ref`'s siblings and only whole schema
//!   objects are replaced, so what the schema accepts and where a problem is reported (instance
//!   paths) are unchanged;
//! - the top level is split into a frame (every top-level keyword kept, each entry of
//!   `properties` replaced by `true`) and one schema per entry of `properties`: `properties` is a
//!   conjunction of independent per-key checks, so a document is valid exactly when it fits the
//!   frame and each section it has fits that section's schema. No `$ref` crosses a section
//!   (`prepare` fails otherwise).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

/// Keywords whose values are data, not subschemas: nothing inside them is rewritten.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// The pinned schema as occ compiles it: a frame (the top level, each section's schema replaced
/// by `true`) and one self-contained document per top-level section, each compiled on its first
/// use, so a process holds validators only for the sections its documents use.
pub struct Prepared {
    /// The top level: its type, its closed set of sections.
    pub frame: String,
    /// `(section name, its schema)` in the schema's order.
    pub sections: Vec<(String, String)>,
}

/// Prepares the runtime's schema `text`: embedded references re-rooted, NUL escapes rewritten,
/// the top level split into a frame and self-contained sections (their references made
/// relative to the section), repeated subschemas shared within each section.
pub fn prepare(text: &str) -> Result<Prepared, String> {
    let mut schema: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let mut rewrites = Vec::new();
    collect_ref_rewrites(&schema, "", &mut Vec::new(), &mut rewrites);
    for (at, target) in rewrites {
        if let Some(slot) = schema.pointer_mut(&at) {
            *slot = Value::String(target);
        }
    }
    rewrite_nul_escapes(&mut schema);

    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return Err("the top level has no properties".into());
    };
    let mut sections = Vec::with_capacity(properties.len());
    for (name, section) in properties.iter_mut() {
        let mut section = std::mem::replace(section, Value::Bool(true));
        let prefix = format!("#{}", child("/properties", name));
        relativize_refs(&mut section, &prefix)
            .map_err(|reference| format!("section {name}: $ref {reference} leaves it"))?;
        share_repeated_subschemas(&mut section);
        let text = serde_json::to_string(&section).map_err(|e| format!("{name}: {e}"))?;
        sections.push((name.clone(), text));
    }
    let frame = serde_json::to_string(&schema).map_err(|e| format!("frame: {e}"))?;
    Ok(Prepared { frame, sections })
}

/// Rewrites each local `$ref` under `prefix` (`#/properties/<section>`) relative to the section;
/// a local `$ref` elsewhere is returned as the error (the section would not be self-contained).
fn relativize_refs(node: &mut Value, prefix: &str) -> Result<(), String> {
    match node {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(reference) if key == "$ref" && reference.starts_with('#') => {
                        let rest = reference
                            .strip_prefix(prefix)
                            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
                            .ok_or_else(|| reference.clone())?;
                        *reference = format!("#{rest}");
                    }
                    _ if DATA_KEYWORDS.contains(&key.as_str()) => {}
                    _ => relativize_refs(value, prefix)?,
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                relativize_refs(item, prefix)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Finds local `$ref`s (`#` or `#/…`) that resolve in an enclosing embedded document (an object
/// below the root with `$defs` or `definitions`) and returns `(pointer of the $ref, new $ref)`.
fn collect_ref_rewrites<'a>(
    node: &'a Value,
    at: &str,
    scopes: &mut Vec<(String, &'a Value)>,
    out: &mut Vec<(String, String)>,
) {
    match node {
        Value::Object(map) => {
            let is_scope =
                !at.is_empty() && (map.contains_key("$defs") || map.contains_key("definitions"));
            if is_scope {
                scopes.push((at.to_owned(), node));
            }
            if let Some(Value::String(reference)) = map.get("$ref")
                && let Some(fragment) = reference.strip_prefix('#')
                && (fragment.is_empty() || fragment.starts_with('/'))
                && let Some((scope_at, _)) = scopes
                    .iter()
                    .rev()
                    .find(|(_, scope)| scope.pointer(fragment).is_some())
            {
                out.push((child(at, "$ref"), format!("#{scope_at}{fragment}")));
            }
            for (key, value) in map {
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    collect_ref_rewrites(value, &child(at, key), scopes, out);
                }
            }
            if is_scope {
                scopes.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_ref_rewrites(item, &index(at, i), scopes, out);
            }
        }
        _ => {}
    }
}

fn rewrite_nul_escapes(node: &mut Value) {
    match node {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(pattern) if key == "pattern" => {
                        if let Some(rewritten) = ecma_nul_to_hex(pattern) {
                            *pattern = rewritten;
                        }
                    }
                    _ if DATA_KEYWORDS.contains(&key.as_str()) => {}
                    _ => rewrite_nul_escapes(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_nul_escapes),
        _ => {}
    }
}

/// `\0` not followed by a digit (ECMAScript's NUL escape) → `\x00`; other escapes unchanged.
fn ecma_nul_to_hex(pattern: &str) -> Option<String> {
    if !pattern.contains("\\0") {
        return None;
    }
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') if !chars.peek().is_some_and(char::is_ascii_digit) => out.push_str("\\x00"),
            Some(escaped) => {
                out.push('\\');
                out.push(escaped);
            }
            None => out.push('\\'),
        }
    }
    Some(out)
}

/// Smaller copies cost less than the `$ref` indirection saves.
const MIN_SHARED_BYTES: usize = 256;

/// What a JSON pointer in a `$ref` fragment may carry unescaped (everything else is
/// percent-encoded; the resolver decodes it).
const FRAGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Where a value sits in a draft 7 schema: only `Schema` objects are candidates.
#[derive(Clone, Copy, PartialEq)]
enum Position {
    Schema,
    /// An array whose items are schemas (`allOf`, `anyOf`, `oneOf`, tuple `items`).
    SchemaList,
    /// An object whose values are schemas (`properties`, `definitions`, …).
    SchemaMap,
    Data,
}

/// The position of a schema keyword's value.
fn keyword_position(keyword: &str, value: &Value) -> Position {
    match keyword {
        "additionalItems"
        | "additionalProperties"
        | "contains"
        | "propertyNames"
        | "not"
        | "if"
        | "then"
        | "else" => Position::Schema,
        "items" if value.is_array() => Position::SchemaList,
        "items" => Position::Schema,
        "allOf" | "anyOf" | "oneOf" => Position::SchemaList,
        "properties" | "patternProperties" | "definitions" | "$defs" | "dependencies" => {
            Position::SchemaMap
        }
        _ => Position::Data,
    }
}

/// A schema object: its pointer, a structural digest and its approximate serialized size.
struct Occurrence {
    at: String,
    digest: u64,
    size: usize,
}

/// Replaces every later copy of a repeated subschema in `root` with a `$ref` to its first
/// occurrence. Returns how many copies were replaced.
fn share_repeated_subschemas(root: &mut Value) -> usize {
    let mut occurrences = Vec::new();
    digest(root, "", Position::Schema, &mut occurrences);
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for o in occurrences.iter().filter(|o| o.size >= MIN_SHARED_BYTES) {
        *counts.entry(o.digest).or_default() += 1;
    }

    // Decide on the untouched tree (occurrences are in pre-order, so a copy's descendants follow
    // it directly and are skipped with it), then replace.
    let mut first_at: HashMap<u64, &str> = HashMap::new();
    let mut replacements: Vec<(&str, &str)> = Vec::new();
    let mut skipping_below: Option<String> = None;
    for o in &occurrences {
        if skipping_below
            .as_deref()
            .is_some_and(|prefix| o.at.starts_with(prefix))
        {
            continue;
        }
        if o.size < MIN_SHARED_BYTES || counts.get(&o.digest).is_none_or(|n| *n < 2) {
            continue;
        }
        match first_at.get(&o.digest) {
            None => {
                first_at.insert(o.digest, &o.at);
            }
            // The digest found the candidate; equality decides (a collision is never shared).
            Some(first) if root.pointer(first) == root.pointer(&o.at) => {
                replacements.push((&o.at, first));
                skipping_below = Some(format!("{}/", o.at));
            }
            Some(_) => {}
        }
    }
    let replaced = replacements.len();
    for (at, first) in replacements {
        let reference = format!("#{}", utf8_percent_encode(first, FRAGMENT));
        if let Some(slot) = root.pointer_mut(at) {
            *slot = json!({ "$ref": reference });
        }
    }
    replaced
}

/// Digest and approximate serialized size of `value`, recording every schema object below it.
fn digest(value: &Value, at: &str, position: Position, out: &mut Vec<Occurrence>) -> (u64, usize) {
    let mut hasher = DefaultHasher::new();
    let mut size = 0;
    // A schema object's slot is reserved before its children's, so occurrences are in pre-order.
    let slot = (position == Position::Schema && value.is_object()).then(|| {
        out.push(Occurrence {
            at: at.to_owned(),
            digest: 0,
            size: 0,
        });
        out.len() - 1
    });
    match value {
        Value::Object(map) => {
            hasher.write_u8(b'{');
            for (key, child_value) in map {
                let child_position = match position {
                    Position::Schema => keyword_position(key, child_value),
                    Position::SchemaMap => Position::Schema,
                    Position::SchemaList | Position::Data => Position::Data,
                };
                let (child_digest, child_size) =
                    digest(child_value, &child(at, key), child_position, out);
                hasher.write(key.as_bytes());
                hasher.write_u8(0xff);
                hasher.write_u64(child_digest);
                size += key.len() + 4 + child_size;
            }
        }
        Value::Array(items) => {
            hasher.write_u8(b'[');
            let item_position = match position {
                Position::SchemaList => Position::Schema,
                _ => Position::Data,
            };
            for (i, item) in items.iter().enumerate() {
                let (item_digest, item_size) = digest(item, &index(at, i), item_position, out);
                hasher.write_u64(item_digest);
                size += item_size + 1;
            }
        }
        scalar => {
            let text = scalar.to_string();
            hasher.write_u8(b's');
            hasher.write(text.as_bytes());
            size += text.len();
        }
    }
    let (digest, size) = (hasher.finish(), size + 2);
    if let Some(slot) = slot {
        out[slot].digest = digest;
        out[slot].size = size;
    }
    (digest, size)
}

/// `path` joined with an object key, as a JSON pointer (RFC 6901 escaping).
fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// `path` joined with an array index.
fn index(path: &str, i: usize) -> String {
    format!("{path}/{i}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_escapes() {
        assert_eq!(ecma_nul_to_hex(r"[^/\0]$").as_deref(), Some(r"[^/\x00]$"));
        assert_eq!(ecma_nul_to_hex(r"\\0").as_deref(), Some(r"\\0"));
        assert_eq!(ecma_nul_to_hex(r"\01"), Some(r"\01".into()));
        assert_eq!(ecma_nul_to_hex("abc"), None);
    }

    #[test]
    fn embedded_refs_are_rerooted() {
        let schema = json!({
            "properties": {"p": {
                "$defs": {"s": {"type": "string"}},
                "properties": {"x": {"$ref": "#/$defs/s"}}
            }}
        });
        let mut out = Vec::new();
        collect_ref_rewrites(&schema, "", &mut Vec::new(), &mut out);
        assert_eq!(
            out,
            [(
                "/properties/p/properties/x/$ref".to_owned(),
                "#/properties/p/$defs/s".to_owned()
            )]
        );
    }

    fn big(tag: &str) -> Value {
        let properties: serde_json::Map<String, Value> = (0..20)
            .map(|i| {
                (
                    format!("field{i}"),
                    json!({"type": "string", "maxLength": 64}),
                )
            })
            .collect();
        json!({"type": "object", "additionalProperties": false, "properties": properties,
               "title": tag})
    }

    #[test]
    fn later_copies_become_refs_to_the_first_and_unique_schemas_stay() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "a": big("same"),
                "b": {"anyOf": [big("same"), {"type": "null"}]},
                "c": big("different"),
                "enumData": {"enum": [big("same")]}
            }
        });
        assert_eq!(share_repeated_subschemas(&mut schema), 1);
        assert_eq!(
            schema["properties"]["b"]["anyOf"][0],
            json!({"$ref": "#/properties/a"})
        );
        assert_eq!(schema["properties"]["a"], big("same"));
        assert_eq!(schema["properties"]["c"], big("different"));
        // Data (an `enum` value) is never rewritten, though it looks like the schema.
        assert_eq!(schema["properties"]["enumData"]["enum"][0], big("same"));
    }

    #[test]
    fn a_target_pointer_is_percent_encoded() {
        let mut schema = json!({
            "patternProperties": {"^[a-z]{0,3}$": big("x")},
            "properties": {"y": big("x")}
        });
        assert_eq!(share_repeated_subschemas(&mut schema), 1);
        assert_eq!(
            schema["properties"]["y"],
            json!({"$ref": "#/patternProperties/%5E%5Ba-z%5D%7B0%2C3%7D%24"})
        );
    }
}
