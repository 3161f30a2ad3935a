//! Least privilege: a worker role that owns nothing — USAGE on the schema,
//! SELECT, UPDATE and DELETE on the queue table, INSERT on its dead-letter
//! table — works every form through the Rust client, on the extension and on
//! the portable path. Connecting checks the registration and writes nothing;
//! a queue registered differently is refused with the differences listed;
//! registering stays the table owner's action.

use settle::{Admin, Client, Error, Form, Queue, Registered, Settled};
use settle_conformance::*;
use std::time::Duration;

const WORKER: &str = "settle_rust_worker";

/// The role, made once per cluster (tests that make it at the same time
/// meet as a unique violation); its grants are per table.
async fn worker_role(pool: &sqlx::AnyPool) {
    sqlx::query(&format!(
        "DO $$ BEGIN CREATE ROLE {WORKER} LOGIN; \
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
    ))
    .execute(pool)
    .await
    .unwrap();
}

/// A schema of its own with a queue table and its dead-letter table, the
/// worker granted what it needs and no more.
async fn least_privilege_table(b: Backend, pool: &sqlx::AnyPool, n: usize) -> String {
    worker_role(pool).await;
    let t = table(b, pool, "lp", n).await;
    let s = format!("{t}_s");
    for sql in [
        format!("CREATE SCHEMA {s}"),
        format!("ALTER TABLE {t} SET SCHEMA {s}"),
        format!("ALTER TABLE {t}_dead SET SCHEMA {s}"),
        format!("GRANT USAGE ON SCHEMA {s} TO {WORKER}"),
        format!("GRANT SELECT, UPDATE, DELETE ON {s}.{t} TO {WORKER}"),
        format!("GRANT INSERT ON {s}.{t}_dead TO {WORKER}"),
    ] {
        sqlx::query(&sql).execute(pool).await.unwrap();
    }
    format!("{s}.{t}")
}

/// `conn` as the worker role.
fn as_worker(conn: &str) -> String {
    format!("{conn} user={WORKER}")
}

fn queue(table: &str, form: Form) -> Queue {
    Queue::new(table, table)
        .form(form)
        .dead_letter(2, format!("{table}_dead"))
}

/// Claims, acks, a retry into the dead letter and a crash loop, as the worker.
async fn work(b: Backend, c: &Client, form: Form) {
    let got = c.claim(2).await.unwrap();
    assert_eq!(got.len(), 2, "{b:?} {form:?}");
    let mut it = got.into_iter();
    assert_eq!(it.next().unwrap().ack().await.unwrap(), Settled::Deleted);
    assert_eq!(it.next().unwrap().retry().await.unwrap(), Settled::Retried);
    // row 2 again, at max_attempts: into the dead letter
    let d = c.claim(1).await.unwrap().pop().unwrap();
    assert_eq!((d.id(), d.attempt()), ("2", 2), "{b:?} {form:?}");
    assert_eq!(d.retry().await.unwrap(), Settled::DeadLettered);
    // the rest acked
    loop {
        let got = c.claim(10).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in got {
            assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{b:?} {form:?}");
        }
    }
    let s = c.stats().await.unwrap();
    assert_eq!(
        (s.ready, s.in_flight.unwrap_or(0)),
        (0, 0),
        "{b:?} {form:?}: {s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_owns_nothing_works_every_form_through_the_extension() {
    let b = Backend::PgExtension;
    if !selected(b) {
        return;
    }
    let pool = admin(b).await;
    let owner = env("SETTLE_TEST_PG");
    let worker = as_worker(&owner);
    for (form, _) in b.forms() {
        let t = least_privilege_table(b, &pool, 5).await;
        let q = queue(&t, form);
        // not registered: the worker is told who registers it
        let err = Client::connect(worker.as_str(), 2, q.clone())
            .await
            .expect_err("not registered");
        assert!(
            matches!(&err, Error::UnknownQueue(e) if e.message.contains("Admin::register")),
            "{err:?}"
        );
        // nor can it register it: that is the owner's action
        let refused = Admin::postgres(worker.as_str(), 1)
            .await
            .unwrap()
            .register(&q)
            .await
            .expect_err("a worker does not own the table");
        assert_eq!(refused.code(), Some("42501"), "{refused:?}");
        let admin = Admin::postgres(owner.as_str(), 1).await.unwrap();
        assert_eq!(admin.register(&q).await.unwrap(), Registered::Created);
        assert_eq!(admin.register(&q).await.unwrap(), Registered::Unchanged);
        // the same descriptor, registered again by the worker, writes nothing
        assert_eq!(
            Admin::postgres(worker.as_str(), 1)
                .await
                .unwrap()
                .register(&q)
                .await
                .unwrap(),
            Registered::Unchanged
        );
        let c = Client::connect(worker.as_str(), 2, q.clone())
            .await
            .unwrap_or_else(|e| panic!("{form:?} as a worker that owns nothing: {e}"));
        work(b, &c, form).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_registered_differently_is_refused_with_the_differences() {
    let b = Backend::PgExtension;
    if !selected(b) {
        return;
    }
    let pool = admin(b).await;
    let owner = env("SETTLE_TEST_PG");
    let t = least_privilege_table(b, &pool, 1).await;
    let registered = queue(&t, Form::RowLock).custom_outcome("park", "SELECT $1");
    let admin = Admin::postgres(owner.as_str(), 1).await.unwrap();
    admin.register(&registered).await.unwrap();
    // a client built with the defaults: lease, no dead letter, no custom outcome
    let defaults = Queue::new(&t, &t).custom_outcome("park", "SELECT 1");
    for conn in [owner.clone(), as_worker(&owner)] {
        let err = Client::connect(conn.as_str(), 2, defaults.clone())
            .await
            .expect_err("registered differently");
        let Error::RegisteredDifferently { queue, differences } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(queue, &t);
        let fields: Vec<&str> = differences.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            ["form", "max_attempts", "dead_letter", "outcomes.park"],
            "{err}"
        );
        assert_eq!(differences[0].registered.as_deref(), Some("row_lock"));
        assert_eq!(differences[0].given.as_deref(), Some("lease"));
        let msg = err.to_string();
        assert!(
            msg.contains("form: registered row_lock, this client lease"),
            "{msg}"
        );
        assert_eq!(err.code(), Some("SQ003"));
    }
    // connecting changed nothing
    let c = Client::connect(owner.as_str(), 2, registered.clone())
        .await
        .unwrap();
    assert_eq!(c.queue().claim_form(), Form::RowLock);
    // the owner changes it, and is told what it changed
    let lease = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    match admin.register(&queue(&t, lease)).await.unwrap() {
        Registered::Changed(d) => {
            let fields: Vec<&str> = d.iter().map(|d| d.field.as_str()).collect();
            assert_eq!(fields, ["form"]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_owns_nothing_works_every_form_on_the_portable_path() {
    let b = Backend::PgPortable;
    if !selected(b) {
        return;
    }
    let pool = admin(b).await;
    let url = b.admin_url();
    // the same database as the worker role
    let worker = url.replacen("postgres://postgres@", &format!("postgres://{WORKER}@"), 1);
    assert_ne!(worker, url, "{url}");
    for (form, _) in b.forms() {
        let t = least_privilege_table(b, &pool, 5).await;
        let c = Client::portable(&worker, 2, queue(&t, form))
            .await
            .unwrap_or_else(|e| panic!("{form:?} as a worker that owns nothing: {e}"));
        work(b, &c, form).await;
    }
}
