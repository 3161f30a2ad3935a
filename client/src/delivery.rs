//! A delivery and how it is settled (SPEC §3).

use crate::client::{
    micros, Backend, Inner, COMPLETE_MANY_SQL, COMPLETE_SQL, EXTEND_SQL, RELEASE_SQL,
};
use crate::error::{Error, Result};
use crate::portable::engine::{Claimed, PSession};
use crate::queue::Form;
use deadpool_postgres::Object;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tracing::Instrument;

/// The outcome a handler settles a delivery with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done: the row leaves the queue (DELETE, or processed_at = now()).
    Ack,
    /// Poison: settled exactly like ack.
    Drop,
    /// Deliver again (as soon as possible).
    Retry,
    /// Deliver again, not before this delay.
    RetryAfter(Duration),
    /// A registered custom outcome: its SQL runs instead of the dialect's statement.
    Custom(String),
}

impl Outcome {
    pub(crate) fn sql_name(&self) -> String {
        self.sql()
    }

    fn sql(&self) -> String {
        match self {
            Outcome::Ack => "ack".into(),
            Outcome::Drop => "drop".into(),
            Outcome::Retry => "retry".into(),
            Outcome::RetryAfter(_) => "retry_after".into(),
            Outcome::Custom(n) => format!("custom:{n}"),
        }
    }
}

/// What settling wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Settled {
    /// the row was deleted (ack, drop)
    Deleted,
    /// processed_at was set (ack, drop on a table with processed_at)
    Marked,
    /// it will be delivered again
    Retried,
    /// it will be delivered again after its retry_after
    Delayed,
    /// max_attempts reached: moved to the dead letter
    DeadLettered,
    /// given back without an outcome (nothing written but the lease / lock)
    Released,
    /// a custom outcome ran
    Custom,
}

impl Settled {
    pub(crate) fn parse(s: &str) -> Settled {
        match s {
            "deleted" => Settled::Deleted,
            "marked" => Settled::Marked,
            "retried" => Settled::Retried,
            "delayed" => Settled::Delayed,
            "dead_lettered" => Settled::DeadLettered,
            "custom" => Settled::Custom,
            _ => Settled::Released,
        }
    }
}

/// A connection pinned to the deliveries of one claim: it holds the row_lock
/// transaction or the advisory keys, so it never goes back to the pool while one
/// of them lives. When the last is settled or dropped, the transaction commits
/// (row_lock) and the connection returns to the pool; if anything leaves it in an
/// unknown state, it is detached from the pool and closed, and the server rolls
/// back and drops the locks.
pub(crate) struct Session {
    conn: Arc<Mutex<Pinned>>,
    form: Form,
    open: AtomicUsize,
    dirty: AtomicBool,
}

pub(crate) struct Pinned {
    obj: Option<Object>,
    /// the handler's savepoint is open (row_lock transactional mode)
    handler_savepoint: bool,
}

const HANDLER_SP: &str = "settle_handler";
const OUTCOME_SP: &str = "settle_outcome";

impl Session {
    pub(crate) fn new(obj: Object, form: Form, n: usize) -> Arc<Session> {
        Arc::new(Session {
            conn: Arc::new(Mutex::new(Pinned {
                obj: Some(obj),
                handler_savepoint: false,
            })),
            form,
            open: AtomicUsize::new(n),
            dirty: AtomicBool::new(false),
        })
    }

    /// Close a connection instead of returning it to the pool.
    pub(crate) fn discard(obj: Object) {
        drop(Object::take(obj));
    }

    /// Whether a row_lock outcome for `n` of this claim's deliveries runs in a
    /// savepoint of its own, so that if it fails the deliveries still open keep
    /// the claim transaction. Not for ack and drop: a row locked by the claim
    /// and deleted in a subtransaction gets a MultiXact as its deleter, and
    /// PostgreSQL's index scans never mark such a tuple dead in the index (only
    /// VACUUM removes it), so every later claim walks past all of them. An ack
    /// or drop that fails (rare: a trigger, a foreign key) aborts the claim
    /// transaction, and every row of the claim goes back to the queue. Nor for the one delivery
    /// left open: there is nobody left to protect. (A batch of other outcomes
    /// is fenced even when it is the last, so that when it fails its
    /// deliveries can be settled one by one, each with its own result.)
    pub(crate) fn fence(&self, outcome: &str, n: usize) -> bool {
        self.form == Form::RowLock
            && !matches!(outcome, "ack" | "drop")
            && (n > 1 || self.open.load(Ordering::Acquire) > n)
    }

