//! The client: one queue over one backend, claims, batch settles, stats.

use crate::backend::{AnyConn, Backend, Capabilities, Dialect, Edition};
use crate::conninfo::IntoConnInfo;
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use crate::pool::PoolOptions;
use crate::queue::Queue;
use crate::stats::{DeadRow, Health, Stats};
use deadpool_postgres::Pool;
use std::time::Instant;
use tracing::Instrument;

/// A handle on one queue, over PostgreSQL with the settle extension or the
/// portable path. Cheap to clone; every clone shares the pool.
#[derive(Clone)]
pub struct Client {
    backend: Backend,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("queue", self.backend.queue())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connect with a pool of `pool_size` connections and check that the
    /// queue is registered as `queue` describes it (with its custom
    /// outcomes). Connecting writes nothing and needs no ownership: a role
    /// with the queue table's privileges is enough. A queue registered
    /// differently fails with [`Error::RegisteredDifferently`], listing the
    /// differences; one not registered with [`Error::UnknownQueue`] — the
    /// table's owner registers it ([`crate::Admin::register`]).
    ///
    /// `conn` is a libpq connection string (a `postgres://` URL or
    /// `key=value` pairs, the `PG*` environment filling what it leaves out,
    /// TLS as its `sslmode` says), a [`crate::ConnInfo`] or a
    /// `tokio_postgres::Config`. The worker's LISTEN connection is made the
    /// same way. Default timeouts: see [`PoolOptions`]. Fails with
    /// [`Error::Extension`] when the database's extension is missing or older
    /// than [`crate::EXTENSION_VERSION`].
    pub async fn connect(
        conn: impl IntoConnInfo,
        pool_size: usize,
        queue: Queue,
    ) -> Result<Client> {
        Client::connect_with(conn, PoolOptions::new(pool_size), queue).await
    }

    /// [`Client::connect`] with explicit pool settings (among them
    /// [`PoolOptions::transaction_pooler`]).
    pub async fn connect_with(
        conn: impl IntoConnInfo,
        pool: PoolOptions,
        queue: Queue,
    ) -> Result<Client> {
        Ok(Client {
            backend: Backend::extension(conn.into_conn_info()?, pool, queue).await?,
        })
    }

    /// Use an existing pool (custom TLS or recycling), checking the queue as
    /// [`Client::connect`] does. The worker then wakes by polling only, as it
    /// has no config for a LISTEN connection, and the server's notices go
    /// where the pool sends them. Do not use `RecyclingMethod::Clean` with the
    /// advisory form while deliveries are live elsewhere on the pool: settle
    /// never returns a connection that carries locks, and Clean is not needed
    /// for that.
    pub async fn from_pool(pool: Pool, queue: Queue) -> Result<Client> {
        Ok(Client {
            backend: Backend::extension_on(pool, queue).await?,
        })
    }

    /// The portable path, without the extension: `sqlite://path?mode=rwc`,
    /// `mysql://` / `mariadb://…`, or `postgres://…`. The table is introspected
    /// and the descriptor checked here ([`Error::InvalidDescriptor`] names the
    /// problem); nothing is written. SQLite refuses the advisory form.
    pub async fn portable(url: &str, pool_size: u32, queue: Queue) -> Result<Client> {
        Client::portable_with(url, PoolOptions::new(pool_size as usize), queue).await
    }

    /// [`Client::portable`] with explicit pool settings.
    pub async fn portable_with(url: &str, pool: PoolOptions, queue: Queue) -> Result<Client> {
        Ok(Client {
            backend: Backend::portable(url, &pool, queue).await?,
        })
    }

    /// This queue's metrics handles.
    pub(crate) fn meters(&self) -> &crate::meters::Meters {
        self.backend.meters()
    }

    /// What this client's backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The portable dialect, or None on the extension backend.
    pub fn dialect(&self) -> Option<Dialect> {
        self.backend.dialect()
    }

    /// Which edition of settle's SQL API the database runs — the native
    /// extension or the SQL edition (the same calls, docs/editions.md) — or
    /// None on the portable path.
    pub fn edition(&self) -> Option<Edition> {
        self.backend.edition()
    }

    /// The queue this client serves.
    pub fn queue(&self) -> &Queue {
        self.backend.queue()
    }

    /// The connection pool, on the extension backend.
    pub fn pool(&self) -> Option<&Pool> {
        self.backend.ext_pool()
    }

    /// A connection of the pool this client claims through, on the portable
    /// path, for statements of your own (it counts against
    /// [`PoolOptions::max_size`](crate::PoolOptions), and waits for a free
    /// connection as a claim does). Dropping it gives it back; once used, it
    /// is checked first, in the background (an open transaction rolled back,
    /// the connection pinged). `Unsupported` on the extension backend, whose
    /// pool is [`Client::pool`].
    pub async fn any_connection(&self) -> Result<AnyConn> {
        self.backend.any_connection().await
    }

