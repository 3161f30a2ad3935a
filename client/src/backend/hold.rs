//! The hold protocol, written once for both backends: what holds a claimed
//! row ([`Hold`]: a lease token, or a share of the claim's session), and how
//! a delivery is settled, settled with others, released, given back when
//! dropped, or its lease extended. A backend supplies its lease statements
//! ([`HoldBackend`], with [`LeaseSettler`] for the combined settles) and its
//! claim session ([`ClaimSession`]); the rules of a claim whose deliveries
//! share a connection are in [`fence`] and [`uncommitted`].

use super::combine::{self, LeaseSettler};
use crate::error::{Error, Result};
use crate::outcome::{Outcome, Settled};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// What holds a delivery's row on one backend.
pub(crate) enum Hold<T, S: ClaimSession> {
    /// a lease: its token, the deadline
    Lease(T),
    /// the connection of a row_lock / advisory claim, shared by the claim's
    /// deliveries, and the claim transaction when it is lent to the handler
    Session(Arc<S>, Option<Lent<S>>),
}

/// A claim's connection, locked: lent to the handler (row_lock transactional
/// mode) or taken for one step.
pub(crate) type Lent<S> = OwnedMutexGuard<<S as ClaimSession>::Conn>;

/// The connection a row_lock or advisory claim keeps for its deliveries: it
/// holds the claim transaction or the advisory keys, and ends (commits, lets
/// the keys go, returns to the pool) when the last delivery is done. A
/// backend writes the steps; the order they run in is written once, here.
pub(crate) trait ClaimSession: Send + Sync + Sized + 'static {
    /// The backend whose statements run on the session.
    type Backend: Send + Sync;
    /// What the claim's connection is on this backend.
    type Conn: Send + 'static;

    /// The claim's connection, behind the lock its steps and the handler take.
    fn conn(&self) -> &Arc<Mutex<Self::Conn>>;

    /// How many of the claim's deliveries are not done yet.
    fn open(&self) -> &AtomicUsize;

    /// The last delivery is done: end the claim (row_lock commits, advisory
    /// lets its keys go and the connection returns to the pool), and say if
    /// that failed.
    fn end(&self, b: &Self::Backend) -> impl Future<Output = Result<()>> + Send;

    /// Write one delivery's outcome on the claim's connection.
    fn write_one(
        &self,
        b: &Self::Backend,
        conn: &mut Lent<Self>,
        id: &str,
        outcome: &Outcome,
    ) -> impl Future<Output = Result<Settled>> + Send;

    /// Write one outcome for many deliveries of this claim at once: each
    /// one's result, every one of them done; `None` when that does not apply
    /// or the batch wrote nothing and they are all still held.
    fn write_many(
        &self,
        b: &Self::Backend,
        conn: &mut Lent<Self>,
        ids: &[String],
        outcome: &Outcome,
    ) -> impl Future<Output = Option<Vec<Result<Settled>>>> + Send;

    /// Give one delivery back on the claim's connection, without an outcome.
    fn give_back_one(
        &self,
        b: &Self::Backend,
        conn: &mut Lent<Self>,
        id: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// A delivery dropped where no runtime can give it back: the connection
    /// is closed when the session's last reference goes.
    fn abandon(&self, lent: Option<Lent<Self>>);

    /// Rows of this claim made ready again (retried, released, a settle that
    /// failed) that no other claim can take before the claim ends (row_lock:
    /// its transaction holds them until it commits): `true` when the session
    /// keeps them and reports them to its backend then; `false` when they are
    /// ready now, for the caller to report.
    fn ready_at_end(&self, _ids: &[&str]) -> bool {
        false
    }

    /// The claim's connection: the one lent to the handler, or taken now.
    fn claim_conn(&self, lent: Option<Lent<Self>>) -> impl Future<Output = Lent<Self>> + Send {
        async move {
            match lent {
                Some(g) => g,
                None => self.conn().clone().lock_owned().await,
            }
        }
    }

    /// One delivery is done; the last one ends the claim, and says if that
    /// failed.
    fn finish_one(&self, b: &Self::Backend) -> impl Future<Output = Result<()>> + Send {
        async move {
            if self.open().fetch_sub(1, Ordering::AcqRel) != 1 {
                return Ok(());
            }
            self.end(b).await
        }
    }

    /// Settle one delivery of this claim, then count it done.
    fn settle(
        &self,
        b: &Self::Backend,
        lent: Option<Lent<Self>>,
        id: &str,
        outcome: &Outcome,
    ) -> impl Future<Output = Result<Settled>> + Send {
        async move {
            let mut conn = self.claim_conn(lent).await;
            let r = self.write_one(b, &mut conn, id, outcome).await;
            drop(conn);
            let closed = self.finish_one(b).await;
            r.and_then(|v| closed.map(|()| v))
        }
    }

    /// Settle many deliveries of this claim, none lent to its handler, at
    /// once. `None` when that does not apply or the batch wrote nothing: they
    /// are then settled one at a time, each with its own result.
    fn settle_many(
        &self,
        b: &Self::Backend,
        ids: &[String],
        outcome: &Outcome,
    ) -> impl Future<Output = Option<Vec<Result<Settled>>>> + Send {
        async move {
            let mut conn = self.claim_conn(None).await;
            let mut out = self.write_many(b, &mut conn, ids, outcome).await?;
            drop(conn);
            // the last delivery of the claim commits (row_lock) or hands the
            // connection back; if that fails, nothing of this batch was kept
            let mut closed: Result<()> = Ok(());
            for _ in ids {
                if let Err(e) = self.finish_one(b).await {
                    closed = Err(e);
                }
            }
            uncommitted(&mut out, closed);
            Some(out)
        }
    }

    /// Give a delivery of this claim back without an outcome, then count it done.
    fn release(
        &self,
        b: &Self::Backend,
        lent: Option<Lent<Self>>,
        id: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let mut conn = self.claim_conn(lent).await;
            let r = self.give_back_one(b, &mut conn, id).await;
            drop(conn);
            let closed = self.finish_one(b).await;
            r.and(closed)
        }
    }
}

