//! settle-reliability: load, mixed outcomes, keyed rows and faults on every
//! backend × form.
//!
//!     SETTLE_RELIABILITY_JOBS=100000 scripts/test.sh
//!
//! Needs the same servers and environment as the conformance suite, which
//! `scripts/test.sh` starts (it runs `--jobs 600` by default). Restarting the
//! PostgreSQL server additionally needs SETTLE_TEST_PGCTL (a command that
//! restarts it, given `fast` or `immediate`), and the network cut a namespace
//! (SETTLE_TEST_NETNS, _NET_HOST, _NET_LINK); without them those faults are skipped.
//! `--backends PgExtension,MariaDb` limits the run to those backends,
//! `--scenarios KeyedLoad,KeyedBacklog` to those scenarios.
//!
//! For every case it prints: scenario, backend, form, jobs, lost, settled twice,
//! concurrent runs of one row, settle errors, seconds — and closes with
//! `reliability: N passed, M failed`. A case passes with 0 lost, 0 settled twice,
//! nothing left in the queue, and (without faults) no two handlers running the
//! same row at once.

mod load;
mod processes;
mod report;

use report::{Line, Scenario};
use settle::Form;
use settle_conformance::{Backend, BACKENDS};
use std::time::Duration;

struct Args {
    jobs: usize,
    workers: usize,
    faults: bool,
    /// only these backends (`--backends PgExtension,MariaDb`), or all
    backends: Option<Vec<String>>,
    /// only these scenarios (`--scenarios KeyedLoad,KeyedBacklog`), or all
    scenarios: Option<Vec<String>>,
}

fn args() -> Args {
    let mut a = Args {
        jobs: 1500,
        workers: 16,
        faults: true,
        backends: None,
        scenarios: None,
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
            "--scenarios" => {
                a.scenarios = Some(v[i + 1].split(',').map(str::to_owned).collect());
                i += 1;
            }
            other => panic!(
                "unknown argument {other}: use --jobs N, --workers N, --no-faults, --backends A,B, --scenarios A,B"
            ),
        }
        i += 1;
    }
    a
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

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--child") {
        processes::child(
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
    let mut scenarios = vec![
        Scenario::Load,
        Scenario::Mixed,
        Scenario::KeyedLoad,
        Scenario::KeyedBacklog,
        Scenario::KeyedMixed,
    ];
    if a.faults {
        scenarios.push(Scenario::KillConnections);
        scenarios.push(Scenario::KillProcess);
        if std::env::var("SETTLE_TEST_PGCTL").is_ok() {
            scenarios.push(Scenario::Restart);
        }
        if processes::can_cut_network() {
            scenarios.push(Scenario::NetCut);
        }
    }
    if let Some(only) = &a.scenarios {
        scenarios.retain(|s| only.iter().any(|n| *n == format!("{s:?}")));
    }
    println!("{}", Line::header());
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
                    processes::process_case(b, form, scenario, a.jobs).await
                } else {
                    load::case(b, form, scenario, a.jobs, a.workers).await
                };
                println!("{l}");
                lines.push(l);
            }
        }
    }
    let passed = lines.iter().filter(|l| l.pass).count();
    let failed = lines.len() - passed;
    println!("reliability: {passed} passed, {failed} failed");
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
