//! The portable path: the extension's semantics (SPEC §2–§3) as plain SQL run
//! by the client, one body for PostgreSQL, MariaDB/MySQL and SQLite.

use super::dialect::{advisory_key, mysql_lock_name, Dialect, IdKind};
use crate::delivery::{Outcome, Settled};
use crate::error::{DbError, Error, Result};
use crate::queue::{Form, Queue, Role};
use sqlx::any::{Any, AnyPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::AnyPool;
#[allow(unused_imports)]
use sqlx::Executor as _;
use sqlx::{Connection, Row, Transaction};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

fn db_err(kind: fn(DbError) -> Error, msg: impl Into<String>) -> Error {
    kind(DbError {
        code: None,
        message: msg.into(),
        source: None,
    })
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Error {
        if matches!(e, sqlx::Error::PoolTimedOut) {
            return Error::pool_timeout(Box::new(e));
        }
        let (code, message) = match e.as_database_error() {
            Some(d) => (d.code().map(|c| c.into_owned()), d.message().to_owned()),
            None => (None, e.to_string()),
        };
        Error::Database(DbError {
            code,
            message,
            source: Some(Box::new(e)),
        })
    }
}

#[derive(Clone, Debug)]
enum Dead {
    /// a group value (raw)
    Group(String),
    /// a table (quoted) and its columns
    Table(String),
}

/// The resolved descriptor of a portable queue.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    d: Dialect,
    queue: String,
    form: Form,
    table: String,
    cols: Vec<String>,
    id: String,
    id_kind: IdKind,
    attempt: Option<String>,
    retry_after: Option<String>,
    locked_until: Option<String>,
    processed_at: Option<String>,
    group: Option<String>,
    max: Option<i64>,
    dead: Option<Dead>,
    custom: HashMap<String, String>,
}

/// A claimed row.
pub(crate) struct Claimed {
    pub id: String,
    pub attempt: u32,
    pub token: Option<i64>,
    pub payload: serde_json::Value,
}

/// The pinned state of a row_lock / advisory claim.
pub(crate) enum Pinned {
    Tx(Transaction<'static, Any>),
    Conn(PoolConnection<Any>),
}

/// Deliveries of one row_lock / advisory claim share this.
pub(crate) struct PSession {
    pub(crate) pinned: std::sync::Arc<tokio::sync::Mutex<Option<Pinned>>>,
    /// row_lock transactional mode: the handler's savepoint is open
    pub(crate) handler_sp: std::sync::atomic::AtomicBool,
    open: AtomicUsize,
    /// ids this claim holds and has not settled (row_lock: claimed by the
    /// transaction; advisory: key → lock held on the connection)
    held: StdMutex<HashMap<String, i64>>,
}

impl PSession {
    fn new(p: Pinned, held: HashMap<String, i64>) -> PSession {
        PSession {
            open: AtomicUsize::new(held.len()),
            pinned: std::sync::Arc::new(tokio::sync::Mutex::new(Some(p))),
            handler_sp: std::sync::atomic::AtomicBool::new(false),
            held: StdMutex::new(held),
        }
    }
}

impl Drop for PSession {
    fn drop(&mut self) {
        // not finished cleanly: close the connection rather than return it with a
        // transaction or locks (sqlx rolls a dropped transaction back; a detached
        // connection closes, and the server drops its locks)
        if let Some(p) = self.pinned.try_lock().ok().and_then(|mut g| g.take()) {
            match p {
                Pinned::Tx(tx) => drop(tx),
                Pinned::Conn(c) => drop(c.detach()),
            }
        }
    }
}

pub(crate) struct Engine {
    pool: AnyPool,
    s: Shape,
}

/// Split a table name as SQL would read it — `name`, `schema.name`, with
/// `"quoted"` (or MySQL `` `quoted` ``) parts whose doubled quotes stand for one
/// — into its raw parts. PostgreSQL folds unquoted parts to lower case.
fn split_table(d: Dialect, t: &str) -> Result<(Option<String>, String)> {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = t.trim().chars().peekable();
    let mut quoted_part = false;
    while let Some(c) = chars.next() {
        match c {
            '"' | '`' if cur.is_empty() && !quoted_part => {
                quoted_part = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => {
                            if chars.peek() == Some(&c) {
                                chars.next();
                                cur.push(c);
                            } else {
                                break;
                            }
                        }
                        Some(x) => cur.push(x),
                        None => {
                            return Err(Error::invalid(format!(
                                "unterminated quoted name in {t:?}"
                            )))
                        }
                    }
                }
            }
            '.' => {
                parts.push(std::mem::take(&mut cur));
                quoted_part = false;
            }
            c if quoted_part => {
                return Err(Error::invalid(format!(
                    "unexpected {c:?} after a quoted name in {t:?}"
                )));
            }
            c => cur.push(if d == Dialect::Postgres {
                c.to_ascii_lowercase()
            } else {
                c
            }),
        }
    }
    parts.push(cur);
    match parts.len() {
        1 => Ok((None, parts.pop().unwrap())),
        2 => {
            let name = parts.pop().unwrap();
            Ok((parts.pop(), name))
        }
        _ => Err(Error::invalid(format!(
            "{t:?} is not a table name (name or schema.name)"
        ))),
    }
}

