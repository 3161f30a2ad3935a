//! The operator's calls on the extension backend: every registered queue's
//! counts, its dead rows, requeue and purge, the statements it runs. Each is
//! one call of the extension's SQL API, sent unnamed (an operator's call is
//! rare, and so works through any pooler); none registers or changes a queue.

use super::connect::Statements;
use super::sql::*;
use crate::error::{Error, Result};
use crate::outcome::micros;
use crate::stats::{age_from_micros, DeadRow, Health, HorizonHolder, QueueInfo, Stats};
use deadpool_postgres::Pool;
use std::time::Duration;

const UNNAMED: Statements = Statements::Unnamed;

/// A row of [`STATS`] / [`QUEUES`] as counts.
pub(crate) fn stats_of(r: &tokio_postgres::Row) -> Stats {
    Stats {
        ready: r.get(2),
        delayed: r.get(3),
        in_flight: r.get(4),
        dead: r.get(5),
        oldest_ready_age: age_from_micros(r.get(6)),
    }
}

pub(crate) async fn queues(pool: &Pool) -> Result<Vec<QueueInfo>> {
    let c = pool.get().await?;
    Ok(UNNAMED
        .query(&c, &QUEUES, &[])
        .await?
        .iter()
        .map(|r| QueueInfo {
            name: r.get(0),
            form: r.get(1),
            stats: stats_of(r),
        })
        .collect())
}

/// The [`Health`] of `queue`, or of every registered queue; [`Error::Extension`]
/// before 0.7.0.
pub(crate) async fn health(pool: &Pool, version: &str, queue: Option<&str>) -> Result<Vec<Health>> {
    if !super::version_at_least(version, HEALTH_SINCE) {
        return Err(Error::Extension {
            installed: Some(version.to_owned()),
            required: HEALTH_SINCE,
        });
    }
    let c = pool.get().await?;
    Ok(UNNAMED
        .query(&c, &HEALTH, &[&queue])
        .await?
        .iter()
        .map(|r| Health {
            name: r.get(0),
            dead_tuples: r.get(1),
            live_tuples: r.get(2),
            table_bytes: r.get(3),
            index_bytes: r.get(4),
            since_vacuum: age_from_micros(r.get(5)),
            horizon: r.get::<_, Option<String>>(6).map(|holder| HorizonHolder {
                holder,
                xmin_age: r.get::<_, Option<i32>>(7).map_or(0, i64::from),
                age: age_from_micros(r.get(8)),
            }),
        })
        .collect())
}

pub(crate) async fn dead_rows(
    pool: &Pool,
    queue: &str,
    limit: i64,
    ids: Option<&[String]>,
) -> Result<Vec<DeadRow>> {
    let c = pool.get().await?;
    Ok(UNNAMED
        .query(&c, &DEAD_ROWS, &[&queue, &limit, &ids])
        .await?
        .iter()
        .map(|r| DeadRow {
            id: r.get(0),
            attempt: r.get::<_, Option<i32>>(1).map(i64::from),
            row: r.get(2),
        })
        .collect())
}

pub(crate) async fn requeue_dead(pool: &Pool, queue: &str, ids: Option<&[String]>) -> Result<i64> {
    let c = pool.get().await?;
    Ok(UNNAMED
        .query_one(&c, &REQUEUE_DEAD_IDS, &[&queue, &ids])
        .await?
        .get(0))
}

pub(crate) async fn purge_dead(
    pool: &Pool,
    queue: &str,
    older_than: Option<Duration>,
    ids: Option<&[String]>,
) -> Result<i64> {
    let c = pool.get().await?;
    let older: Option<i64> = older_than.map(micros);
    Ok(UNNAMED
        .query_one(&c, &PURGE_DEAD, &[&queue, &older, &ids])
        .await?
        .get(0))
}

pub(crate) async fn statements(pool: &Pool, queue: &str) -> Result<Vec<(String, String)>> {
    let c = pool.get().await?;
    Ok(UNNAMED
        .query(&c, &STATEMENTS, &[&queue])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}
