//! The portable path's state for one queue: its connections and resolved descriptor,
//! and the helpers every part of the path shares.

use super::sql::Shape;
use crate::backend::combine::Combiner;
use crate::error::{Error, Result};
use crate::meters::Meters;
use crate::queue::Queue;
use sqlx::{Row, ValueRef};
use std::time::Duration;

/// The portable path for one queue.
pub(crate) struct Engine {
    pub(super) conns: super::conns::Conns,
    /// the resolved descriptor, whose statements the path runs
    pub(super) s: Shape,
    pub(super) queue: Queue,
    pub(super) acks: Combiner<i64>,
    /// where this client's claims start
    pub(super) mark: super::mark::Mark,
    /// how many keys this client last counted in the queue
    pub(super) keys: super::keys::KeyCount,
    /// when this client last saw rows wait behind their heads
    pub(super) waited: super::keys::Waited,
    /// how many candidates' keys this client's last advisory claim that tried
    /// them after its read found held by other sessions
    pub(super) held_lately: std::sync::atomic::AtomicUsize,
    pub(crate) meters: Meters,
    /// statement texts built once (see [`Texts`](super::texts::Texts))
    pub(super) texts: super::texts::Texts,
}

impl Engine {
    /// A retry at max_attempts moved the row (the settle's result counts it).
    pub(super) fn warn_dead(&self, id: &str) {
        tracing::warn!(queue = %self.s.queue, id = %id, max_attempts = self.s.max.unwrap_or(0), "max_attempts reached: moved to the dead letter");
    }

    /// A claim moved a crash-looping row to the dead letter instead of
    /// delivering it: reported here, since no settle will.
    pub(super) fn dead_at_claim(&self, id: &str) {
        tracing::warn!(queue = %self.s.queue, id = %id, max_attempts = self.s.max.unwrap_or(0), "max_attempts reached without an outcome (a crash loop): moved to the dead letter at claim");
        self.meters.dead_lettered().increment(1);
    }
}

pub(super) async fn exec_with_id(
    conn: &mut sqlx::AnyConnection,
    sql: &str,
    id: &str,
) -> Result<u64> {
    Ok(sqlx::query(sql)
        .bind(id)
        .execute(conn)
        .await?
        .rows_affected())
}

/// Run `f` again (up to 4 more times) while it fails as a deadlock victim
/// (InnoDB, SQLSTATE 40001). Only for work in a transaction of its own: the
/// database rolled the victim's transaction back whole, so it wrote and holds
/// nothing, and running it again can neither lose nor duplicate a delivery.
pub(super) async fn again_if_deadlock<T, F, Fut>(mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.code() == Some("40001") && tries < 4 => {
                tries += 1;
                tracing::debug!(tries, "settle: a deadlock victim, running it again");
                tokio::time::sleep(Duration::from_millis(tries)).await;
            }
            r => return r,
        }
    }
}

/// A text column that may be NULL (see [`text`]).
pub(super) fn opt_text(r: &sqlx::any::AnyRow, i: usize) -> Result<Option<String>> {
    let v = r.try_get_raw(i)?;
    if v.is_null() {
        return Ok(None);
    }
    // asked by type: a failed `try_get` formats an error message, per row
    if <str as sqlx::Type<sqlx::Any>>::compatible(&v.type_info()) {
        return Ok(Some(r.try_get::<&str, _>(i)?.to_owned()));
    }
    let b: &[u8] = r.try_get(i)?;
    std::str::from_utf8(b)
        .map(|s| Some(s.to_owned()))
        .map_err(|e| Error::invalid(format!("column {i} is not UTF-8: {e}")))
}

/// A text column; MariaDB sends long text (JSON, LONGTEXT) with a BLOB wire
/// type, which sqlx's Any driver hands over as bytes.
pub(super) fn text(r: &sqlx::any::AnyRow, i: usize) -> Result<String> {
    opt_text(r, i)?.ok_or_else(|| Error::invalid(format!("column {i} is NULL")))
}
