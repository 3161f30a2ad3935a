//! The worker's metrics through the `metrics` facade: a recording recorder
//! installed for this test binary, a scripted worker over a real SQLite queue,
//! and the counts it must have recorded (names: docs/operations.md).

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::CompositeKey;
use settle::{Client, Dialect, Error, Form, Queue, Settled, WorkerOptions};
use std::collections::HashMap;
use std::time::Duration;

/// (name, sorted labels) → counter value or histogram sample count
type Counts = HashMap<(String, Vec<(String, String)>), u64>;

fn read(snap: &Snapshotter) -> Counts {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .map(|(k, _, _, v): (CompositeKey, _, _, DebugValue)| {
            let key = k.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let n = match v {
                DebugValue::Counter(c) => c,
                DebugValue::Histogram(h) => h.len() as u64,
                DebugValue::Gauge(_) => 0,
            };
            ((key.name().to_owned(), labels), n)
        })
        .collect()
}

fn get(m: &Counts, name: &str, labels: &[(&str, &str)]) -> u64 {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    m.get(&(name.to_owned(), l)).copied().unwrap_or(0)
}

async fn sqlite_queue(name: &str, rows: usize) -> String {
    // a fresh directory: a process id alone is reused, and a file of an
    // earlier run would already hold the table
    let dir = std::env::temp_dir().join(format!(
        "settle-metrics-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.join(format!("{name}.db")).display()
    );
    sqlx::any::install_default_drivers();
    // no reaper task (sqlx #3645)
    let pool = sqlx::any::AnyPoolOptions::new()
        .idle_timeout(None)
        .max_lifetime(None)
        .connect(&url)
        .await
        .unwrap();
    for stmt in Dialect::Sqlite.create_queue_sql(name) {
        sqlx::query(&stmt).execute(&pool).await.unwrap();
    }
    for i in 1..=rows {
        sqlx::query(&format!(
            "INSERT INTO {name} (payload) VALUES ('{{\"n\": {i}}}')"
        ))
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_worker_records_its_counts() {
    let rec = DebuggingRecorder::new();
    let snap = rec.snapshotter();
    rec.install()
        .expect("the only recorder of this test binary");

    // eleven jobs: 1-6 acked, 7 retried once, 8 panics once, 9 released once,
    // 10 dropped, 11's handler returns without settling once (a payload of
    // another type: `?` drops the delivery)
    let url = sqlite_queue("jobs", 11).await;
    let lease = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    let q = Queue::new("jobs", "jobs")
        .form(lease)
        .dead_letter(3, "jobs_dead");
    let c = Client::portable(&url, 4, q).await.unwrap();
    let probe = c.clone();
    let done = async move {
        loop {
            let s = probe.stats().await.unwrap();
            if s.ready + s.delayed + s.in_flight.unwrap_or(0) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(10),
        ..WorkerOptions::default()
    };
    let report = c
        .run(opts, done, |d| async move {
            let first = d.attempt() == 1;
            match d.id() {
                "7" if first => d.retry().await,
                "8" if first => panic!("scripted panic"),
                "9" if first => d.release().await,
                "10" => d.drop_it().await,
                "11" if first => {
                    let n: u64 = d.payload()?;
                    panic!("{n}: the payload is an object, not a number");
                }
                _ => d.ack().await,
            }
        })
        .await
        .unwrap();
    assert_eq!(report.panicked, 1, "{report:?}");
    assert_eq!(report.unsettled, 1, "{report:?}: job 11's first run");
    assert_eq!(report.errors, 1, "{report:?}: job 11's first run");

    let m = read(&snap);
    let q = [("queue", "jobs")];
    let outcome = |o: &'static str| {
        get(
            &m,
            "settle_settled_total",
            &[("queue", "jobs"), ("outcome", o)],
        )
    };
    assert_eq!(get(&m, "settle_claimed_total", &q), 15, "{m:?}");
    assert_eq!(outcome("deleted"), 11, "{m:?}");
    assert_eq!(outcome("retried"), 1, "{m:?}");
    assert_eq!(outcome("released"), 1, "{m:?}");
    assert_eq!(outcome("dead_lettered"), 0, "{m:?}");
    assert_eq!(get(&m, "settle_handler_panics_total", &q), 1, "{m:?}");
    assert_eq!(
        get(&m, "settle_handler_seconds", &q),
        15,
        "{m:?}: one sample per handler run"
    );
    assert_eq!(
        get(&m, "settle_settle_seconds", &q),
        13,
        "{m:?}: one sample per settle"
    );
    assert!(get(&m, "settle_claim_seconds", &q) >= 1, "{m:?}");
    assert_eq!(
        get(
            &m,
            "settle_errors_total",
            &[("queue", "jobs"), ("op", "settle")]
        ),
        0,
        "{m:?}"
    );

    // a crash loop: a delivery at max_attempts (1) given back unsettled; the
    // next claim moves the row to the dead letter instead, and counts it
    let url = sqlite_queue("loops", 1).await;
    let q = Queue::new("loops", "loops")
        .form(lease)
        .dead_letter(1, "loops_dead");
    let c = Client::portable(&url, 2, q).await.unwrap();
    drop(c.claim(1).await.unwrap());
    let mut moved = false;
    for _ in 0..100 {
        assert!(
            c.claim(1).await.unwrap().is_empty(),
            "never delivered again"
        );
        if c.stats().await.unwrap().dead == Some(1) {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(moved, "the crash-looping row is in the dead letter");
    let m = read(&snap);
    assert_eq!(
        get(
            &m,
            "settle_settled_total",
            &[("queue", "loops"), ("outcome", "dead_lettered")]
        ),
        1,
        "{m:?}"
    );

    // a lease lost: the first delivery's lease passed to a later claim
    let url = sqlite_queue("leases", 1).await;
    let short = Queue::new("leases", "leases").form(Form::Lease {
        ttl: Duration::from_millis(30),
    });
    let c = Client::portable(&url, 2, short).await.unwrap();
    let first = c.claim(1).await.unwrap().pop().unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let second = c.claim(1).await.unwrap().pop().unwrap();
    assert!(matches!(first.ack().await, Err(Error::LeaseLost(_))));
    assert_eq!(second.ack().await.unwrap(), Settled::Deleted);
    // a claim that fails: a table dropped under the client
    sqlx::query("DROP TABLE leases")
        .execute(&mut *c.any_connection().await.unwrap())
        .await
        .unwrap();
    assert!(c.claim(1).await.is_err());

    let m = read(&snap);
    let q = [("queue", "leases")];
    assert_eq!(get(&m, "settle_claimed_total", &q), 2, "{m:?}");
    assert_eq!(get(&m, "settle_lease_lost_total", &q), 1, "{m:?}");
    assert_eq!(
        get(
            &m,
            "settle_settled_total",
            &[("queue", "leases"), ("outcome", "deleted")]
        ),
        1,
        "{m:?}"
    );
    assert_eq!(
        get(
            &m,
            "settle_errors_total",
            &[("queue", "leases"), ("op", "claim")]
        ),
        1,
        "{m:?}"
    );
}
