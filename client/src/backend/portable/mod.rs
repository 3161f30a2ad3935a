//! The portable path: the extension's semantics (SPEC §2–§3) as plain SQL run
//! by the client through sqlx, one body for PostgreSQL, MariaDB/MySQL and
//! SQLite. The SQL text comes from [`shape`] and [`dialect`]; [`claim`],
//! [`write`], [`session`] and [`locks`] run it; [`introspect`] checks the
//! descriptor.

mod admin;
mod claim;
pub(crate) mod dialect;
mod engine;
mod introspect;
mod locks;
mod session;
mod shape;
mod write;

use super::combine::{self, Combiner, LeaseSettler};
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{micros, Outcome, Settled};
use crate::payload::Claimed;
use crate::pool::PoolOptions;
use crate::queue::{Form, Queue};
pub use dialect::Dialect;
pub(crate) use engine::Engine;
use session::{Lent, PSession};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Connection};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What holds a delivery on the portable path.
pub(crate) enum Hold {
    /// a lease: its token, the deadline in epoch microseconds
    Lease(i64),
    /// the claim transaction (row_lock) or the connection holding the keys
    /// (advisory), and the transaction when it is lent to the handler
    Session(Arc<PSession>, Option<Lent>),
}

/// A lease token of the portable path as a time.
pub(crate) fn token_time(micros: i64) -> SystemTime {
    std::time::UNIX_EPOCH + Duration::from_micros(micros.max(0) as u64)
}

