//! Cases where dead tuples decide the speed: the horizon-held grid (another
//! session holds a snapshot for a whole drain, so vacuum may remove nothing the
//! drain leaves behind) and the sustained run (a steady backlog for minutes,
//! optionally with a snapshot held for 120 s at intervals).

use crate::loops::run_workers_for;
use crate::{connect, pct, prepare_queue, prepare_table, run_workers, Args, Form, Impl};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_postgres::Client;

/// What holds the horizon (`--holder`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Holder {
    /// a report: a REPEATABLE READ transaction whose snapshot stays
    Snapshot,
    /// a row_lock worker whose handler runs on: a transaction that claimed a
    /// row of another table (`SELECT … FOR UPDATE`, which gives it a
    /// transaction id) and stays open
    RowLock,
}

/// A session holding the xmin horizon until `release`.
pub(crate) struct Horizon(Client);

impl Horizon {
    /// On `conn`'s database: vacuum keeps what a transaction of the same database may see.
    pub(crate) async fn hold(conn: &str, holder: Holder) -> Horizon {
        let c = connect(conn).await;
        let sql = match holder {
            Holder::Snapshot => "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1",
            Holder::RowLock => {
                c.batch_execute(
                    "CREATE TABLE IF NOT EXISTS bench_holder (id bigint PRIMARY KEY); \
                     INSERT INTO bench_holder VALUES (1) ON CONFLICT DO NOTHING",
                )
                .await
                .expect("the row_lock holder's table");
                "BEGIN; SELECT id FROM bench_holder ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
            }
        };
        c.batch_execute(sql).await.expect("hold the horizon");
        let held: bool = c
            .query_one(
                "SELECT backend_xmin IS NOT NULL OR backend_xid IS NOT NULL \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        assert!(held, "the holding session has an xmin or a transaction id");
        Horizon(c)
    }

    pub(crate) async fn release(self) {
        self.0.batch_execute("COMMIT").await.expect("release");
    }
}

/// One drain of `jobs` rows by W workers claiming B at a time: jobs/s, p50, p99 (ms).
struct Drain {
    rate: f64,
    p50: f64,
    p99: f64,
    /// stopped by `--horizon-cap` before the queue was empty
    capped: bool,
}

/// settle's claims as they were before the mark: every claim scans from the
/// lowest id (`settle.rescan_interval = 0`), the before row of the grid.
const FROM_BOTTOM: &str = "SET settle.rescan_interval = 0";

async fn drain(
    a: &Args,
    admin: &Client,
    (imp, from_bottom): (Impl, bool),
    form: Form,
    jobs: usize,
    (workers, batch): (usize, usize),
    held: bool,
) -> Drain {
    let q = format!("horizon_{}_{:?}", form.name(), imp).to_lowercase();
    let conn = prepare_queue(a, admin, imp, form, &q, jobs).await;
    let mut conns = Vec::new();
    for _ in 0..workers {
        let c = connect(&conn).await;
        if from_bottom {
            c.batch_execute(FROM_BOTTOM).await.expect(FROM_BOTTOM);
        }
        conns.push(c);
    }
    // after the table was filled and vacuumed: the drain's own dead tuples stay
    let horizon = if held {
        Some(Horizon::hold(&conn, a.holder).await)
    } else {
        None
    };
    let lat = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let t0 = Instant::now();
    let (done, _open) = match a.horizon_cap {
        Some(cap) => run_workers_for(conns, (imp, form), &q, batch, lat.clone(), cap).await,
        None => run_workers(conns, imp, form, &q, (batch, false), lat.clone(), None).await,
    };
    let secs = t0.elapsed().as_secs_f64();
    if let Some(h) = horizon {
        h.release().await;
    }
    let capped = done < jobs && a.horizon_cap.is_some();
    assert!(
        done == jobs || capped,
        "{imp:?} {form:?}: every job settled once"
    );
    let mut l = lat.lock().unwrap();
    Drain {
        rate: done as f64 / secs,
        p50: pct(&mut l, 0.5),
        p99: pct(&mut l, 0.99),
        capped,
    }
}

/// The horizon-held grid: every backlog × form × W × B, the floor, settle,
/// settle scanning from the lowest id on every claim (`settle-0`, as before
/// the mark) and (lease) pgmq, each drained once free and once with the
/// horizon held.
pub(crate) async fn horizon(a: &Args, admin: &Client) {
    println!(
        "held by: {}",
        match a.holder {
            Holder::Snapshot => "a REPEATABLE READ snapshot (a report)",
            Holder::RowLock => "an open row_lock claim transaction (a handler still running)",
        }
    );
    println!(
        "{:<8} {:<9} {:>8} {:>3} {:>4} | {:>9} {:>8} {:>8} | {:>9} {:>8} {:>8} | {:>9}",
        "impl",
        "form",
        "jobs",
        "W",
        "B",
        "free j/s",
        "p50 ms",
        "p99 ms",
        "held j/s",
        "p50 ms",
        "p99 ms",
        "held/free"
    );
    for &jobs in &a.horizon {
        for &form in &a.forms {
            for &w in &a.workers {
                for &b in &a.batches {
                    let mut imps = vec![
                        (Impl::Floor, false),
                        (Impl::Settle, false),
                        (Impl::Settle, true),
                    ];
                    if form == Form::Lease && a.pgmq.is_some() {
                        imps.push((Impl::Pgmq, false));
                    }
                    for imp in imps {
                        let free = drain(a, admin, imp, form, jobs, (w, b), false).await;
                        let held = drain(a, admin, imp, form, jobs, (w, b), true).await;
                        let name = format!("{:?}", imp.0).to_lowercase();
                        println!(
                            "{:<8} {:<9} {:>8} {:>3} {:>4} | {:>9.0} {:>8.2} {:>8.2} | {:>9.0} {:>8.2} {:>8.2} | {:>9.2}{}",
                            if imp.1 { format!("{name}-0") } else { name },
                            form.name(),
                            jobs,
                            w,
                            b,
                            free.rate,
                            free.p50,
                            free.p99,
                            held.rate,
                            held.p50,
                            held.p99,
                            held.rate / free.rate,
                            if free.capped || held.capped { " (capped)" } else { "" }
                        );
                    }
                }
            }
        }
    }
}

/// Hold the horizon on `conn` for 120 s of every `every` seconds (the first
/// from `every` - 120), `holding` set meanwhile, until `stop`.
async fn hold_periodically(
    (conn, holder): (String, Holder),
    every: u64,
    stop: Arc<AtomicBool>,
    holding: Arc<AtomicBool>,
) {
    let every = every.max(121);
    loop {
        tokio::time::sleep(Duration::from_secs(every - 120)).await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let h = Horizon::hold(&conn, holder).await;
        holding.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(120)).await;
        holding.store(false, Ordering::Relaxed);
        h.release().await;
    }
}

