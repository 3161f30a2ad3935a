//! settle on a Citus cluster (a coordinator and two workers, `scripts/citus.sh`),
//! through the Rust client: the grouped layout worked through the coordinator
//! and a worker node at once, every form under load with mixed outcomes, the
//! advisory form refused on a worker node, and a worker node restarted mid-run.
//!
//! `scripts/test.sh` sets, when it runs the Citus tier:
//! - `SETTLE_TEST_CITUS_URL`: the coordinator's database (`postgres://…/settle`)
//! - `SETTLE_TEST_CITUS_WORKER_URL`: the same database on the first worker node
//! - `SETTLE_TEST_CITUS_RESTART`: a command restarting the second worker node
//!   (`pg_ctl restart -m immediate`), and `SETTLE_TEST_CITUS_RESTART_PORT`: its port
//!
//! Without them every test says it is skipped and passes.

use settle::{Client, Error, Form, Queue, QueueSet, Settled, WorkerOptions};
use settle_conformance::{mixed_outcome, register};
use sqlx::postgres::PgPool;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The tests share one cluster and one restarts a node of it: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

fn cluster() -> Option<(String, String)> {
    match (
        std::env::var("SETTLE_TEST_CITUS_URL"),
        std::env::var("SETTLE_TEST_CITUS_WORKER_URL"),
    ) {
        (Ok(c), Ok(w)) => Some((c, w)),
        _ => {
            println!("skipped: SETTLE_TEST_CITUS_URL / SETTLE_TEST_CITUS_WORKER_URL not set (scripts/test.sh sets them for its Citus tier)");
            None
        }
    }
}

/// The test's own connection. Citus gives its nodes a version 1 certificate,
/// which sqlx's TLS cannot read, so this one goes without (the clients under
/// test connect with the URL as it is).
async fn admin(url: &str) -> PgPool {
    let sep = if url.contains('?') { '&' } else { '?' };
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect(&format!("{url}{sep}sslmode=disable"))
        .await
        .expect("coordinator connection")
}

