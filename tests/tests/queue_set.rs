//! A worker over several queues (`QueueSet`): round robin, empty queues
//! skipped, every delivery once — on every backend, and on PostgreSQL over
//! one table keyed by (queue, id), the split of one hot queue into groups.

use settle::{Form, Queue, QueueSet, WorkerOptions, WorkerReport};
use settle_conformance::{admin, backends, table, wait_until_empty, Backend};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A worker over `set` that acks every delivery, recording (queue, id) in
/// claim order; it stops when the sender is used or dropped.
fn spawn_acking(
    set: QueueSet,
    opts: WorkerOptions,
) -> (
    Seen,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<settle::Result<WorkerReport>>,
) {
    let seen: Seen = Arc::default();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let s2 = seen.clone();
    let worker = tokio::spawn(async move {
        set.run(
            opts,
            async {
                let _ = rx.await;
            },
            move |d| {
                let seen = s2.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push((d.queue().to_owned(), d.id().to_owned()));
                    d.ack().await
                }
            },
        )
        .await
    });
    (seen, tx, worker)
}

/// Run `set` until `total` deliveries were acked (or 60 s), recording
/// (queue, id) in claim order.
async fn run_until(set: QueueSet, opts: WorkerOptions, total: usize) -> Vec<(String, String)> {
    let (seen, tx, worker) = spawn_acking(set, opts);
    for _ in 0..3000 {
        if seen.lock().unwrap().len() >= total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = tx.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.errors, 0, "{report:?}");
    let v = seen.lock().unwrap().clone();
    v
}