    /// A row_lock claim transaction an outcome failed in, without a savepoint.
    fn rolled_back(what: &str) -> Error {
        Error::Database(crate::error::DbError {
            code: Some("25P02".into()),
            message: format!(
                "an outcome failed in the claim transaction, so it is rolled back: {what}; \
                 its rows go back to the queue"
            ),
            source: None,
        })
    }

    /// One delivery of this session is done; the last one closes the session.
    async fn finish_one(&self) -> Result<()> {
        if self.open.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Ok(());
        }
        let mut g = self.conn.lock().await;
        let Some(obj) = g.obj.take() else {
            return Ok(());
        };
        let res = match self.form {
            Form::RowLock if self.dirty.load(Ordering::Acquire) => {
                // an outcome failed outside a savepoint: PostgreSQL would answer
                // COMMIT with a silent ROLLBACK
                return match obj.batch_execute("ROLLBACK").await {
                    Ok(()) => Err(Session::rolled_back(
                        "the outcomes settled in it were not kept",
                    )),
                    Err(e) => {
                        Session::discard(obj);
                        Err(e.into())
                    }
                };
            }
            Form::RowLock => obj.batch_execute("COMMIT").await,
            _ if self.dirty.load(Ordering::Acquire) => {
                obj.batch_execute("SELECT pg_advisory_unlock_all()").await
            }
            _ => Ok(()),
        };
        match res {
            Ok(()) => Ok(()), // obj dropped here: back to the pool, clean
            Err(e) => {
                Session::discard(obj);
                Err(e.into())
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Not closed cleanly (no runtime to finish on, a task was cancelled):
        // never hand a connection with a transaction or locks back to the pool.
        if let Some(obj) = self.conn.try_lock().ok().and_then(|mut g| g.obj.take()) {
            Session::discard(obj);
        }
    }
}

/// One claimed row, held until it is settled. Every settle method consumes the
/// delivery, so it cannot be settled twice. Dropped unsettled (early return,
/// panic, cancelled future) it is given back: row_lock rolls its writes back and
/// leaves the row unchanged, a lease is released at once, an advisory key is
/// unlocked (or its connection closed).
pub struct Delivery {
    inner: Arc<Inner>,
    id: String,
    attempt: u32,
    token: Option<SystemTime>,
    row: RowData,
    /// the row parsed, on first `row()`
    parsed: std::sync::OnceLock<serde_json::Value>,
    session: Option<Arc<Session>>,
    /// row_lock transactional mode: the pinned connection, held between
    /// `transaction()` and settling
    tx: Option<OwnedMutexGuard<Pinned>>,
    /// portable path: the lease token (epoch microseconds) and the pinned session
    ptoken: Option<i64>,
    psession: Option<Arc<PSession>>,
    /// portable row_lock transactional mode: the claim transaction, held between
    /// `any_transaction()` and settling
    ptx: Option<OwnedMutexGuard<Option<crate::portable::engine::Pinned>>>,
    done: bool,
}

/// The claimed row as it arrived.
pub(crate) enum RowData {
    /// PostgreSQL: the JSON text of the jsonb, parsed only when the handler
    /// asks (into its own type by `payload`/`row_as`, or a `Value` by `row`)
    Text(Vec<u8>),
    /// portable path: the claim's JSON text, parsed only when the handler asks
    /// (parsing each row at the claim took most of the client's CPU in a
    /// 100-row batch); a JSON column may arrive as a string holding its JSON
    /// (SQLite, MariaDB), see `payload`
    Portable(Vec<u8>),
    /// a row already parsed
    Value(serde_json::Value),
}

/// The canonical layout's `payload` column, read straight from the row's text.
#[derive(serde::Deserialize)]
struct PayloadColumn<T> {
    payload: Option<T>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &self.inner.queue.name)
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    pub(crate) fn new(
        inner: Arc<Inner>,
        id: String,
        attempt: u32,
        token: Option<SystemTime>,
        row: RowData,
        session: Option<Arc<Session>>,
    ) -> Delivery {
        Delivery {
            inner,
            id,
            attempt,
            token,
            row,
            parsed: std::sync::OnceLock::new(),
            session,
            tx: None,
            ptoken: None,
            psession: None,
            ptx: None,
            done: false,
        }
    }

