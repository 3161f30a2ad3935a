//! The client: registration, claims, stats.

use crate::delivery::{Delivery, Outcome, RowData, Session, Settled};
use crate::error::{Error, Result};
use crate::queue::{Form, Queue};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tracing::Instrument;

/// A json/jsonb column's JSON text as sent (jsonb: after its version byte),
/// copied without parsing.
struct JsonText(Vec<u8>);

impl<'a> tokio_postgres::types::FromSql<'a> for JsonText {
    fn from_sql(
        ty: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = if *ty == tokio_postgres::types::Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unsupported jsonb wire format version".into()),
            }
        } else {
            raw
        };
        Ok(JsonText(text.to_vec()))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::JSONB || *ty == tokio_postgres::types::Type::JSON
    }
}

pub(crate) const CLAIM_SQL: &str = "SELECT id, attempt, token, payload FROM queue_claim($1, $2, $3::bigint * interval '1 microsecond')";
pub(crate) const COMPLETE_SQL: &str =
    "SELECT queue_complete($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";
pub(crate) const RELEASE_SQL: &str = "SELECT queue_release($1, $2, $3)";
pub(crate) const EXTEND_SQL: &str =
    "SELECT queue_extend($1, $2, $3, $4::bigint * interval '1 microsecond')";
pub(crate) const COMPLETE_MANY_SQL: &str =
    "SELECT id, result FROM queue_complete_many($1, $2, $3, $4::bigint * interval '1 microsecond', $5)";

/// Is an installed extension version (`major.minor.patch`) at least
/// [`crate::EXTENSION_VERSION`]? Compared as numbers; a version that does not
/// parse is not.
fn version_at_least_required(installed: &str) -> bool {
    fn parts(v: &str) -> Option<Vec<u64>> {
        v.split('.').map(|p| p.parse().ok()).collect()
    }
    match (parts(installed), parts(crate::EXTENSION_VERSION)) {
        (Some(have), Some(need)) => have >= need,
        _ => false,
    }
}

pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Counts of a queue (`queue_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// rows a claim could take now
    pub ready: i64,
    /// rows waiting for their retry_after
    pub delayed: i64,
    /// rows held by a delivery (lease, advisory); `None` for row_lock
    pub in_flight: Option<i64>,
    /// rows in the dead letter; `None` without one
    pub dead: Option<i64>,
}

/// Connection-pool settings, the same on both backends.
///
/// Row_lock and advisory deliveries keep their connection until they are
/// settled, so at most `max_size` of them (counted per claim, not per row) can
/// be live at once; a claim or settle that finds every connection busy waits
/// `wait_timeout` and then fails with [`Error::PoolTimeout`] — it never waits
/// forever, and nothing is claimed or written by the call that timed out.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Connections in the pool (at least 1).
    pub max_size: usize,
    /// How long a call waits for a free connection; `None` waits forever. (On
    /// the portable path this includes opening a new one when the pool has room.)
    pub wait_timeout: Option<Duration>,
    /// How long opening a new connection may take; `None` leaves it to the driver.
    pub connect_timeout: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_size: 16,
            wait_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(10)),
        }
    }
}

impl PoolOptions {
    /// `max_size` connections with the default timeouts (30 s wait, 10 s connect).
    pub fn new(max_size: usize) -> Self {
        PoolOptions {
            max_size: max_size.max(1),
            ..Default::default()
        }
    }

    /// Set how long a call waits for a free connection.
    pub fn wait_timeout(mut self, d: Option<Duration>) -> Self {
        self.wait_timeout = d;
        self
    }

    /// Set how long opening a connection may take.
    pub fn connect_timeout(mut self, d: Option<Duration>) -> Self {
        self.connect_timeout = d;
        self
    }
}

/// Which engine runs the SQL.
pub(crate) enum Backend {
    /// PostgreSQL with the settle extension.
    Ext(Pool),
    /// The portable SQL path (sqlx).
    Portable(crate::portable::engine::Engine),
}

pub(crate) struct Inner {
    pub(crate) backend: Backend,
    pub(crate) queue: Queue,
    pub(crate) has_retry_after: bool,
    pub(crate) listen: Option<tokio_postgres::Config>,
    /// concurrent lease settles, combined (both backends)
    pub(crate) acks: crate::combine::Combiner,
}

/// A handle on one queue over PostgreSQL with the settle extension. Cheap to
/// clone; every clone shares the pool.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl Inner {
    /// A table without retry_after takes retry_after(d) as retry() and says so
    /// (SPEC §3); the portable engine says it where it writes.
    pub(crate) fn warn_if_no_retry_after(&self, outcome: &Outcome) {
        if matches!(outcome, Outcome::RetryAfter(_))
            && !self.has_retry_after
            && matches!(self.backend, Backend::Ext(_))
        {
            tracing::warn!(queue = %self.queue.name, "queue has no retry_after column: retry_after is settled as retry");
        }
    }

    /// The extension backend's pool.
    pub(crate) fn pool(&self) -> Result<&Pool> {
        match &self.backend {
            Backend::Ext(p) => Ok(p),
            Backend::Portable(_) => Err(Error::invalid(
                "this needs the PostgreSQL extension backend",
            )),
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("queue", &self.inner.queue)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connect with a pool of `pool_size` connections (no TLS) and register the
    /// queue (idempotent). The same config is used for the worker's LISTEN
    /// connection. Default timeouts: see [`PoolOptions`].
    pub async fn connect(
        config: tokio_postgres::Config,
        pool_size: usize,
        queue: Queue,
    ) -> Result<Client> {
        Client::connect_with(config, PoolOptions::new(pool_size), queue).await
    }

    /// [`Client::connect`] with explicit pool settings.
    pub async fn connect_with(
        mut config: tokio_postgres::Config,
        pool: PoolOptions,
        queue: Queue,
    ) -> Result<Client> {
        if let Some(t) = pool.connect_timeout {
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(t);
            }
        }
        let mgr = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let built = Pool::builder(mgr)
            .max_size(pool.max_size.max(1))
            .wait_timeout(pool.wait_timeout)
            .create_timeout(pool.connect_timeout)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| Error::invalid(format!("pool: {e}")))?;
        Client::register(built, queue, Some(config)).await
    }

    /// Use an existing pool (TLS, custom recycling). The worker then wakes by
    /// polling only, as it has no config for a LISTEN connection. Do not use
    /// `RecyclingMethod::Clean` with the advisory form while deliveries are
    /// live elsewhere on the pool: settle never returns a connection that
    /// carries locks, and Clean is not needed for that.
    pub async fn from_pool(pool: Pool, queue: Queue) -> Result<Client> {
        Client::register(pool, queue, None).await
    }

    async fn register(
        pool: Pool,
        queue: Queue,
        listen: Option<tokio_postgres::Config>,
    ) -> Result<Client> {
        if queue.dead.as_ref().is_some_and(|(n, _)| *n == 0) {
            return Err(Error::invalid("max_attempts must be at least 1"));
        }
        let c = pool.get().await?;
        let installed: Option<String> = c
            .query_opt(
                "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'settle'",
                &[],
            )
            .await?
            .map(|r| r.get(0));
        if !installed.as_deref().is_some_and(version_at_least_required) {
            return Err(Error::Extension {
                installed,
                required: crate::EXTENSION_VERSION,
            });
        }
        // the same kind on every backend: a missing table is an invalid descriptor
        // (the SQL API's regclass argument would say 42P01)
        let exists: bool = c
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&queue.table])
            .await?
            .get(0);
        if !exists {
            return Err(Error::InvalidDescriptor(crate::error::DbError {
                code: None,
                message: format!("table {} does not exist", queue.table),
                source: None,
            }));
        }
        let max: Option<i32> = queue
            .dead
            .as_ref()
            .map(|(n, _)| i32::try_from(*n).unwrap_or(i32::MAX));
        let dl: Option<&str> = queue.dead.as_ref().map(|(_, d)| d.as_str());
        c.execute(
            "SELECT queue_register($1, $2::text::regclass, $3, $4, $5, $6::jsonb)",
            &[
                &queue.name,
                &queue.table,
                &queue.form.sql_name(),
                &max,
                &dl,
                &queue.columns_json(),
            ],
        )
        .await?;
        for (name, sql) in &queue.outcomes {
            c.execute(
                "SELECT queue_register_outcome($1, $2, $3)",
                &[&queue.name, name, sql],
            )
            .await?;
        }
        let row = c
            .query_one(
                "SELECT (columns->>'retry_after') IS NOT NULL FROM settle_queues WHERE queue = $1",
                &[&queue.name],
            )
            .await?;
        let has_retry_after: bool = row.get(0);
        drop(c);
        Ok(Client {
            inner: Arc::new(Inner {
                backend: Backend::Ext(pool),
                queue,
                has_retry_after,
                listen,
                acks: Default::default(),
            }),
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
        let engine = crate::portable::engine::Engine::connect(url, &pool, &queue).await?;
        let has_retry_after = engine.has_retry_after();
        Ok(Client {
            inner: Arc::new(Inner {
                backend: Backend::Portable(engine),
                queue,
                has_retry_after,
                listen: None,
                acks: Default::default(),
            }),
        })
    }

    /// The portable dialect, or None on the extension backend.
    pub fn dialect(&self) -> Option<crate::portable::Dialect> {
        match &self.inner.backend {
            Backend::Portable(e) => Some(e.dialect()),
            Backend::Ext(_) => None,
        }
    }

    /// The queue this client serves.
    pub fn queue(&self) -> &Queue {
        &self.inner.queue
    }

    /// The connection pool (extension backend).
    pub fn pool(&self) -> &Pool {
        self.inner
            .pool()
            .expect("Client::pool is for the extension backend; see Client::any_pool")
    }

    /// The sqlx pool (portable backend).
    pub fn any_pool(&self) -> Option<&sqlx::AnyPool> {
        match &self.inner.backend {
            Backend::Portable(e) => Some(e.pool()),
            Backend::Ext(_) => None,
        }
    }

    /// Claim up to `n` ready rows (1–10000).
    ///
    /// - lease: one autocommitted statement; each delivery settles on any pooled
    ///   connection with its token.
    /// - row_lock: one transaction on a connection the deliveries keep; it commits
    ///   when the last delivery of the claim is settled or dropped.
    /// - advisory: the keys are held by a connection the deliveries keep; it goes
    ///   back to the pool, carrying no lock, when the last one is done.
    pub async fn claim(&self, n: usize) -> Result<Vec<Delivery>> {
        let q = &self.inner.queue;
        let span = tracing::debug_span!("settle.claim", queue = %q.name, n);
        async move {
            if n == 0 || n > 10_000 {
                return Err(Error::invalid(format!(
                    "batch must be between 1 and 10000, got {n}"
                )));
            }
            if let Backend::Portable(e) = &self.inner.backend {
                let (rows, session) = e.claim(n).await?;
                let session = session.map(Arc::new);
                return Ok(rows
                    .into_iter()
                    .map(|c| Delivery::new_portable(self.inner.clone(), c, session.clone()))
                    .collect());
            }
            let lease = match q.form {
                Form::Lease { ttl } => Some(micros(ttl)),
                _ => None,
            };
            let obj = self.inner.pool()?.get().await?;
            match q.form {
                Form::Lease { .. } => {
                    let st = obj.prepare_cached(CLAIM_SQL).await?;
                    let rows = obj.query(&st, &[&q.name, &(n as i32), &lease]).await?;
                    drop(obj);
                    Ok(rows.iter().map(|r| self.delivery(r, None)).collect())
                }
                Form::RowLock | Form::Advisory => {
                    let row_lock = q.form == Form::RowLock;
                    if row_lock {
                        obj.batch_execute("BEGIN").await?;
                    }
                    let res = async {
                        let st = obj.prepare_cached(CLAIM_SQL).await?;
                        obj.query(&st, &[&q.name, &(n as i32), &lease]).await
                    }
                    .await;
                    let rows = match res {
                        Ok(rows) => rows,
                        Err(e) => {
                            // a failed claim: never return a connection in an unknown state
                            Session::discard(obj);
                            return Err(e.into());
                        }
                    };
                    if rows.is_empty() {
                        if row_lock {
                            if let Err(e) = obj.batch_execute("COMMIT").await {
                                Session::discard(obj);
                                return Err(e.into());
                            }
                        }
                        return Ok(Vec::new());
                    }
                    let session = Session::new(obj, q.form, rows.len());
                    Ok(rows
                        .iter()
                        .map(|r| self.delivery(r, Some(session.clone())))
                        .collect())
                }
            }
        }
        .instrument(span)
        .await
    }

    fn delivery(&self, r: &tokio_postgres::Row, session: Option<Arc<Session>>) -> Delivery {
        let id: String = r.get(0);
        let attempt: Option<i32> = r.get(1);
        let token: Option<SystemTime> = r.get(2);
        let row: Option<JsonText> = r.get(3);
        Delivery::new(
            self.inner.clone(),
            id,
            attempt.map_or(1, |a| a.max(0) as u32),
            token,
            match row {
                Some(JsonText(t)) => RowData::Text(t),
                None => RowData::Value(serde_json::Value::Null),
            },
            session,
        )
    }

    /// Counts of this queue.
    pub async fn stats(&self) -> Result<Stats> {
        if let Backend::Portable(e) = &self.inner.backend {
            let (ready, delayed, in_flight, dead) = e.stats().await?;
            return Ok(Stats {
                ready,
                delayed,
                in_flight,
                dead,
            });
        }
        let c = self.inner.pool()?.get().await?;
        let r = c
            .query_one(
                "SELECT ready, delayed, in_flight, dead FROM queue_stats($1)",
                &[&self.inner.queue.name],
            )
            .await?;
        Ok(Stats {
            ready: r.get(0),
            delayed: r.get(1),
            in_flight: r.get(2),
            dead: r.get(3),
        })
    }

    /// Settle many deliveries with one outcome. On the extension this is one
    /// statement (`queue_complete_many`) for all of them: in the lease form on any
    /// pooled connection, in row_lock and advisory on the claim's connection when
    /// they all come from one claim (a row_lock statement that fails is undone to
    /// a savepoint and they are settled one by one, so each gets its own result;
    /// an advisory statement that fails fails them all: it wrote nothing and its
    /// keys were let go with it). On the portable path an ack or drop of lease
    /// deliveries is one short transaction (the rows still holding their tokens
    /// locked, then one DELETE); everything else is settled in turn. One result per delivery, in order;
    /// a lease lost is [`Error::LeaseLost`] for that delivery only.
    pub async fn settle_many(
        &self,
        deliveries: Vec<Delivery>,
        outcome: Outcome,
    ) -> Vec<Result<Settled>> {
        let portable = matches!(self.inner.backend, Backend::Portable(_));
        let lease = matches!(self.inner.queue.form, Form::Lease { .. });
        let deliveries = match &self.inner.backend {
            Backend::Portable(e)
                if deliveries.len() > 1 && !matches!(outcome, Outcome::Custom(_)) =>
            {
                if lease {
                    return self.settle_many_portable(e, deliveries, &outcome).await;
                }
                // row_lock / advisory: one transaction (or savepoint) on the claim's connection
                match crate::delivery::settle_many_portable_pinned(e, deliveries, &outcome).await {
                    Ok(out) => return out,
                    Err(ds) => ds,
                }
            }
            // row_lock / advisory: one statement on the claim's connection
            Backend::Ext(_) if !lease => {
                match crate::delivery::settle_many_pinned(&self.inner, deliveries, &outcome).await {
                    Ok(out) => return out,
                    Err(ds) => ds,
                }
            }
            _ => deliveries,
        };
        if portable || !matches!(self.inner.queue.form, Form::Lease { .. }) || deliveries.len() < 2
        {
            let mut out = Vec::with_capacity(deliveries.len());
            for d in deliveries {
                out.push(d.settle(outcome.clone()).await);
            }
            return out;
        }
        let mut ids = Vec::with_capacity(deliveries.len());
        let mut tokens = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            let (id, token) = d.into_settled_parts();
            ids.push(id);
            tokens.push(crate::combine::Token::Ext(token));
        }
        self.inner.warn_if_no_retry_after(&outcome);
        crate::combine::many_or_each(&self.inner, &ids, &tokens, &outcome).await
    }

    /// Portable lease form: one transaction for the batch.
    async fn settle_many_portable(
        &self,
        e: &crate::portable::engine::Engine,
        deliveries: Vec<Delivery>,
        outcome: &Outcome,
    ) -> Vec<Result<Settled>> {
        let items: Vec<(String, Option<i64>)> = deliveries
            .into_iter()
            .map(Delivery::into_portable_parts)
            .collect();
        match e.settle_many_lease(&items, outcome).await {
            Ok(v) => items
                .iter()
                .zip(v)
                .map(|((id, _), r)| {
                    r.ok_or_else(|| {
                        Error::LeaseLost(crate::error::DbError {
                            code: Some("SQ001".into()),
                            message: format!(
                                "lease lost: row {id} of queue \"{}\" no longer holds this delivery's token",
                                self.inner.queue.name
                            ),
                            source: None,
                        })
                    })
                })
                .collect(),
            Err(err) => {
                // nothing was written: give the rows back now, not at the deadline
                let (code, msg) = (err.code().map(str::to_owned), err.to_string());
                let mut out = Vec::with_capacity(items.len());
                for (id, tok) in &items {
                    let _ = e.release(None, None, id, *tok).await;
                    out.push(Err(Error::Database(crate::error::DbError {
                        code: code.clone(),
                        message: format!("batch settle failed, nothing written: {msg}"),
                        source: None,
                    })));
                }
                out
            }
        }
    }

    /// Move dead-lettered rows back into the queue (attempt reset); returns how many.
    pub async fn requeue_dead(&self) -> Result<i64> {
        let c = self.inner.pool()?.get().await?;
        let r = c
            .query_one("SELECT queue_requeue_dead($1)", &[&self.inner.queue.name])
            .await?;
        Ok(r.get(0))
    }
}
