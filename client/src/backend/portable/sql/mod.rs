//! A portable queue's resolved descriptor ([`Shape`]) and the SQL built from
//! it. Every statement text of the portable path is made in this module, from
//! the shape and the dialect's facts, by family: [`claim`], [`settle`],
//! [`admin`]; the code that runs them (`claim`, `write`, `session`, `locks`,
//! `admin` one level up) binds and executes. Parameters are the dialect's
//! (`$n` on PostgreSQL, `?` in order elsewhere); each builder says what it
//! binds. The snapshot tests below show each statement per dialect, so a
//! change of one shows up in review.

mod admin;
pub(crate) use admin::CHUNK;
mod claim;
pub(crate) use claim::ClaimPlan;
mod heads;
pub(crate) use heads::{read_bound, unkeyed_read, KEYS_ALWAYS_WALKED, KEYS_WALKED};
mod settle;
pub(crate) use settle::{Ack, Reports, Verb};

use super::dialect::{Dialect, IdKind, PayloadText};
use crate::outcome::Settled;
use crate::queue::Form;
use std::collections::HashMap;

/// Where a row goes at max_attempts.
#[derive(Clone, Debug)]
pub(crate) enum Dead {
    /// a group value (raw)
    Group(String),
    /// a table (quoted) and its columns
    Table(String),
}

/// The resolved descriptor of a portable queue.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub(crate) d: Dialect,
    /// the server reports the rows a `DELETE` wrote (`DELETE … RETURNING`):
    /// PostgreSQL, SQLite and MariaDB, not MySQL
    pub(crate) deletes_return: bool,
    pub(crate) queue: String,
    pub(crate) form: Form,
    /// how a claim runs, chosen from the form and the dialect
    pub(crate) plan: ClaimPlan,
    /// the table, quoted (and schema-qualified when given so)
    pub(crate) table: String,
    pub(crate) cols: Vec<String>,
    pub(crate) id: String,
    pub(crate) id_kind: IdKind,
    pub(crate) attempt: Option<String>,
    pub(crate) retry_after: Option<String>,
    pub(crate) locked_until: Option<String>,
    pub(crate) processed_at: Option<String>,
    pub(crate) group: Option<String>,
    /// the payload column and how its text arrives; None: claims hand over
    /// the whole row as JSON
    pub(crate) payload: Option<(String, PayloadText)>,
    /// the enqueue time (a timestamp column), for ages
    pub(crate) created_at: Option<String>,
    pub(crate) max: Option<i64>,
    pub(crate) dead: Option<Dead>,
    /// claims take ready rows in (priority, id) order, NULL last
    pub(crate) priority: Option<String>,
    /// a row waits while an earlier row of its key is in the queue
    pub(crate) ordering_key: Option<String>,
    pub(crate) custom: HashMap<String, String>,
}

/// Which ready rows one scan of a claim reads. In priority order a dialect
/// whose ascending order puts NULL first reads the rows with a priority, then
/// those without (each an index range of `(priority, id)`); a sort of both
/// would read, and in a locking scan lock, every ready row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    All,
    /// priority IS NOT NULL
    Valued,
    /// priority IS NULL
    Unvalued,
}

/// Which rows a claim's first statement reads, and the parameters it binds
/// before its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// from the lowest id
    Lowest,
    /// from the id bound first (the mark)
    Mark,
    /// from the id bound first, below the one bound next (integer ids)
    Below,
    /// the `n` ids bound first (padded with the last)
    Listed(usize),
}

/// A builder of a claim's first statement: (shape, its rows, phase).
pub(crate) type FirstStatement = fn(&Shape, Scan, Phase) -> String;

/// Conditions joined with AND (none: true).
pub(crate) fn join_and(v: Vec<String>) -> String {
    if v.is_empty() {
        "1 = 1".into()
    } else {
        v.join(" AND ")
    }
}