    pub(crate) fn new_portable(
        inner: Arc<Inner>,
        c: Claimed,
        psession: Option<Arc<PSession>>,
    ) -> Delivery {
        let token = c
            .token
            .map(|us| std::time::UNIX_EPOCH + Duration::from_micros(us.max(0) as u64));
        Delivery {
            inner,
            id: c.id,
            attempt: c.attempt,
            token,
            row: RowData::Portable(c.row),
            parsed: std::sync::OnceLock::new(),
            session: None,
            tx: None,
            ptoken: c.token,
            psession,
            ptx: None,
            done: false,
        }
    }

    /// The row's id, as text.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The 1-based number of this delivery (1 when the table keeps no attempt column).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The lease token (the deadline), in the lease form.
    pub fn token(&self) -> Option<SystemTime> {
        self.token
    }

    /// The whole row as JSON (parsed on the first call).
    pub fn row(&self) -> &serde_json::Value {
        match &self.row {
            RowData::Value(v) => v,
            RowData::Text(t) | RowData::Portable(t) => self
                .parsed
                .get_or_init(|| serde_json::from_slice(t).unwrap_or(serde_json::Value::Null)),
        }
    }

    /// The row deserialised into `T` (e.g. a struct with the columns you need).
    pub fn row_as<T: DeserializeOwned>(&self) -> Result<T> {
        match &self.row {
            RowData::Text(t) | RowData::Portable(t) => {
                serde_json::from_slice(t).map_err(Error::Payload)
            }
            RowData::Value(v) => serde_json::from_value(v.clone()).map_err(Error::Payload),
        }
    }

