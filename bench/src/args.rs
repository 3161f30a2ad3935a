//! settle-bench's command line: every flag, its default and the environment
//! variables that stand in for `--conn` and `--pgmq`.

use crate::{pressure, Form};
use std::time::Duration;

/// The command line (and the environment's SETTLE_BENCH_PG / SETTLE_TEST_PG).
pub(crate) struct Args {
    pub(crate) conn: String,
    /// a database with pgmq's SQL installed (bench/peers.sh), or none
    pub(crate) pgmq: Option<String>,
    /// a database (on the --conn server) with the SQL edition installed, or none
    pub(crate) sql_edition: Option<String>,
    /// the database (on the --conn server) for Graphile Worker, or none
    pub(crate) graphile: Option<String>,
    /// the database (on the --conn server) for awa, or none
    pub(crate) awa: Option<String>,
    /// backlog sizes for the scaling run (`--scaling`, `--scaling-10m`)
    pub(crate) backlogs: Vec<usize>,
    /// the scaling run also on queues with the priority and ordering_key
    /// roles (`--flow`, `--flow-10m`)
    pub(crate) flow: bool,
    /// seconds of the sustained (dead tuple) run, or 0
    pub(crate) sustained: u64,
    /// in the sustained run, hold a snapshot for 120 s every this many seconds
    /// (`--hold-every SECS`), or 0
    pub(crate) hold_every: u64,
    /// backlogs of the horizon-held grid (`--horizon`, `--horizon-jobs N,N`)
    pub(crate) horizon: Vec<usize>,
    /// what holds the horizon in the grid and the sustained run (`--holder`)
    pub(crate) holder: pressure::Holder,
    /// the longest a horizon drain runs (`--horizon-cap SECS`): its jobs/s is
    /// then over the jobs done
    pub(crate) horizon_cap: Option<Duration>,
    /// storage parameters set on every settle/floor queue table before it is
    /// filled (`--table-options "fillfactor = 100"`, or `reset` for the
    /// server's defaults in place of `queue_create`'s)
    pub(crate) table_options: Option<String>,
    /// the same for pgmq's queue table (`--pgmq-table-options`)
    pub(crate) pgmq_table_options: Option<String>,
    /// queues made with this max_attempts and a dead-letter table
    /// (`--max-attempts N`): the claim's crash-loop branch, as a production
    /// queue with a retry limit runs it; the floor's SQL does not change
    pub(crate) max_attempts: Option<i32>,
    pub(crate) jobs: usize,
    /// runs of each case; the median is reported
    pub(crate) repeat: usize,
    pub(crate) forms: Vec<Form>,
    pub(crate) workers: Vec<usize>,
    pub(crate) batches: Vec<usize>,
    /// skip the Rust client cases (`--no-client`)
    pub(crate) client: bool,
    /// run the portable-path grid instead (`--portable`)
    pub(crate) portable: bool,
    /// a MariaDB/MySQL URL for the portable grid (`--mariadb`)
    pub(crate) mariadb: Option<String>,
    /// a SQLite file for the portable grid (`--sqlite`)
    pub(crate) sqlite: Option<String>,
    /// the portable grid's backends to run by name, all when empty (`--backends pg+ext,postgres,mariadb,sqlite`)
    pub(crate) backends: Vec<String>,
    /// settle with a mix of outcomes instead of ack only (`--mixed`, portable grid)
    pub(crate) mixed: bool,
    /// a Citus coordinator: compare a grouped queue there with `--conn` (`--citus`)
    pub(crate) citus: Option<String>,
    /// the Rust client sends its statements unnamed, as behind a transaction
    /// pooler (`--transaction-pooler`)
    pub(crate) transaction_pooler: bool,
    /// lease form, one row at a time: settle and the floor settle each delivery
    /// in the statement that claims the next (`--chain`: settle's
    /// `queue_complete_and_claim`, the floor's DELETE in a WITH of its claim)
    pub(crate) chain: bool,
    /// the Rust client's worker with its chain on and off, beside pgmq
    /// (`--worker`), instead of the grid
    pub(crate) worker: bool,
    /// one key's backlog of this many rows in front of the others, on the
    /// portable path (`--keyed-backlog N`)
    pub(crate) keyed_backlog: Option<usize>,
    /// the other keys behind it, 10 rows each (`--backlog-keys N`, default 100)
    pub(crate) backlog_keys: usize,
}

fn list(v: &str, flag: &str) -> Vec<usize> {
    v.split(',')
        .map(|x| x.parse().unwrap_or_else(|_| panic!("{flag} N,N,...")))
        .collect()
}

