//! The cases whose workers run in this process: load, mixed outcomes, keyed
//! rows, and the faults done to the server (connections killed, restarts).

use crate::report::{Line, Scenario};
use settle::{Error, Form, Outcome, Queue, Settled, WorkerOptions};
use settle_conformance::{add_role, admin, final_rows, mixed_outcome, table, Backend};
use sqlx::Row;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Tally {
    /// rows whose handler is running now (until it calls settle)
    running: HashSet<String>,
    /// rows whose handler finished its work at least once
    handled_ids: HashSet<String>,
    overlaps: u64,
    settled: HashMap<String, u32>,
    dead: HashMap<String, u32>,
    lease_lost: u64,
    errors: u64,
    handled: u64,
    /// keyed scenarios: the row of each key whose handler is running
    key_running: HashMap<i64, i64>,
    /// keyed scenarios: the highest row of each key a handler started
    key_last: HashMap<i64, i64>,
    /// keyed scenarios: rows started while a row of their key ran, or before a lower id of their key
    key_breaches: u64,
}

/// KeyedLoad's and KeyedMixed's keys: a row's key is its id modulo this.
const FEW_KEYS: i64 = 16;

/// KeyedBacklog: the rows in front, of keys 0..BACKLOG_FRONT_KEYS, and how
/// many keys the rows after them have — more than a claim visits at once on
/// the extension and the SQL edition (1,024) and on the portable path (512),
/// and fewer than the rows in front, so that claims past them walk the keys.
const BACKLOG_FRONT: i64 = 1_200;
const BACKLOG_FRONT_KEYS: i64 = 4;
const BACKLOG_KEYS: i64 = 1_100;

/// The ordering key of row `n` in a keyed scenario.
fn key_of(scenario: Scenario, n: i64) -> i64 {
    match scenario {
        Scenario::KeyedBacklog if n <= BACKLOG_FRONT => n % BACKLOG_FRONT_KEYS,
        Scenario::KeyedBacklog => BACKLOG_FRONT_KEYS + n % BACKLOG_KEYS,
        _ => n % FEW_KEYS,
    }
}

/// The jobs of a case of `scenario` in a run of `jobs`: KeyedBacklog has
/// at least its front and two rows of each of its other keys.
pub fn jobs_of(scenario: Scenario, jobs: usize) -> usize {
    match scenario {
        Scenario::KeyedBacklog => jobs.max((BACKLOG_FRONT + 2 * BACKLOG_KEYS) as usize),
        _ => jobs,
    }
}

