//! The connection a row_lock or advisory claim keeps on the extension backend,
//! and the outcomes written on it.

use super::connect::Statements;
use super::sql::{COMPLETE, COMPLETE_MANY, RELEASE};
use super::Ext;
use crate::backend::hold::{self, ClaimSession};
use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use crate::queue::Form;
use deadpool_postgres::Object;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The connection kept for the deliveries of one claim: it holds the row_lock
/// transaction or the advisory keys, so it never goes back to the pool while one
/// of them lives. When the last is settled or dropped, the transaction commits
/// (row_lock) and the connection returns to the pool; if anything leaves it in an
/// unknown state, it is detached from the pool and closed, and the server rolls
/// back and drops the locks.
pub(crate) struct Session {
    conn: Arc<Mutex<ClaimConn>>,
    form: Form,
    open: AtomicUsize,
    dirty: AtomicBool,
    statements: Statements,
}

pub(crate) struct ClaimConn {
    obj: Option<Object>,
    /// the handler's savepoint is open (row_lock transactional mode)
    handler_savepoint: bool,
}

/// The claim transaction lent to the handler (row_lock transactional mode).
pub(crate) type Lent = OwnedMutexGuard<ClaimConn>;

const HANDLER_SP: &str = "settle_handler";
const OUTCOME_SP: &str = "settle_outcome";

impl Session {
    pub(crate) fn new(obj: Object, form: Form, n: usize, statements: Statements) -> Arc<Session> {
        Arc::new(Session {
            conn: Arc::new(Mutex::new(ClaimConn {
                obj: Some(obj),
                handler_savepoint: false,
            })),
            form,
            open: AtomicUsize::new(n),
            dirty: AtomicBool::new(false),
            statements,
        })
    }

    /// Close a connection instead of returning it to the pool.
    pub(crate) fn discard(obj: Object) {
        drop(Object::take(obj));
    }

    /// Whether an outcome for `n` of this claim's deliveries runs in a savepoint
    /// of its own ([`hold::fence`]; row_lock only).
    fn fence(&self, outcome: &Outcome, n: usize) -> bool {
        self.form == Form::RowLock && hold::fence(outcome, n, self.open.load(Ordering::Acquire))
    }

    /// The error of a settle on a claim whose transaction was rolled back.
    fn rolled_back(what: &str) -> Error {
        Error::database(
            Some("25P02"),
            format!(
                "an outcome failed in the claim transaction, so it is rolled back: {what}; \
                 its rows go back to the queue"
            ),
        )
    }

