//! One query layer over two backends.
//!
//! Store modules write each statement once, as a template with PostgreSQL-style `$n`
//! parameters (SQLite accepts them too) and a few dialect tokens:
//!
//! | token | PostgreSQL | SQLite |
//! |---|---|---|
//! | `{{now}}` | `clock_timestamp()` | `strftime('%Y-%m-%dT%H:%M:%fZ','now')` |
//! | `{{now_plus_ms:$n}}` | `clock_timestamp() + $n * 1 ms` | `strftime(…,'now', '+x.xxx seconds')` |
//! | `{{skip_locked}}` | `FOR UPDATE SKIP LOCKED` | nothing (writers are serialized) |
//! | `{{for_update}}` | `FOR UPDATE` | nothing (writers are serialized) |
//! | `{{json_text:col:key}}` | `col->>'key'` | `json_extract(col,'$.key')` |
//! | `{{seq:t}}` | `t.seq` (identity column) | `t.rowid` (insertion order) |
//!
//! Templates render once per process ([`Sql`]). Values bind through [`Arg`], which maps each
//! domain type to the backend's column type: timestamps are `timestamptz` on PostgreSQL and
//! canonical text on SQLite, JSON is `jsonb` or text. [`Row`] decodes them back the same way.
//! No SQL is assembled from runtime strings.

use std::str::FromStr;
use std::sync::OnceLock;

use occ_core::Timestamp;
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{PgConnection, Postgres, Row as _, Sqlite, SqliteConnection};

use crate::error::StoreError;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL (production; schema `occ`).
    Postgres,
    /// SQLite (the embedded default; one file).
    Sqlite,
}

impl Backend {
    /// A short name for logs and benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

/// A statement template, rendered lazily per dialect.
pub(crate) struct Sql {
    template: &'static str,
    rendered: OnceLock<[String; 2]>,
}

impl Sql {
    pub(crate) const fn new(template: &'static str) -> Self {
        Self {
            template,
            rendered: OnceLock::new(),
        }
    }

    pub(crate) fn text(&'static self, backend: Backend) -> &'static str {
        let rendered = self.rendered.get_or_init(|| {
            [
                render(self.template, Backend::Postgres),
                render(self.template, Backend::Sqlite),
            ]
        });
        match backend {
            Backend::Postgres => &rendered[0],
            Backend::Sqlite => &rendered[1],
        }
    }
}

/// Declares a statement template as a `&'static Sql`.
macro_rules! sql {
    ($template:expr) => {{
        static SQL: $crate::db::Sql = $crate::db::Sql::new($template);
        &SQL
    }};
}
pub(crate) use sql;

const SQLITE_NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

fn render(template: &str, backend: Backend) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .unwrap_or_else(|| panic!("unterminated token in SQL template: {template}"));
        let token = &after[..end];
        out.push_str(&render_token(token, backend, template));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn render_token(token: &str, backend: Backend, template: &str) -> String {
    let mut parts = token.split(':');
    let name = parts.next().unwrap_or_default();
    let args: Vec<&str> = parts.collect();
    match (name, backend, args.as_slice()) {
        ("now", Backend::Postgres, []) => "clock_timestamp()".to_owned(),
        ("now", Backend::Sqlite, []) => SQLITE_NOW.to_owned(),
        ("now_plus_ms", Backend::Postgres, [p]) => {
            format!("(clock_timestamp() + ({p})::bigint * interval '1 millisecond')")
        }
        ("now_plus_ms", Backend::Sqlite, [p]) => {
            format!("strftime('%Y-%m-%dT%H:%M:%fZ','now',printf('%+.3f seconds',({p})/1000.0))")
        }
        ("skip_locked", Backend::Postgres, []) => "FOR UPDATE SKIP LOCKED".to_owned(),
        ("for_update", Backend::Postgres, []) => "FOR UPDATE".to_owned(),
        ("skip_locked" | "for_update", Backend::Sqlite, []) => String::new(),
        ("seq", Backend::Postgres, [alias]) => format!("{alias}.seq"),
        ("seq", Backend::Sqlite, [alias]) => format!("{alias}.rowid"),
        ("json_text", Backend::Postgres, [col, key]) => format!("({col}->>'{key}')"),
        ("json_text", Backend::Sqlite, [col, key]) => format!("json_extract({col},'$.{key}')"),
        _ => panic!("unknown SQL template token {{{{{token}}}}} in: {template}"),
    }
}

/// A bound value.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(Option<bool>),
    Json(Option<Value>),
    Time(Option<Timestamp>),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(Some(v))
    }
}
impl From<Value> for Arg {
    fn from(v: Value) -> Self {
        Arg::Json(Some(v))
    }
}
impl From<Option<Value>> for Arg {
    fn from(v: Option<Value>) -> Self {
        Arg::Json(v)
    }
}
impl From<Timestamp> for Arg {
    fn from(v: Timestamp) -> Self {
        Arg::Time(Some(v))
    }
}
impl From<Option<Timestamp>> for Arg {
    fn from(v: Option<Timestamp>) -> Self {
        Arg::Time(v)
    }
}

