//! Everything callable from SQL (docs/sql-reference.md, "Errors"). Each function is SECURITY INVOKER:
//! it runs with the caller's privileges on the queue table. Product errors are
//! raised here, at the top of each function, with their own SQLSTATE (see
//! `error.rs`); arguments are all `Option` so that a NULL gets a clear SQ004
//! rather than a generic failure.

use crate::create;
use crate::desc;
use crate::error::{entry, Result, SettleError};
use crate::ops::{self, Action, Outcome};
use crate::register::{self, Registration};
use crate::srf;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::{JsonB, PgRelation};

fn need<'a, T>(v: Option<T>, what: &str) -> Result<T> {
    v.ok_or_else(|| SettleError::InvalidArgument(format!("{what} must not be NULL")))
}

/// Register (or update) a queue: idempotent upsert of its descriptor.
#[pg_extern(security_invoker, name = "queue_register")]
fn queue_register_v3(
    queue: Option<&str>,
    tbl: Option<PgRelation>,
    form: Option<&str>,
    max_attempts: default!(Option<i32>, "NULL"),
    dead_letter: default!(Option<&str>, "NULL"),
    columns: default!(Option<JsonB>, "'{}'"),
    dead_letter_table: default!(Option<PgRelation>, "NULL"),
) {
    register_queue(
        queue,
        tbl,
        form,
        max_attempts,
        dead_letter,
        columns,
        dead_letter_table,
    )
}

/// The six-argument queue_register of 0.1.0 and 0.2.0, kept in the library
/// (no SQL of its own) for databases that run this library before
/// `ALTER EXTENSION settle UPDATE`: their catalog still calls this symbol.
#[pg_extern(security_invoker, sql = false)]
fn queue_register(
    queue: Option<&str>,
    tbl: Option<PgRelation>,
    form: Option<&str>,
    max_attempts: Option<i32>,
    dead_letter: Option<&str>,
    columns: Option<JsonB>,
) {
    register_queue(queue, tbl, form, max_attempts, dead_letter, columns, None)
}

fn register_queue(
    queue: Option<&str>,
    tbl: Option<PgRelation>,
    form: Option<&str>,
    max_attempts: Option<i32>,
    dead_letter: Option<&str>,
    columns: Option<JsonB>,
    dead_letter_table: Option<PgRelation>,
) {
    let args = RegisterArgs {
        queue,
        tbl,
        form,
        max_attempts,
        dead_letter,
        columns,
        dead_letter_table,
    };
    // moved in: nothing of this frame is left to drop when entry raises
    entry(move || Spi::connect_mut(|client| register::register(client, args.registration()?)))
}

/// The arguments of queue_register (and queue_differences), as SQL gives them.
struct RegisterArgs<'a> {
    queue: Option<&'a str>,
    tbl: Option<PgRelation>,
    form: Option<&'a str>,
    max_attempts: Option<i32>,
    dead_letter: Option<&'a str>,
    columns: Option<JsonB>,
    dead_letter_table: Option<PgRelation>,
}

impl RegisterArgs<'_> {
    /// The registration they describe; SQ004 for a NULL queue, table or form.
    fn registration(&self) -> Result<Registration<'_>> {
        Ok(Registration {
            queue: need(self.queue, "queue")?,
            rel: need(self.tbl.as_ref(), "tbl")?.oid(),
            form: need(self.form, "form")?,
            max_attempts: self.max_attempts,
            dead_letter: self.dead_letter,
            dead_letter_table: self.dead_letter_table.as_ref().map(|t| t.oid()),
            columns: self.columns.as_ref().map(|j| &j.0),
        })
    }
}

