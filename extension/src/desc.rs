//! Queue descriptors as a backend uses them: loaded from the registry table
//! (registration itself is `register`), checked against the table as it is
//! now, and cached per backend with their kept plans.
//!
//! A backend loads a queue's descriptor once; it and its prepared statements
//! serve until the registry or the queue's tables change: a trigger on the
//! registry sends a relcache invalidation for it (every backend receives it at
//! commit), and a relcache callback marks this backend's cache stale. Plans
//! are prepared once per backend and queue and kept with `SPI_keepplan`, so
//! claim and complete are never re-parsed.

use crate::catalog::{columns_of, plain_heap, qualified_name, type_name, Column};
pub use crate::catalog::{ext_schema, spi};
use crate::citus;
use crate::error::{bail, Result, SettleError};
use crate::rowjson::RowEncoder;
use crate::sql::{ident, literal, Dead, Form, PayloadKind, Shape, Start, Write};
use pgrx::datum::DatumWithOid;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::{pg_sys, PgOid};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Which statement of a queue a kept plan is. `limit`: the claim's batch
/// size written into the statement (`None`: a parameter), see [`Queue::claim_plan`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PlanKey {
    /// `from`: the scan starts at the session's mark (see `mark`)
    ClaimRowLock {
        from: bool,
        limit: Option<u32>,
    },
    /// row_lock claim when this transaction already holds rows of the queue
    ClaimRowLockExcept {
        from: bool,
        limit: Option<u32>,
    },
    Take {
        from: bool,
        limit: Option<u32>,
    },
    /// a lease take over a keyed queue's heads (`Shape::take_heads`)
    TakeHeads {
        limit: Option<u32>,
    },
    /// a row_lock claim over a keyed queue's heads, with `except` the rows
    /// this transaction holds (`Shape::claim_row_lock_heads`)
    ClaimRowLockHeads {
        except: bool,
        limit: Option<u32>,
    },
    /// advisory candidates over a keyed queue's heads
    /// (`Shape::advisory_candidates_heads`)
    CandidatesHeads {
        start: Start,
        limit: Option<u32>,
    },
    /// how many keys a keyed queue has, up to a bound (`Shape::key_count`)
    KeyCount,
    /// how far a bounded keyed read reaches (`Shape::keyed_read_extent`)
    KeyedReadExtent {
        from: bool,
        except: bool,
    },
    /// a claim statement (`ClaimRowLock`, `ClaimRowLockExcept`, `Take`,
    /// `Candidates`) whose keyed read in id order is bounded (`Shape::bounded_read`)
    Bounded(Box<PlanKey>),
    /// rows a lease or advisory take flagged dead, into the dead letter
    MoveTakenDead,
    /// a distributed table's dead move, copy then delete (`Shape::moves_dead_apart`)
    DeadCopy {
        taken: bool,
    },
    DeadDelete,
    Candidates {
        start: Start,
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
    DeadRows,
    PurgeDead,
    Custom(String),
}

