//! The operator's view of a database: every queue's counts, dead rows put
//! back or purged, the statements a queue runs — what the `settle` command
//! and its dashboard show — and registering a queue, the table owner's
//! action ([`Admin::register`]), which nothing else does.
//!
//! On PostgreSQL with the settle extension it reads the registry
//! (`queue_stats()` lists every queue). Without the extension (the portable
//! path, any backend) a database has no registry: the queues are the ones
//! described to [`Admin::connect`], each checked against its table as
//! [`Client::portable`] checks it.

use crate::backend::ext::connect::{Connector, Notices, Statements};
use crate::backend::ext::descriptor::{self, Registered};
use crate::backend::ext::{self, admin};
use crate::backend::portable::Dialect;
use crate::client::Client;
use crate::conninfo::{ConnInfo, IntoConnInfo};
use crate::error::{Error, Result};
use crate::pool::PoolOptions;
use crate::queue::Queue;
use crate::stats::{DeadRow, QueueInfo};
use deadpool_postgres::Pool;
use std::time::Duration;

/// Operations on every queue of one database. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    /// PostgreSQL with the extension: its version and a pool
    Ext { pool: Pool, version: String },
    /// the portable path: a client per described queue
    Portable {
        dialect: Dialect,
        queues: Vec<Client>,
    },
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// Connect to `url` (`postgres://` or a libpq `key=value` string,
    /// `mysql://` / `mariadb://`, `sqlite://`) with at most `pool_size`
    /// connections. PostgreSQL with the settle extension installed is read
    /// through it (and `described` is not needed); otherwise the portable
    /// path serves the queues in `described`, and none is an error. An
    /// extension older than [`crate::EXTENSION_VERSION`] is
    /// [`Error::Extension`]. TLS follows the URL's `sslmode` (libpq's rules
    /// on PostgreSQL, `ssl-mode` on MariaDB/MySQL).
    pub async fn connect(url: &str, pool_size: usize, described: Vec<Queue>) -> Result<Admin> {
        let dialect = match Dialect::from_url(url) {
            Some((d, _)) => d,
            // a libpq key=value string
            None if url.contains('=') && !url.contains("://") => Dialect::Postgres,
            None => {
                return Err(Error::invalid(format!(
                    "unsupported database URL {url:?}: use postgres://, mysql://, mariadb:// or sqlite://"
                )))
            }
        };
        if dialect == Dialect::Postgres {
            match Admin::postgres(url, pool_size).await {
                Ok(admin) => return Ok(admin),
                // no extension: the portable path
                Err(Error::Extension {
                    installed: None, ..
                }) => {}
                Err(e) => return Err(e),
            }
        }
        if described.is_empty() {
            return Err(Error::invalid(format!(
                "{} has no queue registry without the settle extension: describe the queues (settle --queue NAME=TABLE, Admin::connect's described)",
                dialect.name()
            )));
        }
        let pool = u32::try_from(pool_size.max(1)).unwrap_or(u32::MAX);
        let mut queues = Vec::with_capacity(described.len());
        for q in described {
            queues.push(Client::portable(url, pool, q).await?);
        }
        Ok(Admin {
            inner: Inner::Portable { dialect, queues },
        })
    }

    /// PostgreSQL with the settle extension, through at most `pool_size`
    /// connections: `conn` as [`Client::connect`] takes it (a connection
    /// string, a [`crate::ConnInfo`], a `tokio_postgres::Config`).
    /// [`Error::Extension`] without the extension or with an older one.
    pub async fn postgres(conn: impl IntoConnInfo, pool_size: usize) -> Result<Admin> {
        let info: ConnInfo = conn.into_conn_info()?;
        let opts = PoolOptions::new(pool_size);
        let pool = Connector::new(&info, &opts)?.pool(&opts, Notices::default())?;
        let c = pool.get().await?;
        let version = ext::check_version(&c, Statements::Unnamed).await?;
        drop(c);
        Ok(Admin {
            inner: Inner::Ext { pool, version },
        })
    }

    /// What serves the queues, for people: `PostgreSQL with the settle
    /// extension 0.6.0`, `mysql (portable path)`, ….
    pub fn backend(&self) -> String {
        match &self.inner {
            Inner::Ext { version, .. } => format!("PostgreSQL with the settle extension {version}"),
            Inner::Portable { dialect, .. } => format!("{} (portable path)", dialect.name()),
        }
    }

    /// Whether the settle extension serves the queues.
    pub fn uses_extension(&self) -> bool {
        matches!(self.inner, Inner::Ext { .. })
    }

    /// Register `queue` and its custom outcomes, or change its registration
    /// to them — the table owner's action (workers connect as any role with
    /// the table's privileges, and only check the registration). Says what
    /// it did; with `Changed`, what differed. The portable path has no
    /// registry: [`Error::Unsupported`].
    pub async fn register(&self, queue: &Queue) -> Result<Registered> {
        match &self.inner {
            Inner::Ext { pool, .. } => {
                let c = pool.get().await?;
                descriptor::register(&c, Statements::Unnamed, queue).await
            }
            Inner::Portable { dialect, .. } => Err(Error::unsupported(format!(
                "{} has no queue registry without the settle extension: a queue is described \
                 to each client instead",
                dialect.name()
            ))),
        }
    }

    /// Every queue with its counts, in name order.
    pub async fn queues(&self) -> Result<Vec<QueueInfo>> {
        match &self.inner {
            Inner::Ext { pool, .. } => admin::queues(pool).await,
            Inner::Portable { queues, .. } => {
                let mut out = Vec::with_capacity(queues.len());
                for c in queues {
                    out.push(QueueInfo {
                        name: c.queue().name.clone(),
                        form: c.queue().form.sql_name().to_owned(),
                        stats: c.stats().await?,
                    });
                }
                out.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(out)
            }
        }
    }

    fn client(&self, queues: &[Client], queue: &str) -> Result<Client> {
        queues
            .iter()
            .find(|c| c.queue().name == queue)
            .cloned()
            .ok_or_else(|| {
                Error::unknown_queue(format!(
                    "queue \"{queue}\" is not among the described queues"
                ))
            })
    }

    /// A queue's dead rows in id order: at most `limit`, or those with `ids`.
    pub async fn dead_rows(
        &self,
        queue: &str,
        limit: i64,
        ids: Option<&[String]>,
    ) -> Result<Vec<DeadRow>> {
        match &self.inner {
            Inner::Ext { pool, .. } => admin::dead_rows(pool, queue, limit, ids).await,
            Inner::Portable { queues, .. } => {
                let c = self.client(queues, queue)?;
                match ids {
                    Some(ids) => c.dead_rows_with_ids(ids).await,
                    None => c.dead_rows(limit).await,
                }
            }
        }
    }

    /// Move a queue's dead rows (`ids`, or all) back, attempt reset; how many.
    pub async fn requeue_dead(&self, queue: &str, ids: Option<&[String]>) -> Result<i64> {
        match &self.inner {
            Inner::Ext { pool, .. } => admin::requeue_dead(pool, queue, ids).await,
            Inner::Portable { queues, .. } => {
                let c = self.client(queues, queue)?;
                match ids {
                    Some(ids) => c.requeue_dead_ids(ids).await,
                    None => c.requeue_dead().await,
                }
            }
        }
    }

    /// Delete a queue's dead rows created more than `older_than` ago and/or
    /// with `ids` (see [`Client::purge_dead`]); how many.
    pub async fn purge_dead(
        &self,
        queue: &str,
        older_than: Option<Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        match &self.inner {
            Inner::Ext { pool, .. } => admin::purge_dead(pool, queue, older_than, ids).await,
            Inner::Portable { queues, .. } => {
                self.client(queues, queue)?
                    .purge_dead(older_than, ids)
                    .await
            }
        }
    }

    /// The statements settle runs for a queue, named.
    pub async fn statements(&self, queue: &str) -> Result<Vec<(String, String)>> {
        match &self.inner {
            Inner::Ext { pool, .. } => admin::statements(pool, queue).await,
            Inner::Portable { queues, .. } => self.client(queues, queue)?.statements().await,
        }
    }
}