    /// row_lock transactional mode: lend the claim transaction to the handler,
    /// behind a savepoint (`lent` keeps it between calls).
    pub(crate) async fn lend<'a>(
        self: &Arc<Self>,
        lent: &'a mut Option<Lent>,
    ) -> Result<&'a tokio_postgres::Client> {
        if self.form != Form::RowLock {
            return Err(Error::invalid("transaction() is for the row_lock form"));
        }
        if lent.is_none() {
            let mut g = self.conn.clone().lock_owned().await;
            let obj = g
                .obj
                .as_ref()
                .ok_or_else(|| Error::invalid("the claim transaction has ended"))?;
            obj.batch_execute(&format!("SAVEPOINT {HANDLER_SP}"))
                .await?;
            g.handler_savepoint = true;
            *lent = Some(g);
        }
        let g = lent.as_ref().expect("set above");
        Ok(g.obj.as_ref().expect("checked above"))
    }

    /// Run an outcome on the claim's connection: `queue_complete`'s result word.
    async fn write(
        &self,
        g: &mut ClaimConn,
        queue: &str,
        id: &str,
        outcome: &Outcome,
    ) -> Result<String> {
        let obj = g
            .obj
            .as_ref()
            .ok_or_else(|| Error::invalid("the claim's connection is gone"))?;
        if self.form == Form::RowLock && self.dirty.load(Ordering::Acquire) {
            return Err(Session::rolled_back(&format!(
                "nothing was written for row {id}"
            )));
        }
        if g.handler_savepoint {
            // transactional mode: ack keeps the handler's writes, anything else undoes them
            let sql = if *outcome == Outcome::Ack {
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
        let fence = self.fence(outcome, 1);
        let none: Option<SystemTime> = None;
        let (name, delay) = (outcome.sql_name(), outcome.delay_micros());
        // prepared before the fence, so that its query goes out between
        // SAVEPOINT and RELEASE
        let st = self.statements.ready(obj, &COMPLETE).await?;
        let rows = fenced(
            obj,
            fence,
            st.query(obj, &[&queue, &id, &name, &delay, &none]),
        )
        .await;
        if rows.is_err() && !fence && self.form == Form::RowLock {
            // the claim transaction is aborted: its end rolls it back and says so
            self.dirty.store(true, Ordering::Release);
        }
        rows?
            .first()
            .map(|r| r.get(0))
            .ok_or_else(|| Error::database(None, "queue_complete returned no row"))
    }
}

impl ClaimSession for Session {
    type Backend = Ext;
    type Conn = ClaimConn;

    fn conn(&self) -> &Arc<Mutex<ClaimConn>> {
        &self.conn
    }

    fn open(&self) -> &AtomicUsize {
        &self.open
    }

    /// Write one delivery's outcome with `queue_complete` on the claim's
    /// connection.
    async fn write_one(
        &self,
        b: &Ext,
        g: &mut Lent,
        id: &str,
        outcome: &Outcome,
    ) -> Result<Settled> {
        let r = self.write(g, &b.queue.name, id, outcome).await;
        if r.is_err() && self.form == Form::Advisory {
            // clean the connection before it goes back to the pool
            self.dirty.store(true, Ordering::Release);
        }
        b.settled(id, &r?)
    }

    /// Many deliveries of this claim with one `queue_complete_many` on its
    /// connection, instead of a statement (and, for row_lock, a savepoint around
    /// it) per delivery. `None` when it does not apply (the handler holds the
    /// transaction, the claim was rolled back) or the fenced statement wrote
    /// nothing: the caller settles them one at a time, each with its own result.
    async fn write_many(
        &self,
        b: &Ext,
        g: &mut Lent,
        ids: &[String],
        outcome: &Outcome,
    ) -> Option<Vec<Result<Settled>>> {
        let q = b.queue.name.as_str();
        // (a rolled-back row_lock claim: one by one, each told why)
        let broken = self.form == Form::RowLock && self.dirty.load(Ordering::Acquire);
        let obj = g.obj.as_ref().filter(|_| !g.handler_savepoint && !broken)?;
        // row_lock: the siblings still open share the transaction; a failed
        // statement is undone to the savepoint so they keep theirs (see `fence`)
        let fence = self.fence(outcome, ids.len());
        let none: Option<Vec<SystemTime>> = None;
        let (name, delay) = (outcome.sql_name(), outcome.delay_micros());
        let res: Result<Vec<tokio_postgres::Row>> = async {
            let st = self.statements.ready(obj, &COMPLETE_MANY).await?;
            fenced(obj, fence, st.query(obj, &[&q, &ids, &name, &delay, &none])).await
        }
        .await;
        let rows = match res {
            // row_lock: undone to the savepoint, nothing written: settle them one
            // by one, so each gets its own result (a custom outcome's SQL may fail
            // for one row only)
            Err(_) if fence && g.obj.is_some() => return None,
            Err(e) => {
                // advisory: the statement wrote nothing, and its keys were let go
                // with its transaction; row_lock without a savepoint: the claim
                // transaction is aborted, and its end rolls it back. Either way the
                // connection is cleaned before it goes back
                self.dirty.store(true, Ordering::Release);
                let msg = e.to_string();
                let failed = || Err(Error::invalid(format!("batch settle failed: {msg}")));
                return Some(ids.iter().map(|_| failed()).collect());
            }
            Ok(rows) => rows,
        };
        let by_id: std::collections::HashMap<String, String> = rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect();
        Some(
            ids.iter()
                .map(|id| match by_id.get(id).map(String::as_str) {
                    Some("not_held") | None => Err(Error::not_held(q, id)),
                    Some(r) => b.settled(id, r),
                })
                .collect(),
        )
    }

    /// Give a delivery of this claim back (release(), or an unsettled drop).
    async fn give_back_one(&self, b: &Ext, g: &mut Lent, id: &str) -> Result<()> {
        let queue = b.queue.name.as_str();
        let r: Result<()> = async {
            let Some(obj) = g.obj.as_ref() else {
                return Ok(());
            };
            if self.form == Form::RowLock {
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
                self.statements
                    .query_one(obj, &RELEASE, &[&queue, &id, &none])
                    .await?;
            }
            Ok(())
        }
        .await;
        if r.is_err() {
            self.dirty.store(true, Ordering::Release);
            if self.form == Form::RowLock {
                // the transaction is in an unknown state: close it (rolls back)
                if let Some(obj) = g.obj.take() {
                    Session::discard(obj);
                }
            }
        }
        r
    }

    /// The claim's last delivery is done: commit (row_lock) or clean the
    /// connection, and let it go back to the pool.
    async fn end(&self, _: &Ext) -> Result<()> {
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

    /// A delivery dropped where no runtime can give it back: the connection is
    /// closed when the session's last reference goes.
    fn abandon(&self, lent: Option<Lent>) {
        self.dirty.store(true, Ordering::Release);
        if let Some(mut g) = lent {
            if let Some(obj) = g.obj.take() {
                Session::discard(obj);
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

/// Run `stmt` on `obj`, inside a savepoint when `fence`: released when it
/// succeeds, rolled back to when it fails, so a failed statement leaves the
/// shared transaction usable for the deliveries still open in it.
///
/// `SAVEPOINT`, the statement and `RELEASE` go out together (tokio-postgres
/// pipelines requests polled together, in the order polled), so a fenced
/// statement that succeeds takes one round trip, not three. When the statement
/// fails, the server answers the `RELEASE` with 25P02 (the subtransaction is
/// aborted), and a second round trip rolls back to the savepoint.
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
