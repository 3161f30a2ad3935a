//! A queue's registration on the extension backend: compared at connect (any
//! role may read the registry, so a worker needs no ownership), written only
//! when the table's owner asks ([`crate::Admin::register`]).

use super::connect::{Statements, Stmt};
use super::sql::{
    DIFFERENCES, IS_REGISTERED, REGISTER, REGISTERED, REGISTER_OUTCOME, TABLE_EXISTS,
};
use crate::error::{Error, Result};
use crate::queue::Queue;
use deadpool_postgres::Object;
use std::collections::BTreeMap;

/// One way a queue's registration differs from the [`Queue`] a client was
/// built with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// What differs: `tbl`, `form`, `max_attempts`, `dead_letter`,
    /// `columns.<role>` or `outcomes.<name>`.
    pub field: String,
    /// As registered (`None`: not set).
    pub registered: Option<String>,
    /// As the client has it (`None`: not set).
    pub given: Option<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        write!(
            f,
            "{}: registered {}, this client {}",
            self.field,
            show(&self.registered),
            show(&self.given)
        )
    }
}

/// What [`crate::Admin::register`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registered {
    /// The queue was not registered; now it is.
    Created,
    /// The registration was changed; these were the differences.
    Changed(Vec<Difference>),
    /// It was registered like this already; nothing was written.
    Unchanged,
}

/// The registry row of a queue that matches its client: whether its table
/// has a retry_after column.
pub(crate) struct Checked {
    pub has_retry_after: bool,
}

/// Run `stmt` (`queue_register` or `queue_differences`) with `queue`'s
/// descriptor as its arguments.
async fn with_descriptor(
    c: &Object,
    st: Statements,
    stmt: &Stmt,
    queue: &Queue,
) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let max = queue
        .dead
        .as_ref()
        .map(|(n, _)| i32::try_from(*n).unwrap_or(i32::MAX));
    let target = queue.dead.as_ref().map(|(_, d)| d.as_str());
    let (dl, dlt) = if queue.dead_table {
        (None, target)
    } else {
        (target, None)
    };
    let columns = queue.columns_json();
    let form = queue.form.sql_name();
    st.query(
        c,
        stmt,
        &[&queue.name, &queue.table, &form, &max, &dl, &columns, &dlt],
    )
    .await
}

async fn table_exists(c: &Object, st: Statements, queue: &Queue) -> Result<()> {
    // (to_regclass: a clear SQ003 rather than the regclass cast's 42P01)
    let exists: bool = st
        .query_one(c, &TABLE_EXISTS, &[&queue.table])
        .await?
        .get(0);
    if exists {
        Ok(())
    } else {
        Err(Error::descriptor(format!(
            "table {} does not exist",
            queue.table
        )))
    }
}

/// How the registration of `queue` differs from it (descriptor and custom
/// outcomes); [`Error::UnknownQueue`] when it is not registered.
async fn differences(c: &Object, st: Statements, queue: &Queue) -> Result<Vec<Difference>> {
    table_exists(c, st, queue).await?;
    let rows = with_descriptor(c, st, &DIFFERENCES, queue).await;
    let rows = match rows {
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::from_code("SQ002")) => {
            return Err(Error::unknown_queue(format!(
                "queue \"{}\" is not registered: the owner of its table registers it \
                 (settle::Admin::register, `settle register`, or queue_register in SQL)",
                queue.name
            )))
        }
        r => r?,
    };
    let mut out: Vec<Difference> = rows
        .iter()
        .map(|r| Difference {
            field: r.get(0),
            registered: r.get(1),
            given: r.get(2),
        })
        .collect();
    let registered = outcomes(c, st, queue).await?.1;
    for (name, sql) in &queue.outcomes {
        let have = registered.get(name);
        if have != Some(sql) {
            out.push(Difference {
                field: format!("outcomes.{name}"),
                registered: have.cloned(),
                given: Some(sql.clone()),
            });
        }
    }
    Ok(out)
}

/// The registry's retry_after fact and custom outcomes of `queue`.
async fn outcomes(
    c: &Object,
    st: Statements,
    queue: &Queue,
) -> Result<(bool, BTreeMap<String, String>)> {
    let r = st.query_one(c, &REGISTERED, &[&queue.name]).await?;
    let outcomes: String = r.get(1);
    let map = serde_json::from_str(&outcomes)
        .map_err(|e| Error::database(None, format!("the registry's outcomes: {e}")))?;
    Ok((r.get(0), map))
}

/// Connect's check: `queue` is registered as the client describes it.
/// Writes nothing.
pub(crate) async fn check(c: &Object, st: Statements, queue: &Queue) -> Result<Checked> {
    let diff = differences(c, st, queue).await?;
    if !diff.is_empty() {
        return Err(Error::RegisteredDifferently {
            queue: queue.name.clone(),
            differences: diff,
        });
    }
    let (has_retry_after, _) = outcomes(c, st, queue).await?;
    Ok(Checked { has_retry_after })
}

/// Register `queue` and its custom outcomes, or change its registration to
/// them, in one transaction: the table's owner's action.
pub(crate) async fn register(c: &Object, st: Statements, queue: &Queue) -> Result<Registered> {
    c.batch_execute("BEGIN").await?;
    let r = async {
        // (asked first: queue_differences' SQ002 would abort the transaction)
        let known: bool = st
            .query_one(c, &IS_REGISTERED, &[&queue.name])
            .await?
            .get(0);
        let before = if known {
            match differences(c, st, queue).await? {
                d if d.is_empty() => return Ok(Registered::Unchanged),
                d => Registered::Changed(d),
            }
        } else {
            table_exists(c, st, queue).await?;
            Registered::Created
        };
        with_descriptor(c, st, &REGISTER, queue).await?;
        for (name, sql) in &queue.outcomes {
            st.query(c, &REGISTER_OUTCOME, &[&queue.name, name, sql])
                .await?;
        }
        Ok(before)
    }
    .await;
    match r {
        Ok(done) => {
            c.batch_execute("COMMIT").await?;
            Ok(done)
        }
        Err(e) => {
            // the error that matters is the one above
            let _ = c.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}
