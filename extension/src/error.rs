//! Product errors and their SQLSTATEs (docs/sql-reference.md, "Errors").
//!
//! pgrx re-raises every error that crosses its guard with a code from its closed
//! `PgSqlErrorCode` list, and maps any code it does not know to XX000. Our
//! SQLSTATEs (`SQ001`…`SQ006`) are not on that list, so they are raised here,
//! directly through `errstart`/`errfinish`, and only from the top of an entry
//! point (`api/`), after every Rust value of the call has been dropped and SPI
//! has been left: the longjmp then skips only frames with nothing to drop.
//! Errors raised by PostgreSQL itself inside SPI (permissions, constraint
//! violations, timeouts…) keep travelling through pgrx with their own codes.

use std::ffi::{c_char, c_int, CString};

/// One failure of a settle call, with the SQLSTATE it is raised with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettleError {
    /// SQ001: the row no longer holds this delivery's lease token.
    LeaseLost(String),
    /// SQ002: no queue of that name is registered.
    UnknownQueue(String),
    /// SQ003: the descriptor is invalid (column missing, wrong type, dead letter mismatch, …).
    InvalidDescriptor(String),
    /// SQ004: an outcome or argument is invalid.
    InvalidArgument(String),
    /// SQ005: a row_lock call outside an open transaction block.
    NoTransaction(String),
    /// SQ006: the row is not held by this session / transaction.
    NotHeld(String),
}

pub type Result<T> = std::result::Result<T, SettleError>;

impl SettleError {
    pub fn sqlstate(&self) -> &'static str {
        match self {
            SettleError::LeaseLost(_) => "SQ001",
            SettleError::UnknownQueue(_) => "SQ002",
            SettleError::InvalidDescriptor(_) => "SQ003",
            SettleError::InvalidArgument(_) => "SQ004",
            SettleError::NoTransaction(_) => "SQ005",
            SettleError::NotHeld(_) => "SQ006",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            SettleError::LeaseLost(m)
            | SettleError::UnknownQueue(m)
            | SettleError::InvalidDescriptor(m)
            | SettleError::InvalidArgument(m)
            | SettleError::NoTransaction(m)
            | SettleError::NotHeld(m) => m,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            SettleError::LeaseLost(_) => Some(
                "The lease expired and the row was claimed again (or settled); the later delivery owns it now.",
            ),
            SettleError::UnknownQueue(_) => Some("Register it first with queue_register(...) or queue_create(...)."),
            SettleError::NoTransaction(_) => Some(
                "row_lock deliveries live in the claim transaction: BEGIN; SELECT * FROM queue_claim(...); ... SELECT queue_complete(...); COMMIT;",
            ),
            SettleError::NotHeld(_) => Some(
                "Only the transaction (row_lock) or server session (advisory) that claimed a row can settle it. Behind a transaction-pooling proxy such as pgbouncer pool_mode=transaction, an advisory completion can reach another server session: use session pooling or the lease form.",
            ),
            _ => None,
        }
    }

    /// Raise this error as an ERROR with its SQLSTATE. Never returns.
    pub fn raise(self) -> ! {
        let code = make_sqlstate(self.sqlstate());
        let msg = format!("settle: {}", self.message());
        let hint = self.hint().map(str::to_owned);
        drop(self);
        raise(code, msg, None, hint)
    }
}

/// Raise an ERROR with PostgreSQL's SQLSTATE `code` (five characters) and
/// `message`. Never returns.
pub fn raise_sqlstate(code: &str, message: String) -> ! {
    raise(make_sqlstate(code), message, None, None)
}

/// Raise an ERROR with this SQLSTATE, message, detail and hint. Never returns.
/// It takes the text by value and frees it before errfinish longjmps, so a
/// caller that moves everything it owns in leaves no destructor behind.
fn raise(code: c_int, message: String, detail: Option<String>, hint: Option<String>) -> ! {
    let msg = cstring(&message);
    let detail = detail.map(|d| cstring(&d));
    let hint = hint.map(|h| cstring(&h));
    drop(message);
    unsafe {
        if errstart(pgrx::PgLogLevel::ERROR as c_int, std::ptr::null()) {
            errcode(code);
            errmsg(c"%s".as_ptr(), msg.as_ptr());
            if let Some(d) = &detail {
                errdetail(c"%s".as_ptr(), d.as_ptr());
            }
            if let Some(h) = &hint {
                errhint(c"%s".as_ptr(), h.as_ptr());
            }
            // err* copied the text into ErrorContext: free ours now, because
            // nothing after errfinish runs.
            drop(msg);
            drop(detail);
            drop(hint);
            errfinish(c"settle".as_ptr(), 0, c"settle".as_ptr());
        }
    }
    // errstart(ERROR) always returns true and errfinish(ERROR) never returns.
    unreachable!("errfinish returned for an ERROR")
}

/// SQLSTATE of the WARNING for a row a retry moved to the dead letter at
/// max_attempts (the settle's result says `dead_lettered` too).
pub const DEAD_LETTERED_AT_SETTLE: &str = "01SQ1";
/// SQLSTATE of the WARNING for a row a claim moved to the dead letter instead
/// of delivering it: its last delivery, at max_attempts, ended without an
/// outcome (a crash loop). The warning is the only report of such a move.
pub const DEAD_LETTERED_AT_CLAIM: &str = "01SQ2";

