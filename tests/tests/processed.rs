//! A queue table with a `processed_at` column: ack and drop mark the row
//! instead of deleting it (`Settled::Marked`), one row or a batch, in every
//! form the backend runs; a marked row is never claimed again, and a retry
//! leaves the row unmarked.

use settle::{Form, Outcome, Queue, Settled};
use settle_conformance::*;

/// The column type of a time role on `b` (what the queue tables' own times use).
fn time_type(b: Backend) -> &'static str {
    match b.dialect() {
        settle::Dialect::Postgres => "TIMESTAMPTZ",
        settle::Dialect::MySql => "DATETIME(6) NULL",
        settle::Dialect::Sqlite => "INTEGER",
    }
}

/// The ids of queue table `t` whose `processed_at` is set, in id order.
async fn marked(b: Backend, pool: &sqlx::AnyPool, t: &str) -> Vec<i64> {
    let d = b.dialect();
    let sql = format!(
        "SELECT {} FROM {} WHERE processed_at IS NOT NULL ORDER BY id",
        d.int("id"),
        d.ident(t)
    );
    sqlx::query_scalar(&sql).fetch_all(pool).await.unwrap()
}

async fn acks_mark_rows(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "processed", 6).await;
    let add = format!(
        "ALTER TABLE {} ADD COLUMN processed_at {}",
        b.dialect().ident(&t),
        time_type(b)
    );
    sqlx::query(&add).execute(&pool).await.unwrap();
    let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();

    // one row at a time: an ack, a drop, a retry
    for (want_id, outcome, want) in [
        ("1", Outcome::Ack, Settled::Marked),
        ("2", Outcome::Drop, Settled::Marked),
        ("3", Outcome::Retry, Settled::Retried),
    ] {
        let mut got = c.claim(1).await.unwrap();
        assert_eq!(got.len(), 1, "{b:?} {form:?}");
        let dl = got.pop().unwrap();
        assert_eq!(dl.id(), want_id, "{b:?} {form:?}");
        assert_eq!(dl.settle(outcome).await.unwrap(), want, "{b:?} {form:?}");
    }
    assert_eq!(marked(b, &pool, &t).await, [1, 2], "{b:?} {form:?}");

    // a batch: the retried row and the rest, never the marked ones
    let batch = c.claim(10).await.unwrap();
    let ids: Vec<&str> = batch.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["3", "4", "5", "6"], "{b:?} {form:?}");
    for r in c.settle_many(batch, Outcome::Ack).await {
        assert_eq!(r.unwrap(), Settled::Marked, "{b:?} {form:?}");
    }
    assert_eq!(
        marked(b, &pool, &t).await,
        [1, 2, 3, 4, 5, 6],
        "{b:?} {form:?}"
    );
    assert!(c.claim(10).await.unwrap().is_empty(), "{b:?} {form:?}");
}

macro_rules! backend {
    ($name:ident: $b:expr, $($form:ident: $f:expr),+) => {
        mod $name {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $form() {
                    if selected($b) {
                        acks_mark_rows($b, $f).await;
                    }
                }
            )+
        }
    };
}

backend!(pg_extension: Backend::PgExtension,
    row_lock: Form::RowLock, lease: settle_conformance::lease(), advisory: Form::Advisory);
backend!(pg_portable: Backend::PgPortable,
    row_lock: Form::RowLock, lease: settle_conformance::lease(), advisory: Form::Advisory);
backend!(mariadb: Backend::MariaDb,
    row_lock: Form::RowLock, lease: settle_conformance::lease(), advisory: Form::Advisory);
// SQLite has no advisory locks.
backend!(sqlite: Backend::Sqlite, row_lock: Form::RowLock, lease: settle_conformance::lease());