    /// The row's `payload` column deserialised into `T` (the canonical layout
    /// made by `queue_create`).
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        if let RowData::Text(t) = &self.row {
            // straight into T; if that fails (say a text column holding JSON),
            // the general path below decides, with its error
            if let Ok(col) = serde_json::from_slice::<PayloadColumn<T>>(t) {
                return match col.payload {
                    Some(p) => Ok(p),
                    None => serde_json::from_value(serde_json::Value::Null).map_err(Error::Payload),
                };
            }
        }
        let v = self
            .row()
            .get("payload")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        // databases that keep JSON as text (SQLite, MariaDB) hand it over as a string
        if let serde_json::Value::String(text) = &v {
            if let Ok(t) = serde_json::from_str::<T>(text) {
                return Ok(t);
            }
        }
        serde_json::from_value(v).map_err(Error::Payload)
    }

    /// row_lock form: the claim transaction, for the handler's own writes. They
    /// commit with `ack`; every other outcome (and dropping the delivery) rolls
    /// them back first (a savepoint taken here). Deliveries of one claim share the
    /// transaction, so their handlers run one after another: this waits until
    /// the previous delivery that took the transaction is settled.
    pub async fn transaction(&mut self) -> Result<&tokio_postgres::Client> {
        let Some(session) = &self.session else {
            return Err(Error::invalid("transaction() is for the row_lock form"));
        };
        if session.form != Form::RowLock {
            return Err(Error::invalid("transaction() is for the row_lock form"));
        }
        if self.tx.is_none() {
            let mut g = session.conn.clone().lock_owned().await;
            let obj = g
                .obj
                .as_ref()
                .ok_or_else(|| Error::invalid("the claim transaction has ended"))?;
            obj.batch_execute(&format!("SAVEPOINT {HANDLER_SP}"))
                .await?;
            g.handler_savepoint = true;
            self.tx = Some(g);
        }
        let g = self.tx.as_ref().expect("set above");
        Ok(g.obj.as_ref().expect("checked above"))
    }

    /// Take the id and token out for a batch settle; the delivery counts as settled.
    pub(crate) fn into_settled_parts(mut self) -> (String, Option<SystemTime>) {
        self.done = true;
        (std::mem::take(&mut self.id), self.token)
    }

    /// Portable lease form: the id and token (epoch microseconds), the delivery
    /// marked settled (its caller writes the outcome or gives it back).
    pub(crate) fn into_portable_parts(mut self) -> (String, Option<i64>) {
        self.done = true;
        (std::mem::take(&mut self.id), self.ptoken)
    }

    /// Portable row_lock form: the claim transaction as a sqlx connection, for
    /// the handler's own writes (transactional mode, as [`Delivery::transaction`]
    /// on the extension backend): `ack` commits them with the outcome, every
    /// other outcome and a drop roll them back to a savepoint taken here.
    pub async fn any_transaction(&mut self) -> Result<&mut sqlx::AnyConnection> {
        let Some(s) = self.psession.clone() else {
            return Err(Error::invalid(
                "any_transaction() is for the row_lock form on the portable path",
            ));
        };
        if self.ptx.is_none() {
            let mut g = s.pinned.clone().lock_owned().await;
            match g.as_mut() {
                Some(crate::portable::engine::Pinned::Tx(tx)) => {
                    let conn: &mut sqlx::AnyConnection = tx;
                    sqlx::Executor::execute(
                        &mut *conn,
                        format!("SAVEPOINT {}", crate::portable::engine::HANDLER_SP).as_str(),
                    )
                    .await?;
                    s.handler_sp.store(true, Ordering::Release);
                }
                _ => {
                    return Err(Error::invalid(
                        "any_transaction() is for the row_lock form on the portable path",
                    ))
                }
            }
            self.ptx = Some(g);
        }
        match self.ptx.as_mut().and_then(|g| g.as_mut()) {
            Some(crate::portable::engine::Pinned::Tx(tx)) => Ok(&mut **tx),
            _ => Err(Error::invalid("the claim transaction has ended")),
        }
    }

    /// Lease heartbeat: hold the row for `ttl` from now; the token changes.
    pub async fn extend(&mut self, ttl: Duration) -> Result<()> {
        let Some(token) = self.token else {
            return Err(Error::invalid("extend() is for the lease form"));
        };
        if let Backend::Portable(e) = &self.inner.backend {
            let t = e
                .extend(&self.id, self.ptoken.unwrap_or_default(), micros(ttl))
                .await?;
            self.ptoken = Some(t);
            self.token = Some(std::time::UNIX_EPOCH + Duration::from_micros(t.max(0) as u64));
            return Ok(());
        }
        let c = self.inner.pool()?.get().await?;
        let st = c.prepare_cached(EXTEND_SQL).await?;
        let r = c
            .query_one(
                &st,
                &[&self.inner.queue.name, &self.id, &token, &micros(ttl)],
            )
            .await?;
        self.token = Some(r.get(0));
        Ok(())
    }

    /// Done: the row leaves the queue.
    pub async fn ack(self) -> Result<Settled> {
        self.settle(Outcome::Ack).await
    }

    /// Poison: settled exactly like ack.
    pub async fn drop_it(self) -> Result<Settled> {
        self.settle(Outcome::Drop).await
    }

    /// Deliver again (moves to the dead letter at max_attempts).
    pub async fn retry(self) -> Result<Settled> {
        self.settle(Outcome::Retry).await
    }

    /// Deliver again not before `delay` (moves to the dead letter at max_attempts).
    pub async fn retry_after(self, delay: Duration) -> Result<Settled> {
        self.settle(Outcome::RetryAfter(delay)).await
    }

    /// Run the registered custom outcome `name`.
    pub async fn custom(self, name: &str) -> Result<Settled> {
        self.settle(Outcome::Custom(name.to_owned())).await
    }

    /// Give the delivery back without an outcome (the attempt stays counted).
    pub async fn release(mut self) -> Result<Settled> {
        self.done = true;
        let inner = self.inner.clone();
        let (id, token, session, tx) = (
            std::mem::take(&mut self.id),
            self.token,
            self.session.take(),
            self.tx.take(),
        );
        let (ptoken, psession, ptx) = (self.ptoken, self.psession.take(), self.ptx.take());
        if matches!(inner.backend, Backend::Portable(_)) {
            return release_portable(&inner, &id, ptoken, psession, ptx)
                .await
                .map(|_| Settled::Released);
        }
        release(&inner, &id, token, session, tx)
            .await
            .map(|_| Settled::Released)
    }

    /// Settle with `outcome`. On error nothing was written for this delivery
    /// (a lease lost, a row not held, a database failure) and it is given back.
    pub async fn settle(mut self, outcome: Outcome) -> Result<Settled> {
        self.done = true;
        let span = tracing::debug_span!(
            "settle.settle",
            queue = %self.inner.queue.name,
            id = %self.id,
            attempt = self.attempt,
            outcome = %outcome.sql()
        );
        let inner = self.inner.clone();
        let session = self.session.take();
        let tx = self.tx.take();
        let id = std::mem::take(&mut self.id);
        let token = self.token;
        let (ptoken, psession, ptx) = (self.ptoken, self.psession.take(), self.ptx.take());
        async move {
            if matches!(inner.queue.form, Form::Lease { .. })
                && !matches!(outcome, Outcome::Custom(_))
            {
                // combined with the client's concurrent settles (a custom outcome runs alone)
                let token = match inner.backend {
                    Backend::Portable(_) => crate::combine::Token::Portable(ptoken),
                    Backend::Ext(_) => crate::combine::Token::Ext(token),
                };
                inner.warn_if_no_retry_after(&outcome);
                return crate::combine::settle(&inner, id, token, outcome).await;
            }
            if let Backend::Portable(e) = &inner.backend {
                return match psession {
                    // a lease custom outcome (the others went above)
                    None => {
                        let token = crate::combine::Token::Portable(ptoken);
                        crate::combine::one(&inner, &id, token, &outcome).await
                    }
                    Some(s) => {
                        let mut g = match ptx {
                            Some(g) => g,
                            None => s.pinned.clone().lock_owned().await,
                        };
                        let r = match g.as_mut() {
                            Some(p) => e.settle_pinned(p, &s, &id, &outcome).await,
                            None => Err(Error::invalid("the claim's connection is gone")),
                        };
                        drop(g);
                        let closed = e.finish_one(&s).await;
                        r.and_then(|v| closed.map(|_| v))
                    }
                };
            }
            inner.warn_if_no_retry_after(&outcome);
            let delay = match &outcome {
                Outcome::RetryAfter(d) => Some(micros(*d)),
                _ => None,
            };
            let q = &inner.queue.name;
            let o = outcome.sql();
            let result: Result<String> = match (&session, inner.queue.form) {
                (_, Form::Lease { .. }) | (None, _) => {
                    crate::combine::one_ext(&inner, &id, token, &outcome).await
                }
                (Some(s), _) => {
                    let mut g = match tx {
                        Some(g) => g,
                        None => s.conn.clone().lock_owned().await,
                    };
                    let r =
                        settle_pinned(&mut g, s, q, &id, &o, delay, outcome == Outcome::Ack).await;
                    if r.is_err() && s.form == Form::Advisory {
                        // clean the connection before it goes back to the pool
                        s.dirty.store(true, Ordering::Release);
                    }
                    drop(g);
                    let closed = s.finish_one().await;
                    match (r, closed) {
                        (Ok(v), Ok(())) => Ok(v),
                        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                    }
                }
            };
            Ok(crate::combine::settled(&inner, &id, &result?))
        }
        .instrument(span)
        .await
    }
}