/// Report a WARNING with settle's own SQLSTATE `code` (pgrx's `warning!`
/// knows only PostgreSQL's codes).
pub fn warn(code: &str, message: &str) {
    let code = make_sqlstate(code);
    let msg = cstring(message);
    unsafe {
        if errstart(pgrx::PgLogLevel::WARNING as c_int, std::ptr::null()) {
            errcode(code);
            errmsg(c"%s".as_ptr(), msg.as_ptr());
            errfinish(c"settle".as_ptr(), 0, c"settle".as_ptr());
        }
    }
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).expect("NUL bytes were replaced")
}

/// PostgreSQL's MAKE_SQLSTATE: five characters packed six bits each.
fn make_sqlstate(code: &str) -> c_int {
    code.bytes().enumerate().fold(0, |acc, (i, ch)| {
        acc + ((((ch - b'0') & 0x3F) as c_int) << (6 * i))
    })
}

// Not in pgrx's bindings on purpose (pgrx keeps them private); declared here for
// the one deliberate use above.
unsafe extern "C-unwind" {
    fn errstart(elevel: c_int, domain: *const c_char) -> bool;
    fn errcode(sqlerrcode: c_int) -> c_int;
    fn errmsg(fmt: *const c_char, ...) -> c_int;
    fn errdetail(fmt: *const c_char, ...) -> c_int;
    fn errhint(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

thread_local! {
    /// The SQLSTATE of the last report PostgreSQL made inside an entry point
    /// (see [`entry`]), as `MAKE_SQLSTATE` packs it; 0 when none.
    static LAST_CODE: std::cell::Cell<c_int> = const { std::cell::Cell::new(0) };
}

/// Error context callback: PostgreSQL calls it while it reports an error (or
/// a notice) raised under an entry point, before unwinding; it notes the
/// report's SQLSTATE.
unsafe extern "C-unwind" fn note_code(_arg: *mut std::ffi::c_void) {
    let code = unsafe { pgrx::pg_sys::geterrcode() };
    LAST_CODE.with(|c| c.set(code));
}

/// Run the body of an SQL-callable function and raise what it failed with.
///
/// - A product error: its SQLSTATE (`SQ001`…), message and hint.
/// - An error PostgreSQL raised inside SPI (permissions, constraints, a custom
///   outcome's own `RAISE`, a nested settle call): the SQLSTATE it was raised
///   with, its message, detail and hint. pgrx alone would re-raise it with a
///   code from its closed list (any other code, `SQ003` included, as XX000)
///   and append a Rust backtrace to its DETAIL when the server's environment
///   asks for backtraces; the code is noted by an error context callback
///   instead, and no backtrace is added.
/// - A Rust panic (a bug in settle): XX000 with its message, no backtrace.
pub fn entry<T>(f: impl FnOnce() -> Result<T>) -> T {
    use pgrx::pg_sys;
    let mut ctx = pg_sys::ErrorContextCallback {
        previous: std::ptr::null_mut(),
        callback: Some(note_code),
        arg: std::ptr::null_mut(),
    };
    // SAFETY: `ctx` lives in this frame until it is popped below, on every
    // path: an error longjmps no further than pgrx's guard of the SPI call,
    // which restores the stack as it found it (with `ctx` on top) before the
    // panic unwinds to here.
    let outer = unsafe {
        let outer = pg_sys::error_context_stack;
        ctx.previous = outer;
        pg_sys::error_context_stack = &mut ctx;
        outer
    };
    let noted_before = LAST_CODE.with(|c| c.replace(0));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    unsafe { pg_sys::error_context_stack = outer };
    let noted = LAST_CODE.with(|c| c.replace(noted_before));
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.raise(),
        Err(payload) => reraise(payload, noted),
    }
}

/// Raise what unwound out of an entry point (see [`entry`]).
fn reraise(payload: Box<dyn std::any::Any + Send>, noted: c_int) -> ! {
    use pgrx::pg_sys::panic::{CaughtError, ErrorReportWithLevel};
    use pgrx::PgSqlErrorCode;
    // the text is moved into `raise`, which frees it before it longjmps
    let internal = PgSqlErrorCode::ERRCODE_INTERNAL_ERROR as c_int;
    let (code, message, detail, hint) = match payload.downcast::<CaughtError>() {
        Ok(caught) => match *caught {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => {
                let known = r.sql_error_code() as c_int;
                // pgrx says XX000 for a code it does not know: the noted one
                let code = if known == internal && noted != 0 {
                    noted
                } else {
                    known
                };
                (
                    code,
                    r.message().to_owned(),
                    r.detail().map(str::to_owned),
                    r.hint().map(str::to_owned),
                )
            }
            CaughtError::RustPanic { ereport, .. } => (
                internal,
                format!("settle: internal error: {}", ereport.message()),
                None,
                None,
            ),
        },
        Err(other) => match other.downcast::<ErrorReportWithLevel>() {
            // pgrx's ereport!(ERROR, …), e.g. the owner check's 42501
            Ok(r) => (
                r.sql_error_code() as c_int,
                r.message().to_owned(),
                r.detail().map(str::to_owned),
                r.hint().map(str::to_owned),
            ),
            Err(other) => {
                let message = other
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| other.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic without a message");
                (
                    internal,
                    format!("settle: internal error: {message}"),
                    None,
                    None,
                )
            }
        },
    };
    raise(code, message, detail, hint)
}

macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::SettleError::$kind(format!($($arg)*)))
    };
}
pub(crate) use bail;
