//! The connection a row_lock or advisory claim keeps on the portable path: the
//! claim transaction (row_lock) or the connection holding the keys (advisory),
//! shared by the claim's deliveries, and the outcomes written on it.

use super::conns::{AnyConn, AnyTx};
use super::engine::Engine;
use crate::backend::hold::{self, ClaimSession};
use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use sqlx::any::Any;
use sqlx::{Connection, Transaction};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The connection of a row_lock / advisory claim: the claim transaction, or
/// the connection holding the advisory keys.
pub(crate) enum ClaimConn {
    Tx(AnyTx),
    Conn(AnyConn),
}

/// Deliveries of one row_lock / advisory claim share this.
pub(crate) struct Session {
    conn: Arc<Mutex<Option<ClaimConn>>>,
    /// row_lock transactional mode: the handler's savepoint is open
    handler_sp: AtomicBool,
    /// row_lock: the database rolled the claim transaction back under us
    /// (MySQL/MariaDB end the whole transaction of a deadlock victim); nothing
    /// more may run on it — later statements would run outside any transaction
    broken: StdMutex<Option<String>>,
    open: AtomicUsize,
    /// ids this claim holds and has not settled (row_lock: claimed by the
    /// transaction; advisory: their keys held on the connection)
    held: StdMutex<HashSet<String>>,
    /// row_lock: while the claim transaction is open, the rows its outcomes
    /// made ready again, told to the client's mark once it commits (the
    /// client's other workers share the mark, and a claim of theirs that
    /// passes these rows while they are still locked moves the mark past
    /// them); `None` within once it has ended. Advisory has none: its
    /// outcomes commit as they are written.
    ready_at_end: Option<StdMutex<Option<Vec<String>>>>,
}

/// The claim transaction lent to the handler (row_lock transactional mode).
pub(crate) type Lent = OwnedMutexGuard<Option<ClaimConn>>;

impl Session {
    /// The claim transaction is lost (see `broken`), because of `e`.
    fn break_with(&self, e: &Error) {
        tracing::warn!(error = %e, "settle: the claim transaction is rolled back; its rows go back to the queue");
        self.broken
            .lock()
            .unwrap()
            .get_or_insert_with(|| e.to_string());
    }

    fn broken(&self) -> Option<String> {
        self.broken.lock().unwrap().clone()
    }

    /// Whether a row_lock outcome for `n` of this claim's deliveries runs in a
    /// savepoint of its own ([`hold::fence`]).
    fn fence(&self, outcome: &Outcome, n: usize) -> bool {
        hold::fence(outcome, n, self.open.load(Ordering::Acquire))
    }

    /// Whether some delivery of the session is still held.
    fn holds_any(&self) -> bool {
        !self.held.lock().unwrap().is_empty()
    }

