//! The claim statements of each form, by the claim plan that runs them.

use super::*;
use crate::backend::portable::dialect::Advisory;

/// How a claim runs on a queue, chosen once from its form and what the
/// dialect can do. The claim runs it and [`Shape::statement_list`] lists its
/// statements, so what is listed is what runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClaimPlan {
    /// row_lock: one locking select in the claim transaction, which the
    /// deliveries keep
    RowLock,
    /// lease with writable CTEs: one autocommitted statement that locks,
    /// counts, writes the token and returns the rows
    LeaseStatement,
    /// lease where `UPDATE` returns rows but `WITH` cannot write: one
    /// `UPDATE` over the candidates that counts, writes the token and returns
    /// the rows, in the claim's write transaction
    LeaseReturning,
    /// lease without either: lock the candidates, count and take them, read
    /// them back, in one transaction
    LeaseSteps,
    /// advisory with writable CTEs: the candidates, their keys tried, one
    /// take statement
    AdvisoryStatement,
    /// advisory without: the candidates, their keys tried, then recheck,
    /// take and read in one transaction
    AdvisorySteps,
}

impl ClaimPlan {
    pub(crate) fn of(form: Form, d: Dialect) -> ClaimPlan {
        match (form, d.has_writable_cte()) {
            (Form::RowLock, _) => ClaimPlan::RowLock,
            (Form::Lease { .. }, true) => ClaimPlan::LeaseStatement,
            (Form::Lease { .. }, false) if d.has_returning() => ClaimPlan::LeaseReturning,
            (Form::Lease { .. }, false) => ClaimPlan::LeaseSteps,
            (Form::Advisory, true) => ClaimPlan::AdvisoryStatement,
            (Form::Advisory, false) => ClaimPlan::AdvisorySteps,
        }
    }

    /// The statements this plan runs for `s`, named, in the order they run
    /// (lists of ids shown with two).
    pub(crate) fn statements(self, s: &Shape) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        // the first statement of a claim, from the lowest id and from the mark
        let (name, first): (&'static str, FirstStatement) = match self {
            ClaimPlan::RowLock => ("claim", Shape::claim_rows_sql),
            ClaimPlan::LeaseStatement => ("claim", Shape::claim_lease_cte_sql),
            ClaimPlan::LeaseReturning => ("claim", Shape::claim_lease_returning_sql),
            ClaimPlan::LeaseSteps => ("claim candidates", Shape::lease_candidates_sql),
            ClaimPlan::AdvisoryStatement | ClaimPlan::AdvisorySteps => {
                ("claim candidates", Shape::advisory_candidates_sql)
            }
        };
        for phase in s.phases() {
            let name = match phase {
                Phase::Unvalued => "… then rows without a priority",
                _ => name,
            };
            out.push((name, first(s, Scan::Lowest, *phase)));
        }
        if s.d.keeps_settled_rows_in_index() && s.keeps_mark() {
            out.push(("… from the mark", first(s, Scan::Mark, Phase::All)));
        }
        if s.walks_keys() {
            // (lists shown with two ids, a batch of one)
            out.push(("key count", s.key_count_sql(KEYS_WALKED + 1)));
            if s.id_kind == IdKind::Integer {
                // from the mark, and each step past more keys than a walk serves at once
                out.push(("… between two ids", first(s, Scan::Below, Phase::All)));
                out.push(("step's reach", s.step_extent_sql(false)));
                out.push(("… from an id", s.step_extent_sql(true)));
            }
            out.push(("heads", s.heads_sql(KEYS_WALKED * 2, unkeyed_read(1))));
            out.push(("… of the heads", first(s, Scan::Listed(2), Phase::All)));
        }
        match self {
            ClaimPlan::RowLock
            | ClaimPlan::LeaseStatement
            | ClaimPlan::LeaseReturning
            | ClaimPlan::LeaseSteps => {}
            ClaimPlan::AdvisoryStatement | ClaimPlan::AdvisorySteps => {
                let a = s.d.advisory().expect("an advisory dialect");
                if let (Some(sql), false) = (
                    s.advisory_lock_sql(Scan::Lowest, Phase::All),
                    s.walks_keys(),
                ) {
                    // a queue read in id order: the candidates and their keys at once
                    out.push(("candidates and their keys", sql));
                    if let Some(sql) = s.advisory_lock_sql(Scan::Mark, Phase::All) {
                        out.push(("… from the mark", sql));
                    }
                }
                out.push(("try locks", a.try_lock_sql(s.d, 2)));
                out.push(("unlock", a.unlock_sql(s.d, 2)));
            }
        }
        match self {
            ClaimPlan::RowLock => {}
            ClaimPlan::AdvisoryStatement => {
                out.push(("take locked", s.take_locked_sql(2)));
                out.extend(s.crash_loops_among_sql(2).map(|q| ("crash loops among", q)));
            }
            ClaimPlan::AdvisorySteps => {
                // autocommitted: read afresh, count; read again if the count fell short
                out.push(("read locked", s.held_ready_rows_sql(2)));
                out.extend(s.count_attempt_sql(2).map(|q| ("count", q)));
                out.push(("… read again", s.take_read_sql(2)));
            }
            ClaimPlan::LeaseStatement | ClaimPlan::LeaseReturning | ClaimPlan::LeaseSteps => {}
        }
        match self {
            ClaimPlan::AdvisorySteps => {}
            ClaimPlan::LeaseSteps => {
                // the claim's transaction: count, then read
                out.extend(s.take_update_sql(2).map(|q| ("take", q)));
                out.push(("take read", s.take_read_sql(2)));
            }
            ClaimPlan::LeaseStatement | ClaimPlan::AdvisoryStatement => {
                // crash-looping rows the one-statement claim returned apart
                out.extend(s.poison_check_sql().map(|q| ("crash loop check", q)));
            }
            ClaimPlan::RowLock | ClaimPlan::LeaseReturning => {}
        }
        out
    }

    /// Whether the claim's statement returns its rows in no particular order
    /// (`UPDATE … RETURNING`), so the client puts them in claim order.
    pub(crate) fn returns_unordered(self) -> bool {
        self == ClaimPlan::LeaseReturning
    }
}

