//! The operator's side of the portable path: a queue's counts, its dead rows
//! (list, requeue, purge) and the statements it runs. The dead letter is a
//! table with the queue's columns, or the queue table's rows of a dead group.

use super::engine::{opt_text, text};
use super::sql::CHUNK;
use super::Engine;
use crate::error::{Error, Result};
use crate::outcome::micros;
use crate::stats::{age_from_micros, DeadRow, Stats};
use sqlx::{Connection, Row};
use std::time::Duration;

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
        let mut conn = self.conns.get().await?;
        let r = sqlx::query(&self.s.stats_sql())
            .fetch_one(&mut *conn)
            .await?;
        // None too when the role may not read the dead letter (a worker
        // granted only INSERT on it)
        let dead = match self.s.dead_count_sql() {
            None => None,
            Some(sql) => match sqlx::query(&sql).fetch_one(&mut *conn).await {
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
        let mut conn = self.conns.get().await?;
        for chunk in chunks {
            let sql = self
                .s
                .dead_rows_sql(chunk.map(<[String]>::len))
                .ok_or_else(|| self.no_dead_letter())?;
            let mut q = sqlx::query(&sql);
            for id in chunk.into_iter().flatten() {
                q = q.bind(id.as_str());
            }
            for r in q.bind(limit).fetch_all(&mut *conn).await? {
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
        let mut conn = self.conns.get().await?;
        loop {
            let chunk = match ids {
                Some(_) if next >= given.len() => break,
                Some(_) => Some(given[next]),
                None => None,
            };
            next += 1;
            let mut tx = conn.begin_with(self.s.d.begin()).await?;
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
        let mut conn = self.conns.get().await?;
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
            purged += q.execute(&mut *conn).await?.rows_affected() as i64;
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
