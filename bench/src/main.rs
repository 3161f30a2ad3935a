//! settle-bench: each claim form through the extension beside the best
//! hand-written SQL for the same work ("floor"), on the same server in the same
//! run, plus the Rust client beside a raw tokio-postgres loop of its statements.
//!
//!     cargo run --release -p settle-bench -- --conn "host=/run/postgresql dbname=bench user=postgres"
//!     cargo run --release -p settle-bench -- --quick      # seconds; the test command runs this
//!
//! The database needs the extension (`CREATE EXTENSION settle`); `--sql-edition
//! CONN` adds the SQL edition (a database of the same server where it is
//! installed) beside it in every form. Each case
//! enqueues a backlog, runs W connections claiming B rows at a time and acking
//! them, and reports jobs/s, p50/p99 claim→settled latency, and CPU seconds per
//! 1000 jobs of the server (its processes in /proc) and of this process. Results
//! go to stdout, `results/bench.csv` and `results/bench.svg`.

mod args;
mod citus;
mod client;
mod cpu;
mod loops;
mod portable;
mod portable_horizon;
mod portable_keyed;
mod pressure;
mod scaling;
mod worker;

use args::{args, Args};
use cpu::{find_postmaster, own_cpu, server_cpu};
use loops::run_workers;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    RowLock,
    Lease,
    Advisory,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::RowLock => "row_lock",
            Form::Lease => "lease",
            Form::Advisory => "advisory",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    /// the extension's SQL functions
    Settle,
    /// hand-written SQL for the same work
    Floor,
    /// the Rust client (lease form) over the extension
    Client,
    /// a raw tokio-postgres loop sending the client's statements: the client's CPU yardstick
    Raw,
    /// pgmq (its SQL, installed by bench/peers.sh into its own database):
    /// `pgmq.read` with a visibility timeout + `pgmq.delete`, the lease form's peer
    Pgmq,
    /// the SQL edition (`--sql-edition`, a database with it installed on the
    /// same server): the same SQL functions in PL/pgSQL
    SqlEdition,
    /// Graphile Worker 0.17 in Node (bench/graphile.cjs), its own database
    Graphile,
    /// awa 0.6 (bench/awa, built by bench/peers.sh), its own database
    Awa,
    /// the Rust client's worker (`--worker`), each settle claiming the next
    Worker,
    /// the same worker with `WorkerOptions::chain` off
    WorkerUnchained,
}

async fn connect(conn: &str) -> Client {
    let (c, connection) = tokio_postgres::connect(conn, NoTls).await.expect("connect");
    tokio::spawn(connection);
    c
}

struct Result_ {
    imp: Impl,
    form: Form,
    workers: usize,
    batch: usize,
    jobs: usize,
    secs: f64,
    p50_ms: f64,
    p99_ms: f64,
    server_cpu_per_k: f64,
    client_cpu_per_k: f64,
}

impl Result_ {
    fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs
    }
}

/// `ALTER TABLE` for `--table-options` / `--pgmq-table-options`: `reset` gives
/// the table the server's defaults for what `queue_create` sets.
fn alter_table_sql(table: &str, options: &str) -> String {
    if options.trim().eq_ignore_ascii_case("reset") {
        format!(
            "ALTER TABLE {table} RESET (fillfactor, autovacuum_vacuum_scale_factor, \
             autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay)"
        )
    } else {
        format!("ALTER TABLE {table} SET ({options})")
    }
}

/// A fresh `queue_create` table of `jobs` rows, with the `--table-options` and
/// `--max-attempts` of `a`.
async fn prepare_table(admin: &Client, a: &Args, name: &str, form: Form, jobs: usize) {
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {name}, {name}_dead; SELECT queue_unregister('{name}');
             SELECT queue_create('{name}', '{}', {});
             DROP TRIGGER IF EXISTS settle_notify ON {name};",
            form.name(),
            a.max_attempts.map_or("NULL".to_owned(), |n| n.to_string())
        ))
        .await
        .expect("prepare table");
    if let Some(o) = a.table_options.as_deref() {
        // before the rows go in, so that a fillfactor applies to them
        admin
            .batch_execute(&alter_table_sql(name, o))
            .await
            .expect("--table-options");
    }
    admin
        .batch_execute(&format!(
            "INSERT INTO {name} (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, {jobs}) g"
        ))
        .await
        .expect("fill table");
    admin
        .batch_execute(&format!("VACUUM ANALYZE {name}"))
        .await
        .expect("vacuum");
}