/// A grouped table distributed by its group column, with a colocated
/// dead-letter table; `jobs` rows in each of `groups` groups (`<t>:0`, …), ids
/// 1..=jobs in every group. Returns the table and the group names.
async fn grouped(pool: &PgPool, groups: usize, jobs: usize) -> (String, Vec<String>) {
    let t = format!(
        "citus_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    for sql in [
        format!("CREATE TABLE {t} (queue text NOT NULL, id bigint NOT NULL, payload jsonb, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, retry_after timestamptz, PRIMARY KEY (queue, id))"),
        format!("CREATE TABLE {t}_dead (LIKE {t} INCLUDING ALL)"),
        format!("SELECT create_distributed_table('{t}', 'queue')"),
        format!("SELECT create_distributed_table('{t}_dead', 'queue', colocate_with => '{t}')"),
        format!("INSERT INTO {t} (queue, id, payload) SELECT '{t}:' || g, i, jsonb_build_object('n', i) FROM generate_series(0, {}) g, generate_series(1, {jobs}) i", groups - 1),
    ] {
        // after a node restart the coordinator's first statement to it can fail
        // on a dropped connection; the failed statement rolled back
        let mut tries = 0;
        while let Err(e) = sqlx::query(&sql).execute(pool).await {
            tries += 1;
            assert!(tries < 10, "{sql}: {e}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let names = (0..groups).map(|g| format!("{t}:{g}")).collect();
    (t, names)
}

fn queue(name: &str, t: &str, form: Form) -> Queue {
    Queue::new(name, t)
        .form(form)
        .dead_letter_table(3, format!("{t}_dead"))
}

/// A client of `q` through `url`, registered there first.
async fn client(url: &str, q: Queue, pool: usize) -> Client {
    register(url, &q)
        .await
        .unwrap_or_else(|e| panic!("register through {url}: {e}"));
    Client::connect(url, pool, q)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// What the handlers saw, by (queue, id).
#[derive(Default)]
struct Tally {
    running: HashSet<(String, String)>,
    /// rows whose handler finished its work at least once
    handled: HashSet<(String, String)>,
    overlaps: u64,
    settled: HashMap<(String, String), u32>,
    dead: HashMap<(String, String), u32>,
    errors: u64,
    /// the settles that failed, by (queue, id): the attempt and the error
    failed: HashMap<(String, String), Vec<(u32, String)>>,
    /// settles by queue, with the time they happened
    at: Vec<(String, Instant)>,
}

fn handler(
    tally: Arc<Mutex<Tally>>,
) -> impl Fn(
    settle::Delivery,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = settle::Result<Settled>> + Send>>
       + Send
       + Sync
       + 'static {
    move |d| {
        let tally = tally.clone();
        Box::pin(async move {
            let key = (d.queue().to_owned(), d.id().to_owned());
            if !tally.lock().unwrap().running.insert(key.clone()) {
                tally.lock().unwrap().overlaps += 1;
            }
            tokio::time::sleep(Duration::from_micros(100)).await;
            let attempt = d.attempt();
            let outcome = mixed_outcome(&key.1, attempt);
            {
                let mut t = tally.lock().unwrap();
                t.running.remove(&key);
                t.handled.insert(key.clone());
            }
            let r = d.settle(outcome).await;
            let mut t = tally.lock().unwrap();
            match &r {
                Ok(Settled::Deleted | Settled::Marked) => {
                    *t.settled.entry(key.clone()).or_default() += 1
                }
                Ok(Settled::DeadLettered) => *t.dead.entry(key.clone()).or_default() += 1,
                Ok(_) => {}
                Err(e) => {
                    t.errors += 1;
                    t.failed
                        .entry(key.clone())
                        .or_default()
                        .push((attempt, e.to_string()));
                }
            }
            if r.is_ok() {
                t.at.push((key.0, Instant::now()));
            }
            r
        })
    }
}

/// (lost, settled twice) of a run over `t`: nothing may be left in the queue; a
/// row the mixed outcome set dead-letters must be in the dead-letter table, any
/// other row must not, and must have been settled (`faulty`: its handler
/// finished — a settle cut off by a node restart may have committed without
/// the client hearing of it); no row may be settled or dead-lettered twice.
async fn check(
    pool: &PgPool,
    t: &str,
    groups: &[String],
    jobs: usize,
    tally: &Tally,
    faulty: bool,
) -> (usize, usize) {
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {t}"))
        .fetch_one(pool)
        .await
        .unwrap();
    let dead_rows: Vec<(String, i64)> = sqlx::query_as(&format!("SELECT queue, id FROM {t}_dead"))
        .fetch_all(pool)
        .await
        .unwrap();
    let dead_rows: HashSet<(String, String)> = dead_rows
        .into_iter()
        .map(|(q, i)| (q, i.to_string()))
        .collect();
    let mut lost = left as usize;
    for g in groups {
        for i in 1..=jobs {
            let key = (g.clone(), i.to_string());
            let done = if faulty {
                tally.handled.contains(&key)
            } else {
                tally.settled.contains_key(&key)
            };
            let ok = if i % 10 == 9 {
                dead_rows.contains(&key) && !tally.settled.contains_key(&key)
            } else {
                done && !dead_rows.contains(&key)
            };
            if !ok {
                lost += 1;
                println!(
                    "lost {key:?}: in the dead letter {}, handled {}, settled {:?}, dead-lettered {:?}, failed settles {:?}",
                    dead_rows.contains(&key),
                    tally.handled.contains(&key),
                    tally.settled.get(&key),
                    tally.dead.get(&key),
                    tally.failed.get(&key)
                );
            }
        }
    }
    let twice = tally.settled.values().filter(|n| **n > 1).count()
        + tally.dead.values().filter(|n| **n > 1).count();
    (lost, twice)
}

/// Run `sets` (each a worker over its queues, with its options) until `t` is
/// empty or `limit` passes, with `during` running meanwhile (a fault).
async fn run(
    sets: Vec<(QueueSet, WorkerOptions)>,
    tally: &Arc<Mutex<Tally>>,
    pool: &PgPool,
    t: &str,
    limit: Duration,
    during: impl std::future::Future<Output = ()>,
) {
    let mut stops = Vec::new();
    let mut workers = Vec::new();
    for (set, opts) in sets {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stops.push(tx);
        let h = handler(tally.clone());
        workers.push(tokio::spawn(async move {
            set.run(
                opts,
                async {
                    let _ = rx.await;
                },
                h,
            )
            .await
        }));
    }
    let deadline = Instant::now() + limit;
    let wait = async {
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            // fails while a node restarts
            if let Ok(0) = sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {t}"))
                .fetch_one(pool)
                .await
            {
                break;
            }
        }
    };
    tokio::join!(wait, during);
    for s in stops {
        let _ = s.send(());
    }
    for w in workers {
        w.await.unwrap().unwrap();
    }
}

fn opts(concurrency: usize, form: Form) -> WorkerOptions {
    WorkerOptions {
        concurrency,
        // row_lock: one row per claim, so a settle's result is its commit's (the
        // deliveries of a claim share a transaction that commits with the last)
        batch: if form == Form::RowLock { 1 } else { 8 },
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    }
}

const LEASE: Form = Form::Lease {
    ttl: Duration::from_secs(5),
};

/// 16 concurrent handlers (8 workers × 2) over 4 groups × 1,250 rows with the
/// mixed outcome set, in every form. row_lock and lease run half their workers
/// through a worker node; advisory, whose keys are the coordinator's locks, all
/// through the coordinator. Nothing lost, nothing settled twice, no row handled
/// by two handlers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_in_every_form() {
    let _one_at_a_time = serial().await;
    let Some((coord, worker)) = cluster() else {
        return;
    };
    let pool = admin(&coord).await;
    for form in [Form::RowLock, LEASE, Form::Advisory] {
        let started = Instant::now();
        let (t, groups) = grouped(&pool, 4, 1250).await;
        let mut sets = Vec::new();
        for w in 0..8 {
            let url = if w % 2 == 1 && form != Form::Advisory {
                &worker
            } else {
                &coord
            };
            let mut clients = Vec::new();
            for g in &groups {
                clients.push(client(url, queue(g, &t, form), 2).await);
            }
            sets.push((QueueSet::new(clients), opts(2, form)));
        }
        let tally: Arc<Mutex<Tally>> = Arc::default();
        run(sets, &tally, &pool, &t, Duration::from_secs(300), async {}).await;
        let tally = std::mem::take(&mut *tally.lock().unwrap());
        let (lost, twice) = check(&pool, &t, &groups, 1250, &tally, false).await;
        println!(
            "citus load {form:?}: 5000 jobs, lost {lost}, settled twice {twice}, overlaps {}, errors {}, {:.1} s",
            tally.overlaps,
            tally.errors,
            started.elapsed().as_secs_f64()
        );
        assert_eq!(
            (lost, twice, tally.overlaps, tally.errors),
            (0, 0, 0, 0),
            "{form:?}"
        );
    }
}

/// row_lock and lease work through a worker node; advisory is refused there
/// (its keys would be locks of that node, invisible to claimers elsewhere) and
/// works through the coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_through_a_worker_node() {
    let _one_at_a_time = serial().await;
    let Some((coord, worker)) = cluster() else {
        return;
    };
    let pool = admin(&coord).await;
    let (t, groups) = grouped(&pool, 1, 4).await;
    for form in [Form::RowLock, LEASE] {
        let c = client(&worker, queue(&groups[0], &t, form), 2).await;
        let got = c.claim(1).await.unwrap();
        assert_eq!(got.len(), 1, "{form:?} through a worker node");
        for d in got {
            assert_eq!(d.ack().await.unwrap(), Settled::Deleted);
        }
    }
    let advisory = queue(&groups[0], &t, Form::Advisory);
    let err = match register(&worker, &advisory).await {
        Ok(_) => Client::connect(worker.as_str(), 2, advisory)
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    };
    let err = match err {
        Ok(()) => {
            let c = client(&worker, queue(&groups[0], &t, Form::Advisory), 2).await;
            c.claim(1).await.map(|_| ()).unwrap_err()
        }
        Err(e) => e,
    };
    assert!(
        matches!(err, Error::InvalidDescriptor(_)),
        "advisory on a worker node: {err:?}"
    );
    assert!(err.to_string().contains("coordinator"), "{err}");
    let c = client(&coord, queue(&groups[0], &t, Form::Advisory), 2).await;
    let got = c.claim(5).await.unwrap();
    assert_eq!(got.len(), 2, "advisory through the coordinator");
    for d in got {
        d.ack().await.unwrap();
    }
}

/// The second worker node restarted (`-m immediate`) mid-run, under 16 groups
/// spread over both workers: nothing is lost or settled twice, and the groups
/// on the first worker were settled on while the second was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_node_restart() {
    let _one_at_a_time = serial().await;
    let Some((coord, _)) = cluster() else { return };
    let (Ok(restart), Ok(port)) = (
        std::env::var("SETTLE_TEST_CITUS_RESTART"),
        std::env::var("SETTLE_TEST_CITUS_RESTART_PORT"),
    ) else {
        println!("skipped: SETTLE_TEST_CITUS_RESTART not set");
        return;
    };
    let pool = admin(&coord).await;
    for form in [LEASE, Form::RowLock] {
        let (t, groups) = grouped(&pool, 16, 300).await;
        // which groups live on the restarted node
        let mut on_restarted = HashSet::new();
        for g in &groups {
            let p: i32 = sqlx::query_scalar(
                "SELECT n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)                  JOIN pg_dist_node n USING (groupid)                  WHERE s.shardid = get_shard_id_for_distribution_column($1::text::regclass, $2::text)",
            )
            .bind(&t)
            .bind(g)
            .fetch_one(&pool)
            .await
            .unwrap();
            if p.to_string() == port {
                on_restarted.insert(g.clone());
            }
        }
        assert!(
            !on_restarted.is_empty() && on_restarted.len() < groups.len(),
            "the 16 groups spread over both workers: {} on the restarted one",
            on_restarted.len()
        );
        let mut sets = Vec::new();
        for _ in 0..4 {
            let mut clients = Vec::new();
            for g in &groups {
                clients.push(client(&coord, queue(g, &t, form), 3).await);
            }
            sets.push((QueueSet::new(clients), opts(4, form)));
        }
        let tally: Arc<Mutex<Tally>> = Arc::default();
        let window: Arc<Mutex<Option<(Instant, Instant)>>> = Arc::default();
        let fault = {
            let (tally, window, restart) = (tally.clone(), window.clone(), restart.clone());
            let quarter = groups.len() * 300 / 4;
            async move {
                // a quarter of the work done, then the restart
                while tally.lock().unwrap().settled.len() < quarter {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let from = Instant::now();
                let ok = tokio::task::spawn_blocking(move || {
                    std::process::Command::new("sh")
                        .arg("-c")
                        .arg(&restart)
                        .status()
                })
                .await
                .unwrap()
                .map(|s| s.success())
                .unwrap_or(false);
                assert!(ok, "the restart command failed");
                *window.lock().unwrap() = Some((from, Instant::now()));
            }
        };
        run(sets, &tally, &pool, &t, Duration::from_secs(300), fault).await;
        let tally = std::mem::take(&mut *tally.lock().unwrap());
        let (lost, twice) = check(&pool, &t, &groups, 300, &tally, true).await;
        let (from, to) = window.lock().unwrap().expect("the node was restarted");
        // the node is away from the restart until its groups are settled on again
        let back = tally
            .at
            .iter()
            .filter(|(q, at)| on_restarted.contains(q) && *at > to)
            .map(|(_, at)| *at)
            .min()
            .unwrap_or(to);
        let during = |on: bool| {
            tally
                .at
                .iter()
                .filter(|(q, at)| on_restarted.contains(q) == on && *at >= from && *at <= back)
                .count()
        };
        println!(
            "citus restart {form:?}: 4800 jobs, lost {lost}, settled twice {twice}, settle errors {}, \
             restart took {:.2} s, its groups settled on again {:.2} s after it began; \
             settles meanwhile on the other node's groups {} (on the restarted node's, before it went down, {}); \
             the settle errors: {:?}",
            tally.errors,
            (to - from).as_secs_f64(),
            (back - from).as_secs_f64(),
            during(false),
            during(true),
            tally
                .failed
                .values()
                .flatten()
                .map(|(_, e)| e.as_str())
                .collect::<std::collections::BTreeSet<_>>()
        );
        assert_eq!((lost, twice), (0, 0), "{form:?}");
        assert!(
            during(false) > 0,
            "{form:?}: nothing settled on the other node's groups during the restart"
        );
    }
}
