//! SQL text for one queue, built from its resolved descriptor.
//!
//! Every identifier here was quoted when the descriptor was loaded
//! (`quote_ident`, schema-qualified), every value travels as a bound parameter
//! (`$n`) except the queue's own group value, which is a quoted literal so that
//! the planner can match partial indexes. Functions and operators are written
//! schema-qualified (`pg_catalog.now()`, `OPERATOR(pg_catalog.=)`) so that a
//! caller's `search_path` cannot swap them.
//!
//! Aliases and CTE names start with `_s_` to stay clear of user column names.
//! The statements of the operator's functions (stats, dead letters) are in
//! [`admin`].

mod admin;

/// Claim form (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    RowLock,
    Lease,
    Advisory,
}

impl Form {
    pub fn parse(s: &str) -> Option<Form> {
        match s {
            "row_lock" => Some(Form::RowLock),
            "lease" => Some(Form::Lease),
            "advisory" => Some(Form::Advisory),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Form::RowLock => "row_lock",
            Form::Lease => "lease",
            Form::Advisory => "advisory",
        }
    }
}

/// How a payload column becomes the claim's jsonb payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// as it is
    Jsonb,
    /// cast: the same document, with jsonb's key order and last duplicate key kept
    Json,
    /// text, varchar: a JSON string, so a claim never fails on text that is not JSON
    Text,
}

impl PayloadKind {
    /// The kind of a column type; None for a type that cannot be a payload column.
    pub fn of(t: pgrx::pg_sys::Oid) -> Option<PayloadKind> {
        use pgrx::pg_sys::*;
        match t {
            JSONBOID => Some(PayloadKind::Jsonb),
            JSONOID => Some(PayloadKind::Json),
            TEXTOID | VARCHAROID => Some(PayloadKind::Text),
            _ => None,
        }
    }
}

/// Where dead rows go.
#[derive(Clone, Debug)]
pub enum Dead {
    /// A group value (quoted literal) in the same table.
    Group(String),
    /// Another table (qualified, quoted) with the same columns.
    Table(String),
}

/// The table statement an outcome writes (ack and drop share one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Write {
    Ack,
    Retry,
    RetryAfter,
    /// Only lock and check the held rows; the caller runs its own SQL (custom outcomes).
    HeldOnly,
    /// Give the delivery back without settling it (lease: clear the token).
    Release,
}

const EQ: &str = "OPERATOR(pg_catalog.=)";
const LT: &str = "OPERATOR(pg_catalog.<)";
const LE: &str = "OPERATOR(pg_catalog.<=)";
const GE: &str = "OPERATOR(pg_catalog.>=)";
const GT: &str = "OPERATOR(pg_catalog.>)";
const PLUS: &str = "OPERATOR(pg_catalog.+)";
const MINUS: &str = "OPERATOR(pg_catalog.-)";
const CAT: &str = "OPERATOR(pg_catalog.||)";
const NOW: &str = "pg_catalog.now()";
/// The advisory keys (bigint form) some session of this server holds.
pub const HELD_KEYS: &str = "SELECT ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 1 AND l.granted";

/// A claim's LIMIT: the batch size as a literal, or `$1` (int8). With a
/// parameter PostgreSQL plans the statement anew on every call: its generic plan
/// assumes a LIMIT of 10% of the table, which never costs less than a custom plan
/// for the actual size, so the plan cache keeps choosing custom plans and every
/// claim pays for planning. With a literal the kept plan is reused.
/// A statement written with a literal still declares `$1`; it is not referenced.
fn limit(n: Option<u32>) -> String {
    match n {
        Some(n) => format!("LIMIT {n}"),
        None => "LIMIT $1".into(),
    }
}

/// What a row move into the dead letter does to the attempt counter it copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Count {
    /// the stored count is the deliveries' (lease, advisory: counted at claim)
    Keep,
    /// count the delivery being settled (row_lock counts at settle)
    Add,
    /// take back the count the claim's take just wrote (see
    /// [`Shape::move_taken_dead`])
    Undo,
}

