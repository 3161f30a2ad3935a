//! `--queue` descriptions: the portable path has no registry, so the command
//! is told each queue as `NAME[=TABLE][,form=FORM][,dead_letter=TARGET][,max_attempts=N]`.

use settle::{Form, Queue};
use std::time::Duration;

/// One `--queue` value as a queue descriptor.
pub fn parse(spec: &str) -> Result<Queue, String> {
    parse_with(spec, false)
}

/// A queue to register: a dead letter needs its max_attempts said.
pub fn parse_for_register(spec: &str) -> Result<Queue, String> {
    parse_with(spec, true)
}

fn parse_with(spec: &str, max_required: bool) -> Result<Queue, String> {
    let mut parts = spec.split(',');
    let head = parts.next().unwrap_or_default().trim();
    let (name, table) = match head.split_once('=') {
        Some((n, t)) => (n.trim(), t.trim()),
        None => (head, head),
    };
    if name.is_empty() || table.is_empty() {
        return Err(format!("--queue {spec:?}: give NAME or NAME=TABLE first"));
    }
    let mut form = Form::Lease {
        ttl: Duration::from_secs(30),
    };
    let mut dead: Option<String> = None;
    let mut max: Option<u32> = None;
    for p in parts {
        let Some((k, v)) = p.split_once('=') else {
            return Err(format!("--queue {spec:?}: {p:?} is not key=value"));
        };
        match (k.trim(), v.trim()) {
            ("form", "lease") => {
                form = Form::Lease {
                    ttl: Duration::from_secs(30),
                }
            }
            ("form", "row_lock") => form = Form::RowLock,
            ("form", "advisory") => form = Form::Advisory,
            ("form", f) => {
                return Err(format!(
                    "--queue {spec:?}: unknown form {f:?} (row_lock, lease or advisory)"
                ))
            }
            ("dead_letter", d) if !d.is_empty() => dead = Some(d.to_owned()),
            ("max_attempts", n) => {
                max = Some(
                    n.parse()
                        .map_err(|_| format!("--queue {spec:?}: max_attempts must be a number"))?,
                )
            }
            (k, _) => {
                return Err(format!(
                    "--queue {spec:?}: unknown key {k:?} (form, dead_letter, max_attempts)"
                ))
            }
        }
    }
    let mut q = Queue::new(name, table).form(form);
    match (dead, max) {
        (Some(_), None) if max_required => {
            return Err(format!("--queue {spec:?}: dead_letter needs max_attempts"))
        }
        (Some(d), m) => q = q.dead_letter(m.unwrap_or(1), d),
        (None, Some(_)) => return Err(format!("--queue {spec:?}: max_attempts needs dead_letter")),
        (None, None) => {}
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let q =
            parse("emails=outbox,form=row_lock,dead_letter=outbox_dead,max_attempts=5").unwrap();
        assert_eq!((q.name(), q.claim_form()), ("emails", Form::RowLock));
        let shown = format!("{q:?}");
        assert!(
            shown.contains("\"outbox\"") && shown.contains("(5, \"outbox_dead\")"),
            "{shown}"
        );
        let q = parse("jobs").unwrap();
        assert_eq!(q.name(), "jobs");
        assert!(format!("{q:?}").contains("dead: None"), "{q:?}");
        for bad in [
            "",
            "=t",
            "a,form=fast",
            "a,colour=red",
            "a,max_attempts=3",
            "a,nothing",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
