//! The queue descriptor, built in Rust (docs/semantics.md, "A queue and its rows").

use std::collections::BTreeMap;
use std::time::Duration;

/// What holds a row while its handler runs (docs/semantics.md, "Claim forms").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `SELECT … FOR UPDATE SKIP LOCKED` in a transaction that the delivery keeps;
    /// its COMMIT is the completion.
    RowLock,
    /// A deadline written on the row (`locked_until`), which is also the token.
    Lease {
        /// How long a claim holds a row before another claim may take it.
        ttl: Duration,
    },
    /// A session advisory lock per row, on a connection the delivery keeps.
    Advisory,
}

impl Form {
    pub(crate) fn sql_name(self) -> &'static str {
        match self {
            Form::RowLock => "row_lock",
            Form::Lease { .. } => "lease",
            Form::Advisory => "advisory",
        }
    }
}

/// A column role of the descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// the row key (default column `id`)
    Id,
    /// delivery counter (default `attempt`)
    Attempt,
    /// not delivered before (default `retry_after`)
    RetryAfter,
    /// lease deadline (default `locked_until`)
    LockedUntil,
    /// set by ack/drop instead of deleting (default `processed_at`)
    ProcessedAt,
    /// which logical queue a row belongs to (default `queue`)
    Group,
    /// enqueue time, for stats (default `created_at`)
    CreatedAt,
    /// what a claim hands the handler (default `payload`); without one, the
    /// whole row
    Payload,
    /// claim order: lower first, NULL after every value, ties by id (default
    /// `priority`; an integer column)
    Priority,
    /// rows of one key are delivered one at a time, in id order (default
    /// `ordering_key`; NULL: unordered)
    OrderingKey,
}

impl Role {
    fn key(self) -> &'static str {
        match self {
            Role::Id => "id",
            Role::Attempt => "attempt",
            Role::RetryAfter => "retry_after",
            Role::LockedUntil => "locked_until",
            Role::ProcessedAt => "processed_at",
            Role::Group => "group",
            Role::CreatedAt => "created_at",
            Role::Payload => "payload",
            Role::Priority => "priority",
            Role::OrderingKey => "ordering_key",
        }
    }
}

/// A queue: a table plus its descriptor. Columns with the default names are
/// detected by the server; name others with [`Queue::column`].
///
/// ```
/// use settle::{Form, Queue, Role};
/// use std::time::Duration;
/// let q = Queue::new("emails", "outbox")
///     .form(Form::Lease { ttl: Duration::from_secs(60) })
///     .dead_letter(5, "outbox_dead")
///     .column(Role::Id, "message_id");
/// assert_eq!(q.name(), "emails");
/// ```
#[derive(Clone, Debug)]
pub struct Queue {
    pub(crate) name: String,
    pub(crate) table: String,
    pub(crate) form: Form,
    pub(crate) dead: Option<(u32, String)>,
    /// the dead letter is a table even though the table has a group column
    pub(crate) dead_table: bool,
    pub(crate) columns: BTreeMap<Role, Option<String>>,
    pub(crate) outcomes: Vec<(String, String)>,
}

impl Queue {
    /// A queue named `name` over `table` (a table name as SQL would resolve it,
    /// optionally schema-qualified), in the lease form with a 30 s lease.
    pub fn new(name: impl Into<String>, table: impl Into<String>) -> Queue {
        Queue {
            name: name.into(),
            table: table.into(),
            form: Form::Lease {
                ttl: Duration::from_secs(30),
            },
            dead: None,
            dead_table: false,
            columns: BTreeMap::new(),
            outcomes: Vec::new(),
        }
    }

    /// The claim form.
    pub fn form(mut self, form: Form) -> Queue {
        self.form = form;
        self
    }

    /// `max_attempts(n)` and `dead_letter(..)`, always together: a retry at the
    /// n-th delivery moves the row to `target` — a group value when the table has
    /// a group column, else a table with the same columns.
    pub fn dead_letter(mut self, max_attempts: u32, target: impl Into<String>) -> Queue {
        self.dead = Some((max_attempts, target.into()));
        self
    }

    /// `max_attempts(n)` with a dead-letter *table* also for a table with a
    /// group column: the layout of a table distributed by its group on Citus,
    /// where moving a row to another group would move it to another shard.
    /// Needs the extension (the portable path keeps a grouped queue's dead
    /// letter in a group).
    pub fn dead_letter_table(mut self, max_attempts: u32, table: impl Into<String>) -> Queue {
        self.dead = Some((max_attempts, table.into()));
        self.dead_table = true;
        self
    }

    /// Name the column that plays `role`.
    pub fn column(mut self, role: Role, column: impl Into<String>) -> Queue {
        self.columns.insert(role, Some(column.into()));
        self
    }

    /// Switch a role off even if a column of its default name exists.
    pub fn without(mut self, role: Role) -> Queue {
        self.columns.insert(role, None);
        self
    }

    /// A custom outcome: `sql` runs instead of the dialect's statement, with
    /// `$1` = the row's id (of the id column's type). Settle with
    /// [`crate::Delivery::custom`].
    pub fn custom_outcome(mut self, name: impl Into<String>, sql: impl Into<String>) -> Queue {
        self.outcomes.push((name.into(), sql.into()));
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The claim form.
    pub fn claim_form(&self) -> Form {
        self.form
    }

    pub(crate) fn columns_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (role, col) in &self.columns {
            m.insert(
                role.key().to_owned(),
                col.clone()
                    .map_or(serde_json::Value::Null, serde_json::Value::String),
            );
        }
        serde_json::Value::Object(m)
    }
}
