//! How a claim of a keyed queue reads its rows: in id order, or visiting
//! each key once (`sql::heads`). Knows no SQL.
//!
//! Reading in id order passes every row that waits behind a taken head, so a
//! claim whose first rows all wait read until it found enough free ones — one
//! key's backlog in front of the others, all of it. Visiting the keys costs a
//! step per key whatever waits. So a client visits the keys of a queue with
//! few of them ([`KEYS_ALWAYS_WALKED`]) at every claim; with more, up to
//! [`KEYS_WALKED`], a claim from the lowest id visits them, and a claim from
//! the mark of a queue with integer ids reads the ids of [`read_bound`] past
//! it and visits the keys for the rest when that came back short. With more
//! keys and integer ids, a claim reads [`read_bound`] ready rows at a time
//! ([`Reading::Steps`]) and visits the keys once it has passed more rows
//! than the queue has keys ([`walks_after`]): from the lowest id, and from
//! the mark for [`KEEP_STEPPING`] after the client saw rows wait behind their
//! heads. Elsewhere (non-integer ids past the mark) claims read in id order,
//! all the way. The client counts a queue's keys at its first claim and again
//! when its count is a second old.

use super::dialect::IdKind;
use super::sql::{read_bound, KEYS_ALWAYS_WALKED, KEYS_WALKED};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a count of a queue's keys stands.
const RECOUNT: Duration = Duration::from_secs(1);

/// How long a client's claims of a queue with more than [`KEYS_WALKED`] keys
/// read in steps from the mark after it last saw rows wait behind their heads.
pub(super) const KEEP_STEPPING: Duration = Duration::from_secs(10);

/// A count of a queue's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counted {
    /// the keys counted, up to `max` + 1 (more than `max`)
    pub(super) n: usize,
    /// the bound it was counted against
    pub(super) max: usize,
}

/// A client's count of a queue's keys.
#[derive(Default)]
pub(super) struct KeyCount(Mutex<Option<(Counted, Instant)>>);

impl KeyCount {
    /// The count, unless it is older than [`RECOUNT`] or there is none.
    pub(super) fn fresh(&self) -> Option<Counted> {
        let c = *self.0.lock().expect("key count lock");
        c.filter(|(_, at)| at.elapsed() < RECOUNT).map(|(c, _)| c)
    }

    pub(super) fn set(&self, c: Counted) {
        *self.0.lock().expect("key count lock") = Some((c, Instant::now()));
    }
}

/// When a client last saw rows of a queue wait behind their heads.
#[derive(Default)]
pub(super) struct Waited(Mutex<Option<Instant>>);

impl Waited {
    pub(super) fn saw(&self) {
        *self.0.lock().expect("waited lock") = Some(Instant::now());
    }

    /// less than [`KEEP_STEPPING`] ago
    pub(super) fn lately(&self) -> bool {
        self.0
            .lock()
            .expect("waited lock")
            .is_some_and(|at| at.elapsed() < KEEP_STEPPING)
    }
}

/// How a claim's first statement finds its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// in claim order from the id given (the mark) or the lowest, all the way
    InOrder(Option<String>),
    /// the ids from `from` to below `below` in id order, then the heads for
    /// the rest
    Bounded { from: String, below: String },
    /// [`read_bound`] ready rows at a time in id order from `from` (or the
    /// lowest id), then the heads once the rows passed outnumber the keys
    Steps { from: Option<String> },
    /// the heads and the rows without a key
    Heads,
}

/// How a claim of `n` rows from `from` (the mark, or the lowest id) reads a
/// queue with `keys` keys (`None`: it cannot visit them), the client having
/// seen rows wait `lately` or not.
pub(super) fn reading(
    keys: Option<usize>,
    from: Option<&str>,
    n: usize,
    kind: IdKind,
    lately: bool,
) -> Reading {
    let in_order = || Reading::InOrder(from.map(str::to_owned));
    let Some(keys) = keys.filter(|k| *k > 0) else {
        // no key at all: nothing waits behind a head
        return in_order();
    };
    if keys <= KEYS_ALWAYS_WALKED {
        return Reading::Heads;
    }
    let from_int = from.map(|f| f.parse::<i64>().ok().filter(|_| kind == IdKind::Integer));
    if keys > KEYS_WALKED {
        return match from_int {
            _ if kind != IdKind::Integer => in_order(),
            None => Reading::Steps { from: None },
            Some(Some(f)) if lately => Reading::Steps {
                from: Some(f.to_string()),
            },
            Some(_) => in_order(),
        };
    }
    match from_int {
        None => Reading::Heads,
        Some(Some(f)) => Reading::Bounded {
            from: f.to_string(),
            below: f.saturating_add(read_bound(n)).to_string(),
        },
        Some(None) => in_order(),
    }
}

