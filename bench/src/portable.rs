//! The portable path (`Client::portable`) on each database it supports, beside
//! the best hand-written SQL for the same work on that database ("floor", sqlx
//! as the client uses it), in the same run: PostgreSQL without the extension
//! (the `--conn` server, plain tables), MariaDB/MySQL (`--mariadb URL`) and
//! SQLite (`--sqlite PATH`, a file). `--mixed` settles with a mix of outcomes
//! instead of ack only, client and floor alike (see [`mixed_outcome`]).

use crate::{cpu, pct, Args, Form};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Row};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Server {
    /// PostgreSQL through the extension (`Client::connect`); its floor is the
    /// same hand-written SQL as the portable PostgreSQL row's
    PgExt,
    Postgres,
    MariaDb,
    Sqlite,
}

impl Server {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Server::PgExt => "pg+ext",
            Server::Postgres => "postgres",
            Server::MariaDb => "mariadb",
            Server::Sqlite => "sqlite",
        }
    }
    fn dialect(self) -> settle::Dialect {
        match self {
            Server::PgExt | Server::Postgres => settle::Dialect::Postgres,
            Server::MariaDb => settle::Dialect::MySql,
            Server::Sqlite => settle::Dialect::Sqlite,
        }
    }
    /// The n-th bind parameter.
    fn p(self, n: usize) -> String {
        self.dialect().p(n)
    }
    /// `n` parameters from the `first`-th on, comma-separated.
    /// `DELETE` of `n` ids (parameters from 1), `and` a further condition.
    /// MariaDB: ordered by the id with a LIMIT, so InnoDB reads the ids' ranges
    /// of the primary key — given `IN (…)` of many ids on a small table it scans
    /// the whole table, waiting on every row another worker holds (deadlocks).
    fn delete_ids(self, t: &str, n: usize, and: &str) -> String {
        self.write_ids(&format!("DELETE FROM {t}"), n, and)
    }
    /// `UPDATE … SET sets` of `n` ids, as [`delete_ids`](Self::delete_ids).
    fn update_ids(self, t: &str, sets: &str, n: usize, and: &str) -> String {
        self.write_ids(&format!("UPDATE {t} SET {sets}"), n, and)
    }
    /// `head` (a `DELETE FROM t` or an `UPDATE t SET …`) of `n` ids.
    fn write_ids(self, head: &str, n: usize, and: &str) -> String {
        let and = if and.is_empty() {
            String::new()
        } else {
            format!(" AND {and}")
        };
        let order = if self == Server::MariaDb {
            format!(" ORDER BY id LIMIT {n}")
        } else {
            String::new()
        };
        format!("{head} WHERE id IN ({}){and}{order}", self.list(1, n))
    }
    fn list(self, first: usize, n: usize) -> String {
        (first..first + n)
            .map(|i| self.p(i))
            .collect::<Vec<_>>()
            .join(", ")
    }
    fn now(self) -> &'static str {
        self.dialect().now()
    }
    /// The payload column as text.
    fn payload(self) -> &'static str {
        match self {
            Server::Postgres | Server::PgExt => "CAST(payload AS TEXT)",
            Server::MariaDb => "CAST(payload AS CHAR CHARACTER SET utf8mb4)",
            Server::Sqlite => "payload",
        }
    }
    /// An integer column read as an i64 (sqlx's `Any` decodes no int4 as i64).
    fn int8(self, e: &str) -> String {
        match self {
            Server::Postgres | Server::PgExt => format!("CAST({e} AS BIGINT)"),
            Server::MariaDb => format!("CAST({e} AS SIGNED)"),
            Server::Sqlite => e.to_string(),
        }
    }
    fn ready(self) -> String {
        format!("(retry_after IS NULL OR retry_after <= {})", self.now())
    }
    fn lease_free(self) -> String {
        format!("(locked_until IS NULL OR locked_until < {})", self.now())
    }
    /// A lease token (epoch microseconds) bound as parameter `p`, in the column's type.
    fn token_value(self, p: &str) -> String {
        match self {
            Server::Postgres | Server::PgExt => {
                format!("(timestamptz 'epoch' + CAST({p} AS BIGINT) * interval '1 microsecond')")
            }
            Server::MariaDb => format!("DATE_ADD('1970-01-01 00:00:00', INTERVAL {p} MICROSECOND)"),
            Server::Sqlite => format!("CAST({p} AS INTEGER)"),
        }
    }
}

