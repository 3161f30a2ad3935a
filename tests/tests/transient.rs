//! A lease settle the server turns down for a passing reason is run again; any
//! other failure is reported at once and the row given back. A trigger on the
//! queue table fails the acks on purpose, counting its tries where a rollback
//! does not undo the count (a PostgreSQL sequence, a MyISAM table on MariaDB).
//! SQLite sends no SQLSTATE, so it has no transient error to try.

use settle::{Form, Queue, Settled};
use settle_conformance::*;
use std::time::Duration;

/// The statements that make `t`'s deletes fail: row 1 with a serialization
/// failure on its first two tries, row 2 with an error of the user's own every
/// time, row 3 with a serialization failure every time.
fn flaky(b: Backend, t: &str) -> Vec<String> {
    match b {
        Backend::MariaDb => vec![
            format!("CREATE TABLE {t}_tries (id BIGINT PRIMARY KEY, n INT NOT NULL) ENGINE=MyISAM"),
            format!("INSERT INTO {t}_tries VALUES (1, 0), (2, 0), (3, 0)"),
            format!(
                "CREATE TRIGGER {t}_flaky BEFORE DELETE ON {t} FOR EACH ROW BEGIN \
                   UPDATE {t}_tries SET n = n + 1 WHERE id = OLD.id; \
                   IF OLD.id = 1 AND (SELECT n FROM {t}_tries WHERE id = 1) <= 2 THEN \
                     SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'serialization failure, on purpose'; \
                   END IF; \
                   IF OLD.id = 2 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'row 2 is kept'; END IF; \
                   IF OLD.id = 3 THEN \
                     SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'serialization failure, every time'; \
                   END IF; \
                 END"
            ),
        ],
        _ => {
            let mut v: Vec<String> = (1..=3)
                .map(|i| format!("CREATE SEQUENCE {t}_tries{i}"))
                .collect();
            v.push(format!(
                "CREATE FUNCTION {t}_flaky() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 DECLARE n bigint := nextval(format('%I', TG_TABLE_NAME || '_tries' || OLD.id)); \
                 BEGIN \
                   IF OLD.id = 1 AND n <= 2 OR OLD.id = 3 THEN \
                     RAISE EXCEPTION 'serialization failure, on purpose' USING ERRCODE = '40001'; \
                   END IF; \
                   IF OLD.id = 2 THEN RAISE EXCEPTION 'row 2 is kept'; END IF; \
                   RETURN OLD; \
                 END $$"
            ));
            v.push(format!(
                "CREATE TRIGGER {t}_flaky BEFORE DELETE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_flaky()"
            ));
            v
        }
    }
}

/// How many times row `id`'s delete was tried.
async fn tries(b: Backend, pool: &sqlx::AnyPool, t: &str, id: i64) -> i64 {
    let sql = match b {
        Backend::MariaDb => format!("SELECT CAST(n AS SIGNED) FROM {t}_tries WHERE id = {id}"),
        _ => format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {t}_tries{id}"),
    };
    sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap()
}

async fn settle_again(b: Backend) {
    let pool = admin(b).await;
    let t = table(b, &pool, "again", 3).await;
    for sql in flaky(b, &t) {
        sqlx::query(&sql)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{b:?}: {sql}: {e}"));
    }
    let c = b
        .client(Queue::new(&t, &t).form(Form::Lease {
            ttl: Duration::from_secs(60),
        }))
        .await
        .unwrap();
    let mut ds = c.claim(3).await.unwrap();
    ds.sort_by_key(|d| d.id().parse::<i64>().unwrap());
    let [one, two, three]: [settle::Delivery; 3] = ds.try_into().expect("three rows");

    // turned down twice, written on the third try
    assert_eq!(one.ack().await.unwrap(), Settled::Deleted, "{b:?}");
    assert_eq!(tries(b, &pool, &t, 1).await, 3, "{b:?}");

    // the user's own error passes for nothing: one try, the error, the row back
    let e = two.ack().await.unwrap_err();
    assert!(!e.is_transient(), "{b:?}: {e}");
    assert!(e.to_string().contains("row 2 is kept"), "{b:?}: {e}");
    assert_eq!(tries(b, &pool, &t, 2).await, 1, "{b:?}");

    // transient every time: tried five times, then the error and the row back
    let e = three.ack().await.unwrap_err();
    assert!(e.is_transient(), "{b:?}: {e}");
    assert_eq!(e.code(), Some("40001"), "{b:?}: {e}");
    assert_eq!(tries(b, &pool, &t, 3).await, 5, "{b:?}");

    let (rows, _) = final_rows(b, &pool, &t).await;
    assert_eq!(
        rows,
        vec![(2, 1, false, false), (3, 1, false, false)],
        "{b:?}: the rows not written are ready again at once"
    );
}

macro_rules! backend {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                settle_again($b).await;
            }
        }
    };
}

backend!(pg_extension: Backend::PgExtension);
backend!(pg_portable: Backend::PgPortable);
backend!(mariadb: Backend::MariaDb);
