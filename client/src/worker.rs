//! A worker: claim in batches, run a handler per delivery with bounded
//! concurrency, wake on NOTIFY (polling as a fallback), stop gracefully — on
//! one queue ([`Client::run`]) or round robin over several ([`QueueSet`]).

use crate::client::Client;
use crate::delivery::{Delivery, NextSlot};
use crate::error::Result;
use crate::outcome::Settled;
use crate::queue::Form;
use futures_util::FutureExt;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Most deliveries in flight at once.
    pub concurrency: usize,
    /// Most rows one claim takes.
    pub batch: usize,
    /// How often to look for work when nothing woke the worker (NOTIFY is the
    /// fast path; polling also catches rows whose retry_after passed).
    pub poll_interval: Duration,
    /// How long a graceful stop waits for running handlers before dropping
    /// (and so giving back) their deliveries. `None`: wait for them all.
    pub drain_timeout: Option<Duration>,
    /// LISTEN for `NOTIFY settle, '<queue>'` (sent by `queue_notify_trigger`).
    pub listen: bool,
    /// Longest wait before claiming again from a queue whose claims keep
    /// failing (database down, table or column gone): the wait starts at
    /// `poll_interval`, doubles with each failure in a row up to this, and is
    /// jittered so that workers which lost the database together do not
    /// return in step.
    pub max_backoff: Duration,
    /// How often to sample each queue's health (`queue_health`: dead row
    /// versions, the xmin horizon) into the `settle_dead_tuples` and
    /// `settle_horizon_age_seconds` gauges. `None`: never. Needs extension
    /// 0.7.0; elsewhere the worker does not sample.
    pub health_every: Option<Duration>,
    /// At `batch` 1, on one queue ([`Client::run`]; a [`QueueSet`]'s claims
    /// take turns instead), where the backend can
    /// ([`crate::Capabilities::settle_and_claim`]: the lease form on the
    /// extension), a delivery's settle claims the next row for its handler
    /// slot in the same statement (`queue_complete_and_claim`): one round trip
    /// per job instead of two. The next row's lease starts at that settle, so
    /// a handler that works on after settling holds it meanwhile.
    pub chain: bool,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 8,
            batch: 10,
            poll_interval: Duration::from_millis(500),
            drain_timeout: None,
            listen: true,
            max_backoff: Duration::from_secs(10),
            health_every: Some(Duration::from_secs(30)),
            chain: true,
        }
    }
}

/// What a worker did, counted by how deliveries ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// settled, by what was written
    pub settled: HashMap<Settled, u64>,
    /// handlers that panicked (their deliveries were given back)
    pub panicked: u64,
    /// deliveries given back because they were dropped unsettled: by a
    /// handler that returned without settling its delivery, or still running
    /// or waiting when [`WorkerOptions::drain_timeout`] ran out (those of
    /// handlers that panicked are counted in `panicked`)
    pub unsettled: u64,
    /// settle calls that failed (lease lost, not held, database errors)
    pub errors: u64,
    /// claims that failed (the worker backed that queue off and went on)
    pub claim_errors: u64,
    /// deliveries claimed by the settle of the one before
    /// ([`WorkerOptions::chain`])
    pub chained: u64,
}

impl WorkerReport {
    /// Deliveries settled with `s`.
    pub fn count(&self, s: Settled) -> u64 {
        self.settled.get(&s).copied().unwrap_or(0)
    }
}

/// How one handler run ended, as the handler reports it: settle the delivery
/// yourself and return the result (`d.ack().await`), or drop it to give it back.
pub type HandlerResult = Result<Settled>;

impl Client {
    /// Run `handler` on every delivery until `shutdown` resolves, then stop
    /// claiming, let running handlers finish (see
    /// [`WorkerOptions::drain_timeout`]) and return what happened.
    ///
    /// The handler receives the delivery and settles it (`ack`, `retry_after`, …).
    /// A handler that panics or returns without settling gives its delivery back;
    /// the worker keeps going. In the row_lock form the deliveries of one claim
    /// share a transaction, so their handlers run one after another.
    pub async fn run<H, Fut>(
        &self,
        opts: WorkerOptions,
        shutdown: impl Future<Output = ()>,
        handler: H,
    ) -> Result<WorkerReport>
    where
        H: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        work(std::slice::from_ref(self), opts, shutdown, handler).await
    }
}

