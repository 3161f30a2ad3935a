//! One body of scenarios, run unchanged against every backend × claim form that
//! docs/portable.md lists, as one named test per backend × form × scenario:
//! `cargo test -p settle-conformance sqlite_lease` runs one cell,
//! `cargo test -p settle-conformance batch_ack` one scenario everywhere. A
//! backend that cannot run a form says why (capability), and a cell left out
//! by `SETTLE_TEST_BACKENDS` prints that it was; a missing server is a
//! failure, never a silent skip.

use settle::{Client, Error, Form, PoolOptions, Queue, Settled, WorkerOptions};
use settle_conformance::*;
use sqlx::Row;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one run of the scripted scenario observed.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    steps: Vec<(String, u32, Settled)>,
    rows: Vec<(i64, i64, bool, bool)>,
    dead: Vec<(i64, i64)>,
}

/// The scripted scenario: every outcome, a dead-letter move, a delay and a give-back.
async fn scenario(b: Backend, form: Form) -> Result<Observed, String> {
    let pool = admin(b).await;
    let t = table(b, &pool, "conf", 7).await;
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(form)
                .dead_letter(2, format!("{t}_dead")),
        )
        .await
        .map_err(|e| format!("{b:?} {form:?}: connect: {e}"))?;
    let mut steps = Vec::new();
    macro_rules! one {
        () => {
            c.claim(1)
                .await
                .map_err(|e| format!("{b:?} {form:?}: claim: {e}"))?
                .pop()
                .ok_or(format!("{b:?} {form:?}: no row"))?
        };
    }
    macro_rules! step {
        ($d:expr, $settle:ident $(, $arg:expr)?) => {{
            let d = $d;
            let (id, attempt) = (d.id().to_owned(), d.attempt());
            let s = d.$settle($($arg)?).await.map_err(|e| format!("{b:?} {form:?}: {} {id}: {e}", stringify!($settle)))?;
            steps.push((id, attempt, s));
        }};
    }
    step!(one!(), ack); // 1
    step!(one!(), drop_it); // 2
    step!(one!(), retry); // 3 -> back
    step!(one!(), retry); // 3 again, attempt 2 = max: dead letter
    step!(one!(), retry_after, Duration::from_secs(3600)); // 4 waits
    let mut two = c
        .claim(2)
        .await
        .map_err(|e| format!("{b:?} {form:?}: claim 2: {e}"))?;
    let six = two.pop().ok_or("no row 6")?;
    let five = two.pop().ok_or("no row 5")?;
    step!(five, ack); // 5
    step!(six, release); // 6 given back: row_lock rolls back, others keep the attempt
    step!(one!(), ack); // 6 again
    let (rows, dead) = final_rows(b, &pool, &t).await;
    Ok(Observed { steps, rows, dead })
}

fn expected(form: Form) -> Observed {
    let lease_or_adv = form != Form::RowLock;
    let s = |id: &str, a: u32, st: Settled| (id.to_owned(), a, st);
    Observed {
        steps: vec![
            s("1", 1, Settled::Deleted),
            s("2", 1, Settled::Deleted),
            s("3", 1, Settled::Retried),
            s("3", 2, Settled::DeadLettered),
            s("4", 1, Settled::Delayed),
            s("5", 1, Settled::Deleted),
            s("6", 1, Settled::Released),
            s("6", if lease_or_adv { 2 } else { 1 }, Settled::Deleted),
        ],
        // row 4 delayed (attempt counted: row_lock in the settling statement, the
        // others at claim); row 7 untouched
        rows: vec![(4, 1, true, false), (7, 0, false, false)],
        dead: vec![(3, 2)],
    }
}

/// The differential check: the same script ends in the same rows on every
/// backend, and in the rows docs/semantics.md says.
async fn same_final_rows(b: Backend, form: Form) {
    let want = expected(form);
    let obs = scenario(b, form).await.unwrap_or_else(|e| panic!("{e}"));
    if obs != want {
        let mismatch: Vec<String> = obs
            .rows
            .iter()
            .zip(want.rows.iter())
            .filter(|(a, w)| a != w)
            .map(|(a, w)| format!("row {}: got {a:?}, want {w:?}", w.0))
            .collect();
        panic!("{b:?} {form:?}: differs from the contract: {mismatch:?}\n got  {obs:?}\n want {want:?}");
    }
}

