//! The operator's view of a database: every queue's counts, dead rows put
//! back or purged, the statements a queue runs — what the `settle` command
//! and its dashboard show — and registering a queue, the table owner's
//! action ([`Admin::register`]), which nothing else does.
//!
//! On PostgreSQL with the settle extension it reads the registry
//! (`queue_stats()` lists every queue). Without the extension (the portable
//! path, any backend) a database has no registry: the queues are the ones
//! described to [`Admin::connect`], each checked against its table as
//! [`Client::portable`](crate::Client::portable) checks it.

use crate::backend::{Dialect, Registered, Registry};
use crate::conninfo::IntoConnInfo;
use crate::error::{Error, Result};
use crate::queue::Queue;
use crate::stats::{DeadRow, Health, QueueInfo};
use std::time::Duration;

/// Operations on every queue of one database. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    registry: Registry,
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
        Ok(Admin {
            registry: Registry::described(url, dialect, pool_size, described).await?,
        })
    }

    /// PostgreSQL with the settle extension, through at most `pool_size`
    /// connections: `conn` as [`Client::connect`](crate::Client::connect) takes it (a connection
    /// string, a [`crate::ConnInfo`], a `tokio_postgres::Config`).
    /// [`Error::Extension`] without the extension or with an older one.
    pub async fn postgres(conn: impl IntoConnInfo, pool_size: usize) -> Result<Admin> {
        Ok(Admin {
            registry: Registry::postgres(conn.into_conn_info()?, pool_size).await?,
        })
    }

    /// What serves the queues, for people: `PostgreSQL with the settle
    /// extension 0.6.0`, `mysql (portable path)`, ….
    pub fn backend(&self) -> String {
        self.registry.describe()
    }

    /// Whether the settle extension serves the queues.
    pub fn uses_extension(&self) -> bool {
        self.registry.uses_extension()
    }

    /// Register `queue` and its custom outcomes, or change its registration
    /// to them — the table owner's action (workers connect as any role with
    /// the table's privileges, and only check the registration). Says what
    /// it did; with `Changed`, what differed. The portable path has no
    /// registry: [`Error::Unsupported`].
    pub async fn register(&self, queue: &Queue) -> Result<Registered> {
        self.registry.register(queue).await
    }

    /// Every queue with its counts, in name order.
    pub async fn queues(&self) -> Result<Vec<QueueInfo>> {
        self.registry.queues().await
    }

    /// Every queue's table health — dead row versions, sizes, last vacuum —
    /// and the oldest holder of the xmin horizon, in name order
    /// (`queue_health`: extension 0.7.0 or later; [`Error::Extension`] with
    /// an older one, [`Error::Unsupported`] on the portable path).
    pub async fn health(&self) -> Result<Vec<Health>> {
        self.registry.health().await
    }

    /// A queue's dead rows in id order: at most `limit`, or those with `ids`.
    pub async fn dead_rows(
        &self,
        queue: &str,
        limit: i64,
        ids: Option<&[String]>,
    ) -> Result<Vec<DeadRow>> {
        self.registry.dead_rows(queue, limit, ids).await
    }

    /// Move a queue's dead rows (`ids`, or all) back, attempt reset; how many.
    pub async fn requeue_dead(&self, queue: &str, ids: Option<&[String]>) -> Result<i64> {
        self.registry.requeue_dead(queue, ids).await
    }

    /// Delete a queue's dead rows created more than `older_than` ago and/or
    /// with `ids` (see [`Client::purge_dead`](crate::Client::purge_dead)); how many.
    pub async fn purge_dead(
        &self,
        queue: &str,
        older_than: Option<Duration>,
        ids: Option<&[String]>,
    ) -> Result<i64> {
        self.registry.purge_dead(queue, older_than, ids).await
    }

    /// The statements settle runs for a queue, named.
    pub async fn statements(&self, queue: &str) -> Result<Vec<(String, String)>> {
        self.registry.statements(queue).await
    }
}
