//! The advisory form behind PgBouncer (Debian's 1.18), in front of the test cluster.
//! `scripts/test.sh` starts it and sets SETTLE_TEST_BOUNCER (a libpq string
//! without dbname) and SETTLE_TEST_PG (the database behind it, direct).
//!
//! - session pooling (`settle_session`): one server session per client
//!   connection, so session advisory locks work — the supported setup.
//! - transaction pooling (`settle_tx`): each transaction may run on another
//!   server session. An advisory completion that lands on another session is
//!   refused with SQ006 and a hint naming the cause, and nothing is written;
//!   claim and completion in one transaction stay on one session and work.

use settle::{Client, Form, Queue, Settled};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_postgres::{NoTls, SimpleQueryMessage};

static SEQ: AtomicUsize = AtomicUsize::new(0);
/// One test at a time: which server session the proxy hands out is the point.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/test.sh, which starts PgBouncer")
    })
}

async fn connect(conn: &str) -> tokio_postgres::Client {
    let (c, task) = tokio_postgres::connect(conn, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {conn}: {e}"));
    tokio::spawn(task);
    c
}

/// Direct connection (no proxy) and a fresh advisory queue of `n` rows.
async fn setup(n: usize) -> (tokio_postgres::Client, String) {
    let db = connect(&env("SETTLE_TEST_PG")).await;
    let t = format!(
        "bouncer_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    db.batch_execute(&format!(
        "CREATE TABLE {t} (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{{}}', attempt int NOT NULL DEFAULT 0);
         INSERT INTO {t} (id) SELECT generate_series(1, {n});
         SELECT queue_register('{t}', '{t}', 'advisory');"
    ))
    .await
    .unwrap();
    (db, t)
}

/// The first column of every row a simple query returned.
async fn simple(
    c: &tokio_postgres::Client,
    sql: &str,
) -> Result<Vec<String>, tokio_postgres::Error> {
    Ok(c.simple_query(sql)
        .await?
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or("").to_owned()),
            _ => None,
        })
        .collect())
}

async fn count(db: &tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.unwrap().get(0)
}

