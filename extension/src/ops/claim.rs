//! Claims in three forms: row_lock, lease, advisory.

use crate::desc::{self, spi, PlanKey, Queue};
use crate::error::{bail, Result};
use crate::held;
use crate::keys;
use crate::mark;
use crate::rawjsonb::RawJsonb;
use crate::sql::{Form, Start};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgMemoryContexts;
// Fx: the keys are ids this backend chose or was given, and SipHash cost a
// measurable share of a 100-row settle
use super::dead::{move_taken_dead, warn_dead_at_claim};
use super::reach::{self, Reach, Read};
use super::rows::{in_transaction_block, spi_rows, text_of};
use super::time::{lease_interval, lease_token};
use rustc_hash::FxHashSet as HashSet;

/// Largest batch one claim takes.
pub const MAX_BATCH: i32 = 10_000;

pub struct Delivery {
    pub id: String,
    pub attempt: Option<i32>,
    pub token: Option<TimestampWithTimeZone>,
    pub payload: Option<RawJsonb>,
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
                warn_dead_at_claim(q, &id);
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
        // a keyed queue with few keys: each key's head, found key by key
        let walk = keys::walk(client, &q);
        // a queue claimed in priority order is scanned from the start every time
        let keeps_mark = q.shape.keeps_mark() && !walk;
        let from = keeps_mark.then(|| mark::start(queue)).flatten();
        let from_bottom = (keeps_mark && from.is_none()).then(std::time::Instant::now);
        match q.shape.form {
            Form::RowLock => {
                if !in_transaction_block() {
                    bail!(
                        NoTransaction,
                        "row_lock claim on queue \"{queue}\" outside a transaction block: the lock would end with this statement"
                    );
                }
                claim_row_lock(client, &q, queue, batch as i64, walk, from, &mut out)
            }
            Form::Lease => {
                let token = lease_token(lease_interval(lease)?);
                claim_lease(
                    client,
                    &q,
                    batch as i64,
                    walk,
                    from,
                    token,
                    &mut out,
                    &mut dead,
                );
            }
            Form::Advisory => {
                advisory_claim(client, &q, batch as usize, walk, from, &mut out, &mut dead)
            }
        }
        if let Some(t0) = from_bottom {
            mark::rescan_took(queue, t0.elapsed());
        }
        // oldest first: the last is the highest id taken
        if let Some(last) = out.last().filter(|_| keeps_mark) {
            mark::claimed(queue, &last.id);
        }
        Ok(out)
    })
}

/// A row_lock claim of `batch` rows: the first ready rows, locked. A keyed
/// claim in id order that came back short at its bound goes on (`reach`).
fn claim_row_lock(
    client: &SpiClient<'_>,
    q: &Queue,
    queue: &str,
    batch: i64,
    walk: bool,
    from: Option<String>,
    out: &mut Vec<Delivery>,
) {
    let mut want = batch;
    let mut reach = Reach::first(client, q, walk, from);
    let first = reach.read;
    loop {
        // rows this transaction already claimed are locked by it, which
        // SKIP LOCKED does not skip: leave them out, or they come again
        let held = held::rows_claimed(queue);
        let except = !held.is_empty();
        let mut args = vec![want.into()];
        if except {
            args.push(held.clone().into());
        }
        let (read, from_mark) = (reach.read, reach.from.is_some());
        let plan = q.claim_plan(
            client,
            |limit| match (read, except) {
                (Read::Keys, _) => PlanKey::ClaimRowLockHeads { except, limit },
                (_, false) => read.key(PlanKey::ClaimRowLock {
                    from: from_mark,
                    limit,
                }),
                (_, true) => read.key(PlanKey::ClaimRowLockExcept {
                    from: from_mark,
                    limit,
                }),
            },
            want,
        );
        args.extend(reach.from.clone().map(Into::into));
        let t = spi(client.select(&*plan, None, &args));
        let got = t.len();
        let before = out.len();
        let mut tids = Vec::with_capacity(got);
        // a row_lock claim flags no row dead
        read_claimed(
            q,
            got,
            out,
            &mut Vec::new(),
            q.shape.by_ctid().then_some(&mut tids),
        );
        held::rows_claimed_now(
            queue,
            out[before..]
                .iter()
                .enumerate()
                .map(|(i, d)| (d.id.as_str(), tids.get(i).copied())),
        );
        let taken = out[before..].iter().map(|d| d.id.as_str());
        let got = got as i64;
        if !reach.go_on(client, q, want, got, taken, 0, &held) {
            break;
        }
        want -= got;
    }
    // one statement's rows come in claim order
    if reach.read != first {
        oldest_first(q, out);
    }
}

/// A lease claim of `batch` rows with the lease `token`, as [`claim_row_lock`]
/// goes on.
#[allow(clippy::too_many_arguments)]
fn claim_lease(
    client: &SpiClient<'_>,
    q: &Queue,
    batch: i64,
    walk: bool,
    from: Option<String>,
    token: TimestampWithTimeZone,
    out: &mut Vec<Delivery>,
    dead: &mut Vec<String>,
) {
    let mut want = batch;
    let mut reach = Reach::first(client, q, walk, from);
    loop {
        let (read, from_mark) = (reach.read, reach.from.is_some());
        let plan = q.claim_plan(
            client,
            |limit| match read {
                Read::Keys => PlanKey::TakeHeads { limit },
                _ => read.key(PlanKey::Take {
                    from: from_mark,
                    limit,
                }),
            },
            want,
        );
        let mut args = vec![want.into(), token.into()];
        args.extend(reach.from.clone().map(Into::into));
        let t = spi(client.select(&*plan, None, &args));
        let got = t.len() as i64;
        let before = out.len();
        read_claimed(q, t.len(), out, dead, None);
        let taken = out[before..].iter().map(|d| d.id.as_str());
        if !reach.go_on(client, q, want, got, taken, got, &[]) {
            break;
        }
        want -= got;
    }
    oldest_first(q, out);
    move_taken_dead(client, q, dead);
}

