//! Every SQL function of the extension called with random, hostile arguments:
//! whatever it answers, an error keeps a real SQLSTATE — never `XX000`, which
//! would be settle's own bug — carries no Rust backtrace in its DETAIL (the
//! test servers run with `RUST_BACKTRACE=1`), and the connection survives.

use proptest::prelude::*;
use settle_conformance::*;
use tokio_postgres::types::ToSql;

/// A queue that exists (lease, with a dead letter and a created_at column),
/// so that calls get past the lookup.
const KNOWN: &str = "sql_errors_known";

fn text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        1 => Just(None),
        2 => Just(Some(KNOWN.to_owned())),
        1 => Just(Some(String::new())),
        3 => proptest::string::string_regex("[a-z0-9_ ;'\"$().:\\-é]{0,16}")
            .unwrap()
            .prop_map(Some),
    ]
}

fn number() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        1 => Just(None),
        3 => prop_oneof![
            Just(i64::MIN),
            Just(-1i64),
            Just(0i64),
            Just(1i64),
            Just(10_001i64),
            Just(i64::from(i32::MAX)),
            any::<i64>()
        ]
        .prop_map(|n| Some(n.to_string())),
    ]
}

fn interval() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("1 second".to_owned())),
        Just(Some("-1 second".to_owned())),
        Just(Some("0".to_owned())),
        Just(Some("1000000 years".to_owned())),
    ]
}

fn outcome() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("ack".to_owned())),
        Just(Some("retry".to_owned())),
        Just(Some("retry_after".to_owned())),
        Just(Some("custom:".to_owned())),
        Just(Some("custom:nope".to_owned())),
        text(),
    ]
}

fn timestamp() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("now".to_owned())),
        Just(Some("infinity".to_owned())),
        Just(Some("2000-01-01".to_owned())),
    ]
}

fn ids() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("{}".to_owned())),
        Just(Some("{1,1}".to_owned())),
        Just(Some("{1,NULL}".to_owned())),
        Just(Some("{x}".to_owned())),
    ]
}

/// One call: the statement (every argument a text parameter, cast in SQL, so
/// that a bad value is the server's error) and
/// its arguments.
fn call() -> impl Strategy<Value = (&'static str, Vec<Option<String>>)> {
    prop_oneof![
        (text(), text(), number()).prop_map(|(q, f, m)| (
            "SELECT queue_create($1, $2, $3::text::int)",
            vec![q, f, m]
        )),
        (text(), text(), text(), number(), text()).prop_map(|(q, t, f, m, d)| (
            "SELECT queue_register($1, $2::text::regclass, $3, $4::text::int, $5)",
            vec![q, t, f, m, d]
        )),
        (text(), text(), text(), number(), text()).prop_map(|(q, t, f, m, d)| (
            "SELECT count(*) FROM queue_differences($1, $2::text::regclass, $3, $4::text::int, $5)",
            vec![q, t, f, m, d]
        )),
        (text(), text(), text()).prop_map(|(q, n, s)| (
            "SELECT queue_register_outcome($1, $2, $3)",
            vec![q, n, s]
        )),
        text().prop_map(|q| ("SELECT queue_unregister(NULLIF($1, $$sql_errors_known$$))", vec![q])),
        (text(), number(), interval()).prop_map(|(q, b, l)| (
            "SELECT count(*) FROM queue_claim($1, $2::text::int, $3::text::interval)",
            vec![q, b, l]
        )),
        (text(), text(), outcome(), interval(), timestamp()).prop_map(|(q, i, o, d, t)| (
            "SELECT queue_complete($1, $2, $3, $4::text::interval, $5::text::timestamptz)",
            vec![q, i, o, d, t]
        )),
        (text(), text(), outcome(), interval(), timestamp(), number(), interval()).prop_map(
            |(q, i, o, d, t, b, l)| (
                "SELECT count(*) FROM queue_complete_and_claim($1, $2, $3, $4::text::interval, \
                 $5::text::timestamptz, $6::text::int, $7::text::interval)",
                vec![q, i, o, d, t, b, l]
            )
        ),
        (text(), ids(), outcome(), interval()).prop_map(|(q, i, o, d)| (
            "SELECT count(*) FROM queue_complete_many($1, $2::text::text[], $3, $4::text::interval)",
            vec![q, i, o, d]
        )),
        (text(), text(), timestamp()).prop_map(|(q, i, t)| (
            "SELECT queue_release($1, $2, $3::text::timestamptz)",
            vec![q, i, t]
        )),
        (text(), text(), timestamp(), interval()).prop_map(|(q, i, t, l)| (
            "SELECT queue_extend($1, $2, $3::text::timestamptz, $4::text::interval)",
            vec![q, i, t, l]
        )),
        text().prop_map(|q| ("SELECT count(*) FROM queue_stats($1)", vec![q])),
        Just(("SELECT count(*) FROM queue_stats()", vec![])),
        (text(), number(), ids()).prop_map(|(q, l, i)| (
            "SELECT count(*) FROM queue_dead($1, $2::text::bigint, $3::text::text[])",
            vec![q, l, i]
        )),
        (text(), ids()).prop_map(|(q, i)| (
            "SELECT queue_requeue_dead($1, $2::text::text[])",
            vec![q, i]
        )),
        (text(), interval(), ids()).prop_map(|(q, o, i)| (
            "SELECT queue_purge_dead($1, $2::text::interval, $3::text::text[])",
            vec![q, o, i]
        )),
        text().prop_map(|q| ("SELECT count(*) FROM queue_sql($1)", vec![q])),
        (text(), text()).prop_map(|(q, i)| ("SELECT queue_advisory_key($1, $2)", vec![q, i])),
    ]
}