    pub(super) fn new(p: ClaimConn, held: HashSet<String>) -> Session {
        let ready_at_end = matches!(p, ClaimConn::Tx(_)).then(|| StdMutex::new(Some(Vec::new())));
        Session {
            open: AtomicUsize::new(held.len()),
            conn: Arc::new(Mutex::new(Some(p))),
            handler_sp: AtomicBool::new(false),
            broken: StdMutex::new(None),
            held: StdMutex::new(held),
            ready_at_end,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // not finished cleanly: a dropped transaction is rolled back before its
        // connection is pooled again; a connection holding keys is closed, and
        // the server drops them
        if let Some(p) = self.conn.try_lock().ok().and_then(|mut g| g.take()) {
            match p {
                ClaimConn::Tx(tx) => drop(tx),
                ClaimConn::Conn(c) => c.close(),
            }
        }
    }
}

impl Engine {
    /// Settle a delivery of a claim's session (row_lock: in the claim transaction,
    /// fenced by a savepoint; advisory: its own transaction, then unlock).
    async fn settle_held(
        &self,
        p: &mut ClaimConn,
        session: &Session,
        id: &str,
        outcome: &Outcome,
    ) -> Result<Settled> {
        if let Some(why) = session.broken() {
            session.held.lock().unwrap().remove(id);
            return Err(self.rolled_back(Some(id), &why));
        }
        if !session.held.lock().unwrap().remove(id) {
            return Err(Error::not_held(&self.s.queue, id));
        }
        match p {
            ClaimConn::Tx(tx) => {
                if session.handler_sp.swap(false, Ordering::AcqRel) {
                    // transactional mode: ack keeps the handler's writes, anything else undoes them
                    let ack = matches!(outcome, Outcome::Ack);
                    end_handler_savepoint(tx, ack).await?;
                }
                if !session.fence(outcome, 1) {
                    return self
                        .write(tx, id, None, outcome)
                        .await
                        .inspect_err(|e| session.break_with(e));
                }
                // a savepoint fences this outcome from its siblings in the claim transaction
                let mut sp = tx.savepoint().await?;
                match self.write(&mut sp, id, None, outcome).await {
                    Ok(v) => {
                        sp.commit().await?;
                        Ok(v)
                    }
                    Err(e) => {
                        self.undo(sp, session, &e).await;
                        Err(e)
                    }
                }
            }
            ClaimConn::Conn(conn) => {
                let r = if self.acks_alone(outcome, 1) {
                    let item = [(id.to_owned(), None)];
                    let r = self.ack_held_alone(conn, &item).await;
                    r.and_then(|v| v[0].ok_or_else(|| self.not_held(id)))
                } else {
                    match conn.begin().await {
                        Ok(tx) => self.write_in(tx, id, None, outcome).await,
                        Err(e) => Err(e.into()),
                    }
                };
                // the outcome committed (or failed and rolled back): now the key
                // goes (if that fails, the session's end tries again, or closes
                // the connection; the outcome stands)
                if self.let_go(conn, &[id], session.holds_any()).await.is_err() {
                    session.held.lock().unwrap().insert(id.to_owned());
                }
                r
            }
        }
    }

    /// Settle many deliveries of one claim's session with one ack, drop, retry or
    /// retry_after: row_lock in the claim transaction, fenced by one savepoint;
    /// advisory in one transaction of its own, then every key let go in one
    /// statement. `Err` when the batch wrote nothing (undone to its savepoint,
    /// or its transaction rolled back): the ids are held again, so the caller
    /// can settle them one at a time and each gets its own result.
    async fn settle_held_many(
        &self,
        p: &mut ClaimConn,
        session: &Session,
        ids: &[String],
        outcome: &Outcome,
    ) -> Result<Vec<Result<Settled>>> {
        if let Some(why) = session.broken() {
            return Err(self.rolled_back(Some(&ids.join(", ")), &why));
        }
        let taken: HashSet<String> = {
            let mut held = session.held.lock().unwrap();
            ids.iter().filter(|id| held.remove(*id)).cloned().collect()
        };
        let items: Vec<(String, Option<i64>)> = ids
            .iter()
            .filter(|id| taken.contains(*id))
            .map(|id| (id.clone(), None))
            .collect();
        let give_back = |e: Error| {
            session.held.lock().unwrap().extend(taken.clone());
            e
        };
        let written = match p {
            ClaimConn::Tx(tx) => {
                if session.handler_sp.swap(false, Ordering::AcqRel) {
                    // transactional mode: ack keeps the handler's writes, anything else undoes them
                    let ack = matches!(outcome, Outcome::Ack);
                    end_handler_savepoint(tx, ack).await.map_err(give_back)?;
                }
                if !session.fence(outcome, items.len()) {
                    // a failure aborts the claim transaction (see `Session::fence`)
                    self.write_many(tx, &items, outcome)
                        .await
                        .inspect_err(|e| session.break_with(e))?
                } else {
                    let mut sp = tx.savepoint().await.map_err(give_back)?;
                    match self.write_many(&mut sp, &items, outcome).await {
                        Ok(v) => {
                            sp.commit().await.map_err(|e| give_back(e.into()))?;
                            v
                        }
                        Err(e) => {
                            self.undo(sp, session, &e).await;
                            return Err(give_back(e));
                        }
                    }
                }
            }
            ClaimConn::Conn(conn) => {
                let v = if self.acks_alone(outcome, items.len()) {
                    self.ack_held_alone(conn, &items).await.map_err(give_back)?
                } else {
                    let mut tx = conn.begin().await.map_err(|e| give_back(e.into()))?;
                    match self.write_many(&mut tx, &items, outcome).await {
                        Ok(v) => {
                            tx.commit().await.map_err(|e| give_back(e.into()))?;
                            v
                        }
                        Err(e) => {
                            // (a failed rollback means a broken connection: the
                            // session's end then closes it, and the keys go with it)
                            let _ = tx.rollback().await;
                            return Err(give_back(e));
                        }
                    }
                };
                // the outcomes committed: now the keys go (if that fails, the
                // session's end tries again, or closes the connection)
                let done: Vec<&str> = items.iter().map(|(id, _)| id.as_str()).collect();
                if self.let_go(conn, &done, session.holds_any()).await.is_err() {
                    session.held.lock().unwrap().extend(taken.clone());
                }
                v
            }
        };
        let mut written = items.iter().map(|(id, _)| id).zip(written);
        let mut next = written.next();
        Ok(ids
            .iter()
            .map(|id| match &next {
                Some((wid, r)) if *wid == id => {
                    let r = *r;
                    next = written.next();
                    r.ok_or_else(|| self.not_held(id))
                }
                _ => Err(self.not_held(id)),
            })
            .collect())
    }

