//! Lease settles of concurrent deliveries, combined.
//!
//! A settle that finds fewer than two other settles of its client on the way
//! runs alone, at once (`queue_complete`; on the portable path its own
//! statement), so a lone worker pays nothing. Settles that arrive while two are
//! on the way wait, and go together, one statement per outcome, when one of
//! those returns — group commit
//! (`queue_complete_many`; on the portable path `settle_many_lease`). Sixteen
//! workers acking one job each then cost the server about one statement per
//! round trip instead of sixteen.
//!
//! Each caller still gets its own result, only after its row is written: a
//! lease lost fails that delivery alone, and a batch statement that fails as a
//! whole (nothing written) is run again one delivery at a time, so each gets
//! the error of its own row, as it would alone. The batch runs in a task of its
//! own, so a caller that stops waiting never interrupts the others' settles.

use crate::client::{micros, Backend, Inner, COMPLETE_MANY_SQL, COMPLETE_SQL};
use crate::delivery::{Outcome, Settled};
use crate::error::{DbError, Error, Result};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::oneshot;

/// Settles on the way at once before the next ones wait to go together. One
/// lane would serialise every settle of the client behind the one before it,
/// leaving the server idle between them; two keep it busy while the next batch
/// gathers (bench/NOTES.md, *Group-committed lease settles*, has the figures).
const LANES: usize = 2;

/// Most deliveries in one combined statement.
const MAX_BATCH: usize = 1000;

/// The settles of one client waiting for the one on the way.
#[derive(Default)]
pub(crate) struct Combiner {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// settles (alone, or a batch task) on the way, at most `LANES`
    busy: usize,
    waiting: Vec<Item>,
}

struct Item {
    id: String,
    token: Token,
    outcome: Outcome,
    tx: oneshot::Sender<Result<Settled>>,
}

/// A lease delivery's token: the extension's timestamp, or the portable
/// path's epoch microseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Token {
    Ext(Option<SystemTime>),
    Portable(Option<i64>),
}

/// Settle one lease delivery, combined with the client's concurrent settles.
pub(crate) async fn settle(
    inner: &Arc<Inner>,
    id: String,
    token: Token,
    outcome: Outcome,
) -> Result<Settled> {
    let rx = {
        let mut s = inner.acks.state.lock().expect("combiner lock");
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
            let _lead = Lead(inner.clone());
            one(inner, &id, token, &outcome).await
        }
    }
}

/// Held by whoever is on the way; on its drop (done, cancelled or panicked)
/// the settles that arrived meanwhile go as a batch task, or the client is idle.
struct Lead(Arc<Inner>);

