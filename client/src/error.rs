//! One error type; its kinds mirror the extension's SQLSTATEs (docs/sql-reference.md, "Errors").

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
    /// No connection could be had from the pool (closed pool, connect timeout,
    /// …); the pool's own error is the `source()`.
    #[error("pool: {0}")]
    Pool(DbError),
    /// The backend cannot do this (an operation of the extension on the
    /// portable path, an advisory lock on SQLite, …). Nothing was written.
    #[error("unsupported: {0}")]
    Unsupported(DbError),
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
    /// The queue is registered with another descriptor than the client's
    /// [`crate::Queue`] (found at connect, before anything is written): the
    /// differences are listed. Connecting never changes a registration; the
    /// table's owner does, with [`crate::Admin::register`] (or
    /// `settle register`, or `queue_register` in SQL).
    #[error("{}", registered_differently(.queue, .differences))]
    RegisteredDifferently {
        /// the queue's name
        queue: String,
        /// each field that differs
        differences: Vec<crate::Difference>,
    },
    /// The payload is not valid for the type the handler asked for.
    #[error("payload: {0}")]
    Payload(#[source] serde_json::Error),
}

fn registered_differently(queue: &str, differences: &[crate::Difference]) -> String {
    let list: Vec<String> = differences.iter().map(|d| d.to_string()).collect();
    format!(
        "queue \"{queue}\" is registered differently: {}. Describe the queue as registered, \
         or have the table's owner register the change (settle::Admin::register, \
         `settle register`, or queue_register in SQL)",
        list.join("; ")
    )
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

impl DbError {
    /// An error of the client's own, with the SQLSTATE it stands for (if any).
    fn own(code: Option<&str>, message: String) -> DbError {
        DbError {
            code: code.map(str::to_owned),
            message,
            source: None,
        }
    }
}

/// One constructor per kind the client raises itself, so each has one message.
impl Error {
    /// SQ004 checked by the client (an argument, a call in the wrong form).
    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(DbError::own(None, msg.into()))
    }

    /// SQ003 checked by the client (the portable path's descriptor checks).
    pub(crate) fn descriptor(msg: impl Into<String>) -> Error {
        Error::InvalidDescriptor(DbError::own(None, msg.into()))
    }

    /// SQ001: `id` of `queue` no longer holds the delivery's lease token.
    pub(crate) fn lease_lost(queue: &str, id: &str) -> Error {
        Error::LeaseLost(DbError::own(
            Some("SQ001"),
            format!("row {id} of queue \"{queue}\" no longer holds this delivery's token"),
        ))
    }

    /// SQ006: `id` of `queue` is not held by this delivery's session or claim.
    pub(crate) fn not_held(queue: &str, id: &str) -> Error {
        Error::NotHeld(DbError::own(
            Some("SQ006"),
            format!("row {id} of queue \"{queue}\" is not held by this delivery's session"),
        ))
    }

    /// SQ002 checked by the client: no queue of that name is known.
    pub(crate) fn unknown_queue(msg: impl Into<String>) -> Error {
        Error::UnknownQueue(DbError::own(Some("SQ002"), msg.into()))
    }

    /// What this backend cannot do.
    pub(crate) fn unsupported(msg: impl Into<String>) -> Error {
        Error::Unsupported(DbError::own(None, msg.into()))
    }

    /// A failure of the database or the connection that the client reports
    /// itself (a rolled-back claim, a batch that wrote nothing), keeping the
    /// SQLSTATE of the cause when it had one.
    pub(crate) fn database(code: Option<&str>, msg: impl Into<String>) -> Error {
        Error::Database(DbError::own(code, msg.into()))
    }

    /// A result word the extension sent that this client does not know.
    pub(crate) fn unexpected_result(word: &str) -> Error {
        Error::database(
            None,
            format!(
                "the extension answered {word:?}, which this client does not know: \
                 are the client and the extension of matching versions?"
            ),
        )
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

    /// Whether the server turned the statement down for a reason that passes,
    /// so that the same call may succeed if run again: a connection between
    /// nodes lost or a server shutting down or starting up (SQLSTATE class
    /// `08`, `57P01`–`57P03`), no connection slot free (`53300`), a
    /// serialization failure (`40001`) or a deadlock (`40P01`). The server's error means the transaction rolled back and
    /// nothing was written. A connection to this client lost mid-call is not
    /// transient: whether it was written is not known.
    pub fn is_transient(&self) -> bool {
        let Error::Database(e) = self else {
            return false;
        };
        let from_server = e.source.as_deref().is_some_and(|s| {
            s.downcast_ref::<tokio_postgres::Error>()
                .is_some_and(|e| e.as_db_error().is_some())
                || s.downcast_ref::<sqlx::Error>()
                    .is_some_and(|e| e.as_database_error().is_some())
        });
        from_server
            && e.code.as_deref().is_some_and(|c| {
                c.starts_with("08")
                    || matches!(c, "40001" | "40P01" | "53300" | "57P01" | "57P02" | "57P03")
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
            Error::Pool(e) | Error::Unsupported(e) => e.code.as_deref(),
            Error::RegisteredDifferently { .. } => Some("SQ003"),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        let (code, message) = match e.as_db_error() {
            Some(db) => (Some(db.code().code().to_owned()), db.message().to_owned()),
            None => (
                e.code().map(|c| c.code().to_owned()),
                handshake_failure(&e).unwrap_or_else(|| e.to_string()),
            ),
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
            e => Error::Pool(DbError {
                code: None,
                message: e.to_string(),
                source: Some(Box::new(e)),
            }),
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Error {
        if matches!(e, sqlx::Error::PoolTimedOut) {
            return Error::pool_timeout(Box::new(e));
        }
        let (code, message) = match e.as_database_error() {
            Some(d) => (d.code().map(|c| c.into_owned()), d.message().to_owned()),
            None => (None, handshake_failure(&e).unwrap_or_else(|| e.to_string())),
        };
        Error::Database(DbError {
            code,
            message,
            source: Some(Box::new(e)),
        })
    }
}

/// What a failed TLS handshake means, for people: the rustls error somewhere
/// in `e`'s sources, named by its cause.
pub(crate) fn handshake_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(describe(r));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Some(describe(r));
            }
        }
        cur = err.source();
    }
    None
}

fn describe(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => format!(
            "TLS: the server's certificate is not signed by a trusted root certificate \
             (sslrootcert) [{e}]"
        ),
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "TLS: the server's certificate is not valid for the host name connected to \
             (sslmode=verify-full checks it) [{e}]"
        ),
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. },
        ) => format!("TLS: the server's certificate has expired [{e}]"),
        _ => format!("TLS: {e}"),
    }
}

/// The result of every settle call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
