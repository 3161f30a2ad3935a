//! The portable path: the extension's semantics (docs/semantics.md) as plain SQL run
//! by the client through sqlx, one body for PostgreSQL, MariaDB/MySQL and
//! SQLite. The SQL text comes from [`sql`] and [`dialect`]; [`claim`],
//! [`write`], [`session`] and [`locks`] run it; [`introspect`] checks the
//! descriptor.

mod admin;
mod claim;
pub(crate) mod dialect;
mod engine;
mod introspect;
mod keys;
mod locks;
mod mark;
mod reach;
mod session;
mod sql;
mod write;

use super::combine::{Combiner, LeaseSettler};
use super::hold;
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{Outcome, Settled};
use crate::payload::Claimed;
use crate::pool::PoolOptions;
use crate::queue::{Form, Queue};
pub use dialect::Dialect;
pub(crate) use engine::Engine;
pub(crate) use session::Session;
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Connection};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What holds a delivery on the portable path (a lease token is the
/// deadline in epoch microseconds).
pub(crate) type Hold = hold::Hold<i64, Session>;

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
        let opts = pool_options(d, pool);
        let url = probe(url, pool.connect_timeout).await?;
        let rescan_interval = pool.rescan_interval;
        let pool = opts.connect(&url).await?;
        let s = introspect::introspect(&pool, d, &queue).await?;
        let interval = rescan_interval.unwrap_or(mark::RESCAN_INTERVAL);
        let mark = mark::Mark::new(
            s.id_kind,
            // a queue claimed in priority order keeps no mark (docs/semantics.md)
            (d.keeps_settled_rows_in_index() && s.keeps_mark()).then_some(interval),
        );
        Ok(Arc::new(Engine {
            pool,
            mark,
            keys: keys::KeyCount::default(),
            waited: keys::Waited::default(),
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
                let hold = Hold::of_claim(session.as_ref(), c.token, &c.id)?;
                Ok(Claimed {
                    id: c.id,
                    attempt: c.attempt,
                    payload: c.payload,
                    hold,
                })
            })
            .collect()
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

    /// One lease settle in its own statement or short transaction.
    async fn one(&self, id: &str, token: i64, outcome: &Outcome) -> Result<Settled> {
        self.settle_lease(id, token, outcome).await
    }

    /// Give a lease back: cleared at once, only while it holds the token.
    async fn release_lease(&self, id: &str, token: i64) -> Result<()> {
        let n = sqlx::query(&self.s.release_lease_sql())
            .bind(id)
            .bind(token)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(Error::lease_lost(&self.s.queue, id));
        }
        Ok(())
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

/// How long a pooled connection may sit unused before it is pinged when next
/// taken: a server restart, MySQL's `wait_timeout` or a load balancer's idle
/// cut may have closed it meanwhile, and a broken one is then replaced instead
/// of failing the caller's statement. A busy pool never waits this long.
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(30);

/// The sqlx pool the portable path claims through.
fn pool_options(d: Dialect, pool: &PoolOptions) -> AnyPoolOptions {
    let max = u32::try_from(pool.max_size.max(1)).unwrap_or(u32::MAX);
    // sqlx has one timeout for waiting, which includes opening a connection
    // when the pool has room; None = a century
    let acquire = pool
        .wait_timeout
        .unwrap_or(Duration::from_secs(100 * 365 * 86_400));
    // no ping before every acquire (sqlx's default): it is a round trip per
    // statement — the lease ack is one statement; only a connection idle for
    // IDLE_CHECK_AFTER is pinged (before_acquire). No idle or lifetime
    // reaping: sqlx 0.8's reaper task can spin a core for good (sqlx #3645);
    // connections live as long as the pool, as deadpool's do.
    let mut opts = AnyPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(acquire)
        .test_before_acquire(false)
        .idle_timeout(None)
        .max_lifetime(None)
        .before_acquire(|conn: &mut sqlx::AnyConnection, meta| {
            Box::pin(async move {
                // an error closes the connection and sqlx takes or opens another
                if meta.idle_for >= IDLE_CHECK_AFTER {
                    conn.ping().await?;
                }
                Ok(true)
            })
        });
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
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_runs_no_reaper_task() {
        for d in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            let o = pool_options(d, &PoolOptions::new(4));
            // both None: sqlx spawns no maintenance task (min_connections 0)
            assert_eq!(o.get_idle_timeout(), None);
            assert_eq!(o.get_max_lifetime(), None);
            assert_eq!(o.get_min_connections(), 0);
            assert_eq!(o.get_max_connections(), 4);
        }
    }
}
