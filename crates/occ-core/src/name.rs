//! Display names for Namespaces, Agents, Secrets, ServiceAccounts and the Installation:
//! 1..200 characters, no leading or trailing whitespace, no control characters.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

/// Maximum length of a name, in characters (Unicode scalar values).
pub const NAME_MAX_CHARS: usize = 200;

/// A validated resource name.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Name(String);

/// Why a string is not a valid name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    /// The empty string.
    #[error("must not be empty")]
    Empty,
    /// More than [`NAME_MAX_CHARS`] characters.
    #[error("is too long (expected at most 200 characters)")]
    TooLong,
    /// Whitespace at either end.
    #[error("must not start or end with whitespace")]
    OuterWhitespace,
    /// A control character anywhere.
    #[error("must not contain control characters")]
    ControlCharacter,
}

impl InvalidName {
    /// Whether this failure is about length (detail code `TOO_LONG`) rather than content.
    pub fn is_too_long(self) -> bool {
        matches!(self, InvalidName::TooLong)
    }
}

impl Name {
    /// Validates a name.
    pub fn parse(value: &str) -> Result<Self, InvalidName> {
        if value.is_empty() {
            return Err(InvalidName::Empty);
        }
        if value.chars().count() > NAME_MAX_CHARS {
            return Err(InvalidName::TooLong);
        }
        if value.chars().any(char::is_control) {
            return Err(InvalidName::ControlCharacter);
        }
        let starts = value.chars().next().is_some_and(char::is_whitespace);
        let ends = value.chars().next_back().is_some_and(char::is_whitespace);
        if starts || ends {
            return Err(InvalidName::OuterWhitespace);
        }
        Ok(Self(value.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Name {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        Name::parse(s)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Name::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_ordinary_names() {
        assert!(Name::parse("default").is_ok());
        assert!(Name::parse("Team A — research").is_ok());
        assert!(Name::parse(&"é".repeat(200)).is_ok());
    }

    #[test]
    fn refuses_bad_names() {
        assert_eq!(Name::parse(""), Err(InvalidName::Empty));
        assert_eq!(Name::parse(&"a".repeat(201)), Err(InvalidName::TooLong));
        assert_eq!(Name::parse(" a"), Err(InvalidName::OuterWhitespace));
        assert_eq!(Name::parse("a\u{a0}"), Err(InvalidName::OuterWhitespace));
        assert_eq!(Name::parse("a\nb"), Err(InvalidName::ControlCharacter));
        assert_eq!(Name::parse("a\u{7f}b"), Err(InvalidName::ControlCharacter));
    }

    proptest! {
        #[test]
        fn valid_names_round_trip(s in "\\PC{0,250}") {
            if let Ok(n) = Name::parse(&s) {
                prop_assert_eq!(n.as_str(), s.as_str());
                prop_assert!(s.chars().count() <= NAME_MAX_CHARS);
            }
        }
    }
}
