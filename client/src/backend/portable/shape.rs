//! A portable queue's resolved descriptor and the SQL built from it. Every
//! statement text of the portable path is made here, from the shape and the
//! dialect's facts; the code that runs them (`claim`, `write`, `session`,
//! `locks`) binds and executes. The snapshot tests below show each statement
//! per dialect, so a change of one shows up in review.

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
    pub(super) d: Dialect,
    pub(super) queue: String,
    pub(super) form: Form,
    /// the table, quoted (and schema-qualified when given so)
    pub(super) table: String,
    pub(super) cols: Vec<String>,
    pub(super) id: String,
    pub(super) id_kind: IdKind,
    pub(super) attempt: Option<String>,
    pub(super) retry_after: Option<String>,
    pub(super) locked_until: Option<String>,
    pub(super) processed_at: Option<String>,
    pub(super) group: Option<String>,
    /// the payload column and how its text arrives; None: claims hand over
    /// the whole row as JSON
    pub(super) payload: Option<(String, PayloadText)>,
    /// the enqueue time (a timestamp column), for ages
    pub(super) created_at: Option<String>,
    pub(super) max: Option<i64>,
    pub(super) dead: Option<Dead>,
    pub(super) custom: HashMap<String, String>,
}

/// `?`-style placeholders for an IN list, starting at `first` (PostgreSQL numbers them).
pub(super) fn in_list(d: Dialect, first: usize, n: usize, kind: IdKind) -> String {
    (0..n)
        .map(|i| d.id_param(&d.p(first + i), kind))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Shape {
    pub(super) fn c(&self, a: &str, col: &str) -> String {
        format!("{a}.{}", self.d.ident(col))
    }

    /// `col IN (…)` for `n` ids bound from parameter `first`, and what must
    /// follow the WHERE clause: `ORDER BY col LIMIT n` where a locking scan of
    /// the list would pass the listed rows
    /// ([`Dialect::locking_scans_pass_listed_ids`]): ordered by the id with a
    /// limit, InnoDB reads the ids' index ranges instead of the whole table.
    pub(super) fn by_ids(&self, col: &str, first: usize, n: usize) -> (String, String) {
        let d = self.d;
        let cond = format!("{col} IN ({})", in_list(d, first, n, self.id_kind));
        let tail = if d.locking_scans_pass_listed_ids() {
            format!(" ORDER BY {col} LIMIT {n}")
        } else {
            String::new()
        };
        (cond, tail)
    }

    /// Conditions of a row of this queue that is not settled.
    pub(super) fn mine(&self, a: &str) -> Vec<String> {
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

    pub(super) fn ready(&self, a: &str) -> String {
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
        if v.is_empty() {
            "1 = 1".into()
        } else {
            v.join(" AND ")
        }
    }

    pub(super) fn attempt_sel(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => format!("COALESCE({}, 0)", self.d.int(&self.c(a, c))),
            None => "0".into(),
        }
    }

    pub(super) fn token_sel(&self, a: &str) -> String {
        match (&self.locked_until, self.form) {
            (Some(l), Form::Lease { .. }) => self.d.micros(&self.c(a, l)),
            _ => "NULL".into(),
        }
    }

    /// For a PostgreSQL claim statement over candidates `c(k, att)`: the
    /// condition that leaves out crash-looping rows (attempt already at
    /// max_attempts, with a dead letter), and the `UNION ALL` that returns
    /// them apart, marked 1 in the fifth column (delivered rows carry 0).
    pub(super) fn crash_loops(&self) -> (String, String) {
        match self.max.filter(|_| self.dead.is_some()) {
            Some(m) => (
                format!(" AND c.att < {m}"),
                format!(
                    " UNION ALL SELECT CAST(c.k AS TEXT), c.att, NULL, NULL, 1, c.k FROM c WHERE c.att >= {m}"
                ),
            ),
            None => (String::new(), String::new()),
        }
    }

    /// A claim's payload: the payload column as text, or the whole row as JSON.
    pub(super) fn payload_sel(&self, a: &str) -> String {
        match &self.payload {
            Some((c, _)) => self.d.payload_text(&self.c(a, c)),
            None => self.d.json_row(a, &self.cols),
        }
    }

    /// How a claim's payload text arrives.
    pub(super) fn payload_arrives_as(&self) -> PayloadText {
        self.payload.as_ref().map_or(PayloadText::Json, |(_, t)| *t)
    }

    /// id text, attempt, token, payload of rows `WHERE <cond>`
    pub(super) fn rows_sql(&self, cond: &str) -> String {
        format!(
            "SELECT {}, {}, {}, {} FROM {} a WHERE {cond} ORDER BY a.{}",
            self.d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.token_sel("a"),
            self.payload_sel("a"),
            self.table,
            self.d.ident(&self.id)
        )
    }

    /// Statements moving one row (`id` = parameter 1) to the dead letter.
    /// `count_delivery`: row_lock counts the failed delivery here.
    pub(super) fn dead_sql(&self, count_delivery: bool) -> Vec<String> {
        let d = self.d;
        let idp = d.id_param(&d.p(1), self.id_kind);
        let idc = d.ident(&self.id);
        match self.dead.as_ref().expect("dead letter configured") {
            Dead::Group(g) => {
                let mut sets = vec![format!(
                    "{} = {}",
                    d.ident(self.group.as_ref().unwrap()),
                    d.literal(g)
                )];
                if let (Some(l), Form::Lease { .. }) = (&self.locked_until, self.form) {
                    sets.push(format!("{} = NULL", d.ident(l)));
                }
                if let (Some(a), true) = (&self.attempt, count_delivery) {
                    sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
                }
                vec![format!(
                    "UPDATE {} SET {} WHERE {idc} = {idp}",
                    self.table,
                    sets.join(", ")
                )]
            }
            Dead::Table(dt) => {
                let cols: Vec<String> = self.cols.iter().map(|c| d.ident(c)).collect();
                let vals: Vec<String> = self
                    .cols
                    .iter()
                    .map(|c| {
                        let q = format!("m.{}", d.ident(c));
                        if Some(c) == self.locked_until.as_ref()
                            && matches!(self.form, Form::Lease { .. })
                        {
                            "NULL".into()
                        } else if Some(c) == self.attempt.as_ref() && count_delivery {
                            format!("COALESCE({q}, 0) + 1")
                        } else {
                            q
                        }
                    })
                    .collect();
                if d.has_writable_cte() {
                    // SPEC: one statement where the database can
                    vec![format!(
                        "WITH m AS (DELETE FROM {t} WHERE {idc} = {idp} RETURNING *) INSERT INTO {dt} ({cols}) SELECT {vals} FROM m",
                        t = self.table,
                        cols = cols.join(", "),
                        vals = vals.join(", ")
                    )]
                } else {
                    // copy, then delete, in the caller's transaction
                    vec![
                        format!(
                            "INSERT INTO {dt} ({cols}) SELECT {vals} FROM {t} m WHERE m.{idc} = {idp}",
                            t = self.table,
                            cols = cols.join(", "),
                            vals = vals.join(", ")
                        ),
                        format!("DELETE FROM {} WHERE {idc} = {idp}", self.table),
                    ]
                }
            }
        }
    }
}

/// The statements of the portable path, as text. Parameters are the dialect's
/// (`$n` on PostgreSQL, `?` in order elsewhere); each builder says what it binds.
impl Shape {
    /// row_lock claim: the first `$1` ready rows, locked, as (id, attempt,
    /// token, row json).
    pub(super) fn claim_rows_sql(&self) -> String {
        let d = self.d;
        format!(
            "{} LIMIT {}{}",
            self.rows_sql(&self.ready("a")),
            d.p(1),
            d.skip_locked()
        )
    }

    /// lease claim, step 1 (no writable CTE): the first `$1` ready rows,
    /// locked, as (id, attempt).
    pub(super) fn lease_candidates_sql(&self) -> String {
        let d = self.d;
        format!(
            "SELECT {}, {} FROM {} a WHERE {} ORDER BY a.{} LIMIT {}{}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.table,
            self.ready("a"),
            d.ident(&self.id),
            d.p(1),
            d.skip_locked()
        )
    }

    /// lease / advisory claim, step 2: count the attempt (and lease: write the
    /// token, the lease in µs bound first) of `n` ids bound next. `None` when
    /// there is nothing to write.
    pub(super) fn take_update_sql(&self, n: usize) -> Option<String> {
        let d = self.d;
        let mut sets = Vec::new();
        let mut first = 1;
        if let Form::Lease { .. } = self.form {
            sets.push(format!(
                "{} = {}",
                d.ident(self.locked_until.as_ref().expect("lease: locked_until")),
                d.now_plus(&d.p(first))
            ));
            first += 1;
        }
        if let Some(a) = &self.attempt {
            sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
        }
        if sets.is_empty() {
            return None;
        }
        let (key, tail) = self.by_ids(&d.ident(&self.id), first, n);
        Some(format!(
            "UPDATE {} SET {} WHERE {key}{tail}",
            self.table,
            sets.join(", ")
        ))
    }

    /// lease / advisory claim, step 3: the rows of `n` ids bound, as (id,
    /// attempt, token, row json).
    pub(super) fn take_read_sql(&self, n: usize) -> String {
        let d = self.d;
        self.rows_sql(&format!(
            "a.{} IN ({})",
            d.ident(&self.id),
            in_list(d, 1, n, self.id_kind)
        ))
    }

    /// The lease claim as one autocommitted statement (writable CTE): lock the
    /// first `$1` ready rows, count the attempt and write the token (`$2` µs),
    /// return them; crash-looping candidates come back apart, marked 1 in the
    /// fifth column (see [`Shape::crash_loops`]).
    pub(super) fn claim_lease_cte_sql(&self) -> String {
        let d = self.d;
        let idc = d.ident(&self.id);
        let mut sets = vec![format!(
            "{} = {}",
            d.ident(self.locked_until.as_ref().expect("lease: locked_until")),
            d.now_plus("$2")
        )];
        if let Some(a) = &self.attempt {
            sets.push(format!("{0} = COALESCE(a.{0}, 0) + 1", d.ident(a)));
        }
        let (live, poison) = self.crash_loops();
        format!(
            "WITH c AS (SELECT a.{idc} AS k, {att} AS att FROM {t} a WHERE {ready} ORDER BY a.{idc} LIMIT $1 FOR UPDATE SKIP LOCKED), \
                  u AS (UPDATE {t} a SET {sets} FROM c WHERE a.{idc} = c.k{live} RETURNING a.*) \
             SELECT {id}, {att}, {token}, {json}, 0, a.{idc} FROM u a{poison} ORDER BY 6",
            att = self.attempt_sel("a"),
            t = self.table,
            ready = self.ready("a"),
            sets = sets.join(", "),
            id = d.id_text(&self.c("a", &self.id)),
            token = self.token_sel("a"),
            json = self.payload_sel("a"),
        )
    }

    /// Is the row of the id bound still there, ready and at max_attempts (a
    /// crash loop to move)? `None` without a retry limit.
    pub(super) fn poison_check_sql(&self) -> Option<String> {
        let d = self.d;
        let (Some(max), Some(a), Some(_)) = (self.max, &self.attempt, &self.dead) else {
            return None;
        };
        Some(format!(
            "SELECT 1 FROM {} a WHERE {} = {} AND {} AND COALESCE({}, 0) >= {max}{}",
            self.table,
            self.c("a", &self.id),
            d.id_param(&d.p(1), self.id_kind),
            self.ready("a"),
            self.c("a", a),
            d.skip_locked()
        ))
    }

    /// advisory claim, step 1: the ids of the first `$1` ready rows, unlocked.
    pub(super) fn advisory_candidates_sql(&self) -> String {
        let d = self.d;
        format!(
            "SELECT {} FROM {} a WHERE {} ORDER BY a.{} LIMIT {}",
            d.id_text(&self.c("a", &self.id)),
            self.table,
            self.ready("a"),
            d.ident(&self.id),
            d.p(1)
        )
    }

    /// advisory claim, once the keys of `n` ids (bound) are held, as one
    /// statement (writable CTE): count the attempt of those still ready (its
    /// snapshot is taken after the keys were) and return them in id order, in
    /// the columns of [`Shape::claim_lease_cte_sql`]. Crash-looping rows
    /// (attempt at max_attempts, with a dead letter) are left as they are and
    /// not returned: [`Shape::crash_loops_among_sql`] finds them. One `UPDATE`
    /// on the id list, as a hand-writer would: locking the rows first and
    /// joining them cost the server three times as much.
    pub(super) fn take_locked_sql(&self, n: usize) -> String {
        let d = self.d;
        let idc = d.ident(&self.id);
        let (key, _) = self.by_ids(&self.c("a", &self.id), 1, n);
        let ready = self.ready("a");
        let out = |a: &str| {
            format!(
                "SELECT {id}, {att}, NULL, {payload}, 0, {a}.{idc} FROM",
                id = d.id_text(&self.c(a, &self.id)),
                att = self.attempt_sel(a),
                payload = self.payload_sel(a),
            )
        };
        match &self.attempt {
            Some(att) => {
                let live = match self.max.filter(|_| self.dead.is_some()) {
                    Some(m) => format!(" AND COALESCE(a.{}, 0) < {m}", d.ident(att)),
                    None => String::new(),
                };
                format!(
                    "WITH u AS (UPDATE {t} a SET {0} = COALESCE(a.{0}, 0) + 1 WHERE {key} AND {ready}{live} RETURNING a.*) \
                     {out} u a ORDER BY 6",
                    d.ident(att),
                    t = self.table,
                    out = out("a"),
                )
            }
            // nothing to count (and so no dead letter): the rows still ready, locked
            None => format!(
                "{out} {t} a WHERE {key} AND {ready} ORDER BY 6 FOR UPDATE",
                t = self.table,
                out = out("a"),
            ),
        }
    }

    /// Of `n` ids (bound) whose keys this session holds, those crash-looping:
    /// ready with their attempt at max_attempts. `None` without a dead letter.
    pub(super) fn crash_loops_among_sql(&self, n: usize) -> Option<String> {
        let d = self.d;
        let (Some(max), Some(a), Some(_)) = (self.max, &self.attempt, &self.dead) else {
            return None;
        };
        let (key, _) = self.by_ids(&self.c("a", &self.id), 1, n);
        Some(format!(
            "SELECT {} FROM {} a WHERE {key} AND {} AND COALESCE({}, 0) >= {max}",
            d.id_text(&self.c("a", &self.id)),
            self.table,
            self.ready("a"),
            self.c("a", a),
        ))
    }

    /// advisory claim, once the keys of `n` ids (bound) are held (no writable
    /// CTE): those still ready, locked, as (id, attempt).
    pub(super) fn recheck_locked_sql(&self, n: usize) -> String {
        let d = self.d;
        let (key, tail) = self.by_ids(&self.c("a", &self.id), 1, n);
        format!(
            "SELECT {}, {} FROM {} a WHERE {key} AND {}{tail}{}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.table,
            self.ready("a"),
            d.for_update()
        )
    }

    /// Lock the rows of `n` ids (bound) of this queue not settled yet (row_lock:
    /// already locked by the claim), as (id, attempt, token).
    pub(super) fn lock_held_sql(&self, n: usize) -> String {
        let d = self.d;
        let (key, tail) = self.by_ids(&self.c("a", &self.id), 1, n);
        let mut cond = self.mine("a");
        cond.push(key);
        let lock = if self.form == Form::RowLock {
            ""
        } else {
            d.for_update()
        };
        format!(
            "SELECT {}, {}, {} FROM {} a WHERE {}{tail}{lock}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.token_sel("a"),
            self.table,
            cond.join(" AND "),
        )
    }

    /// The write of an outcome up to its WHERE (`None`: nothing to write), and
    /// what it writes: ack/drop (`retry` false) or retry/retry_after. A delay
    /// (µs) is bound first, or written in as a number with `inline_delay`.
    pub(super) fn outcome_verb(
        &self,
        retry: bool,
        delay: Option<i64>,
        inline_delay: bool,
    ) -> (Option<String>, Settled) {
        let d = self.d;
        if !retry {
            return match &self.processed_at {
                Some(p) => (
                    Some(format!(
                        "UPDATE {} SET {} = {}",
                        self.table,
                        d.ident(p),
                        d.now()
                    )),
                    Settled::Marked,
                ),
                None => (
                    Some(format!("DELETE FROM {}", self.table)),
                    Settled::Deleted,
                ),
            };
        }
        let mut sets = Vec::new();
        if let (Some(us), Some(r)) = (delay, &self.retry_after) {
            let p = if inline_delay { us.to_string() } else { d.p(1) };
            sets.push(format!("{} = {}", d.ident(r), d.now_plus(&p)));
        }
        if self.form == Form::RowLock {
            if let Some(a) = &self.attempt {
                sets.push(format!("{0} = COALESCE({0}, 0) + 1", d.ident(a)));
            }
        }
        if let (Some(l), Form::Lease { .. }) = (&self.locked_until, self.form) {
            sets.push(format!("{} = NULL", d.ident(l)));
        }
        let settled = if delay.is_some() && self.retry_after.is_some() {
            Settled::Delayed
        } else if sets.is_empty() && self.form == Form::RowLock {
            Settled::Released
        } else {
            Settled::Retried
        };
        // row_lock without an attempt column, advisory retry: nothing to write
        let verb =
            (!sets.is_empty()).then(|| format!("UPDATE {} SET {}", self.table, sets.join(", ")));
        (verb, settled)
    }

    /// The ack (or drop) of `n` rows of this queue not settled yet: ids bound as
    /// parameters 1..=n, and with `token` the lease token as n + 1 (only the
    /// rows that still hold it are written).
    pub(super) fn ack_sql(&self, n: usize, token: bool) -> (String, Settled) {
        self.ack_where(&self.held_cond(n, token))
    }

    /// The ack (or drop) of `n` distinct ids each still holding its own lease
    /// token, `(id = ? AND token = ?) OR …`, each token bound after its id.
    pub(super) fn ack_per_item_sql(&self, n: usize) -> (String, Settled) {
        let d = self.d;
        let t = &self.table;
        let lu = d.micros(&self.c(t, self.locked_until.as_ref().expect("lease: locked_until")));
        let pairs: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "({} = {} AND {lu} = {})",
                    self.c(t, &self.id),
                    d.id_param(&d.p(2 * i + 1), self.id_kind),
                    d.p(2 * i + 2)
                )
            })
            .collect();
        let mut cond = self.mine(t);
        cond.push(format!("({})", pairs.join(" OR ")));
        self.ack_where(&cond.join(" AND "))
    }

    /// What a write appends to report the ids it wrote.
    pub(super) fn returning_id(&self) -> String {
        format!(" RETURNING {}", self.d.id_text(&self.d.ident(&self.id)))
    }

    /// The ack (or drop) of the rows `WHERE cond`, and what it writes.
    fn ack_where(&self, cond: &str) -> (String, Settled) {
        let d = self.d;
        let t = &self.table;
        match &self.processed_at {
            Some(p) => (
                format!("UPDATE {t} SET {} = {} WHERE {cond}", d.ident(p), d.now()),
                Settled::Marked,
            ),
            None => (format!("DELETE FROM {t} WHERE {cond}"), Settled::Deleted),
        }
    }

    /// The WHERE of a write to `n` rows of this queue not settled yet, the ids
    /// bound as parameters 1..=n; with `token`, only rows that still hold the
    /// lease token bound as n + 1.
    fn held_cond(&self, n: usize, token: bool) -> String {
        let d = self.d;
        let t = &self.table;
        let mut cond = self.mine(t);
        cond.push(format!(
            "{} IN ({})",
            self.c(t, &self.id),
            in_list(d, 1, n, self.id_kind)
        ));
        if token {
            let l = self.locked_until.as_ref().expect("lease: locked_until");
            cond.push(format!("{} = {}", d.micros(&self.c(t, l)), d.p(n + 1)));
        }
        cond.join(" AND ")
    }

    /// Give a lease back: the id, then its token, bound.
    pub(super) fn release_lease_sql(&self) -> String {
        format!(
            "UPDATE {} SET {} = NULL WHERE {}",
            self.table,
            self.d
                .ident(self.locked_until.as_ref().expect("lease: locked_until")),
            self.held_cond(1, true)
        )
    }

    /// Lease heartbeat: the new lease (µs), the id, the old token bound.
    pub(super) fn extend_sql(&self) -> String {
        let d = self.d;
        let lu = d.ident(self.locked_until.as_ref().expect("lease: locked_until"));
        format!(
            "UPDATE {} SET {lu} = {} WHERE {} = {} AND {} = {}",
            self.table,
            d.now_plus(&d.p(1)),
            d.ident(&self.id),
            d.id_param(&d.p(2), self.id_kind),
            d.micros(&lu),
            d.p(3)
        )
    }

    /// The lease token of the id bound.
    pub(super) fn token_sql(&self) -> String {
        let d = self.d;
        let lu = d.ident(self.locked_until.as_ref().expect("lease: locked_until"));
        format!(
            "SELECT {} FROM {} WHERE {} = {}",
            d.micros(&lu),
            self.table,
            d.ident(&self.id),
            d.id_param(&d.p(1), self.id_kind)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The canonical table (`sql/<dialect>/queue.sql`) with a dead-letter table
    /// and a retry limit, as `introspect` resolves it.
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
            queue: "jobs".into(),
            form,
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
}
