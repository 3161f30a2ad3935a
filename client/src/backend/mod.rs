//! The one seam between the client and the databases. A [`Backend`] is chosen
//! once, when the client connects: the extension ([`ext`]) or the portable SQL
//! path ([`portable`]). Everything that differs between the two lives behind
//! it; `Client`, `Delivery` and the worker call it and never ask which it is.
//! A claimed row's [`Hold`] carries the backend that settles it, so a delivery
//! and its backend cannot be mismatched. Backends hand over plain data
//! (`Claimed`, `Stats`, `Settled`) and never see a `Delivery`, a `Client` or
//! this module: dependencies point one way, client → here → backends →
//! [`combine`], [`pinned`] and the crate's leaf modules.

pub(crate) mod combine;
pub(crate) mod ext;
mod pinned;
pub(crate) mod portable;

use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{Outcome, Settled};
use crate::payload;
use crate::queue::Queue;
use crate::stats::{DeadRow, Stats};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Notify;

/// What a client's backend can do: ask these instead of which backend it is.
/// An operation a backend lacks fails with [`Error::Unsupported`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The worker wakes on `NOTIFY` when rows are inserted (otherwise it polls).
    pub listen: bool,
    /// [`crate::Client::requeue_dead`] moves dead-lettered rows back (every
    /// backend does now; kept for callers that ask).
    pub requeue_dead: bool,
    /// The handler can write in the row_lock claim transaction through
    /// [`crate::Delivery::transaction`] (tokio-postgres).
    pub transaction: bool,
    /// The handler can write in the row_lock claim transaction through
    /// [`crate::Delivery::any_transaction`] (sqlx).
    pub any_transaction: bool,
}

/// The backend of one client.
#[derive(Clone)]
pub(crate) enum Backend {
    Ext(Arc<ext::Ext>),
    Portable(Arc<portable::Engine>),
}

/// A claimed row with what holds it.
pub(crate) type Claimed = payload::Claimed<Hold>;

/// What holds a delivery's row, with the backend that settles it.
pub(crate) enum Hold {
    Ext(Arc<ext::Ext>, ext::Hold),
    Portable(Arc<portable::Engine>, portable::Hold),
}

impl Backend {
    pub(crate) fn queue(&self) -> &Queue {
        match self {
            Backend::Ext(e) => &e.queue,
            Backend::Portable(p) => p.queue(),
        }
    }

    pub(crate) fn meters(&self) -> &Meters {
        match self {
            Backend::Ext(e) => &e.meters,
            Backend::Portable(p) => &p.meters,
        }
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        match self {
            Backend::Ext(e) => Capabilities {
                listen: e.listens(),
                requeue_dead: true,
                transaction: true,
                any_transaction: false,
            },
            Backend::Portable(_) => Capabilities {
                listen: false,
                requeue_dead: true,
                transaction: false,
                any_transaction: true,
            },
        }
    }

    /// Claim up to `n` rows.
    pub(crate) async fn claim(&self, n: usize) -> Result<Vec<Claimed>> {
        Ok(match self {
            Backend::Ext(e) => e
                .claim(n)
                .await?
                .into_iter()
                .map(|c| c.map(|h| Hold::Ext(e.clone(), h)))
                .collect(),
            Backend::Portable(p) => p
                .claim(n)
                .await?
                .into_iter()
                .map(|c| c.map(|h| Hold::Portable(p.clone(), h)))
                .collect(),
        })
    }

    /// Settle deliveries with one outcome, one result each, in order. Those
    /// held by another client's backend are settled by it, one by one.
    pub(crate) async fn settle_many(
        &self,
        items: Vec<(String, Hold)>,
        outcome: Outcome,
    ) -> Vec<Result<Settled>> {
        let len = items.len();
        let start = Instant::now();
        let (done, theirs) = match self {
            Backend::Ext(b) => {
                let (mine, theirs) = split(items, |h| match h {
                    Hold::Ext(e, h) if Arc::ptr_eq(b, &e) => Ok(h),
                    h => Err(h),
                });
                (
                    in_place(len, mine, |m| b.settle_many(m, outcome.clone())).await,
                    theirs,
                )
            }
            Backend::Portable(b) => {
                let (mine, theirs) = split(items, |h| match h {
                    Hold::Portable(p, h) if Arc::ptr_eq(b, &p) => Ok(h),
                    h => Err(h),
                });
                (
                    in_place(len, mine, |m| b.settle_many(m, outcome.clone())).await,
                    theirs,
                )
            }
        };
        let m = self.meters();
        m.settle_took(start.elapsed());
        for r in done.iter().flatten() {
            m.settled(r);
        }
        let mut out = done;
        for (i, id, hold) in theirs {
            out[i] = Some(hold.settle(id, outcome.clone()).await);
        }
        out.into_iter()
            .map(|r| r.expect("every delivery settled"))
            .collect()
    }

    pub(crate) async fn stats(&self) -> Result<Stats> {
        match self {
            Backend::Ext(e) => e.stats().await,
            Backend::Portable(p) => p.stats().await,
        }
    }

    pub(crate) async fn requeue_dead(&self, ids: Option<&[String]>) -> Result<i64> {
        match self {
            Backend::Ext(e) => ext::admin::requeue_dead(e.pool(), &e.queue.name, ids).await,
            Backend::Portable(p) => p.requeue_dead(ids).await,
        }
    }

    pub(crate) async fn dead_rows(
        &self,
        limit: i64,
        ids: Option<&[String]>,
    ) -> Result<Vec<DeadRow>> {
        match self {
            Backend::Ext(e) => ext::admin::dead_rows(e.pool(), &e.queue.name, limit, ids).await,
            Backend::Portable(p) => p.dead_rows(limit, ids).await,
        }
    }

