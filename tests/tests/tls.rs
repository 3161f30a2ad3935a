//! TLS on every connection the client opens, against servers that refuse
//! connections without it: a TLS-only PostgreSQL (pg_hba `hostnossl … reject`,
//! no unix socket) and a MariaDB user created `REQUIRE SSL`, with a CA the
//! test command made (`scripts/tls-certs.sh`: its server certificate names
//! `localhost` only). `scripts/test.sh` sets:
//!
//! - `SETTLE_TEST_TLS`: the TLS-only PostgreSQL as a libpq string without TLS
//!   settings (`host=localhost port=N user=postgres`), or `skip:<why>` where
//!   that major's server is built without TLS
//! - `SETTLE_TEST_TLS_DIR`: `ca.crt`, `other-ca.crt`, `client.crt`, `client.key`
//! - `SETTLE_TEST_MYSQL_TLS_URL`: `mysql://settle_tls@localhost:PORT/settle`
//!
//! Databases on the TLS server: `settle_tls` (with the extension) and
//! `settle_tls_portable` (without); a role `settle_cert` logs in by client
//! certificate.

use settle::{Admin, Client, Error, Form, Queue, Settled, WorkerOptions};
use settle_conformance::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The TLS server's libpq string and the TLS files, or None (saying why)
/// where this major's server has no TLS.
fn tls_server() -> Option<(String, PathBuf)> {
    let conn = env("SETTLE_TEST_TLS");
    if let Some(why) = conn.strip_prefix("skip:") {
        println!("TLS server tests skipped: {why}");
        return None;
    }
    Some((conn, PathBuf::from(env("SETTLE_TEST_TLS_DIR"))))
}

fn file(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// `host=localhost port=N` of a libpq string, as URL parts.
fn host_port(conn: &str) -> (String, String) {
    let get = |k: &str| {
        conn.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} in {conn}"))
            .to_owned()
    };
    (get("host"), get("port"))
}

/// A sqlx pool on a TLS database, for setup and checks.
async fn setup_pool(url: &str) -> sqlx::AnyPool {
    settle_conformance::pool_options(2)
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn verify_full_url(conn: &str, dir: &std::path::Path, db: &str) -> String {
    let (host, port) = host_port(conn);
    format!(
        "postgres://postgres@{host}:{port}/{db}?sslmode=verify-full&sslrootcert={}",
        file(dir, "ca.crt")
    )
}

/// `n` deliveries of a fresh queue claimed and acked through `client`; the
/// table is then empty.
async fn drain(b: Backend, pool: &sqlx::AnyPool, t: &str, client: &Client, n: usize) {
    let mut done = 0;
    while done < n {
        let got = client.claim(n).await.unwrap();
        assert!(!got.is_empty(), "{b:?} {t}: rows left to claim");
        for d in got {
            assert_eq!(d.ack().await.unwrap(), Settled::Deleted, "{b:?} {t}");
            done += 1;
        }
    }
    assert_eq!(wait_until_empty(b, pool, t, 50).await, 0, "{b:?} {t}");
}

/// Every form through the extension over verify-full TLS, with the connection
/// given as a key=value string, a URL and the `PG*`-style string the
/// operator's own tools use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_every_form_over_verify_full() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let Some((conn, dir)) = tls_server() else {
        return;
    };
    let url = verify_full_url(&conn, &dir, "settle_tls");
    let kv = format!(
        "{conn} dbname=settle_tls sslmode=verify-full sslrootcert='{}'",
        file(&dir, "ca.crt")
    );
    let pool = setup_pool(&url).await;
    let b = Backend::PgExtension;
    for (i, (form, _)) in b.forms().into_iter().enumerate() {
        let t = table(b, &pool, "tls_ext", 6).await;
        let q = Queue::new(&t, &t)
            .form(form)
            .dead_letter(3, format!("{t}_dead"));
        Admin::postgres(url.as_str(), 1)
            .await
            .unwrap()
            .register(&q)
            .await
            .unwrap();
        let via = if i % 2 == 0 {
            kv.as_str()
        } else {
            url.as_str()
        };
        let c = Client::connect(via, 4, q)
            .await
            .unwrap_or_else(|e| panic!("{form:?} over TLS: {e}"));
        drain(b, &pool, &t, &c, 6).await;
    }
}

/// Every form of the portable path over verify-full TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_every_form_over_verify_full() {
    if !selected(Backend::PgPortable) {
        return;
    }
    let Some((conn, dir)) = tls_server() else {
        return;
    };
    let url = verify_full_url(&conn, &dir, "settle_tls_portable");
    let pool = setup_pool(&url).await;
    let b = Backend::PgPortable;
    for (form, _) in b.forms() {
        let t = table(b, &pool, "tls_portable", 6).await;
        let q = Queue::new(&t, &t)
            .form(form)
            .dead_letter(3, format!("{t}_dead"));
        let c = Client::portable(&url, 4, q)
            .await
            .unwrap_or_else(|e| panic!("{form:?} over TLS: {e}"));
        drain(b, &pool, &t, &c, 6).await;
    }
}

