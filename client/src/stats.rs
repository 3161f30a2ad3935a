//! What operators read about a queue, as every backend reports it: its
//! counts, its dead rows, and the health of its table.

use std::time::Duration;

/// Counts of a queue (`queue_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// rows a claim could take now
    pub ready: i64,
    /// rows waiting for their retry_after
    pub delayed: i64,
    /// rows held by a delivery (lease, advisory); `None` for row_lock
    pub in_flight: Option<i64>,
    /// rows in the dead letter; `None` without one
    pub dead: Option<i64>,
    /// how long the oldest ready row has waited (by its created_at column);
    /// `None` without that column or without ready rows
    pub oldest_ready_age: Option<Duration>,
}

/// A dead-lettered row: its id, its attempt counter and the whole row as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct DeadRow {
    /// the row's id, as text
    pub id: String,
    /// its attempt counter (the deliveries it had)
    pub attempt: Option<i64>,
    /// every column, by name (a text column that holds JSON is that JSON)
    pub row: serde_json::Value,
}

/// A registered queue and its counts.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueInfo {
    /// the queue's name
    pub name: String,
    /// its claim form: `row_lock`, `lease` or `advisory`
    pub form: String,
    /// its counts
    pub stats: Stats,
}

/// What decides how much a claim walks over (`queue_health`): the queue
/// table's dead row versions and vacuum, and what holds the xmin horizon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// the queue's name
    pub name: String,
    /// row versions of its table vacuum has not removed (yet), per the
    /// server's statistics; queues sharing a table report the same
    pub dead_tuples: Option<i64>,
    /// live rows, per the same statistics
    pub live_tuples: Option<i64>,
    /// the table's size and its indexes', bytes
    pub table_bytes: Option<i64>,
    /// its indexes' size, bytes
    pub index_bytes: Option<i64>,
    /// how long ago its last vacuum or autovacuum ended
    pub since_vacuum: Option<Duration>,
    /// the oldest holder of the database's xmin horizon, if any
    pub horizon: Option<HorizonHolder>,
}

/// What holds back the xmin horizon (`queue_horizon`): while it does, vacuum
/// removes no row version deleted after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HorizonHolder {
    /// who: `session 4242 report@psql (idle in transaction)`,
    /// `replication slot standby1 (inactive)`, ...
    pub holder: String,
    /// transactions since the xmin it holds
    pub xmin_age: i64,
    /// how long it has held it, where the server says (a session's open
    /// transaction, a prepared transaction)
    pub age: Option<Duration>,
}

/// Microseconds (as the databases report an age) as a duration; a negative
/// age (clocks apart) is none.
pub(crate) fn age_from_micros(us: Option<i64>) -> Option<Duration> {
    us.map(|u| Duration::from_micros(u.max(0) as u64))
}
