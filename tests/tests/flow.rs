//! Flow control in the claim (docs/semantics.md, "Priority and order per
//! key"), in every form: a `priority` column orders the claim, an
//! `ordering_key` column hands out a key's rows one at a time, in id order.
//! Every backend: both PostgreSQL editions, the portable path on PostgreSQL,
//! MariaDB and SQLite.

use settle::{Form, PoolOptions, Queue};
use settle_conformance::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ids(ds: &[settle::Delivery]) -> Vec<&str> {
    ds.iter().map(|d| d.id()).collect()
}

async fn exec(pool: &sqlx::AnyPool, sql: &str) {
    sqlx::query(sql)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A fresh queue table with `role`'s column and the index the claim needs,
/// each row's value of it (NULL: `None`), ids 1.. in that order.
async fn table_with(
    b: Backend,
    pool: &sqlx::AnyPool,
    role: &str,
    ty: &str,
    values: &[Option<&str>],
) -> String {
    let t = table(b, pool, role, values.len()).await;
    let q = add_role(b, pool, &t, role, ty).await;
    for (i, v) in values.iter().enumerate() {
        let v = v.map_or("NULL".to_owned(), |v| format!("'{v}'"));
        exec(
            pool,
            &format!("UPDATE {q} SET {role} = {v} WHERE id = {}", i + 1),
        )
        .await;
    }
    t
}

async fn priority_order(b: Backend, form: Form) {
    let pool = admin(b).await;
    let prio = [
        Some("5"),
        None,
        Some("1"),
        Some("5"),
        None,
        Some("-2"),
        Some("1"),
    ];
    let t = table_with(b, &pool, "priority", "integer", &prio).await;
    let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();
    let first = c.claim(3).await.unwrap();
    assert_eq!(ids(&first), ["6", "3", "7"], "{b:?} {form:?}");
    // (settled first: a SQLite row_lock claim holds the database's write lock)
    for d in first {
        d.ack().await.unwrap();
    }
    let rest = c.claim(10).await.unwrap();
    assert_eq!(ids(&rest), ["1", "4", "2", "5"], "{b:?} {form:?}");
}

/// A key's head, in flight or delayed, holds back its key and no other; acked,
/// it frees the next.
async fn key_heads(b: Backend, form: Form) {
    let pool = admin(b).await;
    let keys = [Some("a"), Some("a"), Some("b"), None, Some("b")];
    let t = table_with(b, &pool, "ordering_key", "varchar(64)", &keys).await;
    let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();
    let mut heads = c.claim(10).await.unwrap();
    assert_eq!(
        ids(&heads),
        ["1", "3", "4"],
        "{b:?} {form:?}: the heads and the unkeyed row"
    );
    // (a SQLite row_lock claim holds the database's write lock: no second claim meanwhile)
    if !(b == Backend::Sqlite && form == Form::RowLock) {
        assert!(
            c.claim(10).await.unwrap().is_empty(),
            "{b:?} {form:?}: in flight, heads hold their keys"
        );
    }
    let four = heads.pop().unwrap();
    let three = heads.pop().unwrap();
    let one = heads.pop().unwrap();
    three.retry_after(Duration::from_secs(3600)).await.unwrap();
    one.ack().await.unwrap();
    four.ack().await.unwrap();
    let next = c.claim(10).await.unwrap();
    assert_eq!(
        ids(&next),
        ["2"],
        "{b:?} {form:?}: a delayed head holds back b only"
    );
    drop(next);
}

/// Eight workers on 10 keys: never two rows of a key at once, each key's rows
/// in id order, every row once.
async fn keys_under_load(b: Backend, form: Form) {
    let keys: Vec<String> = (0..200).map(|i| format!("k{}", (i * 7) % 10)).collect();
    work_keys(b, form, keys).await;
}

/// The same with one key's 400 rows in front of 20 other keys' 100: more than
/// a claim of 2 reads before it walks the keys (docs/semantics.md, "How far a
/// keyed claim reads").
async fn backlog_under_load(b: Backend, form: Form) {
    let keys: Vec<String> = (0..500)
        .map(|i| match i < 400 {
            true => "k0".to_owned(),
            false => format!("k{}", 1 + i % 20),
        })
        .collect();
    work_keys(b, form, keys).await;
}

/// One key's 2,000 rows in front of 600 other keys' one each, its head in
/// flight: more keys than a claim walks at once, so it reads past the
/// backlog in bounded steps (counting the keys again on the way), then walks
/// the keys (docs/semantics.md, "How far a keyed claim reads"). A new client
/// takes the next heads by id; the holder, once it acked the head, takes the
/// backlog's next row with them, and then the heads past its mark. The new
/// client has one connection, which its claim holds as it reads.
async fn backlog_past_many_keys(b: Backend, form: Form) {
    let pool = admin(b).await;
    let t = table(b, &pool, "many_keys", 0).await;
    let q = add_role(b, &pool, &t, "ordering_key", "integer").await;
    let rows: Vec<String> = (1..=2600)
        .map(|i| format!("('{{}}', {})", if i <= 2000 { 0 } else { i }))
        .collect();
    let values = rows.join(", ");
    exec(
        &pool,
        &format!("INSERT INTO {q} (payload, ordering_key) VALUES {values}"),
    )
    .await;
    let queue = || Queue::new(&t, &t).form(form);
    let holder = b.client(queue()).await.unwrap();
    let mut head = holder.claim(1).await.unwrap();
    assert_eq!(ids(&head), ["1"], "{b:?} {form:?}: the backlog's head");
    // one connection: the claim's steps count the keys on its own
    let c = b.client_with(queue(), PoolOptions::new(1)).await.unwrap();
    let next = c.claim(3).await.unwrap();
    assert_eq!(
        ids(&next),
        ["2001", "2002", "2003"],
        "{b:?} {form:?}: from the lowest id"
    );
    for d in next {
        d.ack().await.unwrap();
    }
    head.pop().unwrap().ack().await.unwrap();
    let worker = holder.claim(3).await.unwrap();
    assert_eq!(
        ids(&worker),
        ["2", "2004", "2005"],
        "{b:?} {form:?}: from the mark"
    );
    let on = holder.claim(3).await.unwrap();
    assert_eq!(
        ids(&on),
        ["2006", "2007", "2008"],
        "{b:?} {form:?}: past the mark"
    );
    drop((worker, on));
}

/// Eight workers claiming 2 at a time from a queue whose row `id` has the
/// key `keys[id - 1]`: never two rows of a key at once, each key's rows in
/// id order, every row once.
async fn work_keys(b: Backend, form: Form, keys: Vec<String>) {
    let pool = admin(b).await;
    let n = keys.len();
    let values: Vec<Option<&str>> = keys.iter().map(|k| Some(k.as_str())).collect();
    let t = table_with(b, &pool, "ordering_key", "varchar(64)", &values).await;
    let c = b.client(Queue::new(&t, &t).form(form)).await.unwrap();
    let busy: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let seen: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let (c, busy, seen, keys) = (c.clone(), busy.clone(), seen.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            // until every row is seen (a key's next row freed by another
            // session waits for this one's rescan: docs/semantics.md)
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while seen.lock().unwrap().len() < n && std::time::Instant::now() < deadline {
                let ds = c.claim(2).await.unwrap();
                if ds.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                for d in ds {
                    let id: u64 = d.id().parse().unwrap();
                    let key = keys[(id - 1) as usize].clone();
                    if let Some(other) = busy.lock().unwrap().insert(key.clone(), id) {
                        panic!("{key}: rows {other} and {id} at once");
                    }
                    seen.lock().unwrap().push((key.clone(), id));
                    tokio::time::sleep(Duration::from_millis(1 + (id + w) % 3)).await;
                    busy.lock().unwrap().remove(&key);
                    d.ack().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), n, "{b:?} {form:?}: every row once");
    let mut last: HashMap<&str, u64> = HashMap::new();
    for (k, id) in seen.iter() {
        let before = last.insert(k, *id).unwrap_or(0);
        assert!(before < *id, "{b:?} {form:?}: {k}: {id} after {before}");
    }
}

async fn each_form(b: Backend) {
    for (form, refused) in b.forms() {
        if refused.is_none() {
            priority_order(b, form).await;
            key_heads(b, form).await;
            keys_under_load(b, form).await;
            backlog_under_load(b, form).await;
            // (a SQLite row_lock claim holds the database's write lock: no second client meanwhile)
            if !(b == Backend::Sqlite && form == Form::RowLock) {
                backlog_past_many_keys(b, form).await;
            }
        }
    }
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                each_form($b).await;
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
