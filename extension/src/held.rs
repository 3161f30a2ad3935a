//! What this backend holds, per session: the advisory form's deliveries and
//! the keys it must unlock when the current transaction ends, and the rows
//! its row_lock claims locked (with the ctid each claim locked, so an ack
//! finds the row by it) until they are settled.
//!
//! docs/semantics.md, "Outcomes": an advisory outcome statement commits on its own and the key is
//! released *after* it — also when the statement failed. queue_complete
//! therefore never unlocks directly: it queues the key, and the transaction
//! callback below unlocks it at COMMIT or ABORT, when the outcome is final.
//! Keys locked by a claim that fails half-way are unlocked the same way, so a
//! claim never leaks a lock it does not return.

use pgrx::prelude::*;
use pgrx::{direct_function_call, pg_guard, pg_sys, IntoDatum};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

thread_local! {
    /// Keys to unlock when the transaction ends (one entry per lock hold):
    /// settled or released deliveries, and keys of a claim that failed half-way.
    static PENDING: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
    /// row_lock: (queue, id) of every row the current transaction claimed and
    /// has not settled, with the subtransaction that claimed it. Only those can
    /// be settled by it (else SQ006). Kept exact under savepoints by the
    /// subtransaction callback, so a listed row is one whose row lock this
    /// transaction holds: its completion needs no second lock to prove it.
    static ROW_CLAIMS: RefCell<RowClaims> = RefCell::new(RowClaims::default());
}

type RowKey = (String, String);
type SubId = pg_sys::SubTransactionId;
/// The top-level transaction's SubTransactionId (`TopSubTransactionId`). What
/// it claims or settles is undone only by the whole transaction rolling back,
/// which clears the claim list, so `claimed_by` and `settles` skip it: a
/// 100-row claim and its settle then keep one entry per row, not three.
const TOP: SubId = 1;
/// The ctid of the row version a row_lock claim locked (`Shape::by_ctid`).
pub type Tid = pg_sys::ItemPointerData;

/// A claimed row: the subtransaction that claimed it, and its ctid.
#[derive(Clone, Copy)]
struct Held {
    sub: SubId,
    tid: Option<Tid>,
}
type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<rustc_hash::FxHasher>>;

/// The row_lock claim list, indexed by subtransaction so that a savepoint's end
/// touches only what that savepoint did (the client settles each delivery of a
/// claim in its own savepoint: scanning the whole list there was quadratic).
#[derive(Default)]
struct RowClaims {
    /// claimed and not settled, with the subtransaction that claimed it: by
    /// queue, then id, so a lookup needs no owned key
    claims: FxMap<String, FxMap<String, Held>>,
    /// the rows each subtransaction claimed (entries whose row was settled
    /// since, or retagged, are stale: checked against `claims`)
    claimed_by: FxMap<SubId, Vec<RowKey>>,
    /// settles not yet final, by the subtransaction that settled them; put back
    /// if it rolls back. A row is settled in the subtransaction that claimed it
    /// or a descendant, so when a subtransaction ends every settle of a row it
    /// claimed is in its own list (its children's were moved up to it).
    settles: FxMap<SubId, Vec<RowSettle>>,
}

struct RowSettle {
    row: RowKey,
    claimed: Held,
}

impl RowClaims {
    fn get(&self, queue: &str, id: &str) -> Option<Held> {
        self.claims.get(queue)?.get(id).copied()
    }

    fn remove(&mut self, queue: &str, id: &str) -> Option<Held> {
        self.claims.get_mut(queue)?.remove(id)
    }

    /// Rows of `queue` held from now on, each by the subtransaction in its
    /// `Held`: one lookup of the queue's map, room made once.
    fn claim(&mut self, queue: &str, rows: impl ExactSizeIterator<Item = (String, Held)>) {
        if !self.claims.contains_key(queue) {
            self.claims.insert(queue.to_owned(), FxMap::default());
        }
        let ids = self.claims.get_mut(queue).expect("inserted above");
        ids.reserve(rows.len());
        for (id, held) in rows {
            if held.sub != TOP {
                self.claimed_by
                    .entry(held.sub)
                    .or_default()
                    .push((queue.to_owned(), id.clone()));
            }
            ids.insert(id, held);
        }
    }

    /// a savepoint released: what it claimed and settled belongs to its parent
    fn commit_sub(&mut self, my: SubId, parent: SubId) {
        for row in self.claimed_by.remove(&my).unwrap_or_default() {
            if let Some(held) = self
                .claims
                .get_mut(&row.0)
                .and_then(|ids| ids.get_mut(&row.1))
            {
                if held.sub == my {
                    held.sub = parent;
                    if parent != TOP {
                        self.claimed_by.entry(parent).or_default().push(row);
                    }
                }
            }
        }
        if let Some(mut settled) = self.settles.remove(&my) {
            if parent == TOP {
                // final unless the whole transaction rolls back, which clears all
                return;
            }
            for e in &mut settled {
                if e.claimed.sub == my {
                    e.claimed.sub = parent;
                }
            }
            self.settles.entry(parent).or_default().append(&mut settled);
        }
    }

    /// rolled back: its claims are gone (the row locks with them); its settles
    /// are undone, so rows claimed outside it are held (and settleable) again
    fn abort_sub(&mut self, my: SubId) {
        for (queue, id) in self.claimed_by.remove(&my).unwrap_or_default() {
            if self.get(&queue, &id).map(|h| h.sub) == Some(my) {
                self.remove(&queue, &id);
            }
        }
        for e in self.settles.remove(&my).unwrap_or_default() {
            if e.claimed.sub != my {
                let (queue, id) = e.row;
                self.claim(&queue, std::iter::once((id, e.claimed)));
            }
        }
    }
}