fn per_queue(seen: &[(String, String)]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for (q, _) in seen {
        *m.entry(q.clone()).or_default() += 1;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delivery_once_across_queues() {
    for b in backends() {
        for (form, refused) in b.forms() {
            if refused.is_some() {
                continue;
            }
            let pool = admin(b).await;
            let mut clients = Vec::new();
            let mut names = Vec::new();
            for n in [0, 30, 7] {
                let t = table(b, &pool, "qs", n).await;
                let q = Queue::new(&t, &t).form(form);
                clients.push(b.client(q).await.unwrap());
                names.push((t, n));
            }
            let opts = WorkerOptions {
                concurrency: 4,
                batch: 5,
                poll_interval: Duration::from_millis(20),
                ..Default::default()
            };
            let seen = run_until(QueueSet::new(clients), opts, 37).await;
            let counts = per_queue(&seen);
            let mut ids: Vec<&(String, String)> = seen.iter().collect();
            ids.sort();
            ids.dedup();
            assert_eq!(
                ids.len(),
                seen.len(),
                "{b:?} {form:?}: a delivery came twice"
            );
            for (t, n) in &names {
                assert_eq!(
                    counts.get(t).copied().unwrap_or(0),
                    *n,
                    "{b:?} {form:?}: {t}"
                );
                assert_eq!(
                    wait_until_empty(b, &pool, t, 50).await,
                    0,
                    "{b:?} {form:?}: {t}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_take_turns() {
    for b in backends() {
        let pool = admin(b).await;
        let (a, c) = (
            table(b, &pool, "turn", 20).await,
            table(b, &pool, "turn", 20).await,
        );
        let lease = Form::Lease {
            ttl: Duration::from_secs(30),
        };
        let set = QueueSet::new([
            b.client(Queue::new(&a, &a).form(lease)).await.unwrap(),
            b.client(Queue::new(&c, &c).form(lease)).await.unwrap(),
        ]);
        // one delivery at a time: the claims alternate while both queues have rows
        let opts = WorkerOptions {
            concurrency: 1,
            batch: 1,
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        };
        let seen = run_until(set, opts, 40).await;
        assert_eq!(seen.len(), 40, "{b:?}");
        for w in seen.windows(2) {
            assert_ne!(
                w[0].0, w[1].0,
                "{b:?}: two claims in a row from one queue: {seen:?}"
            );
        }
    }
}

/// One logical queue split into four groups of one table keyed by (queue, id),
/// as on Citus; the same ids in every group, each delivered once per group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_queue_over_groups_with_a_composite_key() {
    let b = Backend::PgExtension;
    if !settle_conformance::selected(b) {
        return;
    }
    let pool = admin(b).await;
    let t = format!("split_{}", std::process::id());
    for sql in [
        format!("CREATE TABLE {t} (queue text NOT NULL, id bigint NOT NULL, payload jsonb, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, PRIMARY KEY (queue, id))"),
        format!("CREATE TABLE {t}_dead (LIKE {t} INCLUDING ALL)"),
        format!("INSERT INTO {t} (queue, id) SELECT 'jobs:' || g, i FROM generate_series(0, 3) g, generate_series(1, 25) i"),
    ] {
        sqlx::query(&sql).execute(&pool).await.unwrap();
    }
    let mut clients = Vec::new();
    for g in 0..4 {
        let q = Queue::new(format!("jobs:{g}"), &t)
            .form(Form::Lease {
                ttl: Duration::from_secs(30),
            })
            .dead_letter_table(3, format!("{t}_dead"));
        clients.push(b.client(q).await.unwrap());
    }
    let opts = WorkerOptions {
        concurrency: 8,
        batch: 4,
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let seen = run_until(QueueSet::new(clients), opts, 100).await;
    let counts = per_queue(&seen);
    for g in 0..4 {
        assert_eq!(
            counts.get(&format!("jobs:{g}")).copied(),
            Some(25),
            "{counts:?}"
        );
    }
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {t}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// A queue whose claims fail (its lease column renamed away) is backed off
/// rather than tried every poll, while the other queue of the set is worked;
/// once the column is back, its rows are delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_queue_backs_off_while_the_others_go_on() {
    for b in backends() {
        let pool = admin(b).await;
        let (broken, healthy) = (
            table(b, &pool, "failing", 0).await,
            table(b, &pool, "healthy", 0).await,
        );
        let lease = Form::Lease {
            ttl: Duration::from_secs(30),
        };
        let set = QueueSet::new([
            b.client(Queue::new(&broken, &broken).form(lease))
                .await
                .unwrap(),
            b.client(Queue::new(&healthy, &healthy).form(lease))
                .await
                .unwrap(),
        ]);
        let d = b.dialect();
        let exec = |sql: String| {
            let pool = pool.clone();
            async move {
                sqlx::query(&sql)
                    .execute(&pool)
                    .await
                    .unwrap_or_else(|e| panic!("{b:?}: {sql}: {e}"));
            }
        };
        let rename = |from: &str, to: &str| {
            format!(
                "ALTER TABLE {} RENAME COLUMN {from} TO {to}",
                d.ident(&broken)
            )
        };
        let insert = |t: &str, n: usize| {
            format!(
                "INSERT INTO {} (payload) VALUES ('{{\"n\": {n}}}')",
                d.ident(t)
            )
        };
        exec(rename("locked_until", "locked_until_gone")).await;

        let opts = WorkerOptions {
            concurrency: 2,
            batch: 1,
            poll_interval: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            ..Default::default()
        };
        let (seen, tx, worker) = spawn_acking(set, opts);
        let count = |q: &str| seen.lock().unwrap().iter().filter(|(s, _)| s == q).count();
        let wait_for = |q: String, n: usize| {
            let count = &count;
            async move {
                for _ in 0..1000 {
                    if count(&q) >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("{b:?}: {q} never reached {n} deliveries");
            }
        };

        // the healthy queue is worked all through the other's outage
        let outage = std::time::Instant::now();
        for n in 1..=10 {
            exec(insert(&healthy, n)).await;
            wait_for(healthy.clone(), n).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        exec(rename("locked_until_gone", "locked_until")).await;
        let outage = outage.elapsed();
        // and the failing queue is claimed again once it can be
        exec(insert(&broken, 1)).await;
        wait_for(broken.clone(), 1).await;
        let _ = tx.send(());
        let report = worker.await.unwrap().unwrap();
        assert_eq!(report.errors, 0, "{b:?}: {report:?}");
        assert_eq!((count(&healthy), count(&broken)), (10, 1), "{b:?}");
        // waits of at least 10, 20, 40, 80 ms, then at least 100 ms (half the
        // cap); a claim every 20 ms poll would fail five times as often
        let most = 5 + outage.as_millis() as u64 / 100;
        println!(
            "{b:?}: {} failed claims in an outage of {outage:?}",
            report.claim_errors
        );
        assert!(
            (2..=most).contains(&report.claim_errors),
            "{b:?}: {} failed claims in {outage:?} (at most {most} with back-off)",
            report.claim_errors
        );
    }
}
