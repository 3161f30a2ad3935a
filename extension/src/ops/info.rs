//! Queue stats, requeueing dead rows, and the statements a queue runs.

use crate::desc::{self, spi, PlanKey};
use crate::error::{bail, Result};
use crate::sql::{Form, Shape, Start, Write};
use pgrx::datum::Interval;
use pgrx::prelude::*;

pub struct Stats {
    pub queue: String,
    pub form: String,
    pub ready: i64,
    pub delayed: i64,
    pub in_flight: Option<i64>,
    pub dead: Option<i64>,
    pub oldest_ready_age: Option<Interval>,
}

/// Counts of one queue (`queue`), or of every registered queue whose table
/// the caller may read; a queue whose table is gone is left out with a
/// WARNING. The dead count is NULL when the queue has no dead letter or the
/// caller may not read its table.
pub fn stats(queue: Option<&str>) -> Result<Vec<Stats>> {
    Spi::connect_mut(|client| {
        let names: Vec<String> = match queue {
            Some(q) => vec![q.to_owned()],
            None => spi(client.select(
                &*format!(
                    "SELECT queue FROM {}.settle_queues ORDER BY queue",
                    desc::ext_schema(client)
                ),
                None,
                &[],
            ))
            .map(|r| spi(r.get::<String>(1)).unwrap())
            .collect(),
        };
        let mut out = Vec::new();
        for name in names {
            let q = match desc::queue(client, &name) {
                Ok(q) => q,
                // listing every queue: one whose table was dropped or changed
                // under it is left out, saying so, rather than hiding the others
                Err(crate::error::SettleError::InvalidDescriptor(m)) if queue.is_none() => {
                    pgrx::warning!("settle: queue_stats() leaves out queue \"{name}\": {m}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            // listing every queue: those the caller may not read are left out
            if queue.is_none() && !readable(client, q.rel) {
                continue;
            }
            out.push(counts(client, &q, name));
        }
        Ok(out)
    })
}

/// One queue's counts (see [`stats`]).
fn counts(client: &pgrx::spi::SpiClient<'_>, q: &desc::Queue, name: String) -> Stats {
    let plan = q.plan(client, PlanKey::Stats);
    let t = if q.shape.stats_binds_held_keys() {
        let keys: Vec<i64> = spi(client.select(crate::sql::HELD_KEYS, None, &[]))
            .filter_map(|r| spi(r.get::<i64>(1)))
            .collect();
        spi(client.select(&*plan, None, &[keys.into()]))
    } else {
        spi(client.select(&*plan, None, &[]))
    };
    let r = t.first();
    let dead_readable = q.dead_rel.is_none_or(|d| readable(client, d));
    let dead = if q.shape.dead.is_some() && dead_readable {
        spi(client
            .select(&*q.plan(client, PlanKey::DeadCount), None, &[])
            .and_then(|t| t.first().get_one::<i64>()))
    } else {
        None
    };
    Stats {
        queue: name,
        form: q.shape.form.name().to_owned(),
        ready: spi(r.get::<i64>(1)).unwrap_or(0),
        delayed: spi(r.get::<i64>(2)).unwrap_or(0),
        in_flight: spi(r.get::<i64>(3)),
        dead,
        oldest_ready_age: spi(r.get::<Interval>(4)),
    }
}

/// Whether the caller may read table `rel` (USAGE on its schema, SELECT on it).
fn readable(client: &pgrx::spi::SpiClient<'_>, rel: pgrx::pg_sys::Oid) -> bool {
    spi(client
        .select(
            "SELECT pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE') \
               AND pg_catalog.has_table_privilege(c.oid, 'SELECT') \
             FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false)
}

/// `ids` as a list, refusing a NULL element.
fn id_list(ids: Option<Vec<Option<String>>>) -> Result<Option<Vec<String>>> {
    let Some(v) = ids else { return Ok(None) };
    let mut o = Vec::with_capacity(v.len());
    for i in v {
        match i {
            Some(i) => o.push(i),
            None => bail!(InvalidArgument, "ids must not be NULL"),
        }
    }
    Ok(Some(o))
}

/// The queue, which must have a dead letter.
fn with_dead(client: &pgrx::spi::SpiClient<'_>, queue: &str) -> Result<std::rc::Rc<desc::Queue>> {
    let q = desc::queue(client, queue)?;
    if q.shape.dead.is_none() {
        bail!(
            InvalidArgument,
            "queue \"{queue}\" has no dead letter (register it with max_attempts and dead_letter)"
        );
    }
    Ok(q)
}

pub fn requeue_dead(queue: &str, ids: Option<Vec<Option<String>>>) -> Result<i64> {
    let ids = id_list(ids)?;
    Spi::connect_mut(|client| {
        let q = with_dead(client, queue)?;
        let plan = q.plan(client, PlanKey::Requeue);
        let t = spi(client.update(&*plan, None, &[ids.into()]));
        if t.len() > 0 {
            // the rows keep their ids, below where this session's claims start
            crate::mark::rescan(queue);
        }
        Ok(t.len() as i64)
    })
}

/// A dead row: its id, attempt and the whole row.
pub type DeadRow = (String, Option<i32>, pgrx::JsonB);

pub fn dead_rows(
    queue: &str,
    limit: i64,
    ids: Option<Vec<Option<String>>>,
) -> Result<Vec<DeadRow>> {
    if limit < 0 {
        bail!(InvalidArgument, "lim must not be negative, got {limit}");
    }
    let ids = id_list(ids)?;
    Spi::connect(|client| {
        let q = with_dead(client, queue)?;
        let plan = q.plan(client, PlanKey::DeadRows);
        let t = spi(client.select(&*plan, None, &[limit.into(), ids.into()]));
        Ok(t.map(|r| {
            (
                spi(r.get::<String>(1)).unwrap(),
                spi(r.get::<i32>(2)),
                spi(r.get::<pgrx::JsonB>(3)).unwrap(),
            )
        })
        .collect())
    })
}

pub fn purge_dead(
    queue: &str,
    older_than: Option<Interval>,
    ids: Option<Vec<Option<String>>>,
) -> Result<i64> {
    let ids = id_list(ids)?;
    if older_than.is_none() && ids.is_none() {
        bail!(
            InvalidArgument,
            "give older_than or ids (older_than => '0' purges every dead row)"
        );
    }
    Spi::connect_mut(|client| {
        let q = with_dead(client, queue)?;
        if older_than.is_some() && q.shape.created_at.is_none() {
            bail!(InvalidArgument, "queue \"{queue}\" has no created_at column to measure a dead row's age by: purge it by ids");
        }
        let plan = q.plan(client, PlanKey::PurgeDead);
        let t = spi(client.update(&*plan, None, &[older_than.into(), ids.into()]));
        Ok(t.len() as i64)
    })
}

/// Every statement of a queue, named (see queue_sql()).
pub fn statements(s: &crate::sql::Shape) -> Vec<(String, String)> {
    let mut v = Vec::new();
    match s.form {
        Form::RowLock => {
            v.push(("claim".into(), s.claim_row_lock(false, false, None)));
            v.push(("claim_again".into(), s.claim_row_lock(true, false, None)));
            v.push(("claim_from".into(), s.claim_row_lock(false, true, None)));
            v.push((
                "claim_again_from".into(),
                s.claim_row_lock(true, true, None),
            ));
        }
        Form::Lease => {
            v.push(("claim".into(), s.take(false, None)));
            v.push(("claim_from".into(), s.take(true, None)));
        }
        Form::Advisory => {
            v.push((
                "claim_candidates".into(),
                s.advisory_candidates(Start::Bottom, None),
            ));
            v.push((
                "claim_candidates_from".into(),
                s.advisory_candidates(Start::From, None),
            ));
            v.push((
                "claim_candidates_after".into(),
                s.advisory_candidates(Start::After, None),
            ));
            v.push(("claim_take".into(), s.take(false, None)));
        }
    }
    if s.walks_keys() {
        match s.form {
            Form::RowLock => {
                v.push(("claim_keys".into(), s.claim_row_lock_heads(false, None)));
                v.push((
                    "claim_keys_again".into(),
                    s.claim_row_lock_heads(true, None),
                ));
            }
            Form::Lease => v.push(("claim_keys".into(), s.take_heads(None))),
            Form::Advisory => {
                v.push((
                    "claim_keys_candidates".into(),
                    s.advisory_candidates_heads(Start::Bottom, None),
                ));
                v.push((
                    "claim_keys_candidates_after".into(),
                    s.advisory_candidates_heads(Start::After, None),
                ));
            }
        }
        v.push(("key_count".into(), s.key_count()));
    }
    if s.can_bound_keyed_read() {
        // the claim in id order as it reads bounded (its other starts alike)
        let b = Shape {
            bounded_read: true,
            ..s.clone()
        };
        v.push(match s.form {
            Form::RowLock => ("claim_bounded".into(), b.claim_row_lock(false, false, None)),
            Form::Lease => ("claim_bounded".into(), b.take(false, None)),
            Form::Advisory => (
                "claim_candidates_bounded".into(),
                b.advisory_candidates(Start::Bottom, None),
            ),
        });
        v.push(("key_read_extent".into(), s.keyed_read_extent(false, false)));
        v.push((
            "key_read_extent_from".into(),
            s.keyed_read_extent(true, false),
        ));
        if s.form == Form::RowLock {
            v.push((
                "key_read_extent_again".into(),
                s.keyed_read_extent(false, true),
            ));
            v.push((
                "key_read_extent_again_from".into(),
                s.keyed_read_extent(true, true),
            ));
        }
    }
    if let Some(m) = s.move_taken_dead() {
        v.push(("claim_move_dead".into(), m));
    }
    if s.moves_dead_apart() {
        if s.form != Form::RowLock {
            v.push((
                "claim_dead_copy".into(),
                s.dead_copy(true).unwrap_or_default(),
            ));
        }
        v.push(("dead_copy".into(), s.dead_copy(false).unwrap_or_default()));
        v.push(("dead_delete".into(), s.dead_delete()));
    }
    v.push(("ack_one".into(), s.ack_one()));
    v.push(("ack_many".into(), s.ack_many()));
    if s.form == Form::Lease {
        v.push(("ack_many_one_token".into(), s.ack_many_one_token()));
    }
    if s.by_ctid() {
        v.push(("ack_tids".into(), s.ack_tids()));
    }
    v.push(("ack".into(), s.settle(Write::Ack)));
    v.push(("retry".into(), s.settle(Write::Retry)));
    if s.retry_after.is_some() {
        v.push(("retry_after".into(), s.settle(Write::RetryAfter)));
    }
    if s.form != Form::RowLock {
        v.push(("release".into(), s.settle(Write::Release)));
    }
    if s.form == Form::Lease {
        v.push(("extend".into(), s.extend()));
    }
    v.push(("custom_check".into(), s.settle(Write::HeldOnly)));
    v.push(("stats".into(), s.stats()));
    if let Some(c) = s.dead_count() {
        v.push(("dead_count".into(), c));
    }
    if let Some(r) = s.requeue_dead() {
        v.push(("requeue_dead".into(), r));
    }
    if let Some(r) = s.dead_rows() {
        v.push(("dead_rows".into(), r));
    }
    if let Some(r) = s.purge_dead() {
        v.push(("purge_dead".into(), r));
    }
    v
}