impl Engine {
    /// Connect (`postgres://`, `mysql://` / `mariadb://`, `sqlite://` URLs),
    /// introspect the table and validate the descriptor.
    pub(crate) async fn connect(
        url: &str,
        pool: &crate::client::PoolOptions,
        queue: &Queue,
    ) -> Result<Engine> {
        sqlx::any::install_default_drivers();
        let d = if url.starts_with("postgres") {
            Dialect::Postgres
        } else if url.starts_with("mysql") || url.starts_with("mariadb") {
            Dialect::MySql
        } else if url.starts_with("sqlite") {
            Dialect::Sqlite
        } else {
            return Err(Error::invalid(format!("unsupported database URL {url:?}: use postgres://, mysql://, mariadb:// or sqlite://")));
        };
        let url = if d == Dialect::MySql {
            url.replacen("mariadb://", "mysql://", 1)
        } else {
            url.to_owned()
        };
        if d == Dialect::Sqlite && queue.form == Form::Advisory {
            return Err(db_err(
                Error::InvalidDescriptor,
                "SQLite has no advisory locks: use the lease or row_lock form",
            ));
        }
        let max = u32::try_from(pool.max_size.max(1)).unwrap_or(u32::MAX);
        // sqlx has one timeout for waiting, which includes opening a connection
        // when the pool has room; None = a century
        let acquire = pool
            .wait_timeout
            .unwrap_or(Duration::from_secs(100 * 365 * 86_400));
        let mut opts = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire);
        if d == Dialect::Sqlite {
            opts = opts.after_connect(|conn: &mut sqlx::AnyConnection, _| {
                Box::pin(async move {
                    for pragma in ["PRAGMA journal_mode = WAL", "PRAGMA busy_timeout = 10000"] {
                        sqlx::Executor::execute(&mut *conn, pragma).await?;
                    }
                    Ok(())
                })
            });
        } else if d == Dialect::MySql {
            opts = opts.after_connect(|conn: &mut sqlx::AnyConnection, _| {
                Box::pin(async move {
                    sqlx::Executor::execute(&mut *conn, "SET time_zone = '+00:00'").await?;
                    // InnoDB's default REPEATABLE READ makes a locking read also lock
                    // the rows it passes over (leased rows, rows of other claims) and
                    // the gaps between them, so concurrent claims and settles deadlock
                    // (error 1213); READ COMMITTED locks only the rows a claim takes,
                    // as PostgreSQL does
                    sqlx::Executor::execute(
                        &mut *conn,
                        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                    )
                    .await?;
                    Ok(())
                })
            });
        }
        // one direct connection first: a refused or unknown server is reported as
        // the driver's own error at once (the pool would retry it until the
        // acquire timeout and then say only "pool timed out")
        let probe = sqlx::AnyConnection::connect(&url);
        match pool.connect_timeout {
            Some(t) => match tokio::time::timeout(t, probe).await {
                Ok(c) => c?.close().await?,
                Err(_) => {
                    return Err(db_err(
                        Error::Database,
                        format!("connecting took longer than {t:?}"),
                    ))
                }
            },
            None => probe.await?.close().await?,
        }
        let pool = opts.connect(&url).await?;
        let s = introspect(&pool, d, queue).await?;
        Ok(Engine { pool, s })
    }

    pub(crate) fn dialect(&self) -> Dialect {
        self.s.d
    }

    pub(crate) fn has_retry_after(&self) -> bool {
        self.s.retry_after.is_some()
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

/// The columns of a table, in order: (name, lower-case type name). Empty when
/// the table does not exist.
async fn table_columns(
    pool: &AnyPool,
    d: Dialect,
    schema: Option<&str>,
    name: &str,
) -> Result<Vec<(String, String)>> {
    let sql = match d {
        Dialect::Postgres => {
            "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT) FROM information_schema.columns \
             WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2 ORDER BY ordinal_position"
        }
        Dialect::MySql => {
            "SELECT CAST(column_name AS CHAR), CAST(data_type AS CHAR) FROM information_schema.columns \
             WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? ORDER BY ordinal_position"
        }
        Dialect::Sqlite => "SELECT name, type FROM pragma_table_info(?) ORDER BY cid",
    };
    let mut q = sqlx::query(sql);
    if d != Dialect::Sqlite {
        q = q.bind(schema);
    }
    Ok(q.bind(name)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1).to_lowercase()))
        .collect())
}