/// A form the backend cannot run is refused at registration, clearly (docs/portable.md).
async fn refused(b: Backend, form: Form, why: &str) {
    let pool = admin(b).await;
    let t = table(b, &pool, "refuse", 1).await;
    match b.client(Queue::new(&t, &t).form(form)).await {
        Err(Error::InvalidDescriptor(e)) => {
            println!("{b:?} {form:?}: skipped by capability ({why}); refused: {e}")
        }
        other => panic!("{b:?} {form:?}: expected a refusal, got {other:?}"),
    }
}

/// Several workers: every job settled exactly once.
async fn concurrent_workers(b: Backend, form: Form) {
    const JOBS: usize = 120;
    let pool = admin(b).await;
    let t = table(b, &pool, "conc", JOBS).await;
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();
        let opts = WorkerOptions {
            concurrency: 4,
            batch: 3,
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        };
        workers.push(Worker::acking(c, opts, tally.clone(), Duration::ZERO));
    }
    let left = wait_until_empty(b, &pool, &t, 1500).await;
    let mut acked = 0;
    for w in workers {
        let r = w.stop().await;
        assert_eq!((r.errors, r.panicked), (0, 0), "{b:?} {form:?}: {r:?}");
        acked += r.count(Settled::Deleted);
    }
    let tally = tally.lock().unwrap();
    let twice = tally.not_once();
    assert!(
        twice.is_empty(),
        "{b:?} {form:?}: handled more than once: {twice:?}"
    );
    assert_eq!(
        (left, tally.handled.len(), acked as usize),
        (0, JOBS, JOBS),
        "{b:?} {form:?}"
    );
    println!("{b:?} {form:?}: {JOBS} jobs, 3 workers, each handled once");
}

/// Lease lost: an expired lease is claimed again with a later
/// token; the old holder's settle fails with LeaseLost and changes nothing.
async fn lease_lost(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "lost", 1).await;
    let c = b
        .client(Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_millis(100),
        }))
        .await
        .unwrap();
    let stale = c.claim(1).await.unwrap().pop().unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let fresh = c
        .claim(1)
        .await
        .unwrap()
        .pop()
        .expect("the expired lease is claimed again");
    assert!(
        fresh.token().unwrap() > stale.token().unwrap(),
        "{b:?}: strictly later token"
    );
    assert_eq!(fresh.attempt(), 2, "{b:?}");
    // The 100 ms lease may run out on a loaded machine before the checks below.
    let mut fresh = fresh;
    fresh.extend(Duration::from_secs(60)).await.unwrap();
    let mut stale = stale;
    assert!(
        matches!(
            stale.extend(Duration::from_secs(60)).await,
            Err(Error::LeaseLost(_))
        ),
        "{b:?}"
    );
    assert!(
        matches!(stale.ack().await, Err(Error::LeaseLost(_))),
        "{b:?}"
    );
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert_eq!(
        rows,
        vec![(1, 2, false, true)],
        "{b:?}: the later delivery still holds the row"
    );
    assert_eq!(fresh.ack().await.unwrap(), Settled::Deleted, "{b:?}");
}

