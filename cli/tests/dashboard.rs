//! The dashboard in a real browser: `settle dashboard` over PostgreSQL with
//! the extension and a scripted workload, driven by headless Chromium through
//! the DevTools protocol. The queue list shows each queue with its counts, a
//! requeue click moves a dead row back, a request without the token is
//! refused, and a payload holding `<script>` is shown as text. Screenshots go
//! to `$SETTLE_TEST_OUT` (the test command's output folder).
//!
//! Needs `SETTLE_TEST_CHROMIUM` (the browser; the test command installs
//! Debian's `chromium`) and the servers of the conformance suite.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use settle::{Admin, Client, Form, Queue, Settled, WorkerOptions};
use settle_conformance::*;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A DevTools protocol connection to the browser (flat sessions).
struct Cdp {
    ws: Ws,
    next: u64,
}

impl Cdp {
    async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer"))
                .expect("the browser closed the connection")
                .unwrap();
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Open `url` in a new page (of `context`, or the default one); its session.
    async fn open(&mut self, url: &str, context: Option<&str>) -> String {
        let mut p = json!({"url": url});
        if let Some(c) = context {
            p["browserContextId"] = json!(c);
        }
        let target = self.call(None, "Target.createTarget", p).await["targetId"].clone();
        let s = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await["sessionId"]
            .as_str()
            .unwrap()
            .to_owned();
        self.call(Some(&s), "Page.enable", json!({})).await;
        s
    }

