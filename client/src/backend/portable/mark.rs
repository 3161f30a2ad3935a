//! Where a client's claims of a queue start: the portable path's twin of the
//! extension's mark (docs/semantics.md, "Claim order"). Knows no SQL.
//!
//! A claim starts at the highest id the client's last claim returned, past the
//! index entries of every row settled before — which a held xmin horizon
//! (PostgreSQL) or a purge held back by a long transaction (InnoDB) keeps. It
//! scans from the lowest id again every `interval`, or every ten times as long
//! as its last such scan took if that is longer, so a row made ready below the
//! mark behind the client's back waits at most that long longer; a row the
//! client makes ready itself (a retry, a release, a failed settle) lowers the
//! mark at once — a row_lock claim's when its transaction ends, for until then
//! it holds them. The client's workers share one mark: a claim that started
//! before the mark was lowered or a rescan began leaves it as it is.

use super::dialect::IdKind;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often claims scan from the lowest id unless the client says
/// ([`crate::PoolOptions::rescan_interval`]): the extension's default.
pub(super) const RESCAN_INTERVAL: Duration = Duration::from_secs(1);

/// A client's mark for one queue.
pub(super) struct Mark {
    /// how ids compare, as far as lowering the mark needs
    kind: IdKind,
    /// `None`: every claim scans from the lowest id (a database without dead
    /// row versions in its indexes, or an interval of zero)
    interval: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// the id claims start at; `None` before the first claim that returned a row
    from: Option<String>,
    /// when the last scan from the lowest id began, and how long it took
    rescan: Option<(Instant, Duration)>,
    /// changed whenever the mark is lowered or a rescan begins or ends: a
    /// claim that began under another epoch does not move the mark
    epoch: u64,
}

/// Where one claim starts, and what it needs to report when done.
pub(super) struct Start {
    /// the id the claim starts at, or `None` for the lowest
    pub(super) from: Option<String>,
    epoch: u64,
    /// when it began, for a rescan
    rescan: Option<Instant>,
}

impl Mark {
    /// `interval`: how often claims scan from the lowest id; `None` for every
    /// claim.
    pub(super) fn new(kind: IdKind, interval: Option<Duration>) -> Mark {
        Mark {
            kind,
            interval: interval.filter(|d| !d.is_zero()),
            state: Mutex::new(State::default()),
        }
    }

    /// Where the next claim starts.
    pub(super) fn start(&self) -> Start {
        let mut s = self.state.lock().expect("mark lock");
        let Some(interval) = self.interval else {
            return Start {
                from: None,
                epoch: s.epoch,
                rescan: None,
            };
        };
        let due = match (&s.from, s.rescan) {
            (None, _) | (_, None) => true,
            (Some(_), Some((at, took))) => at.elapsed() >= interval.max(took * 10),
        };
        if due {
            let now = Instant::now();
            s.epoch += 1;
            // until this one ends, other claims keep starting at the mark
            s.rescan = Some((now, s.rescan.map_or(Duration::ZERO, |r| r.1)));
            return Start {
                from: None,
                epoch: s.epoch,
                rescan: Some(now),
            };
        }
        Start {
            from: s.from.clone(),
            epoch: s.epoch,
            rescan: None,
        }
    }

    /// A claim that began at `start` returned rows up to `last` (its highest
    /// id), or none.
    pub(super) fn claimed(&self, start: Start, last: Option<&str>) {
        if self.interval.is_none() {
            return;
        }
        let mut s = self.state.lock().expect("mark lock");
        if let Some(began) = start.rescan {
            s.rescan = Some((began, began.elapsed()));
        }
        if start.epoch != s.epoch {
            return;
        }
        // nothing returned: nothing is ready from where it began, so the mark stays
        if let Some(last) = last {
            s.from = Some(last.to_owned());
        }
        if start.rescan.is_some() {
            // claims that began during the rescan, from the old mark, leave it
            s.epoch += 1;
        }
    }

    /// Rows went back below the mark that it cannot name (a claim rolled
    /// back): the next claim scans from the lowest id.
    pub(super) fn rescan(&self) {
        if self.interval.is_none() {
            return;
        }
        let mut s = self.state.lock().expect("mark lock");
        s.from = None;
        s.epoch += 1;
    }