/// settle_many: a batch acked at once (on the portable
/// lease path one transaction, elsewhere one statement or one by one); in the
/// lease form a delivery whose lease was lost fails alone with LeaseLost and
/// its row keeps the later delivery.
async fn batch_ack(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "batch", 5).await;
    let lease = matches!(form, Form::Lease { .. });
    let form = if lease {
        Form::Lease {
            ttl: Duration::from_millis(300),
        }
    } else {
        form
    };
    let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();
    let ds = c.claim(4).await.unwrap();
    assert_eq!(ds.len(), 4, "{b:?} {form:?}");
    let mut later = None;
    if lease {
        // the leases run out; row 1 is claimed again (by a client with a
        // long lease), rows 2-4 keep their tokens: nobody took them
        tokio::time::sleep(Duration::from_millis(400)).await;
        let c2 = b
            .client(Queue::new(&t, &t).form(Form::Lease {
                ttl: Duration::from_secs(30),
            }))
            .await
            .unwrap();
        let mut again = c2.claim(1).await.unwrap();
        assert_eq!(again.len(), 1, "{b:?}: an expired lease is claimed again");
        assert_eq!(again[0].id(), "1", "{b:?}");
        later = again.pop();
    }
    let r = c.settle_many(ds, settle::Outcome::Ack).await;
    let (rows, _) = final_rows(b, &pool, &t).await;
    if lease {
        assert!(matches!(r[0], Err(Error::LeaseLost(_))), "{b:?}: {r:?}");
        assert!(
            r[1..].iter().all(|r| matches!(r, Ok(Settled::Deleted))),
            "{b:?}: {r:?}"
        );
        assert_eq!(
            rows,
            vec![(1, 2, false, true), (5, 0, false, false)],
            "{b:?}"
        );
        assert_eq!(
            later.unwrap().ack().await.unwrap(),
            Settled::Deleted,
            "{b:?}"
        );
    } else {
        assert!(
            r.iter().all(|r| matches!(r, Ok(Settled::Deleted))),
            "{b:?} {form:?}: {r:?}"
        );
        assert_eq!(rows, vec![(5, 0, false, false)], "{b:?} {form:?}");
    }
}

/// Lease deliveries of three claims settled at once from their own tasks, on
/// every backend: the client sends those that arrive together as one statement
/// per outcome (see `combine`), and each still gets its own result. Row 1's
/// lease ran out and a later claim holds it: only that delivery fails. One
/// runtime thread, so the settles queue behind the first.
async fn concurrent_lease_settles(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "together", 10).await;
    let c = b
        .client(Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_millis(300),
        }))
        .await
        .unwrap();
    let mut ds = Vec::new();
    for n in [3, 3, 2] {
        ds.extend(c.claim(n).await.unwrap());
    }
    assert_eq!(ds.len(), 8, "{b:?}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let c2 = b
        .client(Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_secs(30),
        }))
        .await
        .unwrap();
    let later = c2.claim(1).await.unwrap().pop().unwrap();
    assert_eq!(later.id(), "1", "{b:?}");
    let go = std::sync::Arc::new(tokio::sync::Barrier::new(ds.len()));
    let hs: Vec<_> = ds
        .into_iter()
        .map(|d| {
            let go = go.clone();
            tokio::spawn(async move {
                let id: i64 = d.id().parse().unwrap();
                let outcome = match id {
                    ..=4 => settle::Outcome::Ack,
                    5 | 6 => settle::Outcome::Retry,
                    _ => settle::Outcome::RetryAfter(Duration::from_secs(3600)),
                };
                go.wait().await;
                (id, d.settle(outcome).await)
            })
        })
        .collect();
    for h in hs {
        let (id, r) = h.await.unwrap();
        let ok = match id {
            1 => matches!(r, Err(Error::LeaseLost(_))),
            ..=4 => matches!(r, Ok(Settled::Deleted)),
            5 | 6 => matches!(r, Ok(Settled::Retried)),
            _ => matches!(r, Ok(Settled::Delayed)),
        };
        assert!(ok, "{b:?} row {id}: {r:?}");
    }
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert_eq!(
        rows,
        vec![
            (1, 2, false, true),
            (5, 1, false, false),
            (6, 1, false, false),
            (7, 1, true, false),
            (8, 1, true, false),
            (9, 0, false, false),
            (10, 0, false, false)
        ],
        "{b:?}"
    );
    assert_eq!(later.ack().await.unwrap(), Settled::Deleted, "{b:?}");
}