pub(crate) struct Backend {
    pub(crate) db: Server,
    pub(crate) url: String,
}

/// The backends given on the command line: PostgreSQL (the `--conn` server)
/// always, MariaDB and SQLite when asked for.
pub(crate) fn backends(a: &Args) -> Vec<Backend> {
    let url = crate::pg_url(&a.conn);
    let mut v = vec![
        Backend {
            db: Server::PgExt,
            url: url.clone(),
        },
        Backend {
            db: Server::Postgres,
            url,
        },
    ];
    if let Some(u) = &a.mariadb {
        v.push(Backend {
            db: Server::MariaDb,
            url: u.replacen("mariadb://", "mysql://", 1),
        });
    }
    if let Some(p) = &a.sqlite {
        v.push(Backend {
            db: Server::Sqlite,
            url: format!("sqlite://{p}?mode=rwc"),
        });
    }
    v.retain(|b| a.backends.is_empty() || a.backends.iter().any(|n| n == b.db.name()));
    v
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Imp {
    Floor,
    Client,
}

struct Res {
    jobs: usize,
    deliveries: usize,
    secs: f64,
    p50: f64,
    p99: f64,
    srv: f64,
    cli: f64,
}

impl Res {
    fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs
    }
}

pub(crate) async fn pool(b: &Backend, max: u32) -> AnyPool {
    sqlx::any::install_default_drivers();
    // no reaper task (sqlx #3645), as the client's own pool
    let mut o = AnyPoolOptions::new()
        .max_connections(max)
        .idle_timeout(None)
        .max_lifetime(None);
    if b.db == Server::MariaDb {
        // InnoDB's locking reads in REPEATABLE READ also lock the rows they pass
        // over (leased rows, for instance) and the gaps, so concurrent claims and
        // deletes deadlock (1213); a queue on InnoDB runs in READ COMMITTED
        o = o.after_connect(|c: &mut sqlx::AnyConnection, _| {
            Box::pin(async move {
                sqlx::Executor::execute(
                    &mut *c,
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                )
                .await?;
                Ok(())
            })
        });
    }
    if b.db == Server::Sqlite {
        // what settle's engine sets on its SQLite connections; WAL is kept in
        // the file, and asking a new connection to switch to it while others
        // write fails at once with "database is locked"
        o = o.after_connect(|c: &mut sqlx::AnyConnection, _| {
            Box::pin(async move {
                sqlx::Executor::execute(&mut *c, "PRAGMA busy_timeout = 10000").await?;
                let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                    .fetch_one(&mut *c)
                    .await?;
                if !mode.eq_ignore_ascii_case("wal") {
                    sqlx::Executor::execute(&mut *c, "PRAGMA journal_mode = WAL").await?;
                }
                Ok(())
            })
        });
    }
    o.connect(&b.url)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", b.url))
}

/// A fresh canonical queue table (`sql/<dialect>/queue.sql`) with `jobs` rows.
pub(crate) async fn prepare(p: &AnyPool, b: &Backend, t: &str, jobs: usize) {
    if b.db == Server::PgExt {
        sqlx::query(&format!("SELECT queue_unregister('{t}')"))
            .execute(p)
            .await
            .expect("queue_unregister");
    }
    for s in [
        format!("DROP TABLE IF EXISTS {t}_dead"),
        format!("DROP TABLE IF EXISTS {t}"),
    ] {
        sqlx::query(&s).execute(p).await.expect("drop");
    }
    for s in b.db.dialect().create_queue_sql(t) {
        sqlx::query(&s)
            .execute(p)
            .await
            .expect("create the queue table");
    }
    let rows = (1..=jobs).map(|i| format!("('{{\"n\": {i}}}')"));
    insert_rows(p, t, "payload", rows).await;
    let analyze = match b.db {
        Server::Postgres | Server::PgExt => format!("VACUUM ANALYZE {t}"),
        Server::MariaDb => format!("ANALYZE TABLE {t}"),
        Server::Sqlite => format!("ANALYZE {t}"),
    };
    sqlx::query(&analyze).execute(p).await.expect("analyze");
}

