//! The `settle` command on every backend: queues, dead list / show / requeue /
//! purge and sql, as tables and as JSON, with its exit codes.

use serde_json::Value;
use settle_conformance::*;
use std::process::Command;

/// Run `settle ARGS`: exit code, stdout, stderr.
fn settle(args: &[String]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_settle"))
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .expect("run settle");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// With the extension, `settle queues` shows the table's dead row versions,
/// and warns on stderr while another session holds the xmin horizon (a
/// REPEATABLE READ snapshot here) for at least `--horizon-warn`.
async fn horizon_warned(base: &[String], pool: &sqlx::AnyPool, t: &str) {
    let (rc, out, err) = settle(&args(base, &["--json", "queues"]));
    assert_eq!(rc, 0, "{err}");
    let qs: Value = serde_json::from_str(&out).unwrap();
    let mine = qs
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == t)
        .unwrap();
    assert!(mine["dead_tuples"].is_i64(), "{mine}");
    let mut holder = pool.acquire().await.unwrap();
    for sql in ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT 1"] {
        sqlx::raw_sql(sql).execute(&mut *holder).await.unwrap();
    }
    let (rc, out, err) = settle(&args(base, &["queues", "--horizon-warn", "0s"]));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("DEAD TUPLES"), "{out}");
    assert!(
        err.contains("warning: the xmin horizon has been held") && err.contains("session "),
        "{err}"
    );
    let (_, out, _) = settle(&args(base, &["--json", "queues"]));
    let qs: Value = serde_json::from_str(&out).unwrap();
    assert!(
        qs.as_array().unwrap()[0]["horizon"]["holder"]
            .as_str()
            .is_some_and(|h| h.starts_with("session ")),
        "{qs}"
    );
    let (_, _, err) = settle(&args(base, &["queues"]));
    assert!(
        !err.contains("warning"),
        "held for less than a minute: {err}"
    );
    sqlx::raw_sql("COMMIT").execute(&mut *holder).await.unwrap();
}

fn args(base: &[String], more: &[&str]) -> Vec<String> {
    base.iter()
        .cloned()
        .chain(more.iter().map(|s| s.to_string()))
        .collect()
}

async fn commands(b: Backend) {
    let pool = admin(b).await;
    let (t, c) = all_dead(b, &pool, "cli", 3).await;
    let mut base = vec!["--url".to_string(), b.admin_url()];
    if b != Backend::PgExtension {
        base.extend([
            "--queue".to_string(),
            format!("{t},form=lease,dead_letter={t}_dead"),
        ]);
    }

    let (rc, out, err) = settle(&args(&base, &["queues"]));
    assert_eq!(rc, 0, "{b:?}: {err}");
    assert!(
        out.starts_with("QUEUE  ") && out.contains(&t),
        "{b:?}: {out}"
    );
    let says = if b == Backend::PgExtension {
        "with the settle extension"
    } else {
        "(portable path)"
    };
    assert!(err.contains(says), "{b:?}: {err}");
    let (rc, out, _) = settle(&args(&base, &["--json", "queues"]));
    assert_eq!(rc, 0, "{b:?}");
    let qs: Value = serde_json::from_str(&out).unwrap();
    let mine = qs
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == t.as_str())
        .unwrap();
    assert_eq!(
        (
            mine["ready"].as_i64(),
            mine["dead"].as_i64(),
            mine["form"].as_str()
        ),
        (Some(0), Some(3), Some("lease")),
        "{b:?}: {mine}"
    );
    if b == Backend::PgExtension {
        horizon_warned(&base, &pool, &t).await;
    }

    let (rc, out, _) = settle(&args(&base, &["dead", "list", &t]));
    assert_eq!(rc, 0, "{b:?}");
    assert_eq!(
        out.lines().count(),
        4,
        "{b:?}: a header and three rows\n{out}"
    );
    assert!(
        out.lines().nth(1).unwrap().contains(r#"{"n":1}"#),
        "{b:?}: {out}"
    );
    let (_, out, _) = settle(&args(
        &base,
        &["--json", "dead", "list", &t, "--limit", "2"],
    ));
    let rows: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["1", "2"], "{b:?}");
    assert_eq!(rows[0]["attempt"], 1, "{b:?}");

    let (rc, out, _) = settle(&args(&base, &["--json", "dead", "show", &t, "2"]));
    assert_eq!(rc, 0, "{b:?}");
    let row: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["row"]["payload"]["n"], 2, "{b:?}: {row}");
    let (rc, _, err) = settle(&args(&base, &["dead", "show", &t, "99"]));
    assert_eq!(rc, 1, "{b:?}");
    assert!(
        err.trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("no dead row with id 99"),
        "{b:?}: {err}"
    );

    let (rc, out, _) = settle(&args(&base, &["dead", "requeue", &t, "1"]));
    assert_eq!((rc, out.trim()), (0, "requeued 1"), "{b:?}");
    let (rc, out, _) = settle(&args(&base, &["dead", "purge", &t, "--older-than", "1h"]));
    assert_eq!((rc, out.trim()), (0, "purged 0"), "{b:?}");
    let (rc, out, _) = settle(&args(&base, &["--json", "dead", "purge", &t, "3"]));
    assert_eq!((rc, out.trim()), (0, r#"{"purged":1}"#), "{b:?}");
    let (rc, out, _) = settle(&args(&base, &["dead", "requeue", &t, "--all"]));
    assert_eq!((rc, out.trim()), (0, "requeued 1"), "{b:?}");
    let s = c.stats().await.unwrap();
    assert_eq!((s.ready, s.dead), (2, Some(0)), "{b:?}");

    let (rc, out, _) = settle(&args(&base, &["sql", &t]));
    assert_eq!(rc, 0, "{b:?}");
    assert!(out.contains("-- claim") && out.contains(&t), "{b:?}: {out}");

    // usage errors: 2; failures: 1, one line
    assert_eq!(settle(&args(&base, &["dead", "purge", &t])).0, 2, "{b:?}");
    assert_eq!(
        settle(&args(&base, &["dead", "requeue", &t, "1", "--all"])).0,
        2,
        "{b:?}"
    );
    let (rc, _, err) = settle(&args(&base, &["dead", "list", "no_such_queue"]));
    assert_eq!(rc, 1, "{b:?}: {err}");
    assert!(
        err.lines()
            .last()
            .unwrap()
            .starts_with("settle: unknown queue"),
        "{b:?}: {err}"
    );
    println!("{b:?}: settle queues, dead list/show/requeue/purge, sql");
}

#[test]
fn no_database_and_bad_usage() {
    let (rc, _, err) = settle(&["queues".to_string()]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("give --url or set DATABASE_URL"), "{err}");
    assert_eq!(settle(&["frobnicate".to_string()]).0, 2);
    let (rc, _, err) = settle(&["--url".into(), "sqlite://x.db".into(), "queues".into()]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("describe the queues"), "{err}");
    let (rc, _, err) = settle(&[
        "--url".into(),
        "sqlite://x.db".into(),
        "dashboard".into(),
        "--listen".into(),
        "0.0.0.0:0".into(),
    ]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{err}"
    );
}

macro_rules! cell {
    ($name:ident: $b:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if selected($b) {
                commands($b).await;
            }
        }
    };
}