/// Several queues worked by one worker, with one concurrency limit: each
/// claim goes to the next queue in turn, skipping queues that have nothing
/// ready (or whose claim fails), so a busy queue cannot starve the others and
/// an empty one costs one claim per round. This is how one logical queue split
/// into groups (`jobs:0` … `jobs:N-1`, on different Citus workers or just
/// spread over a table's partial indexes) is worked as one.
#[derive(Clone, Debug)]
pub struct QueueSet {
    clients: Vec<Client>,
}

impl QueueSet {
    /// A set of the queues these clients work (at least one).
    pub fn new(clients: impl IntoIterator<Item = Client>) -> QueueSet {
        let clients: Vec<Client> = clients.into_iter().collect();
        assert!(
            !clients.is_empty(),
            "settle: a QueueSet needs at least one queue"
        );
        QueueSet { clients }
    }

    /// The clients, in claim order.
    pub fn clients(&self) -> &[Client] {
        &self.clients
    }

    /// Like [`Client::run`], claiming round robin across the set. The handler
    /// tells deliveries apart by [`Delivery::queue`].
    pub async fn run<H, Fut>(
        &self,
        opts: WorkerOptions,
        shutdown: impl Future<Output = ()>,
        handler: H,
    ) -> Result<WorkerReport>
    where
        H: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        work(&self.clients, opts, shutdown, handler).await
    }
}

/// The claim failures in a row of one queue, and when to try it again.
#[derive(Clone, Debug, Default)]
struct Backoff {
    failures: u32,
    until: Option<Instant>,
}

impl Backoff {
    /// Count a failure; the wait before the next claim: `base` (10 ms at
    /// least) doubled per failure in a row, at most `max`, then scaled by a
    /// random factor in [0.5, 1) ("equal jitter").
    fn failed(&mut self, base: Duration, max: Duration) -> Duration {
        self.failures += 1;
        let base = base.max(Duration::from_millis(10));
        let doubled = base.saturating_mul(1 << (self.failures - 1).min(20));
        let wait = doubled
            .min(max.max(base))
            .mul_f64(0.5 + fastrand::f64() / 2.0);
        self.until = Some(Instant::now() + wait);
        wait
    }

    /// How long this queue still waits (`None`: it may be claimed now).
    fn left(&self, now: Instant) -> Option<Duration> {
        self.until.filter(|u| *u > now).map(|u| u - now)
    }
}

/// Claim from `clients` starting at `*next`: the first non-empty claim, with
/// the index of its client; `*next` moves past it. Queues backing off are
/// skipped; a failed claim starts or lengthens its queue's back-off. `None`
/// when every queue was empty, failed or backing off.
async fn claim_round(
    clients: &[Client],
    next: &mut usize,
    n: usize,
    backoff: &mut [Backoff],
    opts: &WorkerOptions,
    report: &Mutex<WorkerReport>,
) -> Option<(usize, Vec<Delivery>)> {
    let now = Instant::now();
    for k in 0..clients.len() {
        let i = (*next + k) % clients.len();
        if backoff[i].left(now).is_some() {
            continue;
        }
        let queue = &clients[i].queue().name;
        match clients[i].claim(n).await {
            Ok(d) => {
                if backoff[i].failures > 0 {
                    tracing::info!(queue = %queue, failures = backoff[i].failures, "claims work again");
                    backoff[i] = Backoff::default();
                }
                if !d.is_empty() {
                    *next = (i + 1) % clients.len();
                    return Some((i, d));
                }
            }
            Err(e) => {
                let wait = backoff[i].failed(opts.poll_interval, opts.max_backoff);
                tracing::warn!(queue = %queue, error = %e, failures = backoff[i].failures, retry_in = ?wait, "claim failed; backing off this queue");
                report.lock().unwrap().claim_errors += 1;
            }
        }
    }
    None
}

