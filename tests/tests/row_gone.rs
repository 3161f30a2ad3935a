//! A row_lock claim's row deleted inside the claim transaction (by the
//! handler, in transactional mode) is no longer held: its ack says so, one row
//! or a batch, on every backend, and the claim transaction rolls back whole
//! (the handler's delete with it), so no row is lost.

use settle::{Delivery, Form, Outcome, Queue};
use settle_conformance::*;

/// Delete the delivery's own row through the claim transaction it was lent.
async fn delete_own_row(b: Backend, t: &str, dl: &mut Delivery) {
    let id: i64 = dl.id().parse().unwrap();
    if b == Backend::PgExtension {
        let tx = dl.transaction().await.unwrap();
        tx.execute(
            &format!("DELETE FROM {} WHERE id = $1", b.dialect().ident(t)),
            &[&id],
        )
        .await
        .unwrap();
    } else {
        let d = b.dialect();
        let conn = dl.any_transaction().await.unwrap();
        let sql = format!("DELETE FROM {} WHERE id = {}", d.ident(t), d.p(1));
        sqlx::query(&sql).bind(id).execute(conn).await.unwrap();
    }
}

async fn ack_of_a_row_gone(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "row_gone", 6).await;
    let c = b
        .client(Queue::new(&t, &t).form(Form::RowLock))
        .await
        .unwrap();

    // one row: the handler deletes it, then acks
    let mut got = c.claim(1).await.unwrap();
    assert_eq!(got.len(), 1, "{b:?}");
    let mut dl = got.pop().unwrap();
    delete_own_row(b, &t, &mut dl).await;
    let r = dl.ack().await;
    assert!(matches!(r, Err(settle::Error::NotHeld(_))), "{b:?}: {r:?}");

    // the failed ack ended the claim transaction, and the handler's delete
    // with it: row 1 is back. A batch whose first row is gone: that row is not
    // held, and the failed write ends the claim transaction, so its siblings
    // are not written either and go back to the queue (as one row's did)
    let mut batch = c.claim(3).await.unwrap();
    let ids: Vec<&str> = batch.iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["1", "2", "3"], "{b:?}");
    delete_own_row(b, &t, &mut batch[0]).await;
    let r = c.settle_many(batch, Outcome::Ack).await;
    assert!(
        matches!(r[0], Err(settle::Error::NotHeld(_))),
        "{b:?}: {r:?}"
    );
    for x in &r[1..] {
        assert!(
            matches!(x, Err(e) if !matches!(e, settle::Error::NotHeld(_))),
            "{b:?}: {r:?}"
        );
    }

    // every row is still there and is claimed again in order
    ack_the_last(b, &c, &pool, &t, 6, &["1", "2", "3", "4", "5", "6"]).await;
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ack_reports_it_not_held() {
                if selected($b) {
                    ack_of_a_row_gone($b).await;
                }
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
backend!(sqlite: Backend::Sqlite);
