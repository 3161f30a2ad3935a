//! The dashboard's HTML. maud escapes every value it is given, so user data
//! (queue names, ids, payloads) is always text.

use maud::{html, Markup, DOCTYPE};
use settle::{DeadRow, Health, QueueInfo};
use std::collections::HashMap;
use std::time::Duration;

/// A queue name as one URL path segment.
pub fn path_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn layout(title: &str, backend: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · settle" }
                link rel="stylesheet" href="/assets/dashboard.css";
            }
            body {
                header {
                    a.brand href="/" { "settle" }
                    span.backend { (backend) }
                }
                main { (body) }
                script src="/assets/dashboard.js" {}
            }
        }
    }
}

fn opt(n: Option<i64>) -> String {
    n.map_or("–".into(), |n| n.to_string())
}

/// A sparkline of `rates` as an inline SVG polyline (the script redraws it).
fn sparkline(rates: &[f64]) -> Markup {
    let max = rates.iter().cloned().fold(0.0f64, f64::max);
    let n = rates.len().max(2) - 1;
    let points: Vec<String> = rates
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let x = 120.0 * i as f64 / n as f64;
            let y = if max > 0.0 {
                22.0 - 20.0 * r / max
            } else {
                22.0
            };
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let last = rates.last().copied().unwrap_or(0.0);
    html! {
        svg.spark viewBox="0 0 120 24" width="120" height="24" role="img" aria-label="drained per second" {
            polyline points=(points.join(" ")) {}
        }
        span.rate { (format!("{last:.1}/s")) }
    }
}

pub fn index(
    backend: &str,
    qs: &[QueueInfo],
    health: &[Health],
    rates: &HashMap<String, Vec<f64>>,
    every: Duration,
) -> Markup {
    let dead_tuples =
        |q: &QueueInfo| crate::output::health_of(health, q).and_then(|h| h.dead_tuples);
    layout(
        "Queues",
        backend,
        html! {
            h1 { "Queues" }
            @if let Some(w) = crate::output::horizon_warning(health, crate::output::HORIZON_WARN) {
                p.warning role="alert" { (w) }
            }
            @if qs.is_empty() {
                p.empty { "No queues are registered in this database." }
            } @else {
                table #queues data-refresh-ms=(every.as_millis()) {
                    thead { tr {
                        th { "Queue" } th { "Form" } th.n { "Ready" } th.n { "Delayed" }
                        th.n { "In flight" } th.n { "Dead" } th.n { "Oldest ready" }
                        @if !health.is_empty() { th.n { "Dead tuples" } }
                        th { "Drained (net)" }
                    } }
                    tbody {
                        @for q in qs {
                            tr data-queue=(q.name) {
                                td { a href={ "/queues/" (path_segment(&q.name)) } { (q.name) } }
                                td { (q.form) }
                                td.n data-field="ready" { (q.stats.ready) }
                                td.n data-field="delayed" { (q.stats.delayed) }
                                td.n data-field="in_flight" { (opt(q.stats.in_flight)) }
                                td.n data-field="dead" { (opt(q.stats.dead)) }
                                td.n data-field="oldest" { (q.stats.oldest_ready_age.map_or("–".into(), crate::output::age)) }
                                @if !health.is_empty() { td.n data-field="dead_tuples" { (opt(dead_tuples(q))) } }
                                td.spark-cell { (sparkline(rates.get(&q.name).map(Vec::as_slice).unwrap_or(&[]))) }
                            }
                        }
                    }
                }
            }
        },
    )
}

pub fn queue(
    backend: &str,
    q: &QueueInfo,
    dead: Option<&[DeadRow]>,
    csrf: Option<&str>,
    done: Option<(&str, i64)>,
) -> Markup {
    let base = format!("/queues/{}", path_segment(&q.name));
    layout(
        &q.name,
        backend,
        html! {
            h1 { "Queue " code { (q.name) } }
            @if let Some((what, n)) = done {
                p.done role="status" { (n) " " (if n == 1 { "row" } else { "rows" }) " " (what) "." }
            }
            dl.counts {
                dt { "Form" } dd { (q.form) }
                dt { "Ready" } dd { (q.stats.ready) }
                dt { "Delayed" } dd { (q.stats.delayed) }
                dt { "In flight" } dd { (opt(q.stats.in_flight)) }
                dt { "Dead" } dd #dead-count { (opt(q.stats.dead)) }
                dt { "Oldest ready" } dd { (q.stats.oldest_ready_age.map_or("–".into(), crate::output::age)) }
            }
            h2 { "Dead letters" }
            @match dead {
                None => p.empty { "This queue has no dead letter." },
                Some([]) => p.empty { "No dead rows." },
                Some(rows) => {
                    @if let Some(csrf) = csrf {
                        div.bulk {
                            form.requeue-all method="post" action={ (base) "/requeue" } {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="all" value="1";
                                button type="submit" { "Requeue all" }
                            }
                            form.purge-age method="post" action={ (base) "/purge" } {
                                input type="hidden" name="csrf" value=(csrf);
                                label { "Purge older than " input type="text" name="older_than" value="7d" size="6"; }
                                button type="submit" { "Purge" }
                            }
                        }
                    }
                    table #dead {
                        thead { tr { th { "Id" } th.n { "Attempt" } th { "Payload" } @if csrf.is_some() { th { "Actions" } } } }
                        tbody {
                            @for r in rows {
                                tr data-id=(r.id) {
                                    td { code { (r.id) } }
                                    td.n { (opt(r.attempt)) }
                                    td.payload { code { (crate::output::short_payload(r, 200)) } }
                                    @if let Some(csrf) = csrf {
                                        td.actions {
                                            form.requeue method="post" action={ (base) "/requeue" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                input type="hidden" name="id" value=(r.id);
                                                button type="submit" { "Requeue" }
                                            }
                                            form.purge method="post" action={ (base) "/purge" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                input type="hidden" name="id" value=(r.id);
                                                button type="submit" { "Purge" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p { a href="/" { "← all queues" } }
        },
    )
}

pub fn failure(title: &str, detail: &str) -> Markup {
    layout(
        title,
        "",
        html! {
            h1 { (title) }
            p.error { (detail) }
            p { a href="/" { "← all queues" } }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use settle::Stats;

    #[test]
    fn user_data_is_text() {
        let q = QueueInfo {
            name: "<b>q</b>".into(),
            form: "lease".into(),
            stats: Stats {
                ready: 1,
                delayed: 0,
                in_flight: Some(0),
                dead: Some(1),
                oldest_ready_age: None,
            },
        };
        let rows = [DeadRow {
            id: "1\"><script>x()</script>".into(),
            attempt: Some(3),
            row: serde_json::json!({"payload": {"html": "<script>alert(1)</script>"}}),
        }];
        let html = queue("b", &q, Some(&rows), Some("t"), None).into_string();
        assert!(
            !html.contains("<script>alert") && !html.contains("<script>x()"),
            "{html}"
        );
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            !html.contains("<b>q</b>") && html.contains("/queues/%3Cb%3Eq%3C%2Fb%3E/requeue"),
            "{html}"
        );
        let ro = queue("b", &q, Some(&rows), None, None).into_string();
        assert!(!ro.contains("<form"), "read-only pages have no forms");
    }
}
