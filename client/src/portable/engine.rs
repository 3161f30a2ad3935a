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

/// Which lease tokens an ack statement checks (see `Engine::ack_returning`).
#[derive(Clone, Copy)]
enum Tokens {
    /// none: rows held by a transaction or key
    None,
    /// one token for every row
    Shared(i64),
    /// each row its own, bound after its id
    PerItem,
}

/// A claimed row.
pub(crate) struct Claimed {
    pub id: String,
    pub attempt: u32,
    pub token: Option<i64>,
    /// the row as JSON text, parsed when the handler asks for it (as on the
    /// extension's path): parsing every row at the claim took most of the
    /// client's CPU in a 100-row batch
    pub row: Vec<u8>,
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
    /// row_lock: the database rolled the claim transaction back under us
    /// (MySQL/MariaDB end the whole transaction of a deadlock victim); nothing
    /// more may run on it — later statements would run outside any transaction
    broken: StdMutex<Option<String>>,
    open: AtomicUsize,
    /// ids this claim holds and has not settled (row_lock: claimed by the
    /// transaction; advisory: key → lock held on the connection)
    held: StdMutex<HashMap<String, i64>>,
}

impl PSession {
    /// The claim transaction is lost (see `broken`), because of `e`.
    fn break_with(&self, e: &Error) {
        tracing::warn!(error = %e, "settle: the claim transaction is rolled back; its rows go back to the queue");
        self.broken
            .lock()
            .unwrap()
            .get_or_insert_with(|| e.to_string());
    }

    fn broken(&self) -> Option<String> {
        self.broken.lock().unwrap().clone()
    }

    /// Whether a row_lock outcome for `n` of this claim's deliveries runs in a
    /// savepoint of its own (so that if it fails, the deliveries still open keep
    /// the claim transaction). Not for ack and drop: a row locked by the claim
    /// and deleted in a subtransaction gets a MultiXact as its deleter, which
    /// PostgreSQL's index scans never mark dead (only VACUUM removes it), so
    /// every later claim walks past all of them until then. An ack or drop that
    /// fails (rare: a trigger, a foreign key) rolls back the claim: its rows go
    /// back to the queue. Nor for the one delivery left open: there is nobody
    /// left to protect. (A batch of other outcomes is fenced even when it is the
    /// last, so that when it fails its deliveries can be settled one by one,
    /// each with its own result.)
    fn fence(&self, outcome: &Outcome, n: usize) -> bool {
        !matches!(outcome, Outcome::Ack | Outcome::Drop)
            && (n > 1 || self.open.load(Ordering::Acquire) > n)
    }

