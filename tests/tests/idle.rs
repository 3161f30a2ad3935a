//! How pools treat the connections given back to them (docs/rust.md,
//! docs/portable.md). A pooled connection that the server closed while the
//! pool kept it idle is replaced when it is next taken, and the claim on it
//! succeeds: the extension's pool sees the closed connection; the portable
//! path pings a connection idle for 30 s or more before handing it out. SQLite
//! has no server to close one. And on the portable path a connection given
//! back with a transaction left open is rolled back at once, not when the
//! pool next hands it out.

use settle::{Client, Form, PoolOptions, Queue};
use settle_conformance::*;
use std::time::Duration;

/// The server-side id of the one connection of `c`'s pool.
async fn connection_id(b: Backend, c: &Client) -> i64 {
    match b {
        Backend::PgExtension => {
            let conn = c.pool().expect("the extension's pool").get().await.unwrap();
            let pid: i32 = conn
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get(0);
            i64::from(pid)
        }
        _ => {
            let sql = match b {
                Backend::MariaDb => "SELECT CAST(CONNECTION_ID() AS SIGNED)",
                _ => "SELECT CAST(pg_backend_pid() AS BIGINT)",
            };
            let mut conn = c.any_connection().await.expect("the portable pool");
            sqlx::query_scalar(sql).fetch_one(&mut *conn).await.unwrap()
        }
    }
}

async fn closed_while_idle(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "idle", 2).await;
    let q = Queue::new(&t, &t).form(Form::Lease {
        ttl: Duration::from_secs(60),
    });
    let c = b.client_with(q, PoolOptions::new(1)).await.unwrap();
    let one = c.claim(1).await.unwrap().pop().expect("row 1");
    one.ack().await.unwrap();

    let id = connection_id(b, &c).await;
    let kill = match b {
        Backend::MariaDb => format!("KILL {id}"),
        _ => format!("SELECT pg_terminate_backend({id})"),
    };
    sqlx::query(&kill).execute(&pool).await.unwrap();
    let gone = match b {
        Backend::MariaDb => {
            format!("SELECT COUNT(*) FROM information_schema.processlist WHERE id = {id}")
        }
        _ => format!("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = {id}"),
    };
    for _ in 0..100 {
        let n: i64 = sqlx::query_scalar(&gone).fetch_one(&pool).await.unwrap();
        if n == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // past the portable path's idle check; the extension's pool needs only
    // its connection task to have seen the end
    let idle = match b {
        Backend::PgExtension => Duration::from_secs(1),
        _ => Duration::from_secs(31),
    };
    tokio::time::sleep(idle).await;

    let two = c
        .claim(1)
        .await
        .expect("a claim after the server closed the idle connection");
    assert_eq!(
        two.iter().map(|d| d.id()).collect::<Vec<_>>(),
        ["2"],
        "{b:?}"
    );
    for d in two {
        d.ack().await.unwrap();
    }
    assert_ne!(connection_id(b, &c).await, id, "{b:?}: a new connection");
}

/// A transaction dropped without commit on a connection of the portable
/// path's pool: the row it wrote is unlocked and unchanged while the pool
/// stays unused, and the connection serves the next claim.
async fn dropped_transaction_rolled_back(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "dropped", 2).await;
    let q = Queue::new(&t, &t).form(Form::Lease {
        ttl: Duration::from_secs(60),
    });
    let c = b.client_with(q, PoolOptions::new(1)).await.unwrap();
    let quoted = b.dialect().ident(&t);
    {
        let mut conn = c.any_connection().await.unwrap();
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        sqlx::query(&format!("UPDATE {quoted} SET attempt = 7 WHERE id = 1"))
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let lock = format!(
        "SELECT {} FROM {quoted} WHERE id = 1 FOR UPDATE NOWAIT",
        b.dialect().int("attempt")
    );
    let mut attempt = None;
    for _ in 0..50 {
        let mut tx = pool.begin().await.unwrap();
        if let Ok(r) = sqlx::query_scalar::<_, i64>(&lock)
            .fetch_one(&mut *tx)
            .await
        {
            attempt = Some(r);
            // a dropped sqlx transaction only queues its rollback: the lock
            // would outlive it and the claim below would skip row 1
            tx.rollback().await.unwrap();
            break;
        }
        drop(tx);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(attempt, Some(0), "{b:?}: row 1 free and its write undone");
    let got = c.claim(2).await.expect("a claim on the same connection");
    assert_eq!(got.len(), 2, "{b:?}");
    for d in got {
        d.ack().await.unwrap();
    }
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                closed_while_idle($b).await;
            }
        }
    };
}

macro_rules! rolled_back {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                dropped_transaction_rolled_back($b).await;
            }
        }
    };
}

rolled_back!(pg_portable_dropped_transaction: Backend::PgPortable);
rolled_back!(mariadb_dropped_transaction: Backend::MariaDb);

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
