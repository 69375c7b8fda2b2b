//! Embedded, forward-only schema migrations.
//!
//! Why not `sqlx::migrate!`: its SQLite path takes no lock, so two processes migrating one file
//! at once can both try to apply the same migration. Here every run holds an exclusive lock for
//! its whole duration — `pg_advisory_lock` on PostgreSQL, a `BEGIN IMMEDIATE` write transaction on
//! SQLite — re-reads what is applied under that lock, verifies the checksums of applied
//! migrations, and applies the rest, each in its own transaction on PostgreSQL and all in the one
//! locked transaction on SQLite. Re-running is a no-op.

use sha2::{Digest, Sha256};
use sqlx::Connection as _;

use crate::Store;
use crate::db::{Backend, Conn, Query, sql};
use crate::error::StoreError;

/// One migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, strictly increasing.
    pub version: i64,
    /// Short description.
    pub name: &'static str,
    /// The SQL, for this dialect.
    pub sql: &'static str,
}

const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "platform",
        sql: include_str!("../migrations/postgres/0001_platform.sql"),
    },
    Migration {
        version: 2,
        name: "configuration_generation",
        sql: include_str!("../migrations/postgres/0002_configuration_generation.sql"),
    },
    Migration {
        version: 3,
        name: "agent_runtime",
        sql: include_str!("../migrations/postgres/0003_agent_runtime.sql"),
    },
    Migration {
        version: 4,
        name: "revision_source",
        sql: include_str!("../migrations/postgres/0004_revision_source.sql"),
    },
    Migration {
        version: 5,
        name: "codex_pat",
        sql: include_str!("../migrations/postgres/0005_codex_pat.sql"),
    },
    Migration {
        version: 6,
        name: "service_account_binding",
        sql: include_str!("../migrations/postgres/0006_service_account_binding.sql"),
    },
    Migration {
        version: 7,
        name: "runtime_role",
        sql: include_str!("../migrations/postgres/0007_runtime_role.sql"),
    },
    Migration {
        version: 8,
        name: "native_admin_tickets",
        sql: include_str!("../migrations/postgres/0008_native_admin_tickets.sql"),
    },
    Migration {
        version: 9,
        name: "service_principals",
        sql: include_str!("../migrations/postgres/0009_service_principals.sql"),
    },
    Migration {
        version: 10,
        name: "account_controls",
        sql: include_str!("../migrations/postgres/0010_account_controls.sql"),
    },
    Migration {
        version: 11,
        name: "presets",
        sql: include_str!("../migrations/postgres/0011_presets.sql"),
    },
    Migration {
        version: 12,
        name: "agent_provisioning",
        sql: include_str!("../migrations/postgres/0012_agent_provisioning.sql"),
    },
    Migration {
        version: 13,
        name: "credential_sources",
        sql: include_str!("../migrations/postgres/0013_credential_sources.sql"),
    },
];

const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "platform",
        sql: include_str!("../migrations/sqlite/0001_platform.sql"),
    },
    Migration {
        version: 2,
        name: "configuration_generation",
        sql: include_str!("../migrations/sqlite/0002_configuration_generation.sql"),
    },
    Migration {
        version: 3,
        name: "agent_runtime",
        sql: include_str!("../migrations/sqlite/0003_agent_runtime.sql"),
    },
    Migration {
        version: 4,
        name: "revision_source",
        sql: include_str!("../migrations/sqlite/0004_revision_source.sql"),
    },
    Migration {
        version: 5,
        name: "codex_pat",
        sql: include_str!("../migrations/sqlite/0005_codex_pat.sql"),
    },
    Migration {
        version: 6,
        name: "service_account_binding",
        sql: include_str!("../migrations/sqlite/0006_service_account_binding.sql"),
    },
    Migration {
        version: 7,
        name: "runtime_role",
        sql: include_str!("../migrations/sqlite/0007_runtime_role.sql"),
    },
    Migration {
        version: 8,
        name: "native_admin_tickets",
        sql: include_str!("../migrations/sqlite/0008_native_admin_tickets.sql"),
    },
    Migration {
        version: 9,
        name: "service_principals",
        sql: include_str!("../migrations/sqlite/0009_service_principals.sql"),
    },
    Migration {
        version: 10,
        name: "account_controls",
        sql: include_str!("../migrations/sqlite/0010_account_controls.sql"),
    },
    Migration {
        version: 11,
        name: "presets",
        sql: include_str!("../migrations/sqlite/0011_presets.sql"),
    },
    Migration {
        version: 12,
        name: "agent_provisioning",
        sql: include_str!("../migrations/sqlite/0012_agent_provisioning.sql"),
    },
    Migration {
        version: 13,
        name: "credential_sources",
        sql: include_str!("../migrations/sqlite/0013_credential_sources.sql"),
    },
];

