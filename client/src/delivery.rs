//! A delivery: one claimed row, held until it is settled (docs/semantics.md, "Outcomes").

use crate::backend::{Claimed, Held};
use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use crate::payload::Payload;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tracing::Instrument;

/// One claimed row, held until it is settled. Every settle method consumes the
/// delivery, so it cannot be settled twice. Dropped unsettled (early return,
/// panic, cancelled future) it is given back: row_lock rolls its writes back and
/// leaves the row unchanged, a lease is released at once, an advisory key is
/// unlocked (or its connection closed).
pub struct Delivery {
    id: String,
    attempt: u32,
    payload: Payload,
    /// what holds the row, with the backend that settles it; taken when the
    /// delivery is settled or given back
    hold: Option<Held>,
    /// the worker's count of deliveries dropped unsettled
    unsettled: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// where the worker takes the row this delivery's settle claims
    next: Option<Arc<NextSlot>>,
}

/// Where a worker's delivery leaves the row its settle claimed in the same
/// statement, for the worker's task to run next ([`crate::WorkerOptions::chain`]).
pub(crate) struct NextSlot {
    row: Mutex<Option<Claimed>>,
    /// the worker stopped claiming: settles claim nothing more
    stopped: Arc<AtomicBool>,
}

impl NextSlot {
    pub(crate) fn new(stopped: Arc<AtomicBool>) -> NextSlot {
        NextSlot {
            row: Mutex::new(None),
            stopped,
        }
    }

    /// The row a settle claimed, once.
    pub(crate) fn take(&self) -> Option<Claimed> {
        self.row.lock().unwrap().take()
    }

    fn put(&self, row: Claimed) {
        let old = self.row.lock().unwrap().replace(row);
        // one settle per delivery, and the task takes each row before the next
        debug_assert!(old.is_none(), "a slot holds one row");
        drop(old.map(Delivery::new));
    }
}

impl Drop for NextSlot {
    /// A row nobody took is given back (through its delivery's drop).
    fn drop(&mut self) {
        drop(
            self.row
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .map(Delivery::new),
        );
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &self.hold.as_ref().map(|h| &h.queue().name))
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("token", &self.token())
            .finish_non_exhaustive()
    }
}

impl Delivery {
    pub(crate) fn new(c: Claimed) -> Delivery {
        Delivery {
            id: c.id,
            attempt: c.attempt,
            payload: c.payload,
            hold: Some(c.hold),
            unsettled: None,
            next: None,
        }
    }

    /// Count this delivery in `unsettled` if it is dropped unsettled other than
    /// by a panic (the worker's report).
    pub(crate) fn count_unsettled_in(
        mut self,
        unsettled: Arc<std::sync::atomic::AtomicU64>,
    ) -> Delivery {
        self.unsettled = Some(unsettled);
        self
    }

    /// Let this delivery's settle claim the next row into `slot`, unless the
    /// worker has stopped by then (where the backend can: see
    /// [`crate::Capabilities::settle_and_claim`]).
    pub(crate) fn claim_next_into(mut self, slot: Arc<NextSlot>) -> Delivery {
        self.next = Some(slot);
        self
    }

    /// The id and the hold, for a batch settle; the delivery counts as settled.
    pub(crate) fn into_parts(mut self) -> (String, Held) {
        let hold = self
            .hold
            .take()
            .expect("a delivery holds its row until settled");
        (std::mem::take(&mut self.id), hold)
    }

    fn hold(&mut self) -> Result<&mut Held> {
        self.hold
            .as_mut()
            .ok_or_else(|| Error::invalid("the delivery is settled"))
    }

    /// The row's id, as text.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The name of the queue this delivery came from (the handler of a
    /// [`crate::QueueSet`] tells its queues apart by it).
    pub fn queue(&self) -> &str {
        self.hold.as_ref().map_or("", |h| h.queue().name.as_str())
    }

    /// The 1-based number of this delivery (1 when the table keeps no attempt column).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The lease token (the deadline), in the lease form.
    pub fn token(&self) -> Option<SystemTime> {
        self.hold.as_ref().and_then(Held::token)
    }