/// A backend's side of the hold protocol: its lease statements and the facts
/// the protocol asks of it.
pub(crate) trait HoldBackend: LeaseSettler + Sized {
    type Session: ClaimSession<Backend = Self>;

    /// The queue's name, for logs and errors.
    fn queue_name(&self) -> &str;

    /// The lease token as a time.
    fn token_time(token: Self::Token) -> SystemTime;

    /// Whether many deliveries with this outcome are settled in one statement.
    fn settles_together(&self, outcome: &Outcome) -> bool;

    /// Called before an outcome is written (a warning it deserves).
    fn before_settle(&self, _outcome: &Outcome) {}

    /// Rows this client made ready again (retried, released, or a settle that
    /// failed): claims that start past them must not any more.
    fn made_ready(&self, _ids: &[&str]) {}

    /// Whether any settle may make another row ready (an ordering key: the
    /// next row of a settled head's key, whose id is above it), so that every
    /// settled row is reported to [`made_ready`](Self::made_ready).
    fn settles_free_rows(&self) -> bool {
        false
    }

    /// A new deadline for a lease: its new token.
    fn extend_lease(
        &self,
        id: &str,
        token: Self::Token,
        ttl: Duration,
    ) -> impl Future<Output = Result<Self::Token>> + Send;
}

impl<T, S: ClaimSession> Hold<T, S> {
    /// What holds a row a claim returned: the claim's session (row_lock,
    /// advisory), else the row's lease token, which a lease claim must return.
    pub(crate) fn of_claim(session: Option<&Arc<S>>, token: Option<T>, id: &str) -> Result<Self> {
        match (session, token) {
            (Some(s), _) => Ok(Hold::Session(s.clone(), None)),
            (None, Some(t)) => Ok(Hold::Lease(t)),
            (None, None) => Err(Error::database(
                None,
                format!("the lease claim of row {id} returned no token"),
            )),
        }
    }

