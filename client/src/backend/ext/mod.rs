//! The extension backend: PostgreSQL with `CREATE EXTENSION settle`, through
//! tokio-postgres and deadpool-postgres. Every claim and settle is one call of
//! the extension's SQL API ([`sql`]); a row_lock or advisory claim keeps its
//! connection in a [`Session`].

pub(crate) mod admin;
pub(crate) mod connect;
pub(crate) mod descriptor;
mod session;
mod sql;

use super::combine::{Combiner, LeaseSettler};
use super::hold::{self, HoldBackend};
use crate::conninfo::ConnInfo;
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::outcome::{micros, Outcome, Settled};
use crate::payload::{Claimed, Payload};
use crate::pool::PoolOptions;
use crate::queue::{Form, Queue};
use crate::stats::{Health, Stats};
use connect::{Connector, Notices, Statements};
use deadpool_postgres::Pool;
pub(crate) use session::Session;
use sql::*;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

/// PostgreSQL with the settle extension, for one queue.
pub(crate) struct Ext {
    pool: Pool,
    pub(crate) queue: Queue,
    has_retry_after: bool,
    /// opens the worker's LISTEN connection (None with a caller's own pool,
    /// or behind a transaction pooler)
    listen: Option<Connector>,
    /// prepared, or unnamed behind a transaction pooler
    statements: Statements,
    acks: Combiner<SystemTime>,
    pub(crate) meters: Meters,
    /// the installed edition and version
    installed: Installed,
    /// a lease settle can claim the next row in the same statement
    /// (`queue_complete_and_claim`): the lease form, extension 0.12.0
    chains: bool,
}

/// What holds a delivery on the extension backend.
pub(crate) type Hold = hold::Hold<SystemTime, Session>;

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

/// The oldest version of the PostgreSQL extension this client works with;
/// [`crate::Client::connect`] checks `pg_extension` and fails with
/// [`Error::Extension`] on an older one.
pub const EXTENSION_VERSION: &str = "0.6.0";

/// Is an installed extension version (`major.minor.patch`) at least
/// [`EXTENSION_VERSION`]? Compared as numbers; a version that does not parse
/// is not.
fn version_at_least_required(installed: &str) -> bool {
    version_at_least(installed, EXTENSION_VERSION)
}

/// Is `installed` at least `need`? Compared as numbers; a version that does
/// not parse is not.
pub(crate) fn version_at_least(installed: &str, need: &str) -> bool {
    fn parts(v: &str) -> Option<Vec<u64>> {
        v.split('.').map(|p| p.parse().ok()).collect()
    }
    match (parts(installed), parts(need)) {
        (Some(have), Some(need)) => have >= need,
        _ => false,
    }
}

/// Which edition of settle's SQL API a database runs (docs/editions.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edition {
    /// the native extension (`CREATE EXTENSION settle` of the compiled library)
    Native,
    /// the SQL edition: SQL and PL/pgSQL only, installed with psql or through pg_tle
    Sql,
}

impl Edition {
    /// `native` or `sql`
    pub fn name(self) -> &'static str {
        match self {
            Edition::Native => "native",
            Edition::Sql => "sql",
        }
    }
}

/// The installed settle: its edition and version.
#[derive(Clone, Debug)]
pub(crate) struct Installed {
    pub edition: Edition,
    pub version: String,
}

impl std::fmt::Display for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.edition {
            Edition::Native => write!(f, "the settle extension {}", self.version),
            Edition::Sql => write!(f, "settle's SQL edition {}", self.version),
        }
    }
}

