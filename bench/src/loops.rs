//! The worker loops of the SQL cases: settle's functions, the hand-written
//! floor and pgmq, each claiming up to B rows and acking them until the queue
//! is empty or a shared budget is spent.

use crate::{Form, Impl};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tokio_postgres::Client;

/// One worker's loop: claim up to `batch`, ack them, until the queue is empty.
/// Prepared statements per connection, so neither side pays a Parse per call;
/// the floor's claims carry the batch as a literal LIMIT (one statement per
/// batch size), as a careful hand writes them: a `LIMIT $1` is planned anew on
/// every call.
struct Prep {
    c: Client,
    cache: std::collections::HashMap<String, tokio_postgres::Statement>,
}

impl Prep {
    async fn st(&mut self, sql: &str) -> tokio_postgres::Statement {
        if let Some(s) = self.cache.get(sql) {
            return s.clone();
        }
        let s = self.c.prepare(sql).await.expect("prepare");
        self.cache.insert(sql.to_owned(), s.clone());
        s
    }
    async fn query(
        &mut self,
        sql: &str,
        p: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        let st = self.st(sql).await;
        self.c.query(&st, p).await
    }
    async fn query_one(
        &mut self,
        sql: &str,
        p: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
        let st = self.st(sql).await;
        self.c.query_one(&st, p).await
    }
    async fn execute(
        &mut self,
        sql: &str,
        p: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let st = self.st(sql).await;
        self.c.execute(&st, p).await
    }
    async fn batch_execute(&mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.c.batch_execute(sql).await
    }
}

