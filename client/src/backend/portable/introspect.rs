//! Reading a portable queue's table and checking its descriptor: the
//! portable path's `queue_register`. `Error::InvalidDescriptor` names the
//! problem; nothing is written.

use super::dialect::{Dialect, IdKind, UniqueArg};
use super::sql::{ClaimPlan, Dead, Shape};
use crate::error::{Error, Result};
use crate::queue::{Form, Queue, Role};
use sqlx::Row;
use std::collections::HashMap;

/// Split a table name as SQL would read it — `name`, `schema.name`, with
/// `"quoted"` (or MySQL `` `quoted` ``) parts whose doubled quotes stand for one
/// — into its raw parts, unquoted parts folded as the dialect folds them.
fn split_table(d: Dialect, t: &str) -> Result<(Option<String>, String)> {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = t.trim().chars().peekable();
    let mut quoted_part = false;
    while let Some(c) = chars.next() {
        match c {
            '"' | '`' if cur.is_empty() && !quoted_part => {
                quoted_part = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => {
                            if chars.peek() == Some(&c) {
                                chars.next();
                                cur.push(c);
                            } else {
                                break;
                            }
                        }
                        Some(x) => cur.push(x),
                        None => {
                            return Err(Error::invalid(format!(
                                "unterminated quoted name in {t:?}"
                            )))
                        }
                    }
                }
            }
            '.' => {
                parts.push(std::mem::take(&mut cur));
                quoted_part = false;
            }
            c if quoted_part => {
                return Err(Error::invalid(format!(
                    "unexpected {c:?} after a quoted name in {t:?}"
                )));
            }
            c => cur.push(if d.folds_unquoted_names() {
                c.to_ascii_lowercase()
            } else {
                c
            }),
        }
    }
    parts.push(cur);
    match parts.len() {
        1 => Ok((None, parts.pop().unwrap())),
        2 => {
            let name = parts.pop().unwrap();
            Ok((parts.pop(), name))
        }
        _ => Err(Error::invalid(format!(
            "{t:?} is not a table name (name or schema.name)"
        ))),
    }
}

/// The columns of a table, in order: (name, lower-case type name). Empty when
/// the table does not exist.
async fn table_columns(
    conn: &mut sqlx::AnyConnection,
    d: Dialect,
    schema: Option<&str>,
    name: &str,
) -> Result<Vec<(String, String)>> {
    let (sql, binds_schema) = d.columns_sql();
    let mut q = sqlx::query(sql);
    if binds_schema {
        q = q.bind(schema);
    }
    Ok(q.bind(name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1).to_lowercase()))
        .collect())
}

/// The columns of each role: (name, lower-case type name).
type Resolved = HashMap<Role, (String, String)>;

/// Read the table's columns and check the descriptor: InvalidDescriptor names the problem.
pub(super) async fn introspect(
    conn: &mut sqlx::AnyConnection,
    d: Dialect,
    q: &Queue,
) -> Result<Shape> {
    let (schema, name) = split_table(d, &q.table)?;
    let (schema, name) = (schema.as_deref(), name.as_str());
    // (column name, lower-case type name)
    let cols = table_columns(conn, d, schema, name).await?;
    if cols.is_empty() {
        return Err(Error::descriptor(format!(
            "table {} does not exist",
            q.table
        )));
    }
    let resolved = resolve_roles(q, &cols)?;
    let (id, id_type) = resolved.get(&Role::Id).cloned().ok_or_else(|| {
        Error::descriptor(format!(
            "{} has no id column: name it with Queue::column(Role::Id, ..)",
            q.table
        ))
    })?;
    check_types(d, q, &resolved)?;
    let id_kind = if is_int(&id_type) {
        IdKind::Integer
    } else if id_type.as_str() == "uuid" {
        IdKind::Uuid
    } else {
        IdKind::Text
    };
    check_unique_id(conn, d, q, (schema, name), &id, &resolved).await?;
    let payload = payload_of(d, q, &resolved)?;
    check_lease(q, &resolved)?;
    let table = match schema {
        Some(s) => format!("{}.{}", d.ident(s), d.ident(name)),
        None => d.ident(name),
    };
    let dead = dead_of(conn, d, q, &cols, &resolved).await?;
    let get = |r: Role| resolved.get(&r).map(|(n, _)| n.clone());
    Ok(Shape {
        d,
        deletes_return: deletes_return(conn, d).await?,
        queue: q.name.clone(),
        form: q.form,
        plan: ClaimPlan::of(q.form, d),
        table,
        cols: cols.into_iter().map(|(n, _)| n).collect(),
        id,
        id_kind,
        attempt: get(Role::Attempt),
        retry_after: get(Role::RetryAfter),
        locked_until: get(Role::LockedUntil),
        processed_at: get(Role::ProcessedAt),
        group: get(Role::Group),
        priority: get(Role::Priority),
        ordering_key: get(Role::OrderingKey),
        payload,
        // an enqueue time of another type (text, say) gives no ages
        created_at: resolved
            .get(&Role::CreatedAt)
            .filter(|(_, t)| d.is_timestamp_type(t))
            .map(|(n, _)| n.clone()),
        max: q.dead.as_ref().map(|(n, _)| i64::from(*n)),
        dead,
        custom: q.outcomes.iter().cloned().collect(),
    })
}

