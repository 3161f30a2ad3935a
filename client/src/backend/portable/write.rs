//! Outcomes written on the portable path (docs/semantics.md, "Outcomes"): lease settles in their own
//! short transaction or one statement, and the shared writer the pinned
//! sessions use; the lease heartbeat and the counts.

use super::dialect::IdKind;
use super::engine::{again_if_deadlock, exec_with_id, text, Engine};
use super::sql::{Ack, Reports, Verb};
use super::texts::Text;
use super::{token_time, Session};
use crate::backend::hold::HoldBackend;
use crate::error::{Error, Result};
use crate::outcome::{micros, Outcome, Settled};
use crate::queue::Form;
use sqlx::any::Any;
use sqlx::{Connection, Row, Transaction};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

/// Which lease tokens an ack statement checks (see `Engine::ack_returning`).
#[derive(Clone, Copy)]
enum Tokens {
    /// none: rows held by a transaction or key
    None,
    /// one token for every row
    Shared(i64),
    /// each row its own, bound after its id
    PerItem,
}

impl Engine {
    /// The error for a delivery whose row this claim no longer holds.
    pub(super) fn not_held(&self, id: &str) -> Error {
        if matches!(self.s.form, Form::Lease { .. }) {
            Error::lease_lost(&self.s.queue, id)
        } else {
            Error::not_held(&self.s.queue, id)
        }
    }

    /// Write `outcome` for a held row, on `conn` inside an open transaction.
    pub(super) async fn write(
        &self,
        conn: &mut sqlx::AnyConnection,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        let item = [(id.to_owned(), token)];
        let Outcome::Custom(name) = outcome else {
            let r = self.write_many(conn, &item, outcome).await?;
            return r[0].ok_or_else(|| self.not_held(id));
        };
        let s = &self.s;
        let Some(sql) = s.custom.get(name) else {
            return Err(Error::invalid(format!(
                "queue \"{}\" has no custom outcome \"{name}\"",
                s.queue
            )));
        };
        if self.lock_held(conn, &item).await?.is_empty() {
            return Err(self.not_held(id));
        }
        exec_with_id(conn, sql, id).await?;
        Ok(Settled::Custom)
    }

