//! What an operator does with a queue, on every backend: its counts, its dead
//! rows listed, put back and purged, the statements it runs — through the
//! queue's client and through `settle::Admin`, which the `settle` command and
//! its dashboard use.

use settle::{Admin, Error, Form, Queue, Settled};
use settle_conformance::*;
use std::time::Duration;

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Four rows retried into the dead letter (max_attempts 1), then listed,
/// requeued and purged by id and by age.
async fn dead_letters(b: Backend) {
    let pool = admin(b).await;
    let (t, c) = all_dead(b, &pool, "ops", 4).await;
    let s = c.stats().await.unwrap();
    assert_eq!((s.ready, s.dead), (0, Some(4)), "{b:?}: {s:?}");

    let dead = c.dead_rows(10).await.unwrap();
    let got: Vec<(&str, Option<i64>, i64)> = dead
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.attempt,
                r.row["payload"]["n"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("1", Some(1), 1),
            ("2", Some(1), 2),
            ("3", Some(1), 3),
            ("4", Some(1), 4)
        ],
        "{b:?}: {dead:?}"
    );
    assert!(
        dead[0].row.get("created_at").is_some(),
        "{b:?}: the whole row"
    );
    assert_eq!(c.dead_rows(2).await.unwrap().len(), 2, "{b:?}");
    let some = c.dead_rows_with_ids(&ids(&["3", "9"])).await.unwrap();
    assert_eq!(some.len(), 1, "{b:?}");
    assert_eq!(some[0].id, "3", "{b:?}");

    // requeue one: back in the queue with its attempt reset
    assert_eq!(c.requeue_dead_ids(&ids(&["2"])).await.unwrap(), 1, "{b:?}");
    let s = c.stats().await.unwrap();
    assert_eq!((s.ready, s.dead), (1, Some(3)), "{b:?}: {s:?}");
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!(rows, vec![(2, 0, false, false)], "{b:?}");
    assert_eq!(dead, vec![(1, 1), (3, 1), (4, 1)], "{b:?}");

    // purge: by age (none is an hour old), by id, then every one older than now
    assert_eq!(
        c.purge_dead(Some(Duration::from_secs(3600)), None)
            .await
            .unwrap(),
        0,
        "{b:?}"
    );
    assert_eq!(
        c.purge_dead(None, Some(&ids(&["3"]))).await.unwrap(),
        1,
        "{b:?}"
    );
    assert!(
        matches!(
            c.purge_dead(None, None).await,
            Err(Error::InvalidArgument(_))
        ),
        "{b:?}: purge needs an age or ids"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        c.purge_dead(Some(Duration::ZERO), None).await.unwrap(),
        2,
        "{b:?}"
    );
    assert_eq!(c.requeue_dead().await.unwrap(), 0, "{b:?}");
    let (rows, dead) = final_rows(b, &pool, &t).await;
    assert_eq!((rows.len(), dead.len()), (1, 0), "{b:?}");

    // the oldest ready row's age comes from created_at
    let s = c.stats().await.unwrap();
    assert!(s.oldest_ready_age.is_some(), "{b:?}: {s:?}");

    let st = c.statements().await.unwrap();
    assert!(
        st.iter()
            .any(|(n, sql)| n.contains("claim") && !sql.is_empty()),
        "{b:?}: {st:?}"
    );
    println!("{b:?}: dead letters listed, requeued, purged");
}