/// Read the table's columns and check the descriptor: InvalidDescriptor names the problem.
async fn introspect(pool: &AnyPool, d: Dialect, q: &Queue) -> Result<Shape> {
    let (schema, name) = split_table(d, &q.table)?;
    let (schema, name) = (schema.as_deref(), name.as_str());
    let bad = |m: String| db_err(Error::InvalidDescriptor, m);
    // (column name, lower-case type name)
    let cols = table_columns(pool, d, schema, name).await?;
    if cols.is_empty() {
        return Err(bad(format!("table {} does not exist", q.table)));
    }
    let has = |c: &str| cols.iter().find(|(n, _)| n == c).map(|(_, t)| t.clone());
    let defaults = [
        (Role::Id, "id"),
        (Role::Attempt, "attempt"),
        (Role::RetryAfter, "retry_after"),
        (Role::LockedUntil, "locked_until"),
        (Role::ProcessedAt, "processed_at"),
        (Role::Group, "queue"),
        (Role::CreatedAt, "created_at"),
    ];
    let mut resolved: HashMap<Role, (String, String)> = HashMap::new();
    for (role, default) in defaults {
        let name = match q.columns.get(&role) {
            Some(Some(n)) => Some(n.clone()),
            Some(None) => None,
            None => has(default).map(|_| default.to_owned()),
        };
        if let Some(n) = name {
            match has(&n) {
                Some(t) => {
                    resolved.insert(role, (n, t));
                }
                None => {
                    return Err(bad(format!(
                        "column \"{n}\" ({role:?}) does not exist in {}",
                        q.table
                    )))
                }
            }
        }
    }
    let (id, id_type) = resolved.get(&Role::Id).cloned().ok_or_else(|| {
        bad(format!(
            "{} has no id column: name it with Queue::column(Role::Id, ..)",
            q.table
        ))
    })?;
    let is_int = |t: &str| t.contains("int");
    let is_ts = |t: &str| match d {
        Dialect::Postgres => t == "timestamp with time zone",
        Dialect::MySql => t == "datetime" || t == "timestamp",
        Dialect::Sqlite => t.contains("int"),
    };
    let ts_hint = match d {
        Dialect::Postgres => "timestamptz",
        Dialect::MySql => "DATETIME(6) (UTC)",
        Dialect::Sqlite => "INTEGER (microseconds since the epoch, UTC)",
    };
    for role in [Role::RetryAfter, Role::LockedUntil, Role::ProcessedAt] {
        if let Some((n, t)) = resolved.get(&role) {
            if !is_ts(t) {
                return Err(bad(format!(
                    "column \"{n}\" ({role:?}) of {} is {t}, it must be {ts_hint}",
                    q.table
                )));
            }
        }
    }
    if let Some((n, t)) = resolved.get(&Role::Attempt) {
        if !is_int(t) {
            return Err(bad(format!(
                "column \"{n}\" (attempt) of {} is {t}, it must be an integer type",
                q.table
            )));
        }
    }
    let id_kind = if is_int(&id_type) {
        IdKind::Integer
    } else if id_type.as_str() == "uuid" {
        IdKind::Uuid
    } else {
        IdKind::Text
    };
    // the id needs a unique index of its own
    let unique: i64 = match d {
        Dialect::Postgres => sqlx::query(
            "SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
             WHERE i.indrelid = CAST($1 AS regclass) AND i.indisunique AND i.indnkeyatts = 1 AND a.attname = $2",
        )
        .bind(&q.table)
        .bind(&id)
        .fetch_one(pool)
        .await?
        .get(0),
        Dialect::MySql => sqlx::query(
            "SELECT CAST(count(*) AS SIGNED) FROM (SELECT index_name FROM information_schema.statistics \
             WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND non_unique = 0 \
             GROUP BY index_name HAVING count(*) = 1 AND max(column_name) = ?) u",
        )
        .bind(schema)
        .bind(name)
        .bind(&id)
        .fetch_one(pool)
        .await?
        .get(0),
        Dialect::Sqlite => sqlx::query(
            "SELECT (SELECT count(*) FROM pragma_table_info(?1) WHERE pk = 1 AND name = ?2 \
                       AND (SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1) \
                  + (SELECT count(*) FROM pragma_index_list(?1) il WHERE il.\"unique\" = 1 \
                       AND (SELECT count(*) FROM pragma_index_info(il.name)) = 1 \
                       AND (SELECT name FROM pragma_index_info(il.name)) = ?2)",
        )
        .bind(name)
        .bind(&id)
        .fetch_one(pool)
        .await?
        .get(0),
    };
    if unique == 0 {
        return Err(bad(format!(
            "the id column \"{id}\" of {} needs a primary key or unique index of its own",
            q.table
        )));
    }
    if matches!(q.form, Form::Lease { .. }) && !resolved.contains_key(&Role::LockedUntil) {
        return Err(bad(format!(
            "the lease form needs a locked_until column in {}",
            q.table
        )));
    }
    if let Form::Lease { ttl } = q.form {
        if ttl.as_micros() < 1000 {
            return Err(Error::invalid("a lease must be at least 1 millisecond"));
        }
    }
    let table = match schema {
        Some(s) => format!("{}.{}", d.ident(s), d.ident(name)),
        None => d.ident(name),
    };
    let dead = match &q.dead {
        None => None,
        Some((0, _)) => return Err(bad("max_attempts must be at least 1".into())),
        Some(_) if !resolved.contains_key(&Role::Attempt) => {
            return Err(bad(format!(
                "max_attempts needs an attempt column in {}",
                q.table
            )))
        }
        Some((_, target)) if resolved.contains_key(&Role::Group) => {
            if target == &q.name {
                return Err(bad(
                    "the dead-letter group must differ from the queue's own group".into(),
                ));
            }
            Some(Dead::Group(target.clone()))
        }
        Some((_, target)) => {
            let (ts, tn) = split_table(d, target)?;
            let (ts, tn) = (ts.as_deref(), tn.as_str());
            let dcols: Vec<String> = table_columns(pool, d, ts, tn)
                .await?
                .into_iter()
                .map(|(c, _)| c)
                .collect();
            if dcols.is_empty() {
                return Err(bad(format!(
                    "dead-letter table {target} does not exist ({} has no group column, so the dead letter is a table)",
                    q.table
                )));
            }
            if let Some((c, _)) = cols.iter().find(|(c, _)| !dcols.contains(c)) {
                return Err(bad(format!(
                    "dead-letter table {target} lacks column \"{c}\" of {}",
                    q.table
                )));
            }
            let dt = match ts {
                Some(s) => format!("{}.{}", d.ident(s), d.ident(tn)),
                None => d.ident(tn),
            };
            Some(Dead::Table(dt))
        }
    };
    let get = |r: Role| resolved.get(&r).map(|(n, _)| n.clone());
    Ok(Shape {
        d,
        queue: q.name.clone(),
        form: q.form,
        table,
        cols: cols.into_iter().map(|(n, _)| n).collect(),
        id,
        id_kind,
        attempt: get(Role::Attempt),
        retry_after: get(Role::RetryAfter),
        locked_until: get(Role::LockedUntil),
        processed_at: get(Role::ProcessedAt),
        group: get(Role::Group),
        max: q.dead.as_ref().map(|(n, _)| i64::from(*n)),
        dead,
        custom: q.outcomes.iter().cloned().collect(),
    })
}

