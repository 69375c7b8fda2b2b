//! JSON request bodies are parsed refusing duplicate object keys. serde_json keeps the last of
//! two equal keys; another reader of the same bytes (a proxy, an audit pipeline, the gateway
//! reading a stored document) may keep the first, so a body with duplicates would mean two
//! things. A duplicate is a 400 naming its JSON pointer; anything else unparsable is the plain
//! "not valid JSON" 400.

use std::cell::RefCell;
use std::fmt;

use occ_core::validate::{Problems, child, index};
use occ_core::{DetailCode, Error};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One step of the pointer to a duplicate, recorded while the parse unwinds.
enum Step {
    Key(String),
    Index(usize),
}

/// Steps to the duplicate, innermost first; `None` while none was found.
type Found = RefCell<Option<Vec<Step>>>;

/// Parses a JSON document; a duplicate object key anywhere is a 400 with its pointer.
pub fn parse(bytes: &[u8]) -> Result<Value, Error> {
    let found = Found::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = StrictValue { found: &found }
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    match (parsed, found.into_inner()) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(steps)) => {
            let pointer = steps
                .iter()
                .rev()
                .fold(String::new(), |path, step| match step {
                    Step::Key(key) => child(&path, key),
                    Step::Index(i) => index(&path, *i),
                });
            let mut problems = Problems::new();
            problems.push(
                pointer,
                DetailCode::InvalidFormat,
                "repeats a key of its object",
            );
            Err(problems.into_error())
        }
        (Err(_), None) => Err(Error::invalid_request("The request body is not valid JSON")),
    }
}

/// Builds a [`Value`] like serde_json's own visitor, but refuses duplicate keys.
#[derive(Clone, Copy)]
struct StrictValue<'a> {
    found: &'a Found,
}

impl StrictValue<'_> {
    /// Adds the step through which an inner duplicate was reached.
    fn within(self, step: Step) {
        if let Some(steps) = self.found.borrow_mut().as_mut() {
            steps.push(step);
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    self.within(Step::Index(items.len()));
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                *self.found.borrow_mut() = Some(vec![Step::Key(key)]);
                return Err(de::Error::custom("duplicate key"));
            }
            match access.next_value_seed(self) {
                Ok(value) => {
                    map.insert(key, value);
                }
                Err(e) => {
                    self.within(Step::Key(key));
                    return Err(e);
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn duplicate_at(text: &str) -> Option<String> {
        let err = parse(text.as_bytes()).err()?;
        let [detail] = err.details() else {
            return None;
        };
        assert_eq!(detail.code, DetailCode::InvalidFormat);
        assert!(err.message().contains(&detail.path), "{}", err.message());
        Some(detail.path.clone())
    }

    #[test]
    fn duplicates_are_named_by_pointer() {
        assert_eq!(
            duplicate_at(r#"{"name":"a","name":"b"}"#).as_deref(),
            Some("/name")
        );
        assert_eq!(
            duplicate_at(r#"{"values":{"a":[1,{"x":1,"y":2,"x":3}]}}"#).as_deref(),
            Some("/values/a/1/x")
        );
        assert_eq!(
            duplicate_at(r#"{"a/b":{"~":1,"~":1}}"#).as_deref(),
            Some("/a~1b/~0")
        );
        assert_eq!(duplicate_at(r#"[{}, {"":1,"":2}]"#).as_deref(), Some("/1/"));
    }

    #[test]
    fn duplicate_values_are_not_echoed() {
        let err = parse(br#"{"value":"canary-secret","value":"canary-secret"}"#).unwrap_err();
        assert!(!err.message().contains("canary"), "{}", err.message());
    }

    #[test]
    fn other_errors_stay_plain() {
        for text in ["{", "", "[1,", "{\"a\":1} x", "{\"a\":1,}", "nul"] {
            let err = parse(text.as_bytes()).unwrap_err();
            assert_eq!(
                err.message(),
                "The request body is not valid JSON",
                "{text:?}"
            );
            assert!(err.details().is_empty());
        }
        // a duplicate after a syntax error is never reached
        assert!(duplicate_at(r#"{"a":1,"b":[,"a":2}"#).is_none());
    }

    #[test]
    fn too_deep_is_invalid_json() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(deep.as_bytes()).is_err());
    }

    proptest! {
        /// Without duplicates the result is exactly serde_json's.
        #[test]
        fn agrees_with_serde_json(text in "[\\[\\]{}\":,0-9a-c .eE+-]{0,40}|\\PC{0,20}") {
            let ours = parse(text.as_bytes());
            match serde_json::from_str::<Value>(&text) {
                Ok(expected) => {
                    if let Ok(value) = ours {
                        prop_assert_eq!(value, expected);
                    } else {
                        // only a duplicate may make us refuse what serde_json accepts
                        prop_assert!(ours.unwrap_err().details().len() == 1);
                    }
                }
                Err(_) => prop_assert!(ours.is_err()),
            }
        }
    }

    #[test]
    fn numbers_and_strings_round_trip() {
        let text =
            r#"{"i":-5,"u":18446744073709551615,"f":1.5e300,"s":"\u00e9\n","b":[true,false,null]}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }
}
