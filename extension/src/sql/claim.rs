//! The claim statements of the three forms: row_lock's locking select, the
//! lease and advisory take, and the crash-loop move of a taken row.

use super::bounded;
use super::*;

impl Shape {
    /// row_lock claim. Params: $1 int8 batch (unless `n` writes it, see [`limit`]);
    /// with `except`, $2 text[]: ids this transaction already holds (SKIP LOCKED
    /// does not skip a transaction's own row locks, so a second claim would
    /// deliver them again).
    /// With `from`, the next parameter ($2 or $3): text, the id the scan starts
    /// at (see `mark`).
    /// Columns: dead bool, id text, attempt int4, token timestamptz, then the
    /// payload: the row's columns or its jsonb (see [`row_out`](Self::row_out)),
    /// then with `by_ctid` the locked row version's ctid.
    pub fn claim_row_lock(&self, except: bool, from: bool, n: Option<u32>) -> String {
        let from = from.then_some(if except { 3 } else { 2 });
        if self.probes_after_lock() {
            return self.row_lock_probing_late(from, except, n);
        }
        let ready = self.ready_from("_s_t", from);
        self.row_lock_select(&ready, except, n)
    }

    /// The row_lock claim's locking select of the rows of `_s_t` that satisfy
    /// `ready`, as [`claim_row_lock`](Self::claim_row_lock) describes it.
    pub(super) fn row_lock_select(&self, ready: &str, except: bool, n: Option<u32>) -> String {
        let cols = self.row_lock_columns("_s_t", "_s_t.ctid");
        self.row_lock_select_from(&cols, ready, except, Some(limit(n)))
    }

    /// A row_lock claim's columns (see [`claim_row_lock`](Self::claim_row_lock))
    /// of the locked rows aliased `a`, `ctid` their version's ctid.
    pub(super) fn row_lock_columns(&self, a: &str, ctid: &str) -> String {
        self.row_lock_columns_with(a, ctid, &self.row_out(a))
    }

    /// [`row_lock_columns`](Self::row_lock_columns) with the payload `row`.
    pub(super) fn row_lock_columns_with(&self, a: &str, ctid: &str, row: &str) -> String {
        format!(
            "false, ({id})::pg_catalog.text, {att}, NULL::pg_catalog.timestamptz, {row}{ctid}",
            id = self.id_of(a),
            att = self.attempt_claimed(a),
            ctid = if self.by_ctid() {
                format!(", {ctid}")
            } else {
                String::new()
            },
        )
    }

