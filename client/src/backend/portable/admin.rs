//! The operator's side of the portable path: a queue's counts, its dead rows
//! (list, requeue, purge) and the statements it runs. The dead letter is a
//! table with the queue's columns, or the queue table's rows of a dead group.

use super::dialect::Advisory;
use super::engine::{opt_text, text};
use super::shape::{in_list, Dead, Shape};
use super::Engine;
use crate::error::{Error, Result};
use crate::outcome::micros;
use crate::queue::Form;
use crate::stats::{age_from_micros, DeadRow, Stats};
use sqlx::Row;
use std::time::Duration;

/// Most ids one statement lists (an `IN (…)` of bound parameters).
const CHUNK: usize = 500;

impl Shape {
    /// Every statement the portable path runs for this queue, named (for
    /// reading, EXPLAIN and audits: `settle sql`).
    pub(super) fn statement_list(&self) -> Vec<(String, String)> {
        let s = self;
        let mut out: Vec<(String, String)> = Vec::new();
        let mut add = |name: &str, sql: String| out.push((name.into(), sql));
        match s.form {
            Form::RowLock => add("claim", s.claim_rows_sql()),
            Form::Lease { .. } if s.d.has_writable_cte() => add("claim", s.claim_lease_cte_sql()),
            Form::Lease { .. } => add("claim candidates", s.lease_candidates_sql()),
            Form::Advisory => add("claim candidates", s.advisory_candidates_sql()),
        }
        if s.form == Form::Advisory {
            let a: Advisory = s.d.advisory().expect("an advisory dialect");
            add("try locks", a.try_lock_sql(s.d, 2));
            add("unlock", a.unlock_sql(s.d, 2));
            if s.d.has_writable_cte() {
                add("take locked", s.take_locked_sql(2));
                if let Some(sql) = s.crash_loops_among_sql(2) {
                    add("crash loops among", sql);
                }
            } else {
                add("recheck locked", s.recheck_locked_sql(2));
            }
        }
        if s.form != Form::RowLock && !s.d.has_writable_cte() {
            // the claim's transaction: count, then read
            if let Some(sql) = s.take_update_sql(2) {
                add("take", sql);
            }
            add("take read", s.take_read_sql(2));
        }
        if s.form != Form::RowLock && s.d.has_writable_cte() {
            // crash-looping rows the one-statement claim returned apart
            if let Some(sql) = s.poison_check_sql() {
                add("crash loop check", sql);
            }
        }
        add("lock held", s.lock_held_sql(2));
        let (ack, _) = s.outcome_verb(false, None, false);
        add("ack verb", ack.unwrap_or_default());
        let (retry, _) = s.outcome_verb(true, None, false);
        add("retry verb", retry.unwrap_or_default());
        let (later, _) = s.outcome_verb(true, Some(1_000_000), false);
        add("retry_after verb", later.unwrap_or_default());
        add("ack by id", s.ack_sql(2, false).0 + &s.returning_id());
        if let Form::Lease { .. } = s.form {
            add("ack by token", s.ack_sql(2, true).0 + &s.returning_id());
            add("ack by tokens", s.ack_per_item_sql(2).0 + &s.returning_id());
            add("release", s.release_lease_sql());
            add("extend", s.extend_sql());
            add("token", s.token_sql());
        }
        for (i, sql) in s.dead_sql(s.form == Form::RowLock).into_iter().enumerate() {
            add(&format!("dead letter {}", i + 1), sql);
        }
        add("stats", s.stats_sql());
        if s.dead.is_some() {
            add("dead count", s.dead_count_sql().unwrap_or_default());
            add("dead rows", s.dead_rows_sql(Some(2)).unwrap_or_default());
            add("dead ids", s.dead_ids_sql(Some(2)).unwrap_or_default());
            for (i, sql) in s.requeue_sql(2).unwrap_or_default().into_iter().enumerate() {
                add(&format!("requeue {}", i + 1), sql);
            }
            add("purge", s.purge_dead_sql(true, Some(2)).unwrap_or_default());
        }
        out
    }