/// Every loop fetches what a handler needs: the id, the token where there is
/// one, and the payload (settle and the floor: the payload column; pgmq: the
/// message), so none skips the work of reading and sending it.
async fn worker(
    imp: Impl,
    form: Form,
    q: String,
    c: Client,
    (batch, chain): (usize, bool),
    lat: Arc<Mutex<Vec<f64>>>,
    budget: Arc<AtomicIsize>,
) -> (usize, Client) {
    let b = batch as i32;
    // --chain, lease form, one row at a time: the delivery held since the last
    // round, settled by the statement that claims the next
    let chain = chain && batch == 1 && form == Form::Lease;
    let mut held = None;
    let mut c = Prep {
        c,
        cache: Default::default(),
    };
    let mut done = 0;
    let mut mine = Vec::new();
    loop {
        if budget.load(Ordering::Relaxed) <= 0 {
            break;
        }
        let t0 = Instant::now();
        let n = match (imp, form) {
            (Impl::Settle | Impl::SqlEdition | Impl::Floor, Form::Lease) if chain => {
                match chain_round(&mut c, imp, &q, &mut held).await {
                    Some(n) => n,
                    None => break,
                }
            }
            (Impl::Settle | Impl::SqlEdition, Form::Lease) => {
                let rows = c
                    .query(
                        "SELECT id, token, payload FROM queue_claim($1, $2, interval '30 seconds')",
                        &[&q, &b],
                    )
                    .await
                    .unwrap();
                if rows.len() == 1 {
                    let (id, tok): (String, SystemTime) = (rows[0].get(0), rows[0].get(1));
                    c.query_one(
                        "SELECT queue_complete($1, $2, 'ack', NULL, $3)",
                        &[&q, &id, &tok],
                    )
                    .await
                    .unwrap();
                } else if !rows.is_empty() {
                    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    let toks: Vec<SystemTime> = rows.iter().map(|r| r.get(1)).collect();
                    c.query_one(
                        "SELECT count(*) FROM queue_complete_many($1, $2, 'ack', NULL, $3)",
                        &[&q, &ids, &toks],
                    )
                    .await
                    .unwrap();
                }
                rows.len()
            }
            (Impl::Floor, Form::Lease) => {
                let rows = c.query(&floor_lease_claim(&q, b, ""), &[]).await.unwrap();
                if rows.len() == 1 {
                    let (id, tok): (i64, SystemTime) = (rows[0].get(0), rows[0].get(1));
                    c.execute(
                        &format!("DELETE FROM {q} WHERE id = $1 AND locked_until = $2"),
                        &[&id, &tok],
                    )
                    .await
                    .unwrap();
                } else if !rows.is_empty() {
                    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                    let toks: Vec<SystemTime> = rows.iter().map(|r| r.get(1)).collect();
                    c.execute(
                        &format!("DELETE FROM {q} WHERE (id, locked_until) IN (SELECT * FROM unnest($1::bigint[], $2::timestamptz[]))"),
                        &[&ids, &toks],
                    )
                    .await
                    .unwrap();
                }
                rows.len()
            }
            (Impl::Settle | Impl::SqlEdition, Form::RowLock) => {
                c.batch_execute("BEGIN").await.unwrap();
                let rows = c
                    .query("SELECT id, payload FROM queue_claim($1, $2)", &[&q, &b])
                    .await
                    .unwrap();
                if rows.len() == 1 {
                    let id: String = rows[0].get(0);
                    c.query_one("SELECT queue_complete($1, $2, 'ack')", &[&q, &id])
                        .await
                        .unwrap();
                } else if !rows.is_empty() {
                    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    c.query_one(
                        "SELECT count(*) FROM queue_complete_many($1, $2, 'ack')",
                        &[&q, &ids],
                    )
                    .await
                    .unwrap();
                }
                c.batch_execute("COMMIT").await.unwrap();
                rows.len()
            }
            (Impl::Floor, Form::RowLock) => {
                c.batch_execute("BEGIN").await.unwrap();
                let rows = c
                    .query(
                        &format!(
                            "SELECT id, payload FROM {q} WHERE retry_after IS NULL OR retry_after <= now() \
                             ORDER BY id LIMIT {b} FOR UPDATE SKIP LOCKED"
                        ),
                        &[],
                    )
                    .await
                    .unwrap();
                let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                if ids.len() == 1 {
                    c.execute(&format!("DELETE FROM {q} WHERE id = $1"), &[&ids[0]])
                        .await
                        .unwrap();
                } else if !ids.is_empty() {
                    c.execute(&format!("DELETE FROM {q} WHERE id = ANY($1)"), &[&ids])
                        .await
                        .unwrap();
                }
                c.batch_execute("COMMIT").await.unwrap();
                rows.len()
            }
            (Impl::Settle | Impl::SqlEdition, Form::Advisory) => {
                let rows = c
                    .query("SELECT id, payload FROM queue_claim($1, $2)", &[&q, &b])
                    .await
                    .unwrap();
                if rows.len() == 1 {
                    let id: String = rows[0].get(0);
                    c.query_one("SELECT queue_complete($1, $2, 'ack')", &[&q, &id])
                        .await
                        .unwrap();
                } else if !rows.is_empty() {
                    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    c.query_one(
                        "SELECT count(*) FROM queue_complete_many($1, $2, 'ack')",
                        &[&q, &ids],
                    )
                    .await
                    .unwrap();
                }
                rows.len()
            }
            (Impl::Floor, Form::Advisory) => {
                // the candidates' keys, locked in one statement; every locked row is
                // returned (no leak), then re-checked by the DELETE
                let rows = c
                    .query(
                        &format!(
                            "SELECT id, payload FROM (SELECT id, payload FROM {q} WHERE retry_after IS NULL OR retry_after <= now() \
                             ORDER BY id LIMIT {b}) c WHERE pg_try_advisory_lock(id)"
                        ),
                        &[],
                    )
                    .await
                    .unwrap();
                let locked: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                // re-check with a fresh snapshot now that the keys are ours (a row
                // settled and unlocked by another worker since the read is gone),
                // counting the delivery as settle does (docs/semantics.md: the attempt is
                // counted when a row is taken, so a crash counts toward max_attempts)
                let rows = if locked.is_empty() {
                    rows
                } else {
                    c.query(
                        &format!("UPDATE {q} SET attempt = attempt + 1 WHERE id = ANY($1) RETURNING id, payload"),
                        &[&locked],
                    )
                    .await
                    .unwrap()
                };
                let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                if !ids.is_empty() {
                    c.execute(&format!("DELETE FROM {q} WHERE id = ANY($1)"), &[&ids])
                        .await
                        .unwrap();
                }
                if !locked.is_empty() {
                    c.query(
                        "SELECT pg_advisory_unlock(id) FROM unnest($1::bigint[]) id",
                        &[&locked],
                    )
                    .await
                    .unwrap();
                }
                if ids.is_empty() {
                    // all candidates were held by others: is anything left at all?
                    let left: i64 = c
                        .query_one(&format!("SELECT count(*) FROM {q}"), &[])
                        .await
                        .unwrap()
                        .get(0);
                    if left > 0 {
                        tokio::task::yield_now().await;
                        continue;
                    }
                }
                rows.len()
            }
            (Impl::Pgmq, _) => {
                let rows = c
                    .query(
                        "SELECT msg_id, message FROM pgmq.read('bench', 30, $1)",
                        &[&b],
                    )
                    .await
                    .unwrap();
                if rows.len() == 1 {
                    let id: i64 = rows[0].get(0);
                    c.query_one("SELECT pgmq.delete('bench', $1::bigint)", &[&id])
                        .await
                        .unwrap();
                } else if !rows.is_empty() {
                    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                    c.query("SELECT pgmq.delete('bench', $1::bigint[])", &[&ids])
                        .await
                        .unwrap();
                }
                rows.len()
            }
            (
                Impl::Client
                | Impl::Raw
                | Impl::Graphile
                | Impl::Awa
                | Impl::Worker
                | Impl::WorkerUnchained,
                _,
            ) => {
                unreachable!("runs in its own case")
            }
        };
        if n == 0 && held.is_none() {
            break;
        }
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        mine.extend(std::iter::repeat_n(ms, n));
        done += n;
        budget.fetch_sub(n as isize, Ordering::Relaxed);
    }
    // a chained loop stopped by the budget still holds a delivery
    done += chain_finish(&mut c, &q, held).await;
    lat.lock().unwrap().extend(mine);
    (done, c.c)
}