/// The dead-tuple run: the lease form's queue keeps a steady backlog of 10,000
/// (each worker enqueues as many rows as it acks, in the same round trip as the
/// ack) while 4 workers claim 10 at a time, for `secs` seconds, with the
/// server's autovacuum settings and the table's `--table-options` if given;
/// jobs/s is printed for every 30-second window. With `--hold-every S`, another
/// session holds a snapshot for 120 s of every S seconds (the first from S - 120).
pub(crate) async fn sustained(a: &Args, admin: &Client, secs: u64) {
    let q = "sustained_lease";
    prepare_table(admin, a, q, Form::Lease, 10_000).await;
    let naptime: String = admin
        .query_one("SHOW autovacuum_naptime", &[])
        .await
        .unwrap()
        .get(0);
    println!(
        "table options: {}; autovacuum_naptime = {naptime}",
        a.table_options.as_deref().unwrap_or("queue_create's")
    );
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let holding = Arc::new(AtomicBool::new(false));
    let holds = (a.hold_every > 0).then(|| {
        tokio::spawn(hold_periodically(
            (a.conn.clone(), a.holder),
            a.hold_every,
            stop.clone(),
            holding.clone(),
        ))
    });
    let mut hs = Vec::new();
    for _ in 0..4 {
        let c = connect(&a.conn).await;
        let (stop, count) = (stop.clone(), count.clone());
        hs.push(tokio::spawn(async move {
            let claim = c
                .prepare(&format!(
                    "SELECT id, token FROM queue_claim('{q}', 10, interval '30 seconds')"
                ))
                .await
                .unwrap();
            let ack = c
                .prepare(&format!(
                    "WITH done AS (SELECT count(*) AS n FROM queue_complete_many('{q}', $1, 'ack', NULL, $2)) \
                     INSERT INTO {q} (payload) SELECT jsonb_build_object('n', g) FROM done, generate_series(1, done.n::int) g"
                ))
                .await
                .unwrap();
            while !stop.load(Ordering::Relaxed) {
                let rows = c.query(&claim, &[]).await.unwrap();
                if rows.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                let toks: Vec<SystemTime> = rows.iter().map(|r| r.get(1)).collect();
                c.execute(&ack, &[&ids, &toks]).await.unwrap();
                count.fetch_add(ids.len() as u64, Ordering::Relaxed);
            }
        }));
    }
    println!(
        "{:>7} {:>9} {:>12} {:>12} {:>9}",
        "t (s)", "jobs/s", "dead tuples", "live tuples", "snapshot"
    );
    let started = Instant::now();
    let mut last = 0;
    let mut rates = Vec::new();
    while started.elapsed().as_secs() < secs {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let now = count.load(Ordering::Relaxed);
        let rate = (now - last) as f64 / 30.0;
        last = now;
        let row = admin
            .query_one(
                "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relname = $1",
                &[&q],
            )
            .await
            .unwrap();
        let (dead, live): (i64, i64) = (row.get(0), row.get(1));
        println!(
            "{:>7} {:>9.0} {:>12} {:>12} {:>9}",
            started.elapsed().as_secs(),
            rate,
            dead,
            live,
            if holding.load(Ordering::Relaxed) {
                "held"
            } else {
                ""
            }
        );
        rates.push(rate);
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.await.unwrap();
    }
    if let Some(h) = holds {
        h.abort();
    }
    if let (Some(f), Some(l)) = (rates.first().copied(), rates.last()) {
        let min = rates.iter().cloned().fold(f64::INFINITY, f64::min);
        println!(
            "first window {f:.0} jobs/s, last {l:.0} ({:+.0}%), lowest {min:.0} ({:+.0}%)",
            100.0 * (l - f) / f,
            100.0 * (min - f) / f
        );
    }
}