impl Engine {
    /// Connect (`postgres://`, `mysql://` / `mariadb://`, `sqlite://` URLs),
    /// introspect the table and validate the descriptor.
    pub(crate) async fn connect(
        url: &str,
        pool: &PoolOptions,
        queue: Queue,
    ) -> Result<Arc<Engine>> {
        sqlx::any::install_default_drivers();
        let Some((d, url)) = Dialect::from_url(url) else {
            return Err(Error::invalid(format!("unsupported database URL {url:?}: use postgres://, mysql://, mariadb:// or sqlite://")));
        };
        if pool.transaction_pooler {
            // sqlx prepares each statement in a round trip of its own, which a
            // transaction pooler may send to another server session
            return Err(Error::unsupported(
                "the portable path does not run behind a transaction pooler: connect it \
                 directly or through session pooling (or use the extension, whose client does)",
            ));
        }
        // TLS as libpq decides it (sslrootcert=system, the files in
        // ~/.postgresql); none on a MariaDB/MySQL socket
        let url = match d {
            Dialect::Postgres => crate::conninfo::sqlx_postgres_url(&url)?,
            Dialect::MySql => crate::conninfo::sqlx_mysql_url(&url),
            Dialect::Sqlite => url,
        };
        if queue.form == Form::Advisory && d.advisory().is_none() {
            return Err(Error::descriptor(format!(
                "{} has no advisory locks: use the lease or row_lock form",
                d.name()
            )));
        }
        let max = u32::try_from(pool.max_size.max(1)).unwrap_or(u32::MAX);
        // sqlx has one timeout for waiting, which includes opening a connection
        // when the pool has room; None = a century
        let acquire = pool
            .wait_timeout
            .unwrap_or(Duration::from_secs(100 * 365 * 86_400));
        // no ping before each acquire (sqlx's default): it is a round trip per
        // statement — the lease ack is one statement — and a broken connection
        // fails its statement anyway (as deadpool's fast recycling, on the
        // extension backend)
        let mut opts = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire)
            .test_before_acquire(false);
        if !d.session_setup().is_empty() {
            opts = opts.after_connect(move |conn: &mut sqlx::AnyConnection, _| {
                Box::pin(async move {
                    for stmt in d.session_setup() {
                        sqlx::Executor::execute(&mut *conn, *stmt).await?;
                    }
                    Ok(())
                })
            });
        }
        let url = probe(url, pool.connect_timeout).await?;
        let pool = opts.connect(&url).await?;
        let s = introspect::introspect(&pool, d, &queue).await?;
        Ok(Arc::new(Engine {
            pool,
            s,
            meters: Meters::new(&queue.name),
            queue,
            acks: Combiner::default(),
        }))
    }

    pub(crate) fn dialect(&self) -> Dialect {
        self.s.d
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Claim up to `n` rows (see [`crate::Client::claim`]).
    pub(crate) async fn claim(&self, n: usize) -> Result<Vec<Claimed<Hold>>> {
        let (rows, session) = self.claim_rows(n).await?;
        let session = session.map(Arc::new);
        rows.into_iter()
            .map(|c| {
                let hold = match (&session, c.token) {
                    (Some(s), _) => Hold::Session(s.clone(), None),
                    (None, Some(t)) => Hold::Lease(t),
                    (None, None) => {
                        return Err(Error::database(
                            None,
                            format!("the lease claim of row {} read no token", c.id),
                        ))
                    }
                };
                Ok(Claimed {
                    id: c.id,
                    attempt: c.attempt,
                    payload: c.payload,
                    hold,
                })
            })
            .collect()
    }

    /// Settle one delivery.
    pub(crate) async fn settle(
        self: &Arc<Self>,
        id: String,
        hold: Hold,
        outcome: Outcome,
    ) -> Result<Settled> {
        match hold {
            // combined with the client's concurrent settles (a custom outcome runs alone)
            Hold::Lease(t) if !matches!(outcome, Outcome::Custom(_)) => {
                combine::settle(self, id, t, outcome).await
            }
            Hold::Lease(t) => self.one(&id, t, &outcome).await,
            Hold::Session(s, lent) => s.settle(self, lent, &id, &outcome).await,
        }
    }

    /// Settle deliveries with one outcome: leases in one short transaction (or
    /// statement), the deliveries of one row_lock or advisory claim in one
    /// savepoint or transaction on its connection, anything else one by one.
    pub(crate) async fn settle_many(
        self: &Arc<Self>,
        items: Vec<(String, Hold)>,
        outcome: Outcome,
    ) -> Vec<Result<Settled>> {
        if items.len() > 1 && !matches!(outcome, Outcome::Custom(_)) {
            let leases: Option<Vec<(String, Option<i64>)>> = items
                .iter()
                .map(|(id, h)| match h {
                    Hold::Lease(t) => Some((id.clone(), Some(*t))),
                    Hold::Session(..) => None,
                })
                .collect();
            if let Some(leases) = leases {
                return self.settle_many_leases(&leases, &outcome).await;
            }
            // one claim's deliveries, none lent to its handler
            if let Hold::Session(s, None) = &items[0].1 {
                let s = s.clone();
                let one_session = items
                    .iter()
                    .all(|(_, h)| matches!(h, Hold::Session(x, None) if Arc::ptr_eq(x, &s)));
                if one_session {
                    let ids: Vec<String> = items.iter().map(|(id, _)| id.clone()).collect();
                    if let Some(out) = s.settle_many(self, &ids, &outcome).await {
                        return out;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(items.len());
        for (id, hold) in items {
            out.push(self.settle(id, hold, outcome.clone()).await);
        }
        out
    }

    /// Lease deliveries settled together in one short transaction; if that
    /// fails, nothing was written and the rows are given back now, not at
    /// their deadline.
    async fn settle_many_leases(
        &self,
        items: &[(String, Option<i64>)],
        outcome: &Outcome,
    ) -> Vec<Result<Settled>> {
        match self.settle_many_lease(items, outcome).await {
            Ok(v) => items
                .iter()
                .zip(v)
                .map(|((id, _), r)| r.ok_or_else(|| Error::lease_lost(&self.s.queue, id)))
                .collect(),
            Err(err) => {
                let (code, msg) = (err.code().map(str::to_owned), err.to_string());
                let mut out = Vec::with_capacity(items.len());
                for (id, tok) in items {
                    if let Some(t) = tok {
                        let _ = self.release_lease(id, *t).await;
                    }
                    out.push(Err(Error::database(
                        code.as_deref(),
                        format!("batch settle failed, nothing written: {msg}"),
                    )));
                }
                out
            }
        }
    }

    /// Give a delivery back without an outcome.
    pub(crate) async fn release(&self, id: &str, hold: Hold) -> Result<()> {
        match hold {
            Hold::Lease(t) => self.release_lease(id, t).await,
            Hold::Session(s, lent) => s.release(self, lent, id).await,
        }
    }

    /// A delivery dropped unsettled: given back in a task of its own; without
    /// a runtime a lease expires on its own and a claim's connection is closed
    /// when its last delivery goes.
    pub(crate) fn give_back(self: Arc<Self>, id: String, hold: Hold) {
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(async move {
                if let Err(e) = self.release(&id, hold).await {
                    tracing::warn!(queue = %self.s.queue, id = %id, error = %e, "giving back a dropped delivery failed");
                }
            });
        }
    }

    /// Lease heartbeat: a new deadline and token.
    pub(crate) async fn extend(&self, id: &str, hold: &mut Hold, ttl: Duration) -> Result<()> {
        let Hold::Lease(token) = hold else {
            return Err(Error::invalid("extend() is for the lease form"));
        };
        *token = self.extend_lease(id, *token, micros(ttl)).await?;
        Ok(())
    }

    /// row_lock: the claim transaction, lent to the handler.
    pub(crate) async fn any_transaction<'a>(
        &self,
        hold: &'a mut Hold,
    ) -> Result<&'a mut sqlx::AnyConnection> {
        match hold {
            Hold::Session(s, lent) => s.lend(lent).await,
            Hold::Lease(_) => Err(Error::invalid(
                "any_transaction() is for the row_lock form on the portable path",
            )),
        }
    }
}

/// One direct connection first: a refused or unknown server is reported as
/// the driver's own error at once (the pool would retry it until the acquire
/// timeout and then say only "pool timed out"). Under `sslmode=prefer` a TLS
/// handshake that fails is tried again without TLS, as libpq does: the URL
/// the pool is to use.
async fn probe(url: String, timeout: Option<Duration>) -> Result<String> {
    /// Why one probe failed: the driver's error (TLS among them), or ours.
    enum Failed {
        Driver(sqlx::Error),
        Slow(Error),
    }
    let once = |url: String| async move {
        let c = sqlx::AnyConnection::connect(&url);
        let c = match timeout {
            Some(t) => tokio::time::timeout(t, c).await.map_err(|_| {
                Failed::Slow(Error::database(
                    None,
                    format!("connecting took longer than {t:?}"),
                ))
            })?,
            None => c.await,
        }
        .map_err(Failed::Driver)?;
        // how the close goes says nothing of the server: a TLS close_notify
        // can meet a socket the server already closed on QUIT
        drop(c.close().await);
        Ok(url)
    };
    match once(url.clone()).await {
        Ok(url) => Ok(url),
        Err(Failed::Slow(e)) => Err(e),
        Err(Failed::Driver(e)) => match crate::conninfo::sqlx_postgres_plain(&url) {
            Some(plain) if crate::error::handshake_failure(&e).is_some() => {
                tracing::debug!(error = %e, "TLS failed under sslmode=prefer: connecting without it");
                once(plain).await.map_err(|_| Error::from(e))
            }
            _ => Err(e.into()),
        },
    }
}

impl LeaseSettler for Engine {
    type Token = i64;

    fn combiner(&self) -> &Combiner<i64> {
        &self.acks
    }

    /// One lease settle in its own statement or short transaction. Any error
    /// but a lost lease wrote nothing, so the row is given back at once rather
    /// than at its deadline.
    async fn one(&self, id: &str, token: i64, outcome: &Outcome) -> Result<Settled> {
        let r = self.settle_lease(id, token, outcome).await;
        if matches!(&r, Err(err) if !matches!(err, Error::LeaseLost(_))) {
            let _ = self.release_lease(id, token).await;
        }
        r
    }

    async fn many(
        &self,
        ids: &[String],
        tokens: &[i64],
        outcome: &Outcome,
    ) -> Result<Vec<Result<Settled>>> {
        let items: Vec<(String, Option<i64>)> = ids
            .iter()
            .zip(tokens)
            .map(|(id, t)| (id.clone(), Some(*t)))
            .collect();
        let rs = self.settle_many_lease(&items, outcome).await?;
        Ok(ids
            .iter()
            .zip(rs)
            .map(|(id, r)| r.ok_or_else(|| Error::lease_lost(&self.s.queue, id)))
            .collect())
    }
}
