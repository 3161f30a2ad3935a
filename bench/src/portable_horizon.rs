//! The horizon-held case on the portable path (`--portable --horizon-jobs N`):
//! on each database that keeps settled rows in its index — PostgreSQL without
//! the extension (the `--conn` server) and MariaDB (`--mariadb URL`) — each
//! form drained by 4 workers claiming one row at a time, once free and once
//! while another session holds the horizon (PostgreSQL: a REPEATABLE READ
//! snapshot, or `--holder row_lock`; MariaDB: a consistent snapshot, which
//! holds InnoDB's purge back): the hand-written floor, the client, and the
//! client scanning from the lowest id on every claim (`client-0`,
//! `PoolOptions::rescan_interval(0)`, as before the mark).

use crate::portable::{self, Backend, Server};
use crate::pressure::Horizon;
use crate::{pct, Args, Form};
use sqlx::pool::PoolConnection;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WORKERS: usize = 4;

#[derive(Clone, Copy)]
enum Drainer {
    Floor,
    /// the portable client, with this rescan interval (`None`: its default)
    Client(Option<Duration>),
}

/// What holds the horizon during a held drain.
enum Held {
    Postgres(Horizon),
    MariaDb(PoolConnection<sqlx::Any>),
}

impl Held {
    async fn hold(a: &Args, b: &Backend, p: &sqlx::AnyPool, t: &str) -> Held {
        match b.db {
            Server::MariaDb => {
                let mut c = p.acquire().await.expect("acquire");
                for sql in [
                    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ".to_owned(),
                    "START TRANSACTION WITH CONSISTENT SNAPSHOT".to_owned(),
                    format!("SELECT COUNT(*) FROM {t}"),
                ] {
                    sqlx::query(&sql)
                        .execute(&mut *c)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
                Held::MariaDb(c)
            }
            _ => Held::Postgres(Horizon::hold(&a.conn, a.holder).await),
        }
    }

    async fn release(self) {
        match self {
            Held::MariaDb(mut c) => {
                sqlx::query("COMMIT")
                    .execute(&mut *c)
                    .await
                    .expect("COMMIT");
                drop(c.detach());
            }
            Held::Postgres(h) => h.release().await,
        }
    }
}

/// jobs/s, p50 and p99 (ms) of one drain.
async fn drain(a: &Args, b: &Backend, d: Drainer, form: Form, jobs: usize, held: bool) -> [f64; 3] {
    let t = format!("bench_ph_{}_{}", b.db.name(), form.name());
    let p = portable::pool(b, WORKERS as u32 + 3).await;
    portable::prepare(&p, b, &t, jobs).await;
    let client = match d {
        Drainer::Floor => None,
        Drainer::Client(rescan) => {
            let settle_form = match form {
                Form::RowLock => settle::Form::RowLock,
                Form::Lease => settle::Form::Lease {
                    ttl: Duration::from_secs(30),
                },
                Form::Advisory => settle::Form::Advisory,
            };
            let mut opts = settle::PoolOptions::new(WORKERS);
            if let Some(r) = rescan {
                opts = opts.rescan_interval(r);
            }
            let q = settle::Queue::new(&t, &t).form(settle_form);
            let c = settle::Client::portable_with(&b.url, opts, q)
                .await
                .expect("Client::portable_with");
            let warm: Vec<_> = (0..WORKERS).map(|_| c.stats()).collect();
            for w in futures_util::future::join_all(warm).await {
                w.expect("stats");
            }
            Some(c)
        }
    };
    // after the table was filled and analyzed: the drain's own dead rows stay
    let holder = if held {
        Some(Held::hold(a, b, &p, &t).await)
    } else {
        None
    };
    let lat = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..WORKERS)
        .map(|_| match &client {
            Some(c) => tokio::spawn(portable::client_worker(
                c.clone(),
                p.clone(),
                t.clone(),
                1,
                false,
                lat.clone(),
            )),
            None => tokio::spawn(portable::floor_worker(
                p.clone(),
                b.db,
                form,
                t.clone(),
                1,
                false,
                lat.clone(),
            )),
        })
        .collect();
    let mut done = 0;
    for h in hs {
        done += h.await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    if let Some(h) = holder {
        h.release().await;
    }
    assert_eq!(
        done,
        jobs,
        "{} {form:?}: every job settled once",
        b.db.name()
    );
    assert_eq!(portable::remaining(&p, &t).await, 0, "every row settled");
    drop(client);
    p.close().await;
    let mut l = lat.lock().unwrap();
    [done as f64 / secs, pct(&mut l, 0.5), pct(&mut l, 0.99)]
}

pub(crate) async fn horizon(a: &Args, _admin: &tokio_postgres::Client) {
    println!(
        "portable path, horizon held by: {} (MariaDB: a consistent snapshot); W={WORKERS}, B=1",
        match a.holder {
            crate::pressure::Holder::Snapshot => "a REPEATABLE READ snapshot",
            crate::pressure::Holder::RowLock => "an open row_lock claim transaction",
        }
    );
    println!(
        "{:<9} {:<9} {:<9} {:>8} | {:>9} {:>8} {:>8} | {:>9} {:>8} {:>8} | {:>9}",
        "backend",
        "impl",
        "form",
        "jobs",
        "free j/s",
        "p50 ms",
        "p99 ms",
        "held j/s",
        "p50 ms",
        "p99 ms",
        "held/free"
    );
    let backends: Vec<Backend> = portable::backends(a)
        .into_iter()
        .filter(|b| matches!(b.db, Server::Postgres | Server::MariaDb))
        .collect();
    for &jobs in &a.horizon {
        for b in &backends {
            for &form in &a.forms {
                for (name, d) in [
                    ("floor", Drainer::Floor),
                    ("client", Drainer::Client(None)),
                    ("client-0", Drainer::Client(Some(Duration::ZERO))),
                ] {
                    let free = drain(a, b, d, form, jobs, false).await;
                    let held = drain(a, b, d, form, jobs, true).await;
                    println!(
                        "{:<9} {:<9} {:<9} {:>8} | {:>9.0} {:>8.2} {:>8.2} | {:>9.0} {:>8.2} {:>8.2} | {:>9.2}",
                        b.db.name(), name, form.name(), jobs, free[0], free[1], free[2], held[0], held[1],
                        held[2], held[0] / free[0]
                    );
                }
            }
        }
    }
}