    fn new(p: Pinned, held: HashMap<String, i64>) -> PSession {
        PSession {
            open: AtomicUsize::new(held.len()),
            pinned: std::sync::Arc::new(tokio::sync::Mutex::new(Some(p))),
            handler_sp: std::sync::atomic::AtomicBool::new(false),
            broken: StdMutex::new(None),
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
        // no ping before each acquire (sqlx's default): it is a round trip per
        // statement — the lease ack is one statement — and a broken connection
        // fails its statement anyway (as deadpool's fast recycling, on the
        // extension backend)
        let mut opts = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire)
            .test_before_acquire(false);
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

    /// `col IN (…)` for `n` ids bound from parameter `first`, and what must
    /// follow the WHERE clause. MySQL/MariaDB: `ORDER BY col LIMIT n`. Given
    /// `IN (…)` with many ids on a small table InnoDB scans the whole table
    /// instead of reading the ids from the index (`EXPLAIN`: 100 ids of 300
    /// rows, type ALL/index), and a locking scan waits on every row another
    /// worker holds: two batch acks deadlocked at the end of a 20,000-job run.
    /// Ordered by the id with a LIMIT, it reads the ids' ranges (type range).
    /// (A join on a derived table of the ids looked right in `EXPLAIN` but still
    /// deadlocked under load.)
    fn by_ids(&self, col: &str, first: usize, n: usize) -> (String, String) {
        let d = self.d;
        let cond = format!("{col} IN ({})", in_list(d, first, n, self.id_kind));
        let tail = if d == Dialect::MySql {
            format!(" ORDER BY {col} LIMIT {n}")
        } else {
            String::new()
        };
        (cond, tail)
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

    /// For a PostgreSQL claim statement over candidates `c(k, att)`: the
    /// condition that leaves out crash-looping rows (attempt already at
    /// max_attempts, with a dead letter), and the `UNION ALL` that returns
    /// them apart, marked 1 in the fifth column (delivered rows carry 0).
    fn crash_loops(&self) -> (String, String) {
        match self.max.filter(|_| self.dead.is_some()) {
            Some(m) => (
                format!(" AND c.att < {m}"),
                format!(
                    " UNION ALL SELECT CAST(c.k AS TEXT), c.att, NULL, NULL, 1, c.k FROM c WHERE c.att >= {m}"
                ),
            ),
            None => (String::new(), String::new()),
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
        if !sets.is_empty() {
            let (key, tail) = s.by_ids(&d.ident(&s.id), n, ids.len());
            let sql = format!(
                "UPDATE {} SET {} WHERE {key}{tail}",
                s.table,
                sets.join(", ")
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
            Form::Lease { .. } if d == Dialect::Postgres => {
                Ok((self.claim_lease_pg(n).await?, None))
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

    /// The lease claim on PostgreSQL: one autocommitted statement (lock the
    /// candidates, count the attempt and write the token, return the rows), as a
    /// hand-writer would, instead of a transaction of three. Candidates whose
    /// attempt already reached max_attempts (crash loops) are not taken but
    /// returned apart, and each is then moved to the dead letter if it is still
    /// there, ready and at max_attempts.
    async fn claim_lease_pg(&self, n: usize) -> Result<Vec<Claimed>> {
        let s = &self.s;
        let d = s.d;
        let Form::Lease { ttl } = s.form else {
            unreachable!("lease form");
        };
        let idc = d.ident(&s.id);
        let mut sets = vec![format!(
            "{} = {}",
            d.ident(s.locked_until.as_ref().expect("lease: locked_until")),
            d.now_plus("$2")
        )];
        if let Some(a) = &s.attempt {
            sets.push(format!("{0} = COALESCE(a.{0}, 0) + 1", d.ident(a)));
        }
        let (live, poison) = s.crash_loops();
        let sql = format!(
            "WITH c AS (SELECT a.{idc} AS k, {att} AS att FROM {t} a WHERE {ready} ORDER BY a.{idc} LIMIT $1 FOR UPDATE SKIP LOCKED), \
                  u AS (UPDATE {t} a SET {sets} FROM c WHERE a.{idc} = c.k{live} RETURNING a.*) \
             SELECT {id}, {att}, {token}, {json}, 0, a.{idc} FROM u a{poison} ORDER BY 6",
            att = s.attempt_sel("a"),
            t = s.table,
            ready = s.ready("a"),
            sets = sets.join(", "),
            id = d.id_text(&s.c("a", &s.id)),
            token = s.token_sel("a"),
            json = d.json_row("a", &s.cols),
        );
        let rows = sqlx::query(&sql)
            .bind(n as i64)
            .bind(crate::client::micros(ttl))
            .fetch_all(&self.pool)
            .await?;
        // the rows delivered are already leased: a failed move must not lose
        // them (the row stays, and a later claim tries again)
        self.deliver_or_move(&rows).await
    }

    /// Move a crash-looping row to the dead letter if it is still there, ready
    /// and at max_attempts (another claim may have moved it meanwhile).
    async fn move_poison(&self, id: &str) -> Result<()> {
        let s = &self.s;
        let d = s.d;
        let (Some(max), Some(a), Some(_)) = (s.max, &s.attempt, &s.dead) else {
            return Ok(());
        };
        let mut tx = self.pool.begin_with(d.begin()).await?;
        let sql = format!(
            "SELECT 1 FROM {} a WHERE {} = {} AND {} AND COALESCE({}, 0) >= {max}{}",
            s.table,
            s.c("a", &s.id),
            d.id_param(&d.p(1), s.id_kind),
            s.ready("a"),
            s.c("a", a),
            d.skip_locked()
        );
        if sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
            .is_some()
        {
            for sql in s.dead_sql(false) {
                exec_with_id(&mut tx, &sql, id).await?;
            }
            self.warn_dead(id);
        }
        tx.commit().await?;
        Ok(())
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
        // try as many keys as are still wanted, in one statement, until there
        // are enough or no candidates left
        let mut locked: HashMap<String, i64> = HashMap::new();
        let mut rest = &cands[..];
        while locked.len() < n && !rest.is_empty() {
            let (now, later) = rest.split_at((n - locked.len()).min(rest.len()));
            rest = later;
            match self.try_lock_many(&mut conn, now).await {
                Ok(got) => locked.extend(got.into_iter().map(|id| {
                    let key = advisory_key(&s.queue, &id);
                    (id, key)
                })),
                Err(e) => {
                    drop(conn.detach()); // closes: the server drops every key
                    return Err(e);
                }
            }
        }
        if locked.is_empty() {
            return Ok((Vec::new(), None));
        }
        // re-check with a fresh read now that the keys are ours, count the attempt
        let ids: Vec<String> = locked.keys().cloned().collect();
        let res: Result<(Vec<Claimed>, Vec<String>)> = if d == Dialect::Postgres {
            self.take_locked_pg(&mut conn, &ids)
                .await
                .map(|out| (out, Vec::new()))
        } else {
            async {
                let mut tx = conn.begin().await?;
                let (key, tail) = s.by_ids(&s.c("a", &s.id), 1, ids.len());
                let sql = format!(
                    "SELECT {}, {} FROM {} a WHERE {key} AND {}{tail}{}",
                    d.id_text(&s.c("a", &s.id)),
                    s.attempt_sel("a"),
                    s.table,
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
            .await
        };
        let (out, _) = match res {
            Ok(v) => v,
            Err(e) => {
                drop(conn.detach()); // closes: the server drops every key
                return Err(e);
            }
        };
        // give back every key not delivered (gone, not ready any more, or moved)
        let taken: std::collections::HashSet<&str> = out.iter().map(|c| c.id.as_str()).collect();
        let (held, gone): (HashMap<String, i64>, HashMap<String, i64>) = locked
            .into_iter()
            .partition(|(id, _)| taken.contains(id.as_str()));
        let gone: Vec<&str> = gone.keys().map(String::as_str).collect();
        if let Err(e) = self.unlock_many(&mut conn, &gone).await {
            drop(conn.detach());
            return Err(e);
        }
        if out.is_empty() {
            return Ok((out, None));
        }
        Ok((out, Some(PSession::new(Pinned::Conn(conn), held))))
    }

    /// The advisory claim's take on PostgreSQL, once this connection holds the
    /// keys of `ids`: one autocommitted statement re-reads them (its snapshot is
    /// taken after the keys were, and FOR UPDATE re-checks a row changed since),
    /// counts the attempt of those still ready and returns them, where MySQL
    /// and the general path need a transaction of four. Crash-looping rows
    /// (attempt at max_attempts) are left out and moved to the dead letter.
    async fn take_locked_pg(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<Claimed>> {
        let s = &self.s;
        let d = s.d;
        let idc = d.ident(&s.id);
        let (key, _) = s.by_ids(&s.c("a", &s.id), 1, ids.len());
        let (live, poison) = s.crash_loops();
        let cand = format!(
            "SELECT a.{idc} AS k, {att} AS att FROM {t} a WHERE {key} AND {ready} FOR UPDATE",
            att = s.attempt_sel("a"),
            t = s.table,
            ready = s.ready("a"),
        );
        let took = match &s.attempt {
            Some(a) => format!(
                "UPDATE {t} a SET {0} = COALESCE(a.{0}, 0) + 1 FROM c WHERE a.{idc} = c.k{live} RETURNING a.*",
                d.ident(a),
                t = s.table
            ),
            // nothing to count: the rows are read (and locked) by c
            None => format!(
                "SELECT a.* FROM {t} a JOIN c ON a.{idc} = c.k WHERE true{live}",
                t = s.table
            ),
        };
        let sql = format!(
            "WITH c AS ({cand}), u AS ({took}) \
             SELECT {id}, {att}, NULL, {json}, 0, a.{idc} FROM u a{poison} ORDER BY 6",
            id = d.id_text(&s.c("a", &s.id)),
            att = s.attempt_sel("a"),
            json = d.json_row("a", &s.cols),
        );
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        // this connection still holds the crash-looping rows' keys: no other
        // claim takes them before they are moved
        self.deliver_or_move(&rows).await
    }

    /// The rows of a PostgreSQL claim statement (see [`Shape::crash_loops`]):
    /// those to deliver, while each crash-looping one is moved to the dead
    /// letter (a move that fails leaves the row for a later claim).
    async fn deliver_or_move(&self, rows: &[sqlx::any::AnyRow]) -> Result<Vec<Claimed>> {
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            if r.try_get::<i32, _>(4)? == 0 {
                out.push(claimed(r, 0)?);
            } else {
                let id = text(r, 0)?;
                if let Err(e) = self.move_poison(&id).await {
                    tracing::warn!(queue = %self.s.queue, id = %id, error = %e, "could not move a crash-looping row to the dead letter; a later claim tries again");
                }
            }
        }
        Ok(out)
    }

    /// Try the advisory keys of `ids` without waiting, in one statement per
    /// chunk (one column per key); the ids whose key this connection now holds.
    async fn try_lock_many(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<String>> {
        let d = self.s.d;
        if d == Dialect::Sqlite {
            return Err(Error::invalid("SQLite has no advisory locks"));
        }
        let mut got = Vec::new();
        for chunk in ids.chunks(LOCKS_PER_STATEMENT) {
            let cols: Vec<String> = (1..=chunk.len())
                .map(|i| match d {
                    Dialect::Postgres => format!(
                        "CAST(CASE WHEN pg_try_advisory_lock({}) THEN 1 ELSE 0 END AS BIGINT)",
                        d.p(i)
                    ),
                    _ => format!("CAST(GET_LOCK({}, 0) AS SIGNED)", d.p(i)),
                })
                .collect();
            let sql = format!("SELECT {}", cols.join(", "));
            let row = self
                .bind_keys(sqlx::query(&sql), chunk)
                .fetch_one(&mut *conn)
                .await?;
            for (i, id) in chunk.iter().enumerate() {
                if row.try_get::<Option<i64>, _>(i)? == Some(1) {
                    got.push(id.clone());
                }
            }
        }
        Ok(got)
    }

    fn bind_keys<'q>(
        &self,
        mut q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
        ids: &'q [impl AsRef<str>],
    ) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
        for id in ids {
            q = match self.s.d {
                Dialect::MySql => q.bind(mysql_lock_name(&self.s.queue, id.as_ref())),
                _ => q.bind(advisory_key(&self.s.queue, id.as_ref())),
            };
        }
        q
    }

    /// Let the advisory keys of `ids` go, in one statement per chunk.
    async fn unlock_many(&self, conn: &mut sqlx::AnyConnection, ids: &[&str]) -> Result<()> {
        let d = self.s.d;
        if d == Dialect::Sqlite {
            return Ok(());
        }
        for chunk in ids.chunks(LOCKS_PER_STATEMENT) {
            let cols: Vec<String> = (1..=chunk.len())
                .map(|i| match d {
                    Dialect::Postgres => format!("pg_advisory_unlock({})", d.p(i)),
                    _ => format!("RELEASE_LOCK({})", d.p(i)),
                })
                .collect();
            let sql = format!("SELECT {}", cols.join(", "));
            self.bind_keys(sqlx::query(&sql), chunk)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    async fn unlock(&self, conn: &mut sqlx::AnyConnection, id: &str) -> Result<()> {
        self.unlock_many(conn, &[id]).await
    }

    /// The error for a delivery whose row this claim no longer holds.
    fn not_held(&self, id: &str) -> Error {
        if matches!(self.s.form, Form::Lease { .. }) {
            db_err(
                Error::LeaseLost,
                format!(
                    "lease lost: row {id} of queue \"{}\" no longer holds this delivery's token",
                    self.s.queue
                ),
            )
        } else {
            db_err(
                Error::NotHeld,
                format!(
                    "row {id} of queue \"{}\" is not held by this delivery",
                    self.s.queue
                ),
            )
        }
    }

    /// Write `outcome` for a held row, on `conn` inside an open transaction.
    async fn write(
        &self,
        conn: &mut sqlx::AnyConnection,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        let item = [(id.to_owned(), token)];
        let Outcome::Custom(name) = outcome else {
            let r = self.write_many(conn, &item, outcome).await?;
            return r[0].ok_or_else(|| self.not_held(id));
        };
        let s = &self.s;
        let Some(sql) = s.custom.get(name) else {
            return Err(Error::invalid(format!(
                "queue \"{}\" has no custom outcome \"{name}\"",
                s.queue
            )));
        };
        if self.lock_held(conn, &item).await?.is_empty() {
            return Err(self.not_held(id));
        }
        exec_with_id(conn, sql, id).await?;
        Ok(Settled::Custom)
    }

    /// Lock the rows of `items` this queue still holds for them (lease: with the
    /// delivery's token) and read their stored attempts: id → attempt.
    async fn lock_held(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
    ) -> Result<HashMap<String, i64>> {
        let s = &self.s;
        let d = s.d;
        let lease = matches!(s.form, Form::Lease { .. });
        let (key, tail) = s.by_ids(&s.c("a", &s.id), 1, items.len());
        let mut cond = s.mine("a");
        cond.push(key);
        // row_lock: the claim transaction holds these rows already
        let lock = if s.form == Form::RowLock {
            ""
        } else {
            d.for_update()
        };
        let sql = format!(
            "SELECT {}, {}, {} FROM {} a WHERE {}{tail}{lock}",
            d.id_text(&s.c("a", &s.id)),
            s.attempt_sel("a"),
            s.token_sel("a"),
            s.table,
            cond.join(" AND "),
        );
        let mut q = sqlx::query(&sql);
        for (id, _) in items {
            q = q.bind(id.as_str());
        }
        let now: HashMap<String, (i64, Option<i64>)> = q
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| Ok((text(r, 0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect::<Result<_>>()?;
        Ok(items
            .iter()
            .filter_map(|(id, tok)| {
                let (attempt, t) = now.get(id)?;
                (!lease || (tok.is_some() && t == tok)).then(|| (id.clone(), *attempt))
            })
            .collect())
    }

    /// Write one ack, drop, retry or retry_after for many rows, on `conn` inside
    /// an open transaction: lock the rows still held for them, move a retried row
    /// whose delivery reached max_attempts to the dead letter, then one statement
    /// for the rest. `None` for an item not held (nothing written for it).
    async fn write_many(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
        outcome: &Outcome,
    ) -> Result<Vec<Option<Settled>>> {
        let s = &self.s;
        let d = s.d;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // row_lock/advisory ack or drop on PostgreSQL or SQLite: one statement that
        // writes the rows still there and returns which it wrote. The claim's
        // transaction (row_lock) or key (advisory) holds them already and an ack
        // counts nothing, so there is nothing to lock or read first — the floor's
        // single DELETE. (MySQL has no RETURNING; MariaDB's row_lock batches go
        // one statement per id, below.)
        if matches!(outcome, Outcome::Ack | Outcome::Drop)
            && matches!(s.form, Form::RowLock | Form::Advisory)
            && d != Dialect::MySql
        {
            return self.ack_returning(conn, items, Tokens::None).await;
        }
        let held = self.lock_held(conn, items).await?;
        let retrying = matches!(outcome, Outcome::Retry | Outcome::RetryAfter(_));
        let mut dead = std::collections::HashSet::new();
        if retrying && s.dead.is_some() {
            if let Some(max) = s.max {
                // row_lock counts this delivery here; the others counted it at the claim
                let plus = i64::from(s.form == Form::RowLock);
                for (id, _) in items {
                    if held.get(id).is_some_and(|a| a + plus >= max) && dead.insert(id.as_str()) {
                        for sql in s.dead_sql(s.form == Form::RowLock) {
                            exec_with_id(conn, &sql, id).await?;
                        }
                        self.warn_dead(id);
                    }
                }
            }
        }
        let mut go: Vec<&str> = Vec::with_capacity(held.len());
        for (id, _) in items {
            if held.contains_key(id) && !dead.contains(id.as_str()) && !go.contains(&id.as_str()) {
                go.push(id);
            }
        }
        // MySQL/MariaDB row_lock with integer ids: one statement per id, sent
        // together in one round trip. InnoDB's locking scan of `IN (…)` (range or
        // join alike) reads a record past each id — another worker's row when
        // their claims interleave — and waits for it: under load two batch acks
        // deadlocked, and a deadlock ends a row_lock claim whole. A lookup by
        // `id = n` on the unique key touches only that row.
        let one_by_one = d == Dialect::MySql
            && s.form == Form::RowLock
            && s.id_kind == IdKind::Integer
            && go.len() > 1;
        // the statement up to its WHERE (None: nothing to write), and the delay
        // it binds first
        let (verb, delay, settled) = match outcome {
            Outcome::Ack | Outcome::Drop => match &s.processed_at {
                Some(p) => (
                    Some(format!(
                        "UPDATE {} SET {} = {}",
                        s.table,
                        d.ident(p),
                        d.now()
                    )),
                    None,
                    Settled::Marked,
                ),
                None => (
                    Some(format!("DELETE FROM {}", s.table)),
                    None,
                    Settled::Deleted,
                ),
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
                let mut sets = Vec::new();
                if let Some(us) = delay {
                    // parameter order: the delay first, then the ids
                    let p = if one_by_one { us.to_string() } else { d.p(1) };
                    sets.push(format!(
                        "{} = {}",
                        d.ident(s.retry_after.as_ref().unwrap()),
                        d.now_plus(&p)
                    ));
                }
                if s.form == Form::RowLock {
                    if let Some(a) = &s.attempt {
                        sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
                    }
                }
                if let (Some(l), Form::Lease { .. }) = (&s.locked_until, s.form) {
                    sets.push(format!("{} = NULL", d.ident(l)));
                }
                let settled = if delay.is_some() {
                    Settled::Delayed
                } else if sets.is_empty() && s.form == Form::RowLock {
                    Settled::Released
                } else {
                    Settled::Retried
                };
                // row_lock without an attempt column, advisory retry: nothing to write
                let verb = (!sets.is_empty())
                    .then(|| format!("UPDATE {} SET {}", s.table, sets.join(", ")));
                (verb, delay, settled)
            }
            Outcome::Custom(_) => {
                return Err(Error::invalid(
                    "a custom outcome is settled one row at a time",
                ))
            }
        };
        match verb {
            Some(verb) if !go.is_empty() && one_by_one => {
                let idc = d.ident(&s.id);
                let mut text = String::new();
                for id in &go {
                    let n: i64 = id
                        .parse()
                        .map_err(|_| Error::invalid(format!("row id {id:?} is not an integer")))?;
                    text.push_str(&format!("{verb} WHERE {idc} = {n};"));
                }
                // no parameters: sent as one text query, the statements run in turn
                sqlx::Executor::execute(&mut *conn, text.as_str()).await?;
            }
            Some(verb) if !go.is_empty() => {
                let first = 1 + usize::from(delay.is_some());
                let (key, tail) = s.by_ids(&d.ident(&s.id), first, go.len());
                let sql = format!("{verb} WHERE {key}{tail}");
                let mut q = sqlx::query(&sql);
                if let Some(us) = delay {
                    q = q.bind(us);
                }
                for id in &go {
                    q = q.bind(*id);
                }
                q.execute(&mut *conn).await?;
            }
            _ => {}
        }
        Ok(items
            .iter()
            .map(|(id, _)| {
                if dead.contains(id.as_str()) {
                    Some(Settled::DeadLettered)
                } else {
                    held.contains_key(id).then_some(settled)
                }
            })
            .collect())
    }

    /// Ack (or drop) `items` in one statement with `RETURNING` the ids written,
    /// on `exec`; `None` for an item it did not write. Which rows it may write:
    /// - `Tokens::None`: the held rows by id ([`ack_sql`](Self::ack_sql));
    /// - `Tokens::Shared(t)`: those still holding the one lease token `t`
    ///   (deliveries of one claim);
    /// - `Tokens::PerItem`: distinct ids each still holding its own token,
    ///   `(id = ? AND token = ?) OR …` — deliveries of several claims settled
    ///   together (see `combine`).
    async fn ack_returning<'c, E>(
        &self,
        exec: E,
        items: &[(String, Option<i64>)],
        tokens: Tokens,
    ) -> Result<Vec<Option<Settled>>>
    where
        E: sqlx::Executor<'c, Database = Any>,
    {
        let s = &self.s;
        let d = s.d;
        let (sql, settled) = match tokens {
            Tokens::None => self.ack_sql(items.len(), false),
            Tokens::Shared(_) => self.ack_sql(items.len(), true),
            Tokens::PerItem => {
                let t = &s.table;
                let lu = d.micros(&s.c(t, s.locked_until.as_ref().expect("lease: locked_until")));
                let pairs: Vec<String> = (0..items.len())
                    .map(|i| {
                        format!(
                            "({} = {} AND {lu} = {})",
                            s.c(t, &s.id),
                            d.id_param(&d.p(2 * i + 1), s.id_kind),
                            d.p(2 * i + 2)
                        )
                    })
                    .collect();
                let mut cond = s.mine(t);
                cond.push(format!("({})", pairs.join(" OR ")));
                self.ack_where(&cond.join(" AND "))
            }
        };
        let sql = format!("{sql} RETURNING {}", d.id_text(&d.ident(&s.id)));
        let mut q = sqlx::query(&sql);
        for (id, token) in items {
            q = q.bind(id.as_str());
            if let Tokens::PerItem = tokens {
                q = q.bind(*token);
            }
        }
        if let Tokens::Shared(t) = tokens {
            q = q.bind(t);
        }
        let done: std::collections::HashSet<String> = q
            .fetch_all(exec)
            .await?
            .iter()
            .map(|r| text(r, 0))
            .collect::<Result<_>>()?;
        Ok(items
            .iter()
            .map(|(id, _)| done.contains(id).then_some(settled))
            .collect())
    }

    /// Settle many lease deliveries with one ack, drop, retry or retry_after in
    /// one short transaction. `None` for a delivery whose lease was lost.
    pub(crate) async fn settle_many_lease(
        &self,
        items: &[(String, Option<i64>)],
        outcome: &Outcome,
    ) -> Result<Vec<Option<Settled>>> {
        let first = items.first().and_then(|(_, t)| *t);
        if let (Outcome::Ack | Outcome::Drop, Some(token)) = (outcome, first) {
            if self.s.d != Dialect::MySql {
                if items.iter().all(|(_, t)| *t == first) {
                    // claimed together, one deadline: one autocommitted statement, as for
                    // one delivery, reporting the rows it wrote (PostgreSQL, SQLite)
                    return self
                        .ack_returning(&self.pool, items, Tokens::Shared(token))
                        .await;
                }
                let ids: std::collections::HashSet<&str> =
                    items.iter().map(|(id, _)| id.as_str()).collect();
                if ids.len() == items.len() && items.iter().all(|(_, t)| t.is_some()) {
                    return self.ack_returning(&self.pool, items, Tokens::PerItem).await;
                }
            }
        }
        again_if_deadlock(|| async {
            let mut tx = self.pool.begin_with(self.s.d.begin()).await?;
            let r = self.write_many(&mut tx, items, outcome).await?;
            tx.commit().await?;
            Ok(r)
        })
        .await
    }

    /// The ack (or drop) of `n` rows of this queue not settled yet: ids bound as
    /// parameters 1..=n, and with `token` the lease token as n + 1 (only the
    /// rows that still hold it are written).
    fn ack_sql(&self, n: usize, token: bool) -> (String, Settled) {
        self.ack_where(&self.held_cond(n, token))
    }

    /// The ack (or drop) of the rows `WHERE cond`, and what it writes.
    fn ack_where(&self, cond: &str) -> (String, Settled) {
        let s = &self.s;
        let d = s.d;
        let t = &s.table;
        match &s.processed_at {
            Some(p) => (
                format!("UPDATE {t} SET {} = {} WHERE {cond}", d.ident(p), d.now()),
                Settled::Marked,
            ),
            None => (format!("DELETE FROM {t} WHERE {cond}"), Settled::Deleted),
        }
    }

    /// The WHERE of a write to `n` rows of this queue not settled yet, the ids
    /// bound as parameters 1..=n; with `token`, only rows that still hold the
    /// lease token bound as n + 1.
    fn held_cond(&self, n: usize, token: bool) -> String {
        let s = &self.s;
        let d = s.d;
        let t = &s.table;
        let mut cond = s.mine(t);
        cond.push(format!(
            "{} IN ({})",
            s.c(t, &s.id),
            in_list(d, 1, n, s.id_kind)
        ));
        if token {
            let l = s.locked_until.as_ref().expect("lease: locked_until");
            cond.push(format!("{} = {}", d.micros(&s.c(t, l)), d.p(n + 1)));
        }
        cond.join(" AND ")
    }

    /// Settle a lease delivery (own short transaction).
    pub(crate) async fn settle_lease(
        &self,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        if let (Outcome::Ack | Outcome::Drop, Some(t)) = (outcome, token) {
            return again_if_deadlock(|| self.ack_lease(id, t)).await;
        }
        again_if_deadlock(|| async {
            let tx = self.pool.begin_with(self.s.d.begin()).await?;
            self.write_in(tx, id, token, outcome).await
        })
        .await
    }

    /// Ack or drop one lease delivery: one autocommitted statement that writes
    /// only while the row still holds the delivery's token.
    async fn ack_lease(&self, id: &str, token: i64) -> Result<Settled> {
        let (sql, settled) = self.ack_sql(1, true);
        let n = sqlx::query(&sql)
            .bind(id)
            .bind(token)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(self.not_held(id));
        }
        Ok(settled)
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
        if let Some(why) = session.broken() {
            session.held.lock().unwrap().remove(id);
            return Err(self.rolled_back(Some(id), &why));
        }
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
                if !session.fence(outcome, 1) {
                    return self
                        .write(tx, id, None, outcome)
                        .await
                        .inspect_err(|e| session.break_with(e));
                }
                // a savepoint fences this outcome from its siblings in the claim transaction
                let mut sp = tx.begin().await?;
                match self.write(&mut sp, id, None, outcome).await {
                    Ok(v) => {
                        sp.commit().await?;
                        Ok(v)
                    }
                    Err(e) => {
                        self.undo(sp, session, &e).await;
                        Err(e)
                    }
                }
            }
            Pinned::Conn(conn) => {
                let r = match conn.begin().await {
                    Ok(tx) => self.write_in(tx, id, None, outcome).await,
                    Err(e) => Err(e.into()),
                };
                // the outcome committed (or failed and rolled back): now the key
                // goes (if that fails, the session's end tries again, or closes
                // the connection; the outcome stands)
                if self.unlock(conn, id).await.is_err() {
                    session
                        .held
                        .lock()
                        .unwrap()
                        .insert(id.to_owned(), advisory_key(&self.s.queue, id));
                }
                r
            }
        }
    }

    /// Settle many deliveries of one pinned session with one ack, drop, retry or
    /// retry_after: row_lock in the claim transaction, fenced by one savepoint;
    /// advisory in one transaction of its own, then every key let go in one
    /// statement. `Err` when the batch wrote nothing (undone to its savepoint,
    /// or its transaction rolled back): the ids are held again, so the caller
    /// can settle them one at a time and each gets its own result.
    pub(crate) async fn settle_pinned_many(
        &self,
        p: &mut Pinned,
        session: &PSession,
        ids: &[String],
        outcome: &Outcome,
    ) -> Result<Vec<Result<Settled>>> {
        if let Some(why) = session.broken() {
            return Err(self.rolled_back(Some(&ids.join(", ")), &why));
        }
        let taken: HashMap<String, i64> = {
            let mut held = session.held.lock().unwrap();
            ids.iter()
                .filter_map(|id| held.remove(id).map(|k| (id.clone(), k)))
                .collect()
        };
        let items: Vec<(String, Option<i64>)> = ids
            .iter()
            .filter(|id| taken.contains_key(*id))
            .map(|id| (id.clone(), None))
            .collect();
        let give_back = |e: Error| {
            session.held.lock().unwrap().extend(taken.clone());
            e
        };
        let written = match p {
            Pinned::Tx(tx) => {
                if session.handler_sp.swap(false, Ordering::AcqRel) {
                    // transactional mode: ack keeps the handler's writes, anything else undoes them
                    let ack = matches!(outcome, Outcome::Ack);
                    end_handler_savepoint(tx, ack).await.map_err(give_back)?;
                }
                if !session.fence(outcome, items.len()) {
                    // a failure aborts the claim transaction (see `PSession::fence`)
                    self.write_many(tx, &items, outcome)
                        .await
                        .inspect_err(|e| session.break_with(e))?
                } else {
                    let mut sp = tx.begin().await.map_err(|e| give_back(e.into()))?;
                    match self.write_many(&mut sp, &items, outcome).await {
                        Ok(v) => {
                            sp.commit().await.map_err(|e| give_back(e.into()))?;
                            v
                        }
                        Err(e) => {
                            self.undo(sp, session, &e).await;
                            return Err(give_back(e));
                        }
                    }
                }
            }
            Pinned::Conn(conn) => {
                let mut tx = conn.begin().await.map_err(|e| give_back(e.into()))?;
                match self.write_many(&mut tx, &items, outcome).await {
                    Ok(v) => {
                        tx.commit().await.map_err(|e| give_back(e.into()))?;
                        // the outcomes committed: now the keys go (if that fails,
                        // the session's end tries again, or closes the connection)
                        let done: Vec<&str> = items.iter().map(|(id, _)| id.as_str()).collect();
                        if self.unlock_many(conn, &done).await.is_err() {
                            session.held.lock().unwrap().extend(taken.clone());
                        }
                        v
                    }
                    Err(e) => {
                        // (a failed rollback means a broken connection: the
                        // session's end then closes it, and the keys go with it)
                        let _ = tx.rollback().await;
                        return Err(give_back(e));
                    }
                }
            }
        };
        let mut written = items.iter().map(|(id, _)| id).zip(written);
        let mut next = written.next();
        Ok(ids
            .iter()
            .map(|id| match &next {
                Some((wid, r)) if *wid == id => {
                    let r = *r;
                    next = written.next();
                    r.ok_or_else(|| self.not_held(id))
                }
                _ => Err(self.not_held(id)),
            })
            .collect())
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
                let sql = format!(
                    "UPDATE {} SET {} = NULL WHERE {}",
                    s.table,
                    s.d.ident(s.locked_until.as_ref().unwrap()),
                    self.held_cond(1, true)
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

    /// Undo a failed outcome to its savepoint in the claim transaction. When
    /// that is impossible, or the failure was a MySQL/MariaDB deadlock (which
    /// rolls back the victim's whole transaction), the claim is over: every row
    /// it held goes back to the queue, and the session refuses further writes.
    async fn undo(&self, sp: Transaction<'_, Any>, session: &PSession, e: &Error) {
        let whole = self.s.d == Dialect::MySql && e.code() == Some("40001");
        if sp.rollback().await.is_err() || whole {
            session.break_with(e);
        }
    }

    /// The error of a settle on a claim whose transaction was rolled back
    /// (`None`: the claim's end, where its earlier outcomes were lost with it).
    fn rolled_back(&self, id: Option<&str>, why: &str) -> Error {
        let what = match id {
            Some(id) => format!("nothing was written for row {id}"),
            None => "the outcomes settled in it were not kept".into(),
        };
        db_err(
            Error::Database,
            format!(
                "the claim transaction of queue \"{}\" was rolled back ({why}): {what}; its rows go back to the queue",
                self.s.queue
            ),
        )
    }

    /// One delivery of a pinned session is done; the last ends the session:
    /// row_lock commits, advisory returns its clean connection to the pool.
    pub(crate) async fn finish_one(&self, session: &PSession) -> Result<()> {
        if session.open.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Ok(());
        }
        let p = session.pinned.lock().await.take();
        match p {
            Some(Pinned::Tx(tx)) if session.broken().is_some() => {
                drop(tx);
                Err(self.rolled_back(None, &session.broken().unwrap_or_default()))
            }
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
                let left: Vec<&str> = left.iter().map(String::as_str).collect();
                if self.unlock_many(&mut conn, &left).await.is_err() {
                    drop(conn.detach());
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

/// Advisory keys tried or let go by one statement (a column each; PostgreSQL
/// allows 1,664 columns in a result).
const LOCKS_PER_STATEMENT: usize = 500;

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
        row: json.into_bytes(),
    })
}
