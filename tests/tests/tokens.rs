//! Lease tokens (docs/semantics.md): every row of one claim carries the same
//! token, on every backend, so a batch ack checks one token for all of them.

use settle::{Form, Outcome, Queue, Settled};
use settle_conformance::*;
use std::collections::HashSet;
use std::time::Duration;

/// Rows in one claim: enough that writing them takes longer than a millisecond,
/// the token's precision, so a clock read per row would give them several.
const ROWS: usize = 2000;

async fn one_token_per_claim(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "tokens", ROWS).await;
    let c = b
        .client(Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_secs(60),
        }))
        .await
        .unwrap();
    let ds = c.claim(ROWS).await.unwrap();
    assert_eq!(ds.len(), ROWS, "{b:?}");
    let tokens: HashSet<_> = ds.iter().map(|d| d.token().expect("a lease")).collect();
    assert_eq!(tokens.len(), 1, "{b:?}: one token per claim");
    let written: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(DISTINCT locked_until) FROM {}",
        b.dialect().ident(&t)
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(written, 1, "{b:?}: one deadline written");
    let r = c.settle_many(ds, Outcome::Ack).await;
    assert!(r.iter().all(|r| matches!(r, Ok(Settled::Deleted))), "{b:?}");
    let (rows, _) = final_rows(b, &pool, &t).await;
    assert!(rows.is_empty(), "{b:?}: {} rows left", rows.len());
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn one_token() {
                if selected($b) {
                    one_token_per_claim($b).await;
                }
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
