//! The quickstart: a queue in an embedded SQLite file, no server needed.
//!
//!     cargo run --example quickstart
//!
//! It creates `settle-quickstart.db` in the system's temp folder, enqueues jobs,
//! and runs a worker whose handler acks some, retries flaky ones with a backoff
//! computed from the attempt, drops a poison one and lets a doomed one reach the
//! dead letter at max_attempts. It prints what happened to each job and the
//! final rows of the queue and dead-letter tables.

use serde::Deserialize;
use settle::{Client, Dialect, Form, Queue, Settled, WorkerOptions};
use sqlx::Row;
use std::time::Duration;

#[derive(Deserialize)]
struct Job {
    kind: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join("settle-quickstart.db");
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
    let url = format!("sqlite://{}?mode=rwc", path.display());
    println!("queue file: {}", path.display());

    // the canonical table (sql/sqlite/queue.sql) and its dead-letter table
    {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&url).await?;
        for stmt in Dialect::Sqlite.create_queue_sql("jobs") {
            sqlx::query(&stmt).execute(&pool).await?;
        }
        let kinds = ["ok", "flaky", "ok", "poison", "ok", "doomed", "flaky", "ok"];
        for kind in kinds {
            sqlx::query("INSERT INTO jobs (payload) VALUES (?)")
                .bind(format!("{{\"kind\": \"{kind}\"}}"))
                .execute(&pool)
                .await?;
        }
        pool.close().await;
    }

    let queue = Queue::new("jobs", "jobs")
        .form(Form::Lease {
            ttl: Duration::from_secs(30),
        })
        .dead_letter(3, "jobs_dead");
    let client = Client::portable(&url, 4, queue).await?;

    // stop once nothing is ready, delayed or in flight
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = {
        let client = client.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let s = client.stats().await.expect("stats");
                if s.ready + s.delayed + s.in_flight.unwrap_or(0) == 0 {
                    let _ = stop_tx.send(());
                    return;
                }
            }
        })
    };

    let options = WorkerOptions {
        concurrency: 4,
        batch: 4,
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let report = client
        .run(
            options,
            async {
                let _ = stop_rx.await;
            },
            |d| async move {
                let (id, attempt) = (d.id().to_owned(), d.attempt());
                let job: Job = d.payload()?;
                let (what, settled) = match job.kind.as_str() {
                    "ok" => ("done", d.ack().await),
                    "poison" => ("poison: dropped", d.drop_it().await),
                    "flaky" if attempt < 3 => {
                        // no backoff policy in settle: the handler computes its own
                        let backoff = Duration::from_millis(10 * 2u64.pow(attempt));
                        ("failed, retry later", d.retry_after(backoff).await)
                    }
                    "flaky" => ("done on a later attempt", d.ack().await),
                    _ => ("failed again", d.retry().await),
                };
                println!(
                    "job {id} ({}) attempt {attempt}: {what} -> {:?}",
                    job.kind,
                    settled.as_ref().ok()
                );
                settled
            },
        )
        .await?;
    watcher.await?;

    println!(
        "\nsettled: {} deleted, {} delayed retries, {} retries, {} dead-lettered; {} panics, {} errors",
        report.count(Settled::Deleted),
        report.count(Settled::Delayed),
        report.count(Settled::Retried),
        report.count(Settled::DeadLettered),
        report.panicked,
        report.errors
    );
    let pool = sqlx::AnyPool::connect(&url).await?;
    for table in ["jobs", "jobs_dead"] {
        let rows = sqlx::query(&format!(
            "SELECT id, attempt, payload FROM {table} ORDER BY id"
        ))
        .fetch_all(&pool)
        .await?;
        println!("{table}: {} row(s)", rows.len());
        for r in rows {
            let (id, attempt, payload): (i64, i64, String) = (r.get(0), r.get(1), r.get(2));
            println!("  id {id}, attempt {attempt}, payload {payload}");
        }
    }
    Ok(())
}