/// Advisory locks held by any server session of the database.
async fn advisory_locks_held(db: &tokio_postgres::Client) -> i64 {
    count(
        db,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_through_session_pooling() {
    let _one = SERIAL.lock().await;
    let (db, t) = setup(30).await;
    let config: tokio_postgres::Config =
        format!("{} dbname=settle_session", env("SETTLE_TEST_BOUNCER"))
            .parse()
            .unwrap();
    let c = Client::connect(config, 4, Queue::new(&t, &t).form(Form::Advisory))
        .await
        .unwrap();
    // two claims pinned to two client connections, settled in interleaved order
    let a = c.claim(5).await.unwrap();
    let b = c.claim(5).await.unwrap();
    assert_eq!((a.len(), b.len()), (5, 5));
    let mut ids: Vec<String> = a
        .iter()
        .chain(b.iter())
        .map(|d| d.id().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "no row delivered twice");
    for (x, y) in a.into_iter().zip(b) {
        assert_eq!(y.ack().await.unwrap(), Settled::Deleted);
        assert_eq!(x.retry().await.unwrap(), Settled::Retried);
    }
    // a delivery dropped unsettled is given back
    let lost = c.claim(1).await.unwrap();
    drop(lost);
    loop {
        let got = c.claim(10).await.unwrap();
        if got.is_empty() {
            if count(&db, &format!("SELECT count(*) FROM {t}")).await == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        for d in got {
            d.ack().await.unwrap();
        }
    }
    let held = advisory_locks_held(&db).await;
    assert_eq!(held, 0, "no advisory key left held on any server session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_through_transaction_pooling_is_refused_clearly() {
    let _one = SERIAL.lock().await;
    let (db, t) = setup(3).await;
    let url = format!("{} dbname=settle_tx", env("SETTLE_TEST_BOUNCER"));
    let a = connect(&url).await;
    let b = connect(&url).await;
    // A claims in an autocommitted statement: the key is a lock of server session X
    let got = simple(
        &a,
        &format!("SELECT id::text || ' ' || pg_backend_pid() FROM queue_claim('{t}', 1)"),
    )
    .await
    .unwrap();
    let (id, x) = got[0].split_once(' ').unwrap();
    let (id, x) = (id.to_owned(), x.to_owned());
    // B opens a transaction: the proxy hands it the idle session X
    simple(&b, "BEGIN").await.unwrap();
    let bx = simple(&b, "SELECT pg_backend_pid()::text").await.unwrap();
    assert_eq!(bx[0], x, "the proxy gave B the session A claimed on");
    // A's completion runs on another server session: refused, nothing written
    let err = simple(&a, &format!("SELECT queue_complete('{t}', '{id}', 'ack')"))
        .await
        .expect_err("the completion reached another server session");
    let db_err = err.as_db_error().expect("a server error");
    assert_eq!(db_err.code().code(), "SQ006");
    assert!(
        db_err
            .hint()
            .unwrap_or("")
            .contains("pool_mode=transaction"),
        "the hint names the cause: {:?}",
        db_err.hint()
    );
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM {t}")).await,
        3,
        "nothing deleted"
    );
    // the key stays with session X: no one else can claim the row meanwhile
    let direct = Client::connect(
        env("SETTLE_TEST_PG"),
        2,
        Queue::new(&t, &t).form(Form::Advisory),
    )
    .await
    .unwrap();
    let others = direct.claim(3).await.unwrap();
    assert!(
        others.iter().all(|d| d.id() != id),
        "the held row is not delivered twice"
    );
    for d in others {
        d.retry().await.unwrap();
    }
    simple(&b, "COMMIT").await.unwrap();
    // the operator's way out: end session X (PgBouncer opens a new one)
    db.execute("SELECT pg_terminate_backend($1::text::int)", &[&x])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // claim and completion in one transaction stay on one server session
    for _ in 0..3 {
        let rows = simple(
            &a,
            &format!("BEGIN; SELECT id::text FROM queue_claim('{t}', 1)"),
        )
        .await
        .unwrap();
        assert_eq!(rows.len(), 1, "a row is claimable again");
        simple(&b, "BEGIN; SELECT 1").await.unwrap(); // another client busy meanwhile
        let done = simple(
            &a,
            &format!("SELECT queue_complete('{t}', '{}', 'ack'); COMMIT", rows[0]),
        )
        .await
        .unwrap();
        assert_eq!(done, vec!["deleted".to_owned()]);
        simple(&b, "COMMIT").await.unwrap();
    }
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM {t}")).await,
        0,
        "all three settled"
    );
    let held = advisory_locks_held(&db).await;
    assert_eq!(held, 0, "no advisory key left held");
}

/// The lease form keeps no session state: claim and completion may run on any
/// server session, so transaction pooling is fine (SQL API, simple protocol).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_through_transaction_pooling() {
    let _one = SERIAL.lock().await;
    let db = connect(&env("SETTLE_TEST_PG")).await;
    let t = format!("bouncer_lease_{}", std::process::id());
    db.batch_execute(&format!(
        "CREATE TABLE {t} (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{{}}', attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
         INSERT INTO {t} (id) SELECT generate_series(1, 20);
         SELECT queue_register('{t}', '{t}', 'lease');"
    ))
    .await
    .unwrap();
    let url = format!("{} dbname=settle_tx", env("SETTLE_TEST_BOUNCER"));
    let a = connect(&url).await;
    let mut settled = 0;
    while settled < 20 {
        let rows = simple(&a, &format!("SELECT id::text || ' ' || token::text FROM queue_claim('{t}', 5, interval '30 seconds')"))
            .await
            .unwrap();
        assert!(!rows.is_empty());
        for r in rows {
            let (id, token) = r.split_once(' ').unwrap();
            let out = simple(
                &a,
                &format!("SELECT queue_complete('{t}', '{id}', 'ack', NULL, '{token}')"),
            )
            .await
            .unwrap();
            assert_eq!(out[0], "deleted");
            settled += 1;
        }
    }
    assert_eq!(count(&db, &format!("SELECT count(*) FROM {t}")).await, 0);
}

/// The Rust client behind a transaction pooler: PgBouncer in transaction mode
/// with 2 server connections under 8 client connections
/// (`PoolOptions::transaction_pooler`: no named prepared statements, no
/// LISTEN). 2,000 jobs in the lease form and 2,000 in the row_lock form (whose
/// claim and settles share one transaction, so one server session), worked by
/// 8 concurrent handlers: every job handled, none lost, none handled twice.
/// (Without `transaction_pooler` the same run fails: statements prepared on one
/// server session are run on another, claims fail and jobs are handled twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_through_transaction_pooling() {
    use settle::{PoolOptions, WorkerOptions};
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};
    let _one = SERIAL.lock().await;
    const JOBS: usize = 2000;
    let db = connect(&env("SETTLE_TEST_PG")).await;
    let proxied = format!("{} dbname=settle_tx2", env("SETTLE_TEST_BOUNCER"));
    let lease = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    // batch 1 on the lease form: each settle claims the next (the worker's chain)
    for (form, batch) in [(lease, 10), (Form::RowLock, 10), (lease, 1)] {
        let t = format!(
            "bouncer_client_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        db.batch_execute(&format!(
            "CREATE TABLE {t} (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{{}}', \
               attempt int NOT NULL DEFAULT 0, retry_after timestamptz, locked_until timestamptz);
             INSERT INTO {t} (id) SELECT generate_series(1, {JOBS});
             SELECT queue_register('{t}', '{t}', '{}');",
            if form == Form::RowLock {
                "row_lock"
            } else {
                "lease"
            }
        ))
        .await
        .unwrap();
        let c = Client::connect_with(
            proxied.as_str(),
            PoolOptions::new(8).transaction_pooler(true),
            Queue::new(&t, &t).form(form),
        )
        .await
        .unwrap_or_else(|e| panic!("{form:?} through the pooler: {e}"));
        assert!(
            !c.capabilities().listen,
            "no LISTEN behind a transaction pooler"
        );
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn({
            let (c, seen) = (c.clone(), seen.clone());
            let opts = WorkerOptions {
                concurrency: 8,
                batch,
                poll_interval: Duration::from_millis(20),
                ..Default::default()
            };
            async move {
                c.run(opts, async { stopped.await.unwrap_or(()) }, move |d| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push(d.id().to_owned());
                        // every tenth once more, so retries cross the pooler too
                        if d.id().ends_with('0') && d.attempt() == 1 {
                            d.retry().await
                        } else {
                            d.ack().await
                        }
                    }
                })
                .await
            }
        });
        let start = std::time::Instant::now();
        while count(&db, &format!("SELECT count(*) FROM {t}")).await > 0 {
            assert!(
                start.elapsed() < Duration::from_secs(240),
                "{form:?} B={batch}: the queue drains"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.send(()).unwrap();
        let report = worker.await.unwrap().unwrap();
        let seen = seen.lock().unwrap().clone();
        let retried = JOBS / 10;
        assert_eq!(seen.len(), JOBS + retried, "{form:?}: {report:?}");
        let distinct: HashSet<&String> = seen.iter().collect();
        assert_eq!(distinct.len(), JOBS, "{form:?}: every job handled");
        assert_eq!(report.errors, 0, "{form:?}: {report:?}");
        assert_eq!(report.claim_errors, 0, "{form:?}: {report:?}");
        assert_eq!(report.count(Settled::Deleted), JOBS as u64, "{form:?}");
        assert_eq!(report.count(Settled::Retried), retried as u64, "{form:?}");
        assert_eq!(
            report.chained > 0,
            batch == 1,
            "{form:?} B={batch}: chained through the pooler: {report:?}"
        );
    }
}
