//! Claims on the portable path, in each form (docs/semantics.md, "Claim forms"), with crash-looping
//! rows moved to the dead letter on the way.

use super::conns::AnyTx;
use super::dialect::{IdKind, PayloadText};
use super::engine::{again_if_deadlock, exec_with_id, opt_text, text, Engine};
use super::keys::{self, Reading};
use super::session::{ClaimConn, Session};
use super::sql::{ClaimPlan, FirstStatement, Phase, Scan, Shape, KEYS_WALKED};
use super::texts::Text;
use crate::error::{Error, Result};
use crate::outcome::micros;
use crate::payload::Payload;
use crate::queue::Form;
use sqlx::{Connection, Row};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

/// A claimed row as the portable path reads it.
pub(super) struct ClaimedRow {
    pub(super) id: String,
    pub(super) attempt: u32,
    /// the lease token, epoch microseconds (lease form)
    pub(super) token: Option<i64>,
    pub(super) payload: Payload,
}

impl Engine {
    /// Claim up to `n` rows. row_lock and advisory return the claim's session.
    ///
    /// A claim the database picks as a deadlock victim (InnoDB, SQLSTATE 40001)
    /// has had its transaction rolled back whole — it wrote and holds nothing —
    /// so it is run again, a few times, before the error reaches the caller.
    pub(super) async fn claim_rows(&self, n: usize) -> Result<(Vec<ClaimedRow>, Option<Session>)> {
        again_if_deadlock(|| async {
            let start = self.mark.start();
            let r = self.claim_once(n, start.from.as_deref()).await;
            let last = r.as_ref().ok().and_then(|(rows, _)| rows.last());
            self.mark.claimed(start, last.map(|c| c.id.as_str()));
            r
        })
        .await
    }

    /// One claim of up to `n` rows, scanning from the id `from` (the mark) or
    /// from the lowest; its rows in claim order (id, or priority and id).
    async fn claim_once(
        &self,
        n: usize,
        from: Option<&str>,
    ) -> Result<(Vec<ClaimedRow>, Option<Session>)> {
        let s = &self.s;
        let d = s.d;
        let how = self.reading(n, from).await?;
        match s.plan {
            ClaimPlan::RowLock => {
                let mut tx = AnyTx::begin(self.conns.get().await?, d.begin()).await?;
                let rows = self
                    .scan(&mut tx, n, &how, Shape::claim_rows_sql, None)
                    .await?;
                if rows.is_empty() {
                    tx.commit().await?;
                    return Ok((Vec::new(), None));
                }
                // row_lock counts the attempt in the settling statement: report stored + 1
                let out: Vec<ClaimedRow> = rows
                    .iter()
                    .map(|r| claimed(r, 1, s.payload_arrives_as()))
                    .collect::<Result<_>>()?;
                let held = out.iter().map(|c| c.id.clone()).collect();
                Ok((out, Some(Session::new(ClaimConn::Tx(tx), held))))
            }
            ClaimPlan::LeaseStatement => Ok((self.claim_lease_cte(n, &how).await?, None)),
            ClaimPlan::LeaseReturning => Ok((self.claim_lease_returning(n, &how).await?, None)),
            ClaimPlan::LeaseSteps => {
                let mut conn = self.conns.get().await?;
                let mut tx = conn.begin_with(d.begin()).await?;
                let cands: Vec<(String, i64)> = self
                    .scan(&mut tx, n, &how, Shape::lease_candidates_sql, None)
                    .await?
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                let live = self.drop_poison(&mut tx, cands).await?;
                let out = self.take(&mut tx, &live).await?;
                tx.commit().await?;
                conn.done();
                Ok((out, None))
            }
            ClaimPlan::AdvisoryStatement | ClaimPlan::AdvisorySteps => {
                self.claim_advisory(n, &how).await
            }
        }
    }