    pub(crate) async fn purge_dead(
        &self,
        older_than: Option<Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        match self {
            Backend::Ext(e) => {
                ext::admin::purge_dead(e.pool(), &e.queue.name, older_than, ids).await
            }
            Backend::Portable(p) => p.purge_dead(older_than, ids).await,
        }
    }

    pub(crate) async fn statements(&self) -> Result<Vec<(String, String)>> {
        match self {
            Backend::Ext(e) => ext::admin::statements(e.pool(), &e.queue.name).await,
            Backend::Portable(p) => Ok(p.statements()),
        }
    }

    /// The worker's wake-up task, when the backend has one.
    pub(crate) fn listen(&self, wake: Arc<Notify>) -> Option<tokio::task::JoinHandle<()>> {
        match self {
            Backend::Ext(e) => e.listen(wake),
            Backend::Portable(_) => None,
        }
    }

    pub(crate) fn ext_pool(&self) -> Option<&deadpool_postgres::Pool> {
        match self {
            Backend::Ext(e) => Some(e.pool()),
            Backend::Portable(_) => None,
        }
    }

    pub(crate) fn any_pool(&self) -> Option<&sqlx::AnyPool> {
        match self {
            Backend::Portable(p) => Some(p.pool()),
            Backend::Ext(_) => None,
        }
    }

    pub(crate) fn dialect(&self) -> Option<portable::Dialect> {
        match self {
            Backend::Portable(p) => Some(p.dialect()),
            Backend::Ext(_) => None,
        }
    }
}

/// Items sorted by `pick` into this backend's holds and the others, each with
/// its place in the input.
#[allow(clippy::type_complexity)]
fn split<H>(
    items: Vec<(String, Hold)>,
    pick: impl Fn(Hold) -> std::result::Result<H, Hold>,
) -> (Vec<(usize, String, H)>, Vec<(usize, String, Hold)>) {
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    for (i, (id, hold)) in items.into_iter().enumerate() {
        match pick(hold) {
            Ok(h) => mine.push((i, id, h)),
            Err(h) => theirs.push((i, id, h)),
        }
    }
    (mine, theirs)
}

/// Settle `mine` with `f`, each result in its input place among `len` (the
/// other places left empty, for the caller to fill).
async fn in_place<H, F, Fut>(
    len: usize,
    mine: Vec<(usize, String, H)>,
    f: F,
) -> Vec<Option<Result<Settled>>>
where
    F: FnOnce(Vec<(String, H)>) -> Fut,
    Fut: std::future::Future<Output = Vec<Result<Settled>>>,
{
    let places: Vec<usize> = mine.iter().map(|(i, ..)| *i).collect();
    let done = f(mine.into_iter().map(|(_, id, h)| (id, h)).collect()).await;
    let mut out: Vec<Option<Result<Settled>>> = Vec::new();
    out.resize_with(len, || None);
    for (i, r) in places.into_iter().zip(done) {
        out[i] = Some(r);
    }
    out
}

impl Hold {
    pub(crate) fn queue(&self) -> &Queue {
        match self {
            Hold::Ext(e, _) => &e.queue,
            Hold::Portable(p, _) => p.queue(),
        }
    }

    /// The lease token (the deadline), in the lease form.
    pub(crate) fn token(&self) -> Option<SystemTime> {
        match self {
            Hold::Ext(_, ext::Hold::Lease(t)) => Some(*t),
            Hold::Portable(_, portable::Hold::Lease(us)) => Some(portable::token_time(*us)),
            _ => None,
        }
    }

    /// Settle, and count it in the queue's metrics.
    pub(crate) async fn settle(self, id: String, outcome: Outcome) -> Result<Settled> {
        let start = Instant::now();
        let (r, m) = match self {
            Hold::Ext(e, h) => (e.settle(id, h, outcome).await, Backend::Ext(e)),
            Hold::Portable(p, h) => (p.settle(id, h, outcome).await, Backend::Portable(p)),
        };
        m.meters().settle_took(start.elapsed());
        m.meters().settled(&r);
        r
    }

    /// Give back without an outcome, counted as `released`.
    pub(crate) async fn release(self, id: &str) -> Result<Settled> {
        let start = Instant::now();
        let (r, m) = match self {
            Hold::Ext(e, h) => (e.release(id, h).await, Backend::Ext(e)),
            Hold::Portable(p, h) => (p.release(id, h).await, Backend::Portable(p)),
        };
        let r = r.map(|()| Settled::Released);
        m.meters().settle_took(start.elapsed());
        m.meters().settled(&r);
        r
    }

    /// A delivery dropped unsettled: give it back as well as can be.
    pub(crate) fn give_back(self, id: String) {
        match self {
            Hold::Ext(e, h) => e.give_back(id, h),
            Hold::Portable(p, h) => p.give_back(id, h),
        }
    }

    pub(crate) async fn extend(&mut self, id: &str, ttl: Duration) -> Result<()> {
        match self {
            Hold::Ext(e, h) => e.extend(id, h, ttl).await,
            Hold::Portable(p, h) => p.extend(id, h, ttl).await,
        }
    }

    pub(crate) async fn transaction(&mut self) -> Result<&tokio_postgres::Client> {
        match self {
            Hold::Ext(e, h) => e.transaction(h).await,
            Hold::Portable(..) => Err(Error::unsupported(
                "transaction() is the extension backend's; on the portable path use any_transaction()",
            )),
        }
    }

    pub(crate) async fn any_transaction(&mut self) -> Result<&mut sqlx::AnyConnection> {
        match self {
            Hold::Portable(p, h) => p.any_transaction(h).await,
            Hold::Ext(..) => Err(Error::unsupported(
                "any_transaction() is the portable path's; on the extension backend use transaction()",
            )),
        }
    }
}
