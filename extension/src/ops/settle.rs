//! Settling deliveries with an outcome, releasing and extending them.

use crate::desc::{self, spi, PlanKey, Queue};
use crate::error::{bail, Result, SettleError};
use crate::held;
use crate::mark;
use crate::sql::{Form, Write};
use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
// Fx: the keys are ids this backend chose or was given, and SipHash cost a
// measurable share of a 100-row settle
use super::dead::{move_dead_apart, warn_dead};
use super::rows::{in_transaction_block, spi_rows};
use super::time::{clock_plus, lease_interval, lease_token, MAX_INTERVAL_MICROS};
use rustc_hash::FxHashMap as HashMap;

/// An outcome as given to queue_complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ack,
    Drop,
    Retry,
    RetryAfter,
    Custom(String),
}

impl Outcome {
    pub fn parse(s: &str) -> Result<Outcome> {
        Ok(match s {
            "ack" => Outcome::Ack,
            "drop" => Outcome::Drop,
            "retry" => Outcome::Retry,
            "retry_after" => Outcome::RetryAfter,
            _ => match s.strip_prefix("custom:") {
                Some(n) if !n.is_empty() => Outcome::Custom(n.to_owned()),
                _ => bail!(
                    InvalidArgument,
                    "unknown outcome \"{s}\": use ack, drop, retry, retry_after or custom:<name>"
                ),
            },
        })
    }
}

/// What to do with the rows: an outcome, or a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Outcome(Outcome),
    Release,
}

/// Per-id result of a settle call, in the order the ids were given; `None` =
/// not held (lease lost / not held).
pub type Settled = Vec<(String, Option<&'static str>)>;

/// The result words settle statements return (`sql.rs`), as static strings:
/// a 100-row settle then allocates nothing per row for them.
fn result_word(b: &[u8]) -> &'static str {
    match b {
        b"deleted" => "deleted",
        b"marked" => "marked",
        b"retried" => "retried",
        b"delayed" => "delayed",
        b"dead_lettered" => "dead_lettered",
        b"to_dead" => "to_dead",
        b"released" => "released",
        b"held" => "held",
        b"custom" => "custom",
        other => panic!(
            "settle: a settle statement returned the unknown result {:?}",
            String::from_utf8_lossy(other)
        ),
    }
}

/// The results of one settle call, by the position of each id as given.
struct Results<'a> {
    /// each given id's position (a given id is unique)
    at: HashMap<&'a str, usize>,
    res: Vec<Option<&'static str>>,
    /// rows returned under an id text that was not given as such: a bigint id
    /// given as '007' comes back as '7' (mapped back by `canonical`)
    stray: Vec<(String, &'static str)>,
}

impl Results<'_> {
    /// Record the (id, result) rows of the settle statement just run. `asked`:
    /// where given, the positions the statement was asked to write; a row
    /// outside them is a bug (see `ack_by_tids`), and panics.
    fn read(&mut self, asked: Option<&[bool]>) {
        // SAFETY: called right after a settle statement ran
        unsafe {
            let rows = pg_sys::SPI_processed as usize;
            spi_rows(rows, |values, nulls| {
                assert!(
                    values.len() == 2 && !nulls[0] && !nulls[1],
                    "settle: a settle statement returns (id, result), never NULL"
                );
                let id = crate::rowjson::detoasted(values[0]);
                let word = result_word(crate::rowjson::detoasted(values[1]));
                let at = std::str::from_utf8(id)
                    .ok()
                    .and_then(|id| self.at.get(id).copied());
                let asked_for = match (at, asked) {
                    (Some(i), Some(asked)) => asked[i],
                    (None, Some(_)) => false,
                    (_, None) => true,
                };
                assert!(
                    asked_for,
                    "settle: a settle statement reached row {}, which it was not asked for",
                    String::from_utf8_lossy(id)
                );
                match at {
                    Some(i) => self.res[i] = Some(word),
                    None => self
                        .stray
                        .push((String::from_utf8_lossy(id).into_owned(), word)),
                }
            });
        }
    }

    /// Give the stray rows to the given ids they are the canonical form of
    /// (one cast per given id still without a result; only when a row came
    /// back under another spelling).
    fn canonical(&mut self, client: &SpiClient<'_>, q: &Queue, given: &[String], run: &[usize]) {
        if self.stray.is_empty() {
            return;
        }
        for &i in run {
            if self.res[i].is_some() {
                continue;
            }
            let canon: Option<String> = spi(client
                .select(
                    &*format!(
                        "SELECT (($1::pg_catalog.text)::{})::pg_catalog.text",
                        q.shape.id_type
                    ),
                    None,
                    &[given[i].as_str().into()],
                )
                .and_then(|t| t.first().get_one::<String>()));
            if let Some(c) = canon {
                self.res[i] = self.stray.iter().find(|(s, _)| *s == c).map(|(_, w)| *w);
            }
        }
    }
}

