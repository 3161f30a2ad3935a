//! The advisory form's locks on the portable path, taken and let go on the
//! delivery's connection, many keys per statement (see [`super::dialect::Advisory`]).

use super::engine::Engine;
use super::texts::Text;
use crate::error::{Error, Result};
use sqlx::Row;

/// Advisory keys tried or let go by one statement (a column each; PostgreSQL
/// allows 1,664 columns in a result).
const LOCKS_PER_STATEMENT: usize = 500;

impl Engine {
    /// Try the advisory keys of `ids` without waiting, in one statement per
    /// chunk (one column per key); the ids whose key this connection now holds.
    pub(super) async fn try_lock_many(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[String],
    ) -> Result<Vec<String>> {
        let d = self.s.d;
        let Some(a) = d.advisory() else {
            return Err(Error::unsupported(format!(
                "{} has no advisory locks",
                d.name()
            )));
        };
        let mut got = Vec::new();
        for chunk in ids.chunks(LOCKS_PER_STATEMENT) {
            let k = chunk.len();
            let sql = self.texts.get(Text::TryLocks, k, || a.try_lock_sql(d, k));
            let mut q = sqlx::query(&sql);
            for arg in a.args(&self.s.queue, chunk) {
                q = q.bind(arg);
            }
            let row = q.fetch_one(&mut *conn).await?;
            for (i, id) in chunk.iter().enumerate() {
                if row.try_get::<Option<i64>, _>(i)? == Some(1) {
                    got.push(id.clone());
                }
            }
        }
        Ok(got)
    }

    /// Let the advisory keys of `ids` go, in one statement per chunk.
    pub(super) async fn unlock_many(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[&str],
    ) -> Result<()> {
        let d = self.s.d;
        let Some(a) = d.advisory() else {
            return Ok(());
        };
        for chunk in ids.chunks(LOCKS_PER_STATEMENT) {
            let sql = a.unlock_sql(d, chunk.len());
            let mut q = sqlx::query(&sql);
            for arg in a.args(&self.s.queue, chunk) {
                q = q.bind(arg);
            }
            q.execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Let the keys of a claim session's settled or released `ids` go: when
    /// the session holds no other (`rest` false), every key of its connection
    /// in one short statement — the connection is the session's alone and
    /// holds no key of any other — else those of `ids`.
    pub(super) async fn let_go(
        &self,
        conn: &mut sqlx::AnyConnection,
        ids: &[&str],
        rest: bool,
    ) -> Result<()> {
        match self.s.d.advisory() {
            Some(a) if !rest && !ids.is_empty() => {
                sqlx::query(a.unlock_all_sql()).execute(&mut *conn).await?;
                Ok(())
            }
            _ => self.unlock_many(conn, ids).await,
        }
    }
}
