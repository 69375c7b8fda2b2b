//! Typed store errors. Constraint violations are classified by kind and carry the constraint
//! name, so callers branch on types, never on message text.

use occ_core::{Error, ErrorCode};

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness constraint refused the write (a name or key already exists).
    #[error("conflict on {constraint}")]
    Conflict {
        /// The unique constraint or index, as far as the backend names it.
        constraint: String,
    },
    /// A foreign key refused the write (a referenced row is missing, or a row is still
    /// referenced).
    #[error("reference violated: {constraint}")]
    Reference {
        /// The foreign key, as far as the backend names it.
        constraint: String,
    },
    /// A CHECK constraint or guard trigger refused the write.
    #[error("invariant violated: {constraint}")]
    Invariant {
        /// The constraint or trigger name.
        constraint: String,
    },
    /// The row to read or change does not exist.
    #[error("not found")]
    NotFound,
    /// A compare-and-swap lost: the row changed since it was read.
    #[error("concurrent modification")]
    Stale,
    /// The work claim is no longer held by this token (expired, recovered or completed).
    #[error("work claim lost")]
    ClaimLost,
    /// A serialization failure or deadlock; the transaction may be retried from the start.
    #[error("transaction conflict; retry")]
    Serialization,
    /// The database is unreachable, overloaded or shutting down.
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// The connection failed during COMMIT: the transaction may or may not have committed.
    #[error("commit outcome unknown")]
    CommitOutcomeUnknown(#[source] sqlx::Error),
    /// A stored row does not decode into its domain type.
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    /// The database URL is malformed or names no supported backend.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// The schema is missing, older or newer than this build.
    #[error("schema: {0}")]
    Schema(String),
    /// Anything else from the driver.
    #[error("database error")]
    Other(#[source] sqlx::Error),
    /// A mutation was handed the proof of another decision than the one it needs (a bug in the
    /// operation, never the caller's doing), or a read transaction: nothing was written.
    #[error("{0}")]
    NotAuthorized(String),
}

const BUSY_PREFIX: &str = "database busy: ";

impl StoreError {
    /// Whether retrying the whole operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Serialization)
    }

    /// SQLite's "busy", raised by occ itself.
    pub(crate) fn busy(message: &str) -> Self {
        StoreError::Unavailable(sqlx::Error::Protocol(format!("{BUSY_PREFIX}{message}")))
    }

    /// Whether SQLite reported its database busy or locked.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self, StoreError::Unavailable(sqlx::Error::Protocol(m)) if m.starts_with(BUSY_PREFIX))
    }

    /// The constraint name, for conflict, reference and invariant errors.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            StoreError::Conflict { constraint }
            | StoreError::Reference { constraint }
            | StoreError::Invariant { constraint } => Some(constraint),
            _ => None,
        }
    }

    /// Classifies an error of the underlying database driver (also used by the test harness's
    /// raw connections, so both report violations the same way).
    pub fn from_driver(err: sqlx::Error) -> Self {
        Self::from_sqlx(err)
    }

    pub(crate) fn from_sqlx(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => StoreError::Unavailable(err),
            sqlx::Error::Database(ref db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let message = db.message().to_owned();
                let named = db.constraint().map(str::to_owned);
                classify_database(&code, &message, named).unwrap_or(StoreError::Other(err))
            }
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_) => StoreError::Corrupt(err.to_string()),
            other => StoreError::Other(other),
        }
    }
}

/// Maps a PostgreSQL SQLSTATE or an SQLite (extended) result code to a store error.
fn classify_database(code: &str, message: &str, named: Option<String>) -> Option<StoreError> {
    // SQLite names the failing constraint only in its message.
    let from_message = || {
        let m = message.trim();
        if let Some((name, _)) = m.split_once(": ").filter(|(n, _)| !n.contains(' ')) {
            return name.to_owned();
        }
        m.rsplit(": ").next().unwrap_or(m).to_owned()
    };
    let constraint = || named.clone().unwrap_or_else(from_message);
    if message.contains("FOREIGN KEY constraint failed") {
        return Some(StoreError::Reference {
            constraint: "foreign key".to_owned(),
        });
    }
    Some(match code {
        // PostgreSQL
        "23505" => StoreError::Conflict {
            constraint: constraint(),
        },
        "23503" => StoreError::Reference {
            constraint: constraint(),
        },
        // integrity violations
        "23514" | "23502" | "23P01" => StoreError::Invariant {
            constraint: constraint(),
        },
        // data exceptions (bad literal, out of range, NUL in text): their messages quote the
        // offending value, so they are named by SQLSTATE alone
        c if c.starts_with("22") => StoreError::Invariant {
            constraint: named.clone().unwrap_or_else(|| format!("SQLSTATE {c}")),
        },
        "40001" | "40P01" => StoreError::Serialization,
        c if c.starts_with("08") || c.starts_with("53") || c.starts_with("57") => {
            StoreError::Unavailable(sqlx::Error::Protocol(message.to_owned()))
        }
        // SQLite extended codes: UNIQUE, PRIMARYKEY, FOREIGNKEY, CHECK, NOTNULL, TRIGGER
        "2067" | "1555" => StoreError::Conflict {
            constraint: constraint(),
        },
        "787" => StoreError::Reference {
            constraint: "foreign key".to_owned(),
        },
        "275" | "1299" | "3091" | "1811" | "19" => StoreError::Invariant {
            constraint: constraint(),
        },
        // SQLITE_BUSY / SQLITE_LOCKED after the busy timeout
        "5" | "6" | "517" | "262" => {
            StoreError::Unavailable(sqlx::Error::Protocol(format!("{BUSY_PREFIX}{message}")))
        }
        _ => return None,
    })
}

