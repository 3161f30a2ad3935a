//! What operators read about a queue, as every backend reports it: its
//! counts and its dead rows.

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

/// Microseconds (as the databases report an age) as a duration; a negative
/// age (clocks apart) is none.
pub(crate) fn age_from_micros(us: Option<i64>) -> Option<Duration> {
    us.map(|u| Duration::from_micros(u.max(0) as u64))
}