/// `rows` (each a parenthesized VALUES tuple of `cols`) into `t`, 1,000 per
/// statement, in one transaction.
pub(crate) async fn insert_rows(
    p: &AnyPool,
    t: &str,
    cols: &str,
    rows: impl IntoIterator<Item = String>,
) {
    let rows: Vec<String> = rows.into_iter().collect();
    let mut tx = p.begin().await.unwrap();
    for chunk in rows.chunks(1000) {
        sqlx::query(&format!(
            "INSERT INTO {t} ({cols}) VALUES {}",
            chunk.join(", ")
        ))
        .execute(&mut *tx)
        .await
        .expect("enqueue");
    }
    tx.commit().await.unwrap();
}

/// CPU seconds of the database server: PostgreSQL's postmaster and backends,
/// MariaDB's one process (its pid file), SQLite none (it runs in this process,
/// so its work is in the client's column).
async fn server_cpu(p: &AnyPool, db: Server) -> f64 {
    match db {
        Server::Postgres | Server::PgExt => cpu::server_cpu(),
        Server::Sqlite => f64::NAN,
        Server::MariaDb => {
            let file: String = sqlx::query("SELECT CAST(@@pid_file AS CHAR)")
                .fetch_one(p)
                .await
                .map(|r| r.get(0))
                .unwrap_or_default();
            let pid = std::fs::read_to_string(&file).unwrap_or_default();
            cpu::proc_stat(pid.trim()).map_or(f64::NAN, |f| cpu::cpu_fields(&f, &[11, 12]))
        }
    }
}

/// The outcome a delivery gets under `--mixed`: on its first delivery a tenth
/// of the jobs is retried, a tenth retried after 0 s, a tenth dropped and the
/// rest acked; every later delivery is acked. So `jobs` rows take
/// `jobs + retried` deliveries, and every outcome's statement runs.
fn mixed_outcome(id: i64, attempt: i64) -> settle::Outcome {
    if attempt > 1 {
        return settle::Outcome::Ack;
    }
    match id % 10 {
        0 => settle::Outcome::Retry,
        1 => settle::Outcome::RetryAfter(Duration::ZERO),
        2 => settle::Outcome::Drop,
        _ => settle::Outcome::Ack,
    }
}

/// Deliveries `jobs` rows take under [`mixed_outcome`] (ids 1..=jobs).
fn mixed_deliveries(jobs: usize) -> usize {
    jobs + (1..=jobs as i64).filter(|i| i % 10 < 2).count()
}

/// The Rust client's portable path: claims of `batch`, then ack (one by one or
/// `settle_many`), or the outcome mix.
pub(crate) async fn client_worker(
    client: settle::Client,
    left: AnyPool,
    t: String,
    batch: usize,
    mixed: bool,
    lat: Arc<Mutex<Vec<f64>>>,
) -> usize {
    let mut done = 0;
    let mut mine = Vec::new();
    loop {
        let t0 = Instant::now();
        let ds = client.claim(batch).await.expect("claim");
        if ds.is_empty() {
            // the rest may be held by the others for a moment (advisory keys)
            if remaining(&left, &t).await == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let n = ds.len();
        if mixed && n == 1 {
            let d = ds.into_iter().next().unwrap();
            let o = mixed_outcome(d.id().parse().unwrap(), i64::from(d.attempt()));
            d.settle(o).await.expect("settle");
        } else if mixed {
            // a batch settles one settle_many per outcome, as the floor writes
            // one statement per outcome
            let mut by: Vec<(settle::Outcome, Vec<settle::Delivery>)> = Vec::new();
            for d in ds {
                let o = mixed_outcome(d.id().parse().unwrap(), i64::from(d.attempt()));
                match by.iter_mut().find(|(k, _)| *k == o) {
                    Some((_, v)) => v.push(d),
                    None => by.push((o, vec![d])),
                }
            }
            for (o, v) in by {
                for r in client.settle_many(v, o).await {
                    r.expect("settle");
                }
            }
        } else if n == 1 {
            ds.into_iter().next().unwrap().ack().await.expect("ack");
        } else {
            for r in client.settle_many(ds, settle::Outcome::Ack).await {
                r.expect("ack");
            }
        }
        mine.extend(std::iter::repeat_n(t0.elapsed().as_secs_f64() * 1000.0, n));
        done += n;
    }
    lat.lock().unwrap().extend(mine);
    done
}

pub(crate) async fn remaining(p: &AnyPool, t: &str) -> i64 {
    sqlx::query(&format!("SELECT COUNT(*) FROM {t}"))
        .fetch_one(p)
        .await
        .map(|r| r.get::<i64, _>(0))
        .expect("count")
}

/// Bind a list of i64s.
fn bind_all<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    v: &'q [i64],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    for x in v {
        q = q.bind(*x);
    }
    q
}