/// A batch of retries in which some deliveries reached max_attempts: one
/// `settle_many`, each delivery its own result, the same rows
/// and form (the portable path writes the batch in one transaction or savepoint).
async fn batch_retry_and_dead_letter(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "bretry", 5).await;
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(form)
                .dead_letter(2, format!("{t}_dead")),
        )
        .await
        .unwrap();
    let ds = c.claim(2).await.unwrap();
    let r = c.settle_many(ds, settle::Outcome::Retry).await;
    assert!(
        r.iter().all(|r| matches!(r, Ok(Settled::Retried))),
        "{b:?} {form:?}: {r:?}"
    );
    let ds = c.claim(4).await.unwrap();
    let seen: Vec<(String, u32)> = ds
        .iter()
        .map(|d| (d.id().to_owned(), d.attempt()))
        .collect();
    let want: Vec<(String, u32)> = [("1", 2), ("2", 2), ("3", 1), ("4", 1)]
        .iter()
        .map(|(i, a)| (i.to_string(), *a))
        .collect();
    assert_eq!(seen, want, "{b:?} {form:?}");
    let r = c
        .settle_many(ds, settle::Outcome::RetryAfter(Duration::from_secs(3600)))
        .await;
    let r: Vec<Settled> = r
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{b:?} {form:?}: {e}")))
        .collect();
    assert_eq!(
        r,
        vec![
            Settled::DeadLettered,
            Settled::DeadLettered,
            Settled::Delayed,
            Settled::Delayed
        ],
        "{b:?} {form:?}"
    );
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!(
        rows,
        vec![
            (3, 1, true, false),
            (4, 1, true, false),
            (5, 0, false, false)
        ],
        "{b:?} {form:?}"
    );
    assert_eq!(dead, vec![(1, 2), (2, 2)], "{b:?} {form:?}");
}

/// row_lock: an ack runs without a savepoint of its own (one would leave dead
/// rows PostgreSQL's index scans cannot skip), so an ack that fails — here a
/// row another table still refers to — rolls back the whole claim: every
/// delivery of it reports an error, and every row goes back to the queue
/// unchanged and free, nothing lost.
async fn failed_ack_gives_the_whole_claim_back(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "ackfail", 3).await;
    let keep = match b {
        // SQLite enforces foreign keys only when asked on each connection
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER {t}_keep BEFORE DELETE ON {t} WHEN old.id = 1 \
             BEGIN SELECT RAISE(ABORT, 'row 1 is kept'); END"
        )],
        _ => vec![
            format!(
                "CREATE TABLE {t}_ref (qid BIGINT NOT NULL, FOREIGN KEY (qid) REFERENCES {t} (id))"
            ),
            format!("INSERT INTO {t}_ref (qid) VALUES (1)"),
        ],
    };
    for sql in keep {
        sqlx::query(&sql).execute(&pool).await.unwrap();
    }
    let c = b
        .client(Queue::new(&t, &t).form(Form::RowLock))
        .await
        .unwrap();
    let mut ds = c.claim(2).await.unwrap();
    assert_eq!(ds.len(), 2, "{b:?}");
    let two = ds.pop().unwrap();
    let one = ds.pop().unwrap();
    let r1 = one.ack().await;
    assert!(r1.is_err(), "{b:?}: the ack of row 1 fails: {r1:?}");
    let r2 = two.ack().await;
    assert!(
        r2.is_err(),
        "{b:?}: the claim was rolled back, row 2 too: {r2:?}"
    );
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert_eq!(
        rows,
        vec![
            (1, 0, false, false),
            (2, 0, false, false),
            (3, 0, false, false)
        ],
        "{b:?}: every row back, unchanged"
    );
    // and free: a new claim takes them all
    let again = c.claim(3).await.unwrap();
    assert_eq!(again.len(), 3, "{b:?}: nothing left locked");
    for d in again {
        d.release().await.unwrap();
    }
}

/// Crash loops (docs/semantics.md, "Outcomes"): in the lease and advisory forms a row whose
/// deliveries keep ending unsettled is moved to the dead letter by the claim
/// that finds its attempt at max_attempts, instead of being delivered again.
/// The move is reported by the client (a WARN and the dead-lettered counter),
/// on the extension from the claim's WARNING.
async fn crash_loop(b: Backend, form: Form) {
    let metrics = recorder();
    let pool = admin(b).await;
    let t = table(b, &pool, "crash", 2).await;
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(form)
                .dead_letter(2, format!("{t}_dead")),
        )
        .await
        .unwrap();
    for attempt in 1..=2 {
        let mut ds = c.claim(1).await.unwrap();
        let d = ds.pop().unwrap();
        assert_eq!((d.id(), d.attempt()), ("1", attempt), "{b:?} {form:?}");
        // the handler "crashed": the delivery comes back unsettled
        d.release().await.unwrap();
    }
    let ds = c.claim(2).await.unwrap();
    let ids: Vec<&str> = ds.iter().map(|d| d.id()).collect();
    assert_eq!(
        ids,
        vec!["2"],
        "{b:?} {form:?}: row 1 is not delivered a third time"
    );
    for d in ds {
        d.ack().await.unwrap();
    }
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!(rows, vec![], "{b:?} {form:?}");
    assert_eq!(dead, vec![(1, 2)], "{b:?} {form:?}");
    let dead_lettered = metrics
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(k, _, _, _)| {
            let key = k.key();
            key.name() == settle::meters::SETTLED
                && key.labels().any(|l| l.key() == "queue" && l.value() == t)
                && key
                    .labels()
                    .any(|l| l.key() == "outcome" && l.value() == "dead_lettered")
        })
        .map(|(_, _, _, v)| match v {
            metrics_util::debugging::DebugValue::Counter(n) => n,
            other => panic!("{other:?}"),
        })
        .sum::<u64>();
    assert_eq!(
        dead_lettered, 1,
        "{b:?} {form:?}: the claim's move is counted"
    );
}

