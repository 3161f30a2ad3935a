//! What really differs between the databases of the portable path. Everything
//! else (which statements run, in which order, with which conditions) is shared
//! in `engine.rs`.

/// A SQL dialect of the portable path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL without the extension (plain SQL).
    Postgres,
    /// MariaDB 10.6+ / MySQL 8.
    MySql,
    /// SQLite 3.42+ (bundled).
    Sqlite,
}

/// The kind of the id column, for casting the text ids the client carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    Integer,
    Text,
    /// PostgreSQL uuid
    Uuid,
}

impl Dialect {
    /// The dialect's name: `postgres`, `mysql` or `sqlite`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Postgres => "postgres",
            Dialect::MySql => "mysql",
            Dialect::Sqlite => "sqlite",
        }
    }

    /// Quote an identifier.
    pub fn ident(self, s: &str) -> String {
        match self {
            Dialect::MySql => format!("`{}`", s.replace('`', "``")),
            _ => format!("\"{}\"", s.replace('"', "\"\"")),
        }
    }

    /// Quote a string literal.
    pub fn literal(self, s: &str) -> String {
        match self {
            // MySQL also treats backslash as an escape in literals by default
            Dialect::MySql => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
            _ => format!("'{}'", s.replace('\'', "''")),
        }
    }

    /// The n-th (1-based) bind parameter. MySQL and SQLite bind `?` in order of
    /// appearance, so every statement uses each parameter once, in order.
    pub fn p(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            _ => "?".into(),
        }
    }

    /// The database clock, in the type timestamps are kept in.
    pub fn now(self) -> &'static str {
        match self {
            Dialect::Postgres => "now()",
            Dialect::MySql => "UTC_TIMESTAMP(6)",
            // SQLite has no timestamp type: settle keeps integer microseconds since
            // the epoch (UTC), at millisecond precision
            Dialect::Sqlite => "(CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)",
        }
    }

    /// The clock plus a bound number of microseconds, truncated to milliseconds
    /// (lease tokens, retry_after).
    pub fn now_plus(self, micros_param: &str) -> String {
        match self {
            Dialect::Postgres => format!(
                "date_trunc('milliseconds', clock_timestamp() + CAST({micros_param} AS BIGINT) * interval '1 microsecond')"
            ),
            Dialect::MySql => format!("DATE_ADD(UTC_TIMESTAMP(3), INTERVAL {micros_param} MICROSECOND)"),
            Dialect::Sqlite => format!("({} + CAST({micros_param} AS INTEGER))", self.now()),
        }
    }

    /// A timestamp column as integer microseconds since the epoch (the token).
    pub fn micros(self, col: &str) -> String {
        match self {
            Dialect::Postgres => format!("CAST(EXTRACT(EPOCH FROM {col}) * 1000000 AS BIGINT)"),
            Dialect::MySql => {
                format!("CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {col}) AS SIGNED)")
            }
            Dialect::Sqlite => format!("CAST({col} AS INTEGER)"),
        }
    }

    /// The id as text (what the client carries).
    pub fn id_text(self, col: &str) -> String {
        match self {
            Dialect::MySql => format!("CAST({col} AS CHAR CHARACTER SET utf8mb4)"),
            _ => format!("CAST({col} AS TEXT)"),
        }
    }

    /// A bound text id in the id column's type.
    pub fn id_param(self, p: &str, kind: IdKind) -> String {
        match (self, kind) {
            (_, IdKind::Text) => p.to_owned(),
            (Dialect::Postgres, IdKind::Integer) => format!("CAST({p} AS BIGINT)"),
            (Dialect::Postgres, IdKind::Uuid) => format!("CAST({p} AS uuid)"),
            (Dialect::MySql, _) => format!("CAST({p} AS SIGNED)"),
            (Dialect::Sqlite, _) => format!("CAST({p} AS INTEGER)"),
        }
    }

    /// An integer column as a 64-bit integer.
    pub fn int(self, col: &str) -> String {
        match self {
            Dialect::MySql => format!("CAST({col} AS SIGNED)"),
            _ => format!("CAST({col} AS BIGINT)"),
        }
    }

    /// The lock clause of a claim's candidate query (SQLite: the write
    /// transaction already holds the whole database).
    pub fn skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            _ => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Lock a row the caller is about to settle.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            _ => " FOR UPDATE",
        }
    }

    /// The statement that opens a write transaction.
    pub fn begin(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            _ => "BEGIN",
        }
    }

    /// The whole row as JSON text.
    pub fn json_row(self, alias: &str, cols: &[String]) -> String {
        match self {
            Dialect::Postgres => format!("CAST(row_to_json({alias}) AS TEXT)"),
            Dialect::MySql | Dialect::Sqlite => {
                let f = if self == Dialect::MySql {
                    "JSON_OBJECT"
                } else {
                    "json_object"
                };
                let args: Vec<String> = cols
                    .iter()
                    .map(|c| format!("{}, {alias}.{}", self.literal(c), self.ident(c)))
                    .collect();
                if self == Dialect::MySql {
                    format!(
                        "CAST({f}({}) AS CHAR CHARACTER SET utf8mb4)",
                        args.join(", ")
                    )
                } else {
                    format!("{f}({})", args.join(", "))
                }
            }
        }
    }
}

/// A stable 64-bit hash (FNV-1a) of a row's identity, for advisory keys on the
/// portable path: `len(queue) ':' queue ':' id`.
pub fn advisory_key(queue: &str, id: &str) -> i64 {
    let s = format!("{}:{}:{}", queue.chars().count(), queue, id);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// The MySQL/MariaDB lock name of a row (GET_LOCK names are at most 64 characters).
pub fn mysql_lock_name(queue: &str, id: &str) -> String {
    format!("settle:{:016x}", advisory_key(queue, id) as u64)
}

impl Dialect {
    /// The canonical queue table `table` and its dead-letter table `table_dead`
    /// (`sql/<dialect>/queue.sql`), as statements. `table` is quoted here.
    pub fn create_queue_sql(self, table: &str) -> Vec<String> {
        let text = match self {
            Dialect::Postgres => include_str!("../../../sql/postgres/queue.sql"),
            Dialect::MySql => include_str!("../../../sql/mysql/queue.sql"),
            Dialect::Sqlite => include_str!("../../../sql/sqlite/queue.sql"),
        };
        let body: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        body.replace("{table}_dead", &self.ident(&format!("{table}_dead")))
            .replace("{table}", &self.ident(table))
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}