/// Settle many ids of one queue with one action, in one statement.
pub fn settle(
    queue: &str,
    ids: Vec<Option<String>>,
    action: Action,
    delay: Option<Interval>,
    tokens: Option<Vec<Option<TimestampWithTimeZone>>>,
) -> Result<Settled> {
    let mut given = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(id) = id else {
            bail!(InvalidArgument, "ids must not be NULL")
        };
        given.push(id);
    }
    let res = settle_given(queue, &given, action, delay, tokens)?;
    Ok(given.into_iter().zip(res).collect())
}

fn settle_given(
    queue: &str,
    given: &[String],
    action: Action,
    delay: Option<Interval>,
    tokens: Option<Vec<Option<TimestampWithTimeZone>>>,
) -> Result<Vec<Option<&'static str>>> {
    let at = positions(given)?;
    check_delay(&action, delay.as_ref())?;
    let due_now = delay.as_ref().is_some_and(|d| d.as_micros() == 0);
    // no delay: the row keeps no time (NULL), so that no claim whose
    // transaction began a moment before this one commits finds it not ready yet
    let delay = delay.filter(|_| !due_now);
    Spi::connect_mut(|client| {
        let q = desc::queue(client, queue)?;
        let form = q.shape.form;
        let tokens = lease_tokens(queue, form, given.len(), tokens)?;
        check_row_lock(queue, form, &action)?;
        let write = write_of(&q, queue, &action)?;
        let mut reached = Reached::of(queue, form, given, &tokens);
        let mut results = Results {
            at,
            res: vec![None; given.len()],
            stray: Vec::new(),
        };
        write_reached(client, &q, write, given, &mut reached, delay, &mut results);
        // a text id that is not in canonical form ('007' for a bigint) comes back canonical
        results.canonical(client, &q, given, &reached.run);
        let res = finish(client, &q, queue, given, &reached.run, &action, results.res);
        lower_mark(&q, queue, given, &reached.run, &res, due_now);
        Ok(res)
    })
}

/// Each given id's position; an id given twice is refused.
fn positions(given: &[String]) -> Result<HashMap<&str, usize>> {
    let mut at: HashMap<&str, usize> = HashMap::default();
    at.reserve(given.len());
    for (i, id) in given.iter().enumerate() {
        if at.insert(id.as_str(), i).is_some() {
            bail!(InvalidArgument, "id {id} is given twice");
        }
    }
    Ok(at)
}

/// A delay goes with retry_after, and retry_after needs one within range.
fn check_delay(action: &Action, delay: Option<&Interval>) -> Result<()> {
    let retry_after = *action == Action::Outcome(Outcome::RetryAfter);
    match (delay, retry_after) {
        (None, true) => bail!(InvalidArgument, "retry_after needs a delay"),
        (Some(d), true) if d.as_micros() < 0 => {
            bail!(InvalidArgument, "delay must not be negative")
        }
        (Some(d), true) if d.as_micros() > MAX_INTERVAL_MICROS => {
            bail!(InvalidArgument, "delay must be at most 100 years")
        }
        (Some(_), false) => bail!(
            InvalidArgument,
            "a delay applies to the retry_after outcome only"
        ),
        _ => Ok(()),
    }
}

/// The lease form's tokens, one per id, none NULL; the other forms take none.
fn lease_tokens(
    queue: &str,
    form: Form,
    n: usize,
    tokens: Option<Vec<Option<TimestampWithTimeZone>>>,
) -> Result<Vec<TimestampWithTimeZone>> {
    match (form, tokens) {
        (Form::Lease, None) => {
            bail!(InvalidArgument, "the lease form needs the delivery's token")
        }
        (Form::Lease, Some(t)) => {
            if t.len() != n {
                bail!(InvalidArgument, "{n} ids but {} tokens", t.len());
            }
            let mut v = Vec::with_capacity(n);
            for tok in t {
                match tok {
                    Some(tok) => v.push(tok),
                    None => bail!(
                        InvalidArgument,
                        "the lease form needs the delivery's token (got NULL)"
                    ),
                }
            }
            Ok(v)
        }
        (_, Some(_)) => bail!(
            InvalidArgument,
            "a token applies to the lease form only; queue \"{queue}\" uses {}",
            form.name()
        ),
        (_, None) => Ok(Vec::new()),
    }
}