/// A recorder for the metrics of every client made after the first call
/// (one per test binary).
fn recorder() -> &'static metrics_util::debugging::Snapshotter {
    static SNAP: std::sync::OnceLock<metrics_util::debugging::Snapshotter> =
        std::sync::OnceLock::new();
    SNAP.get_or_init(|| {
        let rec = metrics_util::debugging::DebuggingRecorder::new();
        let snap = rec.snapshotter();
        rec.install()
            .expect("the only recorder of this test binary");
        snap
    })
}

/// Bad input: each a clear error naming the problem, nothing written.
async fn bad_descriptors_are_refused(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "bad", 1).await;
    let missing = b
        .client(Queue::new(&t, &t).column(settle::Role::Attempt, "no_such_column"))
        .await;
    assert!(
        matches!(&missing, Err(Error::InvalidDescriptor(e)) if e.message.contains("no_such_column")),
        "{b:?}: {missing:?}"
    );
    let wrong = b
        .client(Queue::new(&t, &t).column(settle::Role::RetryAfter, "payload"))
        .await;
    assert!(
        matches!(&wrong, Err(Error::InvalidDescriptor(e)) if e.message.contains("payload")),
        "{b:?}: {wrong:?}"
    );
    let no_table = b.client(Queue::new("q", "no_such_table_here")).await;
    assert!(
        matches!(&no_table, Err(Error::InvalidDescriptor(_))),
        "{b:?}: {no_table:?}"
    );
    let no_dead = b
        .client(Queue::new(&t, &t).dead_letter(3, "no_such_dead_table"))
        .await;
    assert!(
        matches!(&no_dead, Err(Error::InvalidDescriptor(_))),
        "{b:?}: {no_dead:?}"
    );
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!(
        (rows, dead),
        (vec![(1, 0, false, false)], vec![]),
        "{b:?}: nothing written"
    );
}

/// Transactional mode (row_lock): the handlers' writes in the
/// claim transaction survive ack and vanish for retry, retry_after, drop, the
/// dead-letter move and a delivery dropped unsettled.
async fn transactional_mode(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "txm", 5).await;
    let d = b.dialect();
    let side = side_table(b, &pool, &t).await;
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(Form::RowLock)
                .dead_letter(1, format!("{t}_dead")),
        )
        .await
        .unwrap();
    let batch = c.claim(5).await.unwrap();
    assert_eq!(batch.len(), 5, "{b:?}");
    let mut got = Vec::new();
    for (i, mut dl) in batch.into_iter().enumerate() {
        let id: i64 = dl.id().parse().unwrap();
        if b == Backend::PgExtension {
            let tx = dl.transaction().await.unwrap();
            tx.execute(&format!("INSERT INTO {side} VALUES ($1)"), &[&id])
                .await
                .unwrap();
        } else {
            let conn = dl.any_transaction().await.unwrap();
            sqlx::query(&format!("INSERT INTO {side} VALUES ({})", d.p(1)))
                .bind(id)
                .execute(conn)
                .await
                .unwrap();
        }
        got.push(match i {
            0 => dl.ack().await.unwrap(),
            1 => dl.retry_after(Duration::from_secs(60)).await.unwrap(),
            2 => dl.drop_it().await.unwrap(),
            3 => dl.retry().await.unwrap(),
            _ => dl.release().await.unwrap(),
        });
    }
    assert_eq!(
        got,
        vec![
            Settled::Deleted,
            Settled::DeadLettered,
            Settled::Deleted,
            Settled::DeadLettered,
            Settled::Released
        ],
        "{b:?}"
    );
    let kept = side_ids(b, &pool, &side).await;
    assert_eq!(
        kept,
        vec![1],
        "{b:?}: only the acked handler's write survives"
    );
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!(rows, vec![(5, 0, false, false)], "{b:?}");
    assert_eq!(dead, vec![(2, 1), (4, 1)], "{b:?}");
    println!("{b:?}: transactional mode ok");
}

