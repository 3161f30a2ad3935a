//! Queue descriptors: registration (validated, SQ003), loading from the
//! registry table, and the per-backend cache of descriptors and kept plans.
//!
//! A backend loads a queue's descriptor once; it and its prepared statements
//! serve until the registry or the queue's tables change: a trigger on the
//! registry sends a relcache invalidation for it (every backend receives it at
//! commit), and a relcache callback marks this backend's cache stale. Plans are prepared once per backend and queue
//! and kept with `SPI_keepplan`, so claim and complete are never re-parsed.

use crate::error::{bail, Result, SettleError};
use crate::rowjson::RowEncoder;
use crate::sql::{ident, literal, Dead, Form, Shape, Write};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult};
use pgrx::{pg_sys, PgOid, PgRelation};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Column roles a descriptor can name (SPEC §1), with their default names.
pub const ROLES: [(&str, &str); 7] = [
    ("id", "id"),
    ("attempt", "attempt"),
    ("retry_after", "retry_after"),
    ("locked_until", "locked_until"),
    ("processed_at", "processed_at"),
    ("group", "queue"),
    ("created_at", "created_at"),
];

/// Which statement of a queue a kept plan is. `limit`: the claim's batch
/// size written into the statement (`None`: a parameter), see [`Queue::claim_plan`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PlanKey {
    ClaimRowLock {
        limit: Option<u32>,
    },
    /// row_lock claim when this transaction already holds rows of the queue
    ClaimRowLockExcept {
        limit: Option<u32>,
    },
    Take {
        limit: Option<u32>,
    },
    /// rows a lease or advisory take flagged dead, into the dead letter
    MoveTakenDead,
    Candidates {
        after: bool,
        limit: Option<u32>,
    },
    Settle(Write),
    AckOne,
    AckMany,
    /// lease ack of many deliveries sharing one token
    AckManyOneToken,
    /// row_lock ack by the claimed rows' ctids (`Shape::by_ctid`)
    AckTids,
    Extend,
    Stats,
    DeadCount,
    Requeue,
    Custom(String),
}

impl PlanKey {
    /// The batch size written into a claim statement, if any.
    fn limit(&self) -> Option<u32> {
        match self {
            PlanKey::ClaimRowLock { limit }
            | PlanKey::ClaimRowLockExcept { limit }
            | PlanKey::Take { limit }
            | PlanKey::Candidates { limit, .. } => *limit,
            _ => None,
        }
    }
}

/// A kept SPI plan that PostgreSQL runs with one generic plan, never planning
/// it again for the values of a call (`CURSOR_OPT_GENERIC_PLAN`).
///
/// For the settle statements (`id = ANY($1)`, a join with `unnest($1, $2)`)
/// PostgreSQL's plan cache costs the generic plan for ten ids; for a call with
/// fewer, a plan for the actual array always looks cheaper, so it planned
/// every call of two or three ids anew (a third of such a call's time) — to
/// the same index-driven plan.
pub struct GenericPlan(std::ptr::NonNull<pg_sys::_SPI_plan>);

impl GenericPlan {
    fn prepare(sql: &str, args: &[pg_sys::Oid]) -> GenericPlan {
        let c = std::ffi::CString::new(sql).expect("statements contain no NUL");
        let mut types = args.to_vec();
        // SAFETY: inside SPI (a connected SpiClient is borrowed by the caller);
        // PostgreSQL raises its own error for a statement that does not prepare
        let plan = unsafe {
            pg_sys::SPI_prepare_cursor(
                c.as_ptr(),
                types.len() as i32,
                types.as_mut_ptr(),
                pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
            )
        };
        let plan = std::ptr::NonNull::new(plan).unwrap_or_else(|| {
            panic!("settle: SPI_prepare_cursor failed ({})", unsafe {
                pg_sys::SPI_result
            })
        });
        // SAFETY: a plan just prepared, kept once
        let rc = unsafe { pg_sys::SPI_keepplan(plan.as_ptr()) };
        assert_eq!(rc, 0, "settle: SPI_keepplan failed ({rc})");
        GenericPlan(plan)
    }

