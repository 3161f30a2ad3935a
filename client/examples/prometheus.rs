//! settle's worker metrics for Prometheus: install the exporter before
//! connecting, and Prometheus scrapes `/metrics`.
//!
//!     cargo run -p settle --example prometheus
//!
//! It serves `http://127.0.0.1:9464/metrics` (`SETTLE_METRICS_ADDR` moves
//! it) while a worker runs jobs of an embedded SQLite queue, then scrapes
//! itself once, prints the settle lines and keeps serving until Ctrl-C
//! (`SETTLE_METRICS_LINGER=0` exits at once).

use metrics_exporter_prometheus::PrometheusBuilder;
use settle::{Client, Dialect, Form, Queue, WorkerOptions};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: std::net::SocketAddr = std::env::var("SETTLE_METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9464".into())
        .parse()?;
    // the recorder first: a client registers its metrics when it connects
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;

    let path = std::env::temp_dir().join(format!("settle-prometheus-{}.db", std::process::id()));
    let url = format!("sqlite://{}?mode=rwc", path.display());
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await?;
    for stmt in Dialect::Sqlite.create_queue_sql("emails") {
        sqlx::query(&stmt).execute(&pool).await?;
    }
    for i in 0..20 {
        sqlx::query("INSERT INTO emails (payload) VALUES (?)")
            .bind(format!("{{\"n\": {i}}}"))
            .execute(&pool)
            .await?;
    }
    let queue = Queue::new("emails", "emails")
        .form(Form::Lease {
            ttl: Duration::from_secs(30),
        })
        .dead_letter(2, "emails_dead");
    let client = Client::portable(&url, 4, queue).await?;
    let probe = client.clone();
    let drained = async move {
        while probe
            .stats()
            .await
            .map(|s| s.ready + s.in_flight.unwrap_or(0))
            .unwrap_or(0)
            > 0
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(20),
        ..WorkerOptions::default()
    };
    client
        .run(opts, drained, |d| async move {
            let n = d.payload_json()["n"].as_i64().unwrap_or(0);
            if n % 5 == 4 {
                d.retry().await // the dead letter at the second attempt
            } else {
                d.ack().await
            }
        })
        .await?;

    // what Prometheus would scrape
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    for line in body
        .lines()
        .filter(|l| l.starts_with("settle_") && !l.contains("_seconds{"))
    {
        println!("{line}");
    }
    let _ = std::fs::remove_file(&path);
    if std::env::var("SETTLE_METRICS_LINGER").as_deref() != Ok("0") {
        println!("serving http://{addr}/metrics until Ctrl-C");
        tokio::signal::ctrl_c().await?;
    }
    Ok(())
}