    /// The attempt a row_lock claim delivers for the row of alias `a`: its
    /// stored counter plus one (written when the delivery settles).
    fn attempt_claimed(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => format!(
                "(COALESCE({}, 0) {PLUS} 1)::pg_catalog.int4",
                self.col(a, c)
            ),
            None => "NULL::pg_catalog.int4".into(),
        }
    }

    /// `SELECT cols` of the rows of `_s_t` that satisfy `ready` (and with
    /// `except` not held), in claim order, locked, SKIP LOCKED; `limit` the
    /// statement's LIMIT clause, if it has one.
    pub(super) fn row_lock_select_from(
        &self,
        cols: &str,
        ready: &str,
        except: bool,
        limit: Option<String>,
    ) -> String {
        format!(
            "SELECT {cols} FROM {t} _s_t WHERE {ready}{except} ORDER BY {order} {limit} FOR UPDATE OF _s_t SKIP LOCKED",
            order = self.claim_order("_s_t"),
            limit = limit.unwrap_or_default(),
            except = if except {
                self.except_held("_s_t", 2)
            } else {
                String::new()
            },
            t = self.table,
        )
    }

    /// ` AND` the id of `a` is not among the ids in parameter `$p` (text[]).
    // NOT IN over a subquery, which PostgreSQL hashes: `NOT (id = ANY($2))`
    // compared each candidate with every held id, and the candidates include
    // the held rows themselves (locked by this transaction), so claiming batch
    // after batch in one transaction grew quadratically
    pub(super) fn except_held(&self, a: &str, p: usize) -> String {
        format!(
            " AND {} NOT IN (SELECT _s_h FROM pg_catalog.unnest((${p}::pg_catalog.text[])::{}[]) _s_h)",
            self.id_of(a),
            self.id_type
        )
    }

    /// [`ready`](Self::ready), and with `from` at or past the id in that
    /// parameter (text): the claim's index scan starts there.
    fn ready_from(&self, a: &str, from: Option<usize>) -> String {
        self.starting_at(self.ready(a), a, from)
    }

    /// `p`, and with `from` the id of `a` at or past that parameter (text).
    pub(super) fn starting_at(&self, p: String, a: &str, from: Option<usize>) -> String {
        match from {
            Some(n) => format!(
                "{p} AND {} {GE} {}",
                self.id_of(a),
                self.cast_id(&format!("${n}::pg_catalog.text"))
            ),
            None => p,
        }
    }

    /// The lease take's candidates: the locators of the first ready rows in
    /// claim order, locked, SKIP LOCKED; `from` as in [`ready_from`](Self::ready_from).
    fn lease_candidates(&self, from: Option<usize>, n: Option<u32>) -> String {
        if self.probes_after_lock() {
            return self.lease_candidates_probing_late(from, n);
        }
        format!(
            "SELECT {cid} FROM {t} _s_c WHERE {ready} ORDER BY {oid} {limit} FOR UPDATE OF _s_c SKIP LOCKED",
            t = self.table,
            cid = self.locator("_s_c"),
            ready = self.ready_from("_s_c", from),
            oid = self.claim_order("_s_c"),
            limit = limit(n),
        )
    }

    /// The statement that takes rows for a lease or advisory delivery: counts the
    /// attempt and writes the lease token, in one `UPDATE`.
    ///
    /// With a dead letter, a taken row whose attempt is now past max_attempts
    /// (it was at max_attempts: its last delivery died unsettled) is flagged
    /// dead in the first column, and [`move_taken_dead`](Self::move_taken_dead)
    /// moves it in the same claim. Such rows are rare (a crash loop); flagging
    /// them instead of splitting the candidates first keeps the take one
    /// `UPDATE` for every queue (a split would lock each candidate, then write
    /// it, on every claim, for rows that are rare).
    ///
    /// lease: params $1 int8 batch (unless `n` writes it, see [`limit`]),
    /// $2 timestamptz lease token (the lease's end, see `ops::lease_token`);
    /// candidates are the first ready rows, SKIP LOCKED; with `from`, $3 text:
    /// the id the scan starts at (see `mark`).
    /// advisory: params $1 text[] ids whose keys this session just locked;
    /// candidates are those still ready (fresh snapshot: re-checked after locking).
    pub fn take(&self, from: bool, n: Option<u32>) -> String {
        let t = &self.table;
        let id = &self.id_of("_s_t");
        match self.form {
            Form::Lease => {
                let mut sets = vec![format!("{} = $2", self.locked_until.as_ref().unwrap())];
                sets.extend(self.attempt_plus_one("_s_t"));
                let update = format!(
                    "UPDATE {t} _s_t SET {sets} WHERE {grp}{key} {EQ} ANY (ARRAY({candidates}))",
                    sets = sets.join(", "),
                    grp = self.in_group("_s_t"),
                    key = self.locator("_s_t"),
                    candidates = self.lease_candidates(from.then_some(3), n),
                );
                self.taken_oldest_first(&update, self.locked_until.as_deref())
            }
            Form::Advisory => match self.attempt_plus_one("_s_t") {
                // count the attempt in one UPDATE of the rows whose keys this
                // session now holds. Its snapshot is taken after the keys were,
                // and a row another session writes meanwhile is re-checked by
                // the UPDATE itself (EvalPlanQual), as a FOR UPDATE would
                Some(sets) => {
                    let update = format!(
                        "UPDATE {t} _s_t SET {sets} WHERE {id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[]) AND {ready}",
                        ty = self.id_type,
                        ready = self.ready("_s_t"),
                    );
                    self.taken_oldest_first(&update, None)
                }
                // nothing to count (and so no dead letter): lock the rows still ready
                None => format!(
                    "SELECT false, ({id})::pg_catalog.text, NULL::pg_catalog.int4, NULL::pg_catalog.timestamptz, {row} \
                     FROM {t} _s_t WHERE {id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[]) AND {ready} ORDER BY {id} FOR UPDATE OF _s_t",
                    row = self.row_out("_s_t"),
                    ty = self.id_type,
                    ready = self.ready("_s_t"),
                ),
            },
            Form::RowLock => unreachable!("row_lock claims with claim_row_lock"),
        }
    }

    /// Whether a row the take just counted (alias `a`) is past max_attempts:
    /// `false` without a dead letter.
    fn taken_dead(&self, a: &str) -> String {
        match (self.max_attempts, &self.dead, &self.attempt) {
            (Some(max), Some(_), Some(c)) => format!("({} {GT} {max})", self.col(a, c)),
            _ => "false".into(),
        }
    }

    /// Moves the rows a take flagged dead (see [`take`](Self::take)) into the
    /// dead letter, their attempt counter as it was before the take (the count
    /// of deliveries they had). The claim holds them (row locks of its take,
    /// and for advisory their keys). Params: $1 text[] ids. Rows: the ids moved.
    /// `None` without a dead letter.
    pub fn move_taken_dead(&self) -> Option<String> {
        if self.dead.is_none() || self.form == Form::RowLock || self.moves_dead_apart() {
            return None;
        }
        let mut ctes = vec![format!(
            "_s_m AS (SELECT _s_id, true AS _s_dead FROM pg_catalog.unnest(($1::pg_catalog.text[])::{}[]) AS _s_id)",
            self.id_type
        )];
        ctes.extend(self.dead_ctes_counted("_s_m", Count::Undo));
        Some(format!(
            "WITH {} SELECT (_s_d._s_id)::pg_catalog.text FROM _s_d",
            ctes.join(",\n ")
        ))
    }

    /// A claim's columns (dead, id, attempt, token, payload) from `update`, an
    /// UPDATE of the rows taken aliased `_s_t`, oldest first. RETURNING gives
    /// the rows in the order the write met them (a TID scan or a heap-order plan:
    /// physical order): an integer id is sorted by `ops` after the statement
    /// (cheaper than a CTE), any other by the statement. `token`: the column
    /// holding the lease token, if the form has one.
    pub(super) fn taken_oldest_first(&self, update: &str, token: Option<&str>) -> String {
        let tok = |a: &str| match token {
            Some(c) => format!("{a}.{c}"),
            None => "NULL::pg_catalog.timestamptz".into(),
        };
        if self.sorted_after_take() {
            return format!(
                "{update} RETURNING {dead}, ({id})::pg_catalog.text, {att}, {tok}, {row}",
                dead = self.taken_dead("_s_t"),
                id = self.id_of("_s_t"),
                att = self.attempt_out("_s_t"),
                tok = tok("_s_t"),
                row = self.row_out("_s_t"),
            );
        }
        format!(
            "WITH _s_took AS ({update} RETURNING _s_t.*) \
             SELECT {dead}, (_s_took.{idc})::pg_catalog.text, {att}, {tok}, {row} FROM _s_took ORDER BY {order}",
            order = self.claim_order("_s_took"),
            dead = self.taken_dead("_s_took"),
            idc = self.id,
            att = self.attempt_out("_s_took"),
            tok = tok("_s_took"),
            row = self.row_out("_s_took"),
        )
    }

    /// advisory candidates: ready rows in id order with their keys.
    /// Params: $1 int8 limit (unless `n` writes it, see [`limit`]); unless
    /// `start` is `Bottom`, $2 text: the id the page starts at (`From`, see
    /// `mark`) or the last id of the previous page (`After`).
    pub fn advisory_candidates(&self, start: Start, n: Option<u32>) -> String {
        let id = self.id_of("_s_t");
        // the take tests every row's key again once this session holds it
        let mut ready = if self.probes_after_lock() {
            self.ready_before_lock("_s_t", None)
        } else {
            self.ready("_s_t")
        };
        // a bounded read starts inside its own scan (`keyed_source`)
        let bounded = self.bounds_keyed_read();
        let mut offset = "";
        match start {
            Start::Bottom => {}
            _ if bounded => {}
            Start::From => ready = format!("{ready} AND {id} {GE} {}", self.cast_id("$2")),
            // in (priority, id) order a page starts after as many rows as the
            // claim examined ($2, text), since no id bounds the rest
            Start::After if self.priority.is_some() => {
                offset = " OFFSET ($2::pg_catalog.text)::pg_catalog.int8"
            }
            Start::After => ready = format!("{ready} AND {id} {GT} {}", self.cast_id("$2")),
        }
        let from = match start {
            Start::Bottom => bounded::From::Bottom,
            Start::From => bounded::From::At(2),
            Start::After => bounded::From::After(2),
        };
        let (source, order) = self.keyed_source("_s_t", from, "", n);
        format!(
            "SELECT ({id})::pg_catalog.text, {key} FROM {source} WHERE {ready} ORDER BY {order} {limit}{offset}",
            limit = limit(n),
            key = self.advisory_key(&format!("({id})::pg_catalog.text")),
        )
    }

    /// The held rows of a settle call, locked: CTE `_s_h(_s_id, _s_att)`.
    /// Params: $1 text[] ids, $2 timestamptz[] tokens (lease).
    pub(super) fn held_cte(&self) -> String {
        let t = &self.table;
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        let att = self.att_sel("_s_t");
        match self.form {
            Form::Lease => {
                let lu = self.col("_s_t", self.locked_until.as_ref().unwrap());
                cond.push(format!("{id} {EQ} {}", self.cast_id("_s_in._s_id")));
                cond.push(format!("{lu} {EQ} _s_in._s_tok"));
                format!(
                    "_s_h AS (SELECT {id} AS _s_id, {att} AS _s_att FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok) \
                     JOIN {t} _s_t ON {cond} FOR UPDATE OF _s_t)",
                    cond = join_and(cond)
                )
            }
            // row_lock: our own transaction already holds the lock, so SKIP LOCKED only
            // drops rows another transaction holds (SQ006). advisory: we hold the key;
            // wait for a row lock (an enqueuer's UPDATE, say) rather than fail.
            Form::RowLock | Form::Advisory => {
                cond.push(format!(
                    "{id} {EQ} ANY (($1::pg_catalog.text[])::{}[])",
                    self.id_type
                ));
                let skip = if self.form == Form::RowLock {
                    " SKIP LOCKED"
                } else {
                    ""
                };
                format!(
                    "_s_h AS (SELECT {id} AS _s_id, {att} AS _s_att FROM {t} _s_t WHERE {cond} FOR UPDATE OF _s_t{skip})",
                    cond = join_and(cond)
                )
            }
        }
    }
}