cell!(pg_extension: Backend::PgExtension);
cell!(pg_portable: Backend::PgPortable);
cell!(mariadb: Backend::MariaDb);
cell!(sqlite: Backend::Sqlite);

/// `settle register`: created, unchanged, changed with what differed, and
/// refused for a dead letter without max_attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register() {
    let b = Backend::PgExtension;
    if !selected(b) {
        return;
    }
    let pool = admin(b).await;
    let t = table(b, &pool, "cli_reg", 1).await;
    let base = vec!["--url".to_string(), env("SETTLE_TEST_PG")];
    let spec = format!("{t},form=row_lock,dead_letter={t}_dead,max_attempts=2");
    let (rc, out, err) = settle(&args(&base, &["register", &spec]));
    assert_eq!((rc, out.trim()), (0, "created"), "{err}");
    let (rc, out, _) = settle(&args(&base, &["register", &spec]));
    assert_eq!((rc, out.trim()), (0, "unchanged"));
    let lease = format!("{t},form=lease,dead_letter={t}_dead,max_attempts=2");
    let (rc, out, _) = settle(&args(&base, &["register", &lease]));
    assert_eq!((rc, out.trim()), (0, "changed\n  form: row_lock -> lease"));
    let (rc, out, _) = settle(&args(&base, &["--json", "register", t.as_str()]));
    assert_eq!(rc, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["registration"], "changed", "{v}");
    let fields: Vec<&str> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["max_attempts", "dead_letter"], "{v}");
    let (rc, _, err) = settle(&args(&base, &["register", &format!("{t},dead_letter=x")]));
    assert_eq!(rc, 1);
    assert!(err.contains("dead_letter needs max_attempts"), "{err}");
}

/// `settle queues` against the TLS-only server with verify-full; a wrong CA
/// and a wrong host name fail with one line that names the cause.
#[test]
fn queues_over_verify_full_tls() {
    if !selected(Backend::PgExtension) {
        return;
    }
    let conn = env("SETTLE_TEST_TLS");
    if let Some(why) = conn.strip_prefix("skip:") {
        println!("TLS: skipped: {why}");
        return;
    }
    let port = conn
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .expect("port=");
    let dir = std::path::PathBuf::from(env("SETTLE_TEST_TLS_DIR"));
    let url = |host: &str, ca: &str| {
        format!(
            "postgres://postgres@{host}:{port}/settle_tls?sslmode=verify-full&sslrootcert={}",
            dir.join(ca).display()
        )
    };
    let (rc, _, err) = settle(&["--url".into(), url("localhost", "ca.crt"), "queues".into()]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("with the settle extension"), "{err}");
    let (rc, _, err) = settle(&[
        "--url".into(),
        url("localhost", "other-ca.crt"),
        "queues".into(),
    ]);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("not signed by a trusted root certificate"),
        "{err}"
    );
    let (rc, _, err) = settle(&["--url".into(), url("127.0.0.1", "ca.crt"), "queues".into()]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("not valid for the host name"), "{err}");
}