    /// How this claim of `n` from `from` finds its rows (see [`keys`](super::keys)):
    /// a keyed queue's keys counted again when the count is a second old.
    async fn reading(&self, n: usize, from: Option<&str>) -> Result<Reading> {
        let s = &self.s;
        let keys = match s.walks_keys() {
            false => None,
            // any count tells few keys from more than KEYS_WALKED
            true => {
                let mut conn = self.conns.get().await?;
                let n = self.key_count(&mut *conn, KEYS_WALKED, |_| true).await?.n;
                conn.done();
                Some(n)
            }
        };
        Ok(keys::reading(
            keys,
            from,
            n,
            s.id_kind,
            self.waited.lately(),
        ))
    }

    /// Up to `n` rows of a claim's first statement (`sql`) read as `how`
    /// says, in claim order: in id order, one scan or one per [`Phase`] until
    /// `n` (noting whether rows waited past the mark); bounded, then over the
    /// heads for the rest; in steps; over the heads. `ttl` is bound after the
    /// limit (the one-statement lease claim).
    async fn scan(
        &self,
        conn: &mut sqlx::AnyConnection,
        n: usize,
        how: &Reading,
        sql: FirstStatement,
        ttl: Option<i64>,
    ) -> Result<Vec<sqlx::any::AnyRow>> {
        let mut rows = Vec::new();
        match how {
            Reading::InOrder(from) => {
                let scan = if from.is_some() {
                    Scan::Mark
                } else {
                    Scan::Lowest
                };
                for phase in self.s.phases() {
                    if rows.len() == n {
                        break;
                    }
                    let text = sql(&self.s, scan, *phase);
                    let q = with_ids(sqlx::query(&text), from.iter());
                    rows.extend(fetch(q, n - rows.len(), ttl, conn).await?);
                }
            }
            Reading::Bounded { from, below } => {
                let text_sql = sql(&self.s, Scan::Below, Phase::All);
                let q = with_ids(sqlx::query(&text_sql), [from, below]);
                rows = fetch(q, n, ttl, conn).await?;
                if rows.len() < n {
                    self.rest_over_heads(conn, &mut rows, n, sql, ttl, KEYS_WALKED)
                        .await?;
                }
            }
            Reading::Steps { from } => {
                rows = self.steps(conn, n, from.as_deref(), sql, ttl).await?
            }
            Reading::Heads => {
                let taken = HashSet::new();
                rows = self
                    .over_heads(conn, n, &taken, sql, ttl, KEYS_WALKED)
                    .await?
            }
        }
        self.in_claim_order(&mut rows)?;
        if let (Reading::InOrder(Some(from)), true) = (how, self.s.walks_keys()) {
            let last = rows.last().map(|r| text(r, 0)).transpose()?;
            if keys::saw_waiting(from, n, last.as_deref(), rows.len() < n) {
                self.waited.saw();
            }
        }
        Ok(rows)
    }

    /// Put a claim's rows in claim order where its statement returns them in
    /// none ([`ClaimPlan::returns_unordered`]): by priority (the fifth
    /// column), NULL last, then id.
    fn in_claim_order(&self, rows: &mut Vec<sqlx::any::AnyRow>) -> Result<()> {
        if !self.s.plan.returns_unordered() || rows.len() < 2 {
            return Ok(());
        }
        let prioritized = self.s.priority.is_some();
        let integer = self.s.id_kind == IdKind::Integer;
        let mut keyed = std::mem::take(rows)
            .into_iter()
            .map(|r| {
                let priority: Option<i64> = match prioritized {
                    true => r.try_get(4)?,
                    false => None,
                };
                let id = text(&r, 0)?;
                let id = match integer {
                    true => OrderId::Integer(id.parse().map_err(|_| {
                        Error::invalid(format!("a claimed id is not an integer: {id}"))
                    })?),
                    false => OrderId::Text(id),
                };
                Ok(((priority.is_none(), priority, id), r))
            })
            .collect::<Result<Vec<_>>>()?;
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        rows.extend(keyed.into_iter().map(|(_, r)| r));
        Ok(())
    }