/// Whether the server reports the rows a `DELETE` wrote: every dialect with
/// `RETURNING`, and MariaDB (`DELETE … RETURNING` since 10.0.5; its `UPDATE`
/// has none), which speaks the MySQL dialect.
async fn deletes_return(conn: &mut sqlx::AnyConnection, d: Dialect) -> Result<bool> {
    if d.has_returning() {
        return Ok(true);
    }
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *conn)
        .await?;
    Ok(version.contains("MariaDB"))
}

fn is_int(t: &str) -> bool {
    t.contains("int")
}

/// Each role's column: the one the queue names, or the default name when the
/// table has it (unless the queue goes without the role).
fn resolve_roles(q: &Queue, cols: &[(String, String)]) -> Result<Resolved> {
    let has = |c: &str| cols.iter().find(|(n, _)| n == c).map(|(_, t)| t.clone());
    let defaults = [
        (Role::Id, "id"),
        (Role::Attempt, "attempt"),
        (Role::RetryAfter, "retry_after"),
        (Role::LockedUntil, "locked_until"),
        (Role::ProcessedAt, "processed_at"),
        (Role::Group, "queue"),
        (Role::CreatedAt, "created_at"),
        (Role::Payload, "payload"),
        (Role::Priority, "priority"),
        (Role::OrderingKey, "ordering_key"),
    ];
    let mut resolved = Resolved::new();
    for (role, default) in defaults {
        let name = match q.columns.get(&role) {
            Some(Some(n)) => Some(n.clone()),
            Some(None) => None,
            None => has(default).map(|_| default.to_owned()),
        };
        if let Some(n) = name {
            let Some(t) = has(&n) else {
                return Err(Error::descriptor(format!(
                    "column \"{n}\" ({role:?}) does not exist in {}",
                    q.table
                )));
            };
            resolved.insert(role, (n, t));
        }
    }
    Ok(resolved)
}

/// Times are timestamps, the attempt counter an integer.
fn check_types(d: Dialect, q: &Queue, resolved: &Resolved) -> Result<()> {
    for role in [Role::RetryAfter, Role::LockedUntil, Role::ProcessedAt] {
        if let Some((n, t)) = resolved.get(&role) {
            if !d.is_timestamp_type(t) {
                return Err(Error::descriptor(format!(
                    "column \"{n}\" ({role:?}) of {} is {t}, it must be {}",
                    q.table,
                    d.timestamp_hint()
                )));
            }
        }
    }
    for (role, name) in [(Role::Attempt, "attempt"), (Role::Priority, "priority")] {
        if let Some((n, t)) = resolved.get(&role) {
            if !is_int(t) {
                return Err(Error::descriptor(format!(
                    "column \"{n}\" ({name}) of {} is {t}, it must be an integer type",
                    q.table
                )));
            }
        }
    }
    Ok(())
}

