//! How far a keyed claim on the portable path reads (see [`keys`](super::keys)):
//! its steps through a queue with many keys, and its visit of the heads.

use super::claim::{fetch, with_ids};
use super::engine::{opt_text, text, Engine};
use super::keys::{self, Counted};
use super::sql::{read_bound, unkeyed_read, FirstStatement, Phase, Scan, KEYS_WALKED};
use crate::error::Result;
use sqlx::Row;
use std::collections::HashSet;

impl Engine {
    /// This client's count of the queue's keys, counted again (up to `max` +
    /// 1, on `db`: a claim's own connection where it holds one) unless
    /// `serves` accepts the fresh one.
    pub(super) async fn key_count<'c>(
        &self,
        db: impl sqlx::Executor<'c, Database = sqlx::Any>,
        max: usize,
        serves: impl Fn(Counted) -> bool,
    ) -> Result<Counted> {
        if let Some(c) = self.keys.fresh().filter(|c| serves(*c)) {
            return Ok(c);
        }
        let n: i64 = sqlx::query(&self.s.key_count_sql(max + 1))
            .fetch_one(db)
            .await?
            .try_get(0)?;
        let c = Counted {
            n: usize::try_from(n).unwrap_or(0),
            max,
        };
        self.keys.set(c);
        Ok(c)
    }

    /// Up to `n` rows of a claim's first statement `sql` read in steps from
    /// `from` (the mark, or the lowest id; integer ids): each step the ids of
    /// the next [`read_bound`] rows ready by themselves, then the claim over
    /// those ids, until the claim has `n`, the queue has no more rows, or the
    /// rows passed make visiting the keys cheaper, which takes the rest.
    pub(super) async fn steps(
        &self,
        conn: &mut sqlx::AnyConnection,
        n: usize,
        from: Option<&str>,
        sql: FirstStatement,
        ttl: Option<i64>,
    ) -> Result<Vec<sqlx::any::AnyRow>> {
        let mut rows = Vec::new();
        let mut from = from.map(str::to_owned);
        let mut passed = 0usize;
        // prepared for each run where running it again prepared fails
        let keep = !self.s.d.fails_rerun_of_derived_subqueries();
        let reach = [self.s.step_extent_sql(false), self.s.step_extent_sql(true)];
        let step = sql(&self.s, Scan::Below, Phase::All);
        while rows.len() < n {
            let want = n - rows.len();
            let bound = read_bound(want);
            let q = sqlx::query(&reach[usize::from(from.is_some())]).persistent(keep);
            let r = with_ids(q, from.iter())
                .bind(bound)
                .fetch_one(&mut *conn)
                .await?;
            let (read, last): (i64, Option<String>) = (r.try_get(0)?, opt_text(&r, 1)?);
            let Some(last) = last.and_then(|l| l.parse::<i64>().ok()) else {
                break;
            };
            let first = from.clone().unwrap_or_else(|| i64::MIN.to_string());
            let below = last.saturating_add(1).to_string();
            let q = with_ids(sqlx::query(&step), [&first, &below]);
            rows.extend(fetch(q, want, ttl, conn).await?);
            if rows.len() >= n || read < bound {
                // full, or every ready row from the start read
                break;
            }
            self.waited.saw();
            passed = passed.saturating_add(read as usize);
            // (on the claim's connection: the pool may have no other free)
            let c = self
                .key_count(&mut *conn, keys::count_bound(passed), |c| {
                    keys::count_serves(c, passed)
                })
                .await?;
            if keys::walks_after(c, passed) {
                self.rest_over_heads(conn, &mut rows, n, sql, ttl, c.n)
                    .await?;
                break;
            }
            from = Some(below);
        }
        Ok(rows)
    }

    /// The rest of a claim of `n` whose first `rows` were read in id order,
    /// over the heads (of up to `keys` keys) but those rows, all of them then
    /// put in id order: the heads may lie below the rows read first (integer
    /// ids).
    pub(super) async fn rest_over_heads(
        &self,
        conn: &mut sqlx::AnyConnection,
        rows: &mut Vec<sqlx::any::AnyRow>,
        n: usize,
        sql: FirstStatement,
        ttl: Option<i64>,
        keys: usize,
    ) -> Result<()> {
        let taken = rows.iter().map(|r| text(r, 0)).collect::<Result<_>>()?;
        let more = self.over_heads(conn, n - rows.len(), &taken, sql, ttl, keys);
        rows.extend(more.await?);
        rows.sort_by_cached_key(|r| text(r, 0).ok().and_then(|i| i.parse::<i64>().ok()));
        Ok(())
    }

    /// Up to `n` rows of a claim's first statement `sql` over the queue's
    /// heads (of up to `keys` keys, at least [`KEYS_WALKED`]) and rows without
    /// a key, but `taken`: the candidates in id order, a page of them per
    /// statement until `n`.
    pub(super) async fn over_heads(
        &self,
        conn: &mut sqlx::AnyConnection,
        n: usize,
        taken: &HashSet<String>,
        sql: FirstStatement,
        ttl: Option<i64>,
        keys: usize,
    ) -> Result<Vec<sqlx::any::AnyRow>> {
        // a few sizes of cap, each statement's text prepared once
        let cap = (keys.max(KEYS_WALKED) + 1).next_power_of_two();
        let heads = self.s.heads_sql(cap, unkeyed_read(n));
        // prepared for each run where running it again prepared fails
        let keep = !self.s.d.fails_rerun_of_derived_subqueries();
        let cands: Vec<String> = sqlx::query(&heads)
            .persistent(keep)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| text(r, 0))
            .filter(|i| i.as_ref().map_or(true, |i| !taken.contains(i)))
            .collect::<Result<_>>()?;
        // one statement text per batch size: a short page repeats its last id
        let page = n * 2 + 16;
        let sql = sql(&self.s, Scan::Listed(page), Phase::All);
        let mut rows = Vec::new();
        for ids in cands.chunks(page) {
            if rows.len() >= n {
                break;
            }
            let last = ids.last().expect("a page has an id");
            let padded = ids
                .iter()
                .chain(std::iter::repeat_n(last, page - ids.len()));
            let q = with_ids(sqlx::query(&sql), padded);
            rows.extend(fetch(q, n - rows.len(), ttl, conn).await?);
        }
        Ok(rows)
    }
}
