//! Timestamps: UTC, millisecond precision, rendered as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
//!
//! Every timestamp is truncated to whole milliseconds when it is made, so what a database
//! stores, what the API renders and what a later read returns are the same value on both
//! storage backends.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, TimeDelta, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant with millisecond precision.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(DateTime<Utc>);

/// Why a string is not a canonical timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an ISO-8601 UTC timestamp with exactly three fractional digits and Z")]
pub struct InvalidTimestamp;

impl Timestamp {
    /// The current time, truncated to milliseconds.
    pub fn now() -> Self {
        Self::from_datetime(Utc::now())
    }

    /// Truncates a chrono instant to milliseconds.
    pub fn from_datetime(value: DateTime<Utc>) -> Self {
        let millis = value.timestamp_millis();
        Self::from_unix_millis(millis).unwrap_or(Self(value))
    }

    /// From milliseconds since the Unix epoch; `None` when out of chrono's range.
    pub fn from_unix_millis(millis: i64) -> Option<Self> {
        Utc.timestamp_millis_opt(millis).single().map(Self)
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> i64 {
        self.0.timestamp_millis()
    }

    /// The chrono value.
    pub fn as_datetime(self) -> DateTime<Utc> {
        self.0
    }

    /// This instant plus a duration (saturating at chrono's range).
    pub fn plus(self, delta: std::time::Duration) -> Self {
        let delta = TimeDelta::from_std(delta).unwrap_or(TimeDelta::MAX);
        Self::from_datetime(self.0.checked_add_signed(delta).unwrap_or(self.0))
    }

    /// The canonical text form, e.g. `2026-11-29T15:56:24.123Z`.
    pub fn to_canonical(self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// Parses any RFC 3339 time (another offset, more or fewer fraction digits): what a
    /// workload writes in its own log lines.
    pub fn parse_rfc3339(value: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(value)
            .ok()
            .map(|t| Self(t.with_timezone(&Utc)))
    }

    /// Parses the canonical form only (what [`Timestamp::to_canonical`] writes).
    pub fn parse_canonical(value: &str) -> Result<Self, InvalidTimestamp> {
        let b = value.as_bytes();
        let shape_ok = b.len() == 24
            && b.iter().enumerate().all(|(i, &c)| match i {
                4 | 7 => c == b'-',
                10 => c == b'T',
                13 | 16 => c == b':',
                19 => c == b'.',
                23 => c == b'Z',
                _ => c.is_ascii_digit(),
            });
        if !shape_ok {
            return Err(InvalidTimestamp);
        }
        DateTime::parse_from_rfc3339(value)
            .map(|d| Self(d.with_timezone(&Utc)))
            .map_err(|_| InvalidTimestamp)
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(value: DateTime<Utc>) -> Self {
        Self::from_datetime(value)
    }
}

impl FromStr for Timestamp {
    type Err = InvalidTimestamp;
    fn from_str(s: &str) -> Result<Self, InvalidTimestamp> {
        Self::parse_canonical(s)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_canonical())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse_canonical(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_exactly_three_fraction_digits() {
        let t = Timestamp::from_unix_millis(1_764_431_784_000).unwrap();
        assert_eq!(t.to_canonical(), "2025-11-29T15:56:24.000Z");
        let t = Timestamp::from_unix_millis(1_764_431_784_007).unwrap();
        assert_eq!(t.to_string(), "2025-11-29T15:56:24.007Z");
    }

    #[test]
    fn now_is_truncated_and_round_trips() {
        let t = Timestamp::now();
        assert_eq!(Timestamp::parse_canonical(&t.to_canonical()).unwrap(), t);
        assert_eq!(t.as_datetime().timestamp_subsec_nanos() % 1_000_000, 0);
    }

    #[test]
    fn only_the_canonical_form_parses() {
        assert!(Timestamp::parse_canonical("2026-11-29T15:56:24.123Z").is_ok());
        assert!(Timestamp::parse_canonical("2026-11-29T15:56:24Z").is_err());
        assert!(Timestamp::parse_canonical("2026-11-29T15:56:24.123+00:00").is_err());
        assert!(Timestamp::parse_canonical("2026-11-29T15:56:24.1234Z").is_err());
        assert!(Timestamp::parse_canonical("2026-13-29T15:56:24.123Z").is_err());
    }
}
