//! What each SQL function does: claim in three forms, settle with an outcome,
//! extend, release, stats, requeue. SQL text comes from `sql.rs`, plans from
//! `desc.rs`; this module decides, checks arguments and keeps advisory state.

use crate::desc::{self, spi, PlanKey, Queue};
use crate::error::{bail, Result, SettleError};
use crate::held;
use crate::rawjsonb::RawJsonb;
use crate::sql::{Form, Write};
use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgMemoryContexts;
// Fx: the keys are ids this backend chose or was given, and SipHash cost a
// measurable share of a 100-row settle
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Largest batch one claim takes.
pub const MAX_BATCH: i32 = 10_000;
/// Lease when none is given.
pub const DEFAULT_LEASE_MICROS: i64 = 30_000_000;
/// Longest delay or lease (100 years): beyond it timestamps overflow.
pub const MAX_INTERVAL_MICROS: i128 = 100 * 366 * 86_400 * 1_000_000;

pub struct Delivery {
    pub id: String,
    pub attempt: Option<i32>,
    pub token: Option<TimestampWithTimeZone>,
    pub payload: Option<RawJsonb>,
}

fn in_transaction_block() -> bool {
    unsafe { pg_sys::IsTransactionBlock() }
}

fn lease_interval(lease: Option<Interval>) -> Result<Interval> {
    let lease = lease.unwrap_or_else(|| Interval::from_micros(DEFAULT_LEASE_MICROS));
    if lease.as_micros() < 1_000 {
        bail!(InvalidArgument, "a lease must be at least 1 millisecond");
    }
    if lease.as_micros() > MAX_INTERVAL_MICROS {
        bail!(InvalidArgument, "a lease must be at most 100 years");
    }
    Ok(lease)
}

fn warn_dead(q: &Queue, id: &str) {
    let s = &q.shape;
    pgrx::warning!(
        "settle: queue \"{}\": row {} reached max_attempts ({}) and was moved to the dead letter",
        s.queue,
        id,
        s.max_attempts.unwrap_or_default()
    );
}

/// Rows of a claim statement: (dead, id, attempt, token, payload..., [ctid]).
/// The payload is one jsonb column (`to_jsonb` in the statement) or the row's
/// columns, written as jsonb here (`rowjson`); either way it is copied out of
/// SPI's memory. With `tids` the statement's last column is the row's ctid
/// (a row_lock claim with `Shape::by_ctid`), pushed there row for row.
fn read_claimed(
    q: &Queue,
    // the rows of the claim statement just run, in SPI's current tuple table
    rows: usize,
    out: &mut Vec<Delivery>,
    dead: &mut Vec<String>,
    mut tids: Option<&mut Vec<held::Tid>>,
) {
    let tail = usize::from(tids.is_some());
    // values that must outlive SPI are copied to the context SPI was entered from
    let outer = unsafe { PgMemoryContexts::CurrentMemoryContext.parent() }
        .expect("SPI runs under the function's memory context");
    let mut enc = q.encoder.as_ref().map(|e| e.borrow_mut());
    unsafe {
        spi_rows(rows, |values, nulls| {
            let is_dead = !nulls[0] && bool::from_datum(values[0], false).unwrap_or(false);
            let id = if nulls[1] {
                String::new()
            } else {
                text_of(values[1])
            };
            if is_dead {
                warn_dead(q, &id);
                dead.push(id);
                return;
            }
            if let Some(tids) = &mut tids {
                let last = values.len() - 1;
                assert!(!nulls[last], "settle: a claimed row has a ctid");
                // SAFETY: a tid datum points to its ItemPointerData
                tids.push(*(values[last].cast_mut_ptr::<held::Tid>()));
            }
            let (values, nulls) = (&values[..values.len() - tail], &nulls[..nulls.len() - tail]);
            let payload = match &mut enc {
                Some(e) => {
                    assert_eq!(
                        values.len(),
                        4 + e.width(),
                        "settle: claim columns and row encoder differ"
                    );
                    Some(RawJsonb::from_allocated(e.encode(
                        &values[4..],
                        &nulls[4..],
                        outer.value(),
                    )))
                }
                None => RawJsonb::from_datum_in_memory_context(
                    PgMemoryContexts::For(outer.value()),
                    values[4],
                    nulls[4],
                    pg_sys::JSONBOID,
                ),
            };
            out.push(Delivery {
                id,
                attempt: i32::from_datum(values[2], nulls[2]),
                token: TimestampWithTimeZone::from_datum(values[3], nulls[3]),
                payload,
            });
        });
    }
}

