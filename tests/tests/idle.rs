//! A pooled connection that the server closed while the pool kept it idle is
//! replaced when it is next taken, and the claim on it succeeds (docs/rust.md):
//! the extension's pool sees the closed connection; the portable path pings a
//! connection idle for 30 s or more before handing it out. SQLite has no
//! server to close one.

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
            sqlx::query_scalar(sql)
                .fetch_one(c.any_pool().expect("the portable pool"))
                .await
                .unwrap()
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

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
