//! Product errors and their SQLSTATEs (SPEC §4).
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
        // Everything Rust-owned is converted and dropped before errfinish longjmps.
        let code = make_sqlstate(self.sqlstate());
        let msg = cstring(&format!("settle: {}", self.message()));
        let hint = self.hint().map(cstring);
        drop(self);
        unsafe {
            if errstart(pgrx::PgLogLevel::ERROR as c_int, std::ptr::null()) {
                errcode(code);
                errmsg(c"%s".as_ptr(), msg.as_ptr());
                if let Some(h) = &hint {
                    errhint(c"%s".as_ptr(), h.as_ptr());
                }
                // errmsg/errhint copied the text into ErrorContext: free ours now,
                // because nothing after errfinish runs.
                drop(msg);
                drop(hint);
                errfinish(c"settle".as_ptr(), 0, c"settle".as_ptr());
            }
        }
        // errstart(ERROR) always returns true and errfinish(ERROR) never returns.
        unreachable!("errfinish returned for an ERROR")
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
    fn errhint(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

/// Unwrap a result at the top of an entry point, raising the product error.
pub fn ok_or_raise<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => e.raise(),
    }
}

macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::SettleError::$kind(format!($($arg)*)))
    };
}
pub(crate) use bail;
