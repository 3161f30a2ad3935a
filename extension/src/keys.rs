//! Whether a claim of a keyed queue walks its keys (`sql::heads`) or reads
//! its rows in id order.
//!
//! Reading in id order passes every row waiting behind a taken head; walking
//! the keys visits each key once. So a session walks the keys of a queue that
//! has at most `settle.key_walk_max` of them, and reads in id order above
//! that, where free heads are many and lie among the first rows, and in a
//! queue whose rows have no key at all. It counts a queue's keys (up to that
//! bound, a walk of its own) at its first claim and again when the count is
//! more than a second old. A claim in id order that stopped short at its
//! bounded read (`ops::reach`) walks the keys for the rest when the queue has
//! at most [`WALK_ON_MAX`] of them; with more, it reads on a bounded number of
//! rows at a time until it has passed as many rows as the queue has keys,
//! then walks them ([`after_reading`]).

use crate::desc::{spi, PlanKey, Queue};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::spi::SpiClient;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// `settle.key_walk_max`: 0 never walks keys.
static KEY_WALK_MAX: GucSetting<i32> = GucSetting::<i32>::new(16);

/// How long a count of a queue's keys stands.
const RECOUNT: Duration = Duration::from_secs(1);

/// A session's count of a queue's keys.
#[derive(Clone, Copy)]
pub struct Counted {
    /// the bound it was counted against
    max: i64,
    /// the keys counted, up to `max` + 1 (more than `max`)
    n: i64,
    at: Instant,
}

impl Counted {
    fn fresh(self) -> bool {
        self.at.elapsed() < RECOUNT
    }

    /// at least one key and at most `max` (no key at all: nothing waits
    /// behind a head, and id order reads no row in vain)
    fn few(self, max: i64) -> bool {
        self.n >= 1 && self.n <= max
    }
}

/// This claim of `q` walks its keys.
pub fn walk(client: &SpiClient<'_>, q: &Queue) -> bool {
    let max = KEY_WALK_MAX.get();
    if max <= 0 || !q.shape.walks_keys() {
        return false;
    }
    let max = i64::from(max);
    counted(client, q, &q.keys_counted, max).few(max)
}

/// Keys a queue may have for a claim that stopped short at its bounded read
/// (`sql::read_bound`) to walk them for the rest at once: walking a key
/// costs about what testing two or three rows does, so past this a walk
/// could cost more than reading on ([`after_reading`]).
pub const WALK_ON_MAX: i32 = 1024;

/// Whether a claim of `q` in id order may read a bounded number of rows and
/// go on past the bound by [`after_reading`] (`ops::reach`): the queue has a
/// key (`settle.key_walk_max = 0`: never).
pub fn may_bound(client: &SpiClient<'_>, q: &Queue) -> bool {
    if KEY_WALK_MAX.get() <= 0 {
        return false;
    }
    match q.keys_counted_on.get().filter(|c| c.fresh()) {
        Some(c) => c.n >= 1,
        None => counted(client, q, &q.keys_counted_on, i64::from(WALK_ON_MAX)).n >= 1,
    }
}

/// How a keyed claim in id order goes on after its bounded reads passed
/// `read` ready rows without filling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// walk the keys for the rest
    Walk,
    /// read the next rows, bounded again
    ReadOn,
    /// read on in id order, all the way (the queue has no key, or
    /// `settle.key_walk_max = 0`)
    InOrder,
}

/// What a claim of `q` whose bounded reads passed `read` rows does next: it
/// walks the keys when the queue has at most [`WALK_ON_MAX`] or at most
/// `read` of them (a walk visits each key once; reading on may pass as many
/// rows again), else reads on. The keys are counted up to the larger of the
/// two, again only once `read` is twice the bound of a count that found more
/// (so a claim's counts cost no more than its reads) or the count is a second
/// old.
pub fn after_reading(client: &SpiClient<'_>, q: &Queue, read: i64) -> After {
    if KEY_WALK_MAX.get() <= 0 {
        return After::InOrder;
    }
    let max = read.max(i64::from(WALK_ON_MAX));
    let c = match q.keys_counted_on.get().filter(|c| c.fresh()) {
        Some(c) if c.n <= c.max || read < c.max.saturating_mul(2) => c,
        _ => counted(client, q, &q.keys_counted_on, max),
    };
    match c.n {
        0 => After::InOrder,
        n if n <= c.max && n <= max => After::Walk,
        _ => After::ReadOn,
    }
}

/// This session's count of `q`'s keys up to `max` + 1 in `cell`, counted
/// again unless the one there is fresh and against the same bound.
fn counted(client: &SpiClient<'_>, q: &Queue, cell: &Cell<Option<Counted>>, max: i64) -> Counted {
    if let Some(c) = cell.get().filter(|c| c.max == max && c.fresh()) {
        return c;
    }
    let plan = q.plan(client, PlanKey::KeyCount);
    let n = spi(client
        .select(&*plan, None, &[max.saturating_add(1).into()])
        .and_then(|t| t.first().get_one::<i64>()))
    .unwrap_or(0);
    let c = Counted {
        max,
        n,
        at: Instant::now(),
    };
    cell.set(Some(c));
    c
}

pub fn init() {
    GucRegistry::define_int_guc(
        c"settle.key_walk_max",
        c"Claims of a queue with an ordering key and at most this many keys visit each key once.",
        c"Above it they read ready rows in id order, passing the rows that wait behind a taken head. 0: always in id order, all the way.",
        &KEY_WALK_MAX,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
}