/// `Client::settle_many` for deliveries of one row_lock or advisory claim on the
/// extension: one `queue_complete_many` on the claim's connection instead of a
/// statement (and, for row_lock, a savepoint around it) per delivery. Gives the
/// deliveries back untouched (`Err`) when it does not apply: fewer than two, not
/// all of one claim, or one in transactional mode.
pub(crate) async fn settle_many_pinned(
    inner: &Arc<Inner>,
    mut ds: Vec<Delivery>,
    outcome: &Outcome,
) -> std::result::Result<Vec<Result<Settled>>, Vec<Delivery>> {
    let Some(s) = ds.first().and_then(|d| d.session.clone()) else {
        return Err(ds);
    };
    if ds.len() < 2
        || ds
            .iter()
            .any(|d| d.tx.is_some() || !d.session.as_ref().is_some_and(|x| Arc::ptr_eq(x, &s)))
    {
        return Err(ds);
    }
    let g = s.conn.clone().lock_owned().await;
    // (a rolled-back row_lock claim: one by one, each told why)
    let broken = s.form == Form::RowLock && s.dirty.load(Ordering::Acquire);
    let Some(obj) = g.obj.as_ref().filter(|_| !g.handler_savepoint && !broken) else {
        drop(g);
        return Err(ds);
    };
    inner.warn_if_no_retry_after(outcome);
    let q = &inner.queue.name;
    let ids: Vec<String> = ds.iter().map(|d| d.id.clone()).collect();
    let delay = match outcome {
        Outcome::RetryAfter(d) => Some(micros(*d)),
        _ => None,
    };
    // row_lock: the siblings still open share the transaction; a failed
    // statement is undone to the savepoint so they keep theirs (see `fence`)
    let fence = s.fence(&outcome.sql_name(), ds.len());
    let none: Option<Vec<SystemTime>> = None;
    let res: Result<Vec<tokio_postgres::Row>> = async {
        let st = obj.prepare_cached(COMPLETE_MANY_SQL).await?;
        fenced(
            obj,
            fence,
            obj.query(&st, &[q, &ids, &outcome.sql_name(), &delay, &none]),
        )
        .await
    }
    .await;
    let rows = match res {
        // row_lock: undone to the savepoint, nothing written: settle them one
        // by one, so each gets its own result (a custom outcome's SQL may fail
        // for one row only)
        Err(_) if fence && g.obj.is_some() => {
            drop(g);
            return Err(ds);
        }
        Err(e) => {
            // advisory: the statement wrote nothing, and its keys were let go
            // with its transaction; row_lock without a savepoint: the claim
            // transaction is aborted, and its end rolls it back. Either way the
            // connection is cleaned before it goes back
            s.dirty.store(true, Ordering::Release);
            let msg = e.to_string();
            drop(g);
            let mut out = Vec::with_capacity(ds.len());
            for d in &mut ds {
                d.done = true;
                d.session = None;
                out.push(Err(Error::invalid(format!("batch settle failed: {msg}"))));
                let _ = s.finish_one().await;
            }
            return Ok(out);
        }
        Ok(rows) => rows,
    };
    drop(g);
    let by_id: std::collections::HashMap<String, String> = rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    let mut out: Vec<Result<Settled>> = ids
        .iter()
        .map(|id| match by_id.get(id).map(String::as_str) {
            Some("not_held") | None => Err(Error::NotHeld(crate::error::DbError {
                code: Some("SQ006".into()),
                message: format!("row {id} of queue \"{q}\" is not held by this session"),
                source: None,
            })),
            Some(r) => Ok(crate::combine::settled(inner, id, r)),
        })
        .collect();
    // the last delivery of the claim commits (row_lock) or cleans up; if that
    // fails, nothing of this batch was kept
    let mut closed: Result<()> = Ok(());
    for d in &mut ds {
        d.done = true;
        d.session = None;
        if let Err(e) = s.finish_one().await {
            closed = Err(e);
        }
    }
    uncommitted(&mut out, closed);
    Ok(out)
}

