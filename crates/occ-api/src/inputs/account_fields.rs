//! The value types of the fields of who signs in: accounts (email, password, the version an
//! administrator read), service principals' names, and service keys' names and lifetimes.

use occ_controller::auth::{KEY_TTL_RANGE, PASSWORD_CHARS};
use occ_core::DetailCode;
use occ_core::validate::{Problems, expect_int, expect_name, expect_str};
use serde_json::Value;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use super::fields::NAME_PATTERN;
use crate::body::{Field, string_schema};

/// Longest service principal name, in characters.
pub const PRINCIPAL_NAME_MAX_CHARS: usize = 64;

/// A service principal's name: a [`Name`] of at most 64 characters.
pub struct PrincipalName(pub String);

impl<Cx> Field<Cx> for PrincipalName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let name = expect_name(value, path, problems)?;
        if name.as_str().chars().count() > PRINCIPAL_NAME_MAX_CHARS {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 64 characters)",
            );
            return None;
        }
        Some(Self(name.to_string()))
    }
    fn schema() -> Schema {
        string_schema(Some(1), Some(PRINCIPAL_NAME_MAX_CHARS), Some(NAME_PATTERN))
    }
}

/// A service key's name: 1..32 characters, not blank, no NUL.
pub struct KeyName(pub String);

impl<Cx> Field<Cx> for KeyName {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let n = s.chars().count();
        if n > 32 {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 32 characters)",
            );
            None
        } else if n == 0 || s.trim().is_empty() {
            problems.push(path, DetailCode::InvalidFormat, "must not be blank");
            None
        } else if s.contains('\0') {
            // PostgreSQL text cannot hold NUL: refused here on both backends
            problems.push(
                path,
                DetailCode::InvalidValue,
                "must not contain NUL characters",
            );
            None
        } else {
            Some(Self(s.to_owned()))
        }
    }
    fn schema() -> Schema {
        string_schema(
            Some(1),
            Some(32),
            Some(r"^[^\u0000]*[^\s\u0000][^\u0000]*$"),
        )
    }
}

/// An account email: at most 320 characters, an `@`, no whitespace or control characters.
pub struct Email(pub String);

impl<Cx> Field<Cx> for Email {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        if s.chars().count() > 320 {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 320 characters)",
            );
            return None;
        }
        let ok = s.len() >= 3
            && s.contains('@')
            && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            problems.push(path, DetailCode::InvalidFormat, "must be an email address");
        }
        ok.then(|| Self(s.to_owned()))
    }
    fn schema() -> Schema {
        string_schema(
            None,
            Some(320),
            Some(r"^[^\s\u0000-\u001f\u007f-\u009f]*@[^\s\u0000-\u001f\u007f-\u009f]*$"),
        )
    }
}

/// A password (never printed).
pub struct Password(pub String);

impl<Cx> Field<Cx> for Password {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        let s = expect_str(value, path, problems)?;
        let n = s.chars().count();
        if n > PASSWORD_CHARS.1 {
            problems.push(
                path,
                DetailCode::TooLong,
                "is too long (expected at most 128 characters)",
            );
            None
        } else if n < PASSWORD_CHARS.0 {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "is too short (expected at least 12 characters)",
            );
            None
        } else {
            Some(Self(s.to_owned()))
        }
    }
    fn schema() -> Schema {
        string_schema(Some(PASSWORD_CHARS.0), Some(PASSWORD_CHARS.1), None)
    }
}

/// A service key's lifetime in seconds.
pub struct KeyLifetime(pub i64);

impl<Cx> Field<Cx> for KeyLifetime {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        expect_int(value, path, KEY_TTL_RANGE.0, KEY_TTL_RANGE.1, problems).map(Self)
    }
    fn schema() -> Schema {
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(KEY_TTL_RANGE.0))
                .maximum(Some(KEY_TTL_RANGE.1))
                .build(),
        )
    }
}

/// The version of an account an administrator read: 1..2147483647.
pub struct AccountVersion(pub i64);

impl<Cx> Field<Cx> for AccountVersion {
    fn parse(value: &Value, path: &str, _: &Cx, problems: &mut Problems) -> Option<Self> {
        expect_int(value, path, 1, i64::from(i32::MAX), problems).map(Self)
    }
    fn schema() -> Schema {
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .maximum(Some(i32::MAX))
                .build(),
        )
    }
}