/// The floor's lease claim of `limit` rows (a literal LIMIT), `first` put
/// before its readiness test.
fn floor_lease_claim(q: &str, limit: i32, first: &str) -> String {
    format!(
        "UPDATE {q} SET locked_until = now() + interval '30 seconds', attempt = attempt + 1 \
         WHERE id IN (SELECT id FROM {q} WHERE {first}(locked_until IS NULL OR locked_until < now()) \
                      ORDER BY id LIMIT {limit} FOR UPDATE SKIP LOCKED) \
         RETURNING id, locked_until, payload"
    )
}

/// The lease delivery a `--chain` loop holds between rounds.
enum Held {
    Settle(String, SystemTime),
    Floor(i64, SystemTime),
}

/// One round of a `--chain` loop: the delivery `held` since the last round
/// settled by the statement that claims the next. Returns how many it settled
/// (0 or 1), or `None` when nothing was held and nothing is left to claim.
async fn chain_round(c: &mut Prep, imp: Impl, q: &str, held: &mut Option<Held>) -> Option<usize> {
    let settled = usize::from(held.is_some());
    let rows = match (imp, held.take()) {
        (Impl::Floor, Some(Held::Floor(id, tok))) => c
            .query(
                // the DELETE goes first (the claim's filter reads it): left to the end
                // of the statement, as an unread WITH is, it would wait for a row another
                // worker's claim locked while this claim holds one that worker deletes
                &format!(
                    "WITH done AS (DELETE FROM {q} WHERE id = $1 AND locked_until = $2 RETURNING 1) {}",
                    floor_lease_claim(q, 1, "(SELECT count(*) FROM done) >= 0 AND ")
                ),
                &[&id, &tok],
            )
            .await
            .unwrap(),
        (Impl::Floor, _) => c.query(&floor_lease_claim(q, 1, ""), &[]).await.unwrap(),
        (_, Some(Held::Settle(id, tok))) => c
            .query(
                "SELECT id, token, payload FROM queue_complete_and_claim($1, $2, 'ack', NULL, $3, 1, interval '30 seconds')",
                &[&q, &id, &tok],
            )
            .await
            .unwrap(),
        (_, _) => c
            .query(
                "SELECT id, token, payload FROM queue_claim($1, 1, interval '30 seconds')",
                &[&q],
            )
            .await
            .unwrap(),
    };
    *held = rows.first().and_then(|r| match imp {
        Impl::Floor => Some(Held::Floor(r.get(0), r.get(1))),
        // settle's one row when nothing was claimed has a NULL id
        _ => r
            .get::<_, Option<String>>(0)
            .map(|id| Held::Settle(id, r.get(1))),
    });
    (settled > 0 || held.is_some()).then_some(settled)
}

