//! Workers of the extension (`Client::connect`) and of the portable path
//! (`Client::portable("postgres://…")`) on one queue of one PostgreSQL
//! database, as during a migration from one to the other: in every form no row
//! is ever held by two handlers at once, and every job is handled once.

use settle::{Client, Form, Queue, Settled, WorkerOptions};
use settle_conformance::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const JOBS: usize = 600;

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
        let tally: Arc<Mutex<Tally>> = Arc::default();
        let mut workers = Vec::new();
        for (name, c) in [("extension", ext), ("portable", portable)] {
            for _ in 0..2 {
                let opts = WorkerOptions {
                    concurrency: 2,
                    batch: 4,
                    poll_interval: Duration::from_millis(10),
                    ..Default::default()
                };
                // long enough for another worker's claim to meet the row
                let hold = Duration::from_millis(2);
                workers.push((name, Worker::acking(c.clone(), opts, tally.clone(), hold)));
            }
        }
        let left = wait_until_empty(b, &pool, &t, 3000).await;
        let mut acked: HashMap<&str, u64> = HashMap::new();
        for (name, w) in workers {
            let r = w.stop().await;
            assert_eq!((r.errors, r.panicked), (0, 0), "{form:?} {name}: {r:?}");
            *acked.entry(name).or_default() += r.count(Settled::Deleted);
        }
        let s = tally.lock().unwrap();
        let twice = s.not_once();
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