/// The arguments given, or a panic naming the ones it takes.
pub(crate) fn args() -> Args {
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args {
        conn: std::env::var("SETTLE_BENCH_PG")
            .or_else(|_| std::env::var("SETTLE_TEST_PG"))
            .unwrap_or_default(),
        pgmq: std::env::var("SETTLE_BENCH_PGMQ").ok(),
        sql_edition: None,
        graphile: None,
        awa: None,
        backlogs: Vec::new(),
        flow: false,
        sustained: 0,
        hold_every: 0,
        horizon: Vec::new(),
        holder: pressure::Holder::Snapshot,
        horizon_cap: None,
        table_options: None,
        pgmq_table_options: None,
        max_attempts: None,
        jobs: 20_000,
        repeat: 1,
        forms: vec![Form::Lease, Form::RowLock, Form::Advisory],
        workers: vec![1, 4, 16],
        client: true,
        portable: false,
        mariadb: None,
        sqlite: None,
        backends: Vec::new(),
        mixed: false,
        citus: None,
        transaction_pooler: false,
        chain: false,
        worker: false,
        keyed_backlog: None,
        backlog_keys: 100,
        batches: vec![1, 10, 100],
    };
    let mut i = 0;
    while i < v.len() {
        match v[i].as_str() {
            "--conn" => {
                a.conn = v[i + 1].clone();
                i += 1;
            }
            "--jobs" => {
                a.jobs = v[i + 1].parse().expect("--jobs N");
                i += 1;
            }
            "--repeat" => {
                a.repeat = v[i + 1].parse().expect("--repeat N");
                assert!(a.repeat >= 1, "--repeat N: at least 1");
                i += 1;
            }
            "--sql-edition" => {
                a.sql_edition = Some(v[i + 1].clone());
                i += 1;
            }
            "--pgmq" => {
                a.pgmq = Some(v[i + 1].clone());
                i += 1;
            }
            "--scaling" => a.backlogs = vec![10_000, 1_000_000],
            "--chain" => a.chain = true,
            "--worker" => a.worker = true,
            "--table-options" => {
                a.table_options = Some(v[i + 1].clone());
                i += 1;
            }
            "--max-attempts" => {
                a.max_attempts = Some(v[i + 1].parse().expect("--max-attempts N"));
                i += 1;
            }
            "--pgmq-table-options" => {
                a.pgmq_table_options = Some(v[i + 1].clone());
                i += 1;
            }
            "--sustained" => {
                a.sustained = v[i + 1].parse().expect("--sustained SECONDS");
                i += 1;
            }
            "--scaling-10m" => a.backlogs = vec![10_000, 1_000_000, 10_000_000],
            // the scaling run over queues with a priority and an ordering key too
            "--flow" => {
                a.backlogs = vec![1_000_000];
                a.flow = true;
            }
            "--flow-10m" => {
                a.backlogs = vec![1_000_000, 10_000_000];
                a.flow = true;
            }
            "--hold-every" => {
                a.hold_every = v[i + 1].parse().expect("--hold-every SECONDS");
                i += 1;
            }
            // W=4, B=1 unless --workers / --batches follow
            "--horizon" => {
                a.horizon = vec![20_000, 100_000];
                a.workers = vec![4];
                a.batches = vec![1];
            }
            "--horizon-cap" => {
                let secs = v[i + 1].parse().expect("--horizon-cap SECONDS");
                a.horizon_cap = Some(Duration::from_secs(secs));
                i += 1;
            }
            "--holder" => {
                a.holder = match v[i + 1].as_str() {
                    "snapshot" => pressure::Holder::Snapshot,
                    "row_lock" => pressure::Holder::RowLock,
                    other => panic!("--holder snapshot|row_lock, not {other}"),
                };
                i += 1;
            }
            "--horizon-jobs" => {
                a.horizon = list(&v[i + 1], "--horizon-jobs");
                a.workers = vec![4];
                a.batches = vec![1];
                i += 1;
            }
            "--graphile" => {
                a.graphile = Some(v[i + 1].clone());
                i += 1;
            }
            "--awa" => {
                a.awa = Some(v[i + 1].clone());
                i += 1;
            }
            "--forms" => {
                a.forms = v[i + 1]
                    .split(',')
                    .map(|f| match f {
                        "lease" => Form::Lease,
                        "row_lock" => Form::RowLock,
                        "advisory" => Form::Advisory,
                        _ => panic!("--forms lease,row_lock,advisory"),
                    })
                    .collect();
                i += 1;
            }
            "--workers" => {
                a.workers = list(&v[i + 1], "--workers");
                i += 1;
            }
            "--batches" => {
                a.batches = list(&v[i + 1], "--batches");
                i += 1;
            }
            "--no-client" => a.client = false,
            // only the Rust client's rows (its CPU beside the server's), e.g. under perf
            "--client-only" => a.forms.clear(),
            "--transaction-pooler" => a.transaction_pooler = true,
            "--portable" => a.portable = true,
            "--keyed-backlog" => {
                a.keyed_backlog = Some(v[i + 1].parse().expect("--keyed-backlog N"));
                i += 1;
            }
            "--backlog-keys" => {
                a.backlog_keys = v[i + 1].parse().expect("--backlog-keys N");
                i += 1;
            }
            "--mixed" => {
                a.portable = true;
                a.mixed = true;
            }
            "--mariadb" => {
                a.mariadb = Some(v[i + 1].clone());
                i += 1;
            }
            "--citus" => {
                a.citus = Some(v[i + 1].clone());
                i += 1;
            }
            "--sqlite" => {
                a.sqlite = Some(v[i + 1].clone());
                i += 1;
            }
            "--backends" => {
                a.portable = true;
                a.backends = v[i + 1].split(',').map(str::to_owned).collect();
                i += 1;
            }
            "--quick" => {
                a.jobs = 2_000;
                a.workers = vec![1, 4];
                a.batches = vec![1, 100];
            }
            other => panic!("unknown argument {other}: use --conn, --jobs N, --repeat N, --quick, --forms F,F, --workers N,N, --batches N,N, --no-client, --client-only, --transaction-pooler, --portable, --keyed-backlog N, --backlog-keys N, --mixed, --mariadb URL, --sqlite PATH, --backends B,B, --citus CONN, --pgmq CONN, --sql-edition CONN, --graphile DB, --awa DB, --scaling, --scaling-10m, --flow, --flow-10m, --sustained SECONDS, --hold-every SECONDS, --horizon, --horizon-jobs N,N, --holder snapshot|row_lock, --horizon-cap SECONDS, --table-options OPTS|reset, --pgmq-table-options OPTS|reset, --max-attempts N, --chain, --worker"),
        }
        i += 1;
    }
    assert!(
        !a.conn.is_empty(),
        "give --conn or SETTLE_BENCH_PG / SETTLE_TEST_PG"
    );
    a
}