/// Settle the delivery a `--chain` loop still holds when it stops: 1, or 0.
async fn chain_finish(c: &mut Prep, q: &str, held: Option<Held>) -> usize {
    match held {
        Some(Held::Settle(id, tok)) => {
            c.query_one(
                "SELECT queue_complete($1, $2, 'ack', NULL, $3)",
                &[&q, &id, &tok],
            )
            .await
            .unwrap();
            1
        }
        Some(Held::Floor(id, tok)) => {
            c.execute(
                &format!("DELETE FROM {q} WHERE id = $1 AND locked_until = $2"),
                &[&id, &tok],
            )
            .await
            .unwrap();
            1
        }
        None => 0,
    }
}

/// One [`worker`] per connection, all sharing a budget of `jobs` (`None`: until
/// the queue is empty); returns how many jobs they settled, and the connections
/// still open: the server's CPU is read before they close (a backend that has
/// exited but is not yet reaped shows no CPU time in /proc, and one reaped
/// later adds its time to the next reading).
pub(crate) async fn run_workers(
    conns: Vec<Client>,
    imp: Impl,
    form: Form,
    q: &str,
    batch: (usize, bool),
    lat: Arc<Mutex<Vec<f64>>>,
    jobs: Option<usize>,
) -> (usize, Vec<Client>) {
    let budget =
        Arc::new(AtomicIsize::new(jobs.map_or(isize::MAX, |j| {
            isize::try_from(j).unwrap_or(isize::MAX)
        })));
    spend(conns, imp, form, q, batch, lat, budget).await
}

/// [`run_workers`] until the queue is empty or `cap` has passed (the workers
/// finish the claim they are in).
pub(crate) async fn run_workers_for(
    conns: Vec<Client>,
    (imp, form): (Impl, Form),
    q: &str,
    batch: usize,
    lat: Arc<Mutex<Vec<f64>>>,
    cap: std::time::Duration,
) -> (usize, Vec<Client>) {
    let budget = Arc::new(AtomicIsize::new(isize::MAX));
    let stop = budget.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(cap).await;
        stop.store(0, Ordering::Relaxed);
    });
    let out = spend(conns, imp, form, q, (batch, false), lat, budget).await;
    timer.abort();
    out
}

async fn spend(
    conns: Vec<Client>,
    imp: Impl,
    form: Form,
    q: &str,
    batch: (usize, bool),
    lat: Arc<Mutex<Vec<f64>>>,
    budget: Arc<AtomicIsize>,
) -> (usize, Vec<Client>) {
    let hs: Vec<_> = conns
        .into_iter()
        .map(|c| {
            tokio::spawn(worker(
                imp,
                form,
                q.to_owned(),
                c,
                batch,
                lat.clone(),
                budget.clone(),
            ))
        })
        .collect();
    let mut n = 0;
    let mut open = Vec::new();
    for h in hs {
        let (done, c) = h.await.unwrap();
        n += done;
        open.push(c);
    }
    (n, open)
}
