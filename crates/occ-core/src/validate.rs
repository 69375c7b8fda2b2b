//! Request validation with JSON-pointer details.
//!
//! Bodies are parsed to `serde_json::Value` first and then read field by field through
//! [`Fields`], which records every problem (up to 32) with its RFC 6901 pointer and detail code
//! instead of stopping at the first. [`Problems::into_error`] renders the reference's message
//! shape: up to three offending paths with the expected bound, then "; and N more". Messages name
//! paths, never values.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::error::{DETAILS_MAX, DetailCode, Error, pointer_token};

/// One problem found in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON pointer.
    pub path: String,
    /// Detail code.
    pub code: DetailCode,
    /// What was expected, e.g. "is too long (expected at most 200 characters)".
    pub expectation: String,
}

/// An accumulator of problems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems {
    items: Vec<Problem>,
    total: usize,
    /// A well-formed request this installation cannot serve (409), reported only when nothing
    /// else is wrong with the request.
    conflict: Option<String>,
}

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a problem (the first 32 are kept; all are counted).
    pub fn push(
        &mut self,
        path: impl Into<String>,
        code: DetailCode,
        expectation: impl Into<String>,
    ) {
        self.total += 1;
        if self.items.len() < DETAILS_MAX {
            self.items.push(Problem {
                path: path.into(),
                code,
                expectation: expectation.into(),
            });
        }
    }

    /// Records that a well-formed value asks for something this installation cannot do yet
    /// (the first one wins): the request answers 409 `RESOURCE_CONFLICT` with `message` unless
    /// it is also invalid.
    pub fn conflict(&mut self, message: impl Into<String>) {
        self.conflict.get_or_insert_with(|| message.into());
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0 && self.conflict.is_none()
    }

    /// The recorded problems.
    pub fn items(&self) -> &[Problem] {
        &self.items
    }

    /// `Ok(value)` when empty, else the 400 error.
    pub fn finish<T>(self, value: T) -> Result<T, Error> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self.into_error())
        }
    }

    /// The 400 `INVALID_REQUEST` error naming up to three paths (or the 409 of
    /// [`Self::conflict`] when that is all there is).
    pub fn into_error(self) -> Error {
        self.into_error_saying("The request is invalid")
    }

    /// [`Self::into_error`] with another lead-in than "The request is invalid".
    pub fn into_error_saying(self, lead: &str) -> Error {
        if self.total == 0
            && let Some(message) = self.conflict
        {
            return Error::conflict(message);
        }
        let mut parts: Vec<String> = self
            .items
            .iter()
            .take(3)
            .map(|p| format!("{} {}", display_path(&p.path), p.expectation))
            .collect();
        if self.total > 3 {
            parts.push(format!("and {} more", self.total - 3));
        }
        let mut message = format!("{lead}: {}", parts.join("; "));
        if message.chars().count() > 256 {
            message = crate::error::sanitize_message(&message);
        }
        let mut err = Error::invalid_request(message);
        for p in self.items {
            err = err.with_detail(p.path, p.code);
        }
        err
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "the body" } else { path }
}

/// Joins a pointer and a key.
pub fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", pointer_token(key))
}

/// Joins a pointer and an index.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}/{i}")
}

/// The JSON type name used in messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Field-by-field reader of a closed JSON object. Every field must be taken exactly once;
/// [`Fields::finish`] reports the rest as `UNKNOWN_FIELD`.
pub struct Fields<'a> {
    path: String,
    map: Option<&'a Map<String, Value>>,
    taken: BTreeSet<&'a str>,
}

impl<'a> Fields<'a> {
    /// Starts reading `value` at `path`; a non-object is reported as `INVALID_TYPE`.
    pub fn new(value: &'a Value, path: &str, problems: &mut Problems) -> Self {
        let map = match value {
            Value::Object(m) => Some(m),
            other => {
                problems.push(
                    path,
                    DetailCode::InvalidType,
                    format!("must be an object, not {}", type_name(other)),
                );
                None
            }
        };
        Self {
            path: path.to_owned(),
            map,
            taken: BTreeSet::new(),
        }
    }

    /// Whether the value was an object.
    pub fn is_object(&self) -> bool {
        self.map.is_some()
    }

    /// The pointer of a field.
    pub fn path_of(&self, key: &str) -> String {
        child(&self.path, key)
    }