/// How the registered descriptor of `queue` differs from the one given (the
/// arguments of queue_register): one row per field that differs, none when
/// they are the same. Writes nothing and needs no ownership, so a worker can
/// check the queue it was built for before it claims.
#[pg_extern(security_invoker)]
#[allow(clippy::type_complexity)]
fn queue_differences(
    queue: Option<&str>,
    tbl: Option<PgRelation>,
    form: Option<&str>,
    max_attempts: default!(Option<i32>, "NULL"),
    dead_letter: default!(Option<&str>, "NULL"),
    columns: default!(Option<JsonB>, "'{}'"),
    dead_letter_table: default!(Option<PgRelation>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(field, String),
        name!(registered, Option<String>),
        name!(given, Option<String>),
    ),
> {
    let args = RegisterArgs {
        queue,
        tbl,
        form,
        max_attempts,
        dead_letter,
        columns,
        dead_letter_table,
    };
    TableIterator::new(entry(move || {
        Spi::connect(|client| register::differences(client, &args.registration()?))
    }))
}

/// Claim up to `batch` ready rows.
#[pg_extern(security_invoker)]
fn queue_claim(
    queue: Option<&str>,
    batch: default!(Option<i32>, 1),
    lease: default!(Option<Interval>, "NULL"),
) -> srf::TableIterator<
    'static,
    (
        name!(id, String),
        name!(attempt, Option<i32>),
        name!(token, Option<TimestampWithTimeZone>),
        name!(payload, Option<crate::rawjsonb::RawJsonb>),
    ),
> {
    let rows = entry(|| ops::claim(need(queue, "queue")?, batch, lease));
    srf::TableIterator::new(
        rows.into_iter()
            .map(|d| (d.id, d.attempt, d.token, d.payload)),
    )
}

/// Settle one delivery with an outcome.
#[pg_extern(security_invoker)]
fn queue_complete(
    queue: Option<&str>,
    id: Option<&str>,
    outcome: Option<&str>,
    delay: default!(Option<Interval>, "NULL"),
    token: default!(Option<TimestampWithTimeZone>, "NULL"),
) -> String {
    entry(|| {
        ops::complete_one(
            need(queue, "queue")?,
            need(id, "id")?,
            need(outcome, "outcome")?,
            delay,
            token,
        )
    })
}

/// Settle one delivery, then claim up to `batch` rows, in one statement: a
/// worker's loop in one round trip. Every row carries the settle's result;
/// when nothing was ready, one row with only that result.
#[pg_extern(security_invoker)]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn queue_complete_and_claim(
    queue: Option<&str>,
    id: Option<&str>,
    outcome: Option<&str>,
    delay: default!(Option<Interval>, "NULL"),
    token: default!(Option<TimestampWithTimeZone>, "NULL"),
    batch: default!(Option<i32>, 1),
    lease: default!(Option<Interval>, "NULL"),
) -> srf::TableIterator<
    'static,
    (
        name!(settled, String),
        name!(id, Option<String>),
        name!(attempt, Option<i32>),
        name!(token, Option<TimestampWithTimeZone>),
        name!(payload, Option<crate::rawjsonb::RawJsonb>),
    ),
> {
    let (settled, rows) = entry(|| {
        let queue = need(queue, "queue")?;
        let settled = ops::complete_one(
            queue,
            need(id, "id")?,
            need(outcome, "outcome")?,
            delay,
            token,
        )?;
        Ok((settled, ops::claim(queue, batch, lease)?))
    });
    if rows.is_empty() {
        return srf::TableIterator::new([(settled, None, None, None, None)]);
    }
    srf::TableIterator::new(
        rows.into_iter()
            .map(|d| (settled.clone(), Some(d.id), d.attempt, d.token, d.payload)),
    )
}

/// Settle many deliveries of one queue with one outcome in one statement.
/// Returns one row per id; `result` is NULL for an id this call did not hold
/// (`lease_lost` in the lease form, `not_held` otherwise).
#[pg_extern(security_invoker)]
fn queue_complete_many(
    queue: Option<&str>,
    ids: Option<Vec<Option<String>>>,
    outcome: Option<&str>,
    delay: default!(Option<Interval>, "NULL"),
    tokens: default!(Option<Vec<Option<TimestampWithTimeZone>>>, "NULL"),
) -> srf::TableIterator<'static, (name!(id, String), name!(result, &'static str))> {
    let rows = entry(|| {
        let queue = need(queue, "queue")?;
        let outcome = Outcome::parse(need(outcome, "outcome")?)?;
        let lease = tokens.is_some();
        let out = ops::settle(
            queue,
            need(ids, "ids")?,
            Action::Outcome(outcome),
            delay,
            tokens,
        )?;
        Ok(out
            .into_iter()
            .map(|(id, r)| {
                let r = r.unwrap_or(if lease { "lease_lost" } else { "not_held" });
                (id, r)
            })
            .collect::<Vec<_>>())
    });
    srf::TableIterator::new(rows)
}

/// Give a delivery back without settling it: lease cleared at once, advisory
/// key unlocked at transaction end. The attempt stays counted.
#[pg_extern(security_invoker)]
fn queue_release(
    queue: Option<&str>,
    id: Option<&str>,
    token: default!(Option<TimestampWithTimeZone>, "NULL"),
) -> String {
    entry(|| ops::release_one(need(queue, "queue")?, need(id, "id")?, token))
}

/// Lease heartbeat: move the deadline to now + lease; returns the new token.
#[pg_extern(security_invoker)]
fn queue_extend(
    queue: Option<&str>,
    id: Option<&str>,
    token: Option<TimestampWithTimeZone>,
    lease: default!(Option<Interval>, "NULL"),
) -> TimestampWithTimeZone {
    entry(|| ops::extend(need(queue, "queue")?, need(id, "id")?, token, lease))
}