/// A queue's descriptor with every name resolved and quoted.
#[derive(Clone, Debug)]
pub struct Shape {
    pub queue: String,
    pub form: Form,
    /// qualified, quoted table name
    pub table: String,
    /// quoted column names
    pub id: String,
    pub attempt: Option<String>,
    pub retry_after: Option<String>,
    pub locked_until: Option<String>,
    pub processed_at: Option<String>,
    pub group: Option<String>,
    pub created_at: Option<String>,
    /// the payload column (quoted) and how it becomes jsonb; None: a claim
    /// hands over the whole row
    pub payload: Option<(String, PayloadKind)>,
    /// qualified name of the id column's type, for casts from text
    pub id_type: String,
    /// quoted literal of this queue's group value (its name)
    pub group_value: String,
    pub max_attempts: Option<i32>,
    pub dead: Option<Dead>,
    /// every column a row move copies (quoted, table order, generated columns left out)
    pub copy_cols: Vec<String>,
    /// no payload column, and every column has a type `rowjson` writes:
    /// claims return the row's columns and the extension writes its jsonb;
    /// otherwise the statement writes the payload
    pub native_row: bool,
    /// the row's columns (live, table order; names as they are), which a claim
    /// returns when `native_row`
    pub row_cols: Vec<(String, pgrx::pg_sys::Oid)>,
    /// a plain table of the heap access method (see `desc::plain_heap`): a
    /// ctid names one row version, so statements can find rows they locked by it
    pub plain_heap: bool,
    /// the table is distributed by Citus: statements on it are planned per
    /// call (Citus plans a distributed statement for its parameters' values)
    pub distributed: bool,
    /// the id column is an integer (int2/int4/int8): its text sorts by value
    /// once parsed, so the extension can put claimed rows in id order itself
    pub int_id: bool,
}

/// Quote a string as an SQL literal (standard_conforming_strings on, as since 9.1).
pub fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Quote an identifier the way PostgreSQL's quote_ident does when in doubt: always.
pub fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

impl Shape {
    fn col(&self, a: &str, c: &str) -> String {
        format!("{a}.{c}")
    }

    /// row_lock on a plain heap table: the claim also returns each row's `ctid`,
    /// and an ack finds the row by it (see [`ack_tids`](Self::ack_tids)).
    pub fn by_ctid(&self) -> bool {
        self.form == Form::RowLock && self.plain_heap
    }

    /// How a claim's write finds the rows of alias `a` it has just locked: by
    /// the locked version's ctid on a plain heap table (a TID scan), else by id.
    fn locator(&self, a: &str) -> String {
        if self.plain_heap {
            format!("{a}.ctid")
        } else {
            self.id_of(a)
        }
    }

    fn id_of(&self, a: &str) -> String {
        self.col(a, &self.id)
    }

    /// `text` → the id column's type
    fn cast_id(&self, e: &str) -> String {
        format!("({e})::{}", self.id_type)
    }

    /// Conditions every candidate row satisfies (SPEC §1 "ready").
    pub fn ready(&self, a: &str) -> String {
        let mut p = self.mine(a);
        if let Some(c) = &self.retry_after {
            let c = self.col(a, c);
            p.push(format!("({c} IS NULL OR {c} {LE} {NOW})"));
        }
        if self.form == Form::Lease {
            let c = self.col(
                a,
                self.locked_until
                    .as_ref()
                    .expect("lease form has locked_until"),
            );
            p.push(format!("({c} IS NULL OR {c} {LT} {NOW})"));
        }
        join_and(p)
    }

    /// Conditions of a row that belongs to this queue and is not settled yet.
    fn mine(&self, a: &str) -> Vec<String> {
        let mut p = Vec::new();
        if let Some(g) = &self.group {
            p.push(format!("{} {EQ} {}", self.col(a, g), self.group_value));
        }
        if let Some(c) = &self.processed_at {
            p.push(format!("{} IS NULL", self.col(a, c)));
        }
        p
    }

    /// `a.group = 'queue' AND ` on a grouped table, else nothing: a write that
    /// finds rows by id finds them within the queue's group, so an id need only
    /// be unique with the group (a `(group, id)` key), and Citus routes the
    /// statement to the group's shard.
    fn in_group(&self, a: &str) -> String {
        match &self.group {
            Some(g) => format!("{} {EQ} {} AND ", self.col(a, g), self.group_value),
            None => String::new(),
        }
    }

    fn attempt_plus_one(&self, a: &str) -> Option<String> {
        self.attempt
            .as_ref()
            .map(|c| format!("{} = COALESCE({}, 0) {PLUS} 1", c, self.col(a, c)))
    }