/// A payload that is not valid for the handler's type is a Payload error on every
/// backend, and the delivery is still there to settle.
async fn payload_of_the_wrong_shape(b: Backend) {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Email {
        to: String,
    }
    let pool = admin(b).await;
    let t = table(b, &pool, "shape", 1).await; // payload is {"n": 1}
    let c = b.client(Queue::new(&t, &t)).await.unwrap();
    let d = c.claim(1).await.unwrap().pop().unwrap();
    assert!(
        matches!(d.payload::<Email>(), Err(Error::Payload(_))),
        "{b:?}"
    );
    assert_eq!(d.payload::<serde_json::Value>().unwrap()["n"], 1, "{b:?}");
    assert_eq!(d.drop_it().await.unwrap(), Settled::Deleted, "{b:?}");
}

/// The payload role in every form: the claim hands over the payload column's
/// value (the canonical JSON column, or a text column named in the descriptor,
/// which may or may not hold JSON), the whole row when the role is off, and a
/// column of a type with no payload form is refused at registration.
async fn payload_roles(b: Backend, form: Form) {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Job {
        n: i64,
    }
    #[derive(Debug, serde::Deserialize)]
    struct IdAndAttempt {
        id: i64,
        attempt: i64,
    }
    let pool = admin(b).await;
    let d = b.dialect();
    async fn claim_all(b: Backend, q: Queue, n: usize) -> (Client, Vec<settle::Delivery>) {
        let c = b.client(q).await.unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let ds = c.claim(n).await.unwrap();
        assert_eq!(ds.len(), n, "{b:?}");
        (c, ds)
    }

    let t = table(b, &pool, "payload", 2).await;
    let (_c, ds) = claim_all(b, Queue::new(&t, &t).form(form), 2).await;
    for (i, dl) in ds.iter().enumerate() {
        let n = i as i64 + 1;
        assert_eq!(dl.payload::<Job>().unwrap(), Job { n }, "{b:?} {form:?}");
        assert_eq!(dl.payload_json()["n"], n, "{b:?} {form:?}");
    }
    for dl in ds {
        dl.ack().await.unwrap();
    }

    let t = table(b, &pool, "wholerow", 1).await;
    let q = Queue::new(&t, &t).form(form).without(settle::Role::Payload);
    let (_c, mut ds) = claim_all(b, q, 1).await;
    let dl = ds.pop().unwrap();
    let row: IdAndAttempt = dl.payload().unwrap();
    assert_eq!(row.id, 1, "{b:?} {form:?}: the whole row");
    assert!(row.attempt <= 1, "{b:?} {form:?}");
    assert!(dl.payload_json().get("payload").is_some(), "{b:?} {form:?}");
    dl.ack().await.unwrap();

    let t = table(b, &pool, "textpayload", 3).await;
    for stmt in [
        format!("ALTER TABLE {} ADD COLUMN body VARCHAR(100)", d.ident(&t)),
        format!("ALTER TABLE {} ADD COLUMN num INTEGER", d.ident(&t)),
        format!(
            "UPDATE {} SET body = 'plain \"text\"' WHERE id = 1",
            d.ident(&t)
        ),
        format!(
            "UPDATE {} SET body = '{{\"n\": 5}}' WHERE id = 2",
            d.ident(&t)
        ),
    ] {
        sqlx::query(&stmt)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{b:?}: {stmt}: {e}"));
    }
    let wrong = b
        .client(
            Queue::new(&t, &t)
                .form(form)
                .column(settle::Role::Payload, "num"),
        )
        .await;
    assert!(
        matches!(&wrong, Err(Error::InvalidDescriptor(e)) if e.message.contains("num")),
        "{b:?}: {wrong:?}"
    );
    let q = Queue::new(&t, &t)
        .form(form)
        .column(settle::Role::Payload, "body");
    let (_c, ds) = claim_all(b, q, 3).await;
    assert_eq!(
        ds[0].payload::<String>().unwrap(),
        "plain \"text\"",
        "{b:?} {form:?}"
    );
    assert_eq!(ds[0].payload_json(), "plain \"text\"", "{b:?} {form:?}");
    assert_eq!(
        ds[1].payload::<Job>().unwrap(),
        Job { n: 5 },
        "{b:?} {form:?}"
    );
    assert_eq!(
        ds[1].payload::<String>().unwrap(),
        "{\"n\": 5}",
        "{b:?} {form:?}"
    );
    assert_eq!(
        ds[2].payload::<Option<Job>>().unwrap(),
        None,
        "{b:?} {form:?}"
    );
    assert!(ds[2].payload_json().is_null(), "{b:?} {form:?}");
    for dl in ds {
        dl.ack().await.unwrap();
    }
}