    /// Give a delivery of a claim's session back without an outcome.
    async fn release_held(
        &self,
        p: Option<&mut ClaimConn>,
        session: &Session,
        id: &str,
    ) -> Result<()> {
        session.held.lock().unwrap().remove(id);
        match p {
            Some(ClaimConn::Conn(conn)) => self.let_go(conn, &[id], session.holds_any()).await,
            Some(ClaimConn::Tx(tx)) => {
                if session.handler_sp.swap(false, Ordering::AcqRel) {
                    end_handler_savepoint(tx, false).await?;
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Undo a failed outcome to its savepoint in the claim transaction. When
    /// that is impossible, or the failure was a deadlock of a database whose
    /// victim loses its whole transaction, the claim is over: every row it held
    /// goes back to the queue, and the session refuses further writes.
    async fn undo(&self, sp: Transaction<'_, Any>, session: &Session, e: &Error) {
        let whole = self.s.d.deadlock_ends_transaction() && e.code() == Some("40001");
        if sp.rollback().await.is_err() || whole {
            session.break_with(e);
        }
    }

    /// The error of a settle on a claim whose transaction was rolled back
    /// (`None`: the claim's end, where its earlier outcomes were lost with it).
    fn rolled_back(&self, id: Option<&str>, why: &str) -> Error {
        let what = match id {
            Some(id) => format!("nothing was written for row {id}"),
            None => "the outcomes settled in it were not kept".into(),
        };
        Error::database(
            None,
            format!(
                "the claim transaction of queue \"{}\" was rolled back ({why}): {what}; its rows go back to the queue",
                self.s.queue
            ),
        )
    }

    /// The claim transaction ended: committed, the rows it made ready again
    /// are ready now; rolled back, all of its rows are, and the next claim
    /// scans from the lowest id.
    fn transaction_ended(&self, session: &Session, committed: bool) {
        let Some(ready) = session
            .ready_at_end
            .as_ref()
            .and_then(|r| r.lock().unwrap().take())
        else {
            return;
        };
        if !committed {
            self.mark.rescan();
        } else if !ready.is_empty() {
            self.mark.made_ready(ready.iter().map(String::as_str));
        }
    }

    /// The claim's last delivery is done: row_lock commits, advisory returns
    /// its clean connection to the pool.
    async fn end_claim(&self, session: &Session) -> Result<()> {
        let p = session.conn.lock().await.take();
        match p {
            Some(ClaimConn::Tx(tx)) if session.broken().is_some() => {
                // roll back now, not when the pool takes the connection back, so
                // the rows are free when the error returns (if it fails, the pool
                // deals with the connection, as it did with a dropped transaction)
                let _ = tx.rollback().await;
                self.transaction_ended(session, false);
                Err(self.rolled_back(None, &session.broken().unwrap_or_default()))
            }
            Some(ClaimConn::Tx(tx)) => {
                let r = tx.commit().await;
                self.transaction_ended(session, r.is_ok());
                Ok(r?)
            }
            Some(ClaimConn::Conn(mut conn)) => {
                // keys of deliveries that were never settled nor released
                let left: Vec<String> = session.held.lock().unwrap().drain().collect();
                let left: Vec<&str> = left.iter().map(String::as_str).collect();
                match self.let_go(&mut conn, &left, false).await {
                    Ok(()) => conn.done(),
                    Err(_) => conn.close(),
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

const HANDLER_SP: &str = "settle_handler";

async fn end_handler_savepoint(conn: &mut sqlx::AnyConnection, keep: bool) -> Result<()> {
    if !keep {
        sqlx::Executor::execute(
            &mut *conn,
            format!("ROLLBACK TO SAVEPOINT {HANDLER_SP}").as_str(),
        )
        .await?;
    }
    sqlx::Executor::execute(
        &mut *conn,
        format!("RELEASE SAVEPOINT {HANDLER_SP}").as_str(),
    )
    .await?;
    Ok(())
}

impl Session {
    /// row_lock transactional mode: lend the claim transaction to the handler,
    /// behind a savepoint (`lent` keeps it between calls).
    pub(crate) async fn lend<'a>(
        self: &Arc<Self>,
        lent: &'a mut Option<Lent>,
    ) -> Result<&'a mut sqlx::AnyConnection> {
        let wrong =
            || Error::invalid("any_transaction() is for the row_lock form on the portable path");
        if lent.is_none() {
            let mut g = self.conn.clone().lock_owned().await;
            match g.as_mut() {
                Some(ClaimConn::Tx(tx)) => {
                    // the handler may nest with sqlx's own begin()
                    tx.driver_aware().await?;
                    let conn: &mut sqlx::AnyConnection = tx;
                    sqlx::Executor::execute(&mut *conn, format!("SAVEPOINT {HANDLER_SP}").as_str())
                        .await?;
                    self.handler_sp.store(true, Ordering::Release);
                }
                _ => return Err(wrong()),
            }
            *lent = Some(g);
        }
        match lent.as_mut().and_then(|g| g.as_mut()) {
            Some(ClaimConn::Tx(tx)) => Ok(&mut **tx),
            _ => Err(Error::invalid("the claim transaction has ended")),
        }
    }
}

impl ClaimSession for Session {
    type Backend = Engine;
    type Conn = Option<ClaimConn>;

    fn conn(&self) -> &Arc<Mutex<Option<ClaimConn>>> {
        &self.conn
    }

    fn open(&self) -> &AtomicUsize {
        &self.open
    }

    async fn write_one(
        &self,
        e: &Engine,
        g: &mut Lent,
        id: &str,
        outcome: &Outcome,
    ) -> Result<Settled> {
        match g.as_mut() {
            Some(p) => e.settle_held(p, self, id, outcome).await,
            None => Err(Error::invalid("the claim's connection is gone")),
        }
    }

    /// One savepoint (row_lock) or transaction (advisory), the advisory keys
    /// let go in one statement.
    async fn write_many(
        &self,
        e: &Engine,
        g: &mut Lent,
        ids: &[String],
        outcome: &Outcome,
    ) -> Option<Vec<Result<Settled>>> {
        e.settle_held_many(g.as_mut()?, self, ids, outcome)
            .await
            .ok()
    }

    async fn give_back_one(&self, e: &Engine, g: &mut Lent, id: &str) -> Result<()> {
        e.release_held(g.as_mut(), self, id).await
    }

    async fn end(&self, e: &Engine) -> Result<()> {
        e.end_claim(self).await
    }

    /// (the session's drop closes the connection)
    fn abandon(&self, lent: Option<Lent>) {
        drop(lent);
    }

    /// row_lock: kept until the claim transaction ends.
    fn ready_at_end(&self, ids: &[&str]) -> bool {
        let Some(at_end) = &self.ready_at_end else {
            return false;
        };
        match &mut *at_end.lock().unwrap() {
            Some(ready) => {
                ready.extend(ids.iter().map(|id| (*id).to_owned()));
                true
            }
            None => false,
        }
    }
}