/// A batch whose claim did not end cleanly (`closed`: the row_lock commit, or
/// the connection's clean-up, failed): nothing of it was kept, so every result
/// that says otherwise becomes that error.
fn uncommitted(out: &mut [Result<Settled>], closed: Result<()>) {
    if let Err(e) = closed {
        let (code, msg) = (e.code().map(str::to_owned), e.to_string());
        for r in out.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(Error::Database(crate::error::DbError {
                code: code.clone(),
                message: format!("the claim's transaction did not commit: {msg}"),
                source: None,
            }));
        }
    }
}

/// `Client::settle_many` for deliveries of one row_lock or advisory claim on the
/// portable path: one savepoint (row_lock) or transaction (advisory) for the
/// batch, the advisory keys let go in one statement. Gives the deliveries back
/// untouched (`Err`) when it does not apply (not all of one claim, one holding
/// the claim transaction for its handler) or the batch wrote nothing, so the
/// caller settles them one at a time.
pub(crate) async fn settle_many_portable_pinned(
    e: &crate::portable::engine::Engine,
    mut ds: Vec<Delivery>,
    outcome: &Outcome,
) -> std::result::Result<Vec<Result<Settled>>, Vec<Delivery>> {
    let Some(s) = ds.first().and_then(|d| d.psession.clone()) else {
        return Err(ds);
    };
    if ds
        .iter()
        .any(|d| d.ptx.is_some() || !d.psession.as_ref().is_some_and(|x| Arc::ptr_eq(x, &s)))
    {
        return Err(ds);
    }
    let ids: Vec<String> = ds.iter().map(|d| d.id.clone()).collect();
    let mut g = s.pinned.clone().lock_owned().await;
    let Some(p) = g.as_mut() else {
        return Err(ds);
    };
    let mut out = match e.settle_pinned_many(p, &s, &ids, outcome).await {
        Ok(out) => out,
        Err(_) => return Err(ds),
    };
    drop(g);
    // the last delivery of the claim commits (row_lock) or hands the
    // connection back; if the commit fails, nothing of this batch was kept
    let mut closed: Result<()> = Ok(());
    for d in &mut ds {
        d.done = true;
        d.psession = None;
        if let Err(err) = e.finish_one(&s).await {
            closed = Err(err);
        }
    }
    uncommitted(&mut out, closed);
    Ok(out)
}

