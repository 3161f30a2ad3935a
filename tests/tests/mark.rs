//! Where a client's claims start (docs/semantics.md, "Claim order"), on every
//! backend: past the rows it claimed before until `PoolOptions::rescan_interval`
//! has passed, at once below that for the rows it made ready itself. SQLite
//! keeps no settled rows in its index, so its claims always start at the lowest id.

use settle::{Form, PoolOptions, Queue};
use settle_conformance::*;
use std::time::Duration;

fn ids(ds: &[settle::Delivery]) -> Vec<&str> {
    ds.iter().map(|d| d.id()).collect()
}

/// Clear row `id`'s lease on a connection of its own: the row is ready again
/// behind every client's back.
async fn expire(b: Backend, pool: &sqlx::AnyPool, t: &str, id: i64) {
    let d = b.dialect();
    sqlx::query(&format!(
        "UPDATE {} SET locked_until = NULL WHERE id = {id}",
        d.ident(t)
    ))
    .execute(pool)
    .await
    .unwrap();
}

async fn lease_claims_start_at_the_mark(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "mark", 8).await;
    let q = || {
        Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_secs(60),
        })
    };
    // one connection: the extension keeps a mark per server session
    let every = |d: Duration| PoolOptions::new(1).rescan_interval(d);
    let a = b
        .client_with(q(), every(Duration::from_secs(3600)))
        .await
        .unwrap();

    // a retry of its own is claimable at once, below the mark
    let mut ds = a.claim(2).await.unwrap();
    assert_eq!(ids(&ds), ["1", "2"], "{b:?}");
    let two = ds.pop().unwrap();
    ds.pop().unwrap().retry().await.unwrap();
    let one = a.claim(1).await.unwrap().pop().expect("row 1 again");
    assert_eq!((one.id(), one.attempt()), ("1", 2), "{b:?}");
    // so is a retry_after of zero: the row is ready now
    let three = a.claim(1).await.unwrap();
    assert_eq!(ids(&three), ["3"], "{b:?}");
    one.retry_after(Duration::ZERO).await.unwrap();
    // no time is kept that a claim begun a moment earlier would find ahead of it
    let no_time: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {} WHERE id = 1 AND retry_after IS NULL",
        b.dialect().ident(&t)
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(no_time, 1, "{b:?}: retry_after of zero writes NULL");
    let one = a.claim(1).await.unwrap().pop().expect("row 1 once more");
    assert_eq!((one.id(), one.attempt()), ("1", 3), "{b:?}");
    one.ack().await.unwrap();
    two.ack().await.unwrap();

    // a row made ready behind its back below the mark waits for the rescan
    let four = a.claim(1).await.unwrap();
    assert_eq!(ids(&four), ["4"], "{b:?}");
    expire(b, &pool, &t, 3).await;
    let next = a.claim(1).await.unwrap();
    // kept until the end: a delivery dropped is given back
    let mut kept = vec![three, four, next];
    let mut clients = Vec::new();
    // SQLite keeps no mark: every claim starts at the lowest id
    if b == Backend::Sqlite {
        assert_eq!(ids(&kept[2]), ["3"], "{b:?}: no mark, from the lowest id");
        kept.push(a.claim(1).await.unwrap());
    } else {
        assert_eq!(
            ids(&kept[2]),
            ["5"],
            "{b:?}: from the mark, within the interval"
        );
        let c = b.client_with(q(), every(Duration::ZERO)).await.unwrap();
        let got = c.claim(1).await.unwrap();
        assert_eq!(
            ids(&got),
            ["3"],
            "{b:?}: an interval of zero scans from the lowest id"
        );
        kept.push(got);
        clients.push(c);
    }

    // and is claimed once the interval has passed
    let e = b
        .client_with(q(), every(Duration::from_millis(300)))
        .await
        .unwrap();
    let six = e.claim(1).await.unwrap();
    let seven = e.claim(1).await.unwrap();
    assert_eq!((ids(&six), ids(&seven)), (vec!["6"], vec!["7"]), "{b:?}");
    expire(b, &pool, &t, 6).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    let again = e.claim(1).await.unwrap();
    assert_eq!(ids(&again), ["6"], "{b:?}: found by the rescan");
    drop((kept, clients, seven, again));
}

/// row_lock: a delivery released by the client while the rest of its claim
/// is acked. The portable client lowers its mark: claimable at once. The
/// extension writes nothing for it (the row returns when the claim's
/// transaction commits), so its session finds it at the next rescan.
async fn row_lock_release(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "markrl", 4).await;
    let ext = b == Backend::PgExtension;
    let interval = Duration::from_millis(if ext { 300 } else { 3_600_000 });
    let a = b
        .client_with(
            Queue::new(&t, &t).form(Form::RowLock),
            PoolOptions::new(1).rescan_interval(interval),
        )
        .await
        .unwrap();
    let mut ds = a.claim(2).await.unwrap();
    assert_eq!(ids(&ds), ["1", "2"], "{b:?}");
    let two = ds.pop().unwrap();
    ds.pop().unwrap().release().await.unwrap();
    two.ack().await.unwrap();
    if ext {
        tokio::time::sleep(Duration::from_millis(350)).await;
    }
    let got = a.claim(1).await.unwrap();
    assert_eq!(ids(&got), ["1"], "{b:?}: released, claimable again");
}

/// row_lock on the portable path, whose workers share their client's mark: a
/// retry settled in a claim's transaction is claimable once that transaction
/// commits, though another claim passed it (still locked) in between. (The
/// extension's marks are its sessions'; another session of the pool may not
/// see the row until its next rescan.)
async fn row_lock_retry_committed_late(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "markrc", 5).await;
    let a = b
        .client_with(
            Queue::new(&t, &t).form(Form::RowLock),
            PoolOptions::new(3).rescan_interval(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let mut ds = a.claim(2).await.unwrap();
    assert_eq!(ids(&ds), ["1", "2"], "{b:?}");
    let two = ds.pop().unwrap();
    ds.pop().unwrap().retry().await.unwrap();
    // rows 1 and 2 are locked until the claim's transaction ends
    let three = a.claim(1).await.unwrap();
    assert_eq!(ids(&three), ["3"], "{b:?}");
    two.ack().await.unwrap();
    let got = a.claim(1).await.unwrap();
    assert_eq!(
        got.iter()
            .map(|d| (d.id(), d.attempt()))
            .collect::<Vec<_>>(),
        [("1", 2)],
        "{b:?}: retried, claimable once its claim committed"
    );
    drop((three, got));
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lease() {
                if selected($b) {
                    lease_claims_start_at_the_mark($b).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn row_lock() {
                if selected($b) {
                    row_lock_release($b).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn row_lock_shared_mark() {
                // a mark shared by concurrent claims: the portable path's, where
                // the database lets two claim transactions run at once
                if selected($b) && matches!($b, Backend::PgPortable | Backend::MariaDb) {
                    row_lock_retry_committed_late($b).await;
                }
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