/// Put taken rows in claim order where the statement leaves that to us
/// (`Shape::sorted_after_take`: an integer id and no priority); each id is
/// parsed once, not at every comparison.
fn oldest_first(q: &Queue, taken: &mut [Delivery]) {
    if q.shape.sorted_after_take() {
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
    // candidates from a keyed queue's heads (`keys`; no mark then), else in claim order
    walk: bool,
    from: Option<String>,
    out: &mut Vec<Delivery>,
    dead: &mut Vec<String>,
) {
    let page = (batch as i64) * 2 + 16;
    let mark = held::claim_mark();
    let (mut start, mut at) = match from {
        Some(_) => (Start::From, from.clone()),
        None => (Start::Bottom, None),
    };
    // the first page starts at the session's mark, each next one past the
    // last (reach.from: the page's start when a bounded read came back short)
    let mut reach = Reach::first(client, q, walk, from);
    // candidates examined so far: where a page in priority order starts
    let mut passed = 0usize;
    // rounds that read on past a bounded keyed read's bound are not counted
    let mut rounds = 0;
    let mut resort = false;
    while rounds < 16 {
        rounds += 1;
        let want = batch - out.len();
        if want == 0 {
            break;
        }
        let page_from = match start {
            Start::Bottom => None,
            Start::From | Start::After => at.clone(),
        };
        let read = reach.read;
        let plan = q.claim_plan(
            client,
            |limit| match read {
                Read::Keys => PlanKey::CandidatesHeads { start, limit },
                _ => read.key(PlanKey::Candidates { start, limit }),
            },
            page,
        );
        let mut args = vec![page.into()];
        args.extend(at.as_deref().map(Into::into));
        let t = spi(client.select(&*plan, None, &args));
        let cands: Vec<(String, i64)> = t
            .map(|r| {
                (
                    spi(r.get::<String>(1)).unwrap(),
                    spi(r.get::<i64>(2)).unwrap(),
                )
            })
            .collect();
        let full_page = cands.len() as i64 == page;
        if read == Read::InOrder {
            let ids = cands.iter().map(|c| c.0.as_str());
            reach::after_unbounded(q, page_from.as_deref(), page, ids, !full_page);
        }
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
        start = Start::After;
        passed += examined.max(1);
        at = if q.shape.priority.is_some() {
            Some(passed.to_string())
        } else {
            cands.get(examined.max(1) - 1).map(|c| c.0.clone())
        };
        let given_back = take_locked(client, q, mark, &locked, out, dead);
        // the last page, unless the take gave rows back (the take tests a
        // touched row's key only once the session holds it) and the page has
        // candidates this round did not examine
        if !full_page && (given_back == 0 || examined >= cands.len()) {
            reach.from = page_from;
            if read != Read::Bounded || !reach.after_short(client, q, page, 0, &[]) {
                break;
            }
            at = reach.from.clone();
            start = if at.is_some() {
                Start::From
            } else {
                Start::Bottom
            };
            // the heads may lie below the rows taken so far
            resort |= reach.read == Read::Keys;
            rounds -= 1;
        }
    }
    if resort {
        oldest_first(q, out);
    }
}

/// The advisory take of the rows whose keys this round `locked`, each key
/// handed to the claim (`mark`) or given back; returns how many rows were no
/// longer ready (their keys given back).
fn take_locked(
    client: &SpiClient<'_>,
    q: &Queue,
    mark: usize,
    locked: &[(String, i64)],
    out: &mut Vec<Delivery>,
    dead: &mut Vec<String>,
) -> usize {
    if locked.is_empty() {
        return 0;
    }
    let ids: Vec<&str> = locked.iter().map(|(i, _)| i.as_str()).collect();
    // a generic plan: `id = ANY($1)` would be planned again for every
    // claim otherwise (see `desc::GenericPlan`)
    q.settle_plan(
        client,
        PlanKey::Take {
            from: false,
            limit: None,
        },
    )
    .run(&[ids.into()]);
    // SAFETY: right after the statement ran
    let rows = unsafe { pg_sys::SPI_processed } as usize;
    let before = out.len();
    let dead_before = dead.len();
    read_claimed(q, rows, out, dead, None);
    // rounds go up the claim order, so each round's rows sort on their own
    oldest_first(q, &mut out[before..]);
    let taken: HashSet<&str> = out[before..].iter().map(|d| d.id.as_str()).collect();
    move_taken_dead(client, q, &dead[dead_before..]);
    let moved: HashSet<&str> = dead[dead_before..].iter().map(|s| s.as_str()).collect();
    let mut given_back = 0;
    for (id, key) in locked {
        if taken.contains(id.as_str()) {
            held::claim_keep(mark, *key);
        } else if !moved.contains(id.as_str()) {
            // no longer ready: give the key back now (we wrote nothing)
            held::claim_keep(mark, *key);
            held::unlock(*key);
            given_back += 1;
        }
        // moved rows keep their key until the move commits
    }
    given_back
}
