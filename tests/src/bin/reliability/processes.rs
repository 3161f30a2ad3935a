//! The cases whose workers are processes of their own (`--child`): killed
//! with SIGKILL, or cut off the network.

use crate::report::{form_name, Line, Scenario};
use settle::{Form, Queue, WorkerOptions};
use settle_conformance::{admin, final_rows, table, Backend};
use sqlx::Row;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// per-process counter for the nonces of settle records
static NONCE: AtomicU64 = AtomicU64::new(0);

/// Child mode (`--child BACKEND FORM TABLE WORKER`): a worker process that
/// records each handled job in `<table>_handled` before settling and each
/// settled one in `<table>_settled` after (with its WORKER number), and runs
/// until the queue is empty or it is killed.
pub async fn child(b: Backend, form: Form, t: String, w: i64) {
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

/// Whether this run can cut a worker off the network (scripts/test.sh made a namespace).
pub fn can_cut_network() -> bool {
    net_cut().is_some()
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
pub async fn process_case(b: Backend, form: Form, scenario: Scenario, jobs: usize) -> Line {
    let started = Instant::now();
    let d = b.dialect();
    let pool = admin(b).await;
    let t = table(b, &pool, "kp", jobs).await;
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
    while count(settled_sql.clone()).await * 3 < jobs as i64 {
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
    let lost = (1..=jobs as i64)
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
        jobs,
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