/// Run an outcome on the pinned connection of a row_lock / advisory claim.
async fn settle_pinned(
    g: &mut Pinned,
    s: &Session,
    queue: &str,
    id: &str,
    outcome: &str,
    delay: Option<i64>,
    ack: bool,
) -> Result<String> {
    let obj = g
        .obj
        .as_ref()
        .ok_or_else(|| Error::invalid("the claim's connection is gone"))?;
    if s.form == Form::RowLock && s.dirty.load(Ordering::Acquire) {
        return Err(Session::rolled_back(&format!(
            "nothing was written for row {id}"
        )));
    }
    if g.handler_savepoint {
        // transactional mode: ack keeps the handler's writes, anything else undoes them
        let sql = if ack {
            format!("RELEASE SAVEPOINT {HANDLER_SP}")
        } else {
            format!("ROLLBACK TO SAVEPOINT {HANDLER_SP}; RELEASE SAVEPOINT {HANDLER_SP}")
        };
        g.handler_savepoint = false;
        if let Err(e) = obj.batch_execute(&sql).await {
            // the handler left the transaction failed: undo its writes and report
            let _ = obj
                .batch_execute(&format!(
                    "ROLLBACK TO SAVEPOINT {HANDLER_SP}; RELEASE SAVEPOINT {HANDLER_SP}"
                ))
                .await;
            return Err(e.into());
        }
    }
    let fence = s.fence(outcome, 1);
    let st = obj.prepare_cached(COMPLETE_SQL).await?;
    let none: Option<SystemTime> = None;
    let row = fenced(
        obj,
        fence,
        obj.query_one(&st, &[&queue, &id, &outcome, &delay, &none]),
    )
    .await;
    if row.is_err() && !fence && s.form == Form::RowLock {
        // the claim transaction is aborted: its end rolls it back and says so
        s.dirty.store(true, Ordering::Release);
    }
    Ok(row?.get(0))
}