fn current_subxact() -> SubId {
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

/// The rows one claim took: each id with the ctid of the version the claim
/// locked, where the queue has one (`Shape::by_ctid`).
pub fn rows_claimed_now<'a>(
    queue: &str,
    rows: impl ExactSizeIterator<Item = (&'a str, Option<Tid>)>,
) {
    let sub = current_subxact();
    ROW_CLAIMS.with(|c| {
        c.borrow_mut().claim(
            queue,
            rows.map(|(id, tid)| (id.to_owned(), Held { sub, tid })),
        )
    });
}

/// Ids of `queue` this transaction holds (claimed, not settled).
pub fn rows_claimed(queue: &str) -> Vec<String> {
    ROW_CLAIMS.with(|c| {
        c.borrow()
            .claims
            .get(queue)
            .map(|ids| ids.keys().cloned().collect())
            .unwrap_or_default()
    })
}

/// `Some` when this transaction claimed the row and has not settled it, with
/// the ctid its claim locked, if recorded.
pub fn row_claim(queue: &str, id: &str) -> Option<Option<Tid>> {
    ROW_CLAIMS.with(|c| c.borrow().get(queue, id).map(|h| h.tid))
}

pub fn row_settled(queue: &str, id: &str) {
    ROW_CLAIMS.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(claimed) = c.remove(queue, id) {
            let settled_in = current_subxact();
            if settled_in == TOP {
                return;
            }
            c.settles.entry(settled_in).or_default().push(RowSettle {
                row: (queue.to_owned(), id.to_owned()),
                claimed,
            });
        }
    });
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    my: SubId,
    parent: SubId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    match event {
        SUBXACT_EVENT_COMMIT_SUB => ROW_CLAIMS.with(|c| c.borrow_mut().commit_sub(my, parent)),
        SUBXACT_EVENT_ABORT_SUB => ROW_CLAIMS.with(|c| c.borrow_mut().abort_sub(my)),
        _ => {}
    }
}

/// The advisory key of a row: `hashtextextended(len(queue) || ':' || queue || ':' || id, 0)`,
/// the same expression as `queue_advisory_key()` and the claim's candidate query.
pub fn key_of(queue: &str, id: &str) -> i64 {
    // hashtextextended(t, 0) is hash_bytes_extended over the text's bytes for every
    // deterministic collation (a database's default collation always is)
    let text = format!("{}:{}:{}", queue.chars().count(), queue, id);
    unsafe { hash_bytes_extended(text.as_ptr(), text.len() as std::ffi::c_int, 0) as i64 }
}

// src/common/hashfn.c, part of the server binary; not in pgrx's bindings
unsafe extern "C" {
    fn hash_bytes_extended(k: *const u8, keylen: std::ffi::c_int, seed: u64) -> u64;
}

pub fn try_lock(key: i64) -> bool {
    unsafe {
        direct_function_call::<bool>(pg_sys::pg_try_advisory_lock_int8, &[key.into_datum()])
            .unwrap_or(false)
    }
}

pub fn unlock(key: i64) -> bool {
    unsafe {
        direct_function_call::<bool>(pg_sys::pg_advisory_unlock_int8, &[key.into_datum()])
            .unwrap_or(false)
    }
}

/// Does this backend hold the session advisory lock `key` (exclusive, the
/// `pg_advisory_lock(bigint)` kind)? Asked of the lock manager itself, so a
/// lock given up behind settle's back (pg_advisory_unlock_all, DISCARD ALL)
/// is never taken for held.
pub fn lock_held(key: i64) -> bool {
    let tag = pg_sys::LOCKTAG {
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: ((key as u64) >> 32) as u32,
        locktag_field3: (key as u64 & 0xffff_ffff) as u32,
        locktag_field4: 1,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: 2, // USER_LOCKMETHOD
    };
    unsafe {
        // PostgreSQL 17 added `orstronger`: false asks for this mode exactly, as before
        #[cfg(any(feature = "pg17", feature = "pg18"))]
        return pg_sys::LockHeldByMe(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false);
        #[cfg(not(any(feature = "pg17", feature = "pg18")))]
        return pg_sys::LockHeldByMe(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
    }
}

/// A delivery is held by this session when it holds the key and has not yet
/// settled or released it in the current transaction.
pub fn delivery_held(key: i64) -> bool {
    lock_held(key) && !PENDING.with(|p| p.borrow().contains(&key))
}

/// Unlock `key` when the current (top-level) transaction ends.
pub fn unlock_at_end(key: i64) {
    PENDING.with(|p| p.borrow_mut().push(key));
}

/// Mark the start of a claim: keys locked from here on and not handed over
/// with [`claim_done`] are unlocked at transaction end.
pub fn claim_mark() -> usize {
    PENDING.with(|p| p.borrow().len())
}

/// Take the key out of the claim's pending list again (the claim returns the
/// row to its caller, or unlocked it itself).
pub fn claim_keep(mark: usize, key: i64) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        if let Some(pos) = p[mark..].iter().position(|k| *k == key) {
            p.remove(mark + pos);
        }
    });
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_PARALLEL_ABORT => {
            ROW_CLAIMS.with(|c| *c.borrow_mut() = RowClaims::default());
            let keys = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            for key in keys {
                unlock(key);
            }
        }
        XACT_EVENT_PRE_PREPARE => {
            if PENDING.with(|p| !p.borrow().is_empty()) {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "settle: a transaction that settles or claims advisory deliveries cannot be prepared (PREPARE TRANSACTION)"
                );
            }
        }
        _ => {}
    }
}

pub fn init() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}
