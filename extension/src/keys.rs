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
//! at most [`WALK_ON_MAX`] of them, counted the same way.

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
    max: i32,
    /// the queue had at least one and at most `max` keys
    few: bool,
    at: Instant,
}

/// This claim of `q` walks its keys.
pub fn walk(client: &SpiClient<'_>, q: &Queue) -> bool {
    let max = KEY_WALK_MAX.get();
    if max <= 0 || !q.shape.walks_keys() {
        return false;
    }
    few(client, q, &q.keys_counted, max)
}

/// Keys a queue may have for a claim that stopped short at its bounded read
/// (`sql::read_bound`) to walk them for the rest: walking a key costs about
/// what testing two or three rows does, so past this a walk could cost more
/// than reading on.
pub const WALK_ON_MAX: i32 = 1024;

/// Whether a claim of `q` in id order may read a bounded number of rows and
/// walk the keys for the rest when it stops at the bound (`ops::reach`): the
/// queue has at most [`WALK_ON_MAX`] keys (`settle.key_walk_max = 0`: never).
pub fn walk_on(client: &SpiClient<'_>, q: &Queue) -> bool {
    KEY_WALK_MAX.get() > 0 && few(client, q, &q.keys_counted_on, WALK_ON_MAX)
}

/// Whether `q` has at least one and at most `max` keys, as this session
/// last counted them in `cell` (again when that is older than [`RECOUNT`]).
fn few(client: &SpiClient<'_>, q: &Queue, cell: &Cell<Option<Counted>>, max: i32) -> bool {
    if let Some(c) = cell.get() {
        if c.max == max && c.at.elapsed() < RECOUNT {
            return c.few;
        }
    }
    let plan = q.plan(client, PlanKey::KeyCount);
    let n = spi(client
        .select(&*plan, None, &[(i64::from(max) + 1).into()])
        .and_then(|t| t.first().get_one::<i64>()))
    .unwrap_or(0);
    // no key at all: nothing waits behind a head, and id order reads no row in vain
    let few = n >= 1 && n <= i64::from(max);
    cell.set(Some(Counted {
        max,
        few,
        at: Instant::now(),
    }));
    few
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