/// A row_lock delivery is settled inside its claim's transaction, and given
/// back by rolling it back.
fn check_row_lock(queue: &str, form: Form, action: &Action) -> Result<()> {
    if form != Form::RowLock {
        return Ok(());
    }
    if !in_transaction_block() {
        let what = if *action == Action::Release {
            "release"
        } else {
            "completion"
        };
        bail!(
            NoTransaction,
            "row_lock {what} on queue \"{queue}\" outside a transaction block: the claim's transaction has ended, so this session holds no row"
        );
    }
    if *action == Action::Release {
        bail!(
            InvalidArgument,
            "a row_lock delivery is given back by rolling back its transaction (ROLLBACK), not by queue_release"
        );
    }
    Ok(())
}

/// The table statement the action writes.
fn write_of(q: &Queue, queue: &str, action: &Action) -> Result<Write> {
    Ok(match action {
        Action::Release => Write::Release,
        Action::Outcome(Outcome::Ack | Outcome::Drop) => Write::Ack,
        Action::Outcome(Outcome::Retry) => Write::Retry,
        Action::Outcome(Outcome::RetryAfter) if q.shape.retry_after.is_none() => {
            pgrx::warning!(
                "settle: queue \"{queue}\" has no retry_after column: retry_after is settled as retry"
            );
            Write::Retry
        }
        Action::Outcome(Outcome::RetryAfter) => Write::RetryAfter,
        Action::Outcome(Outcome::Custom(name)) => {
            if !q.outcomes.contains_key(name) {
                bail!(
                    InvalidArgument,
                    "queue \"{queue}\" has no custom outcome \"{name}\""
                );
            }
            Write::HeldOnly
        }
    })
}

/// The given ids that reach the statements: advisory only those whose key
/// this session holds, row_lock only those it claimed.
struct Reached {
    /// their positions among the given ids
    run: Vec<usize>,
    /// lease: their tokens, beside `run`
    tokens: Vec<TimestampWithTimeZone>,
    /// row_lock: the ctid each claim locked, where recorded, beside `run`
    tids: Vec<Option<held::Tid>>,
}

impl Reached {
    fn of(queue: &str, form: Form, given: &[String], tokens: &[TimestampWithTimeZone]) -> Reached {
        let mut r = Reached {
            run: Vec::with_capacity(given.len()),
            tokens: Vec::with_capacity(tokens.len()),
            tids: Vec::new(),
        };
        for (i, id) in given.iter().enumerate() {
            if form == Form::RowLock {
                match held::row_claim(queue, id) {
                    Some(tid) => r.tids.push(tid),
                    None => continue,
                }
            }
            if form == Form::Advisory {
                let key = held::key_of(queue, id);
                if !held::delivery_held(key) {
                    continue;
                }
                // released when this transaction ends: after the outcome commits, or
                // after any statement below fails and the transaction rolls back
                held::unlock_at_end(key);
            }
            r.run.push(i);
            if form == Form::Lease {
                r.tokens.push(tokens[i]);
            }
        }
        r
    }
}