/// How long to wait when a round found nothing: the poll interval, or, when
/// every queue is backing off, until the first of them is due.
fn idle_wait(backoff: &[Backoff], poll: Duration) -> Duration {
    let now = Instant::now();
    backoff
        .iter()
        .map(|b| b.left(now).unwrap_or(poll))
        .min()
        .unwrap_or(poll)
}

async fn work<H, Fut>(
    clients: &[Client],
    opts: WorkerOptions,
    shutdown: impl Future<Output = ()>,
    handler: H,
) -> Result<WorkerReport>
where
    H: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    let handler = Arc::new(handler);
    let report = Arc::new(Mutex::new(WorkerReport::default()));
    // counted by the deliveries themselves when they are dropped unsettled
    let unsettled = Arc::new(AtomicU64::new(0));
    // set when the worker stops claiming, so that settles claim no more either
    let stopped = Arc::new(AtomicBool::new(false));
    // a QueueSet's claims take turns between its queues; a chain would keep a
    // slot on the queue it started on
    let chain = (opts.chain && opts.batch == 1 && clients.len() == 1).then_some(&stopped);
    let sem = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let wake = Arc::new(Notify::new());
    let mut tasks = JoinSet::new();
    let listeners: Vec<_> = if opts.listen {
        clients
            .iter()
            .filter_map(|c| c.listen(wake.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let samplers: Vec<_> = opts
        .health_every
        .map(|every| {
            clients
                .iter()
                .map(|c| tokio::spawn(sample_health(c.clone(), every)))
                .collect()
        })
        .unwrap_or_default();
    let mut next = 0;
    let mut backoff = vec![Backoff::default(); clients.len()];
    // after a claim that got every row it asked for, the next waits this long
    // (what that claim took, at most the poll interval) for half a batch of
    // free slots
    let mut gather: Option<Duration> = None;
    tokio::pin!(shutdown);
    loop {
        let Some(mut permits) = room(&sem, shutdown.as_mut(), &opts, gather).await else {
            break;
        };
        // reap finished tasks so the set does not grow
        while tasks.try_join_next().is_some() {}
        let (asked, start) = (permits.len(), Instant::now());
        let Some((from, deliveries)) =
            claim_round(clients, &mut next, asked, &mut backoff, &opts, &report).await
        else {
            // nothing ready anywhere (or every claim failed): wait
            drop(permits);
            gather = None;
            tokio::select! {
                _ = &mut shutdown => break,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(idle_wait(&backoff, opts.poll_interval)) => {}
            }
            continue;
        };
        gather = (deliveries.len() == asked).then(|| start.elapsed().min(opts.poll_interval));
        permits.truncate(deliveries.len());
        let from = &clients[from];
        let run = Run {
            handler: handler.clone(),
            report: report.clone(),
            unsettled: unsettled.clone(),
            chain: chain
                .filter(|_| from.capabilities().settle_and_claim)
                .cloned(),
            from: from.clone(),
        };
        run.spawn(&mut tasks, deliveries, permits);
    }
    // graceful stop: no more claims; finish or give back what is running
    stopped.store(true, Ordering::Release);
    for l in listeners.into_iter().chain(samplers) {
        l.abort();
    }
    drain(tasks, &report, opts.drain_timeout).await;
    let mut r = report.lock().unwrap().clone();
    r.unsettled = unsettled.load(Ordering::Relaxed);
    Ok(r)
}

/// Free handler slots for the next claim, `None` once `shutdown` resolves:
/// at least one, then every free one up to the batch. With `gather` (the
/// last claim got all it asked for, so more rows are likely ready), it first
/// waits up to that long for half a batch, so that handlers which finish
/// one by one are not each followed by a claim of one row: a wait no longer
/// than a claim costs a slot no more than the claim it saves.
async fn room<S: Future<Output = ()>>(
    sem: &Arc<Semaphore>,
    mut shutdown: std::pin::Pin<&mut S>,
    opts: &WorkerOptions,
    gather: Option<Duration>,
) -> Option<Vec<OwnedSemaphorePermit>> {
    let batch = opts.batch.max(1);
    let first = tokio::select! {
        biased;
        _ = &mut shutdown => return None,
        p = sem.clone().acquire_owned() => p.expect("semaphore is never closed"),
    };
    let mut permits = vec![first];
    if let Some(patience) = gather {
        let half = batch.min(opts.concurrency.max(1)).div_ceil(2);
        let until = tokio::time::Instant::now() + patience;
        while permits.len() < half {
            tokio::select! {
                biased;
                _ = &mut shutdown => return None,
                p = tokio::time::timeout_at(until, sem.clone().acquire_owned()) => match p {
                    Ok(p) => permits.push(p.expect("semaphore is never closed")),
                    Err(_) => break,
                },
            }
        }
    }
    while permits.len() < batch {
        match sem.clone().try_acquire_owned() {
            Ok(p) => permits.push(p),
            Err(_) => break,
        }
    }
    Some(permits)
}

/// Sample `client`'s queue health into its gauges every `every`, until
/// aborted; stops at once where there is no `queue_health`.
async fn sample_health(client: Client, every: Duration) {
    loop {
        match client.health().await {
            Ok(h) => client.meters().health(&h),
            Err(e @ (crate::Error::Unsupported(_) | crate::Error::Extension { .. })) => {
                tracing::debug!(queue = %client.queue().name, reason = %e, "no queue health to sample");
                return;
            }
            Err(e) => {
                tracing::debug!(queue = %client.queue().name, error = %e, "queue health not sampled")
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// What runs the handlers of one claim's deliveries.
struct Run<H> {
    handler: Arc<H>,
    report: Arc<Mutex<WorkerReport>>,
    /// the worker's count of deliveries dropped unsettled
    unsettled: Arc<AtomicU64>,
    /// the worker's stop flag, when each delivery's settle claims the next
    chain: Option<Arc<AtomicBool>>,
    from: Client,
}

impl<H, Fut> Run<H>
where
    H: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    /// One task per delivery, each freeing its permit when done (with the
    /// chain, when a settle claimed nothing more); a row_lock claim's
    /// deliveries share one transaction, so one task runs their handlers in
    /// order.
    fn spawn(
        self,
        tasks: &mut JoinSet<()>,
        deliveries: Vec<Delivery>,
        permits: Vec<OwnedSemaphorePermit>,
    ) {
        let run = Arc::new(self);
        if run.from.queue().form == Form::RowLock {
            tasks.spawn(async move {
                for d in deliveries {
                    run.one(d).await;
                }
                drop(permits);
            });
            return;
        }
        for (d, p) in deliveries.into_iter().zip(permits) {
            let run = run.clone();
            tasks.spawn(async move {
                run.chained(d).await;
                drop(p);
            });
        }
    }

    /// Run `first`, then, with the chain, each row its delivery's settle
    /// claimed, until one claims nothing.
    async fn chained(&self, first: Delivery) {
        let Some(stopped) = &self.chain else {
            return self.one(first).await;
        };
        let slot = Arc::new(NextSlot::new(stopped.clone()));
        let mut d = first;
        loop {
            self.one(d.claim_next_into(slot.clone())).await;
            let Some(row) = slot.take() else { return };
            self.report.lock().unwrap().chained += 1;
            d = Delivery::new(row);
        }
    }

    async fn one(&self, d: Delivery) {
        let d = d.count_unsettled_in(self.unsettled.clone());
        run_one(&*self.handler, d, &self.report, &self.from).await;
    }
}

/// Wait for the running handlers (a panic counted), at most `timeout`; then
/// abort the rest, which drops their deliveries and so gives them back (each
/// counted unsettled).
async fn drain(mut tasks: JoinSet<()>, report: &Mutex<WorkerReport>, timeout: Option<Duration>) {
    let finish = async {
        while let Some(r) = tasks.join_next().await {
            if let Err(e) = r {
                if e.is_panic() {
                    report.lock().unwrap().panicked += 1;
                }
            }
        }
    };
    let Some(t) = timeout else {
        return finish.await;
    };
    if tokio::time::timeout(t, finish).await.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        // give the spawned give-backs a moment to run
        tokio::task::yield_now().await;
    }
}

async fn run_one<H, Fut>(handler: &H, d: Delivery, report: &Mutex<WorkerReport>, from: &Client)
where
    H: Fn(Delivery) -> Fut + Send + Sync,
    Fut: Future<Output = HandlerResult> + Send,
{
    let start = std::time::Instant::now();
    let out = AssertUnwindSafe(handler(d)).catch_unwind().await;
    from.meters().handler(start.elapsed(), out.is_err());
    let mut r = report.lock().unwrap();
    match out {
        Ok(Ok(s)) => *r.settled.entry(s).or_default() += 1,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "settling a delivery failed");
            r.errors += 1;
        }
        Err(_) => {
            // the delivery was dropped while unwinding, which gave it back
            tracing::error!("a handler panicked; its delivery was given back");
            r.panicked += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter() {
        let (base, max) = (Duration::from_millis(100), Duration::from_millis(1000));
        let mut b = Backoff::default();
        for (n, full) in [100u64, 200, 400, 800, 1000, 1000].into_iter().enumerate() {
            let w = b.failed(base, max);
            assert_eq!(b.failures as usize, n + 1);
            let full = Duration::from_millis(full);
            assert!(
                w >= full / 2 && w < full,
                "failure {}: {w:?} for {full:?}",
                n + 1
            );
            assert!(b.left(Instant::now()).is_some());
        }
        // a cap below the poll interval never shortens the first wait
        let w = Backoff::default().failed(base, Duration::ZERO);
        assert!(w >= base / 2 && w < base, "{w:?}");
    }

    /// What `room` gives with `free` of `concurrency` slots free and the
    /// others freeing one every 10 ms: how many slots, after how long.
    async fn room_of(
        free: usize,
        concurrency: usize,
        batch: usize,
        gather: Option<Duration>,
    ) -> (usize, Duration) {
        let sem = Arc::new(Semaphore::new(concurrency));
        let held: Vec<_> = (free..concurrency)
            .map(|_| sem.clone().try_acquire_owned().unwrap())
            .collect();
        tokio::spawn(async move {
            for p in held {
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(p);
            }
        });
        let opts = WorkerOptions {
            concurrency,
            batch,
            ..Default::default()
        };
        let t = tokio::time::Instant::now();
        let never = std::pin::pin!(std::future::pending::<()>());
        let got = room(&sem, never, &opts, gather).await.expect("no stop");
        (got.len(), t.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn room_gathers_half_a_batch_for_as_long_as_a_claim_took() {
        let ms = Duration::from_millis;
        // no gather: the one free slot at once
        assert_eq!(room_of(1, 10, 10, None).await, (1, ms(0)));
        // gather: half of the batch as slots free, before the patience runs out
        assert_eq!(room_of(1, 10, 10, Some(ms(100))).await, (5, ms(40)));
        // no longer than the patience
        assert_eq!(room_of(1, 10, 10, Some(ms(25))).await, (3, ms(25)));
        // half of the concurrency when it is below the batch
        assert_eq!(room_of(1, 4, 10, Some(ms(100))).await, (2, ms(10)));
        // every free slot, up to the batch, without waiting
        assert_eq!(room_of(7, 10, 4, Some(ms(100))).await, (4, ms(0)));
        // a stop while gathering
        let sem = Arc::new(Semaphore::new(4));
        let _held: Vec<_> = (0..3)
            .map(|_| sem.clone().try_acquire_owned().unwrap())
            .collect();
        let stop = std::pin::pin!(tokio::time::sleep(ms(5)));
        let opts = WorkerOptions {
            concurrency: 4,
            batch: 4,
            ..Default::default()
        };
        assert!(room(&sem, stop, &opts, Some(ms(100))).await.is_none());
    }

    #[test]
    fn idle_waits_for_the_first_queue_due() {
        let poll = Duration::from_millis(500);
        let healthy = Backoff::default();
        let later = Backoff {
            failures: 3,
            until: Some(Instant::now() + Duration::from_secs(5)),
        };
        let sooner = Backoff {
            failures: 1,
            until: Some(Instant::now() + Duration::from_secs(2)),
        };
        assert_eq!(idle_wait(&[healthy.clone(), later.clone()], poll), poll);
        let w = idle_wait(&[later, sooner], poll);
        assert!(
            w > Duration::from_millis(1500) && w <= Duration::from_secs(2),
            "{w:?}"
        );
        assert_eq!(idle_wait(&[healthy], poll), poll);
    }
}
