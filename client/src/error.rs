//! One error type; its kinds mirror the extension's SQLSTATEs (SPEC §4).

use std::fmt;

/// A database-side failure, with the SQLSTATE when the server sent one.
#[derive(Debug)]
pub struct DbError {
    /// SQLSTATE, e.g. `SQ001` or `40001`.
    pub code: Option<String>,
    /// The server's (or driver's) message.
    pub message: String,
    pub(crate) source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(c) => write!(f, "{} ({c})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Everything that can go wrong, by kind. Match on the kind; the message is for humans.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQ001: the lease expired and the row was claimed again (or settled); the
    /// later delivery owns it. Nothing was written.
    #[error("lease lost: {0}")]
    LeaseLost(DbError),
    /// SQ006: the row is not held by this session (advisory key not held, or not
    /// claimed by this transaction). Nothing was written.
    #[error("not held: {0}")]
    NotHeld(DbError),
    /// SQ002: no queue of that name is registered.
    #[error("unknown queue: {0}")]
    UnknownQueue(DbError),
    /// SQ003: the descriptor is invalid (column missing, wrong type, dead letter mismatch, …).
    #[error("invalid descriptor: {0}")]
    InvalidDescriptor(DbError),
    /// SQ004 (or a client-side check): an argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(DbError),
    /// SQ005: a row_lock call outside a transaction.
    #[error("no transaction: {0}")]
    NoTransaction(DbError),
    /// Any other database error (permissions, connection, timeouts, …), with its SQLSTATE.
    #[error("database: {0}")]
    Database(DbError),
    /// No pooled connection became free within [`crate::PoolOptions::wait_timeout`]:
    /// every connection is busy (live row_lock/advisory deliveries each keep one).
    /// Nothing was claimed or written by the call.
    #[error("pool timeout: {0}")]
    PoolTimeout(DbError),
    /// No connection could be had from the pool (closed pool, connect timeout, …).
    #[error("pool: {0}")]
    Pool(#[source] deadpool_postgres::PoolError),
    /// The database has no settle extension, or one older than this client
    /// needs ([`crate::EXTENSION_VERSION`]): found at connect, before anything
    /// is written. `ALTER EXTENSION settle UPDATE` (or `CREATE EXTENSION settle`)
    /// fixes it; [`crate::Client::portable`] needs no extension.
    #[error("{}", extension_message(.installed.as_deref(), .required))]
    Extension {
        /// `pg_extension.extversion`, or `None` when the extension is not installed
        installed: Option<String>,
        /// the oldest extension version this client works with
        required: &'static str,
    },
    /// The payload is not valid for the type the handler asked for.
    #[error("payload: {0}")]
    Payload(#[source] serde_json::Error),
}

fn extension_message(installed: Option<&str>, required: &str) -> String {
    match installed {
        None => format!(
            "the settle extension is not installed in this database: this client needs \
             settle {required} or later (CREATE EXTENSION settle), or Client::portable"
        ),
        Some(v) => format!(
            "the settle extension in this database is version {v}: this client needs \
             {required} or later (ALTER EXTENSION settle UPDATE)"
        ),
    }
}

impl Error {
    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(DbError {
            code: None,
            message: msg.into(),
            source: None,
        })
    }

    /// Every pooled connection stayed busy for the wait timeout (either backend's pool).
    pub(crate) fn pool_timeout(source: Box<dyn std::error::Error + Send + Sync>) -> Error {
        Error::PoolTimeout(DbError {
            code: None,
            message: "no pooled connection became free in time: every connection is held \
                      (by live row_lock/advisory deliveries or other work); raise the pool \
                      size or lower the concurrency"
                .into(),
            source: Some(source),
        })
    }

    /// The SQLSTATE of a database-side error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::LeaseLost(e)
            | Error::NotHeld(e)
            | Error::UnknownQueue(e)
            | Error::InvalidDescriptor(e)
            | Error::InvalidArgument(e)
            | Error::NoTransaction(e)
            | Error::PoolTimeout(e)
            | Error::Database(e) => e.code.as_deref(),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        let (code, message) = match e.as_db_error() {
            Some(db) => (Some(db.code().code().to_owned()), db.message().to_owned()),
            None => (e.code().map(|c| c.code().to_owned()), e.to_string()),
        };
        let kind = code.clone();
        let db = DbError {
            code,
            message,
            source: Some(Box::new(e)),
        };
        match kind.as_deref() {
            Some("SQ001") => Error::LeaseLost(db),
            Some("SQ002") => Error::UnknownQueue(db),
            Some("SQ003") => Error::InvalidDescriptor(db),
            Some("SQ004") => Error::InvalidArgument(db),
            Some("SQ005") => Error::NoTransaction(db),
            Some("SQ006") => Error::NotHeld(db),
            _ => Error::Database(db),
        }
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Error {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => {
                Error::pool_timeout(Box::new(e))
            }
            e => Error::Pool(e),
        }
    }
}

/// The result of every settle call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
