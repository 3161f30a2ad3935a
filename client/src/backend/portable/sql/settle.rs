//! The settle statements: the lock of the held rows, each outcome's write,
//! the acks, the lease's release, heartbeat and token, and the moves into
//! the dead letter.

use super::*;

/// The ack (or drop) statements, by what they check of the listed rows.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Ack {
    /// rows held by a transaction or key: the ids alone
    Held,
    /// lease rows sharing one token, bound after the ids
    SharedToken,
    /// lease rows each with its own token, bound after its id
    TokenEach,
}

/// Which ids an ack's statement returns (see [`Shape::ack_reporting`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Reports {
    /// the ids it wrote
    Written,
    /// the listed ids it did not write
    Unwritten,
}

/// What an outcome writes to each of its rows.
pub(crate) enum Verb {
    Delete,
    /// an `UPDATE`'s assignments, of unqualified columns
    Set(String),
}

impl Shape {
    /// Statements moving one row (`id` = parameter 1) to the dead letter.
    /// `count_delivery`: row_lock counts the failed delivery here.
    pub(crate) fn dead_sql(&self, count_delivery: bool) -> Vec<String> {
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
                    // one statement where the database can
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

    /// Lock the rows of `n` ids (bound) of this queue not settled yet (row_lock:
    /// already locked by the claim), as (id, attempt, token).
    pub(crate) fn lock_held_sql(&self, n: usize) -> String {
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

    /// An outcome's write (see [`Shape::outcome_verb`]) of the rows listed
    /// as parameters, after the delay when `delayed`.
    pub(crate) fn verb_by_ids(&self, verb: &Verb, delayed: bool, n: usize) -> String {
        let first = 1 + usize::from(delayed);
        let (key, tail) = self.by_ids(&self.d.ident(&self.id), first, n);
        format!("{} WHERE {key}{tail}", self.verb_sql(verb))
    }

    /// An outcome's write of integer ids, written in, as one statement without
    /// parameters that finds each row by a lookup of its key (the ids as a
    /// derived table, joined to the table first): it reads no row but the
    /// listed ones, as one statement per id would.
    pub(crate) fn verb_joined_int_ids(&self, verb: &Verb, ids: &[i64]) -> String {
        let mut list = String::new();
        for (i, n) in ids.iter().enumerate() {
            match i {
                0 => list += &format!("SELECT {n} AS _s_id"),
                _ => list += &format!(" UNION ALL SELECT {n}"),
            }
        }
        let join = format!(
            "({list}) _s_i STRAIGHT_JOIN {} _s_t ON _s_t.{} = _s_i._s_id",
            self.table,
            self.d.ident(&self.id)
        );
        match verb {
            Verb::Delete => format!("DELETE _s_t FROM {join}"),
            Verb::Set(sets) => format!("UPDATE {join} SET {sets}"),
        }
    }

    /// An outcome's write up to its WHERE: `DELETE FROM t` or `UPDATE t SET …`.
    pub(crate) fn verb_sql(&self, verb: &Verb) -> String {
        match verb {
            Verb::Delete => format!("DELETE FROM {}", self.table),
            Verb::Set(sets) => format!("UPDATE {} SET {sets}", self.table),
        }
    }

    /// The write of an outcome (`None`: nothing to write), and what it
    /// writes: ack/drop (`retry` false) or retry/retry_after. A delay (µs) is
    /// bound first, or written in as a number with `inline_delay`; a delay of
    /// zero is neither (the row's retry_after becomes NULL).
    pub(crate) fn outcome_verb(
        &self,
        retry: bool,
        delay: Option<i64>,
        inline_delay: bool,
    ) -> (Option<Verb>, Settled) {
        let d = self.d;
        if !retry {
            return match &self.processed_at {
                Some(p) => (
                    Some(Verb::Set(format!("{} = {}", d.ident(p), d.now()))),
                    Settled::Marked,
                ),
                None => (Some(Verb::Delete), Settled::Deleted),
            };
        }
        let mut sets = Vec::new();
        match (delay, &self.retry_after) {
            // no delay: no time at all, so that no claim whose transaction began
            // a moment before this one commits finds the row not ready yet
            (Some(0), Some(r)) => sets.push(format!("{} = NULL", d.ident(r))),
            (Some(us), Some(r)) => {
                let p = if inline_delay { us.to_string() } else { d.p(1) };
                sets.push(format!("{} = {}", d.ident(r), d.now_plus(&p)));
            }
            _ => {}
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
        let verb = (!sets.is_empty()).then(|| Verb::Set(sets.join(", ")));
        (verb, settled)
    }

    /// The ack (or drop) of `n` rows of this queue not settled yet: ids bound as
    /// parameters 1..=n, and with `token` the lease token as n + 1 (only the
    /// rows that still hold it are written).
    pub(crate) fn ack_sql(&self, n: usize, token: bool) -> (String, Settled) {
        let (sql, settled) = self.ack_where(&self.held_cond(n, token));
        (sql + &self.ack_tail(n), settled)
    }

    /// What follows an ack's condition over `n` listed ids (see [`Shape::listed_tail`]).
    fn ack_tail(&self, n: usize) -> String {
        self.listed_tail(&self.c(&self.table, &self.id), n)
    }

    /// An ack or drop reports the rows it wrote ([`returning_id`](Self::returning_id)):
    /// a `DELETE` where the server reports them, an `UPDATE` of `processed_at`
    /// where `UPDATE` does too.
    pub(crate) fn acks_return(&self) -> bool {
        self.deletes_return && (self.processed_at.is_none() || self.d.has_returning())
    }

    /// The ack (or drop) of `n` distinct ids each still holding its own lease
    /// token, `(id = ? AND token = ?) OR …`, each token bound after its id.
    pub(crate) fn ack_per_item_sql(&self, n: usize) -> (String, Settled) {
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
        let (sql, settled) = self.ack_where(&cond.join(" AND "));
        (sql + &self.ack_tail(n), settled)
    }

    /// What a write appends to report the ids it wrote.
    pub(crate) fn returning_id(&self) -> String {
        format!(" RETURNING {}", self.d.id_text(&self.d.ident(&self.id)))
    }

    /// Which ids [`Shape::ack_reporting`] returns for an ack of `n` rows: with
    /// a writable CTE and more than one row, the listed ids it did not write,
    /// so an ack of rows still held sends no row back; otherwise the ids it
    /// wrote (one row's answer is one row either way, and the plain statement
    /// costs the server less).
    pub(crate) fn ack_reports(&self, n: usize) -> Reports {
        match self.d.has_writable_cte() && n > 1 {
            true => Reports::Unwritten,
            false => Reports::Written,
        }
    }

    /// The ack `of` `n` listed ids, without a report of its rows.
    pub(crate) fn ack_of_sql(&self, of: Ack, n: usize) -> String {
        match of {
            Ack::Held => self.ack_sql(n, false).0,
            Ack::SharedToken => self.ack_sql(n, true).0,
            Ack::TokenEach => self.ack_per_item_sql(n).0,
        }
    }

    /// The ack `of` `n` listed ids, made to report its rows as
    /// [`Shape::ack_reports`] says.
    pub(crate) fn ack_reporting(&self, of: Ack, n: usize) -> String {
        let d = self.d;
        let ack = self.ack_of_sql(of, n);
        if self.ack_reports(n) == Reports::Written {
            return ack + &self.returning_id();
        }
        // the i-th id's parameter: ids alone, or each followed by its token
        let stride = if of == Ack::TokenEach { 2 } else { 1 };
        let id = d.ident(&self.id);
        // each id as bound (t), so the answer is the client's own text, and as the column's type (x)
        let listed: Vec<String> = (0..n)
            .map(|i| {
                let p = d.p(1 + i * stride);
                format!("({p}, {})", d.id_param(&p, self.id_kind))
            })
            .collect();
        format!(
            "WITH w AS ({ack} RETURNING {id}) SELECT v.t FROM (VALUES {}) v(t, x) \
             WHERE v.x NOT IN (SELECT {id} FROM w)",
            listed.join(", ")
        )
    }

    /// The ack (or drop) of the rows `WHERE cond`, and what it writes.
    fn ack_where(&self, cond: &str) -> (String, Settled) {
        let d = self.d;
        let t = &self.table;
        let sql = match &self.processed_at {
            Some(p) => format!("UPDATE {t} SET {} = {} WHERE {cond}", d.ident(p), d.now()),
            None => format!("DELETE FROM {t} WHERE {cond}"),
        };
        (sql, self.ack_settles())
    }

    /// What an ack or drop does to a row: marks it (`processed_at`) or deletes it.
    pub(crate) fn ack_settles(&self) -> Settled {
        match self.processed_at {
            Some(_) => Settled::Marked,
            None => Settled::Deleted,
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
    pub(crate) fn release_lease_sql(&self) -> String {
        format!(
            "UPDATE {} SET {} = NULL WHERE {}",
            self.table,
            self.d
                .ident(self.locked_until.as_ref().expect("lease: locked_until")),
            self.held_cond(1, true)
        )
    }

    /// Lease heartbeat: the new lease (µs), the id, the old token bound.
    pub(crate) fn extend_sql(&self) -> String {
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
    pub(crate) fn token_sql(&self) -> String {
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
