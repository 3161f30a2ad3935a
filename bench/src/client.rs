//! The Rust client's cases: the client itself (lease form, claims of B, acks
//! batched with `settle_many`) and, for its CPU target, a raw tokio-postgres
//! loop that sends the same statements with the same batch and concurrency.

use crate::{case, median_by, Args, Form, Impl, Result_};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::Client;

/// The lease the client and the raw loop claim for, in microseconds.
const LEASE_MICROS: i64 = 30_000_000;

/// The client's statements, as `client/src/backend/ext/sql.rs` writes them.
const CLAIM_SQL: &str =
    "SELECT id, attempt, token, payload FROM queue_claim($1, $2, $3::bigint * interval '1 microsecond')";
const COMPLETE_SQL: &str =
    "SELECT queue_complete($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";
const COMPLETE_MANY_SQL: &str =
    "SELECT id, result FROM queue_complete_many($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";

/// Run the Rust client over queue `q`: `workers` tasks on one client with a
/// pool of `workers`, each claiming `batch` and acking until the queue is empty.
pub(crate) async fn client_run(
    a: &Args,
    q: &str,
    workers: usize,
    batch: usize,
    lat: Arc<Mutex<Vec<f64>>>,
) -> (usize, settle::Client) {
    let client = lease_client(a, q, workers).await;
    let hs: Vec<_> = (0..workers)
        .map(|_| {
            let client = client.clone();
            let lat = lat.clone();
            tokio::spawn(async move {
                let mut done = 0;
                loop {
                    let t0 = Instant::now();
                    let ds = client.claim(batch).await.unwrap();
                    if ds.is_empty() {
                        return done;
                    }
                    let n = ds.len();
                    if n == 1 {
                        ds.into_iter().next().unwrap().ack().await.unwrap();
                    } else {
                        for r in client.settle_many(ds, settle::Outcome::Ack).await {
                            r.unwrap();
                        }
                    }
                    let ms = t0.elapsed().as_secs_f64() * 1000.0;
                    lat.lock().unwrap().extend(std::iter::repeat_n(ms, n));
                    done += n;
                }
            })
        })
        .collect();
    let mut n = 0;
    for h in hs {
        n += h.await.unwrap();
    }
    (n, client)
}

/// A client of lease queue `q` (registered here) with a pool of `pool`.
pub(crate) async fn lease_client(a: &Args, q: &str, pool: usize) -> settle::Client {
    let queue = settle::Queue::new(q, q).form(settle::Form::Lease {
        ttl: Duration::from_micros(LEASE_MICROS as u64),
    });
    settle::Admin::postgres(a.conn.as_str(), 1)
        .await
        .unwrap()
        .register(&queue)
        .await
        .unwrap();
    let pool = settle::PoolOptions::new(pool).transaction_pooler(a.transaction_pooler);
    settle::Client::connect_with(a.conn.as_str(), pool, queue)
        .await
        .unwrap()
}

/// A payload as the client keeps it: the bytes of its JSON text, unparsed.
struct PayloadBytes(#[allow(dead_code)] Vec<u8>);

impl<'a> FromSql<'a> for PayloadBytes {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        // jsonb's binary form is a version byte and the JSON text
        let text = if *ty == Type::JSONB { &raw[1..] } else { raw };
        Ok(PayloadBytes(text.to_vec()))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB || *ty == Type::JSON
    }
}

/// The raw loop: one connection per worker (already open), the client's
/// statements prepared once each, every row of a claim acked by one statement
/// (one `queue_complete` for a batch of one), the results checked.
pub(crate) async fn raw_run(
    conns: Vec<Client>,
    q: &str,
    batch: usize,
    lat: Arc<Mutex<Vec<f64>>>,
) -> (usize, Vec<Client>) {
    let hs: Vec<_> = conns
        .into_iter()
        .map(|c| {
            let (q, lat) = (q.to_owned(), lat.clone());
            tokio::spawn(async move {
                let claim = c.prepare(CLAIM_SQL).await.unwrap();
                let one = c.prepare(COMPLETE_SQL).await.unwrap();
                let many = c.prepare(COMPLETE_MANY_SQL).await.unwrap();
                let (b, lease, none) = (batch as i32, LEASE_MICROS, None::<i64>);
                let mut done = 0;
                loop {
                    let t0 = Instant::now();
                    let rows = c.query(&claim, &[&q, &b, &lease]).await.unwrap();
                    if rows.is_empty() {
                        return (done, c);
                    }
                    let mut ids = Vec::with_capacity(rows.len());
                    let mut tokens = Vec::with_capacity(rows.len());
                    for r in &rows {
                        ids.push(r.get::<_, String>(0));
                        let _attempt: Option<i32> = r.get(1);
                        tokens.push(r.get::<_, Option<SystemTime>>(2));
                        let _payload: Option<PayloadBytes> = r.get(3);
                    }
                    if ids.len() == 1 {
                        let r = c
                            .query_one(&one, &[&q, &ids[0], &"ack", &none, &tokens[0]])
                            .await
                            .unwrap();
                        assert_eq!(r.get::<_, &str>(0), "deleted");
                    } else {
                        let rs = c
                            .query(&many, &[&q, &ids, &"ack", &none, &tokens])
                            .await
                            .unwrap();
                        assert_eq!(rs.len(), ids.len());
                        assert!(rs.iter().all(|r| r.get::<_, &str>(1) == "deleted"));
                    }
                    let ms = t0.elapsed().as_secs_f64() * 1000.0;
                    lat.lock()
                        .unwrap()
                        .extend(std::iter::repeat_n(ms, ids.len()));
                    done += ids.len();
                }
            })
        })
        .collect();
    let (mut n, mut conns) = (0, Vec::new());
    for h in hs {
        let (d, c) = h.await.unwrap();
        n += d;
        conns.push(c);
    }
    (n, conns)
}

/// The Rust client (lease) beside a raw driver loop sending its statements:
/// the client's own CPU per job, same batch and concurrency, same run, at
/// the largest W; its rows added to `results`.
pub(crate) async fn cpu_rows(a: &Args, admin: &Client, results: &mut Vec<Result_>) {
    for &b in &a.batches {
        let w = *a.workers.last().unwrap();
        // interleaved, so that both meet the same machine
        let (mut clients, mut raws) = (Vec::new(), Vec::new());
        for _ in 0..a.repeat {
            clients.push(case(a, admin, Impl::Client, Form::Lease, w, b).await);
            raws.push(case(a, admin, Impl::Raw, Form::Lease, w, b).await);
        }
        // each with its median CPU per job: the figure the target compares
        let cpu = |r: &Result_| r.client_cpu_per_k;
        let (client, raw) = (median_by(clients, cpu), median_by(raws, cpu));
        for (name, r) in [("client", &client), ("raw", &raw)] {
            println!(
                "{:<8} {:<9} {:>3} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>13.3} {:>13.3}",
                name,
                "lease",
                w,
                b,
                r.rate(),
                r.p50_ms,
                r.p99_ms,
                r.server_cpu_per_k,
                r.client_cpu_per_k,
            );
        }
        let ratio = client.client_cpu_per_k / raw.client_cpu_per_k.max(1e-9);
        println!(
            "client CPU per job {:.2} us, raw loop's {:.2} us, W={w} B={b}: {ratio:.2}x (target <= 1.15: {})",
            client.client_cpu_per_k * 1000.0,
            raw.client_cpu_per_k * 1000.0,
            if ratio <= 1.15 { "met" } else { "NOT met" }
        );
        results.push(client);
        results.push(raw);
    }
}
