//! Advisory-form bookkeeping of this backend: which deliveries it holds, and
//! which keys it must unlock when the current transaction ends.
//!
//! SPEC §3: an advisory outcome statement commits on its own and the key is
//! released *after* it — also when the statement failed. queue_complete
//! therefore never unlocks directly: it queues the key, and the transaction
//! callback below unlocks it at COMMIT or ABORT, when the outcome is final.
//! Keys locked by a claim that fails half-way are unlocked the same way, so a
//! claim never leaks a lock it does not return.

use pgrx::prelude::*;
use pgrx::{direct_function_call, pg_guard, pg_sys, IntoDatum};
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    /// Keys to unlock when the transaction ends (one entry per lock hold):
    /// settled or released deliveries, and keys of a claim that failed half-way.
    static PENDING: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
    /// row_lock: (queue, id) of every row the current transaction claimed and
    /// has not settled, with the subtransaction that claimed it. Only those can
    /// be settled by it (else SQ006). Kept exact under savepoints by the
    /// subtransaction callback, so a listed row is one whose row lock this
    /// transaction holds: its completion needs no second lock to prove it.
    static ROW_CLAIMS: RefCell<HashMap<(String, String), pg_sys::SubTransactionId>> =
        RefCell::new(HashMap::new());
    /// row_lock: settles of this transaction not yet final — (row, the
    /// subtransaction that claimed it, the one that settled it) — put back if the
    /// settling subtransaction rolls back.
    static ROW_SETTLES: RefCell<Vec<RowSettle>> = const { RefCell::new(Vec::new()) };
}

struct RowSettle {
    row: (String, String),
    claimed_in: pg_sys::SubTransactionId,
    settled_in: pg_sys::SubTransactionId,
}

fn current_subxact() -> pg_sys::SubTransactionId {
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

pub fn row_claimed(queue: &str, id: String) {
    let sub = current_subxact();
    ROW_CLAIMS.with(|c| c.borrow_mut().insert((queue.to_owned(), id), sub));
}

pub fn row_is_claimed(key_of: &(String, String)) -> bool {
    ROW_CLAIMS.with(|c| c.borrow().contains_key(key_of))
}

pub fn row_settled(key_of: &(String, String)) {
    if let Some(claimed_in) = ROW_CLAIMS.with(|c| c.borrow_mut().remove(key_of)) {
        let settled_in = current_subxact();
        ROW_SETTLES.with(|s| {
            s.borrow_mut().push(RowSettle {
                row: key_of.clone(),
                claimed_in,
                settled_in,
            })
        });
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    my: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    match event {
        // a savepoint released: what it claimed and settled belongs to its parent
        SUBXACT_EVENT_COMMIT_SUB => {
            ROW_CLAIMS.with(|c| {
                for sub in c.borrow_mut().values_mut() {
                    if *sub == my {
                        *sub = parent;
                    }
                }
            });
            ROW_SETTLES.with(|s| {
                for e in s.borrow_mut().iter_mut() {
                    if e.claimed_in == my {
                        e.claimed_in = parent;
                    }
                    if e.settled_in == my {
                        e.settled_in = parent;
                    }
                }
            });
        }
        // rolled back: its claims are gone (the row locks with them); its settles
        // are undone, so rows claimed outside it are held (and settleable) again
        SUBXACT_EVENT_ABORT_SUB => {
            ROW_CLAIMS.with(|c| c.borrow_mut().retain(|_, sub| *sub != my));
            let undone: Vec<RowSettle> = ROW_SETTLES.with(|s| {
                let mut s = s.borrow_mut();
                let (undone, kept) = std::mem::take(&mut *s)
                    .into_iter()
                    .partition(|e| e.settled_in == my);
                *s = kept;
                undone
            });
            ROW_CLAIMS.with(|c| {
                let mut c = c.borrow_mut();
                for e in undone {
                    if e.claimed_in != my {
                        c.insert(e.row, e.claimed_in);
                    }
                }
            });
        }
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
        #[cfg(feature = "pg17")]
        return pg_sys::LockHeldByMe(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false);
        #[cfg(not(feature = "pg17"))]
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
            ROW_CLAIMS.with(|c| c.borrow_mut().clear());
            ROW_SETTLES.with(|s| s.borrow_mut().clear());
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