    /// Run it (read-write); its rows are in SPI's current tuple table.
    pub fn run(&self, args: &[DatumWithOid<'_>]) {
        let (mut values, mut nulls): (Vec<pg_sys::Datum>, Vec<std::ffi::c_char>) = args
            .iter()
            .map(|a| match a.datum() {
                Some(d) => (d.sans_lifetime(), b' ' as std::ffi::c_char),
                None => (pg_sys::Datum::from(0usize), b'n' as std::ffi::c_char),
            })
            .unzip();
        // SAFETY: inside SPI; SPI_execute_plan reads as many values as the plan
        // has arguments (checked here) and trusts their types, which the
        // callers give as prepared in settle_plan
        let rc = unsafe {
            assert_eq!(
                pg_sys::SPI_getargcount(self.0.as_ptr()) as usize,
                args.len(),
                "settle: arguments of a kept plan"
            );
            pg_sys::SPI_execute_plan(
                self.0.as_ptr(),
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
                false,
                0,
            )
        };
        assert!(rc >= 0, "settle: SPI_execute_plan failed ({rc})");
    }
}

impl Drop for GenericPlan {
    fn drop(&mut self) {
        // SAFETY: kept by prepare, freed once
        unsafe {
            pg_sys::SPI_freeplan(self.0.as_ptr());
        }
    }
}

pub struct Queue {
    pub shape: Shape,
    pub id_type_oid: pg_sys::Oid,
    pub outcomes: HashMap<String, String>,
    plans: RefCell<HashMap<PlanKey, Rc<OwnedPreparedStatement>>>,
    /// the settle statements' kept plans
    settle_plans: RefCell<HashMap<PlanKey, Rc<GenericPlan>>>,
    /// writes a claimed row's jsonb (`shape.native_row`)
    pub encoder: Option<RefCell<RowEncoder>>,
}

/// Most claim plans with a batch size written in, per queue and backend; a
/// worker uses a few sizes (its batch and what is left of it). Further sizes
/// use the plan with a LIMIT parameter, planned on each call.
const LITERAL_PLANS: usize = 16;

thread_local! {
    static QUEUES: RefCell<HashMap<String, Rc<Queue>>> = RefCell::new(HashMap::new());
    /// Set by the relcache callback: the registry or a queue's table changed.
    static STALE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The registry's oid and the oids of every cached queue's tables.
    static WATCHED: RefCell<std::collections::HashSet<pg_sys::Oid>> = RefCell::new(std::collections::HashSet::new());
}

pub fn spi<T>(r: SpiResult<T>) -> T {
    r.unwrap_or_else(|e| panic!("settle: SPI: {e}"))
}

fn oid(o: pg_sys::Oid) -> PgOid {
    PgOid::from(o)
}

/// The quoted schema settle is installed in. Looked up on every call (the
/// callers are registration, descriptor loads and stats, none per claim): an
/// install is not relocatable, but it can be dropped and created again in
/// another schema during a session's life, which a cached name would miss.
pub fn ext_schema(client: &SpiClient<'_>) -> String {
    spi(client
        .select(
            "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
             WHERE e.extname OPERATOR(pg_catalog.=) 'settle'",
            None,
            &[],
        )
        .and_then(|t| t.first().get_one::<String>()))
    .expect("settle is installed")
}

/// Relcache callback: an invalidation of the registry (its trigger sends one on
/// every change, delivered to every backend at commit) or of a cached queue's
/// tables (DDL) makes this backend's descriptor cache stale. No SPI here: the
/// cache is dropped at the next call.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::InvalidOid || WATCHED.with(|w| w.borrow().contains(&relid)) {
        STALE.with(|s| s.set(true));
    }
}

pub fn init() {
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0))
    };
}