impl From<StoreError> for Error {
    fn from(err: StoreError) -> Self {
        // A constraint that reaches this generic mapping was not expected by the operation (the
        // ones it expects are mapped to specific errors before): the caller sees a generic 409,
        // so the log records which constraint refused the write (its name, never the values).
        if err.constraint().is_some() {
            tracing::warn!(error = %err, "the database refused a write; answering a generic conflict");
        }
        match &err {
            StoreError::Conflict { constraint } => {
                Error::conflict("A resource with the same identity already exists")
                    .with_internal(format!("conflict {constraint}"))
            }
            StoreError::Reference { constraint } => {
                Error::conflict("The resource is referenced by, or references, another resource")
                    .with_internal(format!("reference {constraint}"))
            }
            StoreError::Invariant { constraint } => Error::new(
                ErrorCode::ResourceConflict,
                "The change violates a platform invariant",
            )
            .with_internal(format!("invariant {constraint}")),
            StoreError::NotFound => Error::not_found(),
            StoreError::Stale => {
                Error::conflict("The resource changed concurrently; read it again and retry")
            }
            StoreError::CommitOutcomeUnknown(_) => Error::commit_outcome_unknown(err.to_string()),
            StoreError::ClaimLost
            | StoreError::Serialization
            | StoreError::Unavailable(_)
            | StoreError::Schema(_)
            | StoreError::InvalidUrl(_) => {
                Error::unavailable(format!("{err}: {:?}", std::error::Error::source(&err)))
            }
            StoreError::Corrupt(_) | StoreError::Other(_) => {
                Error::internal(format!("{err}: {:?}", std::error::Error::source(&err)))
            }
            StoreError::NotAuthorized(_) => {
                tracing::error!(error = %err, "a mutation without the decision it needs");
                Error::internal(err.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_backend_codes() {
        assert!(
            matches!(classify_database("23505", "dup", Some("namespaces_name_key".into())),
            Some(StoreError::Conflict { constraint }) if constraint == "namespaces_name_key")
        );
        assert!(
            matches!(classify_database("2067", "UNIQUE constraint failed: namespaces.name", None),
            Some(StoreError::Conflict { constraint }) if constraint == "namespaces.name")
        );
        assert!(
            matches!(classify_database("1811", "agent_revisions_are_immutable: rows are immutable", None),
            Some(StoreError::Invariant { constraint }) if constraint == "agent_revisions_are_immutable")
        );
        assert!(
            matches!(classify_database("275", "CHECK constraint failed: agents_deleting_is_stopped", None),
            Some(StoreError::Invariant { constraint }) if constraint == "agents_deleting_is_stopped")
        );
        assert!(matches!(
            classify_database("40P01", "deadlock", None),
            Some(StoreError::Serialization)
        ));
        assert!(matches!(
            classify_database("57P01", "admin shutdown", None),
            Some(StoreError::Unavailable(_))
        ));
        assert!(classify_database("XX000", "internal", None).is_none());
    }

    /// Collects the events logged while it is the default subscriber.
    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl tracing::Subscriber for Capture {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut line = event.metadata().level().to_string();
            event.record(
                &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                    line.push_str(&format!(" {}={value:?}", field.name()));
                },
            );
            self.0.lock().unwrap().push(line);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn a_generic_conflict_is_logged_with_its_constraint() {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        tracing::subscriber::with_default(Capture(lines.clone()), || {
            for err in [
                StoreError::Invariant {
                    constraint: "agent_revisions_snapshot_shape".into(),
                },
                StoreError::Conflict {
                    constraint: "namespaces_name_key".into(),
                },
                StoreError::Reference {
                    constraint: "agents_configuration_fkey".into(),
                },
                StoreError::NotFound,
                StoreError::Stale,
            ] {
                let _ = Error::from(err);
            }
        });
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 3, "{lines:?}");
        for (line, constraint) in lines.iter().zip([
            "agent_revisions_snapshot_shape",
            "namespaces_name_key",
            "agents_configuration_fkey",
        ]) {
            assert!(
                line.starts_with("WARN") && line.contains(constraint),
                "{line}"
            );
        }
    }

    #[test]
    fn data_exceptions_never_quote_values() {
        // PostgreSQL quotes the offending literal in the message of a data exception
        let err = classify_database(
            "22P02",
            "invalid input syntax for type uuid: \"sk-live-canary\"",
            None,
        );
        assert!(
            matches!(&err, Some(StoreError::Invariant { constraint }) if constraint == "SQLSTATE 22P02"),
            "{err:?}"
        );
        let err = classify_database(
            "22021",
            "invalid byte sequence for encoding \"UTF8\": 0x00",
            None,
        );
        assert!(
            matches!(&err, Some(StoreError::Invariant { constraint }) if constraint == "SQLSTATE 22021")
        );
        // a generic conflict keeps the constraint name for the log, never the message
        let public = Error::from(err.unwrap());
        assert_eq!(public.code().http_status(), 409);
        assert_eq!(public.internal_context(), Some("invariant SQLSTATE 22021"));
        assert!(!public.message().contains("0x00"));
    }
}
