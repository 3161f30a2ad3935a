//! Queue registration: validate a descriptor against its table (SQ003 names
//! what is wrong) and write it to the registry; custom outcomes.

use crate::catalog::{columns_of, ext_schema, qualified_name, spi, type_name, Column};
use crate::citus::{self, DeadAt};
use crate::error::{bail, Result};
use crate::sql::{Form, PayloadKind};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgOid};
use std::collections::HashMap;

/// Column roles a descriptor can name (docs/semantics.md, "A queue and its rows"), with their default names.
pub const ROLES: [(&str, &str); 10] = [
    ("id", "id"),
    ("attempt", "attempt"),
    ("retry_after", "retry_after"),
    ("locked_until", "locked_until"),
    ("processed_at", "processed_at"),
    ("group", "queue"),
    ("created_at", "created_at"),
    ("payload", "payload"),
    ("priority", "priority"),
    ("ordering_key", "ordering_key"),
];

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
    pub rel: pg_sys::Oid,
    pub form: &'a str,
    pub max_attempts: Option<i32>,
    pub dead_letter: Option<&'a str>,
    /// a dead-letter table (also for a grouped queue, where `dead_letter` names a group)
    pub dead_letter_table: Option<pg_sys::Oid>,
    pub columns: Option<&'a serde_json::Value>,
}

/// A checked descriptor, as the registry stores it.
#[derive(Debug)]
pub struct Descriptor {
    pub queue: String,
    pub rel: pg_sys::Oid,
    pub form: String,
    pub max_attempts: Option<i32>,
    /// as given: a group value, or the dead-letter table's name
    pub dead_letter: Option<String>,
    pub dead_letter_table: Option<pg_sys::Oid>,
    /// every role: its column's name, or null
    pub columns: serde_json::Map<String, serde_json::Value>,
}

/// Check a registration against its table and resolve its column roles
/// (SQ003 names what is wrong). Writes nothing.
pub fn resolve(client: &SpiClient<'_>, r: &Registration<'_>) -> Result<Descriptor> {
    let queue = r.queue;
    if queue.is_empty() || queue.chars().count() > 200 || queue.chars().any(|c| c.is_control()) {
        bail!(
            InvalidDescriptor,
            "queue name must be 1 to 200 characters without control characters"
        );
    }
    let relid = r.rel;
    let table = qualified_name(client, relid).unwrap_or_default();
    if !is_table(client, relid) {
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
    let resolved = resolve_roles(&cols, r.columns, &table)?;
    check_role_types(&resolved, &table)?;
    let Some(id) = resolved.get("id") else {
        bail!(
            InvalidDescriptor,
            "{table} has no id column: name it with columns => '{{\"id\": \"...\"}}'"
        )
    };
    if id.generated {
        bail!(
            InvalidDescriptor,
            "the id column \"{}\" of {table} must not be a generated column",
            id.name
        );
    }
    let group = resolved.get("group").map(|c| c.name.as_str());
    check_keyed(client, relid, &table, &id.name, group)?;
    if let Some(k) = resolved.get("ordering_key") {
        check_ordering_key(client, relid, &table, k, &id.name)?;
    }
    if form == Form::Lease && !resolved.contains_key("locked_until") {
        bail!(
            InvalidDescriptor,
            "the lease form needs a locked_until timestamptz column in {table}"
        );
    }
    let (dead_letter, dead_letter_table) =
        resolve_dead_letter(client, r, &table, &cols, &resolved)?;
    let mut columns = serde_json::Map::new();
    for (role, _) in ROLES {
        columns.insert(
            role.to_owned(),
            resolved
                .get(role)
                .map_or(serde_json::Value::Null, |c| c.name.clone().into()),
        );
    }
    Ok(Descriptor {
        queue: queue.to_owned(),
        rel: relid,
        form: form.name().to_owned(),
        max_attempts: r.max_attempts,
        dead_letter,
        dead_letter_table,
        columns,
    })
}

fn is_table(client: &SpiClient<'_>, rel: pg_sys::Oid) -> bool {
    spi(client
        .select(
            "SELECT c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog.\"char\"[]) \
             FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[rel.into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false)
}

/// Each role's column: the name given, none (given as null), or the column of
/// the role's default name when the table has one.
fn resolve_roles<'c>(
    cols: &'c [Column],
    given: Option<&serde_json::Value>,
    table: &str,
) -> Result<HashMap<&'static str, &'c Column>> {
    let empty = serde_json::Map::new();
    let given = match given {
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
                "unknown column role \"{k}\": the roles are id, attempt, retry_after, locked_until, processed_at, group, created_at, payload, priority, ordering_key"
            );
        }
        if !(v.is_string() || v.is_null()) {
            bail!(
                InvalidDescriptor,
                "column role \"{k}\" must name a column (a string) or be null"
            );
        }
    }
    let mut resolved = HashMap::new();
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
    Ok(resolved)
}