/// A floor round to run again (every advisory candidate held by another worker).
const AGAIN: usize = usize::MAX;

/// How a floor round settles a row: ack and drop both delete it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Write {
    Delete,
    Retry,
    /// retry_after(0 s)
    RetryNow,
}

/// What the floor writes for a row under [`mixed_outcome`] (or ack only).
fn floor_write(mixed: bool, id: i64, attempt: i64) -> Write {
    if !mixed {
        return Write::Delete;
    }
    match mixed_outcome(id, attempt) {
        settle::Outcome::Retry => Write::Retry,
        settle::Outcome::RetryAfter(_) => Write::RetryNow,
        _ => Write::Delete,
    }
}

/// Settle the rows a floor round took — (id, 1-based delivery number) — with
/// one statement per outcome, as a hand-writer batches them. `token`: the
/// lease's; each write then holds only while the row still carries it. The
/// writes of each form: row_lock counts the attempt when it retries (the claim
/// wrote nothing), lease clears the token, advisory writes nothing for a plain
/// retry (the attempt was counted at claim; unlocking gives the row back).
#[allow(clippy::too_many_arguments)]
async fn floor_settle(
    c: &mut sqlx::AnyConnection,
    db: Server,
    form: Form,
    t: &str,
    taken: &[(i64, i64)],
    token: Option<i64>,
    mixed: bool,
) -> Result<(), sqlx::Error> {
    for w in [Write::Delete, Write::Retry, Write::RetryNow] {
        let ids: Vec<i64> = taken
            .iter()
            .filter(|&&(id, att)| floor_write(mixed, id, att) == w)
            .map(|&(id, _)| id)
            .collect();
        if ids.is_empty() {
            continue;
        }
        let held = token
            .map(|_| format!("locked_until = {}", db.token_value(&db.p(ids.len() + 1))))
            .unwrap_or_default();
        let sql = if w == Write::Delete {
            db.delete_ids(t, ids.len(), &held)
        } else {
            let mut sets = Vec::new();
            if form == Form::RowLock {
                sets.push("attempt = attempt + 1".to_string());
            }
            if form == Form::Lease {
                sets.push("locked_until = NULL".to_string());
            }
            if w == Write::RetryNow {
                sets.push(format!("retry_after = {}", db.now()));
            }
            if sets.is_empty() {
                continue;
            }
            db.update_ids(t, &sets.join(", "), ids.len(), &held)
        };
        let mut q = bind_all(sqlx::query(&sql), &ids);
        if let Some(tok) = token {
            q = q.bind(tok);
        }
        let r = q.execute(&mut *c).await?;
        if token.is_some() {
            assert_eq!(r.rows_affected() as usize, ids.len(), "floor lease: held");
        }
    }
    Ok(())
}