/// A mutable borrow of a connection of either backend.
pub(crate) enum Conn<'c> {
    Pg(&'c mut PgConnection),
    Sqlite(&'c mut SqliteConnection),
}

impl Conn<'_> {
    /// The same connection for one more statement.
    pub(crate) fn reborrow(&mut self) -> Conn<'_> {
        match self {
            Conn::Pg(c) => Conn::Pg(c),
            Conn::Sqlite(c) => Conn::Sqlite(c),
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            Conn::Pg(_) => Backend::Postgres,
            Conn::Sqlite(_) => Backend::Sqlite,
        }
    }
}

/// A statement with its arguments, ready to run.
pub(crate) struct Query<'c> {
    conn: Conn<'c>,
    text: &'static str,
    args: Vec<Arg>,
}

fn pg_query(
    text: &'static str,
    args: Vec<Arg>,
) -> sqlx::query::Query<'static, Postgres, PgArguments> {
    let mut q = sqlx::query::<Postgres>(text);
    for arg in args {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Json(v) => q.bind(v.map(sqlx::types::Json)),
            Arg::Time(v) => q.bind(v.map(Timestamp::as_datetime)),
        };
    }
    q
}

fn sqlite_query(
    text: &'static str,
    args: Vec<Arg>,
) -> sqlx::query::Query<'static, Sqlite, SqliteArguments> {
    let mut q = sqlx::query::<Sqlite>(text);
    for arg in args {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Json(v) => q.bind(v.map(|j| j.to_string())),
            Arg::Time(v) => q.bind(v.map(Timestamp::to_canonical)),
        };
    }
    q
}

impl<'c> Query<'c> {
    /// Starts a statement on a connection.
    pub(crate) fn new(conn: Conn<'c>, sql: &'static Sql) -> Self {
        let text = sql.text(conn.backend());
        Query {
            conn,
            text,
            args: Vec::new(),
        }
    }

    /// Binds the next `$n`.
    pub(crate) fn bind(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Runs the statement; returns the number of affected rows.
    pub(crate) async fn execute(self) -> Result<u64, StoreError> {
        let affected = match self.conn {
            Conn::Pg(c) => pg_query(self.text, self.args)
                .execute(c)
                .await
                .map(|r| r.rows_affected()),
            Conn::Sqlite(c) => sqlite_query(self.text, self.args)
                .execute(c)
                .await
                .map(|r| r.rows_affected()),
        };
        affected.map_err(StoreError::from_sqlx)
    }

    /// All rows.
    pub(crate) async fn fetch_all(self) -> Result<Vec<Row>, StoreError> {
        let rows = match self.conn {
            Conn::Pg(c) => pg_query(self.text, self.args)
                .fetch_all(c)
                .await
                .map(|rows| rows.into_iter().map(Row::Pg).collect()),
            Conn::Sqlite(c) => sqlite_query(self.text, self.args)
                .fetch_all(c)
                .await
                .map(|rows| rows.into_iter().map(Row::Sqlite).collect()),
        };
        rows.map_err(StoreError::from_sqlx)
    }

    /// At most one row.
    pub(crate) async fn fetch_optional(self) -> Result<Option<Row>, StoreError> {
        let row = match self.conn {
            Conn::Pg(c) => pg_query(self.text, self.args)
                .fetch_optional(c)
                .await
                .map(|r| r.map(Row::Pg)),
            Conn::Sqlite(c) => sqlite_query(self.text, self.args)
                .fetch_optional(c)
                .await
                .map(|r| r.map(Row::Sqlite)),
        };
        row.map_err(StoreError::from_sqlx)
    }

    /// Exactly one row, or [`StoreError::NotFound`].
    pub(crate) async fn fetch_one(self) -> Result<Row, StoreError> {
        self.fetch_optional().await?.ok_or(StoreError::NotFound)
    }
}

/// A result row of either backend.
pub(crate) enum Row {
    Pg(PgRow),
    Sqlite(SqliteRow),
}

fn corrupt(col: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("column {col}: {what}"))
}

impl Row {
    pub(crate) fn opt_text(&self, col: &str) -> Result<Option<String>, StoreError> {
        match self {
            Row::Pg(r) => r.try_get::<Option<String>, _>(col),
            Row::Sqlite(r) => r.try_get::<Option<String>, _>(col),
        }
        .map_err(|e| corrupt(col, e))
    }

    pub(crate) fn text(&self, col: &str) -> Result<String, StoreError> {
        self.opt_text(col)?
            .ok_or_else(|| corrupt(col, "unexpected NULL"))
    }