/// pgmq's queue `bench` (in the `--pgmq` database), `jobs` messages, with the
/// `--pgmq-table-options` of `a`.
async fn prepare_pgmq(a: &Args, jobs: usize) {
    let peer = connect(a.pgmq.as_deref().expect("--pgmq")).await;
    peer.batch_execute(&format!(
        "SELECT pgmq.drop_queue('bench') FROM pgmq.list_queues() WHERE queue_name = 'bench';
         SELECT pgmq.create('bench');
         {}
         SELECT count(*) FROM pgmq.send_batch('bench', ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, {jobs}) g));",
        a.pgmq_table_options
            .as_deref()
            .map(|o| alter_table_sql("pgmq.q_bench", o) + ";")
            .unwrap_or_default(),
    ))
    .await
    .expect("prepare the pgmq queue (run bench/peers.sh first)");
    peer.batch_execute("VACUUM ANALYZE pgmq.q_bench")
        .await
        .expect("vacuum");
}

/// The run with the median rate (the lower middle of an even count).
fn median(runs: Vec<Result_>) -> Result_ {
    median_by(runs, Result_::rate)
}

/// The run with the median of `rate` (the lower middle of an even count).
fn median_by<T>(mut runs: Vec<T>, rate: impl Fn(&T) -> f64) -> T {
    runs.sort_by(|x, y| rate(x).total_cmp(&rate(y)));
    let mid = (runs.len() - 1) / 2;
    runs.swap_remove(mid)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A case's connections, kept open until the server's CPU has been read.
enum Open {
    Conns(#[allow(dead_code)] Vec<Client>),
    Client(#[allow(dead_code)] settle::Client),
}

/// Client backends on the server other than `admin`'s.
/// A case's queue of `jobs` rows: pgmq's in its own database, else the
/// `queue_create` table `q`. Returns the connection string its workers use.
async fn prepare_queue(
    a: &Args,
    admin: &Client,
    imp: Impl,
    form: Form,
    q: &str,
    jobs: usize,
) -> String {
    if imp == Impl::Pgmq {
        prepare_pgmq(a, jobs).await;
        a.pgmq.clone().expect("--pgmq")
    } else if imp == Impl::SqlEdition {
        let conn = a.sql_edition.clone().expect("--sql-edition");
        prepare_table(&connect(&conn).await, a, q, form, jobs).await;
        conn
    } else {
        prepare_table(admin, a, q, form, jobs).await;
        a.conn.clone()
    }
}

async fn other_backends(admin: &Client) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_activity")
        .get(0)
}

/// Wait (up to 5 s) until no more backends than `before` the case are left on
/// the server, so that one case's backends, exiting, are not counted in the
/// next case's CPU (other clients of a shared server are left out of it).
async fn backends_gone(admin: &Client, before: i64) {
    for _ in 0..500 {
        if other_backends(admin).await <= before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // the entry goes before the process has exited and been reaped
    tokio::time::sleep(Duration::from_millis(50)).await;
}

async fn case(
    a: &Args,
    admin: &Client,
    imp: Impl,
    form: Form,
    workers: usize,
    batch: usize,
) -> Result_ {
    let q = format!(
        "bench_{}_{}",
        form.name(),
        match imp {
            Impl::Settle => "settle",
            Impl::Floor => "floor",
            Impl::Client => "client",
            Impl::Raw => "raw",
            Impl::Pgmq => "pgmq",
            Impl::SqlEdition => "sqled",
            Impl::Graphile => "graphile",
            Impl::Awa => "awa",
            Impl::Worker => "worker",
            Impl::WorkerUnchained => "workeru",
        }
    );
    let before = other_backends(admin).await;
    if matches!(imp, Impl::Graphile | Impl::Awa) {
        let r = process_case(a, imp, workers, batch);
        backends_gone(admin, before).await;
        return r;
    }
    let conn = prepare_queue(a, admin, imp, form, &q, a.jobs).await;
    let mut conns = Vec::new();
    for _ in 0..workers {
        conns.push(connect(&conn).await);
    }
    let lat = Arc::new(Mutex::new(Vec::with_capacity(a.jobs)));
    let (s0, c0, t0) = (server_cpu(), own_cpu(), Instant::now());
    // connections stay open until the server's CPU is read (see run_workers)
    let (done, open) = if matches!(imp, Impl::Worker | Impl::WorkerUnchained) {
        drop(conns);
        let chain = imp == Impl::Worker;
        let (done, client) = worker::worker_run(a, &q, (workers, batch), chain, lat.clone()).await;
        (done, Open::Client(client))
    } else if imp == Impl::Client {
        drop(conns);
        let (done, client) = client::client_run(a, &q, workers, batch, lat.clone()).await;
        (done, Open::Client(client))
    } else if imp == Impl::Raw {
        let (done, conns) = client::raw_run(conns, &q, batch, lat.clone()).await;
        (done, Open::Conns(conns))
    } else {
        let (done, conns) =
            run_workers(conns, imp, form, &q, (batch, a.chain), lat.clone(), None).await;
        (done, Open::Conns(conns))
    };
    let secs = t0.elapsed().as_secs_f64();
    let (s1, c1) = (server_cpu(), own_cpu());
    drop(open);
    backends_gone(admin, before).await;
    assert_eq!(done, a.jobs, "{imp:?} {form:?}: every job settled once");
    let mut l = lat.lock().unwrap();
    let k = a.jobs as f64 / 1000.0;
    Result_ {
        imp,
        form,
        workers,
        batch,
        jobs: done,
        secs,
        p50_ms: pct(&mut l, 0.5),
        p99_ms: pct(&mut l, 0.99),
        server_cpu_per_k: (s1 - s0) / k,
        client_cpu_per_k: (c1 - c0) / k,
    }
}

/// A peer that runs as its own process — Graphile Worker through
/// bench/graphile.cjs in Node, awa through bench/awa's binary — prepared by one
/// run of it and timed by another, which prints a JSON line when its clock
/// stops (and may print more after, its own checks). The server's CPU is counted
/// from before the process starts (~0.1 s of start-up included) to that first
/// line; latency is not measured.
/// Host, port and user of a tokio-postgres connection string.
fn pg_parts(conn: &str) -> (String, String, String) {
    let cfg: tokio_postgres::Config = conn.parse().expect("--conn");
    let host = match cfg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        None => "localhost".into(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = cfg.get_user().unwrap_or("postgres").to_owned();
    (host, port, user)
}

/// The `--conn` database as a URL (sqlx, the portable path).
fn pg_url(conn: &str) -> String {
    let cfg: tokio_postgres::Config = conn.parse().expect("--conn");
    let (host, port, user) = pg_parts(conn);
    let db = cfg.get_dbname().unwrap_or(&user).to_owned();
    format!("postgres://{user}@localhost/{db}?host={host}&port={port}")
}

fn process_case(a: &Args, imp: Impl, workers: usize, batch: usize) -> Result_ {
    let (host, port, user) = pg_parts(&a.conn);
    // node graphile.cjs MODE HOST PORT USER DB ..., settle-bench-awa MODE URL ...
    let (program, lead, base, name): (String, Vec<String>, Vec<String>, &str) = match imp {
        Impl::Graphile => {
            let db = a.graphile.clone().expect("--graphile");
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/graphile.cjs").to_owned();
            (
                "node".into(),
                vec![script],
                vec![host, port, user, db],
                "graphile",
            )
        }
        Impl::Awa => {
            let db = a.awa.clone().expect("--awa");
            let bin = std::env::var("SETTLE_BENCH_AWA").unwrap_or_else(|_| {
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../target/peers/release/settle-bench-awa"
                )
                .to_owned()
            });
            let url = format!("postgres://{user}@localhost/{db}?host={host}&port={port}");
            (bin, vec![], vec![url], "awa")
        }
        _ => unreachable!("not a process peer"),
    };
    // the peer prints a JSON line as its clock stops, the server's CPU is read
    // then; later lines (its own checks) are merged in
    let run = |mode: &str, rest: &[String], s0: Option<f64>| {
        use std::io::BufRead;
        let args = [
            lead.clone(),
            vec![mode.to_owned()],
            base.clone(),
            rest.to_vec(),
        ]
        .concat();
        let mut child = std::process::Command::new(&program)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {program} (bench/peers.sh installs the peers): {e}"));
        // stderr drained on its own thread: a peer that writes more than a pipe
        // holds there would otherwise stall before it closes stdout
        let mut err = child.stderr.take().unwrap();
        let errs = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = std::io::Read::read_to_end(&mut err, &mut s);
            s
        });
        let mut v = serde_json::Map::new();
        let mut server = None;
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            if let (None, Some(s0)) = (server, s0) {
                server = Some(server_cpu() - s0);
            }
            if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(&line.unwrap()) {
                v.extend(o);
            }
        }
        let status = child.wait().expect("wait for the peer");
        let stderr = errs.join().unwrap_or_default();
        assert!(
            status.success(),
            "{name} {args:?}: {}",
            String::from_utf8_lossy(&stderr)
        );
        (serde_json::Value::Object(v), server.unwrap_or(f64::NAN))
    };
    let jobs = a.jobs.to_string();
    run("prepare", std::slice::from_ref(&jobs), None);
    let s0 = server_cpu();
    let (v, server) = run(
        "run",
        &[jobs, workers.to_string(), batch.to_string()],
        Some(s0),
    );
    let done = v["jobs"].as_u64().unwrap_or(0) as usize;
    assert_eq!(done, a.jobs, "{name}: every job run once");
    assert_eq!(v["left"].as_u64(), Some(0), "{name}: every job completed");
    if let Some(f) = v.get("failed") {
        assert_eq!(f.as_u64(), Some(0), "{name}: no job failed");
    }
    let k = a.jobs as f64 / 1000.0;
    Result_ {
        imp,
        form: Form::Lease,
        workers,
        batch,
        jobs: done,
        secs: v["secs"].as_f64().unwrap_or(f64::NAN),
        p50_ms: f64::NAN,
        p99_ms: f64::NAN,
        server_cpu_per_k: server / k,
        client_cpu_per_k: v["client_cpu"].as_f64().unwrap_or(f64::NAN) / k,
    }
}

