//! The portable path: the extension's semantics (docs/semantics.md) as plain SQL run
//! by the client through sqlx, one body for PostgreSQL, MariaDB/MySQL and
//! SQLite. The SQL text comes from [`sql`] and [`dialect`]; [`claim`],
//! [`write`], [`session`] and [`locks`] run it; [`introspect`] checks the
//! descriptor.

mod admin;
mod claim;
mod conns;
pub(crate) mod dialect;
mod engine;
mod introspect;
mod keys;
mod locks;
mod mark;
mod reach;
mod session;
mod sql;
mod texts;
mod write;

use super::combine::{Combiner, LeaseSettler};
use super::hold;
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{Outcome, Settled};
use crate::payload::Claimed;
use crate::pool::PoolOptions;
use crate::queue::{Form, Queue};
pub use conns::AnyConn;
pub use dialect::Dialect;
pub(crate) use engine::Engine;
pub(crate) use session::Session;
use sqlx::Connection;
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
        let url = probe(url, pool.connect_timeout).await?;
        let rescan_interval = pool.rescan_interval;
        let conns = conns::Conns::new(url, d, pool)?;
        let mut conn = conns.get().await?;
        let s = introspect::introspect(&mut conn, d, &queue).await?;
        conn.done();
        drop(conn);
        let interval = rescan_interval.unwrap_or(mark::RESCAN_INTERVAL);
        let mark = mark::Mark::new(
            s.id_kind,
            // a queue claimed in priority order keeps no mark (docs/semantics.md)
            (d.keeps_settled_rows_in_index() && s.keeps_mark()).then_some(interval),
        );
        Ok(Arc::new(Engine {
            conns,
            mark,
            keys: keys::KeyCount::default(),
            waited: keys::Waited::default(),
            held_lately: Default::default(),
            s,
            meters: Meters::new(&queue.name),
            queue,
            acks: Combiner::default(),
            texts: texts::Texts::default(),
        }))
    }

    pub(crate) fn dialect(&self) -> Dialect {
        self.s.d
    }

    /// A connection of the pool this queue is claimed through.
    pub(crate) async fn any_connection(&self) -> Result<AnyConn> {
        self.conns.get().await
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
        let mut c = self.conns.get().await?;
        let n = sqlx::query(&self.s.release_lease_sql())
            .bind(id)
            .bind(token)
            .execute(&mut *c)
            .await?
            .rows_affected();
        c.done();
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
