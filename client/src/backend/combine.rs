//! Lease settles of concurrent deliveries, combined (group commit). Knows no
//! SQL: a backend settles one delivery or many through [`LeaseSettler`].
//!
//! A settle that finds fewer than two other settles of its client on the way
//! runs alone, at once, so a lone worker pays nothing. Settles that arrive
//! while two are on the way wait, and go together, one statement per outcome,
//! when one of those returns. Sixteen workers acking one job each then cost the
//! server about one statement per round trip instead of sixteen.
//!
//! Each caller still gets its own result, only after its row is written: a
//! lease lost fails that delivery alone, and a batch statement that fails as a
//! whole (nothing written) is run again one delivery at a time, so each gets
//! the error of its own row, as it would alone. The batch runs in a task of its
//! own, so a caller that stops waiting never interrupts the others' settles.

use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// Settles on the way at once before the next ones wait to go together. One
/// lane would serialise every settle of the client behind the one before it,
/// leaving the server idle between them; two keep it busy while the next batch
/// gathers (bench/NOTES.md, *Group-committed lease settles*, has the figures).
const LANES: usize = 2;

/// Most deliveries in one combined statement.
const MAX_BATCH: usize = 1000;

/// A backend's lease settles, as the combiner uses them.
pub(crate) trait LeaseSettler: Send + Sync + 'static {
    /// The backend's lease token.
    type Token: Copy + Send + Sync + 'static;

    /// The settles of this backend's client waiting for the ones on the way.
    fn combiner(&self) -> &Combiner<Self::Token>;

    /// One lease delivery's outcome written alone (the statement only:
    /// [`one`] runs it again or gives the row back when it fails).
    fn one(
        &self,
        id: &str,
        token: Self::Token,
        outcome: &Outcome,
    ) -> impl Future<Output = Result<Settled>> + Send;

    /// Give a lease back without an outcome: its row is ready again at once.
    fn release_lease(
        &self,
        id: &str,
        token: Self::Token,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Lease deliveries of one outcome and distinct ids in one statement: each
    /// one's result, or the statement's error when it wrote nothing.
    fn many(
        &self,
        ids: &[String],
        tokens: &[Self::Token],
        outcome: &Outcome,
    ) -> impl Future<Output = Result<Vec<Result<Settled>>>> + Send;
}

/// The settles of one client waiting for the ones on the way.
pub(crate) struct Combiner<T> {
    state: Mutex<State<T>>,
}

impl<T> Default for Combiner<T> {
    fn default() -> Self {
        Combiner {
            state: Mutex::new(State {
                busy: 0,
                waiting: Vec::new(),
            }),
        }
    }
}

struct State<T> {
    /// settles (alone, or a batch task) on the way, at most `LANES`
    busy: usize,
    waiting: Vec<Item<T>>,
}

struct Item<T> {
    id: String,
    token: T,
    outcome: Outcome,
    tx: oneshot::Sender<Result<Settled>>,
}

/// Settle one lease delivery, combined with the client's concurrent settles.
pub(crate) async fn settle<L: LeaseSettler>(
    l: &Arc<L>,
    id: String,
    token: L::Token,
    outcome: Outcome,
) -> Result<Settled> {
    let rx = {
        let mut s = l.combiner().state.lock().expect("combiner lock");
        if s.busy >= LANES {
            let (tx, rx) = oneshot::channel();
            s.waiting.push(Item {
                id,
                token,
                outcome,
                tx,
            });
            Ok(rx)
        } else {
            s.busy += 1;
            Err((id, token, outcome))
        }
    };
    match rx {
        Ok(rx) => rx.await.unwrap_or_else(|_| {
            Err(Error::invalid(
                "the settle was interrupted (the runtime shut down); its outcome may or may not be written",
            ))
        }),
        Err((id, token, outcome)) => {
            let _lead = Lead(l.clone());
            one(&**l, &id, token, &outcome).await
        }
    }
}

/// Held by whoever is on the way; on its drop (done, cancelled or panicked)
/// the settles that arrived meanwhile go as a batch task, or the client is idle.
struct Lead<L: LeaseSettler>(Arc<L>);

impl<L: LeaseSettler> Drop for Lead<L> {
    fn drop(&mut self) {
        let mut s = self.0.combiner().state.lock().expect("combiner lock");
        if s.waiting.is_empty() {
            s.busy -= 1;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                drop(s);
                h.spawn(batches(self.0.clone()));
            }
            Err(_) => {
                // no runtime to run them on: each caller is told (the sender dropped)
                s.waiting.clear();
                s.busy -= 1;
            }
        }
    }
}

/// The batch task: settles whatever waits, until nothing does.
async fn batches<L: LeaseSettler>(l: Arc<L>) {
    let _lead = Lead(l.clone());
    loop {
        let items = {
            let mut s = l.combiner().state.lock().expect("combiner lock");
            if s.waiting.is_empty() {
                return;
            }
            std::mem::take(&mut s.waiting)
        };
        for group in groups(items) {
            let ids: Vec<String> = group.iter().map(|i| i.id.clone()).collect();
            let tokens: Vec<L::Token> = group.iter().map(|i| i.token).collect();
            let rs = many_or_each(&*l, &ids, &tokens, &group[0].outcome).await;
            for (it, r) in group.into_iter().zip(rs) {
                let _ = it.tx.send(r);
            }
        }
    }
}

