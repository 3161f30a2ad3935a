//! `--worker`: the Rust client's worker (`Client::run`, lease form) with
//! `WorkerOptions::chain` on and off, beside pgmq's read + delete loop on W
//! connections reading B: the worker has W × B handler slots (so that a claim
//! of B fits) and a pool of W; interleaved rounds, the median of each.

use crate::{case, median, Args, Form, Impl, Result_};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// Work queue `q` with one client's worker, `workers` × `batch` handlers at
/// once over a pool of `workers`, claims of `batch`, until `jobs` deliveries
/// are acked; each ack's time is a latency.
pub(crate) async fn worker_run(
    a: &Args,
    q: &str,
    (workers, batch): (usize, usize),
    chain: bool,
    lat: Arc<Mutex<Vec<f64>>>,
) -> (usize, settle::Client) {
    let client = crate::client::lease_client(a, q, workers).await;
    let opts = settle::WorkerOptions {
        concurrency: workers * batch,
        batch,
        poll_interval: Duration::from_millis(5),
        listen: false,
        health_every: None,
        chain,
        ..Default::default()
    };
    let (acked, all) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(tokio::sync::Notify::new()),
    );
    let jobs = a.jobs;
    let (n, done) = (acked.clone(), all.clone());
    let report = client
        .run(opts, all.notified(), move |d| {
            let (n, done, lat) = (n.clone(), done.clone(), lat.clone());
            async move {
                let t0 = Instant::now();
                let r = d.ack().await;
                lat.lock()
                    .unwrap()
                    .push(t0.elapsed().as_secs_f64() * 1000.0);
                if n.fetch_add(1, Ordering::AcqRel) + 1 == jobs {
                    done.notify_one();
                }
                r
            }
        })
        .await
        .unwrap();
    assert_eq!(
        (report.errors, report.panicked, report.unsettled),
        (0, 0, 0),
        "{report:?}"
    );
    if chain && batch == 1 {
        assert!(report.chained > 0, "no delivery chained: {report:?}");
    }
    (acked.load(Ordering::Acquire), client)
}

/// The worker chained and not, and pgmq's loop when `--pgmq` names it, for
/// each W × B; prints the medians and the ratios.
pub(crate) async fn grid(a: &Args, admin: &Client) {
    println!(
        "{:<16} {:>3} {:>4} {:>9} {:>8} {:>13} {:>13}   ratios",
        "impl", "W", "B", "jobs/s", "p50 ms", "srv cpu s/1k", "cli cpu s/1k"
    );
    for &w in &a.workers {
        for &b in &a.batches {
            let mut imps = vec![Impl::Worker, Impl::WorkerUnchained];
            if a.pgmq.is_some() {
                imps.push(Impl::Pgmq);
            }
            let mut runs: Vec<Vec<Result_>> = imps.iter().map(|_| Vec::new()).collect();
            for _ in 0..a.repeat {
                for (i, &imp) in imps.iter().enumerate() {
                    runs[i].push(case(a, admin, imp, Form::Lease, w, b).await);
                }
            }
            let medians: Vec<Result_> = runs.into_iter().map(median).collect();
            let chained = medians[0].rate();
            for r in &medians {
                let ratio = match r.imp {
                    Impl::Worker => String::new(),
                    Impl::Pgmq => format!("worker/pgmq {:.2}", chained / r.rate()),
                    _ => format!("chained/unchained {:.2}", chained / r.rate()),
                };
                println!(
                    "{:<16} {:>3} {:>4} {:>9.0} {:>8.2} {:>13.3} {:>13.3}   {ratio}",
                    format!("{:?}", r.imp).to_lowercase(),
                    w,
                    b,
                    r.rate(),
                    r.p50_ms,
                    r.server_cpu_per_k,
                    r.client_cpu_per_k,
                );
            }
        }
    }
}
