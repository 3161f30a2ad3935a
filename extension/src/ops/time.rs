//! The lease and delay arguments, and the timestamps settle computes from them
//! and binds into its statements.

use crate::error::{bail, Result};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;

/// Lease when none is given.
pub const DEFAULT_LEASE_MICROS: i64 = 30_000_000;
/// Longest delay or lease (100 years): beyond it timestamps overflow.
pub const MAX_INTERVAL_MICROS: i128 = 100 * 366 * 86_400 * 1_000_000;

pub(super) fn lease_interval(lease: Option<Interval>) -> Result<Interval> {
    let lease = lease.unwrap_or_else(|| Interval::from_micros(DEFAULT_LEASE_MICROS));
    if lease.as_micros() < 1_000 {
        bail!(InvalidArgument, "a lease must be at least 1 millisecond");
    }
    if lease.as_micros() > MAX_INTERVAL_MICROS {
        bail!(InvalidArgument, "a lease must be at most 100 years");
    }
    Ok(lease)
}

/// `clock_timestamp() + d`, computed here once per call and bound into the
/// statement: Citus refuses volatile functions inside a distributed UPDATE,
/// and every row of the call gets the same value either way.
pub(super) fn clock_plus(d: Interval) -> TimestampWithTimeZone {
    // SAFETY: PostgreSQL's own clock, as clock_timestamp() reads it
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    TimestampWithTimeZone::try_from(now).expect("the clock is in range") + d
}

/// A lease token: the lease's end, to the millisecond (the precision every
/// client library round-trips).
pub(super) fn lease_token(lease: Interval) -> TimestampWithTimeZone {
    let end: i64 = clock_plus(lease).into();
    let ms = end - end.rem_euclid(1_000);
    TimestampWithTimeZone::try_from(ms).expect("a truncated timestamp is in range")
}
