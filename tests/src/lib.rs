//! settle's conformance suite lives in `tests/conformance.rs`: one body of
//! scenarios run against every backend × claim form it runs (docs/portable.md) (PostgreSQL with
//! the extension, PostgreSQL portable, MariaDB, SQLite), skipping only by
//! declared capability. `scripts/test.sh` starts the servers and sets:
//!
//! - `SETTLE_TEST_PG`: libpq string of a database with the extension (client)
//! - `SETTLE_TEST_PG_EXT_URL`: the same database as a `postgres://` URL (setup)
//! - `SETTLE_TEST_PG_URL`: a database *without* the extension (portable path)
//! - `SETTLE_TEST_MYSQL_URL`: a MariaDB database
//! - `SETTLE_TEST_BACKENDS` (optional): run only these backends, see [`backends`]

use settle::{Client, Dialect, Form, Outcome, PoolOptions, Queue};
use sqlx::Row;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub static SEQ: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    PgExtension,
    PgPortable,
    MariaDb,
    Sqlite,
}

pub const BACKENDS: [Backend; 4] = [
    Backend::PgExtension,
    Backend::PgPortable,
    Backend::MariaDb,
    Backend::Sqlite,
];

/// The backends this run covers: all of [`BACKENDS`], or those named in
/// `SETTLE_TEST_BACKENDS` (e.g. `PgExtension`, as the test command sets it for
/// the PostgreSQL majors after the first).
pub fn backends() -> Vec<Backend> {
    BACKENDS.into_iter().filter(|b| covers(*b)).collect()
}

/// Whether this run covers `b` (see [`backends`]); a test of a backend it
/// leaves out calls this first, and it says so.
pub fn selected(b: Backend) -> bool {
    let yes = covers(b);
    if !yes {
        println!(
            "{b:?}: skipped by SETTLE_TEST_BACKENDS={}",
            std::env::var("SETTLE_TEST_BACKENDS").unwrap_or_default()
        );
    }
    yes
}

fn covers(b: Backend) -> bool {
    let Ok(only) = std::env::var("SETTLE_TEST_BACKENDS") else {
        return true;
    };
    let names: Vec<&str> = only.split([',', ' ']).filter(|n| !n.is_empty()).collect();
    for n in &names {
        assert!(
            BACKENDS.iter().any(|b| format!("{b:?}") == *n),
            "SETTLE_TEST_BACKENDS names an unknown backend: {n}"
        );
    }
    names.contains(&format!("{b:?}").as_str())
}

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/test.sh, which starts the servers")
    })
}

impl Backend {
    pub fn dialect(self) -> Dialect {
        match self {
            Backend::PgExtension | Backend::PgPortable => Dialect::Postgres,
            Backend::MariaDb => Dialect::MySql,
            Backend::Sqlite => Dialect::Sqlite,
        }
    }

    /// The forms this backend runs, and why it refuses the others (docs/portable.md).
    pub fn forms(self) -> Vec<(Form, Option<&'static str>)> {
        let lease = Form::Lease {
            ttl: Duration::from_secs(30),
        };
        vec![
            (Form::RowLock, None),
            (lease, None),
            (
                Form::Advisory,
                (self == Backend::Sqlite)
                    .then_some("SQLite has no advisory locks: refused at registration"),
            ),
        ]
    }

    /// Where setup SQL runs (sqlx, any dialect).
    pub fn admin_url(self) -> String {
        match self {
            Backend::PgExtension => env("SETTLE_TEST_PG_EXT_URL"),
            Backend::PgPortable => env("SETTLE_TEST_PG_URL"),
            Backend::MariaDb => env("SETTLE_TEST_MYSQL_URL"),
            Backend::Sqlite => sqlite_url(),
        }
    }

    pub async fn client(self, queue: Queue) -> settle::Result<Client> {
        self.client_with(queue, PoolOptions::new(8)).await
    }

    /// A client of `queue`; on the extension, registered first by the
    /// table's owner (the test role owns every table it makes).
    pub async fn client_with(self, queue: Queue, pool: PoolOptions) -> settle::Result<Client> {
        match self {
            Backend::PgExtension => {
                register(&env("SETTLE_TEST_PG"), &queue).await?;
                Client::connect_with(env("SETTLE_TEST_PG"), pool, queue).await
            }
            _ => Client::portable_with(&self.admin_url(), pool, queue).await,
        }
    }
}

/// Register `queue` (or change its registration) through the extension at
/// `conn`, as the owner of its table does before workers connect.
pub async fn register(conn: &str, queue: &Queue) -> settle::Result<settle::Registered> {
    settle::Admin::postgres(conn, 1)
        .await?
        .register(queue)
        .await
}

