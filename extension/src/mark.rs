//! Where this session's claims of a queue start their scan: the low-water mark.
//!
//! A claim takes the first ready rows in id order. Rows settled since vacuum
//! last cleaned the table — all of them while something holds the xmin
//! horizon back — stay in the index as dead entries below the rows still
//! queued, and a scan from the lowest id visits every one of them again on
//! every claim. So a session starts its claims at the last id it claimed, and
//! scans from the lowest id again every `settle.rescan_interval`, or every ten
//! times as long as its last such scan took if that is longer (so that those
//! scans, which walk every dead entry, take at most a tenth of its time): a
//! row that became ready below the mark behind this session's back (a lease
//! that ran out, a retry settled by another session, a row committed late with
//! a lower id, a `retry_after` that passed) waits at most that long longer. What
//! this session makes ready itself — a retry, a retry_after of no delay or a
//! release it settles, a claim it rolls back — lowers its mark at once
//! (docs/semantics.md, "Claim order").

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::{pg_guard, pg_sys};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// `settle.rescan_interval`, milliseconds; 0 scans from the lowest id on every claim.
static RESCAN_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);

/// How ids of a queue compare, as far as the mark needs to lower itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// an integer id: its text compares by value once parsed
    Int,
    /// a uuid: its canonical text (lowercase hex, fixed width) compares as its bytes
    Uuid,
    /// any other type: lowering the mark means scanning from the lowest id
    Unknown,
}

impl Order {
    fn below(self, id: &str, mark: &str) -> Option<bool> {
        match self {
            Order::Int => Some(id.parse::<i64>().ok()? < mark.parse::<i64>().ok()?),
            Order::Uuid => Some(id < mark),
            Order::Unknown => None,
        }
    }
}

struct Mark {
    /// claims start at this id (inclusive); `None`: at the lowest id
    from: Option<String>,
    /// when a claim last scanned from the lowest id
    rescanned: Instant,
    /// how long that claim took
    rescan_took: Duration,
}

/// A scan from the lowest id comes at most this many times its own duration
/// after the last one.
const RESCAN_SPACING: u32 = 10;

/// A mark's value before the (sub)transaction `sub` first moved it, put back
/// if that transaction rolls back: the rows its claims took are ready again.
struct Undo {
    sub: pg_sys::SubTransactionId,
    queue: String,
    from: Option<String>,
}

thread_local! {
    static MARKS: RefCell<FxHashMap<String, Mark>> = RefCell::new(FxHashMap::default());
    static UNDO: RefCell<Vec<Undo>> = const { RefCell::new(Vec::new()) };
}

fn interval() -> Duration {
    Duration::from_millis(RESCAN_MS.get().max(0) as u64)
}

/// Where the next claim of `queue` starts: `Some(id)` (at that id, inclusive)
/// or `None` (at the lowest id: no mark yet, or a rescan is due; the caller
/// reports how long that claim took with [`rescan_took`]).
pub fn start(queue: &str) -> Option<String> {
    let now = Instant::now();
    let every = interval();
    MARKS.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(queue) {
            Some(k)
                if k.from.is_some()
                    && !every.is_zero()
                    && now < k.rescanned + every.max(k.rescan_took * RESCAN_SPACING) =>
            {
                k.from.clone()
            }
            Some(k) => {
                k.rescanned = now;
                None
            }
            None => {
                m.insert(
                    queue.to_owned(),
                    Mark {
                        from: None,
                        rescanned: now,
                        rescan_took: Duration::ZERO,
                    },
                );
                None
            }
        }
    })
}

/// The claim of `queue` that scanned from the lowest id took `took`.
pub fn rescan_took(queue: &str, took: Duration) {
    MARKS.with(|m| {
        if let Some(k) = m.borrow_mut().get_mut(queue) {
            k.rescan_took = took;
        }
    });
}

/// A claim of `queue` took rows up to `last` (the highest id it returned).
pub fn claimed(queue: &str, last: &str) {
    // with no rescan interval every claim starts at the lowest id anyway
    if !interval().is_zero() {
        set(queue, Some(last.to_owned()));
    }
}

/// This session made rows `ids` of `queue` ready again (a retry, a retry_after
/// of no delay, a release): the next claim starts at or below the lowest of them.
pub fn made_ready<'a>(queue: &str, ids: impl IntoIterator<Item = &'a str>, order: Order) {
    let lower = MARKS.with(|m| {
        let m = m.borrow();
        let mut mark = m.get(queue).and_then(|k| k.from.as_deref())?;
        let mut lowered = false;
        for id in ids {
            match order.below(id, mark) {
                Some(true) => (mark, lowered) = (id, true),
                Some(false) => {}
                // not comparable here: scan from the lowest id
                None => return Some(None),
            }
        }
        lowered.then(|| Some(mark.to_owned()))
    });
    if let Some(from) = lower {
        set(queue, from);
    }
}

/// Scan `queue` from the lowest id at its next claim (rows went back in below
/// any mark: a requeue from the dead letter).
pub fn rescan(queue: &str) {
    set(queue, None);
}

/// The descriptor cache was dropped: a queue may now name another table.
pub fn forget_all() {
    MARKS.with(|m| m.borrow_mut().clear());
}

fn set(queue: &str, from: Option<String>) {
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    MARKS.with(|m| {
        let mut m = m.borrow_mut();
        let Some(k) = m.get_mut(queue) else {
            return;
        };
        UNDO.with(|u| {
            let mut u = u.borrow_mut();
            if !u.iter().any(|e| e.sub == sub && e.queue == queue) {
                u.push(Undo {
                    sub,
                    queue: queue.to_owned(),
                    from: k.from.clone(),
                });
            }
        });
        k.from = from;
    });
}

/// Put back what the entries `undone` recorded, latest first, so each queue
/// ends at its value before the rolled-back transaction.
fn restore(undone: Vec<Undo>) {
    MARKS.with(|m| {
        let mut m = m.borrow_mut();
        for e in undone.into_iter().rev() {
            if let Some(k) = m.get_mut(&e.queue) {
                k.from = e.from;
            }
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
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => {
            UNDO.with(|u| u.borrow_mut().clear())
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            restore(UNDO.with(|u| std::mem::take(&mut *u.borrow_mut())))
        }
        _ => {}
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
        // the parent keeps its own, earlier value where it has one
        SUBXACT_EVENT_COMMIT_SUB => UNDO.with(|u| {
            let mut u = u.borrow_mut();
            let parents: Vec<String> = u
                .iter()
                .filter(|e| e.sub == parent)
                .map(|e| e.queue.clone())
                .collect();
            u.retain(|e| e.sub != my || !parents.contains(&e.queue));
            for e in u.iter_mut().filter(|e| e.sub == my) {
                e.sub = parent;
            }
        }),
        SUBXACT_EVENT_ABORT_SUB => {
            let undone = UNDO.with(|u| {
                let mut u = u.borrow_mut();
                let (mine, rest) = std::mem::take(&mut *u)
                    .into_iter()
                    .partition(|e| e.sub == my);
                *u = rest;
                mine
            });
            restore(undone);
        }
        _ => {}
    }
}

pub fn init() {
    GucRegistry::define_int_guc(
        c"settle.rescan_interval",
        c"How often a session's claims of a queue scan from its lowest id.",
        c"Or every ten times as long as the last such scan took, if longer. Between them a session's claims start at the last id it claimed, past the dead index entries of rows settled before; a row that became ready below that point behind the session's back waits at most that long longer. 0: every claim scans from the lowest id.",
        &RESCAN_MS,
        0,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}