/// The pauses before a lease settle the server turned down for a passing
/// reason ([`Error::is_transient`]) is run again: a deadlock or serialization
/// failure clears at once, a dropped connection between nodes or a server
/// starting up lasts seconds.
const AGAIN_AFTER: [Duration; 4] = [
    Duration::from_millis(2),
    Duration::from_millis(50),
    Duration::from_millis(500),
    Duration::from_millis(2000),
];

/// One lease delivery settled alone. The server's error means its transaction
/// rolled back, so a transient one is run again (a lease token that moved on
/// meanwhile makes the next try [`Error::LeaseLost`], never a second write);
/// any other error but a lost lease wrote nothing, so the row is given back at
/// once rather than at its deadline, and the settle's error returned.
pub(crate) async fn one<L: LeaseSettler>(
    l: &L,
    id: &str,
    token: L::Token,
    outcome: &Outcome,
) -> Result<Settled> {
    let mut again = AGAIN_AFTER.iter();
    loop {
        let e = match l.one(id, token, outcome).await {
            Err(e) if !matches!(e, Error::LeaseLost(_)) => e,
            r => return r,
        };
        match again.next() {
            Some(pause) if e.is_transient() => {
                tracing::debug!(id, error = %e, "a lease settle failed for a passing reason: running it again");
                tokio::time::sleep(*pause).await;
            }
            _ => {
                let _ = l.release_lease(id, token).await;
                return Err(e);
            }
        }
    }
}

/// Settle lease deliveries of one outcome and distinct ids: one alone, more in
/// one statement; a statement that fails as a whole wrote nothing, so then each
/// alone, for its own result.
pub(crate) async fn many_or_each<L: LeaseSettler>(
    l: &L,
    ids: &[String],
    tokens: &[L::Token],
    outcome: &Outcome,
) -> Vec<Result<Settled>> {
    if ids.len() > 1 {
        if let Ok(rs) = l.many(ids, tokens, outcome).await {
            return rs;
        }
    }
    let mut rs = Vec::with_capacity(ids.len());
    for (id, token) in ids.iter().zip(tokens) {
        rs.push(one(l, id, *token, outcome).await);
    }
    rs
}

/// Items split into statements: one outcome each, an id at most once (a later
/// delivery of a row goes in a later statement), at most `MAX_BATCH`, in order
/// of arrival within each.
fn groups<T>(items: Vec<Item<T>>) -> Vec<Vec<Item<T>>> {
    // each statement with the ids it holds: thousands of waiting settles are
    // split without comparing every id with every other
    let mut out: Vec<(Vec<Item<T>>, HashSet<String>)> = Vec::new();
    for it in items {
        let fits = |(g, ids): &(Vec<Item<T>>, HashSet<String>)| {
            g.len() < MAX_BATCH && g[0].outcome == it.outcome && !ids.contains(&it.id)
        };
        match out.iter_mut().find(|g| fits(g)) {
            Some((g, ids)) => {
                ids.insert(it.id.clone());
                g.push(it);
            }
            None => {
                let ids = HashSet::from([it.id.clone()]);
                out.push((vec![it], ids));
            }
        }
    }
    out.into_iter().map(|(g, _)| g).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, outcome: Outcome) -> Item<i64> {
        Item {
            id: id.into(),
            token: 1,
            outcome,
            tx: oneshot::channel().0,
        }
    }

    /// What one batch of waiting settles becomes: a statement per outcome, no
    /// id twice in one (the later delivery of a row goes in a later statement),
    /// at most MAX_BATCH each, arrival order kept.
    #[test]
    fn groups_split_by_outcome_id_and_size() {
        let mut items: Vec<Item<i64>> = (0..2500)
            .map(|i| item(&i.to_string(), Outcome::Ack))
            .collect();
        items.insert(10, item("r1", Outcome::Retry));
        items.push(item("7", Outcome::Ack));
        items.push(item("r2", Outcome::Retry));
        let gs = groups(items);
        let shape: Vec<(usize, String, String)> = gs
            .iter()
            .map(|g| (g.len(), g[0].id.clone(), g[0].outcome.sql_name()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (1000, "0".into(), "ack".into()),
                (2, "r1".into(), "retry".into()),
                (1000, "1000".into(), "ack".into()),
                (501, "2000".into(), "ack".into()),
            ]
        );
        // the second "7" went with the third statement, after the first "7"
        assert_eq!(gs[3].last().unwrap().id, "7");
        assert!(gs[0]
            .windows(2)
            .all(|w| w[0].id.parse::<u32>().unwrap() < w[1].id.parse::<u32>().unwrap()));
    }
}