    pub(crate) fn opt_int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        match self {
            Row::Pg(r) => r.try_get::<Option<i64>, _>(col),
            Row::Sqlite(r) => r.try_get::<Option<i64>, _>(col),
        }
        .map_err(|e| corrupt(col, e))
    }

    pub(crate) fn int(&self, col: &str) -> Result<i64, StoreError> {
        self.opt_int(col)?
            .ok_or_else(|| corrupt(col, "unexpected NULL"))
    }

    /// A non-negative integer column.
    pub(crate) fn count(&self, col: &str) -> Result<u64, StoreError> {
        u64::try_from(self.int(col)?).map_err(|e| corrupt(col, e))
    }

    pub(crate) fn boolean(&self, col: &str) -> Result<bool, StoreError> {
        match self {
            Row::Pg(r) => r.try_get::<bool, _>(col),
            Row::Sqlite(r) => r.try_get::<bool, _>(col),
        }
        .map_err(|e| corrupt(col, e))
    }

    pub(crate) fn opt_json(&self, col: &str) -> Result<Option<Value>, StoreError> {
        match self {
            Row::Pg(r) => r
                .try_get::<Option<sqlx::types::Json<Value>>, _>(col)
                .map(|v| v.map(|j| j.0))
                .map_err(|e| corrupt(col, e)),
            Row::Sqlite(r) => match r
                .try_get::<Option<String>, _>(col)
                .map_err(|e| corrupt(col, e))?
            {
                None => Ok(None),
                Some(text) => serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| corrupt(col, e)),
            },
        }
    }

    pub(crate) fn json(&self, col: &str) -> Result<Value, StoreError> {
        self.opt_json(col)?
            .ok_or_else(|| corrupt(col, "unexpected NULL"))
    }

    /// A JSON column decoded into a domain type.
    pub(crate) fn json_as<T: serde::de::DeserializeOwned>(
        &self,
        col: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_value(self.json(col)?).map_err(|e| corrupt(col, e))
    }

    /// A nullable JSON column decoded into a domain type (JSON `null` reads as `None`).
    pub(crate) fn opt_json_as<T: serde::de::DeserializeOwned>(
        &self,
        col: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.opt_json(col)? {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| corrupt(col, e)),
        }
    }

    pub(crate) fn opt_time(&self, col: &str) -> Result<Option<Timestamp>, StoreError> {
        match self {
            Row::Pg(r) => r
                .try_get::<Option<chrono::DateTime<chrono::Utc>>, _>(col)
                .map(|v| v.map(Timestamp::from_datetime))
                .map_err(|e| corrupt(col, e)),
            Row::Sqlite(r) => match r
                .try_get::<Option<String>, _>(col)
                .map_err(|e| corrupt(col, e))?
            {
                None => Ok(None),
                Some(text) => Timestamp::parse_canonical(&text)
                    .map(Some)
                    .map_err(|e| corrupt(col, e)),
            },
        }
    }

    pub(crate) fn time(&self, col: &str) -> Result<Timestamp, StoreError> {
        self.opt_time(col)?
            .ok_or_else(|| corrupt(col, "unexpected NULL"))
    }

    /// A text column parsed into a domain type.
    pub(crate) fn parse<T: FromStr>(&self, col: &str) -> Result<T, StoreError> {
        let text = self.text(col)?;
        text.parse()
            .map_err(|_| corrupt(col, format!("unparseable value {text:?}")))
    }

    /// A nullable text column parsed into a domain type.
    pub(crate) fn opt_parse<T: FromStr>(&self, col: &str) -> Result<Option<T>, StoreError> {
        match self.opt_text(col)? {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| corrupt(col, format!("unparseable value {text:?}"))),
        }
    }

    /// A text column mapped through a parser returning `Option`.
    pub(crate) fn enum_of<T>(
        &self,
        col: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<T, StoreError> {
        let text = self.text(col)?;
        parse(&text).ok_or_else(|| corrupt(col, format!("unknown value {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_per_dialect() {
        let t = "UPDATE w SET lease = {{now_plus_ms:$2}} WHERE at <= {{now}} AND {{json_text:d:workId}} = $1 {{skip_locked}}";
        let pg = render(t, Backend::Postgres);
        assert!(pg.contains("clock_timestamp() + ($2)::bigint * interval '1 millisecond'"));
        assert!(pg.contains("(d->>'workId')"));
        assert!(pg.ends_with("FOR UPDATE SKIP LOCKED"));
        let lite = render(t, Backend::Sqlite);
        assert!(lite.contains("printf('%+.3f seconds',($2)/1000.0)"));
        assert!(lite.contains("json_extract(d,'$.workId')"));
        assert!(!lite.contains("FOR UPDATE"));
        assert_eq!(
            render("SELECT '{}'::jsonb", Backend::Postgres),
            "SELECT '{}'::jsonb"
        );
    }

    #[test]
    #[should_panic(expected = "unknown SQL template token")]
    fn unknown_tokens_fail_loudly() {
        render("SELECT {{nope}}", Backend::Sqlite);
    }
}
