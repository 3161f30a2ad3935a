//! A worker over PostgreSQL with the settle extension.
//!
//!     SETTLE_PG="host=/run/postgresql user=postgres dbname=app" cargo run -p settle --example pg_worker
//!
//! It creates a queue table `example_emails` (with `queue_create`), enqueues 20
//! jobs, and runs a worker whose handler acks most, retries flaky ones with a
//! backoff computed from the attempt, drops a poison one and lets one reach the
//! dead letter; it stops when the queue is empty and prints what happened.

use serde::Deserialize;
use settle::{Client, Form, Queue, Settled, WorkerOptions};
use std::time::Duration;

#[derive(Deserialize)]
struct Email {
    to: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let conn = std::env::var("SETTLE_PG").unwrap_or_else(|_| "host=localhost user=postgres".into());
    let config: tokio_postgres::Config = conn.parse()?;
    let (db, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    db.batch_execute(
        "CREATE EXTENSION IF NOT EXISTS settle;
         DROP TABLE IF EXISTS example_emails, example_emails_dead;
         SELECT queue_create('example_emails', 'lease', 3);
         INSERT INTO example_emails (payload)
           SELECT jsonb_build_object('to', CASE g WHEN 7 THEN 'poison' WHEN 9 THEN 'always-fails@example.com'
                                                  ELSE 'user' || g || '@example.com' END)
           FROM generate_series(1, 20) g;",
    )
    .await?;

    let queue = Queue::new("example_emails", "example_emails")
        .form(Form::Lease {
            ttl: Duration::from_secs(30),
        })
        .dead_letter(3, "example_emails_dead");
    let client = Client::connect(config, 8, queue).await?;

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = {
        let client = client.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let s = client.stats().await.expect("stats");
                if s.ready + s.delayed + s.in_flight.unwrap_or(0) == 0 {
                    let _ = stop_tx.send(());
                    return;
                }
            }
        })
    };
    let report = client
        .run(
            WorkerOptions { concurrency: 4, batch: 5, poll_interval: Duration::from_millis(50), ..Default::default() },
            async {
                let _ = stop_rx.await;
            },
            |d| async move {
                let email: Email = match d.payload() {
                    Ok(e) => e,
                    Err(_) => return d.drop_it().await,
                };
                let flaky = email.to.starts_with("user1") && d.attempt() == 1; // fails once
                if email.to == "poison" {
                    println!("job {:>2}: poison, dropped", d.id());
                    d.drop_it().await
                } else if flaky || email.to.starts_with("always-fails") {
                    // the handler computes its own backoff from the attempt
                    let backoff = Duration::from_millis(20 * 2u64.pow(d.attempt()));
                    let (id, attempt) = (d.id().to_owned(), d.attempt());
                    let settled = d.retry_after(backoff).await;
                    println!("job {id:>2}: attempt {attempt} failed, retry in {backoff:?} -> {settled:?}");
                    settled
                } else {
                    println!("job {:>2}: sent to {} (attempt {})", d.id(), email.to, d.attempt());
                    d.ack().await
                }
            },
        )
        .await?;
    watcher.await?;
    let dead: i64 = db
        .query_one("SELECT count(*) FROM example_emails_dead", &[])
        .await?
        .get(0);
    let left: i64 = db
        .query_one("SELECT count(*) FROM example_emails", &[])
        .await?
        .get(0);
    println!(
        "acked or dropped: {}, retried later: {}, dead-lettered: {}, panics: {}, errors: {}",
        report.count(Settled::Deleted),
        report.count(Settled::Delayed),
        report.count(Settled::DeadLettered),
        report.panicked,
        report.errors
    );
    println!("rows left in the queue: {left}, in the dead letter: {dead}");
    assert_eq!(
        (left, dead),
        (0, 1),
        "every job ends acked, dropped or dead-lettered"
    );
    Ok(())
}
