//! Where Citus keeps a table, read from its metadata when Citus is installed:
//! the facts that decide a queue's layout and how its statements find rows.

use crate::catalog::spi;
use pgrx::pg_sys;
use pgrx::spi::SpiClient;

/// How a table is placed on a Citus cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// An ordinary table (no Citus, or a table Citus does not know).
    Local,
    /// Hash-distributed by `column`; tables of one `colocation` id keep equal
    /// values on the same shard.
    ByColumn { column: String, colocation: i32 },
    /// Distributed as one shard (`create_distributed_table(t, NULL)`).
    SingleShard { colocation: i32 },
    /// A reference table: a copy on every node.
    Reference,
    /// A Citus-managed table kept on the coordinator.
    CoordinatorLocal,
    /// Append or range distribution (partition method given): no shard holds
    /// one group.
    Other(String),
}

impl Placement {
    /// Citus routes statements on the table to its shards: rows are found by
    /// their key, never by ctid (a coordinator's ctid names no shard row).
    pub fn distributed(&self) -> bool {
        *self != Placement::Local
    }

    /// Two tables whose rows of one group (or whole contents) share a shard.
    pub fn colocated_with(&self, other: &Placement) -> bool {
        match (self, other) {
            (
                Placement::ByColumn { colocation: a, .. },
                Placement::ByColumn { colocation: b, .. },
            )
            | (
                Placement::SingleShard { colocation: a },
                Placement::SingleShard { colocation: b },
            ) => a == b,
            (Placement::CoordinatorLocal, Placement::CoordinatorLocal) => true,
            (Placement::Local, Placement::Local) => true,
            _ => false,
        }
    }

    /// How a message names this placement.
    pub fn describe(&self) -> String {
        match self {
            Placement::Local => "a local table".into(),
            Placement::ByColumn { column, .. } => format!("distributed by column \"{column}\""),
            Placement::SingleShard { .. } => "a single-shard distributed table".into(),
            Placement::Reference => "a reference table".into(),
            Placement::CoordinatorLocal => "a Citus local table".into(),
            Placement::Other(m) => format!("distributed with partition method {m}"),
        }
    }
}

/// Citus's metadata table, when Citus is installed in this database.
fn installed(client: &SpiClient<'_>) -> bool {
    spi(client
        .select(
            "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL",
            None,
            &[],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(false)
}

pub fn placement(client: &SpiClient<'_>, rel: pg_sys::Oid) -> Placement {
    if !installed(client) {
        return Placement::Local;
    }
    let t = spi(client.select(
        "SELECT p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text, p.colocationid, \
           CASE WHEN p.partkey IS NOT NULL THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)::pg_catalog.text END \
         FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid::pg_catalog.regclass",
        None,
        &[rel.into()],
    ));
    if t.is_empty() {
        return Placement::Local;
    }
    let r = t.first();
    let method = spi(r.get::<String>(1)).unwrap_or_default();
    let repmodel = spi(r.get::<String>(2)).unwrap_or_default();
    let colocation = spi(r.get::<i32>(3)).unwrap_or(0);
    match (method.as_str(), spi(r.get::<String>(4))) {
        ("h", Some(column)) => Placement::ByColumn { column, colocation },
        ("n", _) if repmodel == "t" => Placement::Reference,
        ("n", _) if colocation == 0 => Placement::CoordinatorLocal,
        ("n", _) => Placement::SingleShard { colocation },
        // append or range distribution: no single shard per group
        (m, _) => Placement::Other(m.to_owned()),
    }
}

/// This session runs on the coordinator (or on a server without Citus).
pub fn on_coordinator(client: &SpiClient<'_>) -> bool {
    if !installed(client) {
        return true;
    }
    spi(client
        .select(
            "SELECT l.groupid OPERATOR(pg_catalog.=) 0 FROM pg_catalog.pg_dist_local_group l",
            None,
            &[],
        )
        .and_then(|t| t.first().get_one::<bool>()))
    .unwrap_or(true)
}

/// Where a queue's dead rows go, with the dead-letter table's placement.
pub enum DeadAt<'a> {
    None,
    Group,
    Table { name: &'a str, placement: Placement },
}

/// Check that a queue's layout lets Citus run each of its statements on one
/// shard: a table distributed by column keeps a queue's rows together only when
/// that column is the queue's group; a dead-letter group on such a table would
/// move a row to another shard (Citus refuses to update a distribution column);
/// a dead-letter table must be colocated with the queue table, so the move
/// stays on the shard. `Err` names the problem (SQ003).
pub fn check_layout(
    table: &str,
    p: &Placement,
    group: Option<&str>,
    dead: &DeadAt<'_>,
) -> Result<(), String> {
    match p {
        Placement::Local | Placement::SingleShard { .. } | Placement::CoordinatorLocal => {}
        Placement::Reference => {
            return Err(format!(
                "{table} is a reference table: every node holds a copy and every write goes to all of them; distribute it with create_distributed_table instead"
            ))
        }
        Placement::Other(_) => {
            return Err(format!(
                "{table} is {}: distribute it by its group column, or as one shard (create_distributed_table('{table}', NULL))",
                p.describe()
            ))
        }
        Placement::ByColumn { column, .. } => match group {
            Some(g) if g == column => {
                if matches!(dead, DeadAt::Group) {
                    return Err(format!(
                        "{table} is distributed by its group column \"{column}\": a dead-letter group would move rows to another shard, which Citus refuses; name a colocated table with dead_letter_table"
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "{table} is distributed by column \"{column}\": make it the queue's group (columns => '{{\"group\": \"{column}\"}}'), so each queue's rows stay on one shard"
                ))
            }
        },
    }
    if let DeadAt::Table { name, placement } = dead {
        let same_key = match (p, placement) {
            (Placement::ByColumn { column: a, .. }, Placement::ByColumn { column: b, .. }) => {
                a == b
            }
            _ => true,
        };
        if !(p.colocated_with(placement) && same_key) {
            let how = match p {
                Placement::ByColumn { column, .. } => format!(
                    "create_distributed_table('{name}', '{column}', colocate_with => '{table}')"
                ),
                Placement::SingleShard { .. } => {
                    format!("create_distributed_table('{name}', NULL, colocate_with => '{table}')")
                }
                _ => "keep both tables local".into(),
            };
            let what = if placement.describe() == p.describe() {
                format!("is not colocated with {table}")
            } else {
                format!(
                    "is {}, but {table} is {}",
                    placement.describe(),
                    p.describe()
                )
            };
            return Err(format!(
                "dead-letter table {name} {what}: the move into it must stay on one shard; {how}"
            ));
        }
    }
    Ok(())
}