/// `?`-style placeholders for an IN list, starting at `first` (PostgreSQL numbers them).
fn in_list(d: Dialect, first: usize, n: usize, kind: IdKind) -> String {
    (0..n)
        .map(|i| d.id_param(&d.p(first + i), kind))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Shape {
    fn c(&self, a: &str, col: &str) -> String {
        format!("{a}.{}", self.d.ident(col))
    }

    fn id_eq(&self, a: &str, p: usize) -> String {
        format!(
            "{} = {}",
            self.c(a, &self.id),
            self.d.id_param(&self.d.p(p), self.id_kind)
        )
    }

    /// Conditions of a row of this queue that is not settled.
    fn mine(&self, a: &str) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(g) = &self.group {
            v.push(format!(
                "{} = {}",
                self.c(a, g),
                self.d.literal(&self.queue)
            ));
        }
        if let Some(p) = &self.processed_at {
            v.push(format!("{} IS NULL", self.c(a, p)));
        }
        v
    }

    fn ready(&self, a: &str) -> String {
        let now = self.d.now();
        let mut v = self.mine(a);
        if let Some(r) = &self.retry_after {
            let r = self.c(a, r);
            v.push(format!("({r} IS NULL OR {r} <= {now})"));
        }
        if matches!(self.form, Form::Lease { .. }) {
            let l = self.c(a, self.locked_until.as_ref().unwrap());
            v.push(format!("({l} IS NULL OR {l} < {now})"));
        }
        if v.is_empty() {
            "1 = 1".into()
        } else {
            v.join(" AND ")
        }
    }

    fn attempt_sel(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => format!("COALESCE({}, 0)", self.d.int(&self.c(a, c))),
            None => "0".into(),
        }
    }

    fn token_sel(&self, a: &str) -> String {
        match (&self.locked_until, self.form) {
            (Some(l), Form::Lease { .. }) => self.d.micros(&self.c(a, l)),
            _ => "NULL".into(),
        }
    }

    /// id text, attempt, token, row json of rows `WHERE <cond>`
    fn rows_sql(&self, cond: &str) -> String {
        format!(
            "SELECT {}, {}, {}, {} FROM {} a WHERE {cond} ORDER BY a.{}",
            self.d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.token_sel("a"),
            self.d.json_row("a", &self.cols),
            self.table,
            self.d.ident(&self.id)
        )
    }

    /// Statements moving one row (`id` = parameter 1) to the dead letter.
    /// `count_delivery`: row_lock counts the failed delivery here.
    fn dead_sql(&self, count_delivery: bool) -> Vec<String> {
        let d = self.d;
        let idp = d.id_param(&d.p(1), self.id_kind);
        let idc = d.ident(&self.id);
        match self.dead.as_ref().expect("dead letter configured") {
            Dead::Group(g) => {
                let mut sets = vec![format!(
                    "{} = {}",
                    d.ident(self.group.as_ref().unwrap()),
                    d.literal(g)
                )];
                if let (Some(l), Form::Lease { .. }) = (&self.locked_until, self.form) {
                    sets.push(format!("{} = NULL", d.ident(l)));
                }
                if let (Some(a), true) = (&self.attempt, count_delivery) {
                    sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
                }
                vec![format!(
                    "UPDATE {} SET {} WHERE {idc} = {idp}",
                    self.table,
                    sets.join(", ")
                )]
            }
            Dead::Table(dt) => {
                let cols: Vec<String> = self.cols.iter().map(|c| d.ident(c)).collect();
                let vals: Vec<String> = self
                    .cols
                    .iter()
                    .map(|c| {
                        let q = format!("m.{}", d.ident(c));
                        if Some(c) == self.locked_until.as_ref()
                            && matches!(self.form, Form::Lease { .. })
                        {
                            "NULL".into()
                        } else if Some(c) == self.attempt.as_ref() && count_delivery {
                            format!("COALESCE({q}, 0) + 1")
                        } else {
                            q
                        }
                    })
                    .collect();
                match d {
                    // SPEC: one statement on PostgreSQL
                    Dialect::Postgres => vec![format!(
                        "WITH m AS (DELETE FROM {t} WHERE {idc} = {idp} RETURNING *) INSERT INTO {dt} ({cols}) SELECT {vals} FROM m",
                        t = self.table,
                        cols = cols.join(", "),
                        vals = vals.join(", ")
                    )],
                    // copy, then delete, in the caller's transaction
                    _ => vec![
                        format!(
                            "INSERT INTO {dt} ({cols}) SELECT {vals} FROM {t} m WHERE m.{idc} = {idp}",
                            t = self.table,
                            cols = cols.join(", "),
                            vals = vals.join(", ")
                        ),
                        format!("DELETE FROM {} WHERE {idc} = {idp}", self.table),
                    ],
                }
            }
        }
    }
}

async fn exec_with_id(conn: &mut sqlx::AnyConnection, sql: &str, id: &str) -> Result<u64> {
    Ok(sqlx::query(sql)
        .bind(id)
        .execute(conn)
        .await?
        .rows_affected())
}

impl Engine {
    fn warn_dead(&self, id: &str) {
        tracing::warn!(queue = %self.s.queue, id = %id, max_attempts = self.s.max.unwrap_or(0), "max_attempts reached: moved to the dead letter");
    }

    /// Move rows whose last delivery died at max_attempts (crash loops: lease
    /// and advisory forms) out of `ids`, returning the rest.
    async fn drop_poison(
        &self,
        conn: &mut sqlx::AnyConnection,
        cands: Vec<(String, i64)>,
    ) -> Result<Vec<String>> {
        let mut live = Vec::with_capacity(cands.len());
        for (id, attempt) in cands {
            match self.s.max {
                Some(max) if attempt >= max => {
                    for sql in self.s.dead_sql(false) {
                        exec_with_id(conn, &sql, &id).await?;
                    }
                    self.warn_dead(&id);
                }
                _ => live.push(id),
            }
        }
        Ok(live)
    }

