//! The client's metrics, through the [`metrics`](https://docs.rs/metrics) crate's facade: the
//! application installs a recorder (a Prometheus or OpenTelemetry exporter)
//! and every client created after it reports there. Handles are registered
//! once per client, so a claim or settle costs no label allocation. Names and
//! labels: docs/operations.md, "Metrics".

use crate::error::{Error, Result};
use crate::outcome::Settled;
use crate::stats::Health;
use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use std::time::Duration;

/// Deliveries claimed. Labels: `queue`.
pub const CLAIMED: &str = "settle_claimed_total";
/// Deliveries settled, by what was written. Labels: `queue`, `outcome`
/// (`deleted`, `marked`, `retried`, `delayed`, `dead_lettered`, `released`, `custom`).
pub const SETTLED: &str = "settle_settled_total";
/// Settles refused because the lease had passed to a later claim. Labels: `queue`.
pub const LEASE_LOST: &str = "settle_lease_lost_total";
/// Settles refused because the row was not held by the delivery's session. Labels: `queue`.
pub const NOT_HELD: &str = "settle_not_held_total";
/// Handlers that panicked (their deliveries were given back). Labels: `queue`.
pub const HANDLER_PANICS: &str = "settle_handler_panics_total";
/// Claims and settles that failed otherwise (database, pool, …). Labels: `queue`, `op` (`claim`, `settle`).
pub const ERRORS: &str = "settle_errors_total";
/// Seconds a claim took (one statement, or the portable path's round trips). Labels: `queue`.
pub const CLAIM_SECONDS: &str = "settle_claim_seconds";
/// Seconds a handler ran, from the worker's handing it the delivery until it
/// returned (its settle included). Labels: `queue`.
pub const HANDLER_SECONDS: &str = "settle_handler_seconds";
/// Seconds a settle took (for a batch settle, the whole batch). Labels: `queue`.
pub const SETTLE_SECONDS: &str = "settle_settle_seconds";

/// Row versions of the queue's table that vacuum has not removed, per the
/// server's statistics (`queue_health`), sampled by a running worker. Labels: `queue`.
pub const DEAD_TUPLES: &str = "settle_dead_tuples";
/// Seconds the oldest holder of the database's xmin horizon has held it
/// (`queue_health`; 0 when nothing holds it), sampled by a running worker. Labels: `queue`.
pub const HORIZON_AGE_SECONDS: &str = "settle_horizon_age_seconds";

const OUTCOMES: [(Settled, &str); 7] = [
    (Settled::Deleted, "deleted"),
    (Settled::Marked, "marked"),
    (Settled::Retried, "retried"),
    (Settled::Delayed, "delayed"),
    (Settled::DeadLettered, "dead_lettered"),
    (Settled::Released, "released"),
    (Settled::Custom, "custom"),
];

/// The handles of one queue's metrics.
pub(crate) struct Meters {
    claimed: Counter,
    settled: [Counter; 7],
    lease_lost: Counter,
    not_held: Counter,
    panics: Counter,
    claim_errors: Counter,
    settle_errors: Counter,
    claim_seconds: Histogram,
    handler_seconds: Histogram,
    settle_seconds: Histogram,
    dead_tuples: Gauge,
    horizon_age: Gauge,
}

impl Meters {
    pub(crate) fn new(queue: &str) -> Meters {
        let q = queue.to_owned();
        Meters {
            claimed: counter!(CLAIMED, "queue" => q.clone()),
            settled: OUTCOMES.map(|(_, o)| counter!(SETTLED, "queue" => q.clone(), "outcome" => o)),
            lease_lost: counter!(LEASE_LOST, "queue" => q.clone()),
            not_held: counter!(NOT_HELD, "queue" => q.clone()),
            panics: counter!(HANDLER_PANICS, "queue" => q.clone()),
            claim_errors: counter!(ERRORS, "queue" => q.clone(), "op" => "claim"),
            settle_errors: counter!(ERRORS, "queue" => q.clone(), "op" => "settle"),
            claim_seconds: histogram!(CLAIM_SECONDS, "queue" => q.clone()),
            handler_seconds: histogram!(HANDLER_SECONDS, "queue" => q.clone()),
            settle_seconds: histogram!(SETTLE_SECONDS, "queue" => q.clone()),
            dead_tuples: gauge!(DEAD_TUPLES, "queue" => q.clone()),
            horizon_age: gauge!(HORIZON_AGE_SECONDS, "queue" => q),
        }
    }

