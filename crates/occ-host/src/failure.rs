//! The Compute failures the host reports most: a dependency (the file system, a command) failed
//! and may work next time, or something at a path occ owns is not occ's.

use std::path::Path;

use occ_core::ReasonCode;
use occ_core::compute::ComputeError;

/// A dependency failed (transient `DEPENDENCY_UNAVAILABLE`).
pub(crate) fn unavailable(message: impl Into<String>) -> ComputeError {
    ComputeError::transient(ReasonCode::DependencyUnavailable, message)
}

/// Something occ would act on is not occ's (permanent `OWNERSHIP_CONFLICT`): never adopted,
/// overwritten or removed.
pub(crate) fn ownership(message: impl Into<String>) -> ComputeError {
    ComputeError::permanent(ReasonCode::OwnershipConflict, message)
}

/// An I/O failure on `path` while doing `context`.
pub(crate) fn io_error(context: &str, path: &Path, err: std::io::Error) -> ComputeError {
    unavailable(format!("{context} {}: {err}", path.display()))
}