/// Run `stmt` on `obj`, inside a savepoint when `fence`: released when it
/// succeeds, rolled back to when it fails, so a failed statement leaves the
/// shared transaction usable for the deliveries still open in it.
///
/// `SAVEPOINT`, the statement and `RELEASE` go out together (tokio-postgres
/// pipelines requests polled together, in the order polled), so a fenced
/// statement that succeeds takes one round trip, not three: the outcome mix's
/// row_lock batches (a retry and a retry_after group beside each ack) spent
/// half their time waiting on those two. When the statement fails, the server
/// answers the `RELEASE` with 25P02 (the subtransaction is aborted), and a
/// second round trip rolls back to the savepoint.
async fn fenced<T>(
    obj: &Object,
    fence: bool,
    stmt: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> Result<T> {
    if !fence {
        return Ok(stmt.await?);
    }
    let open_sql = format!("SAVEPOINT {OUTCOME_SP}");
    let release_sql = format!("RELEASE SAVEPOINT {OUTCOME_SP}");
    // join3 polls its futures in order, so the requests are sent in this order
    let (opened, r, released) = futures_util::future::join3(
        obj.batch_execute(&open_sql),
        stmt,
        obj.batch_execute(&release_sql),
    )
    .await;
    opened?;
    match (r, released) {
        (Ok(v), released) => {
            released?;
            Ok(v)
        }
        // the statement never reached the server (nothing to undo) and the
        // savepoint is released
        (Err(e), Ok(())) => Err(e.into()),
        (Err(e), Err(_)) => {
            obj.batch_execute(&format!(
                "ROLLBACK TO SAVEPOINT {OUTCOME_SP}; RELEASE SAVEPOINT {OUTCOME_SP}"
            ))
            .await?;
            Err(e.into())
        }
    }
}

/// Give a delivery back (release(), or an unsettled drop).
pub(crate) async fn release(
    inner: &Arc<Inner>,
    id: &str,
    token: Option<SystemTime>,
    session: Option<Arc<Session>>,
    tx: Option<OwnedMutexGuard<Pinned>>,
) -> Result<()> {
    let q = &inner.queue.name;
    match (session, inner.queue.form) {
        (_, Form::Lease { .. }) | (None, _) => {
            let c = inner.pool()?.get().await?;
            let st = c.prepare_cached(RELEASE_SQL).await?;
            c.query_one(&st, &[q, &id, &token]).await?;
            Ok(())
        }
        (Some(s), form) => {
            let mut g = match tx {
                Some(g) => g,
                None => s.conn.clone().lock_owned().await,
            };
            let r: Result<()> = async {
                let Some(obj) = g.obj.as_ref() else {
                    return Ok(());
                };
                if form == Form::RowLock {
                    // nothing was written for this row but the handler's own writes
                    if g.handler_savepoint {
                        obj.batch_execute(&format!(
                            "ROLLBACK TO SAVEPOINT {HANDLER_SP}; RELEASE SAVEPOINT {HANDLER_SP}"
                        ))
                        .await?;
                        g.handler_savepoint = false;
                    }
                } else {
                    let none: Option<SystemTime> = None;
                    let st = obj.prepare_cached(RELEASE_SQL).await?;
                    obj.query_one(&st, &[q, &id, &none]).await?;
                }
                Ok(())
            }
            .await;
            if r.is_err() {
                s.dirty.store(true, Ordering::Release);
                if form == Form::RowLock {
                    // the transaction is in an unknown state: close it (rolls back)
                    if let Some(obj) = g.obj.take() {
                        Session::discard(obj);
                    }
                }
            }
            drop(g);
            let closed = s.finish_one().await;
            r.and(closed)
        }
    }
}

/// Give a portable delivery back.
async fn release_portable(
    inner: &Arc<Inner>,
    id: &str,
    ptoken: Option<i64>,
    psession: Option<Arc<PSession>>,
    ptx: Option<OwnedMutexGuard<Option<crate::portable::engine::Pinned>>>,
) -> Result<()> {
    let Backend::Portable(e) = &inner.backend else {
        unreachable!("portable only")
    };
    match psession {
        None => e.release(None, None, id, ptoken).await,
        Some(s) => {
            let mut g = match ptx {
                Some(g) => g,
                None => s.pinned.clone().lock_owned().await,
            };
            let r = e.release(g.as_mut(), Some(&s), id, None).await;
            drop(g);
            let closed = e.finish_one(&s).await;
            r.and(closed)
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let inner = self.inner.clone();
        let id = std::mem::take(&mut self.id);
        let token = self.token;
        let session = self.session.take();
        let tx = self.tx.take();
        let (ptoken, psession, ptx) = (self.ptoken, self.psession.take(), self.ptx.take());
        tracing::debug!(queue = %inner.queue.name, id = %id, "delivery dropped unsettled: giving it back");
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move {
                    let r = if matches!(inner.backend, Backend::Portable(_)) {
                        release_portable(&inner, &id, ptoken, psession, ptx).await
                    } else {
                        release(&inner, &id, token, session, tx).await
                    };
                    if let Err(e) = r {
                        tracing::warn!(queue = %inner.queue.name, id = %id, error = %e, "giving back a dropped delivery failed");
                    }
                });
            }
            Err(_) => {
                // no runtime: the session (if any) closes its connection when the
                // last reference goes; a lease expires on its own
                if let Some(s) = &session {
                    s.dirty.store(true, Ordering::Release);
                    if let Some(mut g) = tx {
                        if let Some(obj) = g.obj.take() {
                            Session::discard(obj);
                        }
                    }
                }
            }
        }
    }
}
