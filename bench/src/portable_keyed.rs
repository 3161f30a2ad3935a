//! `--keyed-backlog N`: one key's N rows in front of `--backlog-keys` other
//! keys' 10 rows each (default 100 keys), its head leased, on each portable
//! backend (`--conn` PostgreSQL without the extension, `--mariadb`,
//! `--sqlite`): how long a claim of the first `--batches` size takes from the
//! lowest id (a new client), and a worker's claims from its mark once the
//! head is acked (each batch acked before the next claim). The portable twin
//! of `bench/keyed-backlog.sql`.

use crate::portable::{backends, insert_rows, pool, prepare, Server};
use crate::Args;
use settle::{Client, Delivery, Form, Queue};
use std::time::{Duration, Instant};

pub(crate) async fn keyed_backlog(a: &Args, backlog: usize) {
    let batch = a.batches.first().copied().unwrap_or(10);
    let keys = a.backlog_keys;
    println!(
        "portable path: a claim of {batch} with one key's {backlog} rows in front of {keys} other keys' {}, its head leased (ms)",
        keys * 10
    );
    println!(
        "{:<9} {:<22} {:>8} {:>8} {:>8}",
        "backend", "claim", "1st", "2nd", "3rd"
    );
    for b in backends(a) {
        if b.db == Server::PgExt {
            continue;
        }
        let p = pool(&b, 4).await;
        let t = "keyed_backlog";
        prepare(&p, &b, t, 0).await;
        for s in [
            format!("ALTER TABLE {t} ADD COLUMN ordering_key VARCHAR(64)"),
            format!("CREATE INDEX {t}_key ON {t} (ordering_key, id)"),
        ] {
            sqlx::query(&s).execute(&p).await.expect(&s);
        }
        let key = std::iter::repeat_n(0, backlog).chain((0..keys * 10).map(|i| i % keys + 1));
        let rows = key.map(|k| format!("('{{}}', 'k{k}')"));
        insert_rows(&p, t, "payload, ordering_key", rows).await;
        let analyze = match b.db {
            Server::MariaDb => format!("ANALYZE TABLE {t}"),
            _ => format!("ANALYZE {t}"),
        };
        sqlx::query(&analyze).execute(&p).await.expect("analyze");
        let queue = || {
            Queue::new(t, t).form(Form::Lease {
                ttl: Duration::from_secs(3600),
            })
        };
        let holder = Client::portable(&b.url, 2, queue()).await.expect("connect");
        let head = holder
            .claim(1)
            .await
            .expect("the head")
            .pop()
            .expect("a row");
        assert_eq!(head.id(), "1", "{}: the backlog's head", b.db.name());
        // a new client each time: its first claim starts at the lowest id
        let mut lowest = Vec::new();
        for _ in 0..3 {
            let c = Client::portable(&b.url, 2, queue()).await.expect("connect");
            for d in timed_claim(&c, batch, b.db, &mut lowest).await {
                d.release().await.expect("release");
            }
        }
        row(b.db, "from the lowest id", &lowest);
        // the holder as a worker: its ack of the head keeps its mark in the backlog
        head.ack().await.expect("ack the head");
        let mut marked = Vec::new();
        for _ in 0..3 {
            for d in timed_claim(&holder, batch, b.db, &mut marked).await {
                d.ack().await.expect("ack");
            }
        }
        row(b.db, "a worker, from its mark", &marked);
    }
}

/// A claim of `batch`, its time pushed onto `took`; every claim comes back full.
async fn timed_claim(
    c: &Client,
    batch: usize,
    db: Server,
    took: &mut Vec<Duration>,
) -> Vec<Delivery> {
    let t0 = Instant::now();
    let ds = c.claim(batch).await.expect("claim");
    took.push(t0.elapsed());
    assert_eq!(ds.len(), batch, "{}: a full batch", db.name());
    ds
}

fn row(db: Server, what: &str, took: &[Duration]) {
    let ms: Vec<String> = took
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect();
    println!(
        "{:<9} {:<22} {:>8} {:>8} {:>8}",
        db.name(),
        what,
        ms[0],
        ms[1],
        ms[2]
    );
}
