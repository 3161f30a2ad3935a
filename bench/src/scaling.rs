//! Claim latency and throughput against a large backlog (`--scaling`,
//! `--scaling-10m`), and the same over queues with the flow-control roles
//! (`--flow`, `--flow-10m`): a `priority` (ten values) and an `ordering_key`
//! (10,000 keys) beside the same queue without them.

use crate::loops::run_workers;
use crate::{connect, pct, prepare_table, Args, Form, Impl};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_postgres::Client;

/// Which flow-control roles a scaling queue has.
#[derive(Clone, Copy, PartialEq)]
enum Roles {
    None,
    /// `priority smallint`, 0..9 spread over the ids, `(priority, id)` index
    Priority,
    /// `ordering_key integer`, id mod 10,000, `(ordering_key, id)` index
    Key,
}

impl Roles {
    fn name(self) -> &'static str {
        match self {
            Roles::None => "-",
            Roles::Priority => "priority",
            Roles::Key => "key",
        }
    }
}

/// `name`'s queue table (`queue_create`'s) with `n` rows and `roles`' column
/// and index, registered again so that the roles are detected.
async fn fill(admin: &Client, a: &Args, name: &str, form: Form, n: usize, roles: Roles) {
    if roles == Roles::None {
        return prepare_table(admin, a, name, form, n).await;
    }
    prepare_table(admin, a, name, form, 0).await;
    let (col, value) = match roles {
        Roles::Priority => ("priority smallint", "(g * 7) % 10"),
        _ => ("ordering_key integer", "g % 10000"),
    };
    let role = col.split(' ').next().unwrap();
    admin
        .batch_execute(&format!(
            "ALTER TABLE {name} ADD COLUMN {col};
             INSERT INTO {name} (payload, {role}) SELECT jsonb_build_object('n', g), {value} FROM generate_series(1, {n}) g;
             CREATE INDEX ON {name} ({role}, id);
             SELECT queue_register('{name}', '{name}', '{}');",
            form.name()
        ))
        .await
        .expect("fill a queue with roles");
    admin
        .batch_execute(&format!("VACUUM ANALYZE {name}"))
        .await
        .expect("vacuum");
}

/// Claim latency and throughput against a large backlog: each form's queue is
/// filled with N rows, the generic plan of its claim statement is shown
/// (EXPLAIN ANALYZE, BUFFERS), then 5,000 jobs are claimed and acked at W=1,B=1
/// and 20,000 at W=4,B=100 from the front of the backlog.
pub(crate) async fn scaling(a: &Args, admin: &Client) {
    println!(
        "{:<10} {:<9} {:<9} {:>3} {:>4} {:>7} {:>9} {:>8} {:>8}",
        "backlog", "form", "roles", "W", "B", "jobs", "jobs/s", "p50 ms", "p99 ms"
    );
    let roles: &[Roles] = if a.flow {
        &[Roles::None, Roles::Priority, Roles::Key]
    } else {
        &[Roles::None]
    };
    let mut plans = String::new();
    for &n in &a.backlogs {
        for (&form, &roles) in a
            .forms
            .iter()
            .flat_map(|f| roles.iter().map(move |r| (f, r)))
        {
            let q = format!("scale_{}", form.name());
            let t = Instant::now();
            fill(admin, a, &q, form, n, roles).await;
            let filled = t.elapsed().as_secs_f64();
            let (stmt, types, args) = match form {
                // $2: the lease token, the lease's end
                Form::Lease => (
                    "claim",
                    "bigint, timestamptz",
                    "1, now() + interval '30 seconds'",
                ),
                Form::RowLock => ("claim", "bigint", "1"),
                Form::Advisory => ("claim_candidates", "bigint", "1"),
            };
            let sql: String = admin
                .query_one(
                    "SELECT sql FROM queue_sql($1) WHERE statement = $2",
                    &[&q, &stmt],
                )
                .await
                .expect("queue_sql")
                .get(0);
            admin
                .batch_execute(&format!(
                    "SET plan_cache_mode = force_generic_plan; PREPARE scale_p({types}) AS {sql}"
                ))
                .await
                .expect("prepare");
            let plan: Vec<String> = admin
                .query(
                    &format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE scale_p({args})"),
                    &[],
                )
                .await
                .expect("explain")
                .iter()
                .map(|r| r.get(0))
                .collect();
            admin
                .batch_execute(
                    "DEALLOCATE scale_p; RESET plan_cache_mode; SELECT pg_advisory_unlock_all()",
                )
                .await
                .unwrap();
            let _ = writeln!(
                plans,
                "\n-- {} claim, roles {}, backlog {n} (filled in {filled:.1} s), generic plan:\n{}",
                form.name(),
                roles.name(),
                plan.join("\n")
            );
            let cases: &[(usize, usize, usize)] = if a.flow {
                &[
                    (1, 1, 5_000),
                    (1, 100, 20_000),
                    (4, 1, 10_000),
                    (4, 100, 20_000),
                ]
            } else {
                &[(1, 1, 5_000), (4, 100, 20_000)]
            };
            for &(w, b, jobs) in cases {
                let jobs = jobs.min(n / 2);
                let lat = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
                let mut conns = Vec::new();
                for _ in 0..w {
                    conns.push(connect(&a.conn).await);
                }
                let t0 = Instant::now();
                let (done, _open) = run_workers(
                    conns,
                    Impl::Settle,
                    form,
                    &q,
                    (b, false),
                    lat.clone(),
                    Some(jobs),
                )
                .await;
                let secs = t0.elapsed().as_secs_f64();
                let mut l = lat.lock().unwrap();
                println!(
                    "{:<10} {:<9} {:<9} {:>3} {:>4} {:>7} {:>9.0} {:>8.2} {:>8.2}",
                    n,
                    form.name(),
                    roles.name(),
                    w,
                    b,
                    done,
                    done as f64 / secs,
                    pct(&mut l, 0.5),
                    pct(&mut l, 0.99)
                );
            }
            admin
                .batch_execute(&format!(
                    "DROP TABLE IF EXISTS {q}, {q}_dead; SELECT queue_unregister('{q}')"
                ))
                .await
                .unwrap();
        }
    }
    println!("{plans}");
}