    /// Claim up to `n` (1–10000) ready rows.
    ///
    /// - lease: one autocommitted statement; each delivery settles on any pooled
    ///   connection with its token.
    /// - row_lock: one transaction on a connection the deliveries keep; it commits
    ///   when the last delivery of the claim is settled or dropped.
    /// - advisory: the keys are held by a connection the deliveries keep; it goes
    ///   back to the pool, carrying no lock, when the last one is done.
    pub async fn claim(&self, n: usize) -> Result<Vec<Delivery>> {
        let span = tracing::debug_span!("settle.claim", queue = %self.queue().name, n);
        async move {
            if n == 0 || n > 10_000 {
                return Err(Error::invalid(format!(
                    "batch must be between 1 and 10000, got {n}"
                )));
            }
            let start = Instant::now();
            let r = self.backend.claim(n).await;
            self.backend.meters().claim(&r, start.elapsed());
            Ok(r?.into_iter().map(Delivery::new).collect())
        }
        .instrument(span)
        .await
    }

    /// Counts of this queue.
    pub async fn stats(&self) -> Result<Stats> {
        self.backend.stats().await
    }

    /// This queue's table health and the oldest holder of the xmin horizon
    /// (`queue_health`: extension 0.7.0; [`Error::Extension`] with an older
    /// one, [`Error::Unsupported`] on the portable path).
    pub async fn health(&self) -> Result<Health> {
        self.backend.health().await
    }

    /// Settle many deliveries with one outcome. On the extension this is one
    /// statement (`queue_complete_many`) for all of them: in the lease form on any
    /// pooled connection, in row_lock and advisory on the claim's connection when
    /// they all come from one claim (a row_lock statement that fails is undone to
    /// a savepoint and they are settled one by one, so each gets its own result;
    /// an advisory statement that fails fails them all: it wrote nothing and its
    /// keys were let go with it). On the portable path a batch of lease
    /// deliveries is one short transaction (or statement; if it fails as a
    /// whole, they are settled one by one), one claim's
    /// deliveries one savepoint or transaction on its connection; a custom
    /// outcome is settled in turn. One result per delivery, in order; a lease
    /// lost is [`Error::LeaseLost`] for that delivery only.
    pub async fn settle_many(
        &self,
        deliveries: Vec<Delivery>,
        outcome: Outcome,
    ) -> Vec<Result<Settled>> {
        let items = deliveries.into_iter().map(Delivery::into_parts).collect();
        self.backend.settle_many(items, outcome).await
    }

    /// Move every dead-lettered row back into the queue (attempt reset, no
    /// delay); returns how many. [`Error::InvalidArgument`] without a dead letter.
    pub async fn requeue_dead(&self) -> Result<i64> {
        self.backend.requeue_dead(None).await
    }

    /// [`Client::requeue_dead`] of the dead rows with these ids (the others,
    /// and ids that are not dead, are left).
    pub async fn requeue_dead_ids(&self, ids: &[String]) -> Result<i64> {
        self.backend.requeue_dead(Some(ids)).await
    }

    /// Dead-lettered rows in id order, at most `limit`, with their attempt
    /// counter and every column (`queue_dead`).
    pub async fn dead_rows(&self, limit: i64) -> Result<Vec<DeadRow>> {
        self.backend.dead_rows(limit, None).await
    }

    /// The dead-lettered rows with these ids (those that are dead), in id order.
    pub async fn dead_rows_with_ids(&self, ids: &[String]) -> Result<Vec<DeadRow>> {
        let limit = i64::try_from(ids.len()).unwrap_or(i64::MAX);
        self.backend.dead_rows(limit, Some(ids)).await
    }

    /// Delete dead-lettered rows created more than `older_than` ago (by the
    /// queue's created_at column) and, when `ids` is given, only those;
    /// returns how many. One of the two is needed: an `older_than` of zero
    /// purges every dead row. [`Error::InvalidArgument`] for an age without a
    /// created_at column.
    pub async fn purge_dead(
        &self,
        older_than: Option<std::time::Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        self.backend.purge_dead(older_than, ids).await
    }

    /// The statements settle runs for this queue, named: the extension's
    /// `queue_sql`, or the portable path's own.
    pub async fn statements(&self) -> Result<Vec<(String, String)>> {
        self.backend.statements().await
    }

    /// The worker's wake-up task (`NOTIFY`), when the backend has one.
    pub(crate) fn listen(
        &self,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.backend.listen(wake)
    }
}