/// The migrations of a backend, in order.
pub fn migrations(backend: Backend) -> &'static [Migration] {
    match backend {
        Backend::Postgres => POSTGRES,
        Backend::Sqlite => SQLITE,
    }
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Versions applied by this run.
    pub applied: Vec<i64>,
    /// The schema version afterwards.
    pub current: i64,
}

/// The migration that adds Presets: Namespaces that exist then get the built-in ones.
const PRESETS_MIGRATION: i64 = 11;

/// What a migration adds beyond its SQL, in its transaction: rows the code defines, which SQL
/// would only repeat.
async fn after_sql(version: i64, mut conn: Conn<'_>) -> Result<(), StoreError> {
    if version != PRESETS_MIGRATION {
        return Ok(());
    }
    let rows = Query::new(
        conn.reborrow(),
        sql!("SELECT id FROM namespaces WHERE deleted_at IS NULL ORDER BY id"),
    )
    .fetch_all()
    .await?;
    let now = occ_core::Timestamp::now();
    for row in rows {
        let ns: occ_core::NamespaceId = row.parse("id")?;
        for builtin in occ_core::preset::BuiltinPreset::ALL {
            crate::presets::insert_row(conn.reborrow(), &builtin.preset(&ns, now)).await?;
        }
    }
    Ok(())
}

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Arbitrary constant key of the PostgreSQL advisory lock that serializes migrators.
const PG_MIGRATION_LOCK: i64 = 0x6f63_635f_6d69_6772; // "occ_migr"

const CREATE_PG_LEDGER: &str = "CREATE SCHEMA IF NOT EXISTS occ; \
    CREATE TABLE IF NOT EXISTS occ.schema_migrations (version bigint PRIMARY KEY, name text NOT NULL, \
    checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())";
const CREATE_SQLITE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, \
    name TEXT NOT NULL, checksum TEXT NOT NULL, \
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))) STRICT";

async fn applied(conn: Conn<'_>) -> Result<Vec<(i64, String)>, StoreError> {
    let rows = Query::new(
        conn,
        sql!("SELECT version, checksum FROM schema_migrations ORDER BY version"),
    )
    .fetch_all()
    .await?;
    rows.iter()
        .map(|r| Ok((r.int("version")?, r.text("checksum")?)))
        .collect()
}

/// Checks applied migrations against this build; returns the versions still to apply.
fn plan(
    known: &'static [Migration],
    applied: &[(i64, String)],
) -> Result<Vec<&'static Migration>, StoreError> {
    for (version, sum) in applied {
        match known.iter().find(|m| m.version == *version) {
            None => {
                return Err(StoreError::Schema(format!(
                    "the database has migration {version}, which this build of occ does not know; upgrade occ"
                )));
            }
            Some(m) if checksum(m.sql) != *sum => {
                return Err(StoreError::Schema(format!(
                    "migration {version} ({}) differs from the one applied to this database",
                    m.name
                )));
            }
            Some(_) => {}
        }
    }
    Ok(known
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .collect())
}

impl Store {
    /// Applies every pending migration. Safe to run concurrently from several processes.
    pub async fn migrate(&self) -> Result<MigrationReport, StoreError> {
        self.migrate_to(i64::MAX).await
    }

    /// Applies the pending migrations up to and including `version` (an upgrade test's older
    /// schema; a staged rollout). Safe to run concurrently from several processes.
    pub async fn migrate_to(&self, version: i64) -> Result<MigrationReport, StoreError> {
        match &self.pool {
            crate::Pool::Pg(pool, _) => migrate_pg(pool, version).await,
            crate::Pool::Sqlite(pool, _) => migrate_sqlite(pool, version).await,
        }
    }

    /// Fails unless the schema is exactly the one this build expects.
    pub async fn check_schema(&self) -> Result<i64, StoreError> {
        let known = migrations(self.backend);
        let mut tx = self.begin_read().await?;
        let applied = applied(tx.conn()).await.map_err(|e| match e {
            StoreError::Unavailable(_) => e,
            _ => StoreError::Schema("the database is not migrated; run `occ migrate`".into()),
        })?;
        tx.rollback().await?;
        let pending = plan(known, &applied)?;
        if !pending.is_empty() {
            return Err(StoreError::Schema(format!(
                "{} migration(s) pending; run `occ migrate`",
                pending.len()
            )));
        }
        Ok(applied.last().map(|(v, _)| *v).unwrap_or(0))
    }
}

