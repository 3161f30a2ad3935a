//! What really differs between the databases of the portable path: SQL text
//! per database, and the facts the shared code asks ([`Dialect::has_returning`],
//! [`Dialect::advisory`], …) instead of the database's name. Everything else —
//! which statements run, in which order, with which conditions — is shared.

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

/// How a payload column's text arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadText {
    /// JSON text
    Json,
    /// text, which may hold JSON
    Text,
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
    /// (lease tokens, retry_after). One value per statement, so every row a claim
    /// takes carries the same token (`clock_timestamp()` would differ row by row).
    pub fn now_plus(self, micros_param: &str) -> String {
        match self {
            Dialect::Postgres => format!(
                "date_trunc('milliseconds', statement_timestamp() + CAST({micros_param} AS BIGINT) * interval '1 microsecond')"
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

/// How a dialect takes the advisory locks of the advisory form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Advisory {
    /// PostgreSQL session locks on the extension's own key,
    /// `hashtextextended(length(queue) || ':' || queue || ':' || id, 0)`
    /// (`queue_advisory_key`), computed by the server from the queue and the
    /// id, so workers of the extension and of the portable path on one queue
    /// exclude each other. Bound: the queue, then the ids.
    ServerKey,
    /// MySQL/MariaDB named locks, `settle:<16 hex digits>` ([`lock_name`]).
    /// Bound: a name per id.
    Named,
}

impl Advisory {
    /// The expression of the key of the id bound as parameter `id_p` (PostgreSQL:
    /// the queue is parameter 1).
    fn key(self, id_p: &str) -> String {
        match self {
            Advisory::ServerKey => server_key("$1", id_p),
            Advisory::Named => id_p.to_owned(),
        }
    }

    /// Whether the server computes a row's key from the queue and the id, so
    /// that a statement can try the keys of the rows it reads.
    pub(crate) fn server_computes_keys(self) -> bool {
        self == Advisory::ServerKey
    }

    /// A test that tries the key of the row id `id` of the queue `queue` (SQL
    /// expressions) without waiting, where the server computes keys
    /// (PostgreSQL); `None` where the client names the locks.
    pub(crate) fn try_lock_of(self, queue: &str, id: &str) -> Option<String> {
        match self {
            Advisory::ServerKey => Some(format!("pg_try_advisory_lock({})", server_key(queue, id))),
            Advisory::Named => None,
        }
    }

    /// Where the first id's key parameter is.
    fn first(self) -> usize {
        match self {
            Advisory::ServerKey => 2,
            Advisory::Named => 1,
        }
    }

    /// `SELECT` of one 0/1 column per key of `n` ids: try each lock, no waiting.
    pub(crate) fn try_lock_sql(self, d: Dialect, n: usize) -> String {
        let cols: Vec<String> = (0..n)
            .map(|i| {
                let key = self.key(&d.p(self.first() + i));
                match self {
                    Advisory::ServerKey => format!(
                        "CAST(CASE WHEN pg_try_advisory_lock({key}) THEN 1 ELSE 0 END AS BIGINT)"
                    ),
                    Advisory::Named => format!("CAST(GET_LOCK({key}, 0) AS SIGNED)"),
                }
            })
            .collect();
        format!("SELECT {}", cols.join(", "))
    }

    /// `SELECT` letting the locks of `n` ids go.
    pub(crate) fn unlock_sql(self, d: Dialect, n: usize) -> String {
        let cols: Vec<String> = (0..n)
            .map(|i| {
                let key = self.key(&d.p(self.first() + i));
                match self {
                    Advisory::ServerKey => format!("pg_advisory_unlock({key})"),
                    Advisory::Named => format!("RELEASE_LOCK({key})"),
                }
            })
            .collect();
        format!("SELECT {}", cols.join(", "))
    }

    /// A statement letting every lock of the session go.
    pub(crate) fn unlock_all_sql(self) -> &'static str {
        match self {
            Advisory::ServerKey => "SELECT pg_advisory_unlock_all()",
            Advisory::Named => "SELECT RELEASE_ALL_LOCKS()",
        }
    }

    /// The values those statements bind, in order.
    pub(crate) fn args(self, queue: &str, ids: &[impl AsRef<str>]) -> Vec<String> {
        match self {
            Advisory::ServerKey => std::iter::once(queue.to_owned())
                .chain(ids.iter().map(|id| id.as_ref().to_owned()))
                .collect(),
            Advisory::Named => ids.iter().map(|id| lock_name(queue, id.as_ref())).collect(),
        }
    }
}

/// `queue_advisory_key(queue, id)` of the SQL expressions `queue` and `id`.
fn server_key(queue: &str, id: &str) -> String {
    format!(
        "hashtextextended(CAST(length(CAST({queue} AS TEXT)) AS TEXT) || ':' || CAST({queue} AS TEXT) \
         || ':' || CAST({id} AS TEXT), 0)"
    )
}

/// The MySQL/MariaDB lock name of a row: `settle:` and a stable 64-bit hash
/// (FNV-1a) of `len(queue) ':' queue ':' id` in hex (`GET_LOCK` names are at
/// most 64 characters).
pub(crate) fn lock_name(queue: &str, id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(queue.chars().count().to_string().as_bytes());
    eat(b":");
    eat(queue.as_bytes());
    eat(b":");
    eat(id.as_bytes());
    // written by hand: this runs once per candidate of every claim
    let mut name = String::with_capacity(23);
    name.push_str("settle:");
    for i in (0..16).rev() {
        name.push(char::from(HEX[((h >> (i * 4)) & 0xf) as usize]));
    }
    name
}

#[cfg(test)]
mod lock_name_tests {
    /// Names are shared by every client of a queue: they never change.
    #[test]
    fn names_are_stable() {
        assert_eq!(super::lock_name("jobs", "42"), "settle:1b8db29108637f4d");
        assert_eq!(super::lock_name("очередь", "1"), "settle:ee755b55c805f8ab");
    }
}

/// Facts about a dialect, asked by the shared code.
impl Dialect {
    /// The dialect of a database URL, and the URL as sqlx takes it.
    pub(crate) fn from_url(url: &str) -> Option<(Dialect, String)> {
        if url.starts_with("postgres") {
            Some((Dialect::Postgres, url.to_owned()))
        } else if url.starts_with("mysql") {
            Some((Dialect::MySql, url.to_owned()))
        } else if url.starts_with("mariadb") {
            Some((Dialect::MySql, url.replacen("mariadb://", "mysql://", 1)))
        } else if url.starts_with("sqlite") {
            Some((Dialect::Sqlite, url.to_owned()))
        } else {
            None
        }
    }

    /// How the advisory form locks rows; `None`: no advisory locks (SQLite).
    pub(crate) fn advisory(self) -> Option<Advisory> {
        match self {
            Dialect::Postgres => Some(Advisory::ServerKey),
            Dialect::MySql => Some(Advisory::Named),
            Dialect::Sqlite => None,
        }
    }

    /// The SQLSTATE of a read the role has no privilege for (SQLite has no
    /// privileges).
    pub(crate) fn privilege_denied_code(self) -> Option<&'static str> {
        match self {
            Dialect::Postgres => Some("42501"),
            // ER_TABLEACCESS_DENIED_ERROR
            Dialect::MySql => Some("42000"),
            Dialect::Sqlite => None,
        }
    }

    /// `DELETE … RETURNING` / `UPDATE … RETURNING`: a write reports the rows it
    /// wrote, so an ack needs no lock-and-read first.
    pub(crate) fn has_returning(self) -> bool {
        self != Dialect::MySql
    }

    /// Data-modifying statements in `WITH`: a claim (lock, count, read) or a
    /// dead-letter move (delete, insert) is one statement.
    pub(crate) fn has_writable_cte(self) -> bool {
        self == Dialect::Postgres
    }

    /// A row settled stays in the table's index until no transaction can see
    /// it any more (PostgreSQL's xmin horizon, InnoDB's purge), so a claim that
    /// scans from the lowest id walks every such row while a long transaction
    /// holds them: claims start at the client's mark instead. SQLite removes a
    /// row from its b-tree when the delete commits.
    pub(crate) fn keeps_settled_rows_in_index(self) -> bool {
        self != Dialect::Sqlite
    }

    /// An ascending ORDER BY puts NULL after every value (PostgreSQL); MySQL,
    /// MariaDB and SQLite put it first, so a claim in priority order there
    /// reads the valued rows and the NULL ones apart, each an index range.
    pub(crate) fn sorts_null_last(self) -> bool {
        self == Dialect::Postgres
    }

    /// `SELECT key … GROUP BY key` over a `(key, id)` index reads one entry
    /// per key (MySQL's and MariaDB's loose index scan), where a recursive
    /// walk from key to key there reads the index from its start at each
    /// step. Elsewhere (PostgreSQL, SQLite) the GROUP BY reads every entry
    /// and the recursive walk is the one that skips.
    pub(crate) fn finds_keys_by_group_by(self) -> bool {
        self == Dialect::MySql
    }

    /// A prepared statement whose derived table holds a subquery of another
    /// derived table's column fails when run again ("Unknown column", MariaDB
    /// 10.11): such a statement is prepared for each run.
    pub(crate) fn fails_rerun_of_derived_subqueries(self) -> bool {
        self == Dialect::MySql
    }

    /// A deadlock victim loses its whole transaction, not only the statement
    /// (InnoDB): a claim transaction it was part of is over.
    pub(crate) fn deadlock_ends_transaction(self) -> bool {
        self == Dialect::MySql
    }

    /// A locking read of `id IN (…)` may scan past the listed rows (InnoDB reads
    /// the whole table for many ids on a small one, and a record past each id
    /// under load), waiting on rows other workers hold: id lists are read in
    /// order with a limit, and row_lock batches join their ids to the table.
    pub(crate) fn locking_scans_pass_listed_ids(self) -> bool {
        self == Dialect::MySql
    }

    /// Unquoted names fold to lower case (PostgreSQL), as the table name a
    /// caller gives is read.
    pub(crate) fn folds_unquoted_names(self) -> bool {
        self == Dialect::Postgres
    }

    /// Statements every new connection runs first.
    pub(crate) fn session_setup(self) -> &'static [&'static str] {
        match self {
            Dialect::Postgres => &[],
            // InnoDB's default REPEATABLE READ makes a locking read also lock the
            // rows it passes over (leased rows, rows of other claims) and the gaps
            // between them, so concurrent claims and settles deadlock (error
            // 1213); READ COMMITTED locks only the rows a claim takes, as
            // PostgreSQL does
            Dialect::MySql => &[
                "SET time_zone = '+00:00'",
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            ],
            Dialect::Sqlite => &["PRAGMA busy_timeout = 10000"],
        }
    }

    /// Writes go through a write-ahead log, a mode kept in the database
    /// file (SQLite's WAL, so readers do not wait on the writer): a new
    /// connection asks for it where the file is not in it yet.
    pub(crate) fn wants_wal(self) -> bool {
        self == Dialect::Sqlite
    }

    /// The columns of a table as (name, type name), in order: the statement,
    /// and whether it binds the schema (NULL: the current one) before the name.
    pub(crate) fn columns_sql(self) -> (&'static str, bool) {
        match self {
            Dialect::Postgres => (
                "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT) FROM information_schema.columns \
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2 ORDER BY ordinal_position",
                true,
            ),
            Dialect::MySql => (
                "SELECT CAST(column_name AS CHAR), CAST(data_type AS CHAR) FROM information_schema.columns \
                 WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? ORDER BY ordinal_position",
                true,
            ),
            Dialect::Sqlite => ("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", false),
        }
    }

    /// How many unique indexes have the id column alone: the statement and what
    /// it binds, in order.
    pub(crate) fn unique_id_sql(self) -> (&'static str, &'static [UniqueArg]) {
        use UniqueArg::*;
        match self {
            Dialect::Postgres => (
                "SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
                 WHERE i.indrelid = CAST($1 AS regclass) AND i.indisunique AND i.indnkeyatts = 1 AND a.attname = $2",
                &[Table, Column],
            ),
            Dialect::MySql => (
                "SELECT CAST(count(*) AS SIGNED) FROM (SELECT index_name FROM information_schema.statistics \
                 WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND non_unique = 0 \
                 GROUP BY index_name HAVING count(*) = 1 AND max(column_name) = ?) u",
                &[Schema, Name, Column],
            ),
            Dialect::Sqlite => (
                "SELECT (SELECT count(*) FROM pragma_table_info(?1) WHERE pk = 1 AND name = ?2 \
                           AND (SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1) \
                      + (SELECT count(*) FROM pragma_index_list(?1) il WHERE il.\"unique\" = 1 \
                           AND (SELECT count(*) FROM pragma_index_info(il.name)) = 1 \
                           AND (SELECT name FROM pragma_index_info(il.name)) = ?2)",
                &[Name, Column],
            ),
        }
    }

    /// Is a column type name (lower case) the dialect's timestamp type?
    pub(crate) fn is_timestamp_type(self, t: &str) -> bool {
        match self {
            Dialect::Postgres => t == "timestamp with time zone",
            Dialect::MySql => t == "datetime" || t == "timestamp",
            // settle's SQLite tables keep integer microseconds
            Dialect::Sqlite => t.contains("int"),
        }
    }

    /// How a payload column of (lower-case) type `t` arrives: as JSON text
    /// (a JSON type the database checks), as text that may hold JSON, or None
    /// when the type cannot be a payload column.
    pub(crate) fn payload_arrives_as(self, t: &str) -> Option<PayloadText> {
        let text = t.contains("char") || t.contains("text") || t.contains("clob");
        match self {
            Dialect::Postgres if t == "jsonb" || t == "json" => Some(PayloadText::Json),
            // MySQL's JSON type is checked; MariaDB's JSON is LONGTEXT and arrives as text
            Dialect::MySql if t == "json" => Some(PayloadText::Json),
            // SQLite checks no declared type: a JSON column is text
            Dialect::Sqlite if t == "json" || t.is_empty() => Some(PayloadText::Text),
            _ if text => Some(PayloadText::Text),
            _ => None,
        }
    }

    /// A payload column as text.
    pub fn payload_text(self, col: &str) -> String {
        match self {
            Dialect::Postgres => format!("CAST({col} AS TEXT)"),
            Dialect::MySql => format!("CAST({col} AS CHAR CHARACTER SET utf8mb4)"),
            Dialect::Sqlite => col.to_owned(),
        }
    }

    /// The timestamp type to name in an error.
    pub(crate) fn timestamp_hint(self) -> &'static str {
        match self {
            Dialect::Postgres => "timestamptz",
            Dialect::MySql => "DATETIME(6) (UTC)",
            Dialect::Sqlite => "INTEGER (microseconds since the epoch, UTC)",
        }
    }
}

/// What [`Dialect::unique_id_sql`] binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UniqueArg {
    /// the table name as given
    Table,
    /// the schema (raw), or NULL
    Schema,
    /// the table name (raw)
    Name,
    /// the id column
    Column,
}

impl Dialect {
    /// The canonical queue table `table` and its dead-letter table `table_dead`
    /// (`sql/<dialect>/queue.sql`), as statements. `table` is quoted here.
    pub fn create_queue_sql(self, table: &str) -> Vec<String> {
        let text = match self {
            Dialect::Postgres => include_str!("../../../../sql/postgres/queue.sql"),
            Dialect::MySql => include_str!("../../../../sql/mysql/queue.sql"),
            Dialect::Sqlite => include_str!("../../../../sql/sqlite/queue.sql"),
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