    /// An optional field (`None` when absent). JSON `null` is returned as `Some(Null)`.
    pub fn optional(&mut self, key: &'static str) -> Option<&'a Value> {
        let map = self.map?;
        let (k, v) = map.get_key_value(key)?;
        self.taken.insert(k.as_str());
        Some(v)
    }

    /// A required field; reports `REQUIRED` when absent.
    pub fn required(&mut self, key: &'static str, problems: &mut Problems) -> Option<&'a Value> {
        let v = self.optional(key);
        if v.is_none() && self.map.is_some() {
            problems.push(self.path_of(key), DetailCode::Required, "is required");
        }
        v
    }

    /// A required string.
    pub fn required_str(&mut self, key: &'static str, problems: &mut Problems) -> Option<&'a str> {
        let path = self.path_of(key);
        self.required(key, problems)
            .and_then(|v| expect_str(v, &path, problems))
    }

    /// An optional string (`null` is a type error).
    pub fn optional_str(&mut self, key: &'static str, problems: &mut Problems) -> Option<&'a str> {
        let path = self.path_of(key);
        self.optional(key)
            .and_then(|v| expect_str(v, &path, problems))
    }

    /// Reports every field not taken as `UNKNOWN_FIELD`.
    pub fn finish(self, problems: &mut Problems) {
        if let Some(map) = self.map {
            for key in map.keys() {
                if !self.taken.contains(key.as_str()) {
                    problems.push(
                        child(&self.path, key),
                        DetailCode::UnknownField,
                        "is not a known field",
                    );
                }
            }
        }
    }
}

/// A string, or an `INVALID_TYPE` problem.
pub fn expect_str<'v>(v: &'v Value, path: &str, problems: &mut Problems) -> Option<&'v str> {
    match v {
        Value::String(s) => Some(s),
        other => {
            problems.push(
                path,
                DetailCode::InvalidType,
                format!("must be a string, not {}", type_name(other)),
            );
            None
        }
    }
}

/// A boolean, or an `INVALID_TYPE` problem.
pub fn expect_bool(v: &Value, path: &str, problems: &mut Problems) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        other => {
            problems.push(
                path,
                DetailCode::InvalidType,
                format!("must be a boolean, not {}", type_name(other)),
            );
            None
        }
    }
}

/// An integer in `min..=max`, or a problem.
pub fn expect_int(
    v: &Value,
    path: &str,
    min: i64,
    max: i64,
    problems: &mut Problems,
) -> Option<i64> {
    match v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.1e15)
            .map(|f| f as i64)
    }) {
        Some(n) if (min..=max).contains(&n) => Some(n),
        Some(_) => {
            problems.push(
                path,
                DetailCode::InvalidValue,
                format!("must be between {min} and {max}"),
            );
            None
        }
        None if v.is_number() => {
            problems.push(path, DetailCode::InvalidValue, "must be an integer");
            None
        }
        None => {
            problems.push(
                path,
                DetailCode::InvalidType,
                format!("must be an integer, not {}", type_name(v)),
            );
            None
        }
    }
}

/// A validated [`crate::Name`], or a problem.
pub fn expect_name(v: &Value, path: &str, problems: &mut Problems) -> Option<crate::Name> {
    let s = expect_str(v, path, problems)?;
    match crate::Name::parse(s) {
        Ok(n) => Some(n),
        Err(e) => {
            let code = if e.is_too_long() {
                DetailCode::TooLong
            } else {
                DetailCode::InvalidFormat
            };
            problems.push(path, code, e.to_string());
            None
        }
    }
}

/// A prefixed id of type `T`, or an `INVALID_FORMAT` problem naming the prefix.
pub fn expect_id<T: std::str::FromStr>(
    v: &Value,
    path: &str,
    prefix: &str,
    problems: &mut Problems,
) -> Option<T> {
    let s = expect_str(v, path, problems)?;
    match s.parse() {
        Ok(id) => Some(id),
        Err(_) => {
            problems.push(
                path,
                DetailCode::InvalidFormat,
                format!("must be an id of the form {prefix}_<uuid>"),
            );
            None
        }
    }
}

/// Whether a string is well-formed for occ's text fields: no NUL. (Rust strings are always
/// valid UTF-8; lone surrogates are already refused by the JSON parser.)
pub fn has_nul(s: &str) -> bool {
    s.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_required_and_types_are_reported_with_pointers() {
        let body = json!({"name": 5, "extra": true, "a/b": 1});
        let mut p = Problems::new();
        let mut f = Fields::new(&body, "", &mut p);
        assert!(f.required_str("name", &mut p).is_none());
        assert!(f.required_str("configurationId", &mut p).is_none());
        f.finish(&mut p);
        let codes: Vec<_> = p
            .items()
            .iter()
            .map(|i| (i.path.as_str(), i.code))
            .collect();
        assert!(codes.contains(&("/name", DetailCode::InvalidType)));
        assert!(codes.contains(&("/configurationId", DetailCode::Required)));
        assert!(codes.contains(&("/extra", DetailCode::UnknownField)));
        assert!(codes.contains(&("/a~1b", DetailCode::UnknownField)));
        let err = p.into_error();
        assert_eq!(err.code().as_str(), "INVALID_REQUEST");
        assert!(err.message().contains("and 1 more"), "{}", err.message());
    }

    #[test]
    fn names_report_too_long() {
        let mut p = Problems::new();
        assert!(expect_name(&json!("x".repeat(201)), "/name", &mut p).is_none());
        assert_eq!(p.items()[0].code, DetailCode::TooLong);
        assert!(
            p.into_error()
                .message()
                .contains("/name is too long (expected at most 200 characters)")
        );
    }

    #[test]
    fn integers() {
        let mut p = Problems::new();
        assert_eq!(
            expect_int(&json!(86400), "/x", 86400, 31536000, &mut p),
            Some(86400)
        );
        assert_eq!(expect_int(&json!(1.5), "/x", 0, 10, &mut p), None);
        assert_eq!(expect_int(&json!("1"), "/x", 0, 10, &mut p), None);
        assert_eq!(expect_int(&json!(11), "/x", 0, 10, &mut p), None);
        assert_eq!(p.items().len(), 3);
    }
}
