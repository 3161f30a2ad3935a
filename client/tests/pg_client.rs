//! The client against a real PostgreSQL (15, 16 or 18) with the settle extension.
//! `scripts/test.sh` starts the server and sets SETTLE_TEST_PG (a libpq
//! connection string to a database with the extension installed).

use settle::{Client, Error, Form, Queue, Role, Settled, WorkerOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn config() -> tokio_postgres::Config {
    let s = std::env::var("SETTLE_TEST_PG")
        .expect("SETTLE_TEST_PG is not set: run scripts/test.sh, which starts PostgreSQL with the extension");
    s.parse()
        .expect("SETTLE_TEST_PG is a libpq connection string")
}

/// The queue registered by its table's owner (the test role owns every table
/// it makes).
async fn register(cfg: tokio_postgres::Config, q: &Queue) -> settle::Result<()> {
    settle::Admin::postgres(cfg, 1).await?.register(q).await?;
    Ok(())
}

/// The queue registered, then a client of it.
async fn connect(cfg: tokio_postgres::Config, pool: usize, q: Queue) -> settle::Result<Client> {
    register(cfg.clone(), &q).await?;
    Client::connect(cfg, pool, q).await
}

async fn admin() -> tokio_postgres::Client {
    let (c, conn) = config()
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(conn);
    c
}

/// A fresh queue table `<prefix>_<n>` with the canonical columns, n rows, and a
/// dead-letter table `<name>_dead`.
async fn table(db: &tokio_postgres::Client, prefix: &str, rows: usize) -> String {
    let name = format!(
        "{prefix}_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    db.batch_execute(&format!(
        "CREATE TABLE {name} (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{{}}', \
           attempt int NOT NULL DEFAULT 0, retry_after timestamptz, locked_until timestamptz);
         CREATE TABLE {name}_dead (LIKE {name});
         INSERT INTO {name} (id, payload) SELECT g, jsonb_build_object('n', g) FROM generate_series(1, {rows}) g;"
    ))
    .await
    .unwrap();
    name
}