    /// The claim's session, when it holds the row.
    fn session(&self) -> Option<&Arc<S>> {
        match self {
            Hold::Session(s, _) => Some(s),
            Hold::Lease(_) => None,
        }
    }
}

impl<T: Copy, S: ClaimSession> Hold<T, S> {
    /// The lease token, in the lease form.
    pub(crate) fn lease_token(&self) -> Option<T> {
        match self {
            Hold::Lease(t) => Some(*t),
            Hold::Session(..) => None,
        }
    }
}

type HoldOf<B> = Hold<<B as LeaseSettler>::Token, <B as HoldBackend>::Session>;

/// Settle one delivery.
pub(crate) async fn settle<B: HoldBackend>(
    b: &Arc<B>,
    id: String,
    hold: HoldOf<B>,
    outcome: Outcome,
) -> Result<Settled> {
    b.before_settle(&outcome);
    let again = ready_again(&outcome) || b.settles_free_rows();
    let session = hold.session().cloned();
    let r = match hold {
        // combined with the client's concurrent settles (a custom outcome runs alone)
        Hold::Lease(t) if !matches!(outcome, Outcome::Custom(_)) => {
            combine::settle(b, id.clone(), t, outcome).await
        }
        Hold::Lease(t) => combine::one(&**b, &id, t, &outcome).await,
        Hold::Session(s, lent) => s.settle(b, lent, &id, &outcome).await,
    };
    if again || r.is_err() {
        made_ready(&**b, session.as_deref(), &[&id]);
    }
    r
}

/// Rows that may be ready again, told to the backend now, or when the claim
/// `session` they belong to ends if it keeps them till then.
fn made_ready<B: HoldBackend>(b: &B, session: Option<&B::Session>, ids: &[&str]) {
    if !session.is_some_and(|s| s.ready_at_end(ids)) {
        b.made_ready(ids);
    }
}

/// Whether a row settled with `outcome` may be ready again (a failed settle
/// leaves it ready too): all but ack and drop, a custom outcome included.
fn ready_again(outcome: &Outcome) -> bool {
    !matches!(outcome, Outcome::Ack | Outcome::Drop)
}

/// Tell the backend which of `ids` may be ready again after their settles'
/// results `out`.
fn report_ready<B: HoldBackend>(
    b: &B,
    session: Option<&B::Session>,
    ids: &[String],
    outcome: &Outcome,
    out: &[Result<Settled>],
) {
    let again = ready_again(outcome) || b.settles_free_rows();
    let ready: Vec<&str> = ids
        .iter()
        .zip(out)
        .filter(|(_, r)| again || r.is_err())
        .map(|(id, _)| id.as_str())
        .collect();
    if !ready.is_empty() {
        made_ready(b, session, &ready);
    }
}

/// Settle deliveries with one outcome: leases in one statement, the
/// deliveries of one claim in one on its connection, anything else one by one.
pub(crate) async fn settle_many<B: HoldBackend>(
    b: &Arc<B>,
    items: Vec<(String, HoldOf<B>)>,
    outcome: Outcome,
) -> Vec<Result<Settled>> {
    if items.len() > 1 && b.settles_together(&outcome) {
        let ids: Vec<String> = items.iter().map(|(id, _)| id.clone()).collect();
        let tokens: Option<Vec<B::Token>> = items.iter().map(|(_, h)| h.lease_token()).collect();
        if let Some(tokens) = tokens {
            b.before_settle(&outcome);
            let out = combine::many_or_each(&**b, &ids, &tokens, &outcome).await;
            report_ready(&**b, None, &ids, &outcome, &out);
            return out;
        }
        if let Some(s) = one_session(&items) {
            b.before_settle(&outcome);
            if let Some(out) = s.settle_many(b, &ids, &outcome).await {
                report_ready(&**b, Some(&s), &ids, &outcome, &out);
                return out;
            }
        }
    }
    let mut out = Vec::with_capacity(items.len());
    for (id, hold) in items {
        out.push(settle(b, id, hold, outcome.clone()).await);
    }
    out
}

