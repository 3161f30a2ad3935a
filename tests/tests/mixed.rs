//! Workers of the extension (`Client::connect`) and of the portable path
//! (`Client::portable("postgres://…")`) on one queue of one PostgreSQL
//! database, as during a migration from one to the other: in every form no row
//! is ever held by two handlers at once, and every job is handled once.

use settle::{Client, Form, Queue, Settled, WorkerOptions};
use settle_conformance::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const JOBS: usize = 600;

#[derive(Default)]
struct Seen {
    /// ids whose handler is running now
    running: HashSet<String>,
    /// handlers started on a row another handler was still running
    overlaps: usize,
    /// handler runs per id
    handled: HashMap<String, u32>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn extension_and_portable_workers_exclude_each_other() {
    let b = Backend::PgExtension;
    let forms = [
        Form::RowLock,
        Form::Lease {
            ttl: Duration::from_secs(30),
        },
        Form::Advisory,
    ];
    for form in forms {
        let pool = admin(b).await;
        let t = table(b, &pool, "mixed", JOBS).await;
        let queue = Queue::new(&t, &t).form(form);
        register(&env("SETTLE_TEST_PG"), &queue).await.unwrap();
        let ext = Client::connect(env("SETTLE_TEST_PG"), 4, queue.clone())
            .await
            .unwrap();
        let portable = Client::portable(&env("SETTLE_TEST_PG_EXT_URL"), 4, queue)
            .await
            .unwrap();
        assert!(ext.dialect().is_none() && portable.dialect().is_some());
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let mut workers = Vec::new();
        let mut stops = Vec::new();
        for (name, c) in [("extension", ext), ("portable", portable)] {
            for _ in 0..2 {
                let c = c.clone();
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                stops.push(tx);
                let seen = seen.clone();
                workers.push((
                    name,
                    tokio::spawn(async move {
                        c.run(
                            WorkerOptions {
                                concurrency: 2,
                                batch: 4,
                                poll_interval: Duration::from_millis(10),
                                ..Default::default()
                            },
                            async {
                                let _ = rx.await;
                            },
                            move |d| {
                                let seen = seen.clone();
                                async move {
                                    let id = d.id().to_owned();
                                    {
                                        let mut s = seen.lock().unwrap();
                                        if !s.running.insert(id.clone()) {
                                            s.overlaps += 1;
                                        }
                                        *s.handled.entry(id.clone()).or_default() += 1;
                                    }
                                    // long enough for another worker's claim to meet the row
                                    tokio::time::sleep(Duration::from_millis(2)).await;
                                    seen.lock().unwrap().running.remove(&id);
                                    d.ack().await
                                }
                            },
                        )
                        .await
                    }),
                ));
            }
        }
        let left = wait_until_empty(b, &pool, &t, 3000).await;
        for s in stops {
            let _ = s.send(());
        }
        let mut acked: HashMap<&str, u64> = HashMap::new();
        for (name, w) in workers {
            let r = w.await.unwrap().unwrap();
            assert_eq!((r.errors, r.panicked), (0, 0), "{form:?} {name}: {r:?}");
            *acked.entry(name).or_default() += r.count(Settled::Deleted);
        }
        let s = seen.lock().unwrap();
        let twice: Vec<_> = s.handled.iter().filter(|(_, n)| **n != 1).collect();
        assert_eq!(s.overlaps, 0, "{form:?}: rows held by two handlers at once");
        assert!(
            twice.is_empty(),
            "{form:?}: handled more than once: {twice:?}"
        );
        assert_eq!((left, s.handled.len()), (0, JOBS), "{form:?}");
        // both kinds of worker took part, or the test proves nothing
        assert!(
            acked["extension"] > 0 && acked["portable"] > 0,
            "{form:?}: {acked:?}"
        );
        println!("{form:?}: {JOBS} jobs, {acked:?} acked, no overlap, each handled once");
    }
}