pub fn sqlite_url() -> String {
    // a child process (the reliability harness's worker) works on its parent's file
    if let Ok(u) = std::env::var("SETTLE_TEST_SQLITE_URL") {
        return u;
    }
    // one file per test process, named by process id and start time: a
    // process id alone comes round again on a machine that ran the suite before
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("settle-conformance-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    format!("sqlite://{}?mode=rwc", dir.join("queue.db").display())
}

/// A sqlx pool for setup and checks, without the idle and lifetime reaper
/// task that can spin a core for good in sqlx 0.8 (sqlx #3645).
pub fn pool_options(max: u32) -> sqlx::any::AnyPoolOptions {
    sqlx::any::install_default_drivers();
    sqlx::any::AnyPoolOptions::new()
        .max_connections(max)
        .idle_timeout(None)
        .max_lifetime(None)
}

/// The lease form with a 30 s lease, long enough that no test's delivery
/// loses it by waiting.
pub fn lease() -> Form {
    Form::Lease {
        ttl: Duration::from_secs(30),
    }
}

pub async fn admin(b: Backend) -> sqlx::AnyPool {
    let url = b.admin_url();
    let pool = pool_options(2)
        .connect(&url)
        .await
        .expect("admin connection");
    if b == Backend::Sqlite {
        sqlx::query("PRAGMA busy_timeout = 10000")
            .execute(&pool)
            .await
            .unwrap();
    }
    pool
}

/// A fresh canonical queue table (and `<t>_dead`) with `n` rows, ids 1..=n.
pub async fn table(b: Backend, pool: &sqlx::AnyPool, prefix: &str, n: usize) -> String {
    let t = format!(
        "{prefix}_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    for stmt in b.dialect().create_queue_sql(&t) {
        sqlx::query(&stmt)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{b:?}: {stmt}: {e}"));
    }
    for i in 1..=n {
        sqlx::query(&format!(
            "INSERT INTO {} (payload) VALUES ('{{\"n\": {i}}}')",
            b.dialect().ident(&t)
        ))
        .execute(pool)
        .await
        .unwrap();
    }
    t
}

/// `role`'s column (type `ty`, e.g. `ordering_key` or `priority`) added to
/// queue table `t`, with the `(role, id)` index the claim needs; the table's
/// quoted name.
pub async fn add_role(b: Backend, pool: &sqlx::AnyPool, t: &str, role: &str, ty: &str) -> String {
    let q = b.dialect().ident(t);
    let index = b.dialect().ident(&format!("{t}_{role}"));
    for stmt in [
        format!("ALTER TABLE {q} ADD COLUMN {role} {ty}"),
        format!("CREATE INDEX {index} ON {q} ({role}, id)"),
    ] {
        sqlx::query(&stmt)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{b:?}: {stmt}: {e}"));
    }
    q
}

/// Wait (polling every 20 ms, `tries` times at most) until the queue table is
/// empty; the rows still in it.
pub async fn wait_until_empty(b: Backend, pool: &sqlx::AnyPool, t: &str, tries: usize) -> usize {
    let mut left = usize::MAX;
    for _ in 0..tries {
        left = final_rows(b, pool, t).await.0.len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    left
}

/// (id, attempt, delayed, held) of every row in the queue, and (id, attempt) of the dead letter.
pub async fn final_rows(
    b: Backend,
    pool: &sqlx::AnyPool,
    t: &str,
) -> (Vec<(i64, i64, bool, bool)>, Vec<(i64, i64)>) {
    let d = b.dialect();
    let now = d.now();
    let sql = format!(
        "SELECT {}, {}, CASE WHEN retry_after > {now} THEN 1 ELSE 0 END, \
                CASE WHEN locked_until IS NOT NULL AND locked_until >= {now} THEN 1 ELSE 0 END \
         FROM {} ORDER BY id",
        d.int("id"),
        d.int("attempt"),
        d.ident(t)
    );
    let rows = sqlx::query(&sql)
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<i64, _>(0),
                r.get::<i64, _>(1),
                r.get::<i64, _>(2) == 1,
                r.get::<i64, _>(3) == 1,
            )
        })
        .collect();
    let dead = sqlx::query(&format!(
        "SELECT {}, {} FROM {} ORDER BY id",
        d.int("id"),
        d.int("attempt"),
        d.ident(&format!("{t}_dead"))
    ))
    .fetch_all(pool)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
    .collect();
    (rows, dead)
}

/// A side table `{t}_side (id BIGINT)` for handlers' own writes; its quoted name.
pub async fn side_table(b: Backend, pool: &sqlx::AnyPool, t: &str) -> String {
    let side = b.dialect().ident(&format!("{t}_side"));
    sqlx::query(&format!("CREATE TABLE {side} (id BIGINT)"))
        .execute(pool)
        .await
        .unwrap();
    side
}