/// Write the outcome of the reached ids with the fewest statements: a
/// row_lock ack by the ctids its claim locked, one plain statement for one
/// ack, one index scan for acks claimed together, else one statement for all.
fn write_reached(
    client: &SpiClient<'_>,
    q: &Queue,
    write: Write,
    given: &[String],
    reached: &mut Reached,
    delay: Option<Interval>,
    results: &mut Results<'_>,
) {
    let form = q.shape.form;
    if form == Form::RowLock && write == Write::Ack && q.shape.by_ctid() && !reached.run.is_empty()
    {
        ack_by_tids(client, q, &reached.run, &reached.tids, results);
    }
    // what the statements below still have to write
    let rest: Vec<&str> = reached
        .run
        .iter()
        .filter(|&&i| results.res[i].is_none())
        .map(|&i| given[i].as_str())
        .collect();
    if rest.is_empty() {
        return;
    }
    // the statement's tokens parameter; the reached ids' tokens are not used after it
    let tokens = |t: &mut Vec<TimestampWithTimeZone>| {
        if form == Form::Lease {
            std::mem::take(t).into()
        } else {
            DatumWithOid::null::<Vec<TimestampWithTimeZone>>()
        }
    };
    if rest.len() == 1 && write == Write::Ack {
        // the hot path: one delivery acked or dropped, one plain statement
        let plan = q.settle_plan(client, PlanKey::AckOne);
        let token: Option<TimestampWithTimeZone> = reached.tokens.first().copied();
        plan.run(&[rest[0].into(), token.into()]);
    } else if write == Write::Ack
        && form == Form::Lease
        && reached.tokens.windows(2).all(|w| w[0] == w[1])
    {
        // claimed together: one token, one index scan over the ids
        let plan = q.settle_plan(client, PlanKey::AckManyOneToken);
        plan.run(&[rest.into(), reached.tokens[0].into()]);
    } else if write == Write::Ack {
        let plan = q.settle_plan(client, PlanKey::AckMany);
        plan.run(&[rest.into(), tokens(&mut reached.tokens)]);
    } else {
        let plan = q.settle_plan(client, PlanKey::Settle(write));
        plan.run(&[
            rest.into(),
            tokens(&mut reached.tokens),
            delay.map(clock_plus).into(),
        ]);
    }
    results.read(None);
}

/// After the write: rows flagged for the dead letter moved there apart (a
/// distributed table), each move logged, a custom outcome's own SQL run per
/// row, row_lock's claims marked settled. The result of each given id.
fn finish(
    client: &mut SpiClient<'_>,
    q: &Queue,
    queue: &str,
    given: &[String],
    run: &[usize],
    action: &Action,
    mut res: Vec<Option<&'static str>>,
) -> Vec<Option<&'static str>> {
    let to_dead: Vec<usize> = run
        .iter()
        .copied()
        .filter(|&i| res[i] == Some("to_dead"))
        .collect();
    if !to_dead.is_empty() {
        let ids: Vec<&str> = to_dead.iter().map(|&i| given[i].as_str()).collect();
        move_dead_apart(client, q, &ids, false);
        for i in to_dead {
            res[i] = Some("dead_lettered");
        }
    }
    for &i in run {
        if res[i] == Some("dead_lettered") {
            warn_dead(q, &given[i]);
        }
    }
    if let Action::Outcome(Outcome::Custom(name)) = action {
        let plan = q.plan(client, PlanKey::Custom(name.clone()));
        for &i in run {
            if res[i].is_some() {
                let arg = typed_id(q.id_type_oid, &given[i]);
                spi(client.update(&*plan, None, &[arg]));
                res[i] = Some("custom");
            }
        }
    }
    if q.shape.form == Form::RowLock {
        for &i in run {
            if res[i].is_some() {
                held::row_settled(queue, &given[i]);
            }
        }
    }
    res
}