    /// ready, delayed, in flight (lease; NULL otherwise) of this queue, and
    /// the oldest ready row's age in microseconds (NULL without created_at).
    pub(super) fn stats_sql(&self) -> String {
        let d = self.d;
        let mine = {
            let m = self.mine("a");
            if m.is_empty() {
                "1 = 1".into()
            } else {
                m.join(" AND ")
            }
        };
        let delayed = match &self.retry_after {
            Some(r) => format!(
                "COALESCE(SUM(CASE WHEN {} > {} THEN 1 ELSE 0 END), 0)",
                self.c("a", r),
                d.now()
            ),
            None => "0".into(),
        };
        let in_flight = match (&self.locked_until, self.form) {
            (Some(l), Form::Lease { .. }) => d.int(&format!(
                "COALESCE(SUM(CASE WHEN {} >= {} THEN 1 ELSE 0 END), 0)",
                self.c("a", l),
                d.now()
            )),
            _ => "NULL".into(),
        };
        let oldest = match &self.created_at {
            Some(c) => format!(
                "{} - MIN(CASE WHEN {} THEN {} END)",
                d.micros(d.now()),
                self.ready("a"),
                d.micros(&self.c("a", c))
            ),
            None => "NULL".into(),
        };
        format!(
            "SELECT {}, {}, {in_flight}, {oldest} FROM {} a WHERE {mine}",
            d.int(&format!(
                "COALESCE(SUM(CASE WHEN {} THEN 1 ELSE 0 END), 0)",
                self.ready("a")
            )),
            d.int(&delayed),
            self.table
        )
    }

    /// The count of dead-lettered rows; `None` without a dead letter.
    pub(super) fn dead_count_sql(&self) -> Option<String> {
        let d = self.d;
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => format!(
                "SELECT {} FROM {} WHERE {} = {}",
                d.int("count(*)"),
                self.table,
                d.ident(
                    self.group
                        .as_ref()
                        .expect("group dead letter: group column")
                ),
                d.literal(g)
            ),
            Dead::Table(t) => format!("SELECT {} FROM {t}", d.int("count(*)")),
        })
    }

    /// Where the dead rows are: the table, and the condition on its alias `a`
    /// that picks them (`1 = 1` in a dead-letter table).
    fn dead_from(&self) -> Option<(String, String)> {
        let d = self.d;
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => (
                self.table.clone(),
                format!(
                    "{} = {}",
                    self.c(
                        "a",
                        self.group
                            .as_ref()
                            .expect("group dead letter: group column")
                    ),
                    d.literal(g)
                ),
            ),
            Dead::Table(t) => (t.clone(), "1 = 1".into()),
        })
    }

    /// ` AND a.id IN (…)` for `n` ids bound from parameter `first`, or nothing.
    fn among(&self, first: usize, n: Option<usize>) -> String {
        match n {
            Some(n) => format!(
                " AND {} IN ({})",
                self.c("a", &self.id),
                in_list(self.d, first, n, self.id_kind)
            ),
            None => String::new(),
        }
    }

    /// id, attempt, the whole row (JSON text) of dead rows in id order, among
    /// `n` ids bound from parameter 1 (or all), at most the next parameter of
    /// them (bound last: `?` parameters bind in the order they appear).
    pub(super) fn dead_rows_sql(&self, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        Some(format!(
            "SELECT {}, {}, {} FROM {t} a WHERE {cond}{} ORDER BY a.{} LIMIT {}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            d.json_row("a", &self.cols),
            self.among(1, n),
            d.ident(&self.id),
            d.p(n.unwrap_or(0) + 1)
        ))
    }

    /// Delete dead rows created before now − parameter 1 (microseconds) when
    /// `by_age`, among `n` ids bound next (or all).
    pub(super) fn purge_dead_sql(&self, by_age: bool, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        let (age, first) = match (&self.created_at, by_age) {
            (Some(c), true) => (
                format!(
                    " AND {} < {}",
                    self.c("a", c),
                    d.now_plus(&format!("-{}", d.p(1)))
                ),
                2,
            ),
            _ => (String::new(), 1),
        };
        // a derived table names the rows: MySQL cannot alias a DELETE's table
        // nor read it in a subquery of its own
        Some(format!(
            "DELETE FROM {t} WHERE {} IN (SELECT k FROM (SELECT a.{} AS k FROM {t} a WHERE {cond}{age}{}) x)",
            d.ident(&self.id),
            d.ident(&self.id),
            self.among(first, n)
        ))
    }

    /// The ids of dead rows to requeue, in id order, at most [`CHUNK`], among
    /// `n` ids bound from parameter 1 (or all), locked for the move.
    pub(super) fn dead_ids_sql(&self, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        Some(format!(
            "SELECT {} FROM {t} a WHERE {cond}{} ORDER BY a.{} LIMIT {CHUNK}{}",
            d.id_text(&self.c("a", &self.id)),
            self.among(1, n),
            d.ident(&self.id),
            d.for_update()
        ))
    }

    /// The columns a requeue resets (attempt to 0, times to NULL), with values.
    fn requeue_resets(&self) -> Vec<(String, &'static str)> {
        let mut v: Vec<(String, &'static str)> = Vec::new();
        if let Some(a) = &self.attempt {
            v.push((a.clone(), "0"));
        }
        for c in [&self.retry_after, &self.locked_until, &self.processed_at]
            .into_iter()
            .flatten()
        {
            v.push((c.clone(), "NULL"));
        }
        v
    }

    /// The statements moving `n` dead rows (ids bound from parameter 1) back
    /// into the queue, attempt reset, in one transaction: a group's one
    /// UPDATE, a dead-letter table's copy and delete.
    pub(super) fn requeue_sql(&self, n: usize) -> Option<Vec<String>> {
        let d = self.d;
        let ids = in_list(d, 1, n, self.id_kind);
        let idc = d.ident(&self.id);
        let resets = self.requeue_resets();
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => {
                let gc = d.ident(
                    self.group
                        .as_ref()
                        .expect("group dead letter: group column"),
                );
                let mut sets = vec![format!("{gc} = {}", d.literal(&self.queue))];
                sets.extend(resets.iter().map(|(c, v)| format!("{} = {v}", d.ident(c))));
                vec![format!(
                    "UPDATE {} SET {} WHERE {gc} = {} AND {idc} IN ({ids})",
                    self.table,
                    sets.join(", "),
                    d.literal(g)
                )]
            }
            Dead::Table(dt) => {
                let cols: Vec<String> = self.cols.iter().map(|c| d.ident(c)).collect();
                let vals: Vec<String> = self
                    .cols
                    .iter()
                    .map(|c| match resets.iter().find(|(r, _)| r == c) {
                        Some((_, v)) => v.to_string(),
                        None => format!("m.{}", d.ident(c)),
                    })
                    .collect();
                vec![
                    format!(
                        "INSERT INTO {} ({}) SELECT {} FROM {dt} m WHERE m.{idc} IN ({ids})",
                        self.table,
                        cols.join(", "),
                        vals.join(", ")
                    ),
                    format!("DELETE FROM {dt} WHERE {idc} IN ({ids})"),
                ]
            }
        })
    }
}