/// The ids written to a [`side_table`], in order.
pub async fn side_ids(b: Backend, pool: &sqlx::AnyPool, side: &str) -> Vec<i64> {
    let sql = format!("SELECT {} FROM {side} ORDER BY id", b.dialect().int("id"));
    sqlx::query(&sql)
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Claim up to `n` rows, expecting `ids` in claim order, ack them all (each
/// deleted), and find the queue empty after.
pub async fn ack_the_last(
    b: Backend,
    c: &Client,
    pool: &sqlx::AnyPool,
    t: &str,
    n: usize,
    ids: &[&str],
) {
    let got = c.claim(n).await.unwrap();
    let claimed: Vec<&str> = got.iter().map(|d| d.id()).collect();
    assert_eq!(claimed, ids, "{b:?}");
    for r in c.settle_many(got, Outcome::Ack).await {
        assert_eq!(r.unwrap(), settle::Settled::Deleted, "{b:?}");
    }
    let (rows, _) = final_rows(b, pool, t).await;
    assert!(rows.is_empty(), "{b:?}: {rows:?}");
}

/// The mixed outcome set of the load tests, by the row's integer id and the
/// delivery's attempt: a tenth dropped, a tenth retried once, a tenth delayed
/// once, a tenth retried until the dead letter (max_attempts 3), the rest acked.
pub fn mixed_outcome(id: &str, attempt: u32) -> Outcome {
    let n: u64 = id.parse().unwrap_or(0);
    match n % 10 {
        6 => Outcome::Drop,
        7 if attempt < 2 => Outcome::Retry,
        8 if attempt < 2 => Outcome::RetryAfter(Duration::from_millis(5)),
        9 => Outcome::Retry,
        _ => Outcome::Ack,
    }
}

/// A lease queue (30 s, max_attempts 1, dead letter `<t>_dead`) over a fresh
/// canonical table of `n` rows, all of them retried into the dead letter; the
/// table and the queue's client.
pub async fn all_dead(
    b: Backend,
    pool: &sqlx::AnyPool,
    prefix: &str,
    n: usize,
) -> (String, Client) {
    let t = table(b, pool, prefix, n).await;
    let lease = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    let q = Queue::new(&t, &t)
        .form(lease)
        .dead_letter(1, format!("{t}_dead"));
    let c = b.client(q).await.unwrap();
    for d in c.claim(n).await.unwrap() {
        assert_eq!(
            d.retry().await.unwrap(),
            settle::Settled::DeadLettered,
            "{b:?}"
        );
    }
    (t, c)
}

/// Who handled what across the workers of one test: how often each id, and
/// how often a handler began on a row another handler still held.
#[derive(Debug, Default)]
pub struct Tally {
    pub handled: std::collections::HashMap<String, u32>,
    pub running: std::collections::HashSet<String>,
    pub overlaps: u32,
}

impl Tally {
    /// A handler begins on `id`.
    pub fn begin(&mut self, id: &str) {
        if !self.running.insert(id.to_owned()) {
            self.overlaps += 1;
        }
        *self.handled.entry(id.to_owned()).or_default() += 1;
    }

    /// The ids handled other than once.
    pub fn not_once(&self) -> Vec<(&String, &u32)> {
        self.handled.iter().filter(|(_, n)| **n != 1).collect()
    }
}

/// A worker (`Client::run`) in a task of its own, and the way to stop it.
pub struct Worker {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<settle::Result<settle::WorkerReport>>,
}

impl Worker {
    /// Run `handler` on `c`'s queue until [`Worker::stop`].
    pub fn spawn<H, Fut>(c: Client, opts: settle::WorkerOptions, handler: H) -> Worker
    where
        H: Fn(settle::Delivery) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = settle::HandlerResult> + Send + 'static,
    {
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            c.run(
                opts,
                async {
                    let _ = rx.await;
                },
                handler,
            )
            .await
        });
        Worker { stop, task }
    }

    /// A worker that acks every delivery, counted in `tally`, after holding
    /// it for `hold` (long enough for another worker's claim to meet the row).
    pub fn acking(
        c: Client,
        opts: settle::WorkerOptions,
        tally: std::sync::Arc<std::sync::Mutex<Tally>>,
        hold: Duration,
    ) -> Worker {
        Worker::spawn(c, opts, move |d| {
            let tally = tally.clone();
            async move {
                let id = d.id().to_owned();
                tally.lock().unwrap().begin(&id);
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                tally.lock().unwrap().running.remove(&id);
                d.ack().await
            }
        })
    }

    /// Stop claiming, let the handlers finish, and return the report.
    pub async fn stop(self) -> settle::WorkerReport {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the worker task")
            .expect("the worker's run")
    }
}