/// The installed edition and version, when it is at least
/// [`EXTENSION_VERSION`]; [`Error::Extension`] otherwise.
pub(crate) async fn check_version(
    c: &deadpool_postgres::Object,
    st: Statements,
) -> Result<Installed> {
    let rows = st.query(c, &VERSION, &[]).await?;
    let (extversion, sql_edition): (Option<String>, bool) = (rows[0].get(0), rows[0].get(1));
    let installed = if sql_edition {
        let rows = st.query(c, &EDITION, &[]).await?;
        let (edition, version): (String, String) = (rows[0].get(0), rows[0].get(1));
        let edition = if edition == "sql" {
            Edition::Sql
        } else {
            Edition::Native
        };
        Some(Installed { edition, version })
    } else {
        extversion.map(|version| Installed {
            edition: Edition::Native,
            version,
        })
    };
    match installed {
        Some(i) if version_at_least_required(&i.version) => {
            tracing::debug!(edition = i.edition.name(), version = %i.version, "connected to {i}");
            Ok(i)
        }
        installed => Err(Error::Extension {
            installed: installed.map(|i| i.version),
            required: EXTENSION_VERSION,
        }),
    }
}

impl Ext {
    /// A pool over `info` (TLS as it says), then [`Ext::attach`].
    pub(crate) async fn connect(
        info: ConnInfo,
        pool: PoolOptions,
        queue: Queue,
    ) -> Result<Arc<Ext>> {
        let meters = Meters::new(&queue.name);
        let connector = Connector::new(&info, &pool)?;
        let notices = Notices {
            queue: Some((queue.name.clone(), meters.dead_lettered())),
        };
        let built = connector.pool(&pool, notices)?;
        // a transaction pooler hands a session's LISTEN to other clients
        let listen = (!pool.transaction_pooler).then_some(connector);
        Ext::attach(built, queue, listen, Statements::of(&pool), meters).await
    }