impl Shape {
    /// The ready rows a claim scans (`a`), which `scan` says, and the number
    /// of the claim's limit parameter, after its own.
    fn scanned(&self, scan: Scan, phase: Phase) -> (String, usize) {
        let d = self.d;
        let mut ready = match (phase, &self.priority) {
            (Phase::Valued, Some(p)) => {
                format!("{} AND {} IS NOT NULL", self.ready("a"), self.c("a", p))
            }
            (Phase::Unvalued, Some(p)) => {
                format!("{} AND {} IS NULL", self.ready("a"), self.c("a", p))
            }
            _ => self.ready("a"),
        };
        let id = self.c("a", &self.id);
        let param = |n: usize| d.id_param(&d.p(n), self.id_kind);
        let limit = match scan {
            Scan::Lowest => 1,
            Scan::Mark => {
                ready = format!("{ready} AND {id} >= {}", param(1));
                2
            }
            Scan::Below => {
                ready = format!("{ready} AND {id} >= {} AND {id} < {}", param(1), param(2));
                3
            }
            Scan::Listed(n) => {
                ready = format!("{id} IN ({}) AND {ready}", in_list(d, 1, n, self.id_kind));
                n + 1
            }
        };
        (ready, limit)
    }

    /// row_lock claim: the first ready rows of `scan` (its parameters, then
    /// the limit), locked, as (id, attempt, token, row json).
    pub(crate) fn claim_rows_sql(&self, scan: Scan, phase: Phase) -> String {
        let (ready, limit) = self.scanned(scan, phase);
        format!(
            "{} LIMIT {}{}",
            // within a phase the (priority, id) index order is the claim's
            self.rows_in(&ready, &self.claim_order("a")),
            self.d.p(limit),
            self.d.skip_locked()
        )
    }

    /// lease claim, step 1 (no writable CTE): the first ready rows of `scan`
    /// (as [`Shape::claim_rows_sql`]), locked, as (id, attempt).
    pub(crate) fn lease_candidates_sql(&self, scan: Scan, phase: Phase) -> String {
        let d = self.d;
        let (ready, limit) = self.scanned(scan, phase);
        format!(
            "SELECT {}, {} FROM {} a WHERE {ready} ORDER BY {} LIMIT {}{}",
            d.id_text(&self.c("a", &self.id)),
            self.attempt_sel("a"),
            self.table,
            self.claim_order("a"),
            d.p(limit),
            d.skip_locked()
        )
    }