/// A dead row's JSON text as a value; a text column that holds JSON (a
/// payload kept as TEXT) is that JSON.
fn row_value(json: &str) -> Result<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| Error::invalid(format!("a dead row is not JSON: {e}")))?;
    if let Some(m) = v.as_object_mut() {
        for x in m.values_mut() {
            if let Some(t) = x.as_str() {
                if let Ok(inner @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) =
                    serde_json::from_str::<serde_json::Value>(t)
                {
                    *x = inner;
                }
            }
        }
    }
    Ok(v)
}

impl Engine {
    pub(crate) async fn stats(&self) -> Result<Stats> {
        let r = sqlx::query(&self.s.stats_sql())
            .fetch_one(&self.pool)
            .await?;
        // None too when the role may not read the dead letter (a worker
        // granted only INSERT on it)
        let dead = match self.s.dead_count_sql() {
            None => None,
            Some(sql) => match sqlx::query(&sql).fetch_one(&self.pool).await {
                Ok(r) => Some(r.get(0)),
                Err(e) => {
                    let e = Error::from(e);
                    if e.code().is_some() && e.code() == self.s.d.privilege_denied_code() {
                        None
                    } else {
                        return Err(e);
                    }
                }
            },
        };
        Ok(Stats {
            ready: r.get(0),
            delayed: r.get(1),
            in_flight: r.get(2),
            dead,
            oldest_ready_age: age_from_micros(r.try_get(3)?),
        })
    }

    fn no_dead_letter(&self) -> Error {
        Error::invalid(format!(
            "queue \"{}\" has no dead letter (describe it with max_attempts and dead_letter)",
            self.s.queue
        ))
    }