impl PlanKey {
    /// The batch size written into a claim statement, if any.
    fn limit(&self) -> Option<u32> {
        match self {
            PlanKey::ClaimRowLock { limit, .. }
            | PlanKey::ClaimRowLockExcept { limit, .. }
            | PlanKey::Take { limit, .. }
            | PlanKey::TakeHeads { limit }
            | PlanKey::ClaimRowLockHeads { limit, .. }
            | PlanKey::Candidates { limit, .. }
            | PlanKey::CandidatesHeads { limit, .. } => *limit,
            PlanKey::Bounded(k) => k.limit(),
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
    /// `generic`: false on a Citus-distributed table, whose planner plans a
    /// statement with CTEs for its parameters' values only (a generic plan of
    /// one fails with "could not create distributed plan").
    fn prepare(sql: &str, args: &[pg_sys::Oid], generic: bool) -> GenericPlan {
        let c = std::ffi::CString::new(sql).expect("statements contain no NUL");
        let mut types = args.to_vec();
        // SAFETY: inside SPI (a connected SpiClient is borrowed by the caller);
        // PostgreSQL raises its own error for a statement that does not prepare
        let plan = unsafe {
            pg_sys::SPI_prepare_cursor(
                c.as_ptr(),
                types.len() as i32,
                types.as_mut_ptr(),
                if generic {
                    pg_sys::CURSOR_OPT_GENERIC_PLAN as i32
                } else {
                    0
                },
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
    /// the queue table
    pub rel: pg_sys::Oid,
    /// the dead-letter table, when it is one
    pub dead_rel: Option<pg_sys::Oid>,
    pub id_type_oid: pg_sys::Oid,
    pub outcomes: HashMap<String, String>,
    plans: RefCell<HashMap<PlanKey, Rc<OwnedPreparedStatement>>>,
    /// the settle statements' kept plans
    settle_plans: RefCell<HashMap<PlanKey, Rc<GenericPlan>>>,
    /// writes a claimed row's jsonb (`shape.native_row`)
    pub encoder: Option<RefCell<RowEncoder>>,
    /// what this session last counted of the queue's keys against
    /// `settle.key_walk_max` (`keys::walk`)
    pub keys_counted: std::cell::Cell<Option<crate::keys::Counted>>,
    /// and for reading bounded and on past the bound, against
    /// `keys::WALK_ON_MAX` or the rows a claim passed (`keys::may_bound`,
    /// `keys::after_reading`)
    pub keys_counted_on: std::cell::Cell<Option<crate::keys::Counted>>,
    /// until when this session's keyed claims in id order may read bounded,
    /// and over how many ids it last saw rows wait behind their heads (`ops::reach`)
    pub bounded_until: std::cell::Cell<Option<(std::time::Instant, i64)>>,
}

/// Most claim plans with a batch size written in, per queue and backend; a
/// worker uses a few sizes (its batch and what is left of it), each from its
/// mark and from the lowest id. Further sizes use the plan with a LIMIT
/// parameter, planned on each call.
const LITERAL_PLANS: usize = 32;

thread_local! {
    static QUEUES: RefCell<HashMap<String, Rc<Queue>>> = RefCell::new(HashMap::new());
    /// Set by the relcache callback: the registry or a queue's table changed.
    static STALE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The registry's oid and the oids of every cached queue's tables.
    static WATCHED: RefCell<std::collections::HashSet<pg_sys::Oid>> = RefCell::new(std::collections::HashSet::new());
}

fn oid(o: pg_sys::Oid) -> PgOid {
    PgOid::from(o)
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
        crate::mark::forget_all();
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

/// A queue's row of the registry, as stored.
pub struct Row {
    pub tbl: pg_sys::Oid,
    pub form: String,
    pub max_attempts: Option<i32>,
    pub dead_letter: Option<String>,
    pub dead_letter_table: Option<pg_sys::Oid>,
    pub columns: serde_json::Map<String, serde_json::Value>,
    pub outcomes: HashMap<String, String>,
    /// the registry table's oid
    registry: pg_sys::Oid,
}

/// The registry's row of queue `name`, if it is registered.
pub fn registry_row(client: &SpiClient<'_>, name: &str) -> Option<Row> {
    let sql = format!(
        "SELECT q.tbl::pg_catalog.oid, q.form, q.max_attempts, q.dead_letter, q.dead_letter_table::pg_catalog.oid, \
         q.columns::pg_catalog.text, q.outcomes::pg_catalog.text, q.tableoid FROM {}.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1",
        ext_schema(client)
    );
    let t = spi(client.select(sql.as_str(), Some(1), &[name.into()]));
    if t.is_empty() {
        return None;
    }
    let r = t.first();
    Some(Row {
        tbl: spi(r.get::<pg_sys::Oid>(1)).unwrap(),
        form: spi(r.get::<String>(2)).unwrap(),
        max_attempts: spi(r.get::<i32>(3)),
        dead_letter: spi(r.get::<String>(4)),
        dead_letter_table: spi(r.get::<pg_sys::Oid>(5)),
        columns: serde_json::from_str(&spi(r.get::<String>(6)).unwrap()).unwrap_or_default(),
        outcomes: serde_json::from_str(&spi(r.get::<String>(7)).unwrap()).unwrap_or_default(),
        registry: spi(r.get::<pg_sys::Oid>(8)).unwrap(),
    })
}

/// Load a descriptor; also returns the oids whose invalidation makes it stale.
fn load(client: &SpiClient<'_>, name: &str) -> Result<(Queue, Vec<pg_sys::Oid>)> {
    let Some(row) = registry_row(client, name) else {
        bail!(UnknownQueue, "queue \"{name}\" is not registered");
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
    let dead = dead_of(client, &row, name)?;
    let (attempt, retry_after, locked_until) = (
        q(role("attempt")?),
        q(role("retry_after")?),
        q(role("locked_until")?),
    );
    let payload = payload_of(role("payload")?, name)?;
    let whole_row = payload.is_none();
    let (processed_at, group, created_at) = (
        q(role("processed_at")?),
        q(role("group")?),
        q(role("created_at")?),
    );
    // a table distributed since registration is checked as registration would
    let group_name = role("group")?.map(|c| c.name.as_str());
    let placement = checked_placement(client, &row, name, &table, form, group_name, &dead)?;
    let (id_name, id_type_oid) = (ident(&id.name), id.type_oid);
    let (priority, ordering_key) = (q(role("priority")?), role("ordering_key")?);
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
        payload,
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
        native_row: whole_row
            && cols
                .iter()
                .all(|c| crate::rowjson::supported(c.type_oid) && !c.name.starts_with("_s_")),
        row_cols: cols.iter().map(|c| (c.name.clone(), c.type_oid)).collect(),
        // a coordinator's ctid names no row of a shard
        plain_heap: !placement.distributed() && plain_heap(client, row.tbl),
        distributed: placement.distributed(),
        int_id: [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&id_type_oid),
        priority,
        ordering_key: match ordering_key {
            None => None,
            Some(c) => Some((
                ident(&c.name),
                crate::register::key_equality(client, c.type_oid).ok_or_else(|| {
                    SettleError::InvalidDescriptor(format!(
                        "the ordering_key column \"{}\" of queue \"{name}\" no longer has an equality; register the queue again",
                        c.name
                    ))
                })?,
            )),
        },
        bounded_read: false,
    };
    let encoder = shape
        .native_row
        .then(|| RowEncoder::for_columns(&shape.row_cols))
        .flatten()
        .map(RefCell::new);
    let mut watch = vec![row.registry, row.tbl];
    watch.extend(row.dead_letter_table);
    Ok((
        Queue {
            shape,
            rel: row.tbl,
            dead_rel: row.dead_letter_table,
            id_type_oid,
            outcomes: row.outcomes,
            plans: RefCell::new(HashMap::new()),
            settle_plans: RefCell::new(HashMap::new()),
            encoder,
            keys_counted: std::cell::Cell::new(None),
            keys_counted_on: std::cell::Cell::new(None),
            bounded_until: std::cell::Cell::new(None),
        },
        watch,
    ))
}

/// Where a registered queue's dead rows go; its dead-letter table must still exist.
fn dead_of(client: &SpiClient<'_>, row: &Row, name: &str) -> Result<Option<Dead>> {
    Ok(match (&row.dead_letter, row.dead_letter_table) {
        (_, Some(dlt)) => Some(Dead::Table(qualified_name(client, dlt).ok_or_else(|| {
            SettleError::InvalidDescriptor(format!(
                "the dead-letter table of queue \"{name}\" no longer exists; register the queue again"
            ))
        })?)),
        (Some(g), None) => Some(Dead::Group(literal(g))),
        (None, None) => None,
    })
}

/// The payload column and how it becomes jsonb; its type must still be one
/// a payload can have.
fn payload_of(c: Option<&Column>, name: &str) -> Result<Option<(String, PayloadKind)>> {
    c.map(|c| match PayloadKind::of(c.type_oid) {
        Some(k) => Ok((ident(&c.name), k)),
        None => Err(SettleError::InvalidDescriptor(format!(
            "the payload column \"{}\" of queue \"{name}\" is now {}; register the queue again",
            c.name,
            type_name(c.type_oid)
        ))),
    })
    .transpose()
}

/// The queue table's placement (Citus); a distributed table's layout is
/// checked as registration checks it.
fn checked_placement(
    client: &SpiClient<'_>,
    row: &Row,
    name: &str,
    table: &str,
    form: Form,
    group_name: Option<&str>,
    dead: &Option<Dead>,
) -> Result<citus::Placement> {
    let placement = citus::placement(client, row.tbl);
    if !placement.distributed() {
        return Ok(placement);
    }
    let dlt_placement = row.dead_letter_table.map(|t| citus::placement(client, t));
    let dead_at = match (dead, dlt_placement) {
        (Some(Dead::Table(n)), Some(p)) => citus::DeadAt::Table {
            name: n,
            placement: p,
        },
        (Some(_), _) => citus::DeadAt::Group,
        (None, _) => citus::DeadAt::None,
    };
    if let Err(m) = citus::check_layout(table, &placement, group_name, &dead_at) {
        bail!(InvalidDescriptor, "queue \"{name}\": {m}");
    }
    // a session's advisory locks live on the node it runs on: only the
    // coordinator sees every claimer's keys
    if form == Form::Advisory && !citus::on_coordinator(client) {
        bail!(
            InvalidDescriptor,
            "queue \"{name}\" uses the advisory form on a distributed table: its keys are locks of the node a session runs on, so claim and settle it through the coordinator (or use row_lock or lease, which work from any node)"
        );
    }
    Ok(placement)
}

/// A claim statement's parameter types, with the text id its scan starts at
/// last when it has one.
fn with_from(mut args: Vec<pg_sys::Oid>, from: bool) -> Vec<pg_sys::Oid> {
    if from {
        args.push(pg_sys::TEXTOID);
    }
    args
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
        use pg_sys::{TEXTARRAYOID, TEXTOID, TIDARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID};
        let s = &self.shape;
        let (sql, args) = match key {
            PlanKey::AckMany => (s.ack_many(), vec![TEXTARRAYOID, TIMESTAMPTZARRAYOID]),
            PlanKey::AckManyOneToken => {
                (s.ack_many_one_token(), vec![TEXTARRAYOID, TIMESTAMPTZOID])
            }
            PlanKey::AckOne => (s.ack_one(), vec![TEXTOID, TIMESTAMPTZOID]),
            PlanKey::AckTids => (s.ack_tids(), vec![TIDARRAYOID]),
            // the advisory take: the rows whose keys the claim holds
            PlanKey::Take {
                from: false,
                limit: None,
            } if s.form == Form::Advisory => (s.take(false, None), vec![TEXTARRAYOID]),
            PlanKey::MoveTakenDead => (
                s.move_taken_dead().expect("queue has a dead letter"),
                vec![TEXTARRAYOID],
            ),
            PlanKey::DeadCopy { taken } => (
                s.dead_copy(taken).expect("queue has a dead-letter table"),
                vec![TEXTARRAYOID],
            ),
            PlanKey::DeadDelete => (s.dead_delete(), vec![TEXTARRAYOID]),
            PlanKey::Settle(w) => (
                s.settle(w),
                vec![TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID],
            ),
            other => unreachable!("not a settle statement: {other:?}"),
        };
        let p = Rc::new(GenericPlan::prepare(&sql, &args, !s.distributed));
        self.settle_plans.borrow_mut().insert(key, p.clone());
        p
    }

    /// The kept plan for `key`, prepared on first use.
    pub fn plan(&self, client: &SpiClient<'_>, key: PlanKey) -> Rc<OwnedPreparedStatement> {
        if let Some(p) = self.plans.borrow().get(&key) {
            return p.clone();
        }
        let (sql, args) = self.statement(&self.shape, &key);
        let args: Vec<PgOid> = args.into_iter().map(oid).collect();
        let p = Rc::new(spi(client.prepare_mut(sql.as_str(), &args)).keep());
        self.plans.borrow_mut().insert(key, p.clone());
        p
    }

    /// The text and parameter types of the statement `key` names, of shape `s`.
    fn statement(&self, s: &Shape, key: &PlanKey) -> (String, Vec<pg_sys::Oid>) {
        use pg_sys::{INT8OID, TEXTARRAYOID, TEXTOID, TIMESTAMPTZOID};
        match key {
            PlanKey::ClaimRowLock { from, limit } => (
                s.claim_row_lock(false, *from, *limit),
                with_from(vec![INT8OID], *from),
            ),
            PlanKey::ClaimRowLockExcept { from, limit } => (
                s.claim_row_lock(true, *from, *limit),
                with_from(vec![INT8OID, TEXTARRAYOID], *from),
            ),
            PlanKey::Take { from, limit } => match s.form {
                Form::Lease => (
                    s.take(*from, *limit),
                    with_from(vec![INT8OID, TIMESTAMPTZOID], *from),
                ),
                _ => unreachable!("the advisory take: see settle_plan"),
            },
            PlanKey::TakeHeads { limit } => (s.take_heads(*limit), vec![INT8OID, TIMESTAMPTZOID]),
            PlanKey::ClaimRowLockHeads { except, limit } => (
                s.claim_row_lock_heads(*except, *limit),
                if *except {
                    vec![INT8OID, TEXTARRAYOID]
                } else {
                    vec![INT8OID]
                },
            ),
            PlanKey::KeyCount => (s.key_count(), vec![INT8OID]),
            PlanKey::KeyedReadExtent { from, except } => {
                let mut args = with_from(vec![INT8OID], *from);
                if *except {
                    args.push(pg_sys::TEXTARRAYOID);
                }
                (s.keyed_read_extent(*from, *except), args)
            }
            PlanKey::Bounded(k) => self.statement(
                &Shape {
                    bounded_read: true,
                    ..s.clone()
                },
                k,
            ),
            PlanKey::CandidatesHeads { start, limit } => (
                s.advisory_candidates_heads(*start, *limit),
                with_from(vec![INT8OID], *start == Start::After),
            ),
            PlanKey::Candidates { start, limit } => (
                s.advisory_candidates(*start, *limit),
                with_from(vec![INT8OID], *start != Start::Bottom),
            ),
            PlanKey::AckMany
            | PlanKey::AckManyOneToken
            | PlanKey::AckOne
            | PlanKey::AckTids
            | PlanKey::MoveTakenDead
            | PlanKey::DeadCopy { .. }
            | PlanKey::DeadDelete
            | PlanKey::Settle(_) => {
                unreachable!("a settle statement: see settle_plan")
            }
            PlanKey::Extend => (s.extend(), vec![TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID]),
            PlanKey::Stats if s.stats_binds_held_keys() => (s.stats(), vec![pg_sys::INT8ARRAYOID]),
            PlanKey::Stats => (s.stats(), vec![]),
            PlanKey::DeadCount => (s.dead_count().expect("queue has a dead letter"), vec![]),
            PlanKey::Requeue => (
                s.requeue_dead().expect("queue has a dead letter"),
                vec![TEXTARRAYOID],
            ),
            PlanKey::DeadRows => (
                s.dead_rows().expect("queue has a dead letter"),
                vec![INT8OID, TEXTARRAYOID],
            ),
            PlanKey::PurgeDead => (
                s.purge_dead().expect("queue has a dead letter"),
                vec![pg_sys::INTERVALOID, TEXTARRAYOID],
            ),
            PlanKey::Custom(name) => (self.outcomes[name].clone(), vec![self.id_type_oid]),
        }
    }
}
