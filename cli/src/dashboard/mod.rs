//! `settle dashboard`: an axum server of server-rendered pages over
//! [`settle::Admin`] — the queue list with counts and a throughput
//! sparkline, a page per queue with its dead letters and requeue / purge —
//! and a little JavaScript of its own that refreshes the counts.
//!
//! Security: every request needs the token when one is given (a bearer
//! header, or `?token=` once, which sets an HttpOnly cookie); every action is
//! a POST carrying a CSRF token; `--read-only` neither shows nor accepts
//! actions; no SQL is built from request input (the Admin calls bind it);
//! every value shown is escaped (maud), and the Content-Security-Policy allows
//! no inline script, so a payload holding markup stays text.

mod auth;
mod pages;
mod sampler;

pub use auth::check_token;

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use settle::Admin;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Config {
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub read_only: bool,
    pub sample_every: Duration,
}

pub(crate) struct App {
    admin: Admin,
    token: Option<String>,
    /// the token every action's form carries
    csrf: String,
    read_only: bool,
    samples: sampler::Samples,
    sample_every: Duration,
}

/// How many dead rows a queue page lists.
const DEAD_ON_PAGE: i64 = 100;

pub async fn serve(admin: Admin, cfg: Config) -> Result<(), String> {
    let app = Arc::new(App {
        admin,
        token: cfg.token,
        csrf: auth::random_hex(16)?,
        read_only: cfg.read_only,
        samples: sampler::Samples::default(),
        sample_every: cfg.sample_every,
    });
    tokio::spawn(sampler::run(app.clone()));
    let router = Router::new()
        .route("/", get(index))
        .route("/queues/{queue}", get(queue_page))
        .route("/queues/{queue}/requeue", post(requeue))
        .route("/queues/{queue}/purge", post(purge))
        .route("/api/queues", get(api_queues))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(style))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::map_response(auth::security_headers))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| format!("listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("settle: dashboard on http://{addr}/");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| e.to_string())
}

type Shared = State<Arc<App>>;

/// An error page: what failed, and why.
fn fail(status: StatusCode, title: &str, detail: &str) -> Response {
    page(status, pages::failure(title, detail))
}

fn page(status: StatusCode, m: maud::Markup) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        m.into_string(),
    )
        .into_response()
}

async fn index(State(app): Shared) -> Response {
    match app.admin.queues().await {
        Ok(qs) => {
            let spark = app.samples.rates();
            // the extension's queue_health (0.7.0); without it, counts only
            let health = app.admin.health().await.unwrap_or_default();
            page(
                StatusCode::OK,
                pages::index(&app.admin.backend(), &qs, &health, &spark, app.sample_every),
            )
        }
        Err(e) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The queues could not be read",
            &e.to_string(),
        ),
    }
}

async fn queue_page(
    State(app): Shared,
    Path(queue): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let qs = match app.admin.queues().await {
        Ok(qs) => qs,
        Err(e) => {
            return fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The queues could not be read",
                &e.to_string(),
            )
        }
    };
    let Some(info) = qs.into_iter().find(|i| i.name == queue) else {
        return fail(StatusCode::NOT_FOUND, "No such queue", &queue);
    };
    let dead = if info.stats.dead.is_some() {
        match app.admin.dead_rows(&queue, DEAD_ON_PAGE, None).await {
            Ok(d) => Some(d),
            Err(e) => {
                return fail(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The dead letters could not be read",
                    &e.to_string(),
                )
            }
        }
    } else {
        None
    };
    // what the last action did: a known word and a number, nothing else is shown
    let done = match (
        q.get("done").map(String::as_str),
        q.get("n").and_then(|n| n.parse::<i64>().ok()),
    ) {
        (Some(w @ ("requeued" | "purged")), Some(n)) => Some((w, n)),
        _ => None,
    };
    let actions = (!app.read_only).then_some(app.csrf.as_str());
    page(
        StatusCode::OK,
        pages::queue(&app.admin.backend(), &info, dead.as_deref(), actions, done),
    )
}

/// An action's checks: not read-only, the CSRF token it was given.
fn may_act(app: &App, form: &HashMap<String, String>) -> Result<(), Response> {
    if app.read_only {
        return Err(fail(
            StatusCode::FORBIDDEN,
            "Read-only dashboard",
            "this dashboard was started with --read-only",
        ));
    }
    let given = form.get("csrf").map(String::as_str).unwrap_or("");
    if !auth::same(given, &app.csrf) {
        return Err(fail(
            StatusCode::FORBIDDEN,
            "Refused",
            "the form's CSRF token is missing or stale: reload the page",
        ));
    }
    Ok(())
}

fn back(queue: &str, done: &str, n: i64) -> Response {
    Redirect::to(&format!(
        "/queues/{}?done={done}&n={n}",
        pages::path_segment(queue)
    ))
    .into_response()
}

async fn requeue(
    State(app): Shared,
    Path(queue): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = may_act(&app, &form) {
        return r;
    }
    let ids = form.get("id").map(|i| vec![i.clone()]);
    if ids.is_none() && form.get("all").map(String::as_str) != Some("1") {
        return fail(
            StatusCode::BAD_REQUEST,
            "Nothing to requeue",
            "give a row or all",
        );
    }
    match app.admin.requeue_dead(&queue, ids.as_deref()).await {
        Ok(n) => back(&queue, "requeued", n),
        Err(e) => fail(StatusCode::BAD_REQUEST, "Requeue failed", &e.to_string()),
    }
}

async fn purge(
    State(app): Shared,
    Path(queue): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(r) = may_act(&app, &form) {
        return r;
    }
    let ids = form.get("id").map(|i| vec![i.clone()]);
    let older = match form
        .get("older_than")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(s) => match humantime::parse_duration(s) {
            Ok(d) => Some(d),
            Err(e) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    "Not a duration",
                    &format!("{s}: {e}"),
                )
            }
        },
    };
    if ids.is_none() && older.is_none() {
        return fail(
            StatusCode::BAD_REQUEST,
            "Nothing to purge",
            "give a row or an age",
        );
    }
    match app.admin.purge_dead(&queue, older, ids.as_deref()).await {
        Ok(n) => back(&queue, "purged", n),
        Err(e) => fail(StatusCode::BAD_REQUEST, "Purge failed", &e.to_string()),
    }
}

async fn api_queues(State(app): Shared) -> Response {
    match app.admin.queues().await {
        Ok(qs) => {
            let rates = app.samples.rates();
            let health = app.admin.health().await.unwrap_or_default();
            let v: Vec<serde_json::Value> = qs
                .iter()
                .map(|q| {
                    let mut j = crate::output::queue_json(q, crate::output::health_of(&health, q));
                    j["drained_per_second"] =
                        serde_json::json!(rates.get(&q.name).cloned().unwrap_or_default());
                    j
                })
                .collect();
            axum::Json(v).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/dashboard.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/dashboard.css"),
    )
        .into_response()
}