async fn rows(db: &tokio_postgres::Client, sql: &str) -> Vec<(i64, i32, bool, bool)> {
    db.query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

/// (id, attempt, delayed, leased) of every row left in the queue
async fn state(db: &tokio_postgres::Client, t: &str) -> Vec<(i64, i32, bool, bool)> {
    rows(
        db,
        &format!(
            "SELECT id, attempt, coalesce(retry_after > now(), false), locked_until IS NOT NULL FROM {t} ORDER BY id"
        ),
    )
    .await
}

/// advisory keys of queue `t` (rows 1..=n) held by any session
async fn keys_held(db: &tokio_postgres::Client, t: &str, n: i64) -> i64 {
    db.query_one(
        "SELECT count(*) FROM pg_locks l JOIN generate_series(1, $2::bigint) g \
           ON ((l.classid::bigint << 32) | l.objid::bigint) = queue_advisory_key($1, g::text) \
         WHERE l.locktype = 'advisory' AND l.objsubid = 1",
        &[&t, &n],
    )
    .await
    .unwrap()
    .get(0)
}

async fn dead(db: &tokio_postgres::Client, t: &str) -> Vec<(i64, i32)> {
    db.query(
        &format!("SELECT id, attempt FROM {t}_dead ORDER BY id"),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Claim one row, retrying for up to 2 s (a give-back runs on the runtime).
async fn claim_within_2s(c: &Client) -> Vec<settle::Delivery> {
    for _ in 0..100 {
        let got = c.claim(1).await.unwrap();
        if !got.is_empty() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Vec::new()
}

const FORMS: [Form; 3] = [
    Form::RowLock,
    Form::Lease {
        ttl: Duration::from_secs(30),
    },
    Form::Advisory,
];

/// Every outcome in every form, checked in the table afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_in_every_form() {
    let db = admin().await;
    for form in FORMS {
        let t = table(&db, "outcomes", 6).await;
        let c = connect(
            config(),
            4,
            Queue::new(&t, &t)
                .form(form)
                .dead_letter(2, format!("{t}_dead")),
        )
        .await
        .unwrap();
        // one delivery per claim so each settles (and, in row_lock, commits) on its own
        let one = |c: &Client| {
            let c = c.clone();
            async move { c.claim(1).await.unwrap().pop().expect("a ready row") }
        };
        let d = one(&c).await;
        assert_eq!((d.id(), d.attempt()), ("1", 1));
        assert_eq!(d.token().is_some(), matches!(form, Form::Lease { .. }));
        assert_eq!(d.payload::<serde_json::Value>().unwrap()["n"], 1);
        assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{form:?}");
        assert_eq!(one(&c).await.drop_it().await.unwrap(), Settled::Deleted);
        assert_eq!(one(&c).await.retry().await.unwrap(), Settled::Retried);
        // row 3 comes back first (id order) with attempt 2 = max: the retry moves it
        let d = one(&c).await;
        assert_eq!((d.id(), d.attempt()), ("3", 2), "{form:?}");
        assert_eq!(d.retry().await.unwrap(), Settled::DeadLettered);
        let d = one(&c).await;
        assert_eq!((d.id(), d.attempt()), ("4", 1), "{form:?}");
        assert_eq!(
            d.retry_after(Duration::from_secs(3600)).await.unwrap(),
            Settled::Delayed
        );
        assert_eq!(
            state(&db, &t).await,
            vec![
                (4, 1, true, false),
                (5, 0, false, false),
                (6, 0, false, false)
            ],
            "{form:?}"
        );
        assert_eq!(dead(&db, &t).await, vec![(3, 2)], "{form:?}");
        // nothing is held any more: no advisory keys on any pooled connection, no open transaction
        assert_eq!(keys_held(&db, &t, 6).await, 0, "{form:?}");
        let stats = c.stats().await.unwrap();
        assert_eq!(
            (stats.ready, stats.delayed, stats.dead),
            (2, 1, Some(1)),
            "{form:?}"
        );
    }
}

/// A custom outcome runs the service's own SQL instead of the dialect's statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_outcome_in_every_form() {
    let db = admin().await;
    for form in FORMS {
        let t = table(&db, "custom", 2).await;
        db.batch_execute(&format!("CREATE TABLE {t}_archive (id bigint)"))
            .await
            .unwrap();
        let q = Queue::new(&t, &t).form(form).custom_outcome(
            "archive",
            format!("WITH d AS (DELETE FROM {t} WHERE id = $1 RETURNING id) INSERT INTO {t}_archive SELECT id FROM d"),
        );
        let c = connect(config(), 2, q).await.unwrap();
        let d = c.claim(1).await.unwrap().pop().unwrap();
        assert_eq!(d.custom("archive").await.unwrap(), Settled::Custom);
        let d = c.claim(1).await.unwrap().pop().unwrap();
        assert!(
            matches!(d.custom("nope").await, Err(Error::InvalidArgument(_))),
            "{form:?}"
        );
        let archived: i64 = db
            .query_one(&format!("SELECT count(*) FROM {t}_archive"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(archived, 1);
        assert_eq!(
            state(&db, &t).await.len(),
            1,
            "{form:?}: the unknown outcome wrote nothing"
        );
    }
}

/// A delivery dropped without an outcome is given back: claimable again at once
/// (row_lock: rollback; lease: released; advisory: key unlocked), with the
/// attempt as docs/semantics.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_deliveries_come_back() {
    let db = admin().await;
    for form in FORMS {
        let t = table(&db, "dropped", 1).await;
        let c = connect(config(), 2, Queue::new(&t, &t).form(form))
            .await
            .unwrap();
        let d = c.claim(1).await.unwrap().pop().unwrap();
        drop(d);
        // the give-back runs on the runtime; wait for it
        let mut again = claim_within_2s(&c).await;
        let d = again.pop().expect("the dropped row is claimable again");
        let expected = if form == Form::RowLock { 1 } else { 2 }; // row_lock rolled the count back
        assert_eq!(d.attempt(), expected, "{form:?}");
        d.release().await.unwrap();
        let (_, attempt, _, leased) = state(&db, &t).await[0];
        assert_eq!(
            (attempt, leased),
            (if form == Form::RowLock { 0 } else { 2 }, false),
            "{form:?}"
        );
    }
}

/// Transactional mode (row_lock): the handler's writes commit with ack and are
/// rolled back for retry, retry_after, drop and the dead-letter move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_mode() {
    let db = admin().await;
    let t = table(&db, "txmode", 5).await;
    db.batch_execute(&format!("CREATE TABLE {t}_side (id bigint)"))
        .await
        .unwrap();
    let c = connect(
        config(),
        2,
        Queue::new(&t, &t)
            .form(Form::RowLock)
            .dead_letter(1, format!("{t}_dead")),
    )
    .await
    .unwrap();
    // a batch of 5 in one transaction, handled one after another
    let batch = c.claim(5).await.unwrap();
    assert_eq!(batch.len(), 5);
    let mut results = Vec::new();
    for (i, mut d) in batch.into_iter().enumerate() {
        let id: i64 = d.id().parse().unwrap();
        d.transaction()
            .await
            .unwrap()
            .execute(&format!("INSERT INTO {t}_side VALUES ($1)"), &[&id])
            .await
            .unwrap();
        results.push(match i {
            0 => d.ack().await.unwrap(),
            1 => d.retry_after(Duration::from_secs(60)).await.unwrap(), // at max_attempts(1): dead letter
            2 => d.drop_it().await.unwrap(),
            3 => d.retry().await.unwrap(), // dead letter too
            _ => {
                drop(d); // unsettled: its writes are rolled back, the row stays
                Settled::Released
            }
        });
    }
    assert_eq!(
        results,
        vec![
            Settled::Deleted,
            Settled::DeadLettered,
            Settled::Deleted,
            Settled::DeadLettered,
            Settled::Released
        ]
    );
    // the last delivery's give-back commits the shared transaction
    let mut side = Vec::new();
    for _ in 0..100 {
        side = db
            .query(&format!("SELECT id FROM {t}_side ORDER BY id"), &[])
            .await
            .unwrap();
        let open: i64 = db
            .query_one(&format!("SELECT count(*) FROM {t} WHERE id = 5"), &[])
            .await
            .unwrap()
            .get(0);
        if open == 1 && !side.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let side: Vec<i64> = side.iter().map(|r| r.get(0)).collect();
    assert_eq!(side, vec![1], "only the acked handler's write survives");
    assert_eq!(state(&db, &t).await, vec![(5, 0, false, false)]);
    assert_eq!(dead(&db, &t).await, vec![(2, 1), (4, 1)]);
}

/// Error kinds: each SQLSTATE of the extension reaches the caller as its kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_kinds() {
    let db = admin().await;
    let t = table(&db, "errors", 3).await;
    // SQ003 at connect: a descriptor naming a missing column
    let bad = connect(
        config(),
        1,
        Queue::new(&t, &t).column(Role::Attempt, "nope"),
    )
    .await;
    assert!(
        matches!(bad, Err(Error::InvalidDescriptor(ref e)) if e.code.as_deref() == Some("SQ003")),
        "{bad:?}"
    );
    // SQ001: a lease that expired and was claimed again
    let c = connect(
        config(),
        2,
        Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_millis(50),
        }),
    )
    .await
    .unwrap();
    let stale = c.claim(1).await.unwrap().pop().unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let fresh = c.claim(1).await.unwrap().pop().unwrap();
    assert_eq!(fresh.id(), stale.id());
    let mut stale_ext = stale;
    assert!(matches!(
        stale_ext.extend(Duration::from_secs(5)).await,
        Err(Error::LeaseLost(_))
    ));
    assert!(matches!(stale_ext.ack().await, Err(Error::LeaseLost(_))));
    assert_eq!(fresh.ack().await.unwrap(), Settled::Deleted);
    // SQ004: invalid arguments (client-side check and server-side)
    assert!(matches!(c.claim(0).await, Err(Error::InvalidArgument(_))));
    // the raw SQL API's codes through the same mapping
    let pool = c
        .pool()
        .expect("the extension backend")
        .get()
        .await
        .unwrap();
    type Case = (&'static str, fn(&Error) -> bool);
    let cases: [Case; 5] = [
        ("SELECT * FROM queue_claim('no such queue')", |e| {
            matches!(e, Error::UnknownQueue(_))
        }),
        ("SELECT queue_register('x', 'pg_class', 'lease')", |e| {
            matches!(e, Error::InvalidDescriptor(_))
        }),
        ("SELECT queue_complete('no such queue', NULL, 'ack')", |e| {
            matches!(e, Error::InvalidArgument(_))
        }),
        ("SELECT * FROM queue_claim('__rowlock__')", |e| {
            matches!(e, Error::NoTransaction(_))
        }),
        ("SELECT queue_complete('__advisory__', '1', 'ack')", |e| {
            matches!(e, Error::NotHeld(_))
        }),
    ];
    db.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {t}_rl (id int PRIMARY KEY);
         SELECT queue_register('__rowlock__', '{t}_rl', 'row_lock');
         SELECT queue_register('__advisory__', '{t}_rl', 'advisory');"
    ))
    .await
    .unwrap();
    for (sql, is_kind) in cases {
        // SQL cannot see a transaction block: the SQL edition's row_lock claim
        // in autocommit returns rows whose locks end with it (docs/editions.md)
        if sql.contains("__rowlock__") && c.edition() == Some(settle::Edition::Sql) {
            continue;
        }
        let e: Error = pool.query(sql, &[]).await.unwrap_err().into();
        assert!(is_kind(&e), "{sql}: {e:?}");
    }
    let e: Error = pool.query("SELECT 1/0", &[]).await.unwrap_err().into();
    assert!(
        matches!(&e, Error::Database(d) if d.code.as_deref() == Some("22012")),
        "{e:?}"
    );
}

