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
//! Here: the resolved descriptor ([`Shape`]) and the expressions every
//! statement shares. The statements, by family: [`claim`] (and [`heads`]:
//! claims that walk a keyed queue's keys), [`settle`], [`dead`] (moves into
//! the dead letter) and [`admin`] (the operator's functions: counts, dead
//! letters).

mod admin;
mod bounded;
mod claim;
mod dead;
mod heads;
mod late;
mod settle;

pub use bounded::read_bound;

/// Claim form (docs/semantics.md, "Claim forms").
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

/// Where an advisory candidates page starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Start {
    /// at the lowest id
    Bottom,
    /// at a given id (inclusive): the session's mark
    From,
    /// past a given id: the last of the previous page
    After,
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
    /// the priority column (quoted): claims take ready rows in (priority, id)
    /// order, NULL after every value
    pub priority: Option<String>,
    /// the ordering_key column (quoted) and the equality its keys compare
    /// with (`OPERATOR(schema.=)`): a row is ready only while no row of its
    /// key with a lower id is still in the queue
    pub ordering_key: Option<(String, String)>,
    /// keyed claims in id order read at most `bounded::read_bound` rows
    /// (the statements of `desc::PlanKey::Bounded`); false in a descriptor
    pub bounded_read: bool,
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

    /// Conditions every candidate row satisfies (docs/semantics.md, "A queue and its rows").
    pub fn ready(&self, a: &str) -> String {
        let mut p = self.ready_own(a);
        p.extend(self.key_free(a));
        join_and(p)
    }

    /// [`ready`](Self::ready) but for the key rule: what a row needs by itself.
    fn ready_own(&self, a: &str) -> Vec<String> {
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
        p
    }

    /// With an ordering key: the row's key (if any) has no row with a lower id
    /// still in the queue — ready, delayed or in flight (a probe of the
    /// `(ordering_key, id)` index registration asks for).
    fn key_free(&self, a: &str) -> Option<String> {
        let (k, _) = self.ordering_key.as_ref()?;
        Some(self.key_free_of(&self.col(a, k), &self.id_of(a)))
    }

    /// [`key_free`](Self::key_free) of the row whose key and id are the
    /// expressions `key` and `id`.
    fn key_free_of(&self, key: &str, id: &str) -> String {
        let (k, eq) = self.ordering_key.as_ref().expect("an ordering key");
        let mut p = self.mine("_s_k");
        p.push(format!("_s_k.{k} {eq} {key}"));
        p.push(format!("{} {LT} {id}", self.id_of("_s_k")));
        // the first such row in index order, not NOT EXISTS: with few keys the
        // planner costs a seq scan for NOT EXISTS, which reads the whole table
        // for every head it tests
        format!(
            "({key} IS NULL OR (SELECT {kid} FROM {} _s_k WHERE {} ORDER BY _s_k.{k}, {kid} LIMIT 1) IS NULL)",
            self.table,
            join_and(p),
            kid = self.id_of("_s_k"),
        )
    }

    /// The order a claim takes ready rows in: by id, or (priority, id) with
    /// NULL priorities last (an ascending sort's default, so a `(priority, id)`
    /// index serves it).
    fn claim_order(&self, a: &str) -> String {
        match &self.priority {
            Some(p) => format!("{}, {}", self.col(a, p), self.id_of(a)),
            None => self.id_of(a),
        }
    }

    /// The rows a take returns are put in claim order by `ops` after the
    /// statement (an integer id, parsed once per row: cheaper than a CTE
    /// sort); otherwise the statement sorts them (see `taken_oldest_first`).
    pub fn sorted_after_take(&self) -> bool {
        self.int_id && self.priority.is_none()
    }

    /// Claims take rows in id order, so the session's mark (see `mark`) may
    /// skip the rows below it. In priority order a new row may belong below
    /// every row claimed so far: such a queue keeps no mark. (A key's next
    /// row lies above its head: settling a keyed row lowers the mark to it.)
    pub fn keeps_mark(&self) -> bool {
        self.priority.is_none()
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

    /// The advisory stats statement takes the held keys as `$1` (int8[]): a
    /// distributed statement runs on a worker, whose `pg_locks` holds none of
    /// the coordinator's keys, so they are read there ([`HELD_KEYS`]).
    pub fn stats_binds_held_keys(&self) -> bool {
        self.form == Form::Advisory && self.distributed
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
}

fn join_and(p: Vec<String>) -> String {
    if p.is_empty() {
        "true".into()
    } else {
        p.join(" AND ")
    }
}
