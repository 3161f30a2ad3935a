//! The portable row_lock claim transaction on a pool of one connection: a
//! claim dropped unsettled or cancelled midway gives its rows back and leaves
//! its connection clean for the next claim; a handler nests in the transaction it was lent
//! with sqlx's own `begin()` (a savepoint), and only what it kept survives.

use settle::{Form, Outcome, PoolOptions, Queue, Settled};
use settle_conformance::*;
use sqlx::Connection;
use std::time::Duration;

async fn one_connection(b: Backend, t: &str) -> settle::Client {
    b.client_with(Queue::new(t, t).form(Form::RowLock), PoolOptions::new(1))
        .await
        .unwrap()
}

/// Claim and ack until the queue is empty: every id once, whatever order.
async fn drain(b: Backend, c: &settle::Client, n: usize) {
    let mut acked = Vec::new();
    for _ in 0..200 {
        let got = c.claim(n).await.unwrap();
        if got.is_empty() && acked.len() == n {
            break;
        }
        acked.extend(got.iter().map(|d| d.id().parse::<i64>().unwrap()));
        for r in c.settle_many(got, Outcome::Ack).await {
            assert_eq!(r.unwrap(), Settled::Deleted, "{b:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    acked.sort_unstable();
    assert_eq!(acked, (1..=n as i64).collect::<Vec<_>>(), "{b:?}");
}

async fn dropped_claim(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "claim_tx_drop", 5).await;
    let c = one_connection(b, &t).await;
    // deliveries dropped unsettled: given back, the claim ends
    for _ in 0..3 {
        let got = c.claim(3).await.unwrap();
        assert_eq!(got.len(), 3, "{b:?}");
        drop(got);
    }
    // claims cancelled at every point: beginning, scanning, begun
    for i in 0..40 {
        let _ = tokio::time::timeout(Duration::from_micros(25 * i), c.claim(3)).await;
    }
    // a claim whose scan fails inside its transaction (its table gone)
    let d = b.dialect();
    let gone = format!("{t}_gone");
    let rename =
        |from: &str, to: &str| format!("ALTER TABLE {} RENAME TO {}", d.ident(from), d.ident(to));
    sqlx::query(&rename(&t, &gone))
        .execute(&pool)
        .await
        .unwrap();
    assert!(c.claim(3).await.is_err(), "{b:?}");
    sqlx::query(&rename(&gone, &t))
        .execute(&pool)
        .await
        .unwrap();
    drain(b, &c, 5).await;
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert!(rows.is_empty(), "{b:?}: {rows:?}");
}

async fn handler_nests(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "claim_tx_nest", 3).await;
    let d = b.dialect();
    let side = side_table(b, &pool, &t).await;
    let insert = format!("INSERT INTO {side} VALUES ({})", d.p(1));
    let c = one_connection(b, &t).await;
    let mut got = c.claim(2).await.unwrap();
    assert_eq!(got.len(), 2, "{b:?}");
    let mut second = got.pop().unwrap();
    let mut first = got.pop().unwrap();

    // the first keeps its nested write
    let conn = first.any_transaction().await.unwrap();
    let mut sp = conn.begin().await.unwrap();
    sqlx::query(&insert)
        .bind(10_i64)
        .execute(&mut *sp)
        .await
        .unwrap();
    sp.commit().await.unwrap();
    assert_eq!(first.ack().await.unwrap(), Settled::Deleted, "{b:?}");

    // the second undoes its nested write and keeps the one after it
    let conn = second.any_transaction().await.unwrap();
    let mut sp = conn.begin().await.unwrap();
    sqlx::query(&insert)
        .bind(20_i64)
        .execute(&mut *sp)
        .await
        .unwrap();
    sp.rollback().await.unwrap();
    sqlx::query(&insert)
        .bind(21_i64)
        .execute(&mut *conn)
        .await
        .unwrap();
    assert_eq!(second.ack().await.unwrap(), Settled::Deleted, "{b:?}");

    assert_eq!(side_ids(b, &pool, &side).await, vec![10, 21], "{b:?}");

    // the claim committed and its connection is clean: the last row comes next
    ack_the_last(b, &c, &pool, &t, 3, &["3"]).await;
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_dropped_claim_leaves_its_connection_clean() {
                if selected($b) {
                    dropped_claim($b).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_handler_nests_in_the_lent_transaction() {
                if selected($b) {
                    handler_nests($b).await;
                }
            }
        }
    };
}

backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
