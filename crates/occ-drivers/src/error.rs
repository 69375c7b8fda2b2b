//! Driver errors, classified for the caller.

use occ_core::{Error, ErrorCode};

/// What went wrong in a Driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The stored object does not exist.
    #[error("not found")]
    NotFound,
    /// The object exists already, or changed underneath.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The stored object is malformed, oversized or not ours: never used, never overwritten.
    #[error("stored object rejected: {0}")]
    Corrupt(String),
    /// The backend is unreachable or failed.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// The Driver is misconfigured.
    #[error("driver configuration: {0}")]
    Configuration(String),
}

impl DriverError {
    pub(crate) fn io(context: &str, err: std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => DriverError::NotFound,
            std::io::ErrorKind::AlreadyExists => {
                DriverError::Conflict(format!("{context}: already exists"))
            }
            std::io::ErrorKind::InvalidData => DriverError::Corrupt(format!("{context}: {err}")),
            _ => DriverError::Unavailable(format!("{context}: {err}")),
        }
    }
}

impl From<DriverError> for Error {
    fn from(err: DriverError) -> Self {
        match &err {
            DriverError::NotFound => Error::not_found(),
            DriverError::Conflict(_) => Error::new(
                ErrorCode::ResourceConflict,
                "The resource changed concurrently; read it again and retry",
            )
            .with_internal(err.to_string()),
            DriverError::Corrupt(_)
            | DriverError::Unavailable(_)
            | DriverError::Configuration(_) => Error::unavailable(err.to_string()),
        }
    }
}
