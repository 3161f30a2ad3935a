//! An advisory claim holds the keys of the rows it delivers and no others:
//! with the first rows' keys held by another client's claim, the next claim
//! passes them (however many), takes the next rows in id order, and its
//! session lets every key go once they are settled (PostgreSQL: counted in
//! `pg_locks`).

use settle::{Form, Outcome, Queue, Settled};
use settle_conformance::*;

const ROWS: usize = 40;

/// The keys of queue `t`'s rows (ids 1 to `rows`) held on the server, by any
/// session (PostgreSQL; `queue_advisory_key`'s value split as `pg_locks` shows it).
async fn keys_held_of(b: Backend, pool: &sqlx::AnyPool, t: &str, rows: usize) -> Option<i64> {
    if b.dialect() != settle::Dialect::Postgres {
        return None;
    }
    let sql = format!(
        "SELECT count(*) FROM pg_locks l JOIN (SELECT hashtextextended(length($1)::text || ':' || $1 \
         || ':' || i::text, 0) AS k FROM generate_series(1, {rows}) i) s \
         ON l.classid::bigint = (s.k >> 32) & 4294967295 AND l.objid::bigint = s.k & 4294967295 \
         AND l.objsubid = 1 WHERE l.locktype = 'advisory' AND l.granted"
    );
    let n: i64 = sqlx::query_scalar(&sql)
        .bind(t)
        .fetch_one(pool)
        .await
        .unwrap();
    Some(n)
}

/// [`keys_held_of`] the first [`ROWS`] ids.
async fn keys_held(b: Backend, pool: &sqlx::AnyPool, t: &str) -> Option<i64> {
    keys_held_of(b, pool, t, ROWS).await
}

async fn claims_hold_only_their_keys(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "advisory_keys", ROWS).await;
    let queue = || Queue::new(&t, &t).form(Form::Advisory);
    let first = b.client(queue()).await.unwrap();
    let second = b.client(queue()).await.unwrap();

    let held = first.claim(2).await.unwrap();
    let ids: Vec<&str> = held.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["1", "2"], "{b:?}");

    let got = second.claim(3).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["3", "4", "5"], "{b:?}: the next rows, in id order");
    assert!(got.iter().all(|d| d.attempt() == 1), "{b:?}");
    if let Some(n) = keys_held(b, &pool, &t).await {
        assert_eq!(n, 5, "{b:?}: the keys of the five rows delivered, no more");
    }

    let mut got = got.into_iter();
    let one = got.next().unwrap();
    assert_eq!(one.ack().await.unwrap(), Settled::Deleted, "{b:?}");
    if let Some(n) = keys_held(b, &pool, &t).await {
        assert_eq!(
            n, 4,
            "{b:?}: the acked row's key let go, its siblings' kept"
        );
    }
    for r in second.settle_many(got.collect(), Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
    }
    if let Some(n) = keys_held(b, &pool, &t).await {
        assert_eq!(n, 2, "{b:?}: the acked rows' keys let go");
    }
    for r in first.settle_many(held, Outcome::Retry).await {
        assert_eq!(r.unwrap(), Settled::Retried, "{b:?}");
    }
    if let Some(n) = keys_held(b, &pool, &t).await {
        assert_eq!(n, 0, "{b:?}: every key let go");
    }

    // (the client that retried them: its mark went back to them)
    let again = first.claim(3).await.unwrap();
    let ids: Vec<&str> = again.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["1", "2", "6"], "{b:?}: the retried rows first");
    let attempts: Vec<u32> = again.iter().map(|d| d.attempt()).collect();
    assert_eq!(attempts, [2, 2, 1], "{b:?}: each claim counted once");
    for r in first.settle_many(again, Outcome::Ack).await {
        r.unwrap();
    }

    let (rows, _) = final_rows(b, &pool, &t).await;
    let left: Vec<(i64, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
    let want: Vec<(i64, i64)> = (7..=ROWS as i64).map(|id| (id, 0)).collect();
    assert_eq!(left, want, "{b:?}: the rows after them untouched");
}

/// A key keeps claims off its row, not an operator's `DELETE`: a batch ack
/// after a row of it was deleted by hand reports that row not held and acks
/// the rest (the portable ack on PostgreSQL returns the ids it did not write).
async fn batch_ack_of_a_row_deleted_by_hand(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "advisory_gone", 5).await;
    let c = b
        .client(Queue::new(&t, &t).form(Form::Advisory))
        .await
        .unwrap();
    let ds = c.claim(4).await.unwrap();
    assert_eq!(ds.len(), 4, "{b:?}");
    let gone = format!("DELETE FROM {} WHERE id = 2", b.dialect().ident(&t));
    sqlx::query(&gone).execute(&pool).await.unwrap();
    let r = c.settle_many(ds, Outcome::Ack).await;
    assert!(
        matches!(r[1], Err(settle::Error::NotHeld(_))),
        "{b:?}: {r:?}"
    );
    for i in [0, 2, 3] {
        assert!(matches!(r[i], Ok(Settled::Deleted)), "{b:?}: {r:?}");
    }
    let (rows, _) = final_rows(b, &pool, &t).await;
    let left: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(left, [5], "{b:?}");
    if let Some(n) = keys_held(b, &pool, &t).await {
        assert_eq!(n, 0, "{b:?}: every key let go");
    }
}

/// More keys held in front of the ready rows than a claim reads at first:
/// the claim reads on past them (25 held, then 60 for a batch of 10).
async fn claims_pass_many_held_keys(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "advisory_front", 100).await;
    let queue = || Queue::new(&t, &t).form(Form::Advisory);
    let first = b.client(queue()).await.unwrap();
    let second = b.client(queue()).await.unwrap();
    let held = first.claim(25).await.unwrap();
    assert_eq!(held.len(), 25, "{b:?}");

    let got = second.claim(1).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["26"], "{b:?}: the first row past 25 held keys");

    let more = first.claim(35).await.unwrap();
    assert_eq!(more.len(), 35, "{b:?}");
    let got2 = second.claim(10).await.unwrap();
    let ids: Vec<String> = got2.iter().map(|d| d.id().to_owned()).collect();
    let want: Vec<String> = (62..=71).map(|i| i.to_string()).collect();
    assert_eq!(ids, want, "{b:?}: the first ten rows past 61 held keys");
    assert!(got2.iter().all(|d| d.attempt() == 1), "{b:?}");

    for r in first.settle_many(held, Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
    }
    for r in first.settle_many(more, Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
    }
    for r in second.settle_many(got, Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
    }
    for r in second.settle_many(got2, Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
    }
    if let Some(n) = keys_held_of(b, &pool, &t, 100).await {
        assert_eq!(n, 0, "{b:?}: every key let go, none taken twice");
    }
    let (rows, _) = final_rows(b, &pool, &t).await;
    let left: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let want: Vec<i64> = (72..=100).collect();
    assert_eq!(left, want, "{b:?}: the rows after them untouched");
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn hold_only_their_keys() {
                if selected($b) {
                    claims_hold_only_their_keys($b).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pass_many_held_keys() {
                if selected($b) {
                    claims_pass_many_held_keys($b).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn row_deleted_by_hand() {
                if selected($b) {
                    batch_ack_of_a_row_deleted_by_hand($b).await;
                }
            }
        }
    };
}

// SQLite has no advisory locks.
backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
