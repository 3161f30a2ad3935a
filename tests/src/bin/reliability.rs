//! settle-reliability: load, mixed outcomes and faults on every backend × form.
//!
//!     SETTLE_RELIABILITY_JOBS=100000 scripts/test.sh
//!
//! Needs the same servers and environment as the conformance suite, which
//! `scripts/test.sh` starts (it runs `--jobs 600` by default). Restarting the
//! PostgreSQL server additionally needs SETTLE_TEST_PGCTL (a command that
//! restarts it, given `fast` or `immediate`), and the network cut a namespace
//! (SETTLE_TEST_NETNS, _NET_HOST, _NET_LINK); without them those faults are skipped.
//! `--backends PgExtension,MariaDb` limits the run to those backends.
//!
//! For every case it prints: scenario, backend, form, jobs, lost, settled twice,
//! concurrent runs of one row, settle errors, seconds — and closes with
//! `reliability: N passed, M failed`. A case passes with 0 lost, 0 settled twice,
//! nothing left in the queue, and (without faults) no two handlers running the
//! same row at once.

use settle::{Error, Form, Outcome, Queue, Settled, WorkerOptions};
use settle_conformance::{admin, final_rows, mixed_outcome, table, Backend, BACKENDS};
use sqlx::Row;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// per-process counter for the nonces of settle records
static NONCE: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// every job acked
    Load,
    /// random ack / drop / retry / retry_after / dead letter
    Mixed,
    /// every job acked, rows of 16 ordering keys: one row of a key at a
    /// time, each key's rows in id order
    KeyedLoad,
    /// every worker connection terminated twice mid-run
    KillConnections,
    /// the PostgreSQL server restarted (fast, then immediate) mid-run
    Restart,
    /// the worker process killed with SIGKILL mid-run, then a new one started
    KillProcess,
    /// one worker process cut off the network (its link down) mid-run while another
    /// works on; the link comes back after the server has dropped its connections
    NetCut,
}

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
    /// KeyedLoad: the row of each key whose handler is running
    key_running: HashMap<i64, i64>,
    /// KeyedLoad: the last row of each key a handler started
    key_last: HashMap<i64, i64>,
    /// KeyedLoad: rows started while a row of their key ran, or before a lower id of their key
    key_breaches: u64,
}

/// KeyedLoad's keys: a row's key is its id modulo this.
const KEYS: i64 = 16;

struct Args {
    jobs: usize,
    workers: usize,
    faults: bool,
    /// only these backends (`--backends PgExtension,MariaDb`), or all
    backends: Option<Vec<String>>,
}

fn backend_named(n: &str) -> Backend {
    BACKENDS
        .into_iter()
        .find(|b| format!("{b:?}") == n)
        .expect("a backend name")
}

fn form_named(n: &str) -> Form {
    match n {
        "row_lock" => Form::RowLock,
        "lease" => Form::Lease {
            ttl: Duration::from_secs(2),
        },
        _ => Form::Advisory,
    }
}

fn form_name(f: Form) -> &'static str {
    match f {
        Form::RowLock => "row_lock",
        Form::Lease { .. } => "lease",
        Form::Advisory => "advisory",
    }
}