/// The hand-written SQL for the same work, on one connection, until the queue
/// is empty. Every loop reads the id and the payload (and the token where there
/// is one), as a handler needs them, and the attempt (the outcome mix reads it).
pub(crate) async fn floor_worker(
    p: AnyPool,
    db: Server,
    form: Form,
    t: String,
    batch: usize,
    mixed: bool,
    lat: Arc<Mutex<Vec<f64>>>,
) -> usize {
    let mut c = p.acquire().await.expect("acquire");
    let (mut done, mut mine) = (0, Vec::new());
    let mut deadlocks = 0u32;
    let b = batch as i64;
    let att = db.int8("attempt");
    loop {
        let t0 = Instant::now();
        let round: Result<usize, sqlx::Error> = async { Ok(match form {
            Form::RowLock => {
                let begin = if db == Server::Sqlite { "BEGIN IMMEDIATE" } else { "BEGIN" };
                sqlx::query(begin).execute(&mut *c).await?;
                let rows = sqlx::query(&format!(
                    "SELECT id, {att}, {} FROM {t} WHERE {} ORDER BY id LIMIT {}{}",
                    db.payload(),
                    db.ready(),
                    db.p(1),
                    db.dialect().skip_locked()
                ))
                .bind(b)
                .fetch_all(&mut *c)
                .await?;
                // row_lock counts a delivery when it settles it
                let taken: Vec<(i64, i64)> =
                    rows.iter().map(|r| (r.get(0), r.get::<i64, _>(1) + 1)).collect();
                floor_settle(&mut c, db, form, &t, &taken, None, mixed).await?;
                sqlx::query("COMMIT").execute(&mut *c).await?;
                taken.len()
            }
            Form::Lease => {
                let (taken, token): (Vec<(i64, i64)>, i64) = match db {
                    // one statement: lock the candidates, write the token, count the attempt
                    Server::Postgres | Server::PgExt | Server::Sqlite => {
                        let (lock, tok) = if matches!(db, Server::Postgres | Server::PgExt) {
                            (
                                " FOR UPDATE SKIP LOCKED",
                                "date_trunc('milliseconds', now() + interval '30 seconds')",
                            )
                        } else {
                            ("", "(CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000 + 30000000)")
                        };
                        let rows = sqlx::query(&format!(
                            "UPDATE {t} SET locked_until = {tok}, attempt = attempt + 1 \
                             WHERE id IN (SELECT id FROM {t} WHERE {} AND {} ORDER BY id LIMIT {}{lock}) \
                             RETURNING id, {}, {att}, {}",
                            db.ready(),
                            db.lease_free(),
                            db.p(1),
                            db.dialect().micros("locked_until"),
                            db.payload()
                        ))
                        .bind(b)
                        .fetch_all(&mut *c)
                        .await?;
                        let tok = rows.first().map_or(0, |r| r.get::<i64, _>(1));
                        (rows.iter().map(|r| (r.get(0), r.get(2))).collect(), tok)
                    }
                    // no UPDATE … RETURNING: read and lock, then write the token, in one transaction
                    Server::MariaDb => {
                        sqlx::query("BEGIN").execute(&mut *c).await?;
                        let rows = sqlx::query(&format!(
                            "SELECT id, {}, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', \
                             DATE_ADD(UTC_TIMESTAMP(3), INTERVAL 30 SECOND)) AS SIGNED), {att} \
                             FROM {t} WHERE {} AND {} ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
                            db.payload(),
                            db.ready(),
                            db.lease_free()
                        ))
                        .bind(b)
                        .fetch_all(&mut *c)
                        .await?;
                        let taken: Vec<(i64, i64)> =
                            rows.iter().map(|r| (r.get(0), r.get::<i64, _>(3) + 1)).collect();
                        let tok = rows.first().map_or(0, |r| r.get::<i64, _>(2));
                        if !taken.is_empty() {
                            let ids: Vec<i64> = taken.iter().map(|x| x.0).collect();
                            let sql = format!(
                                "UPDATE {t} SET locked_until = {}, attempt = attempt + 1 WHERE id IN ({})",
                                db.token_value("?"),
                                db.list(2, ids.len())
                            );
                            bind_all(sqlx::query(&sql).bind(tok), &ids)
                                .execute(&mut *c)
                                .await?;
                        }
                        sqlx::query("COMMIT").execute(&mut *c).await?;
                        (taken, tok)
                    }
                };
                floor_settle(&mut c, db, form, &t, &taken, Some(token), mixed).await?;
                taken.len()
            }
            Form::Advisory => {
                // lock the candidates' keys in one statement, re-check and count the
                // attempt with a fresh read, settle, unlock
                let lock = match db {
                    Server::Postgres | Server::PgExt => "pg_try_advisory_lock(id)",
                    _ => "GET_LOCK(CONCAT('bench:', id), 0) = 1",
                };
                let locked: Vec<i64> = sqlx::query(&format!(
                    "SELECT id FROM (SELECT id FROM {t} WHERE {} ORDER BY id LIMIT {}) c WHERE {lock}",
                    db.ready(),
                    db.p(1)
                ))
                .bind(b)
                .fetch_all(&mut *c)
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
                let mut n = 0;
                if !locked.is_empty() {
                    let list = db.list(1, locked.len());
                    // the re-check: a key's previous holder may have settled its
                    // row between the candidates' read and the lock
                    let count = format!(
                        "UPDATE {t} SET attempt = attempt + 1 WHERE id IN ({list}) AND {}",
                        db.ready()
                    );
                    // MariaDB has no UPDATE … RETURNING: count, then read the rows left
                    let read = if matches!(db, Server::Postgres | Server::PgExt) {
                        format!("{count} RETURNING id, {att}, {}", db.payload())
                    } else {
                        bind_all(sqlx::query(&count), &locked).execute(&mut *c).await?;
                        format!(
                            "SELECT id, {att}, {} FROM {t} WHERE id IN ({list}) AND {}",
                            db.payload(),
                            db.ready()
                        )
                    };
                    let taken: Vec<(i64, i64)> = bind_all(sqlx::query(&read), &locked)
                        .fetch_all(&mut *c)
                        .await?
                        .iter()
                        .map(|r| (r.get(0), r.get(1)))
                        .collect();
                    floor_settle(&mut c, db, form, &t, &taken, None, mixed).await?;
                    let unlock = match db {
                        Server::Postgres | Server::PgExt => "SELECT pg_advisory_unlock_all()",
                        _ => "SELECT RELEASE_ALL_LOCKS()",
                    };
                    sqlx::query(unlock).execute(&mut *c).await?;
                    n = taken.len();
                }
                if n == 0 {
                    // every candidate held by another worker: is anything left?
                    if remaining(&p, &t).await > 0 {
                        tokio::task::yield_now().await;
                        return Ok(AGAIN);
                    }
                }
                n
            }
        }) }
        .await;
        let n = match round {
            Ok(AGAIN) => continue,
            Ok(n) => n,
            // InnoDB picks a deadlock victim now and then; its transaction is
            // rolled back whole, so the round is simply run again
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("40001") => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *c).await;
                deadlocks += 1;
                continue;
            }
            Err(e) => panic!("floor {} {form:?}: {e}", db.name()),
        };
        // rows another worker retries come back to that worker's next claim
        if n == 0 {
            break;
        }
        mine.extend(std::iter::repeat_n(t0.elapsed().as_secs_f64() * 1000.0, n));
        done += n;
    }
    lat.lock().unwrap().extend(mine);
    if deadlocks > 0 {
        eprintln!(
            "floor {} {form:?}: {deadlocks} deadlock(s), rounds run again",
            db.name()
        );
    }
    done
}

