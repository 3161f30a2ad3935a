//! Property test over descriptor and outcome inputs: whatever the queue, table
//! and column names (quotes, semicolons, backticks, dollars, unicode, spaces),
//! the SQL settle builds registers, claims and settles correctly — on SQLite
//! (the portable path's quoting) and on PostgreSQL with the extension (its own
//! quoting). A quoting bug shows as a syntax error or a wrong row.

use proptest::prelude::*;
use settle::{Client, Dialect, Form, Outcome, Queue, Role, Settled};
use settle_conformance::{env, pool_options, register, sqlite_url, SEQ};
use sqlx::Row;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn name() -> impl Strategy<Value = String> {
    // characters that break naive quoting; no NUL (no database accepts it)
    proptest::string::string_regex("[a-zA-Z0-9_ ;'\"`$.()é漢\\-]{1,12}").unwrap()
}

async fn round_trip(
    pg: bool,
    q: String,
    t: String,
    cols: [String; 3],
    outcome: Outcome,
    form: Form,
) -> Result<(), String> {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let table = format!("{t}{n}");
    let d = Dialect::Postgres;
    let (id, attempt, until) = (&cols[0], &cols[1], &cols[2]);
    let ident = |s: &str| {
        if pg {
            d.ident(s)
        } else {
            Dialect::Sqlite.ident(s)
        }
    };
    let ts = if pg { "timestamptz" } else { "INTEGER" };
    let ddl = [
        // a database kept between runs may hold a table of the same random name
        format!("DROP TABLE IF EXISTS {}", ident(&table)),
        format!("DROP TABLE IF EXISTS {}", ident(&format!("{table}_dead"))),
        format!(
            "CREATE TABLE {} ({} bigint PRIMARY KEY, {} int NOT NULL DEFAULT 0, {} {ts})",
            ident(&table),
            ident(id),
            ident(attempt),
            ident(until)
        ),
        format!(
            "CREATE TABLE {} ({} bigint PRIMARY KEY, {} int NOT NULL DEFAULT 0, {} {ts})",
            ident(&format!("{table}_dead")),
            ident(id),
            ident(attempt),
            ident(until)
        ),
        format!(
            "INSERT INTO {} ({}) VALUES (1), (2)",
            ident(&table),
            ident(id)
        ),
    ];
    let url = if pg {
        env("SETTLE_TEST_PG_EXT_URL")
    } else {
        sqlite_url()
    };
    let pool = pool_options(2)
        .connect(&url)
        .await
        .map_err(|e| e.to_string())?;
    for s in &ddl {
        sqlx::query(s)
            .execute(&pool)
            .await
            .map_err(|e| format!("{s}: {e}"))?;
    }
    // the table as SQL would resolve it: quoted, since the name is hostile
    let queue = Queue::new(format!("{q}{n}"), ident(&table))
        .form(form)
        .dead_letter(1, ident(&format!("{table}_dead")))
        .column(Role::Id, id.clone())
        .column(Role::Attempt, attempt.clone())
        .column(Role::LockedUntil, until.clone());
    let c = if pg {
        match register(&env("SETTLE_TEST_PG"), &queue).await {
            Ok(_) => Client::connect(env("SETTLE_TEST_PG"), 2, queue).await,
            Err(e) => Err(e),
        }
    } else {
        Client::portable(&url, 2, queue).await
    }
    .map_err(|e| format!("register: {e}"))?;
    let d1 = c
        .claim(1)
        .await
        .map_err(|e| format!("claim: {e}"))?
        .pop()
        .ok_or("no row")?;
    if d1.id() != "1" || d1.payload_json()[id.as_str()] != 1 {
        return Err(format!("claimed {:?} / row {}", d1.id(), d1.payload_json()));
    }
    let settled = d1
        .settle(outcome.clone())
        .await
        .map_err(|e| format!("settle: {e}"))?;
    let want = match outcome {
        Outcome::Ack | Outcome::Drop => Settled::Deleted,
        _ => Settled::DeadLettered, // max_attempts(1)
    };
    if settled != want {
        return Err(format!("{outcome:?} -> {settled:?}, want {want:?}"));
    }
    let left: Vec<i64> = sqlx::query(&format!(
        "SELECT CAST({} AS BIGINT) FROM {} ORDER BY 1",
        ident(id),
        ident(&table)
    ))
    .fetch_all(&pool)
    .await
    .map_err(|e| e.to_string())?
    .iter()
    .map(|r| r.get(0))
    .collect();
    if left != vec![2] {
        return Err(format!("rows left {left:?}"));
    }
    Ok(())
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Ack),
        Just(Outcome::Drop),
        Just(Outcome::Retry),
        Just(Outcome::RetryAfter(Duration::from_secs(5))),
    ]
}

fn form() -> impl Strategy<Value = Form> {
    prop_oneof![
        Just(Form::RowLock),
        Just(Form::Lease {
            ttl: Duration::from_secs(10)
        })
    ]
}

fn distinct(cols: &[String; 3]) -> bool {
    let l: Vec<String> = cols.iter().map(|c| c.to_lowercase()).collect();
    l[0] != l[1] && l[1] != l[2] && l[0] != l[2]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_names_work_on_sqlite(q in name(), t in name(), c1 in name(), c2 in name(), c3 in name(), o in outcome(), f in form()) {
        let cols = [c1, c2, c3];
        prop_assume!(distinct(&cols));
        let rt = tokio::runtime::Runtime::new().unwrap();
        let r = rt.block_on(round_trip(false, q.clone(), t.clone(), cols.clone(), o.clone(), f));
        prop_assert!(r.is_ok(), "queue {q:?} table {t:?} columns {cols:?} {o:?} {f:?}: {r:?}");
    }

    #[test]
    fn any_names_work_with_the_extension(q in name(), t in name(), c1 in name(), c2 in name(), c3 in name(), o in outcome(), f in form()) {
        let cols = [c1, c2, c3];
        prop_assume!(distinct(&cols));
        let rt = tokio::runtime::Runtime::new().unwrap();
        let r = rt.block_on(round_trip(true, q.clone(), t.clone(), cols.clone(), o.clone(), f));
        prop_assert!(r.is_ok(), "queue {q:?} table {t:?} columns {cols:?} {o:?} {f:?}: {r:?}");
    }
}