/// Every connection busy: a claim waits `wait_timeout`, fails with
/// `Error::PoolTimeout` having claimed nothing, and works again once a
/// connection is free. Row_lock/advisory deliveries keep their connection until
/// settled; for the lease form something else holds the only connection.
async fn pool_exhausted(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "pool", 2).await;
    let c = b
        .client_with(
            Queue::new(&t, &t).form(form),
            PoolOptions::new(1).wait_timeout(Some(Duration::from_millis(200))),
        )
        .await
        .unwrap();
    let lease = matches!(form, Form::Lease { .. });
    let mut first = None;
    let (mut ext_hold, mut any_hold) = (None, None);
    if lease {
        if b == Backend::PgExtension {
            ext_hold = Some(
                c.pool()
                    .expect("the extension backend")
                    .get()
                    .await
                    .unwrap(),
            );
        } else {
            any_hold = Some(c.any_connection().await.unwrap());
        }
    } else {
        first = c.claim(1).await.unwrap().pop();
        assert!(first.is_some(), "{b:?} {form:?}: the first claim");
    }
    let started = std::time::Instant::now();
    let r = c.claim(1).await;
    let waited = started.elapsed();
    assert!(
        matches!(r, Err(Error::PoolTimeout(_))),
        "{b:?} {form:?}: {:?}",
        r.map(|v| v.len())
    );
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(5),
        "{b:?} {form:?}: waited {waited:?}"
    );
    let (rows, _) = final_rows(b, &pool, &t).await;
    let attempts: Vec<i64> = rows.iter().map(|r| r.1).collect();
    // a row_lock claim's attempt is uncommitted until its transaction ends
    let expect = if form == Form::Advisory {
        vec![1, 0]
    } else {
        vec![0, 0]
    };
    assert_eq!(
        attempts, expect,
        "{b:?} {form:?}: the timed-out claim took nothing"
    );
    drop((ext_hold, any_hold));
    if let Some(d) = first {
        assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{b:?} {form:?}");
    }
    // recovered: the rest is claimed and settled through the same pool
    loop {
        let got = c.claim(1).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in got {
            d.ack().await.unwrap();
        }
    }
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert!(rows.is_empty(), "{b:?} {form:?}: {rows:?}");
}

/// What a backend can do is a fact the client states, and what it cannot do
/// is a clear `Unsupported` error, never a panic.
async fn capabilities(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "caps", 1).await;
    let c = b
        .client(Queue::new(&t, &t).dead_letter(3, format!("{t}_dead")))
        .await
        .unwrap();
    let caps = c.capabilities();
    let ext = b == Backend::PgExtension;
    assert_eq!(
        (caps.listen, caps.transaction, caps.any_transaction),
        (ext, ext, !ext),
        "{b:?}: {caps:?}"
    );
    assert_eq!(c.pool().is_some(), ext, "{b:?}");
    assert_eq!(c.any_connection().await.is_ok(), !ext, "{b:?}");
    assert_eq!(c.requeue_dead().await.unwrap(), 0, "{b:?}");
    // a lease delivery has no claim transaction to lend, on either backend
    let mut d = c.claim(1).await.unwrap().pop().unwrap();
    let wrong = if ext {
        d.any_transaction().await.err()
    } else {
        d.transaction().await.err()
    };
    assert!(
        matches!(wrong, Some(Error::Unsupported(_))),
        "{b:?}: {wrong:?}"
    );
    assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{b:?}");
}

