//! The worker's chain (`WorkerOptions::chain`): at batch 1, where the backend
//! can (`Capabilities::settle_and_claim`: the extension's lease form), each
//! settle claims the handler slot's next row in the same statement. Every job
//! is still handled once, retries come back, and a worker that stops leaves
//! no row held. Elsewhere the worker claims as it always does.

use settle::{Queue, Settled, WorkerOptions};
use settle_conformance::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn one_at_a_time(chain: bool) -> WorkerOptions {
    WorkerOptions {
        concurrency: 3,
        batch: 1,
        poll_interval: Duration::from_millis(20),
        chain,
        ..Default::default()
    }
}

/// Two workers retry each job once and ack it the second time: each job
/// handled twice, never by two handlers at once; chained where the backend
/// can, never where it cannot or the option is off.
async fn each_job_once_per_attempt(b: Backend, chain: bool) {
    const JOBS: usize = 150;
    let pool = admin(b).await;
    let t = table(b, &pool, "chain", JOBS).await;
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let mut workers = Vec::new();
    let mut can = false;
    for _ in 0..2 {
        let c = b.client(Queue::new(&t, &t).form(lease())).await.unwrap();
        can = c.capabilities().settle_and_claim;
        let tally = tally.clone();
        workers.push(Worker::spawn(c, one_at_a_time(chain), move |d| {
            let tally = tally.clone();
            async move {
                let key = format!("{}#{}", d.id(), d.attempt());
                tally.lock().unwrap().begin(&key);
                tokio::task::yield_now().await;
                tally.lock().unwrap().running.remove(&key);
                if d.attempt() == 1 {
                    d.retry().await
                } else {
                    d.ack().await
                }
            }
        }));
    }
    assert_eq!(
        can,
        b == Backend::PgExtension,
        "{b:?}: settle_and_claim is the extension's lease form"
    );
    let left = wait_until_empty(b, &pool, &t, 1500).await;
    let (mut retried, mut acked, mut chained) = (0, 0, 0);
    for w in workers {
        let r = w.stop().await;
        assert_eq!(
            (r.errors, r.panicked, r.unsettled),
            (0, 0, 0),
            "{b:?}: {r:?}"
        );
        retried += r.count(Settled::Retried);
        acked += r.count(Settled::Deleted);
        chained += r.chained;
    }
    let tally = tally.lock().unwrap();
    assert!(
        tally.not_once().is_empty(),
        "{b:?}: an attempt handled other than once: {:?}",
        tally.not_once()
    );
    assert_eq!(tally.overlaps, 0, "{b:?}: one row in two handlers at once");
    assert_eq!(
        (left, tally.handled.len(), retried, acked),
        (0, 2 * JOBS, JOBS as u64, JOBS as u64),
        "{b:?}"
    );
    if chain && can {
        // every delivery but the first of each slot and those after a slot
        // found nothing ready came with the settle of the one before
        assert!(
            chained >= JOBS as u64,
            "{b:?}: {chained} of {} deliveries chained",
            2 * JOBS
        );
    } else {
        assert_eq!(chained, 0, "{b:?}: chained without the means or the option");
    }
    println!(
        "{b:?} chain={chain}: {JOBS} jobs retried once and acked, {chained} deliveries chained"
    );
}

/// A worker stopped while its slots chain: the deliveries it still had run to
/// their ack, no row is left held, and every job is acked or ready once.
async fn a_stopped_chain_holds_nothing(b: Backend) {
    const JOBS: usize = 400;
    let pool = admin(b).await;
    let t = table(b, &pool, "chainstop", JOBS).await;
    let c = b.client(Queue::new(&t, &t).form(lease())).await.unwrap();
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let w = Worker::acking(
        c,
        one_at_a_time(true),
        tally.clone(),
        Duration::from_millis(2),
    );
    for _ in 0..500 {
        if tally.lock().unwrap().handled.len() >= 50 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = w.stop().await;
    assert_eq!(
        (r.errors, r.panicked, r.unsettled),
        (0, 0, 0),
        "{b:?}: {r:?}"
    );
    let acked = r.count(Settled::Deleted) as usize;
    let (rows, _) = final_rows(b, &pool, &t).await;
    let held: Vec<i64> = rows.iter().filter(|r| r.3).map(|r| r.0).collect();
    assert!(
        held.is_empty(),
        "{b:?}: rows still held after the stop: {held:?}"
    );
    let tally = tally.lock().unwrap();
    assert!(tally.not_once().is_empty(), "{b:?}: {:?}", tally.not_once());
    assert!(
        (50..JOBS).contains(&acked),
        "{b:?}: stopped midway, {acked} acked"
    );
    assert_eq!(
        (acked + rows.len(), tally.handled.len()),
        (JOBS, acked),
        "{b:?}: each job acked or left, every handled one acked"
    );
    println!(
        "{b:?}: stopped after {acked} acks ({} chained), nothing held",
        r.chained
    );
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn chained() {
                if selected($b) {
                    each_job_once_per_attempt($b, true).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn not_chained() {
                if selected($b) {
                    each_job_once_per_attempt($b, false).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stopped() {
                if selected($b) {
                    a_stopped_chain_holds_nothing($b).await;
                }
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