/// A fresh queue table of `jobs` rows (ids 1..=jobs) for `scenario`; keyed
/// scenarios' rows carry an `ordering_key` ([`key_of`]) with its index.
async fn queue_table(b: Backend, pool: &sqlx::AnyPool, scenario: Scenario, jobs: usize) -> String {
    if !scenario.is_keyed() {
        return table(b, pool, "rel", jobs).await;
    }
    let d = b.dialect();
    let t = table(b, pool, "rel", 0).await;
    let q = add_role(b, pool, &t, "ordering_key", "bigint").await;
    // a dead-letter table has every column of its queue's
    let mut stmts = vec![format!(
        "ALTER TABLE {} ADD COLUMN ordering_key bigint",
        d.ident(&format!("{t}_dead"))
    )];
    // in id order, 500 rows a statement
    let ids: Vec<i64> = (1..=jobs as i64).collect();
    for chunk in ids.chunks(500) {
        let rows: Vec<String> = chunk
            .iter()
            .map(|n| format!("('{{\"n\": {n}}}', {})", key_of(scenario, *n)))
            .collect();
        stmts.push(format!(
            "INSERT INTO {q} (payload, ordering_key) VALUES {}",
            rows.join(", ")
        ));
    }
    for sql in stmts {
        sqlx::query(&sql)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    t
}

/// Inflicts `scenario`'s fault on backend `b`: its connections terminated, or its server restarted.
async fn inject(b: Backend, scenario: Scenario, pool: &sqlx::AnyPool) -> Result<(), String> {
    match (scenario, b) {
        (Scenario::KillConnections, Backend::PgExtension | Backend::PgPortable) => {
            sqlx::query(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            )
            .fetch_one(pool)
            .await
            .map_err(|e| e.to_string())?;
        }
        (Scenario::KillConnections, Backend::MariaDb) => {
            let ids: Vec<i64> = sqlx::query(
                "SELECT CAST(id AS SIGNED) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()",
            )
            .fetch_all(pool)
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .map(|r| r.get(0))
            .collect();
            for id in ids {
                let _ = sqlx::query(&format!("KILL CONNECTION {id}"))
                    .execute(pool)
                    .await;
            }
        }
        (Scenario::Restart, Backend::PgExtension | Backend::PgPortable) => {
            let cmd = std::env::var("SETTLE_TEST_PGCTL")
                .map_err(|_| "SETTLE_TEST_PGCTL not set".to_string())?;
            for mode in ["fast", "immediate"] {
                let st = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("{cmd} {mode}"))
                    .status();
                if !st.map(|s| s.success()).unwrap_or(false) {
                    return Err(format!("restart ({mode}) failed"));
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A case whose workers run in this process: `handlers` at once over up to
/// four clients, until the queue is empty.
pub async fn case(
    b: Backend,
    form: Form,
    scenario: Scenario,
    jobs: usize,
    handlers: usize,
) -> Line {
    let jobs = jobs_of(scenario, jobs);
    let started = Instant::now();
    let faulty = matches!(scenario, Scenario::KillConnections | Scenario::Restart);
    let keyed = scenario.is_keyed();
    let pool = admin(b).await;
    let t = queue_table(b, &pool, scenario, jobs).await;
    let form = match form {
        Form::Lease { .. } if faulty => Form::Lease {
            ttl: Duration::from_secs(2),
        },
        f => f,
    };
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let clients = 4.min(handlers.max(1));
    let per = (handlers / clients).max(1);
    let mut workers = Vec::new();
    let mut stops = Vec::new();
    for _ in 0..clients {
        let q = Queue::new(&t, &t)
            .form(form)
            .dead_letter(3, format!("{t}_dead"));
        let c = match b.client(q).await {
            Ok(c) => c,
            Err(e) => {
                return Line {
                    scenario,
                    backend: b,
                    form,
                    jobs,
                    lost: jobs as i64,
                    twice: 0,
                    overlaps: 0,
                    errors: 1,
                    lease_lost: 0,
                    left: jobs,
                    secs: 0.0,
                    pass: false,
                    note: format!("connect: {e}"),
                }
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stops.push(tx);
        let tally = tally.clone();
        let opts = WorkerOptions {
            concurrency: per,
            // row_lock: one row per transaction, so each settle is its own commit
            batch: if form == Form::RowLock { 1 } else { 8 },
            // (KeyedBacklog: the rows in front go one key at a time; a claim
            // that found none of them free waits this long)
            poll_interval: Duration::from_millis(if scenario == Scenario::KeyedBacklog {
                5
            } else {
                20
            }),
            ..Default::default()
        };
        workers.push(tokio::spawn(async move {
            c.run(
                opts,
                async {
                    let _ = rx.await;
                },
                move |d| {
                    let tally = tally.clone();
                    async move {
                        let id = d.id().to_owned();
                        {
                            let mut t = tally.lock().unwrap();
                            t.handled += 1;
                            if !t.running.insert(id.clone()) {
                                t.overlaps += 1;
                            }
                            if keyed {
                                let n: i64 = id.parse().expect("an integer id");
                                let k = key_of(scenario, n);
                                let busy = t.key_running.insert(k, n).is_some();
                                // (a retried row runs again: its own id is no breach)
                                let highest = t.key_last.entry(k).or_insert(n);
                                let before = *highest > n;
                                *highest = (*highest).max(n);
                                if busy || before {
                                    t.key_breaches += 1;
                                }
                            }
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        let outcome = match scenario {
                            Scenario::Mixed | Scenario::KeyedMixed => {
                                mixed_outcome(&id, d.attempt())
                            }
                            _ => Outcome::Ack,
                        };
                        {
                            // the handler's work is done; its hold lasts until the outcome commits
                            let mut t = tally.lock().unwrap();
                            t.running.remove(&id);
                            t.handled_ids.insert(id.clone());
                            // (the key stays held until the ack commits: no row of
                            // it can be claimed before this is recorded)
                            if keyed {
                                let n: i64 = id.parse().expect("an integer id");
                                t.key_running.remove(&key_of(scenario, n));
                            }
                        }
                        let r = d.settle(outcome).await;
                        let mut t = tally.lock().unwrap();
                        match &r {
                            Ok(Settled::Deleted | Settled::Marked) => {
                                *t.settled.entry(id).or_default() += 1
                            }
                            Ok(Settled::DeadLettered) => *t.dead.entry(id).or_default() += 1,
                            Ok(_) => {}
                            Err(Error::LeaseLost(_)) => t.lease_lost += 1,
                            Err(_) => t.errors += 1,
                        }
                        r
                    }
                },
            )
            .await
        }));
    }
    let mut note = String::new();
    let mut injected = 0;
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let done = {
            let t = tally.lock().unwrap();
            t.settled.len() + t.dead.len()
        };
        if faulty && injected < 2 && done * 10 >= jobs * (3 + 3 * injected) {
            if scenario == Scenario::Restart && injected == 1 {
                injected = 2;
                continue;
            }
            match inject(b, scenario, &pool).await {
                Ok(()) => injected += 1,
                Err(e) => {
                    note = format!("fault not injected: {e}");
                    injected = 2;
                }
            }
            continue;
        }
        match sqlx::query(&format!("SELECT count(*) FROM {}", b.dialect().ident(&t)))
            .fetch_one(&pool)
            .await
        {
            Ok(r) => {
                if r.get::<i64, _>(0) == 0 {
                    break;
                }
            }
            Err(_) => continue, // the server is restarting
        }
    }
    for s in stops {
        let _ = s.send(());
    }
    for w in workers {
        let _ = w.await;
    }
    let pool = admin(b).await;
    let (rows, dead_rows) = final_rows(b, &pool, &t).await;
    let t = tally.lock().unwrap();
    let dead_ids: HashSet<String> = dead_rows.iter().map(|(id, _)| id.to_string()).collect();
    let settled_ids: HashSet<&String> = t.settled.keys().collect();
    // lost: gone from the queue without its handler ever finishing (and not dead-lettered)
    let left_ids: HashSet<String> = rows.iter().map(|(id, ..)| id.to_string()).collect();
    let lost = (1..=jobs)
        .map(|i| i.to_string())
        .filter(|id| {
            !t.handled_ids.contains(id) && !dead_ids.contains(id) && !left_ids.contains(id)
        })
        .count() as i64;
    let twice = t.settled.values().filter(|n| **n > 1).count() as u64
        + t.dead.values().filter(|n| **n > 1).count() as u64
        + dead_ids.iter().filter(|d| settled_ids.contains(d)).count() as u64;
    if t.key_breaches > 0 {
        note = format!(
            "{} rows started while a row of their key ran or before a lower id of it",
            t.key_breaches
        );
    }
    let pass = lost == 0
        && twice == 0
        && rows.is_empty()
        && (faulty || t.overlaps == 0)
        && note.is_empty();
    if faulty && t.overlaps > 0 {
        note = format!("{} concurrent runs after a connection loss (the handler did not know its hold was gone)", t.overlaps);
    }
    Line {
        scenario,
        backend: b,
        form,
        jobs,
        lost,
        twice,
        overlaps: t.overlaps,
        errors: t.errors,
        lease_lost: t.lease_lost,
        left: rows.len(),
        secs: started.elapsed().as_secs_f64(),
        pass,
        note,
    }
}
