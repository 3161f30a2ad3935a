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
//! keys, or non-integer ids past the mark, claims read in id order, all the
//! way. The client counts a queue's keys at its first claim and again when
//! its count is a second old.

use super::dialect::IdKind;
use super::sql::{read_bound, KEYS_ALWAYS_WALKED, KEYS_WALKED};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a count of a queue's keys stands.
const RECOUNT: Duration = Duration::from_secs(1);

/// A client's count of a queue's keys (up to [`KEYS_WALKED`] + 1).
#[derive(Default)]
pub(super) struct KeyCount(Mutex<Option<(usize, Instant)>>);

impl KeyCount {
    /// The count, unless it is older than [`RECOUNT`] or there is none.
    pub(super) fn fresh(&self) -> Option<usize> {
        let c = *self.0.lock().expect("key count lock");
        c.filter(|(_, at)| at.elapsed() < RECOUNT).map(|(n, _)| n)
    }

    pub(super) fn set(&self, keys: usize) {
        *self.0.lock().expect("key count lock") = Some((keys, Instant::now()));
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
    /// the heads and the rows without a key
    Heads,
}

/// How a claim of `n` rows from `from` (the mark, or the lowest id) reads a
/// queue with `keys` keys (`None`: it cannot visit them).
pub(super) fn reading(keys: Option<usize>, from: Option<&str>, n: usize, kind: IdKind) -> Reading {
    let in_order = || Reading::InOrder(from.map(str::to_owned));
    let Some(keys) = keys.filter(|k| *k > 0) else {
        // no key at all: nothing waits behind a head
        return in_order();
    };
    if keys <= KEYS_ALWAYS_WALKED {
        return Reading::Heads;
    }
    if keys > KEYS_WALKED {
        return in_order();
    }
    match from {
        None => Reading::Heads,
        Some(f) => match (kind, f.parse::<i64>()) {
            (IdKind::Integer, Ok(f)) => Reading::Bounded {
                from: f.to_string(),
                below: f.saturating_add(read_bound(n)).to_string(),
            },
            _ => in_order(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_keys_are_visited_many_read_in_order() {
        let r = |keys, from| reading(keys, from, 10, IdKind::Integer);
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
            r(Some(KEYS_WALKED + 1), None),
            Reading::InOrder(None),
            "too many keys to visit"
        );
        assert_eq!(
            reading(Some(100), Some("m"), 10, IdKind::Text),
            Reading::InOrder(Some("m".into())),
            "text ids: no bound past the mark"
        );
    }

    #[test]
    fn a_count_stands_for_a_second() {
        let c = KeyCount::default();
        assert_eq!(c.fresh(), None);
        c.set(7);
        assert_eq!(c.fresh(), Some(7));
        *c.0.lock().unwrap() = Some((7, Instant::now() - RECOUNT));
        assert_eq!(c.fresh(), None);
    }
}
