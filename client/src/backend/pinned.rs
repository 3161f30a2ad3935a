//! Rules of a claim whose deliveries share one connection (row_lock, advisory),
//! the same on both backends.

use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};

/// Whether a row_lock outcome for `n` of a claim's deliveries (of `open` still
/// unsettled) runs in a savepoint of its own, so that if it fails the deliveries
/// still open keep the claim transaction. Not for ack and drop: a row locked by
/// the claim and deleted in a subtransaction gets a MultiXact as its deleter,
/// and PostgreSQL's index scans never mark such a tuple dead in the index (only
/// VACUUM removes it), so every later claim would walk past all of them. An ack
/// or drop that fails (rare: a trigger, a foreign key) aborts the claim
/// transaction instead, and every row of the claim goes back to the queue. Nor
/// for the one delivery left open: there is nobody left to protect. (A batch of
/// other outcomes is fenced even when it is the last, so that when it fails its
/// deliveries can be settled one by one, each with its own result.)
pub(crate) fn fence(outcome: &Outcome, n: usize, open: usize) -> bool {
    !matches!(outcome, Outcome::Ack | Outcome::Drop) && (n > 1 || open > n)
}

/// A batch whose claim did not end cleanly (`closed`: the row_lock commit, or
/// the connection's clean-up, failed): nothing of it was kept, so every result
/// that says otherwise becomes that error.
pub(crate) fn uncommitted(out: &mut [Result<Settled>], closed: Result<()>) {
    if let Err(e) = closed {
        let (code, msg) = (e.code().map(str::to_owned), e.to_string());
        for r in out.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(Error::database(
                code.as_deref(),
                format!("the claim's transaction did not commit: {msg}"),
            ));
        }
    }
}