    /// Check the extension's version and that the queue is registered as
    /// `queue` describes it (with its custom outcomes); writes nothing.
    pub(crate) async fn attach(
        pool: Pool,
        queue: Queue,
        listen: Option<Connector>,
        statements: Statements,
        meters: Meters,
    ) -> Result<Arc<Ext>> {
        if statements == Statements::Unnamed && queue.form == Form::Advisory {
            return Err(Error::descriptor(format!(
                "queue \"{}\": the advisory form holds session locks, which a transaction pooler \
                 hands to other clients with the session: use the lease or row_lock form, or \
                 session pooling",
                queue.name
            )));
        }
        let c = pool.get().await?;
        let installed = check_version(&c, statements).await?;
        let checked = descriptor::check(&c, statements, &queue).await?;
        drop(c);
        let chains = matches!(queue.form, Form::Lease { .. })
            && version_at_least(&installed.version, CHAIN_SINCE);
        Ok(Arc::new(Ext {
            pool,
            meters,
            queue,
            has_retry_after: checked.has_retry_after,
            listen,
            statements,
            acks: Combiner::default(),
            installed,
            chains,
        }))
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    pub(crate) fn edition(&self) -> Edition {
        self.installed.edition
    }

    /// Whether the worker can LISTEN (not with the caller's own pool, which
    /// gives no config to open that connection with, nor behind a transaction
    /// pooler).
    pub(crate) fn listens(&self) -> bool {
        self.listen.is_some()
    }

    /// What the extension's result word says was written (a move to the dead
    /// letter is logged).
    fn settled(&self, id: &str, word: &str) -> Result<Settled> {
        let s = Settled::parse(word)?;
        if s == Settled::DeadLettered {
            tracing::warn!(queue = %self.queue.name, id = %id, "max_attempts reached: moved to the dead letter");
        }
        Ok(s)
    }

    /// Claim up to `n` rows (see [`crate::Client::claim`]).
    pub(crate) async fn claim(&self, n: usize) -> Result<Vec<Claimed<Hold>>> {
        let q = &self.queue;
        let lease = match q.form {
            Form::Lease { ttl } => Some(micros(ttl)),
            _ => None,
        };
        let obj = self.pool.get().await?;
        let row_lock = q.form == Form::RowLock;
        if row_lock {
            obj.batch_execute("BEGIN").await?;
        }
        let res = self
            .statements
            .query(&obj, &CLAIM, &[&q.name, &(n as i32), &lease])
            .await;
        let rows = match res {
            Ok(rows) => rows,
            Err(e) if lease.is_some() => return Err(e.into()),
            Err(e) => {
                // a failed claim: never return a connection in an unknown state
                Session::discard(obj);
                return Err(e.into());
            }
        };
        let session = match q.form {
            Form::Lease { .. } => {
                drop(obj);
                None
            }
            _ if rows.is_empty() => {
                if row_lock {
                    if let Err(e) = obj.batch_execute("COMMIT").await {
                        Session::discard(obj);
                        return Err(e.into());
                    }
                }
                return Ok(Vec::new());
            }
            form => Some(Session::new(obj, form, rows.len(), self.statements)),
        };
        rows.iter()
            .map(|r| claimed(r, 0, session.as_ref()))
            .collect()
    }

    /// Whether a lease settle can claim the next row in the same statement
    /// (`queue_complete_and_claim`): the lease form, extension 0.12.0.
    pub(crate) fn chains(&self) -> bool {
        self.chains
    }

    /// Settle a lease and claim one more row in one statement: the settle's
    /// result and the row, if one was ready. An error writes nothing and
    /// claims nothing.
    pub(crate) async fn settle_and_claim(
        &self,
        id: &str,
        token: SystemTime,
        outcome: &Outcome,
    ) -> Result<(Settled, Option<Claimed<Hold>>)> {
        let Form::Lease { ttl } = self.queue.form else {
            return Err(Error::invalid("settle_and_claim is for the lease form"));
        };
        self.before_settle(outcome);
        let c = self.pool.get().await?;
        let rows = self
            .statements
            .query(
                &c,
                &COMPLETE_AND_CLAIM,
                &[
                    &self.queue.name,
                    &id,
                    &outcome.sql_name(),
                    &outcome.delay_micros(),
                    &Some(token),
                    &micros(ttl),
                ],
            )
            .await?;
        drop(c);
        let first = rows
            .first()
            .ok_or_else(|| Error::database(None, "queue_complete_and_claim returned no row"))?;
        let settled = self.settled(id, &first.get::<_, String>(0))?;
        let next = match first.get::<_, Option<&str>>(1) {
            Some(_) => Some(claimed(first, 1, None)?),
            None => None,
        };
        Ok((settled, next))
    }

    /// This queue's [`Health`] (`queue_health`, extension 0.7.0).
    pub(crate) async fn health(&self) -> Result<Health> {
        admin::health(&self.pool, &self.installed.version, Some(&self.queue.name))
            .await?
            .pop()
            .ok_or_else(|| {
                Error::unknown_queue(format!("queue \"{}\" is not registered", self.queue.name))
            })
    }

    pub(crate) async fn stats(&self) -> Result<Stats> {
        let c = self.pool.get().await?;
        let r = self
            .statements
            .query_one(&c, &STATS, &[&self.queue.name])
            .await?;
        Ok(admin::stats_of(&r))
    }

    /// A task that LISTENs and wakes the worker on `NOTIFY settle, '<queue>'`;
    /// reconnects after failures. None when the client has no connection config.
    pub(crate) fn listen(&self, wake: Arc<Notify>) -> Option<tokio::task::JoinHandle<()>> {
        let connector = self.listen.clone()?;
        let queue = self.queue.name.clone();
        Some(tokio::spawn(async move {
            loop {
                // the connection task forwards notifications until the connection ends
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let opened = connector
                    .open(move |m| match m {
                        tokio_postgres::AsyncMessage::Notification(n) => {
                            tx.send(n.payload().to_owned()).is_ok()
                        }
                        _ => true,
                    })
                    .await;
                match opened {
                    Ok((client, driver)) => {
                        match client.batch_execute("LISTEN settle").await {
                            Ok(()) => {
                                while let Some(payload) = rx.recv().await {
                                    if payload == queue {
                                        wake.notify_one();
                                    }
                                }
                            }
                            Err(e) => tracing::warn!(error = %e, "LISTEN failed; the worker polls"),
                        }
                        driver.abort();
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "LISTEN connection failed; the worker polls")
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }))
    }
}

/// The claimed row whose `id, attempt, token, payload` start at column `at`.
fn claimed(
    r: &tokio_postgres::Row,
    at: usize,
    session: Option<&Arc<Session>>,
) -> Result<Claimed<Hold>> {
    let id: String = r.get(at);
    let attempt: Option<i32> = r.get(at + 1);
    let token: Option<SystemTime> = r.get(at + 2);
    let payload: Option<JsonText> = r.get(at + 3);
    let hold = Hold::of_claim(session, token, &id)?;
    Ok(Claimed {
        id,
        attempt: attempt.map_or(1, |a| a.max(0) as u32),
        payload: Payload::json(payload.map(|JsonText(t)| t)),
        hold,
    })
}

impl HoldBackend for Ext {
    type Session = Session;

    fn queue_name(&self) -> &str {
        &self.queue.name
    }

    fn token_time(token: SystemTime) -> SystemTime {
        token
    }

    /// `queue_complete_many` takes every outcome, a custom one too.
    fn settles_together(&self, _outcome: &Outcome) -> bool {
        true
    }

    /// A table without retry_after takes retry_after(d) as retry() and says
    /// so (docs/semantics.md).
    fn before_settle(&self, outcome: &Outcome) {
        if matches!(outcome, Outcome::RetryAfter(_)) && !self.has_retry_after {
            tracing::warn!(queue = %self.queue.name, "queue has no retry_after column: retry_after is settled as retry");
        }
    }

    async fn extend_lease(&self, id: &str, token: SystemTime, ttl: Duration) -> Result<SystemTime> {
        let c = self.pool.get().await?;
        let r = self
            .statements
            .query_one(
                &c,
                &EXTEND,
                &[&self.queue.name, &id, &Some(token), &micros(ttl)],
            )
            .await?;
        Ok(r.get(0))
    }
}

impl LeaseSettler for Ext {
    type Token = SystemTime;

    fn combiner(&self) -> &Combiner<SystemTime> {
        &self.acks
    }

    /// One `queue_complete`.
    async fn one(&self, id: &str, token: SystemTime, outcome: &Outcome) -> Result<Settled> {
        let c = self.pool.get().await?;
        let row = self
            .statements
            .query_one(
                &c,
                &COMPLETE,
                &[
                    &self.queue.name,
                    &id,
                    &outcome.sql_name(),
                    &outcome.delay_micros(),
                    &Some(token),
                ],
            )
            .await?;
        self.settled(id, &row.get::<_, String>(0))
    }

    async fn release_lease(&self, id: &str, token: SystemTime) -> Result<()> {
        let c = self.pool.get().await?;
        self.statements
            .query_one(&c, &RELEASE, &[&self.queue.name, &id, &Some(token)])
            .await?;
        Ok(())
    }

    /// One `queue_complete_many`; a row this call did not hold is [`Error::LeaseLost`].
    async fn many(
        &self,
        ids: &[String],
        tokens: &[SystemTime],
        outcome: &Outcome,
    ) -> Result<Vec<Result<Settled>>> {
        let tokens: Vec<Option<SystemTime>> = tokens.iter().map(|t| Some(*t)).collect();
        let c = self.pool.get().await?;
        let rows = self
            .statements
            .query(
                &c,
                &COMPLETE_MANY,
                &[
                    &self.queue.name,
                    &ids,
                    &outcome.sql_name(),
                    &outcome.delay_micros(),
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
                Some(&r) if r != "lease_lost" => self.settled(id, r),
                _ => Err(Error::lease_lost(&self.queue.name, id)),
            })
            .collect())
    }
}