/// Child mode (`--child BACKEND FORM TABLE WORKER`): a worker process that
/// records each handled job in `<table>_handled` before settling and each
/// settled one in `<table>_settled` after (with its WORKER number), and runs
/// until the queue is empty or it is killed.
async fn child(b: Backend, form: Form, t: String, w: i64) {
    let d = b.dialect();
    let pool = admin(b).await;
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(form)
                .dead_letter(3, format!("{t}_dead")),
        )
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watch_pool = pool.clone();
    let count_sql = format!("SELECT count(*) FROM {}", d.ident(&t));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Ok(r) = sqlx::query(&count_sql).fetch_one(&watch_pool).await {
                if r.get::<i64, _>(0) == 0 {
                    let _ = tx.send(());
                    return;
                }
            }
        }
    });
    let handled = format!(
        "INSERT INTO {} (id, w) VALUES ({}, {w})",
        d.ident(&format!("{t}_handled")),
        d.p(1)
    );
    // each settle is recorded once under its own nonce: an insert whose commit
    // got through while its reply was lost (a network cut) is not counted twice
    let settled = format!(
        "INSERT INTO {} (id, w, nonce) VALUES ({}, {w}, {})",
        d.ident(&format!("{t}_settled")),
        d.p(1),
        d.p(2)
    );
    let recorded = format!(
        "SELECT count(*) FROM {} WHERE nonce = {}",
        d.ident(&format!("{t}_settled")),
        d.p(1)
    );
    let opts = WorkerOptions {
        concurrency: 4,
        batch: if form == Form::RowLock { 1 } else { 4 },
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let _ = c
        .run(
            opts,
            async {
                let _ = rx.await;
            },
            move |dl| {
                let (pool, handled, settled, recorded) = (
                    pool.clone(),
                    handled.clone(),
                    settled.clone(),
                    recorded.clone(),
                );
                async move {
                    let mut dl = dl;
                    let id: i64 = dl.id().parse().unwrap_or(0);
                    if form == Form::RowLock {
                        // row_lock: the handler's write belongs in the claim transaction (on
                        // SQLite the claim holds the whole database, so another connection waits)
                        if b == Backend::PgExtension {
                            let tx = dl.transaction().await?;
                            tx.execute(handled.as_str(), &[&id])
                                .await
                                .map_err(settle::Error::from)?;
                        } else {
                            let conn = dl.any_transaction().await?;
                            sqlx::query(&handled)
                                .bind(id)
                                .execute(conn)
                                .await
                                .map_err(settle::Error::from)?;
                        }
                    } else {
                        // not recorded, not settled: the delivery goes back
                        sqlx::query(&handled)
                            .bind(id)
                            .execute(&pool)
                            .await
                            .map_err(settle::Error::from)?;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let r = dl.ack().await;
                    if r.is_ok() {
                        // retried until recorded: a settle must never go uncounted
                        let nonce = format!("{w}:{id}:{}", NONCE.fetch_add(1, Ordering::Relaxed));
                        loop {
                            if sqlx::query(&settled)
                                .bind(id)
                                .bind(&nonce)
                                .execute(&pool)
                                .await
                                .is_ok()
                            {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            let seen = sqlx::query(&recorded).bind(&nonce).fetch_one(&pool).await;
                            if seen.map(|r| r.get::<i64, _>(0) > 0).unwrap_or(false) {
                                break;
                            }
                        }
                    }
                    r
                }
            },
        )
        .await;
}

/// How the network-partition case reaches the server and cuts it off
/// (set by scripts/test.sh when it can make a network namespace).
struct NetCut {
    /// `ip netns exec <ns>` prefix for the cut-off worker
    netns: String,
    /// env overrides pointing the cut-off worker at the server over the veth link
    env: Vec<(String, String)>,
    /// shell commands taking the link down and up
    down: String,
    up: String,
}

fn net_cut() -> Option<NetCut> {
    let netns = std::env::var("SETTLE_TEST_NETNS").ok()?;
    let host = std::env::var("SETTLE_TEST_NET_HOST").ok()?;
    let link = std::env::var("SETTLE_TEST_NET_LINK").ok()?;
    let port = std::env::var("PGPORT").unwrap_or_else(|_| "25432".into());
    let my_port = std::env::var("SETTLE_MARIADB_PORT").unwrap_or_else(|_| "25452".into());
    let env = vec![
        (
            "SETTLE_TEST_MYSQL_URL".into(),
            format!("mysql://root@{host}:{my_port}/settle"),
        ),
        (
            "SETTLE_TEST_PG".into(),
            format!("host={host} port={port} user=postgres dbname=settle_client"),
        ),
        (
            "SETTLE_TEST_PG_EXT_URL".into(),
            format!("postgres://postgres@{host}:{port}/settle_client"),
        ),
        (
            "SETTLE_TEST_PG_URL".into(),
            format!("postgres://postgres@{host}:{port}/settle_portable"),
        ),
    ];
    Some(NetCut {
        netns,
        env,
        down: format!("ip link set {link} down"),
        up: format!("ip link set {link} up"),
    })
}

fn sh(cmd: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The cases with worker processes (`--child`), which record what they handled
/// and settled in tables, so the accounting survives their death:
/// - KillProcess: one worker process is killed with SIGKILL once a third of the
///   jobs are settled; a second one finishes the queue.
/// - NetCut: two worker processes, one of them in a network namespace reaching
///   the server over a veth link; once a third of the jobs are settled the link
///   goes down for 8 s (the server's TCP timeouts drop that worker's connections,
///   so its row locks, advisory keys roll back; its leases expire) and comes back.
async fn process_case(b: Backend, form: Form, scenario: Scenario, a: &Args) -> Line {
    let started = Instant::now();
    let d = b.dialect();
    let pool = admin(b).await;
    let t = table(b, &pool, "kp", a.jobs).await;
    for side in ["handled", "settled"] {
        sqlx::query(&format!(
            "CREATE TABLE {} (id BIGINT NOT NULL, w INT NOT NULL, nonce VARCHAR(64))",
            d.ident(&format!("{t}_{side}"))
        ))
        .execute(&pool)
        .await
        .unwrap();
    }
    let cut = if scenario == Scenario::NetCut {
        net_cut()
    } else {
        None
    };
    let spawn = |w: i64| {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match (&cut, w) {
            (Some(c), 1) => {
                let mut cmd = std::process::Command::new("ip");
                cmd.args(["netns", "exec", &c.netns]).arg(exe);
                cmd.envs(c.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                cmd
            }
            _ => std::process::Command::new(exe),
        };
        cmd.args([
            "--child",
            &format!("{b:?}"),
            form_name(form),
            &t,
            &w.to_string(),
        ])
        .env("SETTLE_TEST_SQLITE_URL", settle_conformance::sqlite_url())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn a worker process")
    };
    let count = |sql: String| {
        let pool = pool.clone();
        async move {
            sqlx::query(&sql)
                .fetch_one(&pool)
                .await
                .map(|r| r.get::<i64, _>(0))
                .unwrap_or(-1)
        }
    };
    let settled_tbl = d.ident(&format!("{t}_settled"));
    let settled_sql = format!("SELECT count(*) FROM {settled_tbl}");
    let left_sql = format!("SELECT count(*) FROM {}", d.ident(&t));
    let deadline = Instant::now() + Duration::from_secs(180);
    // why the case failed (the first reason), apart from the counts
    let mut failure: Option<String> = None;
    let mut first = spawn(1);
    let mut second = (scenario == Scenario::NetCut).then(|| spawn(2));
    while count(settled_sql.clone()).await * 3 < a.jobs as i64 {
        if Instant::now() > deadline {
            failure.get_or_insert("the workers made no progress".into());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut cut_before = 0;
    match scenario {
        Scenario::NetCut => {
            let c = cut
                .as_ref()
                .expect("NetCut runs only with a network namespace");
            cut_before = count(format!("SELECT count(*) FROM {settled_tbl} WHERE w = 1")).await;
            if !sh(&c.down) {
                failure.get_or_insert("could not take the link down".into());
            }
            tokio::time::sleep(Duration::from_secs(8)).await;
            if !sh(&c.up) {
                failure.get_or_insert("could not bring the link up".into());
            }
        }
        _ => {
            first.kill().expect("SIGKILL the worker process"); // SIGKILL on Unix
            let _ = first.wait();
            first = spawn(2);
        }
    }
    while count(left_sql.clone()).await != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if count(left_sql.clone()).await != 0 {
        failure.get_or_insert("the queue was not emptied in time".into());
    }
    // the children stop by themselves once the queue is empty and their records are written
    for child in std::iter::once(&mut first).chain(second.as_mut()) {
        let until = Instant::now() + Duration::from_secs(20);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let (rows, dead_rows) = final_rows(b, &pool, &t).await;
    let ids = |side: &str| {
        let pool = pool.clone();
        let sql = format!(
            "SELECT {}, {} FROM {}",
            d.int("id"),
            d.int("w"),
            d.ident(&format!("{t}_{side}"))
        );
        async move {
            sqlx::query(&sql)
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
                .collect::<Vec<(i64, i64)>>()
        }
    };
    let handled_rows = ids("handled").await;
    let handled: HashSet<i64> = handled_rows.iter().map(|(id, _)| *id).collect();
    let settled = ids("settled").await;
    let mut per: HashMap<i64, u32> = HashMap::new();
    for (id, _) in &settled {
        *per.entry(*id).or_default() += 1;
    }
    let dead: HashSet<i64> = dead_rows.iter().map(|(id, _)| *id).collect();
    let left: HashSet<i64> = rows.iter().map(|(id, ..)| *id).collect();
    let lost = (1..=a.jobs as i64)
        .filter(|i| !handled.contains(i) && !dead.contains(i) && !left.contains(i))
        .count() as i64;
    let twice = per.values().filter(|n| **n > 1).count() as u64;
    let unrecorded = (handled.len() as i64 - per.len() as i64).max(0);
    let handled_twice = handled_rows.len() - handled.len();
    let mut note = String::new();
    if scenario == Scenario::NetCut {
        let cut_after = settled.iter().filter(|(_, w)| *w == 1).count() as i64 - cut_before;
        note = format!(
            "cut-off worker settled {cut_before} before the cut, {cut_after} after; \
             {handled_twice} handled again by the other"
        );
        if cut_before == 0 {
            failure.get_or_insert(format!(
                "the cut-off worker settled nothing before the cut ({note})"
            ));
        }
    } else if unrecorded > 0 {
        note = format!(
            "{unrecorded} handled without a recorded settle (in flight in the killed process)"
        );
    }
    let pass = lost == 0 && twice == 0 && rows.is_empty() && failure.is_none();
    let note = failure.unwrap_or(note);
    Line {
        scenario,
        backend: b,
        form,
        jobs: a.jobs,
        lost,
        twice,
        overlaps: handled_twice as u64,
        errors: 0,
        lease_lost: 0,
        left: rows.len(),
        secs: started.elapsed().as_secs_f64(),
        pass,
        note,
    }
}

fn args() -> Args {
    let mut a = Args {
        jobs: 1500,
        workers: 16,
        faults: true,
        backends: None,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        match v[i].as_str() {
            "--jobs" => {
                a.jobs = v[i + 1].parse().expect("--jobs N");
                i += 1;
            }
            "--workers" => {
                a.workers = v[i + 1].parse().expect("--workers N");
                i += 1;
            }
            "--no-faults" => a.faults = false,
            "--backends" => {
                a.backends = Some(v[i + 1].split(',').map(str::to_owned).collect());
                i += 1;
            }
            other => panic!(
                "unknown argument {other}: use --jobs N, --workers N, --no-faults, --backends A,B"
            ),
        }
        i += 1;
    }
    a
}

/// The outcome a mixed-run handler picks for a job (deterministic per id and attempt).
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

struct Line {
    scenario: Scenario,
    backend: Backend,
    form: Form,
    jobs: usize,
    lost: i64,
    twice: u64,
    overlaps: u64,
    errors: u64,
    lease_lost: u64,
    left: usize,
    secs: f64,
    pass: bool,
    note: String,
}

async fn case(b: Backend, form: Form, scenario: Scenario, a: &Args) -> Line {
    let started = Instant::now();
    let faulty = matches!(scenario, Scenario::KillConnections | Scenario::Restart);
    let pool = admin(b).await;
    let t = table(b, &pool, "rel", a.jobs).await;
    if scenario == Scenario::KeyedLoad {
        let q = b.dialect().ident(&t);
        for sql in [
            format!("ALTER TABLE {q} ADD COLUMN ordering_key bigint"),
            // a dead-letter table has every column of its queue's
            format!(
                "ALTER TABLE {} ADD COLUMN ordering_key bigint",
                b.dialect().ident(&format!("{t}_dead"))
            ),
            format!("UPDATE {q} SET ordering_key = id % {KEYS}"),
            format!(
                "CREATE INDEX {} ON {q} (ordering_key, id)",
                b.dialect().ident(&format!("{t}_key"))
            ),
        ] {
            sqlx::query(&sql)
                .execute(&pool)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    let form = match form {
        Form::Lease { .. } if faulty => Form::Lease {
            ttl: Duration::from_secs(2),
        },
        f => f,
    };
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let clients = 4.min(a.workers.max(1));
    let per = (a.workers / clients).max(1);
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
                    jobs: a.jobs,
                    lost: a.jobs as i64,
                    twice: 0,
                    overlaps: 0,
                    errors: 1,
                    lease_lost: 0,
                    left: a.jobs,
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
            poll_interval: Duration::from_millis(20),
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
                            if scenario == Scenario::KeyedLoad {
                                let n: i64 = id.parse().expect("an integer id");
                                let k = n % KEYS;
                                let busy = t.key_running.insert(k, n).is_some();
                                let before = t.key_last.insert(k, n).is_some_and(|l| l >= n);
                                if busy || before {
                                    t.key_breaches += 1;
                                }
                            }
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        let outcome = match scenario {
                            Scenario::Mixed => mixed_outcome(&id, d.attempt()),
                            _ => Outcome::Ack,
                        };
                        {
                            // the handler's work is done; its hold lasts until the outcome commits
                            let mut t = tally.lock().unwrap();
                            t.running.remove(&id);
                            t.handled_ids.insert(id.clone());
                            // (the key stays held until the ack commits: no row of
                            // it can be claimed before this is recorded)
                            if scenario == Scenario::KeyedLoad {
                                let n: i64 = id.parse().expect("an integer id");
                                t.key_running.remove(&(n % KEYS));
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
        if faulty && injected < 2 && done * 10 >= a.jobs * (3 + 3 * injected) {
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
    let lost = (1..=a.jobs)
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
        jobs: a.jobs,
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

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--child") {
        child(
            backend_named(&argv[2]),
            form_named(&argv[3]),
            argv[4].clone(),
            argv[5].parse().expect("a worker number"),
        )
        .await;
        return;
    }
    let a = args();
    let mut lines = Vec::new();
    let mut scenarios = vec![Scenario::Load, Scenario::Mixed, Scenario::KeyedLoad];
    if a.faults {
        scenarios.push(Scenario::KillConnections);
        scenarios.push(Scenario::KillProcess);
        if std::env::var("SETTLE_TEST_PGCTL").is_ok() {
            scenarios.push(Scenario::Restart);
        }
        if net_cut().is_some() {
            scenarios.push(Scenario::NetCut);
        }
    }
    println!(
        "{:<16} {:<12} {:<9} {:>7} {:>5} {:>6} {:>8} {:>7} {:>10} {:>5} {:>7}  result",
        "scenario",
        "backend",
        "form",
        "jobs",
        "lost",
        "twice",
        "overlaps",
        "errors",
        "lease_lost",
        "left",
        "secs"
    );
    for scenario in scenarios {
        for b in BACKENDS {
            let faults_apply = match scenario {
                Scenario::KillConnections => b != Backend::Sqlite, // no connections to kill
                Scenario::Restart => matches!(b, Backend::PgExtension | Backend::PgPortable),
                // over TCP from the namespace: not SQLite (a file)
                Scenario::NetCut => b != Backend::Sqlite,
                _ => true,
            };
            if !faults_apply {
                continue;
            }
            if let Some(only) = &a.backends {
                if !only.iter().any(|n| *n == format!("{b:?}")) {
                    continue;
                }
            }
            for (form, refused) in b.forms() {
                if refused.is_some() {
                    continue;
                }
                let l = if matches!(scenario, Scenario::KillProcess | Scenario::NetCut) {
                    process_case(b, form, scenario, &a).await
                } else {
                    case(b, form, scenario, &a).await
                };
                let form_name = match l.form {
                    Form::RowLock => "row_lock",
                    Form::Lease { .. } => "lease",
                    Form::Advisory => "advisory",
                };
                println!(
                    "{:<16} {:<12} {:<9} {:>7} {:>5} {:>6} {:>8} {:>7} {:>10} {:>5} {:>7.1}  {}{}",
                    format!("{:?}", l.scenario),
                    format!("{:?}", l.backend),
                    form_name,
                    l.jobs,
                    l.lost,
                    l.twice,
                    l.overlaps,
                    l.errors,
                    l.lease_lost,
                    l.left,
                    l.secs,
                    if l.pass { "ok" } else { "FAILED" },
                    if l.note.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", l.note)
                    }
                );
                lines.push(l);
            }
        }
    }
    let passed = lines.iter().filter(|l| l.pass).count();
    let failed = lines.len() - passed;
    println!("reliability: {passed} passed, {failed} failed");
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