/// An unreachable database is a clear connection error, quickly.
#[tokio::test]
async fn unreachable_database() {
    let unreachable =
        Client::portable("mysql://root@127.0.0.1:1/settle", 1, Queue::new("q", "q")).await;
    assert!(
        matches!(unreachable, Err(Error::Database(_))),
        "{unreachable:?}"
    );
}

/// A custom outcome runs the service's own SQL (here: it marks the row's
/// attempt) instead of an outcome's statement, on every backend; an outcome
/// the queue does not have is refused and writes nothing.
async fn custom_outcome(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "custom", 2).await;
    let d = b.dialect();
    let id = match d {
        settle::Dialect::Postgres => format!("CAST({} AS bigint)", d.p(1)),
        _ => d.p(1),
    };
    let mark = format!("UPDATE {} SET attempt = 77 WHERE id = {id}", d.ident(&t));
    let c = b
        .client(Queue::new(&t, &t).form(form).custom_outcome("mark", mark))
        .await
        .unwrap();
    let one = c.claim(1).await.unwrap().pop().unwrap();
    assert_eq!(
        one.custom("mark").await.unwrap(),
        Settled::Custom,
        "{b:?} {form:?}"
    );
    let two = c.claim(1).await.unwrap().pop().unwrap();
    let err = two.custom("nope").await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "{b:?} {form:?}: {err:?}"
    );
    let marked: i64 = sqlx::query(&format!(
        "SELECT count(*) FROM {} WHERE attempt >= 77",
        d.ident(&t)
    ))
    .fetch_one(&pool)
    .await
    .unwrap()
    .get(0);
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert_eq!(
        (marked, rows.len()),
        (1, 2),
        "{b:?} {form:?}: one row marked by the custom SQL, none deleted"
    );
}

/// One module per backend × form (or per backend, for scenarios that do not
/// depend on the form), one test per scenario in it.
/// One test per scenario, in a module per cell: the scenarios that take a
/// form, and those that take the backend alone.
macro_rules! cell {
    ($cell:ident: $b:expr, $form:expr => $($scenario:ident),+ $(,)?) => {
        mod $cell {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if selected($b) {
                        in_form($b, $form, super::$scenario).await;
                    }
                }
            )+
        }
    };
    ($cell:ident: $b:expr => $($scenario:ident),+ $(,)?) => {
        mod $cell {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if selected($b) {
                        super::$scenario($b).await;
                    }
                }
            )+
        }
    };
}

/// Run a scenario in `form`, or, where the backend does not run that form,
/// check that it refuses it clearly.
async fn in_form<F, Fut>(b: Backend, form: Form, scenario: F)
where
    F: FnOnce(Backend, Form) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let why = b
        .forms()
        .into_iter()
        .find(|(f, _)| std::mem::discriminant(f) == std::mem::discriminant(&form))
        .and_then(|(_, why)| why);
    match why {
        Some(why) => refused(b, form, why).await,
        None => scenario(b, form).await,
    }
}

/// Every scenario, listed once, for one backend: each form's (a form the
/// backend does not run is checked to be refused), then the backend's own.
/// lease: crash loops too; lease and advisory count attempts at claim.
macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;
            cell!(row_lock: $b, Form::RowLock =>
                same_final_rows, concurrent_workers, batch_ack, batch_retry_and_dead_letter,
                pool_exhausted, payload_roles, custom_outcome);
            cell!(lease: $b, lease() =>
                same_final_rows, concurrent_workers, batch_ack, batch_retry_and_dead_letter,
                pool_exhausted, payload_roles, custom_outcome, crash_loop);
            cell!(advisory: $b, Form::Advisory =>
                same_final_rows, concurrent_workers, batch_ack, batch_retry_and_dead_letter,
                pool_exhausted, payload_roles, custom_outcome, crash_loop);
            cell!(any_form: $b =>
                lease_lost, concurrent_lease_settles, failed_ack_gives_the_whole_claim_back,
                transactional_mode, bad_descriptors_are_refused, payload_of_the_wrong_shape,
                capabilities);
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