#[allow(clippy::too_many_arguments)]
async fn case(
    a: &Args,
    admin: &tokio_postgres::Client,
    b: &Backend,
    imp: Imp,
    form: Form,
    workers: usize,
    batch: usize,
    mixed: bool,
) -> Res {
    let t = format!(
        "bench_p_{}_{}_{}",
        if b.db == Server::PgExt {
            "ext"
        } else {
            b.db.name()
        },
        form.name(),
        if imp == Imp::Floor { "floor" } else { "client" }
    );
    let before = crate::other_backends(admin).await;
    let p = pool(b, workers as u32 + 2).await;
    prepare(&p, b, &t, a.jobs).await;
    let lat = Arc::new(Mutex::new(Vec::with_capacity(a.jobs)));
    let settle_form = match form {
        Form::RowLock => settle::Form::RowLock,
        Form::Lease => settle::Form::Lease {
            ttl: Duration::from_secs(30),
        },
        Form::Advisory => settle::Form::Advisory,
    };
    // connections open before the clock starts, on both sides
    let client = if imp == Imp::Client {
        let q = settle::Queue::new(&t, &t).form(settle_form);
        let c = if b.db == Server::PgExt {
            settle::Admin::postgres(a.conn.as_str(), 1)
                .await
                .expect("Admin::postgres")
                .register(&q)
                .await
                .expect("register");
            settle::Client::connect(a.conn.as_str(), workers, q)
                .await
                .expect("Client::connect")
        } else {
            settle::Client::portable(&b.url, workers as u32, q)
                .await
                .expect("Client::portable")
        };
        let warm: Vec<_> = (0..workers).map(|_| c.stats()).collect();
        for w in futures_util::future::join_all(warm).await {
            w.expect("stats");
        }
        Some(c)
    } else {
        let warm: Vec<_> = (0..workers).map(|_| p.acquire()).collect();
        drop(futures_util::future::join_all(warm).await);
        None
    };
    let (s0, c0, t0) = (server_cpu(&p, b.db).await, cpu::own_cpu(), Instant::now());
    let hs: Vec<_> = (0..workers)
        .map(|_| match &client {
            Some(c) => tokio::spawn(client_worker(
                c.clone(),
                p.clone(),
                t.clone(),
                batch,
                mixed,
                lat.clone(),
            )),
            None => tokio::spawn(floor_worker(
                p.clone(),
                b.db,
                form,
                t.clone(),
                batch,
                mixed,
                lat.clone(),
            )),
        })
        .collect();
    let mut deliveries = 0;
    for h in hs {
        deliveries += h.await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let (s1, c1) = (server_cpu(&p, b.db).await, cpu::own_cpu());
    let want = if mixed {
        mixed_deliveries(a.jobs)
    } else {
        a.jobs
    };
    assert_eq!(
        deliveries,
        want,
        "{} {imp:?} {form:?}: every job delivered the expected number of times",
        b.db.name()
    );
    assert_eq!(remaining(&p, &t).await, 0, "every row settled");
    drop(client);
    p.close().await;
    if matches!(b.db, Server::Postgres | Server::PgExt) {
        crate::backends_gone(admin, before).await;
    }
    let mut l = lat.lock().unwrap();
    let k = a.jobs as f64 / 1000.0;
    Res {
        jobs: a.jobs,
        deliveries,
        secs,
        p50: pct(&mut l, 0.5),
        p99: pct(&mut l, 0.99),
        srv: (s1 - s0) / k,
        cli: (c1 - c0) / k,
    }
}

/// The portable grid: every backend × form it supports × W × B, floor and client
/// in rounds (`--repeat`), the median run shown, and `results/portable.csv`.
pub(crate) async fn grid(a: &Args, admin: &tokio_postgres::Client) {
    println!(
        "portable path (Client::portable) beside hand-written SQL via sqlx, jobs per case: {}, runs per case: {}{}",
        a.jobs,
        a.repeat,
        if a.mixed { ", outcome mix (client and floor)" } else { "" }
    );
    println!(
        "{:<9} {:<8} {:<9} {:>3} {:>4} {:>9} {:>8} {:>8} {:>13} {:>13} {:>12}",
        "backend",
        "impl",
        "form",
        "W",
        "B",
        "jobs/s",
        "p50 ms",
        "p99 ms",
        "srv cpu s/1k",
        "cli cpu s/1k",
        "client/floor"
    );
    let mut csv = String::from("backend,impl,form,workers,batch,mixed,jobs,deliveries,seconds,jobs_per_s,p50_ms,p99_ms,server_cpu_s_per_1k,client_cpu_s_per_1k\n");
    for b in backends(a) {
        for &form in &a.forms {
            if b.db == Server::Sqlite && form == Form::Advisory {
                continue; // refused by design (docs/portable.md)
            }
            for &w in &a.workers {
                for &bs in &a.batches {
                    let imps = [Imp::Floor, Imp::Client];
                    let mut runs: Vec<Vec<Res>> = imps.iter().map(|_| Vec::new()).collect();
                    for _ in 0..a.repeat {
                        for (i, &imp) in imps.iter().enumerate() {
                            runs[i].push(case(a, admin, &b, imp, form, w, bs, a.mixed).await);
                        }
                    }
                    let meds: Vec<Res> = runs
                        .into_iter()
                        .map(|v| crate::median_by(v, Res::rate))
                        .collect();
                    let floor_rate = meds[0].rate();
                    for (imp, r) in imps.iter().zip(&meds) {
                        let ratio = match imp {
                            Imp::Client => format!("{:.2}", r.rate() / floor_rate),
                            Imp::Floor => String::new(),
                        };
                        let name = match imp {
                            Imp::Floor => "floor",
                            Imp::Client => "client",
                        };
                        println!(
                            "{:<9} {:<8} {:<9} {:>3} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>13.3} {:>13.3} {:>12}",
                            b.db.name(), name, form.name(), w, bs, r.rate(), r.p50, r.p99, r.srv, r.cli, ratio
                        );
                        let _ = writeln!(
                            csv,
                            "{},{},{},{},{},{},{},{},{:.3},{:.0},{:.3},{:.3},{:.4},{:.4}",
                            b.db.name(),
                            name,
                            form.name(),
                            w,
                            bs,
                            a.mixed,
                            r.jobs,
                            r.deliveries,
                            r.secs,
                            r.rate(),
                            r.p50,
                            r.p99,
                            r.srv,
                            r.cli
                        );
                    }
                }
            }
        }
    }
    let _ = std::fs::create_dir_all("results");
    std::fs::write("results/portable.csv", csv).unwrap();
    println!("wrote results/portable.csv");
}
