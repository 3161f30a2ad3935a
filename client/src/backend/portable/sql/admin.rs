//! The operator's statements (counts, dead rows, requeue, purge) and the
//! list of every statement a queue runs.

use super::*;

/// Most ids one statement lists (an `IN (…)` of bound parameters).
pub(crate) const CHUNK: usize = 500;

impl Shape {
    /// Every statement the portable path runs for this queue, named (for
    /// reading, EXPLAIN and audits: `settle sql`).
    pub(crate) fn statement_list(&self) -> Vec<(String, String)> {
        let s = self;
        let mut out: Vec<(String, String)> = Vec::new();
        let mut add = |name: &str, sql: String| out.push((name.into(), sql));
        for (name, sql) in s.plan.statements(s) {
            add(name, sql);
        }
        add("lock held", s.lock_held_sql(2));
        let verb = |retry, delay| {
            let (v, _) = s.outcome_verb(retry, delay, false);
            v.map(|v| s.verb_sql(&v)).unwrap_or_default()
        };
        add("ack verb", verb(false, None));
        add("retry verb", verb(true, None));
        add("retry_after verb", verb(true, Some(1_000_000)));
        // (where an ack cannot report its rows, its count says whether its one row was written)
        let ack = |of| match s.acks_return() {
            true => s.ack_reporting(of, 2),
            false => s.ack_of_sql(of, 2),
        };
        add("ack by id", ack(Ack::Held));
        if let Form::Lease { .. } = s.form {
            add("ack by token", ack(Ack::SharedToken));
            add("ack by tokens", ack(Ack::TokenEach));
            add("release", s.release_lease_sql());
            add("extend", s.extend_sql());
            add("token", s.token_sql());
        }
        for (i, sql) in s.dead_sql(s.form == Form::RowLock).into_iter().enumerate() {
            add(&format!("dead letter {}", i + 1), sql);
        }
        add("stats", s.stats_sql());
        if s.dead.is_some() {
            add("dead count", s.dead_count_sql().unwrap_or_default());
            add("dead rows", s.dead_rows_sql(Some(2)).unwrap_or_default());
            add("dead ids", s.dead_ids_sql(Some(2)).unwrap_or_default());
            for (i, sql) in s.requeue_sql(2).unwrap_or_default().into_iter().enumerate() {
                add(&format!("requeue {}", i + 1), sql);
            }
            add("purge", s.purge_dead_sql(true, Some(2)).unwrap_or_default());
        }
        out
    }

    /// ready, delayed, in flight (lease; NULL otherwise) of this queue, and
    /// the oldest ready row's age in microseconds (NULL without created_at).
    pub(crate) fn stats_sql(&self) -> String {
        let d = self.d;
        let mine = join_and(self.mine("a"));
        let delayed = match &self.retry_after {
            Some(r) => format!(
                "COALESCE(SUM(CASE WHEN {} > {} THEN 1 ELSE 0 END), 0)",
                self.c("a", r),
                d.now()
            ),
            None => "0".into(),
        };
        let in_flight = match (&self.locked_until, self.form) {
            (Some(l), Form::Lease { .. }) => d.int(&format!(
                "COALESCE(SUM(CASE WHEN {} >= {} THEN 1 ELSE 0 END), 0)",
                self.c("a", l),
                d.now()
            )),
            _ => "NULL".into(),
        };
        let oldest = match &self.created_at {
            Some(c) => format!(
                "{} - MIN(CASE WHEN {} THEN {} END)",
                d.micros(d.now()),
                self.ready("a"),
                d.micros(&self.c("a", c))
            ),
            None => "NULL".into(),
        };
        format!(
            "SELECT {}, {}, {in_flight}, {oldest} FROM {} a WHERE {mine}",
            d.int(&format!(
                "COALESCE(SUM(CASE WHEN {} THEN 1 ELSE 0 END), 0)",
                self.ready("a")
            )),
            d.int(&delayed),
            self.table
        )
    }