async fn connect() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&env("SETTLE_TEST_PG"), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    c
}

/// The known queue, made once per run.
async fn setup(c: &tokio_postgres::Client) {
    c.batch_execute(&format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM settle_queues WHERE queue = '{KNOWN}') THEN
             PERFORM queue_create('{KNOWN}', 'lease', 2);
           END IF;
         END $$;
         INSERT INTO {KNOWN} (payload) SELECT '{{}}' FROM generate_series(1, 3);"
    ))
    .await
    .expect("the known queue");
}

/// What is wrong with the answer to `sql`, if anything.
async fn check(
    c: &tokio_postgres::Client,
    sql: &str,
    args: &[Option<String>],
) -> Result<(), String> {
    let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
    // each call alone, so one that fails leaves nothing behind for the next
    c.batch_execute("BEGIN").await.map_err(|e| e.to_string())?;
    let r = c.query(sql, &params).await;
    c.batch_execute("ROLLBACK")
        .await
        .map_err(|e| format!("the connection did not survive {sql} {args:?}: {e}"))?;
    let Err(e) = r else { return Ok(()) };
    let Some(db) = e.as_db_error() else {
        return Err(format!("{sql} {args:?}: not a database error: {e}"));
    };
    if db.code().code() == "XX000" {
        return Err(format!("{sql} {args:?}: XX000 {}", db.message()));
    }
    let detail = db.detail().unwrap_or("");
    if ["backtrace", ".rs:", "rust_begin_unwind", "core::panicking"]
        .iter()
        .any(|m| detail.contains(m))
    {
        return Err(format!("{sql} {args:?}: a backtrace in DETAIL: {detail}"));
    }
    Ok(())
}

#[test]
fn every_function_keeps_its_sqlstate_and_no_backtrace() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt.block_on(connect());
    rt.block_on(setup(&c));
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 1000,
        failure_persistence: None,
        ..Default::default()
    });
    runner
        .run(&call(), |(sql, args)| {
            let r = rt.block_on(check(&c, sql, &args));
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            Ok(())
        })
        .unwrap();
}
