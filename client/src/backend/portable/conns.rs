//! The portable path's connections: a deadpool pool of sqlx connections. A
//! connection whose statements all ended is given back as it is, without a
//! round trip (sqlx's own pool pings every connection it takes back); one
//! given back after an error or a cancelled statement is checked first, as
//! sqlx would.

use super::dialect::Dialect;
use crate::error::{Error, Result};
use crate::pool::PoolOptions;
use deadpool::managed::{self, Metrics, Object, RecycleError, RecycleResult};
use sqlx::{Any, Connection, Database, TransactionManager};
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// How long a pooled connection may sit unused before it is pinged when next
/// taken: a server restart, MySQL's `wait_timeout` or a load balancer's idle
/// cut may have closed it meanwhile, and a broken one is then replaced instead
/// of failing the caller's statement. A busy pool never waits this long.
pub(super) const IDLE_CHECK_AFTER: Duration = Duration::from_secs(30);

/// Opens the portable path's connections (deadpool's manager).
pub(crate) struct AnyManager {
    url: String,
    d: Dialect,
}

type Tm = <Any as Database>::TransactionManager;

impl managed::Manager for AnyManager {
    type Type = sqlx::AnyConnection;
    type Error = sqlx::Error;

    async fn create(&self) -> std::result::Result<sqlx::AnyConnection, sqlx::Error> {
        let mut c = sqlx::AnyConnection::connect(&self.url).await?;
        for stmt in self.d.session_setup() {
            sqlx::Executor::execute(&mut c, *stmt).await?;
        }
        if self.d.wants_wal() {
            wal_on(&mut c).await?;
        }
        Ok(c)
    }

    async fn recycle(
        &self,
        c: &mut sqlx::AnyConnection,
        m: &Metrics,
    ) -> RecycleResult<sqlx::Error> {
        // only if its background check never ran (the runtime shutting down)
        if c.is_in_transaction() {
            return Err(RecycleError::message("given back inside a transaction"));
        }
        if m.last_used() >= IDLE_CHECK_AFTER {
            c.ping().await.map_err(RecycleError::Backend)?;
        }
        Ok(())
    }
}

/// Put the database file in WAL mode unless it is already. Setting the
/// mode asks for a lock that SQLite's busy timeout does not wait on, so a
/// new connection that set it while others wrote failed at once ("database
/// is locked"); reading it waits as any read does. Where two first
/// connections set it at once, the loser reads it again after a pause.
async fn wal_on(c: &mut sqlx::AnyConnection) -> std::result::Result<(), sqlx::Error> {
    let mut tries = 0;
    loop {
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut *c)
            .await?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match sqlx::Executor::execute(&mut *c, "PRAGMA journal_mode = WAL").await {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("5") && tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The pool the portable path claims and settles through.
pub(crate) struct Conns(managed::Pool<AnyManager>);

impl Conns {
    pub(super) fn new(url: String, d: Dialect, pool: &PoolOptions) -> Result<Conns> {
        managed::Pool::builder(AnyManager { url, d })
            .max_size(pool.max_size.max(1))
            .wait_timeout(pool.wait_timeout)
            .create_timeout(pool.connect_timeout)
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map(Conns)
            .map_err(|e| Error::invalid(format!("pool: {e}")))
    }

    /// A connection, waiting for one at most the pool's wait timeout.
    pub(crate) async fn get(&self) -> Result<AnyConn> {
        match self.0.get().await {
            Ok(obj) => Ok(AnyConn {
                obj: Some(obj),
                used: false,
                plain_tx: false,
            }),
            Err(managed::PoolError::Backend(e)) => Err(e.into()),
            Err(e @ managed::PoolError::Timeout(managed::TimeoutType::Wait)) => {
                Err(Error::pool_timeout(Box::new(e)))
            }
            Err(e) => Err(Error::Pool(crate::error::DbError {
                code: None,
                message: e.to_string(),
                source: Some(Box::new(e)),
            })),
        }
    }
}

/// A connection of the portable path's pool ([`crate::Client::any_connection`]),
/// a `sqlx::AnyConnection` to run statements on; dropping it gives it back.
/// Once used, it is given back after a check, in the background: an open
/// transaction is rolled back and the connection pinged (a broken one is
/// closed, not pooled).
pub struct AnyConn {
    obj: Option<Object<AnyManager>>,
    /// run on since it was taken or last marked [`done`](AnyConn::done)
    used: bool,
    /// an [`AnyTx`] is open on it, begun by a plain statement (sqlx does not
    /// count it as a transaction until [`AnyTx::driver_aware`])
    plain_tx: bool,
}

impl AnyConn {
    /// Every statement run on it ended, and no transaction is open: it goes
    /// back to the pool without a check.
    pub(crate) fn done(&mut self) {
        self.used = false;
        self.plain_tx = false;
    }

    /// Close it instead of giving it back (the server drops its locks).
    pub(crate) fn close(mut self) {
        if let Some(obj) = self.obj.take() {
            drop(Object::take(obj));
        }
    }
}

impl Deref for AnyConn {
    type Target = sqlx::AnyConnection;

    fn deref(&self) -> &sqlx::AnyConnection {
        self.obj.as_ref().expect("a pooled connection")
    }
}

impl DerefMut for AnyConn {
    fn deref_mut(&mut self) -> &mut sqlx::AnyConnection {
        self.used = true;
        self.obj.as_mut().expect("a pooled connection")
    }
}

impl std::fmt::Debug for AnyConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyConn").field("used", &self.used).finish()
    }
}