/// `?`-style placeholders for an IN list, starting at `first` (PostgreSQL numbers them).
pub(crate) fn in_list(d: Dialect, first: usize, n: usize, kind: IdKind) -> String {
    (0..n)
        .map(|i| d.id_param(&d.p(first + i), kind))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Shape {
    pub(crate) fn c(&self, a: &str, col: &str) -> String {
        format!("{a}.{}", self.d.ident(col))
    }

    /// `col IN (…)` for `n` ids bound from parameter `first`, and what must
    /// follow the WHERE clause: `ORDER BY col LIMIT n` where a locking scan of
    /// the list would pass the listed rows
    /// ([`Dialect::locking_scans_pass_listed_ids`]): ordered by the id with a
    /// limit, InnoDB reads the ids' index ranges instead of the whole table.
    pub(crate) fn by_ids(&self, col: &str, first: usize, n: usize) -> (String, String) {
        let d = self.d;
        let cond = format!("{col} IN ({})", in_list(d, first, n, self.id_kind));
        (cond, self.listed_tail(col, n))
    }

    /// What follows the WHERE clause of a write of `n` listed ids `col`:
    /// see [`by_ids`](Self::by_ids).
    pub(crate) fn listed_tail(&self, col: &str, n: usize) -> String {
        match self.d.locking_scans_pass_listed_ids() {
            true => format!(" ORDER BY {col} LIMIT {n}"),
            false => String::new(),
        }
    }

    /// Conditions of a row of this queue that is not settled.
    pub(crate) fn mine(&self, a: &str) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(g) = &self.group {
            v.push(format!(
                "{} = {}",
                self.c(a, g),
                self.d.literal(&self.queue)
            ));
        }
        if let Some(p) = &self.processed_at {
            v.push(format!("{} IS NULL", self.c(a, p)));
        }
        v
    }

    /// Conditions of a row of this queue that is ready by itself: not
    /// settled, not delayed, not leased (its key not asked).
    pub(crate) fn ready_own(&self, a: &str) -> Vec<String> {
        let now = self.d.now();
        let mut v = self.mine(a);
        if let Some(r) = &self.retry_after {
            let r = self.c(a, r);
            v.push(format!("({r} IS NULL OR {r} <= {now})"));
        }
        if matches!(self.form, Form::Lease { .. }) {
            let l = self.c(a, self.locked_until.as_ref().unwrap());
            v.push(format!("({l} IS NULL OR {l} < {now})"));
        }
        v
    }

    /// The condition of a ready row: ready by itself, and no earlier row of
    /// its key in the queue.
    pub(crate) fn ready(&self, a: &str) -> String {
        let mut v = self.ready_own(a);
        if let Some(k) = &self.ordering_key {
            // no row of its key with a lower id still in the queue (ready,
            // delayed or in flight): the key's first row in the (ordering_key,
            // id) index is this one. (Asked as `id < this id`, InnoDB reads
            // every row of the key to learn that a head has none; for NOT
            // EXISTS PostgreSQL costs a table scan when the keys are few.)
            let mut p = self.mine("_s_k");
            p.push(format!("{} = {}", self.c("_s_k", k), self.c(a, k)));
            v.push(format!(
                "({} IS NULL OR (SELECT {id} FROM {} _s_k WHERE {} ORDER BY {}, {id} LIMIT 1) = {})",
                self.c(a, k),
                self.table,
                p.join(" AND "),
                self.c("_s_k", k),
                self.c(a, &self.id),
                id = self.c("_s_k", &self.id),
            ));
        }
        join_and(v)
    }

    pub(crate) fn attempt_sel(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => format!("COALESCE({}, 0)", self.d.int(&self.c(a, c))),
            None => "0".into(),
        }
    }

    pub(crate) fn token_sel(&self, a: &str) -> String {
        match (&self.locked_until, self.form) {
            (Some(l), Form::Lease { .. }) => self.d.micros(&self.c(a, l)),
            _ => "NULL".into(),
        }
    }

    /// For a PostgreSQL claim statement over candidates `c(k, att)`: the
    /// condition that leaves out crash-looping rows (attempt already at
    /// max_attempts, with a dead letter), and the `UNION ALL` that returns
    /// them apart, marked 1 in the fifth column (delivered rows carry 0).
    pub(crate) fn crash_loops(&self) -> (String, String) {
        match self.max.filter(|_| self.dead.is_some()) {
            Some(m) => (
                format!(" AND c.att < {m}"),
                format!(
                    " UNION ALL SELECT CAST(c.k AS TEXT), c.att, NULL, NULL, 1, c.k{} FROM c WHERE c.att >= {m}",
                    if self.priority.is_some() { ", NULL" } else { "" }
                ),
            ),
            None => (String::new(), String::new()),
        }
    }

    /// A claim's payload: the payload column as text, or the whole row as JSON.
    pub(crate) fn payload_sel(&self, a: &str) -> String {
        match &self.payload {
            Some((c, _)) => self.d.payload_text(&self.c(a, c)),
            None => self.d.json_row(a, &self.cols),
        }
    }

    /// How a claim's payload text arrives.
    pub(crate) fn payload_arrives_as(&self) -> PayloadText {
        self.payload.as_ref().map_or(PayloadText::Json, |(_, t)| *t)
    }

    /// id text, attempt, token, payload of rows `WHERE <cond>`, in claim order
    pub(crate) fn rows_sql(&self, cond: &str) -> String {
        let order = match &self.priority {
            Some(p) if !self.d.sorts_null_last() => {
                format!(
                    "CASE WHEN {} IS NULL THEN 1 ELSE 0 END, {}",
                    self.c("a", p),
                    self.claim_order("a")
                )
            }
            _ => self.claim_order("a"),
        };
        self.rows_in(cond, &order)
    }

    /// id text, attempt, token, payload of rows `WHERE <cond>` `ORDER BY <order>`
    pub(crate) fn rows_in(&self, cond: &str, order: &str) -> String {
        format!(
            "SELECT {}, {}, {}, {} FROM {} a WHERE {cond} ORDER BY {order}",
            self.d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.token_sel("a"),
            self.payload_sel("a"),
            self.table,
        )
    }

    /// The order a claim takes ready rows (alias `a`) in: by id, or by
    /// priority first (see [`Phase`] for where NULL comes).
    pub(crate) fn claim_order(&self, a: &str) -> String {
        let id = self.c(a, &self.id);
        match &self.priority {
            Some(p) => format!("{}, {id}", self.c(a, p)),
            None => id,
        }
    }

    /// The scans a claim makes, in order (see [`Phase`]).
    pub(crate) fn phases(&self) -> &'static [Phase] {
        if self.priority.is_some() && !self.d.sorts_null_last() {
            &[Phase::Valued, Phase::Unvalued]
        } else {
            &[Phase::All]
        }
    }

    /// Claims take rows in id order, so a mark may skip the rows below it. In
    /// priority order a new row may belong below every row claimed so far: no
    /// mark. (A key's next row lies above its head: a settle of a keyed row
    /// lowers the mark to it, see `HoldBackend::settles_free_rows`.)
    pub(crate) fn keeps_mark(&self) -> bool {
        self.priority.is_none()
    }

    /// For a claim statement returning (…, id) as its sixth column: the
    /// seventh, the priority, and the ORDER BY that puts its rows in claim
    /// order (PostgreSQL's ascending order puts NULL last).
    pub(crate) fn out_order(&self, a: &str) -> (String, &'static str) {
        match &self.priority {
            Some(p) => (format!(", {}", self.c(a, p)), "7, 6"),
            None => (String::new(), "6"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The canonical table (`sql/<dialect>/queue.sql`) with a dead-letter table
    /// and a retry limit, as `introspect` resolves it (MariaDB's for the MySQL dialect).
    fn canonical(d: Dialect, form: Form) -> Shape {
        let cols = [
            "id",
            "payload",
            "attempt",
            "retry_after",
            "locked_until",
            "created_at",
        ];
        Shape {
            d,
            deletes_return: true,
            queue: "jobs".into(),
            form,
            plan: ClaimPlan::of(form, d),
            table: d.ident("jobs"),
            cols: cols.iter().map(|c| c.to_string()).collect(),
            id: "id".into(),
            id_kind: IdKind::Integer,
            attempt: Some("attempt".into()),
            retry_after: Some("retry_after".into()),
            locked_until: Some("locked_until".into()),
            processed_at: None,
            group: None,
            payload: Some((
                "payload".into(),
                if d == Dialect::Postgres {
                    PayloadText::Json
                } else {
                    PayloadText::Text
                },
            )),
            created_at: Some("created_at".into()),
            max: Some(3),
            dead: Some(Dead::Table(d.ident("jobs_dead"))),
            custom: HashMap::new(),
            priority: None,
            ordering_key: None,
        }
    }

    /// Every statement the portable path runs for a queue, one per line.
    fn statements(s: &Shape) -> String {
        s.statement_list()
            .iter()
            .map(|(n, sql)| format!("{n}:\n  {sql}\n"))
            .collect::<Vec<_>>()
            .join("")
    }

    /// The SQL of every dialect × form, as a snapshot to review when it changes
    /// (`INSTA_UPDATE=always cargo test -p settle` writes the new one).
    #[test]
    fn statements_per_dialect_and_form() {
        let lease = Form::Lease {
            ttl: Duration::from_secs(30),
        };
        for d in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            for (name, form) in [
                ("row_lock", Form::RowLock),
                ("lease", lease),
                ("advisory", Form::Advisory),
            ] {
                if form == Form::Advisory && d.advisory().is_none() {
                    continue;
                }
                insta::assert_snapshot!(
                    format!("{}_{name}", d.name()),
                    statements(&canonical(d, form))
                );
            }
        }
    }

    /// The claim statements of a queue with an ordering key, per dialect:
    /// the key test, the key count, the bounded read and the heads.
    #[test]
    fn keyed_claim_statements_per_dialect() {
        for d in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            let mut s = canonical(d, Form::RowLock);
            s.ordering_key = Some("ordering_key".into());
            let claims: String = s
                .plan
                .statements(&s)
                .iter()
                .map(|(n, sql)| format!("{n}:\n  {sql}\n"))
                .collect();
            insta::assert_snapshot!(format!("{}_keyed_row_lock", d.name()), claims);
        }
    }
}
