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
    /// (queue, id text) → key, for every delivery this session holds.
    static HELD: RefCell<HashMap<(String, String), i64>> = RefCell::new(HashMap::new());
    /// Keys to unlock when the transaction ends (one entry per lock hold).
    static PENDING: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
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

/// Unlock `key` when the current (top-level) transaction ends.
pub fn unlock_at_end(key: i64) {
    PENDING.with(|p| p.borrow_mut().push(key));
}

pub fn hold(queue: &str, id: String, key: i64) {
    HELD.with(|h| h.borrow_mut().insert((queue.to_owned(), id), key));
}

pub fn is_held(key_of: &(String, String)) -> Option<i64> {
    HELD.with(|h| h.borrow().get(key_of).copied())
}

pub fn forget(key_of: &(String, String)) -> Option<i64> {
    HELD.with(|h| h.borrow_mut().remove(key_of))
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
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PARALLEL_ABORT => {
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
    unsafe { pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut()) };
}