impl Drop for Lead {
    fn drop(&mut self) {
        let mut s = self.0.acks.state.lock().expect("combiner lock");
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
async fn batches(inner: Arc<Inner>) {
    let _lead = Lead(inner.clone());
    loop {
        let items = {
            let mut s = inner.acks.state.lock().expect("combiner lock");
            if s.waiting.is_empty() {
                return;
            }
            std::mem::take(&mut s.waiting)
        };
        for group in groups(items) {
            let ids: Vec<String> = group.iter().map(|i| i.id.clone()).collect();
            let tokens: Vec<Token> = group.iter().map(|i| i.token).collect();
            let rs = many_or_each(&inner, &ids, &tokens, &group[0].outcome).await;
            for (it, r) in group.into_iter().zip(rs) {
                let _ = it.tx.send(r);
            }
        }
    }
}

/// Settle lease deliveries of one outcome and distinct ids: one alone, more in
/// one statement ([`many`]); a statement that fails as a whole wrote nothing,
/// so then each alone ([`one`]), for its own result.
pub(crate) async fn many_or_each(
    inner: &Arc<Inner>,
    ids: &[String],
    tokens: &[Token],
    outcome: &Outcome,
) -> Vec<Result<Settled>> {
    if ids.len() > 1 {
        if let Ok(rs) = many(inner, ids, tokens, outcome).await {
            return rs;
        }
    }
    let mut rs = Vec::with_capacity(ids.len());
    for (id, token) in ids.iter().zip(tokens) {
        rs.push(one(inner, id, *token, outcome).await);
    }
    rs
}

/// Items split into statements: one outcome each, an id at most once (a later
/// delivery of a row goes in a later statement), at most `MAX_BATCH`, in order
/// of arrival within each.
fn groups(items: Vec<Item>) -> Vec<Vec<Item>> {
    // each statement with the ids it holds: thousands of waiting settles are
    // split without comparing every id with every other
    let mut out: Vec<(Vec<Item>, HashSet<String>)> = Vec::new();
    for it in items {
        let fits = |(g, ids): &(Vec<Item>, HashSet<String>)| {
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

/// One lease settle. Any error but a lost lease wrote nothing, so the row is
/// given back at once rather than at its deadline.
pub(crate) async fn one(
    inner: &Arc<Inner>,
    id: &str,
    token: Token,
    outcome: &Outcome,
) -> Result<Settled> {
    match (&inner.backend, token) {
        (Backend::Portable(e), Token::Portable(t)) => {
            let r = e.settle_lease(id, t, outcome).await;
            if matches!(&r, Err(err) if !matches!(err, Error::LeaseLost(_))) {
                let _ = e.release(None, None, id, t).await;
            }
            r
        }
        (_, Token::Ext(t)) => Ok(settled(inner, id, &one_ext(inner, id, t, outcome).await?)),
        (_, Token::Portable(_)) => Err(Error::invalid("a portable token on the extension backend")),
    }
}

/// One settle on the extension: `queue_complete`'s result text. Any error but
/// a lost lease wrote nothing, so the row is given back at once.
pub(crate) async fn one_ext(
    inner: &Arc<Inner>,
    id: &str,
    token: Option<SystemTime>,
    outcome: &Outcome,
) -> Result<String> {
    let c = inner.pool()?.get().await?;
    let st = c.prepare_cached(COMPLETE_SQL).await?;
    let r: Result<String> = c
        .query_one(
            &st,
            &[
                &inner.queue.name,
                &id,
                &outcome.sql_name(),
                &delay(outcome),
                &token,
            ],
        )
        .await
        .map(|r| r.get(0))
        .map_err(Into::into);
    drop(c);
    if matches!(&r, Err(err) if !matches!(err, Error::LeaseLost(_))) {
        let _ = crate::delivery::release(inner, id, token, None, None).await;
    }
    r
}

/// What the extension's result text says was written (a move to the dead
/// letter is logged).
pub(crate) fn settled(inner: &Inner, id: &str, result: &str) -> Settled {
    let s = Settled::parse(result);
    if s == Settled::DeadLettered {
        tracing::warn!(queue = %inner.queue.name, id = %id, "max_attempts reached: moved to the dead letter");
    }
    s
}

/// One statement for lease deliveries of one outcome, distinct ids: each one's
/// result (a row this call did not hold is [`Error::LeaseLost`]), or the
/// statement's error, when nothing was written.
pub(crate) async fn many(
    inner: &Arc<Inner>,
    ids: &[String],
    tokens: &[Token],
    outcome: &Outcome,
) -> Result<Vec<Result<Settled>>> {
    if let Backend::Portable(e) = &inner.backend {
        let items: Vec<(String, Option<i64>)> = ids
            .iter()
            .zip(tokens)
            .map(|(id, t)| match t {
                Token::Portable(t) => (id.clone(), *t),
                Token::Ext(_) => (id.clone(), None),
            })
            .collect();
        let rs = e.settle_many_lease(&items, outcome).await?;
        return Ok(ids
            .iter()
            .zip(rs)
            .map(|(id, r)| r.ok_or_else(|| lease_lost(&inner.queue.name, id)))
            .collect());
    }
    let tokens: Vec<Option<SystemTime>> = tokens
        .iter()
        .map(|t| match t {
            Token::Ext(t) => *t,
            Token::Portable(_) => None,
        })
        .collect();
    let c = inner.pool()?.get().await?;
    let st = c.prepare_cached(COMPLETE_MANY_SQL).await?;
    let rows = c
        .query(
            &st,
            &[
                &inner.queue.name,
                &ids,
                &outcome.sql_name(),
                &delay(outcome),
                &tokens,
            ],
        )
        .await?;
    drop(c);
    let got: std::collections::HashMap<&str, &str> = rows
        .iter()
        .map(|r| (r.get::<_, &str>(0), r.get::<_, &str>(1)))
        .collect();
    Ok(ids
        .iter()
        .map(|id| match got.get(id.as_str()) {
            Some(&r) if r != "lease_lost" => Ok(settled(inner, id, r)),
            _ => Err(lease_lost(&inner.queue.name, id)),
        })
        .collect())
}

fn delay(outcome: &Outcome) -> Option<i64> {
    match outcome {
        Outcome::RetryAfter(d) => Some(micros(*d)),
        _ => None,
    }
}

pub(crate) fn lease_lost(queue: &str, id: &str) -> Error {
    Error::LeaseLost(DbError {
        code: Some("SQ001".into()),
        message: format!(
            "lease lost: row {id} of queue \"{queue}\" no longer holds this delivery's token"
        ),
        source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, outcome: Outcome) -> Item {
        Item {
            id: id.into(),
            token: Token::Portable(Some(1)),
            outcome,
            tx: oneshot::channel().0,
        }
    }

    /// What one batch of waiting settles becomes: a statement per outcome, no
    /// id twice in one (the later delivery of a row goes in a later statement),
    /// at most MAX_BATCH each, arrival order kept.
    #[test]
    fn groups_split_by_outcome_id_and_size() {
        let mut items: Vec<Item> = (0..2500)
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