/// settle_many: one statement for a batch of leases; a lost lease fails only its own delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_settle() {
    let db = admin().await;
    let t = table(&db, "many", 4).await;
    let c = connect(config(), 2, Queue::new(&t, &t)).await.unwrap();
    let ds = c.claim(4).await.unwrap();
    db.batch_execute(&format!(
        "UPDATE {t} SET locked_until = now() + interval '1 hour' WHERE id = 2"
    ))
    .await
    .unwrap();
    let r = c.settle_many(ds, settle::Outcome::Ack).await;
    assert!(matches!(r[0], Ok(Settled::Deleted)));
    assert!(matches!(r[1], Err(Error::LeaseLost(_))));
    assert!(matches!(r[2], Ok(Settled::Deleted)) && matches!(r[3], Ok(Settled::Deleted)));
    assert_eq!(state(&db, &t).await, vec![(2, 1, false, true)]);
}

/// A statement-level trigger on `t` that logs how many rows each DELETE took, so
/// a test can see which settles went as one statement.
async fn log_deletes(db: &tokio_postgres::Client, t: &str) {
    db.batch_execute(&format!(
        "CREATE TABLE {t}_log (at serial, n bigint);
         CREATE FUNCTION {t}_count() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO {t}_log (n) SELECT count(*) FROM old; RETURN NULL; END $$;
         CREATE TRIGGER count_deletes AFTER DELETE ON {t} REFERENCING OLD TABLE AS old
           FOR EACH STATEMENT EXECUTE FUNCTION {t}_count();"
    ))
    .await
    .unwrap();
}