/// The server refuses a connection without TLS; a wrong CA and a wrong host
/// name fail with an error that names the cause, on both paths; verify-ca
/// does not check the name, require checks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_refused_says_why() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let Some((conn, dir)) = tls_server() else {
        return;
    };
    let (_, port) = host_port(&conn);
    let ca = file(&dir, "ca.crt");
    let other = file(&dir, "other-ca.crt");
    let admin = |s: String| async move { Admin::postgres(s.as_str(), 1).await.map(|_| ()) };

    let plain = admin(format!("{conn} dbname=settle_tls sslmode=disable")).await;
    let msg = plain.expect_err("no TLS is refused").to_string();
    assert!(msg.contains("no encryption"), "{msg}");

    let wrong_ca = format!("{conn} dbname=settle_tls sslmode=verify-full sslrootcert={other}");
    let msg = admin(wrong_ca).await.expect_err("a wrong CA").to_string();
    assert!(
        msg.contains("not signed by a trusted root certificate"),
        "{msg}"
    );
    let portable = Client::portable(
        &format!("postgres://postgres@localhost:{port}/settle_tls_portable?sslmode=verify-full&sslrootcert={other}"),
        1,
        Queue::new("x", "x"),
    )
    .await;
    let msg = portable.expect_err("a wrong CA (portable)").to_string();
    assert!(
        msg.contains("not signed by a trusted root certificate"),
        "{msg}"
    );

    // the certificate names localhost, not 127.0.0.1
    let by_ip = format!("host=127.0.0.1 port={port} user=postgres dbname=settle_tls");
    let msg = admin(format!("{by_ip} sslmode=verify-full sslrootcert={ca}"))
        .await
        .expect_err("a wrong host name")
        .to_string();
    assert!(msg.contains("not valid for the host name"), "{msg}");
    let portable = Client::portable(
        &format!("postgres://postgres@127.0.0.1:{port}/settle_tls_portable?sslmode=verify-full&sslrootcert={ca}"),
        1,
        Queue::new("x", "x"),
    )
    .await;
    let msg = portable
        .expect_err("a wrong host name (portable)")
        .to_string();
    assert!(msg.contains("not valid for the host name"), "{msg}");

    admin(format!("{by_ip} sslmode=verify-ca sslrootcert={ca}"))
        .await
        .expect("verify-ca checks the chain only");
    admin(format!("{by_ip} sslmode=require"))
        .await
        .expect("require encrypts without checking");
    let msg = admin(format!("{by_ip} sslmode=verify-full"))
        .await
        .expect_err("verify-full without a root certificate")
        .to_string();
    assert!(msg.contains("root certificate file"), "{msg}");
}

/// A role that logs in by client certificate (`sslcert`, `sslkey`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let Some((conn, dir)) = tls_server() else {
        return;
    };
    let (host, port) = host_port(&conn);
    let base = format!(
        "host={host} port={port} user=settle_cert dbname=settle_tls sslmode=verify-full sslrootcert={}",
        file(&dir, "ca.crt")
    );
    let with_cert = format!(
        "{base} sslcert={} sslkey={}",
        file(&dir, "client.crt"),
        file(&dir, "client.key")
    );
    let a = Admin::postgres(with_cert.as_str(), 1)
        .await
        .unwrap_or_else(|e| panic!("client certificate: {e}"));
    a.queues().await.unwrap();
    let msg = Admin::postgres(base.as_str(), 1)
        .await
        .map(|_| ())
        .expect_err("no client certificate")
        .to_string();
    assert!(msg.contains("certificate"), "{msg}");
}

/// The worker's LISTEN connection uses TLS too: a row inserted while the
/// worker waits (polling only every 30 s) is handled at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_wakes_over_tls() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let Some((conn, dir)) = tls_server() else {
        return;
    };
    let url = verify_full_url(&conn, &dir, "settle_tls");
    let pool = setup_pool(&url).await;
    let b = Backend::PgExtension;
    let t = table(b, &pool, "tls_listen", 0).await;
    sqlx::query(&format!(
        "CREATE TRIGGER settle_notify AFTER INSERT ON {t} FOR EACH STATEMENT EXECUTE FUNCTION queue_notify_trigger('{t}')"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let q = Queue::new(&t, &t);
    Admin::postgres(url.as_str(), 1)
        .await
        .unwrap()
        .register(&q)
        .await
        .unwrap();
    let c = Client::connect(url.as_str(), 2, q).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let opts = WorkerOptions {
        poll_interval: Duration::from_secs(30),
        ..Default::default()
    };
    let worker = tokio::spawn({
        let c = c.clone();
        async move {
            c.run(
                opts,
                async { stopped.await.unwrap_or(()) },
                |d| async move { d.ack().await },
            )
            .await
        }
    });
    // the worker claims once, finds nothing and waits; then the row arrives
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = Instant::now();
    sqlx::query(&format!("INSERT INTO {t} (payload) VALUES ('{{}}')"))
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(wait_until_empty(b, &pool, &t, 250).await, 0);
    let took = start.elapsed();
    stop.send(()).unwrap();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.count(Settled::Deleted), 1);
    assert!(
        took < Duration::from_secs(10),
        "woken by NOTIFY, not the 30 s poll: {took:?}"
    );
}