    /// Move rows whose last delivery died at max_attempts (crash loops: lease
    /// and advisory forms) out of the candidates, returning the rest.
    async fn drop_poison(
        &self,
        conn: &mut sqlx::AnyConnection,
        cands: Vec<(String, i64)>,
    ) -> Result<Vec<String>> {
        let mut live = Vec::with_capacity(cands.len());
        for (id, attempt) in cands {
            match self.s.max {
                Some(max) if attempt >= max => {
                    for sql in self.s.dead_sql(false) {
                        exec_with_id(conn, &sql, &id).await?;
                    }
                    self.dead_at_claim(&id);
                }
                _ => live.push(id),
            }
        }
        Ok(live)
    }

    /// Count the attempt (and write the token) of `ids` and read them back.
    async fn take(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<ClaimedRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let s = &self.s;
        if let Some(sql) = s.take_update_sql(ids.len()) {
            let mut q = sqlx::query(&sql);
            if let Form::Lease { ttl } = s.form {
                q = q.bind(micros(ttl));
            }
            for id in ids {
                q = q.bind(id);
            }
            q.execute(&mut *conn).await?;
        }
        let sql = s.take_read_sql(ids.len());
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| claimed(r, 0, self.s.payload_arrives_as()))
            .collect()
    }

    /// The lease claim as one autocommitted statement (lock the candidates,
    /// count the attempt and write the token, return the rows), as a
    /// hand-writer would, instead of a transaction of three. Candidates whose
    /// attempt already reached max_attempts (crash loops) are not taken but
    /// returned apart, and each is then moved to the dead letter if it is still
    /// there, ready and at max_attempts.
    async fn claim_lease_cte(&self, n: usize, how: &Reading) -> Result<Vec<ClaimedRow>> {
        let Form::Lease { ttl } = self.s.form else {
            unreachable!("called for the lease form only");
        };
        let mut conn = self.conns.get().await?;
        let cte = Shape::claim_lease_cte_sql;
        let rows = self.scan(&mut conn, n, how, cte, Some(micros(ttl))).await?;
        conn.done();
        drop(conn);
        // the rows delivered are already leased: a failed move must not lose
        // them (the row stays, and a later claim tries again)
        self.deliver_or_move(&rows).await
    }

    /// The lease claim as one `UPDATE … RETURNING` in the claim's write
    /// transaction (see [`super::sql::Shape::claim_lease_returning_sql`]):
    /// crash-looping candidates, returned unchanged and without a token, are
    /// moved to the dead letter in the same transaction.
    async fn claim_lease_returning(&self, n: usize, how: &Reading) -> Result<Vec<ClaimedRow>> {
        let Form::Lease { ttl } = self.s.form else {
            unreachable!("called for the lease form only");
        };
        let arrives = self.s.payload_arrives_as();
        let mut conn = self.conns.get().await?;
        let mut tx = conn.begin_with(self.s.d.begin()).await?;
        let sql = Shape::claim_lease_returning_sql;
        let rows = self.scan(&mut tx, n, how, sql, Some(micros(ttl))).await?;
        let mut out = Vec::with_capacity(rows.len());
        let mut looping = Vec::new();
        for r in &rows {
            match r.try_get::<Option<i64>, _>(2)? {
                Some(_) => out.push(claimed(r, 0, arrives)?),
                None => looping.push((text(r, 0)?, r.try_get::<i64, _>(1)?)),
            }
        }
        if !looping.is_empty() {
            self.drop_poison(&mut tx, looping).await?;
        }
        tx.commit().await?;
        conn.done();
        Ok(out)
    }

    /// Move a crash-looping row to the dead letter if it is still there, ready
    /// and at max_attempts (another claim may have moved it meanwhile).
    async fn move_poison(&self, id: &str) -> Result<()> {
        let s = &self.s;
        let Some(check) = s.poison_check_sql() else {
            return Ok(());
        };
        let mut conn = self.conns.get().await?;
        let mut tx = conn.begin_with(s.d.begin()).await?;
        if sqlx::query(&check)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
            .is_some()
        {
            for sql in s.dead_sql(false) {
                exec_with_id(&mut tx, &sql, id).await?;
            }
            self.dead_at_claim(id);
        }
        tx.commit().await?;
        conn.done();
        Ok(())
    }

    async fn claim_advisory(
        &self,
        n: usize,
        how: &Reading,
    ) -> Result<(Vec<ClaimedRow>, Option<Session>)> {
        let s = &self.s;
        let mut conn = self.conns.get().await?;
        let locked = match how {
            Reading::InOrder(from) if !s.walks_keys() && s.locks_in_scan() => {
                self.scan_locking(&mut conn, n, from.as_deref()).await
            }
            _ => self.lock_candidates(&mut conn, n, how).await,
        };
        let locked = match locked {
            Ok(got) => got,
            Err(e) => {
                conn.close(); // the server drops every key
                return Err(e);
            }
        };
        if locked.is_empty() {
            conn.done();
            return Ok((Vec::new(), None));
        }
        // re-check with a fresh read now that the keys are ours, count the attempt
        let ids: Vec<String> = locked.iter().cloned().collect();
        let res: Result<Vec<ClaimedRow>> = if s.plan == ClaimPlan::AdvisoryStatement {
            self.take_locked_cte(&mut conn, &ids).await
        } else {
            self.take_locked_steps(&mut conn, &ids).await
        };
        let out = match res {
            Ok(v) => v,
            Err(e) => {
                conn.close(); // the server drops every key
                return Err(e);
            }
        };
        // give back every key not delivered (gone, not ready any more, or moved)
        let taken: HashSet<&str> = out.iter().map(|c| c.id.as_str()).collect();
        let (held, gone): (HashSet<String>, HashSet<String>) = locked
            .into_iter()
            .partition(|id| taken.contains(id.as_str()));
        let gone: Vec<&str> = gone.iter().map(String::as_str).collect();
        if let Err(e) = self.unlock_many(&mut conn, &gone).await {
            conn.close();
            return Err(e);
        }
        if out.is_empty() {
            conn.done();
            return Ok((out, None));
        }
        Ok((out, Some(Session::new(ClaimConn::Conn(conn), held))))
    }

    /// Up to `n` ids of the advisory claim's candidates, read from `from` (the
    /// mark) or the lowest id, whose keys this connection now holds: the read
    /// and the keys in one statement (see [`Shape::advisory_lock_sql`]).
    async fn scan_locking(
        &self,
        conn: &mut sqlx::AnyConnection,
        n: usize,
        from: Option<&str>,
    ) -> Result<HashSet<String>> {
        let scan = if from.is_some() {
            Scan::Mark
        } else {
            Scan::Lowest
        };
        let mut locked = HashSet::new();
        for phase in self.s.phases() {
            let want = n - locked.len();
            if want == 0 {
                break;
            }
            let sql = self
                .s
                .advisory_lock_sql(scan, *phase)
                .expect("keys the server computes");
            let q = with_ids(sqlx::query(&sql), from.map(str::to_owned).iter())
                // no bound: the scan stops at the `want`th key it takes, past
                // however many keys other sessions hold in front
                .bind(None::<i64>)
                .bind(want as i64)
                .bind(self.s.queue.as_str());
            for r in q.fetch_all(&mut *conn).await? {
                locked.insert(text(&r, 0)?);
            }
        }
        Ok(locked)
    }

    /// Up to `n` ids of the advisory claim's candidates (read as `how` says)
    /// whose keys this connection now holds: the read, then the keys tried in
    /// one statement per round until there are enough or no candidates left.
    /// Where other sessions held every key read, it reads on: from the last
    /// id read where claim order is id order, else again four times as far
    /// (keys already tried are not tried twice: a session's named lock counts
    /// each time it is taken). How many keys other sessions held is kept for
    /// the next claim's first read.
    async fn lock_candidates(
        &self,
        conn: &mut sqlx::AnyConnection,
        n: usize,
        how: &Reading,
    ) -> Result<HashSet<String>> {
        let mut read = candidates_read(n, self.held_lately.load(Ordering::Relaxed));
        let mut tried: HashSet<String> = HashSet::new();
        let mut locked: HashSet<String> = HashSet::new();
        let mut how = how.clone();
        loop {
            let cands: Vec<String> = self
                .scan(conn, read, &how, Shape::advisory_candidates_sql, None)
                .await?
                .iter()
                .map(|r| r.get::<String, _>(0))
                .collect();
            let more = cands.len() >= read;
            let last = cands.last().cloned();
            let fresh: Vec<String> = cands.into_iter().filter(|id| !tried.contains(id)).collect();
            let mut rest = &fresh[..];
            while locked.len() < n && !rest.is_empty() {
                let (now, later) = rest.split_at((n - locked.len()).min(rest.len()));
                rest = later;
                tried.extend(now.iter().cloned());
                locked.extend(self.try_lock_many(conn, now).await?);
            }
            if locked.len() >= n || !more {
                break;
            }
            match (&how, last) {
                // claim order is id order: the next page starts at the last id
                // read (a page of ids all tried already reads farther)
                (Reading::InOrder(_), Some(last)) if self.s.keeps_mark() && !fresh.is_empty() => {
                    how = Reading::InOrder(Some(last));
                }
                _ => read *= 4,
            }
        }
        self.held_lately
            .store(tried.len() - locked.len(), Ordering::Relaxed);
        Ok(locked)
    }

    /// The advisory claim's take as one statement, once this connection holds
    /// the keys of `ids` (see [`super::sql::Shape::take_locked_sql`]): where
    /// the general path needs a transaction of four. When some id is not
    /// delivered, those of them that crash-loop are moved to the dead letter
    /// (this connection still holds their keys: no other claim takes them first).
    async fn take_locked_cte(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<ClaimedRow>> {
        let sql = self.s.take_locked_sql(ids.len());
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        let out = rows
            .iter()
            .map(|r| claimed(r, 0, self.s.payload_arrives_as()))
            .collect::<Result<Vec<_>>>()?;
        if out.len() < ids.len() {
            let taken: HashSet<&str> = out.iter().map(|c| c.id.as_str()).collect();
            let missing: Vec<&String> =
                ids.iter().filter(|i| !taken.contains(i.as_str())).collect();
            if let Some(sql) = self.s.crash_loops_among_sql(missing.len()) {
                let mut q = sqlx::query(&sql);
                for id in &missing {
                    q = q.bind(id.as_str());
                }
                let looping: Vec<String> = q
                    .fetch_all(&mut *conn)
                    .await?
                    .iter()
                    .map(|r| text(r, 0))
                    .collect::<Result<_>>()?;
                for id in looping {
                    if let Err(e) = self.move_poison(&id).await {
                        tracing::warn!(queue = %self.s.queue, id = %id, error = %e, "could not move a crash-looping row to the dead letter; a later claim tries again");
                    }
                }
            }
        }
        Ok(out)
    }

    /// The advisory claim's take without a writable CTE, once this connection
    /// holds the keys of `ids`: nothing but this claim settles or counts those
    /// rows meanwhile, so a fresh read of those still ready, then one statement
    /// that counts their attempts, each autocommitted, as a hand-writer would
    /// (a transaction around them cost three round trips more). Crash-looping
    /// rows are moved to the dead letter, in a transaction of their own.
    async fn take_locked_steps(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<ClaimedRow>> {
        let s = &self.s;
        let arrives = s.payload_arrives_as();
        let k = ids.len();
        let sql = self
            .texts
            .get(Text::HeldReady, k, || s.held_ready_rows_sql(k));
        let rows = with_ids(sqlx::query(&sql), ids)
            .fetch_all(&mut *conn)
            .await?;
        let mut live = Vec::with_capacity(rows.len());
        let mut poison = Vec::new();
        for r in &rows {
            let attempt: i64 = r.try_get(1)?;
            match s.max {
                Some(max) if attempt >= max => poison.push((text(r, 0)?, attempt)),
                _ => live.push(r),
            }
        }
        if !poison.is_empty() {
            let mut tx = conn.begin().await?;
            self.drop_poison(&mut tx, poison).await?;
            tx.commit().await?;
        }
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let live_ids: Vec<String> = live.iter().map(|r| text(r, 0)).collect::<Result<_>>()?;
        if s.attempt.is_none() {
            return live.iter().map(|r| claimed(r, 0, arrives)).collect();
        }
        let k = live_ids.len();
        let sql = self.texts.get(Text::CountAttempt, k, || {
            s.count_attempt_sql(k).expect("an attempt column")
        });
        let counted = with_ids(sqlx::query(&sql), &live_ids)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        if counted == live.len() as u64 {
            return live.iter().map(|r| claimed(r, 1, arrives)).collect();
        }
        // a row written by someone else after the read (deleted by hand, say):
        // deliver those whose attempt this claim counted
        let before: HashMap<String, i64> = live
            .iter()
            .map(|r| Ok((text(r, 0)?, r.try_get(1)?)))
            .collect::<Result<_>>()?;
        let now = with_ids(sqlx::query(&s.take_read_sql(live_ids.len())), &live_ids)
            .fetch_all(&mut *conn)
            .await?;
        let mut out = Vec::with_capacity(now.len());
        for r in &now {
            let attempt: i64 = r.try_get(1)?;
            if before.get(&text(r, 0)?) == Some(&(attempt - 1)) {
                out.push(claimed(r, 0, arrives)?);
            }
        }
        Ok(out)
    }

    /// The rows of a one-statement claim (see [`super::sql::Shape::crash_loops`]):
    /// those to deliver, while each crash-looping one is moved to the dead
    /// letter (a move that fails leaves the row for a later claim).
    async fn deliver_or_move(&self, rows: &[sqlx::any::AnyRow]) -> Result<Vec<ClaimedRow>> {
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            if r.try_get::<i32, _>(4)? == 0 {
                out.push(claimed(r, 0, self.s.payload_arrives_as())?);
            } else {
                let id = text(r, 0)?;
                if let Err(e) = self.move_poison(&id).await {
                    tracing::warn!(queue = %self.s.queue, id = %id, error = %e, "could not move a crash-looping row to the dead letter; a later claim tries again");
                }
            }
        }
        Ok(out)
    }
}

