//! The portable SQL path: the same semantics without the extension, on
//! PostgreSQL, MariaDB/MySQL and SQLite (sqlx).

pub(crate) mod dialect;
pub(crate) mod engine;

pub use dialect::Dialect;