/// The bound to count a queue's keys against once a claim's steps passed
/// `passed` rows.
pub(super) fn count_bound(passed: usize) -> usize {
    passed.max(KEYS_WALKED)
}

/// Whether count `c` answers for a claim whose steps passed `passed` rows:
/// it is exact, or `passed` is less than twice its bound (counted again only
/// then, a claim's counts cost no more than its reads).
pub(super) fn count_serves(c: Counted, passed: usize) -> bool {
    c.n <= c.max || passed < c.max.saturating_mul(2)
}

/// Whether a claim whose steps passed `passed` rows visits the keys now (`c`
/// a count that serves): the queue has at most as many keys as it passed
/// rows, or [`KEYS_WALKED`] (a visit costs about what a row passed does).
pub(super) fn walks_after(c: Counted, passed: usize) -> bool {
    c.n >= 1 && c.n <= c.max && c.n <= count_bound(passed)
}

/// Whether a claim in id order from the mark `from` of `n` rows, which took
/// rows up to the id `last` (`short`: fewer than `n`), saw rows wait behind
/// their heads: it came back short, or took a row further than
/// [`read_bound`] past the mark (integer ids).
pub(super) fn saw_waiting(from: &str, n: usize, last: Option<&str>, short: bool) -> bool {
    short
        || matches!((from.parse::<i64>(), last.map(str::parse::<i64>)), (Ok(f), Some(Ok(l))) if l.saturating_sub(f) > read_bound(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_keys_are_visited_many_read_in_order() {
        let r = |keys, from| reading(keys, from, 10, IdKind::Integer, false);
        assert_eq!(r(None, Some("5")), Reading::InOrder(Some("5".into())));
        assert_eq!(r(Some(0), None), Reading::InOrder(None), "no key yet");
        assert_eq!(r(Some(3), Some("5")), Reading::Heads);
        assert_eq!(r(Some(100), None), Reading::Heads, "from the lowest id");
        assert_eq!(
            r(Some(100), Some("5")),
            Reading::Bounded {
                from: "5".into(),
                below: "341".into()
            },
            "from the mark: 8 × 10 + 256 ids"
        );
        assert_eq!(
            reading(Some(100), Some("m"), 10, IdKind::Text, false),
            Reading::InOrder(Some("m".into())),
            "text ids: no bound past the mark"
        );
    }

    #[test]
    fn many_keys_read_in_steps_from_the_lowest_id_and_after_rows_waited() {
        let many = Some(KEYS_WALKED + 1);
        let r = |from, lately| reading(many, from, 10, IdKind::Integer, lately);
        assert_eq!(r(None, false), Reading::Steps { from: None });
        assert_eq!(r(Some("5"), false), Reading::InOrder(Some("5".into())));
        assert_eq!(
            r(Some("5"), true),
            Reading::Steps {
                from: Some("5".into())
            }
        );
        assert_eq!(
            reading(many, None, 10, IdKind::Text, true),
            Reading::InOrder(None),
            "text ids: in id order"
        );
    }

    #[test]
    fn steps_walk_once_they_passed_as_many_rows_as_there_are_keys() {
        let c = |n, max| Counted { n, max };
        // counted against 512: 600 keys are "more than 512"
        assert!(count_serves(c(513, 512), 1023));
        assert!(
            !count_serves(c(513, 512), 1024),
            "passed twice the bound: count again"
        );
        assert!(!walks_after(c(513, 512), 336));
        assert!(walks_after(c(600, 1024), 1024));
        assert!(
            !walks_after(c(600, 1024), 336),
            "exact, but more keys than rows passed"
        );
        assert!(
            walks_after(c(400, 1024), 336),
            "no more keys than a walk serves at once"
        );
        assert!(!walks_after(c(0, 512), 336), "no key");
        assert_eq!(count_bound(100), KEYS_WALKED);
        assert_eq!(count_bound(5000), 5000);
    }

    #[test]
    fn rows_waited_when_a_claim_from_the_mark_went_far() {
        assert!(saw_waiting("100", 10, None, true));
        assert!(
            !saw_waiting("100", 10, Some("436"), false),
            "336 ids past the mark"
        );
        assert!(saw_waiting("100", 10, Some("437"), false));
        assert!(!saw_waiting("m", 10, Some("z"), false), "text ids");
    }

    #[test]
    fn a_count_stands_for_a_second() {
        let c = KeyCount::default();
        let seven = Counted { n: 7, max: 512 };
        assert_eq!(c.fresh(), None);
        c.set(seven);
        assert_eq!(c.fresh(), Some(seven));
        *c.0.lock().unwrap() = Some((seven, Instant::now() - RECOUNT));
        assert_eq!(c.fresh(), None);
    }
}