    /// Dead rows in id order, at most `limit`, among `ids` (or all).
    pub(crate) async fn dead_rows(
        &self,
        limit: i64,
        ids: Option<&[String]>,
    ) -> Result<Vec<DeadRow>> {
        if limit < 0 {
            return Err(Error::invalid(format!(
                "limit must not be negative, got {limit}"
            )));
        }
        let mut out = Vec::new();
        let chunks: Vec<Option<&[String]>> = match ids {
            None => vec![None],
            Some(ids) => ids.chunks(CHUNK).map(Some).collect(),
        };
        for chunk in chunks {
            let sql = self
                .s
                .dead_rows_sql(chunk.map(<[String]>::len))
                .ok_or_else(|| self.no_dead_letter())?;
            let mut q = sqlx::query(&sql);
            for id in chunk.into_iter().flatten() {
                q = q.bind(id.as_str());
            }
            for r in q.bind(limit).fetch_all(&self.pool).await? {
                out.push(DeadRow {
                    id: text(&r, 0)?,
                    attempt: r.try_get::<Option<i64>, _>(1)?,
                    row: row_value(&opt_text(&r, 2)?.unwrap_or_else(|| "null".into()))?,
                });
            }
        }
        if ids.is_some_and(|i| i.len() > CHUNK) {
            // the chunks' rows in id order again (numbers by value)
            out.sort_by_cached_key(|r| (r.id.parse::<i64>().ok(), r.id.clone()));
        }
        out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(out)
    }

    /// Move dead rows (`ids`, or all) back into the queue, attempt reset;
    /// how many moved. Each chunk's ids are read, locked and moved in one
    /// transaction, so a row that dies meanwhile is moved whole or not at all.
    pub(crate) async fn requeue_dead(&self, ids: Option<&[String]>) -> Result<i64> {
        if self.s.dead.is_none() {
            return Err(self.no_dead_letter());
        }
        let mut moved = 0i64;
        let given: Vec<&[String]> = ids.map(|i| i.chunks(CHUNK).collect()).unwrap_or_default();
        let mut next = 0;
        loop {
            let chunk = match ids {
                Some(_) if next >= given.len() => break,
                Some(_) => Some(given[next]),
                None => None,
            };
            next += 1;
            let mut tx = self.pool.begin_with(self.s.d.begin()).await?;
            let sql = self
                .s
                .dead_ids_sql(chunk.map(<[String]>::len))
                .expect("a dead letter");
            let mut q = sqlx::query(&sql);
            for id in chunk.into_iter().flatten() {
                q = q.bind(id.as_str());
            }
            let found: Vec<String> = q
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|r| text(r, 0))
                .collect::<Result<_>>()?;
            if found.is_empty() {
                tx.commit().await?;
                if ids.is_none() {
                    break;
                }
                continue;
            }
            let mut n = 0;
            for sql in self.s.requeue_sql(found.len()).expect("a dead letter") {
                let mut q = sqlx::query(&sql);
                for id in &found {
                    q = q.bind(id.as_str());
                }
                n = q.execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
            moved += n as i64;
        }
        Ok(moved)
    }

    /// Delete dead rows created more than `older_than` ago and/or among `ids`;
    /// how many.
    pub(crate) async fn purge_dead(
        &self,
        older_than: Option<Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        if self.s.dead.is_none() {
            return Err(self.no_dead_letter());
        }
        if older_than.is_none() && ids.is_none() {
            return Err(Error::invalid(
                "give older_than or ids (an older_than of 0 purges every dead row)",
            ));
        }
        if older_than.is_some() && self.s.created_at.is_none() {
            return Err(Error::invalid(format!(
                "queue \"{}\" has no created_at column to measure a dead row's age by: purge it by ids",
                self.s.queue
            )));
        }
        let chunks: Vec<Option<&[String]>> = match ids {
            None => vec![None],
            Some(ids) => ids.chunks(CHUNK).map(Some).collect(),
        };
        let mut purged = 0i64;
        for chunk in chunks {
            let sql = self
                .s
                .purge_dead_sql(older_than.is_some(), chunk.map(<[String]>::len))
                .expect("a dead letter");
            let mut q = sqlx::query(&sql);
            if let Some(t) = older_than {
                q = q.bind(micros(t));
            }
            for id in chunk.into_iter().flatten() {
                q = q.bind(id.as_str());
            }
            purged += q.execute(&self.pool).await?.rows_affected() as i64;
        }
        Ok(purged)
    }
}

impl Engine {
    /// The statements this queue runs (see [`Shape::statement_list`]).
    pub(crate) fn statements(&self) -> Vec<(String, String)> {
        self.s.statement_list()
    }
}