    /// The 1-based number of the delivery being settled, from the stored counter
    /// `e`: row_lock counts in the settling statement, the others at claim.
    fn delivery_attempt(&self, e: &str) -> String {
        match self.form {
            Form::RowLock => format!("(COALESCE({e}, 0) {PLUS} 1)"),
            _ => format!("COALESCE({e}, 0)"),
        }
    }

    fn attempt_out(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => format!("({})::pg_catalog.int4", self.col(a, c)),
            None => "NULL::pg_catalog.int4".into(),
        }
    }

    /// The bigint advisory key of a row: `hashtextextended(len(queue) || ':' || queue || ':' || id::text, 0)`.
    pub fn advisory_key(&self, id_text_expr: &str) -> String {
        let prefix = literal(&format!("{}:{}:", self.queue.chars().count(), self.queue));
        format!("pg_catalog.hashtextextended({prefix} {CAT} ({id_text_expr}), 0)")
    }

    /// CTEs moving the rows of `src` (a CTE with `_s_id`, `_s_dead`) flagged dead
    /// into the dead letter. They end in a CTE `_s_d(_s_id)` of the moved ids.
    /// The moved row carries the number of deliveries it had: row_lock counts
    /// this one as it moves it, the others counted it at claim.
    fn dead_ctes(&self, src: &str) -> Vec<String> {
        self.dead_ctes_counted(src, self.settle_count())
    }

    /// How a settle's move into the dead letter counts the delivery it settles.
    fn settle_count(&self) -> Count {
        match self.form {
            Form::RowLock => Count::Add,
            _ => Count::Keep,
        }
    }

    fn dead_ctes_counted(&self, src: &str, count: Count) -> Vec<String> {
        let Some(dead) = &self.dead else {
            return vec![];
        };
        let id = &self.id;
        let mut sets = Vec::new();
        let lease_clear = self.locked_until.as_ref().map(|c| format!("{c} = NULL"));
        match dead {
            Dead::Group(dl) => {
                sets.push(format!(
                    "{} = {dl}",
                    self.group.as_ref().expect("group dead letter needs group")
                ));
                sets.extend(lease_clear);
                match (count, &self.attempt) {
                    (Count::Add, _) => sets.extend(self.attempt_plus_one("_s_t")),
                    (Count::Undo, Some(c)) => sets.push(format!("{c} = _s_t.{c} {MINUS} 1")),
                    _ => {}
                }
                vec![format!(
                    "_s_d AS (UPDATE {t} _s_t SET {sets} WHERE {grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src} WHERE {src}._s_dead)) RETURNING _s_t.{id} AS _s_id)",
                    t = self.table,
                    grp = self.in_group("_s_t"),
                    sets = sets.join(", ")
                )]
            }
            Dead::Table(dlt) => {
                let (cols, vals) = self.dead_values("_s_dm", count);
                vec![
                    format!(
                        "_s_dm AS (DELETE FROM {t} _s_t WHERE {grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src} WHERE {src}._s_dead)) RETURNING _s_t.*)",
                        t = self.table,
                        grp = self.in_group("_s_t"),
                    ),
                    format!("_s_di AS (INSERT INTO {dlt} ({cols}) OVERRIDING SYSTEM VALUE SELECT {vals} FROM _s_dm)"),
                    format!("_s_d AS (SELECT _s_dm.{id} AS _s_id FROM _s_dm)"),
                ]
            }
        }
    }

    /// The columns a move into the dead-letter table writes, and their values
    /// from the moved row `a`: the lease cleared, the attempt counter as
    /// `count` says.
    fn dead_values(&self, a: &str, count: Count) -> (String, String) {
        let vals = self
            .copy_cols
            .iter()
            .map(|c| {
                if Some(c) == self.locked_until.as_ref() {
                    "NULL".to_string()
                } else if Some(c) == self.attempt.as_ref() && count == Count::Add {
                    format!("COALESCE({a}.{c}, 0) {PLUS} 1")
                } else if Some(c) == self.attempt.as_ref() && count == Count::Undo {
                    format!("{a}.{c} {MINUS} 1")
                } else {
                    format!("{a}.{c}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        (self.copy_cols.join(", "), vals)
    }

    /// The advisory stats statement takes the held keys as `$1` (int8[]): a
    /// distributed statement runs on a worker, whose `pg_locks` holds none of
    /// the coordinator's keys, so they are read there ([`HELD_KEYS`]).
    pub fn stats_binds_held_keys(&self) -> bool {
        self.form == Form::Advisory && self.distributed
    }

    /// A distributed table with a dead-letter table moves dead rows with two
    /// statements of their own ([`dead_copy`](Self::dead_copy), then
    /// [`dead_delete`](Self::dead_delete)), each routed to the group's shard:
    /// Citus runs a statement with an INSERT in a CTE through the coordinator.
    /// The settle statement then only flags the rows (`to_dead`).
    pub fn moves_dead_apart(&self) -> bool {
        self.distributed && matches!(self.dead, Some(Dead::Table(_)))
    }

    /// Copy the rows `$1` (text[] ids, held by the caller) into the dead-letter
    /// table, counted as a settle counts them, or with `taken` as a claim's take
    /// left them (see [`move_taken_dead`](Self::move_taken_dead)).
    pub fn dead_copy(&self, taken: bool) -> Option<String> {
        let Some(Dead::Table(dlt)) = &self.dead else {
            return None;
        };
        let count = if taken {
            Count::Undo
        } else {
            self.settle_count()
        };
        let (cols, vals) = self.dead_values("_s_dm", count);
        Some(format!(
            "INSERT INTO {dlt} ({cols}) OVERRIDING SYSTEM VALUE SELECT {vals} FROM {t} _s_dm WHERE {grp}_s_dm.{id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[])",
            t = self.table,
            grp = self.in_group("_s_dm"),
            id = self.id,
            ty = self.id_type,
        ))
    }

    /// Delete the rows `$1` (text[] ids) that [`dead_copy`](Self::dead_copy)
    /// copied. Rows: the ids deleted.
    pub fn dead_delete(&self) -> String {
        format!(
            "DELETE FROM {t} _s_t WHERE {grp}_s_t.{id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[]) RETURNING (_s_t.{id})::pg_catalog.text",
            t = self.table,
            grp = self.in_group("_s_t"),
            id = self.id,
            ty = self.id_type,
        )
    }

    fn dead_flag(&self, att_expr: &str) -> String {
        match (self.max_attempts, &self.dead) {
            (Some(max), Some(_)) => format!("({} {GE} {max})", self.delivery_attempt(att_expr)),
            _ => "false".into(),
        }
    }

    /// A claim's payload as the claim statement returns it: the payload
    /// column as jsonb; without one the row's columns, each on its own, for
    /// `rowjson` to write as jsonb (no composite row built and taken apart
    /// again), or `to_jsonb` of the row.
    fn row_out(&self, a: &str) -> String {
        if let Some((c, kind)) = &self.payload {
            let c = self.col(a, c);
            return match kind {
                PayloadKind::Jsonb => c,
                PayloadKind::Json => format!("({c})::pg_catalog.jsonb"),
                PayloadKind::Text => format!("pg_catalog.to_jsonb(({c})::pg_catalog.text)"),
            };
        }
        if self.native_row {
            self.row_cols
                .iter()
                .map(|(c, _)| format!("{a}.{}", ident(c)))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            format!("pg_catalog.to_jsonb({a}.*)")
        }
    }

    fn att_sel(&self, a: &str) -> String {
        match &self.attempt {
            Some(c) => self.col(a, c),
            None => "NULL::pg_catalog.int4".into(),
        }
    }

    /// row_lock claim. Params: $1 int8 batch (unless `n` writes it, see [`limit`]);
    /// with `except`, $2 text[]: ids this transaction already holds (SKIP LOCKED
    /// does not skip a transaction's own row locks, so a second claim would
    /// deliver them again).
    /// Columns: dead bool, id text, attempt int4, token timestamptz, then the
    /// payload: the row's columns or its jsonb (see [`row_out`](Self::row_out)),
    /// then with `by_ctid` the locked row version's ctid.
    pub fn claim_row_lock(&self, except: bool, n: Option<u32>) -> String {
        let att = match &self.attempt {
            Some(c) => format!(
                "(COALESCE({}, 0) {PLUS} 1)::pg_catalog.int4",
                self.col("_s_t", c)
            ),
            None => "NULL::pg_catalog.int4".into(),
        };
        format!(
            "SELECT false, ({id})::pg_catalog.text, {att}, NULL::pg_catalog.timestamptz, {row}{ctid} \
             FROM {t} _s_t WHERE {ready}{except} ORDER BY {id} {limit} FOR UPDATE OF _s_t SKIP LOCKED",
            id = self.id_of("_s_t"),
            ctid = if self.by_ctid() { ", _s_t.ctid" } else { "" },
            limit = limit(n),
            row = self.row_out("_s_t"),
            // NOT IN over a subquery, which PostgreSQL hashes: `NOT (id = ANY($2))`
            // compared each candidate with every held id, and the candidates
            // include the held rows themselves (locked by this transaction), so
            // claiming batch after batch in one transaction grew quadratically
            except = if except {
                format!(
                    " AND {} NOT IN (SELECT _s_h FROM pg_catalog.unnest(($2::pg_catalog.text[])::{}[]) _s_h)",
                    self.id_of("_s_t"),
                    self.id_type
                )
            } else {
                String::new()
            },
            t = self.table,
            ready = self.ready("_s_t"),
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
    /// candidates are the first ready rows, SKIP LOCKED.
    /// advisory: params $1 text[] ids whose keys this session just locked;
    /// candidates are those still ready (fresh snapshot: re-checked after locking).
    pub fn take(&self, n: Option<u32>) -> String {
        let t = &self.table;
        let id = &self.id_of("_s_t");
        match self.form {
            Form::Lease => {
                let mut sets = vec![format!("{} = $2", self.locked_until.as_ref().unwrap())];
                sets.extend(self.attempt_plus_one("_s_t"));
                let update = format!(
                    "UPDATE {t} _s_t SET {sets} WHERE {grp}{key} {EQ} ANY (ARRAY(SELECT {cid} FROM {t} _s_c WHERE {ready} ORDER BY {oid} {limit} FOR UPDATE OF _s_c SKIP LOCKED))",
                    sets = sets.join(", "),
                    grp = self.in_group("_s_t"),
                    limit = limit(n),
                    key = self.locator("_s_t"),
                    cid = self.locator("_s_c"),
                    oid = self.id_of("_s_c"),
                    ready = self.ready("_s_c"),
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
    fn taken_oldest_first(&self, update: &str, token: Option<&str>) -> String {
        let tok = |a: &str| match token {
            Some(c) => format!("{a}.{c}"),
            None => "NULL::pg_catalog.timestamptz".into(),
        };
        if self.int_id {
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
             SELECT {dead}, (_s_took.{idc})::pg_catalog.text, {att}, {tok}, {row} FROM _s_took ORDER BY _s_took.{idc}",
            dead = self.taken_dead("_s_took"),
            idc = self.id,
            att = self.attempt_out("_s_took"),
            tok = tok("_s_took"),
            row = self.row_out("_s_took"),
        )
    }

    /// advisory candidates: ready rows in id order with their keys.
    /// Params: $1 int8 limit (unless `n` writes it, see [`limit`]); `after`: $2
    /// text (the last id of the previous page).
    pub fn advisory_candidates(&self, after: bool, n: Option<u32>) -> String {
        let id = self.id_of("_s_t");
        let mut ready = self.ready("_s_t");
        if after {
            ready = format!("{ready} AND {id} {GT} {}", self.cast_id("$2"));
        }
        format!(
            "SELECT ({id})::pg_catalog.text, {key} FROM {t} _s_t WHERE {ready} ORDER BY {id} {limit}",
            limit = limit(n),
            key = self.advisory_key(&format!("({id})::pg_catalog.text")),
            t = self.table
        )
    }

    /// The held rows of a settle call, locked: CTE `_s_h(_s_id, _s_att)`.
    /// Params: $1 text[] ids, $2 timestamptz[] tokens (lease).
    fn held_cte(&self) -> String {
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

    /// One statement settling every held row of `$1` with one outcome.
    /// Params: $1 text[] ids, $2 timestamptz[] tokens, $3 timestamptz: when a
    /// retry_after row is ready again (bound, not computed in the statement:
    /// Citus refuses volatile functions in a distributed UPDATE).
    /// Rows: (id text, result text) for each row it settled; ids it did not
    /// return were not held.
    pub fn settle(&self, w: Write) -> String {
        let t = &self.table;
        let id = &self.id;
        let mut ctes = vec![self.held_cte()];
        let mut outs: Vec<String> = Vec::new();
        // writes find their rows by `id = ANY(ARRAY(...))`: an index scan whatever
        // the planner guesses about the CTE's size (a join can turn into a seq scan)
        let grp = self.in_group("_s_t");
        let on_held = |src: &str, filter: &str| {
            format!("{grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src}{filter}))")
        };
        let write_cte =
            |ctes: &mut Vec<String>, name: &str, src: &str, sets: Vec<String>, filter: &str| {
                ctes.push(format!(
                "{name} AS (UPDATE {t} _s_t SET {sets} WHERE {on} RETURNING _s_t.{id} AS _s_id)",
                sets = sets.join(", "),
                on = on_held(src, filter)
            ));
            };
        match w {
            Write::Ack => {
                if let Some(p) = &self.processed_at {
                    write_cte(&mut ctes, "_s_o", "_s_h", vec![format!("{p} = {NOW}")], "");
                    outs.push(
                        "SELECT (_s_o._s_id)::pg_catalog.text, 'marked'::pg_catalog.text FROM _s_o"
                            .into(),
                    );
                } else {
                    ctes.push(format!(
                        "_s_o AS (DELETE FROM {t} _s_t WHERE {on} RETURNING _s_t.{id} AS _s_id)",
                        on = on_held("_s_h", "")
                    ));
                    outs.push("SELECT (_s_o._s_id)::pg_catalog.text, 'deleted'::pg_catalog.text FROM _s_o".into());
                }
            }
            Write::HeldOnly => {
                outs.push(
                    "SELECT (_s_h._s_id)::pg_catalog.text, 'held'::pg_catalog.text FROM _s_h"
                        .into(),
                );
            }
            Write::Release => {
                if let (Form::Lease, Some(lu)) = (self.form, &self.locked_until) {
                    write_cte(&mut ctes, "_s_o", "_s_h", vec![format!("{lu} = NULL")], "");
                    outs.push("SELECT (_s_o._s_id)::pg_catalog.text, 'released'::pg_catalog.text FROM _s_o".into());
                } else {
                    outs.push("SELECT (_s_h._s_id)::pg_catalog.text, 'released'::pg_catalog.text FROM _s_h".into());
                }
            }
            Write::Retry | Write::RetryAfter => {
                ctes.push(format!(
                    "_s_x AS (SELECT _s_id, {} AS _s_dead FROM _s_h)",
                    self.dead_flag("_s_att")
                ));
                if self.moves_dead_apart() {
                    outs.push("SELECT (_s_x._s_id)::pg_catalog.text, 'to_dead'::pg_catalog.text FROM _s_x WHERE _s_x._s_dead".into());
                } else if self.dead.is_some() {
                    ctes.extend(self.dead_ctes("_s_x"));
                    outs.push("SELECT (_s_d._s_id)::pg_catalog.text, 'dead_lettered'::pg_catalog.text FROM _s_d".into());
                }
                let mut sets = Vec::new();
                let delayed = w == Write::RetryAfter && self.retry_after.is_some();
                if delayed {
                    sets.push(format!("{} = $3", self.retry_after.as_ref().unwrap()));
                }
                if self.form == Form::RowLock {
                    sets.extend(self.attempt_plus_one("_s_t"));
                }
                if self.form == Form::Lease {
                    sets.push(format!("{} = NULL", self.locked_until.as_ref().unwrap()));
                }
                let result = if delayed {
                    "delayed"
                } else if sets.is_empty() && self.form == Form::RowLock {
                    // row_lock without an attempt column: nothing to write, the
                    // transaction's end returns the row as it was
                    "released"
                } else {
                    "retried"
                };
                if sets.is_empty() {
                    outs.push(format!(
                        "SELECT (_s_x._s_id)::pg_catalog.text, '{result}'::pg_catalog.text FROM _s_x WHERE NOT _s_x._s_dead"
                    ));
                } else {
                    write_cte(&mut ctes, "_s_r", "_s_x", sets, " WHERE NOT _s_x._s_dead");
                    outs.push(format!(
                        "SELECT (_s_r._s_id)::pg_catalog.text, '{result}'::pg_catalog.text FROM _s_r"
                    ));
                }
            }
        }
        format!("WITH {}\n{}", ctes.join(",\n "), outs.join("\nUNION ALL "))
    }

    /// Ack / drop of many deliveries in one pass (no held-check CTE): the held
    /// condition is part of the write. Params: $1 text[] ids, $2 timestamptz[] tokens.
    pub fn ack_many(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        let mut from: Option<String> = None;
        match self.form {
            Form::Lease => {
                from = Some("ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok)".into());
                cond.push(format!("{id} {EQ} {}", self.cast_id("_s_in._s_id")));
                cond.push(format!(
                    "{} {EQ} _s_in._s_tok",
                    self.col("_s_t", self.locked_until.as_ref().unwrap())
                ));
            }
            // row_lock: only rows this transaction holds reach the statement (the
            // claim list is exact under savepoints); advisory: the caller checked the key
            Form::RowLock | Form::Advisory => cond.push(format!(
                "{id} {EQ} ANY (($1::pg_catalog.text[])::{}[])",
                self.id_type
            )),
        }
        self.ack_write(from.as_deref(), &join_and(cond))
    }

    /// Lease ack / drop of many deliveries that share one token (claimed
    /// together): `id = ANY($1) AND locked_until = $2`, one index scan over the
    /// sorted ids, where [`ack_many`](Self::ack_many) joins id-token pairs and
    /// descends the index once per pair. Params: $1 text[] ids, $2 timestamptz.
    pub fn ack_many_one_token(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        cond.push(format!(
            "{id} {EQ} ANY (($1::pg_catalog.text[])::{}[])",
            self.id_type
        ));
        cond.push(format!(
            "{} {EQ} $2",
            self.col("_s_t", self.locked_until.as_ref().unwrap())
        ));
        self.ack_write(None, &join_and(cond))
    }

    /// The statement ack and drop write: mark processed_at, or delete. `with`
    /// is a relation joined in (UPDATE … FROM / DELETE … USING).
    fn ack_write(&self, with: Option<&str>, cond: &str) -> String {
        let (t, id) = (&self.table, self.id_of("_s_t"));
        match &self.processed_at {
            Some(p) => format!(
                "UPDATE {t} _s_t SET {p} = {NOW}{} WHERE {cond} RETURNING ({id})::pg_catalog.text, 'marked'::pg_catalog.text",
                with.map_or(String::new(), |w| format!(" FROM {w}"))
            ),
            None => format!(
                "DELETE FROM {t} _s_t{} WHERE {cond} RETURNING ({id})::pg_catalog.text, 'deleted'::pg_catalog.text",
                with.map_or(String::new(), |w| format!(" USING {w}"))
            ),
        }
    }

    /// The hot path: ack / drop of one delivery, one plain statement.
    /// Params: $1 text id, $2 timestamptz token (lease; unused otherwise).
    /// Returns (id text, result) when the row was held and is now settled.
    pub fn ack_one(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        match self.form {
            Form::Lease => {
                cond.push(format!("{id} {EQ} {}", self.cast_id("$1")));
                cond.push(format!(
                    "{} {EQ} $2",
                    self.col("_s_t", self.locked_until.as_ref().unwrap())
                ));
            }
            // row_lock: only a row this transaction holds reaches the statement (the
            // claim list is exact under savepoints); advisory: the caller checked the key
            Form::RowLock | Form::Advisory => {
                cond.push(format!("{id} {EQ} {}", self.cast_id("$1")))
            }
        }
        self.ack_write(None, &join_and(cond))
    }

    /// row_lock ack / drop of rows found by the ctid their claim locked: a TID
    /// scan, no index descent per row (the by-id DELETE's largest cost after the
    /// claim). Params: $1 tid[]. Sound because the claim list is exact: the
    /// version a row lock of this transaction holds cannot be pruned while the
    /// transaction runs, so its ctid names that row, and if this transaction has
    /// since updated or deleted the row, that version is invisible and the row
    /// is not returned (the caller falls back to [`ack_many`](Self::ack_many)).
    pub fn ack_tids(&self) -> String {
        let mut cond = self.mine("_s_t");
        cond.push(format!("_s_t.ctid {EQ} ANY ($1::pg_catalog.tid[])"));
        self.ack_write(None, &join_and(cond))
    }

    /// Lease heartbeat. Params: $1 text id, $2 timestamptz token, $3 timestamptz new token.
    pub fn extend(&self) -> String {
        let lu = self.locked_until.as_ref().unwrap();
        let mut cond = self.mine("_s_t");
        cond.push(format!(
            "{} {EQ} {}",
            self.id_of("_s_t"),
            self.cast_id("$1")
        ));
        cond.push(format!("_s_t.{lu} {EQ} $2"));
        format!(
            "UPDATE {t} _s_t SET {lu} = $3 WHERE {cond} RETURNING _s_t.{lu}",
            t = self.table,
            cond = join_and(cond)
        )
    }
}

fn join_and(p: Vec<String>) -> String {
    if p.is_empty() {
        "true".into()
    } else {
        p.join(" AND ")
    }
}
