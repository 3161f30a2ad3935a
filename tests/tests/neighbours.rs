//! A row_lock batch settles only its own rows: with every other row of a
//! small table held by another transaction, one claim's batch is retried,
//! and the next one's acked, without waiting on them. InnoDB reads a list of ids on a small
//! table by scanning it, locking what it passes (docs/portable.md, "MariaDB
//! and MySQL"): a write that waited there would deadlock claims that hold
//! each other's neighbours.

use settle::{Form, Outcome, Queue, Settled};
use settle_conformance::*;
use std::time::Duration;

const ROWS: i64 = 12;

/// Long enough for any batch write that does not wait on a lock.
const NO_WAIT: Duration = Duration::from_secs(20);

async fn batch_passes_held_neighbours(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "neighbours", ROWS as usize).await;
    let q = b.dialect().ident(&t);

    // another transaction holds every even row, each locked by its key
    let mut holder = pool.begin().await.unwrap();
    for id in (2..=ROWS).step_by(2) {
        sqlx::query(&format!("SELECT id FROM {q} WHERE id = {id} FOR UPDATE"))
            .execute(&mut *holder)
            .await
            .unwrap();
    }

    let c = b
        .client(Queue::new(&t, &t).form(Form::RowLock))
        .await
        .unwrap();
    let odd = ["1", "3", "5", "7", "9", "11"];
    for (outcome, settled) in [
        (Outcome::Retry, Settled::Retried),
        (Outcome::Ack, Settled::Deleted),
    ] {
        let got = c.claim(ROWS as usize).await.unwrap();
        let ids: Vec<&str> = got.iter().map(|d| d.id()).collect();
        assert_eq!(ids, odd, "{b:?}: the odd rows");
        let done = tokio::time::timeout(NO_WAIT, c.settle_many(got, outcome.clone()))
            .await
            .unwrap_or_else(|_| {
                panic!("{b:?}: {outcome:?} of a batch waited on a row it does not hold")
            });
        for r in done {
            assert_eq!(r.unwrap(), settled, "{b:?}");
        }
    }
    holder.rollback().await.unwrap();

    let (rows, _) = final_rows(b, &pool, &t).await;
    let left: Vec<(i64, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
    let want: Vec<(i64, i64)> = (2..=ROWS).step_by(2).map(|id| (id, 0)).collect();
    assert_eq!(
        left, want,
        "{b:?}: the even rows untouched, the odd ones retried, then acked"
    );
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                batch_passes_held_neighbours($b).await;
            }
        }
    };
}

// SQLite has one writer at a time: another transaction's lock holds the table.
backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