impl Drop for AnyConn {
    fn drop(&mut self) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        if !self.used {
            return; // back to the pool as it is
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            drop(Object::take(obj));
            return;
        };
        let plain_tx = self.plain_tx;
        // a statement may have failed or been cancelled midway, or a transaction
        // left open (a dropped sqlx transaction only queues its rollback): flush
        // and check it before anyone else takes it
        rt.spawn(async move {
            let c: &mut sqlx::AnyConnection = &mut obj;
            let rolled_back = match (c.is_in_transaction(), plain_tx) {
                (true, _) => Tm::rollback(c).await,
                (false, true) => sqlx::Executor::execute(&mut *c, "ROLLBACK").await.map(drop),
                (false, false) => Ok(()),
            };
            if rolled_back.is_err() || c.ping().await.is_err() {
                drop(Object::take(obj));
            }
        });
    }
}

/// A transaction that owns its connection (the row_lock claim transaction,
/// which its deliveries share until the last settles). Dropped while open,
/// it is rolled back before its connection is pooled again.
///
/// It begins and ends with plain statements: sqlx-sqlite answers its own
/// transaction commands through a rendezvous (its connection thread waits
/// until the caller has taken the answer), a cross-thread round trip more per
/// claim. sqlx learns of the transaction only when a savepoint or the
/// handler's use of it needs its nesting ([`AnyTx::driver_aware`]).
pub(crate) struct AnyTx {
    conn: AnyConn,
}

impl AnyTx {
    pub(super) async fn begin(mut c: AnyConn, statement: &'static str) -> Result<AnyTx> {
        // set first: a claim cancelled while it begins is rolled back too
        c.plain_tx = true;
        sqlx::Executor::execute(&mut *c, statement).await?;
        Ok(AnyTx { conn: c })
    }

    /// sqlx counts this transaction (its `begin()` makes a savepoint).
    fn known(&self) -> bool {
        self.conn.is_in_transaction()
    }

    /// Let sqlx count the open transaction, so its `begin()` on this
    /// connection makes a savepoint and its commit or rollback ends the whole.
    pub(super) async fn driver_aware(&mut self) -> Result<()> {
        if !self.known() {
            Tm::begin(&mut self.conn, Some(format!("SAVEPOINT {TX_SP}").into())).await?;
        }
        Ok(())
    }

    /// A savepoint in the transaction, as a sqlx transaction.
    pub(super) async fn savepoint(&mut self) -> Result<sqlx::Transaction<'_, Any>> {
        self.driver_aware().await?;
        Ok(self.conn.begin().await?)
    }

    pub(super) async fn commit(mut self) -> Result<()> {
        if self.known() {
            Tm::commit(&mut self.conn).await?;
        } else {
            sqlx::Executor::execute(&mut *self.conn, "COMMIT").await?;
        }
        self.conn.done();
        Ok(())
    }

    pub(super) async fn rollback(mut self) -> Result<()> {
        if self.known() {
            Tm::rollback(&mut self.conn).await?;
        } else {
            sqlx::Executor::execute(&mut *self.conn, "ROLLBACK").await?;
        }
        self.conn.done();
        Ok(())
    }
}

/// The savepoint that tells sqlx of an [`AnyTx`].
const TX_SP: &str = "settle_claim";

impl Deref for AnyTx {
    type Target = sqlx::AnyConnection;

    fn deref(&self) -> &sqlx::AnyConnection {
        &self.conn
    }
}

impl DerefMut for AnyTx {
    fn deref_mut(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.conn
    }
}