/// Each of the `rows` result rows of the last SPI statement run, deformed once
/// into values and nulls (pgrx's per-column `get` walks the tuple for every
/// column it is asked for).
///
/// # Safety
/// The last SPI statement run returned `rows` rows, and its tuple table has
/// not been freed.
unsafe fn spi_rows(rows: usize, mut each: impl FnMut(&[pg_sys::Datum], &[bool])) {
    let tt = pg_sys::SPI_tuptable;
    assert!(
        !tt.is_null() && (*tt).numvals as usize == rows,
        "settle: a statement's result is SPI's current tuple table"
    );
    let td = (*tt).tupdesc;
    let natts = (*td).natts as usize;
    let mut values = vec![pg_sys::Datum::from(0usize); natts];
    let mut nulls = vec![true; natts];
    for i in 0..rows {
        pg_sys::heap_deform_tuple(
            *(*tt).vals.add(i),
            td,
            values.as_mut_ptr(),
            nulls.as_mut_ptr(),
        );
        each(&values, &nulls);
    }
}

/// A text datum's bytes as a String.
///
/// # Safety
/// `d` is a valid, non-null text datum.
unsafe fn text_of(d: pg_sys::Datum) -> String {
    String::from_utf8_lossy(crate::rowjson::detoasted(d)).into_owned()
}

pub fn claim(queue: &str, batch: Option<i32>, lease: Option<Interval>) -> Result<Vec<Delivery>> {
    let batch = batch.unwrap_or(1);
    if !(1..=MAX_BATCH).contains(&batch) {
        bail!(
            InvalidArgument,
            "batch must be between 1 and {MAX_BATCH}, got {batch}"
        );
    }
    Spi::connect_mut(|client| {
        let q = desc::queue(client, queue)?;
        if q.shape.form != Form::Lease && lease.is_some() {
            bail!(
                InvalidArgument,
                "lease applies to the lease form only; queue \"{queue}\" uses {}",
                q.shape.form.name()
            );
        }
        let mut out = Vec::with_capacity(batch as usize);
        let mut dead = Vec::new();
        match q.shape.form {
            Form::RowLock => {
                if !in_transaction_block() {
                    bail!(
                        NoTransaction,
                        "row_lock claim on queue \"{queue}\" outside a transaction block: the lock would end with this statement"
                    );
                }
                // rows this transaction already claimed are locked by it, which
                // SKIP LOCKED does not skip: leave them out, or they come again
                let held = held::rows_claimed(queue);
                let t = if held.is_empty() {
                    let plan = q.claim_plan(
                        client,
                        |limit| PlanKey::ClaimRowLock { limit },
                        batch as i64,
                    );
                    spi(client.select(&*plan, None, &[(batch as i64).into()]))
                } else {
                    let plan = q.claim_plan(
                        client,
                        |limit| PlanKey::ClaimRowLockExcept { limit },
                        batch as i64,
                    );
                    spi(client.select(&*plan, None, &[(batch as i64).into(), held.into()]))
                };
                let mut tids = Vec::with_capacity(batch as usize);
                read_claimed(
                    &q,
                    t.len(),
                    &mut out,
                    &mut dead,
                    q.shape.by_ctid().then_some(&mut tids),
                );
                held::rows_claimed_now(
                    queue,
                    out.iter()
                        .enumerate()
                        .map(|(i, d)| (d.id.as_str(), tids.get(i).copied())),
                );
            }
            Form::Lease => {
                let lease = lease_interval(lease)?;
                let plan = q.claim_plan(client, |limit| PlanKey::Take { limit }, batch as i64);
                let t = spi(client.select(&*plan, None, &[(batch as i64).into(), lease.into()]));
                read_claimed(&q, t.len(), &mut out, &mut dead, None);
                oldest_first(&q, &mut out);
                move_taken_dead(client, &q, &dead);
            }
            Form::Advisory => advisory_claim(client, &q, batch as usize, &mut out, &mut dead),
        }
        Ok(out)
    })
}