    /// Rows this client made ready again (retried, released, given back):
    /// claims start at the lowest of them if it is below the mark.
    pub(super) fn made_ready<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        if self.interval.is_none() {
            return;
        }
        let mut s = self.state.lock().expect("mark lock");
        // a claim under way may have passed these rows before they were ready:
        // none of them moves the mark past them
        s.epoch += 1;
        let Some(from) = s.from.clone() else {
            return;
        };
        let mut lowest: Option<i64> = None;
        for id in ids {
            match (self.kind, id.parse::<i64>()) {
                (IdKind::Integer, Ok(v)) => lowest = Some(lowest.map_or(v, |l| l.min(v))),
                // ids whose order only the database knows: scan from the lowest
                _ => {
                    s.from = None;
                    return;
                }
            }
        }
        if let (Some(low), Ok(mark)) = (lowest, from.parse::<i64>()) {
            if low < mark {
                s.from = Some(low.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark() -> Mark {
        Mark::new(IdKind::Integer, Some(Duration::from_secs(3600)))
    }

    #[test]
    fn claims_start_where_the_last_ended_until_a_rescan_is_due() {
        let m = mark();
        let s = m.start();
        assert_eq!(s.from, None, "no mark yet: from the lowest id");
        m.claimed(s, Some("5"));
        let s = m.start();
        assert_eq!(s.from.as_deref(), Some("5"));
        m.claimed(s, Some("9"));
        let s = m.start();
        assert_eq!(s.from.as_deref(), Some("9"));
        m.claimed(s, None);
        assert_eq!(
            m.start().from.as_deref(),
            Some("9"),
            "an empty claim keeps it"
        );
        let every = Mark::new(IdKind::Integer, Some(Duration::ZERO));
        let s = every.start();
        every.claimed(s, Some("3"));
        assert_eq!(
            every.start().from,
            None,
            "an interval of zero: every claim from the lowest"
        );
    }

    #[test]
    fn what_the_client_makes_ready_lowers_it() {
        let m = mark();
        let s = m.start();
        m.claimed(s, Some("10"));
        m.made_ready(["12", "7", "8"]);
        assert_eq!(m.start().from.as_deref(), Some("7"));
        m.made_ready(["9"]);
        assert_eq!(
            m.start().from.as_deref(),
            Some("7"),
            "above the mark: unchanged"
        );
        let text = Mark::new(IdKind::Text, Some(Duration::from_secs(3600)));
        let s = text.start();
        text.claimed(s, Some("m"));
        text.made_ready(["b"]);
        assert_eq!(text.start().from, None, "text ids: from the lowest");
    }

    #[test]
    fn a_claim_begun_before_a_lowering_leaves_the_mark() {
        let m = mark();
        let s = m.start();
        m.claimed(s, Some("10"));
        let slow = m.start();
        m.made_ready(["4"]);
        m.claimed(slow, Some("20"));
        assert_eq!(m.start().from.as_deref(), Some("4"));
    }

    #[test]
    fn a_claim_under_way_leaves_the_mark_below_rows_made_ready_above_it() {
        let m = mark();
        let s = m.start();
        m.claimed(s, Some("10"));
        m.made_ready(["4"]);
        let from_four = m.start();
        assert_eq!(from_four.from.as_deref(), Some("4"));
        // ready while that claim runs, maybe too late for it to see
        m.made_ready(["8"]);
        m.claimed(from_four, Some("20"));
        assert_eq!(m.start().from.as_deref(), Some("4"));
    }

    #[test]
    fn a_rescan_starts_the_next_claim_at_the_lowest_id() {
        let m = mark();
        let s = m.start();
        m.claimed(s, Some("10"));
        let under_way = m.start();
        m.rescan();
        m.claimed(under_way, Some("20"));
        assert_eq!(m.start().from, None);
    }

    #[test]
    fn claims_begun_during_a_rescan_leave_what_it_found() {
        let m = Mark::new(IdKind::Integer, Some(Duration::from_millis(50)));
        let s = m.start();
        m.claimed(s, Some("50"));
        std::thread::sleep(Duration::from_millis(60));
        let rescan = m.start();
        assert_eq!(rescan.from, None);
        let during = m.start();
        assert_eq!(
            during.from.as_deref(),
            Some("50"),
            "others go on from the mark"
        );
        m.claimed(rescan, Some("3"));
        m.claimed(during, Some("60"));
        let next = m.start();
        assert_eq!(next.from.as_deref(), Some("3"));
    }
}