    /// lease / advisory claim, step 2: count the attempt (and lease: write the
    /// token, the lease in µs bound first) of `n` ids bound next. `None` when
    /// there is nothing to write.
    pub(crate) fn take_update_sql(&self, n: usize) -> Option<String> {
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
    pub(crate) fn take_read_sql(&self, n: usize) -> String {
        let d = self.d;
        self.rows_sql(&format!(
            "a.{} IN ({})",
            d.ident(&self.id),
            in_list(d, 1, n, self.id_kind)
        ))
    }

    /// The lease claim as one autocommitted statement (writable CTE): lock the
    /// first ready rows of `scan` (its parameters, then the limit), count the
    /// attempt and write the token (µs, bound last), return them;
    /// crash-looping candidates come back apart, marked 1 in the fifth column
    /// (see [`Shape::crash_loops`]).
    pub(crate) fn claim_lease_cte_sql(&self, scan: Scan, phase: Phase) -> String {
        let d = self.d;
        let idc = d.ident(&self.id);
        let (ready, limit) = self.scanned(scan, phase);
        let ttl = d.p(limit + 1);
        let mut sets = vec![format!(
            "{} = {}",
            d.ident(self.locked_until.as_ref().expect("lease: locked_until")),
            d.now_plus(&ttl)
        )];
        if let Some(a) = &self.attempt {
            sets.push(format!("{0} = COALESCE(a.{0}, 0) + 1", d.ident(a)));
        }
        let (live, poison) = self.crash_loops();
        let (rank, by) = self.out_order("a");
        format!(
            "WITH c AS (SELECT a.{idc} AS k, {att} AS att FROM {t} a WHERE {ready} ORDER BY {order} LIMIT {limit} FOR UPDATE SKIP LOCKED), \
                  u AS (UPDATE {t} a SET {sets} FROM c WHERE a.{idc} = c.k{live} RETURNING a.*) \
             SELECT {id}, {att}, {token}, {json}, 0, a.{idc}{rank} FROM u a{poison} ORDER BY {by}",
            order = self.claim_order("a"),
            limit = d.p(limit),
            att = self.attempt_sel("a"),
            t = self.table,
            sets = sets.join(", "),
            id = d.id_text(&self.c("a", &self.id)),
            token = self.token_sel("a"),
            json = self.payload_sel("a"),
        )
    }

    /// The lease claim where `UPDATE` returns rows but `WITH` cannot write
    /// (SQLite), in the claim's write transaction: the first ready rows of
    /// `scan` (its parameters, then the limit) in a `WITH`, one `UPDATE` that
    /// counts their attempt and writes the token (µs, bound last; SQLite
    /// numbers `?` in the order of the text) and returns them in no order,
    /// the priority fifth where there is one. Crash-looping candidates are
    /// written unchanged and come back without a token.
    pub(crate) fn claim_lease_returning_sql(&self, scan: Scan, phase: Phase) -> String {
        let d = self.d;
        let t = &self.table;
        let idc = d.ident(&self.id);
        let (ready, limit) = self.scanned(scan, phase);
        let lu = d.ident(self.locked_until.as_ref().expect("lease: locked_until"));
        let looping = match (self.max.filter(|_| self.dead.is_some()), &self.attempt) {
            (Some(m), Some(a)) => Some(format!("COALESCE({}, 0) >= {m}", d.ident(a))),
            _ => None,
        };
        let unless = |v: String, old: &str| match &looping {
            Some(l) => format!("CASE WHEN {l} THEN {old} ELSE {v} END"),
            None => v,
        };
        let mut sets = vec![format!(
            "{lu} = {}",
            unless(d.now_plus(&d.p(limit + 1)), &lu)
        )];
        if let Some(a) = &self.attempt {
            let a = d.ident(a);
            sets.push(format!(
                "{a} = {}",
                unless(format!("COALESCE({a}, 0) + 1"), &a)
            ));
        }
        // a crash-looping row kept its lease, which is free (the clock is read once per statement)
        let token = match &looping {
            Some(_) => format!(
                "CASE WHEN {lu} IS NULL OR {lu} < {} THEN NULL ELSE {} END",
                d.now(),
                self.token_sel(t)
            ),
            None => self.token_sel(t),
        };
        let (rank, _) = self.out_order(t);
        format!(
            "WITH c AS (SELECT a.{idc} AS k FROM {t} a WHERE {ready} ORDER BY {order} LIMIT {limit}) \
             UPDATE {t} SET {sets} WHERE {idc} IN (SELECT k FROM c) \
             RETURNING {id}, {att}, {token}, {json}{rank}",
            order = self.claim_order("a"),
            limit = d.p(limit),
            sets = sets.join(", "),
            id = d.id_text(&self.c(t, &self.id)),
            att = self.attempt_sel(t),
            json = self.payload_sel(t),
        )
    }

    /// Is the row of the id bound still there, ready and at max_attempts (a
    /// crash loop to move)? `None` without a retry limit.
    pub(crate) fn poison_check_sql(&self) -> Option<String> {
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

    /// advisory claim, step 1: the ids of the first ready rows of `scan` (as
    /// [`Shape::claim_rows_sql`]), unlocked.
    pub(crate) fn advisory_candidates_sql(&self, scan: Scan, phase: Phase) -> String {
        let d = self.d;
        let (ready, limit) = self.scanned(scan, phase);
        format!(
            "SELECT {} AS _s_id FROM {} a WHERE {ready} ORDER BY {} LIMIT {}",
            d.id_text(&self.c("a", &self.id)),
            self.table,
            self.claim_order("a"),
            d.p(limit),
        )
    }

    /// advisory claim, steps 1 and 2 in one statement where the server computes
    /// the keys: the candidates of [`Shape::advisory_candidates_sql`] (as many
    /// as its limit; the claim binds NULL, no limit), their keys tried in claim
    /// order until as many are held as the next parameter says (then the
    /// queue's name); the ids whose key this connection now holds.
    /// The filter above the candidates' `LIMIT` (which keeps the planner from
    /// merging the two) runs row by row under the outer one, so no key past
    /// it is tried. `None` where the client names the locks.
    pub(crate) fn advisory_lock_sql(&self, scan: Scan, phase: Phase) -> Option<String> {
        let d = self.d;
        let (_, limit) = self.scanned(scan, phase);
        let try_lock = d.advisory()?.try_lock_of(&d.p(limit + 2), "c._s_id")?;
        Some(format!(
            "SELECT c._s_id FROM ({}) c WHERE {try_lock} LIMIT {}",
            self.advisory_candidates_sql(scan, phase),
            d.p(limit + 1),
        ))
    }

    /// advisory claim without a writable CTE, once the keys of `n` ids (bound)
    /// are held: those of the rows still ready, read afresh, in the columns of
    /// [`Shape::rows_sql`].
    pub(crate) fn held_ready_rows_sql(&self, n: usize) -> String {
        let (key, _) = self.by_ids(&self.c("a", &self.id), 1, n);
        self.rows_sql(&format!("{key} AND {}", self.ready("a")))
    }

    /// … then the attempt of those of `n` ids (bound) still ready by
    /// themselves counted (a row read as its key's head stays one; MySQL
    /// cannot read the table it updates in a subquery); `None` without an
    /// attempt column.
    pub(crate) fn count_attempt_sql(&self, n: usize) -> Option<String> {
        let a = self.d.ident(self.attempt.as_ref()?);
        let t = &self.table;
        let (key, tail) = self.by_ids(&self.c(t, &self.id), 1, n);
        let mut cond = vec![key];
        cond.extend(self.ready_own(t));
        Some(format!(
            "UPDATE {t} SET {a} = COALESCE({a}, 0) + 1 WHERE {}{tail}",
            cond.join(" AND ")
        ))
    }

    /// Whether an advisory claim reads its candidates and takes their keys in
    /// one statement ([`Shape::advisory_lock_sql`]): where the server computes the keys.
    pub(crate) fn locks_in_scan(&self) -> bool {
        self.d
            .advisory()
            .is_some_and(Advisory::server_computes_keys)
    }

    /// advisory claim, once the keys of `n` ids (bound) are held, as one
    /// statement (writable CTE): count the attempt of those still ready (its
    /// snapshot is taken after the keys were) and return them in id order, in
    /// the columns of [`Shape::claim_lease_cte_sql`]. Crash-looping rows
    /// (attempt at max_attempts, with a dead letter) are left as they are and
    /// not returned: [`Shape::crash_loops_among_sql`] finds them. One `UPDATE`
    /// on the id list, as a hand-writer would: locking the rows first and
    /// joining them cost the server three times as much.
    pub(crate) fn take_locked_sql(&self, n: usize) -> String {
        let d = self.d;
        let idc = d.ident(&self.id);
        let (key, _) = self.by_ids(&self.c("a", &self.id), 1, n);
        let ready = self.ready("a");
        let out = |a: &str| {
            format!(
                "SELECT {id}, {att}, NULL, {payload}, 0, {a}.{idc}{rank} FROM",
                id = d.id_text(&self.c(a, &self.id)),
                att = self.attempt_sel(a),
                payload = self.payload_sel(a),
                rank = self.out_order(a).0,
            )
        };
        let by = self.out_order("a").1;
        match &self.attempt {
            Some(att) => {
                let live = match self.max.filter(|_| self.dead.is_some()) {
                    Some(m) => format!(" AND COALESCE(a.{}, 0) < {m}", d.ident(att)),
                    None => String::new(),
                };
                format!(
                    "WITH u AS (UPDATE {t} a SET {0} = COALESCE(a.{0}, 0) + 1 WHERE {key} AND {ready}{live} RETURNING a.*) \
                     {out} u a ORDER BY {by}",
                    d.ident(att),
                    t = self.table,
                    out = out("a"),
                )
            }
            // nothing to count (and so no dead letter): the rows still ready, locked
            None => format!(
                "{out} {t} a WHERE {key} AND {ready} ORDER BY {by} FOR UPDATE",
                t = self.table,
                out = out("a"),
            ),
        }
    }

    /// Of `n` ids (bound) whose keys this session holds, those crash-looping:
    /// ready with their attempt at max_attempts. `None` without a dead letter.
    pub(crate) fn crash_loops_among_sql(&self, n: usize) -> Option<String> {
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
}