    /// Lock the rows of `items` this queue still holds for them (lease: with the
    /// delivery's token) and read their stored attempts: id → attempt.
    async fn lock_held(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
    ) -> Result<HashMap<String, i64>> {
        let lease = matches!(self.s.form, Form::Lease { .. });
        let sql = self.s.lock_held_sql(items.len());
        let mut q = sqlx::query(&sql);
        for (id, _) in items {
            q = q.bind(id.as_str());
        }
        let now: HashMap<String, (i64, Option<i64>)> = q
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| Ok((text(r, 0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect::<Result<_>>()?;
        Ok(items
            .iter()
            .filter_map(|(id, tok)| {
                let (attempt, t) = now.get(id)?;
                (!lease || (tok.is_some() && t == tok)).then(|| (id.clone(), *attempt))
            })
            .collect())
    }

    /// Write one ack, drop, retry or retry_after for many rows, on `conn` inside
    /// an open transaction: lock the rows still held for them, move a retried row
    /// whose delivery reached max_attempts to the dead letter, then one statement
    /// for the rest. `None` for an item not held (nothing written for it).
    pub(super) async fn write_many(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
        outcome: &Outcome,
    ) -> Result<Vec<Option<Settled>>> {
        let s = &self.s;
        let d = s.d;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // row_lock/advisory ack or drop: one statement that writes the rows still
        // there and says which it wrote (their ids, or one row's count). The
        // claim's transaction (row_lock) or key (advisory) holds them already
        // and an ack counts nothing, so there is nothing to lock or read first.
        // (row_lock on InnoDB joins a list of ids to the table instead, see
        // `joined` below; one id is a lookup by key.)
        let held_already = match s.form {
            Form::Advisory => true,
            Form::RowLock => items.len() == 1 || !d.locking_scans_pass_listed_ids(),
            Form::Lease { .. } => false,
        };
        if matches!(outcome, Outcome::Ack | Outcome::Drop) && held_already {
            if let Some(v) = self.ack_held(conn, items).await? {
                return Ok(v);
            }
        }
        let retry = match outcome {
            Outcome::Ack | Outcome::Drop => false,
            Outcome::Retry | Outcome::RetryAfter(_) => true,
            Outcome::Custom(_) => {
                return Err(Error::invalid(
                    "a custom outcome is settled one row at a time",
                ))
            }
        };
        let held = self.lock_held(conn, items).await?;
        let dead = if retry {
            self.move_dead(conn, items, &held).await?
        } else {
            HashSet::new()
        };
        let mut go: Vec<&str> = Vec::with_capacity(held.len());
        for (id, _) in items {
            if held.contains_key(id) && !dead.contains(id.as_str()) && !go.contains(&id.as_str()) {
                go.push(id);
            }
        }
        // row_lock with integer ids where a locking scan of a list passes the
        // listed rows: the ids joined to the table by its key, which reads only
        // those rows (a wait on another claim's row could deadlock, and a
        // deadlock would end this row_lock claim whole).
        let joined = d.locking_scans_pass_listed_ids()
            && s.form == Form::RowLock
            && s.id_kind == IdKind::Integer
            && go.len() > 1;
        let delay = match outcome {
            Outcome::RetryAfter(dur) if s.retry_after.is_some() => Some(micros(*dur)),
            Outcome::RetryAfter(_) => {
                tracing::warn!(queue = %s.queue, "queue has no retry_after column: retry_after is settled as retry");
                None
            }
            _ => None,
        };
        let (verb, settled) = s.outcome_verb(retry, delay, joined);
        if let Some(verb) = verb.filter(|_| !go.is_empty()) {
            // (a delay of zero is written as NULL, not bound)
            let bound = delay.filter(|&us| us != 0);
            self.write_listed(conn, &verb, &go, bound, joined).await?;
        }
        Ok(items
            .iter()
            .map(|(id, _)| {
                if dead.contains(id.as_str()) {
                    Some(Settled::DeadLettered)
                } else {
                    held.contains_key(id).then_some(settled)
                }
            })
            .collect())
    }

    /// A retry of a row whose delivery reached max_attempts moves it to the
    /// dead letter instead: those moved, among the `held` items.
    async fn move_dead<'a>(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &'a [(String, Option<i64>)],
        held: &HashMap<String, i64>,
    ) -> Result<HashSet<&'a str>> {
        let s = &self.s;
        let mut dead = HashSet::new();
        let (Some(max), Some(_)) = (s.max, &s.dead) else {
            return Ok(dead);
        };
        // row_lock counts this delivery here; the others counted it at the claim
        let plus = i64::from(s.form == Form::RowLock);
        for (id, _) in items {
            if held.get(id).is_some_and(|a| a + plus >= max) && dead.insert(id.as_str()) {
                for sql in s.dead_sql(s.form == Form::RowLock) {
                    exec_with_id(conn, &sql, id).await?;
                }
                self.warn_dead(id);
            }
        }
        Ok(dead)
    }

    /// Run an outcome's write on the rows `go`: one statement over the list
    /// of bound ids, or with `joined` over integer ids written in and joined
    /// to the table by its key.
    async fn write_listed(
        &self,
        conn: &mut sqlx::AnyConnection,
        verb: &Verb,
        go: &[&str],
        delay: Option<i64>,
        joined: bool,
    ) -> Result<()> {
        if joined {
            let ids = go
                .iter()
                .map(|id| {
                    id.parse::<i64>()
                        .map_err(|_| Error::invalid(format!("row id {id:?} is not an integer")))
                })
                .collect::<Result<Vec<i64>>>()?;
            // no parameters: sent as text, as its list differs from batch to batch
            let text = self.s.verb_joined_int_ids(verb, &ids);
            sqlx::Executor::execute(&mut *conn, text.as_str()).await?;
            return Ok(());
        }
        let sql = self.s.verb_by_ids(verb, delay.is_some(), go.len());
        let mut q = sqlx::query(&sql);
        if let Some(us) = delay {
            q = q.bind(us);
        }
        for id in go {
            q = q.bind(*id);
        }
        q.execute(&mut *conn).await?;
        Ok(())
    }

    /// Ack (or drop) `items` in one statement with `RETURNING` the ids written,
    /// on `exec`; `None` for an item it did not write. Which rows it may write:
    /// - `Tokens::None`: the held rows by id;
    /// - `Tokens::Shared(t)`: those still holding the one lease token `t`
    ///   (deliveries of one claim);
    /// - `Tokens::PerItem`: distinct ids each still holding its own token —
    ///   deliveries of several claims settled together (see `combine`).
    async fn ack_returning(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
        tokens: Tokens,
    ) -> Result<Vec<Option<Settled>>> {
        let s = &self.s;
        let n = items.len();
        let of = match tokens {
            Tokens::None => Ack::Held,
            Tokens::Shared(_) => Ack::SharedToken,
            Tokens::PerItem => Ack::TokenEach,
        };
        let sql = self.texts.get(Text::Ack(of), n, || s.ack_reporting(of, n));
        let reports = s.ack_reports(n);
        let settled = s.ack_settles();
        let mut q = sqlx::query(&sql);
        for (id, token) in items {
            q = q.bind(id.as_str());
            if let Tokens::PerItem = tokens {
                q = q.bind(*token);
            }
        }
        if let Tokens::Shared(t) = tokens {
            q = q.bind(t);
        }
        let listed: HashSet<String> = q
            .fetch_all(conn)
            .await?
            .iter()
            .map(|r| text(r, 0))
            .collect::<Result<_>>()?;
        let written = |id: &String| listed.contains(id) == (reports == Reports::Written);
        Ok(items
            .iter()
            .map(|(id, _)| written(id).then_some(settled))
            .collect())
    }

    /// [`Self::ack_returning`] as one autocommitted statement (run again if
    /// InnoDB picks it as a deadlock victim: it was rolled back whole).
    async fn ack_alone(
        &self,
        items: &[(String, Option<i64>)],
        tokens: Tokens,
    ) -> Result<Vec<Option<Settled>>> {
        again_if_deadlock(|| async {
            let mut conn = self.conns.get().await?;
            let r = self.ack_returning(&mut conn, items, tokens).await?;
            conn.done();
            Ok(r)
        })
        .await
    }

    /// Whether an ack or drop of `n` rows whose keys this connection holds
    /// (advisory) is one statement, autocommitted without a transaction around it.
    pub(super) fn acks_alone(&self, outcome: &Outcome, n: usize) -> bool {
        matches!(outcome, Outcome::Ack | Outcome::Drop) && (self.s.acks_return() || n == 1)
    }

    /// The ack or drop of [`Self::acks_alone`], autocommitted on `conn`: the
    /// ids written, returned by the write; on MariaDB/MySQL one row's count says
    /// whether it wrote. `None` for an item it did not write.
    pub(super) async fn ack_held_alone(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
    ) -> Result<Vec<Option<Settled>>> {
        let v = self.ack_held(conn, items).await?;
        v.ok_or_else(|| Error::invalid("an ack of many rows that the server cannot report"))
    }

    /// Ack (or drop) rows already held (by the claim's transaction or keys) in
    /// one statement that says which it wrote: one row by the count the server
    /// reports where `UPDATE` returns no rows, else by the ids it returns.
    /// `None` where neither can tell (many rows, and no `RETURNING` for the ack).
    async fn ack_held(
        &self,
        conn: &mut sqlx::AnyConnection,
        items: &[(String, Option<i64>)],
    ) -> Result<Option<Vec<Option<Settled>>>> {
        match items {
            [(id, _)] if !self.s.d.has_returning() => {
                Ok(Some(vec![self.ack_counted(conn, id).await?]))
            }
            _ if self.s.acks_return() => {
                let v = self.ack_returning(conn, items, Tokens::None).await?;
                Ok(Some(v))
            }
            _ => Ok(None),
        }
    }

    /// Ack (or drop) the one held row `id`, told by the count the server
    /// reports whether it wrote: `None` when it did not.
    async fn ack_counted(
        &self,
        conn: &mut sqlx::AnyConnection,
        id: &str,
    ) -> Result<Option<Settled>> {
        let (sql, settled) = self.s.ack_sql(1, false);
        let n = sqlx::query(&sql)
            .bind(id)
            .execute(conn)
            .await?
            .rows_affected();
        Ok((n > 0).then_some(settled))
    }

    /// Settle many lease deliveries with one ack, drop, retry or retry_after in
    /// one short transaction. `None` for a delivery whose lease was lost.
    pub(super) async fn settle_many_lease(
        &self,
        items: &[(String, Option<i64>)],
        outcome: &Outcome,
    ) -> Result<Vec<Option<Settled>>> {
        let first = items.first().and_then(|(_, t)| *t);
        if let (Outcome::Ack | Outcome::Drop, Some(token)) = (outcome, first) {
            if self.s.acks_return() {
                if items.iter().all(|(_, t)| *t == first) {
                    // claimed together, one deadline: one autocommitted statement, as for
                    // one delivery, reporting the rows it wrote
                    return self.ack_alone(items, Tokens::Shared(token)).await;
                }
                let ids: HashSet<&str> = items.iter().map(|(id, _)| id.as_str()).collect();
                if ids.len() == items.len() && items.iter().all(|(_, t)| t.is_some()) {
                    return self.ack_alone(items, Tokens::PerItem).await;
                }
            }
        }
        again_if_deadlock(|| async {
            let mut conn = self.conns.get().await?;
            let mut tx = conn.begin_with(self.s.d.begin()).await?;
            let r = self.write_many(&mut tx, items, outcome).await?;
            tx.commit().await?;
            conn.done();
            Ok(r)
        })
        .await
    }

    /// Settle a lease delivery (own short transaction; a deadlock victim is
    /// run again by the hold protocol, as every transient failure).
    pub(super) async fn settle_lease(
        &self,
        id: &str,
        token: i64,
        outcome: &Outcome,
    ) -> Result<Settled> {
        if let Outcome::Ack | Outcome::Drop = outcome {
            return self.ack_lease(id, token).await;
        }
        let mut conn = self.conns.get().await?;
        let tx = conn.begin_with(self.s.d.begin()).await?;
        let r = self.write_in(tx, id, Some(token), outcome).await?;
        conn.done();
        Ok(r)
    }

    /// Ack or drop one lease delivery: one autocommitted statement that writes
    /// only while the row still holds the delivery's token.
    async fn ack_lease(&self, id: &str, token: i64) -> Result<Settled> {
        let (sql, settled) = self.s.ack_sql(1, true);
        let mut conn = self.conns.get().await?;
        let n = sqlx::query(&sql)
            .bind(id)
            .bind(token)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        conn.done();
        if n == 0 {
            return Err(self.not_held(id));
        }
        Ok(settled)
    }

    /// Write `outcome` in `tx` (a transaction or a savepoint), then commit it,
    /// or roll it back when the write failed.
    pub(super) async fn write_in(
        &self,
        mut tx: Transaction<'_, Any>,
        id: &str,
        token: Option<i64>,
        outcome: &Outcome,
    ) -> Result<Settled> {
        match self.write(&mut tx, id, token, outcome).await {
            Ok(v) => {
                tx.commit().await?;
                Ok(v)
            }
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }
}

/// The portable path's side of the hold protocol: its lease statements.
impl HoldBackend for Engine {
    type Session = Session;

    fn queue_name(&self) -> &str {
        &self.queue.name
    }

    fn token_time(token: i64) -> SystemTime {
        token_time(token)
    }

    /// A custom outcome's SQL runs once per row.
    fn settles_together(&self, outcome: &Outcome) -> bool {
        !matches!(outcome, Outcome::Custom(_))
    }

    fn made_ready(&self, ids: &[&str]) {
        self.mark.made_ready(ids.iter().copied());
    }

    fn settles_free_rows(&self) -> bool {
        self.s.ordering_key.is_some()
    }

    /// Lease heartbeat: a new token, or LeaseLost.
    async fn extend_lease(&self, id: &str, token: i64, ttl: Duration) -> Result<i64> {
        let s = &self.s;
        let mut conn = self.conns.get().await?;
        let mut tx = conn.begin_with(s.d.begin()).await?;
        let n = sqlx::query(&s.extend_sql())
            .bind(micros(ttl))
            .bind(id)
            .bind(token)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            tx.rollback().await?;
            conn.done();
            return Err(Error::lease_lost(&s.queue, id));
        }
        let t: i64 = sqlx::query(&s.token_sql())
            .bind(id)
            .fetch_one(&mut *tx)
            .await?
            .get(0);
        tx.commit().await?;
        conn.done();
        Ok(t)
    }
}