async fn migrate_pg(pool: &sqlx::PgPool, until: i64) -> Result<MigrationReport, StoreError> {
    let mut conn = pool.acquire().await.map_err(StoreError::from_sqlx)?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(PG_MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_sqlx)?;
    let result = async {
        sqlx::raw_sql(CREATE_PG_LEDGER)
            .execute(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        let done = applied(Conn::Pg(&mut conn)).await?;
        let pending = plan(POSTGRES, &done)?;
        let mut report = MigrationReport {
            applied: Vec::new(),
            current: done.last().map(|(v, _)| *v).unwrap_or(0),
        };
        for m in pending.into_iter().filter(|m| m.version <= until) {
            let mut tx = conn.begin().await.map_err(StoreError::from_sqlx)?;
            sqlx::raw_sql(m.sql)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?;
            after_sql(m.version, Conn::Pg(&mut tx)).await?;
            Query::new(
                Conn::Pg(&mut tx),
                sql!("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"),
            )
            .bind(m.version)
            .bind(m.name)
            .bind(checksum(m.sql))
            .execute()
            .await?;
            tx.commit().await.map_err(StoreError::from_sqlx)?;
            report.applied.push(m.version);
            report.current = m.version;
        }
        Ok(report)
    }
    .await;
    let unlock = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(PG_MIGRATION_LOCK)
        .execute(&mut *conn)
        .await;
    if unlock.is_err() {
        // The lock dies with the session; make sure this connection is not reused holding it.
        conn.detach();
    }
    result
}

async fn migrate_sqlite(
    pool: &sqlx::SqlitePool,
    until: i64,
) -> Result<MigrationReport, StoreError> {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(StoreError::from_sqlx)?;
    sqlx::raw_sql(CREATE_SQLITE_LEDGER)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
    let done = applied(Conn::Sqlite(&mut tx)).await?;
    let pending = plan(SQLITE, &done)?;
    let mut report = MigrationReport {
        applied: Vec::new(),
        current: done.last().map(|(v, _)| *v).unwrap_or(0),
    };
    for m in pending.into_iter().filter(|m| m.version <= until) {
        sqlx::raw_sql(m.sql)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        after_sql(m.version, Conn::Sqlite(&mut tx)).await?;
        Query::new(
            Conn::Sqlite(&mut tx),
            sql!("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"),
        )
        .bind(m.version)
        .bind(m.name)
        .bind(checksum(m.sql))
        .execute()
        .await?;
        report.applied.push(m.version);
        report.current = m.version;
    }
    tx.commit().await.map_err(StoreError::from_sqlx)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_roles_given_to_existing_namespaces_match_the_code() {
        use occ_core::iam::BuiltinRole;
        for backend in [Backend::Postgres, Backend::Sqlite] {
            let sql = migrations(backend)
                .iter()
                .find(|m| m.name == "service_principals")
                .expect("the migration")
                .sql;
            for role in BuiltinRole::ALL {
                let permissions = serde_json::to_string(&role.permissions()).unwrap();
                let insert = format!(
                    "'role_{}_' || substr(id, 4), id, '{}',\n    '{permissions}'",
                    role.name(),
                    role.name()
                );
                assert!(sql.contains(&insert), "{backend:?} {role:?}: {insert}");
            }
        }
    }

    #[test]
    fn versions_are_strictly_increasing_and_dialects_match() {
        for backend in [Backend::Postgres, Backend::Sqlite] {
            let ms = migrations(backend);
            assert!(ms.windows(2).all(|w| w[0].version < w[1].version));
        }
        let pg: Vec<_> = POSTGRES.iter().map(|m| (m.version, m.name)).collect();
        let lite: Vec<_> = SQLITE.iter().map(|m| (m.version, m.name)).collect();
        assert_eq!(pg, lite, "every migration exists in both dialects");
    }

    #[test]
    fn plan_refuses_unknown_and_changed_migrations() {
        let sum = checksum(POSTGRES[0].sql);
        assert_eq!(plan(POSTGRES, &[]).unwrap().len(), POSTGRES.len());
        // Only the migrations after the applied one are pending.
        let pending = plan(POSTGRES, &[(1, sum)]).unwrap();
        assert_eq!(
            pending.iter().map(|m| m.version).collect::<Vec<_>>(),
            POSTGRES[1..].iter().map(|m| m.version).collect::<Vec<_>>()
        );
        let every: Vec<(i64, String)> = POSTGRES
            .iter()
            .map(|m| (m.version, checksum(m.sql)))
            .collect();
        assert!(plan(POSTGRES, &every).unwrap().is_empty());
        assert!(matches!(
            plan(POSTGRES, &[(1, "0".repeat(64))]),
            Err(StoreError::Schema(_))
        ));
        assert!(matches!(
            plan(POSTGRES, &[(999, "x".into())]),
            Err(StoreError::Schema(_))
        ));
    }
}