/// The id needs a unique index of its own.
async fn check_unique_id(
    conn: &mut sqlx::AnyConnection,
    d: Dialect,
    q: &Queue,
    (schema, name): (Option<&str>, &str),
    id: &str,
    resolved: &Resolved,
) -> Result<()> {
    let (sql, args) = d.unique_id_sql();
    let mut uq = sqlx::query(sql);
    for a in args {
        uq = match a {
            UniqueArg::Table => uq.bind(q.table.as_str()),
            UniqueArg::Schema => uq.bind(schema),
            UniqueArg::Name => uq.bind(name),
            UniqueArg::Column => uq.bind(id),
        };
    }
    let unique: i64 = uq.fetch_one(&mut *conn).await?.get(0);
    if unique != 0 {
        return Ok(());
    }
    // a key on (group, id) alone is the extension's: its statements find rows by both
    let hint = if resolved.contains_key(&Role::Group) {
        " (a key on the group and the id together needs the settle extension)"
    } else {
        ""
    };
    Err(Error::descriptor(format!(
        "the id column \"{id}\" of {} needs a primary key or unique index of its own{hint}",
        q.table
    )))
}

/// The payload column and how its value arrives.
fn payload_of(
    d: Dialect,
    q: &Queue,
    resolved: &Resolved,
) -> Result<Option<(String, super::dialect::PayloadText)>> {
    let Some((n, t)) = resolved.get(&Role::Payload) else {
        return Ok(None);
    };
    match d.payload_arrives_as(t) {
        Some(arrives) => Ok(Some((n.clone(), arrives))),
        None => Err(Error::descriptor(format!(
            "column \"{n}\" (payload) of {} is {t}; a payload column must be a JSON or text type (name another with Queue::column(Role::Payload, ..), or hand handlers the whole row with Queue::without(Role::Payload))",
            q.table
        ))),
    }
}

/// The lease form needs a locked_until column and a lease of at least 1 ms.
fn check_lease(q: &Queue, resolved: &Resolved) -> Result<()> {
    let Form::Lease { ttl } = q.form else {
        return Ok(());
    };
    if !resolved.contains_key(&Role::LockedUntil) {
        return Err(Error::descriptor(format!(
            "the lease form needs a locked_until column in {}",
            q.table
        )));
    }
    if ttl.as_micros() < 1000 {
        return Err(Error::invalid("a lease must be at least 1 millisecond"));
    }
    Ok(())
}

/// Where dead rows go: a group of the same table (a table with a group
/// column), or a dead-letter table that has every column of the queue's.
async fn dead_of(
    conn: &mut sqlx::AnyConnection,
    d: Dialect,
    q: &Queue,
    cols: &[(String, String)],
    resolved: &Resolved,
) -> Result<Option<Dead>> {
    let grouped = resolved.contains_key(&Role::Group);
    Ok(match &q.dead {
        None => None,
        Some((0, _)) => return Err(Error::descriptor("max_attempts must be at least 1")),
        Some(_) if !resolved.contains_key(&Role::Attempt) => {
            return Err(Error::descriptor(format!(
                "max_attempts needs an attempt column in {}",
                q.table
            )))
        }
        Some(_) if q.dead_table && grouped => {
            return Err(Error::unsupported(
                "a dead-letter table for a queue with a group column needs the settle extension; the portable path moves a grouped queue's dead rows to a group",
            ))
        }
        Some((_, target)) if grouped => {
            if target == &q.name {
                return Err(Error::descriptor(
                    "the dead-letter group must differ from the queue's own group",
                ));
            }
            Some(Dead::Group(target.clone()))
        }
        Some((_, target)) => Some(Dead::Table(dead_table(conn, d, q, cols, target).await?)),
    })
}

/// The dead-letter table's quoted name; it must exist and have every column
/// of the queue's table.
async fn dead_table(
    conn: &mut sqlx::AnyConnection,
    d: Dialect,
    q: &Queue,
    cols: &[(String, String)],
    target: &str,
) -> Result<String> {
    let (ts, tn) = split_table(d, target)?;
    let (ts, tn) = (ts.as_deref(), tn.as_str());
    let dcols: Vec<String> = table_columns(conn, d, ts, tn)
        .await?
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    if dcols.is_empty() {
        return Err(Error::descriptor(format!(
            "dead-letter table {target} does not exist ({} has no group column, so the dead letter is a table)",
            q.table
        )));
    }
    if let Some((c, _)) = cols.iter().find(|(c, _)| !dcols.contains(c)) {
        return Err(Error::descriptor(format!(
            "dead-letter table {target} lacks column \"{c}\" of {}",
            q.table
        )));
    }
    Ok(match ts {
        Some(s) => format!("{}.{}", d.ident(s), d.ident(tn)),
        None => d.ident(tn),
    })
}
