//! The one seam between the client and the databases. A [`Backend`] is chosen
//! once, when the client connects: the extension ([`ext`]) or the portable SQL
//! path ([`portable`]). Everything that differs between the two lives behind
//! it; `Client`, `Delivery` and the worker call it and never ask which it is.
//! A claimed row's [`Held`] carries the backend that settles it, so a
//! delivery and its backend cannot be mismatched; the hold protocol itself is
//! written once, in [`hold`]. [`Registry`] is the same seam for the operator's
//! view of a whole database (`Admin`). Backends hand over plain data
//! (`Claimed`, `Stats`, `Settled`) and never see a `Delivery`, a `Client` or
//! this module: dependencies point one way, client → here → backends →
//! [`hold`], [`combine`] and the crate's leaf modules. This is the only module
//! that names both backends.

mod combine;
mod ext;
mod hold;
mod portable;

pub use ext::descriptor::{Difference, Registered};
pub use ext::{Edition, EXTENSION_VERSION};
pub use portable::{AnyConn, Dialect};

use crate::conninfo::ConnInfo;
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{Outcome, Settled};
use crate::payload;
use crate::pool::PoolOptions;
use crate::queue::Queue;
use crate::stats::{DeadRow, Health, QueueInfo, Stats};
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
    /// [`crate::Client::requeue_dead`] moves dead-lettered rows back: always
    /// true.
    #[deprecated(since = "0.6.1", note = "every backend requeues dead rows")]
    pub requeue_dead: bool,
    /// The handler can write in the row_lock claim transaction through
    /// [`crate::Delivery::transaction`] (tokio-postgres).
    pub transaction: bool,
    /// The handler can write in the row_lock claim transaction through
    /// [`crate::Delivery::any_transaction`] (sqlx).
    pub any_transaction: bool,
    /// A delivery's settle can claim the next row in the same statement
    /// (`queue_complete_and_claim`: the lease form on the extension, 0.12.0
    /// or later); the worker does so at batch 1 ([`crate::WorkerOptions::chain`]).
    pub settle_and_claim: bool,
}

/// The backend of one client.
#[derive(Clone)]
pub(crate) enum Backend {
    Ext(Arc<ext::Ext>),
    Portable(Arc<portable::Engine>),
}

/// A claimed row with what holds it.
pub(crate) type Claimed = payload::Claimed<Held>;

/// What holds a delivery's row, with the backend that settles it.
pub(crate) enum Held {
    Ext(Arc<ext::Ext>, ext::Hold),
    Portable(Arc<portable::Engine>, portable::Hold),
}

impl Backend {
    /// PostgreSQL with the extension, over a pool of its own.
    pub(crate) async fn extension(
        info: ConnInfo,
        pool: PoolOptions,
        queue: Queue,
    ) -> Result<Backend> {
        Ok(Backend::Ext(ext::Ext::connect(info, pool, queue).await?))
    }

    /// PostgreSQL with the extension, over the caller's pool.
    pub(crate) async fn extension_on(
        pool: deadpool_postgres::Pool,
        queue: Queue,
    ) -> Result<Backend> {
        let meters = Meters::new(&queue.name);
        let st = ext::connect::Statements::Prepared;
        Ok(Backend::Ext(
            ext::Ext::attach(pool, queue, None, st, meters).await?,
        ))
    }

