//! The routing overhead of Citus: one grouped queue table (4 groups, keyed by
//! (queue, id)) worked through the extension's SQL functions on plain
//! PostgreSQL (`--conn`) and distributed by its group over a Citus cluster,
//! through the coordinator (`--citus`), in the same run. Prints jobs/s and the
//! claim latency of both, their ratio, and how the claims spread over the
//! worker nodes.
//!
//!     cargo run --release -p settle-bench -- --conn "…plain…" --citus "…coordinator…" [--jobs N]

use crate::{connect, pct, Args};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

const GROUPS: usize = 4;

struct Run {
    jobs_per_s: f64,
    claim_ms: Vec<f64>,
    /// claims by group
    claims: HashMap<String, u64>,
}

/// A fresh grouped table with `jobs` rows spread over [`GROUPS`] groups, each
/// group registered as a queue; on Citus distributed by its group.
async fn setup(c: &Client, t: &str, form: &str, jobs: usize, citus: bool) -> Vec<String> {
    c.batch_execute(&format!(
        "DROP TABLE IF EXISTS {t}, {t}_dead;
         CREATE TABLE {t} (queue text NOT NULL, id bigint NOT NULL, payload jsonb, attempt int NOT NULL DEFAULT 0,
                           locked_until timestamptz, PRIMARY KEY (queue, id));
         CREATE TABLE {t}_dead (LIKE {t} INCLUDING ALL);"
    ))
    .await
    .unwrap();
    if citus {
        c.batch_execute(&format!(
            "SELECT create_distributed_table('{t}', 'queue');
             SELECT create_distributed_table('{t}_dead', 'queue', colocate_with => '{t}');"
        ))
        .await
        .unwrap();
    }
    let groups: Vec<String> = (0..GROUPS).map(|g| format!("{t}:{g}")).collect();
    for g in &groups {
        c.execute(
            "SELECT queue_register($1, $2::text::regclass, $3, 5, dead_letter_table => $4::text::regclass)",
            &[g, &t, &form, &format!("{t}_dead")],
        )
        .await
        .unwrap();
    }
    c.batch_execute(&format!(
        "INSERT INTO {t} (queue, id, payload) SELECT '{t}:' || (i % {GROUPS}), i, '{{}}' FROM generate_series(1, {jobs}) i;
         ANALYZE {t};"
    ))
    .await
    .unwrap();
    groups
}

/// `workers` connections, each claiming `batch` rows from the groups in turn
/// and acking them, until the table is empty.
async fn work(
    conn: &str,
    groups: &[String],
    form: &str,
    workers: usize,
    batch: i32,
    jobs: usize,
) -> Run {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (conn, groups, form) = (conn.to_owned(), groups.to_vec(), form.to_owned());
        tasks.push(tokio::spawn(async move {
            let c = connect(&conn).await;
            let claim = c
                .prepare("SELECT id, token FROM queue_claim($1, $2, CASE WHEN $3 THEN interval '30 s' END)")
                .await
                .unwrap();
            let ack = c
                .prepare("SELECT count(*) FROM queue_complete_many($1, $2, 'ack', tokens => $3)")
                .await
                .unwrap();
            let lease = form == "lease";
            let mut claim_ms = Vec::new();
            let mut claims: HashMap<String, u64> = HashMap::new();
            let mut empty_in_a_row = 0;
            let mut next = w % groups.len();
            while empty_in_a_row < groups.len() {
                let g = &groups[next];
                next = (next + 1) % groups.len();
                if !lease {
                    c.batch_execute("BEGIN").await.unwrap();
                }
                let t0 = Instant::now();
                let rows = c.query(&claim, &[g, &batch, &lease]).await.unwrap();
                claim_ms.push(t0.elapsed().as_secs_f64() * 1e3);
                if rows.is_empty() {
                    empty_in_a_row += 1;
                    if !lease {
                        c.batch_execute("COMMIT").await.unwrap();
                    }
                    continue;
                }
                empty_in_a_row = 0;
                *claims.entry(g.clone()).or_default() += 1;
                let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                let tokens: Option<Vec<Option<std::time::SystemTime>>> =
                    lease.then(|| rows.iter().map(|r| r.get(1)).collect());
                c.query_one(&ack, &[g, &ids, &tokens]).await.unwrap();
                if !lease {
                    c.batch_execute("COMMIT").await.unwrap();
                }
            }
            (claim_ms, claims)
        }));
    }
    let mut run = Run {
        jobs_per_s: 0.0,
        claim_ms: Vec::new(),
        claims: HashMap::new(),
    };
    for t in tasks {
        let (ms, claims) = t.await.unwrap();
        run.claim_ms.extend(ms);
        for (g, n) in claims {
            *run.claims.entry(g).or_default() += n;
        }
    }
    run.jobs_per_s = jobs as f64 / started.elapsed().as_secs_f64();
    run
}