/// Rows at positions `run` ready again now (retried, released, delayed by
/// nothing: `due_now`): this session's next claim starts at or below them;
/// with an ordering key, a row settled any way may have freed its key's next row.
fn lower_mark(
    q: &Queue,
    queue: &str,
    given: &[String],
    run: &[usize],
    res: &[Option<&'static str>],
    due_now: bool,
) {
    let keyed = q.shape.ordering_key.is_some();
    let ready = run
        .iter()
        .filter(|&&i| {
            keyed && res[i].is_some()
                || matches!(res[i], Some("retried" | "released"))
                || due_now && res[i] == Some("delayed")
        })
        .map(|&i| given[i].as_str());
    mark::made_ready(queue, ready, mark_order(q));
}

/// How the mark compares this queue's ids.
fn mark_order(q: &Queue) -> mark::Order {
    if q.shape.int_id {
        mark::Order::Int
    } else if q.id_type_oid == pg_sys::UUIDOID {
        mark::Order::Uuid
    } else {
        mark::Order::Unknown
    }
}

/// row_lock ack / drop of the held rows at positions `run` by the ctids their
/// claim locked (`tids`, beside `run`; `Shape::ack_tids`). A row this
/// transaction updated or deleted since its claim is not found by its ctid,
/// and is left without a result for the by-id statement.
fn ack_by_tids(
    client: &SpiClient<'_>,
    q: &Queue,
    run: &[usize],
    tids: &[Option<held::Tid>],
    results: &mut Results<'_>,
) {
    let Some(tids) = tids.iter().copied().collect::<Option<Vec<held::Tid>>>() else {
        return;
    };
    // SAFETY: construct_array copies each element (a 6-byte, short-aligned tid)
    // into a new array in the current (SPI) memory context
    let array = unsafe {
        let mut elems: Vec<pg_sys::Datum> = tids
            .iter()
            .map(|t| pg_sys::Datum::from(t as *const held::Tid))
            .collect();
        let a = pg_sys::construct_array(
            elems.as_mut_ptr(),
            elems.len() as i32,
            pg_sys::TIDOID,
            std::mem::size_of::<held::Tid>() as i32,
            false,
            b's' as std::ffi::c_char,
        );
        DatumWithOid::new(pg_sys::Datum::from(a), pg_sys::TIDARRAYOID)
    };
    q.settle_plan(client, PlanKey::AckTids).run(&[array]);
    // cannot reach another row (see Shape::ack_tids); if it did, the panic
    // rolls the transaction back, and the write with it
    let mut asked = vec![false; results.res.len()];
    for &i in run {
        asked[i] = true;
    }
    results.read(Some(&asked));
}

/// The id as a datum of the id column's type (through the type's input function).
fn typed_id(type_oid: pg_sys::Oid, id: &str) -> DatumWithOid<'static> {
    unsafe {
        let mut input = pg_sys::InvalidOid;
        let mut ioparam = pg_sys::InvalidOid;
        pg_sys::getTypeInputInfo(type_oid, &mut input, &mut ioparam);
        let c = std::ffi::CString::new(id).expect("ids contain no NUL");
        let d = pg_sys::OidInputFunctionCall(input, c.as_ptr() as *mut _, ioparam, -1);
        DatumWithOid::new(d, type_oid)
    }
}

/// queue_complete for one id: the result, or the error of a row not held.
pub fn complete_one(
    queue: &str,
    id: &str,
    outcome: &str,
    delay: Option<Interval>,
    token: Option<TimestampWithTimeZone>,
) -> Result<String> {
    let outcome = Outcome::parse(outcome)?;
    let tokens = token.map(|t| vec![Some(t)]);
    let r = settle(
        queue,
        vec![Some(id.to_owned())],
        Action::Outcome(outcome),
        delay,
        tokens,
    )?;
    one_result(queue, id, r, token.is_some())
}

fn one_result(queue: &str, id: &str, mut r: Settled, lease: bool) -> Result<String> {
    match r.pop().and_then(|(_, res)| res) {
        Some(res) => Ok(res.to_owned()),
        None if lease => Err(SettleError::LeaseLost(format!(
            "lease lost: row {id} of queue \"{queue}\" no longer holds this delivery's token"
        ))),
        None => Err(SettleError::NotHeld(format!(
            "row {id} of queue \"{queue}\" is not held by this session (locked by another transaction, settled already, or gone)"
        ))),
    }
}

pub fn release_one(queue: &str, id: &str, token: Option<TimestampWithTimeZone>) -> Result<String> {
    let tokens = token.map(|t| vec![Some(t)]);
    let r = settle(
        queue,
        vec![Some(id.to_owned())],
        Action::Release,
        None,
        tokens,
    )?;
    one_result(queue, id, r, token.is_some())
}

pub fn extend(
    queue: &str,
    id: &str,
    token: Option<TimestampWithTimeZone>,
    lease: Option<Interval>,
) -> Result<TimestampWithTimeZone> {
    let lease = lease_interval(lease)?;
    let Some(token) = token else {
        bail!(InvalidArgument, "queue_extend needs the delivery's token")
    };
    Spi::connect_mut(|client| {
        let q = desc::queue(client, queue)?;
        if q.shape.form != Form::Lease {
            bail!(
                InvalidArgument,
                "queue_extend applies to the lease form only; queue \"{queue}\" uses {}",
                q.shape.form.name()
            );
        }
        let plan = q.plan(client, PlanKey::Extend);
        let next = lease_token(lease);
        let t = spi(client.update(&*plan, None, &[id.into(), token.into(), next.into()]));
        match t
            .into_iter()
            .next()
            .and_then(|r| spi(r.get::<TimestampWithTimeZone>(1)))
        {
            Some(tok) => Ok(tok),
            None => Err(SettleError::LeaseLost(format!(
                "lease lost: row {id} of queue \"{queue}\" no longer holds this delivery's token"
            ))),
        }
    })
}