    pub(crate) fn claim<T>(&self, r: &Result<Vec<T>>, took: Duration) {
        self.claim_seconds.record(took.as_secs_f64());
        match r {
            Ok(v) => self.claimed.increment(v.len() as u64),
            Err(_) => self.claim_errors.increment(1),
        }
    }

    /// Rows claimed by a settle's own statement (the worker's chain): counted
    /// as claimed, timed with the settle.
    pub(crate) fn claimed_in_settle(&self, rows: u64) {
        self.claimed.increment(rows);
    }

    /// One settle's result (of a batch: each delivery's).
    pub(crate) fn settled(&self, r: &Result<Settled>) {
        match r {
            Ok(s) => {
                let i = OUTCOMES
                    .iter()
                    .position(|(o, _)| o == s)
                    .expect("every outcome");
                self.settled[i].increment(1);
            }
            Err(Error::LeaseLost(_)) => self.lease_lost.increment(1),
            Err(Error::NotHeld(_)) => self.not_held.increment(1),
            Err(_) => self.settle_errors.increment(1),
        }
    }

    /// The dead-lettered counter, for what a claim moves to the dead letter
    /// (crash loops), which no settle reports.
    pub(crate) fn dead_lettered(&self) -> Counter {
        let i = OUTCOMES
            .iter()
            .position(|(o, _)| *o == Settled::DeadLettered)
            .expect("every outcome");
        self.settled[i].clone()
    }

    pub(crate) fn settle_took(&self, took: Duration) {
        self.settle_seconds.record(took.as_secs_f64());
    }

    /// A sample of the queue's [`Health`].
    pub(crate) fn health(&self, h: &Health) {
        self.dead_tuples.set(h.dead_tuples.unwrap_or(0) as f64);
        let held = h.horizon.as_ref().and_then(|x| x.age);
        self.horizon_age.set(held.map_or(0.0, |d| d.as_secs_f64()));
    }

    pub(crate) fn handler(&self, took: Duration, panicked: bool) {
        self.handler_seconds.record(took.as_secs_f64());
        if panicked {
            self.panics.increment(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn health_sets_the_gauges() {
        let rec = DebuggingRecorder::new();
        let snap = rec.snapshotter();
        let m = metrics::with_local_recorder(&rec, || Meters::new("q"));
        m.health(&Health {
            name: "q".into(),
            dead_tuples: Some(1200),
            live_tuples: Some(3),
            table_bytes: Some(8192),
            index_bytes: Some(8192),
            since_vacuum: None,
            horizon: Some(crate::stats::HorizonHolder {
                holder: "session 1 x@y (idle in transaction)".into(),
                xmin_age: 5000,
                age: Some(Duration::from_secs(90)),
            }),
        });
        let mut got: Vec<(String, f64)> = snap
            .snapshot()
            .into_vec()
            .into_iter()
            .filter_map(|(k, _, _, v)| match v {
                DebugValue::Gauge(g) => Some((k.key().name().to_owned(), g.into_inner())),
                _ => None,
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                (DEAD_TUPLES.to_owned(), 1200.0),
                (HORIZON_AGE_SECONDS.to_owned(), 90.0)
            ]
        );
    }

    #[test]
    fn each_settle_result_has_its_counter() {
        let rec = DebuggingRecorder::new();
        let snap = rec.snapshotter();
        let m = metrics::with_local_recorder(&rec, || Meters::new("q"));
        m.settled(&Ok(Settled::DeadLettered));
        m.settled(&Err(Error::lease_lost("q", "1")));
        m.settled(&Err(Error::not_held("q", "2")));
        m.settled(&Err(Error::not_held("q", "3")));
        m.settled(&Err(Error::invalid("x")));
        let mut got: Vec<(String, Vec<String>, u64)> = snap
            .snapshot()
            .into_vec()
            .into_iter()
            .filter_map(|(k, _, _, v)| match v {
                DebugValue::Counter(n) if n > 0 => Some((
                    k.key().name().to_owned(),
                    k.key()
                        .labels()
                        .map(|l| format!("{}={}", l.key(), l.value()))
                        .collect(),
                    n,
                )),
                _ => None,
            })
            .collect();
        got.sort();
        let want =
            |n: &str, l: &[&str], c| (n.to_owned(), l.iter().map(|s| s.to_string()).collect(), c);
        assert_eq!(
            got,
            vec![
                want(ERRORS, &["queue=q", "op=settle"], 1),
                want(LEASE_LOST, &["queue=q"], 1),
                want(NOT_HELD, &["queue=q"], 2),
                want(SETTLED, &["queue=q", "outcome=dead_lettered"], 1),
            ]
        );
    }
}