/// MariaDB: a user the server refuses without TLS, reached with
/// `ssl-mode=VERIFY_IDENTITY`; a wrong CA names the cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_over_verify_identity() {
    if !selected(Backend::MariaDb) {
        return;
    }
    let dir = PathBuf::from(env("SETTLE_TEST_TLS_DIR"));
    let base = env("SETTLE_TEST_MYSQL_TLS_URL");
    let url = format!(
        "{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        file(&dir, "ca.crt")
    );
    let b = Backend::MariaDb;
    let root = admin(b).await;
    let t = table(b, &root, "tls_mariadb", 6).await;
    for form in [
        Form::Lease {
            ttl: Duration::from_secs(30),
        },
        Form::RowLock,
    ] {
        let c = Client::portable(&url, 2, Queue::new(&t, &t).form(form))
            .await
            .unwrap_or_else(|e| panic!("{form:?} over TLS: {e}"));
        let got = c.claim(3).await.unwrap();
        assert_eq!(got.len(), 3, "{form:?}");
        for d in got {
            assert_eq!(d.ack().await.unwrap(), Settled::Deleted);
        }
    }
    assert_eq!(wait_until_empty(b, &root, &t, 50).await, 0);
    let plain = Client::portable(&format!("{base}?ssl-mode=DISABLED"), 1, Queue::new(&t, &t)).await;
    assert!(plain.is_err(), "the settle_tls user needs TLS");
    let wrong = Client::portable(
        &format!(
            "{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
            file(&dir, "other-ca.crt")
        ),
        1,
        Queue::new(&t, &t),
    )
    .await;
    let msg = match wrong {
        Err(Error::Database(e)) => e.to_string(),
        other => panic!("a wrong CA: {other:?}"),
    };
    assert!(
        msg.contains("not signed by a trusted root certificate"),
        "{msg}"
    );
}

/// A server that takes connections with and without TLS and presents a
/// self-signed X.509 version 1 certificate, as Citus makes for its nodes
/// (`SETTLE_TEST_TLS_V1`). The extension client takes it under `require`
/// (webpki reads version 3 only; the handshake's signature is checked with the
/// certificate's key). The portable path's driver cannot read it: under
/// `prefer` it connects without TLS, as libpq does after a failed handshake,
/// and under `require` it fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_1_certificates() {
    if !selected(Backend::PgExtension) || !selected(Backend::PgPortable) {
        return;
    }
    if tls_server().is_none() {
        return;
    }
    let conn = env("SETTLE_TEST_TLS_V1");
    let (host, port) = host_port(&conn);
    let plain = setup_pool(&format!(
        "postgres://postgres@{host}:{port}/settle_v1_portable?sslmode=disable"
    ))
    .await;
    let ssl_of = |app: &'static str| {
        let plain = plain.clone();
        async move {
            let r: Vec<(bool,)> = sqlx::query_as(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = $1",
            )
            .bind(app)
            .fetch_all(&plain)
            .await
            .unwrap();
            r.into_iter().map(|(s,)| s).collect::<Vec<bool>>()
        }
    };
    let a = Admin::postgres(
        format!("{conn} dbname=settle_v1 sslmode=require application_name=v1_extension").as_str(),
        1,
    )
    .await
    .unwrap_or_else(|e| panic!("a version 1 certificate under require: {e}"));
    a.queues().await.unwrap();
    assert_eq!(
        ssl_of("v1_extension").await,
        [true],
        "the extension client used TLS"
    );

    let b = Backend::PgPortable;
    let t = table(b, &plain, "tls_v1", 2).await;
    let url = format!(
        "postgres://postgres@{host}:{port}/settle_v1_portable?application_name=v1_portable"
    );
    let c = Client::portable(&url, 1, Queue::new(&t, &t)).await.unwrap();
    drain(b, &plain, &t, &c, 2).await;
    // (the connection that probed the server may still be listed while it
    // closes: every one listed went without TLS)
    let ssl = ssl_of("v1_portable").await;
    assert!(
        !ssl.is_empty() && ssl.iter().all(|s| !s),
        "prefer went without TLS: {ssl:?}"
    );
    let msg = Client::portable(&format!("{url}&sslmode=require"), 1, Queue::new(&t, &t))
        .await
        .map(|_| ())
        .expect_err("sqlx cannot read a version 1 certificate")
        .to_string();
    assert!(msg.contains("TLS"), "{msg}");
}