    /// The payload deserialised into `T`: the queue's payload column (by
    /// default the one named `payload`), or the whole row on a queue registered
    /// without one ([`crate::Queue::without`]`(Role::Payload)`), for a handler
    /// that needs other columns too. A text column holding JSON is read as that
    /// JSON when `T` does not take the text itself.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        self.payload.as_type()
    }

    /// The payload as JSON (parsed on the first call); text that is not JSON
    /// is a JSON string, SQL NULL is `null`.
    pub fn payload_json(&self) -> &serde_json::Value {
        self.payload.value()
    }

    /// row_lock form: the claim transaction, for the handler's own writes. They
    /// commit with `ack`; every other outcome (and dropping the delivery) rolls
    /// them back first (a savepoint taken here). Deliveries of one claim share the
    /// transaction, so their handlers run one after another: this waits until
    /// the previous delivery that took the transaction is settled.
    /// [`Error::Unsupported`] on the portable path, which has
    /// [`Delivery::any_transaction`].
    pub async fn transaction(&mut self) -> Result<&tokio_postgres::Client> {
        self.hold()?.transaction().await
    }

    /// Portable row_lock form: the claim transaction as a sqlx connection, for
    /// the handler's own writes (transactional mode, as [`Delivery::transaction`]
    /// on the extension backend): `ack` commits them with the outcome, every
    /// other outcome and a drop roll them back to a savepoint taken here.
    pub async fn any_transaction(&mut self) -> Result<&mut sqlx::AnyConnection> {
        self.hold()?.any_transaction().await
    }

    /// Lease heartbeat: hold the row for `ttl` from now; the token changes.
    pub async fn extend(&mut self, ttl: Duration) -> Result<()> {
        let id = self.id.clone();
        self.hold()?.extend(&id, ttl).await
    }

    /// Done: the row leaves the queue.
    pub async fn ack(self) -> Result<Settled> {
        self.settle(Outcome::Ack).await
    }

    /// Poison: settled exactly like ack.
    pub async fn drop_it(self) -> Result<Settled> {
        self.settle(Outcome::Drop).await
    }

    /// Deliver again (moves to the dead letter at max_attempts).
    pub async fn retry(self) -> Result<Settled> {
        self.settle(Outcome::Retry).await
    }

    /// Deliver again not before `delay` (moves to the dead letter at max_attempts).
    pub async fn retry_after(self, delay: Duration) -> Result<Settled> {
        self.settle(Outcome::RetryAfter(delay)).await
    }

    /// Run the registered custom outcome `name`.
    pub async fn custom(self, name: &str) -> Result<Settled> {
        self.settle(Outcome::Custom(name.to_owned())).await
    }

    /// Give the delivery back without an outcome (the attempt stays counted).
    pub async fn release(self) -> Result<Settled> {
        let (id, hold) = self.into_parts();
        hold.release(&id).await
    }

    /// Settle with `outcome`. On error nothing was written for this delivery
    /// (a lease lost, a row not held, a database failure) and it is given back.
    pub async fn settle(mut self, outcome: Outcome) -> Result<Settled> {
        let span = tracing::debug_span!(
            "settle.settle",
            queue = %self.hold.as_ref().map_or("", |h| h.queue().name.as_str()),
            id = %self.id,
            attempt = self.attempt,
            outcome = %outcome.sql_name()
        );
        let next = self
            .next
            .take()
            .filter(|s| !s.stopped.load(Ordering::Acquire));
        let (id, hold) = self.into_parts();
        let Some(slot) = next else {
            return hold.settle(id, outcome).instrument(span).await;
        };
        let (settled, row) = hold.settle_and_claim(id, outcome).instrument(span).await?;
        if let Some(row) = row {
            slot.put(row);
        }
        Ok(settled)
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            if let Some(n) = &self.unsettled {
                // a panicking handler's delivery is counted as its panic
                if !std::thread::panicking() {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
            let id = std::mem::take(&mut self.id);
            tracing::debug!(queue = %hold.queue().name, id = %id, "delivery dropped unsettled: giving it back");
            hold.give_back(id);
        }
    }
}