    /// The count of dead-lettered rows; `None` without a dead letter.
    pub(crate) fn dead_count_sql(&self) -> Option<String> {
        let d = self.d;
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => format!(
                "SELECT {} FROM {} WHERE {} = {}",
                d.int("count(*)"),
                self.table,
                d.ident(
                    self.group
                        .as_ref()
                        .expect("group dead letter: group column")
                ),
                d.literal(g)
            ),
            Dead::Table(t) => format!("SELECT {} FROM {t}", d.int("count(*)")),
        })
    }

    /// Where the dead rows are: the table, and the condition on its alias `a`
    /// that picks them (`1 = 1` in a dead-letter table).
    fn dead_from(&self) -> Option<(String, String)> {
        let d = self.d;
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => (
                self.table.clone(),
                format!(
                    "{} = {}",
                    self.c(
                        "a",
                        self.group
                            .as_ref()
                            .expect("group dead letter: group column")
                    ),
                    d.literal(g)
                ),
            ),
            Dead::Table(t) => (t.clone(), "1 = 1".into()),
        })
    }

    /// ` AND a.id IN (…)` for `n` ids bound from parameter `first`, or nothing.
    fn among(&self, first: usize, n: Option<usize>) -> String {
        match n {
            Some(n) => format!(
                " AND {} IN ({})",
                self.c("a", &self.id),
                in_list(self.d, first, n, self.id_kind)
            ),
            None => String::new(),
        }
    }

    /// id, attempt, the whole row (JSON text) of dead rows in id order, among
    /// `n` ids bound from parameter 1 (or all), at most the next parameter of
    /// them (bound last: `?` parameters bind in the order they appear).
    pub(crate) fn dead_rows_sql(&self, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        Some(format!(
            "SELECT {}, {}, {} FROM {t} a WHERE {cond}{} ORDER BY a.{} LIMIT {}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            d.json_row("a", &self.cols),
            self.among(1, n),
            d.ident(&self.id),
            d.p(n.unwrap_or(0) + 1)
        ))
    }

    /// Delete dead rows created before now − parameter 1 (microseconds) when
    /// `by_age`, among `n` ids bound next (or all).
    pub(crate) fn purge_dead_sql(&self, by_age: bool, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        let (age, first) = match (&self.created_at, by_age) {
            (Some(c), true) => (
                format!(
                    " AND {} < {}",
                    self.c("a", c),
                    d.now_plus(&format!("-{}", d.p(1)))
                ),
                2,
            ),
            _ => (String::new(), 1),
        };
        // a derived table names the rows: MySQL cannot alias a DELETE's table
        // nor read it in a subquery of its own
        Some(format!(
            "DELETE FROM {t} WHERE {} IN (SELECT k FROM (SELECT a.{} AS k FROM {t} a WHERE {cond}{age}{}) x)",
            d.ident(&self.id),
            d.ident(&self.id),
            self.among(first, n)
        ))
    }

    /// The ids of dead rows to requeue, in id order, at most [`CHUNK`], among
    /// `n` ids bound from parameter 1 (or all), locked for the move.
    pub(crate) fn dead_ids_sql(&self, n: Option<usize>) -> Option<String> {
        let d = self.d;
        let (t, cond) = self.dead_from()?;
        Some(format!(
            "SELECT {} FROM {t} a WHERE {cond}{} ORDER BY a.{} LIMIT {CHUNK}{}",
            d.id_text(&self.c("a", &self.id)),
            self.among(1, n),
            d.ident(&self.id),
            d.for_update()
        ))
    }

    /// The columns a requeue resets (attempt to 0, times to NULL), with values.
    fn requeue_resets(&self) -> Vec<(String, &'static str)> {
        let mut v: Vec<(String, &'static str)> = Vec::new();
        if let Some(a) = &self.attempt {
            v.push((a.clone(), "0"));
        }
        for c in [&self.retry_after, &self.locked_until, &self.processed_at]
            .into_iter()
            .flatten()
        {
            v.push((c.clone(), "NULL"));
        }
        v
    }

    /// The statements moving `n` dead rows (ids bound from parameter 1) back
    /// into the queue, attempt reset, in one transaction: a group's one
    /// UPDATE, a dead-letter table's copy and delete.
    pub(crate) fn requeue_sql(&self, n: usize) -> Option<Vec<String>> {
        let d = self.d;
        let ids = in_list(d, 1, n, self.id_kind);
        let idc = d.ident(&self.id);
        let resets = self.requeue_resets();
        Some(match self.dead.as_ref()? {
            Dead::Group(g) => {
                let gc = d.ident(
                    self.group
                        .as_ref()
                        .expect("group dead letter: group column"),
                );
                let mut sets = vec![format!("{gc} = {}", d.literal(&self.queue))];
                sets.extend(resets.iter().map(|(c, v)| format!("{} = {v}", d.ident(c))));
                vec![format!(
                    "UPDATE {} SET {} WHERE {gc} = {} AND {idc} IN ({ids})",
                    self.table,
                    sets.join(", "),
                    d.literal(g)
                )]
            }
            Dead::Table(dt) => {
                let cols: Vec<String> = self.cols.iter().map(|c| d.ident(c)).collect();
                let vals: Vec<String> = self
                    .cols
                    .iter()
                    .map(|c| match resets.iter().find(|(r, _)| r == c) {
                        Some((_, v)) => v.to_string(),
                        None => format!("m.{}", d.ident(c)),
                    })
                    .collect();
                vec![
                    format!(
                        "INSERT INTO {} ({}) SELECT {} FROM {dt} m WHERE m.{idc} IN ({ids})",
                        self.table,
                        cols.join(", "),
                        vals.join(", ")
                    ),
                    format!("DELETE FROM {dt} WHERE {idc} IN ({ids})"),
                ]
            }
        })
    }
}