    /// Count the attempt (and write the token) of `ids` and read them back.
    async fn take(&self, conn: &mut sqlx::AnyConnection, ids: &[String]) -> Result<Vec<Claimed>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let s = &self.s;
        let d = s.d;
        let mut sets = Vec::new();
        let mut n = 1;
        let lease = match s.form {
            Form::Lease { ttl } => {
                sets.push(format!(
                    "{} = {}",
                    d.ident(s.locked_until.as_ref().unwrap()),
                    d.now_plus(&d.p(n))
                ));
                n += 1;
                Some(crate::client::micros(ttl))
            }
            _ => None,
        };
        if let Some(a) = &s.attempt {
            sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
        }
        let list = in_list(d, n, ids.len(), s.id_kind);
        if !sets.is_empty() {
            let sql = format!(
                "UPDATE {} SET {} WHERE {} IN ({list})",
                s.table,
                sets.join(", "),
                d.ident(&s.id)
            );
            let mut q = sqlx::query(&sql);
            if let Some(l) = lease {
                q = q.bind(l);
            }
            for id in ids {
                q = q.bind(id);
            }
            q.execute(&mut *conn).await?;
        }
        let sql = s.rows_sql(&format!(
            "a.{} IN ({})",
            d.ident(&s.id),
            in_list(d, 1, ids.len(), s.id_kind)
        ));
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter().map(|r| claimed(r, 0)).collect()
    }

    /// Claim up to `n` rows. row_lock and advisory return the pinned session.
    ///
    /// A claim the database picks as a deadlock victim (InnoDB, SQLSTATE 40001)
    /// has had its transaction rolled back whole — it wrote and holds nothing —
    /// so it is run again, a few times, before the error reaches the caller.
    pub(crate) async fn claim(&self, n: usize) -> Result<(Vec<Claimed>, Option<PSession>)> {
        again_if_deadlock(|| self.claim_once(n)).await
    }

    async fn claim_once(&self, n: usize) -> Result<(Vec<Claimed>, Option<PSession>)> {
        let s = &self.s;
        let d = s.d;
        match s.form {
            Form::RowLock => {
                let mut tx = self.pool.begin_with(d.begin()).await?;
                let sql = format!(
                    "{} LIMIT {}{}",
                    s.rows_sql(&s.ready("a")),
                    d.p(1),
                    d.skip_locked()
                );
                let rows = sqlx::query(&sql).bind(n as i64).fetch_all(&mut *tx).await?;
                if rows.is_empty() {
                    tx.commit().await?;
                    return Ok((Vec::new(), None));
                }
                // row_lock counts the attempt in the settling statement: report stored + 1
                let out: Vec<Claimed> =
                    rows.iter().map(|r| claimed(r, 1)).collect::<Result<_>>()?;
                let held = out.iter().map(|c| (c.id.clone(), 0)).collect();
                Ok((out, Some(PSession::new(Pinned::Tx(tx), held))))
            }
            Form::Lease { .. } => {
                let mut tx = self.pool.begin_with(d.begin()).await?;
                let sql = format!(
                    "SELECT {}, {} FROM {} a WHERE {} ORDER BY a.{} LIMIT {}{}",
                    d.id_text(&s.c("a", &s.id)),
                    s.attempt_sel("a"),
                    s.table,
                    s.ready("a"),
                    d.ident(&s.id),
                    d.p(1),
                    d.skip_locked()
                );
                let cands: Vec<(String, i64)> = sqlx::query(&sql)
                    .bind(n as i64)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                let live = self.drop_poison(&mut tx, cands).await?;
                let out = self.take(&mut tx, &live).await?;
                tx.commit().await?;
                Ok((out, None))
            }
            Form::Advisory => self.claim_advisory(n).await,
        }
    }

    async fn claim_advisory(&self, n: usize) -> Result<(Vec<Claimed>, Option<PSession>)> {
        let s = &self.s;
        let d = s.d;
        let mut conn = self.pool.acquire().await?;
        let sql = format!(
            "SELECT {} FROM {} a WHERE {} ORDER BY a.{} LIMIT {}",
            d.id_text(&s.c("a", &s.id)),
            s.table,
            s.ready("a"),
            d.ident(&s.id),
            d.p(1)
        );
        let cands: Vec<String> = sqlx::query(&sql)
            .bind((n * 2 + 16) as i64)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut locked: HashMap<String, i64> = HashMap::new();
        for id in cands {
            if locked.len() == n {
                break;
            }
            if self.try_lock(&mut conn, &id).await? {
                locked.insert(id.clone(), advisory_key(&s.queue, &id));
            }
        }
        if locked.is_empty() {
            return Ok((Vec::new(), None));
        }
        // re-check with a fresh read now that the keys are ours, count the attempt
        let ids: Vec<String> = locked.keys().cloned().collect();
        let res: Result<(Vec<Claimed>, Vec<String>)> = async {
            let mut tx = conn.begin().await?;
            let sql = format!(
                "SELECT {}, {} FROM {} a WHERE a.{} IN ({}) AND {}{}",
                d.id_text(&s.c("a", &s.id)),
                s.attempt_sel("a"),
                s.table,
                d.ident(&s.id),
                in_list(d, 1, ids.len(), s.id_kind),
                s.ready("a"),
                d.for_update()
            );
            let mut q = sqlx::query(&sql);
            for id in &ids {
                q = q.bind(id);
            }
            let cands: Vec<(String, i64)> = q
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let still: Vec<String> = cands.iter().map(|(i, _)| i.clone()).collect();
            let live = self.drop_poison(&mut tx, cands).await?;
            let out = self.take(&mut tx, &live).await?;
            tx.commit().await?;
            Ok((out, still))
        }
        .await;
        let (out, _) = match res {
            Ok(v) => v,
            Err(e) => {
                drop(conn.detach()); // closes: the server drops every key
                return Err(e);
            }
        };
        // give back every key not delivered (gone, not ready any more, or moved)
        let taken: std::collections::HashSet<&str> = out.iter().map(|c| c.id.as_str()).collect();
        let mut held = HashMap::new();
        for (id, key) in &locked {
            if taken.contains(id.as_str()) {
                held.insert(id.clone(), *key);
            } else {
                self.unlock(&mut conn, id).await?;
            }
        }
        if out.is_empty() {
            return Ok((out, None));
        }
        Ok((out, Some(PSession::new(Pinned::Conn(conn), held))))
    }

    async fn try_lock(&self, conn: &mut sqlx::AnyConnection, id: &str) -> Result<bool> {
        let got: Option<i64> = match self.s.d {
            Dialect::Postgres => sqlx::query(
                "SELECT CAST(CASE WHEN pg_try_advisory_lock($1) THEN 1 ELSE 0 END AS BIGINT)",
            )
            .bind(advisory_key(&self.s.queue, id))
            .fetch_one(&mut *conn)
            .await?
            .get(0),
            Dialect::MySql => sqlx::query("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
                .bind(mysql_lock_name(&self.s.queue, id))
                .fetch_one(&mut *conn)
                .await?
                .get(0),
            Dialect::Sqlite => None,
        };
        Ok(got == Some(1))
    }

    async fn unlock(&self, conn: &mut sqlx::AnyConnection, id: &str) -> Result<()> {
        match self.s.d {
            Dialect::Postgres => {
                sqlx::query("SELECT pg_advisory_unlock($1)")
                    .bind(advisory_key(&self.s.queue, id))
                    .execute(&mut *conn)
                    .await?;
            }
            Dialect::MySql => {
                sqlx::query("SELECT RELEASE_LOCK(?)")
                    .bind(mysql_lock_name(&self.s.queue, id))
                    .execute(&mut *conn)
                    .await?;
            }
            Dialect::Sqlite => {}
        }
        Ok(())
    }

    /// Lock the held row and read its stored attempt; None when not held.
    async fn held_attempt(
        &self,
        conn: &mut sqlx::AnyConnection,
        id: &str,
        token: Option<i64>,
    ) -> Result<Option<i64>> {
        let s = &self.s;
        let d = s.d;
        let mut cond = s.mine("a");
        cond.push(s.id_eq("a", 1));
        if let Some(l) = (matches!(s.form, Form::Lease { .. }))
            .then_some(())
            .and(s.locked_until.as_ref())
        {
            cond.push(format!("{} = {}", d.micros(&s.c("a", l)), d.p(2)));
        }
        let sql = format!(
            "SELECT {} FROM {} a WHERE {}{}",
            s.attempt_sel("a"),
            s.table,
            cond.join(" AND "),
            d.for_update()
        );
        let mut q = sqlx::query(&sql).bind(id);
        if matches!(s.form, Form::Lease { .. }) {
            q = q.bind(token);
        }
        Ok(q.fetch_optional(&mut *conn).await?.map(|r| r.get(0)))
    }

    /// Write `outcome` for a held row, on `conn` inside an open transaction.
    async fn write(
        &self,
        conn: &mut sqlx::AnyConnection,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        let s = &self.s;
        let d = s.d;
        let lease = matches!(s.form, Form::Lease { .. });
        let Some(stored) = self.held_attempt(conn, id, token).await? else {
            return Err(if lease {
                db_err(Error::LeaseLost, format!("lease lost: row {id} of queue \"{}\" no longer holds this delivery's token", s.queue))
            } else {
                db_err(
                    Error::NotHeld,
                    format!(
                        "row {id} of queue \"{}\" is not held by this delivery",
                        s.queue
                    ),
                )
            });
        };
        let delivery = if s.form == Form::RowLock {
            stored + 1
        } else {
            stored
        };
        let idc = d.ident(&s.id);
        let idp = d.id_param(&d.p(1), s.id_kind);
        let where_id = format!("WHERE {idc} = {idp}");
        let retrying = matches!(outcome, Outcome::Retry | Outcome::RetryAfter(_));
        if retrying && s.dead.is_some() && s.max.is_some_and(|m| delivery >= m) {
            for sql in s.dead_sql(s.form == Form::RowLock) {
                exec_with_id(conn, &sql, id).await?;
            }
            self.warn_dead(id);
            return Ok(Settled::DeadLettered);
        }
        match outcome {
            Outcome::Ack | Outcome::Drop => match &s.processed_at {
                Some(p) => {
                    let sql = format!(
                        "UPDATE {} SET {} = {} {where_id}",
                        s.table,
                        d.ident(p),
                        d.now()
                    );
                    exec_with_id(conn, &sql, id).await?;
                    Ok(Settled::Marked)
                }
                None => {
                    exec_with_id(conn, &format!("DELETE FROM {} {where_id}", s.table), id).await?;
                    Ok(Settled::Deleted)
                }
            },
            Outcome::Retry | Outcome::RetryAfter(_) => {
                let delay = match outcome {
                    Outcome::RetryAfter(dur) if s.retry_after.is_some() => {
                        Some(crate::client::micros(*dur))
                    }
                    Outcome::RetryAfter(_) => {
                        tracing::warn!(queue = %s.queue, "queue has no retry_after column: retry_after is settled as retry");
                        None
                    }
                    _ => None,
                };
                // parameter order: delay (if any) first, then the id
                let mut sets = Vec::new();
                let mut n = 1;
                if delay.is_some() {
                    sets.push(format!(
                        "{} = {}",
                        d.ident(s.retry_after.as_ref().unwrap()),
                        d.now_plus(&d.p(n))
                    ));
                    n += 1;
                }
                if s.form == Form::RowLock {
                    if let Some(a) = &s.attempt {
                        sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
                    }
                }
                if lease {
                    sets.push(format!(
                        "{} = NULL",
                        d.ident(s.locked_until.as_ref().unwrap())
                    ));
                }
                if sets.is_empty() {
                    // row_lock without an attempt column, advisory retry: nothing to write
                    return Ok(if s.form == Form::RowLock {
                        Settled::Released
                    } else {
                        Settled::Retried
                    });
                }
                let sql = format!(
                    "UPDATE {} SET {} WHERE {idc} = {}",
                    s.table,
                    sets.join(", "),
                    d.id_param(&d.p(n), s.id_kind)
                );
                let mut q = sqlx::query(&sql);
                if let Some(us) = delay {
                    q = q.bind(us);
                }
                q.bind(id).execute(&mut *conn).await?;
                Ok(if delay.is_some() {
                    Settled::Delayed
                } else {
                    Settled::Retried
                })
            }
            Outcome::Custom(name) => {
                let Some(sql) = s.custom.get(name) else {
                    return Err(Error::invalid(format!(
                        "queue \"{}\" has no custom outcome \"{name}\"",
                        s.queue
                    )));
                };
                exec_with_id(conn, sql, id).await?;
                Ok(Settled::Custom)
            }
        }
    }

    /// ack or drop many lease deliveries in one short transaction: lock the rows
    /// that still hold their delivery's token, then one DELETE (or processed_at
    /// UPDATE) for them. `None` for a delivery whose lease was lost (nothing
    /// written for it).
    pub(crate) async fn ack_many_lease(
        &self,
        items: &[(String, Option<i64>)],
    ) -> Result<Vec<Option<Settled>>> {
        again_if_deadlock(|| self.ack_many_lease_once(items)).await
    }

    async fn ack_many_lease_once(
        &self,
        items: &[(String, Option<i64>)],
    ) -> Result<Vec<Option<Settled>>> {
        let s = &self.s;
        let d = s.d;
        let l = s
            .locked_until
            .as_ref()
            .ok_or_else(|| Error::invalid("the lease form needs a locked_until column"))?;
        let mut tx = self.pool.begin_with(d.begin()).await?;
        let mut cond = s.mine("a");
        cond.push(format!(
            "{} IN ({})",
            s.c("a", &s.id),
            in_list(d, 1, items.len(), s.id_kind)
        ));
        let sql = format!(
            "SELECT {}, {} FROM {} a WHERE {}{}",
            d.id_text(&s.c("a", &s.id)),
            d.micros(&s.c("a", l)),
            s.table,
            cond.join(" AND "),
            d.for_update()
        );
        let mut q = sqlx::query(&sql);
        for (id, _) in items {
            q = q.bind(id.as_str());
        }
        let now: HashMap<String, Option<i64>> = q
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| (r.get::<String, _>(0), r.get::<Option<i64>, _>(1)))
            .collect();
        let held: Vec<&str> = items
            .iter()
            .filter(|(id, tok)| tok.is_some() && now.get(id).is_some_and(|t| t == tok))
            .map(|(id, _)| id.as_str())
            .collect();
        let settled = if s.processed_at.is_some() {
            Settled::Marked
        } else {
            Settled::Deleted
        };
        if !held.is_empty() {
            let list = in_list(d, 1, held.len(), s.id_kind);
            let sql = match &s.processed_at {
                Some(p) => format!(
                    "UPDATE {} SET {} = {} WHERE {} IN ({list})",
                    s.table,
                    d.ident(p),
                    d.now(),
                    d.ident(&s.id)
                ),
                None => format!(
                    "DELETE FROM {} WHERE {} IN ({list})",
                    s.table,
                    d.ident(&s.id)
                ),
            };
            let mut q = sqlx::query(&sql);
            for id in &held {
                q = q.bind(*id);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        let held: std::collections::HashSet<&str> = held.into_iter().collect();
        Ok(items
            .iter()
            .map(|(id, _)| held.contains(id.as_str()).then_some(settled))
            .collect())
    }

    /// Settle a lease delivery (own short transaction).
    pub(crate) async fn settle_lease(
        &self,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        again_if_deadlock(|| async {
            let tx = self.pool.begin_with(self.s.d.begin()).await?;
            self.write_in(tx, id, token, outcome).await
        })
        .await
    }

    /// Write `outcome` in `tx` (a transaction or a savepoint), then commit it,
    /// or roll it back when the write failed.
    async fn write_in(
        &self,
        mut tx: Transaction<'_, Any>,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        match self.write(&mut tx, id, token, outcome).await {
            Ok(v) => {
                tx.commit().await?;
                Ok(v)
            }
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    /// Settle a delivery of a pinned session (row_lock: in the claim transaction,
    /// fenced by a savepoint; advisory: its own transaction, then unlock).
    pub(crate) async fn settle_pinned(
        &self,
        p: &mut Pinned,
        session: &PSession,
        id: &str,
        outcome: &Outcome,
    ) -> Result<Settled> {
        if session.held.lock().unwrap().remove(id).is_none() {
            return Err(db_err(
                Error::NotHeld,
                format!(
                    "row {id} of queue \"{}\" is not held by this claim",
                    self.s.queue
                ),
            ));
        }
        match p {
            Pinned::Tx(tx) => {
                if session.handler_sp.swap(false, Ordering::AcqRel) {
                    // transactional mode: ack keeps the handler's writes, anything else undoes them
                    let ack = matches!(outcome, Outcome::Ack);
                    end_handler_savepoint(tx, ack).await?;
                }
                // a savepoint fences this outcome from its siblings in the claim transaction
                let sp = tx.begin().await?;
                self.write_in(sp, id, None, outcome).await
            }
            Pinned::Conn(conn) => {
                let r = match conn.begin().await {
                    Ok(tx) => self.write_in(tx, id, None, outcome).await,
                    Err(e) => Err(e.into()),
                };
                // the outcome committed (or failed and rolled back): now the key goes
                self.unlock(conn, id).await?;
                r
            }
        }
    }

    /// Give a delivery back without an outcome.
    pub(crate) async fn release(
        &self,
        p: Option<&mut Pinned>,
        session: Option<&PSession>,
        id: &str,
        token: Option<i64>,
    ) -> Result<()> {
        match (p, self.s.form) {
            (_, Form::Lease { .. }) => {
                let s = &self.s;
                let d = s.d;
                let mut cond = s.mine("x");
                cond.push(format!(
                    "{} = {}",
                    format!("x.{}", d.ident(&s.id)),
                    d.id_param(&d.p(1), s.id_kind)
                ));
                cond.push(format!(
                    "{} = {}",
                    d.micros(&format!("x.{}", d.ident(s.locked_until.as_ref().unwrap()))),
                    d.p(2)
                ));
                let cond = cond.join(" AND ");
                let sql = format!(
                    "UPDATE {} AS x SET {} = NULL WHERE {cond}",
                    s.table,
                    d.ident(s.locked_until.as_ref().unwrap())
                );
                let n = sqlx::query(&sql)
                    .bind(id)
                    .bind(token)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                if n == 0 {
                    return Err(db_err(
                        Error::LeaseLost,
                        format!("lease lost: row {id} of queue \"{}\"", s.queue),
                    ));
                }
                Ok(())
            }
            (Some(Pinned::Conn(conn)), _) => {
                if let Some(s) = session {
                    s.held.lock().unwrap().remove(id);
                }
                self.unlock(conn, id).await
            }
            (Some(Pinned::Tx(tx)), _) => {
                if let Some(s) = session {
                    s.held.lock().unwrap().remove(id);
                    if s.handler_sp.swap(false, Ordering::AcqRel) {
                        end_handler_savepoint(tx, false).await?;
                    }
                }
                Ok(())
            }
            (None, _) => {
                if let Some(s) = session {
                    s.held.lock().unwrap().remove(id);
                }
                Ok(())
            }
        }
    }

    /// One delivery of a pinned session is done; the last ends the session:
    /// row_lock commits, advisory returns its clean connection to the pool.
    pub(crate) async fn finish_one(&self, session: &PSession) -> Result<()> {
        if session.open.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Ok(());
        }
        let p = session.pinned.lock().await.take();
        match p {
            Some(Pinned::Tx(tx)) => Ok(tx.commit().await?),
            Some(Pinned::Conn(mut conn)) => {
                // keys of deliveries that were never settled nor released
                let left: Vec<String> = session
                    .held
                    .lock()
                    .unwrap()
                    .drain()
                    .map(|(id, _)| id)
                    .collect();
                for id in left {
                    if self.unlock(&mut conn, &id).await.is_err() {
                        drop(conn.detach());
                        return Ok(());
                    }
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Lease heartbeat: a new token, or LeaseLost.
    pub(crate) async fn extend(&self, id: &str, token: i64, ttl_micros: i64) -> Result<i64> {
        let s = &self.s;
        let d = s.d;
        let lu = d.ident(s.locked_until.as_ref().unwrap());
        let mut tx = self.pool.begin_with(d.begin()).await?;
        let sql = format!(
            "UPDATE {} SET {lu} = {} WHERE {} = {} AND {} = {}",
            s.table,
            d.now_plus(&d.p(1)),
            d.ident(&s.id),
            d.id_param(&d.p(2), s.id_kind),
            d.micros(&lu),
            d.p(3)
        );
        let n = sqlx::query(&sql)
            .bind(ttl_micros)
            .bind(id)
            .bind(token)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            tx.rollback().await?;
            return Err(db_err(
                Error::LeaseLost,
                format!("lease lost: row {id} of queue \"{}\"", s.queue),
            ));
        }
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = {}",
            d.micros(&lu),
            s.table,
            d.ident(&s.id),
            d.id_param(&d.p(1), s.id_kind)
        );
        let t: i64 = sqlx::query(&sql).bind(id).fetch_one(&mut *tx).await?.get(0);
        tx.commit().await?;
        Ok(t)
    }

    /// ready, delayed, in_flight (lease), dead
    pub(crate) async fn stats(&self) -> Result<(i64, i64, Option<i64>, Option<i64>)> {
        let s = &self.s;
        let d = s.d;
        let mine = {
            let m = s.mine("a");
            if m.is_empty() {
                "1 = 1".into()
            } else {
                m.join(" AND ")
            }
        };
        let delayed = match &s.retry_after {
            Some(r) => format!(
                "COALESCE(SUM(CASE WHEN {} > {} THEN 1 ELSE 0 END), 0)",
                s.c("a", r),
                d.now()
            ),
            None => "0".into(),
        };
        let in_flight = match (&s.locked_until, s.form) {
            (Some(l), Form::Lease { .. }) => format!(
                "COALESCE(SUM(CASE WHEN {} >= {} THEN 1 ELSE 0 END), 0)",
                s.c("a", l),
                d.now()
            ),
            _ => "NULL".into(),
        };
        let sql = format!(
            "SELECT {}, {}, {} FROM {} a WHERE {mine}",
            d.int(&format!(
                "COALESCE(SUM(CASE WHEN {} THEN 1 ELSE 0 END), 0)",
                s.ready("a")
            )),
            d.int(&delayed),
            if in_flight == "NULL" {
                "NULL".into()
            } else {
                d.int(&in_flight)
            },
            s.table
        );
        let r = sqlx::query(&sql).fetch_one(&self.pool).await?;
        let dead = match &s.dead {
            None => None,
            Some(Dead::Group(g)) => Some(
                sqlx::query(&format!(
                    "SELECT {} FROM {} WHERE {} = {}",
                    d.int("count(*)"),
                    s.table,
                    d.ident(s.group.as_ref().unwrap()),
                    d.literal(g)
                ))
                .fetch_one(&self.pool)
                .await?
                .get(0),
            ),
            Some(Dead::Table(t)) => Some(
                sqlx::query(&format!("SELECT {} FROM {t}", d.int("count(*)")))
                    .fetch_one(&self.pool)
                    .await?
                    .get(0),
            ),
        };
        Ok((r.get(0), r.get(1), r.get(2), dead))
    }
}

pub(crate) const HANDLER_SP: &str = "settle_handler";

/// Close the handler's savepoint: keep its writes (ack) or roll them back.
/// Run `f` again (up to 4 more times) while it fails as a deadlock victim
/// (InnoDB, SQLSTATE 40001). Only for work in a transaction of its own: the
/// database rolled the victim's transaction back whole, so it wrote and holds
/// nothing, and running it again can neither lose nor duplicate a delivery.
async fn again_if_deadlock<T, F, Fut>(mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.code() == Some("40001") && tries < 4 => {
                tries += 1;
                tracing::debug!(tries, "settle: a deadlock victim, running it again");
                tokio::time::sleep(Duration::from_millis(tries)).await;
            }
            r => return r,
        }
    }
}

async fn end_handler_savepoint(tx: &mut Transaction<'static, Any>, keep: bool) -> Result<()> {
    let conn: &mut sqlx::AnyConnection = tx;
    if !keep {
        sqlx::Executor::execute(
            &mut *conn,
            format!("ROLLBACK TO SAVEPOINT {HANDLER_SP}").as_str(),
        )
        .await?;
    }
    sqlx::Executor::execute(
        &mut *conn,
        format!("RELEASE SAVEPOINT {HANDLER_SP}").as_str(),
    )
    .await?;
    Ok(())
}

/// A text column; MariaDB sends long text (JSON, LONGTEXT) with a BLOB wire
/// type, which sqlx's Any driver hands over as bytes.
fn text(r: &sqlx::any::AnyRow, i: usize) -> Result<String> {
    match r.try_get::<String, _>(i) {
        Ok(s) => Ok(s),
        Err(_) => {
            let b: Vec<u8> = r.try_get(i)?;
            String::from_utf8(b)
                .map_err(|e| Error::invalid(format!("column {i} is not UTF-8: {e}")))
        }
    }
}

fn claimed(r: &sqlx::any::AnyRow, plus: i64) -> Result<Claimed> {
    let id: String = text(r, 0)?;
    let attempt: i64 = r.try_get(1)?;
    let token: Option<i64> = r.try_get(2)?;
    let json: String = text(r, 3)?;
    Ok(Claimed {
        id,
        attempt: u32::try_from((attempt + plus).max(1)).unwrap_or(u32::MAX),
        token,
        payload: serde_json::from_str(&json).map_err(Error::Payload)?,
    })
}