/// How many candidates an advisory claim of `n` reads first where the client
/// tries their keys after the read: `n` and a margin for keys other sessions
/// hold, as many as the last such claim found held (up to `n` more). Every id
/// read is a row converted in the client, and uncontended claims try only `n`.
fn candidates_read(n: usize, held_lately: usize) -> usize {
    n + 16 + held_lately.min(n)
}

/// An id as claim order compares it: integers by value, text by its bytes
/// (SQLite's default collation).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum OrderId {
    Integer(i64),
    Text(String),
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// A claim statement with the ids of its [`Scan`] bound first.
pub(super) fn with_ids<'q, 'a>(
    mut q: AnyQuery<'q>,
    ids: impl IntoIterator<Item = &'a String>,
) -> AnyQuery<'q> {
    for id in ids {
        q = q.bind(id.clone());
    }
    q
}

/// The rows of a claim's first statement, its limit `n` (and `ttl`, the
/// one-statement lease claim's) bound after its ids.
pub(super) async fn fetch<'q>(
    q: AnyQuery<'q>,
    n: usize,
    ttl: Option<i64>,
    conn: &mut sqlx::AnyConnection,
) -> Result<Vec<sqlx::any::AnyRow>> {
    let mut q = q.bind(n as i64);
    if let Some(ttl) = ttl {
        q = q.bind(ttl);
    }
    Ok(q.fetch_all(conn).await?)
}

/// A claimed row from (id, attempt, token, payload); `plus` is added to the
/// stored attempt (row_lock counts it when settling).
fn claimed(r: &sqlx::any::AnyRow, plus: i64, arrives: PayloadText) -> Result<ClaimedRow> {
    let id: String = text(r, 0)?;
    let attempt: i64 = r.try_get(1)?;
    let token: Option<i64> = r.try_get(2)?;
    let payload = opt_text(r, 3)?;
    Ok(ClaimedRow {
        id,
        attempt: u32::try_from((attempt + plus).max(1)).unwrap_or(u32::MAX),
        token,
        payload: match arrives {
            PayloadText::Json => Payload::json(payload.map(String::into_bytes)),
            PayloadText::Text => Payload::text(payload),
        },
    })
}