/// (statements, largest, rows) of the DELETEs logged since log row `after`
async fn deletes(db: &tokio_postgres::Client, t: &str, after: i32) -> (i64, i64, i64) {
    let r = db
        .query_one(
            &format!("SELECT count(*), coalesce(max(n), 0), coalesce(sum(n), 0)::bigint FROM {t}_log WHERE at > $1 AND n > 0"),
            &[&after],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Settle every delivery at once from its own task (they start together), with
/// the outcome `pick` gives its id; results by id.
async fn settle_together(
    ds: Vec<settle::Delivery>,
    pick: fn(i64) -> settle::Outcome,
) -> std::collections::BTreeMap<i64, Vec<settle::Result<Settled>>> {
    let go = std::sync::Arc::new(tokio::sync::Barrier::new(ds.len()));
    let hs: Vec<_> = ds
        .into_iter()
        .map(|d| {
            let go = go.clone();
            tokio::spawn(async move {
                let id: i64 = d.id().parse().unwrap();
                go.wait().await;
                (id, d.settle(pick(id)).await)
            })
        })
        .collect();
    let mut out = std::collections::BTreeMap::<i64, Vec<_>>::new();
    for h in hs {
        let (id, r) = h.await.unwrap();
        out.entry(id).or_default().push(r);
    }
    out
}

/// Lease settles of concurrent deliveries go together: the first two alone,
/// those that arrive while they run as one statement per outcome. Each still gets its
/// own result: a lease lost fails only its own delivery; retry and retry_after
/// write what they write alone. (One runtime thread, so the tasks queue behind
/// the first deterministically.)
#[tokio::test]
async fn concurrent_lease_settles_are_combined() {
    let db = admin().await;
    let t = table(&db, "combine", 30).await;
    log_deletes(&db, &t).await;
    let q = Queue::new(&t, &t).form(Form::Lease {
        ttl: Duration::from_secs(30),
    });
    let c = connect(config(), 4, q).await.unwrap();
    let mut ds = Vec::new();
    for _ in 0..3 {
        ds.extend(c.claim(10).await.unwrap());
    }
    assert_eq!(ds.len(), 30);
    // row 5 is taken by a later claim (another token) before it is settled
    db.batch_execute(&format!(
        "UPDATE {t} SET locked_until = locked_until + interval '1 second' WHERE id = 5"
    ))
    .await
    .unwrap();
    let r = settle_together(ds, |id| match id {
        ..=20 => settle::Outcome::Ack,
        21..=25 => settle::Outcome::Retry,
        _ => settle::Outcome::RetryAfter(Duration::from_secs(3600)),
    })
    .await;
    for (id, rs) in &r {
        let want = match id {
            5 => "lease lost",
            ..=20 => "Deleted",
            21..=25 => "Retried",
            _ => "Delayed",
        };
        let got = match &rs[0] {
            Err(Error::LeaseLost(_)) => "lease lost".to_owned(),
            other => format!("{:?}", other.as_ref().unwrap()),
        };
        assert_eq!(got, want, "row {id}");
    }
    let mut want = vec![(5, 1, false, true)];
    want.extend((21..=25).map(|id| (id, 1, false, false)));
    want.extend((26..=30).map(|id| (id, 1, true, false)));
    assert_eq!(state(&db, &t).await, want);
    let (statements, largest, rows) = deletes(&db, &t, 0).await;
    assert_eq!(rows, 19, "every ack deleted its row once");
    assert!(
        largest > 1 && statements < 19,
        "acks that arrived together went as one statement: {statements} DELETEs, the largest of {largest} rows"
    );
}

/// A combined statement that fails as a whole writes nothing; its deliveries are
/// then settled one by one, so only the row at fault fails (and is given back at
/// once), as it would alone. Two deliveries of one row (a stale one and the
/// reclaim) settling together: the stale one loses its lease, the other settles.
#[tokio::test]
async fn combined_settles_fail_only_their_own_row() {
    let db = admin().await;
    let t = table(&db, "combine_fail", 12).await;
    log_deletes(&db, &t).await;
    db.batch_execute(&format!(
        "CREATE FUNCTION {t}_refuse() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN IF OLD.id = 10 THEN RAISE EXCEPTION 'row % refuses to go', OLD.id; END IF; RETURN OLD; END $$;
         CREATE TRIGGER refuse BEFORE DELETE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_refuse();"
    ))
    .await
    .unwrap();
    let q = Queue::new(&t, &t).form(Form::Lease {
        ttl: Duration::from_secs(30),
    });
    let c = connect(config(), 4, q).await.unwrap();
    let ds = c.claim(10).await.unwrap();
    let r = settle_together(ds, |_| settle::Outcome::Ack).await;
    for (id, rs) in &r {
        match (id, &rs[0]) {
            (10, Err(Error::Database(e))) => {
                assert!(e.to_string().contains("refuses to go"), "{e}")
            }
            (10, other) => panic!("row 10: {other:?}"),
            (_, other) => assert!(matches!(other, Ok(Settled::Deleted)), "row {id}: {other:?}"),
        }
    }
    // row 10 was given back at once (attempt counted, no lease)
    assert_eq!(
        state(&db, &t).await,
        vec![
            (10, 1, false, false),
            (11, 0, false, false),
            (12, 0, false, false)
        ]
    );
    assert_eq!(deletes(&db, &t, 0).await.2, 9);

    // rows 11 and 12; row 11's lease runs out and is claimed again
    let mut ds = c.claim(2).await.unwrap();
    let ids: Vec<&str> = ds.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["10", "11"]);
    ds.extend(c.claim(1).await.unwrap());
    db.batch_execute(&format!(
        "UPDATE {t} SET locked_until = now() - interval '1 second' WHERE id = 11"
    ))
    .await
    .unwrap();
    let again = c.claim(1).await.unwrap();
    assert_eq!(again[0].id(), "11");
    ds.extend(again);
    let logged: i32 = db
        .query_one(&format!("SELECT coalesce(max(at), 0) FROM {t}_log"), &[])
        .await
        .unwrap()
        .get(0);
    let r = settle_together(ds, |id| {
        if id == 10 {
            settle::Outcome::Retry
        } else {
            settle::Outcome::Ack
        }
    })
    .await;
    assert!(matches!(r[&10][..], [Ok(Settled::Retried)]), "{:?}", r[&10]);
    assert!(matches!(r[&12][..], [Ok(Settled::Deleted)]), "{:?}", r[&12]);
    let mut r11: Vec<String> = r[&11]
        .iter()
        .map(|x| match x {
            Err(Error::LeaseLost(_)) => "lease lost".into(),
            other => format!("{other:?}"),
        })
        .collect();
    r11.sort();
    assert_eq!(
        r11,
        ["Ok(Deleted)", "lease lost"],
        "row 11: the stale delivery loses"
    );
    assert_eq!(state(&db, &t).await, vec![(10, 2, false, false)]);
    assert_eq!(deletes(&db, &t, logged).await.2, 2);
}

/// settle_many in row_lock and advisory: one statement on the claim's connection.
/// Siblings settled later keep the transaction; the last settle commits (row_lock)
/// or lets the keys go (advisory); the outcome is the one given; a custom
/// outcome whose SQL fails for one row is settled one by one so only that row fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_settle_on_the_claims_connection() {
    let db = admin().await;
    for form in [Form::RowLock, Form::Advisory] {
        let t = table(&db, "pinned_many", 6).await;
        let q = Queue::new(&t, &t)
            .form(form)
            .custom_outcome("only_odd", format!("UPDATE {t} SET payload = jsonb_build_object('odd', 1 / (id % 2)) WHERE id = $1::bigint"));
        let c = connect(config(), 2, q).await.unwrap();
        let mut ds = c.claim(6).await.unwrap();
        assert_eq!(ds.len(), 6, "{form:?}");
        let last = ds.pop().unwrap();
        let retry: Vec<_> = ds.drain(3..).collect();
        // 1..=3 acked, 4..=5 retried in two statements, 6 settled last
        let r = c.settle_many(ds, settle::Outcome::Ack).await;
        assert!(
            r.iter().all(|r| matches!(r, Ok(Settled::Deleted))),
            "{form:?}: {r:?}"
        );
        let r = c.settle_many(retry, settle::Outcome::Retry).await;
        assert!(
            r.iter().all(|r| matches!(r, Ok(Settled::Retried))),
            "{form:?}: {r:?}"
        );
        if form == Form::RowLock {
            // not committed yet: the claim's transaction is still open for row 6
            assert_eq!(
                state(&db, &t).await.len(),
                6,
                "row_lock: nothing visible before the last settle"
            );
        }
        last.ack().await.unwrap();
        // the attempt: row_lock counts it in the retry, advisory counted it at claim
        let want = vec![(4, 1, false, false), (5, 1, false, false)];
        assert_eq!(state(&db, &t).await, want, "{form:?}");
        assert_eq!(keys_held(&db, &t, 6).await, 0, "{form:?}: no key left held");

        // a custom outcome failing for an even id (division by zero)
        let ds = c.claim(2).await.unwrap();
        assert_eq!(ds.len(), 2, "{form:?}");
        let r = c
            .settle_many(ds, settle::Outcome::Custom("only_odd".into()))
            .await;
        if form == Form::RowLock {
            // undone to the savepoint, then one by one: row 5 settles, row 4 fails alone
            assert!(r[0].is_err(), "row_lock: id 4 fails: {r:?}");
            assert!(
                matches!(r[1], Ok(Settled::Custom)),
                "row_lock: id 5 settles: {r:?}"
            );
            let odd: i64 = db
                .query_one(
                    &format!("SELECT count(*) FROM {t} WHERE payload ? 'odd'"),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(odd, 1, "row_lock: only row 5 took the custom outcome");
        } else {
            // advisory: one autocommitted statement failed, nothing was written
            assert!(r.iter().all(|r| r.is_err()), "advisory: {r:?}");
            let odd: i64 = db
                .query_one(
                    &format!("SELECT count(*) FROM {t} WHERE payload ? 'odd'"),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(odd, 0, "advisory: nothing written");
        }
        assert_eq!(
            keys_held(&db, &t, 6).await,
            0,
            "{form:?}: no key left held after a failed batch"
        );
    }
}

/// The worker: 8 concurrent handlers, 300 jobs, every job handled and acked
/// exactly once (a unique constraint on the side table would reject a second run).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_handles_every_job_once() {
    let db = admin().await;
    for form in FORMS {
        let t = table(&db, "worker", 300).await;
        db.batch_execute(&format!("CREATE TABLE {t}_done (id bigint PRIMARY KEY)"))
            .await
            .unwrap();
        let c = connect(config(), 12, Queue::new(&t, &t).form(form))
            .await
            .unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let pool = c.pool().expect("the extension backend").clone();
        let done_table = format!("{t}_done");
        let worker = {
            let c = c.clone();
            tokio::spawn(async move {
                c.run(
                    WorkerOptions {
                        concurrency: 8,
                        batch: 5,
                        ..Default::default()
                    },
                    async {
                        let _ = stop_rx.await;
                    },
                    move |d| {
                        let pool = pool.clone();
                        let done_table = done_table.clone();
                        async move {
                            let id: i64 = d.id().parse().unwrap();
                            let c = pool.get().await?;
                            c.execute(&format!("INSERT INTO {done_table} VALUES ($1)"), &[&id])
                                .await?;
                            drop(c);
                            d.ack().await
                        }
                    },
                )
                .await
            })
        };
        // wait until the queue is empty
        for _ in 0..600 {
            let left: i64 = db
                .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                .await
                .unwrap()
                .get(0);
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop_tx.send(()).unwrap();
        let report = worker.await.unwrap().unwrap();
        let done: i64 = db
            .query_one(&format!("SELECT count(*) FROM {t}_done"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(done, 300, "{form:?}");
        assert_eq!(report.count(Settled::Deleted), 300, "{form:?}: {report:?}");
        assert_eq!((report.errors, report.panicked), (0, 0), "{form:?}");
        assert!(state(&db, &t).await.is_empty());
    }
}

/// A panicking handler does not stop the worker; its delivery is given back.
/// A graceful stop mid-run loses nothing: every job is acked or still queued,
/// none held.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_survives_panics_and_stops_gracefully() {
    let db = admin().await;
    for form in [
        Form::Lease {
            ttl: Duration::from_secs(30),
        },
        Form::Advisory,
        Form::RowLock,
    ] {
        let t = table(&db, "panics", 40).await;
        let c = connect(config(), 8, Queue::new(&t, &t).form(form))
            .await
            .unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        // panic once (in row_lock a crash rolls the attempt back, so the attempt cannot tell)
        let panicked_once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let worker = {
            let c = c.clone();
            tokio::spawn(async move {
                c.run(
                    WorkerOptions {
                        concurrency: 4,
                        batch: 2,
                        poll_interval: Duration::from_millis(50),
                        ..Default::default()
                    },
                    async {
                        let _ = stop_rx.await;
                    },
                    move |d| {
                        let panicked_once = panicked_once.clone();
                        async move {
                            if d.id() == "7" && !panicked_once.swap(true, Ordering::SeqCst) {
                                panic!("handler bug on row 7");
                            }
                            tokio::time::sleep(Duration::from_millis(30)).await;
                            d.ack().await
                        }
                    },
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(250)).await;
        stop_tx.send(()).unwrap();
        let report = worker.await.unwrap().unwrap();
        assert_eq!(report.panicked, 1, "{form:?}: {report:?}");
        // give the panicked delivery's give-back a moment to finish
        tokio::time::sleep(Duration::from_millis(100)).await;
        let left = state(&db, &t).await;
        let acked = report.count(Settled::Deleted) as usize;
        assert_eq!(
            acked + left.len(),
            40,
            "{form:?}: nothing lost ({report:?}, left {left:?})"
        );
        assert!(
            left.iter().all(|(_, _, _, leased)| !leased),
            "{form:?}: nothing left held: {left:?}"
        );
        assert_eq!(keys_held(&db, &t, 40).await, 0, "{form:?}");
        // and everything left is claimable: a second worker run finishes the queue
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let w = {
            let c = c.clone();
            tokio::spawn(async move {
                c.run(
                    WorkerOptions::default(),
                    async {
                        let _ = stop_rx.await;
                    },
                    |d| async move { d.ack().await },
                )
                .await
            })
        };
        for _ in 0..300 {
            if state(&db, &t).await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop_tx.send(()).unwrap();
        let r2 = w.await.unwrap().unwrap();
        assert_eq!(acked + r2.count(Settled::Deleted) as usize, 40, "{form:?}");
    }
}

/// NOTIFY wakes an idle worker well before its poll interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_the_worker() {
    let db = admin().await;
    let name = format!(
        "notify_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    db.query_one("SELECT queue_create($1, 'lease')", &[&name])
        .await
        .unwrap();
    let c = connect(config(), 2, Queue::new(&name, &name))
        .await
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let w = {
        let c = c.clone();
        tokio::spawn(async move {
            c.run(
                WorkerOptions {
                    poll_interval: Duration::from_secs(30),
                    ..Default::default()
                },
                async {
                    let _ = stop_rx.await;
                },
                move |d| {
                    let seen = seen_tx.clone();
                    async move {
                        let _ = seen.send(std::time::Instant::now());
                        d.ack().await
                    }
                },
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await; // idle, LISTENing
    let sent = std::time::Instant::now();
    db.execute(
        &format!("INSERT INTO {name} (payload) VALUES ('{{}}')"),
        &[],
    )
    .await
    .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), seen_rx.recv())
        .await
        .expect("woken")
        .unwrap();
    assert!(
        got.duration_since(sent) < Duration::from_secs(5),
        "woken by NOTIFY, not the 30 s poll"
    );
    stop_tx.send(()).unwrap();
    w.await.unwrap().unwrap();
}

/// A statement timeout is a clear error (SQLSTATE 57014), writes nothing, and the
/// row is claimable again: nothing stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_leaves_nothing_stuck() {
    let db = admin().await;
    for form in FORMS {
        let t = table(&db, "timeout", 1).await;
        let q = Queue::new(&t, &t).form(form).custom_outcome(
            "slow",
            format!(
                "UPDATE {t} SET attempt = attempt + 100 WHERE id = $1 AND pg_sleep(1) IS NOT NULL"
            ),
        );
        // registered without the timeout: a registration's cost grows with the
        // queues in the database (the SQL edition rewrites its entry points)
        register(config(), &q).await.unwrap();
        let mut cfg = config();
        cfg.options("-c statement_timeout=200");
        let c = Client::connect(cfg, 2, q).await.unwrap();
        let d = c.claim(1).await.unwrap().pop().unwrap();
        let err = d.custom("slow").await.unwrap_err();
        assert!(
            matches!(&err, Error::Database(e) if e.code.as_deref() == Some("57014")),
            "{form:?}: {err:?}"
        );
        // nothing was written; the delivery was given back: the row comes back
        let mut again = claim_within_2s(&c).await;
        let d = again
            .pop()
            .unwrap_or_else(|| panic!("{form:?}: the row is claimable again"));
        assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{form:?}");
        assert!(state(&db, &t).await.is_empty(), "{form:?}");
    }
}

/// The payload arrives as JSON text and is read on demand: `payload::<T>()`
/// into a struct, `payload_json()`; with the payload role off it is the whole
/// row; a text `payload` column that holds JSON is read the same way as a jsonb one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_row_and_text_payloads() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Job {
        n: i64,
    }
    #[derive(serde::Deserialize)]
    struct Row {
        id: i64,
        attempt: i32,
    }
    let db = admin().await;
    let t = table(&db, "payloads", 1).await;
    let c = connect(config(), 2, Queue::new(&t, &t)).await.unwrap();
    let d = c.claim(1).await.unwrap().pop().unwrap();
    assert_eq!(d.payload::<Job>().unwrap(), Job { n: 1 });
    assert!(matches!(d.payload::<Vec<i64>>(), Err(Error::Payload(_))));
    assert_eq!(d.payload_json()["n"], 1);
    d.ack().await.unwrap();
    let t = table(&db, "wholerow", 1).await;
    let c = connect(config(), 2, Queue::new(&t, &t).without(Role::Payload))
        .await
        .unwrap();
    let d = c.claim(1).await.unwrap().pop().unwrap();
    let r: Row = d.payload().unwrap();
    assert_eq!((r.id, r.attempt), (1, 1)); // the row as the lease claim left it
    assert_eq!(d.payload_json()["payload"]["n"], 1);
    d.ack().await.unwrap();

    let name = format!("textpayload_{}", std::process::id());
    db.batch_execute(&format!(
        "CREATE TABLE {name} (id bigint PRIMARY KEY, payload text, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
         INSERT INTO {name} VALUES (1, '{{\"n\": 7}}'), (2, NULL);"
    ))
    .await
    .unwrap();
    let c = connect(config(), 2, Queue::new(&name, &name))
        .await
        .unwrap();
    let ds = c.claim(2).await.unwrap();
    assert_eq!(ds[0].payload::<Job>().unwrap(), Job { n: 7 });
    assert_eq!(ds[1].payload::<Option<Job>>().unwrap(), None);
    for d in ds {
        d.ack().await.unwrap();
    }
}

/// A database of its own on the test server, with `setup` run in it; dropped by the caller.
async fn scratch_database(setup: &str) -> (String, tokio_postgres::Config) {
    let db = admin().await;
    let name = format!(
        "settle_scratch_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    db.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let mut cfg = config();
    cfg.dbname(&name);
    let (c, conn) = cfg.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(setup).await.unwrap();
    (name, cfg)
}

async fn drop_database(name: &str) {
    admin()
        .await
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
}

#[tokio::test]
async fn connect_refuses_an_older_or_missing_extension() {
    let setup =
        "CREATE TABLE jobs (id bigint PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0, \
                 locked_until timestamptz)";
    for (ext, installed) in [
        ("CREATE EXTENSION settle VERSION '0.1.0';", Some("0.1.0")),
        ("", None),
    ] {
        let (name, cfg) = scratch_database(&format!("{ext} {setup}")).await;
        let queue = Queue::new("jobs", "jobs").form(Form::Lease {
            ttl: Duration::from_secs(30),
        });
        let err = connect(cfg.clone(), 2, queue)
            .await
            .expect_err("an older or missing extension is refused");
        match &err {
            Error::Extension {
                installed: got,
                required,
            } => {
                assert_eq!(got.as_deref(), installed);
                assert_eq!(*required, settle::EXTENSION_VERSION);
            }
            other => panic!("expected Error::Extension, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(settle::EXTENSION_VERSION), "{msg}");
        // nothing was registered: the old extension's registry is untouched
        if installed.is_some() {
            let (c, conn) = cfg.connect(tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            let n: i64 = c
                .query_one("SELECT count(*) FROM settle_queues", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(n, 0);
            // after the update the same call connects
            c.batch_execute("ALTER EXTENSION settle UPDATE")
                .await
                .unwrap();
            drop(c);
            let queue = Queue::new("jobs", "jobs").form(Form::Lease {
                ttl: Duration::from_secs(30),
            });
            let client = connect(cfg, 2, queue).await.unwrap();
            assert!(client.claim(1).await.unwrap().is_empty());
        }
        drop_database(&name).await;
    }
}