fn svg(results: &[Result_]) -> String {
    let w = 60 + results.len() * 28;
    let max = results.iter().map(|r| r.rate()).fold(1.0, f64::max);
    let mut s = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='420' font-family='sans-serif' font-size='10'>\n");
    let _ = writeln!(s, "<text x='10' y='16' font-size='13'>jobs/s: settle (blue), its SQL edition (light blue), hand-written floor (grey), pgmq (orange), Graphile Worker (purple), awa (red), Rust client (green), raw driver loop (light green)</text>");
    for (i, r) in results.iter().enumerate() {
        let h = (r.rate() / max * 300.0).max(1.0);
        let x = 40 + i * 28;
        let color = match r.imp {
            Impl::Settle => "#3b6fd6",
            Impl::SqlEdition => "#7aa2ec",
            Impl::Floor => "#999999",
            Impl::Client | Impl::Worker | Impl::WorkerUnchained => "#3a9a4a",
            Impl::Raw => "#8fd19e",
            Impl::Pgmq => "#d67a3b",
            Impl::Graphile => "#9a3ad6",
            Impl::Awa => "#c0392b",
        };
        let _ = writeln!(
            s,
            "<rect x='{x}' y='{:.0}' width='20' height='{h:.0}' fill='{color}'/>",
            340.0 - h
        );
        let _ = writeln!(
            s,
            "<text x='{}' y='350' transform='rotate(60 {} 350)'>{} w{} b{}</text>",
            x + 4,
            x + 4,
            r.form.name(),
            r.workers,
            r.batch
        );
    }
    s.push_str("</svg>\n");
    s
}

