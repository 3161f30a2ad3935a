//! The awa side of settle-bench: awa 0.6 runs as itself (its own runtime and
//! storage engine, its own database); settle-bench starts this program and
//! reads one JSON line, as it does for Graphile Worker.
//!
//!     settle-bench-awa prepare URL JOBS
//!     settle-bench-awa run     URL JOBS WORKERS BATCH
//!
//! prepare: a fresh awa schema (migrations; one short runtime start so a fresh
//! install switches to awa's default queue-storage engine) and JOBS jobs.
//! run: WORKERS claimer loops, each claiming up to BATCH jobs per round trip,
//! WORKERS × BATCH handlers in flight (the jobs settle holds at once with W
//! connections claiming B); the handler does nothing. Timed from start until
//! every handler ran and the runtime shut down (which flushes completions).
//! Prints one JSON line as the clock stops (jobs, seconds, this process's CPU
//! seconds), then one with awa's count of jobs left unfinished and failed.
use awa::{Client, InsertOpts, JobArgs, JobResult, QueueConfig};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const QUEUE: &str = "bench";

#[derive(Serialize, Deserialize, JobArgs)]
struct BenchJob {
    n: i64,
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let close = stat.rfind(')').unwrap_or(0);
    let f: Vec<&str> = stat.get(close + 2..).unwrap_or("").split(' ').collect();
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (n(11) + n(12)) / 100.0
}

/// Handlers run so far, and a wake-up when the last one ran.
struct Seen {
    n: AtomicUsize,
    all: usize,
    done: tokio::sync::Notify,
}

fn client(pool: &sqlx::PgPool, workers: u16, batch: usize, seen: Arc<Seen>) -> Client {
    Client::builder(pool.clone())
        .queue(
            QUEUE,
            QueueConfig {
                max_workers: u32::from(workers) * batch as u32,
                claimers: workers,
                claim_batch_size: batch,
                // as awa's own throughput benchmark; 1 ms polls gain ~15% at B=100
                poll_interval: Duration::from_millis(50),
                ..QueueConfig::default()
            },
        )
        .register::<BenchJob, _, _>(move |_job, _ctx| {
            if seen.n.fetch_add(1, Ordering::Relaxed) + 1 == seen.all {
                seen.done.notify_one();
            }
            async { Ok(JobResult::Completed) }
        })
        .build()
        .expect("build the awa client")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (mode, url, jobs) = (a[0].as_str(), &a[1], a[2].parse::<usize>().expect("JOBS"));
    let workers: u16 = a.get(3).map_or(1, |w| w.parse().expect("WORKERS"));
    let batch: usize = a.get(4).map_or(1, |b| b.parse().expect("BATCH"));
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::from(workers) + 8)
        .connect(url)
        .await
        .expect("connect");
    let seen = Arc::new(Seen {
        n: AtomicUsize::new(0),
        all: jobs,
        done: tokio::sync::Notify::new(),
    });
    if mode == "prepare" {
        let schemas: Vec<String> =
            sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'awa%'")
                .fetch_all(&pool)
                .await
                .expect("list schemas");
        for s in schemas {
            sqlx::query(&format!("DROP SCHEMA \"{s}\" CASCADE"))
                .execute(&pool)
                .await
                .expect("drop schema");
        }
        awa::migrations::run(&pool).await.expect("awa migrations");
        let c = client(&pool, 1, 1, seen);
        c.start().await.expect("start awa (fresh install)");
        c.shutdown(Duration::from_secs(5)).await;
        let opts = InsertOpts {
            queue: QUEUE.into(),
            ..Default::default()
        };
        for chunk in (1..=jobs as i64).collect::<Vec<_>>().chunks(1000) {
            let params: Vec<_> = chunk
                .iter()
                .map(|&n| awa::model::insert::params_with(&BenchJob { n }, opts.clone()).unwrap())
                .collect();
            awa::insert_many_copy_from_pool(&pool, &params)
                .await
                .expect("insert jobs");
        }
        sqlx::query("VACUUM ANALYZE")
            .execute(&pool)
            .await
            .expect("vacuum");
        return;
    }
    let c = client(&pool, workers, batch, seen.clone());
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    c.start().await.expect("start awa");
    tokio::time::timeout(Duration::from_secs(600), seen.done.notified())
        .await
        .expect("awa: stalled for 10 minutes");
    c.shutdown(Duration::from_secs(30)).await;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{}",
        serde_json::json!({"jobs": seen.n.load(Ordering::Relaxed), "secs": secs, "client_cpu": cpu})
    );
    // the check runs after the line above, outside the clock and the server CPU
    // reading: awa's own state counts (they take seconds, scanning its history).
    // Not its completed count: a completion can sit in awa's receipt tables for
    // a while before it is counted there (seen: 0 of 300 right after shutdown)
    let counts = awa::admin::state_counts(&pool)
        .await
        .expect("awa state counts");
    let n = |s: awa::JobState| counts.get(&s).copied().unwrap_or(0);
    let left = n(awa::JobState::Scheduled)
        + n(awa::JobState::Available)
        + n(awa::JobState::Running)
        + n(awa::JobState::Retryable);
    println!(
        "{}",
        serde_json::json!({"left": left, "failed": n(awa::JobState::Failed) + n(awa::JobState::Cancelled)})
    );
}
