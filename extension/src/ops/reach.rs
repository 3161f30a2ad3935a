//! How far a keyed claim in id order reads, and what it does when a
//! statement of it came back short.
//!
//! A bounded read (`sql::bounded`) reads at most `sql::read_bound` ready
//! rows, so a claim whose first rows all wait behind taken heads stops
//! there; if it stopped at the bound, the rest of the claim walks the
//! queue's keys, or reads the next rows bounded again until it has passed
//! more rows than the queue has keys (`keys::after_reading`), and if it read
//! fewer rows, the queue has no more. A bounded read costs a claim whose
//! first rows are free more than reading straight on, so a session reads
//! bounded only in a queue with keys, from the lowest id (its first claim,
//! its rescans) and, from its mark, for [`KEEP_BOUNDED`] after it last saw
//! rows wait behind their heads — a bounded read that reached its bound, or a
//! read all the way that came back short or passed more rows than the bound —
//! over more rows than it would pass before walking the keys.

use crate::desc::{spi, PlanKey, Queue};
use crate::keys::{self, After};
use crate::sql::read_bound;
use pgrx::spi::SpiClient;
use std::time::{Duration, Instant};

/// How long a session's claims of a queue read bounded after it last saw
/// rows wait behind their heads.
const KEEP_BOUNDED: Duration = Duration::from_secs(10);

/// Whether a keyed claim in id order from `from` (the session's mark, or
/// the lowest id) reads bounded: from the lowest id where the queue has a
/// key; from the mark while this session saw rows wait behind their heads
/// less than [`KEEP_BOUNDED`] ago, over more rows than it would pass before
/// walking the keys (`keys::after_reading`: any number with at most
/// `keys::WALK_ON_MAX` keys, else as many as the keys).
fn bounded(client: &SpiClient<'_>, q: &Queue, from: Option<&str>) -> bool {
    if !q.shape.can_bound_keyed_read() {
        return false;
    }
    match (from, q.bounded_until.get()) {
        (None, _) => keys::may_bound(client, q),
        (Some(_), Some((until, span))) if Instant::now() < until => {
            keys::after_reading(client, q, span) == After::Walk
        }
        _ => false,
    }
}

/// This session saw rows of `q` wait behind their heads, over `span` rows
/// (ids, or ready rows passed; `i64::MAX`: a read all the way that came back
/// short).
fn saw_waiting(q: &Queue, span: i64) {
    q.bounded_until
        .set(Some((Instant::now() + KEEP_BOUNDED, span)));
}

/// After a read all the way from `from` for `want` rows, which took the ids
/// `taken` (`short`: fewer than `want`): it saw rows wait if it came back
/// short or took a row further than the bound past its start.
pub fn after_unbounded<'a>(
    q: &Queue,
    from: Option<&str>,
    want: i64,
    taken: impl Iterator<Item = &'a str>,
    short: bool,
) {
    if !q.shape.can_bound_keyed_read() {
        return;
    }
    let span = if short {
        i64::MAX
    } else {
        // how far past its start (the mark) the farthest row taken lies
        from.and_then(|f| f.parse::<i64>().ok()).map_or(0, |f| {
            taken
                .filter_map(|i| i.parse::<i64>().ok())
                .map(|i| i.saturating_sub(f))
                .max()
                .unwrap_or(0)
        })
    };
    if span > read_bound(want) {
        saw_waiting(q, span);
    }
}

/// How a claim statement finds its rows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// in claim order, all the way
    InOrder,
    /// in claim order, bounded (`sql::bounded`)
    Bounded,
    /// walking the keys (`sql::heads`)
    Keys,
}

impl Read {
    /// A claim's first statement from `from`: walking the keys when
    /// `keys::walk` said so.
    fn first(client: &SpiClient<'_>, q: &Queue, walk: bool, from: Option<&str>) -> Read {
        match walk {
            true => Read::Keys,
            false if bounded(client, q, from) => Read::Bounded,
            false => Read::InOrder,
        }
    }

    /// The plan key of a claim statement in claim order, `key`, read this way.
    pub fn key(self, key: PlanKey) -> PlanKey {
        match self {
            Read::Bounded => PlanKey::Bounded(Box::new(key)),
            _ => key,
        }
    }
}

/// How a keyed claim in id order reads as it goes on: its next statement's
/// way and start, and the ready rows its bounded reads passed so far.
pub struct Reach {
    /// how the next statement finds its rows
    pub read: Read,
    /// where it starts: the session's mark, the last row a bounded read
    /// passed, or `None`: the lowest id
    pub from: Option<String>,
    passed: i64,
}

impl Reach {
    /// A claim's first statement from `from`, as [`Read::first`] says.
    pub fn first(client: &SpiClient<'_>, q: &Queue, walk: bool, from: Option<String>) -> Reach {
        Reach {
            read: Read::first(client, q, walk, from.as_deref()),
            from,
            passed: 0,
        }
    }

    /// After a lease or row_lock claim statement read for `want` rows and
    /// took `got` (`taken` their ids; `gone` and `held` as
    /// [`Reach::after_short`] says): whether the claim goes on, and if so
    /// how and from where.
    #[allow(clippy::too_many_arguments)]
    pub fn go_on<'a>(
        &mut self,
        client: &SpiClient<'_>,
        q: &Queue,
        want: i64,
        got: i64,
        taken: impl Iterator<Item = &'a str>,
        gone: i64,
        held: &[String],
    ) -> bool {
        let short = got < want;
        if self.read == Read::InOrder {
            after_unbounded(q, self.from.as_deref(), want, taken, short);
        }
        short && self.read == Read::Bounded && self.after_short(client, q, want, gone, held)
    }

    /// After a bounded keyed read of `want` rows from `self.from`, not
    /// counting the rows in `held` (row_lock: those this transaction holds),
    /// came back with fewer, `gone` of which are no longer ready (a
    /// lease's): whether the claim goes on — walking the keys, or reading on
    /// from the last row read, as `keys::after_reading` says for the ready
    /// rows its bounded reads passed — or the statement read every ready row
    /// from its start.
    pub fn after_short(
        &mut self,
        client: &SpiClient<'_>,
        q: &Queue,
        want: i64,
        gone: i64,
        held: &[String],
    ) -> bool {
        // the rows the statement read that are still ready
        let bound = read_bound(want) - gone;
        let plan = q.plan(
            client,
            PlanKey::KeyedReadExtent {
                from: self.from.is_some(),
                except: !held.is_empty(),
            },
        );
        let mut args = vec![bound.into()];
        args.extend(self.from.as_deref().map(Into::into));
        if !held.is_empty() {
            args.push(held.to_vec().into());
        }
        let (read, last) = spi(client.select(&*plan, None, &args).and_then(|t| {
            let r = t.first();
            Ok((r.get::<i64>(1)?.unwrap_or(0), r.get::<String>(2)?))
        }));
        let Some(last) = last.filter(|_| read >= bound) else {
            return false;
        };
        self.passed = self.passed.saturating_add(read);
        saw_waiting(q, self.passed);
        (self.read, self.from) = match keys::after_reading(client, q, self.passed) {
            After::Walk => (Read::Keys, None),
            After::ReadOn => (Read::Bounded, Some(last)),
            After::InOrder => (Read::InOrder, Some(last)),
        };
        true
    }
}