/// Counts per queue (all registered queues when `queue` is NULL).
#[pg_extern(security_invoker)]
fn queue_stats(
    queue: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(queue, String),
        name!(form, String),
        name!(ready, i64),
        name!(delayed, i64),
        name!(in_flight, Option<i64>),
        name!(dead, Option<i64>),
        name!(oldest_ready_age, Option<Interval>),
    ),
> {
    let rows = entry(|| ops::stats(queue));
    TableIterator::new(rows.into_iter().map(|s| {
        (
            s.queue,
            s.form,
            s.ready,
            s.delayed,
            s.in_flight,
            s.dead,
            s.oldest_ready_age,
        )
    }))
}

/// Move dead-lettered rows (all, or the given ids) back into the queue with
/// attempt 0 and no delay; returns how many moved.
#[pg_extern(security_invoker)]
fn queue_requeue_dead(
    queue: Option<&str>,
    ids: default!(Option<Vec<Option<String>>>, "NULL"),
) -> i64 {
    entry(|| ops::requeue_dead(need(queue, "queue")?, ids))
}

/// Dead-lettered rows in id order (all, or the given ids; at most `lim`):
/// each id, its attempt, and the whole row.
#[pg_extern(security_invoker)]
fn queue_dead(
    queue: Option<&str>,
    lim: default!(Option<i64>, "100"),
    ids: default!(Option<Vec<Option<String>>>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(id, String),
        name!(attempt, Option<i32>),
        name!(row, JsonB),
    ),
> {
    TableIterator::new(entry(|| {
        ops::dead_rows(need(queue, "queue")?, need(lim, "lim")?, ids)
    }))
}

/// Delete dead-lettered rows created more than `older_than` ago (by the
/// queue's created_at column) and/or with the given ids; returns how many.
#[pg_extern(security_invoker)]
fn queue_purge_dead(
    queue: Option<&str>,
    older_than: default!(Option<Interval>, "NULL"),
    ids: default!(Option<Vec<Option<String>>>, "NULL"),
) -> i64 {
    entry(|| ops::purge_dead(need(queue, "queue")?, older_than, ids))
}

/// Add or replace (sql given) or remove (sql NULL) a custom outcome. The SQL
/// runs instead of the dialect's statement, with $1 = the row's id.
#[pg_extern(security_invoker)]
fn queue_register_outcome(queue: Option<&str>, name: Option<&str>, sql: Option<&str>) {
    entry(|| {
        let queue = need(queue, "queue")?;
        let name = need(name, "name")?;
        Spi::connect_mut(|client| register::register_outcome(client, queue, name, sql))
    })
}

/// Create a queue table with the canonical columns, its primary key and a
/// NOTIFY trigger (and its dead-letter table when max_attempts is given), then
/// register it. `priority` adds a priority column, `ordering_key` (a type
/// name) an ordering_key column of that type, each with the index its claim
/// reads.
#[pg_extern(security_invoker, name = "queue_create")]
fn queue_create_with_flow(
    queue: Option<&str>,
    form: default!(Option<&str>, "'lease'"),
    max_attempts: default!(Option<i32>, "NULL"),
    dead_letter: default!(Option<&str>, "NULL"),
    priority: default!(Option<bool>, "false"),
    ordering_key: default!(Option<&str>, "NULL"),
) -> String {
    entry(|| {
        let queue = need(queue, "queue")?;
        let form = need(form, "form")?;
        let flow = create::Flow {
            priority: priority.unwrap_or(false),
            ordering_key,
        };
        Spi::connect_mut(|client| {
            create::create(client, queue, form, max_attempts, dead_letter, flow)
        })
    })
}

/// `queue_create` as versions before 0.8.0 declare it (four arguments): its C
/// symbol stays for an install whose files are new and whose `ALTER
/// EXTENSION settle UPDATE` has not run yet.
#[pg_extern(security_invoker, sql = false)]
fn queue_create(
    queue: Option<&str>,
    form: Option<&str>,
    max_attempts: Option<i32>,
    dead_letter: Option<&str>,
) -> String {
    queue_create_with_flow(queue, form, max_attempts, dead_letter, Some(false), None)
}

/// The statements settle runs for a queue, as built from its descriptor (for
/// reading, EXPLAIN and audits): claim, take/candidates, each settle write.
#[pg_extern(security_invoker)]
fn queue_sql(
    queue: Option<&str>,
) -> TableIterator<'static, (name!(statement, String), name!(sql, String))> {
    TableIterator::new(entry(|| {
        let queue = need(queue, "queue")?;
        Spi::connect(|client| {
            let q = desc::queue(client, queue)?;
            Ok(ops::statements(&q.shape))
        })
    }))
}
