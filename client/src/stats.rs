//! A queue's counts, as every backend reports them.

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
}
