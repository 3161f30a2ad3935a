//! The sparklines' data: every queue's backlog sampled from `queue_stats`
//! at the dashboard's interval, kept for the last [`KEEP`] samples. A
//! queue's throughput between two samples is how far its backlog (ready,
//! delayed and in flight) fell per second — net of rows added meanwhile,
//! which is all the counts can tell.

use super::App;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Samples kept per queue (with a 2 s interval, two minutes).
pub const KEEP: usize = 61;

#[derive(Default)]
pub struct Samples {
    by_queue: Mutex<HashMap<String, VecDeque<(Instant, i64)>>>,
}

impl Samples {
    pub fn add(&self, at: Instant, backlogs: &[(String, i64)]) {
        let mut m = self.by_queue.lock().unwrap();
        m.retain(|q, _| backlogs.iter().any(|(n, _)| n == q));
        for (q, b) in backlogs {
            let v = m.entry(q.clone()).or_default();
            v.push_back((at, *b));
            while v.len() > KEEP {
                v.pop_front();
            }
        }
    }

    /// Per queue, rows drained per second between consecutive samples, oldest first.
    pub fn rates(&self) -> HashMap<String, Vec<f64>> {
        let m = self.by_queue.lock().unwrap();
        m.iter()
            .map(|(q, v)| {
                let r = v
                    .iter()
                    .zip(v.iter().skip(1))
                    .map(|((t0, b0), (t1, b1))| {
                        let dt = t1.duration_since(*t0).as_secs_f64();
                        if dt > 0.0 {
                            ((b0 - b1).max(0) as f64) / dt
                        } else {
                            0.0
                        }
                    })
                    .collect();
                (q.clone(), r)
            })
            .collect()
    }
}

pub async fn run(app: Arc<App>) {
    let mut tick = tokio::time::interval(app.sample_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // a failed sample leaves a gap; the pages report the error themselves
        if let Ok(qs) = app.admin.queues().await {
            let b: Vec<(String, i64)> = qs
                .iter()
                .map(|q| {
                    (
                        q.name.clone(),
                        q.stats.ready + q.stats.delayed + q.stats.in_flight.unwrap_or(0),
                    )
                })
                .collect();
            app.samples.add(Instant::now(), &b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn drained_per_second() {
        let s = Samples::default();
        let t = Instant::now();
        s.add(t, &[("a".into(), 100)]);
        s.add(t + Duration::from_secs(2), &[("a".into(), 60)]);
        s.add(t + Duration::from_secs(4), &[("a".into(), 80)]);
        assert_eq!(s.rates()["a"], vec![20.0, 0.0]);
        s.add(t + Duration::from_secs(6), &[("b".into(), 1)]);
        assert!(!s.rates().contains_key("a"), "a dropped queue is forgotten");
    }
}