/// The descriptor of `name`, cached until the registry or its tables change.
pub fn queue(client: &SpiClient<'_>, name: &str) -> Result<Rc<Queue>> {
    if STALE.with(|s| s.replace(false)) {
        QUEUES.with(|q| q.borrow_mut().clear());
    }
    if let Some(q) = QUEUES.with(|q| q.borrow().get(name).cloned()) {
        return Ok(q);
    }
    let (q, watch) = load(client, name)?;
    let q = Rc::new(q);
    WATCHED.with(|w| w.borrow_mut().extend(watch));
    QUEUES.with(|c| c.borrow_mut().insert(name.to_owned(), q.clone()));
    Ok(q)
}

struct Column {
    name: String,
    type_oid: pg_sys::Oid,
    generated: bool,
}

fn columns_of(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Vec<Column> {
    let t = spi(client.select(
        "SELECT a.attname::pg_catalog.text, a.atttypid, a.attgenerated OPERATOR(pg_catalog.<>) '' \
         FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 \
         AND NOT a.attisdropped ORDER BY a.attnum",
        None,
        &[rel.into()],
    ));
    t.map(|r| Column {
        name: spi(r.get::<String>(1)).unwrap(),
        type_oid: spi(r.get::<pg_sys::Oid>(2)).unwrap(),
        generated: spi(r.get::<bool>(3)).unwrap(),
    })
    .collect()
}

/// A plain table of the heap access method, whose ctid names one row version
/// (not a partitioned table, where the same ctid exists in every partition).
fn plain_heap(client: &SpiClient<'_>, rel: pg_sys::Oid) -> bool {
    spi(client
        .select(
            "SELECT c.relkind OPERATOR(pg_catalog.=) 'r' AND c.relam OPERATOR(pg_catalog.=) $2 \
             FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into(), pg_sys::HEAP_TABLE_AM_OID.into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false)
}

fn qualified_name(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Option<String> {
    spi(client
        .select(
            "SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) \
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
             WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into()],
        )
        .and_then(|t| if t.is_empty() { Ok(None) } else { t.first().get_one::<String>() }))
}

fn type_name(t: pg_sys::Oid) -> String {
    unsafe {
        let p = pg_sys::format_type_be_qualified(t);
        let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        pg_sys::pfree(p.cast());
        s
    }
}

/// Registry row as stored.
struct Row {
    tbl: pg_sys::Oid,
    form: String,
    max_attempts: Option<i32>,
    dead_letter: Option<String>,
    dead_letter_table: Option<pg_sys::Oid>,
    columns: serde_json::Map<String, serde_json::Value>,
    outcomes: HashMap<String, String>,
}

/// Load a descriptor; also returns the oids whose invalidation makes it stale.
fn load(client: &SpiClient<'_>, name: &str) -> Result<(Queue, Vec<pg_sys::Oid>)> {
    let sql = format!(
        "SELECT q.tbl::pg_catalog.oid, q.form, q.max_attempts, q.dead_letter, q.dead_letter_table::pg_catalog.oid, \
         q.columns::pg_catalog.text, q.outcomes::pg_catalog.text, q.tableoid FROM {}.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1",
        ext_schema(client)
    );
    let t = spi(client.select(sql.as_str(), Some(1), &[name.into()]));
    if t.is_empty() {
        bail!(UnknownQueue, "queue \"{name}\" is not registered");
    }
    let r = t.first();
    let registry_oid: pg_sys::Oid = spi(r.get::<pg_sys::Oid>(8)).unwrap();
    let row = Row {
        tbl: spi(r.get::<pg_sys::Oid>(1)).unwrap(),
        form: spi(r.get::<String>(2)).unwrap(),
        max_attempts: spi(r.get::<i32>(3)),
        dead_letter: spi(r.get::<String>(4)),
        dead_letter_table: spi(r.get::<pg_sys::Oid>(5)),
        columns: serde_json::from_str(&spi(r.get::<String>(6)).unwrap()).unwrap_or_default(),
        outcomes: serde_json::from_str(&spi(r.get::<String>(7)).unwrap()).unwrap_or_default(),
    };
    let form = Form::parse(&row.form).expect("registry CHECK keeps form valid");
    let table = qualified_name(client, row.tbl).ok_or_else(|| {
        SettleError::InvalidDescriptor(format!(
            "the table of queue \"{name}\" no longer exists; register the queue again"
        ))
    })?;
    let cols = columns_of(client, row.tbl);
    let role = |r: &str| -> Result<Option<&Column>> {
        match row.columns.get(r).and_then(|v| v.as_str()) {
            None => Ok(None),
            Some(c) => match cols.iter().find(|k| k.name == c) {
                Some(k) => Ok(Some(k)),
                None => bail!(
                    InvalidDescriptor,
                    "column \"{c}\" ({r}) of queue \"{name}\" no longer exists in {table}; register the queue again"
                ),
            },
        }
    };
    let id = role("id")?.ok_or_else(|| {
        SettleError::InvalidDescriptor(format!("queue \"{name}\" has no id column"))
    })?;
    let q = |c: Option<&Column>| c.map(|c| ident(&c.name));
    let dead = match (&row.dead_letter, row.dead_letter_table) {
        (_, Some(dlt)) => Some(Dead::Table(qualified_name(client, dlt).ok_or_else(|| {
            SettleError::InvalidDescriptor(format!(
                "the dead-letter table of queue \"{name}\" no longer exists; register the queue again"
            ))
        })?)),
        (Some(g), None) => Some(Dead::Group(literal(g))),
        (None, None) => None,
    };
    let (attempt, retry_after, locked_until) = (
        q(role("attempt")?),
        q(role("retry_after")?),
        q(role("locked_until")?),
    );
    let (processed_at, group, created_at) = (
        q(role("processed_at")?),
        q(role("group")?),
        q(role("created_at")?),
    );
    let (id_name, id_type_oid) = (ident(&id.name), id.type_oid);
    let shape = Shape {
        queue: name.to_owned(),
        form,
        table,
        id: id_name,
        attempt,
        retry_after,
        locked_until,
        processed_at,
        group,
        created_at,
        id_type: type_name(id_type_oid),
        group_value: literal(name),
        max_attempts: row.max_attempts,
        dead,
        copy_cols: cols
            .iter()
            .filter(|c| !c.generated)
            .map(|c| ident(&c.name))
            .collect(),
        // a column named like the statements' aliases would shadow the whole-row
        // reference: such a table keeps to_jsonb
        native_row: cols
            .iter()
            .all(|c| crate::rowjson::supported(c.type_oid) && !c.name.starts_with("_s_")),
        row_cols: cols.iter().map(|c| (c.name.clone(), c.type_oid)).collect(),
        plain_heap: plain_heap(client, row.tbl),
        int_id: [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&id_type_oid),
    };
    let encoder = shape
        .native_row
        .then(|| RowEncoder::for_columns(&shape.row_cols))
        .flatten()
        .map(RefCell::new);
    let mut watch = vec![registry_oid, row.tbl];
    watch.extend(row.dead_letter_table);
    Ok((
        Queue {
            shape,
            id_type_oid,
            outcomes: row.outcomes,
            plans: RefCell::new(HashMap::new()),
            settle_plans: RefCell::new(HashMap::new()),
            encoder,
        },
        watch,
    ))
}

impl Queue {
    /// The kept plan of a claim statement for a batch of `n`: with `n` written
    /// as its LIMIT, so PostgreSQL reuses the plan instead of planning each call
    /// (see `sql::limit`), while fewer than [`LITERAL_PLANS`] sizes have one.
    pub fn claim_plan(
        &self,
        client: &SpiClient<'_>,
        key: impl Fn(Option<u32>) -> PlanKey,
        n: i64,
    ) -> Rc<OwnedPreparedStatement> {
        let literal = key(u32::try_from(n).ok());
        let kept = {
            let plans = self.plans.borrow();
            plans.contains_key(&literal)
                || plans.keys().filter(|k| k.limit().is_some()).count() < LITERAL_PLANS
        };
        self.plan(client, if kept { literal } else { key(None) })
    }

    /// The kept generic plan of a settle statement (`AckOne`, `AckMany`,
    /// `Settle`), of the advisory take (`Take`, ids as `$1`) or of the move of
    /// the rows a take flagged dead (`MoveTakenDead`), prepared on
    /// first use; `_client` proves SPI is connected.
    pub fn settle_plan(&self, _client: &SpiClient<'_>, key: PlanKey) -> Rc<GenericPlan> {
        if let Some(p) = self.settle_plans.borrow().get(&key) {
            return p.clone();
        }
        use pg_sys::{
            INTERVALOID, TEXTARRAYOID, TEXTOID, TIDARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID,
        };
        let s = &self.shape;
        let (sql, args) = match key {
            PlanKey::AckMany => (s.ack_many(), vec![TEXTARRAYOID, TIMESTAMPTZARRAYOID]),
            PlanKey::AckManyOneToken => {
                (s.ack_many_one_token(), vec![TEXTARRAYOID, TIMESTAMPTZOID])
            }
            PlanKey::AckOne => (s.ack_one(), vec![TEXTOID, TIMESTAMPTZOID]),
            PlanKey::AckTids => (s.ack_tids(), vec![TIDARRAYOID]),
            // the advisory take: the rows whose keys the claim holds
            PlanKey::Take { limit: None } if s.form == Form::Advisory => {
                (s.take(None), vec![TEXTARRAYOID])
            }
            PlanKey::MoveTakenDead => (
                s.move_taken_dead().expect("queue has a dead letter"),
                vec![TEXTARRAYOID],
            ),
            PlanKey::Settle(w) => (
                s.settle(w),
                vec![TEXTARRAYOID, TIMESTAMPTZARRAYOID, INTERVALOID],
            ),
            other => unreachable!("not a settle statement: {other:?}"),
        };
        let p = Rc::new(GenericPlan::prepare(&sql, &args));
        self.settle_plans.borrow_mut().insert(key, p.clone());
        p
    }

    /// The kept plan for `key`, prepared on first use.
    pub fn plan(&self, client: &SpiClient<'_>, key: PlanKey) -> Rc<OwnedPreparedStatement> {
        if let Some(p) = self.plans.borrow().get(&key) {
            return p.clone();
        }
        use pg_sys::{Oid, INT8OID, INTERVALOID, TEXTARRAYOID, TEXTOID, TIMESTAMPTZOID};
        let s = &self.shape;
        let (sql, args): (String, Vec<Oid>) = match &key {
            PlanKey::ClaimRowLock { limit } => (s.claim_row_lock(false, *limit), vec![INT8OID]),
            PlanKey::ClaimRowLockExcept { limit } => {
                (s.claim_row_lock(true, *limit), vec![INT8OID, TEXTARRAYOID])
            }
            PlanKey::Take { limit } => match s.form {
                Form::Lease => (s.take(*limit), vec![INT8OID, INTERVALOID]),
                _ => unreachable!("the advisory take: see settle_plan"),
            },
            PlanKey::Candidates {
                after: false,
                limit,
            } => (s.advisory_candidates(false, *limit), vec![INT8OID]),
            PlanKey::Candidates { after: true, limit } => {
                (s.advisory_candidates(true, *limit), vec![INT8OID, TEXTOID])
            }
            PlanKey::AckMany
            | PlanKey::AckManyOneToken
            | PlanKey::AckOne
            | PlanKey::AckTids
            | PlanKey::MoveTakenDead
            | PlanKey::Settle(_) => {
                unreachable!("a settle statement: see settle_plan")
            }
            PlanKey::Extend => (s.extend(), vec![TEXTOID, TIMESTAMPTZOID, INTERVALOID]),
            PlanKey::Stats => (s.stats(), vec![]),
            PlanKey::DeadCount => (s.dead_count().expect("queue has a dead letter"), vec![]),
            PlanKey::Requeue => (
                s.requeue_dead().expect("queue has a dead letter"),
                vec![TEXTARRAYOID],
            ),
            PlanKey::Custom(name) => (self.outcomes[name].clone(), vec![self.id_type_oid]),
        };
        let args: Vec<PgOid> = args.into_iter().map(oid).collect();
        let p = Rc::new(spi(client.prepare_mut(sql.as_str(), &args)).keep());
        self.plans.borrow_mut().insert(key, p.clone());
        p
    }
}

// ---------------------------------------------------------------------------
// registration

fn is_int(t: pg_sys::Oid) -> bool {
    t == pg_sys::INT2OID || t == pg_sys::INT4OID || t == pg_sys::INT8OID
}

/// Check that the current user may change the registry entry of `rel` (owns it,
/// directly or through role membership).
fn check_owner(client: &SpiClient<'_>, rel: pg_sys::Oid, table: &str) {
    let ok: bool = spi(client
        .select(
            "SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE') FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false);
    if !ok {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("settle: only the owner of {table} may register or change queues over it")
        );
    }
}

pub struct Registration<'a> {
    pub queue: &'a str,
    pub rel: &'a PgRelation,
    pub form: &'a str,
    pub max_attempts: Option<i32>,
    pub dead_letter: Option<&'a str>,
    pub columns: Option<&'a serde_json::Value>,
}

pub fn register(client: &mut SpiClient<'_>, r: Registration<'_>) -> Result<()> {
    let queue = r.queue;
    if queue.is_empty() || queue.chars().count() > 200 || queue.chars().any(|c| c.is_control()) {
        bail!(
            InvalidDescriptor,
            "queue name must be 1 to 200 characters without control characters"
        );
    }
    let relid = r.rel.oid();
    let table = qualified_name(client, relid).unwrap();
    let relkind = unsafe { (*r.rel.rd_rel).relkind } as u8;
    if relkind != b'r' && relkind != b'p' {
        bail!(InvalidDescriptor, "{table} is not a table");
    }
    let Some(form) = Form::parse(r.form) else {
        bail!(
            InvalidDescriptor,
            "unknown form \"{}\": use row_lock, lease or advisory",
            r.form
        )
    };
    let cols = columns_of(client, relid);
    let empty = serde_json::Map::new();
    let given = match r.columns {
        None | Some(serde_json::Value::Null) => &empty,
        Some(serde_json::Value::Object(m)) => m,
        Some(_) => bail!(
            InvalidDescriptor,
            "columns must be a JSON object such as '{{\"id\": \"job_id\"}}'"
        ),
    };
    for (k, v) in given {
        if !ROLES.iter().any(|(r, _)| r == k) {
            bail!(
                InvalidDescriptor,
                "unknown column role \"{k}\": the roles are id, attempt, retry_after, locked_until, processed_at, group, created_at"
            );
        }
        if !(v.is_string() || v.is_null()) {
            bail!(
                InvalidDescriptor,
                "column role \"{k}\" must name a column (a string) or be null"
            );
        }
    }
    // resolve each role: explicit name, explicit null (role off), or the default name if present
    let mut resolved: HashMap<&str, &Column> = HashMap::new();
    for (role, default) in ROLES {
        let name = match given.get(role) {
            Some(serde_json::Value::String(s)) => Some(s.as_str()),
            Some(_) => None,
            None => cols.iter().any(|c| c.name == default).then_some(default),
        };
        if let Some(name) = name {
            match cols.iter().find(|c| c.name == name) {
                Some(c) => {
                    resolved.insert(role, c);
                }
                None => bail!(
                    InvalidDescriptor,
                    "column \"{name}\" ({role}) does not exist in {table}"
                ),
            }
        }
    }
    let Some(id) = resolved.get("id") else {
        bail!(
            InvalidDescriptor,
            "{table} has no id column: name it with columns => '{{\"id\": \"...\"}}'"
        )
    };
    for role in ["retry_after", "locked_until", "processed_at"] {
        if let Some(c) = resolved.get(role) {
            if c.type_oid != pg_sys::TIMESTAMPTZOID {
                bail!(
                    InvalidDescriptor,
                    "column \"{}\" ({role}) of {table} is {}, it must be timestamptz",
                    c.name,
                    type_name(c.type_oid)
                );
            }
        }
    }
    if let Some(c) = resolved.get("created_at") {
        if c.type_oid != pg_sys::TIMESTAMPTZOID && c.type_oid != pg_sys::TIMESTAMPOID {
            bail!(
                InvalidDescriptor,
                "column \"{}\" (created_at) of {table} must be timestamptz",
                c.name
            );
        }
    }
    if let Some(c) = resolved.get("attempt") {
        if !is_int(c.type_oid) {
            bail!(
                InvalidDescriptor,
                "column \"{}\" (attempt) of {table} is {}, it must be an integer type",
                c.name,
                type_name(c.type_oid)
            );
        }
    }
    if let Some(c) = resolved.get("group") {
        if c.type_oid != pg_sys::TEXTOID && c.type_oid != pg_sys::VARCHAROID {
            bail!(
                InvalidDescriptor,
                "column \"{}\" (group) of {table} must be text or varchar",
                c.name
            );
        }
    }
    if id.generated {
        bail!(
            InvalidDescriptor,
            "the id column \"{}\" of {table} must not be a generated column",
            id.name
        );
    }
    let unique: bool = spi(client
        .select(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a \
               ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) i.indkey[0] \
             WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND i.indisunique AND i.indnkeyatts OPERATOR(pg_catalog.=) 1 \
               AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname OPERATOR(pg_catalog.=) $2)",
            None,
            &[relid.into(), id.name.as_str().into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false);
    if !unique {
        bail!(
            InvalidDescriptor,
            "the id column \"{}\" of {table} needs a primary key or unique index of its own (claims order and find rows by it)",
            id.name
        );
    }
    if form == Form::Lease && !resolved.contains_key("locked_until") {
        bail!(
            InvalidDescriptor,
            "the lease form needs a locked_until timestamptz column in {table}"
        );
    }
    let mut dead_letter_table: Option<pg_sys::Oid> = None;
    match (r.max_attempts, r.dead_letter) {
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => {
            bail!(
                InvalidDescriptor,
                "max_attempts and dead_letter are given together (both or neither)"
            )
        }
        (Some(n), Some(dl)) => {
            if n < 1 {
                bail!(
                    InvalidDescriptor,
                    "max_attempts must be at least 1, got {n}"
                );
            }
            if !resolved.contains_key("attempt") {
                bail!(
                    InvalidDescriptor,
                    "max_attempts needs an attempt column in {table}"
                );
            }
            if dl.is_empty() {
                bail!(InvalidDescriptor, "dead_letter must not be empty");
            }
            if resolved.contains_key("group") {
                if dl == queue {
                    bail!(
                        InvalidDescriptor,
                        "the dead-letter group must differ from the queue's own group \"{queue}\""
                    );
                }
            } else {
                let dlt: Option<pg_sys::Oid> = spi(client
                    .select(
                        "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
                        None,
                        &[dl.into()],
                    )
                    .and_then(|t| t.first().get_one::<pg_sys::Oid>()));
                let Some(dlt) = dlt.filter(|o| *o != pg_sys::InvalidOid) else {
                    bail!(
                        InvalidDescriptor,
                        "dead-letter table \"{dl}\" does not exist ({table} has no group column, so dead_letter names a table)"
                    )
                };
                if dlt == relid {
                    bail!(
                        InvalidDescriptor,
                        "the dead-letter table must not be the queue table itself"
                    );
                }
                let dlt_name = qualified_name(client, dlt).unwrap();
                let dcols = columns_of(client, dlt);
                for c in cols.iter().filter(|c| !c.generated) {
                    match dcols.iter().find(|d| d.name == c.name) {
                        None => bail!(
                            InvalidDescriptor,
                            "dead-letter table {dlt_name} lacks column \"{}\" of {table}",
                            c.name
                        ),
                        Some(d) if d.type_oid != c.type_oid => bail!(
                            InvalidDescriptor,
                            "column \"{}\" is {} in dead-letter table {dlt_name} but {} in {table}",
                            c.name,
                            type_name(d.type_oid),
                            type_name(c.type_oid)
                        ),
                        Some(d) if d.generated => bail!(
                            InvalidDescriptor,
                            "column \"{}\" of dead-letter table {dlt_name} is generated and cannot receive moved rows",
                            c.name
                        ),
                        _ => {}
                    }
                }
                dead_letter_table = Some(dlt);
            }
        }
    }
    check_owner(client, relid, &table);
    let mut stored = serde_json::Map::new();
    for (role, _) in ROLES {
        stored.insert(
            role.to_owned(),
            resolved
                .get(role)
                .map_or(serde_json::Value::Null, |c| c.name.clone().into()),
        );
    }
    let stored = serde_json::Value::Object(stored).to_string();
    let sql = format!(
        "INSERT INTO {s}.settle_queues AS q (queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns) \
         VALUES ($1, $2::pg_catalog.oid::pg_catalog.regclass, $3, $4, $5, $6::pg_catalog.oid::pg_catalog.regclass, $7::pg_catalog.jsonb) \
         ON CONFLICT (queue) DO UPDATE SET tbl = EXCLUDED.tbl, form = EXCLUDED.form, max_attempts = EXCLUDED.max_attempts, \
           dead_letter = EXCLUDED.dead_letter, dead_letter_table = EXCLUDED.dead_letter_table, columns = EXCLUDED.columns \
         WHERE (q.tbl, q.form, q.max_attempts, q.dead_letter, q.dead_letter_table, q.columns) \
           IS DISTINCT FROM (EXCLUDED.tbl, EXCLUDED.form, EXCLUDED.max_attempts, EXCLUDED.dead_letter, EXCLUDED.dead_letter_table, EXCLUDED.columns)",
        s = ext_schema(client)
    );
    let args: [DatumWithOid; 7] = [
        queue.into(),
        relid.into(),
        form.name().into(),
        r.max_attempts.into(),
        r.dead_letter.into(),
        dead_letter_table.into(),
        stored.as_str().into(),
    ];
    spi(client.update(sql.as_str(), None, &args));
    Ok(())
}

/// Add, replace (sql given) or remove (sql NULL) a custom outcome.
pub fn register_outcome(
    client: &mut SpiClient<'_>,
    queue: &str,
    name: &str,
    sql: Option<&str>,
) -> Result<()> {
    let q = self::queue(client, queue)?;
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!(
            InvalidArgument,
            "custom outcome names are 1 to 63 characters of letters, digits, _ and -"
        );
    }
    let relid: pg_sys::Oid = spi(client
        .select(
            &*format!("SELECT q.tbl::pg_catalog.oid FROM {}.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1", ext_schema(client)),
            None,
            &[queue.into()],
        )
        .and_then(|t| t.first().get_one::<pg_sys::Oid>()))
    .unwrap();
    check_owner(client, relid, &q.shape.table);
    if let Some(sql) = sql {
        if sql.trim().is_empty() {
            bail!(InvalidArgument, "custom outcome \"{name}\" needs SQL text");
        }
        // parse and plan it now ($1 = the id, of the id column's type), so a
        // mistake shows at registration rather than at the first delivery
        drop(spi(client.prepare_mut(sql, &[oid(q.id_type_oid)])));
    }
    let s = ext_schema(client);
    let upd = match sql {
        Some(_) => format!(
            "UPDATE {s}.settle_queues SET outcomes = outcomes OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object($2::pg_catalog.text, $3::pg_catalog.text) WHERE queue OPERATOR(pg_catalog.=) $1"
        ),
        None => format!(
            "UPDATE {s}.settle_queues SET outcomes = outcomes OPERATOR(pg_catalog.-) $2::pg_catalog.text WHERE queue OPERATOR(pg_catalog.=) $1 AND $3 IS NULL"
        ),
    };
    spi(client.update(upd.as_str(), None, &[queue.into(), name.into(), sql.into()]));
    Ok(())
}