/// Move the rows a take flagged dead (`Shape::take`) into the dead letter. The
/// claim holds them, so every one is moved; anything else is a bug, and the
/// claim fails (its transaction rolls back) rather than lose a row.
fn move_taken_dead(client: &SpiClient<'_>, q: &Queue, dead: &[String]) {
    if dead.is_empty() {
        return;
    }
    let ids: Vec<&str> = dead.iter().map(|s| s.as_str()).collect();
    q.settle_plan(client, PlanKey::MoveTakenDead)
        .run(&[ids.into()]);
    // SAFETY: right after the statement ran
    let moved = unsafe { pg_sys::SPI_processed } as usize;
    assert_eq!(
        moved,
        dead.len(),
        "settle: queue \"{}\": a claim moved {moved} of the {} rows it took past max_attempts",
        q.shape.queue,
        dead.len()
    );
}

/// Put taken rows with an integer id oldest first (`Shape::taken_oldest_first`
/// orders any other id type in the statement); each id is parsed once, not at
/// every comparison.
fn oldest_first(q: &Queue, taken: &mut [Delivery]) {
    if q.shape.int_id {
        taken.sort_by_cached_key(|d| d.id.parse::<i64>().unwrap_or(i64::MAX));
    }
}

/// Walk ready rows in id order, lock keys with pg_try_advisory_lock, re-check
/// the locked rows with a fresh snapshot (the previous holder may have settled
/// them between our read and our lock) and count the attempt. Every key locked
/// for a row not returned is unlocked again; until the claim hands a key over,
/// it sits in the transaction-end unlock list, so an error half-way leaks none.
fn advisory_claim(
    client: &SpiClient<'_>,
    q: &Queue,
    batch: usize,
    out: &mut Vec<Delivery>,
    dead: &mut Vec<String>,
) {
    let page = (batch as i64) * 2 + 16;
    let mark = held::claim_mark();
    let mut after: Option<String> = None;
    for _round in 0..16 {
        let want = batch - out.len();
        if want == 0 {
            break;
        }
        let t = match &after {
            None => spi(client.select(
                &*q.claim_plan(
                    client,
                    |limit| PlanKey::Candidates {
                        after: false,
                        limit,
                    },
                    page,
                ),
                None,
                &[page.into()],
            )),
            Some(a) => spi(client.select(
                &*q.claim_plan(
                    client,
                    |limit| PlanKey::Candidates { after: true, limit },
                    page,
                ),
                None,
                &[page.into(), a.as_str().into()],
            )),
        };
        let cands: Vec<(String, i64)> = t
            .map(|r| {
                (
                    spi(r.get::<String>(1)).unwrap(),
                    spi(r.get::<i64>(2)).unwrap(),
                )
            })
            .collect();
        let full_page = cands.len() as i64 == page;
        let mut locked: Vec<(String, i64)> = Vec::new();
        let mut examined = 0;
        for (id, key) in &cands {
            if locked.len() == want {
                break;
            }
            examined += 1;
            // a session lock is re-entrant: never hand this session a row it already holds
            if held::lock_held(*key) {
                continue;
            }
            if held::try_lock(*key) {
                held::unlock_at_end(*key);
                locked.push((id.clone(), *key));
            }
        }
        after = cands.get(examined.max(1) - 1).map(|c| c.0.clone());
        if !locked.is_empty() {
            let ids: Vec<&str> = locked.iter().map(|(i, _)| i.as_str()).collect();
            // a generic plan: `id = ANY($1)` would be planned again for every
            // claim otherwise (see `desc::GenericPlan`)
            q.settle_plan(client, PlanKey::Take { limit: None })
                .run(&[ids.into()]);
            // SAFETY: right after the statement ran
            let rows = unsafe { pg_sys::SPI_processed } as usize;
            let before = out.len();
            let dead_before = dead.len();
            read_claimed(q, rows, out, dead, None);
            // rounds go up the ids, so each round's rows sort on their own
            oldest_first(q, &mut out[before..]);
            let taken: HashSet<&str> = out[before..].iter().map(|d| d.id.as_str()).collect();
            move_taken_dead(client, q, &dead[dead_before..]);
            let moved: HashSet<&str> = dead[dead_before..].iter().map(|s| s.as_str()).collect();
            for (id, key) in &locked {
                if taken.contains(id.as_str()) {
                    held::claim_keep(mark, *key);
                } else if !moved.contains(id.as_str()) {
                    // no longer ready: give the key back now (we wrote nothing)
                    held::claim_keep(mark, *key);
                    held::unlock(*key);
                }
                // moved rows keep their key until the move commits
            }
        }
        if !full_page {
            break;
        }
    }
}

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
    let mut at: HashMap<&str, usize> = HashMap::default();
    at.reserve(given.len());
    for (i, id) in given.iter().enumerate() {
        if at.insert(id.as_str(), i).is_some() {
            bail!(InvalidArgument, "id {id} is given twice");
        }
    }
    let retry_after = action == Action::Outcome(Outcome::RetryAfter);
    match (&delay, retry_after) {
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
        _ => {}
    }
    Spi::connect_mut(|client| {
        let q = desc::queue(client, queue)?;
        let s = &q.shape;
        let form = s.form;
        // token checks
        let tokens: Vec<TimestampWithTimeZone> = match (form, tokens) {
            (Form::Lease, None) => {
                bail!(InvalidArgument, "the lease form needs the delivery's token")
            }
            (Form::Lease, Some(t)) => {
                if t.len() != given.len() {
                    bail!(InvalidArgument, "{} ids but {} tokens", given.len(), t.len());
                }
                let mut v = Vec::with_capacity(t.len());
                for tok in t {
                    match tok {
                        Some(tok) => v.push(tok),
                        None => bail!(
                            InvalidArgument,
                            "the lease form needs the delivery's token (got NULL)"
                        ),
                    }
                }
                v
            }
            (_, Some(_)) => bail!(
                InvalidArgument,
                "a token applies to the lease form only; queue \"{queue}\" uses {}",
                form.name()
            ),
            (_, None) => Vec::new(),
        };
        if form == Form::RowLock && !in_transaction_block() {
            let what = if action == Action::Release {
                "release"
            } else {
                "completion"
            };
            bail!(
                NoTransaction,
                "row_lock {what} on queue \"{queue}\" outside a transaction block: the claim's transaction has ended, so this session holds no row"
            );
        }
        if form == Form::RowLock && action == Action::Release {
            bail!(
                InvalidArgument,
                "a row_lock delivery is given back by rolling back its transaction (ROLLBACK), not by queue_release"
            );
        }
        let write = match &action {
            Action::Release => Write::Release,
            Action::Outcome(Outcome::Ack | Outcome::Drop) => Write::Ack,
            Action::Outcome(Outcome::Retry) => Write::Retry,
            Action::Outcome(Outcome::RetryAfter) => {
                if s.retry_after.is_none() {
                    pgrx::warning!(
                        "settle: queue \"{queue}\" has no retry_after column: retry_after is settled as retry"
                    );
                    Write::Retry
                } else {
                    Write::RetryAfter
                }
            }
            Action::Outcome(Outcome::Custom(name)) => {
                if !q.outcomes.contains_key(name) {
                    bail!(
                        InvalidArgument,
                        "queue \"{queue}\" has no custom outcome \"{name}\""
                    );
                }
                Write::HeldOnly
            }
        };
        // positions of the ids that reach the statements: advisory only those
        // whose key this session holds, row_lock only those it claimed
        let mut run: Vec<usize> = Vec::with_capacity(given.len());
        let mut run_tokens = Vec::with_capacity(tokens.len());
        // row_lock: the ctid each claim locked, where recorded, beside `run`
        let mut run_tids: Vec<Option<held::Tid>> = Vec::new();
        for (i, id) in given.iter().enumerate() {
            if form == Form::RowLock {
                match held::row_claim(queue, id) {
                    Some(tid) => run_tids.push(tid),
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
            run.push(i);
            if form == Form::Lease {
                run_tokens.push(tokens[i]);
            }
        }
        let mut results = Results {
            at,
            res: vec![None; given.len()],
            stray: Vec::new(),
        };
        if form == Form::RowLock && write == Write::Ack && s.by_ctid() && !run.is_empty() {
            ack_by_tids(client, &q, &run, &run_tids, &mut results);
        }
        // what the statements below still have to write
        let rest: Vec<&str> = run
            .iter()
            .filter(|&&i| results.res[i].is_none())
            .map(|&i| given[i].as_str())
            .collect();
        if rest.len() == 1 && write == Write::Ack {
            // the hot path: one delivery acked or dropped, one plain statement
            let plan = q.settle_plan(client, PlanKey::AckOne);
            let token: Option<TimestampWithTimeZone> = run_tokens.first().copied();
            plan.run(&[rest[0].into(), token.into()]);
            results.read(None);
        } else if write == Write::Ack
            && form == Form::Lease
            && !rest.is_empty()
            && run_tokens.windows(2).all(|w| w[0] == w[1])
        {
            // claimed together: one token, one index scan over the ids
            let plan = q.settle_plan(client, PlanKey::AckManyOneToken);
            plan.run(&[rest.into(), run_tokens[0].into()]);
            results.read(None);
        } else if write == Write::Ack && !rest.is_empty() {
            let plan = q.settle_plan(client, PlanKey::AckMany);
            let tokens = if form == Form::Lease {
                run_tokens.clone().into()
            } else {
                DatumWithOid::null::<Vec<TimestampWithTimeZone>>()
            };
            plan.run(&[rest.into(), tokens]);
            results.read(None);
        } else if !rest.is_empty() {
            let plan = q.settle_plan(client, PlanKey::Settle(write));
            let args: [DatumWithOid; 3] = [
                rest.into(),
                if form == Form::Lease {
                    run_tokens.into()
                } else {
                    DatumWithOid::null::<Vec<TimestampWithTimeZone>>()
                },
                delay.into(),
            ];
            plan.run(&args);
            results.read(None);
        }
        // a text id that is not in canonical form ('007' for a bigint) comes back canonical
        results.canonical(client, &q, given, &run);
        let mut res = results.res;
        for &i in &run {
            if res[i] == Some("dead_lettered") {
                warn_dead(&q, &given[i]);
            }
        }
        if let Action::Outcome(Outcome::Custom(name)) = &action {
            let plan = q.plan(client, PlanKey::Custom(name.clone()));
            for &i in &run {
                if res[i].is_some() {
                    let arg = typed_id(q.id_type_oid, &given[i]);
                    spi(client.update(&*plan, None, &[arg]));
                    res[i] = Some("custom");
                }
            }
        }
        if form == Form::RowLock {
            for &i in &run {
                if res[i].is_some() {
                    held::row_settled(queue, &given[i]);
                }
            }
        }
        Ok(res)
    })
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
        let t = spi(client.update(&*plan, None, &[id.into(), token.into(), lease.into()]));
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

pub struct Stats {
    pub queue: String,
    pub form: String,
    pub ready: i64,
    pub delayed: i64,
    pub in_flight: Option<i64>,
    pub dead: Option<i64>,
    pub oldest_ready_age: Option<Interval>,
}

pub fn stats(queue: Option<&str>) -> Result<Vec<Stats>> {
    Spi::connect_mut(|client| {
        let names: Vec<String> = match queue {
            Some(q) => vec![q.to_owned()],
            None => spi(client.select(
                &*format!(
                    "SELECT queue FROM {}.settle_queues ORDER BY queue",
                    desc::ext_schema(client)
                ),
                None,
                &[],
            ))
            .map(|r| spi(r.get::<String>(1)).unwrap())
            .collect(),
        };
        let mut out = Vec::new();
        for name in names {
            let q = desc::queue(client, &name)?;
            let t = spi(client.select(&*q.plan(client, PlanKey::Stats), None, &[]));
            let r = t.first();
            let dead = if q.shape.dead.is_some() {
                spi(client
                    .select(&*q.plan(client, PlanKey::DeadCount), None, &[])
                    .and_then(|t| t.first().get_one::<i64>()))
            } else {
                None
            };
            out.push(Stats {
                queue: name,
                form: q.shape.form.name().to_owned(),
                ready: spi(r.get::<i64>(1)).unwrap_or(0),
                delayed: spi(r.get::<i64>(2)).unwrap_or(0),
                in_flight: spi(r.get::<i64>(3)),
                dead,
                oldest_ready_age: spi(r.get::<Interval>(4)),
            });
        }
        Ok(out)
    })
}

pub fn requeue_dead(queue: &str, ids: Option<Vec<Option<String>>>) -> Result<i64> {
    let ids: Option<Vec<String>> = match ids {
        None => None,
        Some(v) => {
            let mut o = Vec::with_capacity(v.len());
            for i in v {
                match i {
                    Some(i) => o.push(i),
                    None => bail!(InvalidArgument, "ids must not be NULL"),
                }
            }
            Some(o)
        }
    };
    Spi::connect_mut(|client| {
        let q = desc::queue(client, queue)?;
        if q.shape.dead.is_none() {
            bail!(InvalidArgument, "queue \"{queue}\" has no dead letter (register it with max_attempts and dead_letter)");
        }
        let plan = q.plan(client, PlanKey::Requeue);
        let t = spi(client.update(&*plan, None, &[ids.into()]));
        Ok(t.len() as i64)
    })
}

/// Every statement of a queue, named (see queue_sql()).
pub fn statements(s: &crate::sql::Shape) -> Vec<(String, String)> {
    let mut v = Vec::new();
    match s.form {
        Form::RowLock => {
            v.push(("claim".into(), s.claim_row_lock(false, None)));
            v.push(("claim_again".into(), s.claim_row_lock(true, None)));
        }
        Form::Lease => v.push(("claim".into(), s.take(None))),
        Form::Advisory => {
            v.push((
                "claim_candidates".into(),
                s.advisory_candidates(false, None),
            ));
            v.push((
                "claim_candidates_after".into(),
                s.advisory_candidates(true, None),
            ));
            v.push(("claim_take".into(), s.take(None)));
        }
    }
    if let Some(m) = s.move_taken_dead() {
        v.push(("claim_move_dead".into(), m));
    }
    v.push(("ack_one".into(), s.ack_one()));
    v.push(("ack_many".into(), s.ack_many()));
    if s.form == Form::Lease {
        v.push(("ack_many_one_token".into(), s.ack_many_one_token()));
    }
    if s.by_ctid() {
        v.push(("ack_tids".into(), s.ack_tids()));
    }
    v.push(("ack".into(), s.settle(Write::Ack)));
    v.push(("retry".into(), s.settle(Write::Retry)));
    if s.retry_after.is_some() {
        v.push(("retry_after".into(), s.settle(Write::RetryAfter)));
    }
    if s.form != Form::RowLock {
        v.push(("release".into(), s.settle(Write::Release)));
    }
    if s.form == Form::Lease {
        v.push(("extend".into(), s.extend()));
    }
    v.push(("custom_check".into(), s.settle(Write::HeldOnly)));
    v.push(("stats".into(), s.stats()));
    if let Some(r) = s.requeue_dead() {
        v.push(("requeue_dead".into(), r));
    }
    v
}