/// The session when every item is a delivery of it, none lent to its handler.
fn one_session<T, S: ClaimSession>(items: &[(String, Hold<T, S>)]) -> Option<Arc<S>> {
    let Hold::Session(s, None) = &items.first()?.1 else {
        return None;
    };
    items
        .iter()
        .all(|(_, h)| matches!(h, Hold::Session(x, None) if Arc::ptr_eq(x, s)))
        .then(|| s.clone())
}

/// Give a delivery back without an outcome.
pub(crate) async fn release<B: HoldBackend>(b: &B, id: &str, hold: HoldOf<B>) -> Result<()> {
    let session = hold.session().cloned();
    let r = match hold {
        Hold::Lease(t) => b.release_lease(id, t).await,
        Hold::Session(s, lent) => s.release(b, lent, id).await,
    };
    made_ready(b, session.as_deref(), &[id]);
    r
}

/// A delivery dropped unsettled: given back in a task of its own; without a
/// runtime a lease expires on its own and a claim's connection is closed when
/// its last delivery goes.
pub(crate) fn give_back<B: HoldBackend + 'static>(b: Arc<B>, id: String, hold: HoldOf<B>) {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn(async move {
                if let Err(e) = release(&*b, &id, hold).await {
                    tracing::warn!(queue = %b.queue_name(), id = %id, error = %e, "giving back a dropped delivery failed");
                }
            });
        }
        Err(_) => {
            if let Hold::Session(s, lent) = hold {
                s.abandon(lent);
            }
        }
    }
}

/// Lease heartbeat: a new deadline and token.
pub(crate) async fn extend<B: HoldBackend>(
    b: &B,
    id: &str,
    hold: &mut HoldOf<B>,
    ttl: Duration,
) -> Result<()> {
    let Hold::Lease(token) = hold else {
        return Err(Error::invalid("extend() is for the lease form"));
    };
    *token = b.extend_lease(id, *token, ttl).await?;
    Ok(())
}

/// Whether a row_lock outcome for `n` of a claim's deliveries (of `open` still
/// unsettled) runs in a savepoint of its own, so that if it fails the deliveries
/// still open keep the claim transaction. Not for ack and drop: a row locked by
/// the claim and deleted in a subtransaction gets a MultiXact as its deleter,
/// and PostgreSQL's index scans never mark such a tuple dead in the index (only
/// VACUUM removes it), so every later claim would walk past all of them. An ack
/// or drop that fails (rare: a trigger, a foreign key) aborts the claim
/// transaction instead, and every row of the claim goes back to the queue. Nor
/// for the one delivery left open: there is nobody left to protect. (A batch of
/// other outcomes is fenced even when it is the last, so that when it fails its
/// deliveries can be settled one by one, each with its own result.)
pub(crate) fn fence(outcome: &Outcome, n: usize, open: usize) -> bool {
    !matches!(outcome, Outcome::Ack | Outcome::Drop) && (n > 1 || open > n)
}

/// A batch whose claim did not end cleanly (`closed`: the row_lock commit, or
/// the connection's clean-up, failed): nothing of it was kept, so every result
/// that says otherwise becomes that error.
pub(crate) fn uncommitted(out: &mut [Result<Settled>], closed: Result<()>) {
    if let Err(e) = closed {
        let (code, msg) = (e.code().map(str::to_owned), e.to_string());
        for r in out.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(Error::database(
                code.as_deref(),
                format!("the claim's transaction did not commit: {msg}"),
            ));
        }
    }
}
