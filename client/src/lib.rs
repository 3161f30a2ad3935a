//! # settle
//!
//! Claim rows from a queue kept in an ordinary SQL table, run a handler, and
//! settle each delivery with an outcome: [`Delivery::ack`], [`Delivery::drop_it`],
//! [`Delivery::retry`], [`Delivery::retry_after`], [`Delivery::custom`] — or let
//! the dead letter take it when the attempt counter reaches `max_attempts`.
//!
//! On PostgreSQL it talks to the `settle` extension (`CREATE EXTENSION
//! settle`), which claims and settles in one statement each, with its own
//! SQLSTATEs mapped to [`Error`] kinds; elsewhere ([`Client::portable`]:
//! MariaDB/MySQL, SQLite, PostgreSQL without the extension) it runs the same
//! contract in SQL of its own. Connections take libpq's connection strings
//! and TLS settings ([`ConnInfo`]). A worker only checks that its queue is
//! registered as its [`Queue`] says; the table's owner registers it
//! ([`Admin::register`]).
//!
//! ```no_run
//! use settle::{Client, Form, Queue, WorkerOptions};
//! use std::time::Duration;
//!
//! # async fn demo() -> settle::Result<()> {
//! let queue = Queue::new("emails", "outbox")
//!     .form(Form::Lease { ttl: Duration::from_secs(60) })
//!     .dead_letter(5, "outbox_dead");
//! let client = Client::connect("host=db dbname=app user=worker sslmode=verify-full sslrootcert=system", 16, queue).await?;
//! let report = client
//!     .run(WorkerOptions::default(), tokio::signal::ctrl_c().map(|_| ()), |d| async move {
//!         match send(d.payload_json()).await {
//!             Ok(()) => d.ack().await,
//!             Err(_) => {
//!                 let backoff = Duration::from_secs(2u64.pow(d.attempt().min(10)));
//!                 d.retry_after(backoff).await
//!             }
//!         }
//!     })
//!     .await?;
//! # Ok(()) }
//! # async fn send(_: &serde_json::Value) -> Result<(), ()> { Ok(()) }
//! # use futures_util::FutureExt;
//! ```

#![warn(missing_docs)]

// Dependencies point one way: admin, worker → client → delivery → backend →
// backend::{ext, portable} → backend::{hold, combine} → the leaves (outcome,
// queue, pool, stats, conninfo → tls, error). docs/architecture.md has the map.
mod admin;
mod backend;
mod client;
mod conninfo;
mod delivery;
mod error;
pub mod meters;
mod outcome;
mod payload;
mod pool;
mod queue;
mod stats;
mod tls;
mod worker;

pub use admin::Admin;
pub use backend::{
    AnyConn, Capabilities, Dialect, Difference, Edition, Registered, EXTENSION_VERSION,
};
pub use client::Client;
pub use conninfo::{ConnInfo, IntoConnInfo};
pub use delivery::Delivery;
pub use error::{DbError, Error, Result};
pub use outcome::{Outcome, Settled};
pub use pool::PoolOptions;
pub use queue::{Form, Queue, Role};
pub use stats::{DeadRow, Health, HorizonHolder, QueueInfo, Stats};
pub use worker::{HandlerResult, QueueSet, WorkerOptions, WorkerReport};

/// Re-exported so callers can build a connection config without naming the driver crate.
pub use tokio_postgres;