/// Each resolved role's column is of a type the role can use.
fn check_role_types(resolved: &HashMap<&str, &Column>, table: &str) -> Result<()> {
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
    if let Some(c) = resolved.get("payload") {
        if PayloadKind::of(c.type_oid).is_none() {
            bail!(
                InvalidDescriptor,
                "column \"{}\" (payload) of {table} is {}; a payload column must be jsonb, json, text or varchar (name another with columns => '{{\"payload\": \"...\"}}', or hand handlers the whole row with '{{\"payload\": null}}')",
                c.name,
                type_name(c.type_oid)
            );
        }
    }
    for role in ["attempt", "priority"] {
        if let Some(c) = resolved.get(role) {
            if !is_int(c.type_oid) {
                bail!(
                    InvalidDescriptor,
                    "column \"{}\" ({role}) of {table} is {}, it must be an integer type",
                    c.name,
                    type_name(c.type_oid)
                );
            }
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
    Ok(())
}

/// The id has a unique index of its own, or together with the group column.
fn check_keyed(
    client: &SpiClient<'_>,
    relid: pg_sys::Oid,
    table: &str,
    id: &str,
    group: Option<&str>,
) -> Result<()> {
    let keys = unique_keys(client, relid);
    let key_is = |cols: &[&str]| {
        keys.iter()
            .any(|k| k.len() == cols.len() && cols.iter().all(|c| k.iter().any(|n| n == c)))
    };
    if key_is(&[id]) || group.is_some_and(|g| key_is(&[g, id])) {
        return Ok(());
    }
    match group {
        Some(g) => bail!(
            InvalidDescriptor,
            "the id column \"{id}\" of {table} needs a primary key or unique index of its own, or together with the group column \"{g}\" (claims order and find rows by it)"
        ),
        None => bail!(
            InvalidDescriptor,
            "the id column \"{id}\" of {table} needs a primary key or unique index of its own (claims order and find rows by it)"
        ),
    }
}

/// The schema of the equality operator of `ty`'s default btree operator class
/// (of the type, its domain's base type, a type it is binary-coercible to, or
/// the enum and array classes), quoted; no row: the type has none. The SQL
/// edition asks the same question with the same statement (`_settle_key_eq`).
pub const KEY_EQ_SCHEMA: &str = "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) \
  FROM pg_catalog.pg_type t, pg_catalog.pg_am m, pg_catalog.pg_opclass c, pg_catalog.pg_amop a, \
       pg_catalog.pg_operator o, pg_catalog.pg_namespace n \
  WHERE t.oid OPERATOR(pg_catalog.=) $1 AND m.amname OPERATOR(pg_catalog.=) 'btree' \
    AND c.opcmethod OPERATOR(pg_catalog.=) m.oid AND c.opcdefault \
    AND a.amopfamily OPERATOR(pg_catalog.=) c.opcfamily AND a.amopstrategy OPERATOR(pg_catalog.=) 3 \
    AND a.amoplefttype OPERATOR(pg_catalog.=) c.opcintype AND a.amoprighttype OPERATOR(pg_catalog.=) c.opcintype \
    AND o.oid OPERATOR(pg_catalog.=) a.amopopr AND n.oid OPERATOR(pg_catalog.=) o.oprnamespace \
    AND (c.opcintype OPERATOR(pg_catalog.=) t.oid OR c.opcintype OPERATOR(pg_catalog.=) t.typbasetype \
      OR (t.typtype OPERATOR(pg_catalog.=) 'e' AND c.opcintype OPERATOR(pg_catalog.=) 'pg_catalog.anyenum'::pg_catalog.regtype) \
      OR (t.typcategory OPERATOR(pg_catalog.=) 'A' AND c.opcintype OPERATOR(pg_catalog.=) 'pg_catalog.anyarray'::pg_catalog.regtype) \
      OR EXISTS (SELECT 1 FROM pg_catalog.pg_cast k WHERE k.castmethod OPERATOR(pg_catalog.=) 'b' \
        AND k.casttarget OPERATOR(pg_catalog.=) c.opcintype \
        AND k.castsource OPERATOR(pg_catalog.=) ANY (ARRAY[t.oid, t.typbasetype]))) \
  ORDER BY c.opcintype OPERATOR(pg_catalog.=) t.oid DESC LIMIT 1";

/// The equality the claim compares ordering keys with: `OPERATOR(schema.=)`
/// of the key type's default btree class, so the `(ordering_key, id)` index
/// serves it; `None`: the type has none.
pub fn key_equality(client: &SpiClient<'_>, ty: pg_sys::Oid) -> Option<String> {
    spi(client
        .select(KEY_EQ_SCHEMA, None, &[ty.into()])
        .and_then(|t| match t.is_empty() {
            true => Ok(None),
            false => t.first().get_one::<String>(),
        }))
    .map(|schema| format!("OPERATOR({schema}.=)"))
}

/// The ordering_key column has an equality (see [`key_equality`]) and leads
/// an index, which the claim probes for each candidate (a row of its key with
/// a lower id); without one every probe reads the table.
fn check_ordering_key(
    client: &SpiClient<'_>,
    relid: pg_sys::Oid,
    table: &str,
    key: &Column,
    id: &str,
) -> Result<()> {
    if key_equality(client, key.type_oid).is_none() {
        bail!(
            InvalidDescriptor,
            "column \"{}\" (ordering_key) of {table} is {}, a type without a default btree operator class (no equality a claim can use)",
            key.name,
            type_name(key.type_oid)
        );
    }
    let leads = spi(client
        .select(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a \
               ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) i.indkey[0] \
             WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) $2::pg_catalog.name)",
            None,
            &[relid.into(), key.name.as_str().into()],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false);
    if !leads {
        bail!(
            InvalidDescriptor,
            "the ordering_key column \"{}\" of {table} needs an index that starts with it (a claim looks for an earlier row of each key): CREATE INDEX ON {table} ({}, {})",
            key.name,
            key.name,
            id
        );
    }
    Ok(())
}