/// The worker node (host:port) holding each group's shard.
async fn nodes(c: &Client, t: &str, groups: &[String]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for g in groups {
        let r = c
            .query_one(
                "SELECT n.nodename || ':' || n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) \
                 JOIN pg_dist_node n USING (groupid) \
                 WHERE s.shardid = get_shard_id_for_distribution_column($1::text::regclass, $2::text)",
                &[&t, g],
            )
            .await
            .unwrap();
        m.insert(g.clone(), r.get::<_, String>(0));
    }
    m
}

pub async fn compare(a: &Args, citus: &str) {
    let plain = connect(&a.conn).await;
    let coord = connect(citus).await;
    for (name, c) in [("plain", &plain), ("citus", &coord)] {
        let v: String = c.query_one("SELECT version()", &[]).await.unwrap().get(0);
        println!("{name}: {v}");
    }
    let workers = 4;
    println!(
        "grouped table, {GROUPS} groups, {} jobs per case, {workers} connections claiming the groups in turn, ack",
        a.jobs
    );
    println!(
        "{:<8} {:>5} {:>12} {:>12} {:>7} {:>14} {:>14} {:>7}  claims per worker node (citus)",
        "form",
        "batch",
        "plain jobs/s",
        "citus jobs/s",
        "ratio",
        "plain claim p50",
        "citus claim p50",
        "ratio"
    );
    for form in ["lease", "row_lock"] {
        for batch in [1, 10] {
            let t = format!("bench_grouped_{}", form);
            let mut runs = Vec::new();
            for (c, conn, on_citus) in [(&plain, a.conn.as_str(), false), (&coord, citus, true)] {
                let groups = setup(c, &t, form, a.jobs, on_citus).await;
                let run = work(conn, &groups, form, workers, batch, a.jobs).await;
                let spread = if on_citus {
                    let at = nodes(c, &t, &groups).await;
                    let mut by_node: HashMap<String, u64> = HashMap::new();
                    for (g, n) in &run.claims {
                        *by_node.entry(at[g].clone()).or_default() += n;
                    }
                    let mut v: Vec<_> = by_node.into_iter().collect();
                    v.sort();
                    v.iter()
                        .map(|(n, c)| format!("{n} {c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    String::new()
                };
                runs.push((run, spread));
                c.batch_execute(&format!("SELECT queue_unregister(q) FROM unnest(ARRAY(SELECT queue FROM settle_queues WHERE tbl = '{t}'::regclass)) q; DROP TABLE {t}, {t}_dead"))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let (mut p, mut c) = (runs.remove(0), runs.remove(0));
            let (p50p, p50c) = (pct(&mut p.0.claim_ms, 0.5), pct(&mut c.0.claim_ms, 0.5));
            println!(
                "{:<8} {:>5} {:>12.0} {:>12.0} {:>7.2} {:>12.2}ms {:>12.2}ms {:>7.2}  {}",
                form,
                batch,
                p.0.jobs_per_s,
                c.0.jobs_per_s,
                c.0.jobs_per_s / p.0.jobs_per_s,
                p50p,
                p50c,
                p50c / p50p,
                c.1
            );
        }
    }
}