fn main() {
    let rt = if std::env::var("SETTLE_BENCH_RUNTIME").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    rt.expect("tokio runtime").block_on(main_());
}

async fn main_() {
    let a = args();
    let admin = connect(&a.conn).await;
    find_postmaster(&admin).await;
    if !a.backlogs.is_empty() {
        scaling::scaling(&a, &admin).await;
        return;
    }
    if a.sustained > 0 {
        pressure::sustained(&a, &admin, a.sustained).await;
        return;
    }
    if !a.horizon.is_empty() && a.portable {
        portable_horizon::horizon(&a, &admin).await;
        return;
    }
    if !a.horizon.is_empty() {
        pressure::horizon(&a, &admin).await;
        return;
    }
    if let Some(n) = a.keyed_backlog {
        portable_keyed::keyed_backlog(&a, n).await;
        return;
    }
    if a.portable {
        portable::grid(&a, &admin).await;
        return;
    }
    if a.worker {
        worker::grid(&a, &admin).await;
        return;
    }
    if let Some(c) = &a.citus {
        citus::compare(&a, c).await;
        return;
    }
    let version: String = admin
        .query_one("SELECT version()", &[])
        .await
        .unwrap()
        .get(0);
    println!("server: {version}");
    println!(
        "cores: {}, jobs per case: {}, runs per case: {} (median shown)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        a.jobs,
        a.repeat
    );
    if a.table_options.is_some() || a.max_attempts.is_some() {
        println!(
            "queue tables: queue_create's{}{}",
            a.table_options
                .as_deref()
                .map(|o| format!(", then {o}"))
                .unwrap_or_default(),
            a.max_attempts
                .map(|n| format!(", max_attempts {n} with a dead-letter table"))
                .unwrap_or_default()
        );
    }
    let mut results = Vec::new();
    println!(
        "{:<8} {:<9} {:>3} {:>4} {:>9} {:>8} {:>8} {:>13} {:>13} {:>12}",
        "impl",
        "form",
        "W",
        "B",
        "jobs/s",
        "p50 ms",
        "p99 ms",
        "srv cpu s/1k",
        "cli cpu s/1k",
        "settle/floor"
    );
    if a.pgmq.is_none() || a.graphile.is_none() || a.awa.is_none() {
        println!("(peers: run bench/peers.sh and pass --pgmq / --graphile / --awa to compare with pgmq, Graphile Worker and awa)");
    }
    for &form in &a.forms {
        for &w in &a.workers {
            for &b in &a.batches {
                let peers: Vec<Impl> = [
                    (Impl::SqlEdition, a.sql_edition.is_some(), true),
                    (Impl::Pgmq, a.pgmq.is_some(), false),
                    (Impl::Graphile, a.graphile.is_some(), false),
                    (Impl::Awa, a.awa.is_some(), false),
                ]
                .into_iter()
                // the SQL edition runs every form; the other peers are lease-form queues
                .filter(|&(_, wanted, any_form)| wanted && (any_form || form == Form::Lease))
                .map(|(p, _, _)| p)
                .collect();
                let imps: Vec<Impl> = [Impl::Floor, Impl::Settle]
                    .into_iter()
                    .chain(peers.iter().copied())
                    .collect();
                // --repeat: rounds of every implementation in turn, so a slow
                // stretch of the machine hits them alike; the median run of each
                let mut runs: Vec<Vec<Result_>> = imps.iter().map(|_| Vec::new()).collect();
                for _ in 0..a.repeat {
                    for (i, &imp) in imps.iter().enumerate() {
                        runs[i].push(case(&a, &admin, imp, form, w, b).await);
                    }
                }
                let mut medians = runs.into_iter().map(median);
                let floor = medians.next().unwrap();
                let settle = medians.next().unwrap();
                for r in [&floor, &settle] {
                    println!(
                        "{:<8} {:<9} {:>3} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>13.3} {:>13.3} {:>12}",
                        format!("{:?}", r.imp).to_lowercase(),
                        r.form.name(),
                        r.workers,
                        r.batch,
                        r.rate(),
                        r.p50_ms,
                        r.p99_ms,
                        r.server_cpu_per_k,
                        r.client_cpu_per_k,
                        if r.imp == Impl::Settle {
                            format!("{:.2}", settle.rate() / floor.rate())
                        } else {
                            String::new()
                        }
                    );
                }
                for (peer, r) in peers.iter().zip(medians) {
                    let name = format!("{peer:?}").to_lowercase();
                    println!(
                        "{:<8} {:<9} {:>3} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>13.3} {:>13.3}   settle/{name} {:.2}",
                        name,
                        form.name(),
                        w,
                        b,
                        r.rate(),
                        r.p50_ms,
                        r.p99_ms,
                        r.server_cpu_per_k,
                        r.client_cpu_per_k,
                        settle.rate() / r.rate()
                    );
                    results.push(r);
                }
                results.push(floor);
                results.push(settle);
            }
        }
    }
    if a.client {
        client::cpu_rows(&a, &admin, &mut results).await;
    }
    let _ = std::fs::create_dir_all("results");
    let mut csv = String::from("impl,form,workers,batch,jobs,seconds,jobs_per_s,p50_ms,p99_ms,server_cpu_s_per_1k,client_cpu_s_per_1k\n");
    for r in &results {
        let _ = writeln!(
            csv,
            "{:?},{},{},{},{},{:.3},{:.0},{:.3},{:.3},{:.4},{:.4}",
            r.imp,
            r.form.name(),
            r.workers,
            r.batch,
            r.jobs,
            r.secs,
            r.rate(),
            r.p50_ms,
            r.p99_ms,
            r.server_cpu_per_k,
            r.client_cpu_per_k
        );
    }
    std::fs::write("results/bench.csv", csv).unwrap();
    std::fs::write("results/bench.svg", svg(&results)).unwrap();
    println!("wrote results/bench.csv and results/bench.svg");
}