    async fn eval(&mut self, s: &str, expr: &str) -> Value {
        let r = self
            .call(
                Some(s),
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Evaluate `expr` until it is true (every 100 ms, for up to 20 s).
    async fn until(&mut self, s: &str, expr: &str) {
        let start = Instant::now();
        while self.eval(s, expr).await != json!(true) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "never true: {expr}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn screenshot(&mut self, s: &str, file: &std::path::Path) {
        use base64::Engine;
        let r = self
            .call(Some(s), "Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(file, png).unwrap();
        println!("screenshot: {}", file.display());
    }
}

/// Start `settle ARGS dashboard …` and wait for the address it listens on.
async fn dashboard(url: &str, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_settle"))
        .args([
            "--url",
            url,
            "dashboard",
            "--listen",
            "127.0.0.1:0",
            "--sample-every",
            "250ms",
        ])
        .args(extra)
        .env_remove("SETTLE_DASHBOARD_TOKEN")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let l = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the dashboard starts")
            .unwrap()
            .expect("the dashboard exited");
        if let Some(a) = l.strip_prefix("settle: dashboard on http://") {
            break a.trim_end_matches('/').to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// One raw HTTP/1.1 request: the status code and the body.
async fn http(addr: &str, req: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_owned())
        .unwrap_or_default();
    (code, body)
}

fn get(path: &str, auth: Option<&str>) -> String {
    let a = auth
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{a}Connection: close\r\n\r\n")
}

fn post(path: &str, auth: Option<&str>, body: &str) -> String {
    let a = auth
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\n{a}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium() {
    let Ok(chromium) = std::env::var("SETTLE_TEST_CHROMIUM") else {
        println!("skipped: SETTLE_TEST_CHROMIUM is not set (the test command sets it)");
        return;
    };
    if !selected(Backend::PgExtension) {
        return;
    }
    let out_dir = std::path::PathBuf::from(
        std::env::var("SETTLE_TEST_OUT")
            .unwrap_or_else(|_| std::env::temp_dir().display().to_string()),
    );
    std::fs::create_dir_all(&out_dir).unwrap();
    let b = Backend::PgExtension;
    let pool = admin(b).await;

    // a queue with two dead rows (one payload holds a script) and one ready row
    let t = table(b, &pool, "web", 2).await;
    sqlx::query(&format!(
        "INSERT INTO {t} (payload) VALUES ('{{\"html\": \"<script>window.__settle_xss = 1</script>\"}}'), ('{{\"n\": 4}}')"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let lease = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    let c = b
        .client(
            Queue::new(&t, &t)
                .form(lease)
                .dead_letter(1, format!("{t}_dead")),
        )
        .await
        .unwrap();
    for d in c.claim(3).await.unwrap() {
        let id = d.id().to_owned();
        if id == "1" {
            d.release().await.unwrap(); // back to ready... and dead at its next claim
        } else {
            assert_eq!(d.retry().await.unwrap(), Settled::DeadLettered);
        }
    }
    sqlx::query(&format!("UPDATE {t} SET attempt = 0 WHERE id = 1"))
        .execute(&pool)
        .await
        .unwrap();
    // dead: 2 and 3 (the script); ready: 1 and 4
    let before = c.stats().await.unwrap();
    assert_eq!((before.ready, before.dead), (2, Some(2)), "{before:?}");

    // the scripted workload: a worker draining a second queue while the dashboard samples it
    let w = table(b, &pool, "web_work", 400).await;
    let worker: Client = b
        .client(Queue::new(&w, &w).form(Form::RowLock))
        .await
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let opts = WorkerOptions {
        batch: 1,
        concurrency: 1,
        ..WorkerOptions::default()
    };
    let work = tokio::spawn(async move {
        worker
            .run(
                opts,
                async {
                    let _ = stop_rx.await;
                },
                |d| async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    d.ack().await
                },
            )
            .await
    });

    let token = "t0ken-for-the-browser-test";
    let url = b.admin_url();
    let (_dash, addr) = dashboard(&url, &["--token", token]).await;

    // plain HTTP: the token is needed, and actions need the CSRF token
    assert_eq!(http(&addr, &get("/", None)).await.0, 401);
    assert_eq!(http(&addr, &get("/", Some("wrong"))).await.0, 401);
    assert_eq!(http(&addr, &get("/", Some(token))).await.0, 200);
    let q = format!("/queues/{t}/requeue");
    assert_eq!(
        http(&addr, &post(&q, Some(token), "all=1")).await.0,
        403,
        "an action without the CSRF token"
    );
    assert_eq!(
        http(&addr, &post(&q, Some(token), "all=1&csrf=guess"))
            .await
            .0,
        403
    );

    // the browser
    let profile = tempdir("settle-chromium");
    let mut browser = Command::new(&chromium)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--window-size=1200,800",
        ])
        .arg("--remote-debugging-port=0")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start chromium");
    let mut lines = BufReader::new(browser.stderr.take().unwrap()).lines();
    let ws_url = loop {
        let l = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("chromium starts")
            .unwrap()
            .expect("chromium exited");
        if let Some(u) = l.strip_prefix("DevTools listening on ") {
            break u.trim().to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let (ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .unwrap();
    let mut cdp = Cdp { ws, next: 0 };

    // ?token= once: a cookie, and the address without it
    let s = cdp
        .open(&format!("http://{addr}/?token={token}"), None)
        .await;
    cdp.until(&s, "document.readyState === 'complete' && location.pathname === '/' && location.search === '' && !!document.getElementById('queues')").await;
    // the page's own script refreshes the counts (the CSP lets it run)
    cdp.until(&s, "!!document.getElementById('queues').dataset.refreshed")
        .await;
    let row = |q: &str| {
        format!(
            "(() => {{ const r = [...document.querySelectorAll('tr[data-queue]')].find(r => r.dataset.queue === {q:?}); \
             return r ? Object.fromEntries([...r.querySelectorAll('[data-field]')].map(c => [c.dataset.field, c.textContent])) : null; }})()"
        )
    };
    let shown = cdp.eval(&s, &row(&t)).await;
    assert_eq!(
        (
            shown["ready"].as_str(),
            shown["dead"].as_str(),
            shown["in_flight"].as_str()
        ),
        (Some("2"), Some("2"), Some("0")),
        "{shown}"
    );
    // every queue of the registry is listed with the counts queue_stats has
    let listed = cdp
        .eval(
            &s,
            "[...document.querySelectorAll('tr[data-queue]')].map(r => r.dataset.queue)",
        )
        .await;
    let registry = Admin::connect(&url, 1, vec![])
        .await
        .unwrap()
        .queues()
        .await
        .unwrap();
    for q in &registry {
        assert!(
            listed
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == q.name.as_str()),
            "{} not listed: {listed}",
            q.name
        );
    }
    // the workload's sparkline has points once a few samples are in
    cdp.until(&s, &format!(
        "(() => {{ const r = [...document.querySelectorAll('tr[data-queue]')].find(r => r.dataset.queue === {w:?}); \
         return !!r && r.querySelector('polyline').getAttribute('points').split(' ').length >= 3; }})()"
    )).await;
    cdp.screenshot(&s, &out_dir.join("dashboard-queues.png"))
        .await;

    // the queue page: the script payload is text, and it did not run
    cdp.call(
        Some(&s),
        "Page.navigate",
        json!({"url": format!("http://{addr}/queues/{t}")}),
    )
    .await;
    cdp.until(
        &s,
        "document.readyState === 'complete' && !!document.getElementById('dead')",
    )
    .await;
    assert_eq!(cdp.eval(&s, "document.getElementById('dead').innerText.includes('<script>window.__settle_xss = 1</script>')").await, json!(true));
    assert_eq!(
        cdp.eval(&s, "typeof window.__settle_xss").await,
        json!("undefined")
    );
    assert_eq!(
        cdp.eval(&s, "document.querySelectorAll('main script').length")
            .await,
        json!(0)
    );
    cdp.screenshot(&s, &out_dir.join("dashboard-dead-letters.png"))
        .await;

    // a requeue click moves dead row 2 back
    cdp.eval(
        &s,
        "document.querySelector('tr[data-id=\"2\"] form.requeue button').click(); true",
    )
    .await;
    cdp.until(
        &s,
        "document.readyState === 'complete' && location.search.includes('done=requeued')",
    )
    .await;
    assert_eq!(
        cdp.eval(&s, "document.querySelector('.done').textContent")
            .await,
        json!("1 row requeued.")
    );
    let dead: Vec<String> = c
        .dead_rows(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(dead, vec!["3".to_string()]);
    let after = c.stats().await.unwrap();
    assert_eq!((after.ready, after.dead), (3, Some(1)), "{after:?}");
    cdp.screenshot(&s, &out_dir.join("dashboard-after-requeue.png"))
        .await;

    // a browser without the token's cookie is refused
    let ctx = cdp
        .call(None, "Target.createBrowserContext", json!({}))
        .await["browserContextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let s2 = cdp
        .open(&format!("http://{addr}/queues/{t}"), Some(&ctx))
        .await;
    cdp.until(&s2, "document.readyState === 'complete' && document.body.innerText.includes('401 Unauthorized')").await;
    assert_eq!(
        cdp.eval(&s2, "!!document.getElementById('dead')").await,
        json!(false)
    );
    cdp.screenshot(&s2, &out_dir.join("dashboard-no-token.png"))
        .await;

    // read-only: no action is shown or taken
    let (_ro, ro_addr) = dashboard(&url, &["--read-only"]).await;
    let (code, body) = http(&ro_addr, &get(&format!("/queues/{t}"), None)).await;
    assert_eq!(code, 200);
    assert!(
        body.contains("id=\"dead\"") && !body.contains("<form"),
        "{body}"
    );
    assert_eq!(http(&ro_addr, &post(&q, None, "all=1")).await.0, 403);
    // without a token it answers to loopback names only (no DNS rebinding)
    let rebound = "GET / HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n";
    assert_eq!(http(&ro_addr, rebound).await.0, 421);

    let _ = stop_tx.send(());
    work.await.unwrap().unwrap();
    let _ = browser.kill().await;
    let _ = std::fs::remove_dir_all(&profile);
}

fn tempdir(prefix: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