/// max_attempts and the dead letter, checked together: (the dead letter as
/// stored, its table when it is one). Also checks the Citus layout.
fn resolve_dead_letter(
    client: &SpiClient<'_>,
    r: &Registration<'_>,
    table: &str,
    cols: &[Column],
    resolved: &HashMap<&str, &Column>,
) -> Result<(Option<String>, Option<pg_sys::Oid>)> {
    let group = resolved.get("group").map(|c| c.name.as_str());
    let placement = citus::placement(client, r.rel);
    let mut dead_letter_table: Option<pg_sys::Oid> = None;
    let mut dead_at = DeadAt::None;
    let dead_letter: Option<String> = match (r.dead_letter, r.dead_letter_table) {
        (Some(_), Some(_)) => bail!(
            InvalidDescriptor,
            "give dead_letter or dead_letter_table, not both"
        ),
        (d, None) => d.map(str::to_owned),
        (None, Some(t)) => Some(qualified_name(client, t).unwrap_or_default()),
    };
    match (r.max_attempts, dead_letter.as_deref()) {
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => {
            bail!(
                InvalidDescriptor,
                "max_attempts and a dead letter (dead_letter or dead_letter_table) are given together (both or neither)"
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
            if group.is_some() && r.dead_letter_table.is_none() {
                if dl == r.queue {
                    bail!(
                        InvalidDescriptor,
                        "the dead-letter group must differ from the queue's own group \"{}\"",
                        r.queue
                    );
                }
                dead_at = DeadAt::Group;
            } else {
                let dlt = match r.dead_letter_table {
                    Some(t) => Some(t),
                    None => spi(client
                        .select(
                            "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
                            None,
                            &[dl.into()],
                        )
                        .and_then(|t| t.first().get_one::<pg_sys::Oid>())),
                };
                let Some(dlt) = dlt.filter(|o| *o != pg_sys::InvalidOid) else {
                    bail!(
                        InvalidDescriptor,
                        "dead-letter table \"{dl}\" does not exist ({table} has no group column, so dead_letter names a table)"
                    )
                };
                check_dead_letter_table(client, r.rel, table, cols, dlt)?;
                dead_letter_table = Some(dlt);
            }
        }
    }
    let dlt_name = dead_letter_table.and_then(|t| qualified_name(client, t));
    if let (Some(t), Some(name)) = (dead_letter_table, dlt_name.as_deref()) {
        dead_at = DeadAt::Table {
            name,
            placement: citus::placement(client, t),
        };
    }
    if let Err(m) = citus::check_layout(table, &placement, group, &dead_at) {
        bail!(InvalidDescriptor, "{m}");
    }
    Ok((dead_letter, dead_letter_table))
}

/// The registry's row of `queue`, as a descriptor.
fn stored(client: &SpiClient<'_>, queue: &str) -> Option<Descriptor> {
    crate::desc::registry_row(client, queue).map(|r| Descriptor {
        queue: queue.to_owned(),
        rel: r.tbl,
        form: r.form,
        max_attempts: r.max_attempts,
        dead_letter: r.dead_letter,
        dead_letter_table: r.dead_letter_table,
        columns: r.columns,
    })
}

/// One way a registered descriptor differs from another: what, as registered,
/// as given (None: not set).
pub type Difference = (String, Option<String>, Option<String>);

/// How `given` differs from `registered`, field by field: the table, the form,
/// max_attempts, the dead letter (its table, or its group value) and each
/// column role.
fn compare(client: &SpiClient<'_>, registered: &Descriptor, given: &Descriptor) -> Vec<Difference> {
    let table =
        |o: pg_sys::Oid| qualified_name(client, o).or_else(|| Some(format!("oid {}", o.to_u32())));
    let dead = |d: &Descriptor| match (d.dead_letter_table, &d.dead_letter) {
        (Some(t), _) => table(t).map(|n| format!("table {n}")),
        (None, Some(g)) => Some(format!("group {}", crate::sql::literal(g))),
        (None, None) => None,
    };
    let mut out: Vec<Difference> = Vec::new();
    let mut field = |name: &str, a: Option<String>, b: Option<String>| {
        if a != b {
            out.push((name.to_owned(), a, b));
        }
    };
    field("tbl", table(registered.rel), table(given.rel));
    field(
        "form",
        Some(registered.form.clone()),
        Some(given.form.clone()),
    );
    field(
        "max_attempts",
        registered.max_attempts.map(|n| n.to_string()),
        given.max_attempts.map(|n| n.to_string()),
    );
    field("dead_letter", dead(registered), dead(given));
    for (role, _) in ROLES {
        let col = |d: &Descriptor| {
            d.columns
                .get(role)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        field(&format!("columns.{role}"), col(registered), col(given));
    }
    out
}

/// How the registered descriptor of `r.queue` differs from `r` (checked as
/// registration would check it); SQ002 when the queue is not registered.
pub fn differences(client: &SpiClient<'_>, r: &Registration<'_>) -> Result<Vec<Difference>> {
    let given = resolve(client, r)?;
    let Some(registered) = stored(client, r.queue) else {
        bail!(UnknownQueue, "queue \"{}\" is not registered", r.queue)
    };
    Ok(compare(client, &registered, &given))
}

/// Register a queue, or change its descriptor. Registering what is already
/// registered writes nothing and needs no ownership; anything else needs the
/// queue table's owner.
pub fn register(client: &mut SpiClient<'_>, r: Registration<'_>) -> Result<()> {
    let d = resolve(client, &r)?;
    if let Some(registered) = stored(client, &d.queue) {
        if compare(client, &registered, &d).is_empty() {
            return Ok(());
        }
    }
    let table = qualified_name(client, d.rel).unwrap_or_default();
    check_owner(client, d.rel, &table);
    let sql = format!(
        "INSERT INTO {s}.settle_queues AS q (queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns) \
         VALUES ($1, $2::pg_catalog.oid::pg_catalog.regclass, $3, $4, $5, $6::pg_catalog.oid::pg_catalog.regclass, $7::pg_catalog.jsonb) \
         ON CONFLICT (queue) DO UPDATE SET tbl = EXCLUDED.tbl, form = EXCLUDED.form, max_attempts = EXCLUDED.max_attempts, \
           dead_letter = EXCLUDED.dead_letter, dead_letter_table = EXCLUDED.dead_letter_table, columns = EXCLUDED.columns \
         WHERE (q.tbl, q.form, q.max_attempts, q.dead_letter, q.dead_letter_table, q.columns) \
           IS DISTINCT FROM (EXCLUDED.tbl, EXCLUDED.form, EXCLUDED.max_attempts, EXCLUDED.dead_letter, EXCLUDED.dead_letter_table, EXCLUDED.columns)",
        s = ext_schema(client)
    );
    let columns = serde_json::Value::Object(d.columns).to_string();
    let args: [DatumWithOid; 7] = [
        d.queue.as_str().into(),
        d.rel.into(),
        d.form.as_str().into(),
        d.max_attempts.into(),
        d.dead_letter.as_deref().into(),
        d.dead_letter_table.into(),
        columns.as_str().into(),
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
    let q = crate::desc::queue(client, queue)?;
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
        drop(spi(client.prepare_mut(sql, &[PgOid::from(q.id_type_oid)])));
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

/// The key columns of each plain unique index of `rel` (no predicate, no
/// expressions).
fn unique_keys(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Vec<Vec<String>> {
    spi(client.select(
        "SELECT ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(n, o) \
           JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) k.n \
           WHERE k.o OPERATOR(pg_catalog.<=) i.indnkeyatts) \
         FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND i.indisunique \
           AND i.indpred IS NULL AND i.indexprs IS NULL",
        None,
        &[rel.into()],
    ))
    .map(|r| spi(r.get::<Vec<String>>(1)).unwrap_or_default())
    .collect()
}

/// A dead-letter table receives moved rows: every column of the queue table
/// (generated ones aside) with the same type, none of them generated.
fn check_dead_letter_table(
    client: &SpiClient<'_>,
    relid: pg_sys::Oid,
    table: &str,
    cols: &[Column],
    dlt: pg_sys::Oid,
) -> Result<()> {
    if dlt == relid {
        bail!(
            InvalidDescriptor,
            "the dead-letter table must not be the queue table itself"
        );
    }
    let dlt_name = qualified_name(client, dlt).unwrap_or_default();
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
    Ok(())
}