/// `Admin` reads the extension's registry on PostgreSQL with it, and serves
/// the described queues elsewhere.
async fn admin_view(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "adm", 3).await;
    let q = Queue::new(&t, &t)
        .form(Form::RowLock)
        .dead_letter(1, format!("{t}_dead"));
    // the extension's registry knows a queue once a client registered it
    let c = b.client(q.clone()).await.unwrap();
    let batch = c.claim(1).await.unwrap();
    for d in batch {
        assert_eq!(d.retry().await.unwrap(), Settled::DeadLettered, "{b:?}");
    }
    let a = Admin::connect(&b.admin_url(), 2, vec![q.clone()])
        .await
        .unwrap();
    assert_eq!(
        a.uses_extension(),
        b == Backend::PgExtension,
        "{b:?}: {}",
        a.backend()
    );
    let all = a.queues().await.unwrap();
    let mine = all
        .iter()
        .find(|i| i.name == t)
        .unwrap_or_else(|| panic!("{b:?}: {all:?}"));
    assert_eq!(mine.form, "row_lock", "{b:?}");
    assert_eq!(
        (mine.stats.ready, mine.stats.dead),
        (2, Some(1)),
        "{b:?}: {mine:?}"
    );
    assert_eq!(a.dead_rows(&t, 10, None).await.unwrap().len(), 1, "{b:?}");
    assert_eq!(a.requeue_dead(&t, None).await.unwrap(), 1, "{b:?}");
    assert!(!a.statements(&t).await.unwrap().is_empty(), "{b:?}");
    match a.dead_rows("no_such_queue", 10, None).await {
        Err(Error::UnknownQueue(_)) => {}
        other => panic!("{b:?}: {other:?}"),
    }
    // without a registry the queues must be described
    if b != Backend::PgExtension {
        match Admin::connect(&b.admin_url(), 2, vec![]).await {
            Err(Error::InvalidArgument(e)) => assert!(e.to_string().contains("describe"), "{e}"),
            other => panic!("{b:?}: {other:?}"),
        }
    }
}

/// A queue without a dead letter: listing and purging say so.
async fn no_dead_letter(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "nodl", 1).await;
    let c = b.client(Queue::new(&t, &t)).await.unwrap();
    for r in [
        c.dead_rows(5).await.map(|_| 0),
        c.purge_dead(Some(Duration::ZERO), None).await,
        c.requeue_dead().await,
    ] {
        match r {
            Err(Error::InvalidArgument(e)) => {
                assert!(e.to_string().contains("no dead letter"), "{b:?}: {e}")
            }
            other => panic!("{b:?}: {other:?}"),
        }
    }
}

/// Queue health: with the extension, the table's dead row versions and the
/// session holding the xmin horizon (a REPEATABLE READ snapshot here), through
/// the client and `Admin`; elsewhere `Unsupported`.
async fn health(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "health", 3).await;
    let c = b.client(Queue::new(&t, &t)).await.unwrap();
    if b != Backend::PgExtension {
        assert!(
            matches!(c.health().await, Err(Error::Unsupported(_))),
            "{b:?}"
        );
        return;
    }
    let mut holder = pool.acquire().await.unwrap();
    for sql in ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT 1"] {
        sqlx::raw_sql(sql).execute(&mut *holder).await.unwrap();
    }
    for d in c.claim(3).await.unwrap() {
        d.ack().await.unwrap();
    }
    let h = c.health().await.unwrap();
    assert_eq!(h.name, t, "{h:?}");
    assert!(h.table_bytes.unwrap_or(0) > 0, "{h:?}");
    let held = h.horizon.expect("the snapshot holds the horizon");
    assert!(held.holder.starts_with("session "), "{held:?}");
    assert!(held.age.is_some(), "{held:?}");
    let a = Admin::connect(&b.admin_url(), 1, vec![]).await.unwrap();
    let all = a.health().await.unwrap();
    assert!(all.iter().any(|x| x.name == t), "{all:?}");
    sqlx::raw_sql("COMMIT").execute(&mut *holder).await.unwrap();
}

macro_rules! cell {
    ($cell:ident: $b:expr) => {
        mod $cell {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn dead_letters() {
                if selected($b) {
                    super::dead_letters($b).await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn admin_view() {
                if selected($b) {
                    super::admin_view($b).await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn health() {
                if selected($b) {
                    super::health($b).await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn no_dead_letter() {
                if selected($b) {
                    super::no_dead_letter($b).await;
                }
            }
        }
    };
}

cell!(pg_extension: Backend::PgExtension);
cell!(pg_portable: Backend::PgPortable);
cell!(mariadb: Backend::MariaDb);
cell!(sqlite: Backend::Sqlite);