    /// The portable path.
    pub(crate) async fn portable(url: &str, pool: &PoolOptions, queue: Queue) -> Result<Backend> {
        Ok(Backend::Portable(
            portable::Engine::connect(url, pool, queue).await?,
        ))
    }

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
            #[allow(deprecated)]
            Backend::Ext(e) => Capabilities {
                listen: e.listens(),
                requeue_dead: true,
                transaction: true,
                any_transaction: false,
                settle_and_claim: e.chains(),
            },
            #[allow(deprecated)]
            Backend::Portable(_) => Capabilities {
                listen: false,
                requeue_dead: true,
                transaction: false,
                any_transaction: true,
                settle_and_claim: false,
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
                .map(|c| c.map(|h| Held::Ext(e.clone(), h)))
                .collect(),
            Backend::Portable(p) => p
                .claim(n)
                .await?
                .into_iter()
                .map(|c| c.map(|h| Held::Portable(p.clone(), h)))
                .collect(),
        })
    }

    /// Settle deliveries with one outcome, one result each, in order. Those
    /// held by another client's backend are settled by it, one by one.
    pub(crate) async fn settle_many(
        &self,
        items: Vec<(String, Held)>,
        outcome: Outcome,
    ) -> Vec<Result<Settled>> {
        let len = items.len();
        let start = Instant::now();
        let (done, theirs) = match self {
            Backend::Ext(b) => {
                let (mine, theirs) = split(items, |h| match h {
                    Held::Ext(e, h) if Arc::ptr_eq(b, &e) => Ok(h),
                    h => Err(h),
                });
                (
                    in_place(len, mine, |m| hold::settle_many(b, m, outcome.clone())).await,
                    theirs,
                )
            }
            Backend::Portable(b) => {
                let (mine, theirs) = split(items, |h| match h {
                    Held::Portable(p, h) if Arc::ptr_eq(b, &p) => Ok(h),
                    h => Err(h),
                });
                (
                    in_place(len, mine, |m| hold::settle_many(b, m, outcome.clone())).await,
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

    pub(crate) async fn health(&self) -> Result<Health> {
        match self {
            Backend::Ext(e) => e.health().await,
            Backend::Portable(p) => Err(no_health(p.dialect())),
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

    pub(crate) async fn any_connection(&self) -> Result<portable::AnyConn> {
        match self {
            Backend::Portable(p) => p.any_connection().await,
            Backend::Ext(_) => Err(Error::unsupported(
                "any_connection() is for the portable path; on the extension use pool()",
            )),
        }
    }

    pub(crate) fn dialect(&self) -> Option<portable::Dialect> {
        match self {
            Backend::Portable(p) => Some(p.dialect()),
            Backend::Ext(_) => None,
        }
    }

    pub(crate) fn edition(&self) -> Option<Edition> {
        match self {
            Backend::Ext(e) => Some(e.edition()),
            Backend::Portable(_) => None,
        }
    }
}

/// Items sorted by `pick` into this backend's holds and the others, each with
/// its place in the input.
#[allow(clippy::type_complexity)]
fn split<H>(
    items: Vec<(String, Held)>,
    pick: impl Fn(Held) -> std::result::Result<H, Held>,
) -> (Vec<(usize, String, H)>, Vec<(usize, String, Held)>) {
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

impl Held {
    pub(crate) fn queue(&self) -> &Queue {
        match self {
            Held::Ext(e, _) => &e.queue,
            Held::Portable(p, _) => p.queue(),
        }
    }

    /// The lease token (the deadline), in the lease form.
    pub(crate) fn token(&self) -> Option<SystemTime> {
        use hold::HoldBackend;
        match self {
            Held::Ext(_, h) => h.lease_token().map(ext::Ext::token_time),
            Held::Portable(_, h) => h.lease_token().map(portable::Engine::token_time),
        }
    }

    /// Settle, and count it in the queue's metrics.
    pub(crate) async fn settle(self, id: String, outcome: Outcome) -> Result<Settled> {
        let start = Instant::now();
        let (r, b) = match self {
            Held::Ext(e, h) => (hold::settle(&e, id, h, outcome).await, Backend::Ext(e)),
            Held::Portable(p, h) => (hold::settle(&p, id, h, outcome).await, Backend::Portable(p)),
        };
        b.meters().settle_took(start.elapsed());
        b.meters().settled(&r);
        r
    }

    /// Settle, and where the backend can ([`Capabilities::settle_and_claim`])
    /// claim one more row in the same statement; elsewhere only settle.
    pub(crate) async fn settle_and_claim(
        self,
        id: String,
        outcome: Outcome,
    ) -> Result<(Settled, Option<Claimed>)> {
        let (e, token) = match self {
            Held::Ext(e, hold::Hold::Lease(t)) if e.chains() => (e, t),
            h => return Ok((h.settle(id, outcome).await?, None)),
        };
        let start = Instant::now();
        let r = e.settle_and_claim(&id, token, &outcome).await;
        let m = &e.meters;
        match r {
            Ok((settled, next)) => {
                m.settle_took(start.elapsed());
                m.settled(&Ok(settled));
                m.claimed_in_settle(u64::from(next.is_some()));
                Ok((settled, next.map(|c| c.map(|h| Held::Ext(e.clone(), h)))))
            }
            Err(err @ Error::LeaseLost(_)) => {
                m.settle_took(start.elapsed());
                let r: Result<Settled> = Err(err);
                m.settled(&r);
                r.map(|s| (s, None))
            }
            // the statement wrote nothing: settle alone, which runs it again
            // after a passing failure and gives the row back after any other
            Err(err) => {
                tracing::debug!(queue = %e.queue.name, id = %id, error = %err, "a settle with the next claim failed: settling alone");
                let s = Held::Ext(e, hold::Hold::Lease(token))
                    .settle(id, outcome)
                    .await?;
                Ok((s, None))
            }
        }
    }

    /// Give back without an outcome, counted as `released`.
    pub(crate) async fn release(self, id: &str) -> Result<Settled> {
        let start = Instant::now();
        let (r, b) = match self {
            Held::Ext(e, h) => (hold::release(&*e, id, h).await, Backend::Ext(e)),
            Held::Portable(p, h) => (hold::release(&*p, id, h).await, Backend::Portable(p)),
        };
        let r = r.map(|()| Settled::Released);
        b.meters().settle_took(start.elapsed());
        b.meters().settled(&r);
        r
    }

    /// A delivery dropped unsettled: give it back as well as can be.
    pub(crate) fn give_back(self, id: String) {
        match self {
            Held::Ext(e, h) => hold::give_back(e, id, h),
            Held::Portable(p, h) => hold::give_back(p, id, h),
        }
    }

    pub(crate) async fn extend(&mut self, id: &str, ttl: Duration) -> Result<()> {
        match self {
            Held::Ext(e, h) => hold::extend(&**e, id, h, ttl).await,
            Held::Portable(p, h) => hold::extend(&**p, id, h, ttl).await,
        }
    }

    pub(crate) async fn transaction(&mut self) -> Result<&tokio_postgres::Client> {
        match self {
            Held::Ext(_, hold::Hold::Session(s, lent)) => s.lend(lent).await,
            Held::Ext(..) => Err(Error::invalid("transaction() is for the row_lock form")),
            Held::Portable(..) => Err(Error::unsupported(
                "transaction() is the extension backend's; on the portable path use any_transaction()",
            )),
        }
    }

    pub(crate) async fn any_transaction(&mut self) -> Result<&mut sqlx::AnyConnection> {
        match self {
            Held::Portable(_, hold::Hold::Session(s, lent)) => s.lend(lent).await,
            Held::Portable(..) => Err(Error::invalid(
                "any_transaction() is for the row_lock form on the portable path",
            )),
            Held::Ext(..) => Err(Error::unsupported(
                "any_transaction() is the portable path's; on the extension backend use transaction()",
            )),
        }
    }
}

/// The operator's view of one database (what `Admin` serves): the
/// extension's registry, or the queues described to it on the portable path.
#[derive(Clone)]
pub(crate) enum Registry {
    /// PostgreSQL with the extension (either edition): which, its version, and a pool
    Ext {
        pool: deadpool_postgres::Pool,
        installed: ext::Installed,
    },
    /// the portable path: a backend per described queue
    Described {
        dialect: Dialect,
        queues: Vec<Backend>,
    },
}

impl Registry {
    /// PostgreSQL with the extension (every call sent unnamed, so it works
    /// through any pooler); [`Error::Extension`] without it or with an older one.
    pub(crate) async fn postgres(info: ConnInfo, pool_size: usize) -> Result<Registry> {
        use ext::connect::{Connector, Notices, Statements};
        let opts = PoolOptions::new(pool_size);
        let pool = Connector::new(&info, &opts)?.pool(&opts, Notices::default())?;
        let c = pool.get().await?;
        let installed = ext::check_version(&c, Statements::Unnamed).await?;
        drop(c);
        Ok(Registry::Ext { pool, installed })
    }

    /// The portable path over `url`, serving the `described` queues.
    pub(crate) async fn described(
        url: &str,
        dialect: Dialect,
        pool_size: usize,
        described: Vec<Queue>,
    ) -> Result<Registry> {
        let opts = PoolOptions::new(pool_size.max(1));
        let mut queues = Vec::with_capacity(described.len());
        for q in described {
            queues.push(Backend::portable(url, &opts, q).await?);
        }
        Ok(Registry::Described { dialect, queues })
    }

    /// What serves the queues, for people.
    pub(crate) fn describe(&self) -> String {
        match self {
            Registry::Ext { installed, .. } => format!("PostgreSQL with {installed}"),
            Registry::Described { dialect, .. } => format!("{} (portable path)", dialect.name()),
        }
    }

    pub(crate) fn uses_extension(&self) -> bool {
        matches!(self, Registry::Ext { .. })
    }

    /// Register `queue` (the extension's registry only).
    pub(crate) async fn register(&self, queue: &Queue) -> Result<Registered> {
        match self {
            Registry::Ext { pool, .. } => {
                let c = pool.get().await?;
                ext::descriptor::register(&c, ext::connect::Statements::Unnamed, queue).await
            }
            Registry::Described { dialect, .. } => Err(Error::unsupported(format!(
                "{} has no queue registry without the settle extension: a queue is described \
                 to each client instead",
                dialect.name()
            ))),
        }
    }

    /// Every queue with its counts, in name order.
    pub(crate) async fn queues(&self) -> Result<Vec<QueueInfo>> {
        match self {
            Registry::Ext { pool, .. } => ext::admin::queues(pool).await,
            Registry::Described { queues, .. } => {
                let mut out = Vec::with_capacity(queues.len());
                for b in queues {
                    out.push(QueueInfo {
                        name: b.queue().name.clone(),
                        form: b.queue().form.sql_name().to_owned(),
                        stats: b.stats().await?,
                    });
                }
                out.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(out)
            }
        }
    }

    /// Every queue's table health and the xmin horizon's oldest holder
    /// (the extension, 0.7.0 or later).
    pub(crate) async fn health(&self) -> Result<Vec<Health>> {
        match self {
            Registry::Ext { pool, installed } => {
                ext::admin::health(pool, &installed.version, None).await
            }
            Registry::Described { dialect, .. } => Err(no_health(*dialect)),
        }
    }

    /// The described queue's backend.
    fn described_queue<'a>(queues: &'a [Backend], queue: &str) -> Result<&'a Backend> {
        queues
            .iter()
            .find(|b| b.queue().name == queue)
            .ok_or_else(|| {
                Error::unknown_queue(format!(
                    "queue \"{queue}\" is not among the described queues"
                ))
            })
    }

    pub(crate) async fn dead_rows(
        &self,
        queue: &str,
        limit: i64,
        ids: Option<&[String]>,
    ) -> Result<Vec<DeadRow>> {
        match self {
            Registry::Ext { pool, .. } => ext::admin::dead_rows(pool, queue, limit, ids).await,
            Registry::Described { queues, .. } => {
                let limit = ids.map_or(limit, |ids| i64::try_from(ids.len()).unwrap_or(i64::MAX));
                Self::described_queue(queues, queue)?
                    .dead_rows(limit, ids)
                    .await
            }
        }
    }

    pub(crate) async fn requeue_dead(&self, queue: &str, ids: Option<&[String]>) -> Result<i64> {
        match self {
            Registry::Ext { pool, .. } => ext::admin::requeue_dead(pool, queue, ids).await,
            Registry::Described { queues, .. } => {
                Self::described_queue(queues, queue)?
                    .requeue_dead(ids)
                    .await
            }
        }
    }

    pub(crate) async fn purge_dead(
        &self,
        queue: &str,
        older_than: Option<Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        match self {
            Registry::Ext { pool, .. } => {
                ext::admin::purge_dead(pool, queue, older_than, ids).await
            }
            Registry::Described { queues, .. } => {
                Self::described_queue(queues, queue)?
                    .purge_dead(older_than, ids)
                    .await
            }
        }
    }

    pub(crate) async fn statements(&self, queue: &str) -> Result<Vec<(String, String)>> {
        match self {
            Registry::Ext { pool, .. } => ext::admin::statements(pool, queue).await,
            Registry::Described { queues, .. } => {
                Self::described_queue(queues, queue)?.statements().await
            }
        }
    }
}

/// The portable path has no `queue_health`.
fn no_health(dialect: Dialect) -> Error {
    Error::unsupported(format!(
        "queue health comes from the settle extension's queue_health(); {} has none",
        dialect.name()
    ))
}
