//! What the commands print: a plain table for people, JSON for scripts.

use serde_json::{json, Value};
use settle::{DeadRow, Health, QueueInfo};
use std::time::Duration;

pub struct Out {
    pub json: bool,
}

/// Columns padded to their widest cell, two spaces apart.
fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c
                } else {
                    format!("{c:<width$}", width = w[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut s = line(head.iter().map(|h| h.to_string()).collect());
    for r in rows {
        s.push('\n');
        s.push_str(&line(r.clone()));
    }
    s
}

/// An age rounded to the second, as `1h 2m 3s`.
pub fn age(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn opt(n: Option<i64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

/// A dead row's payload (or the whole row), on one line, at most `max` characters.
pub fn short_payload(r: &DeadRow, max: usize) -> String {
    let v = r.row.get("payload").unwrap_or(&r.row);
    let s = match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let s = s.replace(['\n', '\r', '\t'], " ");
    if s.chars().count() > max {
        s.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        s
    }
}

pub fn queue_json(q: &QueueInfo, h: Option<&Health>) -> Value {
    let mut v = json!({
        "queue": q.name,
        "form": q.form,
        "ready": q.stats.ready,
        "delayed": q.stats.delayed,
        "in_flight": q.stats.in_flight,
        "dead": q.stats.dead,
        "oldest_ready_age_seconds": q.stats.oldest_ready_age.map(|d| d.as_secs_f64()),
    });
    if let Some(h) = h {
        v["dead_tuples"] = json!(h.dead_tuples);
        v["live_tuples"] = json!(h.live_tuples);
        v["seconds_since_vacuum"] = json!(h.since_vacuum.map(|d| d.as_secs_f64()));
        v["horizon"] = json!(h.horizon.as_ref().map(|x| json!({
            "holder": x.holder,
            "xmin_age": x.xmin_age,
            "age_seconds": x.age.map(|d| d.as_secs_f64()),
        })));
    }
    v
}

/// The health of queue `q`, if `health` has it.
pub fn health_of<'a>(health: &'a [Health], q: &QueueInfo) -> Option<&'a Health> {
    health.iter().find(|h| h.name == q.name)
}

/// A horizon held this long is worth a warning on the dashboard: a minute of
/// a busy queue's settled rows is already many dead row versions.
pub const HORIZON_WARN: Duration = Duration::from_secs(60);

/// A warning when the xmin horizon has been held at least `after` (the
/// holder is the same for every queue of a database).
pub fn horizon_warning(health: &[Health], after: Duration) -> Option<String> {
    let held = health.iter().find_map(|h| h.horizon.as_ref())?;
    let age = held.age?;
    if age < after {
        return None;
    }
    let dead: i64 = health.iter().filter_map(|h| h.dead_tuples).sum();
    Some(format!(
        "warning: the xmin horizon has been held for {} by {} ({} transactions): vacuum cannot \
         remove the row versions settled since ({dead} dead in the queue tables now); see \
         docs/operations.md, \"The xmin horizon\"",
        self::age(age),
        held.holder,
        held.xmin_age
    ))
}

impl Out {
    /// The queues' counts, with their tables' dead row versions where
    /// `health` has them (the extension's `queue_health`).
    pub fn queues(&self, qs: &[QueueInfo], health: &[Health]) {
        if self.json {
            println!(
                "{}",
                Value::Array(
                    qs.iter()
                        .map(|q| queue_json(q, health_of(health, q)))
                        .collect()
                )
            );
            return;
        }
        let mut head = vec![
            "QUEUE",
            "FORM",
            "READY",
            "DELAYED",
            "IN FLIGHT",
            "DEAD",
            "OLDEST READY",
        ];
        if !health.is_empty() {
            head.push("DEAD TUPLES");
        }
        let rows: Vec<Vec<String>> = qs
            .iter()
            .map(|q| {
                let mut r = vec![
                    q.name.clone(),
                    q.form.clone(),
                    q.stats.ready.to_string(),
                    q.stats.delayed.to_string(),
                    opt(q.stats.in_flight),
                    opt(q.stats.dead),
                    q.stats.oldest_ready_age.map_or("-".into(), age),
                ];
                if !health.is_empty() {
                    r.push(opt(health_of(health, q).and_then(|h| h.dead_tuples)));
                }
                r
            })
            .collect();
        println!("{}", table(&head, &rows));
    }

    pub fn dead_list(&self, rows: &[DeadRow]) {
        if self.json {
            let v: Vec<Value> = rows
                .iter()
                .map(|r| json!({"id": r.id, "attempt": r.attempt, "payload": r.row.get("payload").unwrap_or(&r.row)}))
                .collect();
            println!("{}", Value::Array(v));
            return;
        }
        let t: Vec<Vec<String>> = rows
            .iter()
            .map(|r| vec![r.id.clone(), opt(r.attempt), short_payload(r, 60)])
            .collect();
        println!("{}", table(&["ID", "ATTEMPT", "PAYLOAD"], &t));
    }

    pub fn dead_show(&self, r: &DeadRow) {
        if self.json {
            println!(
                "{}",
                json!({"id": r.id, "attempt": r.attempt, "row": r.row})
            );
        } else {
            println!(
                "{}",
                serde_json::to_string_pretty(&r.row).unwrap_or_default()
            );
        }
    }

    pub fn count(&self, what: &str, n: i64) {
        if self.json {
            println!("{}", json!({ what: n }));
        } else {
            println!("{what} {n}");
        }
    }

    /// What `settle register` did: `created`, `unchanged`, or `changed` with
    /// each difference (field, was, now).
    pub fn registered(&self, r: &settle::Registered) {
        let (what, diffs) = match r {
            settle::Registered::Created => ("created", &[][..]),
            settle::Registered::Unchanged => ("unchanged", &[][..]),
            settle::Registered::Changed(d) => ("changed", d.as_slice()),
        };
        if self.json {
            let changes: Vec<Value> = diffs
                .iter()
                .map(|d| json!({"field": d.field, "was": d.registered, "now": d.given}))
                .collect();
            println!("{}", json!({ "registration": what, "changes": changes }));
            return;
        }
        println!("{what}");
        let none = || "none".to_owned();
        for d in diffs {
            println!(
                "  {}: {} -> {}",
                d.field,
                d.registered.clone().unwrap_or_else(none),
                d.given.clone().unwrap_or_else(none)
            );
        }
    }

    pub fn statements(&self, st: &[(String, String)]) {
        if self.json {
            let v: Vec<Value> = st
                .iter()
                .map(|(n, s)| json!({"statement": n, "sql": s}))
                .collect();
            println!("{}", Value::Array(v));
            return;
        }
        for (n, s) in st {
            println!("-- {n}\n{s};\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_payloads() {
        let t = table(&["A", "LONG"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    LONG\nxyz  1");
        let r = DeadRow {
            id: "1".into(),
            attempt: Some(2),
            row: json!({"id": 1, "payload": {"to": "a\nb"}}),
        };
        assert_eq!(short_payload(&r, 60), r#"{"to":"a\nb"}"#);
        let long = DeadRow {
            id: "2".into(),
            attempt: None,
            row: json!({"payload": "x".repeat(100)}),
        };
        assert_eq!(short_payload(&long, 10).chars().count(), 10);
        assert_eq!(age(Duration::from_millis(3_723_400)), "1h 2m 3s");
    }
}
